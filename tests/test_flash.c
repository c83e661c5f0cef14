/* The streaming (flash) attention kernel forced in every mode: Linformer,
 * full, causal full and prefix-safe causal Linformer, with and without
 * padding masks, batches, every K/V sharing the layer allows, and sizes
 * that are not multiples of its tiles (64 keys, 6 rows, 16 lanes).
 *
 * Tolerance against the double-precision reference: max |y - y_ref| <=
 * 1e-5 * max |y_ref| over the whole output, as test_attention and
 * test_masks: the online softmax rescales float sums of at most a few
 * hundred terms, while an indexing or masking mistake is of order 1.
 *
 * CLINFORMER_TEST_SMALL=1 (for a slow implementation; rusticl on
 * llvmpipe runs the layers below in about 20 s and no longer needs it)
 * swaps the layers of the four mode tests for the tiny ones of
 * small_layers: still every mode, mask kind and sharing, with n, k and d_h
 * off the tiles. */
#include "../bench/reference.h"
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

enum mask_kind { NO_MASK, LENGTHS, BYTES };

/* One forced-flash forward against the reference; flash: whether the
 * streaming kernel is to run (else the forward falls back to the GEMM
 * path). */
static void
check(struct layer *l, clf_mode mode, int causal, enum mask_kind mk, size_t B,
      size_t n, unsigned long long seed, int flash)
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
    clf__attention_set_attend(l->att, CLF_ATTEND_FLASH);
    ck_assert_msg(clf_attention_forward_ex(l->att, x, B, n, y, &o) == 0,
                  "forward: %s", clf_last_error());
    ck_assert_int_eq(clf__attention_last_flash(l->att), flash);
    ref_attention_ex(&l->ref, mode == CLF_MODE_FULL, x, B, n,
                     mk == NO_MASK ? NULL : mask, causal, l->desc.causal_block,
                     ref);
    snprintf(what, sizeof what,
             "flash %s%s mask=%d B=%zu n=%zu N=%zu k=%zu d_h=%zu b=%zu "
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

/* Layers whose sizes miss the kernel's tiles: (D, h, d_h, N, k, block,
 * sharing, share_kv, one_kv_head).  N/block blocks divide k. */
struct layer_sizes {
    size_t D, h, dh, N, k, block;
    clf_sharing sharing;
    int share_kv, one_kv_head;
};

static const struct layer_sizes layers[] = {
    {30, 3, 0, 150, 70, 30, CLF_SHARE_HEADWISE, 0, 0},  /* d_h 10 */
    {48, 2, 80, 100, 45, 20, CLF_SHARE_PER_HEAD, 0, 0}, /* 64 + 16 */
    {24, 2, 67, 70, 21, 10, CLF_SHARE_KEY_VALUE, 0, 1}, /* 64 + 3 */
    {32, 2, 0, 130, 65, 26, CLF_SHARE_HEADWISE, 1, 0},  /* d_h 16 */
    {24, 3, 24, 66, 12, 11, CLF_SHARE_PER_HEAD, 0, 1},  /* 16 + 8 */
};

/* The small-shape set: d_h 8 (below a vector), 16 + 3, and 7; n below
 * one tile of 64 keys, or one whole tile and a partial one. */
static const struct layer_sizes small_layers[] = {
    {16, 2, 0, 21, 9, 7, CLF_SHARE_HEADWISE, 0, 0},    /* d_h 8 */
    {38, 2, 19, 70, 14, 10, CLF_SHARE_PER_HEAD, 0, 1}, /* 16 + 3 */
    {21, 3, 0, 30, 15, 6, CLF_SHARE_KEY_VALUE, 0, 1},  /* d_h 7 */
    {16, 2, 0, 24, 8, 6, CLF_SHARE_HEADWISE, 1, 0},    /* shared K=V */
};

/* The layer table in use and its length. */
static const struct layer_sizes *
layer_table(size_t *count)
{
    const char *small = getenv("CLINFORMER_TEST_SMALL");

    if (small != NULL && strcmp(small, "") != 0 && strcmp(small, "0") != 0) {
        *count = sizeof small_layers / sizeof small_layers[0];
        return small_layers;
    }
    *count = sizeof layers / sizeof layers[0];
    return layers;
}

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

static void
make_layer(struct layer *l, size_t i, unsigned long long seed)
{
    make_sized(l, &layers[i], seed);
}

/* Every layer, in `mode` (causal or not), each mask kind, batches of 3
 * at full length and of 1 at an odd length; the kernel's rows per
 * work-item pinned in turn to the most blocks (length masks), one block
 * (the odd lengths: several work-items and a row tail) and the rule's
 * choice for these key counts. */
static void
every_layer(clf_mode mode, int causal, unsigned long long seed)
{
    size_t i, count;
    const struct layer_sizes *table = layer_table(&count);
    int mk;

    for (i = 0; i < count; i++) {
        struct layer l;
        make_sized(&l, &table[i], seed + i);
        for (mk = NO_MASK; mk <= BYTES; mk++) {
            clf__flash_set_blocks(l.att->ctx,
                                  mk == LENGTHS ? CLF_FLASH_BLOCKS : 0);
            check(&l, mode, causal, (enum mask_kind)mk, 3, table[i].N,
                  seed + 10 * i + (unsigned long long)mk, 1);
            clf__flash_set_blocks(l.att->ctx, 1);
            check(&l, mode, causal, (enum mask_kind)mk, 1, table[i].N - 7,
                  seed + 10 * i + 5 + (unsigned long long)mk, 1);
            clf__flash_set_blocks(l.att->ctx, 0);
        }
        layer_free(&l);
    }
}

START_TEST(flash_linformer_matches_reference)
{
    every_layer(CLF_MODE_LINFORMER, 0, 1000);
}
END_TEST

START_TEST(flash_full_matches_reference)
{
    every_layer(CLF_MODE_FULL, 0, 2000);
}
END_TEST

START_TEST(flash_causal_full_matches_reference)
{
    every_layer(CLF_MODE_FULL, 1, 3000);
}
END_TEST

START_TEST(flash_causal_linformer_matches_reference)
{
    every_layer(CLF_MODE_LINFORMER, 1, 4000);
}
END_TEST

/* A streaming shape of L keys (full mode, one head) and head width dh. */
static struct clf__flash_shape
keys_shape(size_t L, size_t dh)
{
    struct clf__flash_shape sh;

    memset(&sh, 0, sizeof sh);
    sh.at.batch = 1;
    sh.at.heads = 1;
    sh.at.n = sh.at.L = L;
    sh.at.dh = sh.at.dq = dh;
    sh.full = 1;
    return sh;
}

/* clf__flash_blocks on a device without a loop limit: half the most
 * blocks below CLF_FLASH_LONG_KEYS keys, the most from there on; a pinned
 * count wins, one out of range is ignored. */
static void
check_block_rule(clf_context *ctx)
{
    struct clf__flash_shape one = keys_shape(1, 8);
    struct clf__flash_shape below = keys_shape(CLF_FLASH_LONG_KEYS - 1, 8);
    struct clf__flash_shape at = keys_shape(CLF_FLASH_LONG_KEYS, 8);

    ck_assert_uint_eq(clf__flash_blocks(ctx, &one), CLF_FLASH_BLOCKS / 2);
    ck_assert_uint_eq(clf__flash_blocks(ctx, &below), CLF_FLASH_BLOCKS / 2);
    ck_assert_uint_eq(clf__flash_blocks(ctx, &at), CLF_FLASH_BLOCKS);
    clf__flash_set_blocks(ctx, 1);
    ck_assert_uint_eq(clf__flash_blocks(ctx, &at), 1);
    clf__flash_set_blocks(ctx, CLF_FLASH_BLOCKS + 1);
    ck_assert_uint_eq(clf__flash_blocks(ctx, &one), CLF_FLASH_BLOCKS / 2);
    clf__flash_set_blocks(ctx, 0);
}

/* On a device that ends a work-item's loops after CLF_LLVMPIPE_LOOP_LIMIT
 * iterations: the rule where the loops are short (one key, pinned counts
 * too), fewer blocks for 150 keys of d_h 10 (at six the kernel ran 64995
 * of the 65535 on llvmpipe), none for 8192 keys of d_h 64. */
static void
check_block_budget(clf_context *ctx)
{
    struct clf__flash_shape one = keys_shape(1, 8), mid = keys_shape(150, 10);
    struct clf__flash_shape at = keys_shape(CLF_FLASH_LONG_KEYS, 64);
    size_t b;

    ck_assert_uint_eq(clf__loop_limit(ctx), CLF_LLVMPIPE_LOOP_LIMIT);
    ck_assert_uint_eq(clf__flash_blocks(ctx, &one), CLF_FLASH_BLOCKS / 2);
    clf__flash_set_blocks(ctx, CLF_FLASH_BLOCKS);
    ck_assert_uint_eq(clf__flash_blocks(ctx, &one), CLF_FLASH_BLOCKS);
    b = clf__flash_blocks(ctx, &mid);
    ck_assert_msg(b >= 1 && b < CLF_FLASH_BLOCKS / 2, "%zu blocks", b);
    clf__flash_set_blocks(ctx, 0);
    ck_assert_uint_eq(clf__flash_blocks(ctx, &mid), b);
    ck_assert_uint_eq(clf__flash_blocks(ctx, &at), 0);
}

/* The rows per work-item by the rule of this device (its own loop limit,
 * if any), then by both rules on the same context described once as a
 * device without a limit and once as llvmpipe. */
START_TEST(flash_blocks_by_key_count)
{
    struct layer l;
    clf_context *ctx;
    char name[sizeof ctx->info.name];

    make_layer(&l, 0, 4500);
    ctx = l.att->ctx;
    clf__flash_set_blocks(ctx, 0); /* whatever an earlier failed case left */
    memcpy(name, ctx->info.name, sizeof name);
    if (clf__loop_limit(ctx) == 0)
        check_block_rule(ctx);
    else
        check_block_budget(ctx);
    snprintf(ctx->info.name, sizeof ctx->info.name, "a device");
    check_block_rule(ctx);
    snprintf(ctx->info.name, sizeof ctx->info.name, "llvmpipe (described)");
    check_block_budget(ctx);
    memcpy(ctx->info.name, name, sizeof name);
    clf__flash_set_blocks(ctx, 0);
    layer_free(&l);
}
END_TEST

/* Forced where llvmpipe would end its loops early (1024 keys of d_h 64:
 * not even one block of rows fits), the forward takes the GEMM path and
 * matches the reference; described as a device without a limit, the
 * streaming kernel runs. */
START_TEST(flash_over_loop_limit_takes_gemm_path)
{
    struct layer l;
    clf_attention_desc d;
    char name[sizeof l.att->ctx->info.name];
    clf_context *ctx;

    memset(&d, 0, sizeof d);
    d.d_model = 64;
    d.heads = 1;
    d.max_seq_len = 1024;
    d.k = 32;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    layer_make(&l, &d, 4600);
    ctx = l.att->ctx;
    clf__flash_set_blocks(ctx, 0);
    memcpy(name, ctx->info.name, sizeof name);
    snprintf(ctx->info.name, sizeof ctx->info.name, "llvmpipe (described)");
    check(&l, CLF_MODE_FULL, 0, NO_MASK, 1, 1024, 4601, 0);
    snprintf(ctx->info.name, sizeof ctx->info.name, "a device");
    if (strstr(name, "llvmpipe") == NULL)
        check(&l, CLF_MODE_FULL, 0, NO_MASK, 1, 1024, 4602, 1);
    memcpy(ctx->info.name, name, sizeof name);
    layer_free(&l);
}
END_TEST

/* Short sequences: one row, a block of one position, n below a tile. */
START_TEST(flash_short_sequences)
{
    struct layer l;
    int causal;

    make_layer(&l, 0, 5000);
    for (causal = 0; causal < 2; causal++) {
        check(&l, CLF_MODE_FULL, causal, NO_MASK, 2, 1, 5001, 1);
        check(&l, CLF_MODE_LINFORMER, causal, NO_MASK, 2, 1, 5002, 1);
        check(&l, CLF_MODE_FULL, causal, LENGTHS, 3, 5, 5003, 1);
        check(&l, CLF_MODE_LINFORMER, causal, BYTES, 3, 31, 5004, 1);
    }
    layer_free(&l);
}
END_TEST

/* The design's worked example with the streaming kernel forced through
 * clf_context_force_kernel: 25.7521 in full attention, 27.2636
 * compressed. */
START_TEST(flash_golden_example)
{
    clf_context *ctx = tu_context();
    clf_attention *att = tu_golden_layer();
    const float x[3] = {1.0f, 2.0f, 3.0f};
    float y[3] = {NAN, NAN, NAN};

    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", "flash"), 0);
    ck_assert_int_eq(clf_attention_set_mode(att, CLF_MODE_FULL), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 1, 3, y), 0);
    ck_assert_int_eq(clf__attention_last_flash(att), 1);
    ck_assert_double_eq_tol(y[0], 25.7521, 0.5e-4);
    y[0] = NAN;
    ck_assert_int_eq(clf_attention_set_mode(att, CLF_MODE_LINFORMER), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 1, 3, y), 0);
    ck_assert_int_eq(clf__attention_last_flash(att), 1);
    ck_assert_double_eq_tol(y[0], 27.2636, 0.5e-4);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", NULL), 0);
    clf_attention_destroy(att);
}
END_TEST

