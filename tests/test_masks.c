/* Padding masks, variable-length batches and prefix-safe causal mode.
 *
 * Tolerance for comparisons with the double-precision reference:
 * max |y - y_ref| <= 1e-5 * max |y_ref|, as in test_attention.  The
 * look-ahead tests compare bit for bit. */
#include "../bench/reference.h"
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

static clf_attention_desc
desc_of(clf_sharing sharing, size_t N, size_t k, size_t block)
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
    return d;
}

/* One forward with options against the reference; returns nothing, fails
 * the test on a mismatch. */
static void
check(struct layer *l, clf_mode mode, size_t B, size_t n,
      const clf_forward_opts *o, unsigned long long seed)
{
    size_t count = B * n * l->desc.d_model, i;
    float *x = tu_malloc(count * sizeof *x), *y = tu_malloc(count * sizeof *y);
    double *ref = tu_malloc(count * sizeof *ref);
    unsigned char *mask = NULL;
    char what[200];
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
    ck_assert_msg(rc == 0, "forward: %s", clf_last_error());
    ref_attention_ex(&l->ref, mode == CLF_MODE_FULL, x, B, n,
                     mask ? mask : o->key_mask, o->causal, l->desc.causal_block,
                     ref);
    snprintf(what, sizeof what,
             "%s%s B=%zu n=%zu N=%zu k=%zu b=%zu sharing=%d mask=%s",
             mode == CLF_MODE_FULL ? "full" : "linformer",
             o->causal ? " causal" : "", B, n, l->desc.max_seq_len, l->desc.k,
             l->desc.causal_block, (int)l->desc.sharing,
             o->lengths    ? "lengths"
             : o->key_mask ? "bytes"
                           : "none");
    tu_assert_close(y, ref, count, TOL, what);
    free(x);
    free(y);
    free(ref);
    free(mask);
}

/* For each sequence of a right-padded batch: the batch's output rows equal
 * the sequence alone at its own length, and padding rows are zeros. */
static void
padded_equals_alone(struct layer *l, clf_mode mode, size_t B, size_t n,
                    const unsigned *lens, int causal, unsigned long long seed)
{
    const size_t D = l->desc.d_model, count = B * n * D;
    float *x = tu_malloc(count * sizeof *x), *y = tu_malloc(count * sizeof *y);
    float *ya = tu_malloc(n * D * sizeof *ya);
    clf_forward_opts o;
    size_t b, i;
    double scale = 1e-30, err = 0.0;

    memset(&o, 0, sizeof o);
    o.lengths = lens;
    o.causal = causal;
    tu_fill(x, count, seed, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_set_mode(l->att, mode), 0);
    ck_assert_msg(clf_attention_forward_ex(l->att, x, B, n, y, &o) == 0, "%s",
                  clf_last_error());
    o.lengths = NULL;
    for (b = 0; b < B; b++) {
        size_t len = lens[b];
        ck_assert_msg(clf_attention_forward_ex(l->att, x + b * n * D, 1, len,
                                               ya, &o) == 0,
                      "%s", clf_last_error());
        for (i = 0; i < len * D; i++) {
            double d = fabs((double)y[b * n * D + i] - ya[i]);
            err = d > err || isnan(d) ? (isnan(d) ? INFINITY : d) : err;
            if (fabs(ya[i]) > scale)
                scale = fabs(ya[i]);
        }
        for (i = len * D; i < n * D; i++)
            ck_assert_msg(y[b * n * D + i] == 0.0f,
                          "padding output row %zu of sequence %zu is %g", i / D,
                          b, y[b * n * D + i]);
    }
    ck_assert_msg(err <= TOL * scale,
                  "padded vs alone (%s%s): error %.3g, scale %.3g",
                  mode == CLF_MODE_FULL ? "full" : "linformer",
                  causal ? " causal" : "", err, scale);
    free(x);
    free(y);
    free(ya);
}

