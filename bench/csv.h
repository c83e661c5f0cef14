/*
 * The report as CSV (bench/csv.c), for machines: one file of matrix rows,
 * one of accuracy rows.
 */
#ifndef CLF_BENCH_CSV_H
#define CLF_BENCH_CSV_H

#include "results.h"

#include <stdio.h>

/* The CSV header line (no newline) of the matrix rows, and of the accuracy
 * rows. */
const char *clf_bench_csv_header(void);
const char *clf_bench_csv_accuracy_header(void);

/* Writes the header and one line per matrix result (or per accuracy row).
 * Unmeasured values are empty fields; text fields are quoted as RFC 4180
 * asks.  Returns 0, or -1 on a write error. */
int clf_bench_csv_write(FILE *f, const clf_bench_report *r);
int clf_bench_csv_accuracy_write(FILE *f, const clf_bench_report *r);

#endif
