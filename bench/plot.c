/* The bench's SVG plots, written directly: median time against n with
 * the spread as whiskers and the crossover marked.  Only reads the records
 * of bench/results.h. */
#define _POSIX_C_SOURCE 200809L

#include "output.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ SVG */

static void
xml_text(FILE *f, const char *s)
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
        default:
            fputc(*s, f);
        }
    }
}

static const char *const mode_colors[CLF_BENCH_MODE_COUNT] = {
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"};

#define PANEL_W 820
#define PANEL_H 440
#define PLOT_L 80
#define PLOT_R 580
#define PLOT_T 50
#define PLOT_B 380

static int
same_panel(const clf_bench_result *a, const clf_bench_result *b)
{
    return a->device == b->device && a->d_model == b->d_model &&
           a->heads == b->heads && a->batch == b->batch &&
           a->k_requested == b->k_requested;
}

struct axes {
    double x0, x1, y0, y1; /* log2 n and log10 ms ranges */
    double top;            /* panel's y offset */
};

static double
ax_x(const struct axes *a, double n)
{
    return PLOT_L + (log2(n) - a->x0) / (a->x1 - a->x0) * (PLOT_R - PLOT_L);
}

static double
ax_y(const struct axes *a, double ms)
{
    return a->top + PLOT_B -
           (log10(ms) - a->y0) / (a->y1 - a->y0) * (PLOT_B - PLOT_T);
}

/* Marks a crossover in the plot and explains it in the legend column,
 * below the modes (legend row `row`). */
static void
svg_crossing(FILE *f, const struct axes *a, const clf_bench_crossing *c,
             int row)
{
    const char *who = c->causal ? "causal" : "Linformer";
    const char *ref = c->causal ? "causal-full" : "full";
    double ly = a->top + PLOT_T + 14 + 20.0 * row;
    double x;

    if (c->n == 0) {
        fprintf(f,
                "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">%s never faster "
                "than %s</text>\n"
                "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">(%zu lengths "
                "measured)</text>\n",
                PLOT_R + 20, ly, who, ref, PLOT_R + 20, ly + 14, c->points);
        return;
    }
    x = ax_x(a, (double)c->n);
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
            "stroke=\"#444\" stroke-dasharray=\"6,4\"/>\n",
            x, a->top + PLOT_T, x, a->top + PLOT_B);
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
            "text-anchor=\"end\">%s: n = %zu</text>\n",
            x - 4, a->top + PLOT_T + 14.0 + 14.0 * c->causal, who, c->n);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
            "stroke=\"#444\" stroke-dasharray=\"6,4\"/>\n"
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">crossover n = "
            "%zu:</text>\n"
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">%s faster than "
            "%s</text>\n"
            "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">from there "
            "on</text>\n",
            PLOT_R + 20, ly - 4, PLOT_R + 44, ly - 4, PLOT_R + 50, ly, c->n,
            PLOT_R + 50, ly + 14, who, ref, PLOT_R + 50, ly + 28);
    if (!isnan(c->n_estimate) && c->n_estimate >= pow(2.0, a->x0) &&
        c->n_estimate <= pow(2.0, a->x1)) {
        double xe = ax_x(a, c->n_estimate);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#999\" stroke-dasharray=\"2,3\"/>\n",
                xe, a->top + PLOT_T, xe, a->top + PLOT_B);
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                "stroke=\"#999\" stroke-dasharray=\"2,3\"/>\n"
                "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">medians cross "
                "near</text>\n"
                "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">n = %.0f "
                "(interpolated)</text>\n",
                PLOT_R + 20, ly + 44, PLOT_R + 44, ly + 44, PLOT_R + 50,
                ly + 48, PLOT_R + 50, ly + 62, c->n_estimate);
    }
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

/* The panel's axes: log2 n around the measured lengths, log10 ms around
 * the measured spread. */
static void
panel_axes(const clf_bench_report *r, const clf_bench_result *g, double top,
           struct axes *a)
{
    double nmin = INFINITY, nmax = 0, tmin = INFINITY, tmax = 0;
    size_t i;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (!same_panel(x, g))
            continue;
        nmin = fmin(nmin, (double)x->n);
        nmax = fmax(nmax, (double)x->n);
        if (x->status == CLF_BENCH_OK && x->wall.runs > 0) {
            tmin = fmin(tmin, x->wall.min * 1e3);
            tmax = fmax(tmax, x->wall.max * 1e3);
        }
    }
    a->top = top;
    a->x0 = log2(nmin);
    a->x1 = log2(nmax);
    if (a->x1 - a->x0 < 1e-9) {
        a->x0 -= 0.5;
        a->x1 += 0.5;
    } else {
        a->x0 -= 0.15 * (a->x1 - a->x0);
        a->x1 += 0.15 * (a->x1 - a->x0) / 1.15;
    }
    if (!(tmax > 0)) {
        tmin = 1;
        tmax = 10;
    }
    a->y0 = nice_below(tmin);
    a->y1 = nice_above(tmax);
    if (a->y1 - a->y0 < 0.3)
        a->y1 = a->y0 + 0.3;
}

