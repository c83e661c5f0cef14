/* CLBlast GEMM wrappers on the context's in-order queue.  CLBlast takes no
 * wait list; ordering comes from the queue being in order. */
#include "internal.h"

#include <clblast_c.h>

static CLBlastTranspose
tr(int t)
{
    return t ? CLBlastTransposeYes : CLBlastTransposeNo;
}

int
clf__gemm(clf_context *ctx, int trans_a, int trans_b, size_t m, size_t n,
          size_t k, float alpha, cl_mem a, size_t a_off, size_t lda, cl_mem b,
          size_t b_off, size_t ldb, float beta, cl_mem c, size_t c_off,
          size_t ldc)
{
    CLBlastStatusCode st;

    st = CLBlastSgemm(CLBlastLayoutRowMajor, tr(trans_a), tr(trans_b), m, n,
                      k, alpha, a, a_off, lda, b, b_off, ldb, beta, c, c_off,
                      ldc, &ctx->queue, NULL);
    if (st != CLBlastSuccess)
        return clf__fail((int)st, "CLBlastSgemm %zux%zux%zu failed (%d)", m,
                         n, k, (int)st);
    return 0;
}

int
clf__gemm_batched(clf_context *ctx, int trans_a, int trans_b, size_t m,
                  size_t n, size_t k, float alpha, cl_mem a, size_t a_off,
                  size_t lda, size_t a_stride, cl_mem b, size_t b_off,
                  size_t ldb, size_t b_stride, float beta, cl_mem c,
                  size_t c_off, size_t ldc, size_t c_stride, size_t batch)
{
    CLBlastStatusCode st;

    if (batch == 1)
        return clf__gemm(ctx, trans_a, trans_b, m, n, k, alpha, a, a_off, lda,
                         b, b_off, ldb, beta, c, c_off, ldc);
    st = CLBlastSgemmStridedBatched(
        CLBlastLayoutRowMajor, tr(trans_a), tr(trans_b), m, n, k, alpha, a,
        a_off, lda, a_stride, b, b_off, ldb, b_stride, beta, c, c_off, ldc,
        c_stride, batch, &ctx->queue, NULL);
    if (st != CLBlastSuccess)
        return clf__fail((int)st,
                         "CLBlastSgemmStridedBatched %zux%zux%zu x%zu failed "
                         "(%d)",
                         m, n, k, batch, (int)st);
    return 0;
}
