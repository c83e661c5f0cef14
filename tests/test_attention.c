/* The attention layer against the double-precision reference.
 *
 * Tolerance: max |y - y_ref| <= TOL * max |y_ref| over the whole output, with
 * TOL = 1e-5: float32 GEMMs with sums of at most a few hundred terms stay
 * well inside it, while any indexing or layout mistake is of order 1. */
#include "../bench/reference.h"
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

/* One host-path forward of (B, n) in mode against the reference. */
static void
check_forward(struct layer *l, clf_mode mode, size_t B, size_t n,
              unsigned long long seed)
{
    size_t count = B * n * l->desc.d_model;
    float *x = tu_malloc(count * sizeof *x);
    float *y = tu_malloc(count * sizeof *y);
    double *ref = tu_malloc(count * sizeof *ref);
    char what[160];
    size_t i;
    int rc;

    tu_fill(x, count, seed, -1.0f, 1.0f);
    for (i = 0; i < count; i++)
        y[i] = NAN; /* poison: an unwritten element fails the check */
    ck_assert_int_eq(clf_attention_set_mode(l->att, mode), 0);
    rc = clf_attention_forward(l->att, x, B, n, y);
    ck_assert_msg(rc == 0, "forward: %s", clf_last_error());
    ref_attention(&l->ref, mode == CLF_MODE_FULL, x, B, n, ref);
    snprintf(what, sizeof what, "%s B=%zu n=%zu N=%zu k=%zu sharing=%d",
             mode == CLF_MODE_FULL ? "full" : "linformer", B, n,
             l->desc.max_seq_len, l->desc.k, (int)l->desc.sharing);
    tu_assert_close(y, ref, count, TOL, what);
    free(x);
    free(y);
    free(ref);
}

/* Runs a configuration over several lengths and batches, both modes. */
static void
sweep(const clf_attention_desc *d, unsigned long long seed)
{
    const size_t lens[] = {1, 7, d->max_seq_len - 3, d->max_seq_len};
    const size_t batches[] = {1, 3};
    struct layer l;
    size_t i, j;

    layer_make(&l, d, seed);
    for (i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (j = 0; j < 2; j++) {
            check_forward(&l, CLF_MODE_LINFORMER, batches[j], lens[i],
                          seed + 100 * i + j);
            check_forward(&l, CLF_MODE_FULL, batches[j], lens[i],
                          seed + 100 * i + j + 50);
        }
    layer_free(&l);
}

static clf_attention_desc
base_desc(void)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 4;
    d.max_seq_len = 40;
    d.k = 8;
    return d;
}

START_TEST(attention_golden_example)
{
    clf_attention *att = tu_golden_layer();
    const float x[3] = {1.0f, 2.0f, 3.0f};
    float y[3] = {NAN, NAN, NAN};

    ck_assert_int_eq(clf_attention_set_mode(att, CLF_MODE_FULL), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 1, 3, y), 0);
    ck_assert_double_eq_tol(y[0], 25.7521, 1e-4);

    ck_assert_int_eq(clf_attention_set_mode(att, CLF_MODE_LINFORMER), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 1, 3, y), 0);
    ck_assert_double_eq_tol(y[0], 27.2636, 1e-4);
    clf_attention_destroy(att);
}
END_TEST

/* The golden example again through each way of computing attention over
 * the slots: its one-dimensional layer embedded in coordinate 0 of a
 * 16-wide one (identity weights but W_q = 4 I, which undoes the 1/sqrt(16)
 * score scale, and W_v = 10 I), so that d_h = 16 allows the fused
 * kernel. */
START_TEST(attention_golden_example_both_ways)
{
    enum { W = 16 };
    clf_attention_desc d;
    clf_attention *att = NULL;
    const float e[6] = {0.5f, 0.5f, 0.0f, 0.0f, 0.0f, 1.0f};
    float eye[W * W], four[W * W], ten[W * W], x[3 * W], y[3 * W];
    int v, i;

    memset(&d, 0, sizeof d);
    d.d_model = W;
    d.heads = 1;
    d.max_seq_len = 3;
    d.k = 2;
    memset(eye, 0, sizeof eye);
    memset(four, 0, sizeof four);
    memset(ten, 0, sizeof ten);
    for (i = 0; i < W; i++) {
        eye[i * W + i] = 1.0f;
        four[i * W + i] = 4.0f;
        ten[i * W + i] = 10.0f;
    }
    memset(x, 0, sizeof x);
    for (i = 0; i < 3; i++)
        x[i * W] = (float)(i + 1);
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_Q, four, W * W),
                     0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_K, eye, W * W),
                     0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_V, ten, W * W),
                     0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_OUT, eye, W * W),
                     0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_PROJ_E, e, 6), 0);
    ck_assert_int_eq(clf_attention_set_weight(att, CLF_PROJ_F, e, 6), 0);
    for (v = CLF_ATTEND_GEMM; v <= CLF_ATTEND_FLASH; v++) {
        clf__attention_set_attend(att, v);
        for (i = 0; i < 3 * W; i++)
            y[i] = NAN;
        ck_assert_int_eq(clf_attention_forward(att, x, 1, 3, y), 0);
        ck_assert_int_eq(clf__attention_last_fused(att), v == CLF_ATTEND_FUSED);
        ck_assert_int_eq(clf__attention_last_flash(att), v == CLF_ATTEND_FLASH);
        ck_assert_double_eq_tol(y[0], 27.2636, 1e-4);
        for (i = 1; i < W; i++)
            ck_assert_float_eq(y[i], 0.0f);
    }
    clf_attention_destroy(att);
}
END_TEST

