/* A report read back from its JSON (bench/json.h), every field checked
 * against the schema as it is read, so that a saved run (--from, --compare)
 * is held to what the bench writes. */
#define _POSIX_C_SOURCE 200809L

#include "json.h"
#include "roofline.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Reading state: the first problem found, with the field's path. */
struct jr {
    char *why;
    size_t len;
    int bad;
};

static void
jr_fail(struct jr *j, const char *path, const char *key, const char *what)
{
    if (j->bad)
        return;
    j->bad = 1;
    snprintf(j->why, j->len, "%s%s%s: %s", path, *path ? "." : "", key, what);
}

static json_t *
jr_get(struct jr *j, const json_t *o, const char *path, const char *key)
{
    json_t *v = json_object_get(o, key);

    if (v == NULL)
        jr_fail(j, path, key, "missing");
    return v;
}

static void
jr_string(struct jr *j, const json_t *o, const char *path, const char *key,
          char *out, size_t len)
{
    json_t *v = jr_get(j, o, path, key);

    out[0] = '\0';
    if (v == NULL)
        return;
    if (!json_is_string(v)) {
        jr_fail(j, path, key, "not a string");
        return;
    }
    snprintf(out, len, "%s", json_string_value(v));
}

static size_t
jr_size(struct jr *j, const json_t *o, const char *path, const char *key)
{
    json_t *v = jr_get(j, o, path, key);

    if (v == NULL)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        jr_fail(j, path, key, "not a non-negative integer");
        return 0;
    }
    return (size_t)json_integer_value(v);
}

/* A number, or null for "not measured" (NaN). */
static double
jr_num(struct jr *j, const json_t *o, const char *path, const char *key)
{
    json_t *v = jr_get(j, o, path, key);

    if (v == NULL || json_is_null(v))
        return NAN;
    if (!json_is_number(v)) {
        jr_fail(j, path, key, "not a number or null");
        return NAN;
    }
    return json_number_value(v);
}

static int
jr_bool(struct jr *j, const json_t *o, const char *path, const char *key)
{
    json_t *v = jr_get(j, o, path, key);

    if (v == NULL)
        return 0;
    if (!json_is_boolean(v)) {
        jr_fail(j, path, key, "not a boolean");
        return 0;
    }
    return json_is_true(v);
}

static json_t *
jr_object(struct jr *j, const json_t *o, const char *path, const char *key)
{
    json_t *v = jr_get(j, o, path, key);

    if (v != NULL && !json_is_object(v)) {
        jr_fail(j, path, key, "not an object");
        return NULL;
    }
    return v;
}

static json_t *
jr_array(struct jr *j, const json_t *o, const char *path, const char *key)
{
    json_t *v = jr_get(j, o, path, key);

    if (v != NULL && !json_is_array(v)) {
        jr_fail(j, path, key, "not an array");
        return NULL;
    }
    return v;
}

/* A number that files from before it existed lack: NaN when absent. */
static double
jr_opt_num(struct jr *j, const json_t *o, const char *path, const char *key)
{
    return json_object_get(o, key) != NULL ? jr_num(j, o, path, key) : NAN;
}

/* An optional per-stage object of numbers (NaN each when absent). */
static void
jr_opt_stages(struct jr *j, const json_t *o, const char *path, const char *key,
              double out[CLF_STAGE_COUNT])
{
    json_t *v =
        json_object_get(o, key) != NULL ? jr_object(j, o, path, key) : NULL;
    char p[160];
    int i;

    snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", key);
    for (i = 0; i < CLF_STAGE_COUNT; i++)
        out[i] =
            v != NULL ? jr_num(j, v, p, clf_stage_name((clf_stage)i)) : NAN;
}

static clf_bench_stats
jr_stats(struct jr *j, const json_t *o, const char *path, const char *key)
{
    clf_bench_stats s = {NAN, NAN, NAN, NAN, 0};
    json_t *v = jr_object(j, o, path, key);
    char p[160];

    if (v == NULL)
        return s;
    snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", key);
    s.median = jr_num(j, v, p, "median");
    s.min = jr_num(j, v, p, "min");
    s.max = jr_num(j, v, p, "max");
    s.mad = jr_opt_num(j, v, p, "mad");
    s.runs = jr_size(j, v, p, "runs");
    return s;
}

