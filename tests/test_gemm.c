/* GEMMs through each way (CLBlast, the blocked kernel with its
 * transpose, the split way) against a double-precision product.
 *
 * Tolerance: |c - ref| <= 1e-6 * k + 1e-5 * max |ref| with inputs in
 * [-1, 1): float32 sums of k products stay well inside it, while a wrong
 * index, a missed tail row or column, or a lost accumulate is of order 1. */
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct gemm_case {
    int trans_b;
    size_t m, n, k, batch;
    float alpha, beta;
    size_t a_off, b_off, c_off; /* elements */
    int share_b;                /* b_stride 0 */
};

/* Runs the case with the context's GEMM way set to `variant` and checks
 * every element of C, including that nothing outside the batch's
 * matrices changed. */
static void
run_case(const struct gemm_case *g, int variant, unsigned long long seed)
{
    clf_context *ctx = tu_context();
    const size_t lda = g->k + 3, ldb = (g->trans_b ? g->k : g->n) + 5;
    const size_t ldc = g->n + 2;
    const size_t brows = g->trans_b ? g->n : g->k;
    const size_t as = g->m * lda, bs = g->share_b ? 0 : brows * ldb;
    const size_t cs = g->m * ldc;
    const size_t na = g->a_off + g->batch * as;
    const size_t nb = g->b_off + (g->share_b ? 1 : g->batch) * brows * ldb;
    const size_t nc = g->c_off + g->batch * cs + 7;
    tu_gemm_data d;
    int was = clf__gemm_pinned(ctx);
    size_t t, i, j, l, blocked_before = clf__gemm_state(ctx)->blocked_calls;
    size_t split_before = clf__gemm_state(ctx)->split_calls;
    /* what the blocked kernel takes; the split way also needs K over
     * one slice of 512 steps */
    const int takes = g->n % 16 == 0 && (g->beta == 0.0f || g->beta == 1.0f);
    struct clf__gemm_args args;
    int rc;

    tu_gemm_data_make(&d, ctx, na, nb, nc, seed);
    clf__gemm_pin(ctx, variant);
    args = (struct clf__gemm_args){.trans_b = g->trans_b,
                                   .m = g->m,
                                   .n = g->n,
                                   .k = g->k,
                                   .alpha = g->alpha,
                                   .beta = g->beta,
                                   .a = d.ma,
                                   .a_off = g->a_off,
                                   .lda = lda,
                                   .a_stride = as,
                                   .b = d.mb,
                                   .b_off = g->b_off,
                                   .ldb = ldb,
                                   .b_stride = bs,
                                   .c = d.mc,
                                   .c_off = g->c_off,
                                   .ldc = ldc,
                                   .c_stride = cs,
                                   .batch = g->batch};
    rc = clf__gemm(ctx, CLF_GEMM_UNDECIDED, &args);
    clf__gemm_pin(ctx, was);
    ck_assert_msg(rc == 0, "gemm: %s", clf_last_error());
    tu_download(ctx, d.mc, d.c, nc);
    ck_assert_int_eq(clf__gemm_state(ctx)->blocked_calls > blocked_before,
                     variant == CLF_GEMM_BLOCKED && takes);
    ck_assert_int_eq(clf__gemm_state(ctx)->split_calls > split_before,
                     variant == CLF_GEMM_SPLIT && takes && g->k > 512);

    for (i = 0; i < nc; i++) {
        size_t rel = i - g->c_off;
        int inside = i >= g->c_off && rel < g->batch * cs && rel % ldc < g->n;
        if (!inside)
            ck_assert_msg(d.c[i] == d.c0[i], "element %zu outside C changed",
                          i);
    }
    for (t = 0; t < g->batch; t++)
        for (i = 0; i < g->m; i++)
            for (j = 0; j < g->n; j++) {
                const size_t at = g->c_off + t * cs + i * ldc + j;
                double ref = 0.0, mag = 0.0;
                for (l = 0; l < g->k; l++) {
                    double x = d.a[g->a_off + t * as + i * lda + l];
                    double y = g->trans_b
                                   ? d.b[g->b_off + t * bs + j * ldb + l]
                                   : d.b[g->b_off + t * bs + l * ldb + j];
                    ref += x * y;
                    mag += fabs(x * y);
                }
                ref = g->alpha * ref + g->beta * d.c0[at];
                ck_assert_msg(fabs(d.c[at] - ref) <=
                                  1e-6 * (double)g->k + 1e-5 * (mag + 1.0),
                              "variant %d m=%zu n=%zu k=%zu trans_b=%d "
                              "batch %zu (%zu, %zu): %g, expected %g",
                              variant, g->m, g->n, g->k, g->trans_b, t, i, j,
                              (double)d.c[at], ref);
            }
    tu_gemm_data_free(&d);
}

