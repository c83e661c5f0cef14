/* The bench's SVG figures (see plot.h): median time against n with every
 * device on each mode's panel, and a roofline per device.  Each panel is a
 * nested <svg> with its own coordinates, so that nothing drawn for one
 * panel can spill into another. */
#define _POSIX_C_SOURCE 200809L

#include "plot.h"
#include "output.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- text */

void
clf_bench_xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* Advance of one character in ems, above DejaVu Sans (the widest common
 * default sans-serif) for every ASCII character. */
static double
glyph_em(unsigned char c)
{
    if (c >= 0x80)
        return (c & 0xC0) == 0x80 ? 0.0 : 1.0; /* one per UTF-8 character */
    if (strchr("il.,:;'|", c))
        return 0.36;
    if (strchr("ftrjI ()[]-/\\!", c))
        return 0.46;
    if (strchr("mwMW@%", c))
        return 1.05;
    if (c >= 'A' && c <= 'Z')
        return 0.82;
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
        return 0.66;
    return 0.88;
}

double
clf_bench_text_width(const char *s, double size, int bold)
{
    double em = 0;

    for (; *s; s++)
        em += glyph_em((unsigned char)*s);
    return em * size * (bold ? 1.12 : 1.0);
}

void
clf_bench_fit_text(char *out, size_t len, const char *s, double size, int bold,
                   double max_w)
{
    size_t n;

    snprintf(out, len, "%s", s);
    if (clf_bench_text_width(out, size, bold) <= max_w)
        return;
    for (n = strlen(out); n > 0; n--) {
        if (((unsigned char)out[n] & 0xC0) == 0x80)
            continue; /* not inside a UTF-8 character */
        out[n] = '\0';
        if (n + 4 <= len)
            strcpy(out + n, "...");
        if (clf_bench_text_width(out, size, bold) <= max_w)
            return;
        out[n] = '\0';
    }
    out[0] = '\0';
}

/* Writes a <text> element with s fitted to max_w. */
static void
svg_text(FILE *f, double x, double y, double size, int bold, const char *anchor,
         const char *fill, const char *s, double max_w)
{
    char fit[512];

    clf_bench_fit_text(fit, sizeof fit, s, size, bold, max_w);
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%g\"%s "
            "text-anchor=\"%s\" fill=\"%s\">",
            x, y, size, bold ? " font-weight=\"bold\"" : "", anchor, fill);
    clf_bench_xml_text(f, fit);
    fputs("</text>\n", f);
}

/* Greedy word wrap of s into lines at most max_w wide; writes them (when f
 * is not NULL) from baseline y, line apart.  Returns the number of lines. */
static size_t
svg_paragraph(FILE *f, double x, double y, double size, double line,
              const char *s, double max_w)
{
    char cur[512], word[256];
    size_t lines = 0, cl = 0, wl;
    double cw = 0, ww, sp = clf_bench_text_width(" ", size, 0);

    while (*s) {
        wl = strcspn(s, " ");
        snprintf(word, sizeof word, "%.*s", (int)wl, s);
        s += wl + (s[wl] == ' ');
        wl = strlen(word);
        ww = clf_bench_text_width(word, size, 0);
        if (cl > 0 && cw + sp + ww > max_w) {
            if (f != NULL)
                svg_text(f, x, y + line * (double)lines, size, 0, "start",
                         "#222", cur, max_w);
            lines++;
            cl = 0;
            cw = 0;
        }
        if (cl + wl + 2 > sizeof cur)
            continue;
        if (cl > 0) {
            cur[cl++] = ' ';
            cw += sp;
        }
        memcpy(cur + cl, word, wl + 1);
        cl += wl;
        cw += ww;
    }
    if (cl > 0 && f != NULL)
        svg_text(f, x, y + line * (double)lines, size, 0, "start", "#222", cur,
                 max_w);
    return lines + (cl > 0);
}

void
clf_bench_device_label(const clf_bench_report *r, size_t i, char *out,
                       size_t len)
{
    if (i < r->ndevices && r->devices[i].stable_name[0] != '\0')
        snprintf(out, len, "%s", r->devices[i].stable_name);
    else
        snprintf(out, len, "device %zu", i);
}

/* ----------------------------------------------------------------- axes */

