/* Native half arithmetic for half-stored weights (src/gemm/half_gemm.c,
 * cl/half_gemm.cl), forced through the kernel choice halfgemm=native.
 *
 * Tolerances, each max |y - y_ref| <= tol * max |y_ref|:
 *   - against the double-precision reference fed the weights rounded to
 *     binary16 on the host: 2e-3.  Each product of the native GEMMs
 *     carries two binary16 roundings (the activation, then the product),
 *     at most 2^-10 of |a w| together; summed with random signs in
 *     float32 that stays near 2^-11 of the result, well inside 2e-3
 *     (docs/design.md, "Native half arithmetic");
 *   - against the same layer stored and computed in float32: 2e-3, the
 *     accuracy bound of half precision on the peer fixtures;
 *   - the peer fixtures (tests/data, PyTorch float32 outputs): 2e-3
 *     against the float32 model and 2.5e-3 against PyTorch, as for the
 *     widening way (test_half).
 * On a device without cl_khr_fp16 (or whose self-test fails) the native
 * tests are skipped with the reason, and the fallback is checked: forcing
 * the native way widens as before, and the choice line says why. */
#include "../bench/reference.h"
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_NATIVE 2e-3
#define TOL_VS_FLOAT 2e-3
#define TOL_VS_REF 2.5e-3
/* The widening way: exact up to float32 (test_half). */
#define TOL_EXACT 1e-5

static char data_dir[1024];

static clf_attention_desc
desc_of(size_t D, size_t heads, size_t N, size_t k, size_t block)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = heads;
    d.max_seq_len = N;
    d.k = k;
    d.causal_block = block;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    return d;
}

/* The layer's reference with every stored weight rounded to binary16
 * (biases stay float32); the rounded copies are kept in r[]. */
static ref_layer
rounded_ref(const struct layer *l, float *r[CLF_WEIGHT_COUNT])
{
    ref_layer ref = l->ref;
    const float **slot[CLF_WEIGHT_COUNT] = {&ref.wq, &ref.wk, &ref.wv, &ref.wo,
                                            NULL,    NULL,    NULL,    NULL,
                                            &ref.E,  &ref.F};
    size_t count, i;
    int w;

    for (w = 0; w < CLF_WEIGHT_COUNT; w++) {
        r[w] = NULL;
        if (slot[w] == NULL ||
            clf_attention_weight_size(l->att, (clf_weight)w, &count) != 0)
            continue;
        r[w] = tu_malloc(count * sizeof(float));
        for (i = 0; i < count; i++)
            r[w][i] = ref_round_half(l->w[w][i]);
        *slot[w] = r[w];
    }
    return ref;
}

static float *
forward(struct layer *l, clf_mode mode, size_t B, size_t n, const float *x,
        int causal)
{
    float *y = tu_malloc(B * n * l->desc.d_model * sizeof *y);
    clf_forward_opts o;
    int rc;

    memset(&o, 0, sizeof o);
    o.causal = causal;
    ck_assert_int_eq(clf_attention_set_mode(l->att, mode), 0);
    rc = clf_attention_forward_ex(l->att, x, B, n, y, &o);
    ck_assert_msg(rc == 0, "forward: %s", clf_last_error());
    return y;
}

/* One forward of the half layer h (and of f, the same weights in
 * float32) against the rounded reference (tolerance tol) and f. */
static void
check_mode(struct layer *f, struct layer *h, clf_mode mode, int causal,
           double tol, unsigned long long seed)
{
    const size_t B = 2, n = 33, count = B * n * h->desc.d_model;
    const int full = mode == CLF_MODE_FULL;
    float *x = tu_malloc(count * sizeof *x), *yf, *yh, *r[CLF_WEIGHT_COUNT];
    double *ref = tu_malloc(count * sizeof *ref);
    ref_layer rr = rounded_ref(h, r);
    char what[160];
    size_t i;
    int w;

    tu_fill(x, count, seed, -1.0f, 1.0f);
    yf = forward(f, mode, B, n, x, causal);
    yh = forward(h, mode, B, n, x, causal);
    snprintf(what, sizeof what, "%s%s fp16 D=%zu heads=%zu k=%zu sharing=%d",
             full ? "full" : "linformer", causal ? " causal" : "",
             h->desc.d_model, h->desc.heads, h->desc.k, (int)h->desc.sharing);
    ref_attention_ex(&rr, full, x, B, n, NULL, causal, h->desc.causal_block,
                     ref);
    tu_assert_close(yh, ref, count, tol, what);
    for (i = 0; i < count; i++)
        ref[i] = yf[i];
    tu_assert_close(yh, ref, count, TOL_VS_FLOAT, what);
    for (w = 0; w < CLF_WEIGHT_COUNT; w++)
        free(r[w]);
    free(x);
    free(yf);
    free(yh);
    free(ref);
}

