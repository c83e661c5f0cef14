/*
 * Output of the bench suite: the readable tables, JSON (jansson) and CSV
 * for machines, SVG plots written directly, the comparison with an earlier
 * run's JSON, and whole-file writing (bench/outfile.c).  Everything here
 * only reads the records of bench/results.h; nothing measures.
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
#ifndef CLF_BENCH_OUTPUT_H
#define CLF_BENCH_OUTPUT_H

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

/* The report's JSON to a stream, ending with a newline. */
int clf_bench_json_fwrite(FILE *f, const clf_bench_report *r);

/* Writes the report's JSON to path with clf_bench_write_file.  Returns 0,
 * or -1 with errno set. */
int clf_bench_json_write(const clf_bench_report *r, const char *path);

/* Loads and checks a JSON file; returns 0, or -1 with the reason in why. */
int clf_bench_json_read(const char *path, clf_bench_report *out, char *why,
                        size_t why_len);

/* The CSV header line (no newline) of the matrix rows, and of the accuracy
 * rows. */
const char *clf_bench_csv_header(void);
const char *clf_bench_csv_accuracy_header(void);

/* Writes the header and one line per matrix result (or per accuracy row).
 * Unmeasured values are empty fields; text fields are quoted as RFC 4180
 * asks.  Returns 0, or -1 on a write error. */
int clf_bench_csv_write(FILE *f, const clf_bench_report *r);
int clf_bench_csv_accuracy_write(FILE *f, const clf_bench_report *r);

/* Writes an SVG document (bench/plot.c, see plot.h): the time figure
 * (per mode and (D, h, B, k), every device's median time against n with
 * the spread as whiskers, one shared log-log scale, the crossover n
 * marked) above the roofline figure (a panel per device).  Returns 0, or
 * -1 on a write error or when there is nothing to plot. */
int clf_bench_svg_write(FILE *f, const clf_bench_report *r);

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
