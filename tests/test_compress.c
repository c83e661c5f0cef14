/* The windowed compressions (mean and max pooling, the convolution
 * compressor) in every mode: Linformer, full, prefix-safe causal, with
 * padding, each attention way, against the double-precision reference.
 *
 * Tolerance: max |y - y_ref| <= 1e-5 * max |y_ref|, as in test_attention;
 * a half-precision layer within 1e-2 of its float32 twin. */
#include "../bench/reference.h"
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

static const clf_compression windowed[] = {CLF_COMPRESS_MEAN, CLF_COMPRESS_MAX,
                                           CLF_COMPRESS_CONV};

/* N = 37, k = 5: windows of 7 that leave the last 2 positions unread. */
static clf_attention_desc
desc_of(clf_compression comp, clf_sharing sharing, size_t N, size_t k,
        size_t block)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = 24;
    d.heads = 3;
    d.max_seq_len = N;
    d.k = k;
    d.sharing = sharing;
    d.causal_block = block;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    d.compression = comp;
    d.bias_proj = comp == CLF_COMPRESS_CONV;
    return d;
}

/* One forward against the reference; fails the test on a mismatch. */
static void
check(struct layer *l, clf_mode mode, size_t B, size_t n,
      const clf_forward_opts *o, const char *label, unsigned long long seed)
{
    const size_t count = B * n * l->desc.d_model;
    float *x = tu_malloc(count * sizeof *x), *y = tu_malloc(count * sizeof *y);
    double *ref = tu_malloc(count * sizeof *ref);
    unsigned char *mask = NULL;
    char what[256];
    size_t i;
    int rc;

    tu_fill(x, count, seed, -1.0f, 1.0f);
    for (i = 0; i < count; i++)
        y[i] = NAN;
    if (o->lengths != NULL) {
        mask = tu_malloc(B * n);
        tu_lengths_mask(mask, o->lengths, B, n);
    }
    ck_assert_int_eq(clf_attention_set_mode(l->att, mode), 0);
    rc = clf_attention_forward_ex(l->att, x, B, n, y, o);
    ck_assert_msg(rc == 0, "%s: forward: %s", label, clf_last_error());
    ref_attention_ex(&l->ref, mode == CLF_MODE_FULL, x, B, n,
                     mask ? mask : o->key_mask, o->causal, l->desc.causal_block,
                     ref);
    snprintf(what, sizeof what,
             "%s %s%s%s B=%zu n=%zu N=%zu k=%zu b=%zu sharing=%d", label,
             mode == CLF_MODE_FULL ? "full" : "linformer",
             o->causal ? " causal" : "", o->lengths ? " lengths" : "", B, n,
             l->desc.max_seq_len, l->desc.k, l->desc.causal_block,
             (int)l->desc.sharing);
    tu_assert_close(y, ref, count, TOL, what);
    free(x);
    free(y);
    free(ref);
    free(mask);
}

/* Every mode of one layer: Linformer at n = N and n < N, full, padding,
 * and (with a causal block) prefix-safe causal, plain and padded. */
static void
every_mode(struct layer *l, const char *label, unsigned long long seed)
{
    static const unsigned lens[3] = {37, 20, 1};
    const size_t N = l->desc.max_seq_len;
    clf_forward_opts o;

    memset(&o, 0, sizeof o);
    check(l, CLF_MODE_LINFORMER, 2, N, &o, label, seed);
    check(l, CLF_MODE_LINFORMER, 1, N - 9, &o, label, seed + 1);
    check(l, CLF_MODE_FULL, 2, N, &o, label, seed + 2);
    o.lengths = lens;
    check(l, CLF_MODE_LINFORMER, 3, N, &o, label, seed + 3);
    if (l->desc.causal_block == 0)
        return;
    o.lengths = NULL;
    o.causal = 1;
    check(l, CLF_MODE_LINFORMER, 2, N, &o, label, seed + 4);
    check(l, CLF_MODE_LINFORMER, 1, N - 11, &o, label, seed + 5);
    check(l, CLF_MODE_FULL, 2, N, &o, label, seed + 6);
    o.lengths = lens;
    check(l, CLF_MODE_LINFORMER, 3, N, &o, label, seed + 7);
}

START_TEST(windowed_match_reference_in_every_mode)
{
    size_t c;
    int s;

    for (c = 0; c < 3; c++)
        for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE; s++) {
            /* N 37, b 8: 5 blocks, k 10: 2 slots a block, windows of 3 */
            clf_attention_desc d =
                desc_of(windowed[c], (clf_sharing)s, 37, 10, 8);
            struct layer l;
            char label[64];

            snprintf(label, sizeof label, "%s",
                     clf_compression_name(windowed[c]));
            layer_make(&l, &d, 10 + c * 3 + (size_t)s);
            every_mode(&l, label, 100 + c * 10);
            layer_free(&l);
            d = desc_of(windowed[c], (clf_sharing)s, 37, 5, 0);
            layer_make(&l, &d, 20 + c * 3 + (size_t)s);
            every_mode(&l, label, 200 + c * 10);
            layer_free(&l);
        }
}
END_TEST

