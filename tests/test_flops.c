/* The FLOP count from a desc: by hand, against the count a layer of the
 * same desc plans, and its errors. */
#include "clinformer.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

static clf_attention_desc
desc_of(size_t D, size_t h, size_t dh, size_t N, size_t k, size_t block)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = h;
    d.head_dim = dh;
    d.max_seq_len = N;
    d.k = k;
    d.causal_block = block;
    return d;
}

START_TEST(flops_desc_linformer_by_hand)
{
    /* B=2, n=8, D=4, h=2, k=2, output bias.  Q: 2*2*8*4*4 = 512.  Compress
     * first (k n D + k D d_q = 64 + 32 = 96 multiply-adds a side and
     * sequence, against 8*4*4 + 2*8*4 = 192 projecting first): 2*2*2*96 =
     * 768.  Scores and weighted sum 2*2*2*8*2*2 = 256 each; softmax
     * 5*2*2*8*2 = 320; output 512 + 64. */
    clf_attention_desc d = desc_of(4, 2, 0, 8, 2, 0);
    double st[CLF_STAGE_COUNT], total = -1.0;

    d.bias_out = 1;
    ck_assert_int_eq(
        clf_attention_desc_flops(&d, CLF_MODE_LINFORMER, 2, 8, 0, st, &total),
        0);
    ck_assert_double_eq(total, 2688.0);
    ck_assert_double_eq(st[CLF_STAGE_PROJECTION], 512.0);
    ck_assert_double_eq(st[CLF_STAGE_COMPRESSION], 768.0);
    ck_assert_double_eq(st[CLF_STAGE_SCORES], 256.0);
    ck_assert_double_eq(st[CLF_STAGE_SOFTMAX], 320.0);
    ck_assert_double_eq(st[CLF_STAGE_WEIGHTED_SUM], 256.0);
    ck_assert_double_eq(st[CLF_STAGE_FUSED], 0.0);
    ck_assert_double_eq(st[CLF_STAGE_OUTPUT], 576.0);
}
END_TEST

START_TEST(flops_desc_causal_by_hand)
{
    /* B=1, n=8, D=4, h=1, b=4: 2 blocks, k=2 (c=1).  K, V exact: 512; the
     * one complete block before the last: 2 sides * 2 * 1 * 4 * 4 = 64.
     * Window: sum of (q mod 4) + 1 = 20 entries; scores 2*8*2*4 + 2*20*4 =
     * 288, the weighted sum too; softmax over k + b = 6 columns: 240. */
    clf_attention_desc d = desc_of(4, 1, 0, 8, 2, 4);
    double st[CLF_STAGE_COUNT], total = -1.0;

    d.bias_out = 1;
    ck_assert_int_eq(
        clf_attention_desc_flops(&d, CLF_MODE_LINFORMER, 1, 8, 1, st, &total),
        0);
    ck_assert_double_eq(total, 1936.0);
    ck_assert_double_eq(st[CLF_STAGE_COMPRESSION], 576.0);
    ck_assert_double_eq(st[CLF_STAGE_SCORES], 288.0);
    ck_assert_double_eq(st[CLF_STAGE_SOFTMAX], 240.0);
    ck_assert_double_eq(st[CLF_STAGE_WEIGHTED_SUM], 288.0);
    /* stage_flops may be NULL */
    total = -1.0;
    ck_assert_int_eq(
        clf_attention_desc_flops(&d, CLF_MODE_LINFORMER, 1, 8, 1, NULL, &total),
        0);
    ck_assert_double_eq(total, 1936.0);
}
END_TEST

static void
expect_error(const clf_attention_desc *d, clf_mode mode, size_t batch, size_t n,
             int causal, int status, const char *names)
{
    double total = 0.0;
    int rc = clf_attention_desc_flops(d, mode, batch, n, causal, NULL, &total);

    ck_assert_msg(rc == status, "expected %s, got %s (%s)",
                  clf_status_name(status), clf_status_name(rc),
                  clf_last_error());
    ck_assert_msg(strstr(clf_last_error(), names) != NULL,
                  "\"%s\" does not name %s", clf_last_error(), names);
}

START_TEST(flops_desc_rejects_impossible_shapes_naming_them)
{
    clf_attention_desc d = desc_of(8, 2, 0, 16, 4, 0), e;
    double total;

    ck_assert_int_eq(
        clf_attention_desc_flops(NULL, CLF_MODE_FULL, 1, 8, 0, NULL, &total),
        CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(
        clf_attention_desc_flops(&d, CLF_MODE_FULL, 1, 8, 0, NULL, NULL),
        CLF_ENULL_ARGUMENT);
    expect_error(&d, CLF_MODE_FULL, 0, 8, 0, CLF_EBAD_SIZE, "batch");
    expect_error(&d, CLF_MODE_FULL, 1, 0, 0, CLF_EBAD_SIZE, "seq_len");
    expect_error(&d, CLF_MODE_FULL, 1, 17, 0, CLF_ESEQ_TOO_LONG, "seq_len");
    expect_error(&d, (clf_mode)7, 1, 8, 0, CLF_EBAD_ENUM, "mode");
    expect_error(&d, CLF_MODE_LINFORMER, 1, 8, 1, CLF_EBAD_SIZE,
                 "causal_block");
    e = d, e.d_model = 0;
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_EBAD_SIZE, "d_model");
    e = d, e.heads = 0;
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_EBAD_SIZE, "heads");
    e = d, e.heads = 3;
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_ESHAPE_MISMATCH, "heads");
    e = d, e.max_seq_len = 0;
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_EBAD_SIZE, "max_seq_len");
    e = d, e.k = 0;
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_EBAD_SIZE, "k is 0");
    e = d, e.k = 17;
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_EK_TOO_LARGE, "k 17");
    e = d, e.sharing = (clf_sharing)9;
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_EBAD_ENUM, "sharing");
    e = d, e.share_kv = 1, e.bias_v = 1;
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_ESHAPE_MISMATCH, "bias_v");
    e = d, e.causal_block = 32;
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_EBAD_SIZE, "causal_block");
    e = d, e.causal_block = 4, e.k = 6; /* 4 blocks, 6 slots */
    expect_error(&e, CLF_MODE_FULL, 1, 8, 0, CLF_ESHAPE_MISMATCH, "k is 6");
    e = d, e.causal_block = 4, e.compressed_bias = 1;
    expect_error(&e, CLF_MODE_LINFORMER, 1, 8, 1, CLF_EUNSUPPORTED,
                 "compressed_bias");
}
END_TEST

