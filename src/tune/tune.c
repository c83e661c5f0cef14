/* Per-device GEMM tuning: the search.  CLBlast's built-in parameters for
 * an unknown device (PoCL's CPU device, say) can be several times slower
 * than the best ones.  clf_tune() times real layer forwards under
 * candidate parameter sets of CLBlast's Xgemm kernel (through
 * CLBlastOverrideParameters), of its XgemmDirect kernel, of its
 * direct/indirect switch and of the tiled GEMM kernel's sizes, reports
 * them, and stores the fastest per
 * platform, device and driver in the cache directory as a tune file
 * (src/tune/tune_file.c); the process's owner applies the stored choice
 * to a context (src/tune/tune_apply.c, clf_tune_apply_process_wide). */
#include "tune/tune.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CANDS CLF_TUNE_MAX_TRIED
#define MI_COUNT 5
/* A build quicker than this came from a cache (the driver's own, such as
 * PoCL's under ~/.cache/pocl, which outlives clinformer's): it says
 * nothing about the next one, which may be a real compile. */
#define CACHED_BUILD_S 0.25

/* XGEMM_MIN_INDIRECT_SIZE above every GEMM of a layer: CLBlast runs
 * XgemmDirect for m*n*k < 65536^3 (2.8e14), the most the tune file
 * stores. */
#define ALL_DIRECT 65536

struct cand {
    size_t v[CLF_TUNE_NPARAM];
};

struct dcand {
    size_t v[CLF_TUNE_NDIRECT];
};

static const size_t mi_values[MI_COUNT] = {128, 256, 512, 1024, 2048};

/* A curated grid around parameters that work on CPU and GPU OpenCL
 * runtimes; the first entries are the likeliest winners so that a short
 * budget still finds a good one. */
static size_t
make_candidates(struct cand *out, size_t cap, const struct clf__limits *lim)
{
    char why[256];
    static const size_t mwg[] = {64, 32, 128}, nwg[] = {64, 32, 128};
    static const size_t vwm[] = {1, 2, 4}, vwn[] = {4, 1, 2, 8};
    static const size_t kwg[] = {32, 16};
    size_t n = 0, a, b, c, d, e;

    for (e = 0; e < 2; e++)
        for (c = 0; c < 3; c++)
            for (d = 0; d < 4; d++)
                for (a = 0; a < 3; a++)
                    for (b = 0; b < 3; b++) {
                        struct cand x;
                        memset(&x, 0, sizeof x);
                        x.v[CLF__XG_GEMMK] = 0;
                        x.v[CLF__XG_KREG] = 1;
                        x.v[CLF__XG_KWG] = kwg[e];
                        x.v[CLF__XG_KWI] = 2;
                        x.v[CLF__XG_MDIMA] = 8;
                        x.v[CLF__XG_MDIMC] = 8;
                        x.v[CLF__XG_NDIMB] = 8;
                        x.v[CLF__XG_NDIMC] = 8;
                        x.v[CLF__XG_MWG] = mwg[a];
                        x.v[CLF__XG_NWG] = nwg[b];
                        x.v[CLF__XG_VWM] = vwm[c];
                        x.v[CLF__XG_VWN] = vwn[d];
                        if (clf__tune_check_xgemm(x.v, lim, why, sizeof why) !=
                            0)
                            continue;
                        if (n < cap)
                            out[n++] = x;
                    }
    return n;
}

/* XgemmDirect's sets (WGD, MDIMCD, NDIMCD, MDIMAD, NDIMBD, KWID, VWMD,
 * VWND, PADA, PADB), curated from the sets CLBlast's database holds for
 * CPUs and GPUs, likeliest first so that a short budget still tries good
 * ones: 32 x 32 and 64 x 64 tiles of 8 x 8 groups with vectors of 4 or 2
 * (CPUs; the 64 x 64 tiles unpadded, 32 KiB of local memory), then
 * 16 x 16 groups (GPUs), unequal groups and reshaped loads, narrow
 * vectors and small tiles.  Those outside CLBlast's constraints or the
 * device's limits are left out (clf__tune_check_direct). */
static const size_t direct_grid[][CLF_TUNE_NDIRECT] = {
    {32, 8, 8, 8, 8, 2, 4, 4, 1, 1},     {64, 8, 8, 8, 8, 8, 4, 4, 0, 0},
    {32, 8, 8, 8, 8, 2, 2, 2, 1, 1},     {64, 8, 8, 8, 8, 2, 2, 2, 0, 0},
    {32, 8, 8, 8, 8, 8, 4, 4, 1, 1},     {64, 8, 8, 8, 8, 8, 8, 4, 0, 0},
    {32, 16, 16, 16, 16, 2, 2, 2, 1, 1}, {64, 16, 16, 16, 16, 2, 4, 4, 0, 0},
    {32, 8, 16, 8, 16, 2, 4, 2, 1, 1},   {64, 16, 8, 16, 8, 4, 4, 8, 0, 0},
    {32, 8, 8, 16, 16, 2, 2, 2, 1, 1},   {16, 8, 8, 8, 8, 2, 2, 2, 1, 1},
    {64, 8, 8, 8, 8, 2, 1, 1, 0, 0},     {32, 16, 16, 16, 16, 2, 1, 1, 1, 1},
    {16, 16, 16, 16, 16, 2, 1, 1, 1, 1}, {16, 8, 8, 8, 8, 2, 1, 1, 1, 1}};

const size_t *
clf__tune_direct_set(size_t i)
{
    return i < sizeof direct_grid / sizeof direct_grid[0] ? direct_grid[i]
                                                          : NULL;
}