/* One K/V head, share_kv, a head width that is not D / h, no biases. */
START_TEST(windowed_head_layouts_match_reference)
{
    size_t c;
    int v;

    for (c = 0; c < 3; c++)
        for (v = 0; v < 3; v++) {
            clf_attention_desc d = desc_of(
                windowed[c], v == 1 ? CLF_SHARE_PER_HEAD : CLF_SHARE_HEADWISE,
                37, 10, 8);
            struct layer l;
            char label[64];

            d.one_kv_head = v == 0;
            d.share_kv = v == 2;
            d.bias_v = v != 2;
            d.head_dim = v == 1 ? 5 : 0;
            d.bias_proj = 0;
            snprintf(label, sizeof label, "%s layout %d",
                     clf_compression_name(windowed[c]), v);
            layer_make(&l, &d, 40 + c * 3 + (size_t)v);
            every_mode(&l, label, 300 + c * 10 + (size_t)v);
            layer_free(&l);
        }
}
END_TEST

/* The attention ways all read the windowed slots alike. */
START_TEST(windowed_with_each_attention_way)
{
    size_t c;
    int v;

    for (c = 0; c < 3; c++)
        for (v = CLF_ATTEND_GEMM; v <= CLF_ATTEND_FLASH; v++) {
            clf_attention_desc d =
                desc_of(windowed[c], CLF_SHARE_PER_HEAD, 37, 10, 8);
            struct layer l;
            char label[64];

            d.d_model = 48; /* 3 heads of 16: the fused kernel applies */
            snprintf(label, sizeof label, "%s way %d",
                     clf_compression_name(windowed[c]), v);
            layer_make(&l, &d, 60 + c * 4 + (size_t)v);
            clf__attention_set_attend(l.att, v);
            every_mode(&l, label, 400 + c * 10 + (size_t)v);
            layer_free(&l);
        }
}
END_TEST

/* Prefix-safe causal with a windowed compression sees no future: the
 * look-ahead audit passes bit for bit. */
START_TEST(windowed_causal_has_no_lookahead)
{
    const size_t n = 37;
    size_t c, t, positions[37];
    float *x;

    for (t = 0; t < n; t++)
        positions[t] = t;
    x = tu_malloc(n * 24 * sizeof *x);
    tu_fill(x, n * 24, 77, -1.0f, 1.0f);
    for (c = 0; c < 3; c++) {
        clf_attention_desc d =
            desc_of(windowed[c], CLF_SHARE_HEADWISE, 37, 10, 8);
        clf_lookahead_result r;
        clf_forward_opts o;
        struct layer l;

        memset(&o, 0, sizeof o);
        o.causal = 1;
        layer_make(&l, &d, 80 + c);
        ck_assert_int_eq(clf_attention_check_lookahead(l.att, x, n, &o,
                                                       positions, n, 81, &r),
                         0);
        ck_assert_msg(r.passed,
                      "%s causal: a change after a position "
                      "reached it",
                      clf_compression_name(windowed[c]));
        layer_free(&l);
    }
    free(x);
}
END_TEST

/* A NaN in a window reaches the output; max pooling does not drop it. */
START_TEST(windowed_nan_propagates)
{
    const size_t n = 37, D = 24;
    float x[37 * 24], y[37 * 24];
    size_t c, i;

    tu_fill(x, n * D, 90, -1.0f, 1.0f);
    x[3 * D + 5] = NAN;
    for (c = 0; c < 3; c++) {
        clf_attention_desc d =
            desc_of(windowed[c], CLF_SHARE_HEADWISE, 37, 5, 0);
        struct layer l;
        size_t finite = 0;

        layer_make(&l, &d, 91 + c);
        ck_assert_int_eq(clf_attention_forward(l.att, x, 1, n, y), 0);
        for (i = 0; i < n * D; i++)
            finite += isfinite(y[i]) != 0;
        ck_assert_msg(finite == 0,
                      "%s: %zu of %zu outputs finite with a NaN "
                      "input",
                      clf_compression_name(windowed[c]), finite, n * D);
        layer_free(&l);
    }
}
END_TEST

/* A half-precision convolution layer: its weights widened before use. */
START_TEST(windowed_conv_in_half_precision)
{
    const size_t n = 37, D = 24;
    clf_attention_desc d =
        desc_of(CLF_COMPRESS_CONV, CLF_SHARE_PER_HEAD, 37, 5, 0);
    float x[37 * 24], y[37 * 24], yh[37 * 24];
    double ref[37 * 24];
    clf_attention *h;
    struct layer l;
    size_t count, i;
    int w;

    tu_fill(x, n * D, 95, -1.0f, 1.0f);
    layer_make(&l, &d, 96);
    d.precision = CLF_PRECISION_HALF;
    ck_assert_int_eq(clf_attention_create(&h, tu_context(), &d), 0);
    for (w = 0; w < CLF_WEIGHT_COUNT; w++)
        if (clf_attention_weight_size(h, (clf_weight)w, &count) == 0)
            ck_assert_int_eq(
                clf_attention_set_weight(h, (clf_weight)w, l.w[w], count), 0);
    ck_assert_int_eq(clf_attention_forward(l.att, x, 1, n, y), 0);
    ck_assert_int_eq(clf_attention_forward(h, x, 1, n, yh), 0);
    for (i = 0; i < n * D; i++)
        ref[i] = y[i];
    tu_assert_close(yh, ref, n * D, 1e-2, "conv half against float");
    ck_assert_msg(memcmp(y, yh, sizeof y) != 0, "the half layer read float32");
    clf_attention_destroy(h);
    layer_free(&l);
}
END_TEST

