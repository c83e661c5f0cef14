/* GEMMs on the context's in-order queue: CLBlast's, the register-blocked
 * GEMM kernel (cl/, same stem) or the tiled one (gemm_tiled.c), whichever the
 * context measured fastest.  CLBlast takes no wait list; ordering comes
 * from the queue being in order. */
#include "gemm/gemm.h"

#include <clblast_c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CLBlastTranspose
tr(int t)
{
    return t ? CLBlastTransposeYes : CLBlastTransposeNo;
}

/* --------------------------------------------------------- the state */

/* Whether the device prefers 16-float vectors (AVX-512 on PoCL).  The
 * blocked GEMM's 64-column block holds 4 such vectors a row, which fits
 * there; with 8-float vectors (AVX2: 16 registers) its accumulators
 * spill to the stack, and 16-column blocks ran the n=4096 layer
 * 1.5-1.7x faster. */
static int
prefers_float16(cl_device_id device)
{
    cl_uint w = 0;

    return clGetDeviceInfo(device, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT,
                           sizeof w, &w, NULL) == CL_SUCCESS &&
           w >= 16;
}

static void
release_state(clf_context *ctx, void *state)
{
    struct clf__gemm_state *st = state;

    /* oclgrind's programs do not keep their context alive: CLBlast's
     * program cache, emptied at process exit, would release programs of a
     * context already gone, and the simulator then corrupts the heap.
     * There the cache goes with the context that used it. */
    if (st->gemm_calls > 0 &&
        strncmp(ctx->info.stable_name, "oclgrind", 8) == 0)
        CLBlastClearCache();
    if (st->scratch != NULL)
        clReleaseMemObject(st->scratch);
    st->scratch = NULL;
    st->scratch_cap = 0;
}

static const char state_key = 0;

static void
init_state(clf_context *ctx, void *state)
{
    struct clf__gemm_state *st = state;

    st->cols64 = prefers_float16(ctx->device);
}

struct clf__gemm_state *
clf__gemm_state(clf_context *ctx)
{
    return clf__feature(ctx, &state_key, sizeof(struct clf__gemm_state),
                        init_state, release_state);
}

int
clf__gemm_clblast_records(clf_context *ctx, int records)
{
    struct clf__gemm_state *st = clf__gemm_state(ctx);

    if (st == NULL)
        return CLF_ENO_MEMORY;
    st->clblast_records = records != 0;
    st->clblast_dropped = 0;
    return 0;
}

/* The state, or CLF_ENO_MEMORY from the caller (clf__feature set the
 * message). */
#define STATE(ctx, st)                                                         \
    do {                                                                       \
        if (((st) = clf__gemm_state(ctx)) == NULL)                             \
            return CLF_ENO_MEMORY;                                             \
    } while (0)

/* ------------------------------------------------ the blocked kernel */

/* The context's scratch buffer, grown to at least `floats`.  Commands
 * already queued keep an old buffer alive until they finish. */
static int
scratch(clf_context *ctx, size_t floats, cl_mem *out)
{
    struct clf__gemm_state *st;
    cl_int err;

    STATE(ctx, st);
    if (st->scratch_cap < floats) {
        if (st->scratch != NULL)
            clReleaseMemObject(st->scratch);
        st->scratch_cap = 0;
        st->scratch =
            clf__mem_create(ctx, CL_MEM_READ_WRITE, floats * sizeof(float),
                            NULL, &err, "GEMM scratch");
        if (st->scratch == NULL)
            return clf__fail(err,
                             "GEMM scratch: clCreateBuffer of %zu bytes "
                             "failed (%d)",
                             floats * sizeof(float), err);
        st->scratch_cap = floats;
    }
    *out = st->scratch;
    return 0;
}

static int
transpose_unlocked(clf_context *ctx, cl_mem src, size_t off, size_t rows,
                   size_t cols, size_t ld, size_t stride, size_t batch,
                   cl_mem dst)
{
    cl_kernel k = ctx->kernels[CLF_K_TRANSPOSE];
    cl_ulong o = off, s = stride;
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols, l = (cl_uint)ld;
    size_t g[3];

    if (rows == 0 || cols == 0 || batch == 0)
        return 0;
    CLF_SET_ARG(k, 0, src);
    CLF_SET_ARG(k, 1, o);
    CLF_SET_ARG(k, 2, r);
    CLF_SET_ARG(k, 3, c);
    CLF_SET_ARG(k, 4, l);
    CLF_SET_ARG(k, 5, s);
    CLF_SET_ARG(k, 6, dst);
    g[0] = cols;
    g[1] = rows;
    g[2] = batch;
    return clf__enqueue3(ctx, CLF_K_TRANSPOSE, g, 0, "transpose");
}