/* y grid: 1, 2, 5 of each decade, and the y label. */
static void
svg_ygrid(FILE *f, const struct axes *a)
{
    static const double sub[] = {1, 2, 5};
    double e, top = a->top;
    int s;

    for (e = floor(a->y0); e < a->y1 + 1e-9; e += 1.0) {
        for (s = 0; s < 3; s++) {
            double v = sub[s] * pow(10.0, e), y;
            if (log10(v) < a->y0 - 1e-9)
                continue;
            if (log10(v) > a->y1 + 1e-9)
                break;
            y = ax_y(a, v);
            fprintf(f,
                    "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                    "stroke=\"%s\"/>\n",
                    PLOT_L, y, PLOT_R, y, s == 0 ? "#bbb" : "#e4e4e4");
            fprintf(f,
                    "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" "
                    "text-anchor=\"end\">%g</text>\n",
                    PLOT_L - 6, y + 4, v);
        }
    }
    fprintf(f,
            "<text x=\"20\" y=\"%.1f\" font-size=\"12\" "
            "transform=\"rotate(-90 20 %.1f)\" text-anchor=\"middle\">"
            "median forward time, ms (whiskers: min..max)</text>\n",
            top + (PLOT_T + PLOT_B) / 2.0, top + (PLOT_T + PLOT_B) / 2.0);
}

/* The panel's titles and frame. */
static void
svg_frame(FILE *f, const clf_bench_device *d, const clf_bench_result *g,
          double top)
{
    char title[512];

    snprintf(title, sizeof title, "%s / %s (driver %s)", d->platform, d->name,
             d->driver);
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"13\" "
            "font-weight=\"bold\">",
            PLOT_L, top + 20);
    xml_text(f, title);
    fputs("</text>\n", f);
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" font-size=\"12\">D=%zu h=%zu "
            "B=%zu k=%zu: median time of one forward against n</text>\n",
            PLOT_L, top + 38, g->d_model, g->heads, g->batch, g->k_requested);
    fprintf(f,
            "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" "
            "fill=\"none\" stroke=\"#000\"/>\n",
            PLOT_L, top + PLOT_T, PLOT_R - PLOT_L, PLOT_B - PLOT_T);
}

/* x ticks at each measured n, and the x label. */
static void
svg_xticks(FILE *f, const clf_bench_report *r, const clf_bench_result *g,
           const struct axes *a)
{
    double top = a->top;
    size_t i, j;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        int dup = 0;
        if (!same_panel(x, g))
            continue;
        for (j = 0; j < i; j++)
            if (same_panel(&r->results[j], g) && r->results[j].n == x->n)
                dup = 1;
        if (dup)
            continue;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#e4e4e4\"/>\n",
                ax_x(a, (double)x->n), top + PLOT_T, ax_x(a, (double)x->n),
                top + PLOT_B);
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                "text-anchor=\"middle\">%zu</text>\n",
                ax_x(a, (double)x->n), top + PLOT_B + 16, x->n);
    }
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
            "text-anchor=\"middle\">sequence length n (log scale)</text>\n",
            (PLOT_L + PLOT_R) / 2.0, top + PLOT_B + 36);
}

