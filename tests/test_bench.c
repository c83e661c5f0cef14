/* The bench suite's own arithmetic and formats, without a device: medians
 * and spread, GFLOP/s, relative error, the FLOP model (against counts done
 * by hand), the causal shape, the inits of E and F, the decisive-token
 * weight, crossover detection, list parsing, the JSON schema (round trip
 * and rejection of malformed documents), CSV, SVG, the comparison with
 * a baseline, and option sizes whose products overflow. */
#define _POSIX_C_SOURCE 200809L

#include "output.h"
#include "run.h"
#include "suite.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Relative closeness for values computed in a different order. */
#define ck_assert_close(got, want, rtol)                                       \
    ck_assert_msg(fabs((double)(got) - (double)(want)) <=                      \
                      (rtol)*fabs((double)(want)) + 1e-300,                    \
                  "%s = %.17g, expected %.17g", #got, (double)(got),           \
                  (double)(want))

/* ---------------------------------------------------------- statistics */

START_TEST(stats_median_of_odd_and_even_counts)
{
    double odd[] = {3.0, 1.0, 2.0};
    double even[] = {4.0, 1.0, 3.0, 2.0};
    clf_bench_stats s = clf_bench_stats_of(odd, 3);

    ck_assert_double_eq(s.median, 2.0);
    ck_assert_double_eq(s.min, 1.0);
    ck_assert_double_eq(s.max, 3.0);
    ck_assert_uint_eq(s.runs, 3);
    /* the caller's order is kept */
    ck_assert_double_eq(odd[0], 3.0);
    s = clf_bench_stats_of(even, 4);
    ck_assert_double_eq(s.median, 2.5);
    ck_assert_double_eq(s.min, 1.0);
    ck_assert_double_eq(s.max, 4.0);
    ck_assert_uint_eq(s.runs, 4);
}
END_TEST

START_TEST(stats_skip_nan_and_empty_is_nan)
{
    double v[] = {NAN, 5.0, NAN};
    clf_bench_stats s = clf_bench_stats_of(v, 3);

    ck_assert_double_eq(s.median, 5.0);
    ck_assert_uint_eq(s.runs, 1);
    s = clf_bench_stats_of(v, 0);
    ck_assert(isnan(s.median) && isnan(s.min) && isnan(s.max));
    ck_assert_uint_eq(s.runs, 0);
    s = clf_bench_stats_of(v, 1);
    ck_assert(isnan(s.median));
    ck_assert_uint_eq(s.runs, 0);
}
END_TEST

/* Mesa's rusticl gives every profiling timestamp as zero: such a run's
 * stage times must read as unmeasured (NaN, printed "-"), never 0.0 ms. */
START_TEST(stage_sample_zero_timestamps_are_unmeasured)
{
    double st[CLF_STAGE_COUNT], sum = -1.0;
    int g;

    for (g = 0; g < CLF_STAGE_COUNT; g++)
        st[g] = 0.0;
    ck_assert_int_eq(clf_bench_stage_sample(st, &sum), 0);
    ck_assert(isnan(sum));
    for (g = 0; g < CLF_STAGE_COUNT; g++)
        ck_assert(isnan(st[g]));
    /* a real forward: some stages (fused or unfused ones) may take 0 */
    for (g = 0; g < CLF_STAGE_COUNT; g++)
        st[g] = g == CLF_STAGE_FUSED ? 0.0 : 0.001 * (g + 1);
    ck_assert_int_eq(clf_bench_stage_sample(st, &sum), 1);
    ck_assert_double_eq_tol(sum, 0.001 * (1 + 2 + 3 + 4 + 5 + 7), 1e-15);
    ck_assert_double_eq(st[CLF_STAGE_FUSED], 0.0);
    ck_assert_double_eq(st[CLF_STAGE_OUTPUT], 0.007);
}
END_TEST

START_TEST(gflops_is_flops_per_second_over_1e9)
{
    ck_assert_double_eq(clf_bench_gflops(2e9, 0.5), 4.0);
    ck_assert_double_eq(clf_bench_gflops(3e6, 1e-3), 3.0);
    ck_assert(isnan(clf_bench_gflops(1e9, 0.0)));
    ck_assert(isnan(clf_bench_gflops(1e9, -1.0)));
    ck_assert(isnan(clf_bench_gflops(NAN, 1.0)));
    ck_assert(isnan(clf_bench_gflops(1e9, NAN)));
}
END_TEST

START_TEST(rel_error_is_frobenius_ratio)
{
    float b[] = {3.0f, 4.0f}, a[] = {3.0f, 5.0f}, twice[] = {6.0f, 8.0f};
    float zero[] = {0.0f, 0.0f};

    ck_assert_double_eq(clf_bench_rel_error(b, b, 2), 0.0);
    ck_assert_close(clf_bench_rel_error(a, b, 2), 0.2, 1e-15);
    ck_assert_close(clf_bench_rel_error(twice, b, 2), 1.0, 1e-15);
    ck_assert(isnan(clf_bench_rel_error(a, zero, 2)));
}
END_TEST

/* ------------------------------------------------------------ FLOP model */

static clf_bench_shape
shape(clf_bench_mode mode, size_t B, size_t n, size_t D, size_t h, size_t k,
      size_t blk)
{
    clf_bench_shape s;

    s.mode = mode;
    s.batch = B;
    s.n = n;
    s.d_model = D;
    s.heads = h;
    s.k = k;
    s.causal_block = blk;
    return s;
}

START_TEST(flops_model_full_by_hand)
{
    /* B=1, n=4, D=4, h=2 (d_h=2): Q 2*4*4*4 = 128; K and V 256; scores and
     * weighted sum 2*2*4*4*2 = 128 each; softmax 5*2*4*4 = 160; output
     * 128 + bias 16. */
    clf_bench_shape s = shape(CLF_BENCH_FULL, 1, 4, 4, 2, 0, 0);
    double st[CLF_STAGE_COUNT];

    ck_assert_double_eq(clf_bench_flops_model(&s, st), 944.0);
    ck_assert_double_eq(st[CLF_STAGE_PROJECTION], 128.0);
    ck_assert_double_eq(st[CLF_STAGE_COMPRESSION], 256.0);
    ck_assert_double_eq(st[CLF_STAGE_SCORES], 128.0);
    ck_assert_double_eq(st[CLF_STAGE_SOFTMAX], 160.0);
    ck_assert_double_eq(st[CLF_STAGE_WEIGHTED_SUM], 128.0);
    ck_assert_double_eq(st[CLF_STAGE_OUTPUT], 144.0);
    /* the causal mask does not shrink the GEMMs */
    s.mode = CLF_BENCH_CAUSAL_FULL;
    ck_assert_double_eq(clf_bench_flops_model(&s, NULL), 944.0);
}
END_TEST