static void
run_both(const struct gemm_case *g, unsigned long long seed)
{
    run_case(g, CLF_GEMM_CLBLAST, seed);
    run_case(g, CLF_GEMM_BLOCKED, seed);
}

/* The split way (the blocked kernel over slices of K at once, summed in
 * order) at inner dimensions that are multiples of no block: two slices
 * with a short last one, several, and past 64 slices of 512 (longer
 * slices then); one row of A (m = 1), one column of C (n = 1: not taken,
 * CLBlast runs it), row and column tails, a transposed B, batches with
 * their own and a shared B, alpha and accumulation, offsets. */
START_TEST(gemm_split_matches_reference)
{
    static const size_t shapes[][4] = {/* m, n, k, batch */
                                       {1, 16, 1031, 1},  {7, 80, 1100, 2},
                                       {37, 48, 2501, 1}, {66, 144, 600, 3},
                                       {5, 16, 33001, 1}, {1, 1, 1100, 1},
                                       {13, 64, 513, 2}};
    size_t i;

    for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        struct gemm_case g;
        memset(&g, 0, sizeof g);
        g.trans_b = (int)(i % 2);
        g.m = shapes[i][0];
        g.n = shapes[i][1];
        g.k = shapes[i][2];
        g.batch = shapes[i][3];
        g.share_b = i == 6;
        g.alpha = i % 3 ? 0.5f : 1.0f;
        g.beta = i % 2 ? 1.0f : 0.0f;
        g.a_off = 1 + i;
        g.b_off = 2;
        g.c_off = 3;
        run_case(&g, CLF_GEMM_SPLIT, 300 + i);
    }
}
END_TEST

/* The split way's sum runs in a fixed order: the same inputs give the
 * same bits every time (here twice in a process; across processes,
 * tests/test_cli.sh). */
START_TEST(gemm_split_same_bits_every_run)
{
    clf_context *ctx = tu_context();
    const size_t m = 9, n = 32, k = 3000;
    static float a[9 * 3000], b[3000 * 32], c1[9 * 32], c2[9 * 32];
    cl_mem ma, mb, mc;
    int was = clf__gemm_pinned(ctx), r;

    tu_fill(a, m * k, 310, -1.0f, 1.0f);
    tu_fill(b, k * n, 311, -1.0f, 1.0f);
    ma = tu_upload(ctx, a, m * k);
    mb = tu_upload(ctx, b, k * n);
    mc = tu_upload(ctx, c1, m * n);
    for (r = 0; r < 2; r++) {
        const struct clf__gemm_args g = {.m = m,
                                         .n = n,
                                         .k = k,
                                         .alpha = 1.0f,
                                         .a = ma,
                                         .lda = k,
                                         .b = mb,
                                         .ldb = n,
                                         .c = mc,
                                         .ldc = n,
                                         .batch = 1};
        clf__gemm_pin(ctx, CLF_GEMM_SPLIT);
        ck_assert_int_eq(clf__gemm(ctx, CLF_GEMM_UNDECIDED, &g), 0);
        clf__gemm_pin(ctx, was);
        tu_download(ctx, mc, r ? c2 : c1, m * n);
    }
    ck_assert_int_eq(memcmp(c1, c2, sizeof c1), 0);
    clReleaseMemObject(ma);
    clReleaseMemObject(mb);
    clReleaseMemObject(mc);
}
END_TEST

/* Row tails (m not a multiple of 6), a 64-column block plus a 16-column
 * one, inner dimensions from 1 up to several 1024-long slices, offsets
 * and leading dimensions. */