START_TEST(attention_matches_reference_headwise)
{
    clf_attention_desc d = base_desc();
    sweep(&d, 1);
}
END_TEST

START_TEST(attention_matches_reference_per_head)
{
    clf_attention_desc d = base_desc();
    d.sharing = CLF_SHARE_PER_HEAD;
    sweep(&d, 2);
}
END_TEST

START_TEST(attention_matches_reference_key_value)
{
    clf_attention_desc d = base_desc();
    d.sharing = CLF_SHARE_KEY_VALUE;
    sweep(&d, 3);
}
END_TEST

START_TEST(attention_matches_reference_share_kv)
{
    clf_attention_desc d = base_desc();
    d.share_kv = 1;
    sweep(&d, 4);
    d.sharing = CLF_SHARE_PER_HEAD;
    sweep(&d, 5);
}
END_TEST

START_TEST(attention_matches_reference_one_kv_head)
{
    clf_attention_desc d = base_desc();
    d.one_kv_head = 1;
    sweep(&d, 6);
    d.sharing = CLF_SHARE_PER_HEAD;
    sweep(&d, 7);
    d.sharing = CLF_SHARE_KEY_VALUE;
    sweep(&d, 8);
}
END_TEST

START_TEST(attention_matches_reference_biases)
{
    clf_attention_desc d = base_desc();
    int s;

    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE; s++) {
        d.sharing = (clf_sharing)s;
        d.one_kv_head = 0;
        sweep(&d, 10 + (unsigned long long)s);
        d.one_kv_head = 1;
        sweep(&d, 20 + (unsigned long long)s);
    }
    d.sharing = CLF_SHARE_HEADWISE;
    d.bias_v = 0;
    d.share_kv = 1;
    sweep(&d, 30);
}
END_TEST

/* Both sequence-compression orders are exact; make sure each is exercised
 * with biases (the compress-first rowsum(E) b^T term especially). */
START_TEST(attention_both_compression_orders)
{
    clf_attention_desc d = base_desc();
    struct layer l;

    d.bias_k = d.bias_v = 1;
    d.sharing = CLF_SHARE_PER_HEAD;
    d.d_model = 64;
    d.heads = 2; /* h*k < D: compress-first wins for long n */
    layer_make(&l, &d, 40);
    ck_assert_int_eq(clf__attention_compress_first(l.att, 2, 40), 1);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 40, 41);
    ck_assert_int_eq(clf__attention_compress_first(l.att, 2, 2), 0);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 2, 42);
    layer_free(&l);

    d.d_model = 16;
    d.heads = 4; /* h*k > D: project-first wins */
    layer_make(&l, &d, 43);
    ck_assert_int_eq(clf__attention_compress_first(l.att, 1, 40), 0);
    check_forward(&l, CLF_MODE_LINFORMER, 1, 40, 44);
    layer_free(&l);
}
END_TEST

START_TEST(attention_k_at_least_n)
{
    clf_attention_desc d = base_desc();
    struct layer l;

    d.k = 12;
    d.max_seq_len = 12; /* k == N */
    d.bias_k = 1;
    layer_make(&l, &d, 50);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 12, 51);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 5, 52); /* k > n */
    check_forward(&l, CLF_MODE_LINFORMER, 1, 1, 53);
    layer_free(&l);
}
END_TEST

START_TEST(attention_odd_head_dim)
{
    clf_attention_desc d = base_desc();

    d.d_model = 30;
    d.heads = 3;
    d.head_dim = 7; /* h*d_h != D */
    d.max_seq_len = 33;
    d.k = 5;
    d.bias_q = d.bias_out = 1;
    sweep(&d, 60);
}
END_TEST

/* Workspaces grow and are reused; results must not depend on call order. */
START_TEST(attention_reuses_workspaces)
{
    /* Each way of steps 3-5 pinned in turn: unpinned, the shorter shape's
     * bucket may time another way, whose own workspace then grows.  The
     * GEMMs are pinned to the blocked way for the same reason: a shape
     * whose GEMMs a stored or timed choice gave to another way than the
     * first forward's would make the weights' kept transposes then. */
    static const int ways[] = {CLF_ATTEND_GEMM, CLF_ATTEND_FUSED,
                               CLF_ATTEND_FLASH};
    clf_attention_desc d = base_desc();
    struct layer l;
    size_t before = 0, after = 0, i;

    for (i = 0; i < sizeof ways / sizeof ways[0]; i++) {
        layer_make(&l, &d, 70);
        clf__attention_set_attend(l.att, ways[i]);
        ck_assert_int_eq(clf__gemm_pin(l.att->ctx, CLF_GEMM_BLOCKED), 0);
        check_forward(&l, CLF_MODE_LINFORMER, 3, 40, 71);
        ck_assert_int_eq(clf_attention_device_bytes(l.att, &before), 0);
        check_forward(&l, CLF_MODE_LINFORMER, 1, 9, 72);
        check_forward(&l, CLF_MODE_LINFORMER, 2, 40, 73);
        ck_assert_int_eq(clf_attention_device_bytes(l.att, &after), 0);
        ck_assert_msg(before == after, "way %d: %zu bytes, then %zu", ways[i],
                      before, after);
        ck_assert_uint_gt(before, 0);
        ck_assert_int_eq(clf__gemm_pin(l.att->ctx, CLF_GEMM_UNDECIDED), 0);
        layer_free(&l);
    }
}
END_TEST

