/* Output of the bench suite: tables, JSON and CSV (SVG in bench/plot.c, the
 * comparison with an earlier run in bench/compare.c).  See output.h for the
 * JSON schema. */
#define _POSIX_C_SOURCE 200809L

#include "output.h"
#include "roofline.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------- JSON: write */

/* A number, or null for a value that was not measured (JSON has no NaN). */
static json_t *
jnum(double v)
{
    return isnan(v) || isinf(v) ? json_null() : json_real(v);
}

static json_t *
jstats(const clf_bench_stats *s)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:I}", "median", jnum(s->median),
                     "min", jnum(s->min), "max", jnum(s->max), "mad",
                     jnum(s->mad), "runs", (json_int_t)s->runs);
}

static json_t *
jweight(const clf_bench_weight *w)
{
    return json_pack("{s:o, s:o, s:o}", "mean", jnum(w->mean), "mean_abs",
                     jnum(w->mean_abs), "max_abs", jnum(w->max_abs));
}

/* Adds the device's identity, the key of every row. */
static int
add_identity(json_t *o, const clf_bench_report *r, size_t dev)
{
    const clf_bench_device *d = &r->devices[dev];

    return json_object_set_new(o, "device_index",
                               json_integer((json_int_t)dev)) ||
           json_object_set_new(o, "platform", json_string(d->platform)) ||
           json_object_set_new(o, "device", json_string(d->name)) ||
           json_object_set_new(o, "driver", json_string(d->driver)) ||
           json_object_set_new(o, "stable_name", json_string(d->stable_name));
}

/* A per-stage object of numbers. */
static json_t *
jstages(const double v[CLF_STAGE_COUNT])
{
    json_t *o = json_object();
    int i;

    for (i = 0; o != NULL && i < CLF_STAGE_COUNT; i++)
        if (json_object_set_new(o, clf_stage_name((clf_stage)i), jnum(v[i]))) {
            json_decref(o);
            return NULL;
        }
    return o;
}

/* The roofline and noise fields of a row. */
static int
add_roofline(json_t *o, const clf_bench_result *x)
{
    return json_object_set_new(o, "bytes", jnum(x->bytes)) ||
           json_object_set_new(o, "intensity", jnum(x->intensity)) ||
           json_object_set_new(o, "roofline_pct", jnum(x->roofline_pct)) ||
           json_object_set_new(o, "stage_bytes", jstages(x->stage_bytes)) ||
           json_object_set_new(o, "stage_intensity",
                               jstages(x->stage_intensity)) ||
           json_object_set_new(o, "stage_roofline_pct",
                               jstages(x->stage_roofline_pct)) ||
           json_object_set_new(o, "rel_mad",
                               jnum(clf_bench_rel_mad(&x->wall))) ||
           json_object_set_new(o, "noisy", json_boolean(x->noisy));
}

static json_t *
result_to_json(const clf_bench_report *r, const clf_bench_result *x)
{
    json_t *o = json_object(), *stages = json_object(), *sf = json_object();
    json_t *config;
    int i, bad = o == NULL || stages == NULL || sf == NULL;

    if (bad) {
        json_decref(o);
        json_decref(stages);
        json_decref(sf);
        return NULL;
    }
    for (i = 0; i < CLF_STAGE_COUNT; i++) {
        bad |= json_object_set_new(stages, clf_stage_name((clf_stage)i),
                                   jstats(&x->stage[i]));
        bad |= json_object_set_new(sf, clf_stage_name((clf_stage)i),
                                   jnum(x->stage_flops[i]));
    }
    config = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "mode",
        clf_bench_mode_name(x->mode), "n", (json_int_t)x->n, "k",
        (json_int_t)x->k, "k_requested", (json_int_t)x->k_requested, "d_model",
        (json_int_t)x->d_model, "heads", (json_int_t)x->heads, "batch",
        (json_int_t)x->batch, "causal_block", (json_int_t)x->causal_block);
    bad |= add_identity(o, r, x->device);
    bad |= json_object_set_new(config, "precision",
                               json_string(clf_precision_name(x->precision)));
    bad |= json_object_set_new(o, "config", config);
    bad |= json_object_set_new(o, "status",
                               json_string(clf_bench_status_name(x->status)));
    bad |= json_object_set_new(o, "note", json_string(x->note));
    bad |= json_object_set_new(o, "first_call_s", jnum(x->first_call_s));
    bad |= json_object_set_new(o, "wall_s", jstats(&x->wall));
    bad |= json_object_set_new(o, "device_s", jstats(&x->device_s));
    bad |= json_object_set_new(o, "stages", stages);
    bad |= json_object_set_new(o, "flops", jnum(x->flops));
    bad |= json_object_set_new(o, "stage_flops", sf);
    bad |= json_object_set_new(o, "gflops", jnum(x->gflops));
    bad |= json_object_set_new(o, "device_bytes", jnum(x->device_bytes));
    bad |= json_object_set_new(o, "io_bytes", jnum(x->io_bytes));
    bad |= json_object_set_new(o, "rel_error", jnum(x->rel_error));
    bad |= add_roofline(o, x);
    bad |= json_object_set_new(o, "fp32_error", jnum(x->fp32_error));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *
