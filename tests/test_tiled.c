/* The tiled GEMM kernel (src/gemm/gemm_tiled.c, cl/gemm_tiled.cl): every GEMM
 * shape and transposition the pipeline calls, forced to `tiled`, against a
 * double-precision product (ref_gemm) on random data, sizes that are
 * multiples of no tile (1, primes) included; every set of sizes the tuner
 * searches; whole forwards with gemm=tiled forced against the reference
 * attention; the choice mechanism (forcing, timing) and the tune file's
 * Tiled records.
 *
 * GEMM tolerance: |c - ref| <= 1.2e-7 (k + 4) mag + 1e-12, mag the sum of
 * the magnitudes of an element's terms: float32 accumulates k products
 * with at most k + a few roundings of 6e-8 relative each, while a wrong
 * index, a lost edge tile or a dropped term errs by the order of mag.
 * Forward tolerance: 1e-5 of the output's scale, as test_attention. */
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Fresh data each run; the seed is printed with any failure. */
static unsigned long long run_seed;

/* How a case calls the GEMM floor: one clf__gemm (E_EX with the bias and
 * activation, packed, batch 1), or clf__gemm_grouped over groups. */
enum entry { E_BATCHED, E_EX, E_GROUPED };

struct tcase {
    const char *what;
    enum entry entry;
    ref_gemm_op op;
    int bias, share_a, share_b;
    size_t groups; /* E_GROUPED: groups of op.batch */
};

/* Leading dimensions with padding, strides of whole matrices (0 when
 * shared), and the elements each operand spans. */
static void
layout(struct tcase *t, size_t *na, size_t *nb, size_t *nc)
{
    ref_gemm_op *g = &t->op;
    size_t arows = g->trans_a ? g->k : g->m, brows = g->trans_b ? g->n : g->k;
    size_t total = g->batch * (t->entry == E_GROUPED ? t->groups : 1);

    g->lda = (g->trans_a ? g->m : g->k) + 3;
    g->ldb = (g->trans_b ? g->k : g->n) + 1;
    g->ldc = t->entry == E_EX ? g->n : g->n + 2;
    g->a_stride = t->share_a ? 0 : arows * g->lda;
    g->b_stride = t->share_b ? 0 : brows * g->ldb;
    g->c_stride = g->m * g->ldc;
    g->a_off = t->entry == E_EX ? 0 : 5;
    g->b_off = t->entry == E_EX ? 0 : 2;
    g->c_off = t->entry == E_EX ? 0 : 3;
    *na = g->a_off + total * arows * g->lda + 1;
    *nb = g->b_off + total * brows * g->ldb + 1;
    *nc = g->c_off + total * g->c_stride + 7;
}

static int
call(clf_context *ctx, int way, const struct tcase *t, cl_mem a, cl_mem b,
     cl_mem c, cl_mem bias)
{
    const ref_gemm_op *g = &t->op;
    const struct clf__gemm_args args = {.trans_a = g->trans_a,
                                        .trans_b = g->trans_b,
                                        .m = g->m,
                                        .n = g->n,
                                        .k = g->k,
                                        .alpha = (float)g->alpha,
                                        .beta = (float)g->beta,
                                        .a = a,
                                        .b = b,
                                        .c = c,
                                        .bias = t->entry == E_EX ? bias : NULL,
                                        .a_off = g->a_off,
                                        .lda = g->lda,
                                        .a_stride = g->a_stride,
                                        .b_off = g->b_off,
                                        .ldb = g->ldb,
                                        .b_stride = g->b_stride,
                                        .c_off = g->c_off,
                                        .ldc = g->ldc,
                                        .c_stride = g->c_stride,
                                        .batch = g->batch,
                                        .act = t->entry == E_EX ? g->act : 0};
    struct clf__gemm_group grp;

    if (t->entry != E_GROUPED)
        return clf__gemm(ctx, way, &args);
    /* Groups laid out after each other, as the heads of a sequence. */
    grp.count = t->groups;
    grp.a = t->share_a ? 0 : g->batch * g->a_stride;
    grp.b = t->share_b ? 0 : g->batch * g->b_stride;
    grp.c = g->batch * g->c_stride;
    return clf__gemm_grouped(ctx, way, &args, &grp);
}

