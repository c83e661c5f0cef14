/* The bench suite: runs the configuration matrix and the accuracy study on
 * one device, several or all, through the public API only, and hands the
 * records to bench/output.c.
 *
 * Timing.  Each timed run is one forward between device buffers followed
 * by clFinish, measured on the host clock (end to end) and split into
 * stages by the library's profiling markers.  The modes of one
 * configuration alternate within each round, so all of them see the same
 * machine load.  The first forward of each fresh layer is timed apart: on
 * a fresh context it includes CLBlast's compile of its GEMM kernels, and
 * every first call includes allocating the layer's workspaces.
 *
 * Each mode runs on its own layer, so that the device memory the layer
 * holds after its forward is that mode's alone.  All layers of one (D, h)
 * get the same W_q, W_k, W_v, W_out and b_out from the host, so the
 * Linformer and full outputs on the same input can be compared. */
#define _POSIX_C_SOURCE 200809L

#include "suite.h"
#include "output.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 32
#define MAX_REPEAT 101
#define MAX_DEVICES 32
#define MAX_TRIALS 1024

/* ------------------------------------------------------------- records */

static const char *const mode_names[CLF_BENCH_MODE_COUNT] = {
    "linformer", "full", "causal", "causal-full"};

const char *
clf_bench_mode_name(clf_bench_mode mode)
{
    if ((int)mode < 0 || mode >= CLF_BENCH_MODE_COUNT)
        return "?";
    return mode_names[mode];
}

int
clf_bench_mode_parse(const char *name, clf_bench_mode *out)
{
    int m;

    for (m = 0; m < CLF_BENCH_MODE_COUNT; m++)
        if (name != NULL && strcmp(name, mode_names[m]) == 0) {
            *out = (clf_bench_mode)m;
            return 0;
        }
    return -1;
}

clf_bench_mode
clf_bench_mode_reference(clf_bench_mode mode)
{
    if (mode == CLF_BENCH_LINFORMER)
        return CLF_BENCH_FULL;
    if (mode == CLF_BENCH_CAUSAL)
        return CLF_BENCH_CAUSAL_FULL;
    return mode;
}

static const char *const status_names[CLF_BENCH_STATUS_COUNT] = {
    "ok", "too_large", "over_budget", "failed"};

const char *
clf_bench_status_name(clf_bench_status status)
{
    if ((int)status < 0 || status >= CLF_BENCH_STATUS_COUNT)
        return "?";
    return status_names[status];
}

int
clf_bench_status_parse(const char *name, clf_bench_status *out)
{
    int s;

    for (s = 0; s < CLF_BENCH_STATUS_COUNT; s++)
        if (name != NULL && strcmp(name, status_names[s]) == 0) {
            *out = (clf_bench_status)s;
            return 0;
        }
    return -1;
}

const char *
clf_bench_init_name(clf_bench_init init)
{
    switch (init) {
    case CLF_BENCH_INIT_LUCIDRAINS:
        return "lucidrains";
    case CLF_BENCH_INIT_FAIRSEQ:
        return "fairseq";
    default:
        return "?";
    }
}

static clf_bench_stats
no_stats(void)
{
    clf_bench_stats s;

    s.median = s.min = s.max = NAN;
    s.runs = 0;
    return s;
}

void
clf_bench_report_init(clf_bench_report *r)
{
    memset(r, 0, sizeof *r);
    r->budget_s = NAN;
    r->wall_s = NAN;
}

void
clf_bench_report_free(clf_bench_report *r)
{
    if (r == NULL)
        return;
    free(r->devices);
    free(r->results);
    free(r->accuracy);
    clf_bench_report_init(r);
}

/* Grows an array of records to hold one more; returns 0 or -1. */
static int
grow(void **items, size_t *cap, size_t count, size_t size)
{
    void *p;
    size_t ncap;

    if (count < *cap)
        return 0;
    ncap = *cap ? 2 * *cap : 16;
    if (ncap > SIZE_MAX / size)
        return -1;
    p = realloc(*items, ncap * size);
    if (p == NULL)
        return -1;
    *items = p;
    *cap = ncap;
    return 0;
}

clf_bench_device *
clf_bench_report_add_device(clf_bench_report *r)
{
    clf_bench_device *d;

    if (grow((void **)&r->devices, &r->cap_devices, r->ndevices, sizeof *d))
        return NULL;
    d = &r->devices[r->ndevices++];
    memset(d, 0, sizeof *d);
    d->build_s = NAN;
    return d;
}

clf_bench_result *
clf_bench_report_add_result(clf_bench_report *r)
{
    clf_bench_result *x;
    int i;

    if (grow((void **)&r->results, &r->cap_results, r->nresults, sizeof *x))
        return NULL;
    x = &r->results[r->nresults++];
    memset(x, 0, sizeof *x);
    x->status = CLF_BENCH_OK;
    x->first_call_s = NAN;
    x->wall = no_stats();
    x->device_s = no_stats();
    for (i = 0; i < CLF_STAGE_COUNT; i++) {
        x->stage[i] = no_stats();
        x->stage_flops[i] = NAN;
    }
    x->flops = x->gflops = NAN;
    x->device_bytes = x->io_bytes = NAN;
    x->rel_error = NAN;
    return x;
}

clf_bench_accuracy *
clf_bench_report_add_accuracy(clf_bench_report *r)
{
    clf_bench_accuracy *a;
    int i;

    if (grow((void **)&r->accuracy, &r->cap_accuracy, r->naccuracy, sizeof *a))
        return NULL;
    a = &r->accuracy[r->naccuracy++];
    memset(a, 0, sizeof *a);
    a->status = CLF_BENCH_OK;
    a->linformer = no_stats();
    a->full = no_stats();
    for (i = 0; i < CLF_BENCH_INIT_COUNT; i++) {
        a->rel_error[i] = NAN;
        a->weight[i].mean = a->weight[i].mean_abs = NAN;
        a->weight[i].max_abs = NAN;
    }
    a->full_weight = NAN;
    a->host_max_diff = NAN;
    return a;
}

/* ---------------------------------------------------------- arithmetic */

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

clf_bench_stats
clf_bench_stats_of(const double *values, size_t count)
{
    clf_bench_stats s = no_stats();
    double *v;
    size_t i, m = 0;

    if (values == NULL || count == 0)
        return s;
    v = malloc(count * sizeof *v);
    if (v == NULL)
        return s;
    for (i = 0; i < count; i++)
        if (!isnan(values[i]))
            v[m++] = values[i];
    if (m > 0) {
        qsort(v, m, sizeof *v, cmp_double);
        s.median = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
        s.min = v[0];
        s.max = v[m - 1];
        s.runs = m;
    }
    free(v);
    return s;
}

double
clf_bench_gflops(double flops, double seconds)
{
    if (isnan(flops) || isnan(seconds) || !(seconds > 0.0))
        return NAN;
    return flops / seconds * 1e-9;
}

