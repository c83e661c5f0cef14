/* Host side of cl/softmax.cl.  Three kernels compute the same row softmax;
 * which is fastest depends on the device (a CPU runtime favours one row per
 * work-item with wide loads, a GPU one work-group per row), so each context
 * times them once on a typical shape and keeps the fastest. */
#include "internal.h"

#include <stdlib.h>
#include <time.h>

static const enum clf__kernel_id kernel_of[CLF_SOFTMAX_VARIANTS] = {
    CLF_K_SOFTMAX_ROWS, CLF_K_SOFTMAX_VEC, CLF_K_SOFTMAX_WG};

int
clf__softmax_rows_variant(clf_context *ctx, int variant, cl_mem s, size_t off,
                          size_t rows, size_t cols)
{
    enum clf__kernel_id id = kernel_of[variant];
    cl_kernel k = ctx->kernels[id];
    cl_ulong o = off;
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols;
    cl_int err;

    if (rows == 0)
        return 0;
    if ((err = clSetKernelArg(k, 0, sizeof s, &s)) != CL_SUCCESS ||
        (err = clSetKernelArg(k, 1, sizeof o, &o)) != CL_SUCCESS ||
        (err = clSetKernelArg(k, 2, sizeof r, &r)) != CL_SUCCESS ||
        (err = clSetKernelArg(k, 3, sizeof c, &c)) != CL_SUCCESS)
        return clf__fail(err, "softmax: clSetKernelArg failed (%d)", err);
    if (variant == CLF_SOFTMAX_GROUP) {
        /* A power-of-two group, no wider than the row needs. */
        size_t local = 1, global;
        while (local * 2 <= ctx->kernel_wg[id] && local * 2 <= 256 &&
               local < cols)
            local *= 2;
        global = rows * local;
        err = clEnqueueNDRangeKernel(ctx->queue, k, 1, NULL, &global, &local,
                                     0, NULL, NULL);
        if (err != CL_SUCCESS)
            return clf__fail(err, "softmax: enqueue of %zu rows failed (%d)",
                             rows, err);
        return 0;
    }
    return clf__launch_1d(ctx, id, rows);
}

int
clf__softmax_rows(clf_context *ctx, cl_mem s, size_t off, size_t rows,
                  size_t cols)
{
    return clf__softmax_rows_variant(ctx, ctx->softmax_variant, s, off, rows,
                                     cols);
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int
clf__softmax_choose(clf_context *ctx)
{
    /* 2048 rows of 256 slots: a Linformer layer's scores at n=256, h=8. */
    const size_t rows = 2048, cols = 256;
    const char *force = getenv("CLINFORMER_SOFTMAX");
    float *host;
    cl_mem m;
    cl_int err;
    double best = -1.0;
    int v, rep;
    size_t i;

    ctx->softmax_variant = CLF_SOFTMAX_SCALAR;
    if (force != NULL && force[0] >= '0' &&
        force[0] < '0' + CLF_SOFTMAX_VARIANTS && force[1] == '\0') {
        ctx->softmax_variant = force[0] - '0';
        return 0;
    }
    host = malloc(rows * cols * sizeof *host);
    if (host == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (i = 0; i < rows * cols; i++)
        host[i] = (float)(i % 97) * 0.01f;
    m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       rows * cols * sizeof(float), host, &err);
    free(host);
    if (m == NULL)
        return clf__fail(err, "softmax timing buffer failed (%d)", err);
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        double t = 0.0;
        /* The first run pays any lazy kernel compilation; keep the best of
         * the next three. */
        for (rep = 0; rep < 4; rep++) {
            double t0 = now_s(), dt;
            if (clf__softmax_rows_variant(ctx, v, m, 0, rows, cols) != 0 ||
                clFinish(ctx->queue) != CL_SUCCESS) {
                t = -1.0;
                break;
            }
            dt = now_s() - t0;
            if (rep > 0 && (t == 0.0 || dt < t))
                t = dt;
        }
        ctx->softmax_ms[v] = t * 1e3;
        if (t > 0.0 && (best < 0.0 || t < best)) {
            best = t;
            ctx->softmax_variant = v;
        }
    }
    clReleaseMemObject(m);
    return 0;
}