START_TEST(gemm_blocked_matches_reference)
{
    const size_t shapes[][3] = {{1, 16, 1},   {5, 80, 7},    {37, 48, 130},
                                {4, 64, 64},  {66, 144, 33}, {3, 16, 2},
                                {9, 32, 2500}};
    size_t i;
    int tb;

    for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (tb = 0; tb < 2; tb++) {
            struct gemm_case g;
            memset(&g, 0, sizeof g);
            g.trans_b = tb;
            g.m = shapes[i][0];
            g.n = shapes[i][1];
            g.k = shapes[i][2];
            g.batch = 1;
            g.alpha = 1.0f;
            g.a_off = 3;
            g.b_off = 5;
            g.c_off = 2;
            run_both(&g, 10 + 2 * i + (size_t)tb);
        }
}
END_TEST

/* Both column blocks of the blocked kernel, whichever the device's
 * vector width selects: 64 columns a work-item (16-float vectors) and 16
 * (8-float vectors), on row and column tails, a batch and accumulation;
 * k = 1100 takes two slices of the inner dimension with 64 columns and
 * three (512, 512, 76) with 16. */
START_TEST(gemm_blocked_column_blocks_match_reference)
{
    const size_t shapes[][3] = {
        {1, 16, 1}, {5, 80, 7}, {37, 48, 130}, {66, 144, 33}, {7, 208, 1100}};
    clf_context *ctx = tu_context();
    int was;
    size_t i;

    ck_assert_int_eq(clf_context_build(ctx), 0);
    was = clf__gemm_state(ctx)->cols64;
    clf__gemm_state(ctx)->cols64 = _i;
    for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        struct gemm_case g;
        memset(&g, 0, sizeof g);
        g.trans_b = (int)(i % 2);
        g.m = shapes[i][0];
        g.n = shapes[i][1];
        g.k = shapes[i][2];
        g.batch = 1 + i % 3;
        g.alpha = 0.5f;
        g.beta = i % 2 ? 1.0f : 0.0f;
        g.a_off = 1;
        g.b_off = 2;
        g.c_off = 3;
        run_both(&g, 200 + 10 * (size_t)_i + i);
    }
    clf__gemm_state(ctx)->cols64 = was;
}
END_TEST

/* Batches with their own B and with one shared B, alpha, and beta = 1
 * (accumulate into C). */
START_TEST(gemm_blocked_batched_and_accumulating)
{
    struct gemm_case g;
    int tb, share, acc;

    for (tb = 0; tb < 2; tb++)
        for (share = 0; share < 2; share++)
            for (acc = 0; acc < 2; acc++) {
                memset(&g, 0, sizeof g);
                g.trans_b = tb;
                g.m = 9;
                g.n = 32;
                g.k = 20;
                g.batch = 3;
                g.alpha = 0.5f;
                g.beta = acc ? 1.0f : 0.0f;
                g.share_b = share;
                g.a_off = 1;
                g.b_off = 4;
                g.c_off = 6;
                run_both(&g,
                         50 + 4 * (size_t)tb + 2 * (size_t)share + (size_t)acc);
            }
}
END_TEST

/* Shapes the blocked kernel does not take go to CLBlast and are right. */
START_TEST(gemm_falls_back_where_blocked_does_not_fit)
{
    struct gemm_case g;

    memset(&g, 0, sizeof g);
    g.m = 7;
    g.n = 30; /* not a multiple of 16 */
    g.k = 11;
    g.batch = 2;
    g.alpha = 1.0f;
    run_both(&g, 70);
    g.n = 32;
    g.beta = 0.25f; /* neither 0 nor 1 */
    run_both(&g, 71);
}
END_TEST

/* C = A op(B) + bias: the bias in the blocked kernel's last step (once,
 * also when the inner dimension is sliced), or a separate pass after
 * CLBlast; no bias leaves the plain product. */
