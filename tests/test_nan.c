/* NaN propagates as in PyTorch: a score row holding a NaN gives NaN
 * probabilities for that row, through every softmax kernel and through both
 * ways attention over the slots runs (GEMM path, with each softmax kernel,
 * the fused and the streaming kernel).  Fully masked rows (all -inf) still give
 * zeros. */
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define POISON 12345.0f /* finite: a NaN seen was computed, not left over */

/* Rows of 37 columns (a tail past the 8-lane blocks): finite; one NaN;
 * all NaN; a NaN with the rest -inf; all -inf. */
enum { FINITE, ONE_NAN, ALL_NAN, NAN_MASKED, MASKED, ROWS };
#define COLS 37

static void
softmax_rows(int variant, float *buf)
{
    clf_context *ctx = tu_context();
    cl_mem m;
    cl_int err;

    ck_assert_int_eq(clf_context_build(ctx), 0);
    m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       ROWS * COLS * sizeof(float), buf, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clf__softmax_rows_variant(ctx, variant, m, 0, ROWS, COLS),
                     0);
    ck_assert_int_eq(clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0,
                                         ROWS * COLS * sizeof(float), buf, 0,
                                         NULL, NULL),
                     CL_SUCCESS);
    clReleaseMemObject(m);
}

START_TEST(nan_softmax_row_becomes_nan)
{
    float in[ROWS * COLS], out[ROWS * COLS];
    double ref[COLS];
    size_t j;
    int v;

    tu_fill(in, ROWS * COLS, 77, -3.0f, 3.0f);
    in[ONE_NAN * COLS + 30] = NAN;
    for (j = 0; j < COLS; j++) {
        in[ALL_NAN * COLS + j] = NAN;
        in[NAN_MASKED * COLS + j] = j == 2 ? NAN : -INFINITY;
        in[MASKED * COLS + j] = -INFINITY;
    }
    ref_softmax(in, 1, COLS, ref);
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        memcpy(out, in, sizeof in);
        softmax_rows(v, out);
        /* 1e-6 absolute on probabilities, as the softmax suite. */
        for (j = 0; j < COLS; j++)
            ck_assert_double_eq_tol(out[FINITE * COLS + j], ref[j], 1e-6);
        for (j = 0; j < COLS; j++) {
            ck_assert_msg(isnan(out[ONE_NAN * COLS + j]),
                          "variant %d one NaN: [%zu] = %g", v, j,
                          out[ONE_NAN * COLS + j]);
            ck_assert_msg(isnan(out[ALL_NAN * COLS + j]),
                          "variant %d all NaN: [%zu] = %g", v, j,
                          out[ALL_NAN * COLS + j]);
            ck_assert_msg(isnan(out[NAN_MASKED * COLS + j]),
                          "variant %d NaN among -inf: [%zu] = %g", v, j,
                          out[NAN_MASKED * COLS + j]);
            ck_assert_msg(out[MASKED * COLS + j] == 0.0f,
                          "variant %d masked: [%zu] = %g", v, j,
                          out[MASKED * COLS + j]);
        }
    }
}
END_TEST

/* d_h 16, so the fused kernel applies; two sequences of 20. */
#define B 2
#define N 20

static clf_attention_desc
nan_desc(void)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 2;
    d.max_seq_len = 40;
    d.k = 8;
    return d;
}

/* Forwards x through every way: the GEMM path with each softmax kernel,
 * then the fused and the streaming kernel; check(y, way) judges each
 * output. */
static void
every_way(struct layer *l, const float *x,
          void (*check)(const float *y, const char *way))
{
    static const char *const ways[] = {
        "GEMM path, scalar softmax", "GEMM path, vector softmax",
        "GEMM path, group softmax", "fused kernel", "streaming kernel"};
    clf_context *ctx = tu_context();
    size_t count = (size_t)B * N * 32, i;
    float *y = tu_malloc(count * sizeof *y);
    int saved = ctx->softmax_variant, w, rc;

    for (w = 0; w < 5; w++) {
        clf__attention_set_attend(l->att, w < 3    ? CLF_ATTEND_GEMM
                                          : w == 3 ? CLF_ATTEND_FUSED
                                                   : CLF_ATTEND_FLASH);
        if (w < 3)
            ctx->softmax_variant = w;
        for (i = 0; i < count; i++)
            y[i] = POISON;
        rc = clf_attention_forward(l->att, x, B, N, y);
        ck_assert_msg(rc == 0, "%s: %s", ways[w], clf_last_error());
        ck_assert_int_eq(clf__attention_last_fused(l->att), w == 3);
        ck_assert_int_eq(clf__attention_last_flash(l->att), w == 4);
        check(y, ways[w]);
    }
    ctx->softmax_variant = saved;
    clf__attention_set_attend(l->att, CLF_ATTEND_UNDECIDED);
    free(y);
}

/* A NaN anywhere in sequence 0 reaches every compressed slot (E mixes all
 * positions), so every output of sequence 0 is NaN; sequence 1 is not. */
static void
sequence0_nan(const float *y, const char *way)
{
    size_t per = (size_t)N * 32, i;

    for (i = 0; i < per; i++)
        ck_assert_msg(isnan(y[i]), "%s: y[0][%zu] = %g", way, i, y[i]);
    for (i = per; i < 2 * per; i++)
        ck_assert_msg(isfinite(y[i]) && y[i] != POISON, "%s: y[1][%zu] = %g",
                      way, i - per, y[i]);
}

START_TEST(nan_input_row_gives_nan_rows)
{
    clf_attention_desc d = nan_desc();
    float x[B * N * 32];
    struct layer l;

    layer_make(&l, &d, 501);
    tu_fill(x, B * N * 32, 502, -1.0f, 1.0f);
    x[3 * 32 + 5] = NAN; /* sequence 0, position 3, feature 5 */
    every_way(&l, x, sequence0_nan);
    layer_free(&l);
}
END_TEST

/* A NaN in W_k makes one key column NaN at every position: every score of
 * the head holding it is NaN, and W_o mixes that head into every output. */
static void
all_nan(const float *y, const char *way)
{
    size_t i;

    for (i = 0; i < (size_t)B * N * 32; i++)
        ck_assert_msg(isnan(y[i]), "%s: y[%zu] = %g", way, i, y[i]);
}

START_TEST(nan_weight_gives_nan_rows)
{
    clf_attention_desc d = nan_desc();
    float x[B * N * 32];
    struct layer l;
    size_t count;

    layer_make(&l, &d, 503);
    ck_assert_int_eq(clf_attention_weight_size(l.att, CLF_WEIGHT_K, &count), 0);
    l.w[CLF_WEIGHT_K][20 * 32 + 7] = NAN; /* row 20: head 1 */
    ck_assert_int_eq(
        clf_attention_set_weight(l.att, CLF_WEIGHT_K, l.w[CLF_WEIGHT_K], count),
        0);
    tu_fill(x, B * N * 32, 504, -1.0f, 1.0f);
    every_way(&l, x, all_nan);
    layer_free(&l);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("nan");
    TCase *tc = tcase_create("nan");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, nan_softmax_row_becomes_nan);
    tcase_add_test(tc, nan_input_row_gives_nan_rows);
    tcase_add_test(tc, nan_weight_gives_nan_rows);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
