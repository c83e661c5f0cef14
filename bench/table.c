/* The readable tables (bench/table.h): each device's matrix, its stages,
 * its half-precision rows and crossovers, the accuracy study, the summary
 * of a quick run; and the tables that hold devices against each other and
 * against their peaks: the comparison of every device side by side, the
 * peaks line of a device, the per-stage roofline (see roofline.h). */
#define _POSIX_C_SOURCE 200809L

#include "table.h"
#include "roofline.h"

#include <math.h>
#include <stdlib.h>
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
    if (d->fma_width > 0) {
        char type[16] = "float";
        if (d->fma_width > 1)
            snprintf(type, sizeof type, "float%d", d->fma_width);
        fprintf(f,
                "       multiply-add: %d chains of %s a work-item; copy: %s\n",
                d->fma_chains, type,
                d->copy_api ? "clEnqueueCopyBuffer" : "the copy kernel");
    }
    if (d->peak_note[0] != '\0')
        fprintf(f, "       %s\n", d->peak_note);
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

static int
same_panel(const clf_bench_result *a, const clf_bench_result *b)
{
    return a->device == b->device && a->d_model == b->d_model &&
           a->heads == b->heads && a->batch == b->batch &&
           a->k_requested == b->k_requested && a->precision == b->precision &&
           clf_bench_same_compression(a, b);
}

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

/* The row's mode label (clf_bench_mode_label), valid until the next
 * call. */
static const char *
row_mode(const clf_bench_result *x)
{
    static char label[CLF_BENCH_MODE_LABEL];

    return clf_bench_mode_label(x, label, sizeof label);
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
        fprintf(f, "crossover, %s (D=%zu h=%zu B=%zu k=%zu%s%s%s): ",
                c->causal ? "causal vs causal-full" : "linformer vs full",
                c->d_model, c->heads, c->batch, c->k_requested,
                c->precision == CLF_PRECISION_HALF ? ", half weights" : "",
                c->compression != CLF_COMPRESS_LINEAR ? ", compression " : "",
                c->compression != CLF_COMPRESS_LINEAR
                    ? clf_compression_name(c->compression)
                    : "");
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
    fprintf(f, "%6zu %5s %4s %5zu %3zu %3zu  %-16s ", x->n, k, b, x->d_model,
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
            "%6s %5s %4s %5s %3s %3s  %-16s %8s %9s %19s %9s %7s %7s "
            "%7s %9s %8s %5s %6s\n",
            "n", "k", "b", "D", "h", "B", "mode", "first s", "median ms",
            "spread ms", "device ms", "GFLOP", "GFLOP/s", "MiB", "rel.err",
            "speed-up", "rMAD%", "roof%");
    for (i = 0; i < r->nresults; i++)
        if (r->results[i].device == dev)
            notes += print_matrix_row(f, r, &r->results[i]);
    fprintf(f, "\nMiB: device memory the layer holds after its forward "
               "(weights, kept transposes, workspaces);\nrel.err: ||Y - "
               "Y_full||/||Y_full|| "
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
            "markers:\n%6s %-16s",
            "n", "mode");
    for (s = 0; s < CLF_STAGE_COUNT; s++)
        fprintf(f, " %16s", clf_stage_name((clf_stage)s));
    fputc('\n', f);
    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->device != dev || x->status != CLF_BENCH_OK || x->wall.runs == 0)
            continue;
        fprintf(f, "%6zu %-16s", x->n, row_mode(x));
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
