/* Runs every clinformer kernel once on small shapes, with tails that do not
 * fill a work-group, and checks the results against the host.  tests/
 * oclgrind.sh runs it under oclgrind, which reports invalid accesses, data
 * races and uninitialised reads.  Exit 0 when all results match.
 *
 * Its argument picks the kernels: "all" (the default), "quick" (all but
 * the work-group streaming kernel, make check's run) or "flash_wg" (that
 * kernel alone: about 150 s of the simulator's 165, make check-slow's
 * run). */
#include "../bench/reference.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void
expect(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "oclgrind_driver: %s does not match\n", what);
        failures++;
    }
}

static cl_mem
upload(clf_context *ctx, const float *data, size_t n)
{
    cl_int err;
    cl_mem m =
        clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       n * sizeof(float), (void *)data, &err);
    if (m == NULL) {
        fprintf(stderr, "oclgrind_driver: clCreateBuffer failed (%d)\n", err);
        exit(1);
    }
    return m;
}

static void
download(clf_context *ctx, cl_mem m, float *data, size_t n)
{
    if (clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0, n * sizeof(float), data,
                            0, NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "oclgrind_driver: read failed\n");
        exit(1);
    }
}

static void
fill(float *a, size_t n, unsigned seed)
{
    size_t i;

    for (i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* mask_rows (copy and in place), masked_rowsum and the masks folded into
 * the softmax. */
static void
check_masks(clf_context *ctx)
{
    enum { B = 2, N = 5, COLS = 3, ROWS = 3, LD = 6, H = 2 };
    const unsigned char mbytes[B * N] = {1, 1, 0, 1, 0, 0, 1, 1, 1, 1};
    float src[B * N * COLS], dst[B * N * COLS], e[ROWS * LD], rs[B * ROWS];
    float sc[B * H * N * N];
    double sref[B * H * N * N];
    cl_mem ms, md, mm, me, mr, msc;
    cl_int err;
    size_t i, b, r, j, chunk;
    int v;

    fill(src, B * N * COLS, 11);
    fill(e, ROWS * LD, 12);
    memset(dst, 0, sizeof dst);
    ms = upload(ctx, src, B * N * COLS);
    md = upload(ctx, dst, B * N * COLS);
    mm = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                        sizeof mbytes, (void *)mbytes, &err);
    me = upload(ctx, e, ROWS * LD);
    mr = upload(ctx, rs, B * ROWS);
    clf__mask_rows(ctx, ms, 0, md, 0, B * N, COLS, mm);
    download(ctx, md, dst, B * N * COLS);
    for (i = 0; i < B * N * COLS; i++)
        expect(dst[i] == (mbytes[i / COLS] ? src[i] : 0.0f), "mask_rows");
    clf__mask_rows(ctx, ms, 0, ms, 0, B * N, COLS, mm);
    download(ctx, ms, src, B * N * COLS);
    expect(memcmp(src, dst, sizeof dst) == 0, "mask_rows in place");
    clf__masked_rowsum(ctx, me, ROWS, N, LD, B, mm, mr);
    download(ctx, mr, rs, B * ROWS);
    for (b = 0; b < B; b++)
        for (r = 0; r < ROWS; r++) {
            float acc = 0.0f;
            for (j = 0; j < N; j++)
                acc += mbytes[b * N + j] ? e[r * LD + j] : 0.0f;
            expect(fabsf(acc - rs[b * ROWS + r]) < 1e-5f, "masked_rowsum");
        }
    /* the folded masks in every softmax variant: rows 2..4 of sequence 1
     * alone, then the whole batch */
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++)
        for (chunk = 0; chunk < 2; chunk++) {
            const struct clf__score_mask m = {
                mm, chunk ? N : 0, H, chunk ? 3 : N, chunk ? 2 : 0, 1};
            const size_t rows = chunk ? H * 3 : B * H * N;
            fill(sc, B * H * N * N, 13);
            ref_softmax_masked(sc, rows, N, mbytes + m.mask_off, H, m.chunk,
                               m.row0, 1, sref);
            msc = upload(ctx, sc, B * H * N * N);
            clf__softmax_masked(ctx, v, msc, rows, N, &m);
            download(ctx, msc, sc, B * H * N * N);
            for (i = 0; i < rows * N; i++)
                expect(fabs(sc[i] - sref[i]) < 1e-6 &&
                           (sref[i] != 0.0 || sc[i] == 0.0f),
                       "softmax with folded masks");
            clReleaseMemObject(msc);
        }
    clReleaseMemObject(ms);
    clReleaseMemObject(md);
    clReleaseMemObject(mm);
    clReleaseMemObject(me);
    clReleaseMemObject(mr);
}

/* The scores check_causal's kernels must write (its shape). */
enum { CB = 2, CH = 2, CN = 7, CDH = 3, CK = 4, CC = 2, CBLK = 3 };
enum { CLD = CK + CBLK };

/* Row (b, h, t) of check_causal's scores after the causal softmax: over
 * the slots before its block's (their values as s0 held them) and the
 * unpadded window positions up to t (scale q . k), the rest 0. */
