/* Host side of cl/attend.cl: Linformer attention over the compressed slots
 * in one kernel (scores, softmax, weighted sum). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

int
clf__attend_choose(clf_context *ctx)
{
    /* A typical Linformer layer: 1024 queries, k = 256, 8 heads of 64. */
    struct clf__attend_shape sh = {1, 8, 1024, 64, 512, 256, 1, 0.125f};
    const size_t lp = clf__attend_slots(sh.L);
    const size_t sizes[6] = {sh.n * sh.dq,           sh.L * sh.dq,
                             sh.L * sh.dq,           sh.heads * sh.dh * lp,
                             sh.heads * clf__attend_rows(sh.n) * lp,
                             sh.n * sh.dq};
    const char *force = getenv("CLINFORMER_ATTEND");
    cl_mem m[6] = {NULL};
    double best = -1.0;
    cl_int err;
    int rc = 0, v, i;

    if (ctx->attend_variant != CLF_ATTEND_UNDECIDED)
        return 0;
    if (force != NULL && *force != '\0') {
        if (strcmp(force, "gemm") == 0)
            ctx->attend_variant = CLF_ATTEND_GEMM;
        else if (strcmp(force, "fused") == 0)
            ctx->attend_variant = CLF_ATTEND_FUSED;
        else
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "CLINFORMER_ATTEND is \"%s\"; expected gemm or "
                             "fused",
                             force);
        return 0;
    }
    for (i = 0; i < 6; i++) {
        float *host = malloc(sizes[i] * sizeof *host);
        size_t j;
        if (host == NULL) {
            rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
            goto done;
        }
        for (j = 0; j < sizes[i]; j++)
            host[j] = (float)((j * 7 + (size_t)i) % 101) * 0.01f - 0.5f;
        m[i] = clCreateBuffer(ctx->context,
                              CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              sizes[i] * sizeof(float), host, &err);
        free(host);
        if (m[i] == NULL) {
            rc = clf__fail(err, "attention timing buffer failed (%d)", err);
            goto done;
        }
    }
    for (v = CLF_ATTEND_GEMM; v <= CLF_ATTEND_FUSED; v++) {
        double t = 0.0;
        int rep;
        /* The first run pays any lazy compilation; keep the best of the
         * next two. */
        for (rep = 0; rep < 3; rep++) {
            double t0 = now_s(), dt;
            rc = v == CLF_ATTEND_GEMM
                     ? gemm_path(ctx, &sh, m[0], m[1], m[2], m[4], m[5])
                     : clf__attend(ctx, &sh, m[0], m[1], m[2], m[3], m[4],
                                   m[5]);
            if (rc != 0)
                goto done;
            if ((err = clFinish(ctx->queue)) != CL_SUCCESS) {
                rc = clf__fail(err, "attention timing: clFinish failed (%d)",
                               err);
                goto done;
            }
            dt = now_s() - t0;
            if (rep > 0 && (t == 0.0 || dt < t))
                t = dt;
        }
        ctx->attend_ms[v - 1] = t * 1e3;
        if (best < 0.0 || t < best) {
            best = t;
            ctx->attend_variant = v;
        }
    }
done:
    for (i = 0; i < 6; i++)
        if (m[i] != NULL)
            clReleaseMemObject(m[i]);
    return rc;
}