START_TEST(padding_right_padded_batch_equals_each_alone)
{
    static const unsigned mixes[][4] = {
        {30, 1, 17, 29}, {5, 30, 30, 2}, {12, 13, 1, 1}, {30, 30, 30, 30}};
    int s, m;

    for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE; s++) {
        clf_attention_desc d = desc_of((clf_sharing)s, 30, 6, 5);
        struct layer l;
        layer_make(&l, &d, 10 + (unsigned long long)s);
        for (m = 0; m < 4; m++) {
            padded_equals_alone(&l, CLF_MODE_LINFORMER, 4, 30, mixes[m], 0,
                                100 + (unsigned long long)m);
            padded_equals_alone(&l, CLF_MODE_FULL, 4, 30, mixes[m], 0,
                                200 + (unsigned long long)m);
            padded_equals_alone(&l, CLF_MODE_LINFORMER, 4, 30, mixes[m], 1,
                                300 + (unsigned long long)m);
            padded_equals_alone(&l, CLF_MODE_FULL, 4, 30, mixes[m], 1,
                                400 + (unsigned long long)m);
        }
        layer_free(&l);
    }
}
END_TEST

START_TEST(padding_lengths_match_reference)
{
    const unsigned lens[3] = {9, 30, 1}, lens12[3] = {9, 12, 1};
    clf_forward_opts o;
    int s;

    memset(&o, 0, sizeof o);
    o.lengths = lens;
    for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE; s++) {
        clf_attention_desc d = desc_of((clf_sharing)s, 30, 6, 0);
        struct layer l;
        layer_make(&l, &d, 20 + (unsigned long long)s);
        check(&l, CLF_MODE_LINFORMER, 3, 30, &o, 21);
        o.lengths = lens12;
        check(&l, CLF_MODE_LINFORMER, 3, 12, &o, 22);
        o.lengths = lens;
        check(&l, CLF_MODE_FULL, 3, 30, &o, 23);
        layer_free(&l);
    }
}
END_TEST

START_TEST(padding_arbitrary_mask_matches_reference)
{
    const size_t B = 3, n = 23;
    unsigned char *mask = tu_malloc(B * n);
    float r[3 * 23];
    clf_forward_opts o;
    size_t i;
    int s, one;

    tu_fill(r, B * n, 31, 0.0f, 1.0f);
    for (i = 0; i < B * n; i++)
        mask[i] = r[i] < 0.6f ? 1 : 0;
    mask[5] = 2; /* any nonzero byte means "real" */
    memset(&o, 0, sizeof o);
    o.key_mask = mask;
    for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE; s++)
        for (one = 0; one < 2; one++) {
            clf_attention_desc d = desc_of((clf_sharing)s, 25, 5, 0);
            struct layer l;
            d.one_kv_head = one;
            layer_make(&l, &d, 30 + (unsigned long long)(s * 2 + one));
            check(&l, CLF_MODE_LINFORMER, B, n, &o, 32);
            check(&l, CLF_MODE_FULL, B, n, &o, 33);
            layer_free(&l);
        }
    /* share_kv, and a layer long enough that compress-first runs. */
    {
        clf_attention_desc d = desc_of(CLF_SHARE_HEADWISE, 25, 5, 0);
        struct layer l;
        d.share_kv = 1;
        d.bias_v = 0;
        layer_make(&l, &d, 34);
        ck_assert_int_eq(clf__attention_compress_first(l.att, B, n), 1);
        check(&l, CLF_MODE_LINFORMER, B, n, &o, 35);
        layer_free(&l);
    }
    {
        clf_attention_desc d = desc_of(CLF_SHARE_PER_HEAD, 25, 5, 0);
        struct layer l;
        d.d_model = 8;
        d.heads = 4; /* h*k > D: project-first */
        layer_make(&l, &d, 36);
        ck_assert_int_eq(clf__attention_compress_first(l.att, B, n), 0);
        check(&l, CLF_MODE_LINFORMER, B, n, &o, 37);
        layer_free(&l);
    }
    free(mask);
}
END_TEST

/* Masks with Linformer attention over the slots run each way (the fused
 * kernel needs d_h a multiple of 16): padded batches equal each sequence
 * alone, lengths and an arbitrary mask match the reference, a fully
 * masked sequence gives zeros. */