static void
expect_window(const float *s, const float *s0, const float *q, const float *kv,
              const unsigned char *mbytes)
{
    size_t b, h, t, j, e;

    for (b = 0; b < CB; b++)
        for (h = 0; h < CH; h++)
            for (t = 0; t < CN; t++) {
                const size_t at = ((b * CH + h) * CN + t) * CLD;
                const size_t m = t / CBLK, slots = m * CC < CK ? m * CC : CK;
                double raw[CLD], mx = -INFINITY, sum = 0.0;
                for (j = 0; j < CLD; j++) {
                    const size_t pos = m * CBLK + (j - CK);
                    raw[j] = -INFINITY;
                    if (j < slots)
                        raw[j] = s0[at + j];
                    else if (j >= CK && pos <= t && mbytes[b * CN + pos]) {
                        double acc = 0.0;
                        for (e = 0; e < CDH; e++)
                            acc +=
                                (double)
                                    q[(b * CN + t) * CH * CDH + h * CDH + e] *
                                kv[(b * CN + pos) * CDH + e];
                        raw[j] = acc * 0.5;
                    }
                    mx = raw[j] > mx ? raw[j] : mx;
                }
                for (j = 0; j < CLD; j++)
                    sum += raw[j] == -INFINITY ? 0.0 : exp(raw[j] - mx);
                for (j = 0; j < CLD; j++) {
                    const double want =
                        raw[j] == -INFINITY ? 0.0 : exp(raw[j] - mx) / sum;
                    expect(want == 0.0 ? s[at + j] == 0.0f
                                       : fabs(s[at + j] - want) < 1e-5,
                           "causal_softmax");
                }
            }
}

/* The causal window's scores (GEMMs), both causal softmaxes and the
 * weighted sum (GEMMs over the finite values, then
 * clf_causal_window_nonfinite) on a partial last block, with padding and
 * an infinite value. */
static void
check_causal(clf_context *ctx)
{
    enum { B = CB, H = CH, N = CN, DH = CDH, K = CK, C = CC, BLK = CBLK };
    enum { LD = CLD };
    const unsigned char mbytes[B * N] = {1, 1, 1, 1, 1, 1, 1,
                                         1, 0, 1, 1, 1, 0, 0};
    float q[B * N * H * DH], kv[B * N * DH], s[B * H * N * LD];
    float s0[B * H * N * LD], o[B * N * H * DH], o0[B * N * H * DH];
    struct clf__causal_shape sh;
    cl_mem mq, mk, ms, mo, mm;
    cl_int err;
    size_t b, h, t, e;
    int v;

    fill(q, sizeof q / sizeof q[0], 21);
    fill(kv, sizeof kv / sizeof kv[0], 22);
    fill(s0, sizeof s0 / sizeof s0[0], 23);
    fill(o, sizeof o / sizeof o[0], 24);
    memcpy(o0, o, sizeof o);
    mq = upload(ctx, q, sizeof q / sizeof q[0]);
    mk = upload(ctx, kv, sizeof kv / sizeof kv[0]);
    mo = upload(ctx, o, sizeof o / sizeof o[0]);
    mm = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                        sizeof mbytes, (void *)mbytes, &err);
    memset(&sh, 0, sizeof sh);
    sh.batch = B;
    sh.heads = H;
    sh.n = N;
    sh.dh = DH;
    sh.dq = H * DH;
    sh.dkv = DH; /* one K/V head */
    sh.k = K;
    sh.c = C;
    sh.block = BLK;
    sh.kv_per_head = 0;
    sh.scale = 0.5f;
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        ms = upload(ctx, s0, sizeof s0 / sizeof s0[0]);
        clf__causal_scores(ctx, &sh, ms, mq, mk);
        clf__causal_softmax(ctx, &sh, v, ms, mm);
        download(ctx, ms, s, sizeof s / sizeof s[0]);
        expect_window(s, s0, q, kv, mbytes);
        clReleaseMemObject(ms);
    }
    /* Make one value infinite (sequence 0, position 4, channel 1), then
     * apply the last variant's weights. */
    clReleaseMemObject(mk);
    kv[4 * DH + 1] = INFINITY;
    mk = upload(ctx, kv, sizeof kv / sizeof kv[0]);
    ms = upload(ctx, s, sizeof s / sizeof s[0]);
    clf__causal_apply(ctx, &sh, mo, ms, mk);
    download(ctx, mo, o, sizeof o / sizeof o[0]);
    for (b = 0; b < B; b++)
        for (t = 0; t < N; t++)
            for (h = 0; h < H; h++)
                for (e = 0; e < DH; e++) {
                    const float *row = s + ((b * H + h) * N + t) * LD + K;
                    size_t first = (t / BLK) * BLK, pos;
                    size_t at = (b * N + t) * H * DH + h * DH + e;
                    float acc = 0.0f;
                    float want;
                    for (pos = first; pos <= t; pos++)
                        acc += row[pos - first] * kv[(b * N + pos) * DH + e];
                    want = o0[at] + acc;
                    expect(isfinite(want) ? fabsf(o[at] - want) < 1e-5f
                           : isnan(want)  ? isnan(o[at])
                                          : o[at] == want,
                           "causal_apply");
                }
    clReleaseMemObject(mq);
    clReleaseMemObject(mk);
    clReleaseMemObject(ms);
    clReleaseMemObject(mo);
    clReleaseMemObject(mm);
}

