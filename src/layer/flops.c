/*
 * The FLOP count of one attention forward, from the layer's shape alone.
 *
 * Multiply-adds count 2, a bias add 1, each softmax entry 5 (max, subtract,
 * exp, sum, scale).  The count follows the order of work the forward plans:
 * Linformer compresses first (E X, then W_k) when that needs fewer
 * multiply-adds than projecting first; causal Linformer projects K and V
 * exactly (its window needs them) and compresses the complete blocks before
 * the last query's block; the windowed compressions (mean, max, the
 * convolution) project K and V exactly, then read windows.  Masks change
 * no count.  No device is needed, so
 * the bench, the library and a user planning a run count the same way.
 */
#include "layer/layer_impl.h"

#include <string.h>

/* The shape as doubles, with the derived sizes the count uses. */
struct fshape {
    double B, n, D, hq, dh, dq, dkv, k, nE, hc;
    int linformer, causal, sides, xf_is_xe;
    const clf_attention_desc *d;
};

/* The checks a forward of that shape makes of its arguments. */
static int
check_call(const clf_attention_desc *d, clf_mode mode, size_t batch,
           size_t seq_len, int causal)
{
    if (batch == 0)
        return clf__fail(CLF_EBAD_SIZE, "batch is 0");
    if (seq_len == 0)
        return clf__fail(CLF_EBAD_SIZE, "seq_len is 0");
    if (seq_len > d->max_seq_len)
        return clf__fail(CLF_ESEQ_TOO_LONG,
                         "seq_len %zu exceeds max_seq_len %zu", seq_len,
                         d->max_seq_len);
    if (mode != CLF_MODE_LINFORMER && mode != CLF_MODE_FULL)
        return clf__fail(CLF_EBAD_ENUM, "mode %d is not a clf_mode", (int)mode);
    if (causal && mode == CLF_MODE_LINFORMER)
        return clf__causal_desc_check(d);
    return 0;
}

/* K and V projected exactly on all n rows, with their biases. */
static double
exact_kv(const struct fshape *s)
{
    double f = 2.0 * s->B * s->n * s->D * s->dkv * s->sides;

    if (s->d->bias_k)
        f += s->B * s->n * s->dkv;
    if (s->d->bias_v && !s->d->share_kv)
        f += s->B * s->n * s->dkv;
    return f;
}

/* Causal Linformer: exact K and V for the window, then each complete block
 * before the last query's block compressed into its c slots. */
static double
causal_kv(const struct fshape *s, size_t seq_len)
{
    size_t b = s->d->causal_block;
    size_t nb = (s->d->max_seq_len + b - 1) / b;
    double c = (double)(s->d->k / nb);
    double nbq = (double)((seq_len - 1) / b);

    return exact_kv(s) +
           2.0 * s->B * nbq * c * (double)b * s->hc * s->dh * s->sides;
}

/* One side (K or V) of Linformer, compressing first: E X (unless F X is
 * E X), then W on k rows, then the bias through rowsum(E) (computed once
 * for the forward) or, in fairseq's order, once a slot. */
static double
compress_first_side(const struct fshape *s, double cf, int side)
{
    int has_bias = side == 0 ? s->d->bias_k : s->d->bias_v;
    double ex = s->nE * s->k * s->n * s->D;
    double f = 2.0 * s->B * (cf - ex);

    if (!(side == 1 && s->xf_is_xe))
        f += 2.0 * s->B * ex;
    if (has_bias && s->d->compressed_bias)
        f += s->B * s->k * s->hc * s->dh;
    else if (has_bias)
        f += s->nE * s->k * s->n + 2.0 * s->B * s->k * s->hc * s->dh;
    return f;
}

void
clf__kv_macs(double nE, double k, double n, double D, double dkv, double hc,
             double dh, double *cf, double *pf)
{
    *cf = nE * k * n * D + (nE == 1.0 ? k * D * dkv : hc * k * D * dh);
    *pf = n * D * dkv + hc * k * n * dh;
}

/* Linformer's K and V, compressing or projecting first, whichever needs
 * fewer multiply-adds. */
static double
linformer_kv(struct fshape *s)
{
    double cf, pf, f = 0.0;
    int side;

    clf__kv_macs(s->nE, s->k, s->n, s->D, s->dkv, s->hc, s->dh, &cf, &pf);
    s->xf_is_xe =
        cf <= pf && !s->d->share_kv && s->d->sharing == CLF_SHARE_KEY_VALUE;
    for (side = 0; side < s->sides; side++) {
        int has_bias = side == 0 ? s->d->bias_k : s->d->bias_v;
        if (s->d->bias_proj) /* the slot bias */
            f += s->B * s->k * s->hc * s->dh;
        if (cf <= pf) {
            f += compress_first_side(s, cf, side);
            continue;
        }
        f += 2.0 * s->B * pf;
        if (has_bias && s->d->compressed_bias)
            f += s->B * s->k * s->hc * s->dh;
        else if (has_bias)
            f += s->B * s->n * s->dkv;
    }
    return f;
}