/* The cl_mem path with offsets: results in place, nothing else touched. */
START_TEST(attention_cl_mem_path_with_offsets)
{
    clf_context *ctx = tu_context();
    clf_attention_desc d = base_desc();
    struct layer l;
    const size_t B = 2, n = 37, xoff = 5, yoff = 11, pad = 13;
    const size_t count = B * n * d.d_model;
    const size_t ylen = yoff + count + pad;
    float *x = tu_malloc(count * sizeof *x);
    float *y = tu_malloc(ylen * sizeof *y);
    float *xpad = tu_malloc((xoff + count) * sizeof *xpad);
    double *ref = tu_malloc(count * sizeof *ref);
    cl_mem xb, yb;
    cl_int err;
    size_t i;
    int rc;

    d.bias_out = 1;
    layer_make(&l, &d, 80);
    tu_fill(x, count, 81, -1.0f, 1.0f);
    for (i = 0; i < xoff; i++)
        xpad[i] = 1e30f;
    memcpy(xpad + xoff, x, count * sizeof *x);
    for (i = 0; i < ylen; i++)
        y[i] = -7.0f;
    xb = clCreateBuffer(clf_context_cl_context(ctx),
                        CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                        (xoff + count) * sizeof(float), xpad, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    yb = clCreateBuffer(clf_context_cl_context(ctx),
                        CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                        ylen * sizeof(float), y, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    rc = clf_attention_forward_cl(l.att, xb, xoff, yb, yoff, B, n);
    ck_assert_msg(rc == 0, "forward_cl: %s", clf_last_error());
    ck_assert_int_eq(clEnqueueReadBuffer(clf_context_cl_queue(ctx), yb, CL_TRUE,
                                         0, ylen * sizeof(float), y, 0, NULL,
                                         NULL),
                     CL_SUCCESS);
    ref_attention(&l.ref, 0, x, B, n, ref);
    tu_assert_close(y + yoff, ref, count, TOL, "cl_mem path");
    for (i = 0; i < yoff; i++)
        ck_assert_float_eq(y[i], -7.0f);
    for (i = yoff + count; i < ylen; i++)
        ck_assert_float_eq(y[i], -7.0f);

    /* In place: x and y the same region. */
    rc = clf_attention_forward_cl(l.att, xb, xoff, xb, xoff, B, n);
    ck_assert_msg(rc == 0, "in-place forward_cl: %s", clf_last_error());
    ck_assert_int_eq(clEnqueueReadBuffer(clf_context_cl_queue(ctx), xb, CL_TRUE,
                                         xoff * sizeof(float),
                                         count * sizeof(float), y, 0, NULL,
                                         NULL),
                     CL_SUCCESS);
    tu_assert_close(y, ref, count, TOL, "in-place cl_mem path");

    clReleaseMemObject(xb);
    clReleaseMemObject(yb);
    layer_free(&l);
    free(x);
    free(y);
    free(xpad);
    free(ref);
}
END_TEST

static void
force_all(clf_context *ctx, const char *softmax, const char *gemm,
          const char *attend)
{
    ck_assert_int_eq(clf_context_force_kernel(ctx, "softmax", softmax), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", gemm), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", attend), 0);
}

/* A caller's context, device and queue, adopted for embedding. */
START_TEST(attention_adopted_context)
{
    clf_context *own = tu_context(), *adopted = NULL;
    cl_context cctx = clf_context_cl_context(own);
    cl_device_id dev = clf_context_cl_device(own);
    cl_command_queue q;
    clf_attention_desc d = base_desc();
    clf_attention *att = NULL;
    float *x, *y, *y2;
    size_t count = 2 * 9 * d.d_model;
    cl_int err;

    q = clCreateCommandQueue(cctx, dev, 0, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clf_context_adopt(&adopted, cctx, dev, q), 0);
    /* Each context makes its own kernel choices; the same kernels give the
     * same bits. */
    force_all(adopted, "group", "clblast", "gemm");
    force_all(own, "group", "clblast", "gemm");
    ck_assert_int_eq(clf_attention_create(&att, adopted, &d), 0);
    ck_assert_int_eq(clf_attention_randomize(att, 90), 0);
    x = tu_malloc(count * sizeof *x);
    y = tu_malloc(count * sizeof *y);
    y2 = tu_malloc(count * sizeof *y2);
    tu_fill(x, count, 91, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_forward(att, x, 2, 9, y), 0);
    clf_attention_destroy(att);
    clf_context_destroy(adopted);
    /* The caller's objects survive the adopted context. */
    ck_assert_int_eq(clFinish(q), CL_SUCCESS);
    clReleaseCommandQueue(q);

    /* Same seed on the suite's own context gives the same numbers. */
    ck_assert_int_eq(clf_attention_create(&att, own, &d), 0);
    ck_assert_int_eq(clf_attention_randomize(att, 90), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 2, 9, y2), 0);
    ck_assert_mem_eq(y, y2, count * sizeof *y);
    force_all(own, NULL, NULL, NULL);
    clf_attention_destroy(att);
    free(x);
    free(y);
    free(y2);
}
END_TEST

