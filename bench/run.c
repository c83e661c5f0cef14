/* Measuring: runs the configuration matrix (bench/matrix.c) and the
 * accuracy study (bench/accuracy.c) on one device, several or all, through
 * the public API only, into the records of bench/results.h; checks the
 * sizes first.  Nothing here formats a report. */
#define _POSIX_C_SOURCE 200809L

#include "measure.h"
#include "roofline.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 32

static int
device_selectors(const struct clf_bench_options *o, char sel[MAX_DEVICES][128],
                 size_t *count)
{
    size_t m = 0;

    if (o->device == NULL || *o->device == '\0') {
        sel[0][0] = '\0';
        *count = 1;
        return 0;
    }
    if (strcmp(o->device, "all") == 0) {
        clf_device_info infos[MAX_DEVICES];
        size_t total, i;
        int rc = clf_devices_list(infos, MAX_DEVICES, &total);
        if (rc != 0) {
            fprintf(stderr, "%s: listing devices: %s: %s\n", o->prog,
                    clf_strerror(rc), clf_error_message(rc));
            return -1;
        }
        for (i = 0; i < total && i < MAX_DEVICES; i++)
            snprintf(sel[m++], 128, "%u", infos[i].index);
    } else {
        const char *p = o->device;
        while (*p != '\0' && m < MAX_DEVICES) {
            size_t len = strcspn(p, ",");
            if (len == 0 || len >= 128) {
                fprintf(stderr, "%s: bad --device \"%s\"\n", o->prog,
                        o->device);
                return -1;
            }
            memcpy(sel[m], p, len);
            sel[m++][len] = '\0';
            p += len;
            if (*p == ',')
                p++;
        }
    }
    if (m == 0) {
        fprintf(stderr, "%s: no device to run on\n", o->prog);
        return -1;
    }
    *count = m;
    return 0;
}

/* Records the device and builds its kernels; returns the device's
 * index in the report, or -1 (reported) when it failed. */
static long
device_open(struct run *run, clf_context *ctx)
{
    clf_device_info info;
    clf_context_stats cs;
    clf_bench_device *d;
    double t;
    int rc;

    clf_context_device_info(ctx, &info);
    d = clf_bench_report_add_device(run->rep);
    if (d == NULL)
        return -1;
    clf_bench_device_describe(d, &info);
    clf_bench_progress(run, "device %u: %s / %s (driver %s): building kernels",
                       info.index, info.platform, info.name, info.driver);
    t = clf_bench_now();
    rc = clf_context_build(ctx);
    d->build_s = clf_bench_now() - t;
    if (rc != 0) {
        fprintf(stderr, "%s: device %u: kernel build: %s: %s\n%s\n",
                run->o->prog, info.index, clf_strerror(rc),
                clf_error_message(rc), clf_context_build_log(ctx));
        return -1;
    }
    if (clf_context_stats_get(ctx, &cs) == 0) {
        d->source_builds = cs.source_builds;
        d->cache_loads = cs.cache_loads;
    }
    return (long)(run->rep->ndevices - 1);
}

/* The device's peaks (clf_context_peaks), unless --no-peak; --peak (or
 * again) measures them again.  A failure leaves them NaN and is
 * reported. */
static void
device_peaks(struct run *run, clf_context *ctx, clf_bench_device *d, int again)
{
    clf_device_peaks p;
    int rc;

    if (run->o->peak < 0)
        return;
    clf_bench_progress(run, "device %u: peaks%s", d->index,
                       again              ? ", measured again: a rate of the "
                                            "run passed the cached ones"
                       : run->o->peak > 0 ? ", measured again (--peak)"
                                          : "");
    rc = clf_context_peaks(
        ctx, run->o->peak > 0 || again ? CLF_PEAKS_MEASURE : 0, &p);
    if (rc != 0) {
        fprintf(stderr, "%s: device %u: peaks not measured: %s: %s\n",
                run->o->prog, d->index, clf_strerror(rc),
                clf_error_message(rc));
        return;
    }
    d->peak_gflops = p.fma_gflops;
    d->peak_gbps = p.copy_gbps;
    d->h2d_gbps = p.h2d_gbps;
    d->peak_cached = p.cached;
    d->fma_width = p.fma_width;
    d->fma_chains = p.fma_chains;
    d->copy_api = p.copy_api;
    clf_bench_progress(
        run,
        "device %u: %.1f GFLOP/s fp32, %.1f GB/s copy, %.1f GB/s host "
        "to device%s",
        d->index, p.fma_gflops, p.copy_gbps, p.h2d_gbps,
        p.cached ? " (cached)" : "");
}

/* After the device's rows no peak may stay below a rate they reached: a
 * cached peak below one is measured again (the cache may hold a busier
 * machine's figure), and one still below is raised to it
 * (clf_bench_peaks_hold), said on stderr. */
static void
hold_peaks(struct run *run, clf_context *ctx, size_t dev)
{
    clf_bench_device *d = &run->rep->devices[dev];
    const clf_bench_device before = *d;

    if (isnan(d->peak_gflops) || !clf_bench_peaks_hold(run->rep, dev))
        return;
    if (before.peak_cached) {
        *d = before;
        device_peaks(run, ctx, d, 1);
        if (!clf_bench_peaks_hold(run->rep, dev))
            return;
    }
    clf_bench_progress(run, "device %u: %s", d->index, d->peak_note);
}

/* The matrix, then the accuracy study (--accuracy, or --quick at the first
 * D, h and B), for one (D, h). */
