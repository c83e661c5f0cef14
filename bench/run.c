/* Measuring: runs the configuration matrix and the accuracy study on
 * one device, several or all, through the public API only, into the
 * records of bench/results.h.  Nothing here formats a report.
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

#include "run.h"
#include "roofline.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPEAT CLF_BENCH_MAX_REPEAT
#define MAX_DEVICES 32

/* ---------------------------------------------------------------- runs */

struct run {
    const struct clf_bench_options *o;
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

double
clf_bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void
progress(const struct run *run, const char *fmt, ...)
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
    return clf_bench_now() + seconds <= run->dev_deadline;
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
    clf_precision precision;
};

static void
layer_destroy(struct layer *l)
{
    clf_attention_destroy(l->att);
    l->att = NULL;
}

/* The shared weights, E and F under init (not in full modes) and the
 * library's mode. */
static int
set_weights(struct layer *l, const struct weights *w, int full, size_t n,
            clf_bench_init init, unsigned long long seed)
{
    size_t D = w->D;
    int rc;

    if ((rc = clf_attention_set_weight(l->att, CLF_WEIGHT_Q, w->wq, D * D)) ||
        (rc = clf_attention_set_weight(l->att, CLF_WEIGHT_K, w->wk, D * D)) ||
        (rc = clf_attention_set_weight(l->att, CLF_WEIGHT_V, w->wv, D * D)) ||
        (rc = clf_attention_set_weight(l->att, CLF_WEIGHT_OUT, w->wo, D * D)) ||
        (rc = clf_attention_set_weight(l->att, CLF_BIAS_OUT, w->bo, D)))
        return rc;
    if (!full && (rc = set_projections(l->att, l->k, n, init, seed)) != 0)
        return rc;
    return clf_attention_set_mode(l->att,
                                  full ? CLF_MODE_FULL : CLF_MODE_LINFORMER);
}

/* Creates a layer of mode m at max_seq_len n with the shared weights and E,
 * F under init, its weights stored in precision prec.  Full modes get k = 1
 * and no E or F, so that the memory they hold is full attention's own. */
static int
layer_make_p(struct layer *l, clf_context *ctx, clf_bench_mode m, size_t n,
             size_t k, size_t heads, const struct weights *w,
             clf_bench_init init, unsigned long long seed, clf_precision prec)
{
    clf_attention_desc d;
    int rc, full = m == CLF_BENCH_FULL || m == CLF_BENCH_CAUSAL_FULL;
    size_t D = w->D;

    memset(l, 0, sizeof *l);
    l->mode = m;
    l->precision = prec;
    memset(&d, 0, sizeof d);
    d.precision = prec;
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
    if ((rc = set_weights(l, w, full, n, init, seed)) != 0)
        layer_destroy(l);
    return rc;
}

/* layer_make_p with float32 weights. */
static int
layer_make(struct layer *l, clf_context *ctx, clf_bench_mode m, size_t n,
           size_t k, size_t heads, const struct weights *w, clf_bench_init init,
           unsigned long long seed)
{
    return layer_make_p(l, ctx, m, n, k, heads, w, init, seed,
                        CLF_PRECISION_FLOAT);
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
        set_note(note, len, "not run (too large): %s", clf_error_message(rc));
        return;
    }
    *status = CLF_BENCH_FAILED;
    set_note(note, len, "%s: %s (%s): %s", what, clf_strerror(rc),
             clf_status_name(rc), clf_error_message(rc));
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
    size_t unprofiled; /* warm runs whose stage times were all zero */
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

/* Computes the reference output for mode ref in precision prec when it is
 * not among the timed rows: one forward, untimed.  Returns 0 and fills out,
 * 1 when the time budget has no room for it, or a library status. */
