/* Host side of cl/softmax.cl.  Three kernels compute the same row softmax;
 * which is fastest depends on the device (a CPU runtime favours one row per
 * work-item with wide loads, a GPU one work-group per row), so each context
 * times them once on a typical shape and keeps the fastest. */
#include "internal.h"

#include <stdlib.h>

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
        while (local * 2 <= ctx->kernel_wg[id] &&
               local * 2 <= CLF_SOFTMAX_WG && local < cols)
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

struct softmax_timing {
    cl_mem m;
    size_t rows, cols;
};

static int
run_softmax(clf_context *ctx, int variant, void *user)
{
    const struct softmax_timing *t = user;
    return clf__softmax_rows_variant(ctx, variant, t->m, 0, t->rows, t->cols);
}

int
clf__softmax_choose(clf_context *ctx)
{
    /* 2048 rows of 256 slots: a Linformer layer's scores at n=256, h=8. */
    struct softmax_timing t = {NULL, 2048, 256};
    const char *force = getenv("CLINFORMER_SOFTMAX");
    int rc = 0, best;

    ctx->softmax_variant = CLF_SOFTMAX_SCALAR;
    if (force != NULL && force[0] >= '0' &&
        force[0] < '0' + CLF_SOFTMAX_VARIANTS && force[1] == '\0') {
        ctx->softmax_variant = force[0] - '0';
        return 0;
    }
    t.m = clf__timing_buffer(ctx, t.rows * t.cols, 0, &rc);
    if (t.m == NULL)
        return rc;
    best = clf__time_variants(ctx, CLF_SOFTMAX_VARIANTS, run_softmax, &t, 3,
                              ctx->softmax_ms);
    clReleaseMemObject(t.m);
    /* Should every variant fail, the scalar one stays and its failure
     * shows at the first forward. */
    if (best >= 0)
        ctx->softmax_variant = best;
    return 0;
}
