/* bench_layer: one attention layer, Linformer against full attention through
 * the same pipeline, on one device.  Uses the public API only.
 *
 * Each timed run is one forward between device buffers followed by
 * clFinish.  Linformer and full runs alternate, so both see the same machine
 * load; the table reports medians, the spread (min..max), FLOPs counted from
 * the shapes, and the ratio of the two medians. */
#include "clinformer.h"
#include "gemm_ways.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REPEAT 101
#define MAX_LENS 16

static const char usage[] =
    "Usage: bench_layer [OPTIONS]\n"
    "\n"
    "Times one Linformer attention layer against full attention on one\n"
    "OpenCL device: median and spread of warm forwards, counted GFLOP/s,\n"
    "and the speed-up of Linformer over full.\n"
    "\n"
    "  --device SEL     device selector (as CLINFORMER_DEVICE)\n"
    "  --n LIST         comma-separated sequence lengths (default 1024,4096)\n"
    "  --d-model D      model width (default 512)\n"
    "  --heads H        heads (default 8)\n"
    "  --k K            compressed length (default 256)\n"
    "  --batch B        batch size (default 1)\n"
    "  --repeat R       timed runs per mode, after one warm-up (default 5)\n"
    "  --no-full        time Linformer only\n"
    "  --causal         causal mode: prefix-safe Linformer with block b, a\n"
    "                   power of two near sqrt(n) (k rounded to a multiple\n"
    "                   of the n/b blocks), against causal full attention\n"
    "  --gemm LIST      instead: the GEMM stages of the Linformer forward\n"
    "                   with the gemm kernel choice forced to each of LIST\n"
    "                   (clblast, blocked, tiled, split) in turn, one\n"
    "                   forward of each per round, attention on its GEMM\n"
    "                   path; per stage median ms (GFLOP/s), from\n"
    "                   profiling\n";

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double
median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int
die(const char *what, int rc)
{
    fprintf(stderr, "bench_layer: %s: %s (%s): %s\n", what, clf_strerror(rc),
            clf_status_name(rc), clf_error_message(rc));
    return 1;
}

static int
timed(clf_context *ctx, clf_attention *att, clf_mode mode, cl_mem x, cl_mem y,
      size_t B, size_t n, const clf_forward_opts *opts, double *secs)
{
    double t0;
    int rc;

    if ((rc = clf_attention_set_mode(att, mode)) != 0)
        return rc;
    t0 = now_s();
    if ((rc = clf_attention_forward_cl_ex(att, x, 0, y, 0, B, n, opts)) != 0)
        return rc;
    if ((rc = clf_context_finish(ctx)) != 0)
        return rc;
    *secs = now_s() - t0;
    return 0;
}

