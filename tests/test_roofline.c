/* The bench's figures against their device: the MAD and the noisy mark,
 * when a median has settled, the bytes model and the roofline on shapes
 * counted by hand, the side-by-side table of two synthetic devices, the
 * baseline selector, the host's load, and the JSON of all of it (old files
 * without it still read). */
#define _POSIX_C_SOURCE 200809L

#include "output.h"
#include "roofline.h"
#include "suite.h"
#include "testutil.h"

#include <fcntl.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define F4 4.0 /* bytes a float */

/* ---------------------------------------------------------------- noise */

START_TEST(mad_by_hand)
{
    const double odd[] = {4, 1, 100, 3, 2}, even[] = {1, 2, 3, 4};
    const double with_nan[] = {NAN, 1, 2, 3, NAN};
    clf_bench_stats s;

    /* median 3, deviations 1 2 97 0 1: MAD 1 */
    s = clf_bench_stats_of(odd, 5);
    ck_assert_double_eq(s.median, 3.0);
    ck_assert_double_eq(s.mad, 1.0);
    ck_assert_double_eq_tol(clf_bench_rel_mad(&s), 1.0 / 3.0, 1e-15);
    /* median 2.5, deviations 1.5 0.5 0.5 1.5: MAD 1 */
    s = clf_bench_stats_of(even, 4);
    ck_assert_double_eq(s.median, 2.5);
    ck_assert_double_eq(s.mad, 1.0);
    /* NaN runs are not counted: median 2, deviations 1 0 1 */
    s = clf_bench_stats_of(with_nan, 5);
    ck_assert_uint_eq(s.runs, 3);
    ck_assert_double_eq(s.mad, 1.0);
    s = clf_bench_stats_of(NULL, 0);
    ck_assert(isnan(s.mad) && isnan(clf_bench_rel_mad(&s)));
}
END_TEST

START_TEST(noisy_means_spread_over_a_tenth_of_the_median)
{
    const double calm[] = {100, 101, 109}, edge[] = {100, 100, 110};
    const double wild[] = {100, 100, 111};
    clf_bench_stats s;

    s = clf_bench_stats_of(calm, 3);
    ck_assert_int_eq(clf_bench_stats_noisy(&s), 0);
    s = clf_bench_stats_of(edge, 3); /* exactly 10%: not over */
    ck_assert_int_eq(clf_bench_stats_noisy(&s), 0);
    s = clf_bench_stats_of(wild, 3);
    ck_assert_int_eq(clf_bench_stats_noisy(&s), 1);
    s = clf_bench_stats_of(NULL, 0);
    ck_assert_int_eq(clf_bench_stats_noisy(&s), 0);
}
END_TEST

START_TEST(median_settles_after_enough_steady_runs)
{
    const double flat[] = {10, 10, 10, 10, 10, 10};
    const double rising[] = {10, 12, 14, 16, 18};
    const double outliers[] = {10, 10, 10, 20, 20};
    const double drift[] = {10, 10.05, 10.1, 10.2, 10.3};

    ck_assert_int_eq(clf_bench_median_settled(flat, 4, 5), 0); /* too few */
    ck_assert_int_eq(clf_bench_median_settled(flat, 5, 5), 1);
    /* median 14 against 12 without the last two */
    ck_assert_int_eq(clf_bench_median_settled(rising, 5, 5), 0);
    /* two slow runs at the end do not move the median */
    ck_assert_int_eq(clf_bench_median_settled(outliers, 5, 5), 1);
    /* 10.1 against 10.05: 0.5%, within 1% */
    ck_assert_int_eq(clf_bench_median_settled(drift, 5, 5), 1);
    /* --repeat 3: three runs can settle */
    ck_assert_int_eq(clf_bench_median_settled(flat, 3, 3), 1);
    ck_assert_int_eq(clf_bench_median_settled(flat, 2, 1), 0);
}
END_TEST

/* ---------------------------------------------------------------- bytes */

static clf_bench_shape
shape(clf_bench_mode m, size_t B, size_t n, size_t D, size_t h, size_t k,
      size_t block)
{
    clf_bench_shape s;

    s.mode = m;
    s.batch = B;
    s.n = n;
    s.d_model = D;
    s.heads = h;
    s.k = k;
    s.causal_block = block;
    return s;
}

static void
assert_floats(const double got[CLF_STAGE_COUNT], const double want[7])
{
    int i;

    for (i = 0; i < CLF_STAGE_COUNT; i++)
        ck_assert_msg(got[i] == want[i] * F4, "stage %s: %g bytes, want %g",
                      clf_stage_name((clf_stage)i), got[i], want[i] * F4);
}

