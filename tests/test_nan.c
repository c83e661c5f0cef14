/* NaN propagates as in PyTorch: a score row holding a NaN gives NaN
 * probabilities for that row, through every softmax kernel and through both
 * ways attention over the slots runs (GEMM path, with each softmax kernel,
 * the fused and the streaming kernel).  Fully masked rows (all -inf) still give
 * zeros.  In the causal modes a NaN or inf reaches no earlier output. */
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define POISON 12345.0f /* finite: a NaN seen was computed, not left over */

/* Rows of 37 columns (a tail past the 8-lane blocks): finite; one NaN;
 * all NaN; a NaN with the rest -inf; all -inf. */
enum { FINITE, ONE_NAN, ALL_NAN, NAN_MASKED, MASKED, ROWS };
#define COLS 37

static void
softmax_rows(int variant, float *buf)
{
    clf_context *ctx = tu_context();
    cl_mem m;
    cl_int err;

    ck_assert_int_eq(clf_context_build(ctx), 0);
    m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       ROWS * COLS * sizeof(float), buf, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clf__softmax_rows_variant(ctx, variant, m, 0, ROWS, COLS),
                     0);
    ck_assert_int_eq(clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0,
                                         ROWS * COLS * sizeof(float), buf, 0,
                                         NULL, NULL),
                     CL_SUCCESS);
    clReleaseMemObject(m);
}

START_TEST(nan_softmax_row_becomes_nan)
{
    float in[ROWS * COLS], out[ROWS * COLS];
    double ref[COLS];
    size_t j;
    int v;

    tu_fill(in, ROWS * COLS, 77, -3.0f, 3.0f);
    in[ONE_NAN * COLS + 30] = NAN;
    for (j = 0; j < COLS; j++) {
        in[ALL_NAN * COLS + j] = NAN;
        in[NAN_MASKED * COLS + j] = j == 2 ? NAN : -INFINITY;
        in[MASKED * COLS + j] = -INFINITY;
    }
    ref_softmax(in, 1, COLS, ref);
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        memcpy(out, in, sizeof in);
        softmax_rows(v, out);
        /* 1e-6 absolute on probabilities, as the softmax suite. */
        for (j = 0; j < COLS; j++)
            ck_assert_double_eq_tol(out[FINITE * COLS + j], ref[j], 1e-6);
        for (j = 0; j < COLS; j++) {
            ck_assert_msg(isnan(out[ONE_NAN * COLS + j]),
                          "variant %d one NaN: [%zu] = %g", v, j,
                          out[ONE_NAN * COLS + j]);
            ck_assert_msg(isnan(out[ALL_NAN * COLS + j]),
                          "variant %d all NaN: [%zu] = %g", v, j,
                          out[ALL_NAN * COLS + j]);
            ck_assert_msg(isnan(out[NAN_MASKED * COLS + j]),
                          "variant %d NaN among -inf: [%zu] = %g", v, j,
                          out[NAN_MASKED * COLS + j]);
            ck_assert_msg(out[MASKED * COLS + j] == 0.0f,
                          "variant %d masked: [%zu] = %g", v, j,
                          out[MASKED * COLS + j]);
        }
    }
}
END_TEST

/* The causal softmax on one head of n = 4, k = 4 slots, c = 2, blocks
 * of 2 (rows of 6: slots 0..3, window 4..5).  Query t sees 2 * (t / 2)
 * slots and window positions 0..t % 2.  Row 0: its one window score -inf,
 * a NaN in an unseen slot: zeros.  Row 1: a window NaN among -inf: NaN.
 * Row 2: a NaN at the future window position: finite, the NaN never
 * read.  Row 3: a NaN in a seen slot: NaN over what it sees.  Unseen
 * entries come out 0, in both the row-a-work-item and the work-group
 * kernel. */
