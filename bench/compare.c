/* The comparison of a run with an earlier run's JSON, possibly from
 * another machine.  Devices are paired first by stable name, then by
 * platform, name and driver (files from before stable names), then the
 * rest by position; rows are paired by configuration on paired devices.
 * Every compared row names both devices; rows found on one side only are
 * listed apart. */
#define _POSIX_C_SOURCE 200809L

#include "output.h"
#include "plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- compare */

static int
same_device(const clf_bench_device *a, const clf_bench_device *b)
{
    return strcmp(a->platform, b->platform) == 0 &&
           strcmp(a->name, b->name) == 0 && strcmp(a->driver, b->driver) == 0;
}

static int
same_stable(const clf_bench_device *a, const clf_bench_device *b)
{
    return a->stable_name[0] != '\0' &&
           strcmp(a->stable_name, b->stable_name) == 0;
}

/* One pass of the pairing: each unpaired device of r takes the first
 * unpaired device of base that `match` accepts (any, when match is
 * NULL). */
static void
pair_pass(const clf_bench_report *r, const clf_bench_report *base, long *pair,
          char *taken,
          int (*match)(const clf_bench_device *, const clf_bench_device *))
{
    size_t i, j;

    for (i = 0; i < r->ndevices; i++) {
        if (pair[i] >= 0)
            continue;
        for (j = 0; j < base->ndevices; j++)
            if (!taken[j] &&
                (match == NULL || match(&r->devices[i], &base->devices[j]))) {
                pair[i] = (long)j;
                taken[j] = 1;
                break;
            }
    }
}

int
clf_bench_compare_devices(const clf_bench_report *r,
                          const clf_bench_report *base, long *pair)
{
    char *taken = calloc(base->ndevices + 1, 1);
    size_t i;

    if (taken == NULL)
        return -1;
    for (i = 0; i < r->ndevices; i++)
        pair[i] = -1;
    pair_pass(r, base, pair, taken, same_stable);
    pair_pass(r, base, pair, taken, same_device);
    pair_pass(r, base, pair, taken, NULL);
    free(taken);
    return 0;
}

/* The row of base on device bdev with x's configuration, or -1. */
static long
find_row(const clf_bench_report *base, const clf_bench_result *x, long bdev)
{
    const clf_bench_result *y =
        bdev < 0 ? NULL : clf_bench_report_row_on(base, x, (size_t)bdev);

    return y != NULL ? (long)(y - base->results) : -1;
}

long
clf_bench_compare_match(const clf_bench_report *r, size_t i,
                        const clf_bench_report *base, int *other_device)
{
    long *pair = malloc((r->ndevices + 1) * sizeof *pair), j = -1, bdev;
    size_t dev = r->results[i].device;

    *other_device = 0;
    if (pair == NULL || clf_bench_compare_devices(r, base, pair) != 0) {
        free(pair);
        return -1;
    }
    bdev = pair[dev];
    if (bdev >= 0) {
        j = find_row(base, &r->results[i], bdev);
        *other_device =
            j >= 0 && !same_device(&r->devices[dev], &base->devices[bdev]);
    }
    free(pair);
    return j;
}

static double
median_of(const clf_bench_result *x)
{
    return x->status == CLF_BENCH_OK ? x->wall.median : NAN;
}

static void
print_pair_head(FILE *f, const clf_bench_report *r, size_t dev,
                const clf_bench_report *base, long bdev)
{
    const clf_bench_device *a = &r->devices[dev], *b = &base->devices[bdev];
    char la[64], lb[64];

    clf_bench_device_label(r, dev, la, sizeof la);
    clf_bench_device_label(base, (size_t)bdev, lb, sizeof lb);
    fprintf(f,
            "\n-- now %s: %s / %s (driver %s)\n"
            "   baseline %s: %s / %s (driver %s)\n\n",
            la, a->platform, a->name, a->driver, lb, b->platform, b->name,
            b->driver);
    fprintf(f, "%-12s %-12s %6s %5s %5s %3s %3s  %-11s %12s %10s %13s\n", "now",
            "baseline", "n", "k", "D", "h", "B", "mode", "baseline ms",
            "now ms", "now/baseline");
}

