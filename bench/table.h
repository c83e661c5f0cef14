/*
 * The readable tables (bench/table.c), for people: each device's matrix
 * and stages, the accuracy study, the summary of a quick run, the devices
 * side by side and against their peaks.  Only the records of
 * bench/results.h are read.
 */
#ifndef CLF_BENCH_TABLE_H
#define CLF_BENCH_TABLE_H

#include "results.h"

#include <stdio.h>

/* The readable tables: matrix rows, per-stage medians, crossovers. */
void clf_bench_print_matrix(FILE *f, const clf_bench_report *r);
/* The accuracy-vs-k table with the decisive-token weights. */
void clf_bench_print_accuracy(FILE *f, const clf_bench_report *r);
/* The short summary that ends a quick run. */
void clf_bench_print_summary(FILE *f, const clf_bench_report *r);

/* Table cells: seconds s as milliseconds with one decimal, and v printed
 * with the printf format fmt; "-" when the value is NaN (not measured),
 * "%.3g" when fmt's text would not fit in len. */
void clf_bench_fmt_ms(char *buf, size_t len, double s);
void clf_bench_fmt_g(char *buf, size_t len, const char *fmt, double v);

/* The device header's line of peaks ("peaks: ..."), to f. */
void clf_bench_print_peaks(FILE *f, const clf_bench_device *d);

/* Every device's rows side by side: a row per configuration (mode, n, k,
 * D, h, B), for each device its median ms (with * when noisy), GFLOP/s
 * and % of the roofline, and for each device but the baseline
 * (r->baseline) its median over the baseline's.  Prints nothing with
 * fewer than two devices. */
void clf_bench_print_comparison(FILE *f, const clf_bench_report *r);

/* A device's per-stage arithmetic intensity (FLOP/byte) and % of the
 * roofline. */
void clf_bench_print_stage_roofline(FILE *f, const clf_bench_report *r,
                                    size_t dev);

#endif
