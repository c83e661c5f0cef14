/*
 * Device peaks (clf_context_peaks): fp32 multiply-add throughput, device
 * memory copy bandwidth and host-to-device bandwidth, with the kernels of
 * cl/peaks.cl, cached per device and driver in the cache directory.
 *
 * The method is clpeak's: throughput from many independent multiply-add
 * chains per work-item (no chain waits on another, so the pipeline stays
 * full) over enough work-items to fill every compute unit; bandwidth from a
 * copy far larger than any cache.  Each figure is the best of PEAK_RUNS timed
 * runs on the host clock, enqueue to clFinish, after an untimed one (a
 * runtime may compile a kernel at its first launch: PoCL does).
 */
#include "runtime/runtime.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PEAK_RUNS 5
#define PEAK_MAGIC "clinformer-peaks 1"
/* The host side of the method (runs, sizes, repeats): change it when that
 * changes, so that figures measured the old way are measured again. */
#define PEAK_HOST_METHOD 3
#define PEAK_FILE_MAX 4096
/* What a device can plausibly do, in GFLOP/s and GB/s alike: from a
 * microcontroller-class emulation (1e-3) to far beyond any device built
 * (1e7, ten PFLOP/s or ten PB/s on one chip).  A cached figure outside it
 * was not measured here (1e-300 would show as 0.0 and make every roof%
 * meaningless), so the entry is ignored and measured again; a measured
 * one outside it is returned but not cached. */
#define PEAK_MIN 1e-3
#define PEAK_MAX 1e7
#define PEAK_TARGET_S 0.05         /* a timed FMA run */
#define PEAK_COPY_S 0.02           /* a timed copy run, at least */
#define PEAK_COPY_MAX (128u << 20) /* bytes of each copy buffer */
/* The multiply-add kernels of cl/peaks.cl: vector width and chains of
 * each; an iteration makes 4 steps of every chain, 2 FLOPs a lane. */
static const struct {
    enum clf__kernel_id id;
    int width, chains;
} fma_grid[] = {{CLF_K_PEAK_FMA_W1C8, 1, 8},    {CLF_K_PEAK_FMA_W1C16, 1, 16},
                {CLF_K_PEAK_FMA_W4C16, 4, 16},  {CLF_K_PEAK_FMA_W8C8, 8, 8},
                {CLF_K_PEAK_FMA_W8C16, 8, 16},  {CLF_K_PEAK_FMA_W8C24, 8, 24},
                {CLF_K_PEAK_FMA_W16C24, 16, 24}};
#define FMA_GRID (sizeof fma_grid / sizeof fma_grid[0])

/* ------------------------------------------------------------- measure */

/* Work-items of the FMA kernel: 2048 per compute unit, so that a GPU has
 * many waves in flight and a CPU many work-groups per core. */
static size_t
fma_items(const clf_context *ctx)
{
    size_t cu = ctx->info.compute_units > 0 ? ctx->info.compute_units : 1;

    return cu * 2048;
}

static int
fma_run(clf_context *ctx, enum clf__kernel_id id, cl_mem out, cl_uint iters,
        double *secs)
{
    cl_kernel k = ctx->kernels[id];
    cl_float m = 0.999f, c = 0.001f;
    double t0;
    cl_int err;

    CLF_SET_ARG(k, 0, out);
    CLF_SET_ARG(k, 1, m);
    CLF_SET_ARG(k, 2, c);
    CLF_SET_ARG(k, 3, iters);
    t0 = clf__now_s();
    CLF_TRY(clf__launch_1d(ctx, id, fma_items(ctx)));
    if ((err = clFinish(ctx->queue)) != CL_SUCCESS)
        return clf__fail(err, "peaks: clFinish after the FMA kernel (%d)", err);
    *secs = clf__now_s() - t0;
    return 0;
}

/* Grows the iteration count of kernel id until one run takes about
 * PEAK_TARGET_S, then keeps the best of PEAK_RUNS in *gflops (when
 * higher). */