#define COL_W 410.0 /* two panels side by side */
#define PANEL_H 300.0
#define ROOF_H 336.0
#define BOX_L 64.0 /* plot box inside a panel */
#define BOX_T 42.0
#define BOX_W 326.0
#define BOX_H 206.0
#define MARGIN 12.0

static const char *const device_colors[] = {"#1f77b4", "#d62728", "#2ca02c",
                                            "#ff7f0e", "#9467bd", "#8c564b",
                                            "#e377c2", "#17becf"};
#define NCOLORS (sizeof device_colors / sizeof device_colors[0])

static const char *const stage_colors[CLF_STAGE_COUNT] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
    "#9467bd", "#8c564b", "#17becf"};

/* Device i's colour, and a dash pattern once the colours are used up. */
static const char *
dev_color(size_t i)
{
    return device_colors[i % NCOLORS];
}

static const char *
dev_dash(size_t i)
{
    static const char *const dash[] = {"", " stroke-dasharray=\"6,3\"",
                                       " stroke-dasharray=\"2,2\""};
    return dash[(i / NCOLORS) % 3];
}

/* log10 ranges of both axes. */
struct scale {
    double x0, x1, y0, y1;
};

/* A value of 0 or below (from a hostile file), off a log axis, sits on
 * the box's left or lower edge rather than at -inf; an infinite one on
 * the right or upper edge. */
static double
px(const struct scale *s, double v)
{
    if (!(v > 0))
        return BOX_L;
    if (isinf(v))
        return BOX_L + BOX_W;
    return BOX_L + (log10(v) - s->x0) / (s->x1 - s->x0) * BOX_W;
}

static double
py(const struct scale *s, double v)
{
    if (!(v > 0))
        return BOX_T + BOX_H;
    if (isinf(v))
        return BOX_T;
    return BOX_T + BOX_H - (log10(v) - s->y0) / (s->y1 - s->y0) * BOX_H;
}

/* log10 of the largest 1, 2 or 5 times a power of ten at or below v, and
 * of the smallest at or above it: the plot's range ends on a grid line. */
static double
nice_below(double v)
{
    double e = floor(log10(v)), p = pow(10.0, e);

    return v >= 5 * p ? log10(5 * p) : v >= 2 * p ? log10(2 * p) : e;
}

static double
nice_above(double v)
{
    double e = floor(log10(v)), p = pow(10.0, e);

    if (v <= p * (1 + 1e-12))
        return e;
    return v <= 2 * p ? log10(2 * p) : v <= 5 * p ? log10(5 * p) : e + 1;
}

/* Sets a range from the smallest and largest positive values seen (or
 * lo..hi when none was), ending on grid lines, at least `span` decades. */
static void
nice_range(double vmin, double vmax, double lo, double hi, double span,
           double *a0, double *a1)
{
    if (!(vmax > 0) || !(vmin > 0) || isinf(vmax)) {
        vmin = lo;
        vmax = hi;
    }
    *a0 = nice_below(vmin);
    *a1 = nice_above(vmax);
    if (*a1 - *a0 < span) {
        double mid = (*a0 + *a1) / 2;
        *a0 = nice_below(pow(10.0, mid - span / 2));
        *a1 = nice_above(pow(10.0, mid + span / 2));
    }
}

/* Writes "%g" of v into buf, short. */
static void
tick_label(char *buf, size_t len, double v)
{
    if (v >= 1e5 || v < 1e-3)
        snprintf(buf, len, "%.0e", v);
    else
        snprintf(buf, len, "%g", v);
}

/* y grid at 1, 2 and 5 of each decade (labels only where they do not
 * collide), the frame, and the rotated y label. */
