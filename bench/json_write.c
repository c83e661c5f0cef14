/* The report as JSON (bench/json.h): the document of schema
 * "clinformer-bench/1", to a stream or written whole to a file. */
#define _POSIX_C_SOURCE 200809L

#include "output.h"
#include "roofline.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

json_t *
clf_bench_json_num(double v)
{
    return isnan(v) || isinf(v) ? json_null() : json_real(v);
}

int
clf_bench_json_dump(FILE *f, json_t *root)
{
    int rc;

    if (root == NULL) {
        errno = ENOMEM;
        return -1;
    }
    rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    return rc != 0 || fputc('\n', f) == EOF ? -1 : 0;
}

static json_t *
jstats(const clf_bench_stats *s)
{
    return json_pack(
        "{s:o, s:o, s:o, s:o, s:I}", "median", clf_bench_json_num(s->median),
        "min", clf_bench_json_num(s->min), "max", clf_bench_json_num(s->max),
        "mad", clf_bench_json_num(s->mad), "runs", (json_int_t)s->runs);
}

static json_t *
jweight(const clf_bench_weight *w)
{
    return json_pack("{s:o, s:o, s:o}", "mean", clf_bench_json_num(w->mean),
                     "mean_abs", clf_bench_json_num(w->mean_abs), "max_abs",
                     clf_bench_json_num(w->max_abs));
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
        if (json_object_set_new(o, clf_stage_name((clf_stage)i),
                                clf_bench_json_num(v[i]))) {
            json_decref(o);
            return NULL;
        }
    return o;
}

/* The roofline and noise fields of a row. */
static int
add_roofline(json_t *o, const clf_bench_result *x)
{
    return json_object_set_new(o, "bytes", clf_bench_json_num(x->bytes)) ||
           json_object_set_new(o, "intensity",
                               clf_bench_json_num(x->intensity)) ||
           json_object_set_new(o, "roofline_pct",
                               clf_bench_json_num(x->roofline_pct)) ||
           json_object_set_new(o, "stage_bytes", jstages(x->stage_bytes)) ||
           json_object_set_new(o, "stage_intensity",
                               jstages(x->stage_intensity)) ||
           json_object_set_new(o, "stage_roofline_pct",
                               jstages(x->stage_roofline_pct)) ||
           json_object_set_new(
               o, "rel_mad", clf_bench_json_num(clf_bench_rel_mad(&x->wall))) ||
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
                                   clf_bench_json_num(x->stage_flops[i]));
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
    bad |=
        json_object_set_new(config, "compression",
                            json_string(clf_compression_name(x->compression)));
    bad |= json_object_set_new(o, "config", config);
    bad |= json_object_set_new(o, "status",
                               json_string(clf_bench_status_name(x->status)));
    bad |= json_object_set_new(o, "note", json_string(x->note));
    bad |= json_object_set_new(o, "first_call_s",
                               clf_bench_json_num(x->first_call_s));
    bad |= json_object_set_new(o, "wall_s", jstats(&x->wall));
    bad |= json_object_set_new(o, "device_s", jstats(&x->device_s));
    bad |= json_object_set_new(o, "stages", stages);
    bad |= json_object_set_new(o, "flops", clf_bench_json_num(x->flops));
    bad |= json_object_set_new(o, "stage_flops", sf);
    bad |= json_object_set_new(o, "gflops", clf_bench_json_num(x->gflops));
    bad |= json_object_set_new(o, "device_bytes",
                               clf_bench_json_num(x->device_bytes));
    bad |= json_object_set_new(o, "io_bytes", clf_bench_json_num(x->io_bytes));
    bad |=
        json_object_set_new(o, "rel_error", clf_bench_json_num(x->rel_error));
    bad |= add_roofline(o, x);
    bad |=
        json_object_set_new(o, "fp32_error", clf_bench_json_num(x->fp32_error));
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
                  clf_bench_json_num(a->rel_error[CLF_BENCH_INIT_LUCIDRAINS]),
                  "fairseq",
                  clf_bench_json_num(a->rel_error[CLF_BENCH_INIT_FAIRSEQ])));
    bad |= json_object_set_new(
        o, "decisive",
        json_pack("{s:o, s:I, s:o, s:o, s:o}", "full_weight",
                  clf_bench_json_num(a->full_weight), "trials",
                  (json_int_t)a->trials, "host_max_diff",
                  clf_bench_json_num(a->host_max_diff), "lucidrains",
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
        "build_s", clf_bench_json_num(d->build_s), "source_builds",
        (json_int_t)d->source_builds, "cache_loads", (json_int_t)d->cache_loads,
        "gemm_tuning", d->tuning, "kernel_choices", d->choices);

    json_t *pk = json_pack(
        "{s:o, s:o, s:o, s:b, s:i, s:i, s:s, s:o, s:o, s:s}", "fma_gflops",
        clf_bench_json_num(d->peak_gflops), "copy_gbps",
        clf_bench_json_num(d->peak_gbps), "h2d_gbps",
        clf_bench_json_num(d->h2d_gbps), "cached", d->peak_cached, "fma_width",
        d->fma_width, "fma_chains", d->fma_chains, "copy_with",
        d->copy_api ? "clEnqueueCopyBuffer" : "kernel", "fma_measured_gflops",
        clf_bench_json_num(d->fma_measured), "copy_measured_gbps",
        clf_bench_json_num(d->copy_measured), "note", d->peak_note);

    if (o == NULL || pk == NULL ||
        json_object_set_new(o, "stable_name", json_string(d->stable_name)) ||
        json_object_set_new(o, "peaks", pk)) {
        if (o == NULL || pk == NULL)
            json_decref(pk);
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
    return json_pack("[o, o, o]", clf_bench_json_num(v[0]),
                     clf_bench_json_num(v[1]), clf_bench_json_num(v[2]));
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
                          "n_estimate", clf_bench_json_num(c->n_estimate));

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

    root =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:I, s:o, s:I, s:b}, s:o}",
                  "schema", CLF_BENCH_SCHEMA, "clinformer_version", r->version,
                  "started", r->started, "host", r->host, "command", r->command,
                  "settings", "repeat", (json_int_t)r->repeat, "budget_s",
                  clf_bench_json_num(r->budget_s), "seed", (json_int_t)r->seed,
                  "quick", r->quick, "wall_s", clf_bench_json_num(r->wall_s));
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
    return clf_bench_json_dump(f, clf_bench_report_to_json(r));
}

int
clf_bench_json_write(const clf_bench_report *r, const char *path)
{
    return clf_bench_write_file(path, clf_bench_json_fwrite, r);
}
