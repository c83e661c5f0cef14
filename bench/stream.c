/* clinformer bench --stream (bench/stream.h): one layer streamed position
 * by position against the whole causal forward over each prefix. */
#include "stream.h"
#include "json.h"
#include "plot.h"
#include "run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The layer: max_seq_len the largest n, k a multiple of its blocks (at
 * least the requested k's share, one slot a block at the least). */
static void
stream_shape(const struct clf_bench_options *o, size_t *N, size_t *k)
{
    const size_t b = o->stream_block;
    size_t blocks, c;

    *N = o->n[o->nn - 1];
    blocks = (*N + b - 1) / b;
    c = o->k[0] / blocks > 0 ? o->k[0] / blocks : 1;
    *k = c * blocks;
}

static void
row_init(clf_bench_stream_row *x, const struct clf_bench_options *o, size_t n,
         size_t N, size_t k)
{
    memset(x, 0, sizeof *x);
    x->n = n;
    x->k = k;
    x->k_requested = o->k[0];
    x->block = o->stream_block;
    x->max_seq_len = N;
    x->d_model = o->d[0];
    x->heads = o->h[0];
    x->batch = o->b[0];
    x->status = CLF_BENCH_OVER_BUDGET;
    x->append_median_ms = x->append_max_ms = x->prefix_ms = NAN;
}

static int
add_device(FILE *t, clf_context *ctx, clf_bench_report *hdr)
{
    clf_device_info info;
    clf_bench_device *d;

    clf_context_device_info(ctx, &info);
    fprintf(t, "  device: %s (%s / %s)\n", info.stable_name, info.platform,
            info.name);
    if ((d = clf_bench_report_add_device(hdr)) == NULL)
        return -1;
    clf_bench_device_describe(d, &info);
    return 0;
}

/* Median ms of `repeat` whole causal forwards over n positions (after one
 * untimed); NaN on failure (the note says why). */
static double
prefix_ms(clf_attention *att, const float *x, float *y, size_t B, size_t n,
          size_t repeat, clf_bench_stream_row *row)
{
    double t[CLF_BENCH_MAX_REPEAT], t0;
    clf_forward_opts fo;
    size_t r;

    memset(&fo, 0, sizeof fo);
    fo.causal = 1;
    for (r = 0; r <= repeat; r++) {
        t0 = clf_bench_now();
        if (clf_attention_forward_ex(att, x, B, n, y, &fo) != 0) {
            snprintf(row->note, sizeof row->note, "whole forward: %s",
                     clf_last_error());
            return NAN;
        }
        if (r > 0)
            t[r - 1] = (clf_bench_now() - t0) * 1e3;
    }
    qsort(t, repeat, sizeof *t, cmp_double);
    return t[repeat / 2];
}

/* The appends' figures over the block before n. */
static void
window(const double *lat_ms, size_t n, size_t chunk, size_t block,
       clf_bench_stream_row *row)
{
    const size_t last = (n - 1) / chunk;
    size_t cnt = (block + chunk - 1) / chunk, i;
    double w[4096];

    if (cnt > last + 1)
        cnt = last + 1;
    if (cnt > sizeof w / sizeof *w)
        cnt = sizeof w / sizeof *w;
    for (i = 0; i < cnt; i++)
        w[i] = lat_ms[last + 1 - cnt + i];
    qsort(w, cnt, sizeof *w, cmp_double);
    row->append_median_ms = w[cnt / 2];
    row->append_max_ms = w[cnt - 1];
}

struct stream_job {
    const struct clf_bench_options *o;
    FILE *t;
    clf_attention *att;
    clf_stream *st;
    float *x, *y, *xc, *yc;
    double *lat;
    size_t B, N, D, chunk;
    double t_end;
};

/* Appends up to position `to`, recording each append's latency; 0, -1 on
 * failure (note), 1 when the budget ran out. */
static int
stream_to(struct stream_job *j, size_t *pos, size_t to,
          clf_bench_stream_row *row)
{
    size_t m, b;
    double t0;

    while (*pos < to) {
        if (clf_bench_now() > j->t_end)
            return 1;
        m = to - *pos < j->chunk ? to - *pos : j->chunk;
        for (b = 0; b < j->B; b++)
            memcpy(j->xc + b * m * j->D, j->x + (b * j->N + *pos) * j->D,
                   m * j->D * sizeof *j->xc);
        t0 = clf_bench_now();
        if (clf_stream_append(j->st, j->xc, j->B, m, NULL, j->yc) != 0) {
            snprintf(row->note, sizeof row->note, "append at %zu: %s", *pos,
                     clf_last_error());
            return -1;
        }
        j->lat[*pos / j->chunk] = (clf_bench_now() - t0) * 1e3;
        *pos += m;
    }
    return 0;
}