double
clf_bench_rel_error(const float *a, const float *b, size_t count)
{
    double num = 0.0, den = 0.0;
    size_t i;

    for (i = 0; i < count; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (!(den > 0.0))
        return NAN;
    return sqrt(num / den);
}

double
clf_bench_flops_model(const clf_bench_shape *s,
                      double stage_flops[CLF_STAGE_COUNT])
{
    clf_attention_desc d;
    double total = NAN;
    int full, causal;

    if (s == NULL)
        return NAN;
    full = s->mode == CLF_BENCH_FULL || s->mode == CLF_BENCH_CAUSAL_FULL;
    causal = s->mode == CLF_BENCH_CAUSAL || s->mode == CLF_BENCH_CAUSAL_FULL;
    if ((int)s->mode < 0 || s->mode >= CLF_BENCH_MODE_COUNT)
        return NAN;
    /* The layer the bench makes (see layer_make): full modes compress
     * nothing and are given k = 1. */
    memset(&d, 0, sizeof d);
    d.d_model = s->d_model;
    d.heads = s->heads;
    d.max_seq_len = s->n;
    d.k = full ? 1 : s->k;
    d.bias_out = 1;
    d.causal_block = s->mode == CLF_BENCH_CAUSAL ? s->causal_block : 0;
    if (clf_attention_desc_flops(&d, full ? CLF_MODE_FULL : CLF_MODE_LINFORMER,
                                 s->batch, s->n, causal, stage_flops,
                                 &total) != 0)
        return NAN;
    return total;
}

void
clf_bench_fused_split(double stage_flops[CLF_STAGE_COUNT])
{
    stage_flops[CLF_STAGE_FUSED] = stage_flops[CLF_STAGE_SCORES] +
                                   stage_flops[CLF_STAGE_SOFTMAX] +
                                   stage_flops[CLF_STAGE_WEIGHTED_SUM];
    stage_flops[CLF_STAGE_SCORES] = 0.0;
    stage_flops[CLF_STAGE_SOFTMAX] = 0.0;
    stage_flops[CLF_STAGE_WEIGHTED_SUM] = 0.0;
}

void
clf_bench_causal_shape(size_t n, size_t k, size_t *block, size_t *k_out)
{
    size_t b = 1, nb, kk = k < n ? k : n;

    while (b * b * 2 < n)
        b *= 2;
    nb = (n + b - 1) / b;
    kk = nb * (kk / nb > 0 ? kk / nb : 1);
    if (kk > n)
        kk = nb;
    *block = b;
    *k_out = kk;
}

double
clf_bench_init_bound(clf_bench_init init, size_t k, size_t max_seq_len)
{
    if (k == 0)
        return NAN;
    if (init == CLF_BENCH_INIT_LUCIDRAINS)
        return 1.0 / sqrt((double)k);
    if (init == CLF_BENCH_INIT_FAIRSEQ)
        return sqrt(6.0 / (double)(k + max_seq_len)) / sqrt(2.0);
    return NAN;
}

double
clf_bench_decisive_alpha(size_t n, double target)
{
    if (n <= 1 || !(target > 0.0 && target < 1.0))
        return 0.0;
    return log(target / (1.0 - target) * (double)(n - 1));
}

double
clf_bench_decisive_full(size_t n, double alpha)
{
    return 1.0 / (1.0 + (double)(n > 0 ? n - 1 : 0) * exp(-alpha));
}

double
clf_bench_decisive_weight(const float *E, const float *F, size_t k, size_t N,
                          size_t j, double alpha)
{
    double m = -INFINITY, sum = 0.0, acc = 0.0;
    size_t s;

    if (k == 0 || j >= N)
        return NAN;
    for (s = 0; s < k; s++)
        if (alpha * E[s * N + j] > m)
            m = alpha * E[s * N + j];
    for (s = 0; s < k; s++) {
        double p = exp(alpha * E[s * N + j] - m);
        sum += p;
        acc += p * F[s * N + j];
    }
    return acc / sum;
}

size_t
clf_bench_crossover(const size_t *n, const double *linformer,
                    const double *reference, size_t count, double *estimate)
{
    size_t i, start = SIZE_MAX, lose = SIZE_MAX;

    if (estimate != NULL)
        *estimate = NAN;
    for (i = 0; i < count; i++) {
        if (isnan(linformer[i]) || isnan(reference[i]))
            continue;
        if (linformer[i] < reference[i]) {
            if (start == SIZE_MAX)
                start = i;
        } else {
            start = SIZE_MAX;
            lose = i;
        }
    }
    if (start == SIZE_MAX)
        return 0;
    if (estimate != NULL && lose != SIZE_MAX && linformer[lose] > 0.0 &&
        reference[lose] > 0.0 && linformer[start] > 0.0 &&
        reference[start] > 0.0) {
        /* log(lin / ref) is >= 0 at the losing point and < 0 at the first
         * winning one: interpolate its zero linearly in log n. */
        double r0 = log(linformer[lose] / reference[lose]);
        double r1 = log(linformer[start] / reference[start]);
        double t = r0 / (r0 - r1);
        *estimate = exp(log((double)n[lose]) +
                        t * (log((double)n[start]) - log((double)n[lose])));
    }
    return n[start];
}

static int
same_group(const clf_bench_result *a, const clf_bench_result *b)
{
    return a->device == b->device && a->d_model == b->d_model &&
           a->heads == b->heads && a->batch == b->batch &&
           a->k_requested == b->k_requested;
}

static int
cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The median of the group's row of mode m at length n, NaN if none ran. */
static double
group_median(const clf_bench_report *r, const clf_bench_result *g,
             clf_bench_mode m, size_t n, int *present)
{
    size_t i;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->mode == m && x->n == n && same_group(x, g)) {
            if (present != NULL)
                *present = 1;
            return x->status == CLF_BENCH_OK ? x->wall.median : NAN;
        }
    }
    return NAN;
}

int
clf_bench_report_crossings(const clf_bench_report *r, clf_bench_crossing *out,
                           size_t cap, size_t *count)
{
    size_t i, j, found = 0;
    size_t *ns = NULL;
    double *lin = NULL, *ref = NULL;

    *count = 0;
    if (r->nresults == 0)
        return 0;
    ns = malloc(r->nresults * sizeof *ns);
    lin = malloc(r->nresults * sizeof *lin);
    ref = malloc(r->nresults * sizeof *ref);
    if (ns == NULL || lin == NULL || ref == NULL) {
        free(ns);
        free(lin);
        free(ref);
        return -1;
    }
    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *g = &r->results[i];
        clf_bench_mode refmode = clf_bench_mode_reference(g->mode);
        size_t m = 0, points = 0, p;
        int seen = 0, has_ref = 0;
        if (refmode == g->mode)
            continue;
        /* Only the group's first row of this mode starts it. */
        for (j = 0; j < i; j++)
            if (r->results[j].mode == g->mode && same_group(&r->results[j], g))
                seen = 1;
        if (seen)
            continue;
        for (j = 0; j < r->nresults; j++) {
            const clf_bench_result *x = &r->results[j];
            if (x->mode == g->mode && same_group(x, g))
                ns[m++] = x->n;
        }
        qsort(ns, m, sizeof *ns, cmp_size);
        for (p = 0; p < m; p++) {
            lin[p] = group_median(r, g, g->mode, ns[p], NULL);
            ref[p] = group_median(r, g, refmode, ns[p], &has_ref);
            if (!isnan(lin[p]) && !isnan(ref[p]))
                points++;
        }
        if (!has_ref)
            continue;
        if (found < cap) {
            clf_bench_crossing *c = &out[found];
            c->device = g->device;
            c->d_model = g->d_model;
            c->heads = g->heads;
            c->batch = g->batch;
            c->k_requested = g->k_requested;
            c->causal = g->mode == CLF_BENCH_CAUSAL;
            c->points = points;
            c->n = clf_bench_crossover(ns, lin, ref, m, &c->n_estimate);
        }
        found++;
    }
    free(ns);
    free(lin);
    free(ref);
    *count = found;
    return 0;
}

int
clf_bench_parse_sizes(const char *list, size_t *out, size_t cap, size_t *count)
{
    const char *p = list;
    size_t m = 0;

    if (list == NULL || *list == '\0')
        return -1;
    for (;;) {
        char *end;
        unsigned long long v;
        if (*p < '0' || *p > '9')
            return -1;
        errno = 0;
        v = strtoull(p, &end, 10);
        if (errno != 0 || v == 0 || v > SIZE_MAX || m == cap)
            return -1;
        out[m++] = (size_t)v;
        if (*end == '\0')
            break;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
    *count = m;
    return 0;
}

/* ---------------------------------------------------------------- runs */

struct options {
    const char *prog;
    const char *device; /* NULL: the library's default; "all"; or a list */
    size_t n[MAX_LIST], nn;
    size_t k[MAX_LIST], nk;
    size_t d[MAX_LIST], nd;
    size_t h[MAX_LIST], nh;
    size_t b[MAX_LIST], nb;
    size_t acc_n[MAX_LIST], acc_nn; /* the accuracy study's n and k */
    size_t acc_k[MAX_LIST], acc_nk;
    int modes[CLF_BENCH_MODE_COUNT];
    int modes_given;
    size_t repeat, trials;
    double budget;
    unsigned long long seed;
    const char *json, *csv, *svg, *compare, *from;
    int accuracy, quick;
};

struct run {
    const struct options *o;
    clf_bench_report *rep;
    double t0;           /* start of the run */
    double deadline;     /* end of the whole run's budget */
    double dev_deadline; /* end of this device's share of it */
    double min_rate;     /* slowest FLOP/s of a warm forward on this
                                device; 0 until one ran */
    double rate[2];      /* the latest warm forward's FLOP/s in Linformer
                            ([0]) and full ([1]) mode; 0 until one ran */
    int failures;
};

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void
progress(const struct run *run, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "[%6.1f s] ", now_s() - run->t0);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Seconds a forward of `flops` in the library's mode m should take,
 * judging by the latest warm forward of that mode (the nearest smaller
 * configuration, since lengths run in ascending order), else by the slowest
 * of any mode; 0 when there is nothing to judge by. */
static double
estimate_s(const struct run *run, clf_mode m, double flops)
{
    double rate = run->rate[m == CLF_MODE_FULL];

    if (!(rate > 0.0))
        rate = run->min_rate;
    if (!(rate > 0.0) || isnan(flops))
        return 0.0;
    return flops / rate;
}

static int
fits(const struct run *run, double seconds)
{
    return now_s() + seconds <= run->dev_deadline;
}

static void
note_rate(struct run *run, clf_mode m, double flops, double seconds)
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
static unsigned long long
mix_seed(unsigned long long seed, unsigned long long tag)
{
    unsigned long long st = seed ^ (tag * 0xD1B54A32D192ED03ULL);

    return splitmix(&st);
}

/* Uniform values in [-bound, bound) from seed. */
static void
fill_uniform(float *a, size_t count, unsigned long long seed, double bound)
{
    unsigned long long st = seed;
    size_t i;

    for (i = 0; i < count; i++) {
        double u = (double)(splitmix(&st) >> 11) * 0x1.0p-53;
        a[i] = (float)((2.0 * u - 1.0) * bound);
    }
}

/* The feature weights every layer of one (D, h) shares, initialised as
 * PyTorch's nn.Linear does (uniform +-1/sqrt(fan_in)). */
struct weights {
    size_t D;
    float *wq, *wk, *wv, *wo, *bo;
};

static void
weights_free(struct weights *w)
{
    free(w->wq);
    free(w->wk);
    free(w->wv);
    free(w->wo);
    free(w->bo);
    memset(w, 0, sizeof *w);
}

static int
weights_make(struct weights *w, size_t D, unsigned long long seed)
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
        weights_free(w);
        return -1;
    }
    fill_uniform(w->wq, D * D, mix_seed(seed, 11), bound);
    fill_uniform(w->wk, D * D, mix_seed(seed, 12), bound);
    fill_uniform(w->wv, D * D, mix_seed(seed, 13), bound);
    fill_uniform(w->wo, D * D, mix_seed(seed, 14), bound);
    fill_uniform(w->bo, D, mix_seed(seed, 15), bound);
    return 0;
}