START_TEST(flops_model_linformer_by_hand)
{
    /* B=2, n=8, D=4, h=2, k=2.  Compress first: k n D + k D d_q = 64 + 32
     * = 96 multiply-adds a side and sequence (projecting first would be
     * 8*4*4 + 2*8*4 = 192), so 2 * 2 sides * 2 sequences * 96 = 768. */
    clf_bench_shape s = shape(CLF_BENCH_LINFORMER, 2, 8, 4, 2, 2, 0);
    double st[CLF_STAGE_COUNT];

    ck_assert_double_eq(clf_bench_flops_model(&s, st), 2688.0);
    ck_assert_double_eq(st[CLF_STAGE_PROJECTION], 512.0);
    ck_assert_double_eq(st[CLF_STAGE_COMPRESSION], 768.0);
    ck_assert_double_eq(st[CLF_STAGE_SCORES], 256.0);
    ck_assert_double_eq(st[CLF_STAGE_SOFTMAX], 320.0);
    ck_assert_double_eq(st[CLF_STAGE_WEIGHTED_SUM], 256.0);
    ck_assert_double_eq(st[CLF_STAGE_FUSED], 0.0);
    ck_assert_double_eq(st[CLF_STAGE_OUTPUT], 576.0);

    /* Where the fused kernel ran, its stage carries the three. */
    clf_bench_fused_split(st);
    ck_assert_double_eq(st[CLF_STAGE_SCORES], 0.0);
    ck_assert_double_eq(st[CLF_STAGE_SOFTMAX], 0.0);
    ck_assert_double_eq(st[CLF_STAGE_WEIGHTED_SUM], 0.0);
    ck_assert_double_eq(st[CLF_STAGE_FUSED], 832.0);
    ck_assert_double_eq(st[CLF_STAGE_PROJECTION], 512.0);
    ck_assert_double_eq(st[CLF_STAGE_OUTPUT], 576.0);
}
END_TEST

START_TEST(flops_model_causal_by_hand)
{
    /* B=1, n=8, D=4, h=1, b=4: 2 blocks, k=2 (c=1).  K, V exact: 512;
     * block compression of the 1 complete block before the last: 2 sides *
     * 2 * 1 * 1 * 4 * 4 = 64.  Window: sum of (q mod 4) + 1 = 20 entries.
     * Scores 2*8*2*4 + 2*20*4 = 288, the same for the weighted sum;
     * softmax over k + b = 6 columns: 5*8*6 = 240. */
    clf_bench_shape s = shape(CLF_BENCH_CAUSAL, 1, 8, 4, 1, 2, 4);
    double st[CLF_STAGE_COUNT];

    ck_assert_double_eq(clf_bench_flops_model(&s, st), 1936.0);
    ck_assert_double_eq(st[CLF_STAGE_COMPRESSION], 576.0);
    ck_assert_double_eq(st[CLF_STAGE_SCORES], 288.0);
    ck_assert_double_eq(st[CLF_STAGE_SOFTMAX], 240.0);
    ck_assert_double_eq(st[CLF_STAGE_WEIGHTED_SUM], 288.0);
    ck_assert_double_eq(st[CLF_STAGE_OUTPUT], 288.0);
}
END_TEST

START_TEST(flops_model_grows_as_expected)
{
    /* Full attention's score work grows with n^2, Linformer's with n k. */
    clf_bench_shape a = shape(CLF_BENCH_FULL, 1, 1024, 512, 8, 0, 0);
    clf_bench_shape b = shape(CLF_BENCH_FULL, 1, 2048, 512, 8, 0, 0);
    clf_bench_shape c = shape(CLF_BENCH_LINFORMER, 1, 1024, 512, 8, 256, 0);
    clf_bench_shape d = shape(CLF_BENCH_LINFORMER, 1, 2048, 512, 8, 256, 0);
    double sa[CLF_STAGE_COUNT], sb[CLF_STAGE_COUNT];
    double sc[CLF_STAGE_COUNT], sd[CLF_STAGE_COUNT];

    clf_bench_flops_model(&a, sa);
    clf_bench_flops_model(&b, sb);
    clf_bench_flops_model(&c, sc);
    clf_bench_flops_model(&d, sd);
    ck_assert_double_eq(sb[CLF_STAGE_SCORES], 4.0 * sa[CLF_STAGE_SCORES]);
    ck_assert_double_eq(sd[CLF_STAGE_SCORES], 2.0 * sc[CLF_STAGE_SCORES]);
    ck_assert_double_eq(sb[CLF_STAGE_PROJECTION],
                        2.0 * sa[CLF_STAGE_PROJECTION]);
    /* with k = n Linformer does no less work than full attention */
    c.k = 1024;
    ck_assert(clf_bench_flops_model(&c, NULL) >=
              clf_bench_flops_model(&a, NULL));
}
END_TEST

START_TEST(flops_model_rejects_impossible_shapes)
{
    clf_bench_shape s = shape(CLF_BENCH_LINFORMER, 1, 8, 4, 2, 9, 0);

    ck_assert(isnan(clf_bench_flops_model(&s, NULL))); /* k > n */
    s.k = 0;
    ck_assert(isnan(clf_bench_flops_model(&s, NULL)));
    s = shape(CLF_BENCH_FULL, 1, 8, 5, 2, 0, 0); /* D not a multiple of h */
    ck_assert(isnan(clf_bench_flops_model(&s, NULL)));
    s = shape(CLF_BENCH_FULL, 0, 8, 4, 2, 0, 0);
    ck_assert(isnan(clf_bench_flops_model(&s, NULL)));
    s = shape(CLF_BENCH_CAUSAL, 1, 8, 4, 1, 3, 4); /* 3 slots, 2 blocks */
    ck_assert(isnan(clf_bench_flops_model(&s, NULL)));
    s = shape(CLF_BENCH_CAUSAL, 1, 8, 4, 1, 2, 0); /* no block */
    ck_assert(isnan(clf_bench_flops_model(&s, NULL)));
    ck_assert(isnan(clf_bench_flops_model(NULL, NULL)));
}
END_TEST

START_TEST(causal_shape_picks_block_and_slots)
{
    static const size_t cases[][4] = {
        /* n, k, block, k used */
        {1024, 256, 32, 256}, {2048, 256, 32, 256}, {4096, 256, 64, 256},
        {512, 256, 16, 256},  {1000, 100, 32, 96},  {100, 256, 8, 91},
        {1, 256, 1, 1},       {4096, 16, 64, 64},
    };
    size_t i, b, k;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clf_bench_causal_shape(cases[i][0], cases[i][1], &b, &k);
        ck_assert_msg(b == cases[i][2] && k == cases[i][3],
                      "n=%zu k=%zu: got b=%zu k=%zu", cases[i][0], cases[i][1],
                      b, k);
        /* k is a whole number of slots per block */
        ck_assert_uint_eq(k % ((cases[i][0] + b - 1) / b), 0);
    }
}
END_TEST

/* ------------------------------------------------ E and F, decisive token */

START_TEST(init_bounds_follow_lucidrains_and_fairseq)
{
    ck_assert_double_eq(
        clf_bench_init_bound(CLF_BENCH_INIT_LUCIDRAINS, 256, 4096), 1.0 / 16);
    /* gain 1/sqrt(2) * sqrt(6 / (fan_in + fan_out)) on the (k, N) weight */
    ck_assert_close(clf_bench_init_bound(CLF_BENCH_INIT_FAIRSEQ, 64, 4096),
                    sqrt(6.0 / 4160.0) / sqrt(2.0), 1e-15);
    /* the two coincide at N = 2k */
    ck_assert_close(clf_bench_init_bound(CLF_BENCH_INIT_FAIRSEQ, 256, 512),
                    1.0 / 16, 1e-15);
    ck_assert(isnan(clf_bench_init_bound(CLF_BENCH_INIT_LUCIDRAINS, 0, 8)));
    ck_assert_str_eq(clf_bench_init_name(CLF_BENCH_INIT_FAIRSEQ), "fairseq");
}
END_TEST

