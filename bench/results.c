/* The bench suite's records and the arithmetic done on them: names of
 * modes and statuses, the report's arrays, statistics, GFLOP/s, the FLOP
 * split, crossovers and size lists.  No device and no output. */
#include "results.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- records */

static const char *const mode_names[CLF_BENCH_MODE_COUNT] = {
    "linformer", "full", "causal", "causal-full"};

const char *
clf_bench_mode_name(clf_bench_mode mode)
{
    if ((int)mode < 0 || mode >= CLF_BENCH_MODE_COUNT)
        return "?";
    return mode_names[mode];
}

int
clf_bench_mode_parse(const char *name, clf_bench_mode *out)
{
    int m;

    for (m = 0; m < CLF_BENCH_MODE_COUNT; m++)
        if (name != NULL && strcmp(name, mode_names[m]) == 0) {
            *out = (clf_bench_mode)m;
            return 0;
        }
    return -1;
}

clf_bench_mode
clf_bench_mode_reference(clf_bench_mode mode)
{
    if (mode == CLF_BENCH_LINFORMER)
        return CLF_BENCH_FULL;
    if (mode == CLF_BENCH_CAUSAL)
        return CLF_BENCH_CAUSAL_FULL;
    return mode;
}

static const char *const status_names[CLF_BENCH_STATUS_COUNT] = {
    "ok", "too_large", "over_budget", "failed"};

const char *
clf_bench_status_name(clf_bench_status status)
{
    if ((int)status < 0 || status >= CLF_BENCH_STATUS_COUNT)
        return "?";
    return status_names[status];
}

int
clf_bench_status_parse(const char *name, clf_bench_status *out)
{
    int s;

    for (s = 0; s < CLF_BENCH_STATUS_COUNT; s++)
        if (name != NULL && strcmp(name, status_names[s]) == 0) {
            *out = (clf_bench_status)s;
            return 0;
        }
    return -1;
}

const char *
clf_bench_init_name(clf_bench_init init)
{
    switch (init) {
    case CLF_BENCH_INIT_LUCIDRAINS:
        return "lucidrains";
    case CLF_BENCH_INIT_FAIRSEQ:
        return "fairseq";
    default:
        return "?";
    }
}

static clf_bench_stats
no_stats(void)
{
    clf_bench_stats s;

    s.median = s.min = s.max = s.mad = NAN;
    s.runs = 0;
    return s;
}

void
clf_bench_report_init(clf_bench_report *r)
{
    memset(r, 0, sizeof *r);
    r->budget_s = NAN;
    r->wall_s = NAN;
    r->load_start[0] = r->load_start[1] = r->load_start[2] = NAN;
    r->load_end[0] = r->load_end[1] = r->load_end[2] = NAN;
}

void
clf_bench_report_free(clf_bench_report *r)
{
    if (r == NULL)
        return;
    free(r->devices);
    free(r->results);
    free(r->accuracy);
    clf_bench_report_init(r);
}

/* Grows an array of records to hold one more; returns 0 or -1. */
static int
grow(void **items, size_t *cap, size_t count, size_t size)
{
    void *p;
    size_t ncap;

    if (count < *cap)
        return 0;
    ncap = *cap ? 2 * *cap : 16;
    if (ncap > SIZE_MAX / size)
        return -1;
    p = realloc(*items, ncap * size);
    if (p == NULL)
        return -1;
    *items = p;
    *cap = ncap;
    return 0;
}

void
clf_bench_device_describe(clf_bench_device *d, const clf_device_info *info)
{
    d->index = info->index;
    snprintf(d->platform, sizeof d->platform, "%s", info->platform);
    snprintf(d->name, sizeof d->name, "%s", info->name);
    snprintf(d->driver, sizeof d->driver, "%s", info->driver);
    snprintf(d->version, sizeof d->version, "%s", info->version);
    d->is_gpu = info->is_gpu;
    d->compute_units = info->compute_units;
    d->global_mem = info->global_mem;
    d->max_alloc = info->max_alloc;
    snprintf(d->stable_name, sizeof d->stable_name, "%s", info->stable_name);
}

clf_bench_device *
clf_bench_report_add_device(clf_bench_report *r)
{
    clf_bench_device *d;

    if (grow((void **)&r->devices, &r->cap_devices, r->ndevices, sizeof *d))
        return NULL;
    d = &r->devices[r->ndevices++];
    memset(d, 0, sizeof *d);
    d->build_s = NAN;
    d->peak_gflops = d->peak_gbps = d->h2d_gbps = NAN;
    d->fma_measured = d->copy_measured = NAN;
    return d;
}