accuracy_to_json(const clf_bench_report *r, const clf_bench_accuracy *a)
{
    json_t *o = json_object();
    int bad = o == NULL;

    if (bad)
        return NULL;
    bad |= add_identity(o, r, a->device);
    bad |= json_object_set_new(o, "n", json_integer((json_int_t)a->n));
    bad |= json_object_set_new(o, "k", json_integer((json_int_t)a->k));
    bad |=
        json_object_set_new(o, "d_model", json_integer((json_int_t)a->d_model));
    bad |= json_object_set_new(o, "heads", json_integer((json_int_t)a->heads));
    bad |= json_object_set_new(o, "batch", json_integer((json_int_t)a->batch));
    bad |= json_object_set_new(o, "status",
                               json_string(clf_bench_status_name(a->status)));
    bad |= json_object_set_new(o, "note", json_string(a->note));
    bad |= json_object_set_new(o, "linformer_s", jstats(&a->linformer));
    bad |= json_object_set_new(o, "full_s", jstats(&a->full));
    bad |= json_object_set_new(
        o, "rel_error",
        json_pack("{s:o, s:o}", "lucidrains",
                  jnum(a->rel_error[CLF_BENCH_INIT_LUCIDRAINS]), "fairseq",
                  jnum(a->rel_error[CLF_BENCH_INIT_FAIRSEQ])));
    bad |= json_object_set_new(
        o, "decisive",
        json_pack("{s:o, s:I, s:o, s:o, s:o}", "full_weight",
                  jnum(a->full_weight), "trials", (json_int_t)a->trials,
                  "host_max_diff", jnum(a->host_max_diff), "lucidrains",
                  jweight(&a->weight[CLF_BENCH_INIT_LUCIDRAINS]), "fairseq",
                  jweight(&a->weight[CLF_BENCH_INIT_FAIRSEQ])));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *
device_to_json(const clf_bench_device *d)
{
    json_t *o = json_pack(
        "{s:I, s:s, s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:o, s:I, s:I, s:s, "
        "s:s}",
        "index", (json_int_t)d->index, "platform", d->platform, "device",
        d->name, "driver", d->driver, "version", d->version, "is_gpu",
        d->is_gpu, "compute_units", (json_int_t)d->compute_units, "global_mem",
        (json_int_t)d->global_mem, "max_alloc", (json_int_t)d->max_alloc,
        "build_s", jnum(d->build_s), "source_builds",
        (json_int_t)d->source_builds, "cache_loads", (json_int_t)d->cache_loads,
        "gemm_tuning", d->tuning, "kernel_choices", d->choices);

    if (o != NULL &&
        (json_object_set_new(o, "stable_name", json_string(d->stable_name)) ||
         json_object_set_new(o, "peaks",
                             json_pack("{s:o, s:o, s:o, s:b}", "fma_gflops",
                                       jnum(d->peak_gflops), "copy_gbps",
                                       jnum(d->peak_gbps), "h2d_gbps",
                                       jnum(d->h2d_gbps), "cached",
                                       d->peak_cached)))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Each device's rows by stable name ("device <index>" where it has none,
 * "#2", "#3" appended when a name repeats): the positions in "results". */
static json_t *
by_device_to_json(const clf_bench_report *r)
{
    json_t *o = json_object();
    size_t dev, i;
    int bad = o == NULL;

    for (dev = 0; !bad && dev < r->ndevices; dev++) {
        const clf_bench_device *d = &r->devices[dev];
        json_t *rows = json_array();
        char key[96];
        int rep = 1;
        if (d->stable_name[0] != '\0')
            snprintf(key, sizeof key, "%s", d->stable_name);
        else
            snprintf(key, sizeof key, "device %u", d->index);
        while (json_object_get(o, key) != NULL)
            snprintf(key + strcspn(key, "#"), sizeof key - strcspn(key, "#"),
                     "#%d", ++rep);
        for (i = 0; rows != NULL && i < r->nresults; i++)
            if (r->results[i].device == dev)
                bad |= json_array_append_new(rows, json_integer((json_int_t)i));
        bad |= rows == NULL ||
               json_object_set_new(o, key,
                                   json_pack("{s:I, s:o}", "device_index",
                                             (json_int_t)dev, "results", rows));
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The load averages as [1, 5, 15 minutes]. */
static json_t *
jload(const double v[3])
{
    return json_pack("[o, o, o]", jnum(v[0]), jnum(v[1]), jnum(v[2]));
}

/* The run's load, baseline and rows by device. */
static int
add_comparison(json_t *root, const clf_bench_report *r)
{
    return json_object_set_new(root, "load",
                               json_pack("{s:o, s:o}", "start",
                                         jload(r->load_start), "end",
                                         jload(r->load_end))) ||
           json_object_set_new(root, "baseline",
                               json_integer((json_int_t)r->baseline)) ||
           json_object_set_new(root, "by_device", by_device_to_json(r));
}

static json_t *
crossing_to_json(const clf_bench_report *r, const clf_bench_crossing *c)
{
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:s, s:I, s:o, s:o}", "d_model",
                          (json_int_t)c->d_model, "heads", (json_int_t)c->heads,
                          "batch", (json_int_t)c->batch, "k",
                          (json_int_t)c->k_requested, "pair",
                          c->causal ? "causal/causal-full" : "linformer/full",
                          "points", (json_int_t)c->points, "n",
                          c->n ? json_integer((json_int_t)c->n) : json_null(),
                          "n_estimate", jnum(c->n_estimate));

    if (o == NULL || add_identity(o, r, c->device)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The crossovers as a JSON array; NULL when out of memory. */
static json_t *
crossings_to_json(const clf_bench_report *r)
{
    clf_bench_crossing *cs = NULL;
    json_t *cross = json_array();
    size_t i, nc = 0;
    int bad = cross == NULL;

    if (!bad && (clf_bench_report_crossings(r, NULL, 0, &nc) != 0 ||
                 (nc > 0 && (cs = malloc(nc * sizeof *cs)) == NULL) ||
                 clf_bench_report_crossings(r, cs, nc, &nc) != 0))
        bad = 1;
    for (i = 0; !bad && i < nc; i++)
        bad |= json_array_append_new(cross, crossing_to_json(r, &cs[i]));
    free(cs);
    if (bad) {
        json_decref(cross);
        return NULL;
    }
    return cross;
}

json_t *
clf_bench_report_to_json(const clf_bench_report *r)
{
    json_t *root, *devs, *res, *cross, *acc;
    size_t i;
    int bad;

    root = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:{s:I, s:o, s:I, s:b}, s:o}", "schema",
        CLF_BENCH_SCHEMA, "clinformer_version", r->version, "started",
        r->started, "host", r->host, "command", r->command, "settings",
        "repeat", (json_int_t)r->repeat, "budget_s", jnum(r->budget_s), "seed",
        (json_int_t)r->seed, "quick", r->quick, "wall_s", jnum(r->wall_s));
    devs = json_array();
    res = json_array();
    cross = crossings_to_json(r);
    acc = json_array();
    bad = root == NULL || devs == NULL || res == NULL || cross == NULL ||
          acc == NULL;
    for (i = 0; !bad && i < r->ndevices; i++)
        bad |= json_array_append_new(devs, device_to_json(&r->devices[i]));
    for (i = 0; !bad && i < r->nresults; i++)
        bad |= json_array_append_new(res, result_to_json(r, &r->results[i]));
    for (i = 0; !bad && i < r->naccuracy; i++)
        bad |= json_array_append_new(acc, accuracy_to_json(r, &r->accuracy[i]));
    if (!bad) {
        bad |= json_object_set_new(root, "devices", devs);
        bad |= json_object_set_new(root, "results", res);
        bad |= json_object_set_new(root, "crossovers", cross);
        bad |= json_object_set_new(root, "accuracy", acc);
        bad |= add_comparison(root, r);
        if (!bad)
            return root;
        json_decref(root);
        return NULL;
    }
    json_decref(root);
    json_decref(devs);
    json_decref(res);
    json_decref(cross);
    json_decref(acc);
    return NULL;
}

int
clf_bench_json_fwrite(FILE *f, const clf_bench_report *r)
{
    json_t *root = clf_bench_report_to_json(r);
    int rc;

    if (root == NULL) {
        errno = ENOMEM;
        return -1;
    }
    rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    if (rc != 0 || fputc('\n', f) == EOF)
        return -1;
    return 0;
}

int
clf_bench_json_write(const clf_bench_report *r, const char *path)
{
    return clf_bench_write_file(path, clf_bench_json_fwrite, r);
}

/* ----------------------------------------------------------- JSON: read */

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

/* config.precision, "float" when absent (runs from before --precision). */
static void
read_precision(struct jr *j, const json_t *config, const char *path,
               clf_precision *out)
{
    char name[16];

    *out = CLF_PRECISION_FLOAT;
    if (json_object_get(config, "precision") == NULL)
        return;
    jr_string(j, config, path, "precision", name, sizeof name);
    if (!j->bad && clf_precision_parse(name, out) != 0)
        jr_fail(j, path, "precision", "unknown precision");
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

/* ------------------------------------------------------------------ CSV */

static const char csv_header[] =
    "platform,device,driver,mode,n,k,k_requested,d_model,heads,batch,"
    "causal_block,status,runs,first_call_s,median_s,min_s,max_s,"
    "device_median_s,projection_s,compression_s,scores_s,softmax_s,"
    "weighted_sum_s,fused_s,output_s,flops,gflops,device_bytes,io_bytes,"
    "precision,fp32_error,rel_error,"
    "note";

static const char csv_accuracy_header[] =
    "platform,device,driver,n,k,d_model,heads,batch,status,"
    "linformer_median_s,linformer_min_s,linformer_max_s,full_median_s,"
    "rel_error_lucidrains,rel_error_fairseq,full_weight,trials,"
    "lucidrains_mean,lucidrains_mean_abs,lucidrains_max_abs,fairseq_mean,"
    "fairseq_mean_abs,fairseq_max_abs,host_max_diff,note";

const char *
clf_bench_csv_header(void)
{
    return csv_header;
}

const char *
clf_bench_csv_accuracy_header(void)
{
    return csv_accuracy_header;
}

/* A text field, quoted when it holds a comma, quote or line break. */
static void
csv_text(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\r\n") != NULL) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

/* A number; empty when not measured. */
static void
csv_num(FILE *f, double v)
{
    if (!isnan(v))
        fprintf(f, "%.9g", v);
    fputc(',', f);
}

int
clf_bench_csv_write(FILE *f, const clf_bench_report *r)
{
    size_t i;
    int s;

    fprintf(f, "%s\n", csv_header);
    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        const clf_bench_device *d = &r->devices[x->device];
        csv_text(f, d->platform, 0);
        csv_text(f, d->name, 0);
        csv_text(f, d->driver, 0);
        fprintf(f, "%s,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%s,%zu,",
                clf_bench_mode_name(x->mode), x->n, x->k, x->k_requested,
                x->d_model, x->heads, x->batch, x->causal_block,
                clf_bench_status_name(x->status), x->wall.runs);
        csv_num(f, x->first_call_s);
        csv_num(f, x->wall.median);
        csv_num(f, x->wall.min);
        csv_num(f, x->wall.max);
        csv_num(f, x->device_s.median);
        for (s = 0; s < CLF_STAGE_COUNT; s++)
            csv_num(f, x->stage[s].median);
        csv_num(f, x->flops);
        csv_num(f, x->gflops);
        csv_num(f, x->device_bytes);
        csv_num(f, x->io_bytes);
        fprintf(f, "%s,", clf_precision_name(x->precision));
        csv_num(f, x->fp32_error);
        csv_num(f, x->rel_error);
        csv_text(f, x->note, 1);
    }
    return ferror(f) ? -1 : 0;
}

int
clf_bench_csv_accuracy_write(FILE *f, const clf_bench_report *r)
{
    size_t i;
    int w;

    fprintf(f, "%s\n", csv_accuracy_header);
    for (i = 0; i < r->naccuracy; i++) {
        const clf_bench_accuracy *a = &r->accuracy[i];
        const clf_bench_device *d = &r->devices[a->device];
        csv_text(f, d->platform, 0);
        csv_text(f, d->name, 0);
        csv_text(f, d->driver, 0);
        fprintf(f, "%zu,%zu,%zu,%zu,%zu,%s,", a->n, a->k, a->d_model, a->heads,
                a->batch, clf_bench_status_name(a->status));
        csv_num(f, a->linformer.median);
        csv_num(f, a->linformer.min);
        csv_num(f, a->linformer.max);
        csv_num(f, a->full.median);
        csv_num(f, a->rel_error[CLF_BENCH_INIT_LUCIDRAINS]);
        csv_num(f, a->rel_error[CLF_BENCH_INIT_FAIRSEQ]);
        csv_num(f, a->full_weight);
        fprintf(f, "%zu,", a->trials);
        for (w = 0; w < CLF_BENCH_INIT_COUNT; w++) {
            csv_num(f, a->weight[w].mean);
            csv_num(f, a->weight[w].mean_abs);
            csv_num(f, a->weight[w].max_abs);
        }
        csv_num(f, a->host_max_diff);
        csv_text(f, a->note, 1);
    }
    return ferror(f) ? -1 : 0;
}

static int
same_panel(const clf_bench_result *a, const clf_bench_result *b)
{
    return a->device == b->device && a->d_model == b->d_model &&
           a->heads == b->heads && a->batch == b->batch &&
           a->k_requested == b->k_requested && a->precision == b->precision;
}

/* --------------------------------------------------------------- tables */

void
clf_bench_fmt_ms(char *buf, size_t len, double s)
{
    clf_bench_fmt_g(buf, len, "%.1f", s * 1e3);
}

void
clf_bench_fmt_g(char *buf, size_t len, const char *fmt, double v)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else if (snprintf(buf, len, fmt, v) >= (int)len)
        snprintf(buf, len, "%.3g", v); /* a cut number would mislead */
}

/* The row's mode, with "/h" after it for half-precision weights. */
static const char *
row_mode(const clf_bench_result *x)
{
    static const char *const half[CLF_BENCH_MODE_COUNT] = {
        "linformer/h", "full/h", "causal/h", "causal-full/h"};

    if (x->precision == CLF_PRECISION_HALF && (int)x->mode >= 0 &&
        x->mode < CLF_BENCH_MODE_COUNT)
        return half[x->mode];
    return clf_bench_mode_name(x->mode);
}

/* The same configuration's row of mode m, or NULL. */
static const clf_bench_result *
find_mode(const clf_bench_report *r, const clf_bench_result *x,
          clf_bench_mode m)
{
    size_t i;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *y = &r->results[i];
        if (y->mode == m && y->n == x->n && same_panel(x, y))
            return y;
    }
    return NULL;
}

static double
speedup(const clf_bench_report *r, const clf_bench_result *x)
{
    clf_bench_mode ref = clf_bench_mode_reference(x->mode);
    const clf_bench_result *y;

    if (ref == x->mode || x->status != CLF_BENCH_OK)
        return NAN;
    y = find_mode(r, x, ref);
    if (y == NULL || y->status != CLF_BENCH_OK || !(x->wall.median > 0))
        return NAN;
    return y->wall.median / x->wall.median;
}

static void
print_device_head(FILE *f, const clf_bench_report *r, size_t dev)
{
    const clf_bench_device *d = &r->devices[dev];

    fprintf(f, "\n== device %u%s%s: %s / %s (driver %s, %s) ==\n", d->index,
            d->stable_name[0] ? " " : "", d->stable_name, d->platform, d->name,
            d->driver, d->version);
    clf_bench_print_peaks(f, d);
    fprintf(f,
            "kernels ready in %.3f s (programs: %u built from source, %u "
            "loaded from the binary cache)\n",
            d->build_s, d->source_builds, d->cache_loads);
    if (d->tuning[0] != '\0')
        fprintf(f, "CLBlast parameters: %s\n", d->tuning);
    if (d->choices[0] != '\0')
        fprintf(f, "kernels chosen by timing: %s\n", d->choices);
}

static void
print_crossings(FILE *f, const clf_bench_report *r, size_t dev)
{
    clf_bench_crossing *cs = NULL;
    size_t nc = 0, i;

    if (clf_bench_report_crossings(r, NULL, 0, &nc) != 0 || nc == 0 ||
        (cs = malloc(nc * sizeof *cs)) == NULL ||
        clf_bench_report_crossings(r, cs, nc, &nc) != 0) {
        free(cs);
        return;
    }
    fputc('\n', f);
    for (i = 0; i < nc; i++) {
        const clf_bench_crossing *c = &cs[i];
        if (c->device != dev)
            continue;
        fprintf(f, "crossover, %s (D=%zu h=%zu B=%zu k=%zu%s): ",
                c->causal ? "causal vs causal-full" : "linformer vs full",
                c->d_model, c->heads, c->batch, c->k_requested,
                c->precision == CLF_PRECISION_HALF ? ", half weights" : "");
        if (c->n == 0)
            fprintf(f, "none measured (%zu lengths with both modes)\n",
                    c->points);
        else if (!isnan(c->n_estimate))
            fprintf(f,
                    "n = %zu (faster from there on; the medians cross near "
                    "n = %.0f)\n",
                    c->n, c->n_estimate);
        else
            fprintf(f,
                    "n = %zu, the smallest measured (faster at every "
                    "measured n)\n",
                    c->n);
    }
    free(cs);
}

/* One row of the matrix table; returns 1 when the row has a note. */
static int
print_matrix_row(FILE *f, const clf_bench_report *r, const clf_bench_result *x)
{
    char k[24] = "-", b[24] = "-", first[16], med[16], spr[40], devm[16];
    char gf[16], rate[16], mib[16], err[16], sp[16], lo[16], hi[16];
    char mad[16], roof[16];

    if (x->k)
        snprintf(k, sizeof k, "%zu", x->k);
    if (x->causal_block)
        snprintf(b, sizeof b, "%zu", x->causal_block);
    fprintf(f, "%6zu %5s %4s %5zu %3zu %3zu  %-11s ", x->n, k, b, x->d_model,
            x->heads, x->batch, row_mode(x));
    if (x->status != CLF_BENCH_OK || x->wall.runs == 0) {
        fprintf(f, "%s\n",
                x->status == CLF_BENCH_TOO_LARGE ? "not run (too large)"
                : x->status == CLF_BENCH_OVER_BUDGET
                    ? "not run (over the time budget)"
                : x->status == CLF_BENCH_FAILED ? "failed (see notes)"
                                                : "no warm run");
        return 1;
    }
    clf_bench_fmt_g(first, sizeof first, "%.3f", x->first_call_s);
    clf_bench_fmt_ms(med, sizeof med, x->wall.median);
    clf_bench_fmt_ms(lo, sizeof lo, x->wall.min);
    clf_bench_fmt_ms(hi, sizeof hi, x->wall.max);
    snprintf(spr, sizeof spr, "%s .. %s", lo, hi);
    clf_bench_fmt_ms(devm, sizeof devm, x->device_s.median);
    clf_bench_fmt_g(gf, sizeof gf, "%.2f", x->flops * 1e-9);
    clf_bench_fmt_g(rate, sizeof rate, "%.1f", x->gflops);
    clf_bench_fmt_g(mib, sizeof mib, "%.1f", x->device_bytes / 1048576.0);
    clf_bench_fmt_g(err, sizeof err, "%.3g", x->rel_error);
    clf_bench_fmt_g(sp, sizeof sp, "%.2fx", speedup(r, x));
    clf_bench_fmt_g(mad, sizeof mad, "%.1f",
                    100.0 * clf_bench_rel_mad(&x->wall));
    clf_bench_fmt_g(roof, sizeof roof, "%.1f", x->roofline_pct);
    fprintf(f, "%8s %9s %19s %9s %7s %7s %7s %9s %8s %5s %6s%s\n", first, med,
            spr, devm, gf, rate, mib, err, sp, mad, roof,
            x->noisy ? " noisy" : "");
    return x->note[0] != '\0';
}

/* The device's matrix table; returns how many rows have notes. */
static int
print_matrix_table(FILE *f, const clf_bench_report *r, size_t dev)
{
    size_t i;
    int notes = 0;

    fprintf(f, "warm runs: median and spread (min..max); first s = the "
               "first forward of a fresh layer\n(the first on this "
               "context includes CLBlast's GEMM compile, unless the "
               "OpenCL driver\ncached it)\n\n");
    fprintf(f,
            "%6s %5s %4s %5s %3s %3s  %-11s %8s %9s %19s %9s %7s %7s "
            "%7s %9s %8s %5s %6s\n",
            "n", "k", "b", "D", "h", "B", "mode", "first s", "median ms",
            "spread ms", "device ms", "GFLOP", "GFLOP/s", "MiB", "rel.err",
            "speed-up", "rMAD%", "roof%");
    for (i = 0; i < r->nresults; i++)
        if (r->results[i].device == dev)
            notes += print_matrix_row(f, r, &r->results[i]);
    fprintf(f, "\nMiB: device memory the layer holds after its forward "
               "(weights + workspaces);\nrel.err: ||Y - Y_full||/||Y_full|| "
               "on the same weights and input; speed-up: full median / "
               "this median;\nrMAD%%: median absolute deviation / median; "
               "roof%%: percent of the roofline bound\nmin(peak GFLOP/s, "
               "FLOP/byte x peak GB/s); noisy: spread over 10%% of the "
               "median\n");
    return notes;
}

/* The device's per-stage medians and GFLOP/s. */
static void
print_stages(FILE *f, const clf_bench_report *r, size_t dev)
{
    size_t i;
    int s;

    fprintf(f,
            "\nper stage, median ms (GFLOP/s), from profiling "
            "markers:\n%6s %-11s",
            "n", "mode");
    for (s = 0; s < CLF_STAGE_COUNT; s++)
        fprintf(f, " %16s", clf_stage_name((clf_stage)s));
    fputc('\n', f);
    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->device != dev || x->status != CLF_BENCH_OK || x->wall.runs == 0)
            continue;
        fprintf(f, "%6zu %-11s", x->n, row_mode(x));
        for (s = 0; s < CLF_STAGE_COUNT; s++) {
            char cell[40], ms[16], g[16];
            clf_bench_fmt_ms(ms, sizeof ms, x->stage[s].median);
            clf_bench_fmt_g(
                g, sizeof g, "%.1f",
                clf_bench_gflops(x->stage_flops[s], x->stage[s].median));
            snprintf(cell, sizeof cell, "%s (%s)", ms, g);
            fprintf(f, " %16s", cell);
        }
        fputc('\n', f);
    }
}

