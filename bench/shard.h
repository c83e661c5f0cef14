/*
 * clinformer bench --shard: the records of a run (each device alone, then
 * the forward split by positions over all of them, evenly and weighted)
 * and their files, following the matrix's conventions (bench/output.h):
 * a schema name with a version, the run's header, the devices, and every
 * row keyed by platform, device and driver.
 *
 * The JSON document (schema "clinformer-bench-shard/1"):
 *
 *   { "schema": "clinformer-bench-shard/1", "clinformer_version",
 *     "started", "host", "command": strings,
 *     "settings": { "repeat": int, "seed": int },
 *     "wall_s": real, "split_by": "positions",
 *     "devices": [ { "index", "platform", "device", "driver", "version",
 *                    "is_gpu", "stable_name" } ],
 *     "results": [ { "config": { "mode", "n", "k", "k_requested",
 *                                "d_model", "heads", "batch" },
 *                    "status": "ok" or "failed", "note",
 *                    "alone": [ { "device_index", "platform", "device",
 *                                 "driver", "stable_name",
 *                                 "wall_s" } ],
 *                    "even": SPLIT, "weighted": SPLIT,
 *                    "received_bytes", "sent_bytes": real,
 *                    "speedup": real } ] }
 *
 *   SPLIT = { "wall_s": real, "devices": int (those the forward used),
 *             "shares": [ the weight of each device, summing to 1 ] }
 *
 * mode is "linformer" or "full"; config.k is the k the layer used (0 for
 * full attention, which does not compress), k_requested the run's --k.
 * wall_s values are host-clock medians of whole forwards in seconds;
 * device_index is a position in "devices".  received_bytes and sent_bytes
 * are what the shards exchange per layer, all together; speedup is the
 * fastest device alone over the weighted split.  A value not measured is
 * null.
 */
#ifndef CLF_BENCH_SHARD_H
#define CLF_BENCH_SHARD_H

#include "results.h"

#include <stdio.h>

#define CLF_BENCH_SHARD_SCHEMA "clinformer-bench-shard/1"
#define CLF_BENCH_SHARD_MAX_DEVICES 16

/* One split of the forward over the devices. */
typedef struct clf_bench_shard_split {
    double wall_s; /* median; NaN: not measured */
    size_t devices;
    double shares[CLF_BENCH_SHARD_MAX_DEVICES];
} clf_bench_shard_split;

/* One mode at one n. */
typedef struct clf_bench_shard_row {
    int full; /* 0: Linformer, 1: full attention */
    size_t n, k, k_requested, d_model, heads, batch;
    int ok;
    char note[256];                              /* why a row failed */
    double alone_s[CLF_BENCH_SHARD_MAX_DEVICES]; /* NaN: not measured */
    clf_bench_shard_split even, weighted;
    double received_bytes, sent_bytes;
} clf_bench_shard_row;

/* The run: its header and devices in hdr (results and accuracy unused),
 * and its rows. */
typedef struct clf_bench_shard_report {
    const clf_bench_report *hdr;
    clf_bench_shard_row *rows;
    size_t nrows;
} clf_bench_shard_report;

/* Writers of a clf_bench_shard_report (ctx) to an open stream, for
 * clf_bench_write_file_ctx: JSON as above, CSV (a header line, then per
 * row each device alone and each device's share of the even and the
 * weighted split), and a self-contained HTML page.  Return 0, or -1 on a
 * write error or when out of memory. */
int clf_bench_shard_json_fwrite(FILE *f, const void *ctx);
int clf_bench_shard_csv_fwrite(FILE *f, const void *ctx);
int clf_bench_shard_html_fwrite(FILE *f, const void *ctx);

/* The CSV header line, without a newline. */
const char *clf_bench_shard_csv_header(void);

#endif
