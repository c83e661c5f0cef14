/* clinformer: the command-line tool. */
#include "clinformer.h"
#include "suite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
    "Usage: clinformer COMMAND [OPTIONS]\n"
    "\n"
    "Linformer attention on any OpenCL device.\n"
    "\n"
    "Commands:\n"
    "  devices            list OpenCL platforms and devices\n"
    "  demo               list devices, run the golden example of the design\n"
    "                     (full 25.7521, compressed 27.2636) on the device,\n"
    "                     then one layer (D=512, h=8, k=256) in Linformer and\n"
    "                     full mode, printing times and their relative\n"
    "                     difference\n"
    "  check-lookahead    audit a layer configuration for look-ahead: for\n"
    "                     each tested position t, replace every input after t\n"
    "                     with random values and check that outputs at\n"
    "                     positions <= t do not change, bit for bit; prints\n"
    "                     PASS, or FAIL with the first position that moved\n"
    "                     (random weights of the given shape)\n"
    "  run                run a trained model: --weights M.safetensors\n"
    "                     --input X.npy --output Y.npy (float32 (B, n, D) or\n"
    "                     (n, D); an LM takes int token ids (B, n) and writes\n"
    "                     logits (B, n, vocab))\n"
    "  compare A.npy B.npy  max |A - B| relative to max |B|; exit 0 when\n"
    "                     within --tol (default 1e-5), 3 otherwise\n"
    "  bench              the bench suite (clinformer bench --help)\n"
    "  tune               time CLBlast GEMM parameters on real forwards of a\n"
    "                     layer (--d-model, --heads, --k, --seq-len, default\n"
    "                     512, 8, 256, 2048) for --budget seconds (default\n"
    "                     120) and store the fastest for this device; every\n"
    "                     later context on it applies them; rerun to resume\n"
    "  help               show this text\n"
    "  version            print the library version\n"
    "\n"
    "Options (demo):\n"
    "  --device SEL       device index, cpu, gpu, or part of a platform or\n"
    "                     device name (default: $CLINFORMER_DEVICE, else the\n"
    "                     first GPU, else the first CPU device)\n"
    "  --seq-len N        sequence length of the layer (default 4096)\n"
    "  --repeat R         timed runs per mode after one warm-up (default 3)\n"
    "\n"
    "Options (check-lookahead):\n"
    "  --device SEL       as above\n"
    "  --seq-len N        sequence length (default 256)\n"
    "  --max-seq-len N    the layer's max_seq_len (default: --seq-len)\n"
    "  --d-model D        model width (default 64)\n"
    "  --heads H          heads (default 4)\n"
    "  --k K              compressed length (default 64)\n"
    "  --block B          causal block size (default 16)\n"
    "  --sharing S        headwise, per-head or key-value (default headwise)\n"
    "  --full             audit full attention instead of Linformer\n"
    "  --no-causal        audit the plain (non-causal) mode, which must FAIL\n"
    "  --positions P      positions t to test, spread over the sequence\n"
    "                     (default 32)\n"
    "  --seed S           seed of weights, input and perturbations (default 1)\n"
    "\n"
    "Options (run):\n"
    "  --weights FILE     safetensors file (safetensors.torch.save_file of a\n"
    "                     state_dict)\n"
    "  --input FILE       input .npy;  --output FILE  output .npy\n"
    "  --layout L         auto (default), lucidrains-attention,\n"
    "                     lucidrains-encoder, lucidrains-lm, fairseq-attention,\n"
    "                     fairseq-encoder-layer\n"
    "  --heads H          heads, when the file's metadata lacks \"heads\"\n"
    "  --lengths L1,L2,.. per-sequence lengths (right padding)\n"
    "  --mask FILE        (B, n) .npy key mask, nonzero = real position\n"
    "  --causal           causal mode (Linformer needs --block)\n"
    "  --block B          causal block size b\n"
    "  --full             full attention instead of Linformer\n"
    "  --layerwise        share layer 0's E and F with every layer\n"
    "  --repeat R         also time R (1..64) warm forwards and print their\n"
    "                     median\n"
    "  --device SEL       as above\n"
    "\n"
    "Environment: CLINFORMER_DEVICE, CLINFORMER_CACHE_DIR (\"off\" disables\n"
    "the kernel binary cache and stored tuning), CLINFORMER_KERNEL_DIR (load\n"
    "cl/*.cl from there), CLINFORMER_TUNE=off (ignore stored GEMM tuning),\n"
    "CLINFORMER_SOFTMAX=0|1|2 (force a softmax kernel instead of timing),\n"
    "CLINFORMER_ATTEND=gemm|fused (force how Linformer attention over the\n"
    "slots runs instead of timing), CLINFORMER_GEMM=clblast|blocked (force\n"
    "who runs the GEMMs instead of timing).\n"
    "Exit status: 0 on success (check-lookahead: PASS; compare: MATCH), 1 on\n"
    "an error (the message names it), 2 on a usage error, 3 when\n"
    "check-lookahead FAILs or compare finds the arrays DIFFER.\n";

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int
fail(const char *what, int rc)
{
    fprintf(stderr, "clinformer: %s: %s (%s): %s\n", what, clf_strerror(rc),
            clf_status_name(rc), clf_last_error());
    return 1;
}