START_TEST(decisive_alpha_gives_the_target_weight)
{
    static const size_t ns[] = {2, 17, 1024, 4096, 65536};
    size_t i;

    for (i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        double a = clf_bench_decisive_alpha(ns[i], 0.99);
        ck_assert_close(clf_bench_decisive_full(ns[i], a), 0.99, 1e-13);
    }
    ck_assert_double_eq(clf_bench_decisive_alpha(1, 0.99), 0.0);
    ck_assert_double_eq(clf_bench_decisive_full(1, 0.0), 1.0);
    /* no gap: uniform over n keys */
    ck_assert_close(clf_bench_decisive_full(8, 0.0), 0.125, 1e-15);
}
END_TEST

START_TEST(decisive_weight_by_hand)
{
    /* k=2, N=3, j=1: slot 0 scores alpha*1, slot 1 scores 0; with alpha =
     * ln 3 the slot weights are 3/4 and 1/4, so the weight reaching j is
     * 3/4 * 0.5 + 1/4 * (-0.25) = 0.3125. */
    const float E[] = {0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const float F[] = {9.0f, 0.5f, 9.0f, 9.0f, -0.25f, 9.0f};

    ck_assert_close(clf_bench_decisive_weight(E, F, 2, 3, 1, log(3.0)), 0.3125,
                    1e-15);
    /* a huge gap selects the top slot without overflow */
    ck_assert_close(clf_bench_decisive_weight(E, F, 2, 3, 1, 1e4), 0.5, 1e-12);
    ck_assert(isnan(clf_bench_decisive_weight(E, F, 2, 3, 3, 1.0)));
}
END_TEST

/* ------------------------------------------------------------ crossover */

START_TEST(crossover_finds_first_winning_n)
{
    const size_t n[] = {512, 1024, 2048};
    const double lin[] = {2.0, 1.0, 1.0}, ref[] = {1.0, 2.0, 3.0};
    double est;

    ck_assert_uint_eq(clf_bench_crossover(n, lin, ref, 3, &est), 1024);
    /* log(lin/ref) goes from +ln 2 to -ln 2: halfway in log n */
    ck_assert_close(est, sqrt(512.0 * 1024.0), 1e-12);
}
END_TEST

START_TEST(crossover_none_and_always)
{
    const size_t n[] = {256, 512, 1024};
    const double slow[] = {2.0, 2.0, 2.0}, fast[] = {1.0, 1.0, 1.0};
    double est = 0.0;

    ck_assert_uint_eq(clf_bench_crossover(n, slow, fast, 3, &est), 0);
    ck_assert(isnan(est));
    /* equal times are not a win */
    ck_assert_uint_eq(clf_bench_crossover(n, fast, fast, 3, &est), 0);
    /* winning everywhere: the smallest n, nothing to interpolate */
    ck_assert_uint_eq(clf_bench_crossover(n, fast, slow, 3, &est), 256);
    ck_assert(isnan(est));
    ck_assert_uint_eq(clf_bench_crossover(n, fast, slow, 0, NULL), 0);
}
END_TEST

START_TEST(crossover_needs_every_later_n_to_win)
{
    const size_t n[] = {256, 512, 1024, 2048};
    const double lin[] = {1.0, 3.0, 1.0, 1.0}, ref[] = {2.0, 2.0, 2.0, 2.0};
    const double gap[] = {3.0, NAN, 1.0, 1.0};

    /* a loss at 512 after a win at 256: the win from 1024 on counts */
    ck_assert_uint_eq(clf_bench_crossover(n, lin, ref, 4, NULL), 1024);
    /* unmeasured points are skipped */
    ck_assert_uint_eq(clf_bench_crossover(n, gap, ref, 4, NULL), 1024);
}
END_TEST

/* A report with one device and the given rows. */
static clf_bench_result *
add_row(clf_bench_report *r, clf_bench_mode m, size_t n, double median,
        clf_bench_status st)
{
    clf_bench_result *x = clf_bench_report_add_result(r);

    ck_assert_ptr_nonnull(x);
    x->device = 0;
    x->mode = m;
    x->n = n;
    x->k = (m == CLF_BENCH_FULL || m == CLF_BENCH_CAUSAL_FULL) ? 0 : 256;
    x->k_requested = 256;
    x->d_model = 512;
    x->heads = 8;
    x->batch = 1;
    x->status = st;
    if (st == CLF_BENCH_OK) {
        x->wall.median = median;
        x->wall.min = 0.9 * median;
        x->wall.max = 1.1 * median;
        x->wall.runs = 5;
    }
    return x;
}

static void
one_device(clf_bench_report *r, const char *name)
{
    clf_bench_device *d = clf_bench_report_add_device(r);

    ck_assert_ptr_nonnull(d);
    snprintf(d->platform, sizeof d->platform, "Test Platform");
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->driver, sizeof d->driver, "1.0");
    snprintf(d->version, sizeof d->version, "OpenCL 1.2");
    d->compute_units = 2;
    d->global_mem = 1ULL << 32;
    d->max_alloc = 1ULL << 30;
    d->build_s = 0.25;
    d->cache_loads = 1;
}