/* Full mode with the streaming kernel holds no score buffer and makes no
 * chunks: the layer's device memory is that of the GEMM path without its
 * n x n scores, and grows linearly in n. */
START_TEST(flash_full_mode_holds_no_scores)
{
    struct layer l;
    size_t bytes[2], n[2] = {256, 512}, i;
    float *x, *y;

    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 4;
    d.max_seq_len = 512;
    d.k = 16;
    layer_make(&l, &d, 6001);
    x = tu_malloc(512 * 32 * sizeof *x);
    y = tu_malloc(512 * 32 * sizeof *y);
    tu_fill(x, 512 * 32, 6002, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_set_mode(l.att, CLF_MODE_FULL), 0);
    clf__attention_set_attend(l.att, CLF_ATTEND_FLASH);
    /* Chunks of one row if scores were made: the kernel ignores it. */
    clf__attention_set_score_limit(l.att, 1);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(clf_attention_forward(l.att, x, 1, n[i], y), 0);
        ck_assert_int_eq(clf__attention_last_flash(l.att), 1);
        ck_assert_uint_eq(l.att->ws[WS_S].cap, 0);
        ck_assert_int_eq(clf_attention_device_bytes(l.att, &bytes[i]), 0);
    }
    /* Weights (E, F: k x N) and O(n d) workspaces, far below one head's
     * 512 x 512 scores (1 MiB) on top. */
    ck_assert_uint_lt(bytes[1], (size_t)512 * 512 * sizeof(float));
    ck_assert_uint_lt(bytes[1] - bytes[0], (size_t)256 * 32 * 4 * 16);
    layer_free(&l);
    free(x);
    free(y);
}
END_TEST