/* Sets E and F (k x n) drawn under init. */
static int
set_projections(clf_attention *att, size_t k, size_t n, clf_bench_init init,
                unsigned long long seed)
{
    float *e = malloc(k * n * sizeof *e);
    int rc;

    if (e == NULL)
        return CLF_ENO_MEMORY;
    fill_uniform(e, k * n, mix_seed(seed, 16),
                 clf_bench_init_bound(init, k, n));
    rc = clf_attention_set_weight(att, CLF_PROJ_E, e, k * n);
    if (rc == 0) {
        fill_uniform(e, k * n, mix_seed(seed, 17),
                     clf_bench_init_bound(init, k, n));
        rc = clf_attention_set_weight(att, CLF_PROJ_F, e, k * n);
    }
    free(e);
    return rc;
}

/* One layer of the matrix: its shape, mode and options. */
struct layer {
    clf_bench_mode mode;
    clf_attention *att;
    clf_forward_opts fo;
    size_t k, block; /* k = 0: not used (full modes) */
};

static void
layer_destroy(struct layer *l)
{
    clf_attention_destroy(l->att);
    l->att = NULL;
}

/* Creates a layer of mode m at max_seq_len n with the shared weights and E,
 * F under init.  Full modes get k = 1 and no E or F, so that the memory
 * they hold is full attention's own. */
static int
layer_make(struct layer *l, clf_context *ctx, clf_bench_mode m, size_t n,
           size_t k, size_t heads, const struct weights *w, clf_bench_init init,
           unsigned long long seed)
{
    clf_attention_desc d;
    int rc, full = m == CLF_BENCH_FULL || m == CLF_BENCH_CAUSAL_FULL;
    size_t D = w->D;

    memset(l, 0, sizeof *l);
    l->mode = m;
    memset(&d, 0, sizeof d);
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
    if ((rc = clf_attention_set_weight(l->att, CLF_WEIGHT_Q, w->wq, D * D)) !=
            0 ||
        (rc = clf_attention_set_weight(l->att, CLF_WEIGHT_K, w->wk, D * D)) !=
            0 ||
        (rc = clf_attention_set_weight(l->att, CLF_WEIGHT_V, w->wv, D * D)) !=
            0 ||
        (rc = clf_attention_set_weight(l->att, CLF_WEIGHT_OUT, w->wo, D * D)) !=
            0 ||
        (rc = clf_attention_set_weight(l->att, CLF_BIAS_OUT, w->bo, D)) != 0 ||
        (!full && (rc = set_projections(l->att, l->k, n, init, seed)) != 0) ||
        (rc = clf_attention_set_mode(l->att, full ? CLF_MODE_FULL
                                                  : CLF_MODE_LINFORMER)) != 0) {
        layer_destroy(l);
        return rc;
    }
    return 0;
}

static clf_mode
layer_lib_mode(const struct layer *l)
{
    return l->k == 0 ? CLF_MODE_FULL : CLF_MODE_LINFORMER;
}

static int
timed_forward(clf_context *ctx, struct layer *l, cl_mem x, cl_mem y, size_t B,
              size_t n, double *secs)
{
    double t0 = now_s();
    int rc;

    if ((rc = clf_attention_forward_cl_ex(l->att, x, 0, y, 0, B, n, &l->fo)) !=
        0)
        return rc;
    if ((rc = clf_context_finish(ctx)) != 0)
        return rc;
    *secs = now_s() - t0;
    return 0;
}

static cl_mem
make_buffer(clf_context *ctx, size_t count, const float *host, int *rc)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clf_context_cl_context(ctx),
                              host ? CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR
                                   : CL_MEM_READ_WRITE,
                              count * sizeof(float), (void *)host, &err);

    *rc = m == NULL ? (int)err : 0;
    return m;
}

static int
read_buffer(clf_context *ctx, cl_mem m, float *host, size_t count)
{
    return (int)clEnqueueReadBuffer(clf_context_cl_queue(ctx), m, CL_TRUE, 0,
                                    count * sizeof(float), host, 0, NULL, NULL);
}

static void
set_note(char *note, size_t len, const char *fmt, ...)
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
static void
fail_row(struct run *run, clf_bench_status *status, char *note, size_t len,
         const char *what, int rc)
{
    if (rc == CLF_ETOO_LARGE) {
        *status = CLF_BENCH_TOO_LARGE;
        set_note(note, len, "not run (too large): %s", clf_last_error());
        return;
    }
    *status = CLF_BENCH_FAILED;
    set_note(note, len, "%s: %s (%s): %s", what, clf_strerror(rc),
             clf_status_name(rc), clf_last_error());
    run->failures++;
}

/* The timings of one mode of one configuration while it runs. */
struct slot {
    struct layer l;
    size_t res; /* its row in the report */
    cl_mem y;
    float *out; /* host copy of its output, for the error */
    int active;
    size_t runs;
    double flops, last_s;
    double wall[MAX_REPEAT], dev[MAX_REPEAT];
    double stage[CLF_STAGE_COUNT][MAX_REPEAT];
};

/* One (n, k, D, h, B) with every requested mode. */
struct config {
    size_t dev, n, k, D, h, B;
};

static clf_bench_result *
row(struct run *run, size_t i)
{
    return &run->rep->results[i];
}

/* Computes the reference output for mode ref when it is not among the
 * timed modes: one forward, untimed.  Returns 0 and fills out, 1 when the
 * time budget has no room for it, or a library status. */
static int
reference_output(struct run *run, clf_context *ctx, const struct config *c,
                 const struct weights *w, clf_bench_mode ref, cl_mem x,
                 float *out)
{
    struct layer l;
    cl_mem y;
    double secs, flops = NAN;
    size_t count = c->B * c->n * c->D;
    int rc;

    if ((rc = layer_make(&l, ctx, ref, c->n, c->k, c->h, w,
                         CLF_BENCH_INIT_LUCIDRAINS, run->o->seed)) != 0)
        return rc;
    clf_attention_flops_ex(l.att, layer_lib_mode(&l), c->B, c->n, &l.fo,
                           &flops);
    if (!fits(run, estimate_s(run, layer_lib_mode(&l), flops))) {
        layer_destroy(&l);
        return 1;
    }
    progress(run, "  %s reference for the error", clf_bench_mode_name(ref));
    y = make_buffer(ctx, count, NULL, &rc);
    if (y != NULL) {
        rc = timed_forward(ctx, &l, x, y, c->B, c->n, &secs);
        if (rc == 0)
            rc = read_buffer(ctx, y, out, count);
        clReleaseMemObject(y);
    }
    layer_destroy(&l);
    return rc;
}

static void
finish_errors(struct run *run, clf_context *ctx, const struct config *c,
              const struct weights *w, struct slot *slots, size_t ns, cl_mem x)
{
    size_t i, j, count = c->B * c->n * c->D;

    for (i = 0; i < ns; i++) {
        clf_bench_result *r = row(run, slots[i].res);
        clf_bench_mode ref = clf_bench_mode_reference(slots[i].l.mode);
        const float *yref = NULL;
        float *own = NULL;
        int rc;

        if (ref == slots[i].l.mode || slots[i].out == NULL)
            continue;
        for (j = 0; j < ns; j++)
            if (slots[j].l.mode == ref && slots[j].out != NULL)
                yref = slots[j].out;
        if (yref == NULL) {
            for (j = 0; j < ns; j++)
                if (slots[j].l.mode == ref)
                    break;
            if (j < ns) {
                set_note(r->note, sizeof r->note,
                         "no error: the %s reference did not run",
                         clf_bench_mode_name(ref));
                continue;
            }
            own = malloc(count * sizeof *own);
            if (own == NULL) {
                set_note(r->note, sizeof r->note, "no error: out of memory");
                continue;
            }
            rc = reference_output(run, ctx, c, w, ref, x, own);
            if (rc != 0) {
                if (rc == 1)
                    set_note(r->note, sizeof r->note,
                             "no error: no time left for the %s reference",
                             clf_bench_mode_name(ref));
                else if (rc == CLF_ETOO_LARGE)
                    set_note(r->note, sizeof r->note,
                             "no error: the %s reference is too large",
                             clf_bench_mode_name(ref));
                else
                    set_note(r->note, sizeof r->note,
                             "no error: the %s reference failed: %s",
                             clf_bench_mode_name(ref), clf_last_error());
                free(own);
                continue;
            }
            yref = own;
        }
        r->rel_error = clf_bench_rel_error(slots[i].out, yref, count);
        free(own);
    }
}