static int
reference_output(struct run *run, clf_context *ctx, const struct config *c,
                 const struct weights *w, clf_bench_mode ref,
                 clf_precision prec, cl_mem x, float *out)
{
    struct layer l;
    cl_mem y;
    double secs, flops = NAN;
    size_t count = c->B * c->n * c->D;
    int rc;

    if ((rc = layer_make_p(&l, ctx, ref, c->n, c->k, c->h, w,
                           CLF_BENCH_INIT_LUCIDRAINS, run->o->seed, prec)) != 0)
        return rc;
    clf_attention_flops_ex(l.att, layer_lib_mode(&l), c->B, c->n, &l.fo,
                           &flops);
    if (!fits(run, estimate_s(run, layer_lib_mode(&l), flops))) {
        layer_destroy(&l);
        return 1;
    }
    progress(run, "  %s%s reference for the error", clf_bench_mode_name(ref),
             prec == CLF_PRECISION_HALF ? " (half)" : "");
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
            if (slots[j].l.mode == ref && slots[j].out != NULL &&
                slots[j].l.precision == slots[i].l.precision)
                yref = slots[j].out;
        if (yref == NULL) {
            for (j = 0; j < ns; j++)
                if (slots[j].l.mode == ref &&
                    slots[j].l.precision == slots[i].l.precision)
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
            rc = reference_output(run, ctx, c, w, ref, slots[i].l.precision, x,
                                  own);
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

/* One configuration while it runs: its modes' slots and the shared input. */
struct cfgrun {
    struct run *run;
    clf_context *ctx;
    const struct config *c;
    const struct weights *w;
    struct slot *slots;
    size_t ns, count;
    cl_mem x;
    char tag[96];
};

/* Appends a row for each requested mode and precision; returns 0, or -1
 * when out of memory. */
static int
add_rows(struct cfgrun *cr)
{
    const struct config *c = cr->c;
    int m, p;

    for (m = 0; m < 2 * CLF_BENCH_MODE_COUNT; m++) {
        clf_bench_result *r;
        struct slot *sl = &cr->slots[cr->ns];
        p = m % 2;
        if (!cr->run->o->modes[m / 2] || !cr->run->o->precisions[p])
            continue;
        r = clf_bench_report_add_result(cr->run->rep);
        if (r == NULL)
            return -1;
        sl->res = cr->run->rep->nresults - 1;
        sl->l.mode = (clf_bench_mode)(m / 2);
        sl->l.precision = (clf_precision)p;
        r->device = c->dev;
        r->mode = (clf_bench_mode)(m / 2);
        r->precision = (clf_precision)p;
        r->n = c->n;
        r->k_requested = c->k;
        r->d_model = c->D;
        r->heads = c->h;
        r->batch = c->B;
        r->io_bytes = 2.0 * (double)cr->count * sizeof(float);
        cr->ns++;
    }
    return 0;
}

/* The input buffer, the same for every mode. */
static int
make_input(struct cfgrun *cr)
{
    float *hx = malloc(cr->count * sizeof *hx);
    int rc = 0;

    if (hx == NULL)
        return CLF_ENO_MEMORY;
    fill_uniform(hx, cr->count, mix_seed(cr->run->o->seed, 1000 + cr->c->n),
                 1.0);
    cr->x = make_buffer(cr->ctx, cr->count, hx, &rc);
    free(hx);
    return rc;
}

/* Each mode's layer, output buffer, FLOP count and its split by stage. */
static void
make_layers(struct cfgrun *cr, int rc)
{
    const struct config *c = cr->c;
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        struct slot *sl = &cr->slots[s];
        clf_bench_result *r = row(cr->run, sl->res);
        clf_bench_shape sh;
        if (rc != 0) {
            fail_row(cr->run, &r->status, r->note, sizeof r->note, "input", rc);
            continue;
        }
        rc = layer_make_p(&sl->l, cr->ctx, sl->l.mode, c->n, c->k, c->h, cr->w,
                          CLF_BENCH_INIT_LUCIDRAINS, cr->run->o->seed,
                          sl->l.precision);
        if (rc == 0)
            rc = clf_attention_flops_ex(sl->l.att, layer_lib_mode(&sl->l), c->B,
                                        c->n, &sl->l.fo, &sl->flops);
        if (rc == 0)
            sl->y = make_buffer(cr->ctx, cr->count, NULL, &rc);
        if (rc != 0) {
            fail_row(cr->run, &r->status, r->note, sizeof r->note, "layer", rc);
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
        clf_bench_flops_model(&sh, r->stage_flops);
        sl->active = 1;
    }
}

/* Nothing starts that the budget cannot hold: a first call and one warm
 * run of every mode. */
static void
check_budget(struct cfgrun *cr)
{
    double est = 0.0;
    size_t s;

    for (s = 0; s < cr->ns; s++)
        if (cr->slots[s].active)
            est += 2.0 * estimate_s(cr->run, layer_lib_mode(&cr->slots[s].l),
                                    cr->slots[s].flops);
    if (fits(cr->run, est))
        return;
    for (s = 0; s < cr->ns; s++) {
        clf_bench_result *r = row(cr->run, cr->slots[s].res);
        if (!cr->slots[s].active)
            continue;
        r->status = CLF_BENCH_OVER_BUDGET;
        set_note(r->note, sizeof r->note,
                 "not run: about %.1f s needed, the time budget is spent", est);
        cr->slots[s].active = 0;
    }
    progress(cr->run, "%s: skipped, over the time budget", cr->tag);
}

static void
first_calls(struct cfgrun *cr)
{
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        struct slot *sl = &cr->slots[s];
        clf_bench_result *r = row(cr->run, sl->res);
        size_t bytes;
        double secs;
        int rc;
        if (!sl->active)
            continue;
        progress(cr->run, "%s: %s first call", cr->tag,
                 clf_bench_mode_name(sl->l.mode));
        rc = timed_forward(cr->ctx, &sl->l, cr->x, sl->y, cr->c->B, cr->c->n,
                           &secs);
        if (rc != 0) {
            fail_row(cr->run, &r->status, r->note, sizeof r->note, "forward",
                     rc);
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
}

/* The expected seconds of one warm round; 0 when no mode is active. */
static double
round_estimate(const struct cfgrun *cr, int *active)
{
    double round = 0.0;
    size_t s;

    *active = 0;
    for (s = 0; s < cr->ns; s++)
        if (cr->slots[s].active) {
            double e = estimate_s(cr->run, layer_lib_mode(&cr->slots[s].l),
                                  cr->slots[s].flops);
            round += e > 0.0 ? e : cr->slots[s].last_s;
            (*active)++;
        }
    return round;
}

/* Notes on the active rows that the budget stopped them after i rounds. */
static void
stop_rounds(struct cfgrun *cr, size_t i)
{
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        clf_bench_result *r = row(cr->run, cr->slots[s].res);
        if (!cr->slots[s].active)
            continue;
        if (i == 0) {
            r->status = CLF_BENCH_OVER_BUDGET;
            set_note(r->note, sizeof r->note,
                     "first call only: the time budget is spent");
        } else {
            set_note(r->note, sizeof r->note,
                     "%zu of %zu warm runs: the time budget is spent", i,
                     cr->run->o->repeat);
        }
    }
    progress(cr->run, "%s: stopping after %zu warm runs (time budget)", cr->tag,
             i);
}

int
clf_bench_stage_sample(double st[CLF_STAGE_COUNT], double *sum)
{
    double total = 0.0;
    int g;

    for (g = 0; g < CLF_STAGE_COUNT; g++)
        total += st[g];
    if (total > 0.0) {
        *sum = total;
        return 1;
    }
    for (g = 0; g < CLF_STAGE_COUNT; g++)
        st[g] = NAN;
    *sum = NAN;
    return 0;
}

/* One warm forward of the slot, with its stage times. */
static void
warm_run(struct cfgrun *cr, struct slot *sl)
{
    clf_bench_result *r = row(cr->run, sl->res);
    double secs, st[CLF_STAGE_COUNT], sum;
    int g, rc;

    rc =
        timed_forward(cr->ctx, &sl->l, cr->x, sl->y, cr->c->B, cr->c->n, &secs);
    if (rc == 0)
        rc = clf_attention_stage_times(sl->l.att, st);
    if (rc != 0) {
        fail_row(cr->run, &r->status, r->note, sizeof r->note, "forward", rc);
        sl->active = 0;
        return;
    }
    if (!clf_bench_stage_sample(st, &sum))
        sl->unprofiled++;
    sl->wall[sl->runs] = secs;
    for (g = 0; g < CLF_STAGE_COUNT; g++)
        sl->stage[g][sl->runs] = st[g];
    sl->dev[sl->runs] = sum;
    sl->runs++;
    sl->last_s = secs;
    note_rate(cr->run, layer_lib_mode(&sl->l), sl->flops, secs);
}

/* Whether every active mode's median has settled (roofline.h: at least
 * CLF_BENCH_MIN_RUNS runs, or --repeat when fewer, and the median moved by
 * at most CLF_BENCH_SETTLE_TOL over the last CLF_BENCH_SETTLE_LAG runs). */
static int
all_settled(const struct cfgrun *cr)
{
    size_t s, floor = cr->run->o->repeat < CLF_BENCH_MIN_RUNS
                          ? cr->run->o->repeat
                          : CLF_BENCH_MIN_RUNS;

    for (s = 0; s < cr->ns; s++)
        if (cr->slots[s].active &&
            !clf_bench_median_settled(cr->slots[s].wall, cr->slots[s].runs,
                                      floor))
            return 0;
    return 1;
}

/* Warm rounds, the modes alternating, until every median has settled,
 * --repeat rounds ran or the budget is spent. */
static void
warm_rounds(struct cfgrun *cr)
{
    size_t i, s;
    int active;

    for (i = 0; i < cr->run->o->repeat; i++) {
        double round = round_estimate(cr, &active);
        if (active == 0 || (i > 0 && all_settled(cr)))
            break;
        if (!fits(cr->run, round)) {
            stop_rounds(cr, i);
            break;
        }
        progress(cr->run, "%s: warm round %zu/%zu", cr->tag, i + 1,
                 cr->run->o->repeat);
        for (s = 0; s < cr->ns; s++)
            if (cr->slots[s].active)
                warm_run(cr, &cr->slots[s]);
    }
}

/* Outputs and statistics of the rows that ran. */
static void
collect(struct cfgrun *cr)
{
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        struct slot *sl = &cr->slots[s];
        clf_bench_result *r = row(cr->run, sl->res);
        int g;
        if (sl->runs == 0 || r->status != CLF_BENCH_OK)
            continue;
        sl->out = malloc(cr->count * sizeof *sl->out);
        if (sl->out != NULL &&
            read_buffer(cr->ctx, sl->y, sl->out, cr->count) != 0) {
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
        clf_bench_result_bytes(r);
        clf_bench_result_roofline(r, &cr->run->rep->devices[r->device]);
        if (sl->unprofiled > 0)
            set_note(r->note, sizeof r->note,
                     "no stage times: the driver's profiling timestamps "
                     "are zero, so only host-clock times of whole "
                     "forwards are shown");
    }
}

/* Reports each row's outcome on stderr and frees the configuration. */
static void
release(struct cfgrun *cr)
{
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        clf_bench_result *r = row(cr->run, cr->slots[s].res);
        if (r->status == CLF_BENCH_OK && cr->slots[s].runs > 0)
            progress(cr->run, "%s: %-11s median %8.1f ms (%zu warm run%s)",
                     cr->tag, clf_bench_mode_name(r->mode),
                     r->wall.median * 1e3, r->wall.runs,
                     r->wall.runs == 1 ? "" : "s");
        else if (r->status != CLF_BENCH_OK)
            progress(cr->run, "%s: %-11s %s", cr->tag,
                     clf_bench_mode_name(r->mode), r->note);
        free(cr->slots[s].out);
        if (cr->slots[s].y != NULL)
            clReleaseMemObject(cr->slots[s].y);
        layer_destroy(&cr->slots[s].l);
    }
    if (cr->x != NULL)
        clReleaseMemObject(cr->x);
    free(cr->slots);
}

/* Half rows: the error against the same mode with float32 weights, from
 * the configuration's float row, else from one untimed float forward. */
static void
fp32_errors(struct cfgrun *cr)
{
    size_t i, j;

    for (i = 0; i < cr->ns; i++) {
        struct slot *sl = &cr->slots[i];
        clf_bench_result *r = row(cr->run, sl->res);
        const float *yf = NULL;
        float *own = NULL;
        int rc = 0;
        if (sl->l.precision != CLF_PRECISION_HALF || sl->out == NULL)
            continue;
        for (j = 0; j < cr->ns; j++)
            if (cr->slots[j].l.mode == sl->l.mode &&
                cr->slots[j].l.precision == CLF_PRECISION_FLOAT)
                yf = cr->slots[j].out;
        if (yf == NULL) {
            own = malloc(cr->count * sizeof *own);
            rc = own == NULL ? CLF_ENO_MEMORY
                             : reference_output(cr->run, cr->ctx, cr->c, cr->w,
                                                sl->l.mode, CLF_PRECISION_FLOAT,
                                                cr->x, own);
            yf = own;
        }
        if (rc == 0)
            r->fp32_error = clf_bench_rel_error(sl->out, yf, cr->count);
        else
            set_note(r->note, sizeof r->note, "no fp32 error: %s",
                     rc == 1 ? "no time left for the float32 forward"
                             : clf_error_message(rc));
        free(own);
    }
}

static void
run_config(struct run *run, clf_context *ctx, const struct config *c,
           const struct weights *w)
{
    struct cfgrun cr;

    memset(&cr, 0, sizeof cr);
    cr.run = run;
    cr.ctx = ctx;
    cr.c = c;
    cr.w = w;
    cr.count = c->B * c->n * c->D;
    snprintf(cr.tag, sizeof cr.tag, "n=%zu k=%zu D=%zu h=%zu B=%zu", c->n, c->k,
             c->D, c->h, c->B);
    cr.slots = calloc(2 * CLF_BENCH_MODE_COUNT, sizeof *cr.slots);
    if (cr.slots == NULL || add_rows(&cr) != 0) {
        fprintf(stderr, "%s: out of host memory\n", run->o->prog);
        run->failures++;
        if (cr.slots == NULL)
            return;
    }
    make_layers(&cr, make_input(&cr));
    check_budget(&cr);
    first_calls(&cr);
    warm_rounds(&cr);
    collect(&cr);
    finish_errors(run, ctx, c, w, cr.slots, cr.ns, cr.x);
    fp32_errors(&cr);
    release(&cr);
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

/* The decisive-token case's host arrays and layer. */
struct decisive {
    size_t T, n, k;
    double alpha, diff;
    float *wq, *unit, *e, *f, *x, *y;
    clf_attention *att;
};

static void
decisive_free(struct decisive *dc)
{
    clf_attention_destroy(dc->att);
    free(dc->wq);
    free(dc->unit);
    free(dc->e);
    free(dc->f);
    free(dc->x);
    free(dc->y);
}

/* W_q, the unit weights, E and F under init, and the T input sequences
 * with their decisive positions. */
static int
decisive_inputs(struct decisive *dc, unsigned long long seed,
                clf_bench_init init)
{
    const size_t D = DEC_D, T = dc->T, n = dc->n, k = dc->k;
    size_t b, t;

    dc->wq = calloc(D * D, sizeof *dc->wq);
    dc->unit = calloc(D * D, sizeof *dc->unit);
    dc->e = malloc(k * n * sizeof *dc->e);
    dc->f = malloc(k * n * sizeof *dc->f);
    dc->x = calloc(T * n * D, sizeof *dc->x);
    dc->y = malloc(T * n * D * sizeof *dc->y);
    if (!dc->wq || !dc->unit || !dc->e || !dc->f || !dc->x || !dc->y)
        return CLF_ENO_MEMORY;
    dc->wq[0 * D + 1] = (float)(dc->alpha * sqrt((double)D));
    dc->unit[0] = 1.0f;
    fill_uniform(dc->e, k * n, mix_seed(seed, 1),
                 clf_bench_init_bound(init, k, n));
    fill_uniform(dc->f, k * n, mix_seed(seed, 2),
                 clf_bench_init_bound(init, k, n));
    for (b = 0; b < T; b++) {
        size_t j = (2 * b + 1) * n / (2 * T);
        for (t = 0; t < n; t++) {
            dc->x[(b * n + t) * D + 0] = t == j ? 1.0f : 0.0f;
            dc->x[(b * n + t) * D + 1] = 1.0f;
        }
    }
    return 0;
}

/* The layer of the case, and its Linformer forward of every sequence. */
static int
decisive_forward(struct decisive *dc, clf_context *ctx)
{
    const size_t D = DEC_D, kn = dc->k * dc->n;
    clf_attention_desc d;
    int rc;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = 1;
    d.max_seq_len = dc->n;
    d.k = dc->k;
    if ((rc = clf_attention_create(&dc->att, ctx, &d)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_WEIGHT_Q, dc->wq, D * D)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_WEIGHT_K, dc->unit,
                                       D * D)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_WEIGHT_V, dc->unit,
                                       D * D)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_WEIGHT_OUT, dc->unit,
                                       D * D)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_PROJ_E, dc->e, kn)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_PROJ_F, dc->f, kn)))
        return rc;
    return clf_attention_forward(dc->att, dc->x, dc->T, dc->n, dc->y);
}