static int
run_rows(struct stream_job *j, clf_bench_stream_report *s)
{
    clf_stream_info si;
    size_t i, pos = 0;
    int rc = 0, failed = 0;

    fprintf(j->t, "%8s %6s %6s %14s %12s %14s %12s %8s\n", "n", "k", "block",
            "append med ms", "append max", "per position", "prefix ms",
            "state KiB");
    for (i = 0; i < s->nrows; i++) {
        clf_bench_stream_row *row = &s->rows[i];

        if (rc == 0)
            rc = stream_to(j, &pos, row->n, row);
        if (rc != 0) {
            row->status = rc > 0 ? CLF_BENCH_OVER_BUDGET : CLF_BENCH_FAILED;
            failed |= rc < 0;
            fprintf(j->t, "%8zu %s\n", row->n,
                    rc > 0 ? "over budget" : row->note);
            continue;
        }
        window(j->lat, row->n, j->chunk, row->block, row);
        clf_stream_info_get(j->st, &si);
        row->state_bytes = si.state_bytes;
        row->prefix_ms =
            prefix_ms(j->att, j->x, j->y, j->B, row->n, j->o->repeat, row);
        row->status = isnan(row->prefix_ms) ? CLF_BENCH_FAILED : CLF_BENCH_OK;
        failed |= row->status != CLF_BENCH_OK;
        fprintf(j->t, "%8zu %6zu %6zu %14.3f %12.3f %14.4f %12.3f %8.1f\n",
                row->n, row->k, row->block, row->append_median_ms,
                row->append_max_ms, row->append_median_ms / (double)j->chunk,
                row->prefix_ms, (double)row->state_bytes / 1024.0);
    }
    return failed;
}

static int
make_layer(struct stream_job *j, clf_context *ctx, size_t N, size_t k)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = j->D;
    d.heads = j->o->h[0];
    d.max_seq_len = N;
    d.k = k;
    d.causal_block = j->o->stream_block;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    if (clf_attention_create(&j->att, ctx, &d) != 0 ||
        clf_attention_randomize(j->att, j->o->seed) != 0 ||
        clf_stream_create_attention(&j->st, j->att, j->B) != 0)
        return -1;
    return 0;
}