/* Layer shapes that take every branch of the count: compressing first and
 * projecting first, seq_len below max_seq_len, batches above 1, causal
 * blocks that do and do not divide max_seq_len. */
static const struct {
    size_t D, h, dh, N, k, block, n, batch;
} shapes[] = {
    {16, 2, 0, 32, 8, 8, 32, 1},   /* compresses first */
    {16, 4, 0, 40, 12, 16, 29, 3}, /* 3 blocks, the last short */
    {64, 8, 2, 24, 12, 6, 20, 2},  /* projects first with one K/V head */
    {8, 2, 6, 16, 16, 4, 16, 2},   /* head_dim given; k = N */
};

/* bias_q, bias_k, bias_v, bias_out, compressed_bias */
static const int biases[][5] = {{0, 0, 0, 0, 0},
                                {0, 0, 0, 1, 0},
                                {1, 1, 1, 1, 0},
                                {1, 1, 1, 1, 1},
                                {0, 1, 0, 0, 1}};

/* The layer's count (which calls the description's) and the description's
 * count for every mode and causal setting of d: both accept and refuse the
 * same calls and agree.  Returns how many were compared. */
static int
compare_desc(const clf_attention_desc *d, size_t batch, size_t n)
{
    clf_attention *att = NULL;
    int m, causal, compared = 0;

    ck_assert_msg(clf_attention_create(&att, tu_context(), d) == 0, "%s",
                  clf_last_error());
    for (m = 0; m < 2; m++) {
        for (causal = 0; causal < 2; causal++) {
            clf_forward_opts o;
            double lib = -1.0, got = -2.0;
            int rl, rg;

            memset(&o, 0, sizeof o);
            o.causal = causal;
            rl = clf_attention_flops_ex(att, (clf_mode)m, batch, n, &o, &lib);
            rg = clf_attention_desc_flops(d, (clf_mode)m, batch, n, causal,
                                          NULL, &got);
            ck_assert_msg(rl == rg, "mode %d causal %d: layer %d, desc %d (%s)",
                          m, causal, rl, rg, clf_last_error());
            if (rl != 0)
                continue;
            ck_assert_msg(fabs(got - lib) <= 1e-12 * fabs(lib),
                          "D=%zu h=%zu N=%zu k=%zu b=%zu sharing %d share_kv "
                          "%d one_kv %d mode %d causal %d: layer %.17g, desc "
                          "%.17g",
                          d->d_model, d->heads, d->max_seq_len, d->k,
                          d->causal_block, (int)d->sharing, d->share_kv,
                          d->one_kv_head, m, causal, lib, got);
            compared++;
        }
    }
    clf_attention_destroy(att);
    return compared;
}

START_TEST(flops_desc_equals_layer_count)
{
    size_t i, b;
    int sharing, share_kv, one_kv, compared = 0;

    for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (b = 0; b < sizeof biases / sizeof biases[0]; b++)
            for (sharing = 0; sharing < 3; sharing++)
                for (share_kv = 0; share_kv < 2; share_kv++)
                    for (one_kv = 0; one_kv < 2; one_kv++) {
                        clf_attention_desc d =
                            desc_of(shapes[i].D, shapes[i].h, shapes[i].dh,
                                    shapes[i].N, shapes[i].k, shapes[i].block);
                        d.sharing = (clf_sharing)sharing;
                        d.share_kv = share_kv;
                        d.one_kv_head = one_kv;
                        d.bias_q = biases[b][0];
                        d.bias_k = biases[b][1];
                        d.bias_v = share_kv ? 0 : biases[b][2];
                        d.bias_out = biases[b][3];
                        d.compressed_bias = biases[b][4];
                        compared +=
                            compare_desc(&d, shapes[i].batch, shapes[i].n);
                    }
    /* every combination but causal Linformer with compressed_bias */
    ck_assert_int_eq(compared, 4 * 5 * 3 * 2 * 2 * 4 - 4 * 2 * 3 * 2 * 2);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("flops");
    TCase *t = tcase_create("flops");

    tcase_set_timeout(t, 120);
    tcase_add_test(t, flops_desc_linformer_by_hand);
    tcase_add_test(t, flops_desc_causal_by_hand);
    tcase_add_test(t, flops_desc_rejects_impossible_shapes_naming_them);
    tcase_add_test(t, flops_desc_equals_layer_count);
    suite_add_tcase(s, t);
    return tu_run(s, 1);
}