/* The panel's rows of mode m, sorted by n (at most cap); returns how many. */
static size_t
mode_rows(const clf_bench_report *r, const clf_bench_result *g, int m,
          size_t *order, size_t cap)
{
    size_t i, no = 0, p, q;

    for (i = 0; i < r->nresults && no < cap; i++)
        if (same_panel(&r->results[i], g) && (int)r->results[i].mode == m)
            order[no++] = i;
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

static int
row_ran(const clf_bench_result *x)
{
    return x->status == CLF_BENCH_OK && x->wall.runs > 0;
}

/* The median line through the rows of mode m that ran. */
static void
svg_polyline(FILE *f, const clf_bench_report *r, const struct axes *a,
             const size_t *order, size_t no, int m)
{
    size_t p;
    int first = 1;

    for (p = 0; p < no; p++) {
        const clf_bench_result *x = &r->results[order[p]];
        if (!row_ran(x))
            continue;
        if (first)
            fprintf(f,
                    "<polyline fill=\"none\" stroke=\"%s\" "
                    "stroke-width=\"2\" points=\"",
                    mode_colors[m]);
        first = 0;
        fprintf(f, "%.1f,%.1f ", ax_x(a, (double)x->n),
                ax_y(a, x->wall.median * 1e3));
    }
    if (!first)
        fputs("\"/>\n", f);
}

/* Whiskers and a marker for each row of mode m; a row that did not run
 * is named on the axis. */
static void
svg_markers(FILE *f, const clf_bench_report *r, const struct axes *a,
            const size_t *order, size_t no, int m)
{
    size_t p;

    for (p = 0; p < no; p++) {
        const clf_bench_result *x = &r->results[order[p]];
        double px = ax_x(a, (double)x->n);
        if (!row_ran(x)) {
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" "
                    "fill=\"%s\" text-anchor=\"middle\">%s: %s</text>\n",
                    px, a->top + PLOT_T + 14.0 + 12.0 * m, mode_colors[m],
                    clf_bench_mode_name((clf_bench_mode)m),
                    x->status == CLF_BENCH_TOO_LARGE     ? "too large"
                    : x->status == CLF_BENCH_OVER_BUDGET ? "over budget"
                                                         : "failed");
            continue;
        }
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"%s\"/>\n",
                px, ax_y(a, x->wall.min * 1e3), px, ax_y(a, x->wall.max * 1e3),
                mode_colors[m]);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                px, ax_y(a, x->wall.median * 1e3), mode_colors[m]);
    }
}

static void
svg_legend(FILE *f, double top, int m, int legend)
{
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
            "stroke=\"%s\" stroke-width=\"2\"/>\n",
            PLOT_R + 20, top + PLOT_T + 10 + 20.0 * legend, PLOT_R + 44,
            top + PLOT_T + 10 + 20.0 * legend, mode_colors[m]);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"12\">%s</text>\n",
            PLOT_R + 50, top + PLOT_T + 14 + 20.0 * legend,
            clf_bench_mode_name((clf_bench_mode)m));
}

static void
svg_panel(FILE *f, const clf_bench_report *r, const clf_bench_result *g,
          double top, const clf_bench_crossing *cs, size_t nc)
{
    struct axes a;
    size_t c, order[256], no;
    int m, legend = 0, line = 0;

    panel_axes(r, g, top, &a);
    svg_frame(f, &r->devices[g->device], g, top);
    svg_ygrid(f, &a);
    svg_xticks(f, r, g, &a);
    for (m = 0; m < CLF_BENCH_MODE_COUNT; m++) {
        no = mode_rows(r, g, m, order, 256);
        if (no == 0)
            continue;
        svg_polyline(f, r, &a, order, no, m);
        svg_markers(f, r, &a, order, no, m);
        svg_legend(f, top, m, legend++);
    }
    for (c = 0; c < nc; c++)
        if (cs[c].device == g->device && cs[c].d_model == g->d_model &&
            cs[c].heads == g->heads && cs[c].batch == g->batch &&
            cs[c].k_requested == g->k_requested)
            svg_crossing(f, &a, &cs[c], legend + 4 * line++);
}

int
clf_bench_svg_write(FILE *f, const clf_bench_report *r)
{
    clf_bench_crossing *cs = NULL;
    size_t i, j, panels = 0, nc = 0;

    for (i = 0; i < r->nresults; i++) {
        int seen = 0;
        for (j = 0; j < i; j++)
            if (same_panel(&r->results[j], &r->results[i]))
                seen = 1;
        panels += !seen;
    }
    if (panels == 0)
        return -1;
    if (clf_bench_report_crossings(r, NULL, 0, &nc) != 0 ||
        (nc > 0 && (cs = malloc(nc * sizeof *cs)) == NULL) ||
        clf_bench_report_crossings(r, cs, nc, &nc) != 0) {
        free(cs);
        return -1;
    }
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%zu\" viewBox=\"0 0 %d %zu\" "
            "font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            PANEL_W, panels * PANEL_H, PANEL_W, panels * PANEL_H);
    panels = 0;
    for (i = 0; i < r->nresults; i++) {
        int seen = 0;
        for (j = 0; j < i; j++)
            if (same_panel(&r->results[j], &r->results[i]))
                seen = 1;
        if (seen)
            continue;
        svg_panel(f, r, &r->results[i], (double)(panels * PANEL_H), cs, nc);
        panels++;
    }
    fputs("</svg>\n", f);
    free(cs);
    return ferror(f) ? -1 : 0;
}