static size_t
make_direct(struct dcand *out, size_t cap, const struct clf__limits *lim)
{
    char why[256];
    size_t n = 0, i;

    for (i = 0; i < sizeof direct_grid / sizeof direct_grid[0] && n < cap; i++)
        if (clf__tune_check_direct(direct_grid[i], lim, why, sizeof why) == 0)
            memcpy(out[n++].v, direct_grid[i], sizeof out[0].v);
    return n;
}

/* Median seconds of `runs` forwards after one warm-up, which also pays any
 * kernel build: its time beyond the median goes to *build (when not
 * NULL). */
static int
time_forward_ex(clf_context *ctx, clf_attention *att, cl_mem x, cl_mem y,
                size_t n, int runs, double *out, double *build)
{
    double t[8], t0 = clf__now_s(), warm;
    int r, i, j;

    if (clf_attention_forward_cl(att, x, 0, y, 0, 1, n) != 0 ||
        clf_context_finish(ctx) != 0)
        return -1;
    warm = clf__now_s() - t0;
    for (r = 0; r < runs; r++) {
        t0 = clf__now_s();
        if (clf_attention_forward_cl(att, x, 0, y, 0, 1, n) != 0 ||
            clf_context_finish(ctx) != 0)
            return -1;
        t[r] = clf__now_s() - t0;
    }
    for (i = 1; i < runs; i++)
        for (j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double s = t[j];
            t[j] = t[j - 1];
            t[j - 1] = s;
        }
    *out = t[runs / 2];
    if (build != NULL)
        *build = warm > *out ? warm - *out : 0.0;
    return 0;
}

static int
time_forward(clf_context *ctx, clf_attention *att, cl_mem x, cl_mem y, size_t n,
             int runs, double *out)
{
    return time_forward_ex(ctx, att, x, y, n, runs, out, NULL);
}

/* 0 when the forward's output y matches ref to 1e-4 of its scale: a
 * parameter set that computes wrong results is never chosen, however
 * fast. */
static int
same_output(clf_context *ctx, cl_mem y, const float *ref, float *tmp,
            size_t count)
{
    double scale = 1e-30, err = 0.0;
    size_t i;

    if (clEnqueueReadBuffer(ctx->queue, y, CL_TRUE, 0, count * sizeof(float),
                            tmp, 0, NULL, NULL) != CL_SUCCESS)
        return -1;
    for (i = 0; i < count; i++) {
        double d = fabs((double)tmp[i] - ref[i]);
        if (fabs(ref[i]) > scale)
            scale = fabs(ref[i]);
        if (!(d <= err))
            err = isnan(d) ? INFINITY : d;
    }
    return err <= 1e-4 * scale ? 0 : -1;
}