START_TEST(padding_with_each_attention_way)
{
    static const unsigned mixes[][4] = {{30, 1, 17, 29}, {5, 30, 30, 2}};
    const unsigned lens[3] = {9, 30, 1};
    unsigned char mask[3 * 30];
    float r[3 * 30];
    clf_forward_opts o;
    size_t i;
    int s, v, m;

    tu_fill(r, 3 * 30, 51, 0.0f, 1.0f);
    for (i = 0; i < 3 * 30; i++)
        mask[i] = r[i] < 0.6f ? 1 : 0;
    memset(mask + 30, 0, 30); /* the second sequence all padding */
    for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE; s++)
        for (v = CLF_ATTEND_GEMM; v <= CLF_ATTEND_FLASH; v++) {
            clf_attention_desc d = desc_of((clf_sharing)s, 30, 6, 0);
            struct layer l;
            d.d_model = 48; /* 3 heads of 16 */
            layer_make(&l, &d, 50 + (unsigned long long)s);
            clf__attention_set_attend(l.att, v);
            for (m = 0; m < 2; m++)
                padded_equals_alone(&l, CLF_MODE_LINFORMER, 4, 30, mixes[m], 0,
                                    500 + (unsigned long long)m);
            ck_assert_int_eq(clf__attention_last_fused(l.att),
                             v == CLF_ATTEND_FUSED);
            memset(&o, 0, sizeof o);
            o.lengths = lens;
            check(&l, CLF_MODE_LINFORMER, 3, 30, &o, 52);
            o.lengths = NULL;
            o.key_mask = mask;
            check(&l, CLF_MODE_LINFORMER, 3, 30, &o, 53);
            ck_assert_int_eq(clf__attention_last_fused(l.att),
                             v == CLF_ATTEND_FUSED);
            layer_free(&l);
        }
}
END_TEST

/* A sequence with every position masked gives zeros, never NaN. */
START_TEST(padding_fully_masked_sequence_is_zero)
{
    const size_t B = 2, n = 10, D = 24;
    float x[2 * 10 * 24];
    clf_attention_desc d = desc_of(CLF_SHARE_HEADWISE, 10, 4, 5);
    struct layer l;

    layer_make(&l, &d, 40);
    tu_fill(x, B * n * D, 41, -1.0f, 1.0f);
    tu_check_padded_sequence_zero(&l, x, n);
    layer_free(&l);
}
END_TEST

START_TEST(causal_matches_reference)
{
    /* (N, k, b, n): n not a multiple of b, partial last blocks, b = 1,
     * b = N. */
    static const size_t cases[][4] = {
        {20, 8, 5, 20},  {20, 8, 5, 17},  {21, 12, 4, 21}, {21, 12, 4, 9},
        {12, 12, 1, 12}, {16, 3, 16, 16}, {16, 8, 4, 1},   {16, 8, 4, 4}};
    size_t c;
    int s;

    for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE; s++)
        for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            clf_attention_desc d =
                desc_of((clf_sharing)s, cases[c][0], cases[c][1], cases[c][2]);
            clf_forward_opts o;
            struct layer l;
            memset(&o, 0, sizeof o);
            o.causal = 1;
            layer_make(&l, &d, 50 + c);
            check(&l, CLF_MODE_LINFORMER, 2, cases[c][3], &o, 51 + c);
            check(&l, CLF_MODE_FULL, 2, cases[c][3], &o, 52 + c);
            layer_free(&l);
        }
}
END_TEST

START_TEST(causal_variants_match_reference)
{
    const unsigned lens[2] = {13, 6};
    clf_forward_opts o;
    clf_attention_desc d;
    struct layer l;

    memset(&o, 0, sizeof o);
    o.causal = 1;
    d = desc_of(CLF_SHARE_HEADWISE, 20, 8, 5);
    d.one_kv_head = 1;
    layer_make(&l, &d, 60);
    check(&l, CLF_MODE_LINFORMER, 2, 18, &o, 61);
    layer_free(&l);
    d = desc_of(CLF_SHARE_PER_HEAD, 20, 8, 5);
    d.one_kv_head = 1;
    layer_make(&l, &d, 62);
    check(&l, CLF_MODE_LINFORMER, 2, 18, &o, 63);
    layer_free(&l);
    d = desc_of(CLF_SHARE_HEADWISE, 20, 8, 5);
    d.share_kv = 1;
    d.bias_v = 0;
    layer_make(&l, &d, 64);
    check(&l, CLF_MODE_LINFORMER, 2, 18, &o, 65);
    /* causal with right padding */
    o.lengths = lens;
    check(&l, CLF_MODE_LINFORMER, 2, 18, &o, 66);
    check(&l, CLF_MODE_FULL, 2, 18, &o, 67);
    layer_free(&l);
}
END_TEST