static void
svg_ygrid(FILE *f, const struct scale *s, const char *label)
{
    static const double sub[] = {1, 2, 5};
    double e, last = INFINITY;
    char buf[32];
    int k;

    for (e = floor(s->y0); e < s->y1 + 1e-9; e += 1.0)
        for (k = 0; k < 3; k++) {
            double v = sub[k] * pow(10.0, e), y;
            if (log10(v) < s->y0 - 1e-9 || log10(v) > s->y1 + 1e-9)
                continue;
            y = py(s, v);
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                    "stroke=\"%s\"/>\n",
                    BOX_L, y, BOX_L + BOX_W, y, k == 0 ? "#bbb" : "#e8e8e8");
            if (last - y < 13)
                continue;
            last = y;
            tick_label(buf, sizeof buf, v);
            svg_text(f, BOX_L - 5, y + 4, 10, 0, "end", "#222", buf, BOX_L - 8);
        }
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
            "fill=\"none\" stroke=\"#000\"/>\n",
            BOX_L, BOX_T, BOX_W, BOX_H);
    fprintf(f,
            "<text x=\"14\" y=\"%.1f\" font-size=\"11\" "
            "transform=\"rotate(-90 14 %.1f)\" text-anchor=\"middle\" "
            "fill=\"#222\">%s</text>\n",
            BOX_T + BOX_H / 2, BOX_T + BOX_H / 2, label);
}

/* A vertical grid line with its label at x = v, unless the label would
 * overlap the one before (*last: its right edge). */
static void
svg_xtick(FILE *f, const struct scale *s, double v, double *last)
{
    char buf[32];
    double x = px(s, v), w;

    tick_label(buf, sizeof buf, v);
    w = clf_bench_text_width(buf, 10, 0);
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke=\"#e8e8e8\"/>\n",
            x, BOX_T, x, BOX_T + BOX_H);
    if (x - w / 2 < *last + 4 || x + w / 2 > COL_W - 2)
        return;
    *last = x + w / 2;
    svg_text(f, x, BOX_T + BOX_H + 14, 10, 0, "middle", "#222", buf, w + 1);
}

/* Opens a nested <svg> for a panel at (x, y) of the figure. */
static void
panel_open(FILE *f, double x, double y, double h, const char *kind)
{
    fprintf(f,
            "<svg class=\"panel %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
            "height=\"%.1f\" viewBox=\"0 0 %.1f %.1f\">\n",
            kind, x, y, COL_W, h, COL_W, h);
}

/* ------------------------------------------------------------- times */

static int
row_ran(const clf_bench_result *x)
{
    return x->status == CLF_BENCH_OK && x->wall.runs > 0 && x->wall.median > 0;
}

/* Rows share a time panel: the same mode and (D, h, B, k). */
static int
same_group(const clf_bench_result *a, const clf_bench_result *b)
{
    return a->d_model == b->d_model && a->heads == b->heads &&
           a->batch == b->batch && a->k_requested == b->k_requested;
}

/* The first row of each panel, in order: groups as they first appear, and
 * in each the modes in their order.  Returns the count (out may be
 * NULL). */
static size_t
time_panels(const clf_bench_report *r, size_t *out)
{
    size_t i, j, count = 0;
    int m;

    for (i = 0; i < r->nresults; i++) {
        for (j = 0; j < i && !same_group(&r->results[j], &r->results[i]); j++)
            ;
        if (j < i)
            continue; /* group seen */
        for (m = 0; m < CLF_BENCH_MODE_COUNT; m++)
            for (j = i; j < r->nresults; j++)
                if ((int)r->results[j].mode == m &&
                    same_group(&r->results[j], &r->results[i])) {
                    if (out != NULL)
                        out[count] = j;
                    count++;
                    break;
                }
    }
    return count;
}

size_t
clf_bench_svg_time_panels(const clf_bench_report *r)
{
    return time_panels(r, NULL);
}

/* The legend note under the device list. */
static const char times_note[] =
    "Whiskers: min..max of the warm runs. A cross on the lower edge: not "
    "run at that n (too large, over budget or failed). A dashed vertical "
    "line: the crossover n from which Linformer (causal) is faster than "
    "full (causal-full) attention on that device.";

static const char times_title[] =
    "Median time of one forward against n, log-log; every panel has the "
    "same scales";