static void say(const clf_tune_opts *o, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void
say(const clf_tune_opts *o, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    if (o->progress == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->progress(line, o->user);
}

/* One call of clf_tune.  The budget bounds the whole call, kernel builds
 * included: before each step that runs forwards the clock is read, and a
 * step starts only when it still fits: the longest step's forwards so far,
 * and for a step under new parameters (an Xgemm candidate, a switch
 * setting, a tiled set: each a new kernel to build, tens of seconds on a
 * CPU runtime) one build as build_estimate() expects it.  Steps whose
 * layer was built from a cache say nothing about what a new build costs,
 * so builds are timed apart from the forwards. */
struct run {
    clf_context *ctx;
    clf_tune_opts o;
    char path[4300];
    clf_attention *att;
    cl_mem x, y;
    float *ref, *got;
    size_t count; /* floats of a layer's input */
    struct cand cands[MAX_CANDS];
    double tried_ms[MAX_CANDS]; /* -1: not measured, 0: failed */
    size_t ncand, done, measured;
    size_t nmi; /* the switch settings searched: the first nmi of mi_values */
    double start, step_max; /* step_max: the longest step's forwards */
    double build_s;         /* the longest build under new parameters in this
                               call; 0: none yet */
    double stored_build_s;  /* the one an earlier call stored; 0: none */
    double setup_build_s;   /* the setup's (perhaps from caches) */
    size_t skipped;         /* candidates left out for the budget */
    size_t tiled_tried, tiled_skipped, mi_tried, mi_skipped;
    double base; /* seconds, 0 before it is known */
    struct cand best;
    double best_ms;
    int have_best;
    size_t prev_mi, best_mi;
    double best_mi_ms, mi_ms[MI_COUNT];              /* -1: not measured */
    struct clf__tiled_cfg tiled[CLF_TUNE_MAX_TILED]; /* the tiled space */
    double tiled_ms[CLF_TUNE_MAX_TILED]; /* -1: not measured, 0: failed */
    size_t ntiled, tiled_best;           /* tiled_best: ntiled for none */
    int forced; /* the context's GEMM and attention choices overridden */
    int was_gemm, was_attend; /* what they were pinned to before */
    struct dcand dcands[CLF_TUNE_MAX_DIRECT]; /* the XgemmDirect grid */
    double direct_ms[CLF_TUNE_MAX_DIRECT];    /* -1: not measured, 0: failed */
    size_t ndirect, direct_done, direct_measured, direct_skipped;
    size_t direct_best; /* ndirect: none */
    double direct_base; /* ms, CLBlast's own XgemmDirect set; 0: unknown */
    int all_direct;     /* the switch left at ALL_DIRECT by tune_direct */
};

/* Whether a step expected to take the longest step so far, `reserve`
 * times over, still fits in the budget. */
static int
may_start(const struct run *r, double reserve)
{
    return clf__now_s() - r->start + reserve * r->step_max <= r->o.budget_s;
}

/* Seconds a new kernel build is expected to take: the longest measured in
 * this call (builds from a cache aside, see CACHED_BUILD_S), else the one
 * stored by the last call that measured one, else (none measured on this device
 * yet) the setup's build or, when that came from a cache, a guess by the kind
 * of device: CLBlast's Xgemm kernel takes tens of seconds to compile on a CPU
 * runtime such as PoCL, seconds on GPU drivers.  A guess too high only delays
 * tuning to a call with a larger budget; too low, the call overruns by one
 * build. */
static double
build_estimate(const struct run *r)
{
    double guess = r->ctx->info.is_gpu ? 10.0 : 60.0;

    if (r->build_s > 0.0)
        return r->build_s;
    if (r->stored_build_s > 0.0)
        return r->stored_build_s;
    return r->setup_build_s > guess ? r->setup_build_s : guess;
}

/* may_start for a step under new parameters: `builds` builds besides. */
static int
may_build_n(const struct run *r, double builds, double reserve)
{
    return clf__now_s() - r->start + builds * build_estimate(r) +
               reserve * r->step_max <=
           r->o.budget_s;
}

static int
may_build(const struct run *r, double reserve)
{
    return may_build_n(r, 1.0, reserve);
}

/* The builds the XgemmDirect step needs to get on: its baseline while
 * none is stored, and its next set while one is not measured. */
static double
direct_builds_due(const struct run *r)
{
    double n = r->ndirect != 0 && r->direct_base <= 0.0 ? 1.0 : 0.0;
    size_t i;

    for (i = 0; i < r->ndirect; i++)
        if (r->direct_ms[i] < 0.0)
            return n + 1.0;
    return n;
}

/* Ends a step begun at t0 whose kernel build took `build` of its time
 * (0: none). */
static void
step_end_built(struct run *r, double t0, double build)
{
    double t = clf__now_s() - t0 - build;

    if (t > r->step_max)
        r->step_max = t;
    if (build >= CACHED_BUILD_S && build > r->build_s)
        r->build_s = build;
}

static void
step_end(struct run *r, double t0)
{
    step_end_built(r, t0, 0.0);
}

/* The options with defaults filled in and every size product checked. */
static int
tune_opts(const clf_tune_opts *in, clf_tune_opts *o, size_t *count)
{
    size_t bytes;

    memset(o, 0, sizeof *o);
    if (in != NULL)
        *o = *in;
    if (o->d_model == 0)
        o->d_model = 512;
    if (o->heads == 0)
        o->heads = 8;
    if (o->k == 0)
        o->k = 256;
    if (o->seq_len == 0)
        o->seq_len = 2048;
    if (!(o->budget_s > 0.0)) /* also NaN */
        o->budget_s = 120.0;
    if (o->k > o->seq_len)
        o->k = o->seq_len;
    if (clf__mul(o->seq_len, o->d_model, count) != 0 ||
        clf__mul(*count, sizeof(float), &bytes) != 0)
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "opts: seq_len %zu * d_model %zu floats overflow",
                         o->seq_len, o->d_model);
    return 0;
}

/* The XgemmDirect baseline and sets a valid stored file holds. */
static void
resume_direct(struct run *r, const struct clf__tune_file *tf)
{
    size_t i, j;

    r->direct_base = tf->direct_baseline_ms;
    for (j = 0; j < tf->ndirect_tried; j++)
        for (i = 0; i < r->ndirect; i++)
            if (memcmp(tf->direct_tried[j], r->dcands[i].v,
                       sizeof r->dcands[i].v) == 0)
                r->direct_ms[i] = tf->direct_tried_ms[j];
}

/* Resume: the untuned time, the switch value and the candidates already
 * measured, from a valid stored file. */
static int
tune_resume(struct run *r)
{
    struct clf__tune_file *tf = malloc(sizeof *tf);
    size_t i, j;

    if (tf == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    if (clf__tune_load(r->ctx, r->path, tf) == 1) {
        r->base = tf->baseline_ms / 1e3;
        r->stored_build_s = tf->compile_ms / 1e3;
        r->prev_mi = tf->min_indirect;
        resume_direct(r, tf);
        for (j = 0; j < tf->ntried; j++)
            for (i = 0; i < r->ncand; i++)
                if (memcmp(tf->tried[j], r->cands[i].v, sizeof r->cands[i].v) ==
                    0)
                    r->tried_ms[i] = tf->tried_ms[j];
        for (j = 0; j < tf->ntiled_tried; j++)
            for (i = 0; i < r->ntiled; i++)
                if (memcmp(tf->tiled_tried[j].v, r->tiled[i].v,
                           sizeof r->tiled[i].v) == 0)
                    r->tiled_ms[i] = tf->tiled_tried_ms[j];
    }
    free(tf);
    return 0;
}

/* The layer, its buffers and the reference output of the parameters in
 * force now (CLBlast's defaults, or parameters applied before). */
static int
tune_setup(struct run *r)
{
    clf_attention_desc d;
    float *hx;
    cl_int err = CL_SUCCESS;
    double t0, t;
    size_t i;
    int rc;

    memset(&d, 0, sizeof d);
    d.d_model = r->o.d_model;
    d.heads = r->o.heads;
    d.max_seq_len = r->o.seq_len;
    d.k = r->o.k;
    d.bias_out = 1;
    if ((rc = clf_attention_create(&r->att, r->ctx, &d)) != 0 ||
        (rc = clf_attention_randomize(r->att, 7)) != 0)
        return rc;
    hx = malloc(r->count * sizeof *hx);
    r->ref = malloc(r->count * sizeof *r->ref);
    r->got = malloc(r->count * sizeof *r->got);
    if (hx == NULL || r->ref == NULL || r->got == NULL) {
        free(hx);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    for (i = 0; i < r->count; i++)
        hx[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    r->x = clCreateBuffer(r->ctx->context,
                          CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                          r->count * sizeof(float), hx, &err);
    if (r->x != NULL)
        r->y = clCreateBuffer(r->ctx->context, CL_MEM_READ_WRITE,
                              r->count * sizeof(float), NULL, &err);
    free(hx);
    if (r->x == NULL || r->y == NULL)
        return clf__fail(err, "tuning buffers: clCreateBuffer failed (%d)",
                         err);
    t0 = clf__now_s();
    if (time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 1, &t,
                        &r->setup_build_s) != 0 ||
        clEnqueueReadBuffer(r->ctx->queue, r->y, CL_TRUE, 0,
                            r->count * sizeof(float), r->ref, 0, NULL,
                            NULL) != CL_SUCCESS)
        return clf__fail(CLF_EINVALID_ARGUMENT, "reference forward failed: %s",
                         clf_last_error());
    /* Its build says nothing certain about a new one (it may have come
     * from a cache): build_estimate() weighs it, the steps do not. */
    r->step_max = clf__now_s() - t0 - r->setup_build_s;
    return 0;
}

/* The untuned time: stored, or measured now.  1 when the budget ran out
 * first. */
static int
tune_baseline(struct run *r)
{
    double t0 = clf__now_s();

    if (r->base > 0.0) {
        say(&r->o, "resuming: untuned %.1f ms per forward (stored)",
            r->base * 1e3);
        return 0;
    }
    if (r->ctx->tuned[0] != '\0')
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "this context already applies stored parameters "
                         "but their file lacks the untuned baseline; remove "
                         "%s and tune again",
                         r->path);
    if (!may_start(r, 1.0))
        return 1;
    if (time_forward(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &r->base) !=
        0)
        return clf__fail(CLF_EINVALID_ARGUMENT, "baseline forward failed: %s",
                         clf_last_error());
    step_end(r, t0);
    say(&r->o, "CLBlast's defaults: %.1f ms per forward", r->base * 1e3);
    return 0;
}

/* Time one parameter set: 0 when it failed or computed wrong results. */
static double
time_candidate(struct run *r, const struct cand *c)
{
    double t0 = clf__now_s(), t, build = 0.0;

    if (clf__tune_apply_xgemm(r->ctx, c->v) != 0 ||
        time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &t,
                        &build) != 0 ||
        same_output(r->ctx, r->y, r->ref, r->got, r->count) != 0)
        t = 0.0; /* rejected by CLBlast, failed or wrong: never chosen */
    step_end_built(r, t0, build);
    return t;
}

static void
note_best(struct run *r, size_t i)
{
    if (r->tried_ms[i] > 0.0 && r->tried_ms[i] < r->best_ms) {
        r->best_ms = r->tried_ms[i];
        r->best = r->cands[i];
        r->have_best = 1;
    }
}

/* The Xgemm candidates not measured yet, while the budget lasts; room is
 * left for the switch's settings and the tiled kernel's sets after them. */
static void
tune_candidates(struct run *r)
{
    char text[512];
    size_t i;
    double t;

    for (i = 0; i < r->ncand; i++) {
        if (r->tried_ms[i] >= 0.0) {
            note_best(r, i);
            r->done++;
            continue;
        }
        if (r->o.max_candidates != 0 && r->measured == r->o.max_candidates)
            return;
        /* Room for this one's build and forwards, and the later steps'
         * forwards (XgemmDirect's baseline and next set, the switch's
         * settings, the tiled sets); of their builds, XgemmDirect's (the
         * others check theirs when they come), so that a call whose budget
         * holds them gets on with both grids. */
        if (!may_build_n(r, 1.0 + direct_builds_due(r),
                         2.0 + (r->ndirect != 0 ? 2.0 : 0.0) + (double)r->nmi +
                             (double)r->ntiled)) {
            r->skipped = r->ncand - r->done;
            say(&r->o,
                "budget reached after %zu of %zu candidates (a kernel "
                "build estimated at %.1f s would not fit); run again "
                "with a larger --budget to continue",
                r->done, r->ncand, build_estimate(r));
            return;
        }
        t = time_candidate(r, &r->cands[i]);
        r->tried_ms[i] = t * 1e3;
        r->done++;
        r->measured++;
        clf__tune_format_xgemm(r->cands[i].v, text, sizeof text);
        if (t > 0.0)
            say(&r->o, "[%zu/%zu] %s: %.1f ms", r->done, r->ncand, text,
                t * 1e3);
        else
            say(&r->o, "[%zu/%zu] %s: failed or wrong results", r->done,
                r->ncand, text);
        note_best(r, i);
    }
}

/* The largest GEMM of the timed layer, as m*n*k, below ALL_DIRECT^3: a
 * projection (n x D by D x D), a compression (k x n by n x D) or a head's
 * product (at most n x n by n x D/h), each at most n*D*max(n, D). */
static int
all_direct_fits(const struct run *r)
{
    double n = (double)r->o.seq_len, d = (double)r->o.d_model;
    double lim = (double)ALL_DIRECT;

    return n * d * (n > d ? n : d) < lim * lim * lim;
}

/* One XgemmDirect set with every GEMM direct: 0 when CLBlast refused it,
 * the forward failed or computed wrong results. */
static double
time_direct(struct run *r, const size_t *v)
{
    double t0 = clf__now_s(), t, build = 0.0;

    if ((v != NULL && clf__tune_apply_direct(r->ctx, v) != 0) ||
        time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &t,
                        &build) != 0 ||
        same_output(r->ctx, r->y, r->ref, r->got, r->count) != 0)
        t = 0.0;
    step_end_built(r, t0, build);
    return t;
}