/* The GEMM path with each softmax kernel forced, the masks folded into it
 * and the causal window through the GEMMs and clf_causal_softmax: heads of 19
 * columns (a partial 16-column slice), blocks of 20, n not a multiple of
 * the block (a partial last block), padding by lengths and by bytes, in
 * Linformer, causal Linformer, full and causal full mode. */
START_TEST(masks_with_each_softmax_on_gemm_path)
{
    static const char *const names[] = {"scalar", "vector", "group"};
    const unsigned lens[2] = {45, 23};
    unsigned char bytes[2 * 45];
    clf_forward_opts o;
    clf_attention_desc d = desc_of(CLF_SHARE_HEADWISE, 45, 6, 20);
    struct layer l;
    size_t i;
    int v, c;

    for (i = 0; i < sizeof bytes; i++)
        bytes[i] = i % 7 != 3;
    d.d_model = 57; /* 3 heads of 19 */
    layer_make(&l, &d, 70);
    clf__attention_set_attend(l.att, CLF_ATTEND_GEMM);
    for (v = 0; v < 3; v++) {
        ck_assert_int_eq(
            clf_context_force_kernel(l.att->ctx, "softmax", names[v]), 0);
        for (c = 0; c < 2; c++) {
            memset(&o, 0, sizeof o);
            o.causal = c;
            o.lengths = lens;
            ck_assert_int_eq(clf_context_record_launches(l.att->ctx, 1), 0);
            check(&l, CLF_MODE_LINFORMER, 2, 45, &o, 71);
            ck_assert_int_eq(clf_context_record_launches(l.att->ctx, 0), 0);
            /* the causal window ran through the GEMMs and the causal
             * softmax of the softmax in force (the group one for "group";
             * CLINFORMER_KERNELS, where set, overrides the forced name) */
            ck_assert_int_eq(
                tu_launched(l.att->ctx, l.att->ctx->last[CLF_KIND_SOFTMAX] ==
                                                CLF_SOFTMAX_GROUP
                                            ? "clf_causal_softmax_wg"
                                            : "clf_causal_softmax"),
                c);
            check(&l, CLF_MODE_FULL, 2, 45, &o, 72);
            o.lengths = NULL;
            o.key_mask = bytes;
            check(&l, CLF_MODE_LINFORMER, 2, 37, &o, 73);
            check(&l, CLF_MODE_FULL, 2, 37, &o, 74);
        }
        ck_assert_int_eq(clf__attention_last_fused(l.att), 0);
    }
    ck_assert_int_eq(clf_context_force_kernel(l.att->ctx, "softmax", NULL), 0);
    layer_free(&l);
}
END_TEST

/* Changing every input after t must leave outputs up to t unchanged, bit
 * for bit, for many t, several b and n not multiples of b. */
START_TEST(causal_lookahead_is_bit_exact)
{
    static const size_t cases[][4] = {
        {40, 8, 5, 37}, {40, 10, 4, 40}, {33, 9, 11, 29}, {30, 30, 1, 30}};
    size_t c, t;

    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        clf_attention_desc d =
            desc_of(c % 2 ? CLF_SHARE_PER_HEAD : CLF_SHARE_HEADWISE,
                    cases[c][0], cases[c][1], cases[c][2]);
        const size_t n = cases[c][3];
        size_t positions[64], np = 0;
        float *x = tu_malloc(n * d.d_model * sizeof *x);
        clf_lookahead_result r;
        clf_forward_opts o;
        struct layer l;
        int mode;

        for (t = 0; t < n; t++)
            positions[np++] = t;
        tu_fill(x, n * d.d_model, 70 + c, -1.0f, 1.0f);
        memset(&o, 0, sizeof o);
        o.causal = 1;
        layer_make(&l, &d, 71 + c);
        for (mode = 0; mode < 2; mode++) {
            ck_assert_int_eq(clf_attention_set_mode(l.att, (clf_mode)mode), 0);
            ck_assert_int_eq(clf_attention_check_lookahead(
                                 l.att, x, n, &o, positions, np, 72 + c, &r),
                             0);
            ck_assert_msg(r.passed,
                          "%s causal N=%zu b=%zu n=%zu: perturbing after "
                          "t=%zu moved position %zu by %g",
                          mode ? "full" : "linformer", cases[c][0], cases[c][2],
                          n, r.t, r.moved, r.change);
            ck_assert_uint_eq(r.checked, np);
        }
        layer_free(&l);
        free(x);
    }
}
END_TEST

