/* Host side of the fused attention kernel (cl/, same stem): Linformer attention
 * over the compressed slots in one kernel (scores, softmax, weighted sum). */
#include "internal.h"

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
clf__attend_scores(clf_context *ctx, const struct clf__attend_shape *sh,
                   size_t b, size_t seqs, size_t r0, size_t rows, cl_mem q,
                   cl_mem kbar, cl_mem s, size_t s_off, size_t ld)
{
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    const size_t width = hc * sh->dh, L = sh->L;
    const struct clf__gemm_group g = {seqs, sh->n * sh->dq, L * width,
                                      sh->heads * rows * ld};

    return clf__gemm_grouped(ctx, 0, 1, rows, L, sh->dh, sh->scale, q,
                             (b * sh->n + r0) * sh->dq, sh->dq, sh->dh, kbar,
                             b * L * width, width, sh->kv_per_head ? sh->dh : 0,
                             0.0f, s, s_off, ld, rows * ld, sh->heads, &g);
}

int
clf__attend_weigh(clf_context *ctx, const struct clf__attend_shape *sh,
                  size_t b, size_t seqs, size_t r0, size_t rows, cl_mem s,
                  size_t s_off, size_t ld, cl_mem vbar, cl_mem o)
{
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    const size_t width = hc * sh->dh, L = sh->L;
    const struct clf__gemm_group g = {seqs, sh->heads * rows * ld, L * width,
                                      sh->n * sh->dq};

    return clf__gemm_grouped(
        ctx, 0, 0, rows, sh->dh, L, 1.0f, s, s_off, ld, rows * ld, vbar,
        b * L * width, width, sh->kv_per_head ? sh->dh : 0, 0.0f, o,
        (b * sh->n + r0) * sh->dq, sh->dq, sh->dh, sh->heads, &g);
}

struct attend_timing {
    struct clf__attend_shape sh;
    int softmax;
    cl_mem m[6]; /* q, kbar, vbar, kt, s, o */
};

static int
run_attend(clf_context *ctx, int variant, void *user)
{
    const struct attend_timing *t = user;
    const cl_mem *m = t->m;
    const size_t n = t->sh.n, L = t->sh.L;

    if (variant == CLF_ATTEND_FUSED - 1)
        return clf__attend(ctx, &t->sh, m[0], m[1], m[2], m[3], m[4], m[5]);
    CLF_TRY(
        clf__attend_scores(ctx, &t->sh, 0, 1, 0, n, m[0], m[1], m[4], 0, L));
    CLF_TRY(clf__softmax_rows_variant(ctx, t->softmax, m[4], 0, t->sh.heads * n,
                                      L));
    return clf__attend_weigh(ctx, &t->sh, 0, 1, 0, n, m[4], 0, L, m[2], m[5]);
}

static int
time_attend(clf_context *ctx, const char *bucket, struct attend_timing *t,
            int *variant)
{
    const size_t lp = clf__attend_slots(t->sh.L);
    const size_t hc = t->sh.kv_per_head ? t->sh.heads : 1;
    const size_t sizes[6] = {t->sh.n * t->sh.dq,
                             t->sh.L * hc * t->sh.dh,
                             t->sh.L * hc * t->sh.dh,
                             hc * t->sh.dh * lp,
                             t->sh.heads * clf__attend_rows(t->sh.n) * lp,
                             t->sh.n * t->sh.dq};
    double ms[CLF_MAX_CANDIDATES] = {0};
    int rc = 0, best = -1, i;

    for (i = 0; i < 6 && rc == 0; i++)
        t->m[i] = clf__timing_buffer(ctx, sizes[i], (unsigned)i, &rc);
    if (rc == 0)
        best = clf__time_variants(ctx, 2, run_attend, t, 2, ms);
    for (i = 0; i < 6; i++)
        if (t->m[i] != NULL)
            clReleaseMemObject(t->m[i]);
    if (rc != 0 || best < 0)
        return rc != 0 ? rc : best;
    clf__choice_record(ctx, CLF_KIND_ATTEND, bucket, best, ms);
    *variant = CLF_ATTEND_GEMM + best;
    return 0;
}

int
clf__attend_resolve(clf_context *ctx, const struct clf__attend_shape *sh,
                    int softmax, int *variant)
{
    struct attend_timing t;
    char bucket[CLF_BUCKET_MAX];
    int found, best = 0, rc;

    clf__lock(ctx);
    /* Pinned (by the tuner, or tests) under the lock like the rest. */
    if (ctx->attend_variant != CLF_ATTEND_UNDECIDED) {
        *variant = ctx->attend_variant;
        clf__unlock(ctx);
        return 0;
    }
    snprintf(bucket, sizeof bucket, "n%zu.l%zu.h%zu.d%zu.%s",
             clf__pow2_bucket(sh->n, (size_t)1 << 20),
             clf__pow2_bucket(sh->L, (size_t)1 << 20), sh->heads, sh->dh,
             sh->kv_per_head ? "kvh" : "kv1");
    memset(&t, 0, sizeof t);
    t.sh = *sh;
    t.sh.batch = 1;
    if (t.sh.n > 4096)
        t.sh.n = 4096; /* keeps the timing short */
    t.softmax = softmax;
    found = clf__choice_lookup(ctx, CLF_KIND_ATTEND, bucket, &best);
    if (found == 1)
        *variant = CLF_ATTEND_GEMM + best;
    rc = found != 0 ? found : time_attend(ctx, bucket, &t, variant);
    clf__unlock(ctx);
    return rc < 0 ? rc : 0;
}