/* B=1, n=4, D=2, h=1, k=2.  X and Q are 8 floats, a weight 4.
 * projection X + W + Q = 20; compression per side E (8) + X (8) + E X
 * written and read (2 x 4) + W (4) + Kbar (4) = 32, two sides 64; scores
 * Q (8) + Kbar (4) + S (4 x 2 = 8) = 20; softmax 2 S = 16; weighted sum
 * P (8) + Vbar (4) + O (8) = 20; output O + W + b (2) + Y = 22. */
START_TEST(bytes_linformer_by_hand)
{
    const double want[7] = {20, 64, 20, 16, 20, 0, 22};
    clf_bench_shape s = shape(CLF_BENCH_LINFORMER, 1, 4, 2, 1, 2, 0);
    double st[CLF_STAGE_COUNT];

    ck_assert_double_eq(clf_bench_bytes_model(&s, st), 162 * F4);
    assert_floats(st, want);
}
END_TEST

/* Full, same shape: K and V projected on all rows, 2 x (8 + 4 + 8); the
 * scores are 4 x 4. */
START_TEST(bytes_full_by_hand)
{
    const double want[7] = {20, 40, 32, 32, 32, 0, 22};
    clf_bench_shape s = shape(CLF_BENCH_FULL, 1, 4, 2, 1, 0, 0);
    double st[CLF_STAGE_COUNT];

    ck_assert_double_eq(clf_bench_bytes_model(&s, st), 178 * F4);
    assert_floats(st, want);
}
END_TEST

/* B=2, h=2 (d_h = 1): X 16 floats; compression per side E 8 + X 16 +
 * 3 x (2 x 2 x 2) + W 4 = 52; scores B h n k = 32 floats. */
START_TEST(bytes_batch_and_heads_by_hand)
{
    const double want[7] = {36, 104, 56, 64, 56, 0, 38};
    clf_bench_shape s = shape(CLF_BENCH_LINFORMER, 2, 4, 2, 2, 2, 0);
    double st[CLF_STAGE_COUNT];

    ck_assert_double_eq(clf_bench_bytes_model(&s, st), 354 * F4);
    assert_floats(st, want);
}
END_TEST

/* Causal Linformer, n=8, block 4, k=2: 2 blocks of c=1 slot, 1 complete
 * block before the last query's.  Compression: exact K and V 2 x (16 + 4
 * + 16) = 72, plus per side the block's rows (4 x 2), its slot of E (4),
 * its Kbar (2): 72 + 28.  Scores rows of k + b = 6: S = 48; scores read Q
 * (16), Kbar (4) and K again for the window (16). */
START_TEST(bytes_causal_by_hand)
{
    const double want[7] = {36, 100, 84, 96, 84, 0, 38};
    clf_bench_shape s = shape(CLF_BENCH_CAUSAL, 1, 8, 2, 1, 2, 4);
    double st[CLF_STAGE_COUNT];

    ck_assert_double_eq(clf_bench_bytes_model(&s, st), 438 * F4);
    assert_floats(st, want);
}
END_TEST

/* Fused: Q, Kbar, Vbar read and O written, no scores. */
START_TEST(bytes_fused_split)
{
    const double want[7] = {20, 64, 0, 0, 0, 24, 22};
    clf_bench_shape s = shape(CLF_BENCH_LINFORMER, 1, 4, 2, 1, 2, 0);
    clf_bench_result x;
    double st[CLF_STAGE_COUNT];

    clf_bench_bytes_model(&s, st);
    clf_bench_fused_bytes(&s, st);
    assert_floats(st, want);
    /* the same from a row whose fused stage took time */
    memset(&x, 0, sizeof x);
    x.mode = CLF_BENCH_LINFORMER;
    x.batch = 1;
    x.n = 4;
    x.d_model = 2;
    x.heads = 1;
    x.k = 2;
    x.stage[CLF_STAGE_FUSED].median = 1e-3;
    clf_bench_result_bytes(&x);
    assert_floats(x.stage_bytes, want);
    ck_assert_double_eq(x.bytes, 130 * F4);
}
END_TEST

START_TEST(bytes_reject_impossible_shapes)
{
    clf_bench_shape s;

    s = shape(CLF_BENCH_LINFORMER, 1, 4, 3, 2, 2, 0); /* h does not divide */
    ck_assert(isnan(clf_bench_bytes_model(&s, NULL)));
    s = shape(CLF_BENCH_LINFORMER, 1, 4, 2, 1, 5, 0); /* k > n */
    ck_assert(isnan(clf_bench_bytes_model(&s, NULL)));
    s = shape(CLF_BENCH_LINFORMER, 1, 4, 2, 1, 0, 0); /* k = 0 */
    ck_assert(isnan(clf_bench_bytes_model(&s, NULL)));
    s = shape(CLF_BENCH_CAUSAL, 1, 8, 2, 1, 2, 0); /* no block */
    ck_assert(isnan(clf_bench_bytes_model(&s, NULL)));
    s = shape(CLF_BENCH_FULL, 0, 4, 2, 1, 0, 0); /* no batch */
    ck_assert(isnan(clf_bench_bytes_model(&s, NULL)));
    s = shape(CLF_BENCH_MODE_COUNT, 1, 4, 2, 1, 2, 0);
    ck_assert(isnan(clf_bench_bytes_model(&s, NULL)));
}
END_TEST