/* linformer-pytorch's causal=True mask (slot_mask): in Linformer mode the
 * query at t sees slots 0..t, on every sharing, with n < N, padding and a
 * batch, whichever attention way is asked for (the GEMM path runs it);
 * in full mode the causal mask.  The look-ahead audit fails the Linformer
 * one (each slot mixes every position) and passes the full one; a causal
 * block or a prefix-safe forward on such a layer is refused. */
START_TEST(slot_mask_matches_reference)
{
    static const size_t cases[][3] = {
        {20, 8, 20}, {20, 8, 13}, {9, 9, 9}, {16, 1, 16}, {16, 5, 3}};
    const unsigned lens[3] = {13, 4, 1};
    size_t c, positions[3] = {0, 7, 12};
    clf_lookahead_result r;
    clf_forward_opts o;
    float x[13 * 24];
    int s, v, rc;

    for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE; s++)
        for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            clf_attention_desc d =
                desc_of((clf_sharing)s, cases[c][0], cases[c][1], 0);
            struct layer l;
            d.slot_mask = 1;
            layer_make(&l, &d, 90 + c);
            memset(&o, 0, sizeof o);
            for (v = CLF_ATTEND_GEMM; v <= CLF_ATTEND_FLASHWG; v++) {
                clf__attention_set_attend(l.att, v);
                check(&l, CLF_MODE_LINFORMER, 2, cases[c][2], &o, 91 + c);
                ck_assert(!clf__attention_last_fused(l.att) &&
                          !clf__attention_last_flash(l.att) &&
                          !clf__attention_last_flash_wg(l.att));
            }
            clf__attention_set_attend(l.att, CLF_ATTEND_UNDECIDED);
            check(&l, CLF_MODE_FULL, 2, cases[c][2], &o, 92 + c);
            if (cases[c][2] == 13) {
                o.lengths = lens;
                check(&l, CLF_MODE_LINFORMER, 3, 13, &o, 93 + c);
            }
            layer_free(&l);
        }
    {
        clf_attention_desc d = desc_of(CLF_SHARE_HEADWISE, 20, 4, 0);
        struct layer l;
        clf_attention *att = (clf_attention *)&d;
        d.slot_mask = 1;
        layer_make(&l, &d, 94);
        tu_fill(x, 13 * 24, 95, -1.0f, 1.0f);
        ck_assert_int_eq(clf_attention_check_lookahead(l.att, x, 13, NULL,
                                                       positions, 3, 96, &r),
                         0);
        ck_assert_msg(!r.passed, "the slot mask passed the look-ahead audit");
        ck_assert_uint_eq(r.t, 0);
        ck_assert_int_eq(clf_attention_set_mode(l.att, CLF_MODE_FULL), 0);
        ck_assert_int_eq(clf_attention_check_lookahead(l.att, x, 13, NULL,
                                                       positions, 3, 96, &r),
                         0);
        ck_assert_msg(r.passed, "full mode's slot mask (causal) failed");
        ck_assert_int_eq(clf_attention_set_mode(l.att, CLF_MODE_LINFORMER), 0);
        memset(&o, 0, sizeof o);
        o.causal = 1;
        rc = clf_attention_forward_ex(l.att, x, 1, 13, x, &o);
        ck_assert_int_eq(rc, CLF_EUNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(clf_last_error(), "slot_mask"));
        layer_free(&l);
        d.causal_block = 5;
        ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d),
                         CLF_EINVALID_ARGUMENT);
        ck_assert_ptr_null(att);
        ck_assert_ptr_nonnull(strstr(clf_last_error(), "causal_block"));
    }
}
END_TEST

/* The same audit must catch plain Linformer (and plain full attention):
 * the test can fail. */
