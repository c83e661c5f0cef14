/* Streams (clf_stream_*): positions appended 1, 3 and b + 1 at a time to
 * a causal layer, encoder and LM give, at every position, what the
 * whole-sequence causal forward gives there (max |y - y_whole| <= 1e-6 *
 * max |y_whole|), and the layer's also within 1e-5 of the double-precision
 * reference (tests/reference.c), with padding and two sequences, in causal
 * Linformer and causal full mode.  The look-ahead audit on a stream, the
 * state's size, and bad use (clear errors, state unchanged). */
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_WHOLE 1e-6
#define TOL_REF 1e-5
#define B 2
#define N 12
#define BLK 3

static const size_t chunks[] = {1, 3, BLK + 1};

static clf_attention_desc
desc_base(void)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = 16;
    d.heads = 2;
    d.max_seq_len = N;
    d.k = 4; /* 4 blocks of 3, one slot each */
    d.causal_block = BLK;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    return d;
}

/* Sequence 1 is padding from position 8 on, and at position 2. */
static void
mask_make(unsigned char *mk)
{
    size_t t;

    for (t = 0; t < N; t++) {
        mk[t] = 1;
        mk[N + t] = t < 8 && t != 2;
    }
}

/* Feeds x (B x N rows of w_in) to s in chunks of `chunk`, collecting the
 * B x N output rows of w_out in y. */
static void
feed(clf_stream *s, const float *x, const long long *ids, size_t w_in,
     size_t w_out, size_t chunk, const unsigned char *mask, float *y,
     const char *what)
{
    float *xc = tu_malloc(B * chunk * (w_in ? w_in : 1) * sizeof *xc);
    long long *ic = tu_malloc(B * chunk * sizeof *ic);
    float *yc = tu_malloc(B * chunk * w_out * sizeof *yc);
    unsigned char mc[B * N];
    size_t t, b, m;
    int rc;

    for (t = 0; t < N; t += m) {
        m = N - t < chunk ? N - t : chunk;
        for (b = 0; b < B; b++) {
            if (x != NULL)
                memcpy(xc + b * m * w_in, x + (b * N + t) * w_in,
                       m * w_in * sizeof *xc);
            if (ids != NULL)
                memcpy(ic + b * m, ids + b * N + t, m * sizeof *ic);
            if (mask != NULL)
                memcpy(mc + b * m, mask + b * N + t, m);
        }
        rc = ids != NULL
                 ? clf_stream_append_tokens(s, ic, B, m, mask ? mc : NULL, yc)
                 : clf_stream_append(s, xc, B, m, mask ? mc : NULL, yc);
        ck_assert_msg(rc == 0, "%s: append of %zu at %zu: %s", what, m, t,
                      clf_last_error());
        for (b = 0; b < B; b++)
            memcpy(y + (b * N + t) * w_out, yc + b * m * w_out,
                   m * w_out * sizeof *y);
    }
    free(xc);
    free(ic);
    free(yc);
}

static void
assert_near(const float *got, const float *want, size_t count, double tol,
            const char *what)
{
    double *w = tu_malloc(count * sizeof *w);
    size_t i;

    for (i = 0; i < count; i++)
        w[i] = want[i];
    tu_assert_close(got, w, count, tol, what);
    free(w);
}

/* One layer, every chunk size, against the whole forward and the
 * reference. */
static void
check_layer(const clf_attention_desc *d, int full, int masked, const char *what)
{
    const size_t D = d->d_model;
    struct layer l;
    clf_stream *s = NULL;
    clf_forward_opts o;
    unsigned char mk[B * N];
    float *x = tu_malloc(B * N * D * sizeof *x);
    float *yw = tu_malloc(B * N * D * sizeof *yw);
    float *ys = tu_malloc(B * N * D * sizeof *ys);
    double *ref = tu_malloc(B * N * D * sizeof *ref);
    char name[200];
    size_t c;

    layer_make(&l, d, 11);
    ck_assert_int_eq(clf_attention_set_mode(l.att, full ? CLF_MODE_FULL
                                                        : CLF_MODE_LINFORMER),
                     0);
    tu_fill(x, B * N * D, 23, -1.0f, 1.0f);
    mask_make(mk);
    memset(&o, 0, sizeof o);
    o.causal = 1;
    o.key_mask = masked ? mk : NULL;
    ck_assert_msg(clf_attention_forward_ex(l.att, x, B, N, yw, &o) == 0, "%s",
                  clf_last_error());
    ref_attention_ex(&l.ref, full, x, B, N, masked ? mk : NULL, 1,
                     full ? 0 : d->causal_block, ref);
    ck_assert_msg(clf_stream_create_attention(&s, l.att, B) == 0, "%s",
                  clf_last_error());
    for (c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        ck_assert_int_eq(clf_stream_reset(s), 0);
        memset(ys, 0xff, B * N * D * sizeof *ys);
        snprintf(name, sizeof name, "%s, %zu at a time", what, chunks[c]);
        feed(s, x, NULL, D, D, chunks[c], masked ? mk : NULL, ys, name);
        assert_near(ys, yw, B * N * D, TOL_WHOLE, name);
        tu_assert_close(ys, ref, B * N * D, TOL_REF, name);
    }
    clf_stream_destroy(s);
    layer_free(&l);
    free(x);
    free(yw);
    free(ys);
    free(ref);
}