/* fairseq's order: K/V biases once per compressed slot. */
START_TEST(attention_compressed_bias_matches_reference)
{
    clf_attention_desc d = base_desc();
    struct layer l;
    int s;

    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    d.compressed_bias = 1;
    for (s = CLF_SHARE_HEADWISE; s <= CLF_SHARE_KEY_VALUE; s++) {
        d.sharing = (clf_sharing)s;
        sweep(&d, 110 + (unsigned long long)s);
    }
    /* Both compression orders. */
    d.sharing = CLF_SHARE_PER_HEAD;
    d.d_model = 16;
    d.heads = 4;
    layer_make(&l, &d, 120);
    ck_assert_int_eq(clf__attention_compress_first(l.att, 1, 40), 0);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 40, 121);
    layer_free(&l);
    d.sharing = CLF_SHARE_HEADWISE;
    d.d_model = 32;
    layer_make(&l, &d, 122);
    ck_assert_int_eq(clf__attention_compress_first(l.att, 1, 40), 1);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 40, 123);
    layer_free(&l);
}
END_TEST

/* Weights set after a forward reach the next one, where the blocked GEMM
 * keeps the W matrices' transposes: setting a weight drops its kept copy,
 * and destroying the layer forgets its weights. */
START_TEST(attention_new_weights_reach_kept_transposes)
{
    static const int wm[] = {CLF_WEIGHT_Q, CLF_WEIGHT_K, CLF_WEIGHT_V,
                             CLF_WEIGHT_OUT};
    clf_context *ctx = tu_context();
    clf_attention_desc d = base_desc();
    const int was = clf__gemm_pinned(ctx);
    struct layer l;
    size_t kept0, count, bytes0 = 0, bytes1 = 0, i;

    ck_assert_int_eq(clf_context_build(ctx), 0);
    kept0 = clf__gemm_kept_count(ctx);
    clf__gemm_pin(ctx, CLF_GEMM_BLOCKED);
    layer_make(&l, &d, 80);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 40, 81);
    ck_assert_uint_eq(clf__gemm_kept_bytes(ctx, l.att->w[CLF_WEIGHT_Q]),
                      (size_t)32 * 32 * sizeof(float));
    ck_assert_int_eq(clf_attention_device_bytes(l.att, &bytes0), 0);
    for (i = 0; i < sizeof wm / sizeof wm[0]; i++) {
        ck_assert_int_eq(
            clf_attention_weight_size(l.att, (clf_weight)wm[i], &count), 0);
        tu_fill(l.w[wm[i]], count, 82 + i, -0.2f, 0.2f);
        ck_assert_int_eq(clf_attention_set_weight(l.att, (clf_weight)wm[i],
                                                  l.w[wm[i]], count),
                         0);
        ck_assert_uint_eq(clf__gemm_kept_bytes(ctx, l.att->w[wm[i]]), 0);
    }
    ck_assert_int_eq(clf_attention_device_bytes(l.att, &bytes1), 0);
    ck_assert_uint_eq(bytes0 - bytes1, (size_t)4 * 32 * 32 * sizeof(float));
    check_forward(&l, CLF_MODE_LINFORMER, 2, 40, 81);
    layer_free(&l);
    clf__gemm_pin(ctx, was);
    ck_assert_uint_eq(clf__gemm_kept_count(ctx), kept0);
}
END_TEST

/* One Linformer forward with steps 3 to 5 forced each way (the fused and
 * the streaming kernel must really run: the layer reports it). */
static void
check_both_ways(struct layer *l, size_t B, size_t n, unsigned long long seed)
{
    int v;

    for (v = CLF_ATTEND_GEMM; v <= CLF_ATTEND_FLASH; v++) {
        clf__attention_set_attend(l->att, v);
        check_forward(l, CLF_MODE_LINFORMER, B, n, seed);
        ck_assert_int_eq(clf__attention_last_fused(l->att),
                         v == CLF_ATTEND_FUSED);
        ck_assert_int_eq(clf__attention_last_flash(l->att),
                         v == CLF_ATTEND_FLASH);
    }
    clf__attention_set_attend(l->att, CLF_ATTEND_UNDECIDED);
}

/* The fused kernel against the reference in every sharing mode, with d_h
 * of 16 and of 80 (one 64-column block and one of 16), k below, at and
 * past its 64-slot blocks, and n with row tails (not a multiple of 4). */
