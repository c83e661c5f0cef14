/*
 * Output of the bench suite, every writer reading only the records of
 * bench/results.h, nothing measuring:
 *
 *   json.h      the report as JSON (json_write.c) and read back (json_read.c)
 *   csv.h       the matrix and the accuracy rows as CSV (csv.c)
 *   table.h     the readable tables (table.c)
 *   html.h      the self-contained HTML report (html.c)
 *   this file   whole-file writing (outfile.c), the SVG figures (plot.c,
 *               see plot.h) and the comparison with an earlier run's JSON
 *               (compare.c)
 *
 * It includes json.h, csv.h and table.h, so that a caller of several
 * writers includes it alone.
 */
#ifndef CLF_BENCH_OUTPUT_H
#define CLF_BENCH_OUTPUT_H

#include "csv.h"
#include "json.h"
#include "results.h"
#include "table.h"

#include <stdio.h>

/* A writer of the report to an open stream; returns 0, or -1 on a write
 * error. */
typedef int (*clf_bench_writer)(FILE *f, const clf_bench_report *r);

/* Writes path with a writer, atomically: the writer fills a new temporary
 * file in path's directory (opened O_CREAT | O_EXCL | O_NOFOLLOW, mode
 * 0600), which is fsynced and renamed over path.  An existing path that is
 * not a regular file (directory, symbolic link, device, FIFO) is refused
 * and left alone (errno EEXIST).  Returns 0, or -1 with errno set and no
 * temporary file left behind. */
int clf_bench_write_file(const char *path, clf_bench_writer write,
                         const clf_bench_report *r);

/* As clf_bench_write_file, for a writer of anything (ctx is passed on). */
typedef int (*clf_bench_ctx_writer)(FILE *f, const void *ctx);
int clf_bench_write_file_ctx(const char *path, clf_bench_ctx_writer write,
                             const void *ctx);

/* Writes an SVG document (bench/plot.c, see plot.h): the time figure
 * (per mode and (D, h, B, k), every device's median time against n with
 * the spread as whiskers, one shared log-log scale, the crossover n
 * marked) above the roofline figure (a panel per device).  Returns 0, or
 * -1 on a write error or when there is nothing to plot. */
int clf_bench_svg_write(FILE *f, const clf_bench_report *r);

/* Pairs the devices of r with those of base, a run perhaps from another
 * machine: first by equal stable names, then by equal platform, name and
 * driver, then the rest by position.  pair[i] (r->ndevices entries)
 * receives base's device for r's device i, or -1.  Returns 0, or -1 when
 * out of memory. */
int clf_bench_compare_devices(const clf_bench_report *r,
                              const clf_bench_report *base, long *pair);

/* The row of base that result i of r is compared with: the same
 * configuration (mode, n, k_requested, D, h, B) on the paired device.
 * *other_device is set when the paired devices differ in platform, name or
 * driver.  Returns the index, or -1 when there is none. */
long clf_bench_compare_match(const clf_bench_report *r, size_t i,
                             const clf_bench_report *base, int *other_device);

/* Prints, for each pair of devices, each row with a match in base: both
 * devices' names, both medians and their ratio (now / baseline: above 1
 * is slower now); then the rows found only in r and only in base.
 * Returns how many rows matched. */
size_t clf_bench_print_compare(FILE *f, const clf_bench_report *r,
                               const clf_bench_report *base);

#endif