/* Height of the header: title, one legend line per device, the note. */
static double
times_header(FILE *f, const clf_bench_report *r)
{
    double y = 22, w = CLF_BENCH_FIG_W - 2 * MARGIN;
    char label[64], line[512];
    size_t d;

    if (f != NULL)
        svg_text(f, MARGIN, y, 14, 1, "start", "#000", times_title, w);
    y += 20;
    for (d = 0; d < r->ndevices; d++, y += 18) {
        const clf_bench_device *dv = &r->devices[d];
        if (f == NULL)
            continue;
        clf_bench_device_label(r, d, label, sizeof label);
        snprintf(line, sizeof line, "%s: %s / %s (driver %s)", label,
                 dv->platform, dv->name, dv->driver);
        fprintf(f,
                "<g class=\"legend-device\">"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"%s\" stroke-width=\"2\"%s/>\n"
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                MARGIN, y - 4, MARGIN + 26, y - 4, dev_color(d), dev_dash(d),
                MARGIN + 13, y - 4, dev_color(d));
        svg_text(f, MARGIN + 34, y, 12, 0, "start", "#000", line, w - 34);
        fputs("</g>\n", f);
    }
    y += 2;
    return y + 14 * svg_paragraph(f, MARGIN, y, 11, 14, times_note, w) + 4;
}

/* The crossovers, one line each, under the panels. */
static size_t
times_footer(FILE *f, const clf_bench_report *r, double y)
{
    clf_bench_crossing *cs = NULL;
    size_t i, nc = 0, lines = 0;
    char label[64], line[512];

    if (clf_bench_report_crossings(r, NULL, 0, &nc) != 0 || nc == 0 ||
        (cs = malloc(nc * sizeof *cs)) == NULL ||
        clf_bench_report_crossings(r, cs, nc, &nc) != 0) {
        free(cs);
        return 0;
    }
    for (i = 0; i < nc; i++, lines++) {
        const clf_bench_crossing *c = &cs[i];
        const char *who = c->causal ? "causal" : "Linformer";
        const char *ref = c->causal ? "causal-full" : "full";
        int w;
        if (f == NULL)
            continue;
        clf_bench_device_label(r, c->device, label, sizeof label);
        w = snprintf(line, sizeof line, "%s, D=%zu h=%zu B=%zu k=%zu: ", label,
                     c->d_model, c->heads, c->batch, c->k_requested);
        if (c->n == 0)
            snprintf(line + w, sizeof line - (size_t)w,
                     "%s never faster than %s (%zu lengths measured)", who, ref,
                     c->points);
        else
            snprintf(line + w, sizeof line - (size_t)w,
                     "crossover n = %zu: %s faster than %s from there on", c->n,
                     who, ref);
        if (c->n != 0 && !isnan(c->n_estimate))
            snprintf(line + strlen(line), sizeof line - strlen(line),
                     " (medians cross near %.0f)", c->n_estimate);
        svg_text(f, MARGIN, y + 15.0 * lines, 11, 0, "start",
                 dev_color(c->device), line, CLF_BENCH_FIG_W - 2 * MARGIN);
    }
    free(cs);
    return lines;
}

double
clf_bench_svg_times_height(const clf_bench_report *r)
{
    size_t panels = time_panels(r, NULL);

    return times_header(NULL, r) + PANEL_H * (double)((panels + 1) / 2) +
           15.0 * (double)times_footer(NULL, r, 0) + 10;
}

/* Shared scales of every time panel: n and the spread of the times. */
static void
times_scale(const clf_bench_report *r, struct scale *s)
{
    double nmin = INFINITY, nmax = 0, tmin = INFINITY, tmax = 0;
    size_t i;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->n > 0) {
            nmin = fmin(nmin, (double)x->n);
            nmax = fmax(nmax, (double)x->n);
        }
        if (row_ran(x)) {
            tmin = fmin(tmin, fmin(x->wall.min, x->wall.median) * 1e3);
            tmax = fmax(tmax, fmax(x->wall.max, x->wall.median) * 1e3);
        }
    }
    if (!(nmax > 0))
        nmin = nmax = 1; /* no row with a length */
    s->x0 = log10(nmin) - 0.1 * fmax(log10(nmax / nmin), 1.0);
    s->x1 = log10(nmax) + 0.1 * fmax(log10(nmax / nmin), 1.0);
    nice_range(tmin, tmax, 1, 10, 0.3, &s->y0, &s->y1);
}