/* The switch at ALL_DIRECT, and CLBlast's own XgemmDirect set timed so
 * (stored by an earlier call, or measured now, while no XgemmDirect set
 * was applied in this process); -1 when the step cannot go on. */
static int
direct_baseline(struct run *r)
{
    double t;

    if (!may_build(r, 2.0 + (double)r->nmi))
        return -1;
    if (r->direct_base <= 0.0 && strstr(r->ctx->tuned, "XgemmDirect") != NULL) {
        say(&r->o,
            "XgemmDirect: skipped: this context applies a stored set "
            "but its file lacks CLBlast's own set's time; remove %s "
            "and tune again",
            r->path);
        return -1;
    }
    if (clf__tune_apply_min_indirect(r->ctx, ALL_DIRECT) != 0)
        return -1;
    r->all_direct = 1;
    if (r->direct_base > 0.0) {
        say(&r->o,
            "XgemmDirect: CLBlast's own set, every GEMM direct (stored): "
            "%.1f ms",
            r->direct_base);
        return 0;
    }
    t = time_direct(r, NULL);
    if (t <= 0.0) {
        say(&r->o, "XgemmDirect: CLBlast's own set, every GEMM direct, "
                   "failed or computed wrong results");
        return -1;
    }
    r->direct_base = t * 1e3;
    say(&r->o, "XgemmDirect: CLBlast's own set, every GEMM direct: %.1f ms",
        r->direct_base);
    return 0;
}