START_TEST(lookahead_fails_without_causal)
{
    clf_attention_desc d = desc_of(CLF_SHARE_HEADWISE, 20, 4, 5);
    const size_t n = 20;
    size_t positions[3] = {0, 7, 18};
    float *x = tu_malloc(n * d.d_model * sizeof *x);
    clf_lookahead_result r;
    struct layer l;
    int mode;

    tu_fill(x, n * d.d_model, 80, -1.0f, 1.0f);
    layer_make(&l, &d, 81);
    for (mode = 0; mode < 2; mode++) {
        ck_assert_int_eq(clf_attention_set_mode(l.att, (clf_mode)mode), 0);
        ck_assert_int_eq(clf_attention_check_lookahead(l.att, x, n, NULL,
                                                       positions, 3, 82, &r),
                         0);
        ck_assert_msg(!r.passed, "non-causal %s passed the look-ahead audit",
                      mode ? "full" : "linformer");
        ck_assert_uint_eq(r.t, 0);
        ck_assert_uint_eq(r.moved, 0);
        ck_assert(r.change > 0.0);
    }
    layer_free(&l);
    free(x);
}
END_TEST

/* A forward whose every output adds 0 x the last position's input (user:
 * nonzero), as the causal GEMM path and streaming kernels once weighed
 * the keys after a row by p = 0: a random, or any finite, value there
 * adds +-0 and leaves the earlier outputs' bits alone, so only the
 * audit's NaN and inf perturbations can see it (0 x NaN = 0 x inf = NaN).
 * Rows of 4 floats. */
static int
zero_weighted_forward(void *user, const float *x, size_t n, float *y,
                      const clf_forward_opts *opts)
{
    volatile float weight = 0.0f; /* not folded away */
    const int leak = *(const int *)user;
    size_t t, c;

    (void)opts;
    for (t = 0; t < n; t++)
        for (c = 0; c < 4; c++)
            y[t * 4 + c] = 2.0f * x[t * 4 + c] +
                           (leak ? weight * x[(n - 1) * 4 + c] : 0.0f);
    return 0;
}

/* The audit catches a future value weighed by 0 (NaN and inf after t),
 * and passes the same forward without that term. */
START_TEST(lookahead_catches_zero_weighted_future)
{
    const size_t n = 9, positions[3] = {0, 4, 7};
    float x[9 * 4];
    clf_lookahead_result r;
    int leak;

    tu_fill(x, n * 4, 83, 0.5f, 1.0f); /* no zeros: 2x + 0 is 2x */
    for (leak = 0; leak < 2; leak++) {
        ck_assert_int_eq(clf__lookahead_run(zero_weighted_forward, &leak, 4, x,
                                            n, NULL, positions, 3, 84, &r),
                         0);
        ck_assert_int_eq(r.passed, !leak);
        ck_assert_uint_eq(r.checked, leak ? 1 : 3);
        if (!leak)
            continue;
        ck_assert_uint_eq(r.t, 0);
        ck_assert_uint_eq(r.moved, 0);
        ck_assert(isnan(r.change));
    }
}
END_TEST

START_TEST(masks_reject_bad_input)
{
    clf_attention_desc d = desc_of(CLF_SHARE_HEADWISE, 20, 8, 5);
    struct layer l;
    float x[2 * 20 * 24] = {0}, y[2 * 20 * 24];
    unsigned lens[2] = {20, 0};
    unsigned char mask[40];
    clf_forward_opts o;
    clf_attention *att = NULL;
    size_t pos = 20;
    clf_lookahead_result r;
    int rc;

    layer_make(&l, &d, 90);
    memset(&o, 0, sizeof o);
    memset(mask, 1, sizeof mask);
    o.lengths = lens;
    rc = clf_attention_forward_ex(l.att, x, 2, 20, y, &o);
    ck_assert_int_eq(rc, CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "lengths[1] = 0"));
    lens[1] = 21;
    rc = clf_attention_forward_ex(l.att, x, 2, 20, y, &o);
    ck_assert_int_eq(rc, CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "lengths[1] = 21"));
    lens[1] = 12;
    rc = clf_attention_forward_ex(l.att, x, 2, 10, y, &o); /* 20 > n = 10 */
    ck_assert_int_eq(rc, CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "lengths[0] = 20"));
    o.key_mask = mask;
    rc = clf_attention_forward_ex(l.att, x, 2, 20, y, &o);
    ck_assert_int_eq(rc, CLF_EINVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "not both"));
    rc = clf_attention_check_lookahead(l.att, x, 20, NULL, &pos, 1, 1, &r);
    ck_assert_int_eq(rc, CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "positions[0] = 20"));
    layer_free(&l);

    /* causal Linformer with causal_block 0; b > N; k not a multiple. */
    d = desc_of(CLF_SHARE_HEADWISE, 20, 8, 0);
    layer_make(&l, &d, 91);
    memset(&o, 0, sizeof o);
    o.causal = 1;
    rc = clf_attention_forward_ex(l.att, x, 1, 20, y, &o);
    ck_assert_int_eq(rc, CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "causal_block is 0"));
    ck_assert_int_eq(clf_attention_set_mode(l.att, CLF_MODE_FULL), 0);
    ck_assert_int_eq(clf_attention_forward_ex(l.att, x, 1, 20, y, &o), 0);
    layer_free(&l);
    d = desc_of(CLF_SHARE_HEADWISE, 20, 8, 21);
    rc = clf_attention_create(&att, tu_context(), &d);
    ck_assert_int_eq(rc, CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "causal_block 21"));
    d = desc_of(CLF_SHARE_HEADWISE, 20, 8, 6); /* 4 blocks; 8 % 4 == 0 */
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    clf_attention_destroy(att);
    d = desc_of(CLF_SHARE_HEADWISE, 20, 6, 5); /* 4 blocks; 6 % 4 != 0 */
    rc = clf_attention_create(&att, tu_context(), &d);
    ck_assert_int_eq(rc, CLF_ESHAPE_MISMATCH);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "multiple of the 4"));
    ck_assert_ptr_null(att);
}
END_TEST

