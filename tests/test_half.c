/* Half-precision weight storage (CLF_PRECISION_HALF).
 *
 * Tolerances, each max |y - y_ref| <= tol * max |y_ref|:
 *   - against the double-precision reference fed the weights rounded to
 *     binary16 on the host: 1e-5, as the float32 tests (storage must lose
 *     nothing beyond the rounding of each weight);
 *   - against the same layer stored as float32: 2e-3 (binary16 keeps 11
 *     significant bits, a relative rounding of at most 2^-11 = 4.9e-4 a
 *     weight);
 *   - against the double-precision reference of the unrounded weights:
 *     2.5e-3, the 2e-3 above plus float32's own error;
 *   - the peer fixtures (tests/data, PyTorch float32 outputs): 2e-3 against
 *     the float32 model and 2.5e-3 against PyTorch. */
#include "../bench/reference.h"
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_EXACT 1e-5
#define TOL_VS_FLOAT 2e-3
#define TOL_VS_REF 2.5e-3

static char data_dir[1024];

static clf_attention_desc
desc_of(size_t D, size_t heads, size_t N, size_t k, size_t block,
        clf_precision precision)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = heads;
    d.max_seq_len = N;
    d.k = k;
    d.causal_block = block;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    d.precision = precision;
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

struct pair {
    struct layer f, h; /* the same weights stored as float32 and as half */
};

static void
pair_make(struct pair *p, clf_attention_desc d, unsigned long long seed)
{
    d.precision = CLF_PRECISION_FLOAT;
    layer_make(&p->f, &d, seed);
    d.precision = CLF_PRECISION_HALF;
    layer_make(&p->h, &d, seed);
}

static void
pair_free(struct pair *p)
{
    layer_free(&p->f);
    layer_free(&p->h);
}

static float *
forward(struct layer *l, clf_mode mode, size_t B, size_t n, const float *x,
        const clf_forward_opts *o)
{
    float *y = tu_malloc(B * n * l->desc.d_model * sizeof *y);
    int rc;

    ck_assert_int_eq(clf_attention_set_mode(l->att, mode), 0);
    rc = clf_attention_forward_ex(l->att, x, B, n, y, o);
    ck_assert_msg(rc == 0, "forward: %s", clf_last_error());
    return y;
}

/* One forward of both layers of the pair against the three references. */
static void
check_pair(struct pair *p, clf_mode mode, size_t B, size_t n, int causal,
           unsigned long long seed)
{
    const size_t count = B * n * p->f.desc.d_model;
    float *x = tu_malloc(count * sizeof *x), *yf, *yh, *r[CLF_WEIGHT_COUNT];
    double *ref = tu_malloc(count * sizeof *ref), *dyf;
    const int full = mode == CLF_MODE_FULL;
    const size_t blk = p->f.desc.causal_block;
    clf_forward_opts o;
    ref_layer rr = rounded_ref(&p->h, r);
    char what[160];
    size_t i;
    int w;

    memset(&o, 0, sizeof o);
    o.causal = causal;
    tu_fill(x, count, seed, -1.0f, 1.0f);
    yf = forward(&p->f, mode, B, n, x, &o);
    yh = forward(&p->h, mode, B, n, x, &o);
    snprintf(what, sizeof what, "%s%s half B=%zu n=%zu N=%zu k=%zu D=%zu",
             full ? "full" : "linformer", causal ? " causal" : "", B, n,
             p->f.desc.max_seq_len, p->f.desc.k, p->f.desc.d_model);
    ref_attention_ex(&rr, full, x, B, n, NULL, causal, blk, ref);
    tu_assert_close(yh, ref, count, TOL_EXACT, what);
    ref_attention_ex(&p->h.ref, full, x, B, n, NULL, causal, blk, ref);
    tu_assert_close(yh, ref, count, TOL_VS_REF, what);
    dyf = tu_malloc(count * sizeof *dyf);
    for (i = 0; i < count; i++)
        dyf[i] = yf[i];
    tu_assert_close(yh, dyf, count, TOL_VS_FLOAT, what);
    /* Storage must really be half: the outputs differ somewhere. */
    ck_assert_msg(tu_max_err(yh, dyf, count) > 0.0, "%s: equals float32", what);
    for (w = 0; w < CLF_WEIGHT_COUNT; w++)
        free(r[w]);
    free(x);
    free(yf);
    free(yh);
    free(ref);
    free(dyf);
}

/* Each mode, with the GEMMs forced to each way (both read the widened
 * weights), at odd sizes: element counts not multiples of the widening
 * kernel's four, d_h = 5. */
