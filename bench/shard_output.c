/* The files of bench --shard (bench/shard.h): JSON, CSV and HTML of the
 * records bench/shard.c measured.  Nothing here measures. */
#include "json.h"
#include "plot.h"
#include "shard.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- JSON */

static const char *
mode_name(const clf_bench_shard_row *x)
{
    return x->full ? "full" : "linformer";
}

/* The fastest device alone over the weighted split; NaN when either is
 * unknown. */
static double
speedup(const clf_bench_shard_report *s, const clf_bench_shard_row *x)
{
    double best = NAN;
    size_t i;

    for (i = 0; i < s->hdr->ndevices; i++)
        if (isfinite(x->alone_s[i]) && !(x->alone_s[i] >= best))
            best = x->alone_s[i];
    return isfinite(best) && x->weighted.wall_s > 0.0
               ? best / x->weighted.wall_s
               : NAN;
}

static json_t *
device_to_json(const clf_bench_device *d)
{
    return json_pack("{s:I, s:s, s:s, s:s, s:s, s:b, s:s}", "index",
                     (json_int_t)d->index, "platform", d->platform, "device",
                     d->name, "driver", d->driver, "version", d->version,
                     "is_gpu", d->is_gpu, "stable_name", d->stable_name);
}

static json_t *
split_to_json(const clf_bench_shard_report *s, const clf_bench_shard_split *p)
{
    json_t *shares = json_array();
    size_t i;

    for (i = 0; shares != NULL && i < s->hdr->ndevices; i++)
        if (json_array_append_new(shares, clf_bench_json_num(p->shares[i])) !=
            0) {
            json_decref(shares);
            return NULL;
        }
    return json_pack("{s:o, s:I, s:o}", "wall_s", clf_bench_json_num(p->wall_s),
                     "devices", (json_int_t)p->devices, "shares", shares);
}

/* Each device alone, keyed as the matrix keys its rows. */
static json_t *
alone_to_json(const clf_bench_shard_report *s, const clf_bench_shard_row *x)
{
    json_t *a = json_array();
    size_t i;

    for (i = 0; a != NULL && i < s->hdr->ndevices; i++) {
        const clf_bench_device *d = &s->hdr->devices[i];
        if (json_array_append_new(
                a, json_pack("{s:I, s:s, s:s, s:s, s:s, s:o}", "device_index",
                             (json_int_t)i, "platform", d->platform, "device",
                             d->name, "driver", d->driver, "stable_name",
                             d->stable_name, "wall_s",
                             clf_bench_json_num(x->alone_s[i]))) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *
row_to_json(const clf_bench_shard_report *s, const clf_bench_shard_row *x)
{
    return json_pack(
        "{s:{s:s, s:I, s:I, s:I, s:I, s:I, s:I}, s:s, s:s, s:o, s:o, s:o, "
        "s:o, s:o, s:o}",
        "config", "mode", mode_name(x), "n", (json_int_t)x->n, "k",
        (json_int_t)x->k, "k_requested", (json_int_t)x->k_requested, "d_model",
        (json_int_t)x->d_model, "heads", (json_int_t)x->heads, "batch",
        (json_int_t)x->batch, "status", x->ok ? "ok" : "failed", "note",
        x->note, "alone", alone_to_json(s, x), "even",
        split_to_json(s, &x->even), "weighted", split_to_json(s, &x->weighted),
        "received_bytes", clf_bench_json_num(x->received_bytes), "sent_bytes",
        clf_bench_json_num(x->sent_bytes), "speedup",
        clf_bench_json_num(speedup(s, x)));
}

static json_t *
shard_to_json(const clf_bench_shard_report *s)
{
    const clf_bench_report *r = s->hdr;
    json_t *root, *devs = json_array(), *res = json_array();
    size_t i;
    int bad = devs == NULL || res == NULL;

    for (i = 0; !bad && i < r->ndevices; i++)
        bad = json_array_append_new(devs, device_to_json(&r->devices[i])) != 0;
    for (i = 0; !bad && i < s->nrows; i++)
        bad = json_array_append_new(res, row_to_json(s, &s->rows[i])) != 0;
    if (bad) {
        json_decref(devs);
        json_decref(res);
        return NULL;
    }
    /* json_pack takes the two arrays' references, also when it fails. */
    root = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I}, s:o, s:s, "
                     "s:o, s:o}",
                     "schema", CLF_BENCH_SHARD_SCHEMA, "clinformer_version",
                     r->version, "started", r->started, "host", r->host,
                     "command", r->command, "settings", "repeat",
                     (json_int_t)r->repeat, "seed", (json_int_t)r->seed,
                     "wall_s", clf_bench_json_num(r->wall_s), "split_by",
                     "positions", "devices", devs, "results", res);
    return root;
}

int
clf_bench_shard_json_fwrite(FILE *f, const void *ctx)
{
    return clf_bench_json_dump(f, shard_to_json(ctx));
}

/* ----------------------------------------------------------------- CSV */

const char *
clf_bench_shard_csv_header(void)
{
    return "mode,n,k,k_requested,d_model,heads,batch,run,device_index,"
           "platform,device,driver,stable_name,wall_s,share,devices_used,"
           "received_bytes,sent_bytes,status";
}

/* A field quoted as RFC 4180 asks, then a comma. */
static void
csv_text(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputs("\",", f);
}

static void
csv_num(FILE *f, double v, const char *end)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    fputs(end, f);
}

/* One line: run is "alone" (wall_s that device's own) or a split (its
 * combined wall_s and the device's share). */
