/* bench_layer: one attention layer, Linformer against full attention through
 * the same pipeline, on one device.  Uses the public API only.
 *
 * Each timed run is one forward between device buffers followed by
 * clFinish.  Linformer and full runs alternate, so both see the same machine
 * load; the table reports medians, the spread (min..max), FLOPs counted from
 * the shapes, and the ratio of the two medians. */
#include "clinformer.h"

#include <math.h>
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
    "                   of the n/b blocks), against causal full attention\n";

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
            clf_status_name(rc), clf_last_error());
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
    unsigned long long v = strtoull(s, &end, 10);

    if (*s == '\0' || *s == '-' || *end != '\0' || v == 0)
        return -1;
    *out = (size_t)v;
    return 0;
}

int
main(int argc, char **argv)
{
    const char *device = NULL;
    size_t lens[MAX_LENS] = {1024, 4096}, nlens = 2;
    size_t D = 512, h = 8, k = 256, B = 1, repeat = 5, i, li;
    int with_full = 1, causal = 0, rc, a;
    clf_forward_opts fo;
    clf_context *ctx = NULL;
    clf_device_info info;

    for (a = 1; a < argc; a++) {
        const char *opt = argv[a];
        size_t *target = NULL;
        if (strcmp(opt, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(opt, "--no-full") == 0) {
            with_full = 0;
            continue;
        } else if (strcmp(opt, "--causal") == 0) {
            causal = 1;
            continue;
        } else if (a + 1 >= argc) {
            fprintf(stderr, "bench_layer: %s needs a value\n%s", opt, usage);
            return 2;
        }
        if (strcmp(opt, "--device") == 0) {
            device = argv[++a];
            continue;
        } else if (strcmp(opt, "--n") == 0) {
            char *list = argv[++a], *tok, *save = NULL;
            nlens = 0;
            for (tok = strtok_r(list, ",", &save); tok != NULL;
                 tok = strtok_r(NULL, ",", &save)) {
                if (nlens == MAX_LENS || parse_pos(tok, &lens[nlens]) != 0) {
                    fprintf(stderr, "bench_layer: bad --n entry \"%s\"\n",
                            tok);
                    return 2;
                }
                nlens++;
            }
            if (nlens == 0) {
                fprintf(stderr, "bench_layer: --n is empty\n");
                return 2;
            }
            continue;
        } else if (strcmp(opt, "--d-model") == 0) {
            target = &D;
        } else if (strcmp(opt, "--heads") == 0) {
            target = &h;
        } else if (strcmp(opt, "--k") == 0) {
            target = &k;
        } else if (strcmp(opt, "--batch") == 0) {
            target = &B;
        } else if (strcmp(opt, "--repeat") == 0) {
            target = &repeat;
        } else {
            fprintf(stderr, "bench_layer: unknown option %s\n%s", opt, usage);
            return 2;
        }
        if (parse_pos(argv[++a], target) != 0 ||
            (target == &repeat && repeat > MAX_REPEAT)) {
            fprintf(stderr, "bench_layer: bad value \"%s\" for %s\n", argv[a],
                    opt);
            return 2;
        }
    }

    if ((rc = clf_context_create(&ctx, device)) != 0)
        return die("context", rc);
    clf_context_device_info(ctx, &info);
    printf("device: %s / %s (driver %s)\n", info.platform, info.name,
           info.driver);
    memset(&fo, 0, sizeof fo);
    fo.causal = causal;
    printf("layer: D=%zu h=%zu k=%zu B=%zu%s, %zu warm runs per mode "
           "(alternating), medians\n\n",
           D, h, k, B, causal ? ", causal" : "", repeat);
    printf("%7s  %-9s %5s %5s  %10s  %21s  %8s  %8s  %9s\n", "n", "mode", "k",
           "b", "median ms", "spread ms", "GFLOP", "GFLOP/s", "full/lin");

    for (li = 0; li < nlens; li++) {
        size_t n = lens[li], count;
        clf_attention_desc d;
        clf_attention *att = NULL;
        double tl[MAX_REPEAT], tf[MAX_REPEAT], fl = 0, ff = 0, ml, mf = 0;
        double first_l, first_f = 0;
        cl_mem x = NULL, y = NULL;
        float *hx;
        cl_int err;

        memset(&d, 0, sizeof d);
        d.d_model = D;
        d.heads = h;
        d.max_seq_len = n;
        d.k = k < n ? k : n;
        d.bias_out = 1;
        if (causal) {
            /* b: the power of two nearest sqrt(n); k: a multiple of the
             * ceil(n / b) blocks. */
            size_t blk = 1, nb;
            while (blk * blk * 2 < n)
                blk *= 2;
            nb = (n + blk - 1) / blk;
            d.causal_block = blk;
            d.k = nb * (d.k / nb > 0 ? d.k / nb : 1);
            if (d.k > n)
                d.k = nb;
        }
        if ((rc = clf_attention_create(&att, ctx, &d)) != 0 ||
            (rc = clf_attention_randomize(att, 1234)) != 0) {
            clf_attention_destroy(att);
            clf_context_destroy(ctx);
            return die("layer", rc);
        }
        count = B * n * D;
        hx = malloc(count * sizeof *hx);
        if (hx == NULL) {
            fprintf(stderr, "bench_layer: out of host memory\n");
            return 1;
        }
        for (i = 0; i < count; i++)
            hx[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
        x = clCreateBuffer(clf_context_cl_context(ctx),
                           CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                           count * sizeof(float), hx, &err);
        if (x != NULL)
            y = clCreateBuffer(clf_context_cl_context(ctx), CL_MEM_READ_WRITE,
                               count * sizeof(float), NULL, &err);
        free(hx);
        if (x == NULL || y == NULL) {
            fprintf(stderr, "bench_layer: clCreateBuffer failed (%d)\n", err);
            return 1;
        }
        fprintf(stderr, "n=%zu: warm-up...\n", n);
        rc = timed(ctx, att, CLF_MODE_LINFORMER, x, y, B, n, &fo, &first_l);
        if (rc == 0 && with_full)
            rc = timed(ctx, att, CLF_MODE_FULL, x, y, B, n, &fo, &first_f);
        for (i = 0; rc == 0 && i < repeat; i++) {
            fprintf(stderr, "n=%zu: run %zu/%zu\n", n, i + 1, repeat);
            rc = timed(ctx, att, CLF_MODE_LINFORMER, x, y, B, n, &fo, &tl[i]);
            if (rc == 0 && with_full)
                rc = timed(ctx, att, CLF_MODE_FULL, x, y, B, n, &fo, &tf[i]);
        }
        if (rc != 0) {
            clReleaseMemObject(x);
            clReleaseMemObject(y);
            clf_attention_destroy(att);
            clf_context_destroy(ctx);
            return die("forward", rc);
        }
        clf_attention_flops_ex(att, CLF_MODE_LINFORMER, B, n, &fo, &fl);
        ml = median(tl, (int)repeat);
        printf("%7zu  %-9s %5zu %5zu  %10.1f  %9.1f .. %9.1f  %8.2f  %8.1f  "
               "%9s\n",
               n, "linformer", d.k, d.causal_block, ml * 1e3, tl[0] * 1e3,
               tl[repeat - 1] * 1e3, fl * 1e-9, fl * 1e-9 / ml, "");
        if (with_full) {
            char ratio[32];
            clf_attention_flops_ex(att, CLF_MODE_FULL, B, n, &fo, &ff);
            mf = median(tf, (int)repeat);
            snprintf(ratio, sizeof ratio, "%.2fx", mf / ml);
            printf("%7zu  %-9s %5s %5s  %10.1f  %9.1f .. %9.1f  %8.2f  %8.1f  "
                   "%9s\n",
                   n, "full", "-", "-", mf * 1e3, tf[0] * 1e3,
                   tf[repeat - 1] * 1e3, ff * 1e-9, ff * 1e-9 / mf, ratio);
        }
        fprintf(stderr, "n=%zu: first calls %.3f s (linformer), %.3f s "
                        "(full)\n",
                n, first_l, first_f);
        clReleaseMemObject(x);
        clReleaseMemObject(y);
        clf_attention_destroy(att);
    }
    clf_context_destroy(ctx);
    return 0;
}