/* The weight that reached each decisive position, against the host's. */
static void
decisive_collect(struct decisive *dc, clf_bench_weight *wt)
{
    const size_t D = DEC_D, n = dc->n;
    double sum = 0.0, sum_abs = 0.0, max_abs = 0.0;
    size_t b;

    for (b = 0; b < dc->T; b++) {
        size_t j = (2 * b + 1) * n / (2 * dc->T);
        double got = dc->y[(b * n) * D];
        double last = dc->y[(b * n + n - 1) * D];
        double want =
            clf_bench_decisive_weight(dc->e, dc->f, dc->k, n, j, dc->alpha);
        sum += got;
        sum_abs += fabs(got);
        if (fabs(got) > max_abs)
            max_abs = fabs(got);
        /* every query of the sequence sees the same scores */
        dc->diff = fmax(dc->diff, fmax(fabs(got - want), fabs(last - want)));
    }
    wt->mean = sum / (double)dc->T;
    wt->mean_abs = sum_abs / (double)dc->T;
    wt->max_abs = max_abs;
}

/* Full attention on the first sequence: P[i, j] for every query. */
static int
decisive_full(struct decisive *dc, clf_bench_accuracy *a)
{
    double want = clf_bench_decisive_full(dc->n, dc->alpha);
    int rc;

    if ((rc = clf_attention_set_mode(dc->att, CLF_MODE_FULL)) != 0)
        return rc;
    rc = clf_attention_forward(dc->att, dc->x, 1, dc->n, dc->y);
    if (rc == CLF_ETOO_LARGE) {
        a->full_weight = want;
        set_note(a->note, sizeof a->note,
                 "full-mode decisive check too large: host value");
        return 0;
    }
    if (rc != 0)
        return rc;
    a->full_weight = dc->y[0];
    dc->diff = fmax(dc->diff, fmax(fabs(dc->y[0] - want),
                                   fabs(dc->y[(dc->n - 1) * DEC_D] - want)));
    return 0;
}

