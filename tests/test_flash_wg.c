/* The GPU-shaped streaming attention kernel (cl/flash_wg.cl, "flashwg")
 * forced in every mode: Linformer, full, causal full and prefix-safe
 * causal Linformer, with and without padding masks, every K/V sharing,
 * sizes off its tiles (64 rows a group, 8 keys a tile, 16 columns an
 * item): n = 1, n not a multiple of 64, k > n, large batches of short
 * sequences, d_h below, off and at its widest, in both builds (the main
 * program's up to CLF_FLASHWG_DH, the wide one of 32 rows a group up to
 * CLF_FLASHWG_WIDE_DH).  Heads wider than that fall back to the GEMM
 * path.
 *
 * Tolerance against the double-precision reference: max |y - y_ref| <=
 * 1e-5 * max |y_ref| over the whole output, as test_flash. */
#include "../bench/reference.h"
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

enum mask_kind { NO_MASK, LENGTHS, BYTES };

/* Whether this device runs the work-groups of the build for heads of dh
 * at all: some drivers allow the compiled kernel fewer work-items than a
 * group needs (llvmpipe: 32), and the candidate then does not apply. */
static int
device_fits_dh(size_t dh)
{
    struct clf__flash_shape sh;
    static int said;

    ck_assert_int_eq(clf_context_build(tu_context()), 0);
    memset(&sh, 0, sizeof sh);
    sh.at.dh = dh;
    if (clf__flash_wg_applies(tu_context(), &sh))
        return 1;
    if (!said++)
        printf("# flashwg does not apply on this device for d_h %zu: its "
               "kernel takes work-groups of %zu, not %d; checking that it is "
               "refused and falls back\n",
               dh, tu_context()->kernel_wg[CLF_K_FLASH_WG],
               CLF_FLASHWG_ROWS * CLF_FLASHWG_SPLIT);
    return 0;
}

/* ... for the main program's build (a 64-wide head). */
static int
device_fits(void)
{
    return device_fits_dh(CLF_FLASHWG_DH);
}

/* One forward with steps 3 to 5 forced to `way` against the reference;
 * flash_wg: whether the work-group kernel must have run. */
static void
check_way(struct layer *l, int way, int flash_wg, clf_mode mode, int causal,
          enum mask_kind mk, size_t B, size_t n, unsigned long long seed)
{
    const size_t D = l->desc.d_model, count = B * n * D;
    float *x = tu_malloc(count * sizeof *x), *y = tu_malloc(count * sizeof *y);
    double *ref = tu_malloc(count * sizeof *ref);
    unsigned char *mask = tu_malloc(B * n);
    unsigned *lens = tu_malloc(B * sizeof *lens);
    clf_forward_opts o;
    char what[200];
    size_t i, b;

    tu_fill(x, count, seed, -1.0f, 1.0f);
    for (i = 0; i < count; i++)
        y[i] = NAN; /* poison: an unwritten element fails */
    for (b = 0; b < B; b++)
        lens[b] = (unsigned)(b == 1 ? 1 : n - (b * 7) % n);
    if (mk == LENGTHS)
        tu_lengths_mask(mask, lens, B, n);
    else
        for (i = 0; i < B * n; i++)
            mask[i] =
                (unsigned char)(mk == BYTES ? (i * 2654435761u) % 5 != 0 : 1);
    memset(&o, 0, sizeof o);
    o.causal = causal;
    o.lengths = mk == LENGTHS ? lens : NULL;
    o.key_mask = mk == BYTES ? mask : NULL;
    ck_assert_int_eq(clf_attention_set_mode(l->att, mode), 0);
    clf__attention_set_attend(l->att, way);
    ck_assert_msg(clf_attention_forward_ex(l->att, x, B, n, y, &o) == 0,
                  "forward: %s", clf_last_error());
    /* Where the device cannot run it, a forced flashwg falls back. */
    ck_assert_int_eq(clf__attention_last_flash_wg(l->att),
                     flash_wg && device_fits_dh(l->ref.dh));
    ref_attention_ex(&l->ref, mode == CLF_MODE_FULL, x, B, n,
                     mk == NO_MASK ? NULL : mask, causal, l->desc.causal_block,
                     ref);
    snprintf(what, sizeof what,
             "flashwg %s%s mask=%d B=%zu n=%zu N=%zu k=%zu d_h=%zu b=%zu "
             "sharing=%d share_kv=%d one_kv_head=%d",
             mode == CLF_MODE_FULL ? "full" : "linformer",
             causal ? " causal" : "", (int)mk, B, n, l->desc.max_seq_len,
             l->desc.k, l->ref.dh, l->desc.causal_block, (int)l->desc.sharing,
             l->desc.share_kv, l->desc.one_kv_head);
    tu_assert_close(y, ref, count, TOL, what);
    clf__attention_set_attend(l->att, CLF_ATTEND_UNDECIDED);
    free(x);
    free(y);
    free(ref);
    free(mask);
    free(lens);
}