static clf_bench_weight
jr_weight(struct jr *j, const json_t *o, const char *path, const char *key)
{
    clf_bench_weight w = {NAN, NAN, NAN};
    json_t *v = jr_object(j, o, path, key);
    char p[160];

    if (v == NULL)
        return w;
    snprintf(p, sizeof p, "%s.%s", path, key);
    w.mean = jr_num(j, v, p, "mean");
    w.mean_abs = jr_num(j, v, p, "mean_abs");
    w.max_abs = jr_num(j, v, p, "max_abs");
    return w;
}

/* The row's device_index, checked against the devices read and against
 * the identity strings the row repeats. */
static size_t
jr_device(struct jr *j, const json_t *o, const char *path,
          const clf_bench_report *r)
{
    size_t dev = jr_size(j, o, path, "device_index");
    char s[128];

    if (j->bad)
        return 0;
    if (dev >= r->ndevices) {
        jr_fail(j, path, "device_index", "out of range");
        return 0;
    }
    jr_string(j, o, path, "platform", s, sizeof s);
    if (!j->bad && strcmp(s, r->devices[dev].platform) != 0)
        jr_fail(j, path, "platform", "differs from its device entry");
    jr_string(j, o, path, "device", s, sizeof s);
    if (!j->bad && strcmp(s, r->devices[dev].name) != 0)
        jr_fail(j, path, "device", "differs from its device entry");
    jr_string(j, o, path, "driver", s, sizeof s);
    if (!j->bad && strcmp(s, r->devices[dev].driver) != 0)
        jr_fail(j, path, "driver", "differs from its device entry");
    if (json_object_get(o, "stable_name") != NULL) {
        jr_string(j, o, path, "stable_name", s, sizeof s);
        if (!j->bad && strcmp(s, r->devices[dev].stable_name) != 0)
            jr_fail(j, path, "stable_name", "differs from its device entry");
    }
    return dev;
}

static void
jr_status(struct jr *j, const json_t *o, const char *path,
          clf_bench_status *out)
{
    char s[32];

    jr_string(j, o, path, "status", s, sizeof s);
    if (!j->bad && clf_bench_status_parse(s, out) != 0)
        jr_fail(j, path, "status", "unknown status");
}

/* The roofline and noise fields; files from before them read as NaN and
 * not noisy. */
static void
read_roofline(struct jr *j, const json_t *o, const char *path,
              clf_bench_result *x)
{
    x->bytes = jr_opt_num(j, o, path, "bytes");
    x->intensity = jr_opt_num(j, o, path, "intensity");
    x->roofline_pct = jr_opt_num(j, o, path, "roofline_pct");
    jr_opt_stages(j, o, path, "stage_bytes", x->stage_bytes);
    jr_opt_stages(j, o, path, "stage_intensity", x->stage_intensity);
    jr_opt_stages(j, o, path, "stage_roofline_pct", x->stage_roofline_pct);
    x->noisy = json_object_get(o, "noisy") != NULL
                   ? jr_bool(j, o, path, "noisy")
                   : clf_bench_stats_noisy(&x->wall);
}

/* config.<key>, a name read into name; 0 when absent (runs from before
 * the option that added it), else 1. */
static int
read_opt_name(struct jr *j, const json_t *config, const char *path,
              const char *key, char *name, size_t cap)
{
    if (json_object_get(config, key) == NULL)
        return 0;
    jr_string(j, config, path, key, name, cap);
    return !j->bad;
}

/* config.precision, "float" when absent (runs from before --precision). */
static void
read_precision(struct jr *j, const json_t *config, const char *path,
               clf_precision *out)
{
    char name[16];

    *out = CLF_PRECISION_FLOAT;
    if (read_opt_name(j, config, path, "precision", name, sizeof name) &&
        clf_precision_parse(name, out) != 0)
        jr_fail(j, path, "precision", "unknown precision");
}

/* config.compression, "linear" when absent. */
static void
read_compression(struct jr *j, const json_t *config, const char *path,
                 clf_compression *out)
{
    char name[16];

    *out = CLF_COMPRESS_LINEAR;
    if (read_opt_name(j, config, path, "compression", name, sizeof name) &&
        clf_compression_parse(name, out) != 0)
        jr_fail(j, path, "compression", "unknown compression");
}