int
clf__transpose(clf_context *ctx, cl_mem src, size_t off, size_t rows,
               size_t cols, size_t ld, size_t stride, size_t batch, cl_mem dst)
{
    int rc;

    clf__lock(ctx);
    rc = transpose_unlocked(ctx, src, off, rows, cols, ld, stride, batch, dst);
    clf__unlock(ctx);
    return rc;
}

/* The blocked kernel on g: with k_last 0, every matrix of the batch g->k
 * steps long (clf_gemm_nn); else the split way's slices, the batch's last
 * matrix k_last steps long (clf_gemm_nn_slices). */
static int
gemm_nn_unlocked(clf_context *ctx, const struct clf__gemm_args *g,
                 size_t k_last)
{
    const enum clf__kernel_id id =
        k_last != 0 ? CLF_K_GEMM_NN_SLICES : CLF_K_GEMM_NN;
    cl_kernel kk = ctx->kernels[id];
    cl_uint has_bias = g->bias != NULL, kact = (cl_uint)g->act;
    cl_uint last = (cl_uint)k_last;
    struct clf__gemm_state *st;
    cl_uint acc = g->beta != 0.0f, cols64;
    /* bias not read where there is none */
    cl_mem bias = g->bias != NULL ? g->bias : g->c;
    size_t gs[3];

    if (g->m == 0 || g->n == 0 || g->batch == 0)
        return 0;
    STATE(ctx, st);
    cols64 = st->cols64 != 0;
    CLF_TRY(clf__gemm_set_operands(kk, g));
    CLF_SET_ARG(kk, 16, acc);
    CLF_SET_ARG(kk, 17, bias);
    CLF_SET_ARG(kk, 18, has_bias);
    CLF_SET_ARG(kk, 19, kact);
    CLF_SET_ARG(kk, 20, cols64);
    if (k_last != 0)
        CLF_SET_ARG(kk, 21, last);
    gs[0] = (g->m + CLF_GEMM_ROWS - 1) / CLF_GEMM_ROWS;
    gs[1] = cols64 ? g->n / 64 + (g->n % 64) / 16 : g->n / 16;
    gs[2] = g->batch;
    /* each id named in its call: scripts/gpu-shape.sh reads launch
     * geometry from these lines */
    if (k_last != 0)
        return clf__enqueue3(ctx, CLF_K_GEMM_NN_SLICES, gs, 1,
                             "blocked GEMM's slices");
    return clf__enqueue3(ctx, CLF_K_GEMM_NN, gs, 1, "blocked GEMM");
}

int
clf__gemm_nn(clf_context *ctx, const struct clf__gemm_args *g)
{
    int rc;

    clf__lock(ctx);
    rc = gemm_nn_unlocked(ctx, g, 0);
    clf__unlock(ctx);
    return rc;
}

/* The blocked kernel takes A untransposed, n a multiple of 16, beta 0 or
 * 1, and sizes that fit its 32-bit arguments. */
static int
blocked_takes(clf_context *ctx, const struct clf__gemm_args *g)
{
    (void)ctx;
    return !g->trans_a && g->n % 16 == 0 &&
           (g->beta == 0.0f || g->beta == 1.0f) && g->m <= 0xffffffffu &&
           g->n <= 0xffffffffu && g->k <= 0xffffffffu &&
           g->lda <= 0xffffffffu && g->ldb <= 0xffffffffu &&
           g->ldc <= 0xffffffffu;
}

#define BLOCKED_KC 512

/* A weight's kept transpose (gemm_kept.c), made as the scratch copy is. */
static int
transpose_one(clf_context *ctx, cl_mem src, size_t off, size_t rows,
              size_t cols, size_t ld, cl_mem dst)
{
    return clf__transpose(ctx, src, off, rows, cols, ld, 0, 1, dst);
}