START_TEST(stream_layer_matches_whole_forward)
{
    clf_attention_desc d = desc_base();

    check_layer(&d, 0, 0, "causal Linformer");
    check_layer(&d, 0, 1, "causal Linformer, padded");
    check_layer(&d, 1, 1, "causal full, padded");
    d.sharing = CLF_SHARE_PER_HEAD;
    check_layer(&d, 0, 1, "per-head E, padded");
    d = desc_base();
    d.share_kv = 1;
    d.bias_v = 0;
    check_layer(&d, 0, 1, "share_kv, padded");
    d = desc_base();
    d.k = 8; /* two slots per block */
    check_layer(&d, 0, 1, "two slots a block");
}
END_TEST

static clf_model *
load(const char *name, size_t block)
{
    char p[1200];
    const char *top = getenv("top_srcdir");
    clf_model_opts mo;
    clf_model *m = NULL;

    memset(&mo, 0, sizeof mo);
    mo.causal_block = block;
    snprintf(p, sizeof p, "%s/tests/data/%s", top ? top : ".", name);
    ck_assert_msg(clf_model_load(&m, tu_context(), p, &mo) == 0, "%s: %s", p,
                  clf_last_error());
    return m;
}

/* A model, every chunk size, against its whole causal forward. */
static void
check_model(const char *file, clf_mode mode, int masked)
{
    clf_model *m = load(file, BLK);
    clf_model_info info;
    clf_stream *s = NULL;
    clf_forward_opts o;
    unsigned char mk[B * N];
    size_t D, wo, c, i;
    float *x, *yw, *ys;
    long long *ids = NULL;
    char name[200];

    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_int_eq(clf_model_set_mode(m, mode), 0);
    D = info.d_model;
    wo = info.vocab ? info.vocab : D;
    x = tu_malloc(B * N * D * sizeof *x);
    yw = tu_malloc(B * N * wo * sizeof *yw);
    ys = tu_malloc(B * N * wo * sizeof *ys);
    tu_fill(x, B * N * D, 31, -1.0f, 1.0f);
    if (info.vocab) {
        ids = tu_malloc(B * N * sizeof *ids);
        for (i = 0; i < B * N; i++)
            ids[i] = (long long)((i * 7 + 3) % info.vocab);
    }
    mask_make(mk);
    memset(&o, 0, sizeof o);
    o.causal = 1;
    o.key_mask = masked ? mk : NULL;
    ck_assert_msg((ids ? clf_model_forward_tokens(m, ids, B, N, yw, &o)
                       : clf_model_forward(m, x, B, N, yw, &o)) == 0,
                  "%s", clf_last_error());
    ck_assert_msg(clf_stream_create(&s, m, B) == 0, "%s", clf_last_error());
    for (c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        ck_assert_int_eq(clf_stream_reset(s), 0);
        snprintf(name, sizeof name, "%s (%s%s), %zu at a time", file,
                 mode == CLF_MODE_FULL ? "full" : "Linformer",
                 masked ? ", padded" : "", chunks[c]);
        feed(s, ids ? NULL : x, ids, ids ? 0 : D, wo, chunks[c],
             masked ? mk : NULL, ys, name);
        assert_near(ys, yw, B * N * wo, TOL_WHOLE, name);
    }
    clf_stream_destroy(s);
    clf_model_destroy(m);
    free(x);
    free(yw);
    free(ys);
    free(ids);
}

START_TEST(stream_models_match_whole_forward)
{
    check_model("lucidrains_encoder.safetensors", CLF_MODE_LINFORMER, 0);
    check_model("lucidrains_encoder.safetensors", CLF_MODE_LINFORMER, 1);
    check_model("lucidrains_encoder.safetensors", CLF_MODE_FULL, 1);
    check_model("lucidrains_encoder_reversible.safetensors", CLF_MODE_LINFORMER,
                1);
    check_model("lucidrains_lm.safetensors", CLF_MODE_LINFORMER, 1);
    check_model("lucidrains_lm.safetensors", CLF_MODE_FULL, 0);
}
END_TEST