/* The look-ahead audit passes in causal mode with the streaming kernel
 * forced by CLINFORMER_KERNELS, both modes, bit for bit. */
START_TEST(flash_causal_lookahead_passes)
{
    static const size_t cases[][4] = {{40, 8, 5, 37}, {130, 65, 26, 130}};
    char *was = getenv("CLINFORMER_KERNELS");
    size_t c, t;

    was = was != NULL ? strdup(was) : NULL;
    setenv("CLINFORMER_KERNELS", "attend=flash", 1);
    for (c = 0; c < 2; c++) {
        clf_attention_desc d;
        const size_t n = cases[c][3];
        size_t positions[8], np = 0;
        float *x;
        clf_lookahead_result r;
        clf_forward_opts o;
        struct layer l;
        int mode;

        memset(&d, 0, sizeof d);
        d.d_model = 24;
        d.heads = 3;
        d.max_seq_len = cases[c][0];
        d.k = cases[c][1];
        d.causal_block = cases[c][2];
        layer_make(&l, &d, 7000 + c);
        x = tu_malloc(n * d.d_model * sizeof *x);
        tu_fill(x, n * d.d_model, 7010 + c, -1.0f, 1.0f);
        for (t = 0; t < n; t += n / 7)
            positions[np++] = t;
        memset(&o, 0, sizeof o);
        o.causal = 1;
        for (mode = 0; mode < 2; mode++) {
            ck_assert_int_eq(clf_attention_set_mode(l.att, (clf_mode)mode), 0);
            ck_assert_int_eq(clf_attention_check_lookahead(
                                 l.att, x, n, &o, positions, np, 7020 + c, &r),
                             0);
            ck_assert_int_eq(clf__attention_last_flash(l.att), 1);
            ck_assert_msg(r.passed, "flash %s causal: t=%zu moved %zu by %g",
                          mode ? "full" : "linformer", r.t, r.moved, r.change);
        }
        layer_free(&l);
        free(x);
    }
    if (was != NULL)
        setenv("CLINFORMER_KERNELS", was, 1);
    else
        unsetenv("CLINFORMER_KERNELS");
    free(was);
}
END_TEST