static void
check(struct layer *l, clf_mode mode, int causal, enum mask_kind mk, size_t B,
      size_t n, unsigned long long seed)
{
    check_way(l, CLF_ATTEND_FLASHWG, 1, mode, causal, mk, B, n, seed);
}

/* (D, h, d_h, N, k, block, sharing, share_kv, one_kv_head); N / block
 * blocks divide k.  d_h 0: D / h. */
struct layer_sizes {
    size_t D, h, dh, N, k, block;
    clf_sharing sharing;
    int share_kv, one_kv_head;
};

static const struct layer_sizes layers[] = {
    {30, 3, 0, 150, 70, 30, CLF_SHARE_HEADWISE, 0, 0},  /* d_h 10 */
    {38, 2, 19, 131, 72, 11, CLF_SHARE_PER_HEAD, 0, 1}, /* 16 + 3 */
    {24, 2, 61, 70, 21, 10, CLF_SHARE_KEY_VALUE, 0, 1}, /* 64 - 3 */
    {32, 2, 0, 130, 65, 26, CLF_SHARE_HEADWISE, 1, 0},  /* d_h 16 */
    {21, 3, 0, 30, 15, 6, CLF_SHARE_KEY_VALUE, 0, 1},   /* d_h 7 */
    {64, 1, 64, 80, 40, 16, CLF_SHARE_PER_HEAD, 0, 0},  /* widest */
    /* The wide build: just past the main one, off its vectors, widest. */
    {65, 1, 65, 70, 35, 14, CLF_SHARE_HEADWISE, 0, 0},
    {100, 2, 50, 40, 20, 8, CLF_SHARE_KEY_VALUE, 0, 1}, /* d_h 50, shared */
    {150, 2, 75, 70, 21, 10, CLF_SHARE_PER_HEAD, 0, 0},
    {128, 1, 128, 75, 30, 15, CLF_SHARE_HEADWISE, 1, 0},
};

static void
make_sized(struct layer *l, const struct layer_sizes *z,
           unsigned long long seed)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = z->D;
    d.heads = z->h;
    d.head_dim = z->dh;
    d.max_seq_len = z->N;
    d.k = z->k;
    d.causal_block = z->block;
    d.sharing = z->sharing;
    d.share_kv = z->share_kv;
    d.one_kv_head = z->one_kv_head;
    d.bias_q = d.bias_k = d.bias_out = 1;
    d.bias_v = !d.share_kv;
    layer_make(l, &d, seed);
}

/* Every layer in `mode`, each mask kind, a batch of 3 at full length and
 * one sequence at an odd length. */
static void
every_layer(clf_mode mode, int causal, unsigned long long seed)
{
    const size_t count = sizeof layers / sizeof layers[0];
    size_t i;
    int mk;

    for (i = 0; i < count; i++) {
        struct layer l;
        make_sized(&l, &layers[i], seed + i);
        for (mk = NO_MASK; mk <= BYTES; mk++) {
            check(&l, mode, causal, (enum mask_kind)mk, 3, layers[i].N,
                  seed + 10 * i + (unsigned long long)mk);
            check(&l, mode, causal, (enum mask_kind)mk, 1, layers[i].N - 7,
                  seed + 10 * i + 5 + (unsigned long long)mk);
        }
        layer_free(&l);
    }
}

START_TEST(flashwg_linformer_matches_reference)
{
    every_layer(CLF_MODE_LINFORMER, 0, 11000);
}
END_TEST

START_TEST(flashwg_full_matches_reference)
{
    every_layer(CLF_MODE_FULL, 0, 12000);
}
END_TEST

START_TEST(flashwg_causal_full_matches_reference)
{
    every_layer(CLF_MODE_FULL, 1, 13000);
}
END_TEST

START_TEST(flashwg_causal_linformer_matches_reference)
{
    every_layer(CLF_MODE_LINFORMER, 1, 14000);
}
END_TEST

