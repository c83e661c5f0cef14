/* Host side of the fused attention kernel (cl/, same stem): Linformer
 * attention over the compressed slots in one kernel (scores, softmax,
 * weighted sum), a work-item holding its rows' whole score rows. */
#include "stages/stages.h"

size_t
clf__attend_slots(size_t L)
{
    return (L + CLF_ATTEND_SLOT_BLOCK - 1) / CLF_ATTEND_SLOT_BLOCK *
           CLF_ATTEND_SLOT_BLOCK;
}

size_t
clf__fused_rows(size_t n)
{
    return (n + CLF_ATTEND_ROWS - 1) / CLF_ATTEND_ROWS * CLF_ATTEND_ROWS;
}

static int
fused_unlocked(clf_context *ctx, const struct clf__attend_shape *sh, cl_mem q,
               cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem s, cl_mem o)
{
    const size_t lp = clf__attend_slots(sh->L);
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    cl_kernel t = ctx->kernels[CLF_K_KV_TRANSPOSE];
    cl_kernel a = ctx->kernels[CLF_K_FUSED];
    cl_uint L = (cl_uint)sh->L, width = (cl_uint)(hc * sh->dh);
    cl_uint dh = (cl_uint)sh->dh, hcu = (cl_uint)hc, lpu = (cl_uint)lp;
    cl_uint ldq = (cl_uint)sh->dq, n = (cl_uint)sh->n;
    cl_uint heads = (cl_uint)sh->heads, per = sh->kv_per_head != 0;
    float scale = sh->scale;
    size_t g[3];

    if (sh->n == 0 || sh->batch == 0)
        return 0;
    CLF_SET_ARG(t, 0, kbar);
    CLF_SET_ARG(t, 1, L);
    CLF_SET_ARG(t, 2, width);
    CLF_SET_ARG(t, 3, dh);
    CLF_SET_ARG(t, 4, hcu);
    CLF_SET_ARG(t, 5, lpu);
    CLF_SET_ARG(t, 6, kt);
    g[0] = lp;
    g[1] = hc * sh->dh;
    g[2] = sh->batch;
    CLF_TRY(clf__enqueue3(ctx, CLF_K_KV_TRANSPOSE, g, 0, "key transpose"));

    CLF_SET_ARG(a, 0, q);
    CLF_SET_ARG(a, 1, ldq);
    CLF_SET_ARG(a, 2, kt);
    CLF_SET_ARG(a, 3, vbar);
    CLF_SET_ARG(a, 4, width);
    CLF_SET_ARG(a, 5, s);
    CLF_SET_ARG(a, 6, o);
    CLF_SET_ARG(a, 7, n);
    CLF_SET_ARG(a, 8, L);
    CLF_SET_ARG(a, 9, lpu);
    CLF_SET_ARG(a, 10, dh);
    CLF_SET_ARG(a, 11, heads);
    CLF_SET_ARG(a, 12, per);
    CLF_SET_ARG(a, 13, scale);
    g[0] = clf__fused_rows(sh->n) / CLF_ATTEND_ROWS;
    g[1] = sh->heads;
    g[2] = sh->batch;
    return clf__enqueue3(ctx, CLF_K_FUSED, g, 1, "fused attention");
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__fused(clf_context *ctx, const struct clf__attend_shape *sh, cl_mem q,
           cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem s, cl_mem o)
{
    int rc;

    clf__lock(ctx);
    rc = fused_unlocked(ctx, sh, q, kbar, vbar, kt, s, o);
    clf__unlock(ctx);
    return rc;
}