static void
run_config(struct run *run, clf_context *ctx, const struct config *c,
           const struct weights *w)
{
    const struct options *o = run->o;
    struct slot *slots;
    size_t ns = 0, i, s, count = c->B * c->n * c->D;
    float *hx = NULL;
    cl_mem x = NULL;
    double est;
    int m, rc = 0, active;
    char tag[96];

    snprintf(tag, sizeof tag, "n=%zu k=%zu D=%zu h=%zu B=%zu", c->n, c->k, c->D,
             c->h, c->B);
    slots = calloc(CLF_BENCH_MODE_COUNT, sizeof *slots);
    if (slots == NULL) {
        fprintf(stderr, "%s: out of host memory\n", o->prog);
        run->failures++;
        return;
    }
    for (m = 0; m < CLF_BENCH_MODE_COUNT; m++) {
        clf_bench_result *r;
        struct slot *sl;
        if (!o->modes[m])
            continue;
        sl = &slots[ns];
        r = clf_bench_report_add_result(run->rep);
        if (r == NULL) {
            fprintf(stderr, "%s: out of host memory\n", o->prog);
            run->failures++;
            break;
        }
        sl->res = run->rep->nresults - 1;
        sl->l.mode = (clf_bench_mode)m;
        r->device = c->dev;
        r->mode = (clf_bench_mode)m;
        r->n = c->n;
        r->k_requested = c->k;
        r->d_model = c->D;
        r->heads = c->h;
        r->batch = c->B;
        r->io_bytes = 2.0 * (double)count * sizeof(float);
        ns++;
    }

    /* Input and layers. */
    hx = malloc(count * sizeof *hx);
    if (hx == NULL)
        rc = CLF_ENO_MEMORY;
    else {
        fill_uniform(hx, count, mix_seed(o->seed, 1000 + c->n), 1.0);
        x = make_buffer(ctx, count, hx, &rc);
    }
    free(hx);
    for (s = 0; s < ns; s++) {
        struct slot *sl = &slots[s];
        clf_bench_result *r = row(run, sl->res);
        clf_bench_shape sh;
        double model;
        if (rc != 0) {
            fail_row(run, &r->status, r->note, sizeof r->note, "input", rc);
            continue;
        }
        rc = layer_make(&sl->l, ctx, sl->l.mode, c->n, c->k, c->h, w,
                        CLF_BENCH_INIT_LUCIDRAINS, o->seed);
        if (rc == 0)
            rc = clf_attention_flops_ex(sl->l.att, layer_lib_mode(&sl->l), c->B,
                                        c->n, &sl->l.fo, &sl->flops);
        if (rc == 0)
            sl->y = make_buffer(ctx, count, NULL, &rc);
        if (rc != 0) {
            fail_row(run, &r->status, r->note, sizeof r->note, "layer", rc);
            layer_destroy(&sl->l);
            rc = 0;
            continue;
        }
        r->k = sl->l.k;
        r->causal_block = sl->l.block;
        r->flops = sl->flops;
        sh.mode = sl->l.mode;
        sh.batch = c->B;
        sh.n = c->n;
        sh.d_model = c->D;
        sh.heads = c->h;
        sh.k = sl->l.k;
        sh.causal_block = sl->l.block;
        model = clf_bench_flops_model(&sh, r->stage_flops);
        if (!(fabs(model - sl->flops) <= 1e-9 * sl->flops)) {
            /* The split per stage comes from the model; a disagreement
             * with the library's count means one of them is wrong. */
            fprintf(stderr,
                    "%s: warning: %s %s: the library counts %.6g FLOPs, the "
                    "bench's model %.6g\n",
                    o->prog, tag, clf_bench_mode_name(sl->l.mode), sl->flops,
                    model);
            set_note(r->note, sizeof r->note,
                     "FLOP count %.6g differs from the model's %.6g", sl->flops,
                     model);
        }
        sl->active = 1;
    }

    /* Nothing starts that the budget cannot hold: a first call and one
     * warm run of every mode. */
    est = 0.0;
    for (s = 0; s < ns; s++)
        if (slots[s].active)
            est += 2.0 *
                   estimate_s(run, layer_lib_mode(&slots[s].l), slots[s].flops);
    if (!fits(run, est)) {
        for (s = 0; s < ns; s++) {
            clf_bench_result *r = row(run, slots[s].res);
            if (!slots[s].active)
                continue;
            r->status = CLF_BENCH_OVER_BUDGET;
            set_note(r->note, sizeof r->note,
                     "not run: about %.1f s needed, the time budget is spent",
                     est);
            slots[s].active = 0;
        }
        progress(run, "%s: skipped, over the time budget", tag);
    }

    /* First calls. */
    for (s = 0; s < ns; s++) {
        struct slot *sl = &slots[s];
        clf_bench_result *r = row(run, sl->res);
        size_t bytes;
        double secs;
        if (!sl->active)
            continue;
        progress(run, "%s: %s first call", tag,
                 clf_bench_mode_name(sl->l.mode));
        rc = timed_forward(ctx, &sl->l, x, sl->y, c->B, c->n, &secs);
        if (rc != 0) {
            fail_row(run, &r->status, r->note, sizeof r->note, "forward", rc);
            sl->active = 0;
            /* free the space for the other modes */
            layer_destroy(&sl->l);
            continue;
        }
        r->first_call_s = secs;
        sl->last_s = secs;
        if (clf_attention_device_bytes(sl->l.att, &bytes) == 0)
            r->device_bytes = (double)bytes;
    }

    /* Warm rounds, the modes alternating. */
    for (i = 0; i < o->repeat; i++) {
        double round = 0.0;
        active = 0;
        for (s = 0; s < ns; s++)
            if (slots[s].active) {
                double e = estimate_s(run, layer_lib_mode(&slots[s].l),
                                      slots[s].flops);
                round += e > 0.0 ? e : slots[s].last_s;
                active++;
            }
        if (active == 0)
            break;
        if (!fits(run, round)) {
            for (s = 0; s < ns; s++) {
                clf_bench_result *r = row(run, slots[s].res);
                if (!slots[s].active)
                    continue;
                if (i == 0) {
                    r->status = CLF_BENCH_OVER_BUDGET;
                    set_note(r->note, sizeof r->note,
                             "first call only: the time budget is spent");
                } else {
                    set_note(r->note, sizeof r->note,
                             "%zu of %zu warm runs: the time budget is spent",
                             i, o->repeat);
                }
            }
            progress(run, "%s: stopping after %zu warm runs (time budget)", tag,
                     i);
            break;
        }
        progress(run, "%s: warm round %zu/%zu", tag, i + 1, o->repeat);
        for (s = 0; s < ns; s++) {
            struct slot *sl = &slots[s];
            clf_bench_result *r = row(run, sl->res);
            double secs, st[CLF_STAGE_COUNT], sum = 0.0;
            int g;
            if (!sl->active)
                continue;
            rc = timed_forward(ctx, &sl->l, x, sl->y, c->B, c->n, &secs);
            if (rc == 0)
                rc = clf_attention_stage_times(sl->l.att, st);
            if (rc != 0) {
                fail_row(run, &r->status, r->note, sizeof r->note, "forward",
                         rc);
                sl->active = 0;
                continue;
            }
            sl->wall[sl->runs] = secs;
            for (g = 0; g < CLF_STAGE_COUNT; g++) {
                sl->stage[g][sl->runs] = st[g];
                sum += st[g];
            }
            sl->dev[sl->runs] = sum;
            sl->runs++;
            sl->last_s = secs;
            note_rate(run, layer_lib_mode(&sl->l), sl->flops, secs);
        }
    }

    /* Outputs, errors and statistics. */
    for (s = 0; s < ns; s++) {
        struct slot *sl = &slots[s];
        clf_bench_result *r = row(run, sl->res);
        int g;
        if (sl->runs == 0 || r->status != CLF_BENCH_OK)
            continue;
        sl->out = malloc(count * sizeof *sl->out);
        if (sl->out != NULL && read_buffer(ctx, sl->y, sl->out, count) != 0) {
            free(sl->out);
            sl->out = NULL;
        }
        r->wall = clf_bench_stats_of(sl->wall, sl->runs);
        r->device_s = clf_bench_stats_of(sl->dev, sl->runs);
        for (g = 0; g < CLF_STAGE_COUNT; g++)
            r->stage[g] = clf_bench_stats_of(sl->stage[g], sl->runs);
        if (r->stage[CLF_STAGE_FUSED].median > 0.0)
            clf_bench_fused_split(r->stage_flops);
        r->gflops = clf_bench_gflops(r->flops, r->wall.median);
    }
    finish_errors(run, ctx, c, w, slots, ns, x);
    for (s = 0; s < ns; s++) {
        clf_bench_result *r = row(run, slots[s].res);
        if (r->status == CLF_BENCH_OK && slots[s].runs > 0)
            progress(run, "%s: %-11s median %8.1f ms (%zu warm run%s)", tag,
                     clf_bench_mode_name(r->mode), r->wall.median * 1e3,
                     r->wall.runs, r->wall.runs == 1 ? "" : "s");
        else if (r->status != CLF_BENCH_OK)
            progress(run, "%s: %-11s %s", tag, clf_bench_mode_name(r->mode),
                     r->note);
        free(slots[s].out);
        if (slots[s].y != NULL)
            clReleaseMemObject(slots[s].y);
        layer_destroy(&slots[s].l);
    }
    if (x != NULL)
        clReleaseMemObject(x);
    free(slots);
}

/* ------------------------------------------------------ accuracy study */