/* g with B as the blocked kernel reads it, untransposed: a transposed B
 * from its kept copy where B is a registered weight shared by the batch
 * (gemm_kept.c), else copied into the scratch buffer first. */
static int
b_untransposed(clf_context *ctx, const struct clf__gemm_args *g,
               struct clf__gemm_args *s)
{
    *s = *g;
    if (g->trans_b) {
        /* One copy when every batch entry shares B. */
        size_t copies = g->b_stride == 0 ? 1 : g->batch, floats;
        cl_mem t = NULL;
        if (clf__mul3(copies, g->n, g->k, &floats))
            return clf__fail(CLF_ESIZE_OVERFLOW,
                             "GEMM %zux%zux%zu: scratch size overflows", g->m,
                             g->n, g->k);
        if (copies == 1)
            CLF_TRY(clf__gemm_kept_copy(ctx, g->b, g->b_off, g->n, g->k, g->ldb,
                                        transpose_one, &t));
        if (t == NULL) {
            CLF_TRY(scratch(ctx, floats, &t));
            CLF_TRY(clf__transpose(ctx, g->b, g->b_off, g->n, g->k, g->ldb,
                                   g->b_stride, copies, t));
        }
        s->b = t;
        s->b_off = 0;
        s->ldb = g->n;
        s->b_stride = g->b_stride == 0 ? 0 : g->n * g->k;
        s->trans_b = 0;
    }
    return 0;
}

/* C = alpha A op(B) + beta C through the blocked kernel. */
static int
blocked_run(clf_context *ctx, const struct clf__gemm_args *g)
{
    struct clf__gemm_state *st;
    struct clf__gemm_args s; /* one slice of K, B untransposed */

    STATE(ctx, st);
    CLF_TRY(b_untransposed(ctx, g, &s));
    st->blocked_calls++;
    st->gemm_calls++;
    /* A long inner dimension in slices of BLOCKED_KC, each added into C:
     * the rows of A and the piece of B one work-group streams then stay
     * in a CPU core's cache for the group's next work-item.  On PoCL this
     * keeps the 256 x 512 x n compression GEMM near the projections' rate
     * for n = 1024 to 16384, where it had fallen to 144, 92 and 81 GFLOP/s
     * unsliced.  512 steps a slice with 64- and 16-column blocks alike: on
     * an AVX2 host (16-column blocks) the compression then ran at 1.00x
     * the projection GEMM's rate against 0.90x with 1024, and on an
     * AVX-512 Xeon (64-column blocks) at 229-261 GFLOP/s against 126-153
     * with 1024, the forward 12-19% faster (bench/RESULTS.md, section 18).
     * The bias goes in with the first slice, the activation with the
     * last. */
    {
        const size_t slice = BLOCKED_KC, b_off = s.b_off, ldb = s.ldb;
        size_t k0 = 0;
        do {
            s.k = g->k - k0 < slice ? g->k - k0 : slice;
            s.a_off = g->a_off + k0;
            s.b_off = b_off + k0 * ldb;
            s.beta = k0 > 0 || g->beta != 0.0f ? 1.0f : 0.0f;
            s.bias = k0 == 0 ? g->bias : NULL;
            s.act = k0 + s.k == g->k ? g->act : CLF_ACT_NONE;
            CLF_TRY(gemm_nn_unlocked(ctx, &s, 0));
            k0 += s.k;
        } while (k0 < g->k);
    }
    return 0;
}

/* ------------------------------------------------------ the split way */

/* The split way: the slices of K that the blocked way runs one after
 * another (each added into C) run at once, as the batch of one launch of
 * the blocked kernel's slices entry (clf_gemm_nn_slices: the same body,
 * the last slice shorter), each into its own part of a workspace; then the
 * slices are summed in order into C (clf__gemm_reduce), so the bits are
 * the same in every run whatever order the device ran them in.  A C of few
 * blocks with a long K (the compression E X of a narrow model, one row of
 * queries) so keeps every compute unit busy, and the launches are two a
 * matrix of the batch, not one a slice.  Slices of BLOCKED_KC steps, as
 * the blocked way's (longer where K would need more than SPLIT_MAX). */
#define SPLIT_MAX 64

/* The slices of K and their length (the last one shorter). */
static size_t
split_slices(size_t k, size_t *chunk)
{
    *chunk = BLOCKED_KC;
    if ((k + BLOCKED_KC - 1) / BLOCKED_KC > SPLIT_MAX)
        *chunk = (k + SPLIT_MAX - 1) / SPLIT_MAX;
    return (k + *chunk - 1) / *chunk;
}