/* ------------------------------------------------------------- roofline */

START_TEST(roofline_bound_and_percent)
{
    /* 10 FLOP/byte: memory-bound at 2 GB/s (20 GFLOP/s under a 50 peak);
     * 100 GFLOP in 10 s is 10 GFLOP/s, half of it */
    ck_assert_double_eq(clf_bench_roofline_bound(100e9, 10e9, 50.0, 2.0), 20.0);
    ck_assert_double_eq_tol(
        clf_bench_roofline_pct(100e9, 10e9, 10.0, 50.0, 2.0), 50.0, 1e-12);
    /* compute-bound at 100 GB/s: the 50 GFLOP/s peak, 20% of it */
    ck_assert_double_eq(clf_bench_roofline_bound(100e9, 10e9, 50.0, 100.0),
                        50.0);
    ck_assert_double_eq_tol(
        clf_bench_roofline_pct(100e9, 10e9, 10.0, 50.0, 100.0), 20.0, 1e-12);
    /* anything unknown: unknown */
    ck_assert(isnan(clf_bench_roofline_pct(100e9, 10e9, 10.0, NAN, 2.0)));
    ck_assert(isnan(clf_bench_roofline_pct(100e9, NAN, 10.0, 50.0, 2.0)));
    ck_assert(isnan(clf_bench_roofline_pct(100e9, 0.0, 10.0, 50.0, 2.0)));
    ck_assert(isnan(clf_bench_roofline_pct(100e9, 10e9, 0.0, 50.0, 2.0)));
}
END_TEST

START_TEST(result_roofline_fills_every_field)
{
    clf_bench_report r;
    clf_bench_device *d;
    clf_bench_result *x;
    const double wall[] = {0.010, 0.010, 0.012};

    clf_bench_report_init(&r);
    d = clf_bench_report_add_device(&r);
    d->peak_gflops = 50.0;
    d->peak_gbps = 2.0;
    x = clf_bench_report_add_result(&r);
    x->flops = 0.1e9;
    x->bytes = 0.01e9; /* 10 FLOP/byte: bound 20 GFLOP/s */
    x->wall = clf_bench_stats_of(wall, 3);
    x->stage_flops[CLF_STAGE_OUTPUT] = 0.04e9;
    x->stage_bytes[CLF_STAGE_OUTPUT] = 0.04e9; /* 1 FLOP/byte: bound 2 */
    x->stage[CLF_STAGE_OUTPUT] = clf_bench_stats_of(wall, 3);
    clf_bench_result_roofline(x, d);
    ck_assert_double_eq(x->intensity, 10.0);
    /* 10 GFLOP/s of 20 */
    ck_assert_double_eq_tol(x->roofline_pct, 50.0, 1e-9);
    ck_assert_double_eq(x->stage_intensity[CLF_STAGE_OUTPUT], 1.0);
    /* 4 GFLOP/s of 2 */
    ck_assert_double_eq_tol(x->stage_roofline_pct[CLF_STAGE_OUTPUT], 200.0,
                            1e-9);
    ck_assert(isnan(x->stage_roofline_pct[CLF_STAGE_SCORES]));
    ck_assert_int_eq(x->noisy, 1); /* 2 ms spread over 10 ms */
    clf_bench_report_free(&r);
}
END_TEST

/* --------------------------------------------------------- the table */

static void
add_device(clf_bench_report *r, unsigned index, const char *platform,
           const char *name, const char *stable, int gpu)
{
    clf_bench_device *d = clf_bench_report_add_device(r);

    d->index = index;
    snprintf(d->platform, sizeof d->platform, "%s", platform);
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->driver, sizeof d->driver, "1.0");
    snprintf(d->stable_name, sizeof d->stable_name, "%s", stable);
    d->is_gpu = gpu;
    d->peak_gflops = 100.0;
    d->peak_gbps = 10.0;
    d->h2d_gbps = 5.0;
}