static int
run_decisive(struct run *run, clf_context *ctx, size_t n, size_t k,
             clf_bench_init init, clf_bench_accuracy *a)
{
    /* The same draws under both inits (both are uniform), so that they
     * differ in scale only. */
    unsigned long long seed = run->o->seed * 31 + 17;
    struct decisive dc;
    int rc;

    memset(&dc, 0, sizeof dc);
    dc.T = a->trials;
    dc.n = n;
    dc.k = k;
    dc.alpha = clf_bench_decisive_alpha(n, 0.99);
    if ((rc = decisive_inputs(&dc, seed, init)) != 0 ||
        (rc = decisive_forward(&dc, ctx)) != 0)
        goto done;
    decisive_collect(&dc, &a->weight[init]);
    if (init == CLF_BENCH_INIT_LUCIDRAINS && (rc = decisive_full(&dc, a)) != 0)
        goto done;
    if (isnan(a->host_max_diff) || dc.diff > a->host_max_diff)
        a->host_max_diff = dc.diff;
    /* Float accumulation of the full-mode softmax denominator, one dominant
     * term plus n - 1 tiny ones each rounded the same way, leaves about
     * 1e-4 at n = 2048; a wrong weight or stage would be off by far more. */
    if (dc.diff > 1e-3) {
        fprintf(stderr,
                "%s: warning: decisive token, n=%zu k=%zu %s: device and "
                "host differ by %.3g\n",
                run->o->prog, n, k, clf_bench_init_name(init), dc.diff);
        set_note(a->note, sizeof a->note,
                 "decisive token: device and host differ by %.3g", dc.diff);
    }
done:
    decisive_free(&dc);
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
        *sb = clf_bench_stats_of(tb, b != NULL ? runs : 0);
    return 0;
}

