/* Host side of the projection kernels: the rowsum terms. */
#include "stages/stages.h"

#include <limits.h>

#define SET CLF_SET_ARG

int
clf__rowsum(clf_context *ctx, cl_mem e, size_t rows, size_t n, size_t ld,
            cl_mem out)
{
    const cl_uint r = (cl_uint)rows, nn = (cl_uint)n, l = (cl_uint)ld;
    const struct clf__arg args[] = {CLF_ARG(e), CLF_ARG(r), CLF_ARG(nn),
                                    CLF_ARG(l), CLF_ARG(out)};

    return CLF_RUN_1D(ctx, CLF_K_ROWSUM, rows, args);
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

static int
compress_window_unlocked(clf_context *ctx, const struct clf__window_args *a)
{
    cl_kernel k = ctx->kernels[CLF_K_COMPRESS_WINDOW];
    const cl_uint v[] = {
        (cl_uint)a->batch,    (cl_uint)a->n,       (cl_uint)a->ld,
        (cl_uint)a->slots,    (cl_uint)a->filled,  (cl_uint)a->group,
        (cl_uint)a->stride,   (cl_uint)a->window,  (cl_uint)a->heads,
        (cl_uint)a->head_dim, a->in_per_head != 0, (cl_uint)a->op};
    cl_uint wph = a->w_per_head != 0, hb = a->bias != NULL;
    int i;
    cl_mem w = a->w != NULL ? a->w : a->p; /* not read unless op is conv */
    cl_mem bias = a->bias != NULL ? a->bias : a->p;

    SET(k, 0, a->p);
    for (i = 0; i < 12; i++)
        SET(k, 1 + i, v[i]);
    SET(k, 13, w);
    SET(k, 14, wph);
    SET(k, 15, bias);
    SET(k, 16, hb);
    SET(k, 17, a->out);
    return clf__launch_1d(ctx, CLF_K_COMPRESS_WINDOW,
                          a->batch * a->slots * a->heads * a->head_dim);
}

int
clf__compress_window(clf_context *ctx, const struct clf__window_args *a)
{
    int rc;

    clf__lock(ctx);
    rc = compress_window_unlocked(ctx, a);
    clf__unlock(ctx);
    return rc;
}
