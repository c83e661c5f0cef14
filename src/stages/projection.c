/* Host side of the projection kernels: the rowsum terms. */
#include "stages/stages.h"

#include <limits.h>

#define SET CLF_SET_ARG

static int
rowsum_unlocked(clf_context *ctx, cl_mem e, size_t rows, size_t n, size_t ld,
                cl_mem out)
{
    cl_kernel k = ctx->kernels[CLF_K_ROWSUM];
    cl_uint r = (cl_uint)rows, nn = (cl_uint)n, l = (cl_uint)ld;

    SET(k, 0, e);
    SET(k, 1, r);
    SET(k, 2, nn);
    SET(k, 3, l);
    SET(k, 4, out);
    return clf__launch_1d(ctx, CLF_K_ROWSUM, rows);
}

int
clf__rowsum(clf_context *ctx, cl_mem e, size_t rows, size_t n, size_t ld,
            cl_mem out)
{
    int rc;

    clf__lock(ctx);
    rc = rowsum_unlocked(ctx, e, rows, n, ld, out);
    clf__unlock(ctx);
    return rc;
}

static int
add_rowsum_bias_unlocked(clf_context *ctx, cl_mem kbar, size_t batch,
                         size_t slots, size_t heads, size_t head_dim,
                         cl_mem rowsum, size_t rowsum_batch_stride,
                         int rowsum_per_head, cl_mem bias, int bias_per_head)
{
    cl_uint unit = rowsum == NULL;
    cl_kernel k = ctx->kernels[CLF_K_ADD_ROWSUM_BIAS];
    cl_uint b = (cl_uint)batch, s = (cl_uint)slots, h = (cl_uint)heads,
            d = (cl_uint)head_dim, rp = rowsum_per_head != 0,
            bp = bias_per_head != 0, rbs = (cl_uint)rowsum_batch_stride;

    SET(k, 0, kbar);
    SET(k, 1, b);
    SET(k, 2, s);
    SET(k, 3, h);
    SET(k, 4, d);
    if (rowsum == NULL)
        rowsum = bias; /* not read */
    SET(k, 5, rowsum);
    SET(k, 6, rp);
    SET(k, 7, bias);
    SET(k, 8, bp);
    SET(k, 9, rbs);
    SET(k, 10, unit);
    return clf__launch_1d(ctx, CLF_K_ADD_ROWSUM_BIAS,
                          batch * slots * heads * head_dim);
}

int
clf__add_rowsum_bias(clf_context *ctx, cl_mem kbar, size_t batch, size_t slots,
                     size_t heads, size_t head_dim, cl_mem rowsum,
                     size_t rowsum_batch_stride, int rowsum_per_head,
                     cl_mem bias, int bias_per_head)
{
    int rc;

    clf__lock(ctx);
    rc = add_rowsum_bias_unlocked(ctx, kbar, batch, slots, heads, head_dim,
                                  rowsum, rowsum_batch_stride, rowsum_per_head,
                                  bias, bias_per_head);
    clf__unlock(ctx);
    return rc;
}
