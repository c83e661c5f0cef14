/* The GEMM path of the attention steps over the slots or keys: the scores
 * GEMM, the weighted-sum GEMM, and for causal rows the finite copy of the
 * values and the terms of the non-finite ones (cl/, same stem). */
#include "stages/stages.h"

int
clf__attend_scores(clf_context *ctx, int way,
                   const struct clf__attend_shape *sh, size_t b, size_t seqs,
                   size_t r0, size_t rows, cl_mem q, cl_mem kbar, cl_mem s,
                   size_t s_off, size_t ld)
{
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    const size_t width = hc * sh->dh, L = sh->L;
    const struct clf__gemm_group g = {seqs, sh->n * sh->dq, L * width,
                                      sh->heads * rows * ld};
    const struct clf__gemm_args qk = {.trans_b = 1,
                                      .m = rows,
                                      .n = L,
                                      .k = sh->dh,
                                      .alpha = sh->scale,
                                      .a = q,
                                      .a_off = (b * sh->n + r0) * sh->dq,
                                      .lda = sh->dq,
                                      .a_stride = sh->dh,
                                      .b = kbar,
                                      .b_off = b * L * width,
                                      .ldb = width,
                                      .b_stride = sh->kv_per_head ? sh->dh : 0,
                                      .c = s,
                                      .c_off = s_off,
                                      .ldc = ld,
                                      .c_stride = rows * ld,
                                      .batch = sh->heads};

    return clf__gemm_grouped(ctx, way, &qk, &g);
}

/* The values of a causal weighted sum as its GEMM reads them
 * (clf_finite_values in cl/, same stem): first filled with L (clf_fill_int),
 * then vf and first written. */