clf_bench_result *
clf_bench_report_add_result(clf_bench_report *r)
{
    clf_bench_result *x;
    int i;

    if (grow((void **)&r->results, &r->cap_results, r->nresults, sizeof *x))
        return NULL;
    x = &r->results[r->nresults++];
    memset(x, 0, sizeof *x);
    x->status = CLF_BENCH_OK;
    x->first_call_s = NAN;
    x->wall = no_stats();
    x->device_s = no_stats();
    for (i = 0; i < CLF_STAGE_COUNT; i++) {
        x->stage[i] = no_stats();
        x->stage_flops[i] = NAN;
        x->stage_bytes[i] = x->stage_intensity[i] = NAN;
        x->stage_roofline_pct[i] = NAN;
    }
    x->bytes = x->intensity = x->roofline_pct = NAN;
    x->flops = x->gflops = NAN;
    x->device_bytes = x->io_bytes = NAN;
    x->rel_error = NAN;
    x->fp32_error = NAN;
    return x;
}

clf_bench_accuracy *
clf_bench_report_add_accuracy(clf_bench_report *r)
{
    clf_bench_accuracy *a;
    int i;

    if (grow((void **)&r->accuracy, &r->cap_accuracy, r->naccuracy, sizeof *a))
        return NULL;
    a = &r->accuracy[r->naccuracy++];
    memset(a, 0, sizeof *a);
    a->status = CLF_BENCH_OK;
    a->linformer = no_stats();
    a->full = no_stats();
    for (i = 0; i < CLF_BENCH_INIT_COUNT; i++) {
        a->rel_error[i] = NAN;
        a->weight[i].mean = a->weight[i].mean_abs = NAN;
        a->weight[i].max_abs = NAN;
    }
    a->full_weight = NAN;
    a->host_max_diff = NAN;
    return a;
}

const clf_bench_result *
clf_bench_report_row_on(const clf_bench_report *r, const clf_bench_result *x,
                        size_t dev)
{
    size_t i;

    for (i = 0; i < r->nresults; i++)
        if (r->results[i].device == dev &&
            clf_bench_same_config(&r->results[i], x))
            return &r->results[i];
    return NULL;
}

int
clf_bench_report_config_seen(const clf_bench_report *r, size_t i)
{
    size_t j;

    for (j = 0; j < i; j++)
        if (clf_bench_same_config(&r->results[j], &r->results[i]))
            return 1;
    return 0;
}

/* ---------------------------------------------------------- arithmetic */

const char *
clf_bench_mode_label(const clf_bench_result *x, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s%s", clf_bench_mode_name(x->mode),
             x->compression != CLF_COMPRESS_LINEAR ? ":" : "",
             x->compression != CLF_COMPRESS_LINEAR
                 ? clf_compression_name(x->compression)
                 : "",
             x->precision == CLF_PRECISION_HALF ? "/h" : "");
    return buf;
}

int
clf_bench_same_compression(const clf_bench_result *a, const clf_bench_result *b)
{
    return a->compression == b->compression || a->mode == CLF_BENCH_FULL ||
           a->mode == CLF_BENCH_CAUSAL_FULL || b->mode == CLF_BENCH_FULL ||
           b->mode == CLF_BENCH_CAUSAL_FULL;
}