static void
print_pair_row(FILE *f, const clf_bench_report *r, const clf_bench_result *x,
               const clf_bench_report *base, const clf_bench_result *y)
{
    char la[64], lb[64], a[16], b[16], ratio[16];

    clf_bench_device_label(r, x->device, la, sizeof la);
    clf_bench_device_label(base, y->device, lb, sizeof lb);
    clf_bench_fmt_ms(a, sizeof a, median_of(y));
    clf_bench_fmt_ms(b, sizeof b, median_of(x));
    clf_bench_fmt_g(ratio, sizeof ratio, "%.3f", median_of(x) / median_of(y));
    fprintf(f, "%-12s %-12s %6zu %5zu %5zu %3zu %3zu  %-11s %12s %10s %13s\n",
            la, lb, x->n, x->k_requested, x->d_model, x->heads, x->batch,
            clf_bench_mode_name(x->mode), a, b, ratio);
}

/* The rows of device dev of r paired with device bdev of base. */
static size_t
print_pair(FILE *f, const clf_bench_report *r, size_t dev,
           const clf_bench_report *base, long bdev)
{
    size_t i, matched = 0;
    long j;

    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        if (x->device != dev || (j = find_row(base, x, bdev)) < 0)
            continue;
        if (matched++ == 0)
            print_pair_head(f, r, dev, base, bdev);
        print_pair_row(f, r, x, base, &base->results[j]);
    }
    return matched;
}

/* Rows of `one` with no partner in `other` (pair: one's device to
 * other's, or -1); returns how many. */
static size_t
print_unmatched(FILE *f, const char *title, const clf_bench_report *one,
                const clf_bench_report *other, const long *pair)
{
    char label[64], ms[16];
    size_t i, n = 0;

    for (i = 0; i < one->nresults; i++) {
        const clf_bench_result *x = &one->results[i];
        long bdev = pair[x->device];
        if (bdev >= 0 && find_row(other, x, bdev) >= 0)
            continue;
        if (n++ == 0)
            fprintf(f, "\n-- %s\n\n%-12s %6s %5s %5s %3s %3s  %-11s %10s\n",
                    title, "device", "n", "k", "D", "h", "B", "mode", "ms");
        clf_bench_device_label(one, x->device, label, sizeof label);
        clf_bench_fmt_ms(ms, sizeof ms, median_of(x));
        fprintf(f, "%-12s %6zu %5zu %5zu %3zu %3zu  %-11s %10s\n", label, x->n,
                x->k_requested, x->d_model, x->heads, x->batch,
                clf_bench_mode_name(x->mode), ms);
    }
    return n;
}

/* pair[] read the other way: base's device to r's, or -1. */
static void
invert(const long *pair, size_t n, long *back, size_t nback)
{
    size_t i;

    for (i = 0; i < nback; i++)
        back[i] = -1;
    for (i = 0; i < n; i++)
        if (pair[i] >= 0)
            back[pair[i]] = (long)i;
}

size_t
clf_bench_print_compare(FILE *f, const clf_bench_report *r,
                        const clf_bench_report *base)
{
    long *pair = malloc((r->ndevices + 1) * sizeof *pair);
    long *back = malloc((base->ndevices + 1) * sizeof *back);
    size_t dev, matched = 0;

    if (pair == NULL || back == NULL ||
        clf_bench_compare_devices(r, base, pair) != 0) {
        free(pair);
        free(back);
        return 0;
    }
    invert(pair, r->ndevices, back, base->ndevices);
    fprintf(f,
            "\n== compared with the baseline run of %s on %s (%s) ==\n"
            "devices paired by stable name, else by platform, name and "
            "driver, else by position; now/baseline above 1 means slower "
            "now\n",
            base->started, base->host, base->command);
    for (dev = 0; dev < r->ndevices; dev++)
        if (pair[dev] >= 0)
            matched += print_pair(f, r, dev, base, pair[dev]);
    print_unmatched(f, "only in this run (no such row in the baseline)", r,
                    base, pair);
    print_unmatched(f, "only in the baseline (no such row in this run)", base,
                    r, back);
    free(pair);
    free(back);
    return matched;
}
