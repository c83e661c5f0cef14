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

/* The arguments after the row shape: the folded masks, or none. */
static int
set_mask_args(cl_kernel k, cl_mem s, const struct clf__score_mask *m)
{
    const struct clf__score_mask none = {NULL, 0, 1, 1, 0, 0};
    const struct clf__score_mask *x = m != NULL ? m : &none;
    cl_mem mask = x->mask != NULL ? x->mask : s; /* any valid buffer */
    cl_ulong mo = x->mask_off;
    cl_uint has = x->mask != NULL, causal = x->causal != 0,
            seq_rows = (cl_uint)(x->heads * x->chunk),
            chunk = (cl_uint)x->chunk, row0 = (cl_uint)x->row0;

    CLF_SET_ARG(k, 4, mask);
    CLF_SET_ARG(k, 5, mo);
    CLF_SET_ARG(k, 6, has);
    CLF_SET_ARG(k, 7, causal);
    CLF_SET_ARG(k, 8, seq_rows);
    CLF_SET_ARG(k, 9, chunk);
    CLF_SET_ARG(k, 10, row0);
    return 0;
}

/* The kernels index rows and keys with 32 bits. */
static int
check_shape(size_t rows, size_t cols, const struct clf__score_mask *m)
{
    const size_t lim = 0xffffffffu;

    if (rows > lim || cols > lim ||
        (m != NULL && (m->heads == 0 || m->chunk == 0 ||
                       m->heads > lim / m->chunk || m->row0 > lim - m->chunk)))
        return clf__fail(CLF_ETOO_LARGE,
                         "softmax: %zu rows of %zu scores pass 32-bit indices",
                         rows, cols);
    return 0;
}

static int
softmax_unlocked(clf_context *ctx, int variant, cl_mem s, size_t off,
                 size_t rows, size_t cols, const struct clf__score_mask *m)
{
    enum clf__kernel_id id = kernel_of[variant];
    cl_kernel k = ctx->kernels[id];
    cl_ulong o = off;
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols;

    if (rows == 0)
        return 0;
    CLF_TRY(check_shape(rows, cols, m));
    CLF_SET_ARG(k, 0, s);
    CLF_SET_ARG(k, 1, o);
    CLF_SET_ARG(k, 2, r);
    CLF_SET_ARG(k, 3, c);
    CLF_TRY(set_mask_args(k, s, m));
    if (variant == CLF_SOFTMAX_GROUP)
        return clf__softmax_launch_group(ctx, id, rows, cols, "softmax");
    return clf__launch_1d(ctx, id, rows);
}

int
clf__softmax_launch_group(clf_context *ctx, enum clf__kernel_id id, size_t rows,
                          size_t cols, const char *what)
{
    size_t local = 1, global;
    cl_int err;

    /* A power-of-two group, no wider than the row needs. */
    while (local * 2 <= ctx->kernel_wg[id] && local * 2 <= CLF_SOFTMAX_WG &&
           local < cols)
        local *= 2;
    global = rows * local;
    err = clf__enqueue_nd(ctx, ctx->kernels[id], 1, &global, &local);
    if (err != CL_SUCCESS)
        return clf__fail(err, "%s: enqueue of %zu rows failed (%d)", what, rows,
                         err);
    return 0;
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__softmax_rows_variant(clf_context *ctx, int variant, cl_mem s, size_t off,
                          size_t rows, size_t cols)
{
    int rc;

    clf__lock(ctx);
    rc = softmax_unlocked(ctx, variant, s, off, rows, cols, NULL);
    clf__unlock(ctx);
    return rc;
}

int
clf__softmax_masked(clf_context *ctx, int variant, cl_mem s, size_t rows,
                    size_t cols, const struct clf__score_mask *m)
{
    int rc;

    clf__lock(ctx);
    rc = softmax_unlocked(ctx, variant, s, 0, rows, cols, m);
    clf__unlock(ctx);
    return rc;
}

/* The variant of clf__softmax_rows (a softmax outside a plan). */
CLF_FEATURE_INT(clf__softmax_pinned, clf__softmax_pin)

/* The kind of choice "softmax": the variants by enum
 * clf__softmax_variant, listed first. */
static const char *const softmax_names[] = {"scalar", "vector", "group"};
static const char *const softmax_labels[] = {"softmax"};
static const struct clf__choice_kind softmax_kind = {
    "softmax", softmax_names, 3, softmax_labels, 1, 0, 1};
CLF_CHOICE_KIND(clf__softmax_kind, softmax_kind)

int
clf__softmax_rows(clf_context *ctx, cl_mem s, size_t off, size_t rows,
                  size_t cols)
{
    return clf__softmax_rows_variant(ctx, clf__softmax_pinned(ctx), s, off,
                                     rows, cols);
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
    *variant = clf__choice_record(ctx, CLF_KIND_SOFTMAX, bucket, best, ms);
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
    if (found == 0) {
        rc = time_softmax(ctx, bucket, rows, cols, variant);
        clf__choice_release(ctx);
    } else
        rc = found;
    clf__unlock(ctx);
    return rc < 0 ? rc : 0;
}
