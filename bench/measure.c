/* What the matrix and the accuracy study measure with (bench/measure.h):
 * the clock, the budget and the progress lines of a run, seeded host data,
 * layers with the shared weights, device buffers and a row's notes. */
#define _POSIX_C_SOURCE 200809L

#include "measure.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double
clf_bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void
clf_bench_progress(const struct run *run, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "[%6.1f s] ", clf_bench_now() - run->t0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Seconds a forward of `flops` in the library's mode m should take,
 * judging by the latest warm forward of that mode (the nearest smaller
 * configuration, since lengths run in ascending order), else by the slowest
 * of any mode; 0 when there is nothing to judge by. */
double
clf_bench_estimate_s(const struct run *run, clf_mode m, double flops)
{
    double rate = run->rate[m == CLF_MODE_FULL];

    if (!(rate > 0.0))
        rate = run->min_rate;
    if (!(rate > 0.0) || isnan(flops))
        return 0.0;
    return flops / rate;
}

int
clf_bench_fits(const struct run *run, double seconds)
{
    return clf_bench_now() + seconds <= run->dev_deadline;
}

void
clf_bench_note_rate(struct run *run, clf_mode m, double flops, double seconds)
{
    double rate;

    if (isnan(flops) || !(seconds > 0.0))
        return;
    rate = flops / seconds;
    run->rate[m == CLF_MODE_FULL] = rate;
    if (run->min_rate == 0.0 || rate < run->min_rate)
        run->min_rate = rate;
}

static unsigned long long
splitmix(unsigned long long *state)
{
    unsigned long long z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A stream's seed from the run's seed and a tag naming the stream, mixed
 * so that neighbouring tags give unrelated streams. */
unsigned long long
clf_bench_mix_seed(unsigned long long seed, unsigned long long tag)
{
    unsigned long long st = seed ^ (tag * 0xD1B54A32D192ED03ULL);

    return splitmix(&st);
}

/* Uniform values in [-bound, bound) from seed. */
void
clf_bench_fill_uniform(float *a, size_t count, unsigned long long seed,
                       double bound)
{
    unsigned long long st = seed;
    size_t i;

    for (i = 0; i < count; i++) {
        double u = (double)(splitmix(&st) >> 11) * 0x1.0p-53;
        a[i] = (float)((2.0 * u - 1.0) * bound);
    }
}

void
clf_bench_weights_free(struct weights *w)
{
    free(w->wq);
    free(w->wk);
    free(w->wv);
    free(w->wo);
    free(w->bo);
    memset(w, 0, sizeof *w);
}

int
clf_bench_weights_make(struct weights *w, size_t D, unsigned long long seed)
{
    double bound = 1.0 / sqrt((double)D);

    memset(w, 0, sizeof *w);
    w->D = D;
    w->wq = malloc(D * D * sizeof(float));
    w->wk = malloc(D * D * sizeof(float));
    w->wv = malloc(D * D * sizeof(float));
    w->wo = malloc(D * D * sizeof(float));
    w->bo = malloc(D * sizeof(float));
    if (!w->wq || !w->wk || !w->wv || !w->wo || !w->bo) {
        clf_bench_weights_free(w);
        return -1;
    }
    clf_bench_fill_uniform(w->wq, D * D, clf_bench_mix_seed(seed, 11), bound);
    clf_bench_fill_uniform(w->wk, D * D, clf_bench_mix_seed(seed, 12), bound);
    clf_bench_fill_uniform(w->wv, D * D, clf_bench_mix_seed(seed, 13), bound);
    clf_bench_fill_uniform(w->wo, D * D, clf_bench_mix_seed(seed, 14), bound);
    clf_bench_fill_uniform(w->bo, D, clf_bench_mix_seed(seed, 15), bound);
    return 0;
}

/* Sets E and F (k x n) drawn under init. */
int
clf_bench_set_projections(clf_attention *att, size_t k, size_t n,
                          clf_bench_init init, unsigned long long seed)
{
    float *e = malloc(k * n * sizeof *e);
    int rc;

    if (e == NULL)
        return CLF_ENO_MEMORY;
    clf_bench_fill_uniform(e, k * n, clf_bench_mix_seed(seed, 16),
                           clf_bench_init_bound(init, k, n));
    rc = clf_attention_set_weight(att, CLF_PROJ_E, e, k * n);
    if (rc == 0) {
        clf_bench_fill_uniform(e, k * n, clf_bench_mix_seed(seed, 17),
                               clf_bench_init_bound(init, k, n));
        rc = clf_attention_set_weight(att, CLF_PROJ_F, e, k * n);
    }
    free(e);
    return rc;
}

void
clf_bench_layer_destroy(struct layer *l)
{
    clf_attention_destroy(l->att);
    l->att = NULL;
}

/* A convolution's E and F (and no biases): uniform +-1/sqrt(fan_in), the
 * fan-in d_h w of PyTorch's Conv1d, its count the layer's. */
static int
set_conv(clf_attention *att, size_t fan_in, unsigned long long seed)
{
    size_t count = 0;
    float *e;
    int rc = clf_attention_weight_size(att, CLF_PROJ_E, &count), f;

    if (rc != 0 || count == 0)
        return rc;
    if ((e = malloc(count * sizeof *e)) == NULL)
        return CLF_ENO_MEMORY;
    for (f = 0; f < 2 && rc == 0; f++) {
        clf_bench_fill_uniform(e, count, clf_bench_mix_seed(seed, 16 + f),
                               1.0 / sqrt((double)fan_in));
        rc = clf_attention_set_weight(att, f ? CLF_PROJ_F : CLF_PROJ_E, e,
                                      count);
    }
    free(e);
    return rc;
}

/* The shared weights, E and F under init (not in full modes, as the
 * compression needs them) and the library's mode. */
static int
set_weights(struct layer *l, const struct weights *w, int full, size_t n,
            size_t heads, clf_bench_init init, unsigned long long seed)
{
    size_t D = w->D;
    int rc;

    if ((rc = clf_attention_set_weight(l->att, CLF_WEIGHT_Q, w->wq, D * D)) ||
        (rc = clf_attention_set_weight(l->att, CLF_WEIGHT_K, w->wk, D * D)) ||
        (rc = clf_attention_set_weight(l->att, CLF_WEIGHT_V, w->wv, D * D)) ||
        (rc = clf_attention_set_weight(l->att, CLF_WEIGHT_OUT, w->wo, D * D)) ||
        (rc = clf_attention_set_weight(l->att, CLF_BIAS_OUT, w->bo, D)))
        return rc;
    if (!full && l->compression == CLF_COMPRESS_LINEAR &&
        (rc = clf_bench_set_projections(l->att, l->k, n, init, seed)) != 0)
        return rc;
    if (!full && l->compression == CLF_COMPRESS_CONV &&
        (rc = set_conv(l->att, D / heads * (n / l->k), seed)) != 0)
        return rc;
    return clf_attention_set_mode(l->att,
                                  full ? CLF_MODE_FULL : CLF_MODE_LINFORMER);
}

/* Creates a layer of mode m at max_seq_len n with the shared weights and E,
 * F under init, its weights stored in precision prec.  Full modes get k = 1
 * and no E or F, so that the memory they hold is full attention's own. */
int
clf_bench_layer_make_p(struct layer *l, clf_context *ctx, clf_bench_mode m,
                       size_t n, size_t k, size_t heads,
                       const struct weights *w, clf_bench_init init,
                       unsigned long long seed, clf_precision prec,
                       clf_compression comp)
{
    clf_attention_desc d;
    int rc, full = m == CLF_BENCH_FULL || m == CLF_BENCH_CAUSAL_FULL;
    size_t D = w->D;

    memset(l, 0, sizeof *l);
    l->mode = m;
    l->precision = prec;
    l->compression = full ? CLF_COMPRESS_LINEAR : comp;
    memset(&d, 0, sizeof d);
    d.precision = prec;
    d.compression = l->compression;
    d.d_model = D;
    d.heads = heads;
    d.max_seq_len = n;
    d.bias_out = 1;
    if (m == CLF_BENCH_CAUSAL)
        clf_bench_causal_shape(n, k, &l->block, &l->k);
    else if (!full)
        l->k = k < n ? k : n;
    d.k = full ? 1 : l->k;
    d.causal_block = l->block;
    l->fo.causal = m == CLF_BENCH_CAUSAL || m == CLF_BENCH_CAUSAL_FULL;
    if ((rc = clf_attention_create(&l->att, ctx, &d)) != 0)
        return rc;
    if ((rc = set_weights(l, w, full, n, heads, init, seed)) != 0)
        clf_bench_layer_destroy(l);
    return rc;
}

/* layer_make_p with float32 weights. */
int
clf_bench_layer_make(struct layer *l, clf_context *ctx, clf_bench_mode m,
                     size_t n, size_t k, size_t heads, const struct weights *w,
                     clf_bench_init init, unsigned long long seed)
{
    return clf_bench_layer_make_p(l, ctx, m, n, k, heads, w, init, seed,
                                  CLF_PRECISION_FLOAT, CLF_COMPRESS_LINEAR);
}

clf_mode
clf_bench_layer_lib_mode(const struct layer *l)
{
    return l->k == 0 ? CLF_MODE_FULL : CLF_MODE_LINFORMER;
}

int
clf_bench_timed_forward(clf_context *ctx, struct layer *l, cl_mem x, cl_mem y,
                        size_t B, size_t n, double *secs)
{
    double t0 = clf_bench_now();
    int rc;

    if ((rc = clf_attention_forward_cl_ex(l->att, x, 0, y, 0, B, n, &l->fo)) !=
        0)
        return rc;
    if ((rc = clf_context_finish(ctx)) != 0)
        return rc;
    *secs = clf_bench_now() - t0;
    return 0;
}

cl_mem
clf_bench_make_buffer(clf_context *ctx, size_t count, const float *host,
                      int *rc)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clf_context_cl_context(ctx),
                              host ? CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR
                                   : CL_MEM_READ_WRITE,
                              count * sizeof(float), (void *)host, &err);

    *rc = m == NULL ? (int)err : 0;
    return m;
}