static void
read_result(struct jr *j, const json_t *o, const char *path,
            clf_bench_report *r)
{
    clf_bench_result *x;
    json_t *config, *stages, *sf;
    char p[96], mode[32];
    int i;

    if (!json_is_object(o)) {
        jr_fail(j, path, "", "not an object");
        return;
    }
    x = clf_bench_report_add_result(r);
    if (x == NULL) {
        jr_fail(j, path, "", "out of memory");
        return;
    }
    x->device = jr_device(j, o, path, r);
    config = jr_object(j, o, path, "config");
    if (config != NULL) {
        snprintf(p, sizeof p, "%s.config", path);
        jr_string(j, config, p, "mode", mode, sizeof mode);
        if (!j->bad && clf_bench_mode_parse(mode, &x->mode) != 0)
            jr_fail(j, p, "mode", "unknown mode");
        x->n = jr_size(j, config, p, "n");
        x->k = jr_size(j, config, p, "k");
        x->k_requested = jr_size(j, config, p, "k_requested");
        x->d_model = jr_size(j, config, p, "d_model");
        x->heads = jr_size(j, config, p, "heads");
        x->batch = jr_size(j, config, p, "batch");
        x->causal_block = jr_size(j, config, p, "causal_block");
        read_precision(j, config, p, &x->precision);
        read_compression(j, config, p, &x->compression);
    }
    jr_status(j, o, path, &x->status);
    jr_string(j, o, path, "note", x->note, sizeof x->note);
    x->first_call_s = jr_num(j, o, path, "first_call_s");
    x->wall = jr_stats(j, o, path, "wall_s");
    x->device_s = jr_stats(j, o, path, "device_s");
    stages = jr_object(j, o, path, "stages");
    sf = jr_object(j, o, path, "stage_flops");
    snprintf(p, sizeof p, "%s.stages", path);
    for (i = 0; stages != NULL && i < CLF_STAGE_COUNT; i++)
        x->stage[i] = jr_stats(j, stages, p, clf_stage_name((clf_stage)i));
    snprintf(p, sizeof p, "%s.stage_flops", path);
    for (i = 0; sf != NULL && i < CLF_STAGE_COUNT; i++)
        x->stage_flops[i] = jr_num(j, sf, p, clf_stage_name((clf_stage)i));
    x->flops = jr_num(j, o, path, "flops");
    x->gflops = jr_num(j, o, path, "gflops");
    x->device_bytes = jr_num(j, o, path, "device_bytes");
    x->io_bytes = jr_num(j, o, path, "io_bytes");
    x->rel_error = jr_num(j, o, path, "rel_error");
    read_roofline(j, o, path, x);
    /* Runs from before --precision have neither key. */
    x->fp32_error = json_object_get(o, "fp32_error") != NULL
                        ? jr_num(j, o, path, "fp32_error")
                        : NAN;
}

static void
read_accuracy(struct jr *j, const json_t *o, const char *path,
              clf_bench_report *r)
{
    clf_bench_accuracy *a;
    json_t *err, *dec;
    char p[96];

    if (!json_is_object(o)) {
        jr_fail(j, path, "", "not an object");
        return;
    }
    a = clf_bench_report_add_accuracy(r);
    if (a == NULL) {
        jr_fail(j, path, "", "out of memory");
        return;
    }
    a->device = jr_device(j, o, path, r);
    a->n = jr_size(j, o, path, "n");
    a->k = jr_size(j, o, path, "k");
    a->d_model = jr_size(j, o, path, "d_model");
    a->heads = jr_size(j, o, path, "heads");
    a->batch = jr_size(j, o, path, "batch");
    jr_status(j, o, path, &a->status);
    jr_string(j, o, path, "note", a->note, sizeof a->note);
    a->linformer = jr_stats(j, o, path, "linformer_s");
    a->full = jr_stats(j, o, path, "full_s");
    err = jr_object(j, o, path, "rel_error");
    if (err != NULL) {
        snprintf(p, sizeof p, "%s.rel_error", path);
        a->rel_error[CLF_BENCH_INIT_LUCIDRAINS] =
            jr_num(j, err, p, "lucidrains");
        a->rel_error[CLF_BENCH_INIT_FAIRSEQ] = jr_num(j, err, p, "fairseq");
    }
    dec = jr_object(j, o, path, "decisive");
    if (dec != NULL) {
        snprintf(p, sizeof p, "%s.decisive", path);
        a->full_weight = jr_num(j, dec, p, "full_weight");
        a->trials = jr_size(j, dec, p, "trials");
        a->host_max_diff = jr_num(j, dec, p, "host_max_diff");
        a->weight[CLF_BENCH_INIT_LUCIDRAINS] =
            jr_weight(j, dec, p, "lucidrains");
        a->weight[CLF_BENCH_INIT_FAIRSEQ] = jr_weight(j, dec, p, "fairseq");
    }
}