static int
measure_fma(clf_context *ctx, enum clf__kernel_id id, double flops_per_iter,
            cl_mem out, double *gflops)
{
    const double target = ctx->peaks_quick ? 0.002 : PEAK_TARGET_S;
    const int runs = ctx->peaks_quick ? 1 : PEAK_RUNS;
    cl_uint iters = 4;
    double t = 0.0;
    int i;

    /* untimed: a runtime may compile the kernel at its first launch */
    CLF_TRY(fma_run(ctx, id, out, 1, &t));
    CLF_TRY(fma_run(ctx, id, out, iters, &t));
    while (t < target && iters < (1u << 20)) {
        double scale = t > 0.0 ? target / t : 16.0;
        iters = (cl_uint)((double)iters * (scale > 16.0 ? 16.0 : scale) + 1.0);
        CLF_TRY(fma_run(ctx, id, out, iters, &t));
    }
    for (i = 0; i < runs; i++) {
        double rate;
        CLF_TRY(fma_run(ctx, id, out, iters, &t));
        rate = (double)fma_items(ctx) * iters * flops_per_iter / t * 1e-9;
        if (rate > *gflops)
            *gflops = rate;
    }
    return 0;
}

/* reps copies back to back, then clFinish: a GPU copies 128 MiB in well
 * under a millisecond, too short for the host clock alone. */
static int
copy_run(clf_context *ctx, cl_mem src, cl_mem dst, cl_uint n, unsigned reps,
         double *secs)
{
    cl_kernel k = ctx->kernels[CLF_K_PEAK_COPY];
    double t0;
    cl_int err;
    unsigned r;

    CLF_SET_ARG(k, 0, src);
    CLF_SET_ARG(k, 1, dst);
    CLF_SET_ARG(k, 2, n);
    t0 = clf__now_s();
    for (r = 0; r < reps; r++)
        CLF_TRY(clf__launch_1d(ctx, CLF_K_PEAK_COPY, n));
    if ((err = clFinish(ctx->queue)) != CL_SUCCESS)
        return clf__fail(err, "peaks: clFinish after the copy kernel (%d)",
                         err);
    *secs = clf__now_s() - t0;
    return 0;
}

static int
write_run(clf_context *ctx, cl_mem dst, const void *host, size_t bytes,
          double *secs)
{
    double t0 = clf__now_s();
    cl_int err = clEnqueueWriteBuffer(ctx->queue, dst, CL_TRUE, 0, bytes, host,
                                      0, NULL, NULL);

    if (err != CL_SUCCESS)
        return clf__fail(err, "peaks: clEnqueueWriteBuffer of %zu bytes (%d)",
                         bytes, err);
    *secs = clf__now_s() - t0;
    return 0;
}

/* The copy buffers' size: 128 MiB, or less where the device's largest
 * allocation or an eighth of its memory is smaller; a multiple of 16. */
static size_t
copy_bytes(const clf_context *ctx)
{
    unsigned long long b = ctx->peaks_quick ? 1u << 20 : PEAK_COPY_MAX;

    if (ctx->info.max_alloc > 0 && ctx->info.max_alloc < b)
        b = ctx->info.max_alloc;
    if (ctx->info.global_mem > 0 && ctx->info.global_mem / 8 < b)
        b = ctx->info.global_mem / 8;
    return (size_t)(b / 16 * 16);
}

/* reps clEnqueueCopyBuffer copies back to back, then clFinish: the
 * runtime's own copy, which some devices run faster than a kernel. */
static int
buffer_copy_run(clf_context *ctx, cl_mem src, cl_mem dst, size_t bytes,
                unsigned reps, double *secs)
{
    double t0 = clf__now_s();
    cl_int err = CL_SUCCESS;
    unsigned r;

    for (r = 0; r < reps && err == CL_SUCCESS; r++)
        err = clEnqueueCopyBuffer(ctx->queue, src, dst, 0, 0, bytes, 0, NULL,
                                  NULL);
    if (err == CL_SUCCESS)
        err = clFinish(ctx->queue);
    if (err != CL_SUCCESS)
        return clf__fail(err, "peaks: clEnqueueCopyBuffer of %zu bytes (%d)",
                         bytes, err);
    *secs = clf__now_s() - t0;
    return 0;
}