static void
add_row(clf_bench_report *r, size_t dev, clf_bench_mode m, size_t n, double ms,
        double spread)
{
    clf_bench_result *x = clf_bench_report_add_result(r);
    const double runs[] = {ms * 1e-3, ms * 1e-3, (ms + spread) * 1e-3};

    x->device = dev;
    x->mode = m;
    x->n = n;
    x->k = m == CLF_BENCH_LINFORMER ? 64 : 0;
    x->k_requested = 64;
    x->d_model = 128;
    x->heads = 2;
    x->batch = 1;
    x->wall = clf_bench_stats_of(runs, 3);
    x->flops = 1e9;
    x->gflops = clf_bench_gflops(x->flops, x->wall.median);
    x->bytes = 1e8;
    clf_bench_result_roofline(x, &r->devices[dev]);
}

/* Two devices; (linformer 256) on both, device 1 twice as slow and noisy;
 * (full 256) on both; (linformer 512) on device 0 only. */
static void
two_devices(clf_bench_report *r)
{
    clf_bench_report_init(r);
    add_device(r, 0, "Portable Computing Language", "cpu-a", "pocl:0", 0);
    add_device(r, 3, "Intel(R) OpenCL", "Intel(R) Xeon", "intel-cpu:0", 0);
    add_row(r, 0, CLF_BENCH_LINFORMER, 256, 10.0, 0.5);
    add_row(r, 0, CLF_BENCH_FULL, 256, 40.0, 0.0);
    add_row(r, 0, CLF_BENCH_LINFORMER, 512, 20.0, 0.0);
    add_row(r, 1, CLF_BENCH_LINFORMER, 256, 20.0, 5.0);
    add_row(r, 1, CLF_BENCH_FULL, 256, 20.0, 0.0);
}

/* No rate a run measured stays above its device's peak: a faster row
 * (or stage) raises the peak to its rate, keeps the kernels' figure and
 * names the row, and then no roof% passes 100; rows that did not run
 * and other devices are left alone. */
START_TEST(peaks_hold_every_measured_rate)
{
    clf_bench_report r;
    clf_bench_result *x;
    size_t i;
    int s;

    two_devices(&r);
    /* at the peaks (100 GFLOP/s, 10 GB/s), not above: nothing raised */
    ck_assert_int_eq(clf_bench_peaks_hold(&r, 0), 0);
    ck_assert(r.devices[0].peak_gflops == 100.0);
    ck_assert(isnan(r.devices[0].fma_measured));
    ck_assert_str_eq(r.devices[0].peak_note, "");
    /* a row that did not run, however fast, is no rate */
    add_row(&r, 0, CLF_BENCH_LINFORMER, 2048, 0.001, 0.0);
    r.results[r.nresults - 1].status = CLF_BENCH_OVER_BUDGET;
    ck_assert_int_eq(clf_bench_peaks_hold(&r, 0), 0);
    /* 200 GFLOP/s and 20 GB/s over the whole forward, 500 GFLOP/s in
     * its projection stage */
    add_row(&r, 0, CLF_BENCH_LINFORMER, 1024, 5.0, 0.0);
    x = &r.results[r.nresults - 1];
    x->stage_flops[CLF_STAGE_PROJECTION] = 5e8;
    x->stage_bytes[CLF_STAGE_PROJECTION] = 1e6;
    x->stage[CLF_STAGE_PROJECTION].median = 1e-3;
    x->stage[CLF_STAGE_PROJECTION].runs = 3;
    ck_assert(x->roofline_pct > 100.0); /* against the kernels' peaks */
    ck_assert_int_eq(clf_bench_peaks_hold(&r, 0), 1);
    ck_assert(fabs(r.devices[0].peak_gflops - 500.0) < 1e-6);
    ck_assert(fabs(r.devices[0].peak_gbps - 20.0) < 1e-6);
    ck_assert(r.devices[0].fma_measured == 100.0);
    ck_assert(r.devices[0].copy_measured == 10.0);
    ck_assert_ptr_nonnull(strstr(r.devices[0].peak_note, "fp32 peak raised"));
    ck_assert_ptr_nonnull(strstr(r.devices[0].peak_note, "n=1024"));
    ck_assert_ptr_nonnull(strstr(r.devices[0].peak_note, "projection"));
    ck_assert_ptr_nonnull(strstr(r.devices[0].peak_note, "copy bandwidth"));
    for (i = 0; i < r.nresults; i++) {
        const clf_bench_result *y = &r.results[i];
        if (y->device != 0 || y->status != CLF_BENCH_OK)
            continue;
        ck_assert_msg(!(y->roofline_pct > 100.0 + 1e-9), "row %zu: %g", i,
                      y->roofline_pct);
        for (s = 0; s < CLF_STAGE_COUNT; s++)
            ck_assert(!(y->stage_roofline_pct[s] > 100.0 + 1e-9));
    }
    ck_assert(r.devices[1].peak_gflops == 100.0);
    /* held again: nothing more to raise */
    ck_assert_int_eq(clf_bench_peaks_hold(&r, 0), 0);
    clf_bench_report_free(&r);
}
END_TEST