START_TEST(gemm_with_bias_matches_reference)
{
    clf_context *ctx = tu_context();
    const size_t m = 7, n = 80, k = _i == 0 ? 19 : 2100;
    static float a[7 * 2100], b[80 * 2100], bias[80], c[7 * 80];
    cl_mem ma, mb, mbias, mc;
    int was = clf__gemm_pinned(ctx), v, tb, with;
    size_t i, j, l;

    ck_assert_int_eq(clf_context_build(ctx), 0);
    tu_fill(a, m * k, 90, -1.0f, 1.0f);
    tu_fill(b, n * k, 91, -1.0f, 1.0f);
    tu_fill(bias, n, 92, -1.0f, 1.0f);
    ma = tu_upload(ctx, a, m * k);
    mb = tu_upload(ctx, b, n * k);
    mbias = tu_upload(ctx, bias, n);
    mc = tu_upload(ctx, c, m * n);
    for (v = CLF_GEMM_CLBLAST; v <= CLF_GEMM_SPLIT; v++)
        for (tb = 0; tb < 2 && v != CLF_GEMM_TILED; tb++)
            for (with = 0; with < 2; with++) {
                const struct clf__gemm_args g = {.trans_b = tb,
                                                 .m = m,
                                                 .n = n,
                                                 .k = k,
                                                 .alpha = 1.0f,
                                                 .a = ma,
                                                 .lda = k,
                                                 .b = mb,
                                                 .ldb = tb ? k : n,
                                                 .c = mc,
                                                 .ldc = n,
                                                 .batch = 1,
                                                 .bias = with ? mbias : NULL};
                clf__gemm_pin(ctx, v);
                ck_assert_int_eq(clf__gemm(ctx, CLF_GEMM_UNDECIDED, &g), 0);
                clf__gemm_pin(ctx, was);
                tu_download(ctx, mc, c, m * n);
                for (i = 0; i < m; i++)
                    for (j = 0; j < n; j++) {
                        double ref = with ? bias[j] : 0.0;
                        for (l = 0; l < k; l++)
                            ref += (double)a[i * k + l] *
                                   (tb ? b[j * k + l] : b[l * n + j]);
                        ck_assert_msg(
                            fabs(c[i * n + j] - ref) < 1e-6 * (double)k + 1e-4,
                            "variant %d trans_b %d bias %d (%zu, "
                            "%zu): %g, expected %g",
                            v, tb, with, i, j, (double)c[i * n + j], ref);
                    }
            }
    clReleaseMemObject(ma);
    clReleaseMemObject(mb);
    clReleaseMemObject(mbias);
    clReleaseMemObject(mc);
}
END_TEST

/* C = act(A B^T + C + bias), act none, GELU or ReLU (an encoder's
 * feed-forward with its residual, and the activation where the blocked kernel
 * applies it: after the last slice of a long inner dimension, never before). */
START_TEST(gemm_accumulate_bias_act_matches_reference)
{
    clf_context *ctx = tu_context();
    const size_t m = 5, n = 48, k = _i == 0 ? 33 : 2100;
    static float a[5 * 2100], b[48 * 2100], bias[48], c[5 * 48], c0[5 * 48];
    cl_mem ma, mb, mbias, mc;
    int was = clf__gemm_pinned(ctx), v, act;
    size_t i, j, l;

    ck_assert_int_eq(clf_context_build(ctx), 0);
    tu_fill(a, m * k, 93, -0.2f, 0.2f);
    tu_fill(b, n * k, 94, -0.2f, 0.2f);
    tu_fill(bias, n, 95, -1.0f, 1.0f);
    tu_fill(c0, m * n, 96, -1.0f, 1.0f);
    ma = tu_upload(ctx, a, m * k);
    mb = tu_upload(ctx, b, n * k);
    mbias = tu_upload(ctx, bias, n);
    for (v = CLF_GEMM_CLBLAST; v <= CLF_GEMM_SPLIT; v++)
        for (act = CLF_ACT_NONE; act <= CLF_ACT_RELU && v != CLF_GEMM_TILED;
             act++) {
            struct clf__gemm_args g = {.trans_b = 1,
                                       .m = m,
                                       .n = n,
                                       .k = k,
                                       .alpha = 1.0f,
                                       .beta = 1.0f,
                                       .a = ma,
                                       .lda = k,
                                       .b = mb,
                                       .ldb = k,
                                       .ldc = n,
                                       .batch = 1,
                                       .bias = mbias,
                                       .act = act};
            g.c = mc = tu_upload(ctx, c0, m * n);
            clf__gemm_pin(ctx, v);
            ck_assert_int_eq(clf__gemm(ctx, CLF_GEMM_UNDECIDED, &g), 0);
            clf__gemm_pin(ctx, was);
            tu_download(ctx, mc, c, m * n);
            clReleaseMemObject(mc);
            for (i = 0; i < m; i++)
                for (j = 0; j < n; j++) {
                    double ref = c0[i * n + j] + bias[j];
                    for (l = 0; l < k; l++)
                        ref += (double)a[i * k + l] * b[j * k + l];
                    if (act == CLF_ACT_GELU)
                        ref = 0.5 * ref * (1.0 + erf(ref / sqrt(2.0)));
                    else if (act == CLF_ACT_RELU && ref < 0.0)
                        ref = 0.0;
                    ck_assert_msg(fabs(c[i * n + j] - ref) <
                                      1e-6 * (double)k + 1e-5,
                                  "variant %d act %d k %zu (%zu, %zu): %g, "
                                  "expected %g",
                                  v, act, k, i, j, (double)c[i * n + j], ref);
                }
        }
    clReleaseMemObject(ma);
    clReleaseMemObject(mb);
    clReleaseMemObject(mbias);
}
END_TEST