START_TEST(crossings_group_rows_of_a_report)
{
    clf_bench_report r;
    clf_bench_crossing cs[4];
    size_t count;

    clf_bench_report_init(&r);
    one_device(&r, "dev");
    add_row(&r, CLF_BENCH_LINFORMER, 512, 0.3, CLF_BENCH_OK);
    add_row(&r, CLF_BENCH_FULL, 512, 0.2, CLF_BENCH_OK);
    add_row(&r, CLF_BENCH_LINFORMER, 1024, 0.4, CLF_BENCH_OK);
    add_row(&r, CLF_BENCH_FULL, 1024, 0.5, CLF_BENCH_OK);
    add_row(&r, CLF_BENCH_LINFORMER, 8192, 2.0, CLF_BENCH_OK);
    add_row(&r, CLF_BENCH_FULL, 8192, 0.0, CLF_BENCH_TOO_LARGE);
    /* causal rows without their reference form no group */
    add_row(&r, CLF_BENCH_CAUSAL, 512, 0.3, CLF_BENCH_OK);
    ck_assert_int_eq(clf_bench_report_crossings(&r, cs, 4, &count), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_uint_eq(cs[0].n, 1024);
    ck_assert_uint_eq(cs[0].points, 2);
    ck_assert(!cs[0].causal);
    ck_assert(cs[0].n_estimate > 512 && cs[0].n_estimate < 1024);
    ck_assert_uint_eq(cs[0].k_requested, 256);
    /* counting only */
    ck_assert_int_eq(clf_bench_report_crossings(&r, NULL, 0, &count), 0);
    ck_assert_uint_eq(count, 1);
    /* Linformer rows of another compression: their own group, against the
     * same full rows (which have no compression); never the same config
     * as the linear rows. */
    add_row(&r, CLF_BENCH_LINFORMER, 512, 0.1, CLF_BENCH_OK)->compression =
        CLF_COMPRESS_MEAN;
    add_row(&r, CLF_BENCH_LINFORMER, 1024, 0.2, CLF_BENCH_OK)->compression =
        CLF_COMPRESS_MEAN;
    ck_assert_int_eq(clf_bench_report_crossings(&r, cs, 4, &count), 0);
    ck_assert_uint_eq(count, 2);
    ck_assert_int_eq(cs[0].compression, CLF_COMPRESS_LINEAR);
    ck_assert_uint_eq(cs[0].n, 1024);
    ck_assert_int_eq(cs[1].compression, CLF_COMPRESS_MEAN);
    ck_assert_uint_eq(cs[1].n, 512);
    ck_assert_uint_eq(cs[1].points, 2);
    ck_assert(!clf_bench_same_config(&r.results[0], &r.results[7]));
    ck_assert(clf_bench_same_config(&r.results[0], &r.results[0]));
    ck_assert(clf_bench_same_compression(&r.results[1], &r.results[7]));
    clf_bench_report_free(&r);
}
END_TEST

/* -------------------------------------------------------------- parsing */

START_TEST(parse_sizes_accepts_lists_and_rejects_junk)
{
    static const char *const bad[] = {
        "",    ",",  "1,", ",1", "1,,2", "0", "-1",
        "12x", " 1", "1 ", "+1", "1.5",  "a", "18446744073709551616"};
    size_t v[4], n = 99, i;

    ck_assert_int_eq(clf_bench_parse_sizes("512,1024,4096", v, 4, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(v[0], 512);
    ck_assert_uint_eq(v[2], 4096);
    ck_assert_int_eq(clf_bench_parse_sizes("7", v, 4, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(clf_bench_parse_sizes("1,2,3,4,5", v, 4, &n), -1);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(clf_bench_parse_sizes(bad[i], v, 4, &n) == -1,
                      "\"%s\" was accepted", bad[i]);
    ck_assert_int_eq(clf_bench_parse_sizes(NULL, v, 4, &n), -1);
}
END_TEST

START_TEST(names_round_trip)
{
    int m, s;
    clf_bench_mode mode;
    clf_bench_status st;

    for (m = 0; m < CLF_BENCH_MODE_COUNT; m++) {
        ck_assert_int_eq(
            clf_bench_mode_parse(clf_bench_mode_name((clf_bench_mode)m), &mode),
            0);
        ck_assert_int_eq(mode, m);
    }
    for (s = 0; s < CLF_BENCH_STATUS_COUNT; s++) {
        ck_assert_int_eq(clf_bench_status_parse(
                             clf_bench_status_name((clf_bench_status)s), &st),
                         0);
        ck_assert_int_eq(st, s);
    }
    ck_assert_int_eq(clf_bench_mode_parse("Linformer", &mode), -1);
    ck_assert_int_eq(clf_bench_status_parse("", &st), -1);
    ck_assert_str_eq(clf_bench_mode_name(CLF_BENCH_MODE_COUNT), "?");
    ck_assert_int_eq(clf_bench_mode_reference(CLF_BENCH_LINFORMER),
                     CLF_BENCH_FULL);
    ck_assert_int_eq(clf_bench_mode_reference(CLF_BENCH_CAUSAL),
                     CLF_BENCH_CAUSAL_FULL);
    ck_assert_int_eq(clf_bench_mode_reference(CLF_BENCH_FULL), CLF_BENCH_FULL);
}
END_TEST

/* ----------------------------------------------------------------- JSON */

/* A report exercising every field: measured, too large (NaN), causal,
 * accuracy. */
static void
sample_report(clf_bench_report *r)
{
    clf_bench_result *x;
    clf_bench_accuracy *a;
    int s;

    clf_bench_report_init(r);
    snprintf(r->version, sizeof r->version, "0.1.0");
    snprintf(r->started, sizeof r->started, "2024-01-02T03:04:05Z");
    snprintf(r->host, sizeof r->host, "host");
    snprintf(r->command, sizeof r->command, "clinformer bench --quick");
    r->repeat = 5;
    r->budget_s = 600.0;
    r->seed = 42;
    r->quick = 1;
    r->wall_s = 12.5;
    one_device(r, "Device \"A\", & <B>");
    x = add_row(r, CLF_BENCH_LINFORMER, 512, 0.3, CLF_BENCH_OK);
    x->first_call_s = 0.3;
    x->device_s = x->wall;
    for (s = 0; s < CLF_STAGE_COUNT; s++) {
        x->stage[s].median = 0.01 * (s + 1);
        x->stage[s].min = 0.009 * (s + 1);
        x->stage[s].max = 0.011 * (s + 1);
        x->stage[s].runs = 5;
        x->stage_flops[s] = 1e6 * (s + 1);
    }
    x->flops = 2.1e7;
    x->gflops = 0.21;
    x->device_bytes = 13633536;
    x->io_bytes = 2097152;
    x->rel_error = 0.5343;
    x->compression = CLF_COMPRESS_CONV;
    snprintf(x->note, sizeof x->note, "a note, with \"quotes\"");
    x = add_row(r, CLF_BENCH_FULL, 512, 0.2, CLF_BENCH_OK);
    x->precision = CLF_PRECISION_HALF;
    x->fp32_error = 2.5e-4;
    x = add_row(r, CLF_BENCH_FULL, 8192, 0.0, CLF_BENCH_TOO_LARGE);
    snprintf(x->note, sizeof x->note, "not run (too large)");
    x = add_row(r, CLF_BENCH_CAUSAL, 1024, 0.0, CLF_BENCH_OVER_BUDGET);
    x->causal_block = 32;
    a = clf_bench_report_add_accuracy(r);
    ck_assert_ptr_nonnull(a);
    a->n = 1024;
    a->k = 64;
    a->d_model = 512;
    a->heads = 8;
    a->batch = 1;
    a->linformer.median = a->linformer.min = a->linformer.max = 0.2;
    a->linformer.runs = 3;
    a->full.median = a->full.min = a->full.max = 0.4;
    a->full.runs = 3;
    a->rel_error[CLF_BENCH_INIT_LUCIDRAINS] = 1.47;
    a->rel_error[CLF_BENCH_INIT_FAIRSEQ] = 0.88;
    a->full_weight = 0.99;
    a->trials = 64;
    a->weight[0].mean = 0.001;
    a->weight[0].mean_abs = 0.009;
    a->weight[0].max_abs = 0.03;
    a->weight[1].mean = -0.0002;
    a->weight[1].mean_abs = 0.005;
    a->weight[1].max_abs = 0.016;
    a->host_max_diff = 1.1e-5;
}

static int
same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static void
assert_same_stats(const clf_bench_stats *a, const clf_bench_stats *b)
{
    ck_assert(same_double(a->median, b->median));
    ck_assert(same_double(a->min, b->min));
    ck_assert(same_double(a->max, b->max));
    ck_assert_uint_eq(a->runs, b->runs);
}

/* Serialises and parses back through text. */
static void
round_trip(const clf_bench_report *in, clf_bench_report *out)
{
    json_t *root = clf_bench_report_to_json(in), *back;
    json_error_t err;
    char why[256] = "", *text;

    ck_assert_ptr_nonnull(root);
    text = json_dumps(root, JSON_INDENT(1));
    ck_assert_ptr_nonnull(text);
    back = json_loads(text, 0, &err);
    ck_assert_msg(back != NULL, "reparse: %s", err.text);
    ck_assert_msg(clf_bench_report_from_json(back, out, why, sizeof why) == 0,
                  "schema: %s", why);
    free(text);
    json_decref(root);
    json_decref(back);
}

START_TEST(json_round_trip_keeps_every_field)
{
    clf_bench_report in, out;
    json_t *a, *b;
    size_t i;
    int s;

    sample_report(&in);
    round_trip(&in, &out);
    ck_assert_str_eq(out.version, in.version);
    ck_assert_str_eq(out.started, in.started);
    ck_assert_str_eq(out.command, in.command);
    ck_assert_uint_eq(out.repeat, 5);
    ck_assert_uint_eq(out.seed, 42);
    ck_assert_int_eq(out.quick, 1);
    ck_assert_double_eq(out.budget_s, 600.0);
    ck_assert_uint_eq(out.ndevices, 1);
    ck_assert_str_eq(out.devices[0].name, in.devices[0].name);
    ck_assert_uint_eq(out.devices[0].max_alloc, 1ULL << 30);
    ck_assert_uint_eq(out.nresults, in.nresults);
    for (i = 0; i < in.nresults; i++) {
        const clf_bench_result *x = &in.results[i], *y = &out.results[i];
        ck_assert_int_eq(y->mode, x->mode);
        ck_assert_int_eq(y->status, x->status);
        ck_assert_uint_eq(y->n, x->n);
        ck_assert_uint_eq(y->k, x->k);
        ck_assert_uint_eq(y->k_requested, x->k_requested);
        ck_assert_uint_eq(y->causal_block, x->causal_block);
        ck_assert_str_eq(y->note, x->note);
        assert_same_stats(&y->wall, &x->wall);
        assert_same_stats(&y->device_s, &x->device_s);
        for (s = 0; s < CLF_STAGE_COUNT; s++) {
            assert_same_stats(&y->stage[s], &x->stage[s]);
            ck_assert(same_double(y->stage_flops[s], x->stage_flops[s]));
        }
        ck_assert(same_double(y->first_call_s, x->first_call_s));
        ck_assert(same_double(y->flops, x->flops));
        ck_assert(same_double(y->gflops, x->gflops));
        ck_assert(same_double(y->device_bytes, x->device_bytes));
        ck_assert(same_double(y->rel_error, x->rel_error));
        ck_assert_int_eq(y->precision, x->precision);
        ck_assert(same_double(y->fp32_error, x->fp32_error));
        ck_assert_int_eq(y->compression, x->compression);
    }
    ck_assert_int_eq(out.results[0].compression, CLF_COMPRESS_CONV);
    ck_assert_int_eq(out.results[1].precision, CLF_PRECISION_HALF);
    /* a row that did not run keeps its NaNs as nulls */
    ck_assert(isnan(out.results[2].wall.median));
    ck_assert(isnan(out.results[2].rel_error));
    ck_assert_uint_eq(out.naccuracy, 1);
    ck_assert(same_double(out.accuracy[0].rel_error[1], 0.88));
    ck_assert(same_double(out.accuracy[0].weight[1].max_abs, 0.016));
    ck_assert(same_double(out.accuracy[0].host_max_diff, 1.1e-5));
    ck_assert_uint_eq(out.accuracy[0].trials, 64);
    /* and serialising again gives the same document */
    a = clf_bench_report_to_json(&in);
    b = clf_bench_report_to_json(&out);
    ck_assert(json_equal(a, b));
    json_decref(a);
    json_decref(b);
    clf_bench_report_free(&in);
    clf_bench_report_free(&out);
}
END_TEST

START_TEST(json_has_schema_keys_and_crossovers)
{
    clf_bench_report r;
    json_t *root, *res, *cross;

    sample_report(&r);
    add_row(&r, CLF_BENCH_LINFORMER, 1024, 0.2, CLF_BENCH_OK);
    add_row(&r, CLF_BENCH_FULL, 1024, 0.6, CLF_BENCH_OK);
    root = clf_bench_report_to_json(&r);
    ck_assert_ptr_nonnull(root);
    ck_assert_str_eq(json_string_value(json_object_get(root, "schema")),
                     CLF_BENCH_SCHEMA);
    res = json_object_get(root, "results");
    ck_assert_uint_eq(json_array_size(res), r.nresults);
    /* every row carries its key: platform, device, driver, config */
    ck_assert_str_eq(
        json_string_value(json_object_get(json_array_get(res, 0), "driver")),
        "1.0");
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_array_get(res, 0), "config"), "mode")),
        "linformer");
    ck_assert(json_is_null(json_object_get(
        json_object_get(json_array_get(res, 2), "wall_s"), "median")));
    ck_assert_ptr_nonnull(json_object_get(
        json_object_get(json_array_get(res, 0), "stages"), "weighted_sum"));
    cross = json_object_get(root, "crossovers");
    ck_assert_uint_eq(json_array_size(cross), 1);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_array_get(cross, 0), "n")),
        1024);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_array_get(cross, 0), "pair")),
        "linformer/full");
    json_decref(root);
    clf_bench_report_free(&r);
}
END_TEST

