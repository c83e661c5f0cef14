/*
 * The bench's HTML report (--html): one self-contained file, inline CSS and
 * SVG, no script and nothing fetched from anywhere, that is also
 * well-formed XML.  It holds the run's metadata (host, command, library
 * version, settings, the host's load), the devices with their drivers and
 * peaks, the comparison table (a row per configuration, a column group per
 * device: median ms with spread, GFLOP/s, % of roofline; and each device's
 * ratio to the baseline device), the figures of bench/plot.h, the
 * crossovers, the accuracy-vs-k study, and the notes of rows not measured.
 * Only reads the records of bench/results.h, so that a saved run (--from)
 * gives the same report.
 */
#ifndef CLF_BENCH_HTML_H
#define CLF_BENCH_HTML_H

#include "results.h"

#include <stdio.h>

/* Writes the report; returns 0, or -1 on a write error. */
int clf_bench_html_write(FILE *f, const clf_bench_report *r);

#endif