/* Every element of C against the reference; elements outside the
 * matrices unchanged. */
static void
compare(const struct tcase *t, const float *got, const float *c0,
        const double *ref, const double *mag, size_t nc, unsigned long long s)
{
    const ref_gemm_op *g = &t->op;
    size_t i;

    for (i = 0; i < nc; i++) {
        size_t rel = i - g->c_off;
        int inside =
            i >= g->c_off &&
            rel / g->c_stride < g->batch * (t->groups ? t->groups : 1) &&
            rel % g->ldc < g->n;
        double tol = 1.2e-7 * (double)(g->k + 4) * mag[i] + 1e-12;
        if (!inside)
            ck_assert_msg(got[i] == c0[i], "%s: element %zu outside C changed",
                          t->what, i);
        else
            ck_assert_msg(fabs(got[i] - ref[i]) <= tol,
                          "%s m=%zu n=%zu k=%zu ta=%d tb=%d seed %llu: element "
                          "%zu is %.9g, expected %.9g (tolerance %.3g)",
                          t->what, g->m, g->n, g->k, g->trans_a, g->trans_b, s,
                          i, (double)got[i], ref[i], tol);
    }
}

/* Runs t through the library's GEMM entry point with the tiled way and
 * checks that the tiled kernel ran and computed C. */
static void
run_case(struct tcase *t, unsigned long long seed)
{
    clf_context *ctx = tu_tiled_fit(tu_context());
    size_t na, nb, nc, calls = clf__tiled_state(ctx)->calls, total, i;
    float bias[600];
    double *ref, *mag;
    tu_gemm_data d;
    cl_mem mbias;
    ref_gemm_op whole;
    int rc;

    layout(t, &na, &nb, &nc);
    total = t->op.batch * (t->entry == E_GROUPED ? t->groups : 1);
    ref = tu_malloc(nc * sizeof *ref);
    mag = tu_malloc(nc * sizeof *mag);
    tu_gemm_data_make(&d, ctx, na, nb, nc, seed);
    ck_assert_uint_le(t->op.n, 600);
    tu_fill(bias, t->op.n, seed + 3, -1.0f, 1.0f);
    for (i = 0; i < nc; i++)
        ref[i] = d.c0[i], mag[i] = 0.0;
    /* The groups as one batch: they are laid out after each other. */
    whole = t->op;
    whole.batch = total;
    if (t->entry == E_GROUPED && t->share_a)
        whole.a_stride = 0;
    ref_gemm(&whole, d.a, d.b, d.c0, t->bias ? bias : NULL, ref, mag);

    mbias = tu_upload(ctx, bias, t->op.n);
    rc = call(ctx, CLF_GEMM_TILED, t, d.ma, d.mb, d.mc, t->bias ? mbias : NULL);
    ck_assert_msg(rc == 0, "%s: %s", t->what, clf_last_error());
    tu_download(ctx, d.mc, d.c, nc);
    ck_assert_msg(clf__tiled_state(ctx)->calls > calls,
                  "%s: the tiled kernel did not run", t->what);
    compare(t, d.c, d.c0, ref, mag, nc, seed);
    clReleaseMemObject(mbias);
    tu_gemm_data_free(&d);
    free(ref);
    free(mag);
}

static struct tcase
mk(const char *what, enum entry e, int ta, int tb, size_t m, size_t n, size_t k,
   size_t batch, double alpha, double beta)
{
    struct tcase t;

    memset(&t, 0, sizeof t);
    t.what = what;
    t.entry = e;
    t.op.trans_a = ta;
    t.op.trans_b = tb;
    t.op.m = m;
    t.op.n = n;
    t.op.k = k;
    t.op.batch = batch;
    t.op.alpha = alpha;
    t.op.beta = beta;
    return t;
}

