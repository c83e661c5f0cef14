/* Bytes, intensity and the roofline; noise and settling; the baseline
 * device; the host's load; the comparison tables.  See roofline.h. */
#define _POSIX_C_SOURCE 200809L

#include "roofline.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* -------------------------------------------------------------- bytes */

/* The shape as doubles. */
struct bshape {
    double B, n, D, h, k, b, X, W;
    int full, causal_lin;
};

static int
bshape_of(const clf_bench_shape *s, struct bshape *o)
{
    if (s == NULL || (int)s->mode < 0 || s->mode >= CLF_BENCH_MODE_COUNT ||
        s->batch == 0 || s->n == 0 || s->d_model == 0 || s->heads == 0 ||
        s->d_model % s->heads != 0)
        return -1;
    o->full = s->mode == CLF_BENCH_FULL || s->mode == CLF_BENCH_CAUSAL_FULL;
    o->causal_lin = s->mode == CLF_BENCH_CAUSAL;
    if (!o->full && (s->k == 0 || s->k > s->n))
        return -1;
    if (o->causal_lin && s->causal_block == 0)
        return -1;
    o->B = (double)s->batch;
    o->n = (double)s->n;
    o->D = (double)s->d_model;
    o->h = (double)s->heads;
    o->k = (double)s->k;
    o->b = (double)s->causal_block;
    o->X = o->B * o->n * o->D; /* one B x n x D activation */
    o->W = o->D * o->D;        /* one weight matrix */
    return 0;
}

/* Floats the compression stage moves, with L (slots scored) and ld (the
 * scores' row length). */
static double
compression_floats(const struct bshape *s, size_t n, size_t k, size_t block,
                   double *L, double *ld)
{
    double exact = 2.0 * (s->X + s->W + s->X); /* K and V, all n rows */

    if (s->full) {
        *L = *ld = s->n;
        return exact;
    }
    *L = s->k;
    *ld = s->k;
    if (!s->causal_lin) /* per side: E, X, E X (written, read), W, Kbar */
        return 2.0 * (s->k * s->n + s->X + 3.0 * s->B * s->k * s->D + s->W);
    {
        /* the complete blocks before the last query's block, each into
         * c slots: K (or V) rows read, E's slots read, Kbar written */
        double nb = (double)((n + block - 1) / block);
        double c = floor((double)k / nb);
        double nbq = (double)((n - 1) / block);
        *ld = s->k + s->b;
        return exact + 2.0 * (s->B * nbq * s->b * s->D + nbq * c * s->b +
                              s->B * nbq * c * s->D);
    }
}

double
clf_bench_bytes_model(const clf_bench_shape *shape,
                      double stage_bytes[CLF_STAGE_COUNT])
{
    double f[CLF_STAGE_COUNT] = {0}, L, ld, win, S, total = 0.0;
    struct bshape s;
    int i;

    if (bshape_of(shape, &s) != 0)
        return NAN;
    f[CLF_STAGE_PROJECTION] = s.X + s.W + s.X;
    f[CLF_STAGE_COMPRESSION] = compression_floats(&s, shape->n, shape->k,
                                                  shape->causal_block, &L, &ld);
    win = s.causal_lin ? s.X : 0.0; /* K or V read again for the window */
    S = s.B * s.h * s.n * ld;       /* the scores */
    f[CLF_STAGE_SCORES] = s.X + s.B * L * s.D + win + S;
    f[CLF_STAGE_SOFTMAX] = 2.0 * S;
    f[CLF_STAGE_WEIGHTED_SUM] = S + s.B * L * s.D + win + s.X;
    f[CLF_STAGE_OUTPUT] = s.X + s.W + s.D + s.X;
    for (i = 0; i < CLF_STAGE_COUNT; i++) {
        f[i] *= sizeof(float);
        total += f[i];
        if (stage_bytes != NULL)
            stage_bytes[i] = f[i];
    }
    return total;
}

void
clf_bench_fused_bytes(const clf_bench_shape *shape,
                      double stage_bytes[CLF_STAGE_COUNT])
{
    double L, ld, win;
    struct bshape s;

    if (bshape_of(shape, &s) != 0)
        return;
    (void)compression_floats(&s, shape->n, shape->k, shape->causal_block, &L,
                             &ld);
    win = s.causal_lin ? 2.0 * s.X : 0.0;
    /* Q, Kbar, Vbar (and the window's K and V) read, O written */
    stage_bytes[CLF_STAGE_FUSED] =
        (s.X + 2.0 * s.B * L * s.D + win + s.X) * sizeof(float);
    stage_bytes[CLF_STAGE_SCORES] = 0.0;
    stage_bytes[CLF_STAGE_SOFTMAX] = 0.0;
    stage_bytes[CLF_STAGE_WEIGHTED_SUM] = 0.0;
}