/* The comparison table as a string (the caller frees it). */
static char *
comparison(const clf_bench_report *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    ck_assert_ptr_nonnull(f);
    clf_bench_print_comparison(f, r);
    fclose(f);
    return buf;
}

/* The line of the table that starts with mode and n, or NULL. */
static const char *
line_of(const char *text, const char *mode, const char *n)
{
    const char *p = text;

    while (p != NULL && *p != '\0') {
        char m[32], nn[32];
        if (sscanf(p, "%31s %31s", m, nn) == 2 && strcmp(m, mode) == 0 &&
            strcmp(nn, n) == 0)
            return p;
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return NULL;
}

static int
count_lines_of(const char *text, const char *mode, const char *n)
{
    int c = 0;
    const char *p = text;

    while ((p = line_of(p, mode, n)) != NULL) {
        c++;
        p = strchr(p, '\n');
        if (p == NULL)
            break;
    }
    return c;
}

START_TEST(table_puts_two_devices_side_by_side)
{
    clf_bench_report r;
    char *t, *a, *b;
    const char *row;

    two_devices(&r);
    t = comparison(&r);
    /* one column group a device, the baseline the first, in order */
    a = strstr(t, "| pocl:0 (base)");
    b = strstr(t, "| intel-cpu:0 ");
    ck_assert_msg(a != NULL && b != NULL && a < b, "%s", t);
    ck_assert_ptr_nonnull(strstr(t, "baseline pocl:0: cpu-a"));
    /* one row a configuration, not a row a device */
    ck_assert_int_eq(count_lines_of(t, "linformer", "256"), 1);
    ck_assert_int_eq(count_lines_of(t, "full", "256"), 1);
    ck_assert_int_eq(count_lines_of(t, "linformer", "512"), 1);
    /* 20 ms against 10: 2.00x; device 1 noisy (5 ms over 20) */
    row = line_of(t, "linformer", "256");
    ck_assert_ptr_nonnull(row);
    ck_assert_msg(strstr(row, "10.00 ") && strstr(row, "20.00*") &&
                      strstr(row, "2.00x"),
                  "%.*s", (int)strcspn(row, "\n"), row);
    /* 100 GFLOP/s at 1 GFLOP / 10 ms; 10 FLOP/byte x 10 GB/s = 100: 100% */
    ck_assert_ptr_nonnull(strstr(row, "100.0  100.0"));
    row = line_of(t, "full", "256");
    ck_assert_ptr_nonnull(strstr(row, "0.50x"));
    /* no row on device 1: no ratio */
    row = line_of(t, "linformer", "512");
    ck_assert_ptr_nonnull(row);
    ck_assert_msg(row[strcspn(row, "\n") - 1] == '-', "%.*s",
                  (int)strcspn(row, "\n"), row);
    ck_assert_ptr_nonnull(strstr(t, "* noisy"));
    free(t);
    clf_bench_report_free(&r);
}
END_TEST

START_TEST(table_ratios_follow_the_baseline)
{
    clf_bench_report r;
    const char *row;
    char *t;

    two_devices(&r);
    r.baseline = 1;
    t = comparison(&r);
    ck_assert_ptr_nonnull(strstr(t, "| intel-cpu:0 (base)"));
    ck_assert_ptr_null(strstr(t, "pocl:0 (base)"));
    row = line_of(t, "linformer", "256");
    ck_assert_msg(strstr(row, "0.50x") != NULL, "%.*s", (int)strcspn(row, "\n"),
                  row);
    row = line_of(t, "full", "256");
    ck_assert_ptr_nonnull(strstr(row, "2.00x"));
    free(t);
    /* one device: no comparison */
    r.ndevices = 1;
    r.baseline = 0;
    t = comparison(&r);
    ck_assert_msg(t == NULL || t[0] == '\0', "%s", t);
    free(t);
    r.ndevices = 2;
    clf_bench_report_free(&r);
}
END_TEST

START_TEST(matrix_table_shows_mad_roofline_and_noise)
{
    clf_bench_report r;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;

    two_devices(&r);
    f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    clf_bench_print_matrix(f, &r);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "rMAD%"));
    ck_assert_ptr_nonnull(strstr(buf, "roof%"));
    ck_assert_ptr_nonnull(strstr(buf, "noisy"));
    ck_assert_ptr_nonnull(strstr(buf, "peaks: 100.0 GFLOP/s"));
    ck_assert_ptr_nonnull(strstr(buf, "== all devices side by side"));
    ck_assert_ptr_nonnull(strstr(buf, "FLOP/byte and % of roofline"));
    free(buf);
    clf_bench_report_free(&r);
}
END_TEST

/* ------------------------------------------------------------ baseline */