/* The rows of one device in a panel, sorted by n; returns how many. */
static size_t
series(const clf_bench_report *r, const clf_bench_result *g, size_t dev,
       size_t *order)
{
    size_t i, no = 0, p, q;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->device == dev && x->mode == g->mode && same_group(x, g))
            order[no++] = i;
    }
    for (p = 1; p < no; p++)
        for (q = p;
             q > 0 && r->results[order[q]].n < r->results[order[q - 1]].n;
             q--) {
            size_t t = order[q];
            order[q] = order[q - 1];
            order[q - 1] = t;
        }
    return no;
}

/* One device's line, whiskers and markers in a panel; a row that did not
 * run is a cross on the lower edge. */
static void
svg_series(FILE *f, const clf_bench_report *r, const struct scale *s,
           const size_t *order, size_t no, size_t dev)
{
    const char *c = dev_color(dev);
    size_t p;
    int first = 1;

    for (p = 0; p < no; p++) {
        const clf_bench_result *x = &r->results[order[p]];
        if (!row_ran(x))
            continue;
        fprintf(f, "%s%.1f,%.1f",
                first ? "<polyline fill=\"none\" points=\"" : " ",
                px(s, (double)x->n), py(s, x->wall.median * 1e3));
        first = 0;
    }
    if (!first)
        fprintf(f, "\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", c,
                dev_dash(dev));
    for (p = 0; p < no; p++) {
        const clf_bench_result *x = &r->results[order[p]];
        double xx = px(s, (double)x->n), yb = BOX_T + BOX_H;
        if (!row_ran(x)) {
            fprintf(f,
                    "<path d=\"M%.1f %.1fl8 -8m0 8l-8 -8\" stroke=\"%s\" "
                    "stroke-width=\"2\"/>\n",
                    xx - 4, yb - 2, c);
            continue;
        }
        if (x->wall.min > 0 && x->wall.max > 0)
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                    "stroke=\"%s\"/>\n",
                    xx, py(s, x->wall.min * 1e3), xx, py(s, x->wall.max * 1e3),
                    c);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                xx, py(s, x->wall.median * 1e3), c);
    }
}

/* Dashed vertical lines at each device's crossover n, in a Linformer or
 * causal panel. */
static void
svg_crossings(FILE *f, const clf_bench_report *r, const struct scale *s,
              const clf_bench_result *g)
{
    clf_bench_crossing cs[64];
    size_t i, nc = 0;

    if (g->mode != CLF_BENCH_LINFORMER && g->mode != CLF_BENCH_CAUSAL)
        return;
    if (clf_bench_report_crossings(r, cs, 64, &nc) != 0)
        return;
    for (i = 0; i < nc && i < 64; i++) {
        const clf_bench_crossing *c = &cs[i];
        if (c->n == 0 || c->causal != (g->mode == CLF_BENCH_CAUSAL) ||
            c->d_model != g->d_model || c->heads != g->heads ||
            c->batch != g->batch || c->k_requested != g->k_requested)
            continue;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"%s\" stroke-dasharray=\"5,4\"/>\n",
                px(s, (double)c->n), BOX_T, px(s, (double)c->n), BOX_T + BOX_H,
                dev_color(c->device));
    }
}

static int
cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;

    return (x > y) - (x < y);
}

/* x ticks at each measured n. */
static void
times_xticks(FILE *f, const clf_bench_report *r, const struct scale *s)
{
    size_t i, j;
    double last = -INFINITY;
    size_t *ns = malloc(r->nresults * sizeof *ns), count = 0;

    if (ns == NULL)
        return;
    for (i = 0; i < r->nresults; i++) {
        for (j = 0; j < count && ns[j] != r->results[i].n; j++)
            ;
        if (j == count)
            ns[count++] = r->results[i].n;
    }
    qsort(ns, count, sizeof *ns, cmp_size);
    for (i = 0; i < count; i++)
        svg_xtick(f, s, (double)ns[i], &last);
    free(ns);
    svg_text(f, BOX_L + BOX_W / 2, BOX_T + BOX_H + 32, 11, 0, "middle", "#222",
             "sequence length n", BOX_W);
}

