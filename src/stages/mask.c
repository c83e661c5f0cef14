/* Host side of the mask kernels: key padding masks. */
#include "stages/stages.h"

int
clf__mask_rows(clf_context *ctx, cl_mem src, size_t src_off, cl_mem dst,
               size_t dst_off, size_t rows, size_t cols, cl_mem mask)
{
    const cl_ulong so = src_off, d = dst_off;
    const cl_uint r = (cl_uint)rows, c = (cl_uint)cols;
    const struct clf__arg args[] = {CLF_ARG(src), CLF_ARG(so), CLF_ARG(dst),
                                    CLF_ARG(d),   CLF_ARG(r),  CLF_ARG(c),
                                    CLF_ARG(mask)};

    return CLF_RUN_1D(ctx, CLF_K_MASK_ROWS, rows * cols, args);
}

int
clf__masked_rowsum(clf_context *ctx, cl_mem e, size_t rows, size_t n, size_t ld,
                   size_t batch, cl_mem mask, cl_mem out)
{
    const cl_uint r = (cl_uint)rows, nn = (cl_uint)n, l = (cl_uint)ld,
                  b = (cl_uint)batch;
    const struct clf__arg args[] = {CLF_ARG(e),  CLF_ARG(r), CLF_ARG(nn),
                                    CLF_ARG(l),  CLF_ARG(b), CLF_ARG(mask),
                                    CLF_ARG(out)};

    return CLF_RUN_1D(ctx, CLF_K_MASKED_ROWSUM, batch * rows, args);
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