void
clf_bench_result_bytes(clf_bench_result *x)
{
    clf_bench_shape sh;
    int i;

    sh.mode = x->mode;
    sh.batch = x->batch;
    sh.n = x->n;
    sh.d_model = x->d_model;
    sh.heads = x->heads;
    sh.k = x->k;
    sh.causal_block = x->causal_block;
    x->bytes = clf_bench_bytes_model(&sh, x->stage_bytes);
    if (isnan(x->bytes))
        return;
    if (x->stage[CLF_STAGE_FUSED].median > 0.0) {
        clf_bench_fused_bytes(&sh, x->stage_bytes);
        x->bytes = 0.0;
        for (i = 0; i < CLF_STAGE_COUNT; i++)
            x->bytes += x->stage_bytes[i];
    }
}

/* ----------------------------------------------------------- roofline */

static int
known_positive(double v)
{
    return !isnan(v) && v > 0.0 && !isinf(v);
}

double
clf_bench_roofline_bound(double flops, double bytes, double peak_gflops,
                         double peak_gbps)
{
    double mem;

    if (!known_positive(flops) || !known_positive(bytes) ||
        !known_positive(peak_gflops) || !known_positive(peak_gbps))
        return NAN;
    mem = flops / bytes * peak_gbps;
    return mem < peak_gflops ? mem : peak_gflops;
}

double
clf_bench_roofline_pct(double flops, double bytes, double seconds,
                       double peak_gflops, double peak_gbps)
{
    double bound =
        clf_bench_roofline_bound(flops, bytes, peak_gflops, peak_gbps);

    if (isnan(bound) || !known_positive(seconds))
        return NAN;
    return 100.0 * (flops / seconds * 1e-9) / bound;
}

static double
ratio(double a, double b)
{
    return known_positive(b) && !isnan(a) ? a / b : NAN;
}

void
clf_bench_result_roofline(clf_bench_result *x, const clf_bench_device *d)
{
    int s;

    x->intensity = ratio(x->flops, x->bytes);
    x->roofline_pct = clf_bench_roofline_pct(x->flops, x->bytes, x->wall.median,
                                             d->peak_gflops, d->peak_gbps);
    for (s = 0; s < CLF_STAGE_COUNT; s++) {
        x->stage_intensity[s] = ratio(x->stage_flops[s], x->stage_bytes[s]);
        x->stage_roofline_pct[s] = clf_bench_roofline_pct(
            x->stage_flops[s], x->stage_bytes[s], x->stage[s].median,
            d->peak_gflops, d->peak_gbps);
    }
    x->noisy = clf_bench_stats_noisy(&x->wall);
}

/* -------------------------------------------------------------- noise */

double
clf_bench_rel_mad(const clf_bench_stats *s)
{
    return ratio(s->mad, s->median);
}

int
clf_bench_stats_noisy(const clf_bench_stats *s)
{
    return s->runs > 0 && known_positive(s->median) &&
           s->max - s->min > CLF_BENCH_NOISY * s->median;
}

int
clf_bench_median_settled(const double *runs, size_t count, size_t min_runs)
{
    clf_bench_stats all, before;

    if (count < min_runs || count <= CLF_BENCH_SETTLE_LAG)
        return 0;
    all = clf_bench_stats_of(runs, count);
    before = clf_bench_stats_of(runs, count - CLF_BENCH_SETTLE_LAG);
    if (all.runs < min_runs || !known_positive(all.median) ||
        isnan(before.median))
        return 0;
    return fabs(all.median - before.median) <=
           CLF_BENCH_SETTLE_TOL * all.median;
}

/* ----------------------------------------------------------- baseline */

static int
has_piece(const char *hay, const char *needle)
{
    size_t n = strlen(needle), i;

    if (n == 0)
        return 0;
    for (i = 0; hay[i] != '\0'; i++)
        if (strncasecmp(hay + i, needle, n) == 0)
            return 1;
    return 0;
}