/* The pipeline's calls (attention.c, attend_gemm.c, model.c) at sizes that
 * are multiples of no tile, and at 1. */
START_TEST(tiled_pipeline_shapes_match_reference)
{
    static const size_t dims[][3] = {
        {37, 19, 41}, {1, 1, 1}, {1, 67, 13}, {131, 5, 1}, {70, 129, 67}};
    const size_t *d = dims[_i];
    unsigned long long s = run_seed + 100 * (unsigned long long)_i;
    struct tcase t;

    /* Projections X W^T + b (W as PyTorch stores it). */
    t = mk("projection", E_EX, 0, 1, d[0], d[1], d[2], 1, 1.0, 0.0);
    t.bias = 1;
    run_case(&t, s + 1);
    /* Feed-forward: + residual, then GELU. */
    t = mk("feed-forward", E_EX, 0, 1, d[0], d[1], d[2], 1, 1.0, 1.0);
    t.bias = 1;
    t.op.act = 1;
    run_case(&t, s + 2);
    /* ... with ReLU. */
    t.op.act = 2;
    run_case(&t, s + 12);
    /* Compression E X per sequence, E shared (stride 0) or per head. */
    t = mk("compression, shared E", E_BATCHED, 0, 0, d[0], d[1], d[2], 3, 1.0,
           0.0);
    t.share_a = 1;
    run_case(&t, s + 3);
    t = mk("compression, E per head", E_GROUPED, 0, 0, d[0], d[1], d[2], 2, 1.0,
           0.0);
    t.groups = 3;
    run_case(&t, s + 4);
    /* Projection of compressed rows per head: A (E X) W_h^T. */
    t = mk("compressed projection", E_BATCHED, 0, 1, d[0], d[1], d[2], 2, 1.0,
           0.0);
    t.share_b = 1;
    run_case(&t, s + 5);
    /* Scores Q_h Kbar_h^T * scale over heads and sequences. */
    t = mk("scores", E_GROUPED, 0, 1, d[0], d[1], d[2], 3, 0.125, 0.0);
    t.groups = 2;
    run_case(&t, s + 6);
    /* O_h = P_h Vbar_h. */
    t = mk("weighted sum", E_GROUPED, 0, 0, d[0], d[1], d[2], 2, 1.0, 0.0);
    t.groups = 3;
    run_case(&t, s + 7);
}
END_TEST

/* What the kernel takes beyond the pipeline's calls: op(A) transposed,
 * both transposed, and any beta. */
START_TEST(tiled_other_transposes_and_beta)
{
    static const int tr[][2] = {{1, 0}, {1, 1}, {0, 0}, {0, 1}};
    unsigned long long s = run_seed + 1000 + 10 * (unsigned long long)_i;
    struct tcase t = mk("transposes", E_BATCHED, tr[_i][0], tr[_i][1], 45, 23,
                        29, 2, -0.75, 0.5);

    run_case(&t, s);
    t = mk("transposes, k=0", E_BATCHED, tr[_i][0], tr[_i][1], 9, 10, 0, 1, 1.0,
           2.0);
    run_case(&t, s + 1);
}
END_TEST

/* The split's workspace, large enough for every case below, filled with
 * NaN: an element the reduction reads but no slice wrote makes C NaN. */
static void
poison_partial(clf_context *ctx)
{
    const size_t floats = (size_t)1 << 18;
    float *nan = tu_malloc(floats * sizeof *nan);
    size_t i;

    for (i = 0; i < floats; i++)
        nan[i] = NAN;
    if (clf__tiled_state(ctx)->partial != NULL)
        clReleaseMemObject(clf__tiled_state(ctx)->partial);
    clf__tiled_state(ctx)->partial = tu_upload(ctx, nan, floats);
    clf__tiled_state(ctx)->partial_cap = floats;
    free(nan);
}

