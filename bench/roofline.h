/*
 * Holding a figure against its device: the bytes each stage of a forward
 * moves, arithmetic intensity and the roofline bound; how noisy a row's
 * timing is and when its median has settled; the baseline device of a
 * comparison; the host's load.  Arithmetic on the records of
 * bench/results.h only, no device needed, so that tests can check it.
 */
#ifndef CLF_BENCH_ROOFLINE_H
#define CLF_BENCH_ROOFLINE_H

#include "results.h"

#include <stdio.h>

/* A row is noisy when its spread (max - min) is over this share of its
 * median. */
#define CLF_BENCH_NOISY 0.10

/* Adaptive repeats: at least CLF_BENCH_MIN_RUNS warm runs (or --repeat
 * when smaller); then a row has settled when the median of all its runs
 * and the median without the last CLF_BENCH_SETTLE_LAG runs differ by at
 * most CLF_BENCH_SETTLE_TOL of the former. */
#define CLF_BENCH_MIN_RUNS 5
#define CLF_BENCH_SETTLE_LAG 2
#define CLF_BENCH_SETTLE_TOL 0.01

/* Bytes one forward of the shape moves to and from device memory, per stage
 * into stage_bytes (may be NULL), and the total; NaN for an impossible
 * shape.  Each operand a stage reads (activations, weights, E and F,
 * scores) is counted once and each result it writes once, 4 bytes a
 * float, as if every reuse hit a cache: the least traffic the stage can
 * have, so that intensity = FLOPs / bytes is the most favourable and the
 * roofline bound the highest.  The order of work is the library's
 * (docs/design.md, section 2): Linformer compresses first (E X, then the
 * projection on k rows, for K and for V); full attention projects K and V
 * on all n rows; causal Linformer projects K and V exactly and compresses
 * the complete blocks.  Scores are B h n L floats written by the scores
 * stage, read and written by softmax, read by the weighted sum (L = k, n,
 * or k + b for causal Linformer's window). */
double clf_bench_bytes_model(const clf_bench_shape *shape,
                             double stage_bytes[CLF_STAGE_COUNT]);

/* Where the forward ran the fused kernel: its bytes are the three stages'
 * inputs and output without the scores (which stay in the core), and the
 * three stages get 0. */
void clf_bench_fused_bytes(const clf_bench_shape *shape,
                           double stage_bytes[CLF_STAGE_COUNT]);

/* Sets x->bytes and x->stage_bytes from x's configuration (mode, batch, n,
 * d_model, heads, the k and causal block the layer used), the fused split
 * where its fused stage took time. */
void clf_bench_result_bytes(clf_bench_result *x);

/* Holds the device's peaks above every rate its rows measured: where a
 * row's whole forward or a stage ran more GFLOP/s than peak_gflops, or
 * moved more GB/s (the bytes model over its time) than peak_gbps, the
 * peak is raised to that rate, the kernels' figure kept in
 * fma_measured / copy_measured and the row named in peak_note; then
 * every row's roofline figures of the device are computed again, so no
 * roof% passes 100.  Returns 1 when a peak was raised, else 0. */
int clf_bench_peaks_hold(clf_bench_report *r, size_t dev);

/* The roofline bound in GFLOP/s: min(peak_gflops, intensity * peak_gbps),
 * intensity = flops / bytes; NaN when any input is NaN or not positive. */
double clf_bench_roofline_bound(double flops, double bytes, double peak_gflops,
                                double peak_gbps);

/* 100 * (flops / seconds) / bound: the percent of the bound reached; NaN
 * when any of them is unknown. */
double clf_bench_roofline_pct(double flops, double bytes, double seconds,
                              double peak_gflops, double peak_gbps);

/* Fills x's intensity and roofline fields (whole forward from the wall
 * median, stages from their device medians) from x's flops, bytes and
 * stage times and the device's peaks.  Also sets x->noisy. */
void clf_bench_result_roofline(clf_bench_result *x, const clf_bench_device *d);

/* mad / median; NaN when unknown or the median is not positive. */
double clf_bench_rel_mad(const clf_bench_stats *s);

/* 1 when (max - min) > CLF_BENCH_NOISY * median. */
int clf_bench_stats_noisy(const clf_bench_stats *s);

/* The adaptive repeat rule over count runs of one row (NaN values are not
 * counted): 1 when the row has settled (see CLF_BENCH_MIN_RUNS), else 0.
 * min_runs is the floor actually used (CLF_BENCH_MIN_RUNS, or --repeat
 * when smaller). */
int clf_bench_median_settled(const double *runs, size_t count, size_t min_runs);

/* The report's device that a selector names, by the rules --device uses
 * (clf_context_create): digits, the flat index; "cpu" or "gpu", the first
 * of that kind; a stable name ("pocl:1") or a platform's short name
 * ("pocl"); a piece of a platform name; a piece of a device name, all
 * case-insensitive.  Returns its position in r->devices, or -1. */
long clf_bench_find_device(const clf_bench_report *r, const char *selector);

/* The 1, 5 and 15-minute load averages from a /proc/loadavg-like file
 * (NaN each when it cannot be read).  Returns 0, or -1. */
int clf_bench_loadavg(const char *path, double out[3]);

#endif
