/* Host side of cl/attend.cl: Linformer attention over the compressed slots
 * in one kernel (scores, softmax, weighted sum). */
#include "internal.h"

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

int
clf__attend(clf_context *ctx, const struct clf__attend_shape *sh, cl_mem q,
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

/* Steps 3 to 5 of a forward the other way: batched GEMM, row softmax,
 * batched GEMM (what attention.c does when the fused kernel is not used). */
static int
gemm_path(clf_context *ctx, const struct clf__attend_shape *sh, cl_mem q,
          cl_mem kbar, cl_mem vbar, cl_mem s, cl_mem o)
{
    const size_t n = sh->n, L = sh->L, dh = sh->dh, h = sh->heads;
    const size_t width = (sh->kv_per_head ? h : 1) * dh;
    const size_t kv = sh->kv_per_head ? dh : 0;

    CLF_TRY(clf__gemm_batched(ctx, 0, 1, n, L, dh, sh->scale, q, 0, sh->dq,
                              dh, kbar, 0, width, kv, 0.0f, s, 0, L, n * L,
                              h));
    CLF_TRY(clf__softmax_rows(ctx, s, 0, h * n, L));
    return clf__gemm_batched(ctx, 0, 0, n, dh, L, 1.0f, s, 0, L, n * L, vbar,
                             0, width, kv, 0.0f, o, 0, sh->dq, dh, h);
}

struct attend_timing {
    struct clf__attend_shape sh;
    cl_mem m[6]; /* q, kbar, vbar, kt, s, o */
};

static int
run_attend(clf_context *ctx, int variant, void *user)
{
    const struct attend_timing *t = user;
    const cl_mem *m = t->m;

    if (variant == CLF_ATTEND_GEMM - 1)
        return gemm_path(ctx, &t->sh, m[0], m[1], m[2], m[4], m[5]);
    return clf__attend(ctx, &t->sh, m[0], m[1], m[2], m[3], m[4], m[5]);
}

int
clf__attend_choose(clf_context *ctx)
{
    /* A typical Linformer layer: 1024 queries, k = 256, 8 heads of 64. */
    struct attend_timing t = {{1, 8, 1024, 64, 512, 256, 1, 0.125f}, {NULL}};
    const size_t lp = clf__attend_slots(t.sh.L);
    const size_t sizes[6] = {t.sh.n * t.sh.dq,
                             t.sh.L * t.sh.dq,
                             t.sh.L * t.sh.dq,
                             t.sh.heads * t.sh.dh * lp,
                             t.sh.heads * clf__attend_rows(t.sh.n) * lp,
                             t.sh.n * t.sh.dq};
    static const char *const names[2] = {"gemm", "fused"};
    int rc = 0, best = 0, i;

    if (ctx->attend_variant != CLF_ATTEND_UNDECIDED)
        return 0;
    rc = clf__forced_variant("CLINFORMER_ATTEND", names, 2, &best);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        ctx->attend_variant = CLF_ATTEND_GEMM + best;
        return 0;
    }
    for (i = 0; i < 6 && rc == 0; i++)
        t.m[i] = clf__timing_buffer(ctx, sizes[i], (unsigned)i, &rc);
    if (rc == 0) {
        best = clf__time_variants(ctx, 2, run_attend, &t, 2, ctx->attend_ms);
        if (best >= 0)
            ctx->attend_variant = CLF_ATTEND_GEMM + best;
    }
    for (i = 0; i < 6; i++)
        if (t.m[i] != NULL)
            clReleaseMemObject(t.m[i]);
    return rc != 0 ? rc : best < 0 ? best : 0;
}
