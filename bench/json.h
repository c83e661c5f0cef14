/*
 * The report as JSON (jansson): written by bench/json_write.c, read back
 * and checked by bench/json_read.c.
 *
 * The JSON document (schema "clinformer-bench/1"):
 *
 *   { "schema": "clinformer-bench/1", "clinformer_version", "started",
 *     "host", "command": strings,
 *     "settings": { "repeat": int, "budget_s": real, "seed": int,
 *                   "quick": bool },
 *     "wall_s": real,
 *     "devices": [ { "index", "platform", "device", "driver", "version",
 *                    "is_gpu", "compute_units", "global_mem", "max_alloc",
 *                    "build_s", "source_builds", "cache_loads",
 *                    "gemm_tuning", "kernel_choices" } ],
 *     "results": [ { "device_index", "platform", "device", "driver",
 *                    "config": { "mode", "n", "k", "k_requested",
 *                                "d_model", "heads", "batch",
 *                                "causal_block" },
 *                    "status", "note", "first_call_s",
 *                    "wall_s": STATS, "device_s": STATS,
 *                    "stages": { "<stage>": STATS, ... },
 *                    "flops", "stage_flops": { "<stage>": real, ... },
 *                    "gflops", "device_bytes", "io_bytes",
 *                    "rel_error" } ],
 *     "crossovers": [ { "device_index", "platform", "device", "driver",
 *                       "d_model", "heads", "batch", "k", "pair",
 *                       "points", "n", "n_estimate" } ],
 *     "accuracy": [ { "device_index", "platform", "device", "driver",
 *                     "n", "k", "d_model", "heads", "batch", "status",
 *                     "note", "linformer_s": STATS, "full_s": STATS,
 *                     "rel_error": { "lucidrains", "fairseq" },
 *                     "decisive": { "full_weight", "trials",
 *                                   "host_max_diff",
 *                                   "lucidrains": WEIGHT,
 *                                   "fairseq": WEIGHT } } ] }
 *
 *   STATS  = { "median", "min", "max", "mad": seconds, "runs": int }
 *   WEIGHT = { "mean", "mean_abs", "max_abs" }
 *
 * devices[].index is the device's flat OpenCL index (clf_devices_list);
 * device_index in a row is the row's device's position in "devices".
 * config.k is the k the layer used (0 for the full modes, which do not
 * compress; rounded for causal), k_requested the matrix's k, the key that
 * groups a Linformer row with its full-attention row.  Times are seconds,
 * memory bytes; rel_error is against full (causal: causal-full) attention.
 * A crossover's pair is "linformer/full" or "causal/causal-full", its n the
 * smallest measured n from which the first is faster (null: none), and
 * n_estimate where the medians cross, interpolated in log n (or null).
 *
 * gemm_tuning is clf_context_tuning() ("" for CLBlast's defaults),
 * kernel_choices clf_context_kernel_choices() after the device's runs;
 * files written before these two existed read as "".
 *
 * Against the device (files written before these read as NaN, "" and not
 * noisy; a file without "baseline" compares with the first device):
 *
 *   devices[]: "stable_name" (clf_device_info.stable_name), "peaks":
 *     { "fma_gflops", "copy_gbps", "h2d_gbps": real or null,
 *       "cached": bool } (clf_context_peaks; null: not measured)
 *   results[], crossovers[], accuracy[]: "stable_name" besides platform,
 *     device and driver
 *   results[]: "bytes", "intensity" (FLOP/byte), "roofline_pct",
 *     "stage_bytes", "stage_intensity", "stage_roofline_pct" (objects by
 *     stage), "rel_mad" (wall mad / median, written only), "noisy": bool
 *   "load": { "start", "end": [1, 5, 15-minute load averages] }
 *   "baseline": the position in "devices" of the comparison's baseline
 *   "by_device": { "<stable_name>": { "device_index", "results": [the
 *     positions of its rows in "results"] } }, written only ("#2", ...
 *     appended to a name that repeats; "device <index>" without one)
 *
 * Stage names are clf_stage_name()'s.  A quantity that was not measured is
 * null, never a made-up number.  Results are keyed by platform, device,
 * driver and config.
 */
#ifndef CLF_BENCH_JSON_H
#define CLF_BENCH_JSON_H

#include "results.h"

#include <jansson.h>
#include <stdio.h>

#define CLF_BENCH_SCHEMA "clinformer-bench/1"

/* The report as a new JSON document (the caller owns the reference), or
 * NULL when out of memory. */
json_t *clf_bench_report_to_json(const clf_bench_report *r);

/* Reads a document written by clf_bench_report_to_json into *out (which it
 * initialises), checking the schema as it goes: every field above present
 * with its type, enumerations known, indices in range.  Returns 0, or -1
 * with a sentence naming the offending field in why (why_len bytes). */
int clf_bench_report_from_json(const json_t *root, clf_bench_report *out,
                               char *why, size_t why_len);

/* The report's JSON to a stream, ending with a newline. */
int clf_bench_json_fwrite(FILE *f, const clf_bench_report *r);

/* Writes the report's JSON to path with clf_bench_write_file.  Returns 0,
 * or -1 with errno set. */
int clf_bench_json_write(const clf_bench_report *r, const char *path);

/* Loads and checks a JSON file; returns 0, or -1 with the reason in why. */
int clf_bench_json_read(const char *path, clf_bench_report *out, char *why,
                        size_t why_len);

/* A number, or null for a value that was not measured (NaN) or infinite
 * (JSON has neither). */
json_t *clf_bench_json_num(double v);

/* Writes root to f as every bench document is written (two-space indent,
 * ten significant digits, a newline at the end) and drops the reference
 * to it; a NULL root (out of memory) writes nothing.  Returns 0, or -1 on
 * a write error or with errno ENOMEM for a NULL root. */
int clf_bench_json_dump(FILE *f, json_t *root);

#endif
