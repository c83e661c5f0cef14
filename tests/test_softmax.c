/* The softmax kernel against a double-precision reference.  Tolerance:
 * 1e-6 absolute on probabilities (float rounding of exp and the sum). */
#include "../bench/reference.h"
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-6

/* Runs the kernel on rows x cols values placed after `off` guard floats and
 * returns the device's result; checks the guard is untouched. */
static float *
run_softmax(const float *in, size_t rows, size_t cols, size_t off, int variant)
{
    clf_context *ctx = tu_context();
    size_t total = off + rows * cols, i;
    float *buf = tu_malloc(total * sizeof *buf);
    float *out = tu_malloc(rows * cols * sizeof *out);
    cl_mem m;
    cl_int err;

    ck_assert_int_eq(clf_context_build(ctx), 0);
    for (i = 0; i < off; i++)
        buf[i] = 123.0f;
    for (i = 0; i < rows * cols; i++)
        buf[off + i] = in[i];
    m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       total * sizeof(float), buf, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(
        clf__softmax_rows_variant(ctx, variant, m, off, rows, cols), 0);
    ck_assert_int_eq(clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0,
                                         total * sizeof(float), buf, 0, NULL,
                                         NULL),
                     CL_SUCCESS);
    clReleaseMemObject(m);
    for (i = 0; i < off; i++)
        ck_assert_float_eq(buf[i], 123.0f);
    for (i = 0; i < rows * cols; i++)
        out[i] = buf[off + i];
    free(buf);
    return out;
}

/* Every kernel variant against the reference. */
static void
check_against_ref(const float *in, size_t rows, size_t cols, size_t off)
{
    double *ref = tu_malloc(rows * cols * sizeof *ref);
    size_t i;
    int v;

    ref_softmax(in, rows, cols, ref);
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        float *out = run_softmax(in, rows, cols, off, v);
        for (i = 0; i < rows * cols; i++) {
            ck_assert_msg(isfinite(out[i]), "variant %d: element %zu is %f", v,
                          i, out[i]);
            ck_assert_msg(fabs(out[i] - ref[i]) <= TOL,
                          "variant %d: element %zu: %.9g vs reference %.9g", v,
                          i, out[i], ref[i]);
        }
        free(out);
    }
    free(ref);
}

START_TEST(softmax_matches_reference)
{
    const size_t shapes[][2] = {
        {1, 1}, {5, 3}, {17, 256}, {64, 257}, {3, 1000}};
    size_t s;

    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t n = shapes[s][0] * shapes[s][1];
        float *in = tu_malloc(n * sizeof *in);
        tu_fill(in, n, 200 + s, -8.0f, 8.0f);
        check_against_ref(in, shapes[s][0], shapes[s][1], s * 7);
        free(in);
    }
}
END_TEST

START_TEST(softmax_huge_logits_are_stable)
{
    const size_t rows = 6, cols = 40;
    float *in = tu_malloc(rows * cols * sizeof *in);
    size_t r, j;

    tu_fill(in, rows * cols, 300, -1.0f, 1.0f);
    for (r = 0; r < rows; r++)
        for (j = 0; j < cols; j++)
            in[r * cols + j] *= (r % 2 ? -1e4f : 1e4f);
    in[2 * cols + 5] = 1e4f; /* one dominant entry */
    check_against_ref(in, rows, cols, 0);
    free(in);
}
END_TEST

START_TEST(softmax_masked_row_is_zero)
{
    const size_t rows = 4, cols = 9;
    float *in = tu_malloc(rows * cols * sizeof *in);
    float *out;
    size_t j;
    int v;

    tu_fill(in, rows * cols, 400, -3.0f, 3.0f);
    for (j = 0; j < cols; j++)
        in[1 * cols + j] = -INFINITY; /* fully masked */
    for (j = 0; j < cols; j += 2)
        in[2 * cols + j] = -INFINITY; /* partly masked */
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        out = run_softmax(in, rows, cols, 3, v);
        for (j = 0; j < cols; j++) {
            ck_assert_msg(out[cols + j] == 0.0f,
                          "variant %d: masked row entry %zu is %f", v, j,
                          out[cols + j]);
            if (j % 2 == 0)
                ck_assert_float_eq(out[2 * cols + j], 0.0f);
        }
        free(out);
    }
    check_against_ref(in, rows, cols, 3);
    free(in);
}
END_TEST

START_TEST(softmax_rows_sum_to_one)
{
    const size_t rows = 33, cols = 129;
    float *in = tu_malloc(rows * cols * sizeof *in);
    float *out;
    size_t r, j;
    int v;

    tu_fill(in, rows * cols, 500, -20.0f, 20.0f);
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        out = run_softmax(in, rows, cols, 0, v);
        for (r = 0; r < rows; r++) {
            double sum = 0.0;
            for (j = 0; j < cols; j++)
                sum += out[r * cols + j];
            ck_assert_double_eq_tol(sum, 1.0, 1e-5);
        }
        free(out);
    }
    free(in);
}
END_TEST

/* Full mode's masks folded into every variant: B sequences of heads x
 * chunk rows over N keys, the queries row0.. of each, with a padding mask
 * (the last sequence all padding), the causal triangle, both and neither.
 * The masked keys hold NaN and huge values in the buffer: the softmax must
 * not read them (probability exactly 0), and the seen keys match the
 * double-precision reference within TOL. */