/* Whether the fastest XgemmDirect set beats CLBlast's own by more than 3%
 * (as a switch setting must): an override cannot be undone within a
 * process, and a smaller gain is within the noise of forwards on a shared
 * CPU. */
static int
direct_wins(const struct run *r)
{
    return r->direct_best < r->ndirect && r->direct_base > 0.0 &&
           r->direct_ms[r->direct_best] < 0.97 * r->direct_base;
}

static void
note_direct(struct run *r, size_t i)
{
    if (r->direct_ms[i] > 0.0 &&
        (r->direct_best == r->ndirect ||
         r->direct_ms[i] < r->direct_ms[r->direct_best]))
        r->direct_best = i;
}

/* CLBlast's XgemmDirect kernel, the one it runs for a GEMM below its
 * switch (m*n*k < XGEMM_MIN_INDIRECT_SIZE^3), which on a device it does
 * not know may be every GEMM of the layer.  Timed with the switch at
 * ALL_DIRECT, above every GEMM of the layer, so that every GEMM of the
 * timed forwards runs XgemmDirect whatever the device's default switch
 * (tests/test_tune.c checks it: under that switch a set outside the
 * kernel's constraints changes the forward's output, under a low one it
 * does not); the Xgemm parameters play no part.  CLBlast's own set first
 * (what a set must beat to be stored), then the grid's sets not measured
 * yet while the budget lasts.  The fastest stays applied for the steps
 * after this one. */
/* Set i of the grid, when not measured yet: 1 when the call's limit or
 * the budget stops the step before it. */
static int
direct_set(struct run *r, size_t i)
{
    char text[256];
    double t;

    if (r->direct_ms[i] < 0.0 && r->o.max_candidates != 0 &&
        r->direct_measured == r->o.max_candidates)
        return 1;
    if (r->direct_ms[i] < 0.0 && !may_build(r, 2.0 + (double)r->nmi)) {
        r->direct_skipped = r->ndirect - r->direct_done;
        say(&r->o,
            "XgemmDirect: budget reached after %zu of %zu sets; run again "
            "with a larger --budget to continue",
            r->direct_done, r->ndirect);
        return 1;
    }
    if (r->direct_ms[i] < 0.0) {
        t = time_direct(r, r->dcands[i].v);
        r->direct_ms[i] = t * 1e3;
        r->direct_measured++;
        clf__tune_format_direct(r->dcands[i].v, text, sizeof text);
        say(&r->o, "XgemmDirect [%zu/%zu] %s: %s%.1f", r->direct_done + 1,
            r->ndirect, text, t > 0.0 ? "ms " : "failed or wrong results ",
            t * 1e3);
    }
    r->direct_done++;
    note_direct(r, i);
    return 0;
}

static void
tune_direct(struct run *r)
{
    size_t i;

    /* What earlier calls measured counts, whether or not this one can go
     * on. */
    for (i = 0; i < r->ndirect; i++)
        note_direct(r, i);
    if (r->ndirect != 0 && !all_direct_fits(r))
        say(&r->o,
            "XgemmDirect: skipped: a GEMM of this layer is not below "
            "XGEMM_MIN_INDIRECT_SIZE=%d cubed",
            ALL_DIRECT);
    if (r->ndirect == 0 || !all_direct_fits(r) || direct_baseline(r) != 0) {
        for (i = 0; i < r->ndirect; i++)
            r->direct_done += r->direct_ms[i] >= 0.0;
        r->direct_skipped = r->ndirect - r->direct_done;
        return;
    }
    for (i = 0; i < r->ndirect && direct_set(r, i) == 0; i++)
        ;
    if (r->direct_best < r->ndirect)
        (void)clf__tune_apply_direct(r->ctx, r->dcands[r->direct_best].v);
}