START_TEST(nan_causal_softmax_reads_only_what_a_row_sees)
{
    enum { N = 4, K = 4, BLK = 2, LD = K + BLK };
    static const int seen[N][LD] = {{0, 0, 0, 0, 1, 0},
                                    {0, 0, 0, 0, 1, 1},
                                    {1, 1, 0, 0, 1, 0},
                                    {1, 1, 0, 0, 1, 1}};
    clf_context *ctx = tu_context();
    struct clf__causal_shape sh;
    float in[N * LD], out[N * LD];
    cl_mem m;
    cl_int err;
    size_t t, j;
    int v;

    memset(&sh, 0, sizeof sh);
    sh.batch = sh.heads = 1;
    sh.n = N, sh.dh = sh.dq = sh.dkv = 1, sh.k = K, sh.c = 2, sh.block = BLK;
    tu_fill(in, N * LD, 91, -3.0f, 3.0f);
    in[0 * LD + 4] = -INFINITY;
    in[0 * LD + 0] = NAN;
    in[1 * LD + 4] = -INFINITY;
    in[1 * LD + 5] = NAN;
    in[2 * LD + 5] = NAN;
    in[3 * LD + 1] = NAN;
    ck_assert_int_eq(clf_context_build(ctx), 0);
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        double sum = 0.0;
        m = clCreateBuffer(ctx->context,
                           CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof in,
                           in, &err);
        ck_assert_int_eq(err, CL_SUCCESS);
        ck_assert_int_eq(clf__causal_softmax(ctx, &sh, v, m, NULL), 0);
        ck_assert_int_eq(clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0,
                                             sizeof out, out, 0, NULL, NULL),
                         CL_SUCCESS);
        clReleaseMemObject(m);
        for (t = 0; t < N; t++)
            for (j = 0; j < LD; j++) {
                const float y = out[t * LD + j];
                if ((t == 1 || t == 3) && seen[t][j])
                    ck_assert_msg(isnan(y), "variant %d row %zu [%zu] = %g", v,
                                  t, j, y);
                else if (!seen[t][j] || t == 0)
                    ck_assert_msg(y == 0.0f, "variant %d row %zu [%zu] = %g", v,
                                  t, j, y);
                else
                    ck_assert_msg(isfinite(y) && y > 0.0f,
                                  "variant %d row %zu [%zu] = %g", v, t, j, y);
            }
        for (j = 0; j < LD; j++)
            sum += out[2 * LD + j];
        ck_assert_double_eq_tol(sum, 1.0, 1e-6);
    }
}
END_TEST

/* Non-finite values through the causal weighted sums of the GEMM path,
 * keys finite: one sequence of n = 70 (three chunks of the non-finite
 * kernels' rows, the last partial), 2 heads of 3 channels sharing one
 * value head, blocks of 16, 8 slots (2 a block).  Slot 3 (seen from
 * position 32 on) holds an infinity and slot 6 a NaN; the window values
 * hold an infinity at position 40, a NaN at 5 and -inf at 69.  Every
 * output is held against the sum of p v over what its row sees, in
 * double: NaN where that is NaN, the same infinity, else within 1e-5. */
enum { NF_N = 70, NF_H = 2, NF_DH = 3, NF_L = 8, NF_C = 2, NF_BLK = 16 };
enum { NF_LD = NF_L + NF_BLK, NF_DQ = NF_H * NF_DH };

static void
expect_sums(const float *o, const double *want, const char *what)
{
    size_t i;

    for (i = 0; i < NF_N * NF_DQ; i++)
        ck_assert_msg(isnan(want[i])   ? isnan(o[i])
                      : isinf(want[i]) ? o[i] == want[i]
                                       : fabs(o[i] - want[i]) < 1e-5,
                      "%s: o[%zu][%zu] = %g, want %g", what, i / NF_DQ,
                      i % NF_DQ, (double)o[i], want[i]);
}

/* want[t][h][e] = sum of s[row (h, t)][col0 + j] v[j][e] over j in
 * [lo(t), hi(t)), the row's probabilities at col0 on. */