static int
alloc_job(struct stream_job *j)
{
    size_t i, rows = j->B * j->N;
    unsigned long long st = j->o->seed * 2654435761ULL + 1;

    j->x = malloc(rows * j->D * sizeof *j->x);
    j->y = malloc(rows * j->D * sizeof *j->y);
    j->xc = malloc(j->B * j->chunk * j->D * sizeof *j->xc);
    j->yc = malloc(j->B * j->chunk * j->D * sizeof *j->yc);
    j->lat = malloc((j->N / j->chunk + 1) * sizeof *j->lat);
    if (!j->x || !j->y || !j->xc || !j->yc || !j->lat)
        return -1;
    for (i = 0; i < rows * j->D; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        j->x[i] =
            (float)((double)(st >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
    }
    return 0;
}

static void
free_job(struct stream_job *j)
{
    clf_stream_destroy(j->st);
    clf_attention_destroy(j->att);
    free(j->x);
    free(j->y);
    free(j->xc);
    free(j->yc);
    free(j->lat);
}

int
clf_bench_stream(const struct clf_bench_options *o, FILE *t,
                 clf_bench_report *hdr, clf_bench_stream_report *s)
{
    struct stream_job j;
    clf_context *ctx = NULL;
    size_t i, N, k;
    int rc = 0;
    double t0 = clf_bench_now();

    memset(&j, 0, sizeof j);
    j.o = o;
    j.t = t;
    j.B = o->b[0];
    j.D = o->d[0];
    j.chunk = o->stream_chunk;
    j.t_end = t0 + o->budget;
    s->hdr = hdr;
    s->chunk = j.chunk;
    stream_shape(o, &N, &k);
    j.N = N;
    if (clf_context_create(&ctx, o->device) != 0) {
        fprintf(stderr, "%s: %s\n", o->prog, clf_last_error());
        return 1;
    }
    s->rows = calloc(o->nn, sizeof *s->rows);
    if (s->rows == NULL || alloc_job(&j) != 0) {
        fprintf(stderr, "%s: out of host memory\n", o->prog);
        rc = 1;
    }
    fprintf(t,
            "a prefix-safe causal Linformer layer streamed %zu position%s an "
            "append up to %zu (B %zu, D %zu, h %zu, k %zu, block %zu), "
            "against the whole causal forward over each prefix (median of "
            "%zu)\n",
            j.chunk, j.chunk == 1 ? "" : "s", N, j.B, j.D, o->h[0], k,
            o->stream_block, o->repeat);
    if (rc == 0 && add_device(t, ctx, hdr) != 0) {
        fprintf(stderr, "%s: out of host memory\n", o->prog);
        rc = 1;
    }
    if (rc == 0 && make_layer(&j, ctx, N, k) != 0) {
        fprintf(stderr, "%s: the layer: %s\n", o->prog, clf_last_error());
        rc = 1;
    }
    for (i = 0; rc == 0 && i < o->nn; i++)
        row_init(&s->rows[s->nrows++], o, o->n[i], N, k);
    if (rc == 0)
        rc = run_rows(&j, s);
    free_job(&j);
    clf_context_destroy(ctx);
    hdr->wall_s = clf_bench_now() - t0;
    return rc;
}

/* ------------------------------------------------------------- files */

static json_t *
row_to_json(const clf_bench_stream_report *s, const clf_bench_stream_row *x)
{
    return json_pack(
        "{s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:s, s:s, "
        "s:{s:o, s:o}, s:o, s:o, s:o}",
        "config", "n", (json_int_t)x->n, "k", (json_int_t)x->k, "k_requested",
        (json_int_t)x->k_requested, "block", (json_int_t)x->block,
        "max_seq_len", (json_int_t)x->max_seq_len, "d_model",
        (json_int_t)x->d_model, "heads", (json_int_t)x->heads, "batch",
        (json_int_t)x->batch, "status", clf_bench_status_name(x->status),
        "note", x->note, "append_ms", "median",
        clf_bench_json_num(x->append_median_ms), "max",
        clf_bench_json_num(x->append_max_ms), "per_position_ms",
        clf_bench_json_num(x->append_median_ms / (double)s->chunk), "prefix_ms",
        clf_bench_json_num(x->prefix_ms), "state_bytes",
        x->status == CLF_BENCH_OK ? json_integer((json_int_t)x->state_bytes)
                                  : json_null());
}

static json_t *
stream_to_json(const clf_bench_stream_report *s)
{
    const clf_bench_report *r = s->hdr;
    const clf_bench_device *d = r->ndevices ? &r->devices[0] : NULL;
    json_t *res = json_array(), *dev;
    size_t i;
    int bad = res == NULL;

    for (i = 0; !bad && i < s->nrows; i++)
        bad = json_array_append_new(res, row_to_json(s, &s->rows[i])) != 0;
    dev = d == NULL ? json_null()
                    : json_pack("{s:s, s:s, s:s, s:s, s:b, s:s}", "platform",
                                d->platform, "device", d->name, "driver",
                                d->driver, "version", d->version, "is_gpu",
                                d->is_gpu, "stable_name", d->stable_name);
    if (bad || dev == NULL) {
        json_decref(res);
        json_decref(dev);
        return NULL;
    }
    return json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I}, s:o, s:o, "
        "s:o}",
        "schema", CLF_BENCH_STREAM_SCHEMA, "clinformer_version", r->version,
        "started", r->started, "host", r->host, "command", r->command,
        "settings", "repeat", (json_int_t)r->repeat, "seed",
        (json_int_t)r->seed, "chunk", (json_int_t)s->chunk, "wall_s",
        clf_bench_json_num(r->wall_s), "device", dev, "results", res);
}

int
clf_bench_stream_json_fwrite(FILE *f, const void *ctx)
{
    return clf_bench_json_dump(f, stream_to_json(ctx));
}

static void
csv_num(FILE *f, double v, const char *end)
{
    if (isfinite(v))
        fprintf(f, "%.6g%s", v, end);
    else
        fprintf(f, "%s", end);
}