static int
parse_pos(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end != '\0' || v == 0 || errno != 0 ||
        v > SIZE_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

struct options {
    const char *device;
    size_t lens[MAX_LENS], nlens;
    size_t D, h, k, B, repeat;
    int with_full, causal;
    const char *ways[4];
    size_t nways;
};

static int
parse_lens(char *list, struct options *o)
{
    char *tok, *save = NULL;

    o->nlens = 0;
    for (tok = strtok_r(list, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (o->nlens == MAX_LENS || parse_pos(tok, &o->lens[o->nlens]) != 0) {
            fprintf(stderr, "bench_layer: bad --n entry \"%s\"\n", tok);
            return 2;
        }
        o->nlens++;
    }
    if (o->nlens == 0) {
        fprintf(stderr, "bench_layer: --n is empty\n");
        return 2;
    }
    return 0;
}

/* The size_t an option with one positive value sets, or NULL. */
static size_t *
size_option(struct options *o, const char *opt)
{
    if (strcmp(opt, "--d-model") == 0)
        return &o->D;
    if (strcmp(opt, "--heads") == 0)
        return &o->h;
    if (strcmp(opt, "--k") == 0)
        return &o->k;
    if (strcmp(opt, "--batch") == 0)
        return &o->B;
    if (strcmp(opt, "--repeat") == 0)
        return &o->repeat;
    return NULL;
}

/* Parses the command line; returns 0, 1 after --help, or 2. */
static int
parse_args(int argc, char **argv, struct options *o)
{
    int a;

    for (a = 1; a < argc; a++) {
        const char *opt = argv[a];
        size_t *target;
        if (strcmp(opt, "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        } else if (strcmp(opt, "--no-full") == 0) {
            o->with_full = 0;
            continue;
        } else if (strcmp(opt, "--causal") == 0) {
            o->causal = 1;
            continue;
        } else if (a + 1 >= argc) {
            fprintf(stderr, "bench_layer: %s needs a value\n%s", opt, usage);
            return 2;
        }
        if (strcmp(opt, "--device") == 0) {
            o->device = argv[++a];
            continue;
        } else if (strcmp(opt, "--gemm") == 0) {
            if (gemm_ways_parse(argv[++a], o->ways, &o->nways) != 0)
                return 2;
            continue;
        } else if (strcmp(opt, "--n") == 0) {
            if (parse_lens(argv[++a], o) != 0)
                return 2;
            continue;
        }
        if ((target = size_option(o, opt)) == NULL) {
            fprintf(stderr, "bench_layer: unknown option %s\n%s", opt, usage);
            return 2;
        }
        if (parse_pos(argv[++a], target) != 0 ||
            (target == &o->repeat && o->repeat > MAX_REPEAT)) {
            fprintf(stderr, "bench_layer: bad value \"%s\" for %s\n", argv[a],
                    opt);
            return 2;
        }
    }
    return 0;
}

/* The bytes of one input (B x n x D floats), or 0 with a message naming
 * the options when that overflows size_t. */
static size_t
input_bytes(const struct options *o, size_t n)
{
    size_t max = SIZE_MAX / sizeof(float);

    if (n > max / o->B || o->D > max / (o->B * n)) {
        fprintf(stderr,
                "bench_layer: --batch %zu x --n %zu x --d-model %zu floats "
                "overflow the address space\n",
                o->B, n, o->D);
        return 0;
    }
    return o->B * n * o->D * sizeof(float);
}

/* Checks every length's input size before anything runs; returns 0 or 2. */
static int
check_sizes(const struct options *o)
{
    size_t li;

    for (li = 0; li < o->nlens; li++)
        if (input_bytes(o, o->lens[li]) == 0)
            return 2;
    return 0;
}

/* The layer for length n: k clamped to n; in causal mode b the power of
 * two nearest sqrt(n) and k a multiple of the ceil(n / b) blocks. */
static void
layer_desc(const struct options *o, size_t n, clf_attention_desc *d)
{
    memset(d, 0, sizeof *d);
    d->d_model = o->D;
    d->heads = o->h;
    d->max_seq_len = n;
    d->k = o->k < n ? o->k : n;
    d->bias_out = 1;
    if (o->causal) {
        size_t blk = 1, nb;
        while (blk * blk * 2 < n)
            blk *= 2;
        nb = (n + blk - 1) / blk;
        d->causal_block = blk;
        d->k = nb * (d->k / nb > 0 ? d->k / nb : 1);
        if (d->k > n)
            d->k = nb;
    }
}

/* The input and output buffers for length n; returns 0 or 1 (reported). */
static int
make_buffers(clf_context *ctx, size_t bytes, cl_mem *x, cl_mem *y)
{
    size_t count = bytes / sizeof(float), i;
    float *hx = malloc(bytes);
    cl_int err = CL_SUCCESS;

    *x = *y = NULL;
    if (hx == NULL) {
        fprintf(stderr,
                "bench_layer: out of host memory (%zu bytes of "
                "input)\n",
                bytes);
        return 1;
    }
    for (i = 0; i < count; i++)
        hx[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    *x = clCreateBuffer(clf_context_cl_context(ctx),
                        CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, hx,
                        &err);
    if (*x != NULL)
        *y = clCreateBuffer(clf_context_cl_context(ctx), CL_MEM_READ_WRITE,
                            bytes, NULL, &err);
    free(hx);
    if (*x == NULL || *y == NULL) {
        fprintf(stderr, "bench_layer: clCreateBuffer failed (%d)\n", err);
        if (*x != NULL)
            clReleaseMemObject(*x);
        return 1;
    }
    return 0;
}

/* Times the modes of one layer, alternating: a warm-up, then repeat
 * rounds.  tl and tf receive the warm times. */
static int
time_modes(clf_context *ctx, clf_attention *att, const struct options *o,
           size_t n, cl_mem x, cl_mem y, double *tl, double *tf)
{
    clf_forward_opts fo;
    double first_l = 0, first_f = 0;
    size_t i;
    int rc;

    memset(&fo, 0, sizeof fo);
    fo.causal = o->causal;
    fprintf(stderr, "n=%zu: warm-up...\n", n);
    rc = timed(ctx, att, CLF_MODE_LINFORMER, x, y, o->B, n, &fo, &first_l);
    if (rc == 0 && o->with_full)
        rc = timed(ctx, att, CLF_MODE_FULL, x, y, o->B, n, &fo, &first_f);
    for (i = 0; rc == 0 && i < o->repeat; i++) {
        fprintf(stderr, "n=%zu: run %zu/%zu\n", n, i + 1, o->repeat);
        rc = timed(ctx, att, CLF_MODE_LINFORMER, x, y, o->B, n, &fo, &tl[i]);
        if (rc == 0 && o->with_full)
            rc = timed(ctx, att, CLF_MODE_FULL, x, y, o->B, n, &fo, &tf[i]);
    }
    if (rc == 0)
        fprintf(stderr,
                "n=%zu: first calls %.3f s (linformer), %.3f s "
                "(full)\n",
                n, first_l, first_f);
    return rc;
}

/* The table rows of one length. */
static void
print_rows(clf_attention *att, const struct options *o, size_t n,
           const clf_attention_desc *d, double *tl, double *tf)
{
    clf_forward_opts fo;
    double fl = 0, ff = 0, ml, mf;
    size_t r = o->repeat;
    char ratio[32];

    memset(&fo, 0, sizeof fo);
    fo.causal = o->causal;
    clf_attention_flops_ex(att, CLF_MODE_LINFORMER, o->B, n, &fo, &fl);
    ml = median(tl, (int)r);
    printf("%7zu  %-9s %5zu %5zu  %10.1f  %9.1f .. %9.1f  %8.2f  %8.1f  "
           "%9s\n",
           n, "linformer", d->k, d->causal_block, ml * 1e3, tl[0] * 1e3,
           tl[r - 1] * 1e3, fl * 1e-9, fl * 1e-9 / ml, "");
    if (!o->with_full)
        return;
    clf_attention_flops_ex(att, CLF_MODE_FULL, o->B, n, &fo, &ff);
    mf = median(tf, (int)r);
    snprintf(ratio, sizeof ratio, "%.2fx", mf / ml);
    printf("%7zu  %-9s %5s %5s  %10.1f  %9.1f .. %9.1f  %8.2f  %8.1f  "
           "%9s\n",
           n, "full", "-", "-", mf * 1e3, tf[0] * 1e3, tf[r - 1] * 1e3,
           ff * 1e-9, ff * 1e-9 / mf, ratio);
}

/* One length: layer, buffers, timing, rows.  Returns 0 or 1 (reported). */
static int
run_length(clf_context *ctx, const struct options *o, size_t n)
{
    clf_attention_desc d;
    clf_attention *att = NULL;
    double tl[MAX_REPEAT], tf[MAX_REPEAT];
    cl_mem x = NULL, y = NULL;
    int rc;

    layer_desc(o, n, &d);
    if ((rc = clf_attention_create(&att, ctx, &d)) != 0 ||
        (rc = clf_attention_randomize(att, 1234)) != 0) {
        clf_attention_destroy(att);
        return die("layer", rc);
    }
    if (make_buffers(ctx, input_bytes(o, n), &x, &y) != 0) {
        clf_attention_destroy(att);
        return 1;
    }
    if (o->nways > 0) {
        struct gemm_ways_run r = {o->ways, o->nways, o->repeat,      o->B, n,
                                  x,       y,        n == o->lens[0]};
        rc = gemm_ways_measure(ctx, att, &d, &r);
    } else {
        rc = time_modes(ctx, att, o, n, x, y, tl, tf);
        if (rc == 0)
            print_rows(att, o, n, &d, tl, tf);
    }
    clReleaseMemObject(x);
    clReleaseMemObject(y);
    clf_attention_destroy(att);
    return rc != 0 ? die("forward", rc) : 0;
}

int
main(int argc, char **argv)
{
    struct options o = {NULL, {1024, 4096}, 2, 512, 8, 256, 1, 5, 1,
                        0,    {NULL},       0};
    clf_context *ctx = NULL;
    clf_device_info info;
    size_t li;
    int rc;

    if ((rc = parse_args(argc, argv, &o)) != 0)
        return rc == 1 ? 0 : 2;
    if (check_sizes(&o) != 0)
        return 2;
    if ((rc = clf_context_create_ex(&ctx, o.device,
                                    o.nways ? CLF_CONTEXT_PROFILING : 0)) != 0)
        return die("context", rc);
    if ((rc = clf_tune_apply_process_wide(ctx)) != 0)
        return die("stored GEMM tuning", rc);
    clf_context_device_info(ctx, &info);
    printf("device: %s / %s (driver %s)\n", info.platform, info.name,
           info.driver);
    printf("layer: D=%zu h=%zu k=%zu B=%zu%s, %zu warm runs per mode "
           "(alternating), medians\n\n",
           o.D, o.h, o.k, o.B, o.causal ? ", causal" : "", o.repeat);
    if (o.nways == 0)
        printf("%7s  %-9s %5s %5s  %10s  %21s  %8s  %8s  %9s\n", "n", "mode",
               "k", "b", "median ms", "spread ms", "GFLOP", "GFLOP/s",
               "full/lin");
    for (li = 0; li < o.nlens; li++)
        if ((rc = run_length(ctx, &o, o.lens[li])) != 0)
            break;
    clf_context_destroy(ctx);
    return rc;
}