/* Rates of one timed round, in bytes per second: the copy (the faster
 * of the kernel and clEnqueueCopyBuffer, and which) and the host write. */
struct copy_best {
    double copy, write;
    int api;
};

/* One round: the host write (kept where keep_write), the copy kernel and
 * clEnqueueCopyBuffer, reps copies each. */
static int
copy_round(clf_context *ctx, cl_mem a, cl_mem b, size_t bytes, unsigned reps,
           const void *host, int keep_write, struct copy_best *best)
{
    double t = 0.0;
    int api;

    CLF_TRY(write_run(ctx, a, host, bytes, &t));
    if (keep_write && bytes / t > best->write)
        best->write = bytes / t;
    for (api = 0; api < 2; api++) {
        CLF_TRY(api ? buffer_copy_run(ctx, a, b, bytes, reps, &t)
                    : copy_run(ctx, a, b, (cl_uint)(bytes / 16), reps, &t));
        if (2.0 * bytes * reps / t > best->copy) {
            best->copy = 2.0 * bytes * reps / t;
            best->api = api;
        }
    }
    return 0;
}

/* The copy kernel, clEnqueueCopyBuffer and the host write over two
 * buffers of `bytes`; the faster copy is kept, and which it was. */
static int
measure_copies(clf_context *ctx, cl_mem a, cl_mem b, size_t bytes,
               clf_device_peaks *p)
{
    struct copy_best best = {0.0, 0.0, 0};
    double t = 0.0;
    unsigned reps = 1;
    void *host;
    int i, rc;

    if ((host = calloc(1, bytes)) == NULL)
        return clf__fail(CLF_ENO_MEMORY, "peaks: %zu bytes of host memory",
                         bytes);
    /* untimed (a first launch may compile), then one to size the runs */
    rc = copy_run(ctx, a, b, (cl_uint)(bytes / 16), 1, &t);
    if (rc == 0)
        rc = copy_run(ctx, a, b, (cl_uint)(bytes / 16), 1, &t);
    if (rc == 0 && t > 0.0 && t < PEAK_COPY_S && !ctx->peaks_quick)
        reps = PEAK_COPY_S / t > 256.0 ? 256u : (unsigned)(PEAK_COPY_S / t);
    if (rc == 0) /* untimed */
        rc = buffer_copy_run(ctx, a, b, bytes, 1, &t);
    for (i = 0; i <= (ctx->peaks_quick ? 1 : PEAK_RUNS) && rc == 0; i++)
        rc = copy_round(ctx, a, b, bytes, reps, host, i > 0, &best);
    free(host);
    p->copy_gbps = best.copy * 1e-9;
    p->h2d_gbps = best.write * 1e-9;
    p->copy_api = best.api;
    return rc;
}

static cl_mem
make_buf(clf_context *ctx, size_t bytes, int *rc)
{
    cl_int err;
    cl_mem m =
        clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &err);

    if (m == NULL && *rc == 0)
        *rc = clf__fail(err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                                err == CL_OUT_OF_RESOURCES ||
                                err == CL_OUT_OF_HOST_MEMORY
                            ? CLF_ENO_MEMORY
                            : err,
                        "peaks: a device buffer of %zu bytes (%d)", bytes, err);
    return m;
}

/* The three figures, under the context's lock (kernel arguments are
 * shared by its threads). */