START_TEST(baseline_selectors_follow_the_device_rules)
{
    clf_bench_report r;

    two_devices(&r);
    add_device(&r, 5, "NVIDIA CUDA", "NVIDIA H200", "nvidia:0", 1);
    ck_assert_int_eq(clf_bench_find_device(&r, "3"), 1); /* flat index */
    ck_assert_int_eq(clf_bench_find_device(&r, "0"), 0);
    ck_assert_int_eq(clf_bench_find_device(&r, "1"), -1);
    ck_assert_int_eq(clf_bench_find_device(&r, "gpu"), 2);
    ck_assert_int_eq(clf_bench_find_device(&r, "CPU"), 0);
    ck_assert_int_eq(clf_bench_find_device(&r, "intel-cpu:0"), 1);
    ck_assert_int_eq(clf_bench_find_device(&r, "Intel-CPU"), 1);
    ck_assert_int_eq(clf_bench_find_device(&r, "pocl"), 0);
    ck_assert_int_eq(clf_bench_find_device(&r, "Portable"), 0);
    ck_assert_int_eq(clf_bench_find_device(&r, "intel"), 1);
    ck_assert_int_eq(clf_bench_find_device(&r, "h200"), 2);
    ck_assert_int_eq(clf_bench_find_device(&r, "pocl:7"), -1);
    ck_assert_int_eq(clf_bench_find_device(&r, "nothing"), -1);
    ck_assert_int_eq(clf_bench_find_device(&r, ""), -1);
    ck_assert_int_eq(clf_bench_find_device(&r, NULL), -1);
    clf_bench_report_free(&r);
}
END_TEST

/* clf_bench_main on argv with standard output and error sent to
 * /dev/null; returns its exit status. */
static int
bench_main_quiet(int argc, char **argv)
{
    int out, err, null, rc;

    fflush(stdout);
    fflush(stderr);
    out = dup(1);
    err = dup(2);
    null = open("/dev/null", O_WRONLY);
    ck_assert(out >= 0 && err >= 0 && null >= 0);
    dup2(null, 1);
    dup2(null, 2);
    rc = clf_bench_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(out, 1);
    dup2(err, 2);
    close(out);
    close(err);
    close(null);
    return rc;
}

/* --from a saved two-device run: --baseline picks the baseline that the
 * rewritten JSON records; a selector naming none of them leaves the
 * first. */
START_TEST(bench_main_baseline_from_a_saved_run)
{
    char dir[] = "/tmp/clf-baseline-XXXXXX", in[300], out[300], why[256];
    char *argv[] = {"bench",     "--from", in, "--baseline",
                    "intel-cpu", "--json", out};
    clf_bench_report r, back;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(in, sizeof in, "%s/in.json", dir);
    snprintf(out, sizeof out, "%s/out.json", dir);
    two_devices(&r);
    ck_assert_int_eq(clf_bench_json_write(&r, in), 0);
    ck_assert_int_eq(bench_main_quiet(7, argv), 0);
    ck_assert_int_eq(clf_bench_json_read(out, &back, why, sizeof why), 0);
    ck_assert_uint_eq(back.baseline, 1);
    clf_bench_report_free(&back);
    argv[4] = "nvidia";
    ck_assert_int_eq(bench_main_quiet(7, argv), 0);
    ck_assert_int_eq(clf_bench_json_read(out, &back, why, sizeof why), 0);
    ck_assert_uint_eq(back.baseline, 0);
    clf_bench_report_free(&back);
    clf_bench_report_free(&r);
    unlink(in);
    unlink(out);
    rmdir(dir);
}
END_TEST

/* A live run whose --baseline names no device of the machine is a usage
 * error before anything is measured. */
START_TEST(bench_main_refuses_a_baseline_naming_no_device)
{
    char *argv[] = {"bench", "--baseline", "no-such-device-at-all",
                    "--n",   "64",         "--d-model",
                    "64",    "--heads",    "1"};
    size_t n = 0;

    if (clf_devices_list(NULL, 0, &n) != 0 || n == 0)
        return; /* nothing to name */
    ck_assert_int_eq(bench_main_quiet(9, argv), 2);
}
END_TEST

/* ----------------------------------------------------------------- load */

START_TEST(loadavg_reads_three_averages)
{
    char path[] = "/tmp/clf-loadavg-XXXXXX";
    double v[3];
    int fd = mkstemp(path);
    FILE *f;

    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    fputs("0.50 1.25 2.00 1/234 5678\n", f);
    fclose(f);
    ck_assert_int_eq(clf_bench_loadavg(path, v), 0);
    ck_assert(v[0] == 0.5 && v[1] == 1.25 && v[2] == 2.0);
    f = fopen(path, "w");
    fputs("busy\n", f);
    fclose(f);
    ck_assert_int_eq(clf_bench_loadavg(path, v), -1);
    ck_assert(isnan(v[0]) && isnan(v[1]) && isnan(v[2]));
    unlink(path);
    ck_assert_int_eq(clf_bench_loadavg(path, v), -1);
    ck_assert(isnan(v[2]));
}
END_TEST

