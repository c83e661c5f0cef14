/* Host side of prefix-safe causal Linformer's own-block window: the scores
 * of every block's queries against its positions and the weighted sum of
 * its values, each a strided batch of GEMMs over the blocks (grouped over
 * the heads) in the plan's way for the role, so the window's work runs at
 * GEMM speed; then the kernels of cl/causal.cl for what a GEMM cannot
 * say: a softmax over only the entries a query sees, and the non-finite
 * values it sees. */
#include "stages/stages.h"

/* The context's finite copy of the raw values and, per sequence and
 * column, the first row holding a non-finite value (clf_finite_values). */
struct window_state {
    cl_mem vf, first;
    size_t vf_cap, first_cap; /* floats, ints */
};

static const char state_key = 0;

static void
release_state(clf_context *ctx, void *state)
{
    struct window_state *st = state;

    (void)ctx;
    if (st->vf != NULL)
        clReleaseMemObject(st->vf);
    if (st->first != NULL)
        clReleaseMemObject(st->first);
}

/* *buf grown to at least `count` elements of `elem` bytes (its capacity in
 * *cap).  Commands already queued keep an old buffer alive. */
static int
grow(clf_context *ctx, cl_mem *buf, size_t *cap, size_t count, size_t elem,
     const char *what)
{
    cl_int err;

    if (*cap >= count)
        return 0;
    if (*buf != NULL)
        clReleaseMemObject(*buf);
    *cap = 0;
    *buf =
        clf__mem_create(ctx, CL_MEM_READ_WRITE, count * elem, NULL, &err, what);
    if (*buf == NULL)
        return clf__fail(err, "%s: clCreateBuffer of %zu bytes failed (%d)",
                         what, count * elem, err);
    *cap = count;
    return 0;
}

/* The GEMMs of one sequence b: for each head, C_m = alpha A_m op(B_m) +
 * beta C_m over the full blocks m (a strided batch) and the partial last
 * block (its own call), A_m block rows of `a` from a_off, B_m of `b`,
 * C_m of `c`; per head the operands move by g's steps; rows of a block
 * move A, B and C by a_row, b_row and c_row elements.  inner_block: the
 * inner dimension is the block (the weighted sum), else d_h (scores). */
struct window_gemm {
    int way, trans_b, inner_block;
    size_t block, dh, n, cols; /* cols: d_h, or the block (scores) */
    float alpha, beta;
    cl_mem a, b, c;
    size_t a_off, lda, a_row, b_off, ldb, b_row, c_off, ldc, c_row;
    struct clf__gemm_group g;
};

static int
window_gemms(clf_context *ctx, const struct window_gemm *w)
{
    const size_t full = w->n / w->block, r = w->n - full * w->block;
    const size_t bs = w->block;
    struct clf__gemm_args g = {.trans_b = w->trans_b,
                               .m = bs,
                               .n = w->cols,
                               .k = w->inner_block ? bs : w->dh,
                               .alpha = w->alpha,
                               .beta = w->beta,
                               .a = w->a,
                               .b = w->b,
                               .c = w->c,
                               .a_off = w->a_off,
                               .lda = w->lda,
                               .a_stride = bs * w->a_row,
                               .b_off = w->b_off,
                               .ldb = w->ldb,
                               .b_stride = bs * w->b_row,
                               .c_off = w->c_off,
                               .ldc = w->ldc,
                               .c_stride = bs * w->c_row,
                               .batch = full};

    if (full > 0)
        CLF_TRY(clf__gemm_grouped(ctx, w->way, &g, &w->g));
    if (r == 0)
        return 0;
    /* The partial last block: r rows, and r positions where they are the
     * score's columns or the sum's inner dimension. */
    g.m = r;
    g.n = w->inner_block ? w->cols : r;
    g.k = w->inner_block ? r : w->dh;
    g.a_off += full * g.a_stride;
    g.b_off += full * g.b_stride;
    g.c_off += full * g.c_stride;
    g.a_stride = g.b_stride = g.c_stride = 0;
    g.batch = 1;
    return clf__gemm_grouped(ctx, w->way, &g, &w->g);
}

