#include "testutil.h"

#include "internal.h"

#include <dirent.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static clf_context *shared_ctx;
static int tried;
static char *start_cache_dir; /* CLINFORMER_CACHE_DIR when tu_run began */

clf_context *
tu_context(void)
{
    if (!tried) {
        tried = 1;
        if (clf_context_create(&shared_ctx, NULL) != 0)
            shared_ctx = NULL;
    }
    return shared_ctx;
}

clf_context *
tu_tiled_fit(clf_context *ctx)
{
    struct clf__tiled_cfg cfg[16];
    struct clf__limits lim;
    size_t n, i;

    if (ctx == NULL || clf__tiled_usable(ctx))
        return ctx;
    clf__device_limits(ctx, &lim);
    n = clf__tiled_space(cfg, 16, &lim);
    for (i = 0; i < n; i++)
        if (clf__tiled_set(ctx, &cfg[i]) == 0 && clf__tiled_usable(ctx))
            return ctx;
    ck_abort_msg("no tiled GEMM sizes of the tuning space run on this "
                 "device");
    return ctx;
}

void
tu_cache_dir_restore(void)
{
    if (start_cache_dir != NULL)
        setenv("CLINFORMER_CACHE_DIR", start_cache_dir, 1);
    else
        unsetenv("CLINFORMER_CACHE_DIR");
}

int
tu_run(Suite *s, int needs_device)
{
    const char *cache;
    SRunner *sr;
    int failed;

    if (needs_device && tu_context() == NULL) {
        const char *req = getenv("CLINFORMER_REQUIRE_DEVICE");
        if (req != NULL && strcmp(req, "1") == 0) {
            printf("Bail out! no OpenCL device but "
                   "CLINFORMER_REQUIRE_DEVICE=1: %s\n",
                   clf_last_error());
            return 1;
        }
        printf("1..0 # SKIP no OpenCL device: %s\n", clf_last_error());
        return 0;
    }
    cache = getenv("CLINFORMER_CACHE_DIR");
    start_cache_dir = cache != NULL ? strdup(cache) : NULL;
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_set_tap(sr, "-");
    srunner_run_all(sr, CK_SILENT);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    clf_context_destroy(shared_ctx);
    shared_ctx = NULL;
    free(start_cache_dir);
    start_cache_dir = NULL;
    return failed == 0 ? 0 : 1;
}

void
tu_fill(float *a, size_t n, unsigned long long seed, float lo, float hi)
{
    unsigned long long st = seed * 2654435761ULL + 1;
    size_t i;

    for (i = 0; i < n; i++) {
        double u;
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        u = (double)(st >> 11) * 0x1.0p-53;
        a[i] = (float)(lo + (hi - lo) * u);
    }
}

double
tu_scale(const double *ref, size_t n)
{
    double m = 1e-30;
    size_t i;

    for (i = 0; i < n; i++)
        if (fabs(ref[i]) > m)
            m = fabs(ref[i]);
    return m;
}

double
tu_max_err(const float *got, const double *ref, size_t n)
{
    double m = 0.0;
    size_t i;

    for (i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= m)) /* also catches NaN */
            m = isnan(e) ? INFINITY : e;
    }
    return m;
}

void
tu_assert_close(const float *got, const double *ref, size_t n, double rtol,
                const char *what)
{
    double scale = tu_scale(ref, n);
    double err = tu_max_err(got, ref, n);

    ck_assert_msg(err <= rtol * scale,
                  "%s: max abs error %.3g exceeds %.1g x scale %.3g", what, err,
                  rtol, scale);
}

void *
tu_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

cl_mem
tu_upload(clf_context *ctx, const float *h, size_t n)
{
    cl_int err;
    cl_mem m = clCreateBuffer(clf_context_cl_context(ctx),
                              CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              (n ? n : 1) * sizeof(float), (void *)h, &err);
    ck_assert_msg(m != NULL, "clCreateBuffer failed (%d)", err);
    return m;
}

void
tu_download(clf_context *ctx, cl_mem m, float *h, size_t n)
{
    ck_assert_int_eq(clEnqueueReadBuffer(clf_context_cl_queue(ctx), m, CL_TRUE,
                                         0, n * sizeof *h, h, 0, NULL, NULL),
                     CL_SUCCESS);
}

void
tu_gemm_data_make(tu_gemm_data *g, clf_context *ctx, size_t na, size_t nb,
                  size_t nc, unsigned long long seed)
{
    g->na = na;
    g->nb = nb;
    g->nc = nc;
    g->a = tu_malloc(na * sizeof *g->a);
    g->b = tu_malloc(nb * sizeof *g->b);
    g->c = tu_malloc(nc * sizeof *g->c);
    g->c0 = tu_malloc(nc * sizeof *g->c0);
    ck_assert_int_eq(clf_context_build(ctx), 0);
    tu_fill(g->a, na, seed, -1.0f, 1.0f);
    tu_fill(g->b, nb, seed + 1, -1.0f, 1.0f);
    tu_fill(g->c, nc, seed + 2, -1.0f, 1.0f);
    memcpy(g->c0, g->c, nc * sizeof *g->c);
    g->ma = tu_upload(ctx, g->a, na);
    g->mb = tu_upload(ctx, g->b, nb);
    g->mc = tu_upload(ctx, g->c, nc);
}