/* ----------------------------------------------------------------- JSON */

static json_t *
to_json_text_and_back(const clf_bench_report *r)
{
    json_t *root = clf_bench_report_to_json(r), *back;
    json_error_t err;
    char *text;

    ck_assert_ptr_nonnull(root);
    text = json_dumps(root, 0);
    ck_assert_ptr_nonnull(text);
    back = json_loads(text, 0, &err);
    ck_assert_msg(back != NULL, "%s", err.text);
    free(text);
    json_decref(root);
    return back;
}

static void
read_back(const json_t *doc, clf_bench_report *out)
{
    char why[256] = "";

    ck_assert_msg(clf_bench_report_from_json(doc, out, why, sizeof why) == 0,
                  "%s", why);
}

START_TEST(json_keeps_peaks_roofline_noise_load_baseline)
{
    clf_bench_report in, out;
    json_t *doc, *by;
    size_t i;
    int s;

    two_devices(&in);
    in.devices[1].peak_cached = 1;
    in.devices[0].fma_width = 8;
    in.devices[0].fma_chains = 16;
    in.devices[1].copy_api = 1;
    in.devices[1].fma_measured = 80.0;
    snprintf(in.devices[1].peak_note, sizeof in.devices[1].peak_note,
             "fp32 peak raised");
    in.load_start[0] = 1.5;
    in.load_end[2] = 3.25;
    in.baseline = 1;
    in.results[0].stage_bytes[CLF_STAGE_SCORES] = 1234.0;
    in.results[0].stage_intensity[CLF_STAGE_SCORES] = 5.5;
    in.results[0].stage_roofline_pct[CLF_STAGE_SCORES] = 42.0;
    doc = to_json_text_and_back(&in);
    /* every device's rows keyed by its stable name */
    by = json_object_get(doc, "by_device");
    ck_assert_ptr_nonnull(by);
    ck_assert_int_eq(json_array_size(json_object_get(
                         json_object_get(by, "pocl:0"), "results")),
                     3);
    ck_assert_int_eq(json_array_size(json_object_get(
                         json_object_get(by, "intel-cpu:0"), "results")),
                     2);
    read_back(doc, &out);
    ck_assert_uint_eq(out.baseline, 1);
    ck_assert(out.load_start[0] == 1.5 && isnan(out.load_start[1]));
    ck_assert(out.load_end[2] == 3.25);
    for (i = 0; i < 2; i++) {
        ck_assert_str_eq(out.devices[i].stable_name, in.devices[i].stable_name);
        ck_assert(out.devices[i].peak_gflops == 100.0 &&
                  out.devices[i].peak_gbps == 10.0 &&
                  out.devices[i].h2d_gbps == 5.0);
        ck_assert_int_eq(out.devices[i].peak_cached, (int)i);
        ck_assert_int_eq(out.devices[i].fma_width, in.devices[i].fma_width);
        ck_assert_int_eq(out.devices[i].fma_chains, in.devices[i].fma_chains);
        ck_assert_int_eq(out.devices[i].copy_api, in.devices[i].copy_api);
        ck_assert_str_eq(out.devices[i].peak_note, in.devices[i].peak_note);
    }
    ck_assert(out.devices[1].fma_measured == 80.0);
    ck_assert(isnan(out.devices[0].fma_measured));
    ck_assert_uint_eq(out.nresults, in.nresults);
    for (i = 0; i < in.nresults; i++) {
        const clf_bench_result *a = &in.results[i], *b = &out.results[i];
        ck_assert(a->wall.mad == b->wall.mad);
        ck_assert(a->bytes == b->bytes && a->intensity == b->intensity);
        ck_assert_double_eq_tol(a->roofline_pct, b->roofline_pct, 1e-12);
        ck_assert_int_eq(a->noisy, b->noisy);
        for (s = 0; s < CLF_STAGE_COUNT; s++)
            ck_assert((isnan(a->stage_bytes[s]) && isnan(b->stage_bytes[s])) ||
                      a->stage_bytes[s] == b->stage_bytes[s]);
    }
    ck_assert(out.results[0].stage_intensity[CLF_STAGE_SCORES] == 5.5);
    ck_assert(out.results[0].stage_roofline_pct[CLF_STAGE_SCORES] == 42.0);
    ck_assert_int_eq(out.results[3].noisy, 1);
    json_decref(doc);
    clf_bench_report_free(&in);
    clf_bench_report_free(&out);
}
END_TEST

/* A file written before these fields: they read as NaN, "" and not
 * noisy. */