/* n = 1, n below k (more slots than positions), many short sequences. */
START_TEST(flashwg_short_sequences_and_large_batches)
{
    struct layer l;
    int causal, mode;

    make_sized(&l, &layers[0], 15000);
    for (causal = 0; causal < 2; causal++)
        for (mode = 0; mode < 2; mode++) {
            check(&l, (clf_mode)mode, causal, NO_MASK, 2, 1, 15001);
            check(&l, (clf_mode)mode, causal, LENGTHS, 3, 5, 15002);
            check(&l, (clf_mode)mode, causal, BYTES, 3, 31, 15003);
            check(&l, (clf_mode)mode, causal, BYTES, 41, 3, 15004);
            check(&l, (clf_mode)mode, causal, NO_MASK, 17, 66, 15005);
        }
    layer_free(&l);
}
END_TEST

/* Forced by name through CLINFORMER_KERNELS, as a user forces it; and
 * where the heads are wider than CLF_FLASHWG_WIDE_DH the forward falls
 * back to the GEMM path (same numbers), and timing reports it as not
 * timed. */
START_TEST(flashwg_forced_by_name_and_falls_back)
{
    static const struct layer_sizes wide = {
        288, 2, CLF_FLASHWG_WIDE_DH + 16, 40, 12, 10, CLF_SHARE_HEADWISE, 0, 0};
    char *was = getenv("CLINFORMER_KERNELS");
    struct clf__flash_shape sh;
    struct layer l;
    int mode;

    was = was != NULL ? strdup(was) : NULL;
    setenv("CLINFORMER_KERNELS", "attend=flashwg", 1);
    make_sized(&l, &layers[1], 16000);
    for (mode = 0; mode < 2; mode++)
        check_way(&l, CLF_ATTEND_UNDECIDED, 1, (clf_mode)mode, 1, BYTES, 2, 50,
                  16001);
    ck_assert_ptr_nonnull(
        strstr(clf_context_kernel_choices(l.att->ctx), "attend: flashwg"));
    layer_free(&l);
    make_sized(&l, &wide, 16002);
    memset(&sh, 0, sizeof sh);
    sh.at.dh = wide.dh;
    ck_assert_int_eq(clf__flash_wg_applies(l.att->ctx, &sh), 0);
    sh.at.dh = CLF_FLASHWG_DH;
    ck_assert_int_eq(clf__flash_wg_applies(l.att->ctx, &sh), device_fits());
    sh.at.dh = CLF_FLASHWG_WIDE_DH;
    ck_assert_int_eq(clf__flash_wg_applies(l.att->ctx, &sh),
                     device_fits_dh(CLF_FLASHWG_WIDE_DH));
    for (mode = 0; mode < 2; mode++) {
        check_way(&l, CLF_ATTEND_UNDECIDED, 0, (clf_mode)mode, 1, LENGTHS, 2,
                  33, 16003);
        ck_assert_int_eq(clf__attention_last_flash(l.att), 0);
        check_way(&l, CLF_ATTEND_FLASHWG, 0, (clf_mode)mode, 0, NO_MASK, 1, 40,
                  16004);
    }
    /* Timed: the candidate does not apply, so it has no time. */
    unsetenv("CLINFORMER_KERNELS");
    check_way(&l, CLF_ATTEND_UNDECIDED, 0, CLF_MODE_FULL, 0, NO_MASK, 1, 40,
              16005);
    ck_assert_ptr_null(
        strstr(clf_context_kernel_choices(l.att->ctx), "flashwg"));
    layer_free(&l);
    if (was != NULL)
        setenv("CLINFORMER_KERNELS", was, 1);
    free(was);
}
END_TEST

/* Straight to the kernel, B sequences of n rows, h heads of dh, L keys
 * (per: a key head per query head), full mode (keys L = n, causal,
 * mask) against the host in double: every row, masked rows too. */
struct direct {
    size_t B, h, n, L, dh;
    int per, full, causal, masked;
};

static double
direct_ref(const struct direct *c, const float *q, const float *k,
           const float *v, const unsigned char *mask, size_t b, size_t hh,
           size_t t, size_t e)
{
    const size_t dq = c->h * c->dh, w = (c->per ? c->h : 1) * c->dh;
    const size_t g = c->per ? hh : 0;
    double s[200], m = -INFINITY, sum = 0.0, y = 0.0;
    size_t j, i;

    for (j = 0; j < c->L; j++) {
        s[j] = -INFINITY;
        if ((c->causal && j > t) || (c->masked && !mask[b * c->n + j]))
            continue;
        s[j] = 0.0;
        for (i = 0; i < c->dh; i++)
            s[j] += (double)q[(b * c->n + t) * dq + hh * c->dh + i] *
                    k[(b * c->L + j) * w + g * c->dh + i];
        s[j] *= 0.5;
        m = fmax(m, s[j]);
    }
    for (j = 0; j < c->L; j++)
        sum += (s[j] = s[j] == -INFINITY ? 0.0 : exp(s[j] - m));
    for (j = 0; j < c->L && sum > 0.0; j++)
        y += s[j] / sum * v[(b * c->L + j) * w + g * c->dh + e];
    return y;
}