/* Applies a change to a valid document and expects the reader to refuse
 * it, naming `field` in its reason. */
static void
expect_rejected(const char *path, json_t *value, const char *field)
{
    clf_bench_report r, out;
    json_t *root, *obj;
    char why[256] = "", buf[256], *p, *tok, *save = NULL, *last = NULL;

    sample_report(&r);
    root = clf_bench_report_to_json(&r);
    clf_bench_report_free(&r);
    ck_assert_ptr_nonnull(root);
    /* path: dot-separated keys, a number indexes an array */
    snprintf(buf, sizeof buf, "%s", path);
    obj = root;
    for (tok = strtok_r(buf, ".", &save); tok != NULL;
         tok = strtok_r(NULL, ".", &save)) {
        if (last != NULL) {
            obj = (*last >= '0' && *last <= '9')
                      ? json_array_get(obj, (size_t)atoi(last))
                      : json_object_get(obj, last);
            ck_assert_msg(obj != NULL, "%s: no %s", path, last);
        }
        last = tok;
    }
    p = last;
    if (value == NULL)
        json_object_del(obj, p);
    else if (json_is_array(obj))
        json_array_set_new(obj, (size_t)atoi(p), value);
    else
        json_object_set_new(obj, p, value);
    ck_assert_msg(clf_bench_report_from_json(root, &out, why, sizeof why) == -1,
                  "%s: accepted", path);
    ck_assert_msg(strstr(why, field) != NULL, "%s: reason \"%s\" lacks %s",
                  path, why, field);
    ck_assert_uint_eq(out.nresults, 0); /* nothing half-read is kept */
    json_decref(root);
}

START_TEST(json_schema_rejects_malformed_documents)
{
    clf_bench_report out;
    char why[256];
    json_t *arr = json_array();

    expect_rejected("schema", json_string("clinformer-bench/0"), "schema");
    expect_rejected("schema", NULL, "schema");
    expect_rejected("settings.repeat", json_string("5"), "settings.repeat");
    expect_rejected("results.0.config.n", NULL, "results[0].config.n");
    expect_rejected("results.0.config.n", json_integer(-4),
                    "results[0].config.n");
    expect_rejected("results.1.config.mode", json_string("sparse"),
                    "results[1].config.mode");
    expect_rejected("results.0.status", json_string("fine"),
                    "results[0].status");
    expect_rejected("results.0.wall_s.median", json_string("fast"),
                    "results[0].wall_s.median");
    expect_rejected("results.0.stages.softmax", NULL,
                    "results[0].stages.softmax");
    expect_rejected("results.0.device_index", json_integer(3),
                    "results[0].device_index");
    expect_rejected("results.0.driver", json_string("2.0"),
                    "results[0].driver");
    expect_rejected("results.0", json_integer(1), "results[0]");
    expect_rejected("devices.0.platform", json_null(), "devices[0].platform");
    expect_rejected("accuracy.0.rel_error.fairseq", json_true(),
                    "accuracy[0].rel_error.fairseq");
    expect_rejected("accuracy.0.decisive.lucidrains", NULL,
                    "accuracy[0].decisive.lucidrains");
    expect_rejected("crossovers", json_object(), "crossovers");
    ck_assert_int_eq(clf_bench_report_from_json(arr, &out, why, sizeof why),
                     -1);
    json_decref(arr);
}
END_TEST

