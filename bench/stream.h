/*
 * clinformer bench --stream: a prefix-safe causal Linformer layer fed one
 * position at a time (clf_stream_*) up to the largest n of --n, against
 * running the whole causal forward again on the prefix at each n; the
 * records and their files, following the matrix's conventions
 * (bench/output.h).
 *
 * The JSON document (schema "clinformer-bench-stream/1"):
 *
 *   { "schema": "clinformer-bench-stream/1", "clinformer_version",
 *     "started", "host", "command": strings,
 *     "settings": { "repeat": int, "seed": int, "chunk": int },
 *     "wall_s": real,
 *     "device": { "platform", "device", "driver", "version", "is_gpu",
 *                 "stable_name" },
 *     "results": [ { "config": { "n", "k", "k_requested", "block",
 *                                "max_seq_len", "d_model", "heads",
 *                                "batch" },
 *                    "status": "ok", "failed" or "over_budget", "note",
 *                    "append_ms": { "median", "max" },
 *                    "per_position_ms": real,
 *                    "prefix_ms": real,
 *                    "state_bytes": int } ] }
 *
 * append_ms are host-clock figures over the `block` appends before the
 * stream reached n (positions n - block .. n - 1, a whole block, since
 * an append recomputes the open block's earlier positions);
 * per_position_ms is append_ms.median / chunk; prefix_ms is the median of
 * `repeat` whole causal forwards over the n positions (what an update
 * costs without a stream); state_bytes is clf_stream_info.state_bytes at
 * n.  A value not measured is null.
 */
#ifndef CLF_BENCH_STREAM_H
#define CLF_BENCH_STREAM_H

#include "results.h"

#include <stdio.h>

#define CLF_BENCH_STREAM_SCHEMA "clinformer-bench-stream/1"

typedef struct clf_bench_stream_row {
    size_t n, k, k_requested, block, max_seq_len, d_model, heads, batch;
    clf_bench_status status;
    char note[256];
    double append_median_ms, append_max_ms; /* NaN: not measured */
    double prefix_ms;
    size_t state_bytes;
} clf_bench_stream_row;

typedef struct clf_bench_stream_report {
    const clf_bench_report *hdr; /* its first device is the one measured */
    size_t chunk;
    clf_bench_stream_row *rows;
    size_t nrows;
} clf_bench_stream_report;

struct clf_bench_options;

/* Measures (the table to t, the device to hdr, whose header the caller
 * fills; the caller frees s->rows).  Returns 0, 1 when something failed
 * (the row says what), 2 for a usage error (reported). */
int clf_bench_stream(const struct clf_bench_options *o, FILE *t,
                     clf_bench_report *hdr, clf_bench_stream_report *s);

/* Writers for clf_bench_write_file_ctx (ctx: the report): JSON as above,
 * CSV (a header line, a line per row), a self-contained HTML page (the
 * table and a log-log figure of both times against n).  0, or -1. */
int clf_bench_stream_json_fwrite(FILE *f, const void *ctx);
int clf_bench_stream_csv_fwrite(FILE *f, const void *ctx);
int clf_bench_stream_html_fwrite(FILE *f, const void *ctx);

#endif