static void
direct_check(const struct direct *c, unsigned long long seed)
{
    clf_context *ctx = tu_context();
    const size_t dq = c->h * c->dh, w = (c->per ? c->h : 1) * c->dh;
    const size_t nq = c->B * c->n * dq, nk = c->B * c->L * w;
    float *q = tu_malloc(nq * 4), *k = tu_malloc(nk * 4);
    float *v = tu_malloc(nk * 4), *o = tu_malloc(nq * 4);
    unsigned char *mask = tu_malloc(c->B * c->n);
    struct clf__flash_shape sh;
    cl_mem mq, mk, mv, mo, mm;
    size_t b, hh, t, e;
    cl_int err;

    tu_fill(q, nq, seed, -1.0f, 1.0f);
    tu_fill(k, nk, seed + 1, -1.0f, 1.0f);
    tu_fill(v, nk, seed + 2, -1.0f, 1.0f);
    for (t = 0; t < c->B * c->n; t++) /* keys 0..2, 60.. of each padding */
        mask[t] = t % c->n >= 3 && t % c->n < 60;
    for (t = 0; t < nq; t++)
        o[t] = NAN;
    memset(&sh, 0, sizeof sh);
    sh.at.batch = c->B;
    sh.at.heads = c->h;
    sh.at.n = c->n;
    sh.at.L = c->L;
    sh.at.dh = c->dh;
    sh.at.dq = dq;
    sh.at.kv_per_head = c->per;
    sh.at.scale = 0.5f;
    sh.full = c->full;
    sh.causal = c->causal;
    mq = clCreateBuffer(ctx->context, CL_MEM_COPY_HOST_PTR, nq * 4, q, &err);
    mk = clCreateBuffer(ctx->context, CL_MEM_COPY_HOST_PTR, nk * 4, k, &err);
    mv = clCreateBuffer(ctx->context, CL_MEM_COPY_HOST_PTR, nk * 4, v, &err);
    mo = clCreateBuffer(ctx->context, CL_MEM_COPY_HOST_PTR, nq * 4, o, &err);
    mm = clCreateBuffer(ctx->context, CL_MEM_COPY_HOST_PTR, c->B * c->n, mask,
                        &err);
    ck_assert_ptr_nonnull(mm);
    if (!device_fits_dh(c->dh)) {
        ASSERT_FAILS(clf__flash_wg(ctx, &sh, mq, mk, mv, mo,
                                   c->masked ? mm : NULL, NULL, NULL),
                     CLF_EINVALID_ARGUMENT, "does not fit");
        memset(o, 0, nq * 4); /* nothing to compare: not run */
        c = NULL;
    } else {
        ck_assert_int_eq(clf__flash_wg(ctx, &sh, mq, mk, mv, mo,
                                       c->masked ? mm : NULL, NULL, NULL),
                         0);
    }
    ck_assert_int_eq(clEnqueueReadBuffer(ctx->queue, mo, CL_TRUE, 0, nq * 4, o,
                                         0, NULL, NULL),
                     CL_SUCCESS);
    for (b = 0; c != NULL && b < c->B; b++)
        for (hh = 0; hh < c->h; hh++)
            for (t = 0; t < c->n; t++)
                for (e = 0; e < c->dh; e++) {
                    const float got = o[(b * c->n + t) * dq + hh * c->dh + e];
                    const double want =
                        direct_ref(c, q, k, v, mask, b, hh, t, e);
                    ck_assert_msg(fabs(got - want) <= 1e-5,
                                  "B=%zu h=%zu n=%zu L=%zu dh=%zu per=%d "
                                  "full=%d causal=%d mask=%d: [%zu][%zu][%zu]"
                                  "[%zu] = %g, want %g",
                                  c->B, c->h, c->n, c->L, c->dh, c->per,
                                  c->full, c->causal, c->masked, b, hh, t, e,
                                  got, want);
                }
    clReleaseMemObject(mq);
    clReleaseMemObject(mk);
    clReleaseMemObject(mv);
    clReleaseMemObject(mo);
    clReleaseMemObject(mm);
    free(q);
    free(k);
    free(v);
    free(o);
    free(mask);
}

/* Rows whose every key is masked (causal, keys 0..2 padding: rows 0 to 2
 * see nothing) give zeros, not NaN; groups with a row tail, several
 * heads and sequences, shared and per-head keys, heads of 5, 10, 20
 * (float4 loads), 64 columns, and the wide build's 65, 100 and 128. */
