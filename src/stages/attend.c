/* Host side of the fused attention kernel (cl/, same stem): Linformer attention
 * over the compressed slots in one kernel (scores, softmax, weighted sum). */
#include "stages/stages.h"

#include <stdio.h>
#include <string.h>

size_t
clf__attend_slots(size_t L)
{
    return (L + CLF_ATTEND_SLOT_BLOCK - 1) / CLF_ATTEND_SLOT_BLOCK *
           CLF_ATTEND_SLOT_BLOCK;
}

size_t
clf__attend_rows(size_t n)
{
    return (n + CLF_ATTEND_ROWS - 1) / CLF_ATTEND_ROWS * CLF_ATTEND_ROWS;
}

static int
attend_unlocked(clf_context *ctx, const struct clf__attend_shape *sh, cl_mem q,
                cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem s, cl_mem o)
{
    const size_t lp = clf__attend_slots(sh->L);
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    cl_kernel t = ctx->kernels[CLF_K_KV_TRANSPOSE];
    cl_kernel a = ctx->kernels[CLF_K_ATTEND];
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
    g[0] = clf__attend_rows(sh->n) / CLF_ATTEND_ROWS;
    g[1] = sh->heads;
    g[2] = sh->batch;
    return clf__enqueue3(ctx, CLF_K_ATTEND, g, 1, "fused attention");
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__attend(clf_context *ctx, const struct clf__attend_shape *sh, cl_mem q,
            cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem s, cl_mem o)
{
    int rc;

    clf__lock(ctx);
    rc = attend_unlocked(ctx, sh, q, kbar, vbar, kt, s, o);
    clf__unlock(ctx);
    return rc;
}

int
clf__attend_scores(clf_context *ctx, int way,
                   const struct clf__attend_shape *sh, size_t b, size_t seqs,
                   size_t r0, size_t rows, cl_mem q, cl_mem kbar, cl_mem s,
                   size_t s_off, size_t ld)
{
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    const size_t width = hc * sh->dh, L = sh->L;
    const struct clf__gemm_group g = {seqs, sh->n * sh->dq, L * width,
                                      sh->heads * rows * ld};

    return clf__gemm_grouped(ctx, way, 0, 1, rows, L, sh->dh, sh->scale, q,
                             (b * sh->n + r0) * sh->dq, sh->dq, sh->dh, kbar,
                             b * L * width, width, sh->kv_per_head ? sh->dh : 0,
                             0.0f, s, s_off, ld, rows * ld, sh->heads, &g);
}

int
clf__attend_weigh(clf_context *ctx, int way, const struct clf__attend_shape *sh,
                  size_t b, size_t seqs, size_t r0, size_t rows, cl_mem s,
                  size_t s_off, size_t ld, cl_mem vbar, cl_mem o)
{
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    const size_t width = hc * sh->dh, L = sh->L;
    const struct clf__gemm_group g = {seqs, sh->heads * rows * ld, L * width,
                                      sh->n * sh->dq};

    return clf__gemm_grouped(
        ctx, way, 0, 0, rows, sh->dh, L, 1.0f, s, s_off, ld, rows * ld, vbar,
        b * L * width, width, sh->kv_per_head ? sh->dh : 0, 0.0f, o,
        (b * sh->n + r0) * sh->dq, sh->dq, sh->dh, sh->heads, &g);
}