static int
cmd_devices(void)
{
    clf_device_info infos[64];
    size_t count = 0, i;
    int rc = clf_devices_list(infos, 64, &count);

    if (rc != 0)
        return fail("listing devices", rc);
    for (i = 0; i < count && i < 64; i++) {
        const clf_device_info *d = &infos[i];
        printf("[%u] %s / %s\n", d->index, d->platform, d->name);
        printf("    type %s, vendor %s, driver %s\n",
               d->is_gpu ? "GPU" : d->is_cpu ? "CPU" : "other", d->vendor,
               d->driver);
        printf("    %s, %s\n", d->version, d->c_version);
        printf("    %u compute units at %u MHz, %.2f GiB global memory, "
               "max allocation %.2f GiB, %llu KiB local\n",
               d->compute_units, d->max_clock_mhz,
               (double)d->global_mem / 1073741824.0,
               (double)d->max_alloc / 1073741824.0, d->local_mem / 1024);
        printf("    fp16 %s, fp64 %s\n", d->fp16 ? "yes" : "no",
               d->fp64 ? "yes" : "no");
    }
    return 0;
}

/* The worked example of DESIGN.md section 1, on the device: one query
 * q = 1 over K = (1,2,3), V = (10,20,30), E = F = [[1/2,1/2,0],[0,0,1]]. */
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

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs one warm-up and `repeat` timed forwards; returns the median. */
static int
time_mode(clf_attention *att, clf_mode mode, const float *x, size_t n,
          float *y, int repeat, double *median, double *first)
{
    double t[64], t0;
    int r, rc;

    if ((rc = clf_attention_set_mode(att, mode)) != 0)
        return rc;
    t0 = now_s();
    if ((rc = clf_attention_forward(att, x, 1, n, y)) != 0)
        return rc;
    *first = now_s() - t0;
    for (r = 0; r < repeat; r++) {
        t0 = now_s();
        if ((rc = clf_attention_forward(att, x, 1, n, y)) != 0)
            return rc;
        t[r] = now_s() - t0;
    }
    qsort(t, (size_t)repeat, sizeof t[0], cmp_double);
    *median = t[repeat / 2];
    return 0;
}

