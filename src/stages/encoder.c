/* Host side of the encoder kernels: layer norm, residual adds and
 * embeddings. */
#include "stages/stages.h"

static int
layernorm_unlocked(clf_context *ctx, cl_mem x, size_t x_off, cl_mem y,
                   size_t y_off, size_t rows, size_t cols, cl_mem gamma,
                   cl_mem beta, float eps)
{
    cl_kernel k = ctx->kernels[CLF_K_LAYERNORM];
    cl_ulong xo = x_off, yo = y_off;
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols;
    cl_float e = eps;

    CLF_SET_ARG(k, 0, x);
    CLF_SET_ARG(k, 1, xo);
    CLF_SET_ARG(k, 2, y);
    CLF_SET_ARG(k, 3, yo);
    CLF_SET_ARG(k, 4, r);
    CLF_SET_ARG(k, 5, c);
    CLF_SET_ARG(k, 6, gamma);
    CLF_SET_ARG(k, 7, beta);
    CLF_SET_ARG(k, 8, e);
    return clf__launch_1d(ctx, CLF_K_LAYERNORM, rows);
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__layernorm(clf_context *ctx, cl_mem x, size_t x_off, cl_mem y, size_t y_off,
               size_t rows, size_t cols, cl_mem gamma, cl_mem beta, float eps)
{
    int rc;

    clf__lock(ctx);
    rc = layernorm_unlocked(ctx, x, x_off, y, y_off, rows, cols, gamma, beta,
                            eps);
    clf__unlock(ctx);
    return rc;
}

static int
residual_add_unlocked(clf_context *ctx, cl_mem y, size_t y_off, cl_mem x,
                      size_t x_off, size_t count)
{
    cl_kernel k = ctx->kernels[CLF_K_ADD];
    cl_ulong yo = y_off, xo = x_off, c = count;

    CLF_SET_ARG(k, 0, y);
    CLF_SET_ARG(k, 1, yo);
    CLF_SET_ARG(k, 2, x);
    CLF_SET_ARG(k, 3, xo);
    CLF_SET_ARG(k, 4, c);
    return clf__launch_1d(ctx, CLF_K_ADD, count);
}

int
clf__residual_add(clf_context *ctx, cl_mem y, size_t y_off, cl_mem x,
                  size_t x_off, size_t count)
{
    int rc;

    clf__lock(ctx);
    rc = residual_add_unlocked(ctx, y, y_off, x, x_off, count);
    clf__unlock(ctx);
    return rc;
}

static int
embed_unlocked(clf_context *ctx, cl_mem ids, size_t rows, size_t n, size_t dim,
               cl_mem tokens, cl_mem positions, cl_mem out)
{
    cl_kernel k = ctx->kernels[CLF_K_EMBED];
    cl_uint r = (cl_uint)rows, nn = (cl_uint)n, d = (cl_uint)dim;

    CLF_SET_ARG(k, 0, ids);
    CLF_SET_ARG(k, 1, r);
    CLF_SET_ARG(k, 2, nn);
    CLF_SET_ARG(k, 3, d);
    CLF_SET_ARG(k, 4, tokens);
    CLF_SET_ARG(k, 5, positions);
    CLF_SET_ARG(k, 6, out);
    return clf__launch_1d(ctx, CLF_K_EMBED, rows * dim);
}

int
clf__embed(clf_context *ctx, cl_mem ids, size_t rows, size_t n, size_t dim,
           cl_mem tokens, cl_mem positions, cl_mem out)
{
    int rc;

    clf__lock(ctx);
    rc = embed_unlocked(ctx, ids, rows, n, dim, tokens, positions, out);
    clf__unlock(ctx);
    return rc;
}
