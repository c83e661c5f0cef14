/* clinformer devices and clinformer demo. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct devices_opts {
    int kernels;
};

const struct cli_option cli_devices_options[] = {
    {"kernels", CLI_FLAG, offsetof(struct devices_opts, kernels), NULL,
     "also list each device's GEMM tuning (its tune\n"
     "file's, the parameters shipped for it, or CLBlast's\n"
     "defaults) and stored kernel choices (a context is\n"
     "created on every device to read them)",
     1, 0, NULL},
    {NULL, CLI_FLAG, 0, NULL, NULL, 0, 0, NULL}};

/* The stored kernel choices of one device, read through a context. */
static void
list_kernel_choices(const clf_device_info *d)
{
    clf_context *ctx = NULL;
    clf_kernel_choice c;
    size_t count = 0, i;
    char sel[16], kind[32], times[160];

    snprintf(sel, sizeof sel, "%u", d->index);
    if (clf_context_create(&ctx, sel) != 0 ||
        clf_context_kernel_choice_count(ctx, &count) != 0) {
        printf("    kernel choices: unavailable (%s)\n", clf_last_error());
        clf_context_destroy(ctx);
        return;
    }
    /* this process owns its CLBlast: applying the device's tuning here
     * only reads it */
    if (clf_tune_apply_process_wide(ctx) == 0)
        printf("    GEMM tuning: %s\n", clf_context_tuning(ctx)[0]
                                            ? clf_context_tuning(ctx)
                                            : "CLBlast defaults");
    printf("    kernel choices stored: %zu\n", count);
    for (i = 0; i < count; i++)
        if (clf_context_kernel_choice(ctx, i, &c) == 0) {
            cli_choice_kind(&c, kind, sizeof kind);
            cli_choice_times(&c, times, sizeof times);
            printf("      %-11s %-24s %-8s%s%s%s\n", kind, c.bucket, c.name,
                   times[0] ? " (timed: " : "", times, times[0] ? ")" : "");
        }
    clf_context_destroy(ctx);
}

struct demo_opts {
    const char *device;
    size_t seq_len, repeat;
};

const struct cli_option cli_demo_options[] = {
    {"device", CLI_STRING, offsetof(struct demo_opts, device), "SEL",
     "stable name (pocl:0), device index, cpu, gpu, or\n"
     "part of a platform or device name (default:\n"
     "$CLINFORMER_DEVICE, else the first GPU, else the\n"
     "first CPU device)",
     0, 0, NULL},
    {"seq-len", CLI_SIZE, offsetof(struct demo_opts, seq_len), "N",
     "sequence length of the layer (default 4096)", 0, 0, NULL},
    {"repeat", CLI_SIZE, offsetof(struct demo_opts, repeat), "R",
     "timed runs per mode after one warm-up (1..64,\ndefault 3)", 0, 64, NULL},
    {NULL, CLI_FLAG, 0, NULL, NULL, 0, 0, NULL}};

#define DEMO_D_MODEL 512

int
cli_devices_main(const struct cli_command *cmd, int argc, char **argv)
{
    struct devices_opts o = {0};
    int first, rc = cli_parse(cmd, argc, argv, &o, &first);

    if (rc != 0)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    return cli_list_devices(o.kernels);
}

int
cli_list_devices(int kernels)
{
    clf_device_info infos[64];
    size_t count = 0, i;
    int rc = clf_devices_list(infos, 64, &count);

    if (rc != 0)
        return cli_fail(NULL, "listing devices", rc);
    for (i = 0; i < count && i < 64; i++) {
        const clf_device_info *d = &infos[i];
        printf("[%u] %s  %s / %s\n", d->index, d->stable_name, d->platform,
               d->name);
        printf("    type %s, vendor %s, driver %s\n",
               d->is_gpu   ? "GPU"
               : d->is_cpu ? "CPU"
                           : "other",
               d->vendor, d->driver);
        printf("    %s, %s\n", d->version, d->c_version);
        printf("    %u compute units at %u MHz, %.2f GiB global memory, "
               "max allocation %.2f GiB, %llu KiB local\n",
               d->compute_units, d->max_clock_mhz,
               (double)d->global_mem / 1073741824.0,
               (double)d->max_alloc / 1073741824.0, d->local_mem / 1024);
        printf("    fp16 %s, fp64 %s\n", d->fp16 ? "yes" : "no",
               d->fp64 ? "yes" : "no");
        if (kernels)
            list_kernel_choices(d);
    }
    if (count > 64)
        printf("(%zu more devices not listed)\n", count - 64);
    return 0;
}