/* The look-ahead audit on a stream appended 3 at a time: every input row
 * after t replaced by NaN, +inf, -inf or 1e30 leaves the outputs at 0..t
 * unchanged, bit for bit (a position appended with t but after it is in
 * the same forward). */
START_TEST(stream_lookahead_audit)
{
    static const float bad[] = {NAN, INFINITY, -INFINITY, 1e30f};
    clf_attention_desc d = desc_base();
    const size_t D = d.d_model;
    struct layer l;
    clf_stream *s = NULL;
    float *x = tu_malloc(B * N * D * sizeof *x);
    float *xp = tu_malloc(B * N * D * sizeof *xp);
    float *y0 = tu_malloc(B * N * D * sizeof *y0);
    float *y1 = tu_malloc(B * N * D * sizeof *y1);
    size_t t, v, b, i;

    layer_make(&l, &d, 5);
    tu_fill(x, B * N * D, 41, -1.0f, 1.0f);
    ck_assert_int_eq(clf_stream_create_attention(&s, l.att, B), 0);
    feed(s, x, NULL, D, D, 3, NULL, y0, "unperturbed");
    for (t = 0; t + 1 < N; t++)
        for (v = 0; v < sizeof bad / sizeof *bad; v++) {
            memcpy(xp, x, B * N * D * sizeof *xp);
            for (b = 0; b < B; b++)
                for (i = (b * N + t + 1) * D; i < (b + 1) * N * D; i++)
                    xp[i] = bad[v];
            ck_assert_int_eq(clf_stream_reset(s), 0);
            feed(s, xp, NULL, D, D, 3, NULL, y1, "perturbed");
            for (b = 0; b < B; b++)
                ck_assert_msg(memcmp(y0 + b * N * D, y1 + b * N * D,
                                     (t + 1) * D * sizeof *y0) == 0,
                              "an output at or before %zu changed when the "
                              "inputs after it became %g",
                              t, (double)bad[v]);
        }
    clf_stream_destroy(s);
    layer_free(&l);
    free(x);
    free(xp);
    free(y0);
    free(y1);
}
END_TEST

/* The state stays the same size as the stream grows, within (k + 2b) x D x
 * 2 floats per layer and sequence plus the padding bytes. */
START_TEST(stream_state_does_not_grow)
{
    clf_model *m = load("lucidrains_encoder.safetensors", BLK);
    clf_model_info info;
    clf_stream *s = NULL;
    clf_stream_info si;
    float x[B * 16], y[B * 16];
    size_t t, first = 0, bound;

    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_int_eq(clf_stream_create(&s, m, B), 0);
    tu_fill(x, B * 16, 3, -1.0f, 1.0f);
    for (t = 0; t < N; t++) {
        ck_assert_msg(clf_stream_append(s, x, B, 1, NULL, y) == 0, "%s",
                      clf_last_error());
        ck_assert_int_eq(clf_stream_info_get(s, &si), 0);
        ck_assert_uint_eq(si.position, t + 1);
        ck_assert_uint_le(si.open_positions, BLK);
        if (t == 0)
            first = si.state_bytes;
        ck_assert_uint_eq(si.state_bytes, first);
    }
    bound = info.layers * B * (info.k + 2 * BLK) * info.d_model * 2 *
                sizeof(float) +
            B * N;
    ck_assert_msg(si.state_bytes <= bound, "state %zu bytes over %zu",
                  si.state_bytes, bound);
    ck_assert_uint_eq(si.block, BLK);
    ck_assert_uint_eq(si.width_in, info.d_model);
    clf_stream_destroy(s);
    clf_model_destroy(m);
}
END_TEST

/* Bad use: each refused with its reason; the stream goes on as if the
 * call had not been made. */