/* layernorm, gelu, residual add and embedding. */
static void
check_encoder(clf_context *ctx)
{
    enum { ROWS = 5, COLS = 6, V = 4, N = 3 };
    float x[2 + ROWS * COLS], y[ROWS * COLS], g[COLS], b[COLS];
    float tok[V * COLS], pos[N * COLS], emb[2 * N * COLS];
    const int ids[2 * N] = {0, 3, 1, 2, 2, 0};
    cl_mem mx, my, mg, mb, mt, mp, me, mi;
    cl_int err;
    size_t r, c, i;

    fill(x, 2 + ROWS * COLS, 31);
    fill(g, COLS, 32);
    fill(b, COLS, 33);
    fill(tok, V * COLS, 34);
    fill(pos, N * COLS, 35);
    mx = upload(ctx, x, 2 + ROWS * COLS);
    my = upload(ctx, x, ROWS * COLS);
    mg = upload(ctx, g, COLS);
    mb = upload(ctx, b, COLS);
    clf__layernorm(ctx, mx, 2, my, 0, ROWS, COLS, mg, mb, 1e-5f);
    download(ctx, my, y, ROWS * COLS);
    for (r = 0; r < ROWS; r++) {
        double mean = 0.0, var = 0.0;
        for (c = 0; c < COLS; c++)
            mean += x[2 + r * COLS + c];
        mean /= COLS;
        for (c = 0; c < COLS; c++)
            var += (x[2 + r * COLS + c] - mean) * (x[2 + r * COLS + c] - mean);
        var /= COLS;
        for (c = 0; c < COLS; c++) {
            double want =
                (x[2 + r * COLS + c] - mean) / sqrt(var + 1e-5) * g[c] + b[c];
            expect(fabs(y[r * COLS + c] - want) < 1e-4, "layernorm");
        }
    }
    clf__act(ctx, my, 1, ROWS * COLS - 1, CLF_ACT_GELU);
    download(ctx, my, x, ROWS * COLS);
    for (i = 1; i < ROWS * COLS; i++) {
        double want = 0.5 * y[i] * (1.0 + erf(y[i] / sqrt(2.0)));
        expect(fabs(x[i] - want) < 1e-6, "gelu");
    }
    expect(x[0] == y[0], "gelu offset");
    clf__residual_add(ctx, my, 0, mx, 2, ROWS * COLS);
    mt = upload(ctx, tok, V * COLS);
    mp = upload(ctx, pos, N * COLS);
    me = upload(ctx, emb, 2 * N * COLS);
    mi = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                        sizeof ids, (void *)ids, &err);
    clf__embed(ctx, mi, 2 * N, N, COLS, mt, mp, me);
    download(ctx, me, emb, 2 * N * COLS);
    for (r = 0; r < 2 * N; r++)
        for (c = 0; c < COLS; c++)
            expect(emb[r * COLS + c] ==
                       tok[ids[r] * COLS + c] + pos[(r % N) * COLS + c],
                   "embed");
    clReleaseMemObject(mx);
    clReleaseMemObject(my);
    clReleaseMemObject(mg);
    clReleaseMemObject(mb);
    clReleaseMemObject(mt);
    clReleaseMemObject(mp);
    clReleaseMemObject(me);
    clReleaseMemObject(mi);
}

/* The streaming attention kernel's rows against the host, in double: the
 * visible keys of query t (full mode: j <= t when causal, not padding;
 * causal Linformer: slots j < (t / block) c, then positions of its own
 * block up to t from pk, pv, padding masked), one softmax. */
struct flash_case {
    struct clf__flash_shape sh;
    const float *q, *kv, *vv, *pk, *pv;
    const unsigned char *mask;
};

static double
dot_scaled(const float *a, const float *b, size_t d, float scale)
{
    double acc = 0.0;
    size_t e;

    for (e = 0; e < d; e++)
        acc += (double)a[e] * b[e];
    return acc * scale;
}

static void
flash_row_ref(const struct flash_case *f, size_t b, size_t h, size_t t,
              double *out)
{
    const struct clf__attend_shape *a = &f->sh.at;
    const size_t hc = a->kv_per_head ? a->heads : 1, width = hc * a->dh;
    const size_t g = a->kv_per_head ? h : 0, n = a->n, dh = a->dh;
    const size_t hk = f->sh.window_per_head ? h : 0, blk = f->sh.block;
    const float *qt = f->q + (b * n + t) * a->dq + h * dh;
    double s[160], m = -INFINITY, sum = 0.0;
    const float *v[160];
    size_t cnt = 0, j, e;

    for (j = 0; j < a->L; j++) {
        int vis = blk ? j < t / blk * f->sh.c
                      : (!f->sh.causal || j <= t) &&
                            (f->mask == NULL || f->mask[b * n + j]);
        if (!vis)
            continue;
        v[cnt] = f->vv + (b * a->L + j) * width + g * dh;
        s[cnt++] = dot_scaled(qt, f->kv + (b * a->L + j) * width + g * dh, dh,
                              a->scale);
    }
    for (j = blk ? t / blk * blk : t + 1; j <= t; j++) {
        if (f->mask != NULL && !f->mask[b * n + j])
            continue;
        v[cnt] = f->pv + (b * n + j) * f->sh.dkv + hk * dh;
        s[cnt++] = dot_scaled(qt, f->pk + (b * n + j) * f->sh.dkv + hk * dh, dh,
                              a->scale);
    }
    for (j = 0; j < cnt; j++)
        m = fmax(m, s[j]);
    for (j = 0; j < cnt; j++)
        sum += (s[j] = exp(s[j] - m));
    for (e = 0; e < dh; e++) {
        out[e] = 0.0;
        for (j = 0; j < cnt; j++)
            out[e] += s[j] / sum * v[j][e];
    }
}

/* Runs one case on the device, in the CPU-shaped kernel or (wg) the
 * work-group one, and compares every row. */
