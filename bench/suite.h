/*
 * The clinformer bench suite: a configuration matrix (n, k, D, h, B, mode)
 * timed on one device, several or all; an accuracy study of Linformer
 * against full attention over k; JSON, CSV and SVG output.  Uses the public
 * API only.
 *
 * Measuring and reporting are apart: bench/run.c measures into the records
 * of bench/results.h, the writers of bench/output.h print and write them, and
 * clf_bench_main (bench/suite.c) calls one, then the other.
 */
#ifndef CLF_BENCH_SUITE_H
#define CLF_BENCH_SUITE_H

#include "results.h"

/* Runs the suite.  argv[0] is the program's name ("bench" when called as
 * `clinformer bench`).  Returns the process exit status: 0 when everything
 * asked for was measured or reported as too large or over budget, 1 when a
 * device, forward or output file failed, 2 for a usage error. */
int clf_bench_main(int argc, char **argv);

#endif
