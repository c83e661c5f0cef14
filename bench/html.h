/*
 * The bench's HTML report (--html): one self-contained file, inline CSS and
 * SVG, no script and nothing fetched from anywhere, that is also
 * well-formed XML.  It holds the run's metadata (host, command, library
 * version, settings, the host's load), the devices with their drivers and
 * peaks, the comparison table (a row per configuration, a column group per
 * device: median ms with spread, GFLOP/s, % of roofline; and each device's
 * ratio to the baseline device), the figures of bench/plot.h, the stages'
 * medians with their percent of the roofline, the crossovers, the
 * accuracy-vs-k study, and the notes of rows not measured.
 * Only reads the records of bench/results.h, so that a saved run (--from)
 * gives the same report.
 */
#ifndef CLF_BENCH_HTML_H
#define CLF_BENCH_HTML_H

#include "results.h"

#include <stdio.h>

/* Writes the report; returns 0, or -1 on a write error. */
int clf_bench_html_write(FILE *f, const clf_bench_report *r);

/* The same with a section comparing r with base, an earlier run perhaps
 * from another machine (--compare), paired as clf_bench_compare_devices
 * pairs them: each row of the same configuration on paired devices with
 * both devices' names, both medians and now/baseline, and the rows found
 * in only one of the runs.  base may be NULL or empty (no section). */
int clf_bench_html_write_compared(FILE *f, const clf_bench_report *r,
                                  const clf_bench_report *base);

#endif