/* Split over K (forced to 2, 3 and 7 slices, and to more than K has KWG
 * steps): the slices' sum, finished with beta C, bias and GELU, equals the
 * reference for every entry, transposition and odd size, batched; K = 0
 * and K shorter than one slice too; the workspace poisoned first. */
START_TEST(tiled_split_k_matches_reference)
{
    static const size_t splits[] = {2, 3, 7, 1000};
    clf_context *ctx = tu_tiled_fit(tu_context());
    unsigned long long s = run_seed + 3000 + 50 * (unsigned long long)_i;
    size_t kchunk = 0;
    struct tcase t;

    clf__tiled_state(ctx)->split = splits[_i];
    poison_partial(ctx);
    ck_assert_uint_gt(clf__tiled_split(ctx, 37, 45, 301, 3, &kchunk), 1);
    ck_assert_uint_eq(kchunk % clf__tiled_state(ctx)->cfg.v[CLF_TILED_P_KWG],
                      0);
    t = mk("split: projection + bias", E_EX, 0, 1, 37, 45, 301, 1, 1.0, 0.0);
    t.bias = 1;
    run_case(&t, s + 1);
    t = mk("split: feed-forward", E_EX, 0, 1, 19, 70, 133, 1, 1.0, 1.0);
    t.bias = 1;
    t.op.act = 1;
    run_case(&t, s + 2);
    t = mk("split: compression, shared E", E_BATCHED, 0, 0, 9, 31, 517, 3, 1.0,
           0.0);
    t.share_a = 1;
    run_case(&t, s + 3);
    t = mk("split: scores", E_GROUPED, 0, 1, 23, 17, 65, 3, 0.125, 0.0);
    t.groups = 2;
    run_case(&t, s + 4);
    t = mk("split: transposes, beta", E_BATCHED, 1, 1, 45, 23, 97, 2, -0.75,
           0.5);
    run_case(&t, s + 5);
    t = mk("split: short K", E_BATCHED, 0, 0, 5, 6, 3, 2, 1.0, 0.25);
    run_case(&t, s + 6);
    t = mk("split: K = 0", E_BATCHED, 0, 0, 5, 6, 0, 1, 1.0, 2.0);
    run_case(&t, s + 7);
    ck_assert_ptr_nonnull(clf__tiled_state(ctx)->partial); /* the split ran */
    clf__tiled_state(ctx)->split = 0;
}
END_TEST

/* By the device: a CPU runtime's few compute units never split; on a
 * device of 132 compute units the compression E X at batch 1 (256 x 512
 * over K = 4096: 32 tiles of C) is split into enough slices to give four
 * work-groups a compute unit, each at least four KWG steps, while a
 * projection (4096 x 512, 512 tiles) is not. */
START_TEST(tiled_split_k_by_the_device)
{
    clf_context *ctx = tu_context();
    const size_t cu = ctx->info.compute_units, kwg = 16;
    size_t kchunk = 0, n;
    struct tcase t;

    /* The arithmetic at the default sizes, whether or not the device
     * runs them. */
    ck_assert_int_eq(clf__tiled_reset(ctx), 0);
    ck_assert_uint_eq(clf__tiled_state(ctx)->cfg.v[CLF_TILED_P_KWG], kwg);
    ck_assert_uint_eq(clf__tiled_state(ctx)->split, 0);
    if (cu < 16) { /* a CPU runtime: not even a single tile is split */
        ck_assert_uint_eq(clf__tiled_split(ctx, 256, 512, 4096, 1, &kchunk), 1);
        ck_assert_uint_eq(clf__tiled_split(ctx, 20, 33, 4096, 1, &kchunk), 1);
    }
    ctx->info.compute_units = 132;
    n = clf__tiled_split(ctx, 256, 512, 4096, 1, &kchunk);
    ck_assert_uint_eq(n, 16);
    ck_assert_uint_eq(kchunk, 256);
    ck_assert_uint_ge(32 * n, 4 * 132 - 32); /* work-groups */
    ck_assert_uint_ge(32 * n * 64, 32768);   /* work-items */
    ck_assert_uint_eq(clf__tiled_split(ctx, 4096, 512, 512, 1, &kchunk), 1);
    /* Too short a K to split into slices of four steps. */
    ck_assert_uint_eq(clf__tiled_split(ctx, 16, 16, 4 * kwg, 1, &kchunk), 1);
    /* And the split so chosen (for the sizes the device runs) computes the
     * product. */
    tu_tiled_fit(ctx);
    t = mk("split by the device", E_BATCHED, 0, 0, 20, 33, 700, 1, 1.0, 0.0);
    run_case(&t, run_seed + 4000);
    ctx->info.compute_units = cu;
}
END_TEST