/* The decisive-token case through the device pipeline.  The input has an
 * indicator channel (1 at position j, 0 elsewhere) and a constant channel;
 * W_q turns the constant into a query of size alpha * sqrt(d_h) and W_k
 * copies the indicator into the key, so every query scores key j at alpha
 * and every other key at 0; W_v copies the indicator into the value and
 * W_out reads it back.  The output at any query is then the attention mass
 * that reaches position j: P[i, j] in full mode, sum_s P[i, s] F[s, j]
 * under Linformer.  Each sequence of the batch has its own j. */
#define DEC_D 8

static int
run_decisive(struct run *run, clf_context *ctx, size_t n, size_t k,
             clf_bench_init init, clf_bench_accuracy *a)
{
    const size_t T = a->trials, D = DEC_D;
    const double alpha = clf_bench_decisive_alpha(n, 0.99);
    /* The same draws under both inits (both are uniform), so that they
     * differ in scale only. */
    unsigned long long seed = run->o->seed * 31 + 17;
    clf_attention_desc d;
    clf_attention *att = NULL;
    float *wq = NULL, *unit = NULL, *e = NULL, *f = NULL, *x = NULL;
    float *y = NULL;
    double sum = 0.0, sum_abs = 0.0, max_abs = 0.0, diff = 0.0;
    size_t b, t;
    int rc;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = 1;
    d.max_seq_len = n;
    d.k = k;
    wq = calloc(D * D, sizeof *wq);
    unit = calloc(D * D, sizeof *unit);
    e = malloc(k * n * sizeof *e);
    f = malloc(k * n * sizeof *f);
    x = calloc(T * n * D, sizeof *x);
    y = malloc(T * n * D * sizeof *y);
    if (!wq || !unit || !e || !f || !x || !y) {
        rc = CLF_ENO_MEMORY;
        goto done;
    }
    wq[0 * D + 1] = (float)(alpha * sqrt((double)D));
    unit[0] = 1.0f;
    fill_uniform(e, k * n, mix_seed(seed, 1), clf_bench_init_bound(init, k, n));
    fill_uniform(f, k * n, mix_seed(seed, 2), clf_bench_init_bound(init, k, n));
    for (b = 0; b < T; b++) {
        size_t j = (2 * b + 1) * n / (2 * T);
        for (t = 0; t < n; t++) {
            x[(b * n + t) * D + 0] = t == j ? 1.0f : 0.0f;
            x[(b * n + t) * D + 1] = 1.0f;
        }
    }
    if ((rc = clf_attention_create(&att, ctx, &d)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_WEIGHT_Q, wq, D * D)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_WEIGHT_K, unit, D * D)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_WEIGHT_V, unit, D * D)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_WEIGHT_OUT, unit, D * D)) !=
            0 ||
        (rc = clf_attention_set_weight(att, CLF_PROJ_E, e, k * n)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_PROJ_F, f, k * n)) != 0 ||
        (rc = clf_attention_forward(att, x, T, n, y)) != 0)
        goto done;
    for (b = 0; b < T; b++) {
        size_t j = (2 * b + 1) * n / (2 * T);
        double got = y[(b * n) * D];
        double last = y[(b * n + n - 1) * D];
        double want = clf_bench_decisive_weight(e, f, k, n, j, alpha);
        sum += got;
        sum_abs += fabs(got);
        if (fabs(got) > max_abs)
            max_abs = fabs(got);
        /* every query of the sequence sees the same scores */
        if (fabs(got - want) > diff)
            diff = fabs(got - want);
        if (fabs(last - want) > diff)
            diff = fabs(last - want);
    }
    a->weight[init].mean = sum / (double)T;
    a->weight[init].mean_abs = sum_abs / (double)T;
    a->weight[init].max_abs = max_abs;

    /* Full attention on the first sequence: P[i, j] for every query. */
    if (init == CLF_BENCH_INIT_LUCIDRAINS) {
        double want = clf_bench_decisive_full(n, alpha), got;
        if ((rc = clf_attention_set_mode(att, CLF_MODE_FULL)) != 0)
            goto done;
        rc = clf_attention_forward(att, x, 1, n, y);
        if (rc == CLF_ETOO_LARGE) {
            a->full_weight = want;
            set_note(a->note, sizeof a->note,
                     "full-mode decisive check too large: host value");
            rc = 0;
        } else if (rc != 0) {
            goto done;
        } else {
            got = y[0];
            a->full_weight = got;
            if (fabs(got - want) > diff)
                diff = fabs(got - want);
            if (fabs(y[(n - 1) * D] - want) > diff)
                diff = fabs(y[(n - 1) * D] - want);
        }
    }
    if (isnan(a->host_max_diff) || diff > a->host_max_diff)
        a->host_max_diff = diff;
    /* Float accumulation of the full-mode softmax denominator, one dominant
     * term plus n - 1 tiny ones each rounded the same way, leaves about
     * 1e-4 at n = 2048; a wrong weight or stage would be off by far more. */
    if (diff > 1e-3) {
        fprintf(stderr,
                "%s: warning: decisive token, n=%zu k=%zu %s: device and "
                "host differ by %.3g\n",
                run->o->prog, n, k, clf_bench_init_name(init), diff);
        set_note(a->note, sizeof a->note,
                 "decisive token: device and host differ by %.3g", diff);
    }
done:
    clf_attention_destroy(att);
    free(wq);
    free(unit);
    free(e);
    free(f);
    free(x);
    free(y);
    return rc;
}

/* Times warm forwards of layers a and b (b may be NULL), alternating so
 * that both see the same machine load: a first call of a, then up to R
 * rounds of (a, b) while the budget allows.  a's output stays in ya.
 * Returns 0 (stats filled, possibly with fewer runs) or a status. */
static int
time_alternating(struct run *run, clf_context *ctx, struct layer *a,
                 struct layer *b, cl_mem x, cl_mem ya, cl_mem yb, size_t B,
                 size_t n, clf_bench_stats *sa, clf_bench_stats *sb)
{
    double ta[MAX_REPEAT], tb[MAX_REPEAT], secs, fa = NAN, fb = NAN;
    double last_a, last_b = 0.0;
    size_t i, runs = 0;
    int rc;

    clf_attention_flops_ex(a->att, layer_lib_mode(a), B, n, &a->fo, &fa);
    if (b != NULL)
        clf_attention_flops_ex(b->att, layer_lib_mode(b), B, n, &b->fo, &fb);
    if ((rc = timed_forward(ctx, a, x, ya, B, n, &last_a)) != 0)
        return rc;
    for (i = 0; i < run->o->repeat; i++) {
        double ea = estimate_s(run, layer_lib_mode(a), fa), eb = 0.0;
        if (b != NULL) {
            eb = estimate_s(run, layer_lib_mode(b), fb);
            if (!(eb > 0.0))
                eb = last_b;
        }
        if (!fits(run, (ea > 0.0 ? ea : last_a) + eb))
            break;
        if ((rc = timed_forward(ctx, a, x, ya, B, n, &secs)) != 0)
            return rc;
        ta[runs] = last_a = secs;
        note_rate(run, layer_lib_mode(a), fa, secs);
        if (b != NULL) {
            if ((rc = timed_forward(ctx, b, x, yb, B, n, &secs)) != 0)
                return rc;
            tb[runs] = last_b = secs;
            note_rate(run, layer_lib_mode(b), fb, secs);
        }
        runs++;
    }
    *sa = clf_bench_stats_of(ta, runs);
    if (sb != NULL)
        *sb = b != NULL ? clf_bench_stats_of(tb, runs) : no_stats();
    return 0;
}