/* The switch's configuration as it stands (see tune_switch), timed:
 * milliseconds, or 0 when the budget or the forward stopped the step. */
static double
switch_standing(struct run *r)
{
    double t, t0 = clf__now_s(), build = 0.0;

    /* The best may come from an earlier call: then it is built anew. */
    if (!may_build(r, 1.0)) {
        r->mi_skipped = r->nmi;
        return 0.0;
    }
    if (r->have_best)
        clf__tune_apply_xgemm(r->ctx, r->best.v);
    if (r->all_direct && r->prev_mi != 0)
        clf__tune_apply_min_indirect(r->ctx, r->prev_mi);
    if (time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &t,
                        &build) != 0)
        return 0.0;
    step_end_built(r, t0, build);
    say(&r->o, "direct/indirect switch as it stands%s: %.1f ms",
        r->all_direct && r->prev_mi == 0 ? " (every GEMM direct)" : "",
        t * 1e3);
    return t * 1e3;
}

/* CLBlast's switch between its direct GEMM kernel and the indirect one
 * (pad, transpose, Xgemm), with the chosen Xgemm and XgemmDirect
 * parameters in place.  An override cannot be undone within a process, so
 * the configuration as it stands is timed first and a value is kept only
 * when it beats that by more than 3% (a value stored earlier stays
 * otherwise).  As it stands: the stored switch if there is one; else, when
 * tune_direct moved the switch (CLBlast's default cannot be set back),
 * every GEMM direct; else CLBlast's default. */
static void
tune_switch(struct run *r)
{
    double t, now_ms = switch_standing(r), t0, build;
    size_t i;

    if (now_ms <= 0.0)
        return;
    for (i = 0; i < r->nmi; i++) {
        if (!may_build(r, 1.0)) {
            r->mi_skipped = r->nmi - i;
            break;
        }
        t0 = clf__now_s();
        build = 0.0;
        if (clf__tune_apply_min_indirect(r->ctx, mi_values[i]) != 0 ||
            time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &t,
                            &build) != 0 ||
            same_output(r->ctx, r->y, r->ref, r->got, r->count) != 0)
            t = 0.0;
        step_end_built(r, t0, build);
        r->mi_tried++;
        r->mi_ms[i] = t * 1e3;
        say(&r->o, "direct/indirect switch XGEMM_MIN_INDIRECT_SIZE=%zu: %s%.1f",
            mi_values[i], t > 0.0 ? "ms " : "failed or wrong results ",
            t * 1e3);
        if (t > 0.0 && t * 1e3 < 0.97 * now_ms &&
            (r->best_mi == 0 || t * 1e3 < r->best_mi_ms)) {
            r->best_mi = mi_values[i];
            r->best_mi_ms = t * 1e3;
        }
    }
}

/* One set of the tiled kernel's sizes: built, then forwards timed with
 * every GEMM through it; 0 when it failed or computed wrong results. */
static double
time_tiled(struct run *r, const struct clf__tiled_cfg *c)
{
    double t0 = clf__now_s(), t, build = 0.0;

    clf__lock(r->ctx);
    clf__gemm_pin(r->ctx, CLF_GEMM_TILED);
    clf__unlock(r->ctx);
    if (clf__tiled_set(r->ctx, c) != 0 ||
        time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &t,
                        &build) != 0 ||
        same_output(r->ctx, r->y, r->ref, r->got, r->count) != 0)
        t = 0.0;
    clf__lock(r->ctx);
    clf__gemm_pin(r->ctx, CLF_GEMM_CLBLAST);
    clf__unlock(r->ctx);
    step_end_built(r, t0, build);
    return t;
}

/* The tiled kernel's space (clf__tiled_space), the sets not measured yet
 * while the budget lasts; the fastest becomes its best, whatever CLBlast
 * does (the kernel choice compares the two per shape). */
static void
tune_tiled(struct run *r)
{
    struct clf__tiled_cfg was = clf__tiled_state(r->ctx)->cfg;
    char text[128];
    size_t i;

    for (i = 0; i < r->ntiled; i++) {
        if (r->tiled_ms[i] < 0.0 && !may_build(r, 1.0)) {
            r->tiled_skipped++;
        } else if (r->tiled_ms[i] < 0.0) {
            double t = time_tiled(r, &r->tiled[i]);
            r->tiled_tried++;
            r->tiled_ms[i] = t * 1e3;
            clf__tiled_format(&r->tiled[i], text, sizeof text);
            if (t > 0.0)
                say(&r->o, "tiled GEMM %s: %.1f ms", text, t * 1e3);
            else
                say(&r->o, "tiled GEMM %s: failed or wrong results", text);
        }
        if (r->tiled_ms[i] > 0.0 &&
            (r->tiled_best == r->ntiled ||
             r->tiled_ms[i] < r->tiled_ms[r->tiled_best]))
            r->tiled_best = i;
    }
    (void)clf__tiled_set(r->ctx, &was);
    if (r->tiled_best < r->ntiled) {
        clf__tiled_format(&r->tiled[r->tiled_best], text, sizeof text);
        say(&r->o, "tiled GEMM: best %s, %.1f ms per forward", text,
            r->tiled_ms[r->tiled_best]);
    }
}