/* The float32 row of a half row's configuration and mode, or NULL. */
static const clf_bench_result *
float_twin(const clf_bench_report *r, const clf_bench_result *x)
{
    size_t i;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *y = &r->results[i];
        if (y->precision == CLF_PRECISION_FLOAT && y->mode == x->mode &&
            y->n == x->n && y->device == x->device &&
            y->d_model == x->d_model && y->heads == x->heads &&
            y->batch == x->batch && y->k_requested == x->k_requested)
            return y;
    }
    return NULL;
}

static double
ratio(double a, double b)
{
    return b > 0.0 ? a / b : NAN;
}

/* Half rows beside their float32 twins: time, memory, error. */
static void
print_precision(FILE *f, const clf_bench_report *r, size_t dev)
{
    size_t i;
    int head = 0;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i], *y;
        char c[6][16];
        if (x->device != dev || x->precision != CLF_PRECISION_HALF ||
            x->status != CLF_BENCH_OK)
            continue;
        if (!head++)
            fprintf(f,
                    "\nhalf-precision weights against float32 (same mode, "
                    "input and weights):\n%6s %-11s %9s %9s %7s %9s %9s "
                    "%7s %9s\n",
                    "n", "mode", "half ms", "float ms", "time", "half MiB",
                    "float MiB", "memory", "fp32 err");
        y = float_twin(r, x);
        clf_bench_fmt_ms(c[0], sizeof c[0], x->wall.median);
        clf_bench_fmt_ms(c[1], sizeof c[1], y ? y->wall.median : NAN);
        clf_bench_fmt_g(c[2], sizeof c[2], "%.2fx",
                        y ? ratio(x->wall.median, y->wall.median) : NAN);
        clf_bench_fmt_g(c[3], sizeof c[3], "%.1f", x->device_bytes / 1048576.0);
        clf_bench_fmt_g(c[4], sizeof c[4], "%.1f",
                        y ? y->device_bytes / 1048576.0 : NAN);
        clf_bench_fmt_g(c[5], sizeof c[5], "%.2fx",
                        y ? ratio(x->device_bytes, y->device_bytes) : NAN);
        fprintf(f, "%6zu %-11s %9s %9s %7s %9s %9s %7s ", x->n,
                clf_bench_mode_name(x->mode), c[0], c[1], c[2], c[3], c[4],
                c[5]);
        clf_bench_fmt_g(c[0], sizeof c[0], "%.2e", x->fp32_error);
        fprintf(f, "%9s\n", c[0]);
    }
    if (head)
        fprintf(f, "time, memory: half / float32; fp32 err: ||Y_half - "
                   "Y_float||/||Y_float||\n");
}

