/* The bench's HTML report (see html.h).  Every text from the run is
 * escaped; every number that was not measured is shown as "-", and a
 * sentence says what was not measured. */
#define _POSIX_C_SOURCE 200809L

#include "html.h"
#include "output.h"
#include "plot.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char style[] =
    "body{font-family:sans-serif;margin:1.5em;color:#111;max-width:72em}\n"
    "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}\n"
    "table{border-collapse:collapse;margin:.5em 0;font-size:.9em}\n"
    "th,td{border:1px solid #ccc;padding:.2em .5em;text-align:right;"
    "vertical-align:top}\n"
    "th{background:#f2f2f2}td.t,th.t{text-align:left}\n"
    "td.w{overflow-wrap:anywhere;min-width:8em}\n"
    "td.na{color:#888}td.noisy{background:#fff4d6}\n"
    "tr.g th{text-align:center}\n"
    "p.note{color:#444;font-size:.9em}\n"
    "body>svg{display:block;margin:.5em 0;max-width:100%;height:auto}\n"
    "code{font-size:.95em;overflow-wrap:anywhere}\n";

static void
esc(FILE *f, const char *s)
{
    clf_bench_xml_text(f, s);
}

/* A cell with printf-formatted text (escaped). */
static void
td(FILE *f, const char *cls, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (cls != NULL)
        fprintf(f, "<td class=\"%s\">", cls);
    else
        fputs("<td>", f);
    esc(f, buf);
    fputs("</td>", f);
}

/* A number cell, "-" when not measured. */
static void
td_num(FILE *f, const char *fmt, double v)
{
    if (isnan(v) || isinf(v))
        td(f, "na", "-");
    else
        td(f, NULL, fmt, v);
}

static void
th(FILE *f, const char *cls, int span, const char *text)
{
    fprintf(f, "<th");
    if (cls != NULL)
        fprintf(f, " class=\"%s\"", cls);
    if (span > 1)
        fprintf(f, " colspan=\"%d\"", span);
    fputc('>', f);
    esc(f, text);
    fputs("</th>", f);
}

/* Milliseconds of s seconds, three significant digits without an
 * exponent ("-" when not measured). */
static const char *
ms_text(char *buf, size_t len, double s)
{
    double v = s * 1e3;

    if (isnan(v) || isinf(v))
        snprintf(buf, len, "-");
    else if (v >= 100)
        snprintf(buf, len, "%.0f", v);
    else if (v >= 10)
        snprintf(buf, len, "%.1f", v);
    else
        snprintf(buf, len, "%.3g", v);
    return buf;
}

/* A cell of milliseconds. */
static void
td_ms(FILE *f, double s)
{
    char buf[32];

    ms_text(buf, sizeof buf, s);
    td(f, isnan(s) ? "na" : NULL, "%s", buf);
}

/* ---------------------------------------------------------------- run */

static void
meta_row(FILE *f, const char *key, const char *value)
{
    fputs("<tr><th class=\"t\">", f);
    esc(f, key);
    fputs("</th><td class=\"t\">", f);
    esc(f, value);
    fputs("</td></tr>\n", f);
}

static void
fmt_load(char *buf, size_t len, const double l[3])
{
    if (isnan(l[0]))
        snprintf(buf, len, "not recorded");
    else
        snprintf(buf, len, "%.2f %.2f %.2f (1, 5, 15 min)", l[0], l[1], l[2]);
}

static void
html_run(FILE *f, const clf_bench_report *r)
{
    char buf[256];

    fputs("<h2>Run</h2>\n<table>\n", f);
    meta_row(f, "clinformer", r->version);
    meta_row(f, "started (UTC)", r->started);
    meta_row(f, "host", r->host);
    meta_row(f, "command", r->command);
    snprintf(buf, sizeof buf,
             "repeat %zu, budget %.0f s, seed %llu%s; the run took %.1f s",
             r->repeat, r->budget_s, r->seed, r->quick ? ", --quick" : "",
             r->wall_s);
    meta_row(f, "settings", buf);
    fmt_load(buf, sizeof buf, r->load_start);
    meta_row(f, "host load at start", buf);
    fmt_load(buf, sizeof buf, r->load_end);
    meta_row(f, "host load at end", buf);
    fputs("</table>\n", f);
}