/* Every set of sizes the tuner may choose computes the same products. */
START_TEST(tiled_every_tuning_set_matches_reference)
{
    clf_context *ctx = tu_tiled_fit(tu_context());
    struct clf__limits lim;
    struct clf__tiled_cfg sets[CLF_TUNE_MAX_TILED],
        was = clf__tiled_state(ctx)->cfg;
    size_t count, i, ran = 0, items[3] = {0, 0, 0};
    char text[128];
    struct tcase t;

    memset(&lim, 0, sizeof lim);
    lim.local_mem = ctx->info.local_mem;
    ck_assert_int_eq(clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                                     sizeof lim.max_wg, &lim.max_wg, NULL),
                     CL_SUCCESS);
    ck_assert_int_eq(clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                                     sizeof items, items, NULL),
                     CL_SUCCESS);
    lim.max_item[0] = items[0];
    lim.max_item[1] = items[1];
    count = clf__tiled_space(sets, CLF_TUNE_MAX_TILED, &lim);
    ck_assert_uint_ge(count, 2);
    for (i = 0; i < count; i++) {
        clf__tiled_format(&sets[i], text, sizeof text);
        if (clf__tiled_set(ctx, &sets[i]) != 0) {
            /* The built kernel may take smaller work-groups than the device
             * (rusticl: 32): such a set is refused, saying so. */
            ck_assert_msg(strstr(clf_last_error(), "work-groups of at most") !=
                              NULL,
                          "%s: %s", text, clf_last_error());
            continue;
        }
        ran++;
        t = mk(text, E_BATCHED, 0, 1, 133, 71, 37, 2, 1.0, 0.0);
        run_case(&t, run_seed + 2000 + i);
        t = mk(text, E_GROUPED, 0, 0, 19, 140, 45, 2, 0.5, 0.0);
        t.groups = 2;
        run_case(&t, run_seed + 2100 + i);
    }
    ck_assert_msg(ran > 0, "no set of the tuning space runs on this device");
    if (clf__tiled_set(ctx, &was) != 0) /* refused as above, or restored */
        ck_assert_msg(strstr(clf_last_error(), "work-groups of at most") !=
                          NULL,
                      "restoring the sizes: %s", clf_last_error());
}
END_TEST

/* Sizes outside the kernel's rules or the device's limits are refused
 * with a message naming the size; the context keeps its sizes. */