static void
nf_sums(const float *s, const float *v, size_t col0, int window, double *want)
{
    size_t t, h, e, j;

    for (t = 0; t < NF_N; t++)
        for (h = 0; h < NF_H; h++)
            for (e = 0; e < NF_DH; e++) {
                const size_t start = t / NF_BLK * NF_BLK;
                const size_t lo = window ? start : 0;
                const size_t hi =
                    window
                        ? t + 1
                        : (t / NF_BLK * NF_C < NF_L ? t / NF_BLK * NF_C : NF_L);
                const float *row = s + (h * NF_N + t) * NF_LD + col0;
                double acc = 0.0;
                for (j = lo; j < hi; j++)
                    acc += (double)row[j - lo] * v[j * NF_DH + e];
                want[t * NF_DQ + h * NF_DH + e] = acc;
            }
}

START_TEST(nan_values_reach_every_causal_row_that_sees_them)
{
    clf_context *ctx = tu_context();
    float s[NF_H * NF_N * NF_LD], vbar[NF_L * NF_DH], v[NF_N * NF_DH];
    float o[NF_N * NF_DQ];
    double want[NF_N * NF_DQ];
    struct clf__attend_shape as;
    struct clf__causal_shape cs;
    struct clf__weigh_causal cz;
    cl_mem ms, mv, mo, mvf, mfirst, mvbar;
    cl_int err;
    size_t h, t, j;

    ck_assert_int_eq(clf_context_build(ctx), 0);
    tu_fill(s, sizeof s / sizeof s[0], 95, 0.0f, 1.0f);
    tu_fill(vbar, sizeof vbar / sizeof vbar[0], 96, -1.0f, 1.0f);
    tu_fill(v, sizeof v / sizeof v[0], 97, -1.0f, 1.0f);
    vbar[3 * NF_DH + 1] = INFINITY;
    vbar[6 * NF_DH + 2] = NAN;
    v[40 * NF_DH + 1] = INFINITY;
    v[5 * NF_DH + 2] = NAN;
    v[69 * NF_DH + 0] = -INFINITY;
    memset(&as, 0, sizeof as);
    as.batch = 1, as.heads = NF_H, as.n = NF_N, as.dh = NF_DH;
    as.dq = NF_DQ, as.L = NF_L;
    memset(&cs, 0, sizeof cs);
    cs.batch = 1, cs.heads = NF_H, cs.n = NF_N, cs.dh = NF_DH, cs.dq = NF_DQ;
    cs.dkv = NF_DH, cs.k = NF_L, cs.c = NF_C, cs.block = NF_BLK;
    cs.score_way = cs.weigh_way = CLF_GEMM_BLOCKED;
    /* What the causal softmax leaves 0: the later slots and the window
     * positions after the row's query. */
    for (h = 0; h < NF_H; h++)
        for (t = 0; t < NF_N; t++)
            for (j = 0; j < NF_LD; j++)
                if (j < NF_L ? j >= t / NF_BLK * NF_C : j - NF_L > t % NF_BLK)
                    s[(h * NF_N + t) * NF_LD + j] = 0.0f;
    ms = tu_upload(ctx, s, sizeof s / sizeof s[0]);
    mv = tu_upload(ctx, v, sizeof v / sizeof v[0]);
    mvbar = tu_upload(ctx, vbar, sizeof vbar / sizeof vbar[0]);
    memset(o, 0, sizeof o);
    mo = tu_upload(ctx, o, sizeof o / sizeof o[0]);
    mvf = clCreateBuffer(clf_context_cl_context(ctx), CL_MEM_READ_WRITE,
                         sizeof vbar, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    mfirst = clCreateBuffer(clf_context_cl_context(ctx), CL_MEM_READ_WRITE,
                            NF_DH * sizeof(cl_int), NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    memset(&cz, 0, sizeof cz);
    cz.vf = mvf, cz.first = mfirst, cz.c = NF_C, cz.block = NF_BLK;
    /* The slots: o = P V over the slots each row sees. */
    ck_assert_int_eq(clf__attend_finite(ctx, &as, mvbar, mvf, mfirst), 0);
    ck_assert_int_eq(clf__attend_weigh(ctx, CLF_GEMM_BLOCKED, &as, 0, 1, 0,
                                       NF_N, ms, 0, NF_LD, mvbar, mo, &cz),
                     0);
    tu_download(ctx, mo, o, sizeof o / sizeof o[0]);
    nf_sums(s, vbar, 0, 0, want);
    expect_sums(o, want, "slots");
    /* The window: o += P_window V over positions start..t. */
    clReleaseMemObject(mo);
    memset(o, 0, sizeof o);
    mo = tu_upload(ctx, o, sizeof o / sizeof o[0]);
    ck_assert_int_eq(clf__causal_apply(ctx, &cs, mo, ms, mv), 0);
    tu_download(ctx, mo, o, sizeof o / sizeof o[0]);
    nf_sums(s, v, NF_L, 1, want);
    expect_sums(o, want, "window");
    clReleaseMemObject(ms);
    clReleaseMemObject(mv);
    clReleaseMemObject(mvbar);
    clReleaseMemObject(mo);
    clReleaseMemObject(mvf);
    clReleaseMemObject(mfirst);
}
END_TEST

/* d_h 16, so the fused kernel applies; two sequences of 20. */
#define B 2
#define N 20

static clf_attention_desc
nan_desc(void)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 2;
    d.max_seq_len = 40;
    d.k = 8;
    return d;
}

/* Forwards x through every way: the GEMM path with each softmax kernel,
 * then the fused and the streaming kernel; check(y, way) judges each
 * output. */
static void
every_way(struct layer *l, const float *x,
          void (*check)(const float *y, const char *way))
{
    static const char *const ways[] = {
        "GEMM path, scalar softmax", "GEMM path, vector softmax",
        "GEMM path, group softmax", "fused kernel", "streaming kernel"};
    clf_context *ctx = tu_context();
    size_t count = (size_t)B * N * 32, i;
    float *y = tu_malloc(count * sizeof *y);
    int saved = clf__softmax_pinned(ctx), w, rc;

    for (w = 0; w < 5; w++) {
        clf__attention_set_attend(l->att, w < 3    ? CLF_ATTEND_GEMM
                                          : w == 3 ? CLF_ATTEND_FUSED
                                                   : CLF_ATTEND_FLASH);
        if (w < 3)
            clf__softmax_pin(ctx, w);
        for (i = 0; i < count; i++)
            y[i] = POISON;
        rc = clf_attention_forward(l->att, x, B, N, y);
        ck_assert_msg(rc == 0, "%s: %s", ways[w], clf_last_error());
        ck_assert_int_eq(clf__attention_last_fused(l->att), w == 3);
        ck_assert_int_eq(clf__attention_last_flash(l->att), w == 4);
        check(y, ways[w]);
    }
    clf__softmax_pin(ctx, saved);
    clf__attention_set_attend(l->att, CLF_ATTEND_UNDECIDED);
    free(y);
}

/* A NaN anywhere in sequence 0 reaches every compressed slot (E mixes all
 * positions), so every output of sequence 0 is NaN; sequence 1 is not. */
static void
sequence0_nan(const float *y, const char *way)
{
    size_t per = (size_t)N * 32, i;

    for (i = 0; i < per; i++)
        ck_assert_msg(isnan(y[i]), "%s: y[0][%zu] = %g", way, i, y[i]);
    for (i = per; i < 2 * per; i++)
        ck_assert_msg(isfinite(y[i]) && y[i] != POISON, "%s: y[1][%zu] = %g",
                      way, i - per, y[i]);
}

START_TEST(nan_input_row_gives_nan_rows)
{
    clf_attention_desc d = nan_desc();
    float x[B * N * 32];
    struct layer l;

    layer_make(&l, &d, 501);
    tu_fill(x, B * N * 32, 502, -1.0f, 1.0f);
    x[3 * 32 + 5] = NAN; /* sequence 0, position 3, feature 5 */
    every_way(&l, x, sequence0_nan);
    layer_free(&l);
}
END_TEST

/* A NaN in W_k makes one key column NaN at every position: every score of
 * the head holding it is NaN, and W_o mixes that head into every output. */
static void
all_nan(const float *y, const char *way)
{
    size_t i;

    for (i = 0; i < (size_t)B * N * 32; i++)
        ck_assert_msg(isnan(y[i]), "%s: y[%zu] = %g", way, i, y[i]);
}

START_TEST(nan_weight_gives_nan_rows)
{
    clf_attention_desc d = nan_desc();
    float x[B * N * 32];
    struct layer l;
    size_t count;

    layer_make(&l, &d, 503);
    ck_assert_int_eq(clf_attention_weight_size(l.att, CLF_WEIGHT_K, &count), 0);
    l.w[CLF_WEIGHT_K][20 * 32 + 7] = NAN; /* row 20: head 1 */
    ck_assert_int_eq(
        clf_attention_set_weight(l.att, CLF_WEIGHT_K, l.w[CLF_WEIGHT_K], count),
        0);
    tu_fill(x, B * N * 32, 504, -1.0f, 1.0f);
    every_way(&l, x, all_nan);
    layer_free(&l);
}
END_TEST

/* A non-finite input at position p reaches no output before p, in either
 * causal mode, under every way attention and its GEMMs run: the outputs at
 * 0..p-1 stay finite and bit-identical to those of the same input with a
 * finite value at p.  Masked and future terms are skipped, never multiplied
 * by zero (0 x NaN and 0 x inf are NaN).  The last position, and one inside
 * the sequence whose block the slots of later blocks compress. */
static const char *const causal_ways[] = {
    "attend=gemm,gemm=clblast,softmax=scalar",
    "attend=gemm,gemm=clblast,softmax=vector",
    "attend=gemm,gemm=clblast,softmax=group",
    "attend=gemm,gemm=blocked,softmax=scalar",
    "attend=gemm,gemm=blocked,softmax=vector",
    "attend=gemm,gemm=blocked,softmax=group",
    "attend=gemm,gemm=tiled,softmax=scalar",
    "attend=gemm,gemm=tiled,softmax=vector",
    "attend=gemm,gemm=tiled,softmax=group",
    "attend=flash,gemm=clblast",
    "attend=flash,gemm=blocked",
    "attend=flash,gemm=tiled",
    "attend=flashwg,gemm=clblast",
    "attend=flashwg,gemm=blocked",
    "attend=flashwg,gemm=tiled"};
#define CAUSAL_WAYS (sizeof causal_ways / sizeof causal_ways[0])

/* Forwards x (one sequence of n) with value v at feature 3 of position p
 * and checks rows 0..p-1 against base bit for bit, and finite, and rows
 * p.. non-finite. */
static void
causal_perturbed(struct layer *l, clf_mode mode, const float *x, size_t n,
                 size_t p, float v, const float *base, const char *way)
{
    const size_t D = l->desc.d_model, count = n * D;
    float *xp = tu_malloc(count * sizeof *xp);
    float *y = tu_malloc(count * sizeof *y);
    clf_forward_opts o;
    size_t i;
    int rc;

    memcpy(xp, x, count * sizeof *xp);
    xp[p * D + 3] = v;
    for (i = 0; i < count; i++)
        y[i] = POISON;
    memset(&o, 0, sizeof o);
    o.causal = 1;
    rc = clf_attention_forward_ex(l->att, xp, 1, n, y, &o);
    ck_assert_msg(rc == 0, "%s: %s", way, clf_last_error());
    for (i = 0; i < p * D; i++)
        ck_assert_msg(isfinite(y[i]) && memcmp(&y[i], &base[i], sizeof *y) == 0,
                      "%s, %s mode, n %zu, %g at %zu: y[%zu][%zu] = %g, "
                      "finite input gives %g",
                      way, mode == CLF_MODE_FULL ? "causal full" : "causal", n,
                      (double)v, p, i / D, i % D, (double)y[i],
                      (double)base[i]);
    /* The perturbation did arrive, at p and at every later row (each sees
     * p through its block's window or the slots of p's block): NaN
     * everywhere for a NaN, and no finite output for an infinity. */
    for (i = p * D; i < count; i++)
        ck_assert_msg(isnan(v) ? isnan(y[i]) : !isfinite(y[i]),
                      "%s, %s mode, %g at %zu: y[%zu][%zu] = %g", way,
                      mode == CLF_MODE_FULL ? "causal full" : "causal",
                      (double)v, p, i / D, i % D, (double)y[i]);
    free(xp);
    free(y);
}

/* Whether the GPU-shaped streaming kernel runs the layer's heads on this
 * device (rusticl on llvmpipe refuses its work-groups: the forced way then
 * falls back). */
static int
flash_wg_runs(const struct layer *l)
{
    struct clf__flash_shape sh;

    memset(&sh, 0, sizeof sh);
    sh.at.dh = l->att->dh;
    return clf__flash_wg_applies(l->att->ctx, &sh);
}

static void
causal_future_case(struct layer *l, clf_mode mode, size_t n, const char *way,
                   unsigned long long seed)
{
    const size_t D = l->desc.d_model, count = n * D;
    const size_t at[2] = {n - 1, n / 2 + 1};
    float *x = tu_malloc(count * sizeof *x);
    float *base = tu_malloc(count * sizeof *base);
    clf_forward_opts o;
    size_t i;
    int rc, a, f;

    tu_fill(x, count, seed, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_set_mode(l->att, mode), 0);
    memset(&o, 0, sizeof o);
    o.causal = 1;
    for (a = 0; a < 2; a++) {
        for (i = 0; i < count; i++)
            base[i] = POISON;
        rc = clf_attention_forward_ex(l->att, x, 1, n, base, &o);
        ck_assert_msg(rc == 0, "%s: %s", way, clf_last_error());
        /* The way asked for is the way that ran. */
        f = strstr(way, "attend=flashwg") != NULL && flash_wg_runs(l);
        ck_assert_int_eq(clf__attention_last_flash_wg(l->att), f);
        ck_assert_int_eq(clf__attention_last_flash(l->att),
                         strstr(way, "attend=flash,") != NULL);
        causal_perturbed(l, mode, x, n, at[a], NAN, base, way);
        causal_perturbed(l, mode, x, n, at[a], INFINITY, base, way);
        causal_perturbed(l, mode, x, n, at[a], -INFINITY, base, way);
    }
    free(x);
    free(base);
}

/* d_model 16, 2 heads, k 4, blocks of 3 at n = N = 12; n = 130 with
 * N = 130, blocks of 13, k 20 (2 slots a block). */
START_TEST(nan_causal_future_never_reaches_the_past)
{
    static const size_t shapes[][4] = {{12, 4, 3, 12}, {130, 20, 13, 130}};
    char *was = getenv("CLINFORMER_KERNELS");
    size_t s, w;

    was = was != NULL ? strdup(was) : NULL;
    for (s = 0; s < 2; s++) {
        clf_attention_desc d;
        struct layer l;

        memset(&d, 0, sizeof d);
        d.d_model = 16;
        d.heads = 2;
        d.max_seq_len = shapes[s][0];
        d.k = shapes[s][1];
        d.causal_block = shapes[s][2];
        d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
        layer_make(&l, &d, 510 + s);
        for (w = 0; w < CAUSAL_WAYS; w++) {
            setenv("CLINFORMER_KERNELS", causal_ways[w], 1);
            causal_future_case(&l, CLF_MODE_LINFORMER, shapes[s][3],
                               causal_ways[w], 520 + w);
            causal_future_case(&l, CLF_MODE_FULL, shapes[s][3], causal_ways[w],
                               540 + w);
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
    Suite *s = suite_create("nan");
    TCase *tc = tcase_create("nan");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, nan_softmax_row_becomes_nan);
    tcase_add_test(tc, nan_causal_softmax_reads_only_what_a_row_sees);
    tcase_add_test(tc, nan_values_reach_every_causal_row_that_sees_them);
    tcase_add_test(tc, nan_input_row_gives_nan_rows);
    tcase_add_test(tc, nan_weight_gives_nan_rows);
    tcase_add_test(tc, nan_causal_future_never_reaches_the_past);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