static void
time_panel(FILE *f, const clf_bench_report *r, const struct scale *s,
           const clf_bench_result *g, size_t *order)
{
    char title[160];
    size_t d, no;

    snprintf(title, sizeof title, "%s: D=%zu h=%zu B=%zu k=%zu",
             clf_bench_mode_name(g->mode), g->d_model, g->heads, g->batch,
             g->k_requested);
    svg_text(f, BOX_L, 20, 13, 1, "start", "#000", title, COL_W - BOX_L - 4);
    svg_ygrid(f, s, "median ms");
    times_xticks(f, r, s);
    svg_crossings(f, r, s, g);
    for (d = 0; d < r->ndevices; d++) {
        no = series(r, g, d, order);
        if (no > 0)
            svg_series(f, r, s, order, no, d);
    }
}

/* Opens a figure's <svg>. */
static void
figure_open(FILE *f, const char *kind, double y, double h)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"figure %s\" "
            "x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%.0f\" "
            "viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            kind, y, CLF_BENCH_FIG_W, ceil(h), CLF_BENCH_FIG_W, ceil(h));
}

int
clf_bench_svg_times(FILE *f, const clf_bench_report *r, double y)
{
    size_t np = time_panels(r, NULL), *first, *order, p;
    struct scale s;
    double top;

    if (np == 0)
        return -1;
    first = malloc(np * sizeof *first);
    order = malloc(r->nresults * sizeof *order);
    if (first == NULL || order == NULL) {
        free(first);
        free(order);
        return -1;
    }
    time_panels(r, first);
    times_scale(r, &s);
    figure_open(f, "times", y, clf_bench_svg_times_height(r));
    top = times_header(f, r);
    for (p = 0; p < np; p++) {
        panel_open(f, (double)(p % 2) * COL_W, top + PANEL_H * (double)(p / 2),
                   PANEL_H, "times");
        time_panel(f, r, &s, &r->results[first[p]], order);
        fputs("</svg>\n", f);
    }
    times_footer(f, r, top + PANEL_H * (double)((np + 1) / 2) + 4);
    fputs("</svg>\n", f);
    free(first);
    free(order);
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------ roofline */

/* Achieved GFLOP/s of stage st of a row, and its intensity; returns 0 when
 * either is unknown. */
static int
stage_point(const clf_bench_result *x, int st, double *ix, double *gf)
{
    double t = x->stage[st].median, fl = x->stage_flops[st];

    if (x->status != CLF_BENCH_OK || !(t > 0) || !(fl > 0) ||
        !(x->stage_intensity[st] > 0) || isinf(x->stage_intensity[st]))
        return 0;
    *ix = x->stage_intensity[st];
    *gf = fl / t * 1e-9;
    return 1;
}

static int
has_roof(const clf_bench_device *d)
{
    return (d->peak_gflops > 0 && !isinf(d->peak_gflops)) ||
           (d->peak_gbps > 0 && !isinf(d->peak_gbps));
}

/* A device has a roofline panel when it has a row. */
static int
device_has_rows(const clf_bench_report *r, size_t dev)
{
    size_t i;

    for (i = 0; i < r->nresults; i++)
        if (r->results[i].device == dev)
            return 1;
    return 0;
}

size_t
clf_bench_svg_roofline_panels(const clf_bench_report *r)
{
    size_t d, n = 0;

    for (d = 0; d < r->ndevices; d++)
        n += (size_t)device_has_rows(r, d);
    return n;
}

/* Shared scales: every point, peak and ridge. */
static void
roof_scale(const clf_bench_report *r, struct scale *s)
{
    double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0, ix, gf;
    size_t i, d;
    int st;

    for (i = 0; i < r->nresults; i++)
        for (st = 0; st < CLF_STAGE_COUNT; st++)
            if (stage_point(&r->results[i], st, &ix, &gf)) {
                xmin = fmin(xmin, ix), xmax = fmax(xmax, ix);
                ymin = fmin(ymin, gf), ymax = fmax(ymax, gf);
            }
    for (d = 0; d < r->ndevices; d++) {
        const clf_bench_device *v = &r->devices[d];
        if (v->peak_gflops > 0 && !isinf(v->peak_gflops))
            ymax = fmax(ymax, v->peak_gflops),
            ymin = fmin(ymin, v->peak_gflops);
        if (v->peak_gflops > 0 && v->peak_gbps > 0) {
            xmin = fmin(xmin, v->peak_gflops / v->peak_gbps);
            xmax = fmax(xmax, v->peak_gflops / v->peak_gbps);
        }
    }
    nice_range(xmin, xmax, 0.1, 100, 2, &s->x0, &s->x1);
    nice_range(ymin, ymax, 1, 1000, 2, &s->y0, &s->y1);
}

/* The roof min(P, I B) across the panel, from where it enters the box. */
static void
svg_roof(FILE *f, const struct scale *s, const clf_bench_device *d)
{
    double P = d->peak_gflops > 0 && !isinf(d->peak_gflops) ? d->peak_gflops
                                                            : INFINITY;
    double B =
        d->peak_gbps > 0 && !isinf(d->peak_gbps) ? d->peak_gbps : INFINITY;
    double a = pow(10.0, s->x0), b = pow(10.0, s->x1);
    double lo = pow(10.0, s->y0), hi = pow(10.0, s->y1);

    if (!isinf(B))
        a = fmax(a, lo / B); /* below the box before that */
    if (!isinf(B) && isinf(P))
        b = fmin(b, hi / B);
    fprintf(f, "<polyline fill=\"none\" stroke=\"#000\" stroke-width=\"2\" "
               "points=\"");
    fprintf(f, "%.1f,%.1f", px(s, a), py(s, fmin(P, a * B)));
    if (!isinf(P) && !isinf(B) && P / B > a && P / B < b)
        fprintf(f, " %.1f,%.1f", px(s, P / B), py(s, P));
    fprintf(f, " %.1f,%.1f\"/>\n", px(s, b), py(s, fmin(P, b * B)));
}

/* A mode's marker: circle, square, triangle, diamond. */
static void
svg_marker(FILE *f, clf_bench_mode m, double x, double y, const char *c)
{
    switch (m) {
    case CLF_BENCH_FULL:
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" "
                "fill=\"%s\"/>\n",
                x - 3.5, y - 3.5, c);
        break;
    case CLF_BENCH_CAUSAL:
        fprintf(f, "<path d=\"M%.1f %.1fl4 7h-8z\" fill=\"%s\"/>\n", x, y - 4.5,
                c);
        break;
    case CLF_BENCH_CAUSAL_FULL:
        fprintf(f,
                "<path d=\"M%.1f %.1fl4 4.5l-4 4.5l-4 -4.5z\" fill=\"%s\"/>\n",
                x, y - 4.5, c);
        break;
    default:
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                x, y, c);
    }
}