static int
cmd_demo(const char *device, size_t n, int repeat)
{
    clf_context *ctx = NULL;
    clf_attention *att = NULL;
    clf_attention_desc d;
    clf_device_info info;
    float *x = NULL, *yl = NULL, *yf = NULL;
    double gl = 0, gf = 0, tl, tf, fl, ff, fll, flf, num = 0, den = 0, t0;
    size_t i, count;
    int rc, status = 1;

    printf("== OpenCL devices\n");
    if (cmd_devices() != 0)
        return 1;
    rc = clf_context_create(&ctx, device);
    if (rc != 0)
        return fail("creating a context", rc);
    clf_context_device_info(ctx, &info);
    printf("\n== Using [%u] %s / %s (driver %s)\n", info.index, info.platform,
           info.name, info.driver);
    t0 = now_s();
    rc = clf_context_build(ctx);
    if (rc != 0) {
        fprintf(stderr, "%s\n", clf_context_build_log(ctx));
        fail("building kernels", rc);
        goto done;
    }
    printf("kernels ready in %.3f s\n", now_s() - t0);
    printf("GEMM parameters: %s\n",
           clf_context_tuning(ctx)[0] ? clf_context_tuning(ctx)
                                      : "CLBlast defaults (clinformer tune "
                                        "can find faster ones)");

    printf("\n== Golden example (DESIGN.md section 1)\n");
    if ((rc = golden(ctx, CLF_MODE_FULL, &gf)) != 0 ||
        (rc = golden(ctx, CLF_MODE_LINFORMER, &gl)) != 0) {
        fail("golden example", rc);
        goto done;
    }
    printf("full attention       %.4f  (expected 25.7521)\n", gf);
    printf("compressed attention %.4f  (expected 27.2636)\n", gl);
    printf("difference           %.4f  (expected 1.5115)\n", gl - gf);
    if (fabs(gf - 25.7521) > 1e-3 || fabs(gl - 27.2636) > 1e-3) {
        fprintf(stderr, "clinformer: golden example does not match\n");
        goto done;
    }

    printf("\n== One layer: D=512, h=8, k=256, B=1, n=%zu\n", n);
    memset(&d, 0, sizeof d);
    d.d_model = 512;
    d.heads = 8;
    d.max_seq_len = n;
    d.k = n < 256 ? n : 256;
    d.bias_out = 1;
    if ((rc = clf_attention_create(&att, ctx, &d)) != 0 ||
        (rc = clf_attention_randomize(att, 42)) != 0) {
        fail("creating the layer", rc);
        goto done;
    }
    count = n * d.d_model;
    x = malloc(count * sizeof *x);
    yl = malloc(count * sizeof *yl);
    yf = malloc(count * sizeof *yf);
    if (x == NULL || yl == NULL || yf == NULL) {
        fprintf(stderr, "clinformer: out of host memory\n");
        goto done;
    }
    srand(7);
    for (i = 0; i < count; i++)
        x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
    fprintf(stderr, "running Linformer mode...\n");
    if ((rc = time_mode(att, CLF_MODE_LINFORMER, x, n, yl, repeat, &tl,
                        &fll)) != 0) {
        fail("Linformer forward", rc);
        goto done;
    }
    fprintf(stderr, "running full mode...\n");
    if ((rc = time_mode(att, CLF_MODE_FULL, x, n, yf, repeat, &tf, &flf)) !=
        0) {
        fail("full forward", rc);
        goto done;
    }
    clf_attention_flops(att, CLF_MODE_LINFORMER, 1, n, &fl);
    clf_attention_flops(att, CLF_MODE_FULL, 1, n, &ff);
    for (i = 0; i < count; i++) {
        double dlt = (double)yl[i] - yf[i];
        num += dlt * dlt;
        den += (double)yf[i] * yf[i];
    }
    printf("mode       first call   median (%d runs)   GFLOP   GFLOP/s\n",
           repeat);
    printf("linformer  %8.3f s   %8.3f s          %7.2f  %7.1f\n", fll, tl,
           fl * 1e-9, fl * 1e-9 / tl);
    printf("full       %8.3f s   %8.3f s          %7.2f  %7.1f\n", flf, tf,
           ff * 1e-9, ff * 1e-9 / tf);
    printf("speed-up of Linformer over full attention: %.2fx\n", tf / tl);
    printf("kernels chosen by timing: %s\n", clf_context_kernel_choices(ctx));
    printf("relative difference ||Y_lin - Y_full|| / ||Y_full||: %.4f\n",
           sqrt(num / den));
    printf("(random weights and E: Linformer approximates full attention "
           "only as well as E and F are trained to)\n");
    status = 0;
done:
    free(x);
    free(yl);
    free(yf);
    clf_attention_destroy(att);
    clf_context_destroy(ctx);
    return status;
}