static int
measure_locked(clf_context *ctx, clf_device_peaks *p)
{
    size_t bytes = copy_bytes(ctx), i;
    cl_mem out, a, b;
    int rc = 0;

    out = make_buf(ctx, fma_items(ctx) * sizeof(float), &rc);
    a = make_buf(ctx, bytes, &rc);
    b = make_buf(ctx, bytes, &rc);
    p->fma_gflops = 0.0;
    for (i = 0; i < FMA_GRID && rc == 0; i++) {
        const double before = p->fma_gflops;
        rc = measure_fma(ctx, fma_grid[i].id,
                         8.0 * fma_grid[i].chains * fma_grid[i].width, out,
                         &p->fma_gflops);
        if (rc == 0 && p->fma_gflops > before) {
            p->fma_width = fma_grid[i].width;
            p->fma_chains = fma_grid[i].chains;
        }
    }
    if (rc == 0)
        rc = measure_copies(ctx, a, b, bytes, p);
    if (out != NULL)
        clReleaseMemObject(out);
    if (a != NULL)
        clReleaseMemObject(a);
    if (b != NULL)
        clReleaseMemObject(b);
    return rc;
}

/* --------------------------------------------------------------- cache */

/* The cache file's path for ctx's device and the key line it must hold;
 * path "" without a cache directory. */
static void
peak_path(const clf_context *ctx, char *path, size_t cap, char *key,
          size_t key_cap)
{
    char dir[1024];
    size_t i;

    /* The method is part of the key: the kernels' text (here, not from
     * CLINFORMER_KERNEL_DIR) and the host side's version.  Another method,
     * other peaks. */
    snprintf(key, key_cap, "key %s|%s|%s|%s|%s|%s|method %016llx.%d",
             ctx->info.platform, ctx->info.name, ctx->info.vendor,
             ctx->info.driver, ctx->info.version, ctx->info.stable_name,
             (unsigned long long)clf__hash64(clf__cl_peaks,
                                             strlen(clf__cl_peaks), 0),
             PEAK_HOST_METHOD);
    for (i = 0; key[i] != '\0'; i++)
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            key[i] = '?';
    clf__cache_dir(dir, sizeof dir);
    path[0] = '\0';
    if (dir[0] != '\0' &&
        snprintf(path, cap, "%s/peaks-%016llx.txt", dir,
                 (unsigned long long)clf__hash64(key, strlen(key),
                                                 0x7065616b73ULL)) >= (int)cap)
        path[0] = '\0';
}

static int
plausible(double v)
{
    return isfinite(v) && v >= PEAK_MIN && v <= PEAK_MAX;
}

/* A figure line "<name> <number in PEAK_MIN..PEAK_MAX>\n" at *p, the
 * number starting with a digit; advances *p. */
static int
parse_figure(const char **p, const char *name, double *out)
{
    size_t len = strlen(name);
    char *end;
    double v;

    /* a digit first: strtod would skip white space, newlines included */
    if (strncmp(*p, name, len) != 0 || (*p)[len] != ' ' ||
        !isdigit((unsigned char)(*p)[len + 1]))
        return -1;
    v = strtod(*p + len + 1, &end);
    if (end == *p + len + 1 || *end != '\n' || !plausible(v))
        return -1;
    *out = v;
    *p = end + 1;
    return 0;
}

/* The line "method <width>x<chains> <kernel|buffer>\n" at *q: the grid
 * point of the multiply-add figure and the copy that set the copy one;
 * advances *q. */
static int
parse_method(const char **q, clf_device_peaks *p)
{
    int w, c, used = 0;
    char how[8];

    if (sscanf(*q, "method %2dx%2d %6[a-z]\n%n", &w, &c, how, &used) != 3 ||
        used == 0 || (*q)[used - 1] != '\n')
        return -1;
    for (size_t i = 0; i < FMA_GRID; i++)
        if (fma_grid[i].width == w && fma_grid[i].chains == c &&
            (strcmp(how, "kernel") == 0 || strcmp(how, "buffer") == 0)) {
            p->fma_width = w;
            p->fma_chains = c;
            p->copy_api = how[0] == 'b';
            *q += used;
            return 0;
        }
    return -1;
}

/* Parses a cache file's text: magic, key, the three figures and the
 * method line, nothing else.  Returns 0, or -1 for anything else. */