START_TEST(half_matches_reference_each_mode)
{
    static const char *const gemms[] = {"clblast", "blocked"};
    clf_context *ctx = tu_context();
    struct pair p;
    size_t g;

    for (g = 0; g < 2; g++) {
        ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", gemms[g]), 0);
        pair_make(&p, desc_of(20, 4, 37, 8, 5, CLF_PRECISION_HALF), 70 + g);
        check_pair(&p, CLF_MODE_LINFORMER, 2, 33, 0, 71);
        check_pair(&p, CLF_MODE_FULL, 2, 33, 0, 72);
        check_pair(&p, CLF_MODE_FULL, 2, 33, 1, 73);
        check_pair(&p, CLF_MODE_LINFORMER, 2, 33, 1, 74);
        pair_free(&p);
    }
    ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", NULL), 0);
}
END_TEST

/* Every sharing mode, share_kv and one_kv_head, where E and F (or W_k and
 * W_v) share a widening slot differently. */
START_TEST(half_matches_reference_each_sharing)
{
    struct pair p;
    int s;

    for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE + 2; s++) {
        clf_attention_desc d = desc_of(32, 2, 24, 6, 0, CLF_PRECISION_HALF);
        if (s <= CLF_SHARE_KEY_VALUE)
            d.sharing = (clf_sharing)s;
        else if (s == CLF_SHARE_KEY_VALUE + 1) {
            d.share_kv = 1;
            d.bias_v = 0;
        } else
            d.one_kv_head = 1;
        pair_make(&p, d, 80 + (unsigned)s);
        check_pair(&p, CLF_MODE_LINFORMER, 3, 24, 0, 81);
        check_pair(&p, CLF_MODE_LINFORMER, 1, 11, 0, 82);
        pair_free(&p);
    }
}
END_TEST

/* Two half layers take turns on one context: each forward widens its own
 * weights, never uses the other's left in the shared slots. */
START_TEST(half_layers_share_the_context_scratch)
{
    struct pair a, b;
    size_t count;
    int t;

    pair_make(&a, desc_of(24, 3, 20, 5, 0, CLF_PRECISION_HALF), 90);
    pair_make(&b, desc_of(24, 3, 20, 5, 0, CLF_PRECISION_HALF), 91);
    for (t = 0; t < 2; t++) {
        check_pair(&a, CLF_MODE_LINFORMER, 2, 20, 0, 92 + (unsigned)t);
        check_pair(&b, CLF_MODE_LINFORMER, 2, 20, 0, 94 + (unsigned)t);
    }
    /* New values in the same weight buffer are widened anew. */
    ck_assert_int_eq(clf_attention_weight_size(a.h.att, CLF_PROJ_E, &count), 0);
    tu_fill(a.h.w[CLF_PROJ_E], count, 96, -0.5f, 0.5f);
    memcpy(a.f.w[CLF_PROJ_E], a.h.w[CLF_PROJ_E], count * sizeof(float));
    ck_assert_int_eq(
        clf_attention_set_weight(a.h.att, CLF_PROJ_E, a.h.w[CLF_PROJ_E], count),
        0);
    ck_assert_int_eq(
        clf_attention_set_weight(a.f.att, CLF_PROJ_E, a.f.w[CLF_PROJ_E], count),
        0);
    check_pair(&a, CLF_MODE_LINFORMER, 2, 20, 0, 97);
    pair_free(&a);
    pair_free(&b);
}
END_TEST

/* The layer's device bytes: each stored weight at 2 bytes, plus the float32
 * scratch of its largest W and E; less than float32's. */
START_TEST(half_takes_less_device_memory)
{
    struct pair p;
    size_t bf, bh, count, saved = 0, wmax = 0, emax = 0, kept = 0;
    float *x, *y;
    int w;

    pair_make(&p, desc_of(64, 4, 256, 32, 0, CLF_PRECISION_HALF), 100);
    x = tu_malloc(2 * 256 * 64 * sizeof *x);
    tu_fill(x, 2 * 256 * 64, 101, -1.0f, 1.0f);
    y = forward(&p.f, CLF_MODE_LINFORMER, 2, 256, x, NULL);
    free(y);
    y = forward(&p.h, CLF_MODE_LINFORMER, 2, 256, x, NULL);
    ck_assert_int_eq(clf_attention_device_bytes(p.f.att, &bf), 0);
    ck_assert_int_eq(clf_attention_device_bytes(p.h.att, &bh), 0);
    for (w = 0; w < CLF_WEIGHT_COUNT; w++) {
        if (clf_attention_weight_size(p.h.att, (clf_weight)w, &count) != 0 ||
            w == CLF_BIAS_Q || w == CLF_BIAS_K || w == CLF_BIAS_V ||
            w == CLF_BIAS_OUT)
            continue;
        saved += 2 * count;
        if (w == CLF_PROJ_E || w == CLF_PROJ_F)
            emax = count > emax ? count : emax;
        else
            wmax = count > wmax ? count : wmax;
    }
    /* The float layer's W matrices may have kept transposes (the blocked
     * GEMM); the half layer's widened copies are rewritten every forward
     * and keep none. */
    for (w = 0; w < CLF_WEIGHT_COUNT; w++) {
        kept += clf__gemm_kept_bytes(p.f.att->ctx, p.f.att->w[w]);
        ck_assert_uint_eq(clf__gemm_kept_bytes(p.h.att->ctx, p.h.att->w[w]), 0);
    }
    ck_assert_uint_eq(bh, bf - kept - saved + 4 * (wmax + emax));
    ck_assert_msg(bh < bf, "half %zu bytes, float %zu", bh, bf);
    free(x);
    free(y);
    pair_free(&p);
}
END_TEST

