/*
 * Measuring: the options of a run and the call that measures them into a
 * report.  Formats nothing; bench/output.h reports what it measured.
 */
#ifndef CLF_BENCH_RUN_H
#define CLF_BENCH_RUN_H

#include "results.h"

#include <stdio.h>

#define CLF_BENCH_MAX_LIST 32    /* entries of an option's list */
#define CLF_BENCH_MAX_REPEAT 101 /* warm runs of a row */

/* What to measure: the matrix (or, with accuracy, the accuracy study) over
 * the lists, on the devices of `device`. */
struct clf_bench_options {
    const char *prog;
    const char *device; /* NULL: the library's default; "all"; or a list */
    size_t n[CLF_BENCH_MAX_LIST], nn;
    size_t k[CLF_BENCH_MAX_LIST], nk;
    size_t d[CLF_BENCH_MAX_LIST], nd;
    size_t h[CLF_BENCH_MAX_LIST], nh;
    size_t b[CLF_BENCH_MAX_LIST], nb;
    /* the accuracy study's n and k */
    size_t acc_n[CLF_BENCH_MAX_LIST], acc_nn;
    size_t acc_k[CLF_BENCH_MAX_LIST], acc_nk;
    int modes[CLF_BENCH_MODE_COUNT];
    int modes_given;
    /* --precision: the weight storages each mode runs in (indexed by
     * clf_precision); float alone unless given */
    int precisions[2];
    /* --compression: how the Linformer and causal rows compress (full rows
     * have none); linear (E and F) unless given */
    clf_compression compression;
    int compression_given;
    size_t repeat, trials;
    double budget;
    unsigned long long seed;
    const char *json, *csv, *svg, *compare, *from;
    const char *html; /* --html FILE */
    int accuracy, quick;
    int peak;             /* 1: --peak (measure again), -1: --no-peak */
    const char *baseline; /* --baseline SEL, NULL: the first device */
    int shard;  /* --shard: one forward over the devices (bench/shard.c) */
    int stream; /* --stream: a causal layer streamed (bench/stream.c) */
    size_t stream_block, stream_chunk; /* its --block and --chunk */
};

/* bench/shard.c: --shard.  For each n, one Linformer and one full layer:
 * each device alone, then the forward split by positions over all of them
 * evenly and in proportion to their measured throughput, and the bytes
 * the split exchanges per layer.  The table goes to t; the devices go to
 * hdr (whose header the caller fills) and the rows to s (bench/shard.h;
 * the caller frees s->rows).  Returns 0, 1 when a device or forward
 * failed, 2 for a usage error (reported). */
struct clf_bench_shard_report;
int clf_bench_shard(const struct clf_bench_options *o, FILE *t,
                    clf_bench_report *hdr, struct clf_bench_shard_report *s);

/* Seconds on a monotonic clock. */
double clf_bench_now(void);

/* Checks that every buffer the run would allocate from o's sizes (inputs
 * and outputs B x n x D, weights D x D, the study's E, F and decisive
 * inputs) has a byte count that fits size_t.  Returns 0, or -1 with a
 * sentence naming the options at fault in why (len bytes). */
int clf_bench_check_sizes(const struct clf_bench_options *o, char *why,
                          size_t len);

/* Checks the stage times of one warm forward (st, as
 * clf_attention_stage_times gave them) and sets *sum to their total.  A
 * driver without working profiling timestamps (Mesa's rusticl reports
 * zeros) gives a total of zero: then st[] and *sum become NaN, which the
 * reports print as "-", and 0 is returned, so that only the host-clock
 * time of the whole forward stands.  Returns 1 when the times were
 * measured. */
int clf_bench_stage_sample(double st[CLF_STAGE_COUNT], double *sum);

/* Measures what o asks for on each of its devices into rep (whose header,
 * settings and command the caller fills), sharing o->budget seconds from
 * t0 (a clf_bench_now() reading) among the devices, and sets rep->wall_s.
 * Progress goes to stderr.  Returns the number of failures (a device, a
 * forward, host memory), or -1 when a size overflows (see
 * clf_bench_check_sizes) or no device could be named. */
int clf_bench_run(const struct clf_bench_options *o, clf_bench_report *rep,
                  double t0);

#endif