struct options {
    double budget;
    const char *device;
    const char *weights, *input, *output, *mask, *lengths, *layout;
    int layerwise, heads_set, block_set, causal_flag, repeat_set;
    double tol;
    size_t seq_len, repeat, max_seq_len, d_model, heads, k, block;
    size_t positions, seed;
    clf_sharing sharing;
    int full, causal;
};

/* String-valued options of `run`. */
static const char **
string_option(struct options *o, const char *name)
{
    if (strcmp(name, "--weights") == 0)
        return &o->weights;
    if (strcmp(name, "--input") == 0)
        return &o->input;
    if (strcmp(name, "--output") == 0)
        return &o->output;
    if (strcmp(name, "--mask") == 0)
        return &o->mask;
    if (strcmp(name, "--lengths") == 0)
        return &o->lengths;
    if (strcmp(name, "--layout") == 0)
        return &o->layout;
    return NULL;
}

static int
cmd_check_lookahead(const struct options *o)
{
    clf_context *ctx = NULL;
    clf_attention *att = NULL;
    clf_attention_desc d;
    clf_forward_opts fo;
    clf_lookahead_result r;
    size_t *pos = NULL, np, i, count;
    float *x = NULL;
    unsigned long long st = o->seed;
    int rc, status = 1;

    memset(&d, 0, sizeof d);
    d.d_model = o->d_model;
    d.heads = o->heads;
    d.max_seq_len = o->max_seq_len ? o->max_seq_len : o->seq_len;
    d.k = o->k;
    d.sharing = o->sharing;
    d.causal_block = o->full ? 0 : o->block;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    memset(&fo, 0, sizeof fo);
    fo.causal = o->causal;
    np = o->positions < o->seq_len ? o->positions : o->seq_len;
    count = o->seq_len * o->d_model;
    if ((rc = clf_context_create(&ctx, o->device)) != 0)
        return fail("creating a context", rc);
    if ((rc = clf_attention_create(&att, ctx, &d)) != 0 ||
        (rc = clf_attention_randomize(att, o->seed)) != 0 ||
        (rc = clf_attention_set_mode(
             att, o->full ? CLF_MODE_FULL : CLF_MODE_LINFORMER)) != 0) {
        fail("creating the layer", rc);
        goto done;
    }
    x = malloc(count * sizeof *x);
    pos = malloc(np * sizeof *pos);
    if (x == NULL || pos == NULL) {
        fprintf(stderr, "clinformer: out of host memory\n");
        goto done;
    }
    for (i = 0; i < count; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(st >> 11) * 0x1.0p-52 - 1.0);
    }
    /* Spread the positions from 0 to seq_len - 1. */
    for (i = 0; i < np; i++)
        pos[i] = np == 1 ? 0 : i * (o->seq_len - 1) / (np - 1);
    printf("layer: D=%zu h=%zu N=%zu k=%zu %s, %s%s, n=%zu\n", d.d_model,
           d.heads, d.max_seq_len, d.k,
           o->sharing == CLF_SHARE_PER_HEAD    ? "per-head E/F"
           : o->sharing == CLF_SHARE_KEY_VALUE ? "key-value E=F"
                                                : "headwise E/F",
           o->full ? "full attention" : "Linformer",
           o->causal ? (o->full ? ", causal" : ", causal (prefix-safe)")
                     : ", not causal",
           o->seq_len);
    if (o->causal && !o->full)
        printf("causal block b=%zu: %zu slots per block\n", d.causal_block,
               d.k / ((d.max_seq_len + d.causal_block - 1) / d.causal_block));
    rc = clf_attention_check_lookahead(att, x, o->seq_len, &fo, pos, np,
                                       o->seed + 1, &r);
    if (rc != 0) {
        fail("look-ahead audit", rc);
        goto done;
    }
    if (r.passed) {
        printf("PASS: for each of %zu positions t, changing every input "
               "after t left the outputs at positions 0..t unchanged, bit for "
               "bit\n",
               r.checked);
        status = 0;
    } else {
        printf("FAIL: changing the inputs after t=%zu moved the output at "
               "position %zu (max change at positions <= t: %.6g)\n",
               r.t, r.moved, r.change);
        status = 3;
    }