/* The stable name and peaks; files from before them read as "" and NaN. */
static void
read_peaks(struct jr *j, const json_t *v, const char *p, clf_bench_device *d)
{
    json_t *pk;
    char q[96];

    if (json_object_get(v, "stable_name") != NULL)
        jr_string(j, v, p, "stable_name", d->stable_name,
                  sizeof d->stable_name);
    if (json_object_get(v, "peaks") == NULL ||
        (pk = jr_object(j, v, p, "peaks")) == NULL)
        return;
    snprintf(q, sizeof q, "%s.peaks", p);
    d->peak_gflops = jr_num(j, pk, q, "fma_gflops");
    d->peak_gbps = jr_num(j, pk, q, "copy_gbps");
    d->h2d_gbps = jr_num(j, pk, q, "h2d_gbps");
    d->peak_cached = jr_bool(j, pk, q, "cached");
    /* Runs from before the kernel grid have none of these. */
    if (json_object_get(pk, "fma_width") != NULL) {
        d->fma_width = (int)jr_size(j, pk, q, "fma_width");
        d->fma_chains = (int)jr_size(j, pk, q, "fma_chains");
    }
    if (json_object_get(pk, "copy_with") != NULL) {
        char how[32];
        jr_string(j, pk, q, "copy_with", how, sizeof how);
        d->copy_api = strcmp(how, "clEnqueueCopyBuffer") == 0;
    }
    d->fma_measured = jr_opt_num(j, pk, q, "fma_measured_gflops");
    d->copy_measured = jr_opt_num(j, pk, q, "copy_measured_gbps");
    if (json_object_get(pk, "note") != NULL)
        jr_string(j, pk, q, "note", d->peak_note, sizeof d->peak_note);
}

static void
read_device(struct jr *j, const json_t *v, const char *p, clf_bench_report *r)
{
    clf_bench_device *d;

    if (!json_is_object(v)) {
        jr_fail(j, p, "", "not an object");
        return;
    }
    if ((d = clf_bench_report_add_device(r)) == NULL) {
        jr_fail(j, p, "", "out of memory");
        return;
    }
    d->index = (unsigned)jr_size(j, v, p, "index");
    jr_string(j, v, p, "platform", d->platform, sizeof d->platform);
    jr_string(j, v, p, "device", d->name, sizeof d->name);
    jr_string(j, v, p, "driver", d->driver, sizeof d->driver);
    jr_string(j, v, p, "version", d->version, sizeof d->version);
    d->is_gpu = jr_bool(j, v, p, "is_gpu");
    d->compute_units = (unsigned)jr_size(j, v, p, "compute_units");
    d->global_mem = jr_size(j, v, p, "global_mem");
    d->max_alloc = jr_size(j, v, p, "max_alloc");
    d->build_s = jr_num(j, v, p, "build_s");
    d->source_builds = (unsigned)jr_size(j, v, p, "source_builds");
    d->cache_loads = (unsigned)jr_size(j, v, p, "cache_loads");
    /* Not in files from before these fields. */
    if (json_object_get(v, "gemm_tuning") != NULL)
        jr_string(j, v, p, "gemm_tuning", d->tuning, sizeof d->tuning);
    if (json_object_get(v, "kernel_choices") != NULL)
        jr_string(j, v, p, "kernel_choices", d->choices, sizeof d->choices);
    read_peaks(j, v, p, d);
}

/* Crossovers are derived from the results; only their shape is checked. */
static void
read_crossover(struct jr *j, const json_t *v, const char *p,
               clf_bench_report *r)
{
    if (!json_is_object(v)) {
        jr_fail(j, p, "", "not an object");
        return;
    }
    (void)jr_device(j, v, p, r);
    (void)jr_size(j, v, p, "points");
    (void)jr_num(j, v, p, "n");
    (void)jr_num(j, v, p, "n_estimate");
}

/* Reads each entry of the array `key` with `read`, stopping at the first
 * fault. */