static int
softmax_unlocked(clf_context *ctx, const struct clf__causal_shape *sh,
                 int variant, cl_mem s, cl_mem mask)
{
    const enum clf__kernel_id id = variant == CLF_SOFTMAX_GROUP
                                       ? CLF_K_CAUSAL_SOFTMAX_WG
                                       : CLF_K_CAUSAL_SOFTMAX;
    const size_t rows = sh->batch * sh->heads * sh->n, ld = sh->k + sh->block;
    cl_kernel k = ctx->kernels[id];
    cl_uint ldu = (cl_uint)ld, r = (cl_uint)rows, h = (cl_uint)sh->heads,
            n = (cl_uint)sh->n, kk = (cl_uint)sh->k, c = (cl_uint)sh->c,
            blk = (cl_uint)sh->block, has = mask != NULL,
            b0 = (cl_uint)sh->block0;
    cl_mem m = mask != NULL ? mask : s; /* any valid buffer when unused */

    CLF_SET_ARG(k, 0, s);
    CLF_SET_ARG(k, 1, ldu);
    CLF_SET_ARG(k, 2, r);
    CLF_SET_ARG(k, 3, h);
    CLF_SET_ARG(k, 4, n);
    CLF_SET_ARG(k, 5, kk);
    CLF_SET_ARG(k, 6, c);
    CLF_SET_ARG(k, 7, blk);
    CLF_SET_ARG(k, 8, m);
    CLF_SET_ARG(k, 9, has);
    CLF_SET_ARG(k, 10, b0);
    if (id == CLF_K_CAUSAL_SOFTMAX)
        return clf__launch_1d(ctx, id, rows);
    return clf__softmax_launch_group(ctx, id, rows, ld, "causal softmax");
}