/* The split way takes what the blocked kernel takes with K over one
 * slice. */
static int
split_takes(clf_context *ctx, const struct clf__gemm_args *g)
{
    return blocked_takes(ctx, g) && g->k > BLOCKED_KC;
}

static int
split_run(clf_context *ctx, const struct clf__gemm_args *g)
{
    struct clf__gemm_state *st;
    struct clf__gemm_args s, e;
    size_t chunk, n = split_slices(g->k, &chunk), per, t;
    cl_mem partial;

    STATE(ctx, st);
    if (clf__mul3(g->batch, g->m, g->n, &per) || per > SIZE_MAX / n ||
        (partial = clf__gemm_partial(ctx, n * per)) == NULL)
        return blocked_run(ctx, g); /* no workspace: unsplit */
    CLF_TRY(b_untransposed(ctx, g, &s));
    st->split_calls++;
    st->gemm_calls++;
    for (t = 0; t < g->batch; t++) {
        e = s;
        e.k = chunk;
        e.beta = 0.0f;
        e.bias = NULL;
        e.act = CLF_ACT_NONE;
        e.a_off = s.a_off + t * s.a_stride;
        e.a_stride = chunk;
        e.b_off = s.b_off + t * s.b_stride;
        e.b_stride = chunk * s.ldb;
        e.c = partial;
        e.c_off = t * g->m * g->n;
        e.ldc = g->n;
        e.c_stride = per;
        e.batch = n;
        CLF_TRY(gemm_nn_unlocked(ctx, &e, g->k - (n - 1) * chunk));
    }
    return clf__gemm_reduce(ctx, g, partial, n, per);
}

/* ------------------------------------------------------------ dispatch */

/* The way every GEMM of a context runs where the tuner or a test pinned
 * one. */
CLF_FEATURE_INT(clf__gemm_pinned, clf__gemm_pin)

/* Who runs a GEMM: the way the caller chose (its plan's, for the GEMM's
 * role), unless the context pins one; CLBlast when neither says.  Never
 * timed here: choices are made before enqueueing. */
static int
variant_of(const clf_context *ctx, int way)
{
    const int pinned = clf__gemm_pinned(ctx);

    if (pinned != CLF_GEMM_UNDECIDED)
        return pinned;
    if (CLF_GEMM_VARIANT(way) != CLF_GEMM_UNDECIDED)
        return CLF_GEMM_VARIANT(way);
    return CLF_GEMM_CLBLAST;
}

/* CLBlast's first call for a context builds its tuning database and
 * programs, and two threads doing that at once for two contexts crash
 * inside CLBlast; its calls only enqueue, so one process-wide lock costs
 * little. */
static pthread_mutex_t clblast_lock = PTHREAD_MUTEX_INITIALIZER;

static int
clblast_gemm(clf_context *ctx, const struct clf__gemm_args *g)
{
    struct clf__gemm_state *st;
    CLBlastStatusCode status;

    STATE(ctx, st);
    st->gemm_calls++;
    clf__launch_clblast(ctx, g->m, g->n, g->k, 1);
    pthread_mutex_lock(&clblast_lock);
    status = CLBlastSgemm(CLBlastLayoutRowMajor, tr(g->trans_a), tr(g->trans_b),
                          g->m, g->n, g->k, g->alpha, g->a, g->a_off, g->lda,
                          g->b, g->b_off, g->ldb, g->beta, g->c, g->c_off,
                          g->ldc, &ctx->queue, NULL);
    pthread_mutex_unlock(&clblast_lock);
    clf__guard_after(ctx, NULL, "CLBlastSgemm");
    if (status != CLBlastSuccess)
        return clf__fail((int)status, "CLBlastSgemm %zux%zux%zu failed (%d)",
                         g->m, g->n, g->k, (int)status);
    return 0;
}