START_TEST(windowed_desc_checks_and_sizes)
{
    clf_attention_desc d =
        desc_of(CLF_COMPRESS_MEAN, CLF_SHARE_PER_HEAD, 37, 5, 0);
    clf_compression comp;
    clf_attention *a;
    size_t count;

    d.bias_proj = 1;
    ASSERT_FAILS(clf_attention_create(&a, tu_context(), &d), CLF_EUNSUPPORTED,
                 "mean pooling has none");
    d.bias_proj = 0;
    d.compressed_bias = 1;
    ASSERT_FAILS(clf_attention_create(&a, tu_context(), &d), CLF_EUNSUPPORTED,
                 "compressed_bias");
    d.compressed_bias = 0;
    d.compression = (clf_compression)9;
    ASSERT_FAILS(clf_attention_create(&a, tu_context(), &d), CLF_EBAD_ENUM,
                 "compression 9");
    d.compression = CLF_COMPRESS_MAX;
    ck_assert_int_eq(clf_attention_create(&a, tu_context(), &d), 0);
    ASSERT_FAILS(clf_attention_weight_size(a, CLF_PROJ_E, &count),
                 CLF_EWEIGHT_UNUSED, "pooling have no weights");
    clf_attention_destroy(a);
    /* conv: per head d_h x d_h*w (w = 37 / 5 = 7), bias d_h */
    d.compression = CLF_COMPRESS_CONV;
    d.bias_proj = 1;
    ck_assert_int_eq(clf_attention_create(&a, tu_context(), &d), 0);
    ck_assert_int_eq(clf_attention_weight_size(a, CLF_PROJ_F, &count), 0);
    ck_assert_uint_eq(count, 3 * 8 * 8 * 7);
    ck_assert_int_eq(clf_attention_weight_size(a, CLF_BIAS_E, &count), 0);
    ck_assert_uint_eq(count, 3 * 8);
    clf_attention_destroy(a);
    ck_assert_int_eq(clf_compression_parse("conv", &comp), 0);
    ck_assert_int_eq(comp, CLF_COMPRESS_CONV);
    ASSERT_FAILS(clf_compression_parse("avg", &comp), CLF_EBAD_ENUM,
                 "linear, mean, max, conv");
    ck_assert_str_eq(clf_compression_name(CLF_COMPRESS_MAX), "max");
}
END_TEST

/* The FLOP model: exact K and V, then w per pooled entry or 2 w d_h + 1
 * per convolved one, for the k slots (causal: the complete blocks'). */
START_TEST(windowed_flops)
{
    double st[CLF_STAGE_COUNT], total, exact, want;
    clf_attention_desc d =
        desc_of(CLF_COMPRESS_MEAN, CLF_SHARE_HEADWISE, 37, 10, 8);

    exact = 2.0 * (2.0 * 2 * 37 * 24 * 24 + 2 * 37 * 24); /* K, V + biases */
    ck_assert_int_eq(
        clf_attention_desc_flops(&d, CLF_MODE_LINFORMER, 2, 37, 0, st, &total),
        0);
    want = exact + 2.0 * 2 * 10 * 24 * 3; /* 2 sides, 10 slots, w 3 */
    ck_assert_double_eq_tol(st[CLF_STAGE_COMPRESSION], want, 1e-6 * want);
    d.compression = CLF_COMPRESS_CONV;
    d.bias_proj = 1;
    ck_assert_int_eq(
        clf_attention_desc_flops(&d, CLF_MODE_LINFORMER, 2, 37, 1, st, &total),
        0);
    /* causal n 37: blocks 0..3 complete before the last query's, 2 slots */
    want = exact + 2.0 * 2 * 8 * 24 * (2.0 * 3 * 8 + 1);
    ck_assert_double_eq_tol(st[CLF_STAGE_COMPRESSION], want, 1e-6 * want);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("compress");
    TCase *tc = tcase_create("compress");

    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, windowed_match_reference_in_every_mode);
    tcase_add_test(tc, windowed_head_layouts_match_reference);
    tcase_add_test(tc, windowed_with_each_attention_way);
    tcase_add_test(tc, windowed_causal_has_no_lookahead);
    tcase_add_test(tc, windowed_nan_propagates);
    tcase_add_test(tc, windowed_conv_in_half_precision);
    tcase_add_test(tc, windowed_desc_checks_and_sizes);
    tcase_add_test(tc, windowed_flops);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
