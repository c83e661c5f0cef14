/* Host side of the causal kernels: the exact in-block window of prefix-safe
 * causal Linformer. */
#include "stages/stages.h"

static int
causal_scores_unlocked(clf_context *ctx, const struct clf__causal_shape *sh,
                       cl_mem s, cl_mem q, cl_mem kp, cl_mem mask)
{
    cl_kernel k = ctx->kernels[CLF_K_CAUSAL_SCORES];
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
    return clf__launch_1d(ctx, CLF_K_CAUSAL_SCORES,
                          sh->batch * sh->heads * sh->n);
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