START_TEST(tiled_bad_sizes_are_refused)
{
    clf_context *ctx = tu_tiled_fit(tu_context());
    struct clf__tiled_cfg c, was = clf__tiled_state(ctx)->cfg;
    struct clf__limits lim;
    char why[256];

    clf__tiled_default(&c);
    c.v[CLF_TILED_P_MWG] = 48;
    ck_assert_int_eq(clf__tiled_set(ctx, &c), CLF_EINVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "MWG=48"));
    clf__tiled_default(&c);
    c.v[CLF_TILED_P_NWG] = 16; /* not a multiple of NDIM * VW = 32 */
    ck_assert_int_eq(clf__tiled_set(ctx, &c), CLF_EINVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "NDIM*VW"));
    clf__tiled_default(&c);
    c.v[CLF_TILED_P_MDIM] = 1; /* a register block of 64 x 8 */
    ck_assert_int_eq(clf__tiled_set(ctx, &c), CLF_EINVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "register block"));
    /* A device with 32 KiB of local memory and groups of 256. */
    memset(&lim, 0, sizeof lim);
    lim.local_mem = 32768;
    lim.max_wg = 256;
    lim.max_item[0] = lim.max_item[1] = 256;
    clf__tiled_default(&c);
    ck_assert_int_eq(clf__tiled_check(&c, &lim, why, sizeof why), 0);
    c.v[CLF_TILED_P_KWG] = 64; /* 4 * 64 * 256 = 64 KiB */
    c.v[CLF_TILED_P_MWG] = 128;
    c.v[CLF_TILED_P_NWG] = 128;
    c.v[CLF_TILED_P_MDIM] = 16;
    c.v[CLF_TILED_P_NDIM] = 16;
    ck_assert_int_eq(clf__tiled_check(&c, &lim, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "local memory"));
    c.v[CLF_TILED_P_KWG] = 8;
    c.v[CLF_TILED_P_MDIM] = 32; /* 512 work-items */
    ck_assert_int_eq(clf__tiled_check(&c, &lim, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "work-group"));
    ck_assert(memcmp(clf__tiled_state(ctx)->cfg.v, was.v, sizeof was.v) == 0);
}
END_TEST

static void
check_forward(struct layer *l, clf_mode mode, size_t B, size_t n,
              unsigned long long seed)
{
    size_t count = B * n * l->desc.d_model, i;
    float *x = tu_malloc(count * sizeof *x), *y = tu_malloc(count * sizeof *y);
    double *ref = tu_malloc(count * sizeof *ref);
    char what[160];
    int rc;

    tu_fill(x, count, seed, -1.0f, 1.0f);
    for (i = 0; i < count; i++)
        y[i] = NAN;
    ck_assert_int_eq(clf_attention_set_mode(l->att, mode), 0);
    rc = clf_attention_forward(l->att, x, B, n, y);
    ck_assert_msg(rc == 0, "forward: %s", clf_last_error());
    ref_attention(&l->ref, mode == CLF_MODE_FULL, x, B, n, ref);
    snprintf(what, sizeof what,
             "gemm=tiled %s B=%zu n=%zu D=%zu h=%zu k=%zu seed %llu",
             mode == CLF_MODE_FULL ? "full" : "linformer", B, n,
             l->desc.d_model, l->desc.heads, l->desc.k, seed);
    tu_assert_close(y, ref, count, 1e-5, what);
    free(x);
    free(y);
    free(ref);
}

/* Whole forwards with the choice forced to the tiled kernel, through
 * clf_context_force_kernel: every GEMM of the forward runs tiled (the
 * attention over the slots on its GEMM path), and the result is the
 * reference's, in both modes, for each E/F sharing, at odd sizes. */
START_TEST(tiled_forced_forward_matches_reference)
{
    static const clf_sharing sharing[] = {
        CLF_SHARE_HEADWISE, CLF_SHARE_PER_HEAD, CLF_SHARE_KEY_VALUE};
    clf_context *ctx = tu_tiled_fit(tu_context());
    clf_attention_desc d;
    struct layer l;
    size_t calls = clf__tiled_state(ctx)->calls;
    char *env;

    memset(&d, 0, sizeof d);
    d.d_model = 36;
    d.heads = 3;
    d.max_seq_len = 53;
    d.k = 11;
    d.sharing = sharing[_i];
    d.bias_out = 1;
    d.bias_q = d.bias_k = d.bias_v = _i != 1;
    /* CLINFORMER_KERNELS would take precedence. */
    env = getenv("CLINFORMER_KERNELS");
    env = env != NULL ? strdup(env) : NULL;
    unsetenv("CLINFORMER_KERNELS");
    ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", "tiled"), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", "gemm"), 0);
    layer_make(&l, &d, run_seed + 3000 + (unsigned long long)_i);
    check_forward(&l, CLF_MODE_LINFORMER, 2, 53, run_seed + 3100);
    check_forward(&l, CLF_MODE_LINFORMER, 1, 17, run_seed + 3200);
    check_forward(&l, CLF_MODE_FULL, 2, 31, run_seed + 3300);
    check_forward(&l, CLF_MODE_LINFORMER, 1, 1, run_seed + 3400);
    ck_assert_ptr_nonnull(
        strstr(clf_context_kernel_choices(ctx), "gemm: tiled (forced"));
    layer_free(&l);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", NULL), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", NULL), 0);
    if (env != NULL)
        setenv("CLINFORMER_KERNELS", env, 1);
    free(env);
    ck_assert_uint_gt(clf__tiled_state(ctx)->calls, calls);
}
END_TEST