done:
    free(x);
    free(pos);
    clf_attention_destroy(att);
    clf_context_destroy(ctx);
    return status;
}

static void
print_shape(const char *what, const clf_array *a)
{
    size_t i;

    printf("%s: (", what);
    for (i = 0; i < a->ndim; i++)
        printf("%s%zu", i ? ", " : "", a->shape[i]);
    printf(") %s\n", a->data ? "float32" : "int");
}

static int
cmd_run(const struct options *o)
{
    clf_context *ctx = NULL;
    clf_model *m = NULL;
    clf_model_opts mo;
    clf_model_info info;
    clf_forward_opts fo;
    clf_array x, mask;
    unsigned *lens = NULL;
    unsigned char *mbytes = NULL;
    float *y = NULL;
    size_t B, n, cols, shape[3], i;
    double t0, t_load, t_fwd;
    int rc, status = 1;

    memset(&x, 0, sizeof x);
    memset(&mask, 0, sizeof mask);
    memset(&mo, 0, sizeof mo);
    memset(&fo, 0, sizeof fo);
    if (o->weights == NULL || o->input == NULL || o->output == NULL) {
        fprintf(stderr, "clinformer run: --weights, --input and --output are "
                        "required\n");
        return 2;
    }
    if (o->layout != NULL && clf_layout_parse(o->layout, &mo.layout) != 0) {
        fprintf(stderr, "clinformer run: %s\n", clf_last_error());
        return 2;
    }
    mo.heads = o->heads_set ? o->heads : 0;
    mo.causal_block = o->block_set ? o->block : 0;
    mo.layerwise = o->layerwise;
    if ((rc = clf_context_create(&ctx, o->device)) != 0)
        return fail("creating a context", rc);
    t0 = now_s();
    if ((rc = clf_model_load(&m, ctx, o->weights, &mo)) != 0) {
        fail(o->weights, rc);
        goto done;
    }
    t_load = now_s() - t0;
    clf_model_info_get(m, &info);
    printf("loaded %s: layout %s, %zu layer%s%s, d_model %zu, heads %zu "
           "(head_dim %zu), max_seq_len %zu, k %zu",
           o->weights, clf_layout_name(info.layout), info.layers,
           info.layers == 1 ? "" : "s", info.reversible ? " (reversible)" : "",
           info.d_model, info.heads, info.head_dim, info.max_seq_len, info.k);
    if (info.ffn_dim)
        printf(", ffn %zu", info.ffn_dim);
    if (info.vocab)
        printf(", vocab %zu", info.vocab);
    if (info.share_kv)
        printf(", share_kv");
    if (info.one_kv_head)
        printf(", one_kv_head");
    printf(" (%.3f s)\n", t_load);

    if ((rc = clf_npy_load(o->input, &x)) != 0) {
        fail(o->input, rc);
        goto done;
    }
    print_shape("input", &x);
    if (info.vocab != 0) {
        if (x.ids == NULL || x.ndim < 1 || x.ndim > 2) {
            fprintf(stderr, "clinformer run: %s: an LM takes an int array of "
                            "token ids shaped (B, n) or (n)\n",
                    o->input);
            goto done;
        }
        B = x.ndim == 2 ? x.shape[0] : 1;
        n = x.shape[x.ndim - 1];
        cols = info.vocab;
    } else {
        if (x.data == NULL || x.ndim < 2 || x.ndim > 3 ||
            x.shape[x.ndim - 1] != info.d_model) {
            fprintf(stderr, "clinformer run: %s: expected float32 shaped "
                            "(B, n, %zu) or (n, %zu)\n",
                    o->input, info.d_model, info.d_model);
            goto done;
        }
        B = x.ndim == 3 ? x.shape[0] : 1;
        n = x.shape[x.ndim - 2];
        cols = info.d_model;
    }
    if (B == 0 || n == 0) {
        fprintf(stderr, "clinformer run: %s is empty\n", o->input);
        goto done;
    }
    if (o->lengths != NULL) {
        const char *p = o->lengths;
        lens = calloc(B, sizeof *lens);
        if (lens == NULL)
            goto done;
        for (i = 0; i < B; i++) {
            char *end;
            unsigned long v = strtoul(p, &end, 10);
            if (end == p || (*end != ',' && *end != '\0') ||
                (*end == '\0' && i + 1 < B) || v > 0xffffffffUL) {
                fprintf(stderr, "clinformer run: --lengths needs %zu "
                                "comma-separated lengths\n",
                        B);
                goto done;
            }
            lens[i] = (unsigned)v;
            p = *end ? end + 1 : end;
        }
        if (*p != '\0') {
            fprintf(stderr, "clinformer run: --lengths has more than %zu "
                            "entries\n",
                    B);
            goto done;
        }
        fo.lengths = lens;
    }
    if (o->mask != NULL) {
        if ((rc = clf_npy_load(o->mask, &mask)) != 0) {
            fail(o->mask, rc);
            goto done;
        }
        if (mask.count != B * n) {
            fprintf(stderr, "clinformer run: %s has %zu entries; the input "
                            "needs %zu x %zu\n",
                    o->mask, mask.count, B, n);
            goto done;
        }
        mbytes = malloc(B * n);
        if (mbytes == NULL)
            goto done;
        for (i = 0; i < B * n; i++)
            mbytes[i] = mask.data ? mask.data[i] != 0.0f : mask.ids[i] != 0;
        fo.key_mask = mbytes;
    }
    fo.causal = o->causal_flag;
    if (o->full && (rc = clf_model_set_mode(m, CLF_MODE_FULL)) != 0) {
        fail("--full", rc);
        goto done;
    }
    y = malloc(B * n * cols * sizeof *y);
    if (y == NULL) {
        fprintf(stderr, "clinformer run: out of host memory\n");
        goto done;
    }
    t0 = now_s();
    rc = info.vocab ? clf_model_forward_tokens(m, x.ids, B, n, y, &fo)
                    : clf_model_forward(m, x.data, B, n, y, &fo);
    t_fwd = now_s() - t0;
    if (rc != 0) {
        fail("forward", rc);
        goto done;
    }
    shape[0] = B;
    shape[1] = n;
    shape[2] = cols;
    if ((rc = clf_npy_save(o->output, y, shape, 3)) != 0) {
        fail(o->output, rc);
        goto done;
    }
    printf("forward: batch %zu, seq_len %zu, %s%s in %.3f s (first call "
           "includes kernel compilation)\n",
           B, n, o->full ? "full attention" : "Linformer",
           o->causal_flag ? ", causal" : "", t_fwd);
    printf("kernels chosen by timing: %s\n", clf_context_kernel_choices(ctx));
    if (o->repeat_set) {
        double t[64];
        size_t r;
        for (r = 0; r < o->repeat; r++) {
            t0 = now_s();
            rc = info.vocab ? clf_model_forward_tokens(m, x.ids, B, n, y, &fo)
                            : clf_model_forward(m, x.data, B, n, y, &fo);
            t[r] = now_s() - t0;
            if (rc != 0) {
                fail("forward", rc);
                goto done;
            }
        }
        qsort(t, o->repeat, sizeof t[0], cmp_double);
        printf("warm forward: median %.3f ms over %zu runs (min %.3f, max "
               "%.3f)\n",
               t[o->repeat / 2] * 1e3, o->repeat, t[0] * 1e3,
               t[o->repeat - 1] * 1e3);
    }
    printf("wrote %s: (%zu, %zu, %zu) float32\n", o->output, B, n, cols);
    status = 0;
done:
    clf_array_free(&x);
    clf_array_free(&mask);
    free(lens);
    free(mbytes);
    free(y);
    clf_model_destroy(m);
    clf_context_destroy(ctx);
    return status;
}