void
tu_gemm_data_free(tu_gemm_data *g)
{
    clReleaseMemObject(g->ma);
    clReleaseMemObject(g->mb);
    clReleaseMemObject(g->mc);
    free(g->a);
    free(g->b);
    free(g->c);
    free(g->c0);
}

void
layer_make(struct layer *l, const clf_attention_desc *d,
           unsigned long long seed)
{
    layer_make_on(l, tu_context(), d, seed);
}

void
layer_make_on(struct layer *l, clf_context *ctx, const clf_attention_desc *d,
              unsigned long long seed)
{
    size_t count;
    float amp;
    int i, rc;

    memset(l, 0, sizeof *l);
    l->desc = *d;
    rc = clf_attention_create(&l->att, ctx, d);
    ck_assert_msg(rc == 0, "create: %s", clf_last_error());
    for (i = 0; i < CLF_WEIGHT_COUNT; i++) {
        if (clf_attention_weight_size(l->att, (clf_weight)i, &count) != 0)
            continue;
        /* PyTorch-like scales keep logits of realistic size. */
        amp = (float)(1.0 / sqrt((double)(i == CLF_PROJ_E || i == CLF_PROJ_F
                                              ? d->k
                                              : d->d_model)));
        l->w[i] = tu_malloc(count * sizeof(float));
        tu_fill(l->w[i], count, seed * 31 + (unsigned long long)i, -amp, amp);
        rc = clf_attention_set_weight(l->att, (clf_weight)i, l->w[i], count);
        ck_assert_msg(rc == 0, "set %s: %s", clf_weight_name((clf_weight)i),
                      clf_last_error());
    }
    l->ref.D = d->d_model;
    l->ref.hq = d->heads;
    l->ref.hkv = d->one_kv_head ? 1 : d->heads;
    l->ref.dh = d->head_dim ? d->head_dim : d->d_model / d->heads;
    l->ref.N = d->max_seq_len;
    l->ref.k = d->k;
    l->ref.per_head_E = d->sharing == CLF_SHARE_PER_HEAD;
    l->ref.share_kv = d->share_kv;
    l->ref.kv_shared = d->sharing == CLF_SHARE_KEY_VALUE;
    l->ref.compressed_bias = d->compressed_bias;
    l->ref.compression = (int)d->compression;
    l->ref.slot_mask = d->slot_mask;
    l->ref.wq = l->w[CLF_WEIGHT_Q];
    l->ref.wk = l->w[CLF_WEIGHT_K];
    l->ref.wv = l->w[CLF_WEIGHT_V];
    l->ref.wo = l->w[CLF_WEIGHT_OUT];
    l->ref.bq = l->w[CLF_BIAS_Q];
    l->ref.bk = l->w[CLF_BIAS_K];
    l->ref.bv = l->w[CLF_BIAS_V];
    l->ref.bo = l->w[CLF_BIAS_OUT];
    l->ref.E = l->w[CLF_PROJ_E];
    l->ref.F = l->w[CLF_PROJ_F];
    l->ref.bE = l->w[CLF_BIAS_E];
    l->ref.bF = l->w[CLF_BIAS_F];
}

void
layer_free(struct layer *l)
{
    int i;

    clf_attention_destroy(l->att);
    for (i = 0; i < CLF_WEIGHT_COUNT; i++)
        free(l->w[i]);
}

size_t
tu_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

void
tu_clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[1024];

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        remove(path);
    }
    closedir(d);
}