static int
parse_cache(const char *text, const char *key, clf_device_peaks *p)
{
    size_t klen = strlen(key);
    const char *q = text;

    if (strncmp(q, PEAK_MAGIC "\n", sizeof PEAK_MAGIC) != 0)
        return -1;
    q += sizeof PEAK_MAGIC;
    if (strncmp(q, key, klen) != 0 || q[klen] != '\n')
        return -1;
    q += klen + 1;
    if (parse_figure(&q, "fma_gflops", &p->fma_gflops) != 0 ||
        parse_figure(&q, "copy_gbps", &p->copy_gbps) != 0 ||
        parse_figure(&q, "h2d_gbps", &p->h2d_gbps) != 0 ||
        parse_method(&q, p) != 0 || *q != '\0')
        return -1;
    return 0;
}

static int
cache_dir_private(void)
{
    char dir[1024];

    clf__cache_dir(dir, sizeof dir);
    return dir[0] != '\0' && clf__dir_private(dir) == 0;
}

/* Reads the device's cached peaks; returns 0, or -1 when there are none
 * that can be trusted (the reason is not an error: measure again). */
static int
cache_load(const clf_context *ctx, clf_device_peaks *p)
{
    char path[1100], key[700], *text = NULL;
    size_t len;
    int rc;

    peak_path(ctx, path, sizeof path, key, sizeof key);
    if (path[0] == '\0' || !cache_dir_private() ||
        clf__file_read_cache(path, "peaks cache file", PEAK_FILE_MAX, &text,
                             &len) != 0)
        return -1;
    rc = strlen(text) == len ? parse_cache(text, key, p) : -1;
    free(text);
    return rc;
}

/* Best effort: a cache that cannot be written means measuring next time. */
static void
cache_save(const clf_context *ctx, const clf_device_peaks *p)
{
    char path[1100], key[700], text[1200];
    int len;

    peak_path(ctx, path, sizeof path, key, sizeof key);
    if (path[0] == '\0' || !cache_dir_private() || !plausible(p->fma_gflops) ||
        !plausible(p->copy_gbps) || !plausible(p->h2d_gbps))
        return;
    len = snprintf(text, sizeof text,
                   "%s\n%s\nfma_gflops %.6g\ncopy_gbps %.6g\nh2d_gbps %.6g\n"
                   "method %dx%d %s\n",
                   PEAK_MAGIC, key, p->fma_gflops, p->copy_gbps, p->h2d_gbps,
                   p->fma_width, p->fma_chains,
                   p->copy_api ? "buffer" : "kernel");
    if (len > 0 && (size_t)len < sizeof text)
        (void)clf__file_write_atomic(path, text, (size_t)len);
}

/* ----------------------------------------------------------------- API */

CLF_EXTERN int
clf_context_peaks(clf_context *ctx, unsigned flags, clf_device_peaks *out)
{
    clf_device_peaks p;
    int rc;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    if ((flags & ~CLF_PEAKS_MEASURE) != 0)
        return clf__fail(CLF_EBAD_ENUM,
                         "flags 0x%x: only CLF_PEAKS_MEASURE (1) is known",
                         flags);
    memset(&p, 0, sizeof p);
    if (!(flags & CLF_PEAKS_MEASURE) && cache_load(ctx, &p) == 0) {
        p.cached = 1;
        *out = p;
        return 0;
    }
    CLF_TRY(clf_context_build(ctx));
    clf__lock(ctx);
    rc = measure_locked(ctx, &p);
    clf__unlock(ctx);
    if (rc != 0)
        return rc;
    if (!(p.fma_gflops > 0.0 && p.copy_gbps > 0.0 && p.h2d_gbps > 0.0) ||
        !isfinite(p.fma_gflops) || !isfinite(p.copy_gbps) ||
        !isfinite(p.h2d_gbps))
        return clf__fail(CLF_EUNSUPPORTED,
                         "peaks: a timed run took no time on the host clock");
    cache_save(ctx, &p);
    *out = p;
    return 0;
}