/* With nothing stored or forced, resolving a projection shape times every
 * way on it, keeps the fastest and reports it. */
START_TEST(gemm_way_is_chosen_by_timing)
{
    clf_context *ctx = tu_context();
    const double *ms = ctx->last_ms[CLF_KIND_GEMM];
    int v;

    if (getenv("CLINFORMER_KERNELS") != NULL)
        return; /* forced: nothing is timed */
    v = tu_gemm_resolve_fresh(ctx, 1000, 512, 512);
    ck_assert_int_ne(v, CLF_GEMM_UNDECIDED);
    ck_assert_int_eq(ctx->last_source[CLF_KIND_GEMM], CLF_SOURCE_TIMED);
    ck_assert_str_eq(ctx->last_bucket[CLF_KIND_GEMM], "m1024.n512.k512");
    /* The tiled kernel is timed where the device runs it. */
    ck_assert(ms[0] > 0.0 && ms[1] > 0.0);
    ck_assert(clf__tiled_usable(ctx) ? ms[2] > 0.0 : ms[2] == 0.0);
    /* The split way does not take K of one slice: not timed. */
    ck_assert(ms[3] == 0.0);
    ck_assert(ms[v - 1] <= ms[0] && ms[v - 1] <= ms[1] &&
              (ms[2] == 0.0 || ms[v - 1] <= ms[2]));
}
END_TEST

/* A registered weight read transposed by the blocked way: the kept
 * transpose gives the same bits as the copy made each time, is made once
 * per part read (offset, shape), follows the weight when its owner says it
 * changed, and is dropped when the owner forgets the weight; CLBlast,
 * which reads B transposed itself, makes none. */