/* 32-bit index limits of the window kernels. */
static int
check_sizes(const struct clf__causal_shape *sh)
{
    const double rows = (double)sh->batch * sh->heads * sh->n;

    if (rows * (double)(sh->k + sh->block) > 4294967295.0 ||
        rows * (double)sh->dh > 4294967295.0 ||
        (double)sh->batch * sh->n * sh->dkv > 4294967295.0)
        return clf__fail(CLF_ETOO_LARGE,
                         "causal window: %zu sequences x %zu heads x %zu "
                         "positions exceed the kernels' 32-bit indices",
                         sh->batch, sh->heads, sh->n);
    return 0;
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__causal_scores(clf_context *ctx, const struct clf__causal_shape *sh,
                   cl_mem s, cl_mem q, cl_mem kp)
{
    const size_t ld = sh->k + sh->block;
    struct window_gemm w = {0};
    size_t b;
    int rc = 0;

    if (sh->batch == 0 || sh->heads == 0 || sh->n == 0)
        return 0;
    CLF_TRY(check_sizes(sh));
    w.way = sh->score_way;
    w.trans_b = 1;
    w.block = sh->block, w.dh = sh->dh, w.n = sh->n, w.cols = sh->block;
    w.alpha = sh->scale, w.beta = 0.0f;
    w.a = q, w.lda = sh->dq, w.a_row = sh->dq;
    w.b = kp, w.ldb = sh->dkv, w.b_row = sh->dkv;
    w.c = s, w.ldc = ld, w.c_row = ld;
    w.g.count = sh->heads;
    w.g.a = sh->dh;
    w.g.b = sh->kv_per_head ? sh->dh : 0;
    w.g.c = sh->n * ld;
    clf__lock(ctx);
    for (b = 0; b < sh->batch && rc == 0; b++) {
        w.a_off = b * sh->n * sh->dq;
        w.b_off = b * sh->n * sh->dkv;
        w.c_off = b * sh->heads * sh->n * ld + sh->k;
        rc = window_gemms(ctx, &w);
    }
    clf__unlock(ctx);
    return rc;
}

int
clf__causal_softmax(clf_context *ctx, const struct clf__causal_shape *sh,
                    int variant, cl_mem s, cl_mem mask)
{
    int rc;

    if (sh->batch == 0 || sh->heads == 0 || sh->n == 0)
        return 0;
    CLF_TRY(check_sizes(sh));
    clf__lock(ctx);
    rc = softmax_unlocked(ctx, sh, variant, s, mask);
    clf__unlock(ctx);
    return rc;
}

static int
nonfinite_unlocked(clf_context *ctx, const struct clf__causal_shape *sh,
                   cl_mem o, cl_mem s, cl_mem vp, cl_mem first)
{
    cl_kernel k = ctx->kernels[CLF_K_CAUSAL_WINDOW_NONFINITE];
    cl_uint dq = (cl_uint)sh->dq, ld = (cl_uint)(sh->k + sh->block),
            dkv = (cl_uint)sh->dkv, b = (cl_uint)sh->batch,
            h = (cl_uint)sh->heads, n = (cl_uint)sh->n, dh = (cl_uint)sh->dh,
            kk = (cl_uint)sh->k, blk = (cl_uint)sh->block,
            kvh = sh->kv_per_head != 0;

    CLF_SET_ARG(k, 0, o);
    CLF_SET_ARG(k, 1, dq);
    CLF_SET_ARG(k, 2, s);
    CLF_SET_ARG(k, 3, ld);
    CLF_SET_ARG(k, 4, vp);
    CLF_SET_ARG(k, 5, dkv);
    CLF_SET_ARG(k, 6, b);
    CLF_SET_ARG(k, 7, h);
    CLF_SET_ARG(k, 8, n);
    CLF_SET_ARG(k, 9, dh);
    CLF_SET_ARG(k, 10, kk);
    CLF_SET_ARG(k, 11, blk);
    CLF_SET_ARG(k, 12, kvh);
    CLF_SET_ARG(k, 13, first);
    return clf__launch_1d(ctx, CLF_K_CAUSAL_WINDOW_NONFINITE,
                          sh->batch * clf__nonfinite_chunks(sh->n) * sh->heads *
                              sh->dh);
}

/* The window's values with their non-finite entries 0, and the first row
 * of each column holding one, in the context's buffers. */
static int
finite_values(clf_context *ctx, const struct clf__causal_shape *sh, cl_mem vp,
              struct window_state *st)
{
    struct clf__attend_shape as = {0};

    CLF_TRY(grow(ctx, &st->vf, &st->vf_cap, sh->batch * sh->n * sh->dkv,
                 sizeof(float), "causal window values"));
    CLF_TRY(grow(ctx, &st->first, &st->first_cap, sh->batch * sh->dkv,
                 sizeof(cl_int), "causal window first non-finite rows"));
    as.batch = sh->batch;
    as.dh = sh->dh;
    as.L = sh->n;
    as.kv_per_head = 1; /* the width is dkv either way */
    as.heads = sh->dkv / sh->dh;
    return clf__attend_finite(ctx, &as, vp, st->vf, st->first);
}

int
clf__causal_apply(clf_context *ctx, const struct clf__causal_shape *sh,
                  cl_mem o, cl_mem s, cl_mem vp)
{
    const size_t ld = sh->k + sh->block;
    struct window_state *st;
    struct window_gemm w = {0};
    size_t b;
    int rc;

    if (sh->batch == 0 || sh->heads == 0 || sh->n == 0)
        return 0;
    CLF_TRY(check_sizes(sh));
    clf__lock(ctx);
    st = clf__feature(ctx, &state_key, sizeof *st, NULL, release_state);
    rc = st == NULL ? CLF_ENO_MEMORY : finite_values(ctx, sh, vp, st);
    w.way = sh->weigh_way;
    w.inner_block = 1;
    w.block = sh->block, w.dh = sh->dh, w.n = sh->n, w.cols = sh->dh;
    w.alpha = 1.0f, w.beta = 1.0f;
    w.a = s, w.lda = ld, w.a_row = ld;
    w.b = st != NULL ? st->vf : NULL, w.ldb = sh->dkv, w.b_row = sh->dkv;
    w.c = o, w.ldc = sh->dq, w.c_row = sh->dq;
    w.g.count = sh->heads;
    w.g.a = sh->n * ld;
    w.g.b = sh->kv_per_head ? sh->dh : 0;
    w.g.c = sh->dh;
    for (b = 0; b < sh->batch && rc == 0; b++) {
        w.a_off = b * sh->heads * sh->n * ld + sh->k;
        w.b_off = b * sh->n * sh->dkv;
        w.c_off = b * sh->n * sh->dq;
        rc = window_gemms(ctx, &w);
    }
    if (rc == 0)
        rc = nonfinite_unlocked(ctx, sh, o, s, vp, st->first);
    clf__unlock(ctx);
    return rc;
}