static void
flash_run(clf_context *ctx, const struct flash_case *f, int wg,
          const char *what)
{
    const struct clf__attend_shape *a = &f->sh.at;
    const size_t hc = a->kv_per_head ? a->heads : 1, width = hc * a->dh;
    const size_t nq = a->batch * a->n * a->dq, nk = a->batch * a->L * width;
    const size_t nt = clf__flash_kt_floats(&f->sh);
    const size_t np = f->pk ? a->batch * a->n * f->sh.dkv : 1;
    float *o = calloc(nq, sizeof *o), *kt = calloc(nt, sizeof *kt);
    double ref[128];
    cl_mem mq, mk, mv, mo, mt, mpk, mpv, mm = NULL;
    size_t b, h, t, e;
    cl_int err;

    fill(o, nq, 60);
    mq = upload(ctx, f->q, nq);
    mk = upload(ctx, f->kv, nk);
    mv = upload(ctx, f->vv, nk);
    mo = upload(ctx, o, nq);
    mt = upload(ctx, kt, nt);
    mpk = upload(ctx, f->pk ? f->pk : o, np);
    mpv = upload(ctx, f->pv ? f->pv : o, np);
    if (f->mask != NULL)
        mm = clCreateBuffer(ctx->context,
                            CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                            a->batch * a->n, (void *)f->mask, &err);
    expect((wg ? clf__flash_wg(ctx, &f->sh, mq, mk, mv, mo, mm,
                               f->pk ? mpk : NULL, f->pv ? mpv : NULL)
               : clf__flash(ctx, &f->sh, mq, mk, mv, mt, mo, mm,
                            f->pk ? mpk : NULL, f->pv ? mpv : NULL)) == 0,
           what);
    download(ctx, mo, o, nq);
    for (b = 0; b < a->batch; b++)
        for (h = 0; h < a->heads; h++)
            for (t = 0; t < a->n; t++) {
                flash_row_ref(f, b, h, t, ref);
                for (e = 0; e < a->dh; e++)
                    expect(fabs(o[(b * a->n + t) * a->dq + h * a->dh + e] -
                                ref[e]) < 1e-5,
                           what);
            }
    clReleaseMemObject(mq);
    clReleaseMemObject(mk);
    clReleaseMemObject(mv);
    clReleaseMemObject(mo);
    clReleaseMemObject(mt);
    clReleaseMemObject(mpk);
    clReleaseMemObject(mpv);
    if (mm != NULL)
        clReleaseMemObject(mm);
    free(o);
    free(kt);
}

/* The streaming kernel in each mode: Linformer over 70 slots (two tiles,
 * the second partial), full and causal full with a padding mask, causal
 * Linformer with its window; 7 rows (a row tail), d_h 83 (64 + 16 + 3
 * columns), shared and per-head keys.  wg: the work-group kernel, 70 rows
 * (two groups, the second partial, the causal window crossing blocks)
 * and d_h 19 (no whole float4s, and some items own no column); wg 2: its
 * wide build at d_h 83, one sequence of 33 rows (two groups of 32, the
 * second of one row), per-head keys only (the simulator is slow). */
static void
check_flash(clf_context *ctx, int wg)
{
    enum { B = 2, H = 2, N = 70, DH = 83, DQ = H * DH, LMAX = 70 };
    const size_t n = wg == 2 ? 33 : wg ? N : 7, dh = wg == 1 ? 19 : DH;
    const size_t dq = H * dh, batch = wg == 2 ? 1 : B;
    static float q[B * N * DQ], kv[B * LMAX * DQ], vv[B * LMAX * DQ];
    static float pk[B * N * DQ], pv[B * N * DQ];
    static const unsigned char mask7[B * 7] = {1, 1, 0, 1, 1, 0, 1,
                                               0, 1, 1, 1, 1, 1, 0};
    static unsigned char mask[B * N];
    struct flash_case f;
    size_t i;
    int per, mode;

    /* wg: sequence 1's first row sees only padding in causal full mode. */
    for (i = 0; i < B * n; i++)
        mask[i] = wg ? (i * 7) % 5 != 0 : mask7[i];
    fill(q, B * N * DQ, 50);
    fill(kv, B * LMAX * DQ, 51);
    fill(vv, B * LMAX * DQ, 52);
    fill(pk, B * N * DQ, 53);
    fill(pv, B * N * DQ, 54);
    for (per = wg == 2; per < 2; per++)
        for (mode = 0; mode < 4; mode++) {
            memset(&f, 0, sizeof f);
            f.sh.at.batch = batch;
            f.sh.at.heads = H;
            f.sh.at.n = n;
            f.sh.at.dh = dh;
            f.sh.at.dq = dq;
            f.sh.at.L = mode == 0 ? LMAX : mode == 3 ? 6 : n;
            f.sh.at.kv_per_head = per;
            f.sh.at.scale = 0.3f;
            f.sh.full = mode == 1 || mode == 2;
            f.sh.causal = mode == 2;
            f.q = q;
            f.kv = kv;
            f.vv = vv;
            f.mask = f.sh.full || mode == 3 ? mask : NULL;
            /* 3 blocks of 3 (N_max 9), 2 slots each; wg: 5 blocks of 16
             * (N_max 80), the windows of a group's rows in two blocks. */
            if (mode == 3) {
                f.sh.block = wg ? 16 : 3;
                f.sh.c = 2;
                f.sh.at.L = wg ? 10 : 6;
                f.sh.dkv = (per ? H : 1) * dh;
                f.sh.window_per_head = per;
                f.pk = pk;
                f.pv = pv;
            }
            clf__flash_set_blocks(ctx, per); /* per-head keys: 6 rows an item */
            flash_run(ctx, &f, wg, wg ? "flash_wg" : "flash");
            clf__flash_set_blocks(ctx, 0);
        }
}

/* The fused attention kernel and its key transpose: a row tail (n = 5 is
 * not a multiple of CLF_ATTEND_ROWS), slots padded (L = 5 of 64), two
 * d_h blocks (16 + 64 = 80 columns per head), shared and per-head slots. */
