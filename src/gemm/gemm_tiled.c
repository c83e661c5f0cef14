/* The work-group tiled GEMM (cl/gemm_tiled.cl): a GPU-shaped candidate of
 * the `gemm` kernel choice beside CLBlast and the blocked kernel.  Its six
 * sizes are -D options: the defaults of kernel_params.h are built into the
 * context's program; another set (from `clinformer tune`) is built as a
 * program of its own, cached on disk under a key that holds the options. */
#include "gemm/gemm.h"

#include <stdio.h>
#include <string.h>

const char *const clf__tiled_names[CLF_TILED_NPARAM] = {"MWG",  "NWG",  "KWG",
                                                        "MDIM", "NDIM", "VW"};

void
clf__tiled_default(struct clf__tiled_cfg *cfg)
{
    cfg->v[CLF_TILED_P_MWG] = CLF_TILED_MWG;
    cfg->v[CLF_TILED_P_NWG] = CLF_TILED_NWG;
    cfg->v[CLF_TILED_P_KWG] = CLF_TILED_KWG;
    cfg->v[CLF_TILED_P_MDIM] = CLF_TILED_MDIM;
    cfg->v[CLF_TILED_P_NDIM] = CLF_TILED_NDIM;
    cfg->v[CLF_TILED_P_VW] = CLF_TILED_VW;
}

void
clf__tiled_format(const struct clf__tiled_cfg *cfg, char *buf, size_t cap)
{
    size_t len = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < CLF_TILED_NPARAM && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s=%zu", i ? " " : "",
                                clf__tiled_names[i], cfg->v[i]);
}

