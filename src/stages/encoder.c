/* Host side of the encoder kernels: layer norm, residual adds and
 * embeddings.  Each is one kernel call (clf__run_1d: its arguments set and
 * the kernel enqueued under the context lock). */
#include "stages/stages.h"

int
clf__layernorm(clf_context *ctx, cl_mem x, size_t x_off, cl_mem y, size_t y_off,
               size_t rows, size_t cols, cl_mem gamma, cl_mem beta, float eps)
{
    const cl_ulong xo = x_off, yo = y_off;
    const cl_uint r = (cl_uint)rows, c = (cl_uint)cols;
    const cl_float e = eps;
    const struct clf__arg args[] = {CLF_ARG(x),     CLF_ARG(xo),   CLF_ARG(y),
                                    CLF_ARG(yo),    CLF_ARG(r),    CLF_ARG(c),
                                    CLF_ARG(gamma), CLF_ARG(beta), CLF_ARG(e)};

    return CLF_RUN_1D(ctx, CLF_K_LAYERNORM, rows, args);
}

int
clf__residual_add(clf_context *ctx, cl_mem y, size_t y_off, cl_mem x,
                  size_t x_off, size_t count)
{
    const cl_ulong yo = y_off, xo = x_off, c = count;
    const struct clf__arg args[] = {CLF_ARG(y), CLF_ARG(yo), CLF_ARG(x),
                                    CLF_ARG(xo), CLF_ARG(c)};

    return CLF_RUN_1D(ctx, CLF_K_ADD, count, args);
}

int
clf__embed(clf_context *ctx, cl_mem ids, size_t rows, size_t n, size_t dim,
           cl_mem tokens, cl_mem positions, cl_mem out)
{
    const cl_uint r = (cl_uint)rows, nn = (cl_uint)n, d = (cl_uint)dim;
    const struct clf__arg args[] = {
        CLF_ARG(ids),    CLF_ARG(r),         CLF_ARG(nn), CLF_ARG(d),
        CLF_ARG(tokens), CLF_ARG(positions), CLF_ARG(out)};

    return CLF_RUN_1D(ctx, CLF_K_EMBED, rows * dim, args);
}