static void
print_notes(FILE *f, const clf_bench_report *r, size_t dev)
{
    size_t i;

    fprintf(f, "\nnotes:\n");
    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->device != dev || x->note[0] == '\0')
            continue;
        fprintf(f, "  n=%zu k=%zu D=%zu h=%zu B=%zu %s: %s\n", x->n,
                x->k_requested, x->d_model, x->heads, x->batch, row_mode(x),
                x->note);
    }
}

void
clf_bench_print_matrix(FILE *f, const clf_bench_report *r)
{
    size_t dev, i;

    for (dev = 0; dev < r->ndevices; dev++) {
        int notes, any = 0;
        for (i = 0; i < r->nresults; i++)
            any |= r->results[i].device == dev;
        if (!any)
            continue;
        print_device_head(f, r, dev);
        notes = print_matrix_table(f, r, dev);
        print_stages(f, r, dev);
        clf_bench_print_stage_roofline(f, r, dev);
        print_precision(f, r, dev);
        print_crossings(f, r, dev);
        if (notes)
            print_notes(f, r, dev);
    }
    clf_bench_print_comparison(f, r);
}

static int
same_study(const clf_bench_accuracy *a, const clf_bench_accuracy *b)
{
    return a->device == b->device && a->n == b->n && a->d_model == b->d_model &&
           a->heads == b->heads && a->batch == b->batch;
}

