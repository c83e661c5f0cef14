/* The readable tables that hold devices against each other and against
 * their peaks: the comparison of every device side by side, the peaks
 * line of a device, the per-stage roofline.  See roofline.h. */
#define _POSIX_C_SOURCE 200809L

#include "roofline.h"

#include <math.h>
#include <string.h>

/* fmt's text of v, "-" when not finite, "%.3g" when fmt's does not fit
 * (a cut number would read as another). */
static void
cell(char *buf, size_t len, const char *fmt, double v)
{
    if (isnan(v) || isinf(v))
        snprintf(buf, len, "-");
    else if (snprintf(buf, len, fmt, v) >= (int)len)
        snprintf(buf, len, "%.3g", v);
}

void
clf_bench_print_peaks(FILE *f, const clf_bench_device *d)
{
    char g[24], m[24], h[24];

    if (isnan(d->peak_gflops) && isnan(d->peak_gbps) && isnan(d->h2d_gbps)) {
        fprintf(f, "peaks: not measured\n");
        return;
    }
    cell(g, sizeof g, "%.1f", d->peak_gflops);
    cell(m, sizeof m, "%.1f", d->peak_gbps);
    cell(h, sizeof h, "%.1f", d->h2d_gbps);
    fprintf(f,
            "peaks: %s GFLOP/s fp32 multiply-add, %s GB/s device-memory "
            "copy, %s GB/s host to device (%s)\n",
            g, m, h,
            d->peak_cached ? "from the cache; --peak measures again"
                           : "measured now");
}

/* --------------------------------------------------------- comparison */

static int
measured(const clf_bench_result *x)
{
    return x != NULL && x->status == CLF_BENCH_OK && x->wall.runs > 0;
}

static void
device_label(char *buf, size_t len, const clf_bench_report *r, size_t dev,
             int mark)
{
    const clf_bench_device *d = &r->devices[dev];
    const char *tail = mark && dev == r->baseline ? " (base)" : "";

    if (d->stable_name[0] != '\0')
        snprintf(buf, len, "%s%s", d->stable_name, tail);
    else
        snprintf(buf, len, "device %u%s", d->index, tail);
}

#define GROUP_W 26 /* "%10s %7s %6s" */
#define RATIO_W 7  /* " %6s" */

static void
print_comparison_head(FILE *f, const clf_bench_report *r)
{
    size_t dev;

    fprintf(f, "%-11s %6s %5s %5s %3s %3s", "", "", "", "", "", "");
    for (dev = 0; dev < r->ndevices; dev++) {
        char label[96];
        int w = GROUP_W + (dev == r->baseline ? 0 : RATIO_W);
        device_label(label, sizeof label, r, dev, 1);
        fprintf(f, " | %-*.*s", w, w, label);
    }
    fprintf(f, "\n%-11s %6s %5s %5s %3s %3s", "mode", "n", "k", "D", "h", "B");
    for (dev = 0; dev < r->ndevices; dev++) {
        fprintf(f, " | %10s %7s %6s", "median ms", "GFLOP/s", "roof%");
        if (dev != r->baseline)
            fprintf(f, " %6s", "/base");
    }
    fputc('\n', f);
}

/* One device's cells of configuration x (its row there y, or NULL);
 * returns 1 when y is noisy. */
static int
print_group(FILE *f, const clf_bench_report *r, const clf_bench_result *x,
            const clf_bench_result *y, size_t dev)
{
    const clf_bench_result *base = clf_bench_report_row_on(r, x, r->baseline);
    char ms[24], g[16], roof[16], rat[16];

    if (!measured(y)) {
        fprintf(f, " | %10s %7s %6s", y == NULL ? "" : "not run", "-", "-");
    } else {
        cell(ms, sizeof ms - 1, "%.2f", y->wall.median * 1e3);
        if (y->noisy)
            strcat(ms, "*"); /* room kept above */
        cell(g, sizeof g, "%.1f", y->gflops);
        cell(roof, sizeof roof, "%.1f", y->roofline_pct);
        fprintf(f, " | %10s %7s %6s", ms, g, roof);
    }
    if (dev == r->baseline)
        return measured(y) && y->noisy;
    cell(rat, sizeof rat, "%.2fx",
         measured(y) && measured(base) ? y->wall.median / base->wall.median
                                       : NAN);
    fprintf(f, " %6s", rat);
    return measured(y) && y->noisy;
}

void
clf_bench_print_comparison(FILE *f, const clf_bench_report *r)
{
    size_t i, dev;
    int noisy = 0;
    char label[96];

    if (r->ndevices < 2 || r->nresults == 0)
        return;
    device_label(label, sizeof label, r, r->baseline, 0);
    fprintf(f,
            "\n== all devices side by side (baseline %s: %s) ==\n"
            "median ms of warm forwards (* noisy: spread over %.0f%% of the "
            "median), GFLOP/s,\nroof%%: percent of the device's roofline "
            "bound, /base: median over the baseline's\n\n",
            label, r->devices[r->baseline].name, CLF_BENCH_NOISY * 100.0);
    print_comparison_head(f, r);
    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (clf_bench_report_config_seen(r, i))
            continue;
        fprintf(f, "%-11s %6zu %5zu %5zu %3zu %3zu",
                clf_bench_mode_name(x->mode), x->n, x->k_requested, x->d_model,
                x->heads, x->batch);
        for (dev = 0; dev < r->ndevices; dev++)
            noisy |=
                print_group(f, r, x, clf_bench_report_row_on(r, x, dev), dev);
        fputc('\n', f);
    }
    if (noisy)
        fprintf(f,
                "* noisy: min..max spread over %.0f%% of the median; "
                "see each device's table\n",
                CLF_BENCH_NOISY * 100.0);
}

/* ------------------------------------------------------ stage roofline */

void
clf_bench_print_stage_roofline(FILE *f, const clf_bench_report *r, size_t dev)
{
    size_t i;
    int s;

    fprintf(f,
            "\nper stage, FLOP/byte and %% of roofline (bytes counted "
            "once per operand):\n%6s %-11s %13s",
            "n", "mode", "forward");
    for (s = 0; s < CLF_STAGE_COUNT; s++)
        fprintf(f, " %13s", clf_stage_name((clf_stage)s));
    fputc('\n', f);
    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        char c[40], a[16], b[16];
        if (x->device != dev || !measured(x))
            continue;
        cell(a, sizeof a, "%.1f", x->intensity);
        cell(b, sizeof b, "%.1f%%", x->roofline_pct);
        snprintf(c, sizeof c, "%s %s", a, b);
        fprintf(f, "%6zu %-11s %13s", x->n, clf_bench_mode_name(x->mode), c);
        for (s = 0; s < CLF_STAGE_COUNT; s++) {
            cell(a, sizeof a, "%.1f", x->stage_intensity[s]);
            cell(b, sizeof b, "%.1f%%", x->stage_roofline_pct[s]);
            snprintf(c, sizeof c, "%s %s", a, b);
            fprintf(f, " %13s",
                    x->stage_bytes[s] > 0.0 || isnan(x->stage_bytes[s]) ? c
                                                                        : "-");
        }
        fputc('\n', f);
    }
}