START_TEST(attention_fused_matches_reference)
{
    const size_t dhs[] = {16, 80}, ks[] = {5, 64, 70};
    const size_t lens[] = {1, 6, 37};
    clf_attention_desc d = base_desc();
    struct layer l;
    size_t a, b, c, m;

    d.d_model = 24;
    d.heads = 2;
    d.max_seq_len = 80;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    for (m = 0; m < 5; m++) {
        d.sharing = m == 1   ? CLF_SHARE_PER_HEAD
                    : m == 2 ? CLF_SHARE_KEY_VALUE
                             : CLF_SHARE_HEADWISE;
        d.share_kv = m == 3;
        d.bias_v = m != 3;
        d.one_kv_head = m == 4;
        for (a = 0; a < 2; a++)
            for (b = 0; b < 3; b++) {
                d.head_dim = dhs[a];
                d.k = ks[b];
                layer_make(&l, &d, 200 + 10 * m + 3 * a + b);
                for (c = 0; c < 3; c++)
                    check_both_ways(&l, c == 1 ? 1 : 2, lens[c],
                                    300 + 7 * m + 3 * a + b + c);
                layer_free(&l);
            }
    }
}
END_TEST

/* Where the fused kernel does not apply (d_h not a multiple of 16, causal,
 * full mode), forcing it changes nothing. */
START_TEST(attention_fused_only_where_it_applies)
{
    clf_attention_desc d = base_desc(); /* d_h = 8 */
    struct layer l;

    layer_make(&l, &d, 400);
    clf__attention_set_attend(l.att, CLF_ATTEND_FUSED);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 20, 401);
    ck_assert_int_eq(clf__attention_last_fused(l.att), 0);
    layer_free(&l);
    d.head_dim = 16;
    layer_make(&l, &d, 402);
    clf__attention_set_attend(l.att, CLF_ATTEND_FUSED);
    check_forward(&l, CLF_MODE_FULL, 2, 20, 403);
    ck_assert_int_eq(clf__attention_last_fused(l.att), 0);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 20, 404);
    ck_assert_int_eq(clf__attention_last_fused(l.att), 1);
    layer_free(&l);
}
END_TEST

/* With nothing stored, the first forward times the ways that apply to its
 * shape (here the GEMM path, the fused and the streaming kernel) and keeps
 * the fastest, as it does for the GEMM way. */
START_TEST(attention_way_is_chosen_by_timing)
{
    clf_context *ctx = tu_context();
    clf_attention_desc d = base_desc();
    char *was = getenv("CLINFORMER_CACHE_DIR");
    const double *ms = ctx->last_ms[CLF_KIND_ATTEND];
    char want[64];
    int v, i;
    struct layer l;

    if (getenv("CLINFORMER_KERNELS") != NULL)
        return; /* forced: nothing is timed */
    was = was != NULL ? strdup(was) : NULL;
    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    ctx->nchoices = 0; /* forget what this context knows */
    ctx->choices_loaded = 1;
    d.head_dim = 16;
    layer_make(&l, &d, 410);
    check_forward(&l, CLF_MODE_LINFORMER, 1, 20, 411);
    if (was != NULL)
        setenv("CLINFORMER_CACHE_DIR", was, 1);
    else
        unsetenv("CLINFORMER_CACHE_DIR");
    free(was);
    v = ctx->last[CLF_KIND_ATTEND];
    ck_assert_int_ge(v, 0);
    ck_assert_int_eq(ctx->last_source[CLF_KIND_ATTEND], CLF_SOURCE_TIMED);
    /* gemm, fused and flash apply here (d_h 16, plain Linformer), and
     * flashwg where the device takes its work-groups (a GPU): the winner
     * is the fastest of those timed, whichever it is. */
    ck_assert(ms[0] > 0.0 && ms[1] > 0.0 && ms[2] > 0.0);
    ck_assert_int_eq(clf__attention_last_fused(l.att),
                     v == CLF_ATTEND_FUSED - 1);
    ck_assert_int_eq(clf__attention_last_flash(l.att),
                     v == CLF_ATTEND_FLASH - 1);
    for (i = 0; i < CLF_ATTEND_FLASHWG; i++)
        ck_assert_msg(ms[i] <= 0.0 || ms[v] <= ms[i],
                      "chose %s (%.3f ms) over %s (%.3f ms)",
                      clf__choice_name(CLF_KIND_ATTEND, v), ms[v],
                      clf__choice_name(CLF_KIND_ATTEND, i), ms[i]);
    snprintf(want, sizeof want, "attend: %s (timed lin.n32.l",
             clf__choice_name(CLF_KIND_ATTEND, v));
    ck_assert_ptr_nonnull(strstr(clf_context_kernel_choices(ctx), want));
    snprintf(want, sizeof want, "gemm: %s (timed m32.",
             clf__choice_name(CLF_KIND_GEMM, ctx->last[CLF_KIND_GEMM]));
    ck_assert_ptr_nonnull(strstr(clf_context_kernel_choices(ctx), want));
    layer_free(&l);
}
END_TEST

/* Full mode times the ways on a shorter sequence; the cut keeps n's
 * remainder mod 16, so the GEMM path's GEMMs fit the blocked kernel (n a
 * multiple of 16) in the timing where the forward's do, and only there.
 * (A cut to 1448 at 8 heads sent the score GEMM to CLBlast in the timing
 * alone, so the GEMM path lost to the streaming kernel at every n.) */