static int
cmd_compare(const char *a_path, const char *b_path, double tol)
{
    clf_array a, b;
    double scale = 0.0, err = 0.0;
    size_t i, worst = 0;
    int rc, status = 1;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if ((rc = clf_npy_load(a_path, &a)) != 0)
        return fail(a_path, rc);
    if ((rc = clf_npy_load(b_path, &b)) != 0) {
        clf_array_free(&a);
        return fail(b_path, rc);
    }
    if (a.data == NULL || b.data == NULL || a.count != b.count ||
        a.ndim != b.ndim || memcmp(a.shape, b.shape, a.ndim * sizeof a.shape[0])) {
        fprintf(stderr, "clinformer compare: the arrays differ in shape or "
                        "type\n");
        goto done;
    }
    for (i = 0; i < a.count; i++) {
        double d = fabs((double)a.data[i] - b.data[i]);
        if (fabs(b.data[i]) > scale)
            scale = fabs(b.data[i]);
        if (!(d <= err)) {
            err = isnan(d) ? INFINITY : d;
            worst = i;
        }
    }
    if (scale == 0.0)
        scale = 1.0;
    printf("max |A - B| = %.3g at element %zu; max |B| = %.3g; relative "
           "%.3g (tolerance %.3g)\n",
           err, worst, scale, err / scale, tol);
    status = err <= tol * scale ? 0 : 3;
    printf("%s\n", status == 0 ? "MATCH" : "DIFFER");
done:
    clf_array_free(&a);
    clf_array_free(&b);
    return status;
}