START_TEST(half_rejects_bad_input)
{
    clf_attention_desc d = desc_of(8, 2, 8, 4, 0, (clf_precision)7);
    clf_attention *att = NULL;
    clf_precision pr;
    size_t count;
    float *w, *x;

    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d),
                     CLF_EBAD_ENUM);
    ck_assert_ptr_null(att);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "precision 7"));
    d.precision = (clf_precision)-1;
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d),
                     CLF_EBAD_ENUM);
    ck_assert_int_eq(clf_precision_parse("double", &pr), CLF_EBAD_ENUM);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "\"double\""));
    ck_assert_int_eq(clf_precision_parse(NULL, &pr), CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf_precision_parse("half", &pr), 0);
    ck_assert_int_eq(pr, CLF_PRECISION_HALF);
    ck_assert_int_eq(clf_precision_parse("fp32", &pr), 0);
    ck_assert_int_eq(pr, CLF_PRECISION_FLOAT);
    ck_assert_str_eq(clf_precision_name(CLF_PRECISION_HALF), "half");
    ck_assert_str_eq(clf_precision_name((clf_precision)9), "?");
    /* A weight beyond binary16's range is refused and left unset. */
    d.precision = CLF_PRECISION_HALF;
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    ck_assert_int_eq(clf_attention_randomize(att, 5), 0);
    ck_assert_int_eq(clf_attention_weight_size(att, CLF_WEIGHT_Q, &count), 0);
    w = calloc(count, sizeof *w);
    w[3] = 70000.0f;
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_Q, w, count),
                     CLF_EINVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "W_q element 3"));
    x = calloc(8 * 8, sizeof *x);
    ck_assert_int_eq(clf_attention_forward(att, x, 1, 8, x), CLF_EWEIGHT_UNSET);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "W_q"));
    free(x);
    w[3] = 65504.0f; /* the largest binary16 value is fine */
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_Q, w, count), 0);
    free(w);
    clf_attention_destroy(att);
}
END_TEST

/* A peer fixture (tests/data) run as float32 and as half. */
static void
check_fixture(const char *name)
{
    tu_check_half_fixture(data_dir, name, TOL_VS_REF, TOL_VS_FLOAT);
}

START_TEST(half_peer_fixtures)
{
    check_fixture("lucidrains_attention");
    check_fixture("lucidrains_attention_sharekv_onekv");
    check_fixture("lucidrains_encoder");
    check_fixture("lucidrains_encoder_reversible");
    check_fixture("lucidrains_lm");
}
END_TEST

START_TEST(half_model_rejects_bad_precision)
{
    char p[1200];
    clf_model *m = NULL;
    clf_model_opts mo;

    memset(&mo, 0, sizeof mo);
    mo.precision = (clf_precision)3;
    snprintf(p, sizeof p, "%s/lucidrains_attention.safetensors", data_dir);
    ck_assert_int_eq(clf_model_load(&m, tu_context(), p, &mo), CLF_EBAD_ENUM);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "precision 3"));
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("half");
    TCase *tc = tcase_create("half");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, half_matches_reference_each_mode);
    tcase_add_test(tc, half_matches_reference_each_sharing);
    tcase_add_test(tc, half_layers_share_the_context_scratch);
    tcase_add_test(tc, half_takes_less_device_memory);
    tcase_add_test(tc, half_rejects_bad_input);
    tcase_add_test(tc, half_peer_fixtures);
    tcase_add_test(tc, half_model_rejects_bad_precision);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    const char *top = getenv("top_srcdir");

    snprintf(data_dir, sizeof data_dir, "%s/tests/data", top ? top : ".");
    /* These tests hold the widening way to the rounded reference's 1e-5;
     * native half arithmetic (test_half_gemm) is not that exact. */
    if (tu_context() != NULL)
        clf_context_force_kernel(tu_context(), "halfgemm", "widen");
    return tu_run(suite(), 1);
}