/* The windowed compressions: K and V projected exactly, then each slot
 * made (in causal Linformer, the slots of the complete blocks before the
 * last query's block) from a window of w = floor(N / k) rows: w adds or
 * comparisons an entry pooling, w * d_h multiply-adds (and the bias) an
 * entry for the convolution. */
static double
windowed_kv(const struct fshape *s, size_t seq_len)
{
    const clf_attention_desc *d = s->d;
    double w = (double)(d->max_seq_len / d->k), slots = s->k, per = w;
    size_t b = d->causal_block, nb;

    if (s->causal) {
        nb = (d->max_seq_len + b - 1) / b;
        slots = (double)((seq_len - 1) / b) * (double)(d->k / nb);
    }
    if (d->compression == CLF_COMPRESS_CONV)
        per = 2.0 * w * s->dh + (d->bias_proj ? 1.0 : 0.0);
    return exact_kv(s) + s->B * slots * s->hc * s->dh * per * s->sides;
}

/* Step 2's count in the layer's mode and compression. */
static double
keys_values(struct fshape *s, size_t seq_len)
{
    if (!s->linformer)
        return exact_kv(s);
    if (s->d->compression != CLF_COMPRESS_LINEAR)
        return windowed_kv(s, seq_len);
    return s->causal ? causal_kv(s, seq_len) : linformer_kv(s);
}

/* Window entries of causal Linformer: the sum over query positions q of
 * (q mod b) + 1. */
static double
causal_window(size_t seq_len, size_t b)
{
    double full = (double)(seq_len / b), rest = (double)(seq_len % b);

    return full * (double)b * ((double)b + 1.0) / 2.0 +
           rest * (rest + 1.0) / 2.0;
}

static void
fill_shape(struct fshape *s, const clf_attention_desc *d, size_t dh,
           clf_mode mode, size_t batch, size_t seq_len, int causal)
{
    size_t hkv = d->one_kv_head ? 1 : d->heads;

    memset(s, 0, sizeof *s);
    s->d = d;
    s->B = (double)batch;
    s->n = (double)seq_len;
    s->D = (double)d->d_model;
    s->hq = (double)d->heads;
    s->dh = (double)dh;
    s->dq = s->hq * s->dh;
    s->dkv = (double)hkv * s->dh;
    s->k = (double)d->k;
    s->linformer = mode == CLF_MODE_LINFORMER;
    s->causal = causal != 0;
    s->nE = d->sharing == CLF_SHARE_PER_HEAD ? (double)d->heads : 1.0;
    s->hc = (s->linformer && s->nE > 1.0) ? s->hq : (double)hkv;
    s->sides = d->share_kv ? 1 : 2;
}

CLF_EXTERN int
clf_attention_desc_flops(const clf_attention_desc *desc, clf_mode mode,
                         size_t batch, size_t seq_len, int causal,
                         double stage_flops[CLF_STAGE_COUNT], double *total)
{
    struct fshape s;
    double f[CLF_STAGE_COUNT] = {0}, L, ld;
    size_t dh = 0;
    int rc, i;

    if (desc == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "desc is NULL");
    if (total == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "total is NULL");
    if ((rc = clf__desc_check(desc, &dh)) != 0 ||
        (rc = check_call(desc, mode, batch, seq_len, causal)) != 0)
        return rc;
    fill_shape(&s, desc, dh, mode, batch, seq_len, causal);

    f[CLF_STAGE_PROJECTION] =
        2.0 * s.B * s.n * s.D * s.dq + (desc->bias_q ? s.B * s.n * s.dq : 0.0);
    f[CLF_STAGE_OUTPUT] =
        2.0 * s.B * s.n * s.dq * s.D + (desc->bias_out ? s.B * s.n * s.D : 0.0);
    L = s.linformer ? s.k : s.n;
    ld = L;
    f[CLF_STAGE_SCORES] = 2.0 * s.B * s.hq * s.n * L * s.dh;
    f[CLF_STAGE_COMPRESSION] = keys_values(&s, seq_len);
    if (s.linformer && s.causal) {
        f[CLF_STAGE_SCORES] += 2.0 * s.B * s.hq * s.dh *
                               causal_window(seq_len, desc->causal_block);
        ld = s.k + (double)desc->causal_block;
    }
    f[CLF_STAGE_WEIGHTED_SUM] = f[CLF_STAGE_SCORES];
    f[CLF_STAGE_SOFTMAX] = 5.0 * s.B * s.hq * s.n * ld;

    *total = 0.0;
    for (i = 0; i < CLF_STAGE_COUNT; i++) {
        *total += f[i];
        if (stage_flops != NULL)
            stage_flops[i] = f[i];
    }
    return 0;
}