static void
check_attend(clf_context *ctx)
{
    enum { B = 2, H = 2, N = 5, DH = 80, L = 5, DQ = H * DH };
    struct clf__attend_shape sh = {B, H, N, DH, DQ, L, 0, 0.3f};
    const size_t lp = clf__attend_slots(L), np = clf__fused_rows(N);
    static float q[B * N * DQ], kv[B * L * DQ], vv[B * L * DQ];
    static float o[B * N * DQ], s[B * H * 8 * 64], kt[B * H * DH * 64];
    int per;

    for (per = 0; per < 2; per++) {
        const size_t hc = per ? H : 1, width = hc * DH;
        cl_mem mq, mk, mv, mo, ms, mt;
        size_t b, h, i, j, c;

        sh.kv_per_head = per;
        fill(q, B * N * DQ, 40 + per);
        fill(kv, B * L * width, 42 + per);
        fill(vv, B * L * width, 44 + per);
        fill(o, B * N * DQ, 46);
        fill(s, B * H * np * lp, 47);
        fill(kt, B * hc * DH * lp, 48);
        mq = upload(ctx, q, B * N * DQ);
        mk = upload(ctx, kv, B * L * width);
        mv = upload(ctx, vv, B * L * width);
        mo = upload(ctx, o, B * N * DQ);
        ms = upload(ctx, s, B * H * np * lp);
        mt = upload(ctx, kt, B * hc * DH * lp);
        clf__fused(ctx, &sh, mq, mk, mv, mt, ms, mo);
        download(ctx, mo, o, B * N * DQ);
        for (b = 0; b < B; b++)
            for (h = 0; h < H; h++)
                for (i = 0; i < N; i++) {
                    const size_t g = per ? h : 0;
                    double sc[L], m = -INFINITY, sum = 0.0;
                    for (j = 0; j < L; j++) {
                        double acc = 0.0;
                        for (c = 0; c < DH; c++)
                            acc += (double)q[(b * N + i) * DQ + h * DH + c] *
                                   kv[(b * L + j) * width + g * DH + c];
                        sc[j] = acc * sh.scale;
                        m = fmax(m, sc[j]);
                    }
                    for (j = 0; j < L; j++)
                        sum += (sc[j] = exp(sc[j] - m));
                    for (c = 0; c < DH; c++) {
                        double want = 0.0;
                        for (j = 0; j < L; j++)
                            want += sc[j] / sum *
                                    vv[(b * L + j) * width + g * DH + c];
                        expect(fabs(o[(b * N + i) * DQ + h * DH + c] - want) <
                                   1e-5,
                               "attend");
                    }
                }
        clReleaseMemObject(mq);
        clReleaseMemObject(mk);
        clReleaseMemObject(mv);
        clReleaseMemObject(mo);
        clReleaseMemObject(ms);
        clReleaseMemObject(mt);
    }
}

/* The tiled GEMM on edge tiles only (M, N, K multiples of no tile, K over
 * two slices), each transposition, a batch of two with beta, and the bias,
 * accumulate and GELU epilogue; under the default sizes and under a set
 * built as a program of its own. */
static void
tiled_case(clf_context *ctx, int ta, int tb, int ex)
{
    enum { M = 5, N = 13, K = 19, T = 2 };
    static float a[T * M * K], b[T * K * N], c[T * M * N], c0[T * M * N];
    static float bias[N];
    static double ref[T * M * N], mag[T * M * N];
    struct clf__gemm_args args;
    ref_gemm_op g;
    cl_mem ma, mb, mc, mbias;
    size_t i;

    memset(&g, 0, sizeof g);
    g.trans_a = ta, g.trans_b = tb, g.act = ex;
    g.m = M, g.n = N, g.k = K, g.batch = ex ? 1 : T;
    g.alpha = ex ? 1.0 : -0.5, g.beta = ex ? 1.0 : 0.25;
    g.lda = ta ? M : K, g.ldb = tb ? K : N, g.ldc = N;
    g.a_stride = M * K, g.b_stride = K * N, g.c_stride = M * N;
    fill(a, T * M * K, 70 + (unsigned)ta);
    fill(b, T * K * N, 72 + (unsigned)tb);
    fill(c, T * M * N, 74);
    fill(bias, N, 75);
    memcpy(c0, c, sizeof c);
    ref_gemm(&g, a, b, c0, ex ? bias : NULL, ref, mag);
    ma = upload(ctx, a, T * M * K);
    mb = upload(ctx, b, T * K * N);
    mc = upload(ctx, c, T * M * N);
    mbias = upload(ctx, bias, N);
    args = (struct clf__gemm_args){.trans_a = ta,
                                   .trans_b = tb,
                                   .m = M,
                                   .n = N,
                                   .k = K,
                                   .alpha = (float)g.alpha,
                                   .beta = (float)g.beta,
                                   .a = ma,
                                   .lda = g.lda,
                                   .a_stride = g.a_stride,
                                   .b = mb,
                                   .ldb = g.ldb,
                                   .b_stride = g.b_stride,
                                   .c = mc,
                                   .ldc = N,
                                   .c_stride = g.c_stride,
                                   .batch = g.batch,
                                   .bias = ex ? mbias : NULL,
                                   .act = ex};
    expect(clf__gemm(ctx, CLF_GEMM_TILED, &args) == 0, "tiled GEMM enqueued");
    download(ctx, mc, c, T * M * N);
    for (i = 0; i < g.batch * M * N; i++)
        expect(fabs(c[i] - ref[i]) < 1e-5, "tiled GEMM");
    for (; i < T * M * N; i++)
        expect(c[i] == c0[i], "tiled GEMM, outside C");
    clReleaseMemObject(ma);
    clReleaseMemObject(mb);
    clReleaseMemObject(mc);
    clReleaseMemObject(mbias);
}