static char *
slurp(FILE *f)
{
    long len;
    char *buf;

    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    ck_assert(len >= 0);
    rewind(f);
    buf = tu_malloc((size_t)len + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = '\0';
    return buf;
}

START_TEST(json_file_round_trip_leaves_no_temporary)
{
    clf_bench_report in, out;
    char dir[] = "/tmp/clf-bench-test-XXXXXX", path[128], why[256] = "";
    char leftover[160];

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/run.json", dir);
    sample_report(&in);
    ck_assert_int_eq(clf_bench_json_write(&in, path), 0);
    ck_assert_msg(clf_bench_json_read(path, &out, why, sizeof why) == 0, "%s",
                  why);
    ck_assert_uint_eq(out.nresults, in.nresults);
    ck_assert_str_eq(out.results[0].note, in.results[0].note);
    snprintf(leftover, sizeof leftover, "%s.tmp%ld", path, (long)getpid());
    ck_assert_int_ne(access(leftover, F_OK), 0);
    clf_bench_report_free(&out);
    /* a directory is no JSON file */
    ck_assert_int_eq(clf_bench_json_read(dir, &out, why, sizeof why), -1);
    remove(path);
    rmdir(dir);
    clf_bench_report_free(&in);
    clf_bench_report_free(&out);
}
END_TEST

/* ------------------------------------------------------------------ CSV */

/* Fields of one CSV line, quotes respected. */
static size_t
csv_fields(const char *line, size_t len)
{
    size_t i, n = 1;
    int quoted = 0;

    for (i = 0; i < len; i++) {
        if (line[i] == '"')
            quoted = !quoted;
        else if (line[i] == ',' && !quoted)
            n++;
    }
    return n;
}

START_TEST(csv_header_names_every_column)
{
    const char *h = clf_bench_csv_header();
    char want[64];
    int s;

    ck_assert_uint_eq(csv_fields(h, strlen(h)), 27 + CLF_STAGE_COUNT);
    ck_assert(strncmp(h, "platform,device,driver,mode,n,k,", 32) == 0);
    for (s = 0; s < CLF_STAGE_COUNT; s++) {
        snprintf(want, sizeof want, ",%s_s,", clf_stage_name((clf_stage)s));
        ck_assert_msg(strstr(h, want) != NULL, "no column %s", want);
    }
    ck_assert_ptr_nonnull(strstr(h, ",median_s,min_s,max_s,"));
    ck_assert_ptr_nonnull(strstr(h, ",flops,gflops,device_bytes,"));
    ck_assert_ptr_nonnull(strstr(h, ",rel_error,compression,note"));
    ck_assert_ptr_nonnull(strstr(h, ",precision,fp32_error,rel_error,"));
    h = clf_bench_csv_accuracy_header();
    ck_assert_uint_eq(csv_fields(h, strlen(h)), 25);
    ck_assert_ptr_nonnull(strstr(h, ",rel_error_lucidrains,"));
    ck_assert_ptr_nonnull(strstr(h, ",fairseq_max_abs,"));
}
END_TEST

START_TEST(csv_rows_match_the_header)
{
    clf_bench_report r;
    FILE *f = tmpfile();
    char *text, *line, *nl;
    size_t lines = 0, want;

    ck_assert_ptr_nonnull(f);
    sample_report(&r);
    ck_assert_int_eq(clf_bench_csv_write(f, &r), 0);
    text = slurp(f);
    fclose(f);
    want = csv_fields(clf_bench_csv_header(), strlen(clf_bench_csv_header()));
    for (line = text; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        ck_assert_uint_eq(csv_fields(line, (size_t)(nl - line)), want);
        lines++;
    }
    ck_assert_uint_eq(lines, 1 + r.nresults);
    /* quoting as RFC 4180, and empty fields for what was not measured */
    ck_assert_ptr_nonnull(strstr(text, "\"a note, with \"\"quotes\"\"\""));
    ck_assert_ptr_nonnull(strstr(text, "\"Device \"\"A\"\", & <B>\""));
    ck_assert_ptr_nonnull(strstr(text, ",too_large,0,,,,,"));
    free(text);

    f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(clf_bench_csv_accuracy_write(f, &r), 0);
    text = slurp(f);
    fclose(f);
    nl = strchr(text, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_uint_eq(csv_fields(nl + 1, strcspn(nl + 1, "\n")), 25);
    ck_assert_ptr_nonnull(strstr(nl, ",1024,64,512,8,1,ok,"));
    free(text);
    clf_bench_report_free(&r);
}
END_TEST

/* ------------------------------------------------------------------ SVG */

START_TEST(svg_marks_the_crossover_and_escapes_text)
{
    clf_bench_report r;
    FILE *f = tmpfile();
    char *text;

    ck_assert_ptr_nonnull(f);
    sample_report(&r);
    add_row(&r, CLF_BENCH_LINFORMER, 1024, 0.2, CLF_BENCH_OK);
    add_row(&r, CLF_BENCH_FULL, 1024, 0.6, CLF_BENCH_OK);
    ck_assert_int_eq(clf_bench_svg_write(f, &r), 0);
    text = slurp(f);
    fclose(f);
    ck_assert(strncmp(text, "<?xml", 5) == 0);
    ck_assert_ptr_nonnull(strstr(text, "<svg xmlns="));
    ck_assert_ptr_nonnull(strstr(text, "crossover n = 1024"));
    ck_assert_ptr_nonnull(
        strstr(text, "Device &quot;A&quot;, &amp; &lt;B&gt;"));
    ck_assert_ptr_null(strstr(text, "& <B>"));
    ck_assert_ptr_nonnull(strstr(text, "too large"));
    ck_assert_ptr_nonnull(strstr(text, "<polyline"));
    ck_assert(strcmp(text + strlen(text) - 7, "</svg>\n") == 0);
    free(text);
    clf_bench_report_free(&r);

    /* nothing to plot is an error, not an empty picture */
    clf_bench_report_init(&r);
    f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(clf_bench_svg_write(f, &r), -1);
    fclose(f);
}
END_TEST

/* -------------------------------------------------------------- compare */

START_TEST(compare_matches_same_device_then_single_other)
{
    clf_bench_report now, base, two;
    int other = -1;

    clf_bench_report_init(&now);
    clf_bench_report_init(&base);
    clf_bench_report_init(&two);
    one_device(&now, "gpu");
    add_row(&now, CLF_BENCH_LINFORMER, 512, 0.1, CLF_BENCH_OK);
    add_row(&now, CLF_BENCH_FULL, 2048, 0.1, CLF_BENCH_OK);

    one_device(&base, "gpu");
    add_row(&base, CLF_BENCH_FULL, 512, 0.3, CLF_BENCH_OK);
    add_row(&base, CLF_BENCH_LINFORMER, 512, 0.2, CLF_BENCH_OK);
    ck_assert_int_eq(clf_bench_compare_match(&now, 0, &base, &other), 1);
    ck_assert_int_eq(other, 0);
    ck_assert_int_eq(clf_bench_compare_match(&now, 1, &base, &other), -1);

    /* a single-device baseline from another device still compares */
    snprintf(base.devices[0].name, sizeof base.devices[0].name, "cpu");
    ck_assert_int_eq(clf_bench_compare_match(&now, 0, &base, &other), 1);
    ck_assert_int_eq(other, 1);

    /* with several devices in the baseline, the same device first, else
     * the device at the same position */
    one_device(&two, "cpu");
    one_device(&two, "gpu");
    add_row(&two, CLF_BENCH_LINFORMER, 512, 0.2, CLF_BENCH_OK);
    ck_assert_int_eq(clf_bench_compare_match(&now, 0, &two, &other), -1);
    two.results[0].device = 1;
    ck_assert_int_eq(clf_bench_compare_match(&now, 0, &two, &other), 0);
    ck_assert_int_eq(other, 0);
    clf_bench_report_free(&now);
    clf_bench_report_free(&base);
    clf_bench_report_free(&two);
}
END_TEST

START_TEST(compare_prints_ratio_now_over_baseline)
{
    clf_bench_report now, base;
    FILE *f = tmpfile();
    char *text;

    ck_assert_ptr_nonnull(f);
    clf_bench_report_init(&now);
    clf_bench_report_init(&base);
    one_device(&now, "dev");
    one_device(&base, "dev");
    add_row(&now, CLF_BENCH_LINFORMER, 512, 0.3, CLF_BENCH_OK);
    add_row(&base, CLF_BENCH_LINFORMER, 512, 0.2, CLF_BENCH_OK);
    ck_assert_uint_eq(clf_bench_print_compare(f, &now, &base), 1);
    text = slurp(f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "200.0"));
    ck_assert_ptr_nonnull(strstr(text, "300.0"));
    ck_assert_ptr_nonnull(strstr(text, "1.500"));
    free(text);
    clf_bench_report_free(&now);
    clf_bench_report_free(&base);
}
END_TEST

/* ------------------------------------------------------- hostile sizes */

/* Reads and removes a temporary file. */
static char *
take_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text;

    ck_assert_ptr_nonnull(f);
    text = slurp(f);
    fclose(f);
    remove(path);
    return text;
}