static void
read_array(struct jr *j, const json_t *root, const char *key,
           void (*read)(struct jr *, const json_t *, const char *,
                        clf_bench_report *),
           clf_bench_report *r)
{
    json_t *arr = jr_array(j, root, "", key), *v;
    size_t i;

    json_array_foreach(arr, i, v)
    {
        char p[48];
        if (j->bad)
            break;
        snprintf(p, sizeof p, "%s[%zu]", key, i);
        read(j, v, p, r);
    }
}

/* The schema, the run's header and its settings. */
static void
read_header(struct jr *j, const json_t *root, clf_bench_report *out)
{
    json_t *settings;
    char schema[64];

    jr_string(j, root, "", "schema", schema, sizeof schema);
    if (!j->bad && strcmp(schema, CLF_BENCH_SCHEMA) != 0)
        jr_fail(j, "", "schema", "not " CLF_BENCH_SCHEMA);
    jr_string(j, root, "", "clinformer_version", out->version,
              sizeof out->version);
    jr_string(j, root, "", "started", out->started, sizeof out->started);
    jr_string(j, root, "", "host", out->host, sizeof out->host);
    jr_string(j, root, "", "command", out->command, sizeof out->command);
    settings = jr_object(j, root, "", "settings");
    if (settings != NULL) {
        out->repeat = jr_size(j, settings, "settings", "repeat");
        out->budget_s = jr_num(j, settings, "settings", "budget_s");
        out->seed = jr_size(j, settings, "settings", "seed");
        out->quick = jr_bool(j, settings, "settings", "quick");
    }
    out->wall_s = jr_num(j, root, "", "wall_s");
}

/* The load array `key` of "load": three numbers or nulls. */
static void
read_load(struct jr *j, const json_t *load, const char *key, double out[3])
{
    json_t *a = jr_array(j, load, "load", key);
    size_t i;

    if (a == NULL)
        return;
    if (json_array_size(a) != 3) {
        jr_fail(j, "load", key, "not 3 load averages");
        return;
    }
    for (i = 0; i < 3; i++) {
        json_t *v = json_array_get(a, i);
        if (json_is_number(v))
            out[i] = json_number_value(v);
        else if (!json_is_null(v))
            jr_fail(j, "load", key, "not a number or null");
    }
}

/* The load and the baseline; by_device is derived from the rows and not
 * read.  Files from before them: load unknown, the first device. */
static void
read_comparison(struct jr *j, const json_t *root, clf_bench_report *out)
{
    json_t *load;

    if (j->bad)
        return;
    if (json_object_get(root, "load") != NULL &&
        (load = jr_object(j, root, "", "load")) != NULL) {
        read_load(j, load, "start", out->load_start);
        read_load(j, load, "end", out->load_end);
    }
    if (json_object_get(root, "baseline") != NULL) {
        out->baseline = jr_size(j, root, "", "baseline");
        if (!j->bad && out->baseline >= out->ndevices &&
            !(out->baseline == 0 && out->ndevices == 0))
            jr_fail(j, "", "baseline", "out of range");
    }
}

int
clf_bench_report_from_json(const json_t *root, clf_bench_report *out, char *why,
                           size_t why_len)
{
    struct jr j;

    j.why = why;
    j.len = why_len;
    j.bad = 0;
    clf_bench_report_init(out);
    if (!json_is_object(root)) {
        snprintf(why, why_len, "the document is not a JSON object");
        return -1;
    }
    read_header(&j, root, out);
    read_array(&j, root, "devices", read_device, out);
    read_array(&j, root, "results", read_result, out);
    read_array(&j, root, "crossovers", read_crossover, out);
    read_array(&j, root, "accuracy", read_accuracy, out);
    read_comparison(&j, root, out);
    if (j.bad) {
        clf_bench_report_free(out);
        return -1;
    }
    return 0;
}

int
clf_bench_json_read(const char *path, clf_bench_report *out, char *why,
                    size_t why_len)
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    int rc;

    clf_bench_report_init(out);
    if (root == NULL) {
        if (err.line > 0)
            snprintf(why, why_len, "line %d: %s", err.line, err.text);
        else
            snprintf(why, why_len, "%s", err.text);
        return -1;
    }
    rc = clf_bench_report_from_json(root, out, why, why_len);
    json_decref(root);
    return rc;
}