START_TEST(attention_way_timing_keeps_the_gemm_fit)
{
    static const size_t n[] = {16, 1000, 1448, 1449, 1600, 4096, 4100, 65537};
    size_t i, heads;

    for (heads = 1; heads <= 64; heads *= 2)
        for (i = 0; i < sizeof n / sizeof n[0]; i++) {
            const size_t full = clf__ways_timing_rows(n[i], heads, 1);
            const size_t lin = clf__ways_timing_rows(n[i], heads, 0);
            ck_assert_msg(full <= n[i] && full <= 2048 &&
                              (double)full * full * heads <= 16777216.0,
                          "full: %zu rows for n %zu, %zu heads", full, n[i],
                          heads);
            ck_assert_msg(full % 16 == n[i] % 16, "full: %zu for n %zu", full,
                          n[i]);
            /* n itself up to the cap, else the longest under it with
             * n's remainder */
            ck_assert_msg(n[i] <= 4096 ? lin == n[i]
                                       : lin <= 4096 && lin > 4096 - 16 &&
                                             lin % 16 == n[i] % 16,
                          "Linformer: %zu for n %zu", lin, n[i]);
        }
    ck_assert_uint_eq(clf__ways_timing_rows(4096, 8, 1), 1440);
    ck_assert_uint_eq(clf__ways_timing_rows(4100, 8, 1), 1444);
    ck_assert_uint_eq(clf__ways_timing_rows(1000, 8, 1), 1000);
}
END_TEST

/* Before any forward a fresh context has chosen nothing; forcing by
 * environment is reported as such. */
START_TEST(attention_choices_are_reported)
{
    clf_context *ctx = NULL;
    char *was = getenv("CLINFORMER_KERNELS");
    int v = 0;

    was = was != NULL ? strdup(was) : NULL;
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_str_eq(clf_context_kernel_choices(ctx),
                     "softmax: not chosen yet; gemm: not chosen yet; "
                     "attend: not chosen yet");
    setenv("CLINFORMER_KERNELS", "gemm=clblast", 1);
    ck_assert_int_eq(clf__gemm_resolve(ctx, CLF_ROLE_PROJ, 64, 64, 64, 1, &v),
                     0);
    if (was != NULL)
        setenv("CLINFORMER_KERNELS", was, 1);
    else
        unsetenv("CLINFORMER_KERNELS");
    free(was);
    ck_assert_int_eq(v, CLF_GEMM_CLBLAST);
    ck_assert_ptr_nonnull(
        strstr(clf_context_kernel_choices(ctx), "gemm: clblast (forced)"));
    ck_assert_ptr_nonnull(
        strstr(clf_context_kernel_choices(ctx), "softmax: not chosen yet"));
    clf_context_destroy(ctx);
}
END_TEST

/* The entry of the launch log with this kernel and global size, or -1. */
static int
launch_find(const char *kernel, size_t g0, size_t g1, size_t g2,
            clf_launch *out)
{
    size_t count = 0, i;

    ck_assert_int_eq(clf_context_launch_count(tu_context(), &count, NULL), 0);
    for (i = 0; i < count; i++) {
        ck_assert_int_eq(clf_context_launch(tu_context(), i, out), 0);
        if (strcmp(out->kernel, kernel) == 0 && out->global[0] == g0 &&
            out->global[1] == g1 && out->global[2] == g2)
            return (int)i;
    }
    return -1;
}

/* Every entry's counts agree with its sizes: work-items the product of
 * the global size, work-groups of each dimension rounded up. */
static size_t
launch_entries_consistent(void)
{
    size_t count = 0, dropped = 9, i, d, items, groups;
    clf_launch e;

    ck_assert_int_eq(clf_context_launch_count(tu_context(), &count, &dropped),
                     0);
    ck_assert_uint_eq(dropped, 0);
    for (i = 0; i < count; i++) {
        ck_assert_int_eq(clf_context_launch(tu_context(), i, &e), 0);
        ck_assert_uint_ge(e.calls, 1);
        if (e.dims == 0) {
            ck_assert_str_eq(e.kernel, "CLBlast");
            continue;
        }
        ck_assert_uint_le(e.dims, 3);
        items = 1;
        groups = e.local[0] != 0;
        for (d = 0; d < e.dims; d++) {
            items *= e.global[d];
            if (e.local[0] != 0)
                groups *= (e.global[d] + e.local[d] - 1) / e.local[d];
        }
        ck_assert_uint_eq(e.items, items);
        ck_assert_uint_eq(e.groups, groups);
    }
    return count;
}

/* The launch log records each kernel's geometry while on: the tiled
 * GEMM's Q projection (B*n x dq over D) as ceil(dq / 64) x ceil(B*n / 64)
 * work-groups of 8 x 8, the same GEMM through CLBlast by its sizes, the
 * streaming kernel's launches; off, nothing is added, and on again the
 * log starts empty. */