/* Every stage point of a device; returns how many. */
static size_t
svg_points(FILE *f, const clf_bench_report *r, const struct scale *s,
           size_t dev)
{
    size_t i, n = 0;
    double ix, gf;
    int st;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->device != dev)
            continue;
        for (st = 0; st < CLF_STAGE_COUNT; st++)
            if (stage_point(x, st, &ix, &gf)) {
                svg_marker(f, x->mode, px(s, ix), py(s, gf), stage_colors[st]);
                n++;
            }
    }
    return n;
}

/* x ticks at each decade. */
static void
roof_xticks(FILE *f, const struct scale *s)
{
    double e, last = -INFINITY;

    for (e = ceil(s->x0 - 1e-9); e <= s->x1 + 1e-9; e += 1.0)
        svg_xtick(f, s, pow(10.0, e), &last);
    svg_text(f, BOX_L + BOX_W / 2, BOX_T + BOX_H + 32, 11, 0, "middle", "#222",
             "arithmetic intensity, FLOP/byte", BOX_W);
}

static void
roof_panel(FILE *f, const clf_bench_report *r, const struct scale *s,
           size_t dev)
{
    const clf_bench_device *d = &r->devices[dev];
    char label[64], title[400], cap[200];
    double w = COL_W - 2 * 8;
    size_t pts;

    clf_bench_device_label(r, dev, label, sizeof label);
    snprintf(title, sizeof title, "%s: %s", label, d->name);
    svg_text(f, 8, 20, 13, 1, "start", dev_color(dev), title, w);
    svg_ygrid(f, s, "achieved GFLOP/s");
    roof_xticks(f, s);
    if (has_roof(d))
        svg_roof(f, s, d);
    pts = svg_points(f, r, s, dev);
    if (!has_roof(d))
        snprintf(cap, sizeof cap, "peaks not measured: no roof drawn");
    else if (isnan(d->peak_gflops) || isnan(d->peak_gbps))
        snprintf(cap, sizeof cap, "roof from %s only (the other not measured)",
                 isnan(d->peak_gbps) ? "the FMA peak" : "the copy bandwidth");
    else
        snprintf(cap, sizeof cap, "roof: %.4g GFLOP/s FMA, %.4g GB/s copy",
                 d->peak_gflops, d->peak_gbps);
    svg_text(f, 8, ROOF_H - 26, 11, 0, "start", "#222", cap, w);
    svg_text(f, 8, ROOF_H - 10, 11, 0, "start", "#222",
             pts > 0 ? "a point per stage of each measured row"
                     : "stage intensities not counted: no points",
             w);
}