START_TEST(stream_refuses_bad_use)
{
    clf_attention_desc d = desc_base();
    const size_t D = d.d_model;
    struct layer l;
    clf_stream *s = NULL, *t = (clf_stream *)&d;
    clf_model *lm = load("lucidrains_lm.safetensors", BLK);
    clf_stream_info si;
    float *x = tu_malloc(B * N * D * sizeof *x);
    float *yw = tu_malloc(B * N * D * sizeof *yw);
    float *ys = tu_malloc(B * N * D * sizeof *ys);
    float *junk = tu_malloc(B * (N + 1) * D * sizeof *junk);
    long long ids[B * 2] = {1, 2, 3, 4};
    clf_forward_opts o;

    layer_make(&l, &d, 7);
    tu_fill(x, B * N * D, 13, -1.0f, 1.0f);
    memset(&o, 0, sizeof o);
    o.causal = 1;
    ck_assert_int_eq(clf_attention_forward_ex(l.att, x, B, N, yw, &o), 0);
    ck_assert_int_eq(clf_stream_create_attention(&s, l.att, B), 0);
    ck_assert_int_eq(clf_stream_append(s, x, B, 5, NULL, ys), 0);
    ASSERT_FAILS(clf_stream_append(s, x, B, N, NULL, junk), CLF_ESEQ_TOO_LONG,
                 "max_seq_len 12");
    ASSERT_FAILS(clf_stream_append(s, x, B + 1, 1, NULL, junk),
                 CLF_EINVALID_ARGUMENT, "batch 3 does not match");
    ASSERT_FAILS(clf_stream_append_tokens(s, ids, B, 1, NULL, junk),
                 CLF_EINVALID_ARGUMENT, "not token ids");
    ASSERT_FAILS(clf_stream_append(s, x, B, 0, NULL, junk), CLF_EBAD_SIZE,
                 "count is 0");
    ASSERT_FAILS(clf_stream_append(s, NULL, B, 1, NULL, junk),
                 CLF_ENULL_ARGUMENT, "x is NULL");
    ck_assert_int_eq(clf_attention_set_mode(l.att, CLF_MODE_FULL), 0);
    ASSERT_FAILS(clf_stream_append(s, x, B, 1, NULL, junk),
                 CLF_EINVALID_ARGUMENT, "mode changed");
    ck_assert_int_eq(clf_attention_set_mode(l.att, CLF_MODE_LINFORMER), 0);
    ck_assert_int_eq(clf_stream_info_get(s, &si), 0);
    ck_assert_uint_eq(si.position, 5);
    clf_stream_destroy(s);

    /* the same stream again, the failures in its middle */
    ck_assert_int_eq(clf_stream_create_attention(&s, l.att, B), 0);
    {
        float xc[B * 7 * 16], yc[B * 7 * 16];
        size_t b;

        for (b = 0; b < B; b++)
            memcpy(xc + b * 5 * D, x + b * N * D, 5 * D * sizeof *xc);
        ck_assert_int_eq(clf_stream_append(s, xc, B, 5, NULL, yc), 0);
        ASSERT_FAILS(clf_stream_append(s, x, B, N, NULL, junk),
                     CLF_ESEQ_TOO_LONG, "passes max_seq_len");
        for (b = 0; b < B; b++)
            memcpy(xc + b * 7 * D, x + (b * N + 5) * D, 7 * D * sizeof *xc);
        ck_assert_int_eq(clf_stream_append(s, xc, B, 7, NULL, yc), 0);
        for (b = 0; b < B; b++)
            assert_near(yc + b * 7 * D, yw + (b * N + 5) * D, 7 * D, TOL_WHOLE,
                        "after the refused appends");
        ASSERT_FAILS(clf_stream_append(s, xc, B, 1, NULL, yc),
                     CLF_ESEQ_TOO_LONG, "reset it");
    }
    clf_stream_destroy(s);

    ck_assert_int_eq(clf_stream_create(&s, lm, B), 0);
    ASSERT_FAILS(clf_stream_append(s, x, B, 1, NULL, junk),
                 CLF_EINVALID_ARGUMENT, "is an LM");
    ck_assert_int_eq(clf_stream_append_tokens(s, ids, B, 2, NULL, junk), 0);
    clf_stream_destroy(s);
    layer_free(&l);

    d.causal_block = 0;
    layer_make(&l, &d, 7);
    ASSERT_FAILS(clf_stream_create_attention(&t, l.att, B),
                 CLF_EINVALID_ARGUMENT, "causal_block");
    ck_assert_ptr_null(t);
    ASSERT_FAILS(clf_stream_create_attention(&t, l.att, 0), CLF_EBAD_SIZE,
                 "batch is 0");
    ASSERT_FAILS(clf_stream_create(&t, NULL, B), CLF_ENULL_ARGUMENT,
                 "m is NULL");
    clf_stream_destroy(NULL);
    layer_free(&l);
    clf_model_destroy(lm);
    free(x);
    free(yw);
    free(ys);
    free(junk);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("stream");
    TCase *tc = tcase_create("stream");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, stream_layer_matches_whole_forward);
    tcase_add_test(tc, stream_models_match_whole_forward);
    tcase_add_test(tc, stream_lookahead_audit);
    tcase_add_test(tc, stream_state_does_not_grow);
    tcase_add_test(tc, stream_refuses_bad_use);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