/* A batch of CLBlast GEMMs (one Sgemm for batch 1). */
static int
clblast_batched(clf_context *ctx, const struct clf__gemm_args *g)
{
    struct clf__gemm_state *st;
    CLBlastStatusCode status;

    if (g->batch == 1)
        return clblast_gemm(ctx, g);
    STATE(ctx, st);
    st->gemm_calls++;
    clf__launch_clblast(ctx, g->m, g->n, g->k, g->batch);
    pthread_mutex_lock(&clblast_lock);
    status = CLBlastSgemmStridedBatched(
        CLBlastLayoutRowMajor, tr(g->trans_a), tr(g->trans_b), g->m, g->n, g->k,
        g->alpha, g->a, g->a_off, g->lda, g->a_stride, g->b, g->b_off, g->ldb,
        g->b_stride, g->beta, g->c, g->c_off, g->ldc, g->c_stride, g->batch,
        &ctx->queue, NULL);
    pthread_mutex_unlock(&clblast_lock);
    clf__guard_after(ctx, NULL, "CLBlastSgemmStridedBatched");
    if (status != CLBlastSuccess)
        return clf__fail((int)status,
                         "CLBlastSgemmStridedBatched %zux%zux%zu x%zu failed "
                         "(%d)",
                         g->m, g->n, g->k, g->batch, (int)status);
    return 0;
}

/* The tiled kernel takes sizes that fit its 32-bit arguments, where the
 * device builds it. */
static int
tiled_takes(clf_context *ctx, const struct clf__gemm_args *g)
{
    return clf__tiled_fits(g->m, g->n, g->k, g->lda, g->ldb, g->ldc) &&
           clf__tiled_usable(ctx);
}

static int
tiled_run(clf_context *ctx, const struct clf__gemm_args *g)
{
    struct clf__gemm_state *st;

    STATE(ctx, st);
    st->gemm_calls++;
    return clf__tiled_gemm(ctx, g);
}

/* The native half kernels, for an operand stored as binary16. */
static int
half_run(clf_context *ctx, const struct clf__gemm_args *g)
{
    return clf__half_gemm(ctx, g, (g->half & CLF_GEMM_HALF_A) != 0,
                          (g->half & CLF_GEMM_HALF_B) != 0);
}

/* A CLBlast GEMM failed.  Where the context's tune file put CLBlast
 * parameters in force (clblast_records), they are dropped for the
 * context: a warning names them and the failure, and from then on the
 * GEMMs that CLBlast would run go to the library's own kernels
 * (own_gemm).  CLBlast 1.5.3 cannot set its defaults back within a
 * process (an override stays until exit) nor say what they were, so its
 * own defaults cannot take over.  1 when dropped (run the GEMM again on
 * own_gemm), 0 when the failure stands. */
static int
drop_clblast(clf_context *ctx)
{
    size_t len = strlen(ctx->warnings);
    struct clf__gemm_state *st = clf__gemm_state(ctx);

    if (st == NULL || !st->clblast_records)
        return 0;
    st->clblast_dropped = 1;
    snprintf(ctx->warnings + len, sizeof ctx->warnings - len,
             "%sdropped the tune file's CLBlast parameters (%s): %s; the "
             "GEMMs CLBlast ran go to the library's own kernels in this "
             "process",
             len ? "; " : "", ctx->tuned, clf_last_error());
    return 1;
}

/* A GEMM on the library's own kernels, for a context whose CLBlast
 * parameters were dropped: the tiled kernel where it takes the shape,
 * else the blocked one. */
static int
own_gemm(clf_context *ctx, const struct clf__gemm_args *g)
{
    if (tiled_takes(ctx, g))
        return tiled_run(ctx, g);
    if (blocked_takes(ctx, g))
        return blocked_run(ctx, g);
    return clf__fail(CLF_EUNSUPPORTED,
                     "GEMM %zux%zux%zu: CLBlast's tuned parameters were "
                     "dropped and neither of the library's GEMM kernels "
                     "takes this shape",
                     g->m, g->n, g->k);
}

/* CLBlast's GEMM, then the bias and the activation it has no epilogue for
 * (a GEMM with either is one of batch 1).  A CLBlast failure under stored
 * parameters drops them (drop_clblast) and runs g on the library's own
 * kernels. */