START_TEST(attention_launches_are_logged)
{
    const size_t B = 3, n = 70;
    char *was = getenv("CLINFORMER_KERNELS");
    clf_attention_desc d;
    struct layer l;
    clf_launch e;
    size_t count = 0, before;
    int i;

    memset(&d, 0, sizeof d);
    d.d_model = 96;
    d.heads = 3;
    d.max_seq_len = 80;
    d.k = 24;
    d.bias_q = d.bias_out = 1;
    was = was != NULL ? strdup(was) : NULL;
    layer_make(&l, &d, 40);
    ASSERT_FAILS(clf_context_launch(tu_context(), 0, &e), CLF_EINVALID_ARGUMENT,
                 "launch index 0");
    setenv("CLINFORMER_KERNELS", "gemm=tiled,attend=flash", 1);
    ck_assert_int_eq(clf_context_record_launches(tu_context(), 1), 0);
    check_forward(&l, CLF_MODE_LINFORMER, B, n, 41);
    i = launch_find("clf_gemm_tiled", 2 * 8, 4 * 8, 1, &e);
    if (clf__tiled_usable(tu_context())) {
        ck_assert_msg(i >= 0, "no tiled Q projection in the log");
        ck_assert_uint_eq(e.dims, 3);
        ck_assert_uint_eq(e.local[0], 8);
        ck_assert_uint_eq(e.local[1], 8);
        ck_assert_uint_eq(e.groups, 2 * 4);
        ck_assert_uint_eq(e.items, 2 * 8 * 4 * 8);
    } else { /* the device refuses its groups: the forced way falls back */
        ck_assert_msg(i < 0, "a tiled launch on a device that refuses it");
    }
    count = launch_entries_consistent();
    for (i = 0; i < (int)count; i++) {
        ck_assert_int_eq(clf_context_launch(tu_context(), (size_t)i, &e), 0);
        if (strcmp(e.kernel, "clf_flash") == 0)
            break;
    }
    ck_assert_msg(i < (int)count, "no streaming kernel in the log");
    setenv("CLINFORMER_KERNELS", "gemm=clblast,attend=gemm", 1);
    check_forward(&l, CLF_MODE_LINFORMER, B, n, 42);
    ck_assert_int_ge(launch_find("CLBlast", B * n, 96, 96, &e), 0);
    ck_assert_uint_eq(e.local[0], 1);
    before = launch_entries_consistent();
    ck_assert_uint_gt(before, count);
    ck_assert_int_eq(clf_context_record_launches(tu_context(), 0), 0);
    check_forward(&l, CLF_MODE_FULL, B, n, 43);
    ck_assert_uint_eq(launch_entries_consistent(), before);
    ck_assert_int_eq(clf_context_record_launches(tu_context(), 1), 0);
    ck_assert_uint_eq(launch_entries_consistent(), 0);
    ck_assert_int_eq(clf_context_record_launches(tu_context(), 0), 0);
    ASSERT_FAILS(clf_context_launch_count(NULL, &count, NULL),
                 CLF_ENULL_ARGUMENT, "ctx");
    ASSERT_FAILS(clf_context_launch_count(tu_context(), NULL, NULL),
                 CLF_ENULL_ARGUMENT, "count");
    ASSERT_FAILS(clf_context_launch(tu_context(), 0, NULL), CLF_ENULL_ARGUMENT,
                 "out");
    if (was != NULL)
        setenv("CLINFORMER_KERNELS", was, 1);
    else
        unsetenv("CLINFORMER_KERNELS");
    free(was);
    layer_free(&l);
}
END_TEST

/* A copy of ctx's launch log, to compare two forwards'. */
static size_t
launch_copy(clf_context *ctx, clf_launch *out, size_t cap)
{
    size_t count = 0, i;

    ck_assert_int_eq(clf_context_launch_count(ctx, &count, NULL), 0);
    ck_assert_uint_le(count, cap);
    for (i = 0; i < count; i++)
        ck_assert_int_eq(clf_context_launch(ctx, i, &out[i]), 0);
    return count;
}

/* The launches of timing a kernel choice are not logged: on a fresh
 * context with no store, a forward that times its choices logs what the
 * same forward logs once they are known. */