/* Runs clf_bench_main on the arguments with stdout and stderr caught;
 * returns its status and the texts (caller frees; out may be NULL). */
static int
bench_main_io(char **argv, int argc, char **out, char **err)
{
    char po[] = "/tmp/clf-bench-out-XXXXXX", pe[] = "/tmp/clf-bench-err-XXXXXX";
    int fo = mkstemp(po), fe = mkstemp(pe), so, se, rc;

    ck_assert_int_ge(fo, 0);
    ck_assert_int_ge(fe, 0);
    fflush(stdout);
    fflush(stderr);
    so = dup(1);
    se = dup(2);
    ck_assert_int_ge(so, 0);
    ck_assert_int_ge(se, 0);
    ck_assert_int_ge(dup2(fo, 1), 0);
    ck_assert_int_ge(dup2(fe, 2), 0);
    rc = clf_bench_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    close(fo);
    close(fe);
    if (out != NULL)
        *out = take_file(po);
    else
        remove(po);
    *err = take_file(pe);
    return rc;
}

static int
bench_main_caught(char **argv, int argc, char **text)
{
    return bench_main_io(argv, argc, NULL, text);
}

START_TEST(bench_main_refuses_overflowing_sizes_naming_them)
{
    static const struct {
        const char *args[14];
        const char *names;
    } cases[] = {
        {{"bench", "--batch", "1125899906842624", "--n", "64", "--d-model",
          "64", "--heads", "2", "--k", "32"},
         "--batch 1125899906842624 x --n 64 x --d-model 64"},
        {{"bench", "--d-model", "4294967296", "--heads", "1"},
         "--d-model 4294967296"},
        {{"bench", "--accuracy", "--n", "4611686018427387904", "--k", "2"},
         "--n 4611686018427387904"},
        {{"bench", "--quick", "--batch", "4611686018427387904", "--n", "64"},
         "--batch 4611686018427387904"},
        {{"bench", "--accuracy", "--n", "1152921504606846976", "--k", "1",
          "--d-model", "1", "--heads", "1", "--trials", "1"},
         "--trials 1 x --n 1152921504606846976"},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[14], *text = NULL;
        int argc = 0, rc;
        while (argc < 13 && cases[i].args[argc] != NULL) {
            argv[argc] = (char *)cases[i].args[argc];
            argc++;
        }
        argv[argc] = NULL;
        rc = bench_main_caught(argv, argc, &text);
        ck_assert_msg(rc == 2, "case %zu: status %d (%s)", i, rc, text);
        ck_assert_msg(strstr(text, cases[i].names) != NULL,
                      "case %zu: \"%s\" does not name %s", i, text,
                      cases[i].names);
        ck_assert_ptr_nonnull(strstr(text, "overflow"));
        free(text);
    }
}
END_TEST

static void
options_of(struct clf_bench_options *o, size_t B, size_t n, size_t D)
{
    memset(o, 0, sizeof *o);
    o->prog = "bench";
    o->b[0] = B, o->nb = 1;
    o->n[0] = n, o->nn = 1;
    o->d[0] = D, o->nd = 1;
    o->h[0] = 1, o->nh = 1;
    o->k[0] = 1, o->nk = 1;
}

START_TEST(check_sizes_accepts_the_largest_product_that_fits)
{
    struct clf_bench_options o;
    char why[256] = "";
    size_t n = SIZE_MAX / sizeof(float) / 64; /* B n D floats just fit */

    options_of(&o, 64, n, 1);
    ck_assert_msg(clf_bench_check_sizes(&o, why, sizeof why) == 0, "%s", why);
    o.n[0] = n + 1;
    ck_assert_int_eq(clf_bench_check_sizes(&o, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "--batch 64 x --n"));
    /* the study's E and F: k x n floats */
    options_of(&o, 1, 8, 8);
    o.acc_n[0] = SIZE_MAX / 16, o.acc_nn = 1;
    o.acc_k[0] = 2, o.acc_nk = 1;
    o.trials = 1;
    ck_assert_int_eq(clf_bench_check_sizes(&o, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "--n") != NULL, "%s", why);
    /* ordinary sizes pass */
    options_of(&o, 4, 4096, 1024);
    o.acc_n[0] = 2048, o.acc_nn = 1;
    o.acc_k[0] = 1024, o.acc_nk = 1;
    o.trials = 1024;
    ck_assert_msg(clf_bench_check_sizes(&o, why, sizeof why) == 0, "%s", why);
}
END_TEST

/* Runs bench/bench_layer with the arguments; returns its exit status and
 * its stderr (caller frees). */
static int
bench_layer_status(const char *args, char **text)
{
    const char *top = getenv("top_builddir");
    char cmd[512], path[] = "/tmp/clf-bench-layer-XXXXXX";
    int fd = mkstemp(path), st;
    FILE *f;

    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "%s/bench/bench_layer %s >/dev/null 2>%s",
             top != NULL ? top : ".", args, path);
    st = system(cmd);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    *text = slurp(f);
    fclose(f);
    remove(path);
    ck_assert_msg(WIFEXITED(st), "%s did not exit", cmd);
    return WEXITSTATUS(st);
}

START_TEST(bench_layer_refuses_overflowing_sizes_naming_them)
{
    char *text = NULL;

    ck_assert_int_eq(
        bench_layer_status("--batch 1125899906842624 --n 64 --d-model 64 "
                           "--heads 2 --k 32",
                           &text),
        2);
    ck_assert_msg(strstr(text, "--batch 1125899906842624 x --n 64 x "
                               "--d-model 64") != NULL,
                  "%s", text);
    free(text);
    /* a value past what size_t holds is no value */
    ck_assert_int_eq(
        bench_layer_status("--batch 99999999999999999999999", &text), 2);
    ck_assert_msg(strstr(text, "--batch") != NULL, "%s", text);
    free(text);
}
END_TEST

/* ---------------------------------------------------------- out files */

static int
write_hello(FILE *f, const clf_bench_report *r)
{
    (void)r;
    return fputs("hello\n", f) == EOF ? -1 : 0;
}