static void
check_folded(int variant, const unsigned char *mask, int causal, size_t row0,
             size_t chunk)
{
    enum { B = 3, H = 2, N = 37 };
    const size_t rows = B * H * chunk;
    clf_context *ctx = tu_context();
    float *in = tu_malloc(rows * N * sizeof *in);
    double *ref = tu_malloc(rows * N * sizeof *ref);
    const struct clf__score_mask m0 = {NULL, 0, H, chunk, row0, causal};
    struct clf__score_mask m = m0;
    cl_mem sm, mm = NULL;
    size_t i;
    int k = 0;
    cl_int err;

    tu_fill(in, rows * N, 77 + (unsigned)variant, -4.0f, 4.0f);
    ref_softmax_masked(in, rows, N, mask, H, chunk, row0, causal, ref);
    for (i = 0; i < rows * N; i++)
        if (ref[i] == 0.0) /* unseen: garbage the kernel must not read */
            in[i] = (k++ & 1) ? NAN : 1e30f;
    sm = tu_upload(ctx, in, rows * N);
    if (mask != NULL) {
        mm = clCreateBuffer(ctx->context,
                            CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, B * N + 5,
                            (void *)(mask - 5), &err);
        ck_assert_int_eq(err, CL_SUCCESS);
        m.mask = mm;
        m.mask_off = 5;
    }
    ck_assert_int_eq(clf__softmax_masked(ctx, variant, sm, rows, N, &m), 0);
    tu_download(ctx, sm, in, rows * N);
    for (i = 0; i < rows * N; i++)
        ck_assert_msg(ref[i] == 0.0 ? in[i] == 0.0f
                                    : fabs(in[i] - ref[i]) <= TOL,
                      "variant %d, mask %d, causal %d, row0 %zu: element "
                      "%zu: %.9g vs reference %.9g",
                      variant, mask != NULL, causal, row0, i, in[i], ref[i]);
    clReleaseMemObject(sm);
    if (mm != NULL)
        clReleaseMemObject(mm);
    free(in);
    free(ref);
}

START_TEST(softmax_folds_masks)
{
    enum { B = 3, N = 37 };
    unsigned char bytes[5 + B * N];
    size_t j;
    int v, c;

    memset(bytes, 0, sizeof bytes);
    for (j = 0; j < N; j++) {
        bytes[5 + j] = j % 3 != 1; /* scattered padding */
        bytes[5 + N + j] = j < 20; /* a length of 20 */
        bytes[5 + 2 * N + j] = 0;  /* nothing to see: zeros */
    }
    ck_assert_int_eq(clf_context_build(tu_context()), 0);
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++)
        for (c = 0; c < 2; c++) {
            check_folded(v, bytes + 5, c, 0, N);
            check_folded(v, bytes + 5, c, 11, 7); /* a chunk of rows */
            check_folded(v, NULL, c, 30, 7);      /* the triangle or none */
        }
}
END_TEST

/* With nothing stored and nothing forced, a plan times every variant on
 * its shape and keeps the fastest; forced by CLINFORMER_KERNELS, it takes
 * the forced one without timing. */
START_TEST(softmax_variant_is_chosen_by_timing)
{
    clf_context *ctx = tu_context();
    const char *env = getenv("CLINFORMER_KERNELS");
    const char *forced = env != NULL ? strstr(env, "softmax=") : NULL;
    char *was = getenv("CLINFORMER_CACHE_DIR");
    int v = -1, i;

    was = was != NULL ? strdup(was) : NULL;
    setenv("CLINFORMER_CACHE_DIR", "off", 1); /* nothing stored */
    ck_assert_int_eq(clf_context_build(ctx), 0);
    ck_assert_int_eq(clf__softmax_resolve(ctx, 3000, 200, &v), 0);
    if (was != NULL)
        setenv("CLINFORMER_CACHE_DIR", was, 1);
    else
        unsetenv("CLINFORMER_CACHE_DIR");
    free(was);
    ck_assert_int_ge(v, 0);
    ck_assert_int_lt(v, CLF_SOFTMAX_VARIANTS);
    ck_assert_int_eq(ctx->last[CLF_KIND_SOFTMAX], v);
    if (forced != NULL) {
        ck_assert_int_eq(ctx->last_source[CLF_KIND_SOFTMAX], CLF_SOURCE_FORCED);
        ck_assert_int_eq(strncmp(forced + 8, clf__choice_name(0, v),
                                 strlen(clf__choice_name(0, v))),
                         0);
        return;
    }
    ck_assert_int_eq(ctx->last_source[CLF_KIND_SOFTMAX], CLF_SOURCE_TIMED);
    ck_assert_str_eq(ctx->last_bucket[CLF_KIND_SOFTMAX], "r4096.c256");
    for (i = 0; i < CLF_SOFTMAX_VARIANTS; i++) {
        ck_assert(ctx->last_ms[CLF_KIND_SOFTMAX][i] > 0.0);
        ck_assert(ctx->last_ms[CLF_KIND_SOFTMAX][v] <=
                  ctx->last_ms[CLF_KIND_SOFTMAX][i]);
    }
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("softmax");
    TCase *tc = tcase_create("softmax");

    tcase_add_test(tc, softmax_matches_reference);
    tcase_add_test(tc, softmax_huge_logits_are_stable);
    tcase_add_test(tc, softmax_masked_row_is_zero);
    tcase_add_test(tc, softmax_rows_sum_to_one);
    tcase_add_test(tc, softmax_folds_masks);
    tcase_add_test(tc, softmax_variant_is_chosen_by_timing);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