START_TEST(attention_launch_log_leaves_out_timing)
{
    static clf_launch first[256], second[256];
    char *was = getenv("CLINFORMER_KERNELS");
    char *cache = getenv("CLINFORMER_CACHE_DIR");
    clf_attention_desc d;
    clf_context *ctx = NULL;
    clf_attention *att = NULL;
    float *x = tu_malloc(2 * 87 * 40 * sizeof *x), *y, *w;
    size_t n1, n2, count;
    int i;

    memset(&d, 0, sizeof d);
    d.d_model = 40;
    d.heads = 5;
    d.max_seq_len = 90;
    d.k = 19;
    was = was != NULL ? strdup(was) : NULL;
    cache = cache != NULL ? strdup(cache) : NULL;
    unsetenv("CLINFORMER_KERNELS");
    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_int_eq(clf_attention_create(&att, ctx, &d), 0);
    for (i = 0; i < CLF_WEIGHT_COUNT; i++) {
        if (clf_attention_weight_size(att, (clf_weight)i, &count) != 0)
            continue;
        w = tu_malloc(count * sizeof *w);
        tu_fill(w, count, 60 + (unsigned)i, -0.2f, 0.2f);
        ck_assert_int_eq(clf_attention_set_weight(att, (clf_weight)i, w, count),
                         0);
        free(w);
    }
    y = tu_malloc(2 * 87 * 40 * sizeof *y);
    tu_fill(x, 2 * 87 * 40, 61, -1.0f, 1.0f);
    ck_assert_int_eq(clf_context_record_launches(ctx, 1), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 2, 87, y), 0);
    ck_assert_ptr_nonnull(strstr(clf_context_kernel_choices(ctx), "(timed "));
    n1 = launch_copy(ctx, first, 256);
    ck_assert_int_eq(clf_context_record_launches(ctx, 1), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 2, 87, y), 0);
    n2 = launch_copy(ctx, second, 256);
    ck_assert_uint_gt(n1, 0);
    ck_assert_uint_eq(n1, n2);
    ck_assert_mem_eq(first, second, n1 * sizeof first[0]);
    clf_attention_destroy(att);
    clf_context_destroy(ctx);
    if (was != NULL)
        setenv("CLINFORMER_KERNELS", was, 1);
    if (cache != NULL)
        setenv("CLINFORMER_CACHE_DIR", cache, 1);
    else
        unsetenv("CLINFORMER_CACHE_DIR");
    free(was);
    free(cache);
    free(x);
    free(y);
}
END_TEST

/* Many short sequences on the GEMM path: the scores and the weighted sum
 * take a strided-batched GEMM per head (or per sequence, whichever is
 * fewer), so the launches of a forward do not grow with B (a launch per
 * sequence made B = 128k super-linear); with either GEMM way the results
 * match the reference. */
static size_t
gemm_calls_of(clf_context *ctx, struct layer *l, clf_mode mode, size_t batch,
              unsigned seed)
{
    size_t before = clf__gemm_state(ctx)->gemm_calls;

    check_forward(l, mode, batch, 5, seed);
    return clf__gemm_state(ctx)->gemm_calls - before;
}

START_TEST(attention_many_sequences_batch_their_gemms)
{
    clf_context *ctx = tu_context();
    clf_attention_desc d = base_desc();
    const char *ways[3] = {"clblast", "blocked", "tiled"};
    clf_mode modes[2] = {CLF_MODE_LINFORMER, CLF_MODE_FULL};
    struct layer l;
    int w, i;

    layer_make(&l, &d, 520);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", "gemm"), 0);
    for (w = 0; w < 3; w++) {
        ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", ways[w]), 0);
        for (i = 0; i < 2; i++) {
            size_t few = gemm_calls_of(ctx, &l, modes[i], 8, 521 + 4u * w + i);
            size_t many =
                gemm_calls_of(ctx, &l, modes[i], 64, 523 + 4u * w + i);
            ck_assert_uint_eq(many, few);
            ck_assert_uint_le(many, 6 + 2 * d.heads);
        }
    }
    ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", NULL), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", NULL), 0);
    layer_free(&l);
}
END_TEST

/* A realistic width (D=256, h=4, d_h=64) still meets the tolerance. */
START_TEST(attention_matches_reference_wide)
{
    clf_attention_desc d;
    struct layer l;

    memset(&d, 0, sizeof d);
    d.d_model = 256;
    d.heads = 4;
    d.max_seq_len = 96;
    d.k = 32;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    layer_make(&l, &d, 100);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 96, 101);
    check_forward(&l, CLF_MODE_LINFORMER, 1, 65, 102);
    check_forward(&l, CLF_MODE_FULL, 1, 96, 103);
    layer_free(&l);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("attention");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, attention_golden_example);
    tcase_add_test(tc, attention_matches_reference_headwise);
    tcase_add_test(tc, attention_matches_reference_per_head);
    tcase_add_test(tc, attention_matches_reference_key_value);
    tcase_add_test(tc, attention_matches_reference_share_kv);
    tcase_add_test(tc, attention_matches_reference_one_kv_head);
    tcase_add_test(tc, attention_matches_reference_biases);
    tcase_add_test(tc, attention_both_compression_orders);
    tcase_add_test(tc, attention_k_at_least_n);
    tcase_add_test(tc, attention_odd_head_dim);
    tcase_add_test(tc, attention_reuses_workspaces);
    tcase_add_test(tc, attention_new_weights_reach_kept_transposes);
    tcase_add_test(tc, attention_cl_mem_path_with_offsets);
    tcase_add_test(tc, attention_adopted_context);
    tcase_add_test(tc, attention_matches_reference_wide);
    tcase_add_test(tc, attention_compressed_bias_matches_reference);
    tcase_add_test(tc, attention_golden_example_both_ways);
    tcase_add_test(tc, attention_fused_matches_reference);
    tcase_add_test(tc, attention_fused_only_where_it_applies);
    tcase_add_test(tc, attention_way_is_chosen_by_timing);
    tcase_add_test(tc, attention_way_timing_keeps_the_gemm_fit);
    tcase_add_test(tc, attention_choices_are_reported);
    tcase_add_test(tc, attention_launches_are_logged);
    tcase_add_test(tc, attention_launch_log_leaves_out_timing);
    tcase_add_test(tc, attention_many_sequences_batch_their_gemms);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