/* XgemmDirect: its baseline, the sets measured, and the fastest when it
 * beats CLBlast's own set (direct_wins). */
static void
direct_records(const struct run *r, struct clf__tune_file *tf)
{
    size_t i;

    tf->direct_baseline_ms = r->direct_base;
    tf->have_direct = direct_wins(r);
    if (tf->have_direct)
        memcpy(tf->direct, r->dcands[r->direct_best].v, sizeof tf->direct);
    for (i = 0; i < r->ndirect; i++)
        if (r->direct_ms[i] >= 0.0) {
            memcpy(tf->direct_tried[tf->ndirect_tried], r->dcands[i].v,
                   sizeof tf->direct_tried[0]);
            tf->direct_tried_ms[tf->ndirect_tried++] = r->direct_ms[i];
        }
}

/* Everything measured, and the winner if it beats the untuned
 * parameters, as the records of a tune file. */
static void
file_records(const struct run *r, struct clf__tune_file *tf)
{
    size_t i;

    memset(tf, 0, sizeof *tf);
    tf->baseline_ms = r->base * 1e3;
    tf->compile_ms = (r->build_s > 0.0 ? r->build_s : r->stored_build_s) * 1e3;
    tf->have_best = r->have_best && r->best_ms < r->base * 1e3;
    memcpy(tf->best, r->best.v, sizeof tf->best);
    tf->min_indirect = r->best_mi;
    for (i = 0; i < MI_COUNT; i++)
        if (r->mi_ms[i] >= 0.0) {
            tf->mi_tried[tf->nmi_tried] = mi_values[i];
            tf->mi_tried_ms[tf->nmi_tried++] = r->mi_ms[i];
        }
    for (i = 0; i < r->ncand; i++)
        if (r->tried_ms[i] >= 0.0) {
            memcpy(tf->tried[tf->ntried], r->cands[i].v, sizeof tf->tried[0]);
            tf->tried_ms[tf->ntried++] = r->tried_ms[i];
        }
    tf->have_tiled = r->tiled_best < r->ntiled;
    if (tf->have_tiled)
        tf->tiled = r->tiled[r->tiled_best];
    for (i = 0; i < r->ntiled; i++)
        if (r->tiled_ms[i] >= 0.0) {
            tf->tiled_tried[tf->ntiled_tried] = r->tiled[i];
            tf->tiled_tried_ms[tf->ntiled_tried++] = r->tiled_ms[i];
        }
    direct_records(r, tf);
}

