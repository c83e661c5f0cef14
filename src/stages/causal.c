/* Host side of the causal kernels: the exact in-block window of prefix-safe
 * causal Linformer. */
#include "stages/stages.h"

/* The arguments of both window kernels. */
static int
set_score_args(cl_kernel k, const struct clf__causal_shape *sh, cl_mem s,
               cl_mem q, cl_mem kp, cl_mem mask)
{
    cl_uint ld = (cl_uint)(sh->k + sh->block), dq = (cl_uint)sh->dq,
            dkv = (cl_uint)sh->dkv, b = (cl_uint)sh->batch,
            h = (cl_uint)sh->heads, n = (cl_uint)sh->n, dh = (cl_uint)sh->dh,
            kk = (cl_uint)sh->k, c = (cl_uint)sh->c, blk = (cl_uint)sh->block,
            kvh = sh->kv_per_head != 0, has = mask != NULL,
            b0 = (cl_uint)sh->block0;
    cl_float scale = sh->scale;
    cl_mem m = mask != NULL ? mask : s; /* any valid buffer when unused */

    CLF_SET_ARG(k, 0, s);
    CLF_SET_ARG(k, 1, ld);
    CLF_SET_ARG(k, 2, q);
    CLF_SET_ARG(k, 3, dq);
    CLF_SET_ARG(k, 4, kp);
    CLF_SET_ARG(k, 5, dkv);
    CLF_SET_ARG(k, 6, b);
    CLF_SET_ARG(k, 7, h);
    CLF_SET_ARG(k, 8, n);
    CLF_SET_ARG(k, 9, dh);
    CLF_SET_ARG(k, 10, kk);
    CLF_SET_ARG(k, 11, c);
    CLF_SET_ARG(k, 12, blk);
    CLF_SET_ARG(k, 13, kvh);
    CLF_SET_ARG(k, 14, scale);
    CLF_SET_ARG(k, 15, m);
    CLF_SET_ARG(k, 16, has);
    CLF_SET_ARG(k, 17, b0);
    return 0;
}

int
clf__causal_group_fits(const clf_context *ctx)
{
    const size_t tile = CLF_CAUSAL_TILE;
    struct clf__limits lim;

    clf__device_limits(ctx, &lim);
    return ctx->kernel_wg[CLF_K_CAUSAL_SCORES_WG] >= tile * tile &&
           lim.max_item[0] >= tile && lim.max_item[1] >= tile;
}

static int
causal_scores_unlocked(clf_context *ctx, const struct clf__causal_shape *sh,
                       cl_mem s, cl_mem q, cl_mem kp, cl_mem mask)
{
    const size_t tile = CLF_CAUSAL_TILE;
    const size_t tiles = (sh->block + tile - 1) / tile;
    const size_t blocks = (sh->n + sh->block - 1) / sh->block;
    size_t g[3], l[3] = {CLF_CAUSAL_TILE, CLF_CAUSAL_TILE, 1};
    cl_int err;

    if (sh->batch == 0 || sh->heads == 0 || sh->n == 0)
        return 0;
    if (!sh->group || !clf__causal_group_fits(ctx)) {
        CLF_TRY(set_score_args(ctx->kernels[CLF_K_CAUSAL_SCORES], sh, s, q, kp,
                               mask));
        return clf__launch_1d(ctx, CLF_K_CAUSAL_SCORES,
                              sh->batch * sh->heads * sh->n);
    }
    CLF_TRY(set_score_args(ctx->kernels[CLF_K_CAUSAL_SCORES_WG], sh, s, q, kp,
                           mask));
    g[0] = tiles * tile;
    g[1] = tiles * tile * blocks;
    g[2] = sh->batch * sh->heads;
    err = clf__enqueue_nd(ctx, ctx->kernels[CLF_K_CAUSAL_SCORES_WG], 3, g, l);
    if (err != CL_SUCCESS)
        return clf__fail(
            err, "causal_scores: enqueue of %zu work-groups failed (%d)",
            tiles * tiles * blocks * g[2], err);
    return 0;
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__causal_scores(clf_context *ctx, const struct clf__causal_shape *sh,
                   cl_mem s, cl_mem q, cl_mem kp, cl_mem mask)
{
    int rc;

    clf__lock(ctx);
    rc = causal_scores_unlocked(ctx, sh, s, q, kp, mask);
    clf__unlock(ctx);
    return rc;
}

static int
causal_apply_unlocked(clf_context *ctx, const struct clf__causal_shape *sh,
                      cl_mem o, cl_mem s, cl_mem vp)
{
    cl_kernel k = ctx->kernels[CLF_K_CAUSAL_APPLY];
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
    return clf__launch_1d(ctx, CLF_K_CAUSAL_APPLY,
                          sh->batch * sh->n * sh->heads * sh->dh);
}

int
clf__causal_apply(clf_context *ctx, const struct clf__causal_shape *sh,
                  cl_mem o, cl_mem s, cl_mem vp)
{
    int rc;

    clf__lock(ctx);
    rc = causal_apply_unlocked(ctx, sh, o, s, vp);
    clf__unlock(ctx);
    return rc;
}
