/* The comparison of a run with an earlier run's JSON. */
#define _POSIX_C_SOURCE 200809L

#include "output.h"

#include <math.h>
#include <string.h>

static void
fmt_ms(char *buf, size_t len, double s)
{
    if (isnan(s))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.1f", s * 1e3);
}

static void
fmt_g(char *buf, size_t len, const char *fmt, double v)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, fmt, v);
}

/* -------------------------------------------------------------- compare */

static int
same_config(const clf_bench_result *a, const clf_bench_result *b)
{
    return a->mode == b->mode && a->n == b->n && a->k == b->k &&
           a->k_requested == b->k_requested && a->d_model == b->d_model &&
           a->heads == b->heads && a->batch == b->batch &&
           a->causal_block == b->causal_block;
}

static int
same_device(const clf_bench_device *a, const clf_bench_device *b)
{
    return strcmp(a->platform, b->platform) == 0 &&
           strcmp(a->name, b->name) == 0 && strcmp(a->driver, b->driver) == 0;
}

long
clf_bench_compare_match(const clf_bench_report *r, size_t i,
                        const clf_bench_report *base, int *other_device)
{
    const clf_bench_result *x = &r->results[i];
    size_t j;

    *other_device = 0;
    for (j = 0; j < base->nresults; j++) {
        const clf_bench_result *y = &base->results[j];
        if (same_config(x, y) &&
            same_device(&r->devices[x->device], &base->devices[y->device]))
            return (long)j;
    }
    if (base->ndevices != 1)
        return -1;
    for (j = 0; j < base->nresults; j++)
        if (same_config(x, &base->results[j])) {
            *other_device = 1;
            return (long)j;
        }
    return -1;
}

size_t
clf_bench_print_compare(FILE *f, const clf_bench_report *r,
                        const clf_bench_report *base)
{
    size_t i, matched = 0;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        const clf_bench_result *y;
        char a[16], b[16], ratio[16];
        int other;
        long j = clf_bench_compare_match(r, i, base, &other);
        if (j < 0)
            continue;
        y = &base->results[j];
        if (matched == 0) {
            fprintf(f,
                    "\n== compared with the baseline run of %s (%s) ==\n"
                    "now/baseline above 1 means slower now\n\n",
                    base->started, base->command);
            fprintf(f, "%6s %5s %5s %3s %3s  %-11s %12s %10s %13s\n", "n", "k",
                    "D", "h", "B", "mode", "baseline ms", "now ms",
                    "now/baseline");
        }
        matched++;
        fmt_ms(a, sizeof a, y->status == CLF_BENCH_OK ? y->wall.median : NAN);
        fmt_ms(b, sizeof b, x->status == CLF_BENCH_OK ? x->wall.median : NAN);
        fmt_g(ratio, sizeof ratio, "%.3f",
              x->status == CLF_BENCH_OK && y->status == CLF_BENCH_OK
                  ? x->wall.median / y->wall.median
                  : NAN);
        fprintf(f, "%6zu %5zu %5zu %3zu %3zu  %-11s %12s %10s %13s", x->n,
                x->k_requested, x->d_model, x->heads, x->batch,
                clf_bench_mode_name(x->mode), a, b, ratio);
        if (other)
            fprintf(f, "  (baseline on %s / %s)",
                    base->devices[y->device].platform,
                    base->devices[y->device].name);
        fputc('\n', f);
    }
    return matched;
}