static int
clblast_run(clf_context *ctx, const struct clf__gemm_args *g)
{
    size_t m = g->m, c_off = g->c_off;
    int rc = clblast_batched(ctx, g);

    if (rc != 0)
        return drop_clblast(ctx) ? own_gemm(ctx, g) : rc;
    if (g->bias != NULL)
        CLF_TRY(clf__add_bias(ctx, g->c, c_off, m, g->n, g->ldc, g->bias));
    if (g->act && g->ldc == g->n)
        return clf__act(ctx, g->c, c_off, m * g->n, g->act);
    for (; g->act && m > 0; m--, c_off += g->ldc)
        CLF_TRY(clf__act(ctx, g->c, c_off, g->n, g->act));
    return 0;
}

/* The ways a GEMM runs, by enum clf__gemm_variant, and the two the
 * dispatch picks by itself: the native half kernels where an operand is
 * binary16, and the library's own kernels after CLBlast's stored
 * parameters were dropped.  takes: whether the way runs g (NULL: any). */
enum { WAY_HALF = CLF_GEMM_SPLIT + 1, WAY_OWN, WAY_COUNT };
static const struct {
    int (*takes)(clf_context *ctx, const struct clf__gemm_args *g);
    int (*run)(clf_context *ctx, const struct clf__gemm_args *g);
} ways[WAY_COUNT] = {
    [CLF_GEMM_CLBLAST] = {NULL, clblast_run},
    [CLF_GEMM_BLOCKED] = {blocked_takes, blocked_run},
    [CLF_GEMM_TILED] = {tiled_takes, tiled_run},
    [CLF_GEMM_SPLIT] = {split_takes, split_run},
    [WAY_HALF] = {NULL, half_run},
    [WAY_OWN] = {NULL, own_gemm},
};

/* The way that runs g: the half kernels for a binary16 operand, else the
 * chosen way where it takes g, else CLBlast (the library's own kernels
 * once CLBlast's stored parameters were dropped). */
static int
way_for(clf_context *ctx, int way, const struct clf__gemm_args *g)
{
    const struct clf__gemm_state *st;
    int v;

    if (g->half)
        return WAY_HALF;
    v = variant_of(ctx, way);
    if (v != CLF_GEMM_CLBLAST && ways[v].takes(ctx, g))
        return v;
    st = clf__gemm_state(ctx);
    return st != NULL && st->clblast_dropped ? WAY_OWN : CLF_GEMM_CLBLAST;
}

/* One GEMM, ctx locked: a lookup of its way, then one call. */
static int
gemm_unlocked(clf_context *ctx, int way, const struct clf__gemm_args *g)
{
    struct clf__gemm_args h = *g;

    if (g->m == 0 || g->n == 0 || g->batch == 0)
        return 0;
    h.half = (unsigned)way & (CLF_GEMM_HALF_A | CLF_GEMM_HALF_B);
    return ways[way_for(ctx, way, &h)].run(ctx, &h);
}

int
clf__gemm(clf_context *ctx, int way, const struct clf__gemm_args *g)
{
    int rc;

    clf__lock(ctx);
    rc = gemm_unlocked(ctx, way, g);
    clf__unlock(ctx);
    return rc;
}

int
clf__gemm_linear(clf_context *ctx, int way, const struct clf__linear *l)
{
    const struct clf__gemm_args g = {.trans_b = 1,
                                     .m = l->rows,
                                     .n = l->out,
                                     .k = l->in,
                                     .alpha = 1.0f,
                                     .beta = l->accumulate ? 1.0f : 0.0f,
                                     .a = l->x,
                                     .a_off = l->x_off,
                                     .lda = l->in,
                                     .b = l->w,
                                     .ldb = l->in,
                                     .c = l->y,
                                     .c_off = l->y_off,
                                     .ldc = l->out,
                                     .batch = 1,
                                     .bias = l->bias,
                                     .act = l->act};

    return clf__gemm(ctx, way, &g);
}

/* A group of `count` batches, each `batch` matrices apart by the strides:
 * the loop runs over the smaller of the two, and each call takes the
 * larger as one strided batch, so the launches grow with neither B nor
 * the heads beyond min(count, batch).  CLBlastSgemmBatched would take the
 * offsets in one call, but it copies its offset arrays to the device with
 * a blocking write, and a forward only enqueues. */