static void
csv_line(FILE *f, const clf_bench_shard_report *s, const clf_bench_shard_row *x,
         size_t dev, const char *run, double wall, double share, size_t used)
{
    const clf_bench_device *d = &s->hdr->devices[dev];

    fprintf(f, "%s,%zu,%zu,%zu,%zu,%zu,%zu,%s,%zu,", mode_name(x), x->n, x->k,
            x->k_requested, x->d_model, x->heads, x->batch, run, dev);
    csv_text(f, d->platform);
    csv_text(f, d->name);
    csv_text(f, d->driver);
    csv_text(f, d->stable_name);
    csv_num(f, wall, ",");
    csv_num(f, share, ",");
    fprintf(f, "%zu,", used);
    csv_num(f, x->received_bytes, ",");
    csv_num(f, x->sent_bytes, ",");
    fprintf(f, "%s\n", x->ok ? "ok" : "failed");
}

int
clf_bench_shard_csv_fwrite(FILE *f, const void *ctx)
{
    const clf_bench_shard_report *s = ctx;
    size_t i, j, nd = s->hdr->ndevices;

    fprintf(f, "%s\n", clf_bench_shard_csv_header());
    for (i = 0; i < s->nrows; i++) {
        const clf_bench_shard_row *x = &s->rows[i];
        for (j = 0; j < nd; j++)
            csv_line(f, s, x, j, "alone", x->alone_s[j], 1.0, 1);
        for (j = 0; j < nd; j++)
            csv_line(f, s, x, j, "even", x->even.wall_s, x->even.shares[j],
                     x->even.devices);
        for (j = 0; j < nd; j++)
            csv_line(f, s, x, j, "weighted", x->weighted.wall_s,
                     x->weighted.shares[j], x->weighted.devices);
    }
    return ferror(f) ? -1 : 0;
}

/* ---------------------------------------------------------------- HTML */

/* A cell of milliseconds, "-" when not measured. */
static void
td_ms(FILE *f, double s)
{
    if (isfinite(s))
        fprintf(f, "<td class=\"n\">%.2f</td>", s * 1e3);
    else
        fputs("<td class=\"n\">-</td>", f);
}

static void
html_head(FILE *f, const clf_bench_shard_report *s)
{
    const clf_bench_report *r = s->hdr;
    size_t i;

    fputs("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" "
          "lang=\"en\">\n<head><meta charset=\"utf-8\"/>"
          "<title>clinformer bench --shard</title>\n<style>"
          "body{font-family:sans-serif;margin:1.5em}"
          "table{border-collapse:collapse;margin:1em 0}"
          "td,th{border:1px solid #ccc;padding:.2em .5em}"
          "td.n{text-align:right;font-variant-numeric:tabular-nums}"
          "</style></head>\n<body>\n<h1>One forward over several devices"
          "</h1>\n<p>",
          f);
    clf_bench_xml_text(f, CLF_BENCH_SHARD_SCHEMA);
    fputs("; clinformer ", f);
    clf_bench_xml_text(f, r->version);
    fputs(", started ", f);
    clf_bench_xml_text(f, r->started);
    fputs(" on ", f);
    clf_bench_xml_text(f, r->host);
    fprintf(f,
            "; host-clock medians of %zu warm forwards, split by "
            "positions</p>\n<p><code>",
            r->repeat);
    clf_bench_xml_text(f, r->command);
    fputs("</code></p>\n<table><tr><th>#</th><th>stable name</th>"
          "<th>platform</th><th>device</th><th>driver</th></tr>\n",
          f);
    for (i = 0; i < r->ndevices; i++) {
        const clf_bench_device *d = &r->devices[i];
        fprintf(f, "<tr><td class=\"n\">%zu</td><td>", i);
        clf_bench_xml_text(f, d->stable_name);
        fputs("</td><td>", f);
        clf_bench_xml_text(f, d->platform);
        fputs("</td><td>", f);
        clf_bench_xml_text(f, d->name);
        fputs("</td><td>", f);
        clf_bench_xml_text(f, d->driver);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void
html_row(FILE *f, const clf_bench_shard_report *s, const clf_bench_shard_row *x)
{
    size_t i;
    double up = speedup(s, x);

    fprintf(f,
            "<tr><td>%s</td><td class=\"n\">%zu</td><td class=\"n\">%zu"
            "</td>",
            mode_name(x), x->n, x->k);
    for (i = 0; i < s->hdr->ndevices; i++)
        td_ms(f, x->alone_s[i]);
    td_ms(f, x->even.wall_s);
    td_ms(f, x->weighted.wall_s);
    fputs("<td>", f);
    for (i = 0; i < s->hdr->ndevices; i++)
        fprintf(f, "%s%.2f", i ? " / " : "", x->weighted.shares[i]);
    fprintf(f, "</td><td class=\"n\">%.1f</td>", x->received_bytes / 1024.0);
    if (isfinite(up))
        fprintf(f, "<td class=\"n\">%.2fx</td>", up);
    else
        fputs("<td class=\"n\">-</td>", f);
    fputs("<td>", f);
    clf_bench_xml_text(f, x->ok ? "ok" : x->note);
    fputs("</td></tr>\n", f);
}

int
clf_bench_shard_html_fwrite(FILE *f, const void *ctx)
{
    const clf_bench_shard_report *s = ctx;
    size_t i;

    html_head(f, s);
    fputs("<table><tr><th>mode</th><th>n</th><th>k</th>", f);
    for (i = 0; i < s->hdr->ndevices; i++)
        fprintf(f, "<th>alone #%zu ms</th>", i);
    fputs("<th>even ms</th><th>weighted ms</th><th>weighted shares</th>"
          "<th>received/layer KiB</th><th>best alone / weighted</th>"
          "<th>status</th></tr>\n",
          f);
    for (i = 0; i < s->nrows; i++)
        html_row(f, s, &s->rows[i]);
    fputs("</table>\n</body>\n</html>\n", f);
    return ferror(f) ? -1 : 0;
}