/* One length of the accuracy study while it runs. */
struct accrun {
    struct run *run;
    clf_context *ctx;
    const struct weights *w;
    size_t dev, n, D, h, B, count;
    float *hx, *yfull, *ylin;
    cl_mem x, y, yf;
    struct layer full;
    int have_full;
    char full_note[200];
};

/* The input and output buffers. */
static int
acc_buffers(struct accrun *ar)
{
    int rc = 0;

    ar->hx = malloc(ar->count * sizeof *ar->hx);
    ar->yfull = malloc(ar->count * sizeof *ar->yfull);
    ar->ylin = malloc(ar->count * sizeof *ar->ylin);
    if (ar->hx == NULL || ar->yfull == NULL || ar->ylin == NULL)
        return CLF_ENO_MEMORY;
    fill_uniform(ar->hx, ar->count, mix_seed(ar->run->o->seed, 1000 + ar->n),
                 1.0);
    ar->x = make_buffer(ar->ctx, ar->count, ar->hx, &rc);
    if (rc == 0)
        ar->y = make_buffer(ar->ctx, ar->count, NULL, &rc);
    if (rc == 0)
        ar->yf = make_buffer(ar->ctx, ar->count, NULL, &rc);
    return rc;
}

/* Full attention: the reference output, from its first call; its timed
 * runs alternate with each k's Linformer runs. */
static void
acc_full(struct accrun *ar)
{
    double secs;
    int rc;

    progress(ar->run, "accuracy n=%zu D=%zu h=%zu B=%zu: full attention", ar->n,
             ar->D, ar->h, ar->B);
    rc = layer_make(&ar->full, ar->ctx, CLF_BENCH_FULL, ar->n, 1, ar->h, ar->w,
                    CLF_BENCH_INIT_LUCIDRAINS, ar->run->o->seed);
    if (rc == 0)
        rc = timed_forward(ar->ctx, &ar->full, ar->x, ar->yf, ar->B, ar->n,
                           &secs);
    if (rc == 0)
        rc = read_buffer(ar->ctx, ar->yf, ar->yfull, ar->count);
    if (rc == 0) {
        ar->have_full = 1;
        return;
    }
    layer_destroy(&ar->full);
    if (rc == CLF_ETOO_LARGE) {
        snprintf(ar->full_note, sizeof ar->full_note,
                 "full attention too large: no error, no speed-up");
    } else {
        snprintf(ar->full_note, sizeof ar->full_note,
                 "full attention failed: %s", clf_last_error());
        ar->run->failures++;
    }
}

