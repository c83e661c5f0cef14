/* Host side of the softmax kernels (cl/, same stem).  Three kernels
 * compute the same row softmax; which is fastest depends on the device (a
 * CPU runtime favours one row per work-item with wide loads, a GPU one
 * work-group per row), so a plan times them on its shape, or takes the
 * device's stored choice (choose.c). */
#include "stages/stages.h"

#include <stdio.h>
#include <stdlib.h>

static const enum clf__kernel_id kernel_of[CLF_SOFTMAX_VARIANTS] = {
    CLF_K_SOFTMAX_ROWS, CLF_K_SOFTMAX_VEC, CLF_K_SOFTMAX_WG};

static int
softmax_rows_variant_unlocked(clf_context *ctx, int variant, cl_mem s,
                              size_t off, size_t rows, size_t cols)
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
        while (local * 2 <= ctx->kernel_wg[id] && local * 2 <= CLF_SOFTMAX_WG &&
               local < cols)
            local *= 2;
        global = rows * local;
        err = clf__enqueue_nd(ctx, k, 1, &global, &local);
        if (err != CL_SUCCESS)
            return clf__fail(err, "softmax: enqueue of %zu rows failed (%d)",
                             rows, err);
        return 0;
    }
    return clf__launch_1d(ctx, id, rows);
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__softmax_rows_variant(clf_context *ctx, int variant, cl_mem s, size_t off,
                          size_t rows, size_t cols)
{
    int rc;

    clf__lock(ctx);
    rc = softmax_rows_variant_unlocked(ctx, variant, s, off, rows, cols);
    clf__unlock(ctx);
    return rc;
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

/* The variants on `rows` rows of `cols`, rows capped so that the timing
 * buffer stays under 16 MiB. */
static int
time_softmax(clf_context *ctx, const char *bucket, size_t rows, size_t cols,
             int *variant)
{
    struct softmax_timing t = {NULL, rows, cols};
    double ms[CLF_MAX_CANDIDATES] = {0};
    size_t cap = ((size_t)4 << 20) / (cols ? cols : 1);
    int rc = 0, best;

    if (t.rows > cap)
        t.rows = cap ? cap : 1;
    t.m = clf__timing_buffer(ctx, t.rows * t.cols, 0, &rc);
    if (t.m == NULL)
        return rc;
    best =
        clf__time_variants(ctx, CLF_SOFTMAX_VARIANTS, run_softmax, &t, 3, ms);
    clReleaseMemObject(t.m);
    if (best < 0)
        return best;
    clf__choice_record(ctx, CLF_KIND_SOFTMAX, bucket, best, ms);
    *variant = best;
    return 0;
}

int
clf__softmax_resolve(clf_context *ctx, size_t rows, size_t cols, int *variant)
{
    char bucket[CLF_BUCKET_MAX];
    int found, rc;

    snprintf(bucket, sizeof bucket, "r%zu.c%zu",
             clf__pow2_bucket(rows, (size_t)1 << 16),
             clf__pow2_bucket(cols, (size_t)1 << 20));
    clf__lock(ctx);
    found = clf__choice_lookup(ctx, CLF_KIND_SOFTMAX, bucket, variant);
    rc = found != 0 ? found : time_softmax(ctx, bucket, rows, cols, variant);
    clf__unlock(ctx);
    return rc < 0 ? rc : 0;
}