int
clf_bench_read_buffer(clf_context *ctx, cl_mem m, float *host, size_t count)
{
    return (int)clEnqueueReadBuffer(clf_context_cl_queue(ctx), m, CL_TRUE, 0,
                                    count * sizeof(float), host, 0, NULL, NULL);
}

void
clf_bench_set_note(char *note, size_t len, const char *fmt, ...)
{
    va_list ap;
    size_t used = strlen(note);

    if (used > 0 && used + 2 < len) {
        strcat(note, "; ");
        used += 2;
    }
    if (used >= len)
        return;
    va_start(ap, fmt);
    vsnprintf(note + used, len - used, fmt, ap);
    va_end(ap);
}

/* Records a failed library call on a row: too large, or an error. */
void
clf_bench_fail_row(struct run *run, clf_bench_status *status, char *note,
                   size_t len, const char *what, int rc)
{
    if (rc == CLF_ETOO_LARGE) {
        *status = CLF_BENCH_TOO_LARGE;
        clf_bench_set_note(note, len, "not run (too large): %s",
                           clf_error_message(rc));
        return;
    }
    *status = CLF_BENCH_FAILED;
    clf_bench_set_note(note, len, "%s: %s (%s): %s", what, clf_strerror(rc),
                       clf_status_name(rc), clf_error_message(rc));
    run->failures++;
}

/* Whether a * b * c * d fits size_t (all nonzero). */
int
clf_bench_fits_size(size_t a, size_t b, size_t c, size_t d)
{
    if (b > SIZE_MAX / a)
        return 0;
    a *= b;
    if (c > SIZE_MAX / a)
        return 0;
    a *= c;
    return d <= SIZE_MAX / a;
}