/* A new accuracy row for k; NULL when out of memory. */
static clf_bench_accuracy *
acc_add_row(struct accrun *ar, size_t k)
{
    clf_bench_accuracy *a = clf_bench_report_add_accuracy(ar->run->rep);
    size_t trials = ar->run->o->trials;

    if (a == NULL)
        return NULL;
    a->device = ar->dev;
    a->n = ar->n;
    a->k = k;
    a->d_model = ar->D;
    a->heads = ar->h;
    a->batch = ar->B;
    a->trials = trials < ar->n ? trials : ar->n;
    if (ar->full_note[0] != '\0')
        set_note(a->note, sizeof a->note, "%s", ar->full_note);
    return a;
}

/* Whether the budget holds two Linformer forwards and a full one. */
static int
acc_fits(struct accrun *ar, struct layer *l)
{
    double fl = NAN, ff = NAN;

    clf_attention_flops_ex(l->att, CLF_MODE_LINFORMER, ar->B, ar->n, NULL, &fl);
    if (ar->have_full)
        clf_attention_flops_ex(ar->full.att, CLF_MODE_FULL, ar->B, ar->n, NULL,
                               &ff);
    return fits(
        ar->run,
        2.0 * estimate_s(ar->run, CLF_MODE_LINFORMER, fl) +
            (ar->have_full ? estimate_s(ar->run, CLF_MODE_FULL, ff) : 0.0));
}

/* Linformer's output under the layer's E and F, and its error against
 * full attention's. */
static int
acc_error(struct accrun *ar, double *rel_error)
{
    int rc = read_buffer(ar->ctx, ar->y, ar->ylin, ar->count);

    if (rc == 0 && ar->have_full)
        *rel_error = clf_bench_rel_error(ar->ylin, ar->yfull, ar->count);
    return rc;
}

/* Timing and error under the lucidrains init, the error under fairseq's
 * (the same layer with E and F redrawn). */
static int
acc_measure(struct accrun *ar, struct layer *l, clf_bench_accuracy *a)
{
    const struct clf_bench_options *o = ar->run->o;
    int rc;

    rc = time_alternating(ar->run, ar->ctx, l, ar->have_full ? &ar->full : NULL,
                          ar->x, ar->y, ar->yf, ar->B, ar->n, &a->linformer,
                          &a->full);
    if (rc != 0)
        return rc;
    if (a->linformer.runs < o->repeat)
        set_note(a->note, sizeof a->note,
                 "%zu of %zu warm runs: the time budget is spent",
                 a->linformer.runs, o->repeat);
    if ((rc = acc_error(ar, &a->rel_error[CLF_BENCH_INIT_LUCIDRAINS])) != 0 ||
        (rc = set_projections(l->att, a->k, ar->n, CLF_BENCH_INIT_FAIRSEQ,
                              o->seed)) != 0 ||
        (rc = clf_attention_forward_cl_ex(l->att, ar->x, 0, ar->y, 0, ar->B,
                                          ar->n, NULL)) != 0)
        return rc;
    return acc_error(ar, &a->rel_error[CLF_BENCH_INIT_FAIRSEQ]);
}

/* One k of the study; returns -1 when out of memory. */
static int
acc_k(struct accrun *ar, size_t k)
{
    struct run *run = ar->run;
    clf_bench_accuracy *a;
    struct layer l;
    int rc, init;

    if (k > ar->n) {
        progress(run, "accuracy n=%zu: k=%zu exceeds n, left out", ar->n, k);
        return 0;
    }
    if ((a = acc_add_row(ar, k)) == NULL)
        return -1;
    rc = layer_make(&l, ar->ctx, CLF_BENCH_LINFORMER, ar->n, k, ar->h, ar->w,
                    CLF_BENCH_INIT_LUCIDRAINS, run->o->seed);
    if (rc != 0) {
        fail_row(run, &a->status, a->note, sizeof a->note, "layer", rc);
        return 0;
    }
    if (!acc_fits(ar, &l)) {
        a->status = CLF_BENCH_OVER_BUDGET;
        set_note(a->note, sizeof a->note, "not run: the time budget is spent");
        layer_destroy(&l);
        progress(run, "accuracy n=%zu k=%zu: skipped, over the time budget",
                 ar->n, k);
        return 0;
    }
    progress(run, "accuracy n=%zu k=%zu: Linformer%s, decisive token", ar->n, k,
             ar->have_full ? " and full, alternating" : "");
    rc = acc_measure(ar, &l, a);
    layer_destroy(&l);
    for (init = 0; rc == 0 && init < CLF_BENCH_INIT_COUNT; init++)
        rc = run_decisive(run, ar->ctx, ar->n, k, (clf_bench_init)init, a);
    if (rc != 0)
        fail_row(run, &a->status, a->note, sizeof a->note, "accuracy", rc);
    return 0;
}

static void
acc_free(struct accrun *ar)
{
    layer_destroy(&ar->full);
    if (ar->x != NULL)
        clReleaseMemObject(ar->x);
    if (ar->y != NULL)
        clReleaseMemObject(ar->y);
    if (ar->yf != NULL)
        clReleaseMemObject(ar->yf);
    free(ar->hx);
    free(ar->yfull);
    free(ar->ylin);
}