/* A NaN-filled workspace for tiled GEMMs split over K, of `floats`. */
static void
poison_partial(clf_context *ctx, size_t floats)
{
    float *nan = malloc(floats * sizeof *nan);
    size_t i;

    if (nan == NULL)
        exit(1);
    for (i = 0; i < floats; i++)
        nan[i] = NAN;
    if (clf__tiled_state(ctx)->partial != NULL)
        clReleaseMemObject(clf__tiled_state(ctx)->partial);
    clf__tiled_state(ctx)->partial = upload(ctx, nan, floats);
    clf__tiled_state(ctx)->partial_cap = floats;
    free(nan);
}

static void
check_tiled(clf_context *ctx)
{
    static const size_t small[CLF_TILED_NPARAM] = {16, 16, 16, 4, 4, 4};
    struct clf__tiled_cfg cfg, def;
    int ta, tb;

    clf__tiled_default(&def);
    for (ta = 0; ta < 2; ta++)
        for (tb = 0; tb < 2; tb++)
            tiled_case(ctx, ta, tb, 0);
    tiled_case(ctx, 0, 1, 1);
    /* Split over K into two slices (16 + 3 of K = 19), then reduced, the
     * workspace poisoned with NaN first: every element the reduction reads
     * must have been written, or C is NaN. */
    poison_partial(ctx, 2 * 2 * 5 * 13);
    clf__tiled_state(ctx)->split = 2;
    tiled_case(ctx, 0, 0, 0);
    tiled_case(ctx, 1, 1, 0);
    tiled_case(ctx, 0, 1, 1);
    expect(clf__tiled_state(ctx)->partial != NULL, "tiled GEMM split over K");
    clf__tiled_state(ctx)->split = 0;
    memcpy(cfg.v, small, sizeof cfg.v);
    expect(clf__tiled_set(ctx, &cfg) == 0, "tiled GEMM sizes 16x16 built");
    tiled_case(ctx, 0, 0, 0);
    tiled_case(ctx, 1, 1, 0);
    tiled_case(ctx, 0, 1, 1);
    expect(clf__tiled_set(ctx, &def) == 0, "tiled GEMM default sizes");
}

/* The blocked GEMM (row tail, a 64-column and a 16-column block, two
 * batch entries, accumulate, bias, GELU), the transpose, and a GEMM by
 * CLBlast's kernels. */
static void
check_gemm(clf_context *ctx)
{
    enum { M = 5, N = 80, K = 7, T = 2 };
    static float a[T * M * K], b[T * K * N], c[T * M * N], c0[T * M * N];
    static float bt[T * N * K], bias[N];
    cl_mem ma, mb, mc, mt, mbias;
    struct clf__gemm_args g;
    size_t t, i, j, l;

    fill(a, T * M * K, 60);
    fill(b, T * K * N, 61);
    fill(c, T * M * N, 62);
    fill(bias, N, 63);
    mbias = upload(ctx, bias, N);
    memcpy(c0, c, sizeof c);
    ma = upload(ctx, a, T * M * K);
    mb = upload(ctx, b, T * K * N);
    mc = upload(ctx, c, T * M * N);
    mt = upload(ctx, bt, T * N * K);
    g = (struct clf__gemm_args){.m = M,
                                .n = N,
                                .k = K,
                                .alpha = 0.5f,
                                .beta = 1.0f,
                                .a = ma,
                                .lda = K,
                                .a_stride = M * K,
                                .b = mb,
                                .ldb = N,
                                .b_stride = K * N,
                                .c = mc,
                                .ldc = N,
                                .c_stride = M * N,
                                .batch = T,
                                .bias = mbias};
    clf__gemm_nn(ctx, &g);
    download(ctx, mc, c, T * M * N);
    for (t = 0; t < T; t++)
        for (i = 0; i < M; i++)
            for (j = 0; j < N; j++) {
                double want = 0.0;
                for (l = 0; l < K; l++)
                    want +=
                        (double)a[(t * M + i) * K + l] * b[(t * K + l) * N + j];
                want = 0.5 * want + c0[(t * M + i) * N + j] + bias[j];
                expect(fabs(c[(t * M + i) * N + j] - want) < 1e-5, "gemm");
            }
    /* The GELU epilogue, no accumulation, on the first batch entry. */
    g.alpha = 1.0f, g.beta = 0.0f, g.batch = 1, g.bias = NULL;
    g.act = CLF_ACT_GELU;
    clf__gemm_nn(ctx, &g);
    download(ctx, mc, c, M * N);
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double v = 0.0;
            for (l = 0; l < K; l++)
                v += (double)a[i * K + l] * b[l * N + j];
            v = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
            expect(fabs(c[i * N + j] - v) < 1e-5, "gemm gelu");
        }
    clf__transpose(ctx, mb, 0, K, N, N, K * N, T, mt);
    download(ctx, mt, bt, T * N * K);
    for (t = 0; t < T; t++)
        for (l = 0; l < K; l++)
            for (j = 0; j < N; j++)
                expect(bt[(t * N + j) * K + l] == b[(t * K + l) * N + j],
                       "transpose");
    /* CLBlast's own kernels, on the same first batch entry. */
    g.act = CLF_ACT_NONE;
    expect(clf__gemm(ctx, CLF_GEMM_CLBLAST, &g) == 0, "CLBlast GEMM enqueued");
    download(ctx, mc, c, M * N);
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double v = 0.0;
            for (l = 0; l < K; l++)
                v += (double)a[i * K + l] * b[l * N + j];
            expect(fabs(c[i * N + j] - v) < 1e-5, "CLBlast GEMM");
        }
    clReleaseMemObject(ma);
    clReleaseMemObject(mb);
    clReleaseMemObject(mc);
    clReleaseMemObject(mt);
    clReleaseMemObject(mbias);
}

/* Half-precision weights: narrowed on upload (clf_half_narrow), widened
 * before use (clf_half_widen), each exactly the host's rounding; E's 21
 * elements leave a tail to the kernels' four a work-item. */