/* The worked example of the design, on the device: one query q = 1 over
 * K = (1,2,3), V = (10,20,30), E = F = [[1/2,1/2,0],[0,0,1]]. */
static int
golden(clf_context *ctx, clf_mode mode, double *out)
{
    clf_attention_desc d;
    clf_attention *att = NULL;
    const float one = 1.0f, ten = 10.0f;
    const float e[6] = {0.5f, 0.5f, 0.0f, 0.0f, 0.0f, 1.0f};
    const float x[3] = {1.0f, 2.0f, 3.0f};
    float y[3];
    int rc;

    memset(&d, 0, sizeof d);
    d.d_model = 1;
    d.heads = 1;
    d.max_seq_len = 3;
    d.k = 2;
    if ((rc = clf_attention_create(&att, ctx, &d)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_WEIGHT_Q, &one, 1)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_WEIGHT_K, &one, 1)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_WEIGHT_V, &ten, 1)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_WEIGHT_OUT, &one, 1)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_PROJ_E, e, 6)) != 0 ||
        (rc = clf_attention_set_weight(att, CLF_PROJ_F, e, 6)) != 0 ||
        (rc = clf_attention_set_mode(att, mode)) != 0 ||
        (rc = clf_attention_forward(att, x, 1, 3, y)) != 0) {
        clf_attention_destroy(att);
        return rc;
    }
    *out = y[0];
    clf_attention_destroy(att);
    return 0;
}

/* Runs one warm-up and `repeat` timed forwards; returns the median. */
static int
time_mode(clf_attention *att, clf_mode mode, const float *x, size_t n, float *y,
          size_t repeat, double *median, double *first)
{
    double t[64], t0;
    size_t r;
    int rc;

    if ((rc = clf_attention_set_mode(att, mode)) != 0)
        return rc;
    t0 = cli_now();
    if ((rc = clf_attention_forward(att, x, 1, n, y)) != 0)
        return rc;
    *first = cli_now() - t0;
    for (r = 0; r < repeat; r++) {
        t0 = cli_now();
        if ((rc = clf_attention_forward(att, x, 1, n, y)) != 0)
            return rc;
        t[r] = cli_now() - t0;
    }
    qsort(t, repeat, sizeof t[0], cli_cmp_double);
    *median = t[repeat / 2];
    return 0;
}

/* Builds the kernels and checks the golden example; 0 or an exit status. */
static int
demo_golden(clf_context *ctx)
{
    double gl = 0, gf = 0, t0 = cli_now();
    int rc = clf_context_build(ctx);

    if (rc != 0)
        return cli_fail(ctx, "building kernels", rc);
    printf("kernels ready in %.3f s\n", cli_now() - t0);
    printf("GEMM parameters: %s\n", clf_context_tuning(ctx)[0]
                                        ? clf_context_tuning(ctx)
                                        : "CLBlast defaults (clinformer tune "
                                          "can find faster ones)");

    printf("\n== Golden example (design, section 1)\n");
    if ((rc = golden(ctx, CLF_MODE_FULL, &gf)) != 0 ||
        (rc = golden(ctx, CLF_MODE_LINFORMER, &gl)) != 0)
        return cli_fail(ctx, "golden example", rc);
    printf("full attention       %.4f  (expected 25.7521)\n", gf);
    printf("compressed attention %.4f  (expected 27.2636)\n", gl);
    printf("difference           %.4f  (expected 1.5115)\n", gl - gf);
    if (fabs(gf - 25.7521) > 1e-3 || fabs(gl - 27.2636) > 1e-3) {
        fprintf(stderr, "clinformer: golden example does not match\n");
        return CLI_ERROR;
    }
    return 0;
}