/* The cl_mem path honours masks and causality too. */
START_TEST(masks_on_cl_mem_path)
{
    clf_context *ctx = tu_context();
    clf_attention_desc d = desc_of(CLF_SHARE_HEADWISE, 20, 8, 5);
    const unsigned lens[2] = {20, 7};
    const size_t B = 2, n = 20, count = B * n * 24;
    float *x = tu_malloc(count * sizeof *x), *y = tu_malloc(count * sizeof *y);
    float *yh = tu_malloc(count * sizeof *yh);
    clf_forward_opts o;
    struct layer l;
    cl_mem xb, yb;
    cl_int err;

    layer_make(&l, &d, 95);
    tu_fill(x, count, 96, -1.0f, 1.0f);
    memset(&o, 0, sizeof o);
    o.lengths = lens;
    o.causal = 1;
    ck_assert_int_eq(clf_attention_forward_ex(l.att, x, B, n, yh, &o), 0);
    xb = clCreateBuffer(clf_context_cl_context(ctx),
                        CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                        count * sizeof(float), x, &err);
    yb = clCreateBuffer(clf_context_cl_context(ctx), CL_MEM_READ_WRITE,
                        count * sizeof(float), NULL, &err);
    ck_assert_int_eq(clf_attention_forward_cl_ex(l.att, xb, 0, yb, 0, B, n, &o),
                     0);
    ck_assert_int_eq(clEnqueueReadBuffer(clf_context_cl_queue(ctx), yb, CL_TRUE,
                                         0, count * sizeof(float), y, 0, NULL,
                                         NULL),
                     CL_SUCCESS);
    ck_assert_mem_eq(y, yh, count * sizeof *y);
    clReleaseMemObject(xb);
    clReleaseMemObject(yb);
    layer_free(&l);
    free(x);
    free(y);
    free(yh);
}
END_TEST

/* Scores made in chunks of query rows (as full mode does at large n) give
 * the same results as one pass: force tiny chunks. */
START_TEST(chunked_scores_match_reference)
{
    const unsigned lens[3] = {17, 5, 20};
    unsigned char mask[3 * 20];
    float r[3 * 20];
    clf_forward_opts o;
    clf_attention_desc d = desc_of(CLF_SHARE_PER_HEAD, 20, 8, 5);
    struct layer l;
    size_t i;

    tu_fill(r, 60, 130, 0.0f, 1.0f);
    for (i = 0; i < 60; i++)
        mask[i] = r[i] < 0.7f;
    layer_make(&l, &d, 131);
    clf__attention_set_score_limit(l.att, 3 * 20 * sizeof(float) * 3);
    memset(&o, 0, sizeof o);
    check(&l, CLF_MODE_FULL, 3, 20, &o, 132);
    check(&l, CLF_MODE_LINFORMER, 3, 20, &o, 133);
    o.causal = 1;
    check(&l, CLF_MODE_FULL, 3, 19, &o, 134);
    o.lengths = lens;
    check(&l, CLF_MODE_FULL, 3, 20, &o, 135);
    o.causal = 0;
    check(&l, CLF_MODE_LINFORMER, 3, 20, &o, 136);
    o.lengths = NULL;
    o.key_mask = mask;
    check(&l, CLF_MODE_FULL, 3, 20, &o, 137);
    check(&l, CLF_MODE_LINFORMER, 3, 20, &o, 138);
    clf__attention_set_score_limit(l.att, 1); /* one row at a time */
    check(&l, CLF_MODE_FULL, 3, 20, &o, 139);
    layer_free(&l);
}
END_TEST

