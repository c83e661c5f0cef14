/* Host side of the mask kernels: key padding masks. */
#include "stages/stages.h"

static int
mask_rows_unlocked(clf_context *ctx, cl_mem src, size_t src_off, cl_mem dst,
                   size_t dst_off, size_t rows, size_t cols, cl_mem mask)
{
    cl_kernel k = ctx->kernels[CLF_K_MASK_ROWS];
    cl_ulong so = src_off, d = dst_off;
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols;

    CLF_SET_ARG(k, 0, src);
    CLF_SET_ARG(k, 1, so);
    CLF_SET_ARG(k, 2, dst);
    CLF_SET_ARG(k, 3, d);
    CLF_SET_ARG(k, 4, r);
    CLF_SET_ARG(k, 5, c);
    CLF_SET_ARG(k, 6, mask);
    return clf__launch_1d(ctx, CLF_K_MASK_ROWS, rows * cols);
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__mask_rows(clf_context *ctx, cl_mem src, size_t src_off, cl_mem dst,
               size_t dst_off, size_t rows, size_t cols, cl_mem mask)
{
    int rc;

    clf__lock(ctx);
    rc = mask_rows_unlocked(ctx, src, src_off, dst, dst_off, rows, cols, mask);
    clf__unlock(ctx);
    return rc;
}

static int
masked_rowsum_unlocked(clf_context *ctx, cl_mem e, size_t rows, size_t n,
                       size_t ld, size_t batch, cl_mem mask, cl_mem out)
{
    cl_kernel k = ctx->kernels[CLF_K_MASKED_ROWSUM];
    cl_uint r = (cl_uint)rows, nn = (cl_uint)n, l = (cl_uint)ld,
            b = (cl_uint)batch;

    CLF_SET_ARG(k, 0, e);
    CLF_SET_ARG(k, 1, r);
    CLF_SET_ARG(k, 2, nn);
    CLF_SET_ARG(k, 3, l);
    CLF_SET_ARG(k, 4, b);
    CLF_SET_ARG(k, 5, mask);
    CLF_SET_ARG(k, 6, out);
    return clf__launch_1d(ctx, CLF_K_MASKED_ROWSUM, batch * rows);
}

int
clf__masked_rowsum(clf_context *ctx, cl_mem e, size_t rows, size_t n, size_t ld,
                   size_t batch, cl_mem mask, cl_mem out)
{
    int rc;

    clf__lock(ctx);
    rc = masked_rowsum_unlocked(ctx, e, rows, n, ld, batch, mask, out);
    clf__unlock(ctx);
    return rc;
}

int
clf__mask_build(unsigned char *mask, size_t batch, size_t n,
                const unsigned *lengths, const unsigned char *key_mask)
{
    size_t b, j;

    for (b = 0; b < batch; b++) {
        if (lengths != NULL && (lengths[b] == 0 || lengths[b] > n))
            return clf__fail(CLF_EBAD_SIZE,
                             "lengths[%zu] = %u is outside 1..seq_len (%zu)", b,
                             lengths[b], n);
        for (j = 0; j < n; j++)
            mask[b * n + j] =
                lengths != NULL ? j < lengths[b] : key_mask[b * n + j] != 0;
    }
    return 0;
}