int
clf__gemm_grouped(clf_context *ctx, int way, const struct clf__gemm_args *g,
                  const struct clf__gemm_group *group)
{
    struct clf__gemm_args h = *g;
    size_t o, outer, step[3];
    int rc = 0;

    if (g->m == 0 || g->n == 0 || g->batch == 0 || group->count == 0)
        return 0;
    if (group->count <= g->batch) {
        outer = group->count;
        step[0] = group->a, step[1] = group->b, step[2] = group->c;
    } else {
        outer = g->batch, h.batch = group->count;
        step[0] = g->a_stride, step[1] = g->b_stride, step[2] = g->c_stride;
        h.a_stride = group->a, h.b_stride = group->b, h.c_stride = group->c;
    }
    clf__lock(ctx);
    for (o = 0; o < outer && rc == 0; o++) {
        h.a_off = g->a_off + o * step[0];
        h.b_off = g->b_off + o * step[1];
        h.c_off = g->c_off + o * step[2];
        rc = gemm_unlocked(ctx, way, &h);
    }
    clf__unlock(ctx);
    return rc;
}

/* ------------------------------------------------------------- choice */

/* The kind of choice "gemm": the ways by enum clf__gemm_variant - 1,
 * listed second, chosen per role (enum clf__gemm_role), so that each
 * role's way is listed on its own line. */
static const char *const gemm_names[] = {"clblast", "blocked", "tiled",
                                         "split"};
static const char *const gemm_labels[CLF_ROLE_COUNT] = {
    "gemm", "gemm[comp]", "gemm[score]", "gemm[weigh]", "gemm[ffn]"};
static const struct clf__choice_kind gemm_kind = {
    "gemm", gemm_names, 4, gemm_labels, CLF_ROLE_COUNT, 1, 1};
CLF_CHOICE_KIND(clf__gemm_kind, gemm_kind)

/* Each role's first word of its buckets ("" for the projections, whose
 * buckets predate the roles), whether its B operand is transposed (X W^T,
 * Q Kbar^T) and whether B is a weight its owner registers
 * (gemm_kept.c).  Role r's id among the kernel choices is the kind's
 * id + r. */
static const struct {
    const char *prefix;
    int trans_b;
    int weight;
} roles[CLF_ROLE_COUNT] = {
    {"", 1, 1},       {"comp.", 0, 0}, {"score.", 1, 0},
    {"weigh.", 0, 0}, {"ffn.", 1, 1},
};

/* The timed shape: the role's, C = A op(B) with W stored as PyTorch does
 * where the role transposes B, batch strided.  A weight B is registered
 * as its owner registers it, so the blocked way reads its kept transpose
 * as in the forward; any other transposed B it copies each time. */
struct gemm_timing {
    struct clf__gemm_args g;
    cl_mem mem[3];
};

/* Whether variant v (CLF_GEMM_* - 1) runs the timed shape itself, rather
 * than falling back to CLBlast. */
static int
applies(clf_context *ctx, int v, const struct clf__gemm_args *g)
{
    const int way = CLF_GEMM_CLBLAST + v;

    return way == CLF_GEMM_CLBLAST || ways[way].takes(ctx, g);
}

static int
run_gemm(clf_context *ctx, int variant, void *user)
{
    const struct gemm_timing *t = user;

    if (!applies(ctx, variant, &t->g))
        return CLF_EUNSUPPORTED; /* not timed (0 ms below) */
    return gemm_unlocked(ctx, CLF_GEMM_CLBLAST + variant, &t->g);
}

/* The timed shape of role over m x n x k (batch of them): m capped at 2048
 * rows and the batch at 8192 rows and 16 Mi floats of operands, so that
 * timing stays short. */
static void
timing_shape(int role, size_t m, size_t n, size_t k, size_t batch,
             struct clf__gemm_args *g)
{
    const size_t tm = m < 2048 ? m : 2048;
    const size_t per = tm * k + k * n + tm * n;
    size_t tb = batch, cap = 8192 / tm;

    if (per > 0 && ((size_t)1 << 24) / per < cap)
        cap = ((size_t)1 << 24) / per;
    if (tb > cap)
        tb = cap;
    memset(g, 0, sizeof *g);
    g->trans_b = roles[role].trans_b;
    g->m = tm, g->n = n, g->k = k, g->batch = tb ? tb : 1;
    g->alpha = 1.0f;
    g->lda = k, g->ldb = g->trans_b ? k : n, g->ldc = n;
    g->a_stride = tm * k, g->b_stride = k * n, g->c_stride = tm * n;
}

/* Times every way that applies on the role's shape and returns the faster
 * as a clf__gemm_variant. */