/* CLINFORMER_KERNELS=gemm=tiled forces it for every context. */
START_TEST(tiled_forced_through_the_environment)
{
    clf_context *ctx = tu_tiled_fit(tu_context());
    char *was = getenv("CLINFORMER_KERNELS");
    int v = 0, pinned = clf__gemm_pinned(ctx), rc;

    was = was != NULL ? strdup(was) : NULL;
    setenv("CLINFORMER_KERNELS", "gemm=tiled", 1);
    clf__gemm_pin(ctx, CLF_GEMM_UNDECIDED);
    rc = clf__gemm_resolve(ctx, CLF_ROLE_PROJ, 100, 64, 64, 1, &v);
    clf__gemm_pin(ctx, pinned);
    if (was != NULL)
        setenv("CLINFORMER_KERNELS", was, 1);
    else
        unsetenv("CLINFORMER_KERNELS");
    free(was);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(v, CLF_GEMM_TILED);
    ck_assert_int_eq(ctx->last_source[CLF_KIND_GEMM], CLF_SOURCE_FORCED);
}
END_TEST

/* With nothing stored or forced, all three candidates are timed on the
 * shape and the fastest wins. */
START_TEST(tiled_is_timed_against_the_others)
{
    clf_context *ctx = tu_tiled_fit(tu_context());
    const double *ms = ctx->last_ms[CLF_KIND_GEMM];
    int v, i;

    if (getenv("CLINFORMER_KERNELS") != NULL)
        return; /* forced: nothing is timed */
    v = tu_gemm_resolve_fresh(ctx, 300, 256, 128);
    ck_assert_int_eq(ctx->last_source[CLF_KIND_GEMM], CLF_SOURCE_TIMED);
    for (i = 0; i < 3; i++) {
        ck_assert_msg(ms[i] > 0.0, "candidate %d not timed", i);
        ck_assert(ms[v - 1] <= ms[i]);
    }
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("tiled");
    TCase *tc = tcase_create("tiled");
    const char *env = getenv("CLF_TEST_SEED");

    run_seed = env != NULL ? strtoull(env, NULL, 10)
                           : (unsigned long long)time(NULL) ^
                                 ((unsigned long long)getpid() << 20);
    printf("# CLF_TEST_SEED=%llu\n", run_seed);
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, tiled_pipeline_shapes_match_reference, 0, 5);
    tcase_add_loop_test(tc, tiled_other_transposes_and_beta, 0, 4);
    tcase_add_loop_test(tc, tiled_split_k_matches_reference, 0, 4);
    tcase_add_test(tc, tiled_split_k_by_the_device);
    tcase_add_test(tc, tiled_every_tuning_set_matches_reference);
    tcase_add_test(tc, tiled_bad_sizes_are_refused);
    tcase_add_loop_test(tc, tiled_forced_forward_matches_reference, 0, 3);
    tcase_add_test(tc, tiled_forced_through_the_environment);
    tcase_add_test(tc, tiled_is_timed_against_the_others);
    suite_add_tcase(s, tc);
    return tu_run(s, 1);
}