/* Every mode at odd sizes (d_h = 5, n = 33, k = 8, N = 37, block 5), for
 * a layer of desc d; returns the native GEMMs that ran. */
static size_t
check_modes(clf_attention_desc d, double tol, unsigned long long seed)
{
    clf_context *ctx = tu_context();
    const size_t before = clf__half_gemm_state(ctx)->calls;
    struct layer f, h;

    d.precision = CLF_PRECISION_FLOAT;
    layer_make(&f, &d, seed);
    d.precision = CLF_PRECISION_HALF;
    layer_make(&h, &d, seed);
    check_mode(&f, &h, CLF_MODE_LINFORMER, 0, tol, seed + 1);
    check_mode(&f, &h, CLF_MODE_FULL, 0, tol, seed + 2);
    check_mode(&f, &h, CLF_MODE_FULL, 1, tol, seed + 3);
    check_mode(&f, &h, CLF_MODE_LINFORMER, 1, tol, seed + 4);
    layer_free(&f);
    layer_free(&h);
    return clf__half_gemm_state(ctx)->calls - before;
}

START_TEST(half_gemm_native_each_mode)
{
    clf_context *ctx = tu_context();
    size_t s;

    ck_assert_int_eq(clf_context_force_kernel(ctx, "halfgemm", "native"), 0);
    for (s = 0; s < 4; s++) {
        clf_attention_desc d = desc_of(20, 4, 37, 8, 5);
        if (s == 1)
            d.sharing = CLF_SHARE_PER_HEAD;
        else if (s == 2)
            d.one_kv_head = 1;
        else if (s == 3) {
            d.share_kv = 1;
            d.bias_v = 0;
        }
        ck_assert_msg(check_modes(d, TOL_NATIVE, 80 + 10 * s) > 0,
                      "sharing %zu: no native GEMM ran", s);
    }
    ck_assert_ptr_nonnull(
        strstr(clf_context_kernel_choices(ctx), "halfgemm: native (forced"));
    ck_assert_int_eq(clf_context_force_kernel(ctx, "halfgemm", NULL), 0);
}
END_TEST

/* A peer fixture (tests/data) run as float32 and as half, natively. */
static void
check_fixture(const char *name)
{
    tu_check_half_fixture(data_dir, name, TOL_VS_REF, TOL_VS_FLOAT);
}

START_TEST(half_gemm_native_peer_fixtures)
{
    clf_context *ctx = tu_context();
    const size_t before = clf__half_gemm_state(ctx)->calls;

    ck_assert_int_eq(clf_context_force_kernel(ctx, "halfgemm", "native"), 0);
    check_fixture("lucidrains_attention");
    check_fixture("lucidrains_attention_sharekv_onekv");
    check_fixture("lucidrains_encoder");
    check_fixture("lucidrains_lm");
    ck_assert_uint_gt(clf__half_gemm_state(ctx)->calls, before);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "halfgemm", NULL), 0);
}
END_TEST

/* Unforced, the forward resolves the way for its own bucket (timed or
 * stored where native is offered; widen, not timed, where it is not) and
 * reports it. */
START_TEST(half_gemm_choice_timed)
{
    clf_context *ctx = tu_context();
    clf_attention_desc d = desc_of(24, 2, 16, 4, 0);
    struct layer h;
    float *y, x[2 * 16 * 24];
    char bucket[64];

    d.precision = CLF_PRECISION_HALF;
    layer_make(&h, &d, 5);
    tu_fill(x, 2 * 16 * 24, 6, -1.0f, 1.0f);
    ctx->last[CLF_KIND_HALFGEMM] = -1;
    ctx->last_bucket[CLF_KIND_HALFGEMM][0] = '\0';
    y = forward(&h, CLF_MODE_LINFORMER, 2, 16, x, 0);
    snprintf(bucket, sizeof bucket, "d%zu.q%zu",
             clf__pow2_bucket(24, (size_t)1 << 20),
             clf__pow2_bucket(24, (size_t)1 << 20));
    ck_assert_int_ge(ctx->last[CLF_KIND_HALFGEMM], 0);
    ck_assert_str_eq(ctx->last_bucket[CLF_KIND_HALFGEMM], bucket);
    if (clf__half_gemm_offered(ctx))
        ck_assert(ctx->last_source[CLF_KIND_HALFGEMM] == CLF_SOURCE_TIMED ||
                  ctx->last_source[CLF_KIND_HALFGEMM] == CLF_SOURCE_STORED);
    else
        ck_assert_int_eq(ctx->last[CLF_KIND_HALFGEMM], CLF_HALFGEMM_WIDEN);
    ck_assert_msg(strstr(clf_context_kernel_choices(ctx), "halfgemm: ") != NULL,
                  "%s", clf_context_kernel_choices(ctx));
    free(y);
    layer_free(&h);
}
END_TEST