/* A NaN input in sequence 0 makes every output of sequence 0 NaN in full
 * and Linformer mode (plain and causal full: it reaches every key of
 * position 3 on, and W_o mixes heads; in full mode the rows before it
 * stay finite when causal); sequence 1 stays finite.  A fully masked
 * sequence gives zeros. */
START_TEST(flash_nan_and_fully_masked)
{
    const size_t B = 2, n = 20, D = 24;
    float x[2 * 20 * 24], y[2 * 20 * 24];
    clf_forward_opts o;
    struct layer l;
    size_t i;
    int mode, causal;

    make_layer(&l, 4, 8000);
    tu_fill(x, B * n * D, 8001, -1.0f, 1.0f);
    x[3 * D + 5] = NAN;
    clf__attention_set_attend(l.att, CLF_ATTEND_FLASH);
    memset(&o, 0, sizeof o);
    for (mode = 0; mode < 2; mode++)
        for (causal = 0; causal < 2; causal++) {
            o.causal = causal;
            ck_assert_int_eq(clf_attention_set_mode(l.att, (clf_mode)mode), 0);
            ck_assert_int_eq(clf_attention_forward_ex(l.att, x, B, n, y, &o),
                             0);
            for (i = 0; i < n * D; i++)
                ck_assert_msg(
                    isnan(y[i]) || (causal && i < 3 * D && isfinite(y[i])),
                    "mode %d causal %d: y[0][%zu] = %g", mode, causal, i, y[i]);
            for (i = n * D; i < B * n * D; i++)
                ck_assert_msg(isfinite(y[i]), "y[1][%zu] = %g", i - n * D,
                              y[i]);
        }
    tu_fill(x, B * n * D, 8002, -1.0f, 1.0f);
    tu_check_padded_sequence_zero(&l, x, n);
    layer_free(&l);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("flash");
    TCase *tc = tcase_create("flash");

    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, flash_linformer_matches_reference);
    tcase_add_test(tc, flash_full_matches_reference);
    tcase_add_test(tc, flash_causal_full_matches_reference);
    tcase_add_test(tc, flash_causal_linformer_matches_reference);
    tcase_add_test(tc, flash_blocks_by_key_count);
    tcase_add_test(tc, flash_over_loop_limit_takes_gemm_path);
    tcase_add_test(tc, flash_short_sequences);
    tcase_add_test(tc, flash_golden_example);
    tcase_add_test(tc, flash_full_mode_holds_no_scores);
    tcase_add_test(tc, flash_causal_lookahead_passes);
    tcase_add_test(tc, flash_nan_and_fully_masked);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