START_TEST(flashwg_kernel_matches_host)
{
    static const struct direct cases[] = {
        {1, 1, 70, 70, 5, 0, 1, 1, 1},    {1, 1, 150, 70, 10, 0, 0, 0, 0},
        {2, 3, 70, 70, 10, 1, 1, 1, 1},   {3, 3, 150, 70, 10, 0, 0, 0, 0},
        {2, 2, 130, 130, 20, 1, 1, 0, 1}, {1, 2, 65, 9, 64, 1, 0, 0, 0},
        {2, 1, 100, 100, 64, 0, 1, 1, 0}, {1, 2, 70, 70, 65, 1, 1, 1, 1},
        {2, 1, 40, 33, 100, 0, 0, 0, 0},  {1, 1, 66, 66, 128, 0, 1, 0, 1},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        direct_check(&cases[i], 17000 + 10 * i);
}
END_TEST

/* The launch at the production shape (n = 4096, 8 heads, B = 1): one
 * group per 64 rows and head, far more than a GPU's compute units. */
START_TEST(flashwg_production_launch_geometry)
{
    struct clf__flash_shape sh;

    memset(&sh, 0, sizeof sh);
    sh.at.batch = 1;
    sh.at.heads = 8;
    sh.at.n = 4096;
    ck_assert_uint_eq(clf__flash_wg_groups(&sh), 512);
    ck_assert_uint_ge(clf__flash_wg_groups(&sh) * CLF_FLASHWG_ROWS *
                          CLF_FLASHWG_SPLIT,
                      32768);
    sh.at.n = 65;
    ck_assert_uint_eq(clf__flash_wg_groups(&sh), 16);
    /* Heads of 128: the wide build's 32 rows a group. */
    sh.at.n = 4096;
    sh.at.dh = CLF_FLASHWG_WIDE_DH;
    ck_assert_uint_eq(clf__flash_wg_rows(&sh), 32);
    ck_assert_uint_eq(clf__flash_wg_groups(&sh), 1024);
}
END_TEST

/* A NaN input in sequence 0 makes its outputs NaN (in causal mode the
 * rows before it stay finite); sequence 1 stays finite; a fully padded
 * sequence gives zeros. */
START_TEST(flashwg_nan_and_fully_masked)
{
    const size_t B = 2, n = 20, D = 24;
    float x[2 * 20 * 24], y[2 * 20 * 24];
    clf_forward_opts o;
    struct layer l;
    size_t i;
    int mode, causal;

    static const struct layer_sizes z = {
        24, 3, 24, 66, 12, 11, CLF_SHARE_PER_HEAD, 0, 1};

    make_sized(&l, &z, 18001);
    tu_fill(x, B * n * D, 18002, -1.0f, 1.0f);
    x[3 * D + 5] = NAN;
    clf__attention_set_attend(l.att, CLF_ATTEND_FLASHWG);
    memset(&o, 0, sizeof o);
    for (mode = 0; mode < 2; mode++)
        for (causal = 0; causal < 2; causal++) {
            o.causal = causal;
            ck_assert_int_eq(clf_attention_set_mode(l.att, (clf_mode)mode), 0);
            ck_assert_int_eq(clf_attention_forward_ex(l.att, x, B, n, y, &o),
                             0);
            ck_assert_int_eq(clf__attention_last_flash_wg(l.att),
                             device_fits());
            for (i = 0; i < n * D; i++)
                ck_assert_msg(
                    isnan(y[i]) || (causal && i < 3 * D && isfinite(y[i])),
                    "mode %d causal %d: y[0][%zu] = %g", mode, causal, i, y[i]);
            for (i = n * D; i < B * n * D; i++)
                ck_assert_msg(isfinite(y[i]), "y[1][%zu] = %g", i - n * D,
                              y[i]);
        }
    tu_fill(x, B * n * D, 18003, -1.0f, 1.0f);
    tu_check_padded_sequence_zero(&l, x, n);
    layer_free(&l);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("flash_wg");
    TCase *tc = tcase_create("flash_wg");

    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, flashwg_linformer_matches_reference);
    tcase_add_test(tc, flashwg_full_matches_reference);
    tcase_add_test(tc, flashwg_causal_full_matches_reference);
    tcase_add_test(tc, flashwg_causal_linformer_matches_reference);
    tcase_add_test(tc, flashwg_short_sequences_and_large_batches);
    tcase_add_test(tc, flashwg_forced_by_name_and_falls_back);
    tcase_add_test(tc, flashwg_kernel_matches_host);
    tcase_add_test(tc, flashwg_production_launch_geometry);
    tcase_add_test(tc, flashwg_nan_and_fully_masked);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