static int
pow2_in(size_t v, size_t lo, size_t hi)
{
    return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

/* The kernel's rules: powers of two in range, whole register blocks, at
 * most 64 accumulators per work-item. */
static int
check_shape(const size_t *v, char *why, size_t cap)
{
    static const size_t lo[CLF_TILED_NPARAM] = {1, 1, 1, 1, 1, 1};
    static const size_t hi[CLF_TILED_NPARAM] = {256, 256, 64, 64, 64, 8};
    int i;

    for (i = 0; i < CLF_TILED_NPARAM; i++)
        if (!pow2_in(v[i], lo[i], hi[i])) {
            snprintf(why, cap, "%s=%zu is not a power of two from %zu to %zu",
                     clf__tiled_names[i], v[i], lo[i], hi[i]);
            return -1;
        }
    if (v[CLF_TILED_P_MWG] % v[CLF_TILED_P_MDIM] != 0 ||
        v[CLF_TILED_P_NWG] % (v[CLF_TILED_P_NDIM] * v[CLF_TILED_P_VW]) != 0) {
        snprintf(why, cap,
                 "MWG=%zu is not a multiple of MDIM=%zu or NWG=%zu of "
                 "NDIM*VW=%zu",
                 v[CLF_TILED_P_MWG], v[CLF_TILED_P_MDIM], v[CLF_TILED_P_NWG],
                 v[CLF_TILED_P_NDIM] * v[CLF_TILED_P_VW]);
        return -1;
    }
    if (v[CLF_TILED_P_MWG] / v[CLF_TILED_P_MDIM] * v[CLF_TILED_P_NWG] /
            v[CLF_TILED_P_NDIM] >
        64) {
        snprintf(why, cap, "a register block of %zu x %zu exceeds 64 floats",
                 v[CLF_TILED_P_MWG] / v[CLF_TILED_P_MDIM],
                 v[CLF_TILED_P_NWG] / v[CLF_TILED_P_NDIM]);
        return -1;
    }
    return 0;
}

int
clf__tiled_check(const struct clf__tiled_cfg *cfg,
                 const struct clf__limits *lim, char *why, size_t cap)
{
    const size_t *v = cfg->v;
    const struct clf__footprint f = {
        "NDIM",
        "MDIM",
        v[CLF_TILED_P_NDIM],
        v[CLF_TILED_P_MDIM],
        4ull * v[CLF_TILED_P_KWG] *
            (v[CLF_TILED_P_MWG] + 1 + v[CLF_TILED_P_NWG] + v[CLF_TILED_P_VW]),
        "the tiles"};

    if (check_shape(v, why, cap) != 0)
        return -1;
    return clf__limits_check(lim, &f, why, cap);
}

/* The space `clinformer tune` searches: the defaults first, then tiles for
 * large GPUs (128 x 128, 8 x 8 blocks), narrower vectors, small groups for
 * small devices and CPUs. */
size_t
clf__tiled_space(struct clf__tiled_cfg *out, size_t cap,
                 const struct clf__limits *lim)
{
    static const size_t sets[][CLF_TILED_NPARAM] = {
        {CLF_TILED_MWG, CLF_TILED_NWG, CLF_TILED_KWG, CLF_TILED_MDIM,
         CLF_TILED_NDIM, CLF_TILED_VW},
        {128, 128, 8, 16, 16, 4},
        {64, 64, 16, 16, 16, 2},
        {128, 64, 16, 16, 16, 4},
        {32, 32, 16, 8, 8, 2},
        {64, 128, 8, 8, 16, 8},
        {32, 64, 32, 4, 8, 8},
        {16, 16, 16, 4, 4, 4},
    };
    char why[200];
    size_t n = 0, i;

    for (i = 0; i < sizeof sets / sizeof sets[0] && n < cap; i++) {
        memcpy(out[n].v, sets[i], sizeof out[n].v);
        if (clf__tiled_check(&out[n], lim, why, sizeof why) == 0)
            n++;
    }
    return n;
}

static int
is_default(const struct clf__tiled_cfg *cfg)
{
    struct clf__tiled_cfg d;

    clf__tiled_default(&d);
    return memcmp(d.v, cfg->v, sizeof d.v) == 0;
}

/* The build options of the tiled program: those of kernel_params.h with
 * the tiled sizes replaced. */
static void
tiled_options(const struct clf__tiled_cfg *cfg, char *buf, size_t cap)
{
    static const char *const over[CLF_TILED_NPARAM] = {
        "CLF_TILED_MWG",  "CLF_TILED_NWG",  "CLF_TILED_KWG",
        "CLF_TILED_MDIM", "CLF_TILED_NDIM", "CLF_TILED_VW"};

    clf__kernel_options(over, cfg->v, CLF_TILED_NPARAM, buf, cap);
}

/* The program, kernel and workspace of a state (sizes kept). */
static void
drop_programs(struct clf__tiled_state *st)
{
    if (st->kernel != NULL)
        clReleaseKernel(st->kernel);
    if (st->program != NULL)
        clReleaseProgram(st->program);
    st->kernel = NULL;
    st->program = NULL;
}

static void
release_state(clf_context *ctx, void *state)
{
    struct clf__tiled_state *st = state;

    (void)ctx;
    drop_programs(st);
    if (st->partial != NULL)
        clReleaseMemObject(st->partial);
    st->partial = NULL;
    st->partial_cap = 0;
}

static const char state_key = 0;

static void
init_state(clf_context *ctx, void *state)
{
    struct clf__tiled_state *st = state;

    (void)ctx;
    clf__tiled_default(&st->cfg);
    st->usable = -1;
}

struct clf__tiled_state *
clf__tiled_state(clf_context *ctx)
{
    return clf__feature(ctx, &state_key, sizeof(struct clf__tiled_state),
                        init_state, release_state);
}

/* The program and kernel for a set other than the defaults. */
static int
build_set(clf_context *ctx, const struct clf__tiled_cfg *cfg, cl_program *prog,
          cl_kernel *kernel)
{
    char options[1024];
    cl_int err;

    tiled_options(cfg, options, sizeof options);
    CLF_TRY(clf__program_build_part(ctx, CLF_PART_TILED_SET, options, prog));
    *kernel = clCreateKernel(*prog, "clf_gemm_tiled", &err);
    if (*kernel == NULL) {
        clReleaseProgram(*prog);
        *prog = NULL;
        return clf__fail(err,
                         "kernel clf_gemm_tiled: clCreateKernel failed "
                         "(%d)",
                         err);
    }
    return 0;
}

/* The built kernel (NULL: the main program's) takes work-groups of
 * NDIM x MDIM on this device: a compiler may allow fewer work-items than
 * the device's limit to a kernel that needs many registers. */
static int
kernel_fits(clf_context *ctx, cl_kernel kernel,
            const struct clf__tiled_cfg *cfg, char *why, size_t cap)
{
    size_t wg = ctx->kernel_wg[CLF_K_GEMM_TILED];
    size_t need = cfg->v[CLF_TILED_P_MDIM] * cfg->v[CLF_TILED_P_NDIM];

    if (kernel != NULL)
        wg = clf__kernel_wg(ctx, kernel);
    if (wg >= need)
        return 0;
    snprintf(why, cap,
             "the kernel takes work-groups of at most %zu work-items on "
             "this device, not %zu",
             wg, need);
    return -1;
}

static int
set_locked(clf_context *ctx, const struct clf__tiled_cfg *cfg)
{
    struct clf__tiled_state *st = clf__tiled_state(ctx);
    struct clf__limits lim;
    cl_program prog = NULL;
    cl_kernel kernel = NULL;
    char why[256], text[128];

    if (st == NULL)
        return CLF_ENO_MEMORY;
    clf__device_limits(ctx, &lim);
    if (clf__tiled_check(cfg, &lim, why, sizeof why) != 0) {
        clf__tiled_format(cfg, text, sizeof text);
        return clf__fail(CLF_EINVALID_ARGUMENT, "tiled GEMM sizes %s: %s", text,
                         why);
    }
    CLF_TRY(clf_context_build(ctx));
    if (!is_default(cfg))
        CLF_TRY(build_set(ctx, cfg, &prog, &kernel));
    if (kernel_fits(ctx, kernel, cfg, why, sizeof why) != 0) {
        if (kernel != NULL)
            clReleaseKernel(kernel);
        if (prog != NULL)
            clReleaseProgram(prog);
        clf__tiled_format(cfg, text, sizeof text);
        return clf__fail(CLF_EINVALID_ARGUMENT, "tiled GEMM sizes %s: %s", text,
                         why);
    }
    drop_programs(st);
    st->program = prog;
    st->kernel = kernel;
    st->cfg = *cfg;
    st->usable = -1;
    return 0;
}

int
clf__tiled_usable(clf_context *ctx)
{
    struct clf__tiled_state *st = clf__tiled_state(ctx);
    struct clf__limits lim;
    char why[256];

    if (st == NULL)
        return 0;
    if (st->usable < 0) {
        clf__device_limits(ctx, &lim);
        st->usable =
            clf_context_build(ctx) == 0 &&
            clf__tiled_check(&st->cfg, &lim, why, sizeof why) == 0 &&
            kernel_fits(ctx, st->kernel, &st->cfg, why, sizeof why) == 0;
    }
    return st->usable;
}

int
clf__tiled_set(clf_context *ctx, const struct clf__tiled_cfg *cfg)
{
    int rc;

    clf__lock(ctx);
    rc = set_locked(ctx, cfg);
    clf__unlock(ctx);
    return rc;
}

/* Back to the sizes a new context starts with, checked no more than a new
 * context's are: a device whose limits refuse them (rusticl on llvmpipe
 * takes 32 items a group, the defaults 64) starts with them too. */
int
clf__tiled_reset(clf_context *ctx)
{
    struct clf__tiled_state *st;

    clf__lock(ctx);
    st = clf__tiled_state(ctx);
    if (st != NULL) {
        drop_programs(st);
        clf__tiled_default(&st->cfg);
        st->usable = -1;
    }
    clf__unlock(ctx);
    return st != NULL ? 0 : CLF_ENO_MEMORY;
}

int
clf__tiled_fits(size_t m, size_t n, size_t k, size_t lda, size_t ldb,
                size_t ldc)
{
    return m <= 0xffffffffu && n <= 0xffffffffu && k <= 0xffffffffu &&
           lda <= 0xffffffffu && ldb <= 0xffffffffu && ldc <= 0xffffffffu;
}

/* A split over K: ksplit slices of kchunk steps of K each (a whole number
 * of KWG), the partial products into `partial`, s_stride floats apart. */
struct split {
    cl_uint ksplit, kchunk;
    cl_ulong s_stride;
    cl_mem partial;
};

/* The epilogue both the kernel and the reduction end with: C = alpha A B +
 * beta C, plus the bias, then GELU. */
struct epilogue {
    float beta;
    cl_mem c, bias;
    cl_ulong co, cs;
    cl_uint lc, has_bias, act;
};

static void
epilogue_of(const struct clf__gemm_args *g, struct epilogue *e)
{
    e->beta = g->beta;
    e->c = g->c;
    e->bias = g->bias != NULL ? g->bias : g->c; /* not read */
    e->co = g->c_off;
    e->cs = g->c_stride;
    e->lc = (cl_uint)g->ldc;
    e->has_bias = g->bias != NULL;
    e->act = (cl_uint)g->act;
}

/* Its 8 arguments from index first on: beta, C, C's offset, leading
 * dimension and stride, the bias, whether there is one, GELU. */
static int
set_epilogue(cl_kernel kk, cl_uint first, const struct epilogue *e)
{
    CLF_SET_ARG(kk, first, e->beta);
    CLF_SET_ARG(kk, first + 1, e->c);
    CLF_SET_ARG(kk, first + 2, e->co);
    CLF_SET_ARG(kk, first + 3, e->lc);
    CLF_SET_ARG(kk, first + 4, e->cs);
    CLF_SET_ARG(kk, first + 5, e->bias);
    CLF_SET_ARG(kk, first + 6, e->has_bias);
    CLF_SET_ARG(kk, first + 7, e->act);
    return 0;
}

/* Sets the 25 arguments of the kernel; with a split, C is the workspace
 * (rows of N, products M * N apart) and nothing is added to it. */
static int
set_args(cl_kernel kk, const struct clf__gemm_args *g, const struct split *sp)
{
    cl_uint M = (cl_uint)g->m, N = (cl_uint)g->n, K = (cl_uint)g->k;
    cl_uint la = (cl_uint)g->lda, lb = (cl_uint)g->ldb;
    cl_uint ta = g->trans_a != 0, tb = g->trans_b != 0;
    cl_ulong ao = g->a_off, as = g->a_stride, bo = g->b_off;
    cl_ulong bs = g->b_stride;
    struct epilogue e;

    epilogue_of(g, &e);
    if (sp->ksplit > 1) {
        e.c = sp->partial;
        e.co = 0;
        e.lc = N;
        e.cs = (cl_ulong)g->m * g->n;
        e.beta = 0.0f;
        e.has_bias = e.act = 0;
    }

    CLF_SET_ARG(kk, 0, M);
    CLF_SET_ARG(kk, 1, N);
    CLF_SET_ARG(kk, 2, K);
    CLF_SET_ARG(kk, 3, g->alpha);
    CLF_SET_ARG(kk, 4, g->a);
    CLF_SET_ARG(kk, 5, ao);
    CLF_SET_ARG(kk, 6, la);
    CLF_SET_ARG(kk, 7, as);
    CLF_SET_ARG(kk, 8, ta);
    CLF_SET_ARG(kk, 9, g->b);
    CLF_SET_ARG(kk, 10, bo);
    CLF_SET_ARG(kk, 11, lb);
    CLF_SET_ARG(kk, 12, bs);
    CLF_SET_ARG(kk, 13, tb);
    CLF_TRY(set_epilogue(kk, 14, &e));
    CLF_SET_ARG(kk, 22, sp->ksplit);
    CLF_SET_ARG(kk, 23, sp->kchunk);
    CLF_SET_ARG(kk, 24, sp->s_stride);
    return 0;
}

size_t
clf__tiled_split(clf_context *ctx, size_t m, size_t n, size_t k, size_t batch,
                 size_t *kchunk)
{
    struct clf__tiled_state *st = clf__tiled_state(ctx);
    size_t kwg, groups, want, target, steps;
    const size_t *v;

    *kchunk = k;
    if (st == NULL)
        return 1;
    v = st->cfg.v;
    kwg = v[CLF_TILED_P_KWG];
    groups = ((n + v[CLF_TILED_P_NWG] - 1) / v[CLF_TILED_P_NWG]) *
             ((m + v[CLF_TILED_P_MWG] - 1) / v[CLF_TILED_P_MWG]) * batch;
    want = st->split;
    steps = (k + kwg - 1) / kwg;

    /* By the device: where the tiles of C give fewer than two work-groups
     * a compute unit, as many slices as make four, each at least four KWG
     * steps long (at most 64 slices).  Only on devices of 16 compute units
     * or more: a CPU runtime's few cores are filled by a handful of tiles,
     * and an extra pass to reduce would only cost it. */
    if (want == 0) {
        target = ctx->info.compute_units;
        want = target < 16 || groups >= 2 * target
                   ? 1
                   : (4 * target + groups - 1) / groups;
        if (want > steps / 4)
            want = steps / 4;
        if (want > 64)
            want = 64;
    }
    if (want > steps)
        want = steps;
    if (want <= 1)
        return 1;
    *kchunk = (steps + want - 1) / want * kwg;
    return (k + *kchunk - 1) / *kchunk; /* every slice holds some of K */
}

cl_mem
clf__gemm_partial(clf_context *ctx, size_t floats)
{
    struct clf__tiled_state *st = clf__tiled_state(ctx);
    cl_int err;
    cl_mem m;

    if (st == NULL)
        return NULL;
    if (st->partial_cap >= floats)
        return st->partial;
    if (floats > SIZE_MAX / sizeof(float) ||
        (ctx->info.max_alloc != 0 &&
         floats * sizeof(float) > ctx->info.max_alloc))
        return NULL;
    m = clf__mem_create(ctx, CL_MEM_READ_WRITE, floats * sizeof(float), NULL,
                        &err, "tiled GEMM partial sums");
    if (m == NULL)
        return NULL;
    if (st->partial != NULL)
        clReleaseMemObject(st->partial);
    st->partial = m;
    st->partial_cap = floats;
    return m;
}

int
clf__gemm_reduce(clf_context *ctx, const struct clf__gemm_args *g,
                 cl_mem partial, size_t ksplit, size_t s_stride)
{
    cl_kernel k = ctx->kernels[CLF_K_GEMM_TILED_REDUCE];
    cl_uint B = (cl_uint)g->batch, M = (cl_uint)g->m, N = (cl_uint)g->n;
    cl_uint ks = (cl_uint)ksplit;
    cl_ulong ss = s_stride;
    struct epilogue e;

    if (k == NULL) { /* the product ran in a tuned set's own program */
        CLF_TRY(clf_context_build(ctx));
        k = ctx->kernels[CLF_K_GEMM_TILED_REDUCE];
    }
    epilogue_of(g, &e);
    CLF_SET_ARG(k, 0, partial);
    CLF_SET_ARG(k, 1, ks);
    CLF_SET_ARG(k, 2, ss);
    CLF_SET_ARG(k, 3, B);
    CLF_SET_ARG(k, 4, M);
    CLF_SET_ARG(k, 5, N);
    CLF_TRY(set_epilogue(k, 6, &e));
    return clf__launch_1d(ctx, CLF_K_GEMM_TILED_REDUCE, g->batch * g->m * g->n);
}

/* The split of g on this device, its workspace ready; ksplit 1 for none. */
static void
plan_split(clf_context *ctx, const struct clf__gemm_args *g, struct split *sp)
{
    size_t kchunk,
        n = clf__tiled_split(ctx, g->m, g->n, g->k, g->batch, &kchunk);
    size_t per = g->batch * g->m * g->n;

    memset(sp, 0, sizeof *sp);
    sp->ksplit = 1;
    sp->kchunk = (cl_uint)g->k;
    if (n <= 1 || per > SIZE_MAX / n || g->batch * n > 0xffffffffu ||
        (sp->partial = clf__gemm_partial(ctx, n * per)) == NULL)
        return;
    sp->ksplit = (cl_uint)n;
    sp->kchunk = (cl_uint)kchunk;
    sp->s_stride = per;
}

int
clf__tiled_gemm(clf_context *ctx, const struct clf__gemm_args *g)
{
    struct clf__tiled_state *st = clf__tiled_state(ctx);
    const size_t *v;
    cl_kernel kk;
    size_t local[3], global[3];
    struct split sp;
    cl_int err;

    if (g->m == 0 || g->n == 0 || g->batch == 0)
        return 0;
    if (st == NULL)
        return CLF_ENO_MEMORY;
    v = st->cfg.v;
    kk = st->kernel != NULL ? st->kernel : ctx->kernels[CLF_K_GEMM_TILED];
    if (kk == NULL) {
        CLF_TRY(clf_context_build(ctx));
        kk = ctx->kernels[CLF_K_GEMM_TILED];
    }
    plan_split(ctx, g, &sp);
    CLF_TRY(set_args(kk, g, &sp));
    local[0] = v[CLF_TILED_P_NDIM];
    local[1] = v[CLF_TILED_P_MDIM];
    local[2] = 1;
    global[0] = (g->n + v[CLF_TILED_P_NWG] - 1) / v[CLF_TILED_P_NWG] * local[0];
    global[1] = (g->m + v[CLF_TILED_P_MWG] - 1) / v[CLF_TILED_P_MWG] * local[1];
    global[2] = g->batch * sp.ksplit;
    st->calls++;
    err = clf__enqueue_nd(ctx, kk, 3, global, local);
    if (err != CL_SUCCESS)
        return clf__fail(err,
                         "tiled GEMM %zux%zux%zu x%zu: enqueue of a "
                         "work-group of %zu x %zu failed (%d)",
                         g->m, g->n, g->k, g->batch, local[0], local[1], err);
    return sp.ksplit > 1
               ? clf__gemm_reduce(ctx, g, sp.partial, sp.ksplit, sp.s_stride)
               : 0;
}