static void
check_half(clf_context *ctx)
{
    enum { D = 6, HEADS = 2, N = 7, K = 3 };
    static const clf_weight ids[] = {CLF_WEIGHT_Q, CLF_PROJ_E, CLF_PROJ_F};
    clf_attention *att = NULL;
    clf_attention_desc d;
    float w[N * D], back[N * D];
    size_t i, j, count;
    cl_mem m = NULL;
    int rc;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = HEADS;
    d.max_seq_len = N;
    d.k = K;
    d.precision = CLF_PRECISION_HALF;
    if (clf_attention_create(&att, ctx, &d) != 0) {
        expect(0, "half: layer");
        return;
    }
    for (j = 0; j < sizeof ids / sizeof ids[0]; j++) {
        clf_attention_weight_size(att, ids[j], &count);
        fill(w, count, 41 + (unsigned)j);
        w[0] = 1e-6f; /* a binary16 subnormal */
        expect(clf_attention_set_weight(att, ids[j], w, count) == 0,
               "half: set weight");
        clf__lock(ctx);
        clf__half_begin(ctx);
        rc = clf__half_as_float(att, ids[j], &m);
        clf__unlock(ctx);
        expect(rc == 0, "half: widen");
        download(ctx, m, back, count);
        for (i = 0; i < count; i++)
            expect(back[i] == ref_round_half(w[i]), "half narrow and widen");
    }
    clf_attention_destroy(att);
}

/* A row longer than sixteen lanes with a tail, for the vector kernel. */
static void
check_softmax_tail(clf_context *ctx)
{
    float big[2 * 21], bo[2 * 21];
    double bref[2 * 21];
    cl_mem mbig;
    size_t i;
    int v;

    fill(big, 42, 6);
    ref_softmax(big, 2, 21, bref);
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        mbig = upload(ctx, big, 42);
        clf__softmax_rows_variant(ctx, v, mbig, 0, 2, 21);
        download(ctx, mbig, bo, 42);
        for (i = 0; i < 42; i++)
            expect(fabs(bo[i] - bref[i]) < 1e-6, "softmax tail");
        clReleaseMemObject(mbig);
    }
}

/* add_bias on a strided sub-block, rowsum of E and add_rowsum_bias. */
static void
check_bias_rowsum(clf_context *ctx)
{
    enum { ROWS = 5, COLS = 7, LD = 9, HEADS = 2, DH = 3, SLOTS = 4, B = 3 };
    float y[ROWS * LD + 2], y0[ROWS * LD + 2], bias[HEADS * DH];
    float e[HEADS * SLOTS * LD], rs[HEADS * SLOTS];
    float kb[B * SLOTS * HEADS * DH], kb0[B * SLOTS * HEADS * DH];
    cl_mem my, mb, me, mr, mk;
    size_t i, r, c;

    /* add_bias on a strided sub-block starting at offset 2. */
    fill(y, sizeof y / sizeof y[0], 1);
    fill(bias, HEADS * DH, 2);
    memcpy(y0, y, sizeof y);
    my = upload(ctx, y, sizeof y / sizeof y[0]);
    mb = upload(ctx, bias, HEADS * DH);
    clf__add_bias(ctx, my, 2, ROWS - 1, HEADS * DH, LD, mb);
    download(ctx, my, y, sizeof y / sizeof y[0]);
    for (r = 0; r < ROWS - 1; r++)
        for (c = 0; c < HEADS * DH; c++)
            y0[2 + r * LD + c] += bias[c];
    expect(memcmp(y, y0, sizeof y) == 0, "add_bias");

    /* rowsum of the first COLS columns of an LD-wide E. */
    fill(e, HEADS * SLOTS * LD, 3);
    me = upload(ctx, e, HEADS * SLOTS * LD);
    memset(rs, 0, sizeof rs);
    mr = upload(ctx, rs, HEADS * SLOTS);
    clf__rowsum(ctx, me, HEADS * SLOTS, COLS, LD, mr);
    download(ctx, mr, rs, HEADS * SLOTS);
    for (r = 0; r < HEADS * SLOTS; r++) {
        float acc = 0.0f;
        for (c = 0; c < COLS; c++)
            acc += e[r * LD + c];
        expect(fabsf(acc - rs[r]) < 1e-5f, "rowsum");
    }

    /* add_rowsum_bias, per-head rowsum and bias. */
    fill(kb, sizeof kb / sizeof kb[0], 4);
    memcpy(kb0, kb, sizeof kb);
    mk = upload(ctx, kb, sizeof kb / sizeof kb[0]);
    clf__add_rowsum_bias(ctx, mk, B, SLOTS, HEADS, DH, mr, 0, 1, mb, 1);
    download(ctx, mk, kb, sizeof kb / sizeof kb[0]);
    for (i = 0; i < sizeof kb / sizeof kb[0]; i++) {
        size_t col = i % (HEADS * DH), slot = (i / (HEADS * DH)) % SLOTS;
        size_t h = col / DH;
        float want = kb0[i] + rs[h * SLOTS + slot] * bias[col];
        expect(fabsf(want - kb[i]) < 1e-5f, "add_rowsum_bias");
    }

    clReleaseMemObject(my);
    clReleaseMemObject(mb);
    clReleaseMemObject(me);
    clReleaseMemObject(mr);
    clReleaseMemObject(mk);
}

/* Every softmax variant at offset 3, with a fully masked row and huge
 * logits. */