void
clf_bench_print_accuracy(FILE *f, const clf_bench_report *r)
{
    size_t i, j;

    for (i = 0; i < r->naccuracy; i++) {
        const clf_bench_accuracy *g = &r->accuracy[i];
        const clf_bench_device *d = &r->devices[g->device];
        int seen = 0, w;
        char med[16];
        for (j = 0; j < i; j++)
            seen |= same_study(&r->accuracy[j], g);
        if (seen)
            continue;
        fprintf(f,
                "\n== accuracy against full attention: device %u (%s / %s), "
                "n=%zu D=%zu h=%zu B=%zu ==\n",
                d->index, d->platform, d->name, g->n, g->d_model, g->heads,
                g->batch);
        fprintf(f,
                "Linformer and full attention timed alternately, %zu "
                "warm runs each (medians)\n\n",
                g->linformer.runs);
        fprintf(f, "%6s %10s %19s %10s %9s %14s %14s\n", "k", "lin ms",
                "spread ms", "full ms", "speed-up", "err lucidrains",
                "err fairseq");
        for (j = i; j < r->naccuracy; j++) {
            const clf_bench_accuracy *a = &r->accuracy[j];
            char m[16], lo[16], hi[16], spr[40], sp[16], e0[16], e1[16];
            if (!same_study(a, g))
                continue;
            if (a->status != CLF_BENCH_OK) {
                fprintf(f, "%6zu %s: %s\n", a->k,
                        clf_bench_status_name(a->status), a->note);
                continue;
            }
            clf_bench_fmt_ms(m, sizeof m, a->linformer.median);
            clf_bench_fmt_ms(lo, sizeof lo, a->linformer.min);
            clf_bench_fmt_ms(hi, sizeof hi, a->linformer.max);
            snprintf(spr, sizeof spr, "%s .. %s", lo, hi);
            clf_bench_fmt_ms(med, sizeof med, a->full.median);
            clf_bench_fmt_g(sp, sizeof sp, "%.2fx",
                            a->full.median / a->linformer.median);
            clf_bench_fmt_g(e0, sizeof e0, "%.4f", a->rel_error[0]);
            clf_bench_fmt_g(e1, sizeof e1, "%.4f", a->rel_error[1]);
            fprintf(f, "%6zu %10s %19s %10s %9s %14s %14s\n", a->k, m, spr, med,
                    sp, e0, e1);
        }
        fprintf(f, "\nerr: ||Y_lin - Y_full||_F / ||Y_full||_F on the same "
                   "weights and input, with E and F drawn\nas lucidrains "
                   "(uniform +-1/sqrt(k)) or as fairseq (xavier_uniform, gain "
                   "1/sqrt(2), on (k, n))\n");

        fprintf(f,
                "\ndecisive token: one key that every query scores sharply; "
                "full attention puts %.4f\nof each query's weight on it.  "
                "Weight that reaches it through Linformer,\nsum_s P[i,s] "
                "F[s,j], over %zu positions j (device pipeline; host double "
                "check):\n\n",
                g->full_weight, g->trials);
        fprintf(f, "%6s", "k");
        for (w = 0; w < CLF_BENCH_INIT_COUNT; w++)
            fprintf(f, "   %10s mean %8s %8s", clf_bench_init_name(w),
                    "mean|w|", "max|w|");
        fprintf(f, " %10s\n", "host diff");
        for (j = i; j < r->naccuracy; j++) {
            const clf_bench_accuracy *a = &r->accuracy[j];
            char hd[16];
            if (!same_study(a, g) || a->status != CLF_BENCH_OK)
                continue;
            fprintf(f, "%6zu", a->k);
            for (w = 0; w < CLF_BENCH_INIT_COUNT; w++)
                fprintf(f, "   %15.5f %8.5f %8.5f", a->weight[w].mean,
                        a->weight[w].mean_abs, a->weight[w].max_abs);
            clf_bench_fmt_g(hd, sizeof hd, "%.1e", a->host_max_diff);
            fprintf(f, " %10s\n", hd);
        }
    }
}