/* The tune file of this call, written whole (clf__tune_write). */
static int
tune_write(const struct run *r)
{
    struct clf__tune_file *tf = malloc(sizeof *tf);
    int rc;

    if (tf == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    file_records(r, tf);
    rc = clf__tune_write(r->path, &r->ctx->info, tf);
    free(tf);
    return rc;
}

/* XgemmDirect's winner against CLBlast's own set, both with every GEMM
 * direct. */
static void
report_direct(const struct run *r)
{
    char text[256];
    double ms;

    if (r->direct_best == r->ndirect || r->direct_base <= 0.0)
        return;
    ms = r->direct_ms[r->direct_best];
    clf__tune_format_direct(r->dcands[r->direct_best].v, text, sizeof text);
    if (direct_wins(r))
        say(&r->o,
            "XgemmDirect: best %s: %.1f ms per forward with every GEMM direct "
            "(%.2fx CLBlast's own set's %.1f ms); stored",
            text, ms, r->direct_base / ms, r->direct_base);
    else
        say(&r->o,
            "XgemmDirect: no set beat CLBlast's own by more than 3%% (%.1f "
            "ms with every GEMM direct; the fastest, %s, took %.1f ms)",
            r->direct_base, text, ms);
}

static void
tune_report(const struct run *r)
{
    char text[512];
    double base_ms = r->base * 1e3;

    report_direct(r);
    if (!(r->have_best && r->best_ms < base_ms)) {
        say(&r->o,
            "no candidate beat the current parameters (%.1f ms); "
            "stored the measurements in %s",
            base_ms, r->path);
        return;
    }
    clf__tune_format_xgemm(r->best.v, text, sizeof text);
    say(&r->o,
        "best: %s: %.1f ms per forward (%.2fx the untuned %.1f ms); "
        "stored in %s",
        text, r->best_ms, base_ms / r->best_ms, base_ms, r->path);
    if (r->best_mi != 0 && r->best_mi_ms > 0.0)
        say(&r->o,
            "with XGEMM_MIN_INDIRECT_SIZE=%zu: %.1f ms (%.2fx the "
            "untuned)",
            r->best_mi, r->best_mi_ms, base_ms / r->best_mi_ms);
    else if (r->best_mi != 0)
        say(&r->o, "keeping the stored XGEMM_MIN_INDIRECT_SIZE=%zu",
            r->best_mi);
}

static void
run_free(struct run *r)
{
    clf_attention_destroy(r->att);
    if (r->x != NULL)
        clReleaseMemObject(r->x);
    if (r->y != NULL)
        clReleaseMemObject(r->y);
    free(r->ref);
    free(r->got);
    /* The context's choices were made against the old parameters: they are
     * made again at its next forward (those not made yet stay unmade). */
    if (r->forced) {
        clf__lock(r->ctx);
        clf__gemm_pin(r->ctx, r->was_gemm);
        clf__ways_pin(r->ctx, r->was_attend);
        clf__unlock(r->ctx);
    }
    free(r);
}

/* The first `want` of n (all of them when want is 0). */
static size_t
first_of(size_t n, size_t want)
{
    return want != 0 && want < n ? want : n;
}

/* Keeps sets 0, step, 2 * step ... of the n in d, in order; returns how
 * many. */
static size_t
every_nth(struct dcand *d, size_t n, size_t step)
{
    size_t i, kept = 0;

    for (i = 0; i < n; i += step)
        d[kept++] = d[i];
    return kept;
}

static int
run_init(struct run *r, clf_context *ctx, const struct clf__tune_space *space)
{
    struct clf__limits lim;
    size_t i;

    r->ctx = ctx;
    r->start = clf__now_s();
    r->best_ms = INFINITY;
    clf__tune_path(&ctx->info, r->path, sizeof r->path);
    if (r->path[0] == '\0')
        return clf__fail(CLF_EIO, "no cache directory to store tuning in "
                                  "(CLINFORMER_CACHE_DIR is off and no "
                                  "HOME)");
    clf__device_limits(ctx, &lim);
    r->ncand = first_of(make_candidates(r->cands, MAX_CANDS, &lim),
                        space != NULL ? space->xgemm : 0);
    r->nmi = first_of(MI_COUNT, space != NULL ? space->switches : 0);
    for (i = 0; i < MAX_CANDS; i++)
        r->tried_ms[i] = -1.0;
    r->ndirect = make_direct(r->dcands, CLF_TUNE_MAX_DIRECT, &lim);
    if (space != NULL && space->direct_step > 1)
        r->ndirect = every_nth(r->dcands, r->ndirect, space->direct_step);
    r->ndirect = first_of(r->ndirect, space != NULL ? space->direct : 0);
    r->direct_best = r->ndirect;
    for (i = 0; i < CLF_TUNE_MAX_DIRECT; i++)
        r->direct_ms[i] = -1.0;
    r->ntiled = clf__tiled_space(r->tiled, CLF_TUNE_MAX_TILED, &lim);
    r->tiled_best = r->ntiled;
    for (i = 0; i < CLF_TUNE_MAX_TILED; i++)
        r->tiled_ms[i] = -1.0;
    for (i = 0; i < MI_COUNT; i++)
        r->mi_ms[i] = -1.0;
    return 0;
}

/* How far the call got within its budget: what was tried of each step
 * and what was left out for the budget. */
static void
say_budget(const struct run *r)
{
    say(&r->o,
        "budget: %.1f s of %.3g s; candidates: %zu of %zu tried, %zu "
        "skipped for the budget; XgemmDirect sets: %zu of %zu tried, %zu "
        "skipped; switch settings: %zu tried, %zu skipped; tiled sets: %zu "
        "tried, %zu skipped (a kernel build estimated at %.1f s)",
        clf__now_s() - r->start, r->o.budget_s, r->done, r->ncand, r->skipped,
        r->direct_done, r->ndirect, r->direct_skipped, r->mi_tried,
        r->mi_skipped, r->tiled_tried, r->tiled_skipped, build_estimate(r));
}

/* The steps in order; 1 when the budget ran out before anything was
 * measured. */
static int
tune_steps(struct run *r)
{
    char dir[4096];
    int rc;

    clf__cache_dir(dir, sizeof dir);
    CLF_TRY(clf__dir_private(dir));
    CLF_TRY(tune_resume(r));
    /* Every GEMM of the timed forwards through CLBlast, whose parameters
     * are what is tuned. */
    clf__lock(r->ctx);
    r->was_gemm = clf__gemm_pinned(r->ctx);
    r->was_attend = clf__ways_pinned(r->ctx);
    clf__gemm_pin(r->ctx, CLF_GEMM_CLBLAST);
    clf__ways_pin(r->ctx, CLF_ATTEND_GEMM);
    clf__unlock(r->ctx);
    r->forced = 1;
    CLF_TRY(tune_setup(r));
    say(&r->o, "tuning %s / %s for D=%zu h=%zu k=%zu n=%zu, budget %.0f s",
        r->ctx->info.platform, r->ctx->info.name, r->o.d_model, r->o.heads,
        r->o.k, r->o.seq_len, r->o.budget_s);
    rc = tune_baseline(r);
    if (rc != 0)
        return rc;
    tune_candidates(r);
    tune_direct(r);
    tune_switch(r);
    tune_tiled(r);
    if (r->best_mi == 0 && r->prev_mi != 0)
        r->best_mi = r->prev_mi;
    CLF_TRY(tune_write(r));
    tune_report(r);
    say_budget(r);
    return clf__tune_apply_stored(r->ctx);
}

int
clf__tune_in(clf_context *ctx, const clf_tune_opts *opts,
             const struct clf__tune_space *space)
{
    struct run *r;
    int rc;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    r = calloc(1, sizeof *r);
    if (r == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    rc = tune_opts(opts, &r->o, &r->count);
    if (rc == 0)
        rc = run_init(r, ctx, space);
    if (rc == 0)
        rc = tune_steps(r);
    if (rc == 1) {
        say(&r->o, "budget of %.3g s reached before anything was measured",
            r->o.budget_s);
        r->skipped = r->ncand - r->done;
        r->mi_skipped = r->nmi;
        r->direct_skipped = r->ndirect;
        r->tiled_skipped = r->ntiled;
        say_budget(r);
        rc = 0;
    }
    run_free(r);
    return rc;
}

CLF_EXTERN int
clf_tune(clf_context *ctx, const clf_tune_opts *opts)
{
    return clf__tune_in(ctx, opts, NULL);
}