static void
run_accuracy(struct run *run, clf_context *ctx, size_t dev, size_t n, size_t D,
             size_t h, size_t B, const struct weights *w)
{
    struct accrun ar;
    size_t i;
    int rc;

    memset(&ar, 0, sizeof ar);
    ar.run = run;
    ar.ctx = ctx;
    ar.w = w;
    ar.dev = dev;
    ar.n = n;
    ar.D = D;
    ar.h = h;
    ar.B = B;
    ar.count = B * n * D;
    if ((rc = acc_buffers(&ar)) != 0) {
        fprintf(stderr, "%s: accuracy study n=%zu: %s\n", run->o->prog, n,
                clf_strerror(rc));
        run->failures++;
        acc_free(&ar);
        return;
    }
    acc_full(&ar);
    for (i = 0; i < run->o->acc_nk; i++)
        if (acc_k(&ar, run->o->acc_k[i]) != 0) {
            run->failures++;
            break;
        }
    acc_free(&ar);
}

/* The device selectors to run on: "all" lists every device. */
static int
device_selectors(const struct clf_bench_options *o, char sel[MAX_DEVICES][128],
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
                    clf_strerror(rc), clf_error_message(rc));
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

/* Records the device and builds its kernels; returns the device's
 * index in the report, or -1 (reported) when it failed. */
static long
device_open(struct run *run, clf_context *ctx)
{
    clf_device_info info;
    clf_context_stats cs;
    clf_bench_device *d;
    double t;
    int rc;

    clf_context_device_info(ctx, &info);
    d = clf_bench_report_add_device(run->rep);
    if (d == NULL)
        return -1;
    d->index = info.index;
    snprintf(d->platform, sizeof d->platform, "%s", info.platform);
    snprintf(d->name, sizeof d->name, "%s", info.name);
    snprintf(d->driver, sizeof d->driver, "%s", info.driver);
    snprintf(d->version, sizeof d->version, "%s", info.version);
    d->is_gpu = info.is_gpu;
    d->compute_units = info.compute_units;
    d->global_mem = info.global_mem;
    d->max_alloc = info.max_alloc;
    snprintf(d->stable_name, sizeof d->stable_name, "%s", info.stable_name);
    progress(run, "device %u: %s / %s (driver %s): building kernels",
             info.index, info.platform, info.name, info.driver);
    t = clf_bench_now();
    rc = clf_context_build(ctx);
    d->build_s = clf_bench_now() - t;
    if (rc != 0) {
        fprintf(stderr, "%s: device %u: kernel build: %s: %s\n%s\n",
                run->o->prog, info.index, clf_strerror(rc),
                clf_error_message(rc), clf_context_build_log(ctx));
        return -1;
    }
    if (clf_context_stats_get(ctx, &cs) == 0) {
        d->source_builds = cs.source_builds;
        d->cache_loads = cs.cache_loads;
    }
    return (long)(run->rep->ndevices - 1);
}

/* The device's peaks (clf_context_peaks), unless --no-peak; --peak
 * measures them again.  A failure leaves them NaN and is reported. */
static void
device_peaks(struct run *run, clf_context *ctx, clf_bench_device *d)
{
    clf_device_peaks p;
    int rc;

    if (run->o->peak < 0)
        return;
    progress(run, "device %u: peaks%s", d->index,
             run->o->peak > 0 ? ", measured again (--peak)" : "");
    rc = clf_context_peaks(ctx, run->o->peak > 0 ? CLF_PEAKS_MEASURE : 0, &p);
    if (rc != 0) {
        fprintf(stderr, "%s: device %u: peaks not measured: %s: %s\n",
                run->o->prog, d->index, clf_strerror(rc),
                clf_error_message(rc));
        return;
    }
    d->peak_gflops = p.fma_gflops;
    d->peak_gbps = p.copy_gbps;
    d->h2d_gbps = p.h2d_gbps;
    d->peak_cached = p.cached;
    progress(run,
             "device %u: %.1f GFLOP/s fp32, %.1f GB/s copy, %.1f GB/s host "
             "to device%s",
             d->index, p.fma_gflops, p.copy_gbps, p.h2d_gbps,
             p.cached ? " (cached)" : "");
}

/* The matrix of one (D, h, B): every k and n. */
static void
run_matrix(struct run *run, clf_context *ctx, struct config *c,
           const struct weights *w)
{
    const struct clf_bench_options *o = run->o;
    size_t ik, in;

    for (ik = 0; ik < o->nk; ik++)
        for (in = 0; in < o->nn; in++) {
            c->n = o->n[in];
            c->k = o->k[ik];
            run_config(run, ctx, c, w);
        }
}

/* The matrix, then the accuracy study (--accuracy, or --quick at the first
 * D, h and B), for one (D, h). */
static void
run_width(struct run *run, clf_context *ctx, size_t dev, size_t id, size_t ih)
{
    const struct clf_bench_options *o = run->o;
    struct weights w;
    struct config c;
    size_t ib, in, D = o->d[id], h = o->h[ih];

    if (D % h != 0) {
        fprintf(stderr, "%s: D=%zu is not a multiple of h=%zu: skipped\n",
                o->prog, D, h);
        run->failures++;
        return;
    }
    if (weights_make(&w, D, o->seed) != 0) {
        fprintf(stderr, "%s: out of host memory\n", o->prog);
        run->failures++;
        return;
    }
    for (ib = 0; ib < o->nb; ib++) {
        c.dev = dev;
        c.D = D;
        c.h = h;
        c.B = o->b[ib];
        if (!o->accuracy)
            run_matrix(run, ctx, &c, &w);
        if (o->accuracy || (o->quick && id == 0 && ih == 0 && ib == 0))
            for (in = 0; in < o->acc_nn; in++)
                run_accuracy(run, ctx, dev, o->acc_n[in], D, h, o->b[ib], &w);
    }
    weights_free(&w);
}