void
clf_bench_print_summary(FILE *f, const clf_bench_report *r)
{
    size_t dev, i;

    fprintf(f, "\n== summary ==\n");
    for (dev = 0; dev < r->ndevices; dev++) {
        const clf_bench_device *d = &r->devices[dev];
        int header = 0;
        fprintf(f, "\n%s / %s (driver %s)\n", d->platform, d->name, d->driver);
        for (i = 0; i < r->nresults; i++) {
            const clf_bench_result *x = &r->results[i];
            const clf_bench_result *y;
            char a[16], b[16], sp[16], e[16];
            if (x->device != dev || x->mode != CLF_BENCH_LINFORMER)
                continue;
            if (!header) {
                fprintf(f, "%6s %6s %14s %10s %15s %10s\n", "n", "k",
                        "Linformer ms", "full ms", "full/Linformer", "rel.err");
                header = 1;
            }
            y = find_mode(r, x, CLF_BENCH_FULL);
            clf_bench_fmt_ms(a, sizeof a,
                             x->status == CLF_BENCH_OK ? x->wall.median : NAN);
            clf_bench_fmt_ms(
                b, sizeof b,
                y != NULL && y->status == CLF_BENCH_OK ? y->wall.median : NAN);
            if (y != NULL && y->status == CLF_BENCH_TOO_LARGE)
                snprintf(b, sizeof b, "too large");
            clf_bench_fmt_g(sp, sizeof sp, "%.2fx", speedup(r, x));
            clf_bench_fmt_g(e, sizeof e, "%.3g", x->rel_error);
            fprintf(f, "%6zu %6zu %14s %10s %15s %10s\n", x->n, x->k, a, b, sp,
                    e);
        }
        print_crossings(f, r, dev);
        header = 0;
        for (i = 0; i < r->naccuracy; i++) {
            const clf_bench_accuracy *a = &r->accuracy[i];
            char sp[16], e0[16], e1[16], w0[16], w1[16], m[16];
            char ee[40], ww[40];
            if (a->device != dev)
                continue;
            if (!header) {
                fprintf(f,
                        "\naccuracy at n=%zu D=%zu h=%zu (full attention puts "
                        "%.3f of a query's weight on the\ndecisive key; err "
                        "and kept weight with E, F drawn as lucidrains / "
                        "fairseq)\n",
                        a->n, a->d_model, a->heads, a->full_weight);
                fprintf(f, "%6s %13s %15s %17s %23s\n", "k", "Linformer ms",
                        "full/Linformer", "rel.err", "decisive mean|w|");
                header = 1;
            }
            if (a->status != CLF_BENCH_OK) {
                fprintf(f, "%6zu %s\n", a->k, clf_bench_status_name(a->status));
                continue;
            }
            clf_bench_fmt_ms(m, sizeof m, a->linformer.median);
            clf_bench_fmt_g(sp, sizeof sp, "%.2fx",
                            a->full.median / a->linformer.median);
            clf_bench_fmt_g(e0, sizeof e0, "%.3f", a->rel_error[0]);
            clf_bench_fmt_g(e1, sizeof e1, "%.3f", a->rel_error[1]);
            clf_bench_fmt_g(w0, sizeof w0, "%.4f", a->weight[0].mean_abs);
            clf_bench_fmt_g(w1, sizeof w1, "%.4f", a->weight[1].mean_abs);
            snprintf(ee, sizeof ee, "%s / %s", e0, e1);
            snprintf(ww, sizeof ww, "%s / %s", w0, w1);
            fprintf(f, "%6zu %13s %15s %17s %23s\n", a->k, m, sp, ee, ww);
        }
    }
    fprintf(f, "\ntotal %.1f s (budget %.0f s)\n", r->wall_s, r->budget_s);
}