static void
check_softmax(clf_context *ctx)
{
    float s[3 + 6 * 5], sref[6 * 5];
    double sm[6 * 5];
    cl_mem ms;
    size_t i, c;
    int v;

    fill(s, sizeof s / sizeof s[0], 5);
    for (c = 0; c < 5; c++)
        s[3 + 5 * 2 + c] = -INFINITY;
    s[3 + 5 * 4 + 1] = 1e4f;
    s[3 + 5 * 4 + 3] = -1e4f;
    memcpy(sref, s + 3, sizeof sref);
    ref_softmax(sref, 6, 5, sm);
    for (v = 0; v < CLF_SOFTMAX_VARIANTS; v++) {
        float s2[sizeof s / sizeof s[0]];
        memcpy(s2, s, sizeof s);
        ms = upload(ctx, s2, sizeof s2 / sizeof s2[0]);
        clf__softmax_rows_variant(ctx, v, ms, 3, 6, 5);
        download(ctx, ms, s2, sizeof s2 / sizeof s2[0]);
        for (i = 0; i < 30; i++)
            expect(fabs(s2[3 + i] - sm[i]) < 1e-6, "softmax");
        clReleaseMemObject(ms);
    }
}

/* A full-mode forward whose batch's scores pass the score limit while one
 * sequence's fit: passes of whole sequences, the last one shorter, write
 * only the workspace sized for them (the causal triangle and lengths on). */
static void
check_score_passes(clf_context *ctx)
{
    enum { D = 4, HEADS = 2, N = 5, K = 3, B = 3 };
    static const unsigned lens[B] = {5, 2, 4};
    static float w[CLF_WEIGHT_COUNT][D * D + N * K * HEADS];
    float x[B * N * D], y[B * N * D];
    double ref[B * N * D];
    unsigned char mask[B * N];
    clf_attention *att = NULL;
    clf_attention_desc d;
    clf_forward_opts o;
    ref_layer r;
    size_t i, j, count;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = HEADS;
    d.max_seq_len = N;
    d.k = K;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    if (clf_attention_create(&att, ctx, &d) != 0 ||
        clf_attention_set_mode(att, CLF_MODE_FULL) != 0) {
        expect(0, "score passes: layer");
        clf_attention_destroy(att);
        return;
    }
    for (i = 0; i < CLF_WEIGHT_COUNT; i++) {
        if (clf_attention_weight_size(att, (clf_weight)i, &count) != 0)
            continue;
        fill(w[i], count, 70 + (unsigned)i);
        expect(clf_attention_set_weight(att, (clf_weight)i, w[i], count) == 0,
               "score passes: set weight");
    }
    memset(&r, 0, sizeof r);
    r.D = D, r.hq = r.hkv = HEADS, r.dh = D / HEADS, r.N = N, r.k = K;
    r.per_head_E = d.sharing == CLF_SHARE_PER_HEAD;
    r.wq = w[CLF_WEIGHT_Q], r.wk = w[CLF_WEIGHT_K], r.wv = w[CLF_WEIGHT_V];
    r.wo = w[CLF_WEIGHT_OUT], r.bq = w[CLF_BIAS_Q], r.bk = w[CLF_BIAS_K];
    r.bv = w[CLF_BIAS_V], r.bo = w[CLF_BIAS_OUT];
    r.E = w[CLF_PROJ_E], r.F = w[CLF_PROJ_F];
    /* One sequence's scores: HEADS x N x N floats; 1.5 of them fit. */
    clf__attention_set_score_limit(att, HEADS * N * N * sizeof(float) * 3 / 2);
    fill(x, B * N * D, 80);
    memset(&o, 0, sizeof o);
    o.causal = 1;
    o.lengths = lens;
    for (i = 0; i < B; i++)
        for (j = 0; j < N; j++)
            mask[i * N + j] = j < lens[i];
    expect(clf_attention_forward_ex(att, x, B, N, y, &o) == 0,
           "score passes: forward");
    ref_attention_ex(&r, 1, x, B, N, mask, 1, 0, ref);
    for (i = 0; i < B * N * D; i++)
        expect(fabs(y[i] - ref[i]) < 1e-5, "score passes");
    clf_attention_destroy(att);
}

/* The checks of `part` ("all", "quick" or "flash_wg"). */
static void
run_part(clf_context *ctx, const char *part)
{
    if (strcmp(part, "flash_wg") != 0) {
        check_bias_rowsum(ctx);
        check_softmax(ctx);
        check_softmax_tail(ctx);
        check_masks(ctx);
        check_causal(ctx);
        check_encoder(ctx);
        check_attend(ctx);
        check_flash(ctx, 0);
    }
    if (strcmp(part, "quick") != 0) {
        check_flash(ctx, 1);
        check_flash(ctx, 2);
    }
    if (strcmp(part, "flash_wg") != 0) {
        check_gemm(ctx);
        check_tiled(ctx);
        check_half(ctx);
        check_score_passes(ctx);
    }
}

int
main(int argc, char **argv)
{
    const char *part = argc > 1 ? argv[1] : "all";
    clf_context *ctx = NULL;
    int rc;

    if (argc > 2 || (strcmp(part, "all") != 0 && strcmp(part, "quick") != 0 &&
                     strcmp(part, "flash_wg") != 0)) {
        fprintf(stderr, "usage: oclgrind_driver [all|quick|flash_wg]\n");
        return 2;
    }

    rc = clf_context_create(&ctx, NULL);
    if (rc == 0)
        rc = clf_context_build(ctx);
    if (rc != 0) {
        fprintf(stderr, "oclgrind_driver: %s: %s\n%s\n", clf_strerror(rc),
                clf_last_error(), ctx ? clf_context_build_log(ctx) : "");
        clf_context_destroy(ctx);
        return 1;
    }
    run_part(ctx, part);
    clf_context_destroy(ctx);
    if (failures == 0)
        printf("oclgrind_driver: %s: all kernels match\n", part);
    return failures == 0 ? 0 : 1;
}