static int
finite_values_unlocked(clf_context *ctx, const struct clf__attend_shape *sh,
                       cl_mem vbar, cl_mem vf, cl_mem first)
{
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    const size_t width = hc * sh->dh;
    cl_kernel k = ctx->kernels[CLF_K_FINITE_VALUES],
              fill = ctx->kernels[CLF_K_FILL_INT];
    cl_uint L = (cl_uint)sh->L, w = (cl_uint)width, b = (cl_uint)sh->batch,
            cols = (cl_uint)(sh->batch * width);
    cl_int none = (cl_int)sh->L;

    if (sh->batch == 0 || sh->L == 0)
        return 0;
    CLF_SET_ARG(fill, 0, first);
    CLF_SET_ARG(fill, 1, none);
    CLF_SET_ARG(fill, 2, cols);
    CLF_TRY(clf__launch_1d(ctx, CLF_K_FILL_INT, sh->batch * width));
    CLF_SET_ARG(k, 0, vbar);
    CLF_SET_ARG(k, 1, L);
    CLF_SET_ARG(k, 2, w);
    CLF_SET_ARG(k, 3, b);
    CLF_SET_ARG(k, 4, vf);
    CLF_SET_ARG(k, 5, first);
    return clf__launch_1d(ctx, CLF_K_FINITE_VALUES, sh->batch * sh->L * width);
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__attend_finite(clf_context *ctx, const struct clf__attend_shape *sh,
                   cl_mem vbar, cl_mem vf, cl_mem first)
{
    int rc;

    clf__lock(ctx);
    rc = finite_values_unlocked(ctx, sh, vbar, vf, first);
    clf__unlock(ctx);
    return rc;
}

/* The terms of the non-finite values each causal row sees, added to the
 * GEMM's sums over vf (clf_weigh_nonfinite). */
/* The work-items of the non-finite kernels take CLF_NONFINITE_ROWS rows
 * each. */
size_t
clf__nonfinite_chunks(size_t rows)
{
    return (rows + CLF_NONFINITE_ROWS - 1) / CLF_NONFINITE_ROWS;
}

static int
weigh_nonfinite_unlocked(clf_context *ctx, const struct clf__attend_shape *sh,
                         size_t b, size_t seqs, size_t r0, size_t rows,
                         cl_mem s, size_t s_off, size_t ld, cl_mem vbar,
                         cl_mem o, const struct clf__weigh_causal *cz)
{
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    const size_t width = hc * sh->dh;
    cl_kernel k = ctx->kernels[CLF_K_WEIGH_NONFINITE];
    cl_ulong ooff = (cl_ulong)((b * sh->n + r0) * sh->dq), soff = s_off,
             voff = (cl_ulong)(b * sh->L * width), foff = (cl_ulong)(b * width);
    cl_uint dq = (cl_uint)sh->dq, n = (cl_uint)sh->n, ldu = (cl_uint)ld,
            ru = (cl_uint)rows, su = (cl_uint)seqs, h = (cl_uint)sh->heads,
            L = (cl_uint)sh->L, w = (cl_uint)width, dh = (cl_uint)sh->dh,
            kvh = sh->kv_per_head != 0, row0 = (cl_uint)(cz->row0 + r0),
            c = (cl_uint)cz->c, blk = (cl_uint)cz->block;

    CLF_SET_ARG(k, 0, o);
    CLF_SET_ARG(k, 1, ooff);
    CLF_SET_ARG(k, 2, dq);
    CLF_SET_ARG(k, 3, n);
    CLF_SET_ARG(k, 4, s);
    CLF_SET_ARG(k, 5, soff);
    CLF_SET_ARG(k, 6, ldu);
    CLF_SET_ARG(k, 7, ru);
    CLF_SET_ARG(k, 8, su);
    CLF_SET_ARG(k, 9, h);
    CLF_SET_ARG(k, 10, vbar);
    CLF_SET_ARG(k, 11, voff);
    CLF_SET_ARG(k, 12, L);
    CLF_SET_ARG(k, 13, w);
    CLF_SET_ARG(k, 14, dh);
    CLF_SET_ARG(k, 15, kvh);
    CLF_SET_ARG(k, 16, cz->first);
    CLF_SET_ARG(k, 17, foff);
    CLF_SET_ARG(k, 18, row0);
    CLF_SET_ARG(k, 19, c);
    CLF_SET_ARG(k, 20, blk);
    return clf__launch_1d(ctx, CLF_K_WEIGH_NONFINITE,
                          seqs * sh->heads * clf__nonfinite_chunks(rows) *
                              sh->dh);
}

int
clf__attend_weigh(clf_context *ctx, int way, const struct clf__attend_shape *sh,
                  size_t b, size_t seqs, size_t r0, size_t rows, cl_mem s,
                  size_t s_off, size_t ld, cl_mem vbar, cl_mem o,
                  const struct clf__weigh_causal *cz)
{
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    const size_t width = hc * sh->dh, L = sh->L;
    const struct clf__gemm_group g = {seqs, sh->heads * rows * ld, L * width,
                                      sh->n * sh->dq};
    const struct clf__gemm_args pv = {.m = rows,
                                      .n = sh->dh,
                                      .k = L,
                                      .alpha = 1.0f,
                                      .a = s,
                                      .a_off = s_off,
                                      .lda = ld,
                                      .a_stride = rows * ld,
                                      .b = cz != NULL ? cz->vf : vbar,
                                      .b_off = b * L * width,
                                      .ldb = width,
                                      .b_stride = sh->kv_per_head ? sh->dh : 0,
                                      .c = o,
                                      .c_off = (b * sh->n + r0) * sh->dq,
                                      .ldc = sh->dq,
                                      .c_stride = sh->dh,
                                      .batch = sh->heads};
    int rc;

    CLF_TRY(clf__gemm_grouped(ctx, way, &pv, &g));
    if (cz == NULL || seqs == 0 || rows == 0)
        return 0;
    clf__lock(ctx);
    rc = weigh_nonfinite_unlocked(ctx, sh, b, seqs, r0, rows, s, s_off, ld,
                                  vbar, o, cz);
    clf__unlock(ctx);
    return rc;
}