int
clf_bench_stream_csv_fwrite(FILE *f, const void *ctx)
{
    const clf_bench_stream_report *s = ctx;
    size_t i;

    fputs("n,k,block,max_seq_len,d_model,heads,batch,chunk,status,"
          "append_median_ms,append_max_ms,per_position_ms,prefix_ms,"
          "state_bytes\n",
          f);
    for (i = 0; i < s->nrows; i++) {
        const clf_bench_stream_row *x = &s->rows[i];
        fprintf(f, "%zu,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%s,", x->n, x->k, x->block,
                x->max_seq_len, x->d_model, x->heads, x->batch, s->chunk,
                clf_bench_status_name(x->status));
        csv_num(f, x->append_median_ms, ",");
        csv_num(f, x->append_max_ms, ",");
        csv_num(f, x->append_median_ms / (double)s->chunk, ",");
        csv_num(f, x->prefix_ms, ",");
        if (x->status == CLF_BENCH_OK)
            fprintf(f, "%zu", x->state_bytes);
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

/* Both times against n on log-log axes, 480 x 240. */
static void
figure(FILE *f, const clf_bench_stream_report *s)
{
    double lo = INFINITY, hi = -INFINITY, nlo, nhi;
    size_t i, w;

    if (s->nrows == 0)
        return;
    nlo = log10((double)s->rows[0].n);
    nhi = log10((double)s->rows[s->nrows - 1].n);
    for (i = 0; i < s->nrows; i++) {
        const clf_bench_stream_row *x = &s->rows[i];
        if (x->status != CLF_BENCH_OK)
            continue;
        lo = fmin(lo, log10(x->append_median_ms));
        hi = fmax(hi, log10(x->prefix_ms));
    }
    if (!(hi > lo) || !(nhi > nlo))
        return;
    fputs("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"520\" "
          "height=\"280\"><rect x=\"40\" y=\"10\" width=\"480\" "
          "height=\"240\" fill=\"none\" stroke=\"#999\"/>\n",
          f);
    for (w = 0; w < 2; w++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" points=\"",
                w ? "#c33" : "#36c");
        for (i = 0; i < s->nrows; i++) {
            const clf_bench_stream_row *x = &s->rows[i];
            double v = w ? x->prefix_ms : x->append_median_ms;
            if (x->status != CLF_BENCH_OK)
                continue;
            fprintf(f, "%.1f,%.1f ",
                    40 + 480 * (log10((double)x->n) - nlo) / (nhi - nlo),
                    250 - 240 * (log10(v) - lo) / (hi - lo));
        }
        fputs("\"/>\n", f);
    }
    fprintf(f,
            "<text x=\"45\" y=\"270\" font-size=\"11\">n %zu .. %zu (log)"
            "</text><text x=\"45\" y=\"25\" font-size=\"11\" fill=\"#c33\">"
            "whole causal forward over the prefix</text><text x=\"45\" "
            "y=\"40\" font-size=\"11\" fill=\"#36c\">one append (median "
            "over a block)</text><text x=\"300\" y=\"270\" "
            "font-size=\"11\">ms %.3g .. %.3g (log)</text></svg>\n",
            s->rows[0].n, s->rows[s->nrows - 1].n, pow(10, lo), pow(10, hi));
}

int
clf_bench_stream_html_fwrite(FILE *f, const void *ctx)
{
    const clf_bench_stream_report *s = ctx;
    const clf_bench_report *r = s->hdr;
    size_t i;

    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"/>"
          "<title>clinformer bench --stream</title>\n<style>"
          "body{font-family:sans-serif;margin:1.5em}"
          "table{border-collapse:collapse;margin:1em 0}"
          "td,th{border:1px solid #ccc;padding:.2em .5em}"
          "td.n{text-align:right;font-variant-numeric:tabular-nums}"
          "</style></head>\n<body>\n<h1>A causal Linformer layer as a stream"
          "</h1>\n<p>",
          f);
    clf_bench_xml_text(f, CLF_BENCH_STREAM_SCHEMA);
    fputs("; clinformer ", f);
    clf_bench_xml_text(f, r->version);
    fputs(", started ", f);
    clf_bench_xml_text(f, r->started);
    fputs(" on ", f);
    clf_bench_xml_text(f, r->host);
    if (r->ndevices > 0) {
        fputs("; device ", f);
        clf_bench_xml_text(f, r->devices[0].stable_name);
        fputs(" (", f);
        clf_bench_xml_text(f, r->devices[0].name);
        fputs(")", f);
    }
    fprintf(f, "; %zu position(s) an append</p>\n<p><code>", s->chunk);
    clf_bench_xml_text(f, r->command);
    fputs("</code></p>\n", f);
    figure(f, s);
    fputs("<table><tr><th>n</th><th>k</th><th>block</th><th>append median "
          "ms</th><th>append max ms</th><th>whole prefix ms</th>"
          "<th>state KiB</th><th>status</th></tr>\n",
          f);
    for (i = 0; i < s->nrows; i++) {
        const clf_bench_stream_row *x = &s->rows[i];
        fprintf(f,
                "<tr><td class=\"n\">%zu</td><td class=\"n\">%zu</td>"
                "<td class=\"n\">%zu</td><td class=\"n\">%.3f</td>"
                "<td class=\"n\">%.3f</td><td class=\"n\">%.3f</td>"
                "<td class=\"n\">%.1f</td><td>",
                x->n, x->k, x->block, x->append_median_ms, x->append_max_ms,
                x->prefix_ms, (double)x->state_bytes / 1024.0);
        clf_bench_xml_text(f, x->status == CLF_BENCH_OK ? "ok"
                              : x->note[0]              ? x->note
                                           : clf_bench_status_name(x->status));
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n</body>\n</html>\n", f);
    return ferror(f) ? -1 : 0;
}