static void
run_accuracy(struct run *run, clf_context *ctx, size_t dev, size_t n, size_t D,
             size_t h, size_t B, const struct weights *w)
{
    const struct options *o = run->o;
    size_t count = B * n * D, i;
    float *hx = NULL, *yfull = NULL, *ylin = NULL;
    cl_mem x = NULL, y = NULL, yf = NULL;
    struct layer full, l;
    int rc = 0, have_full = 0;
    char full_note[200] = "";

    memset(&full, 0, sizeof full);
    hx = malloc(count * sizeof *hx);
    yfull = malloc(count * sizeof *yfull);
    ylin = malloc(count * sizeof *ylin);
    if (hx == NULL || yfull == NULL || ylin == NULL)
        rc = CLF_ENO_MEMORY;
    if (rc == 0) {
        fill_uniform(hx, count, mix_seed(o->seed, 1000 + n), 1.0);
        x = make_buffer(ctx, count, hx, &rc);
    }
    if (rc == 0)
        y = make_buffer(ctx, count, NULL, &rc);
    if (rc == 0)
        yf = make_buffer(ctx, count, NULL, &rc);
    if (rc != 0) {
        fprintf(stderr, "%s: accuracy study n=%zu: %s\n", o->prog, n,
                clf_strerror(rc));
        run->failures++;
        goto done;
    }

    /* Full attention: the reference output, from its first call; its
     * timed runs alternate with each k's Linformer runs below. */
    progress(run, "accuracy n=%zu D=%zu h=%zu B=%zu: full attention", n, D, h,
             B);
    rc = layer_make(&full, ctx, CLF_BENCH_FULL, n, 1, h, w,
                    CLF_BENCH_INIT_LUCIDRAINS, o->seed);
    if (rc == 0) {
        double secs;
        rc = timed_forward(ctx, &full, x, yf, B, n, &secs);
        if (rc == 0)
            rc = read_buffer(ctx, yf, yfull, count);
    }
    if (rc == 0) {
        have_full = 1;
    } else {
        layer_destroy(&full);
        if (rc == CLF_ETOO_LARGE) {
            snprintf(full_note, sizeof full_note,
                     "full attention too large: no error, no speed-up");
        } else {
            snprintf(full_note, sizeof full_note, "full attention failed: %s",
                     clf_last_error());
            run->failures++;
        }
    }

    for (i = 0; i < o->acc_nk; i++) {
        size_t k = o->acc_k[i];
        clf_bench_accuracy *a;
        double fl = NAN, ff = NAN;
        int init;

        if (k > n) {
            progress(run, "accuracy n=%zu: k=%zu exceeds n, left out", n, k);
            continue;
        }
        a = clf_bench_report_add_accuracy(run->rep);
        if (a == NULL) {
            run->failures++;
            break;
        }
        a->device = dev;
        a->n = n;
        a->k = k;
        a->d_model = D;
        a->heads = h;
        a->batch = B;
        a->trials = o->trials < n ? o->trials : n;
        if (full_note[0] != '\0')
            set_note(a->note, sizeof a->note, "%s", full_note);
        rc = layer_make(&l, ctx, CLF_BENCH_LINFORMER, n, k, h, w,
                        CLF_BENCH_INIT_LUCIDRAINS, o->seed);
        if (rc != 0) {
            fail_row(run, &a->status, a->note, sizeof a->note, "layer", rc);
            continue;
        }
        clf_attention_flops_ex(l.att, CLF_MODE_LINFORMER, B, n, NULL, &fl);
        if (have_full)
            clf_attention_flops_ex(full.att, CLF_MODE_FULL, B, n, NULL, &ff);
        if (!fits(run,
                  2.0 * estimate_s(run, CLF_MODE_LINFORMER, fl) +
                      (have_full ? estimate_s(run, CLF_MODE_FULL, ff) : 0.0))) {
            a->status = CLF_BENCH_OVER_BUDGET;
            set_note(a->note, sizeof a->note,
                     "not run: the time budget is spent");
            layer_destroy(&l);
            progress(run, "accuracy n=%zu k=%zu: skipped, over the time budget",
                     n, k);
            continue;
        }
        progress(run, "accuracy n=%zu k=%zu: Linformer%s, decisive token", n, k,
                 have_full ? " and full, alternating" : "");
        /* lucidrains init: timing and error */
        rc = time_alternating(run, ctx, &l, have_full ? &full : NULL, x, y, yf,
                              B, n, &a->linformer, &a->full);
        if (rc == 0 && a->linformer.runs < o->repeat)
            set_note(a->note, sizeof a->note,
                     "%zu of %zu warm runs: the time budget is spent",
                     a->linformer.runs, o->repeat);
        if (rc == 0)
            rc = read_buffer(ctx, y, ylin, count);
        if (rc == 0 && have_full)
            a->rel_error[CLF_BENCH_INIT_LUCIDRAINS] =
                clf_bench_rel_error(ylin, yfull, count);
        /* fairseq init: the same layer with E and F redrawn */
        if (rc == 0)
            rc = set_projections(l.att, k, n, CLF_BENCH_INIT_FAIRSEQ, o->seed);
        if (rc == 0)
            rc = clf_attention_forward_cl_ex(l.att, x, 0, y, 0, B, n, NULL);
        if (rc == 0)
            rc = read_buffer(ctx, y, ylin, count);
        if (rc == 0 && have_full)
            a->rel_error[CLF_BENCH_INIT_FAIRSEQ] =
                clf_bench_rel_error(ylin, yfull, count);
        layer_destroy(&l);
        for (init = 0; rc == 0 && init < CLF_BENCH_INIT_COUNT; init++)
            rc = run_decisive(run, ctx, n, k, (clf_bench_init)init, a);
        if (rc != 0)
            fail_row(run, &a->status, a->note, sizeof a->note, "accuracy", rc);
    }
done:
    layer_destroy(&full);
    if (x != NULL)
        clReleaseMemObject(x);
    if (y != NULL)
        clReleaseMemObject(y);
    if (yf != NULL)
        clReleaseMemObject(yf);
    free(hx);
    free(yfull);
    free(ylin);
}

/* ---------------------------------------------------------------- main */

static const char usage_text[] =
    "Usage: %s [OPTIONS]\n"
    "\n"
    "Times multi-head attention layers on OpenCL devices, Linformer against\n"
    "full attention through the same pipeline, over a matrix of n, k, D, h,\n"
    "B and mode.  For each configuration: median and spread (min..max) of\n"
    "warm forwards end to end and per stage (profiling markers), the first\n"
    "call apart, FLOPs counted from the shapes and GFLOP/s, the device\n"
    "memory the layer holds, and the relative error of Linformer against\n"
    "full attention on the same weights and input.  Progress goes to\n"
    "stderr, tables to stdout.\n"
    "\n"
    "Matrix:\n"
    "  --device SEL|all  a device selector (index, cpu, gpu or a name\n"
    "                    substring, as CLINFORMER_DEVICE), a comma list of\n"
    "                    them, or all (default: the library's default)\n"
    "  --n LIST          sequence lengths (default 512,1024,2048,4096)\n"
    "  --k LIST          compressed lengths (default 256; clamped to n)\n"
    "  --d-model LIST    model widths (default 512)\n"
    "  --heads LIST      heads (default 8)\n"
    "  --batch LIST      batch sizes (default 1)\n"
    "  --modes LIST      comma list of linformer, full, causal and\n"
    "                    causal-full (default linformer,full); causal is\n"
    "                    prefix-safe causal Linformer (block b the smallest\n"
    "                    power of two with 2b^2 >= n, k rounded down to a\n"
    "                    multiple of the ceil(n/b) blocks), causal-full the\n"
    "                    masked full attention it is compared with\n"
    "  --repeat R        warm runs per mode after the first call, 1..%d\n"
    "                    (default 5)\n"
    "  --budget SECONDS  time budget of the whole run (default 600): what\n"
    "                    would not fit is reported as over_budget, and a\n"
    "                    row may have fewer warm runs; a forward already\n"
    "                    started is not interrupted\n"
    "  --seed S          seed of weights and inputs (default 1)\n"
    "\n"
    "Accuracy study (instead of the matrix):\n"
    "  --accuracy        for each n of --n (default 2048) and each D, h, B,\n"
    "                    sweep k over --k (default 32,64,128,256,512,1024):\n"
    "                    Linformer speed, relative error against full\n"
    "                    attention with E and F drawn as lucidrains\n"
    "                    (uniform +-1/sqrt(k)) and as fairseq\n"
    "                    (xavier_uniform, gain 1/sqrt(2), on (k, n)), and\n"
    "                    the decisive token: how much of the weight that a\n"
    "                    query puts sharply on one key (0.99 in full\n"
    "                    attention) survives compression\n"
    "  --trials T        decisive positions per k (default 64)\n"
    "\n"
    "  --quick           the README's main job in under 3 minutes on a\n"
    "                    2-core CPU: the matrix at n 256..2048 (k=256,\n"
    "                    repeat 5), then the accuracy study at n=1024, k\n"
    "                    32..512, within a 150 s budget; ends with a\n"
    "                    summary table.  Options given explicitly win.\n"
    "\n"
    "Output:\n"
    "  --json FILE       the results as JSON (schema clinformer-bench/1)\n"
    "  --csv FILE        matrix rows as CSV; accuracy rows go to FILE with\n"
    "                    -accuracy before its .csv\n"
    "  --svg FILE        median time against n, per device and mode, with\n"
    "                    the crossover n marked\n"
    "  --compare FILE    an earlier run's JSON: print both medians and\n"
    "                    now/baseline for each row found there (same\n"
    "                    platform, device, driver and config; or the same\n"
    "                    config when the baseline has a single device)\n"
    "  --from FILE       measure nothing: print the tables of a saved JSON\n"
    "                    run and write its --csv, --svg (and --json)\n"
    "  --help            this text\n"
    "\n"
    "Exit status: 0 when everything was measured or reported as too large\n"
    "or over budget, 1 when a device, forward or file failed, 2 for bad\n"
    "usage.\n";

static void
usage(FILE *f, const char *prog)
{
    fprintf(f, usage_text, prog, MAX_REPEAT);
}

static int
parse_modes(const char *list, int modes[CLF_BENCH_MODE_COUNT])
{
    char buf[128];
    char *tok, *save = NULL;
    int any = 0;

    if (strlen(list) >= sizeof buf)
        return -1;
    strcpy(buf, list);
    memset(modes, 0, CLF_BENCH_MODE_COUNT * sizeof *modes);
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        clf_bench_mode m;
        if (clf_bench_mode_parse(tok, &m) != 0)
            return -1;
        modes[m] = 1;
        any = 1;
    }
    return any ? 0 : -1;
}

static int
parse_count(const char *s, size_t lo, size_t hi, size_t *out)
{
    size_t v[1], n;

    if (clf_bench_parse_sizes(s, v, 1, &n) != 0 || v[0] < lo || v[0] > hi)
        return -1;
    *out = v[0];
    return 0;
}

static void
set_default(size_t *list, size_t *count, const size_t *values, size_t n)
{
    if (*count != 0)
        return;
    memcpy(list, values, n * sizeof *values);
    *count = n;
}