static int
time_gemm(clf_context *ctx, int role, const char *bucket, size_t m, size_t n,
          size_t k, size_t batch, int *variant)
{
    struct gemm_timing t;
    double ms[CLF_MAX_CANDIDATES] = {0};
    const int count = clf__choice_count(CLF_KIND_GEMM);
    int rc = 0, best = -1, i;

    timing_shape(role, m, n, k, batch, &t.g);
    t.mem[0] = clf__timing_buffer(ctx, t.g.batch * t.g.m * k, 0, &rc);
    t.mem[1] =
        rc == 0 ? clf__timing_buffer(ctx, t.g.batch * n * k, 1, &rc) : NULL;
    t.mem[2] =
        rc == 0 ? clf__timing_buffer(ctx, t.g.batch * t.g.m * n, 2, &rc) : NULL;
    t.g.a = t.mem[0], t.g.b = t.mem[1], t.g.c = t.mem[2];
    if (rc == 0 && roles[role].weight && t.g.batch == 1)
        rc = clf__gemm_keep(ctx, t.mem[1]);
    if (rc == 0)
        best = clf__time_variants(ctx, count, run_gemm, &t, 2, ms);
    clf__gemm_forget(ctx, t.mem[1]);
    for (i = 0; i < 3; i++)
        if (t.mem[i] != NULL)
            clReleaseMemObject(t.mem[i]);
    if (rc != 0 || best < 0)
        return rc != 0 ? rc : best;
    for (i = 0; i < count; i++)
        if (!applies(ctx, i, &t.g))
            ms[i] = 0.0;
    *variant = CLF_GEMM_CLBLAST +
               clf__choice_record(ctx, CLF_KIND_GEMM + role, bucket, best, ms);
    return 0;
}

int
clf__gemm_resolve(clf_context *ctx, int role, size_t m, size_t n, size_t k,
                  size_t batch, int *variant)
{
    const size_t cap = (size_t)1 << 20;
    char bucket[CLF_BUCKET_MAX], b[24] = "";
    int found, best = 0, rc;

    clf__lock(ctx);
    /* Pinned (by the tuner, or tests) under the lock like the rest. */
    if ((*variant = clf__gemm_pinned(ctx)) != CLF_GEMM_UNDECIDED) {
        clf__unlock(ctx);
        return 0;
    }
    if (batch > 1)
        snprintf(b, sizeof b, ".b%zu", clf__pow2_bucket(batch, cap));
    snprintf(bucket, sizeof bucket, "%sm%zu.n%zu.k%zu%s", roles[role].prefix,
             clf__pow2_bucket(m, cap), clf__pow2_bucket(n, cap),
             clf__pow2_bucket(k, cap), b);
    found = clf__choice_lookup(ctx, CLF_KIND_GEMM + role, bucket, &best);
    if (found == 1)
        *variant = CLF_GEMM_CLBLAST + best;
    if (found == 0) {
        rc = time_gemm(ctx, role, bucket, m, n, k, batch, variant);
        clf__choice_release(ctx);
    } else
        rc = found;
    clf__unlock(ctx);
    return rc < 0 ? rc : 0;
}

/* The epilogue kernels (cl/gemm.cl) after a CLBlast GEMM, each one call
 * (clf__run_1d: under the context lock). */
int
clf__add_bias(clf_context *ctx, cl_mem y, size_t off, size_t rows, size_t cols,
              size_t ld, cl_mem bias)
{
    const cl_ulong o = off;
    const cl_uint r = (cl_uint)rows, c = (cl_uint)cols, l = (cl_uint)ld;
    const struct clf__arg args[] = {CLF_ARG(y), CLF_ARG(o), CLF_ARG(r),
                                    CLF_ARG(c), CLF_ARG(l), CLF_ARG(bias)};

    return CLF_RUN_1D(ctx, CLF_K_ADD_BIAS, rows * cols, args);
}

int
clf__act(clf_context *ctx, cl_mem y, size_t off, size_t count, int act)
{
    const cl_ulong o = off, c = count;
    const cl_uint a = (cl_uint)act;
    const struct clf__arg args[] = {CLF_ARG(y), CLF_ARG(o), CLF_ARG(c),
                                    CLF_ARG(a)};

    return CLF_RUN_1D(ctx, CLF_K_ACT, count, args);
}