/* ------------------------------------------------------------ devices */

static void
device_row(FILE *f, const clf_bench_report *r, size_t i)
{
    const clf_bench_device *d = &r->devices[i];
    char label[64];

    clf_bench_device_label(r, i, label, sizeof label);
    fputs("<tr>", f);
    td(f, "t", "%s%s", label, i == r->baseline ? " (baseline)" : "");
    td(f, "t", "%s", d->platform);
    td(f, "t w", "%s", d->name);
    td(f, "t", "%s", d->driver);
    td(f, "t w", "%s", d->version);
    td(f, NULL, "%s", d->is_gpu ? "yes" : "no");
    td(f, NULL, "%u", d->compute_units);
    td(f, NULL, "%.0f", (double)d->global_mem / 1048576.0);
    td_num(f, "%.4g", d->peak_gflops);
    td_num(f, "%.4g", d->peak_gbps);
    td_num(f, "%.4g", d->h2d_gbps);
    td_num(f, "%.2f", d->build_s);
    fputs("</tr>\n", f);
}

/* The GEMM tuning and kernel choices of each device, long texts. */
static void
html_choices(FILE *f, const clf_bench_report *r)
{
    char label[64];
    size_t i;

    fputs("<table>\n<tr>", f);
    th(f, "t", 1, "device");
    th(f, "t", 1, "GEMM tuning");
    th(f, "t", 1, "kernel choices");
    fputs("</tr>\n", f);
    for (i = 0; i < r->ndevices; i++) {
        const clf_bench_device *d = &r->devices[i];
        clf_bench_device_label(r, i, label, sizeof label);
        fputs("<tr>", f);
        td(f, "t", "%s", label);
        td(f, "t w", "%s", d->tuning[0] ? d->tuning : "CLBlast defaults");
        td(f, "t w", "%s", d->choices[0] ? d->choices : "-");
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void
html_devices(FILE *f, const clf_bench_report *r)
{
    static const char *const heads[] = {"device",
                                        "platform",
                                        "name",
                                        "driver",
                                        "version",
                                        "GPU",
                                        "compute units",
                                        "memory MiB",
                                        "peak GFLOP/s",
                                        "peak GB/s",
                                        "host-to-device GB/s",
                                        "build s"};
    size_t i, peaks = 0;

    fputs("<h2>Devices</h2>\n<table>\n<tr>", f);
    for (i = 0; i < sizeof heads / sizeof heads[0]; i++)
        th(f, i < 5 ? "t" : NULL, 1, heads[i]);
    fputs("</tr>\n", f);
    for (i = 0; i < r->ndevices; i++) {
        device_row(f, r, i);
        peaks += !isnan(r->devices[i].peak_gflops);
    }
    fputs("</table>\n", f);
    html_choices(f, r);
    if (peaks < r->ndevices)
        fputs("<p class=\"note\">A peak shown as - was not measured in this "
              "run: no roof and no % of roofline for that device.</p>\n",
              f);
}

/* ---------------------------------------------------------- comparison */

static int
measured(const clf_bench_result *x)
{
    return x != NULL && x->status == CLF_BENCH_OK && x->wall.runs > 0 &&
           !isnan(x->wall.median);
}

/* Median ms (spread), GFLOP/s and % of roofline of one device's row. */
static void
device_cells(FILE *f, const clf_bench_result *x)
{
    char a[32], b[32], c[32];

    if (x == NULL) {
        fputs("<td class=\"na\" colspan=\"3\">not run</td>", f);
        return;
    }
    if (!measured(x)) {
        fprintf(f, "<td class=\"na\" colspan=\"3\">%s</td>",
                x->status == CLF_BENCH_TOO_LARGE     ? "too large"
                : x->status == CLF_BENCH_OVER_BUDGET ? "over budget"
                                                     : "failed");
        return;
    }
    td(f, x->noisy ? "noisy" : NULL, "%s (%s..%s)%s",
       ms_text(a, sizeof a, x->wall.median), ms_text(b, sizeof b, x->wall.min),
       ms_text(c, sizeof c, x->wall.max), x->noisy ? " noisy" : "");
    td_num(f, "%.3g", x->gflops);
    td_num(f, "%.0f%%", x->roofline_pct);
}

static void
compare_head(FILE *f, const clf_bench_report *r)
{
    char label[64], buf[96];
    size_t d;

    fputs("<tr class=\"g\">", f);
    th(f, NULL, 6, "configuration");
    for (d = 0; d < r->ndevices; d++) {
        clf_bench_device_label(r, d, label, sizeof label);
        th(f, NULL, 3, label);
    }
    if (r->ndevices > 1) {
        clf_bench_device_label(r, r->baseline, label, sizeof label);
        snprintf(buf, sizeof buf, "time / time on %s", label);
        th(f, NULL, (int)r->ndevices - 1, buf);
    }
    fputs("</tr>\n<tr>", f);
    th(f, "t", 1, "mode");
    th(f, NULL, 1, "n");
    th(f, NULL, 1, "k");
    th(f, NULL, 1, "D");
    th(f, NULL, 1, "h");
    th(f, NULL, 1, "B");
    for (d = 0; d < r->ndevices; d++) {
        th(f, NULL, 1, "median ms (min..max)");
        th(f, NULL, 1, "GFLOP/s");
        th(f, NULL, 1, "% of roofline");
    }
    for (d = 0; d < r->ndevices; d++)
        if (d != r->baseline) {
            clf_bench_device_label(r, d, label, sizeof label);
            th(f, NULL, 1, label);
        }
    fputs("</tr>\n", f);
}

static void
compare_row(FILE *f, const clf_bench_report *r, const clf_bench_result *x)
{
    const clf_bench_result *b = clf_bench_report_row_on(r, x, r->baseline);
    char mode[CLF_BENCH_MODE_LABEL];
    size_t d;

    fputs("<tr>", f);
    td(f, "t", "%s", clf_bench_mode_label(x, mode, sizeof mode));
    td(f, NULL, "%zu", x->n);
    td(f, NULL, "%zu", x->k_requested);
    td(f, NULL, "%zu", x->d_model);
    td(f, NULL, "%zu", x->heads);
    td(f, NULL, "%zu", x->batch);
    for (d = 0; d < r->ndevices; d++)
        device_cells(f, clf_bench_report_row_on(r, x, d));
    for (d = 0; d < r->ndevices && r->ndevices > 1; d++) {
        const clf_bench_result *y = clf_bench_report_row_on(r, x, d);
        if (d == r->baseline)
            continue;
        td_num(f, "%.3f",
               measured(y) && measured(b) ? y->wall.median / b->wall.median
                                          : NAN);
    }
    fputs("</tr>\n", f);
}

static void
html_compare(FILE *f, const clf_bench_report *r)
{
    size_t i;

    fputs("<h2>Comparison</h2>\n<p class=\"note\">A row per configuration, "
          "a column group per device: the median of the warm forwards "
          "(host clock) with its spread, GFLOP/s from the counted FLOPs, "
          "and the percent of the device's roofline bound min(peak, "
          "intensity x bandwidth) where the peaks were measured. A ratio "
          "above 1 is slower than the baseline device. Noisy: the spread is "
          "over 10% of the median.</p>\n<table>\n",
          f);
    compare_head(f, r);
    for (i = 0; i < r->nresults; i++)
        if (!clf_bench_report_config_seen(r, i))
            compare_row(f, r, &r->results[i]);
    fputs("</table>\n", f);
}

/* -------------------------------------------------------------- stages */

/* Whether any stage of any row was timed. */
static int
any_stage_time(const clf_bench_report *r)
{
    size_t i;
    int st;

    for (i = 0; i < r->nresults; i++)
        for (st = 0; st < CLF_STAGE_COUNT; st++)
            if (r->results[i].stage[st].runs > 0)
                return 1;
    return 0;
}

static void
stage_row(FILE *f, const clf_bench_report *r, const clf_bench_result *x)
{
    char label[64], ms[32], mode[CLF_BENCH_MODE_LABEL];
    int st;

    clf_bench_device_label(r, x->device, label, sizeof label);
    fputs("<tr>", f);
    td(f, "t", "%s", label);
    td(f, "t", "%s", clf_bench_mode_label(x, mode, sizeof mode));
    td(f, NULL, "%zu", x->n);
    for (st = 0; st < CLF_STAGE_COUNT; st++) {
        const clf_bench_stats *t = &x->stage[st];
        double pct = x->stage_roofline_pct[st];
        ms_text(ms, sizeof ms, t->runs > 0 ? t->median : NAN);
        if (t->runs == 0 || !(t->median > 0))
            td(f, "na", "-");
        else if (isnan(pct))
            td(f, NULL, "%s", ms);
        else
            td(f, NULL, "%s (%.0f%%)", ms, pct);
    }
    fputs("</tr>\n", f);
}

/* Per-stage medians with the percent of the roofline where known. */
static void
html_stages(FILE *f, const clf_bench_report *r)
{
    size_t i;
    int st;

    if (!any_stage_time(r))
        return;
    fputs("<h2>Stages</h2>\n<p class=\"note\">Median device time of each "
          "stage in ms (profiling markers), with the percent of the "
          "stage's roofline bound in parentheses where the peaks and the "
          "stage's intensity are known; - where the stage took no time or "
          "was not timed.</p>\n<table>\n<tr>",
          f);
    th(f, "t", 1, "device");
    th(f, "t", 1, "mode");
    th(f, NULL, 1, "n");
    for (st = 0; st < CLF_STAGE_COUNT; st++)
        th(f, NULL, 1, clf_stage_name((clf_stage)st));
    fputs("</tr>\n", f);
    for (i = 0; i < r->nresults; i++)
        if (measured(&r->results[i]))
            stage_row(f, r, &r->results[i]);
    fputs("</table>\n", f);
}

/* ------------------------------------------------------------- figures */

static void
html_figures(FILE *f, const clf_bench_report *r)
{
    fputs("<h2>Figures</h2>\n", f);
    if (clf_bench_svg_time_panels(r) == 0) {
        fputs("<p class=\"note\">No matrix rows: nothing to plot.</p>\n", f);
        return;
    }
    clf_bench_svg_times(f, r, 0);
    clf_bench_svg_roofline(f, r, 0);
}

static void
html_crossovers(FILE *f, const clf_bench_report *r)
{
    clf_bench_crossing cs[256];
    char label[64];
    size_t i, nc = 0;

    if (clf_bench_report_crossings(r, cs, 256, &nc) != 0 || nc == 0)
        return;
    fputs("<h2>Crossovers</h2>\n<table>\n<tr>", f);
    th(f, "t", 1, "device");
    th(f, "t", 1, "pair");
    th(f, NULL, 1, "D");
    th(f, NULL, 1, "h");
    th(f, NULL, 1, "B");
    th(f, NULL, 1, "k");
    th(f, NULL, 1, "faster from n");
    th(f, NULL, 1, "medians cross near n");
    fputs("</tr>\n", f);
    for (i = 0; i < nc && i < 256; i++) {
        clf_bench_device_label(r, cs[i].device, label, sizeof label);
        fputs("<tr>", f);
        td(f, "t", "%s", label);
        td(f, "t", "%s",
           cs[i].causal ? "causal/causal-full" : "linformer/full");
        td(f, NULL, "%zu", cs[i].d_model);
        td(f, NULL, "%zu", cs[i].heads);
        td(f, NULL, "%zu", cs[i].batch);
        td(f, NULL, "%zu", cs[i].k_requested);
        if (cs[i].n != 0)
            td(f, NULL, "%zu", cs[i].n);
        else
            td(f, "na", "never");
        td_num(f, "%.0f", cs[i].n_estimate);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* ------------------------------------------------------------ accuracy */

static void
accuracy_row(FILE *f, const clf_bench_report *r, const clf_bench_accuracy *a)
{
    char label[64];

    clf_bench_device_label(r, a->device, label, sizeof label);
    fputs("<tr>", f);
    td(f, "t", "%s", label);
    td(f, NULL, "%zu", a->n);
    td(f, NULL, "%zu", a->k);
    td(f, NULL, "%zu/%zu/%zu", a->d_model, a->heads, a->batch);
    td_ms(f, a->linformer.median);
    td_ms(f, a->full.median);
    td_num(f, "%.2fx", a->full.median / a->linformer.median);
    td_num(f, "%.4f", a->rel_error[CLF_BENCH_INIT_LUCIDRAINS]);
    td_num(f, "%.4f", a->rel_error[CLF_BENCH_INIT_FAIRSEQ]);
    td_num(f, "%.4f", a->weight[CLF_BENCH_INIT_LUCIDRAINS].mean_abs);
    td_num(f, "%.4f", a->weight[CLF_BENCH_INIT_FAIRSEQ].mean_abs);
    td_num(f, "%.3f", a->full_weight);
    td(f, "t", "%s%s%s", clf_bench_status_name(a->status),
       a->note[0] ? ": " : "", a->note);
    fputs("</tr>\n", f);
}

static void
html_accuracy(FILE *f, const clf_bench_report *r)
{
    static const char *const heads[] = {"device",
                                        "n",
                                        "k",
                                        "D/h/B",
                                        "Linformer ms",
                                        "full ms",
                                        "speedup",
                                        "rel. error lucidrains",
                                        "rel. error fairseq",
                                        "decisive weight lucidrains",
                                        "decisive weight fairseq",
                                        "decisive weight full",
                                        "status"};
    size_t i;

    fputs("<h2>Accuracy against k</h2>\n", f);
    if (r->naccuracy == 0) {
        fputs("<p class=\"note\">The accuracy study was not run.</p>\n", f);
        return;
    }
    fputs("<p class=\"note\">Relative error of Linformer against full "
          "attention on the same weights and input, with E and F drawn as "
          "lucidrains and as fairseq initialise them; the decisive weight "
          "is the mean absolute weight that reaches a key full attention "
          "weighs at the value in the last column.</p>\n<table>\n<tr>",
          f);
    for (i = 0; i < sizeof heads / sizeof heads[0]; i++)
        th(f, i == 0 || i == 12 ? "t" : NULL, 1, heads[i]);
    fputs("</tr>\n", f);
    for (i = 0; i < r->naccuracy; i++)
        accuracy_row(f, r, &r->accuracy[i]);
    fputs("</table>\n", f);
}

/* Rows not measured, with their notes. */
static void
html_notes(FILE *f, const clf_bench_report *r)
{
    char label[64], mode[CLF_BENCH_MODE_LABEL];
    size_t i, n = 0;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->note[0] == '\0')
            continue;
        if (n++ == 0)
            fputs("<h2>Notes</h2>\n<ul>\n", f);
        clf_bench_device_label(r, x->device, label, sizeof label);
        fprintf(f, "<li>");
        esc(f, label);
        fprintf(f, ", %s n=%zu k=%zu D=%zu h=%zu B=%zu (%s): ",
                clf_bench_mode_label(x, mode, sizeof mode), x->n,
                x->k_requested, x->d_model, x->heads, x->batch,
                clf_bench_status_name(x->status));
        esc(f, x->note);
        fputs("</li>\n", f);
    }
    if (n > 0)
        fputs("</ul>\n", f);
}

/* ------------------------------------------------------------ compared */

/* The row of `in` on device dev with x's configuration, or NULL. */
static const clf_bench_result *
row_on(const clf_bench_report *in, const clf_bench_result *x, long dev)
{
    return dev < 0 ? NULL : clf_bench_report_row_on(in, x, (size_t)dev);
}

/* One line of the comparison: now's row x (or NULL) against base's row y
 * (or NULL); one of them is not NULL. */
static void
compared_row(FILE *f, const clf_bench_report *r, const clf_bench_result *x,
             const clf_bench_report *base, const clf_bench_result *y)
{
    const clf_bench_result *c = x != NULL ? x : y;
    char la[64] = "-", lb[64] = "-";

    if (x != NULL)
        clf_bench_device_label(r, x->device, la, sizeof la);
    if (y != NULL)
        clf_bench_device_label(base, y->device, lb, sizeof lb);
    fputs("<tr>", f);
    td(f, "t", "%s", la);
    td(f, "t", "%s", lb);
    td(f, "t", "%s", clf_bench_mode_name(c->mode));
    td(f, NULL, "%zu", c->n);
    td(f, NULL, "%zu", c->k_requested);
    td(f, NULL, "%zu/%zu/%zu", c->d_model, c->heads, c->batch);
    td_ms(f, measured(y) ? y->wall.median : NAN);
    td_ms(f, measured(x) ? x->wall.median : NAN);
    if (x == NULL || y == NULL)
        td(f, "t", "%s",
           x == NULL ? "only in the baseline" : "only in this run");
    else
        td_num(f, "%.3f",
               measured(x) && measured(y) ? x->wall.median / y->wall.median
                                          : NAN);
    fputs("</tr>\n", f);
}

static void
compared_head(FILE *f, const clf_bench_report *base)
{
    static const char *const heads[] = {
        "device now", "device then", "mode",   "n",           "k",
        "D/h/B",      "baseline ms", "now ms", "now/baseline"};
    size_t i;

    fputs("<h2>Compared with an earlier run</h2>\n<p class=\"note\">The "
          "baseline: ",
          f);
    esc(f, base->command);
    fputs(", started ", f);
    esc(f, base->started);
    fputs(" on ", f);
    esc(f, base->host);
    fputs(". Devices are paired by stable name, else by platform, name and "
          "driver, else by position; rows by mode, n, k, D, h and B. Above "
          "1 is slower now.</p>\n<table>\n<tr>",
          f);
    for (i = 0; i < sizeof heads / sizeof heads[0]; i++)
        th(f, i < 3 ? "t" : NULL, 1, heads[i]);
    fputs("</tr>\n", f);
}

static int
html_compared(FILE *f, const clf_bench_report *r, const clf_bench_report *base)
{
    long *pair = malloc((r->ndevices + 1) * sizeof *pair);
    size_t i, d;

    if (pair == NULL || clf_bench_compare_devices(r, base, pair) != 0) {
        free(pair);
        return -1;
    }
    compared_head(f, base);
    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        compared_row(f, r, x, base, row_on(base, x, pair[x->device]));
    }
    for (i = 0; i < base->nresults; i++) {
        const clf_bench_result *y = &base->results[i];
        for (d = 0; d < r->ndevices; d++)
            if (pair[d] == (long)y->device &&
                clf_bench_report_row_on(r, y, d) != NULL)
                break;
        if (d == r->ndevices)
            compared_row(f, r, NULL, base, y);
    }
    fputs("</table>\n", f);
    free(pair);
    return 0;
}

int
clf_bench_html_write(FILE *f, const clf_bench_report *r)
{
    return clf_bench_html_write_compared(f, r, NULL);
}

int
clf_bench_html_write_compared(FILE *f, const clf_bench_report *r,
                              const clf_bench_report *base)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
          "<meta charset=\"utf-8\"/>\n<title>clinformer bench, ",
          f);
    esc(f, r->host);
    fputs(", ", f);
    esc(f, r->started);
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", style);
    fputs("<h1>clinformer bench</h1>\n", f);
    html_run(f, r);
    html_devices(f, r);
    if (r->nresults > 0)
        html_compare(f, r);
    if (base != NULL && base->nresults > 0 && r->nresults > 0 &&
        html_compared(f, r, base) != 0)
        return -1;
    html_figures(f, r);
    html_stages(f, r);
    html_crossovers(f, r);
    html_accuracy(f, r);
    html_notes(f, r);
    fputs("</body>\n</html>\n", f);
    return ferror(f) ? -1 : 0;
}