/* Rule 3: the stable name, or the platform's short name before its ':'. */
static int
stable_match(const char *stable, const char *sel)
{
    const char *colon = strrchr(stable, ':');

    if (stable[0] == '\0')
        return 0;
    if (strcasecmp(stable, sel) == 0)
        return 1;
    return colon != NULL && strlen(sel) == (size_t)(colon - stable) &&
           strncasecmp(stable, sel, strlen(sel)) == 0;
}

static int
all_digits(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

long
clf_bench_find_device(const clf_bench_report *r, const char *sel)
{
    int rule;
    size_t i;

    if (sel == NULL || *sel == '\0')
        return -1;
    for (rule = 1; rule <= 5; rule++)
        for (i = 0; i < r->ndevices; i++) {
            const clf_bench_device *d = &r->devices[i];
            int hit = 0;
            if (rule == 1)
                hit = all_digits(sel) &&
                      strtoul(sel, NULL, 10) == (unsigned long)d->index;
            else if (rule == 2)
                hit = (strcasecmp(sel, "gpu") == 0 && d->is_gpu) ||
                      (strcasecmp(sel, "cpu") == 0 && !d->is_gpu);
            else if (rule == 3)
                hit = stable_match(d->stable_name, sel);
            else if (rule == 4)
                hit = has_piece(d->platform, sel);
            else
                hit = has_piece(d->name, sel);
            if (hit)
                return (long)i;
        }
    return -1;
}

/* --------------------------------------------------------------- load */

int
clf_bench_loadavg(const char *path, double out[3])
{
    FILE *f = fopen(path, "r");
    int got;

    out[0] = out[1] = out[2] = NAN;
    if (f == NULL)
        return -1;
    got = fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]);
    fclose(f);
    if (got != 3) {
        out[0] = out[1] = out[2] = NAN;
        return -1;
    }
    return 0;
}

/* The best rate of the device's rows: GFLOP/s (bw 0) or GB/s (bw 1) of a
 * whole forward or a stage; *who names it. */
static double
best_rate(const clf_bench_report *r, size_t dev, int bw, char *who, size_t cap)
{
    double best = 0.0;
    size_t i;
    int s;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        char label[CLF_BENCH_MODE_LABEL];
        if (x->device != dev || x->status != CLF_BENCH_OK)
            continue;
        for (s = -1; s < CLF_STAGE_COUNT; s++) {
            const double t = s < 0 ? x->wall.median : x->stage[s].median;
            const double w = s < 0
                                 ? (bw ? x->bytes : x->flops)
                                 : (bw ? x->stage_bytes[s] : x->stage_flops[s]);
            const double v = w / t * 1e-9;
            if (!(t > 0.0) || !(w > 0.0) || !isfinite(v) || v <= best)
                continue;
            best = v;
            snprintf(who, cap, "%s n=%zu k=%zu D=%zu h=%zu B=%zu, %s",
                     clf_bench_mode_label(x, label, sizeof label), x->n,
                     x->k_requested, x->d_model, x->heads, x->batch,
                     s < 0 ? "whole forward" : clf_stage_name((clf_stage)s));
        }
    }
    return best;
}

/* Raises *peak to rate where rate passes it; *kept keeps the first
 * figure.  Appends to note.  Returns 1 when raised. */
static int
raise_peak(double *peak, double *kept, double rate, const char *unit,
           const char *what, const char *who, char *note, size_t cap)
{
    size_t len = strlen(note);

    if (isnan(*peak) || !(rate > *peak))
        return 0;
    if (isnan(*kept))
        *kept = *peak;
    snprintf(note + len, cap - len,
             "%s%s raised from the %.4g %s the kernels measured to %.4g, "
             "the rate of %s",
             len ? "; " : "", what, *kept, unit, rate, who);
    *peak = rate;
    return 1;
}

int
clf_bench_peaks_hold(clf_bench_report *r, size_t dev)
{
    clf_bench_device *d = &r->devices[dev];
    char who[160];
    double rate;
    size_t i;
    int raised = 0;

    rate = best_rate(r, dev, 0, who, sizeof who);
    raised |= raise_peak(&d->peak_gflops, &d->fma_measured, rate, "GFLOP/s",
                         "fp32 peak", who, d->peak_note, sizeof d->peak_note);
    rate = best_rate(r, dev, 1, who, sizeof who);
    raised |=
        raise_peak(&d->peak_gbps, &d->copy_measured, rate, "GB/s",
                   "copy bandwidth", who, d->peak_note, sizeof d->peak_note);
    for (i = 0; i < r->nresults; i++)
        if (r->results[i].device == dev)
            clf_bench_result_roofline(&r->results[i], d);
    return raised;
}