static void
run_width(struct run *run, clf_context *ctx, size_t dev, size_t id, size_t ih)
{
    const struct clf_bench_options *o = run->o;
    struct weights w;
    struct config c;
    size_t ib, in, D = o->d[id], h = o->h[ih];

    if (D % h != 0) {
        fprintf(stderr, "%s: D=%zu is not a multiple of h=%zu: skipped\n",
                o->prog, D, h);
        run->failures++;
        return;
    }
    if (clf_bench_weights_make(&w, D, o->seed) != 0) {
        fprintf(stderr, "%s: out of host memory\n", o->prog);
        run->failures++;
        return;
    }
    for (ib = 0; ib < o->nb; ib++) {
        c.dev = dev;
        c.D = D;
        c.h = h;
        c.B = o->b[ib];
        if (!o->accuracy)
            clf_bench_run_matrix(run, ctx, &c, &w);
        if (o->accuracy || (o->quick && id == 0 && ih == 0 && ib == 0))
            for (in = 0; in < o->acc_nn; in++)
                clf_bench_run_accuracy(run, ctx, dev, o->acc_n[in], D, h,
                                       o->b[ib], &w);
    }
    clf_bench_weights_free(&w);
}

static void
run_device(struct run *run, const char *selector)
{
    const struct clf_bench_options *o = run->o;
    clf_context *ctx = NULL;
    clf_bench_device *d;
    size_t id, ih;
    long dev;
    int rc;

    rc = clf_context_create_ex(&ctx, selector[0] ? selector : NULL,
                               CLF_CONTEXT_PROFILING);
    if (rc != 0) {
        fprintf(stderr, "%s: device \"%s\": %s (%s): %s\n", o->prog,
                selector[0] ? selector : "default", clf_strerror(rc),
                clf_status_name(rc), clf_error_message(rc));
        run->failures++;
        return;
    }
    /* The bench owns its process: stored GEMM tuning may apply to CLBlast
     * process-wide, as it did for the figures it is compared with. */
    if ((rc = clf_tune_apply_process_wide(ctx)) != 0 ||
        clf_context_warnings(ctx)[0] != '\0')
        fprintf(stderr, "%s: stored GEMM tuning not applied: %s\n", o->prog,
                rc != 0 ? clf_error_message(rc) : clf_context_warnings(ctx));
    if ((dev = device_open(run, ctx)) < 0) {
        run->failures++;
        clf_context_destroy(ctx);
        return;
    }
    device_peaks(run, ctx, &run->rep->devices[dev], 0);
    run->min_rate = run->rate[0] = run->rate[1] = 0.0;
    for (id = 0; id < o->nd; id++)
        for (ih = 0; ih < o->nh; ih++)
            run_width(run, ctx, (size_t)dev, id, ih);
    hold_peaks(run, ctx, (size_t)dev);
    d = &run->rep->devices[dev];
    snprintf(d->tuning, sizeof d->tuning, "%s", clf_context_tuning(ctx));
    snprintf(d->choices, sizeof d->choices, "%s",
             clf_context_kernel_choices(ctx));
    clf_context_destroy(ctx);
}

/* The matrix's and the study's inputs and outputs: B x n x D floats. */
static int
check_inputs(const struct clf_bench_options *o, const size_t *ns, size_t nn,
             char *why, size_t len)
{
    size_t ib, in, id;

    for (ib = 0; ib < o->nb; ib++)
        for (in = 0; in < nn; in++)
            for (id = 0; id < o->nd; id++)
                if (!clf_bench_fits_size(o->b[ib], ns[in], o->d[id],
                                         sizeof(float))) {
                    snprintf(why, len,
                             "--batch %zu x --n %zu x --d-model %zu floats "
                             "overflow the address space",
                             o->b[ib], ns[in], o->d[id]);
                    return -1;
                }
    return 0;
}

int
clf_bench_check_sizes(const struct clf_bench_options *o, char *why, size_t len)
{
    size_t id;

    for (id = 0; id < o->nd; id++)
        if (!clf_bench_fits_size(o->d[id], o->d[id], sizeof(float), 1)) {
            snprintf(why, len,
                     "--d-model %zu: its %zu x %zu weights overflow the "
                     "address space",
                     o->d[id], o->d[id], o->d[id]);
            return -1;
        }
    if (check_inputs(o, o->n, o->nn, why, len) != 0 ||
        check_inputs(o, o->acc_n, o->acc_nn, why, len) != 0)
        return -1;
    return clf_bench_check_study(o, why, len);
}

int
clf_bench_run(const struct clf_bench_options *o, clf_bench_report *rep,
              double t0)
{
    struct run run;
    char sel[MAX_DEVICES][128];
    size_t nsel = 0, i;
    char why[256];

    if (clf_bench_check_sizes(o, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n", o->prog, why);
        return -1;
    }
    if (device_selectors(o, sel, &nsel) != 0)
        return -1;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.rep = rep;
    run.t0 = t0;
    run.deadline = t0 + o->budget;
    for (i = 0; i < nsel; i++) {
        double left = run.deadline - clf_bench_now();
        /* Each device gets an equal share of what is left, so that a slow
         * one cannot starve the rest. */
        run.dev_deadline =
            clf_bench_now() + (left > 0.0 ? left : 0.0) / (double)(nsel - i);
        run_device(&run, sel[i]);
    }
    rep->wall_s = clf_bench_now() - t0;
    return run.failures;
}