static void
progress_line(const char *line, void *user)
{
    (void)user;
    fprintf(stderr, "%s\n", line);
}

static int
cmd_tune(const struct options *o)
{
    clf_context *ctx = NULL;
    clf_tune_opts to;
    int rc;

    memset(&to, 0, sizeof to);
    to.d_model = o->d_model;
    to.heads = o->heads;
    to.k = o->k;
    to.seq_len = o->seq_len;
    to.budget_s = o->budget;
    to.progress = progress_line;
    if ((rc = clf_context_create(&ctx, o->device)) != 0)
        return fail("creating a context", rc);
    rc = clf_tune(ctx, &to);
    if (rc != 0) {
        fail("tuning", rc);
        clf_context_destroy(ctx);
        return 1;
    }
    printf("GEMM tuning in use: %s\n", clf_context_tuning(ctx)[0]
                                            ? clf_context_tuning(ctx)
                                            : "CLBlast defaults");
    clf_context_destroy(ctx);
    return 0;
}

static int
parse_size(const char *s, size_t *out)
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
    struct options o;
    const char *cmd;
    int i, demo, run, tune, first;

    memset(&o, 0, sizeof o);
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 ||
        strcmp(cmd, "-h") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("clinformer %s\n", clf_version());
        return 0;
    }
    if (strcmp(cmd, "bench") == 0)
        return clf_bench_main(argc - 1, argv + 1);
    demo = strcmp(cmd, "demo") == 0;
    run = strcmp(cmd, "run") == 0;
    tune = strcmp(cmd, "tune") == 0;
    first = 2;
    if (strcmp(cmd, "compare") == 0) {
        if (argc < 4) {
            fprintf(stderr, "clinformer compare: needs two .npy files\n");
            return 2;
        }
        first = 4;
    }
    o.seq_len = demo ? 4096 : tune ? 2048 : 256;
    o.repeat = 3;
    o.d_model = tune ? 512 : 64;
    o.heads = tune ? 8 : 4;
    o.k = tune ? 256 : 64;
    o.budget = 120.0;
    o.block = 16;
    o.positions = 32;
    o.seed = 1;
    o.causal = 1;
    o.tol = 1e-5;
    for (i = first; i < argc; i++) {
        const char *a = argv[i];
        const char **str = run ? string_option(&o, a) : NULL;
        size_t *target = NULL;
        if (strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--full") == 0 && !demo) {
            o.full = 1;
            continue;
        } else if (strcmp(a, "--no-causal") == 0 && !demo && !run) {
            o.causal = 0;
            continue;
        } else if (strcmp(a, "--causal") == 0 && run) {
            o.causal_flag = 1;
            continue;
        } else if (strcmp(a, "--layerwise") == 0 && run) {
            o.layerwise = 1;
            continue;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "clinformer: unknown or incomplete option "
                            "\"%s\"\nTry 'clinformer help'.\n",
                    a);
            return 2;
        }
        if (str != NULL) {
            *str = argv[++i];
            continue;
        }
        if (strcmp(a, "--budget") == 0 && tune) {
            char *end;
            o.budget = strtod(argv[++i], &end);
            if (*argv[i] == '\0' || *end != '\0' || !(o.budget > 0.0)) {
                fprintf(stderr, "clinformer: --budget wants seconds > 0, got "
                                "\"%s\"\n",
                        argv[i]);
                return 2;
            }
            continue;
        }
        if (strcmp(a, "--tol") == 0 && first == 4) {
            char *end;
            o.tol = strtod(argv[++i], &end);
            if (*argv[i] == '\0' || *end != '\0' || !(o.tol >= 0.0)) {
                fprintf(stderr, "clinformer: --tol wants a non-negative "
                                "number, got \"%s\"\n",
                        argv[i]);
                return 2;
            }
            continue;
        }
        if (strcmp(a, "--device") == 0) {
            o.device = argv[++i];
            continue;
        } else if (strcmp(a, "--sharing") == 0 && !demo && !run) {
            const char *v = argv[++i];
            if (strcmp(v, "headwise") == 0)
                o.sharing = CLF_SHARE_HEADWISE;
            else if (strcmp(v, "per-head") == 0)
                o.sharing = CLF_SHARE_PER_HEAD;
            else if (strcmp(v, "key-value") == 0)
                o.sharing = CLF_SHARE_KEY_VALUE;
            else {
                fprintf(stderr, "clinformer: --sharing wants headwise, "
                                "per-head or key-value, got \"%s\"\n",
                        v);
                return 2;
            }
            continue;
        }
        if (strcmp(a, "--seq-len") == 0 && !run)
            target = &o.seq_len;
        else if (strcmp(a, "--repeat") == 0 && (demo || run)) {
            target = &o.repeat;
            o.repeat_set = 1;
        }
        else if (!demo && !run && strcmp(a, "--max-seq-len") == 0)
            target = &o.max_seq_len;
        else if (!demo && !run && strcmp(a, "--d-model") == 0)
            target = &o.d_model;
        else if (!demo && strcmp(a, "--heads") == 0) {
            target = &o.heads;
            o.heads_set = 1;
        } else if (!demo && !run && strcmp(a, "--k") == 0)
            target = &o.k;
        else if (!demo && strcmp(a, "--block") == 0) {
            target = &o.block;
            o.block_set = 1;
        } else if (!demo && !run && strcmp(a, "--positions") == 0)
            target = &o.positions;
        else if (!demo && !run && strcmp(a, "--seed") == 0)
            target = &o.seed;
        if (target == NULL) {
            fprintf(stderr, "clinformer: unknown or incomplete option "
                            "\"%s\"\nTry 'clinformer help'.\n",
                    a);
            return 2;
        }
        if (parse_size(argv[++i], target) != 0 ||
            (target == &o.repeat && o.repeat > 64)) {
            fprintf(stderr, "clinformer: %s wants a positive integer%s, got "
                            "\"%s\"\n",
                    a, target == &o.repeat ? " up to 64" : "", argv[i]);
            return 2;
        }
    }
    if (run)
        return cmd_run(&o);
    if (tune)
        return cmd_tune(&o);
    if (first == 4)
        return cmd_compare(argv[2], argv[3], o.tol);
    if (strcmp(cmd, "devices") == 0)
        return cmd_devices();
    if (demo)
        return cmd_demo(o.device, o.seq_len, (int)o.repeat);
    if (strcmp(cmd, "check-lookahead") == 0)
        return cmd_check_lookahead(&o);
    fprintf(stderr, "clinformer: unknown command \"%s\"\nTry 'clinformer "
                    "help'.\n",
            cmd);
    return 2;
}