static int
takes_value(const char *opt)
{
    static const char *const valued[] = {
        "--device", "--n",      "--k",       "--d-model", "--heads",  "--batch",
        "--modes",  "--repeat", "--budget",  "--seed",    "--trials", "--json",
        "--csv",    "--svg",    "--compare", "--from"};
    size_t i;

    for (i = 0; i < sizeof valued / sizeof valued[0]; i++)
        if (strcmp(opt, valued[i]) == 0)
            return 1;
    return 0;
}

/* Parses the command line into *o; returns 0, 1 after --help, or 2. */
static int
parse_args(int argc, char **argv, struct options *o)
{
    int a;

    for (a = 1; a < argc; a++) {
        const char *opt = argv[a], *val;
        size_t *list = NULL, *cnt = NULL;

        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            usage(stdout, o->prog);
            return 1;
        } else if (strcmp(opt, "--accuracy") == 0) {
            o->accuracy = 1;
            continue;
        } else if (strcmp(opt, "--quick") == 0) {
            o->quick = 1;
            continue;
        }
        if (strncmp(opt, "--", 2) != 0) {
            fprintf(stderr, "%s: unexpected argument \"%s\"\n", o->prog, opt);
            return 2;
        }
        if (!takes_value(opt)) {
            fprintf(stderr, "%s: unknown option %s (see --help)\n", o->prog,
                    opt);
            return 2;
        }
        if (a + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value (see --help)\n", o->prog,
                    opt);
            return 2;
        }
        val = argv[++a];
        if (strcmp(opt, "--device") == 0) {
            o->device = val;
        } else if (strcmp(opt, "--json") == 0) {
            o->json = val;
        } else if (strcmp(opt, "--csv") == 0) {
            o->csv = val;
        } else if (strcmp(opt, "--svg") == 0) {
            o->svg = val;
        } else if (strcmp(opt, "--compare") == 0) {
            o->compare = val;
        } else if (strcmp(opt, "--from") == 0) {
            o->from = val;
        } else if (strcmp(opt, "--modes") == 0) {
            if (parse_modes(val, o->modes) != 0) {
                fprintf(stderr,
                        "%s: bad --modes \"%s\" (a comma list of linformer, "
                        "full, causal, causal-full)\n",
                        o->prog, val);
                return 2;
            }
            o->modes_given = 1;
        } else if (strcmp(opt, "--repeat") == 0) {
            if (parse_count(val, 1, MAX_REPEAT, &o->repeat) != 0) {
                fprintf(stderr, "%s: bad --repeat \"%s\" (1..%d)\n", o->prog,
                        val, MAX_REPEAT);
                return 2;
            }
        } else if (strcmp(opt, "--trials") == 0) {
            if (parse_count(val, 1, MAX_TRIALS, &o->trials) != 0) {
                fprintf(stderr, "%s: bad --trials \"%s\" (1..%d)\n", o->prog,
                        val, MAX_TRIALS);
                return 2;
            }
        } else if (strcmp(opt, "--budget") == 0) {
            char *end;
            double v = strtod(val, &end);
            if (*val == '\0' || *end != '\0' || !(v > 0.0) || v > 1e7) {
                fprintf(stderr, "%s: bad --budget \"%s\" (seconds > 0)\n",
                        o->prog, val);
                return 2;
            }
            o->budget = v;
        } else if (strcmp(opt, "--seed") == 0) {
            char *end;
            errno = 0;
            o->seed = strtoull(val, &end, 10);
            /* JSON integers are signed 64-bit */
            if (*val < '0' || *val > '9' || *end != '\0' || errno != 0 ||
                o->seed > 0x7FFFFFFFFFFFFFFFULL) {
                fprintf(stderr, "%s: bad --seed \"%s\"\n", o->prog, val);
                return 2;
            }
        } else if (strcmp(opt, "--n") == 0) {
            list = o->n;
            cnt = &o->nn;
        } else if (strcmp(opt, "--k") == 0) {
            list = o->k;
            cnt = &o->nk;
        } else if (strcmp(opt, "--d-model") == 0) {
            list = o->d;
            cnt = &o->nd;
        } else if (strcmp(opt, "--heads") == 0) {
            list = o->h;
            cnt = &o->nh;
        } else if (strcmp(opt, "--batch") == 0) {
            list = o->b;
            cnt = &o->nb;
        } else {
            fprintf(stderr, "%s: unknown option %s (see --help)\n", o->prog,
                    opt);
            return 2;
        }
        if (list != NULL &&
            clf_bench_parse_sizes(val, list, MAX_LIST, cnt) != 0) {
            fprintf(stderr,
                    "%s: bad %s \"%s\" (a comma list of up to %d positive "
                    "integers)\n",
                    o->prog, opt, val, MAX_LIST);
            return 2;
        }
    }
    return 0;
}

static void
fill_defaults(struct options *o)
{
    static const size_t n_matrix[] = {512, 1024, 2048, 4096};
    static const size_t n_quick[] = {256, 512, 1024, 2048};
    static const size_t n_acc[] = {2048};
    static const size_t n_acc_quick[] = {1024};
    static const size_t k_acc[] = {32, 64, 128, 256, 512, 1024};
    static const size_t k_acc_quick[] = {32, 64, 128, 256, 512};
    static const size_t k_matrix[] = {256};
    static const size_t d_def[] = {512};
    static const size_t h_def[] = {8};
    static const size_t b_def[] = {1};

    if (o->accuracy) {
        /* --n and --k are the study's */
        set_default(o->n, &o->nn, n_acc, 1);
        set_default(o->k, &o->nk, k_acc, 6);
        memcpy(o->acc_n, o->n, o->nn * sizeof *o->n);
        o->acc_nn = o->nn;
        memcpy(o->acc_k, o->k, o->nk * sizeof *o->k);
        o->acc_nk = o->nk;
    } else if (o->quick) {
        set_default(o->acc_n, &o->acc_nn, n_acc_quick, 1);
        set_default(o->acc_k, &o->acc_nk, k_acc_quick, 5);
        set_default(o->n, &o->nn, n_quick, 4);
    }
    if (o->quick) {
        if (o->repeat == 0)
            o->repeat = 5;
        if (!(o->budget > 0.0))
            o->budget = 150.0;
    }
    set_default(o->n, &o->nn, n_matrix, 4);
    set_default(o->k, &o->nk, k_matrix, 1);
    set_default(o->d, &o->nd, d_def, 1);
    set_default(o->h, &o->nh, h_def, 1);
    set_default(o->b, &o->nb, b_def, 1);
    if (!o->modes_given)
        o->modes[CLF_BENCH_LINFORMER] = o->modes[CLF_BENCH_FULL] = 1;
    if (o->repeat == 0)
        o->repeat = 5;
    if (o->trials == 0)
        o->trials = 64;
    if (!(o->budget > 0.0))
        o->budget = 600.0;
}

/* The device selectors to run on: "all" lists every device. */
static int
device_selectors(const struct options *o, char sel[MAX_DEVICES][128],
                 size_t *count)
{
    size_t m = 0;

    if (o->device == NULL || *o->device == '\0') {
        sel[0][0] = '\0';
        *count = 1;
        return 0;
    }
    if (strcmp(o->device, "all") == 0) {
        clf_device_info infos[MAX_DEVICES];
        size_t total, i;
        int rc = clf_devices_list(infos, MAX_DEVICES, &total);
        if (rc != 0) {
            fprintf(stderr, "%s: listing devices: %s: %s\n", o->prog,
                    clf_strerror(rc), clf_last_error());
            return -1;
        }
        for (i = 0; i < total && i < MAX_DEVICES; i++)
            snprintf(sel[m++], 128, "%u", infos[i].index);
    } else {
        const char *p = o->device;
        while (*p != '\0' && m < MAX_DEVICES) {
            size_t len = strcspn(p, ",");
            if (len == 0 || len >= 128) {
                fprintf(stderr, "%s: bad --device \"%s\"\n", o->prog,
                        o->device);
                return -1;
            }
            memcpy(sel[m], p, len);
            sel[m++][len] = '\0';
            p += len;
            if (*p == ',')
                p++;
        }
    }
    if (m == 0) {
        fprintf(stderr, "%s: no device to run on\n", o->prog);
        return -1;
    }
    *count = m;
    return 0;
}