/* Prints the timings of both modes and how far their outputs differ. */
static void
demo_report(clf_context *ctx, clf_attention *att, size_t n, size_t repeat,
            const double *times, const float *yl, const float *yf)
{
    double fl, ff, num = 0, den = 0;
    size_t i;

    clf_attention_flops(att, CLF_MODE_LINFORMER, 1, n, &fl);
    clf_attention_flops(att, CLF_MODE_FULL, 1, n, &ff);
    for (i = 0; i < n * DEMO_D_MODEL; i++) {
        double dlt = (double)yl[i] - yf[i];
        num += dlt * dlt;
        den += (double)yf[i] * yf[i];
    }
    printf("mode       first call   median (%zu runs)   GFLOP   GFLOP/s\n",
           repeat);
    printf("linformer  %8.3f s   %8.3f s          %7.2f  %7.1f\n", times[1],
           times[0], fl * 1e-9, fl * 1e-9 / times[0]);
    printf("full       %8.3f s   %8.3f s          %7.2f  %7.1f\n", times[3],
           times[2], ff * 1e-9, ff * 1e-9 / times[2]);
    printf("speed-up of Linformer over full attention: %.2fx\n",
           times[2] / times[0]);
    cli_print_choices(ctx, 0);
    printf("relative difference ||Y_lin - Y_full|| / ||Y_full||: %.4f\n",
           sqrt(num / den));
    printf("(random weights and E: Linformer approximates full attention "
           "only as well as E and F are trained to)\n");
}

/* Times one layer in both modes on random input of n x 512. */
static int
demo_layer(clf_context *ctx, const struct demo_opts *o, size_t count)
{
    clf_attention *att = NULL;
    clf_attention_desc d;
    float *x = malloc(count * sizeof *x), *yl = malloc(count * sizeof *yl);
    float *yf = malloc(count * sizeof *yf);
    double times[4]; /* Linformer median, first; full median, first */
    size_t i;
    int rc, status = CLI_ERROR;

    memset(&d, 0, sizeof d);
    d.d_model = DEMO_D_MODEL;
    d.heads = 8;
    d.max_seq_len = o->seq_len;
    d.k = o->seq_len < 256 ? o->seq_len : 256;
    d.bias_out = 1;
    printf("\n== One layer: D=512, h=8, k=%zu, B=1, n=%zu\n", d.k, o->seq_len);
    if (x == NULL || yl == NULL || yf == NULL) {
        fprintf(stderr, "clinformer: out of host memory\n");
        goto done;
    }
    if ((rc = clf_attention_create(&att, ctx, &d)) != 0 ||
        (rc = clf_attention_randomize(att, 42)) != 0) {
        cli_fail(ctx, "creating the layer", rc);
        goto done;
    }
    srand(7);
    for (i = 0; i < count; i++)
        x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
    fprintf(stderr, "running Linformer mode...\n");
    rc = time_mode(att, CLF_MODE_LINFORMER, x, o->seq_len, yl, o->repeat,
                   &times[0], &times[1]);
    if (rc != 0) {
        cli_fail(ctx, "Linformer forward", rc);
        goto done;
    }
    fprintf(stderr, "running full mode...\n");
    rc = time_mode(att, CLF_MODE_FULL, x, o->seq_len, yf, o->repeat, &times[2],
                   &times[3]);
    if (rc != 0) {
        cli_fail(ctx, "full forward", rc);
        goto done;
    }
    demo_report(ctx, att, o->seq_len, o->repeat, times, yl, yf);
    status = 0;
done:
    free(x);
    free(yl);
    free(yf);
    clf_attention_destroy(att);
    return status;
}

int
cli_demo_main(const struct cli_command *cmd, int argc, char **argv)
{
    struct demo_opts o = {NULL, 4096, 3};
    clf_context *ctx = NULL;
    clf_device_info info;
    size_t count, bytes;
    int first, rc = cli_parse(cmd, argc, argv, &o, &first);

    if (rc != 0)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    if (cli_mul(o.seq_len, DEMO_D_MODEL, &count) != 0 ||
        cli_mul(count, sizeof(float), &bytes) != 0) {
        cli_error(cmd->name,
                  "--seq-len %zu: the layer's input of %zu x %d "
                  "floats overflows size_t",
                  o.seq_len, o.seq_len, DEMO_D_MODEL);
        return CLI_USAGE;
    }
    printf("== OpenCL devices\n");
    if (cli_list_devices(0) != 0)
        return CLI_ERROR;
    if ((rc = cli_context(&ctx, o.device)) != 0)
        return rc;
    clf_context_device_info(ctx, &info);
    printf("\n== Using [%u] %s / %s (driver %s)\n", info.index, info.platform,
           info.name, info.driver);
    rc = demo_golden(ctx);
    if (rc == 0)
        rc = demo_layer(ctx, &o, count);
    cli_context_done(ctx);
    return rc;
}