void
tu_put_le(unsigned char *b, unsigned long long v, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

int
tu_gemm_resolve_fresh(clf_context *ctx, size_t m, size_t n, size_t k)
{
    char *was = getenv("CLINFORMER_CACHE_DIR");
    int v = 0, pinned = clf__gemm_pinned(ctx);

    was = was != NULL ? strdup(was) : NULL;
    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    ctx->nchoices = 0;
    ctx->choices_loaded = 1;
    clf__gemm_pin(ctx, CLF_GEMM_UNDECIDED);
    ck_assert_int_eq(clf_context_build(ctx), 0);
    ck_assert_int_eq(clf__gemm_resolve(ctx, CLF_ROLE_PROJ, m, n, k, 1, &v), 0);
    clf__gemm_pin(ctx, pinned);
    if (was != NULL)
        setenv("CLINFORMER_CACHE_DIR", was, 1);
    else
        unsetenv("CLINFORMER_CACHE_DIR");
    free(was);
    return v;
}

void
tu_lengths_mask(unsigned char *mask, const unsigned *lengths, size_t B,
                size_t n)
{
    size_t b, j;

    for (b = 0; b < B; b++)
        for (j = 0; j < n; j++)
            mask[b * n + j] = j < lengths[b];
}

void
tu_check_padded_sequence_zero(struct layer *l, const float *x, size_t n)
{
    const size_t B = 2, D = l->desc.d_model;
    unsigned char *mask = tu_malloc(B * n);
    float *y = tu_malloc(B * n * D * sizeof *y);
    clf_forward_opts o;
    size_t i;
    int mode, causal;

    memset(mask, 1, n);
    memset(mask + n, 0, n); /* second sequence all padding */
    memset(&o, 0, sizeof o);
    o.key_mask = mask;
    for (mode = 0; mode < 2; mode++)
        for (causal = 0; causal < 2; causal++) {
            o.causal = causal;
            ck_assert_int_eq(clf_attention_set_mode(l->att, (clf_mode)mode), 0);
            ck_assert_int_eq(clf_attention_forward_ex(l->att, x, B, n, y, &o),
                             0);
            for (i = 0; i < B * n * D; i++)
                ck_assert_msg(isfinite(y[i]), "y[%zu] = %g", i, y[i]);
            for (i = n * D; i < B * n * D; i++)
                ck_assert_float_eq(y[i], 0.0f);
        }
    free(mask);
    free(y);
}

clf_attention *
tu_golden_layer(void)
{
    clf_attention_desc d;
    clf_attention *att = NULL;
    const float one = 1.0f, ten = 10.0f;
    const float e[6] = {0.5f, 0.5f, 0.0f, 0.0f, 0.0f, 1.0f};

    memset(&d, 0, sizeof d);
    d.d_model = 1;
    d.heads = 1;
    d.max_seq_len = 3;
    d.k = 2;
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_Q, &one, 1), 0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_K, &one, 1), 0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_V, &ten, 1), 0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_OUT, &one, 1), 0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_PROJ_E, e, 6), 0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_PROJ_F, e, 6), 0);
    return att;
}

/* A peer fixture (dir/NAME.safetensors, NAME_x.npy, NAME_y.npy) loaded
 * as float32 and as half: the half output within tol_ref of the fixture's
 * output, within tol_float of the float32 model's and not equal to it. */
void
tu_check_half_fixture(const char *dir, const char *name, double tol_ref,
                      double tol_float)
{
    char p[1200];
    clf_model *m[2] = {NULL, NULL};
    clf_model_opts mo;
    clf_array x, y;
    float *out[2];
    double *ref;
    size_t i;
    int k, rc;

    snprintf(p, sizeof p, "%s/%s_x.npy", dir, name);
    ck_assert_msg(clf_npy_load(p, &x) == 0, "%s", clf_last_error());
    snprintf(p, sizeof p, "%s/%s_y.npy", dir, name);
    ck_assert_msg(clf_npy_load(p, &y) == 0, "%s", clf_last_error());
    snprintf(p, sizeof p, "%s/%s.safetensors", dir, name);
    ref = tu_malloc(y.count * sizeof *ref);
    for (k = 0; k < 2; k++) {
        memset(&mo, 0, sizeof mo);
        mo.precision = k ? CLF_PRECISION_HALF : CLF_PRECISION_FLOAT;
        rc = clf_model_load(&m[k], tu_context(), p, &mo);
        ck_assert_msg(rc == 0, "%s: %s", name, clf_last_error());
        out[k] = tu_malloc(y.count * sizeof(float));
        rc = x.ids ? clf_model_forward_tokens(m[k], x.ids, x.shape[0],
                                              x.shape[1], out[k], NULL)
                   : clf_model_forward(m[k], x.data, x.shape[0], x.shape[1],
                                       out[k], NULL);
        ck_assert_msg(rc == 0, "%s forward: %s", name, clf_last_error());
    }
    for (i = 0; i < y.count; i++)
        ref[i] = y.data[i];
    tu_assert_close(out[1], ref, y.count, tol_ref, name);
    for (i = 0; i < y.count; i++)
        ref[i] = out[0][i];
    tu_assert_close(out[1], ref, y.count, tol_float, name);
    ck_assert_msg(tu_max_err(out[1], ref, y.count) > 0.0, "%s: equals float32",
                  name);
    for (k = 0; k < 2; k++) {
        free(out[k]);
        clf_model_destroy(m[k]);
    }
    free(ref);
    clf_array_free(&x);
    clf_array_free(&y);
}

int
tu_launched(clf_context *ctx, const char *kernel)
{
    size_t n, i;
    clf_launch e;
    int seen = 0;

    ck_assert_int_eq(clf_context_launch_count(ctx, &n, NULL), 0);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(clf_context_launch(ctx, i, &e), 0);
        seen |= strcmp(e.kernel, kernel) == 0;
    }
    return seen;
}