START_TEST(gemm_kept_transpose_is_the_copy_it_replaces)
{
    clf_context *ctx = tu_context();
    const size_t m = 9, n = 48, k = 70, ld = 75, off = 3;
    static float a[9 * 70], b[3 + 2 * 48 * 75], c[9 * 48], plain[9 * 48];
    const size_t nb = sizeof b / sizeof b[0];
    cl_mem ma, mb, mc;
    const int was = clf__gemm_pinned(ctx);
    size_t i, j, l, kept0;
    int round;

    ck_assert_int_eq(clf_context_build(ctx), 0);
    kept0 = clf__gemm_kept_count(ctx);
    tu_fill(a, m * k, 120, -1.0f, 1.0f);
    tu_fill(b, nb, 121, -1.0f, 1.0f);
    ma = tu_upload(ctx, a, m * k);
    mb = tu_upload(ctx, b, nb);
    mc = tu_upload(ctx, c, m * n);
    clf__gemm_pin(ctx, CLF_GEMM_BLOCKED);
#define XWT(boff)                                                              \
    do {                                                                       \
        const struct clf__gemm_args g = {.trans_b = 1,                         \
                                         .m = m,                               \
                                         .n = n,                               \
                                         .k = k,                               \
                                         .alpha = 1.0f,                        \
                                         .a = ma,                              \
                                         .lda = k,                             \
                                         .b = mb,                              \
                                         .b_off = (boff),                      \
                                         .ldb = ld,                            \
                                         .c = mc,                              \
                                         .ldc = n,                             \
                                         .batch = 1};                          \
        ck_assert_int_eq(clf__gemm(ctx, CLF_GEMM_UNDECIDED, &g), 0);           \
    } while (0)
    XWT(off);
    tu_download(ctx, mc, plain, m * n);
    ck_assert_int_eq(clf__gemm_keep(ctx, mb), 0);
    ck_assert_uint_eq(clf__gemm_kept_bytes(ctx, mb), 0);
    for (round = 0; round < 2; round++) {
        XWT(off);
        tu_download(ctx, mc, c, m * n);
        ck_assert(memcmp(c, plain, sizeof c) == 0);
        ck_assert_uint_eq(clf__gemm_kept_bytes(ctx, mb), n * k * sizeof(float));
    }
    XWT(off + n * ld); /* another part: its own copy */
    ck_assert_uint_eq(clf__gemm_kept_bytes(ctx, mb), 2 * n * k * sizeof(float));
    /* New contents, registered again: the product follows them. */
    tu_fill(b, nb, 122, -1.0f, 1.0f);
    ck_assert_int_eq(clEnqueueWriteBuffer(ctx->queue, mb, CL_TRUE, 0,
                                          nb * sizeof(float), b, 0, NULL, NULL),
                     CL_SUCCESS);
    ck_assert_int_eq(clf__gemm_keep(ctx, mb), 0);
    ck_assert_uint_eq(clf__gemm_kept_bytes(ctx, mb), 0);
    XWT(off);
    tu_download(ctx, mc, c, m * n);
    for (i = 0; i < m; i++)
        for (j = 0; j < n; j++) {
            double ref = 0.0;
            for (l = 0; l < k; l++)
                ref += (double)a[i * k + l] * b[off + j * ld + l];
            ck_assert_msg(fabs(c[i * n + j] - ref) < 1e-6 * (double)k + 1e-5,
                          "(%zu, %zu): %g, expected %g", i, j,
                          (double)c[i * n + j], ref);
        }
    clf__gemm_forget(ctx, mb);
    ck_assert_uint_eq(clf__gemm_kept_bytes(ctx, mb), 0);
    ck_assert_uint_eq(clf__gemm_kept_count(ctx), kept0);
    /* CLBlast reads the registered weight itself. */
    ck_assert_int_eq(clf__gemm_keep(ctx, mb), 0);
    clf__gemm_pin(ctx, CLF_GEMM_CLBLAST);
    XWT(off);
    ck_assert_uint_eq(clf__gemm_kept_bytes(ctx, mb), 0);
#undef XWT
    clf__gemm_pin(ctx, was);
    clf__gemm_forget(ctx, mb);
    ck_assert_uint_eq(clf__gemm_kept_count(ctx), kept0);
    clReleaseMemObject(ma);
    clReleaseMemObject(mb);
    clReleaseMemObject(mc);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("gemm");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, gemm_way_is_chosen_by_timing);
    tcase_add_test(tc, gemm_blocked_matches_reference);
    tcase_add_test(tc, gemm_split_matches_reference);
    tcase_add_test(tc, gemm_split_same_bits_every_run);
    tcase_add_test(tc, gemm_blocked_batched_and_accumulating);
    tcase_add_loop_test(tc, gemm_blocked_column_blocks_match_reference, 0, 2);
    tcase_add_test(tc, gemm_falls_back_where_blocked_does_not_fit);
    tcase_add_loop_test(tc, gemm_with_bias_matches_reference, 0, 2);
    tcase_add_loop_test(tc, gemm_accumulate_bias_act_matches_reference, 0, 2);
    tcase_add_test(tc, gemm_kept_transpose_is_the_copy_it_replaces);
    suite_add_tcase(s, tc);
    return tu_run(s, 1);
}