/* Score workspaces sized from the passes the forward makes: where one
 * sequence's scores fit the limit but the batch's do not, the forward runs
 * as many whole sequences a pass as fit (the last pass shorter), and the
 * workspace holds one pass, never less.  Each GEMM way, on the GEMM path
 * (the fused and streaming kernels make no such scores), full mode with
 * masks and the causal triangle, and Linformer. */
START_TEST(score_passes_fit_their_workspace)
{
    static const char *ways[] = {"attend=gemm,gemm=blocked",
                                 "attend=gemm,gemm=tiled",
                                 "attend=gemm,gemm=clblast"};
    /* Sequences of full-mode (20 x 20) scores per pass: 1, 1.5, 2, 4. */
    static const double per_pass[] = {1.0, 1.5, 2.0, 4.0};
    const unsigned lens[5] = {20, 7, 13, 1, 20};
    const size_t B = 5, n = 20, per_seq = 3 * 20 * 20 * sizeof(float);
    clf_attention_desc d = desc_of(CLF_SHARE_PER_HEAD, 20, 8, 5);
    char *was = getenv("CLINFORMER_KERNELS");
    clf_forward_opts o;
    struct layer l;
    size_t w, i, limit;

    was = was != NULL ? strdup(was) : NULL;
    for (w = 0; w < 3; w++) {
        setenv("CLINFORMER_KERNELS", ways[w], 1);
        layer_make(&l, &d, 141 + w);
        for (i = 0; i < 4; i++) {
            limit = (size_t)(per_pass[i] * (double)per_seq);
            clf__attention_set_score_limit(l.att, limit);
            memset(&o, 0, sizeof o);
            check(&l, CLF_MODE_FULL, B, n, &o, 150 + i);
            ck_assert_uint_le(l.att->ws[WS_S].cap * sizeof(float), limit);
            ck_assert_uint_ge(l.att->ws[WS_S].cap * sizeof(float),
                              (size_t)per_pass[i] * per_seq);
            o.causal = 1;
            o.lengths = lens;
            check(&l, CLF_MODE_FULL, B, n, &o, 160 + i);
            o.causal = 0;
            check(&l, CLF_MODE_LINFORMER, B, n, &o, 170 + i);
            /* Linformer's 20 x 8 scores a sequence: 2.5 per 20 x 20. */
            clf__attention_set_score_limit(l.att, limit * 2 / 5);
            check(&l, CLF_MODE_LINFORMER, B, n, &o, 180 + i);
        }
        layer_free(&l);
    }
    if (was != NULL)
        setenv("CLINFORMER_KERNELS", was, 1);
    else
        unsetenv("CLINFORMER_KERNELS");
    free(was);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("masks");
    TCase *tc = tcase_create("masks");

    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, padding_right_padded_batch_equals_each_alone);
    tcase_add_test(tc, padding_lengths_match_reference);
    tcase_add_test(tc, padding_arbitrary_mask_matches_reference);
    tcase_add_test(tc, padding_fully_masked_sequence_is_zero);
    tcase_add_test(tc, padding_with_each_attention_way);
    tcase_add_test(tc, causal_matches_reference);
    tcase_add_test(tc, causal_variants_match_reference);
    tcase_add_test(tc, masks_with_each_softmax_on_gemm_path);
    tcase_add_test(tc, causal_lookahead_is_bit_exact);
    tcase_add_test(tc, lookahead_fails_without_causal);
    tcase_add_test(tc, slot_mask_matches_reference);
    tcase_add_test(tc, lookahead_catches_zero_weighted_future);
    tcase_add_test(tc, masks_reject_bad_input);
    tcase_add_test(tc, masks_on_cl_mem_path);
    tcase_add_test(tc, chunked_scores_match_reference);
    tcase_add_test(tc, score_passes_fit_their_workspace);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