static int
write_fails(FILE *f, const clf_bench_report *r)
{
    (void)r;
    fputs("half", f);
    return -1;
}

START_TEST(write_file_is_whole_private_and_leaves_nothing)
{
    char dir[] = "/tmp/clf-bench-files-XXXXXX", path[128], *text;
    clf_bench_report r;
    struct stat st;
    FILE *f;

    clf_bench_report_init(&r);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/out.txt", dir);
    ck_assert_int_eq(clf_bench_write_file(path, write_hello, &r), 0);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_uint_eq(tu_dir_entries(dir), 1);
    /* a failed writer leaves the old file whole and no temporary */
    ck_assert_int_eq(clf_bench_write_file(path, write_fails, &r), -1);
    ck_assert_uint_eq(tu_dir_entries(dir), 1);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    text = slurp(f);
    fclose(f);
    ck_assert_str_eq(text, "hello\n");
    free(text);
    /* an existing regular file is replaced */
    ck_assert_int_eq(clf_bench_write_file(path, write_hello, &r), 0);
    ck_assert_uint_eq(tu_dir_entries(dir), 1);
    remove(path);
    rmdir(dir);
}
END_TEST

START_TEST(write_file_refuses_what_is_not_a_regular_file)
{
    char dir[] = "/tmp/clf-bench-files-XXXXXX", path[128], victim[128];
    char *text;
    clf_bench_report r;
    FILE *f;

    clf_bench_report_init(&r);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* a directory */
    errno = 0;
    ck_assert_int_eq(clf_bench_write_file(dir, write_hello, &r), -1);
    ck_assert_int_eq(errno, EEXIST);
    /* a symbolic link: neither it nor its target changes */
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(path, sizeof path, "%s/link", dir);
    f = fopen(victim, "w");
    ck_assert_ptr_nonnull(f);
    fputs("keep\n", f);
    fclose(f);
    ck_assert_int_eq(symlink(victim, path), 0);
    ck_assert_int_eq(clf_bench_write_file(path, write_hello, &r), -1);
    f = fopen(victim, "r");
    text = slurp(f);
    fclose(f);
    ck_assert_str_eq(text, "keep\n");
    free(text);
    remove(path);
    /* a FIFO */
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(clf_bench_write_file(path, write_hello, &r), -1);
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_uint_eq(tu_dir_entries(dir), 2); /* victim and the FIFO */
    remove(path);
    remove(victim);
    rmdir(dir);
}
END_TEST

/* A saved run to report from, in a temporary file. */
static void
saved_run(char *path, size_t len)
{
    clf_bench_report r;
    char dir[] = "/tmp/clf-bench-from-XXXXXX";

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, len, "%s/run.json", dir);
    sample_report(&r);
    ck_assert_int_eq(clf_bench_json_write(&r, path), 0);
    clf_bench_report_free(&r);
}

static void
saved_run_remove(const char *path)
{
    char dir[128];

    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    remove(path);
    rmdir(dir);
}

START_TEST(bench_main_dash_writes_data_to_stdout_tables_to_stderr)
{
    char path[128], *out, *err, why[256] = "";
    char *json_args[] = {"bench", "--from", path, "--json", "-", NULL};
    char *csv_args[] = {"bench", "--from", path, "--csv", "-", NULL};
    char *both[] = {"bench", "--from", path, "--json", "-", "--csv", "-", NULL};
    clf_bench_report back;
    json_error_t jerr;
    json_t *root;

    saved_run(path, sizeof path);
    ck_assert_int_eq(bench_main_io(json_args, 5, &out, &err), 0);
    root = json_loads(out, 0, &jerr);
    ck_assert_msg(root != NULL, "stdout is no JSON: %s", jerr.text);
    ck_assert_msg(clf_bench_report_from_json(root, &back, why, sizeof why) == 0,
                  "%s", why);
    ck_assert_uint_gt(back.nresults, 0);
    clf_bench_report_free(&back);
    json_decref(root);
    ck_assert_ptr_nonnull(strstr(err, "== device"));
    free(out);
    free(err);

    ck_assert_int_eq(bench_main_io(csv_args, 5, &out, &err), 0);
    ck_assert_int_eq(
        strncmp(out, clf_bench_csv_header(), strlen(clf_bench_csv_header())),
        0);
    ck_assert_ptr_nonnull(strstr(out, clf_bench_csv_accuracy_header()));
    ck_assert_ptr_null(strstr(out, "== device"));
    ck_assert_ptr_nonnull(strstr(err, "== device"));
    free(out);
    free(err);

    ck_assert_int_eq(bench_main_io(both, 7, &out, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "only one of"));
    free(out);
    free(err);
    saved_run_remove(path);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("bench");
    TCase *arith = tcase_create("arithmetic");
    TCase *formats = tcase_create("formats");
    TCase *sizes = tcase_create("sizes");

    tcase_add_test(arith, stats_median_of_odd_and_even_counts);
    tcase_add_test(arith, stats_skip_nan_and_empty_is_nan);
    tcase_add_test(arith, stage_sample_zero_timestamps_are_unmeasured);
    tcase_add_test(arith, gflops_is_flops_per_second_over_1e9);
    tcase_add_test(arith, rel_error_is_frobenius_ratio);
    tcase_add_test(arith, flops_model_full_by_hand);
    tcase_add_test(arith, flops_model_linformer_by_hand);
    tcase_add_test(arith, flops_model_causal_by_hand);
    tcase_add_test(arith, flops_model_grows_as_expected);
    tcase_add_test(arith, flops_model_rejects_impossible_shapes);
    tcase_add_test(arith, causal_shape_picks_block_and_slots);
    tcase_add_test(arith, init_bounds_follow_lucidrains_and_fairseq);
    tcase_add_test(arith, decisive_alpha_gives_the_target_weight);
    tcase_add_test(arith, decisive_weight_by_hand);
    tcase_add_test(arith, crossover_finds_first_winning_n);
    tcase_add_test(arith, crossover_none_and_always);
    tcase_add_test(arith, crossover_needs_every_later_n_to_win);
    tcase_add_test(arith, crossings_group_rows_of_a_report);
    tcase_add_test(arith, parse_sizes_accepts_lists_and_rejects_junk);
    tcase_add_test(arith, names_round_trip);
    tcase_add_test(formats, json_round_trip_keeps_every_field);
    tcase_add_test(formats, json_has_schema_keys_and_crossovers);
    tcase_add_test(formats, json_schema_rejects_malformed_documents);
    tcase_add_test(formats, json_file_round_trip_leaves_no_temporary);
    tcase_add_test(formats, csv_header_names_every_column);
    tcase_add_test(formats, csv_rows_match_the_header);
    tcase_add_test(formats, svg_marks_the_crossover_and_escapes_text);
    tcase_add_test(formats, compare_matches_same_device_then_single_other);
    tcase_add_test(formats, compare_prints_ratio_now_over_baseline);
    tcase_add_test(sizes, bench_main_refuses_overflowing_sizes_naming_them);
    tcase_add_test(sizes, check_sizes_accepts_the_largest_product_that_fits);
    tcase_add_test(sizes, bench_layer_refuses_overflowing_sizes_naming_them);
    tcase_add_test(formats, write_file_is_whole_private_and_leaves_nothing);
    tcase_add_test(formats, write_file_refuses_what_is_not_a_regular_file);
    tcase_add_test(formats,
                   bench_main_dash_writes_data_to_stdout_tables_to_stderr);
    suite_add_tcase(s, arith);
    suite_add_tcase(s, formats);
    suite_add_tcase(s, sizes);
    return tu_run(s, 0);
}