int
clf_bench_same_config(const clf_bench_result *a, const clf_bench_result *b)
{
    return a->mode == b->mode && a->n == b->n &&
           a->k_requested == b->k_requested && a->d_model == b->d_model &&
           a->heads == b->heads && a->batch == b->batch &&
           a->precision == b->precision && clf_bench_same_compression(a, b);
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

clf_bench_stats
clf_bench_stats_of(const double *values, size_t count)
{
    clf_bench_stats s = no_stats();
    double *v;
    size_t i, m = 0;

    if (values == NULL || count == 0)
        return s;
    v = malloc(count * sizeof *v);
    if (v == NULL)
        return s;
    for (i = 0; i < count; i++)
        if (!isnan(values[i]))
            v[m++] = values[i];
    if (m > 0) {
        qsort(v, m, sizeof *v, cmp_double);
        s.median = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
        s.min = v[0];
        s.max = v[m - 1];
        s.runs = m;
        for (i = 0; i < m; i++)
            v[i] = fabs(v[i] - s.median);
        qsort(v, m, sizeof *v, cmp_double);
        s.mad = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
    }
    free(v);
    return s;
}

double
clf_bench_gflops(double flops, double seconds)
{
    if (isnan(flops) || isnan(seconds) || !(seconds > 0.0))
        return NAN;
    return flops / seconds * 1e-9;
}

double
clf_bench_rel_error(const float *a, const float *b, size_t count)
{
    double num = 0.0, den = 0.0;
    size_t i;

    for (i = 0; i < count; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (!(den > 0.0))
        return NAN;
    return sqrt(num / den);
}

double
clf_bench_flops_model(const clf_bench_shape *s,
                      double stage_flops[CLF_STAGE_COUNT])
{
    clf_attention_desc d;
    double total = NAN;
    int full, causal;

    if (s == NULL)
        return NAN;
    full = s->mode == CLF_BENCH_FULL || s->mode == CLF_BENCH_CAUSAL_FULL;
    causal = s->mode == CLF_BENCH_CAUSAL || s->mode == CLF_BENCH_CAUSAL_FULL;
    if ((int)s->mode < 0 || s->mode >= CLF_BENCH_MODE_COUNT)
        return NAN;
    /* The layer the bench makes (see layer_make): full modes compress
     * nothing and are given k = 1. */
    memset(&d, 0, sizeof d);
    d.d_model = s->d_model;
    d.heads = s->heads;
    d.max_seq_len = s->n;
    d.k = full ? 1 : s->k;
    d.bias_out = 1;
    d.causal_block = s->mode == CLF_BENCH_CAUSAL ? s->causal_block : 0;
    if (clf_attention_desc_flops(&d, full ? CLF_MODE_FULL : CLF_MODE_LINFORMER,
                                 s->batch, s->n, causal, stage_flops,
                                 &total) != 0)
        return NAN;
    return total;
}

void
clf_bench_fused_split(double stage_flops[CLF_STAGE_COUNT])
{
    stage_flops[CLF_STAGE_FUSED] = stage_flops[CLF_STAGE_SCORES] +
                                   stage_flops[CLF_STAGE_SOFTMAX] +
                                   stage_flops[CLF_STAGE_WEIGHTED_SUM];
    stage_flops[CLF_STAGE_SCORES] = 0.0;
    stage_flops[CLF_STAGE_SOFTMAX] = 0.0;
    stage_flops[CLF_STAGE_WEIGHTED_SUM] = 0.0;
}

void
clf_bench_causal_shape(size_t n, size_t k, size_t *block, size_t *k_out)
{
    size_t b = 1, nb, kk = k < n ? k : n;

    while (b * b * 2 < n)
        b *= 2;
    nb = (n + b - 1) / b;
    kk = nb * (kk / nb > 0 ? kk / nb : 1);
    if (kk > n)
        kk = nb;
    *block = b;
    *k_out = kk;
}

double
clf_bench_init_bound(clf_bench_init init, size_t k, size_t max_seq_len)
{
    if (k == 0)
        return NAN;
    if (init == CLF_BENCH_INIT_LUCIDRAINS)
        return 1.0 / sqrt((double)k);
    if (init == CLF_BENCH_INIT_FAIRSEQ)
        return sqrt(6.0 / (double)(k + max_seq_len)) / sqrt(2.0);
    return NAN;
}

double
clf_bench_decisive_alpha(size_t n, double target)
{
    if (n <= 1 || !(target > 0.0 && target < 1.0))
        return 0.0;
    return log(target / (1.0 - target) * (double)(n - 1));
}

double
clf_bench_decisive_full(size_t n, double alpha)
{
    return 1.0 / (1.0 + (double)(n > 0 ? n - 1 : 0) * exp(-alpha));
}

double
clf_bench_decisive_weight(const float *E, const float *F, size_t k, size_t N,
                          size_t j, double alpha)
{
    double m = -INFINITY, sum = 0.0, acc = 0.0;
    size_t s;

    if (k == 0 || j >= N)
        return NAN;
    for (s = 0; s < k; s++)
        if (alpha * E[s * N + j] > m)
            m = alpha * E[s * N + j];
    for (s = 0; s < k; s++) {
        double p = exp(alpha * E[s * N + j] - m);
        sum += p;
        acc += p * F[s * N + j];
    }
    return acc / sum;
}

size_t
clf_bench_crossover(const size_t *n, const double *linformer,
                    const double *reference, size_t count, double *estimate)
{
    size_t i, start = SIZE_MAX, lose = SIZE_MAX;

    if (estimate != NULL)
        *estimate = NAN;
    for (i = 0; i < count; i++) {
        if (isnan(linformer[i]) || isnan(reference[i]))
            continue;
        if (linformer[i] < reference[i]) {
            if (start == SIZE_MAX)
                start = i;
        } else {
            start = SIZE_MAX;
            lose = i;
        }
    }
    if (start == SIZE_MAX)
        return 0;
    if (estimate != NULL && lose != SIZE_MAX && linformer[lose] > 0.0 &&
        reference[lose] > 0.0 && linformer[start] > 0.0 &&
        reference[start] > 0.0) {
        /* log(lin / ref) is >= 0 at the losing point and < 0 at the first
         * winning one: interpolate its zero linearly in log n. */
        double r0 = log(linformer[lose] / reference[lose]);
        double r1 = log(linformer[start] / reference[start]);
        double t = r0 / (r0 - r1);
        *estimate = exp(log((double)n[lose]) +
                        t * (log((double)n[start]) - log((double)n[lose])));
    }
    return n[start];
}

static int
same_group(const clf_bench_result *a, const clf_bench_result *b)
{
    return a->device == b->device && a->d_model == b->d_model &&
           a->heads == b->heads && a->batch == b->batch &&
           a->k_requested == b->k_requested && a->precision == b->precision &&
           clf_bench_same_compression(a, b);
}

static int
cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The median of the group's row of mode m at length n, NaN if none ran. */
static double
group_median(const clf_bench_report *r, const clf_bench_result *g,
             clf_bench_mode m, size_t n, int *present)
{
    size_t i;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->mode == m && x->n == n && same_group(x, g)) {
            if (present != NULL)
                *present = 1;
            return x->status == CLF_BENCH_OK ? x->wall.median : NAN;
        }
    }
    return NAN;
}