static void
run_device(struct run *run, const char *selector)
{
    const struct options *o = run->o;
    clf_context *ctx = NULL;
    clf_device_info info;
    clf_context_stats cs;
    clf_bench_device *d;
    size_t dev, id, ih, ib, ik, in;
    double t;
    int rc;

    rc = clf_context_create_ex(&ctx, selector[0] ? selector : NULL,
                               CLF_CONTEXT_PROFILING);
    if (rc != 0) {
        fprintf(stderr, "%s: device \"%s\": %s (%s): %s\n", o->prog,
                selector[0] ? selector : "default", clf_strerror(rc),
                clf_status_name(rc), clf_last_error());
        run->failures++;
        return;
    }
    clf_context_device_info(ctx, &info);
    d = clf_bench_report_add_device(run->rep);
    if (d == NULL) {
        clf_context_destroy(ctx);
        run->failures++;
        return;
    }
    dev = run->rep->ndevices - 1;
    d->index = info.index;
    snprintf(d->platform, sizeof d->platform, "%s", info.platform);
    snprintf(d->name, sizeof d->name, "%s", info.name);
    snprintf(d->driver, sizeof d->driver, "%s", info.driver);
    snprintf(d->version, sizeof d->version, "%s", info.version);
    d->is_gpu = info.is_gpu;
    d->compute_units = info.compute_units;
    d->global_mem = info.global_mem;
    d->max_alloc = info.max_alloc;
    progress(run, "device %u: %s / %s (driver %s): building kernels",
             info.index, info.platform, info.name, info.driver);
    t = now_s();
    rc = clf_context_build(ctx);
    d->build_s = now_s() - t;
    if (rc != 0) {
        fprintf(stderr, "%s: device %u: kernel build: %s: %s\n%s\n", o->prog,
                info.index, clf_strerror(rc), clf_last_error(),
                clf_context_build_log(ctx));
        run->failures++;
        clf_context_destroy(ctx);
        return;
    }
    if (clf_context_stats_get(ctx, &cs) == 0) {
        d->source_builds = cs.source_builds;
        d->cache_loads = cs.cache_loads;
    }
    run->min_rate = run->rate[0] = run->rate[1] = 0.0;

    /* The matrix, then the accuracy study (--accuracy, or --quick at the
     * first D, h and B). */
    for (id = 0; id < o->nd; id++)
        for (ih = 0; ih < o->nh; ih++) {
            struct weights w;
            size_t D = o->d[id], h = o->h[ih];
            if (D % h != 0) {
                fprintf(stderr,
                        "%s: D=%zu is not a multiple of h=%zu: skipped\n",
                        o->prog, D, h);
                run->failures++;
                continue;
            }
            if (weights_make(&w, D, o->seed) != 0) {
                fprintf(stderr, "%s: out of host memory\n", o->prog);
                run->failures++;
                continue;
            }
            for (ib = 0; ib < o->nb; ib++) {
                if (!o->accuracy)
                    for (ik = 0; ik < o->nk; ik++)
                        for (in = 0; in < o->nn; in++) {
                            struct config c;
                            c.dev = dev;
                            c.n = o->n[in];
                            c.k = o->k[ik];
                            c.D = D;
                            c.h = h;
                            c.B = o->b[ib];
                            run_config(run, ctx, &c, &w);
                        }
                if (o->accuracy || (o->quick && id == 0 && ih == 0 && ib == 0))
                    for (in = 0; in < o->acc_nn; in++)
                        run_accuracy(run, ctx, dev, o->acc_n[in], D, h,
                                     o->b[ib], &w);
            }
            weights_free(&w);
        }
    d = &run->rep->devices[dev];
    snprintf(d->tuning, sizeof d->tuning, "%s", clf_context_tuning(ctx));
    snprintf(d->choices, sizeof d->choices, "%s",
             clf_context_kernel_choices(ctx));
    clf_context_destroy(ctx);
}

/* Sorts a list ascending (lengths run from short to long, so that the
 * budget is spent on what finishes first) and drops repeats. */
static void
sort_sizes(size_t *v, size_t *n)
{
    size_t i, m = 0;

    qsort(v, *n, sizeof *v, cmp_size);
    for (i = 0; i < *n; i++)
        if (m == 0 || v[i] != v[m - 1])
            v[m++] = v[i];
    *n = m;
}

static int
write_outputs(const struct options *o, const clf_bench_report *rep)
{
    int bad = 0;

    if (o->json != NULL && clf_bench_json_write(rep, o->json) != 0) {
        fprintf(stderr, "%s: writing %s: %s\n", o->prog, o->json,
                strerror(errno));
        bad = 1;
    }
    if (o->csv != NULL) {
        FILE *f = fopen(o->csv, "w");
        int rc = f == NULL || clf_bench_csv_write(f, rep) != 0;
        if (f != NULL && fclose(f) != 0)
            rc = 1;
        if (rc) {
            fprintf(stderr, "%s: writing %s: %s\n", o->prog, o->csv,
                    strerror(errno));
            bad = 1;
        }
        if (rep->naccuracy > 0) {
            char path[4096];
            size_t len = strlen(o->csv);
            if (len >= 4 && strcmp(o->csv + len - 4, ".csv") == 0)
                snprintf(path, sizeof path, "%.*s-accuracy.csv", (int)(len - 4),
                         o->csv);
            else
                snprintf(path, sizeof path, "%s-accuracy.csv", o->csv);
            f = fopen(path, "w");
            rc = f == NULL || clf_bench_csv_accuracy_write(f, rep) != 0;
            if (f != NULL && fclose(f) != 0)
                rc = 1;
            if (rc) {
                fprintf(stderr, "%s: writing %s: %s\n", o->prog, path,
                        strerror(errno));
                bad = 1;
            }
        }
    }
    if (o->svg != NULL) {
        if (rep->nresults == 0) {
            fprintf(stderr, "%s: --svg: no matrix results to plot\n", o->prog);
        } else {
            FILE *f = fopen(o->svg, "w");
            int rc = f == NULL || clf_bench_svg_write(f, rep) != 0;
            if (f != NULL && fclose(f) != 0)
                rc = 1;
            if (rc) {
                fprintf(stderr, "%s: writing %s failed\n", o->prog, o->svg);
                bad = 1;
            }
        }
    }
    return bad;
}

/* The name to print: "clinformer bench" when the CLI calls the suite,
 * else the program's base name (without libtool's "lt-" prefix). */
static const char *
program_name(const char *argv0)
{
    const char *base;

    if (argv0 == NULL || strcmp(argv0, "bench") == 0)
        return "clinformer bench";
    base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    if (strncmp(base, "lt-", 3) == 0)
        base += 3;
    return *base ? base : "clinformer-bench";
}

int
clf_bench_main(int argc, char **argv)
{
    struct options o;
    struct run run;
    clf_bench_report rep, base;
    char sel[MAX_DEVICES][128];
    size_t nsel = 0, i, used = 0;
    int rc, have_base = 0;
    time_t wall;
    struct tm tmv;

    memset(&o, 0, sizeof o);
    o.prog = program_name(argc > 0 ? argv[0] : NULL);
    o.seed = 1;
    rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    fill_defaults(&o);
    sort_sizes(o.n, &o.nn);
    sort_sizes(o.k, &o.nk);
    sort_sizes(o.d, &o.nd);
    sort_sizes(o.h, &o.nh);
    sort_sizes(o.b, &o.nb);
    sort_sizes(o.acc_n, &o.acc_nn);
    sort_sizes(o.acc_k, &o.acc_nk);

    clf_bench_report_init(&base);
    if (o.compare != NULL) {
        char why[256];
        if (clf_bench_json_read(o.compare, &base, why, sizeof why) != 0) {
            fprintf(stderr, "%s: --compare %s: %s\n", o.prog, o.compare, why);
            return 2;
        }
        have_base = 1;
    }
    clf_bench_report_init(&rep);
    memset(&run, 0, sizeof run);
    run.o = &o;
    run.rep = &rep;
    run.t0 = now_s();
    if (o.from != NULL) {
        char why[256];
        if (clf_bench_json_read(o.from, &rep, why, sizeof why) != 0) {
            fprintf(stderr, "%s: --from %s: %s\n", o.prog, o.from, why);
            clf_bench_report_free(&base);
            return 2;
        }
        o.quick = rep.quick;
        goto report;
    }
    if (device_selectors(&o, sel, &nsel) != 0) {
        clf_bench_report_free(&base);
        return 1;
    }

    snprintf(rep.version, sizeof rep.version, "%s", clf_version());
    wall = time(NULL);
    gmtime_r(&wall, &tmv);
    strftime(rep.started, sizeof rep.started, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    if (gethostname(rep.host, sizeof rep.host) != 0)
        rep.host[0] = '\0';
    rep.host[sizeof rep.host - 1] = '\0';
    for (i = 0; i < (size_t)argc; i++) {
        int w = snprintf(rep.command + used, sizeof rep.command - used, "%s%s",
                         i ? " " : "", i == 0 ? o.prog : argv[i]);
        if (w < 0 || (size_t)w >= sizeof rep.command - used)
            break;
        used += (size_t)w;
    }
    rep.repeat = o.repeat;
    rep.budget_s = o.budget;
    rep.seed = o.seed;
    rep.quick = o.quick;

    run.deadline = run.t0 + o.budget;
    for (i = 0; i < nsel; i++) {
        double left = run.deadline - now_s();
        /* Each device gets an equal share of what is left, so that a slow
         * one cannot starve the rest. */
        run.dev_deadline =
            now_s() + (left > 0.0 ? left : 0.0) / (double)(nsel - i);
        run_device(&run, sel[i]);
    }
    rep.wall_s = now_s() - run.t0;

report:
    if (rep.nresults > 0)
        clf_bench_print_matrix(stdout, &rep);
    if (rep.naccuracy > 0)
        clf_bench_print_accuracy(stdout, &rep);
    if (have_base && clf_bench_print_compare(stdout, &rep, &base) == 0)
        printf("\n--compare %s: no row of this run matches one there\n",
               o.compare);
    if (o.quick)
        clf_bench_print_summary(stdout, &rep);
    if (write_outputs(&o, &rep) != 0)
        run.failures++;
    if (o.from == NULL)
        progress(&run, "done in %.1f s (budget %.0f s)", rep.wall_s, o.budget);
    clf_bench_report_free(&rep);
    clf_bench_report_free(&base);
    return run.failures ? 1 : 0;
}