/* The legend: stage colours and mode markers, flowed over lines.  Returns
 * the height used. */
static double
roof_legend(FILE *f, double y)
{
    double x = MARGIN, right = CLF_BENCH_FIG_W - MARGIN, w;
    int i, lines = 1;

    for (i = 0; i < CLF_STAGE_COUNT + CLF_BENCH_MODE_COUNT; i++) {
        int stage = i < CLF_STAGE_COUNT;
        const char *name =
            stage ? clf_stage_name((clf_stage)i)
                  : clf_bench_mode_name((clf_bench_mode)(i - CLF_STAGE_COUNT));
        w = 14 + clf_bench_text_width(name, 11, 0) + 14;
        if (x + w > right) {
            x = MARGIN;
            lines++;
        }
        if (f != NULL) {
            double yy = y + 16.0 * (lines - 1);
            svg_marker(f,
                       stage ? CLF_BENCH_LINFORMER
                             : (clf_bench_mode)(i - CLF_STAGE_COUNT),
                       x + 4, yy - 4, stage ? stage_colors[i] : "#555");
            svg_text(f, x + 12, yy, 11, 0, "start", "#222", name, w);
        }
        x += w;
    }
    return 16.0 * lines;
}

static const char roof_title[] =
    "Roofline per device: achieved GFLOP/s of each stage against its "
    "arithmetic intensity (counted FLOPs over counted bytes), log-log; the "
    "roof is min(peak GFLOP/s, intensity x peak GB/s); every panel has the "
    "same scales. Colour: the stage; marker: the mode.";

static double
roof_header(FILE *f)
{
    double w = CLF_BENCH_FIG_W - 2 * MARGIN;
    size_t lines = svg_paragraph(f, MARGIN, 20, 12, 16, roof_title, w);

    return 20 + 16.0 * (double)lines + roof_legend(f, 20 + 16.0 * lines) + 4;
}

double
clf_bench_svg_roofline_height(const clf_bench_report *r)
{
    size_t panels = clf_bench_svg_roofline_panels(r);

    return roof_header(NULL) + ROOF_H * (double)((panels + 1) / 2) + 6;
}

int
clf_bench_svg_roofline(FILE *f, const clf_bench_report *r, double y)
{
    size_t d, p = 0, np = clf_bench_svg_roofline_panels(r);
    struct scale s;
    double top;

    if (np == 0)
        return -1;
    roof_scale(r, &s);
    figure_open(f, "roofline", y, clf_bench_svg_roofline_height(r));
    top = roof_header(f);
    for (d = 0; d < r->ndevices; d++) {
        if (!device_has_rows(r, d))
            continue;
        panel_open(f, (double)(p % 2) * COL_W, top + ROOF_H * (double)(p / 2),
                   ROOF_H, "roofline");
        roof_panel(f, r, &s, d);
        fputs("</svg>\n", f);
        p++;
    }
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------ the file */

int
clf_bench_svg_write(FILE *f, const clf_bench_report *r)
{
    double h1, h2;

    if (clf_bench_svg_time_panels(r) == 0)
        return -1;
    h1 = ceil(clf_bench_svg_times_height(r));
    h2 = ceil(clf_bench_svg_roofline_height(r));
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
            "font-family=\"sans-serif\">\n",
            CLF_BENCH_FIG_W, h1 + h2, CLF_BENCH_FIG_W, h1 + h2);
    if (clf_bench_svg_times(f, r, 0) != 0 ||
        clf_bench_svg_roofline(f, r, h1) != 0)
        return -1;
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}