START_TEST(json_without_the_new_fields_still_reads)
{
    static const char *const row_keys[] = {
        "stable_name",        "bytes",       "intensity",
        "roofline_pct",       "stage_bytes", "stage_intensity",
        "stage_roofline_pct", "rel_mad",     "noisy"};
    clf_bench_report in, out;
    json_t *doc, *v;
    size_t i, k;

    two_devices(&in);
    doc = to_json_text_and_back(&in);
    json_object_del(doc, "load");
    json_object_del(doc, "baseline");
    json_object_del(doc, "by_device");
    json_array_foreach(json_object_get(doc, "devices"), i, v)
    {
        json_object_del(v, "stable_name");
        json_object_del(v, "peaks");
    }
    json_array_foreach(json_object_get(doc, "results"), i, v)
    {
        for (k = 0; k < sizeof row_keys / sizeof row_keys[0]; k++)
            json_object_del(v, row_keys[k]);
        json_object_del(json_object_get(v, "wall_s"), "mad");
    }
    json_array_foreach(json_object_get(doc, "crossovers"), i, v)
        json_object_del(v, "stable_name");
    read_back(doc, &out);
    ck_assert_uint_eq(out.baseline, 0);
    ck_assert(isnan(out.load_start[0]) && isnan(out.load_end[2]));
    ck_assert_str_eq(out.devices[0].stable_name, "");
    ck_assert(isnan(out.devices[1].peak_gflops));
    ck_assert(isnan(out.results[0].wall.mad));
    ck_assert(isnan(out.results[0].bytes) &&
              isnan(out.results[0].roofline_pct) &&
              isnan(out.results[0].stage_bytes[CLF_STAGE_OUTPUT]));
    /* noisy is derived from the spread when the file does not say */
    ck_assert_int_eq(out.results[3].noisy, 1);
    ck_assert_int_eq(out.results[1].noisy, 0);
    json_decref(doc);
    clf_bench_report_free(&in);
    clf_bench_report_free(&out);
}
END_TEST

START_TEST(json_rejects_bad_new_fields)
{
    clf_bench_report in, out;
    char why[256];
    json_t *doc;

    two_devices(&in);
    doc = to_json_text_and_back(&in);
    json_object_set_new(doc, "baseline", json_integer(2));
    ck_assert_int_eq(clf_bench_report_from_json(doc, &out, why, sizeof why),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "baseline"));
    json_object_set_new(doc, "baseline", json_integer(0));
    json_object_set_new(doc, "load",
                        json_pack("{s:[f,f], s:[f,f,f]}", "start", 1.0, 2.0,
                                  "end", 1.0, 2.0, 3.0));
    ck_assert_int_eq(clf_bench_report_from_json(doc, &out, why, sizeof why),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "load"));
    json_object_del(doc, "load");
    json_object_set_new(json_array_get(json_object_get(doc, "devices"), 0),
                        "peaks", json_string("fast"));
    ck_assert_int_eq(clf_bench_report_from_json(doc, &out, why, sizeof why),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "peaks"));
    json_decref(doc);
    clf_bench_report_free(&in);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("roofline");
    TCase *tc = tcase_create("roofline");

    tcase_add_test(tc, mad_by_hand);
    tcase_add_test(tc, noisy_means_spread_over_a_tenth_of_the_median);
    tcase_add_test(tc, median_settles_after_enough_steady_runs);
    tcase_add_test(tc, bytes_linformer_by_hand);
    tcase_add_test(tc, bytes_full_by_hand);
    tcase_add_test(tc, bytes_batch_and_heads_by_hand);
    tcase_add_test(tc, bytes_causal_by_hand);
    tcase_add_test(tc, bytes_fused_split);
    tcase_add_test(tc, bytes_reject_impossible_shapes);
    tcase_add_test(tc, roofline_bound_and_percent);
    tcase_add_test(tc, result_roofline_fills_every_field);
    tcase_add_test(tc, table_puts_two_devices_side_by_side);
    tcase_add_test(tc, table_ratios_follow_the_baseline);
    tcase_add_test(tc, matrix_table_shows_mad_roofline_and_noise);
    tcase_add_test(tc, baseline_selectors_follow_the_device_rules);
    tcase_add_test(tc, bench_main_baseline_from_a_saved_run);
    tcase_add_test(tc, bench_main_refuses_a_baseline_naming_no_device);
    tcase_add_test(tc, loadavg_reads_three_averages);
    tcase_add_test(tc, json_keeps_peaks_roofline_noise_load_baseline);
    tcase_add_test(tc, json_without_the_new_fields_still_reads);
    tcase_add_test(tc, json_rejects_bad_new_fields);
    tcase_add_test(tc, peaks_hold_every_measured_rate);
    suite_add_tcase(s, tc);
    return tu_run(s, 0);
}