static void
run_device(struct run *run, const char *selector)
{
    const struct clf_bench_options *o = run->o;
    clf_context *ctx = NULL;
    clf_bench_device *d;
    size_t id, ih;
    long dev;
    int rc;

    rc = clf_context_create_ex(&ctx, selector[0] ? selector : NULL,
                               CLF_CONTEXT_PROFILING);
    if (rc != 0) {
        fprintf(stderr, "%s: device \"%s\": %s (%s): %s\n", o->prog,
                selector[0] ? selector : "default", clf_strerror(rc),
                clf_status_name(rc), clf_error_message(rc));
        run->failures++;
        return;
    }
    /* The bench owns its process: stored GEMM tuning may apply to CLBlast
     * process-wide, as it did for the figures it is compared with. */
    if ((rc = clf_tune_apply_process_wide(ctx)) != 0 ||
        clf_context_warnings(ctx)[0] != '\0')
        fprintf(stderr, "%s: stored GEMM tuning not applied: %s\n", o->prog,
                rc != 0 ? clf_error_message(rc) : clf_context_warnings(ctx));
    if ((dev = device_open(run, ctx)) < 0) {
        run->failures++;
        clf_context_destroy(ctx);
        return;
    }
    device_peaks(run, ctx, &run->rep->devices[dev]);
    run->min_rate = run->rate[0] = run->rate[1] = 0.0;
    for (id = 0; id < o->nd; id++)
        for (ih = 0; ih < o->nh; ih++)
            run_width(run, ctx, (size_t)dev, id, ih);
    d = &run->rep->devices[dev];
    snprintf(d->tuning, sizeof d->tuning, "%s", clf_context_tuning(ctx));
    snprintf(d->choices, sizeof d->choices, "%s",
             clf_context_kernel_choices(ctx));
    clf_context_destroy(ctx);
}

/* Whether a * b * c * d fits size_t (all nonzero). */
static int
fits_size(size_t a, size_t b, size_t c, size_t d)
{
    if (b > SIZE_MAX / a)
        return 0;
    a *= b;
    if (c > SIZE_MAX / a)
        return 0;
    a *= c;
    return d <= SIZE_MAX / a;
}

/* The matrix's and the study's inputs and outputs: B x n x D floats. */
static int
check_inputs(const struct clf_bench_options *o, const size_t *ns, size_t nn,
             char *why, size_t len)
{
    size_t ib, in, id;

    for (ib = 0; ib < o->nb; ib++)
        for (in = 0; in < nn; in++)
            for (id = 0; id < o->nd; id++)
                if (!fits_size(o->b[ib], ns[in], o->d[id], sizeof(float))) {
                    snprintf(why, len,
                             "--batch %zu x --n %zu x --d-model %zu floats "
                             "overflow the address space",
                             o->b[ib], ns[in], o->d[id]);
                    return -1;
                }
    return 0;
}

/* The study's E and F (k x n) and decisive-token inputs (trials x n x 8
 * floats). */
static int
check_study(const struct clf_bench_options *o, char *why, size_t len)
{
    size_t in, ik, trials = o->trials > 0 ? o->trials : 1;

    for (in = 0; in < o->acc_nn; in++) {
        size_t n = o->acc_n[in];
        for (ik = 0; ik < o->acc_nk; ik++)
            if (!fits_size(o->acc_k[ik], n, sizeof(float), 1)) {
                snprintf(why, len,
                         "--k %zu x --n %zu floats overflow the address "
                         "space",
                         o->acc_k[ik], n);
                return -1;
            }
        if (!fits_size(trials, n, DEC_D, sizeof(float))) {
            snprintf(why, len,
                     "--trials %zu x --n %zu x %d floats overflow the "
                     "address space",
                     trials, n, DEC_D);
            return -1;
        }
    }
    return 0;
}

int
clf_bench_check_sizes(const struct clf_bench_options *o, char *why, size_t len)
{
    size_t id;

    for (id = 0; id < o->nd; id++)
        if (!fits_size(o->d[id], o->d[id], sizeof(float), 1)) {
            snprintf(why, len,
                     "--d-model %zu: its %zu x %zu weights overflow the "
                     "address space",
                     o->d[id], o->d[id], o->d[id]);
            return -1;
        }
    if (check_inputs(o, o->n, o->nn, why, len) != 0 ||
        check_inputs(o, o->acc_n, o->acc_nn, why, len) != 0)
        return -1;
    return check_study(o, why, len);
}

int
clf_bench_run(const struct clf_bench_options *o, clf_bench_report *rep,
              double t0)
{
    struct run run;
    char sel[MAX_DEVICES][128];
    size_t nsel = 0, i;
    char why[256];

    if (clf_bench_check_sizes(o, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n", o->prog, why);
        return -1;
    }
    if (device_selectors(o, sel, &nsel) != 0)
        return -1;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.rep = rep;
    run.t0 = t0;
    run.deadline = t0 + o->budget;
    for (i = 0; i < nsel; i++) {
        double left = run.deadline - clf_bench_now();
        /* Each device gets an equal share of what is left, so that a slow
         * one cannot starve the rest. */
        run.dev_deadline =
            clf_bench_now() + (left > 0.0 ? left : 0.0) / (double)(nsel - i);
        run_device(&run, sel[i]);
    }
    rep->wall_s = clf_bench_now() - t0;
    return run.failures;
}