/* Whether row i starts a crossover group: a Linformer mode, the group's
 * first row of that mode. */
static int
starts_group(const clf_bench_report *r, size_t i)
{
    const clf_bench_result *g = &r->results[i];
    size_t j;

    if (clf_bench_mode_reference(g->mode) == g->mode)
        return 0;
    for (j = 0; j < i; j++)
        if (r->results[j].mode == g->mode && same_group(&r->results[j], g))
            return 0;
    return 1;
}

/* The crossover of the group that row g starts, into *c (may be NULL),
 * with scratch arrays of nresults entries.  Returns 1, or 0 when the
 * group has no reference row. */
static int
group_crossing(const clf_bench_report *r, const clf_bench_result *g, size_t *ns,
               double *lin, double *ref, clf_bench_crossing *c)
{
    clf_bench_mode refmode = clf_bench_mode_reference(g->mode);
    size_t j, m = 0, points = 0, p;
    int has_ref = 0;

    for (j = 0; j < r->nresults; j++) {
        const clf_bench_result *x = &r->results[j];
        if (x->mode == g->mode && same_group(x, g))
            ns[m++] = x->n;
    }
    qsort(ns, m, sizeof *ns, cmp_size);
    for (p = 0; p < m; p++) {
        lin[p] = group_median(r, g, g->mode, ns[p], NULL);
        ref[p] = group_median(r, g, refmode, ns[p], &has_ref);
        if (!isnan(lin[p]) && !isnan(ref[p]))
            points++;
    }
    if (!has_ref)
        return 0;
    if (c != NULL) {
        c->device = g->device;
        c->d_model = g->d_model;
        c->heads = g->heads;
        c->batch = g->batch;
        c->k_requested = g->k_requested;
        c->causal = g->mode == CLF_BENCH_CAUSAL;
        c->precision = g->precision;
        c->compression = g->compression;
        c->points = points;
        c->n = clf_bench_crossover(ns, lin, ref, m, &c->n_estimate);
    }
    return 1;
}

int
clf_bench_report_crossings(const clf_bench_report *r, clf_bench_crossing *out,
                           size_t cap, size_t *count)
{
    size_t i, found = 0;
    size_t *ns = NULL;
    double *lin = NULL, *ref = NULL;

    *count = 0;
    if (r->nresults == 0)
        return 0;
    ns = malloc(r->nresults * sizeof *ns);
    lin = malloc(r->nresults * sizeof *lin);
    ref = malloc(r->nresults * sizeof *ref);
    if (ns == NULL || lin == NULL || ref == NULL) {
        free(ns);
        free(lin);
        free(ref);
        return -1;
    }
    for (i = 0; i < r->nresults; i++)
        if (starts_group(r, i))
            found += (size_t)group_crossing(r, &r->results[i], ns, lin, ref,
                                            found < cap ? &out[found] : NULL);
    free(ns);
    free(lin);
    free(ref);
    *count = found;
    return 0;
}

int
clf_bench_parse_sizes(const char *list, size_t *out, size_t cap, size_t *count)
{
    const char *p = list;
    size_t m = 0;

    if (list == NULL || *list == '\0')
        return -1;
    for (;;) {
        char *end;
        unsigned long long v;
        if (*p < '0' || *p > '9')
            return -1;
        errno = 0;
        v = strtoull(p, &end, 10);
        if (errno != 0 || v == 0 || v > SIZE_MAX || m == cap)
            return -1;
        out[m++] = (size_t)v;
        if (*end == '\0')
            break;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
    *count = m;
    return 0;
}