/* Forced native where it is not offered: the widening way runs (exact as
 * in test_half), no native GEMM, and the choice line gives the reason. */
static void
check_fallback(const char *reason)
{
    clf_context *ctx = tu_context();
    const size_t before = clf__half_gemm_state(ctx)->calls;

    ck_assert_int_eq(clf_context_force_kernel(ctx, "halfgemm", "native"), 0);
    ck_assert_uint_eq(check_modes(desc_of(20, 4, 37, 8, 5), TOL_EXACT, 40), 0);
    ck_assert_uint_eq(clf__half_gemm_state(ctx)->calls, before);
    ck_assert_msg(strstr(clf_context_kernel_choices(ctx), reason) != NULL, "%s",
                  clf_context_kernel_choices(ctx));
    ck_assert_int_eq(clf_context_force_kernel(ctx, "halfgemm", NULL), 0);
}

/* A failing self-test (a wrong alpha given to the kernels, so that the
 * comparison must catch it) withdraws the native way; a passing one
 * restores it. */
START_TEST(half_gemm_failed_selftest_not_offered)
{
    clf_context *ctx = tu_context();

    ck_assert_int_eq(clf__half_gemm_selftest(ctx, 1), CLF_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "self-test"));
    ck_assert_int_eq(clf__half_gemm_offered(ctx), 0);
    check_fallback("halfgemm: widen (native not offered: self-test");
    ck_assert_int_eq(clf__half_gemm_selftest(ctx, 0), 0);
    ck_assert_int_eq(clf__half_gemm_offered(ctx), 1);
}
END_TEST

START_TEST(half_gemm_not_offered_falls_back)
{
    clf_context *ctx = tu_context();

    ck_assert_int_eq(clf__half_gemm_offered(ctx), 0);
    ck_assert_str_ne(clf__half_gemm_state(ctx)->why, "");
    ck_assert_int_eq(clf__half_gemm_selftest(ctx, 0), CLF_EUNSUPPORTED);
    check_fallback("halfgemm: widen (native not offered: ");
}
END_TEST

/* The plan decides whether half weights are read natively, from the
 * halfgemm choice: forced native, it is native exactly where offered;
 * forced widen, never; a float32 layer's plan never reads half. */
START_TEST(half_gemm_plan_decides_native)
{
    clf_context *ctx = tu_context();
    clf_attention_desc d = desc_of(20, 4, 37, 8, 0);
    const int offered = clf__half_gemm_offered(ctx);
    struct layer h, f;
    struct plan p;

    d.precision = CLF_PRECISION_HALF;
    layer_make(&h, &d, 90);
    d.precision = CLF_PRECISION_FLOAT;
    layer_make(&f, &d, 90);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "halfgemm", "native"), 0);
    ck_assert_int_eq(clf__plan_make(h.att, CLF_MODE_LINFORMER, 2, 33, NULL, &p),
                     0);
    ck_assert_int_eq(clf__plan_choose(h.att, &p), 0);
    ck_assert_int_eq(p.half_native, offered);
    ck_assert_int_eq(clf__plan_make(f.att, CLF_MODE_LINFORMER, 2, 33, NULL, &p),
                     0);
    ck_assert_int_eq(clf__plan_choose(f.att, &p), 0);
    ck_assert_int_eq(p.half_native, 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "halfgemm", "widen"), 0);
    ck_assert_int_eq(clf__plan_make(h.att, CLF_MODE_LINFORMER, 2, 33, NULL, &p),
                     0);
    ck_assert_int_eq(clf__plan_choose(h.att, &p), 0);
    ck_assert_int_eq(p.half_native, 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "halfgemm", NULL), 0);
    layer_free(&h);
    layer_free(&f);
}
END_TEST

static Suite *
suite(int offered)
{
    Suite *s = suite_create("fp16");
    TCase *tc = tcase_create("fp16");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, half_gemm_plan_decides_native);
    if (offered) {
        tcase_add_test(tc, half_gemm_native_each_mode);
        tcase_add_test(tc, half_gemm_native_peer_fixtures);
        tcase_add_test(tc, half_gemm_choice_timed);
        tcase_add_test(tc, half_gemm_failed_selftest_not_offered);
    } else {
        tcase_add_test(tc, half_gemm_not_offered_falls_back);
    }
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    const char *top = getenv("top_srcdir");
    clf_context *ctx = tu_context();
    int offered = ctx != NULL && clf__half_gemm_offered(ctx);

    snprintf(data_dir, sizeof data_dir, "%s/tests/data", top ? top : ".");
    if (ctx != NULL && !offered)
        printf("# SKIP native fp16 tests: %s; checking the fallback only\n",
               clf__half_gemm_state(ctx)->why);
    return tu_run(suite(offered), 1);
}
