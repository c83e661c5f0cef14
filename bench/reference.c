#include "reference.h"

#include <math.h>
#include <stdlib.h>

static void
linear(const float *x, size_t rows, size_t in, const float *w, size_t out,
       const float *b, double *y)
{
    size_t r, o, i;

    for (r = 0; r < rows; r++)
        for (o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (i = 0; i < in; i++)
                acc += (double)x[r * in + i] * w[o * in + i];
            y[r * out + o] = acc;
        }
}

void
ref_softmax(const float *s, size_t rows, size_t cols, double *out)
{
    size_t r, j;

    for (r = 0; r < rows; r++) {
        double m = -INFINITY, sum = 0.0;
        for (j = 0; j < cols; j++)
            if (s[r * cols + j] > m)
                m = s[r * cols + j];
        if (m == -INFINITY) {
            for (j = 0; j < cols; j++)
                out[r * cols + j] = 0.0;
            continue;
        }
        for (j = 0; j < cols; j++)
            sum += exp((double)s[r * cols + j] - m);
        for (j = 0; j < cols; j++)
            out[r * cols + j] = exp((double)s[r * cols + j] - m) / sum;
    }
}

void
ref_softmax_masked(const float *s, size_t rows, size_t cols,
                   const unsigned char *mask, size_t heads, size_t chunk,
                   size_t row0, int causal, double *out)
{
    size_t r, j;

    for (r = 0; r < rows; r++) {
        const size_t seq = r / (heads * chunk);
        const size_t i = row0 + r % (heads * chunk) % chunk;
        const float *row = s + r * cols;
        double m = -INFINITY, sum = 0.0;
        for (j = 0; j < cols; j++) {
            const int seen = (!causal || j <= i) &&
                             (mask == NULL || mask[seq * cols + j] != 0);
            out[r * cols + j] = seen ? row[j] : -INFINITY;
            if (out[r * cols + j] > m)
                m = out[r * cols + j];
        }
        for (j = 0; j < cols; j++) {
            const double v = out[r * cols + j];
            out[r * cols + j] = m == -INFINITY ? 0.0 : exp(v - m);
            sum += out[r * cols + j];
        }
        for (j = 0; j < cols && sum > 0.0; j++)
            out[r * cols + j] /= sum;
    }
}

/* The state of one reference attention call: its mode, the batch row's
 * mask, and the work buffers of one batch row. */
typedef struct ref_run {
    const ref_layer *l;
    int full, causal, lin_causal;
    size_t n, block, c, L, ncols, dq, dkv;
    const unsigned char *mb; /* this row's padding mask, NULL for none */
    double *q, *kk, *vv;     /* n x dq, n x dkv, n x dkv */
    double *kb, *vb;         /* the L keys and values of one head */
    double *o, *sc;          /* n x dq heads' outputs, one row of scores */
    int *use;                /* which of a row's ncols columns take part */
} ref_run;

static void
run_open(ref_run *r, const ref_layer *l, int full, size_t n, int causal,
         size_t block)
{
    const size_t nb = block ? (l->N + block - 1) / block : 1;

    r->l = l;
    r->full = full;
    r->causal = causal || (full && l->slot_mask);
    r->lin_causal = causal && !full;
    r->n = n;
    r->block = block;
    r->c = block ? l->k / nb : 0;
    r->L = full ? n : l->k;
    /* causal Linformer: query t also sees its own block's positions */
    r->ncols = r->L + (r->lin_causal ? block : 0);
    r->dq = l->hq * l->dh;
    r->dkv = l->hkv * l->dh;
    r->mb = NULL;
    r->q = malloc(n * r->dq * sizeof *r->q);
    r->kk = malloc(n * r->dkv * sizeof *r->kk);
    r->vv = malloc(n * r->dkv * sizeof *r->vv);
    r->kb = malloc(r->L * l->dh * sizeof *r->kb);
    r->vb = malloc(r->L * l->dh * sizeof *r->vb);
    r->o = malloc(n * r->dq * sizeof *r->o);
    r->sc = malloc(r->ncols * sizeof *r->sc);
    r->use = malloc(r->ncols * sizeof *r->use);
}

static void
run_close(ref_run *r)
{
    free(r->q);
    free(r->kk);
    free(r->vv);
    free(r->kb);
    free(r->vb);
    free(r->o);
    free(r->sc);
    free(r->use);
}

/* Q, K and V of one batch row. */
static void
project_qkv(ref_run *r, const float *xb)
{
    const ref_layer *l = r->l;
    /* fairseq adds the K/V biases after compression. */
    const int late = l->compressed_bias && !r->full;
    size_t i;

    linear(xb, r->n, l->D, l->wq, r->dq, l->bq, r->q);
    linear(xb, r->n, l->D, l->wk, r->dkv, late ? NULL : l->bk, r->kk);
    if (l->share_kv) {
        for (i = 0; i < r->n * r->dkv; i++)
            r->vv[i] = r->kk[i];
    } else {
        linear(xb, r->n, l->D, l->wv, r->dkv, late ? NULL : l->bv, r->vv);
    }
}

/* Padding keys take no part: E diag(mask). */
static void
mask_padding_keys(ref_run *r)
{
    size_t t, e;

    if (r->mb == NULL)
        return;
    for (t = 0; t < r->n; t++)
        if (!r->mb[t])
            for (e = 0; e < r->dkv; e++)
                r->kk[t * r->dkv + e] = r->vv[t * r->dkv + e] = 0.0;
}

/* Full attention: head hk's keys and values as they are. */
static void
full_keys(ref_run *r, size_t hk)
{
    const size_t dh = r->l->dh;
    size_t j, e;

    for (j = 0; j < r->L; j++)
        for (e = 0; e < dh; e++) {
            r->kb[j * dh + e] = r->kk[j * r->dkv + hk * dh + e];
            r->vb[j * dh + e] = r->vv[j * r->dkv + hk * dh + e];
        }
}

/* Head h's E and F (F is E when they are shared or when there is no E). */
static void
head_projections(const ref_layer *l, size_t h, const float **E, const float **F)
{
    const size_t eh = l->per_head_E ? h : 0;

    *E = l->E ? l->E + eh * l->k * l->N : NULL;
    *F = (l->share_kv || l->kv_shared || *E == NULL) ? *E
                                                     : l->F + eh * l->k * l->N;
}

/* The positions [lo, hi) that Linformer slot j compresses: all of them, or
 * under causality only those of its block j / c (clipped to the n given,
 * which may be shorter than N). */
static void
slot_positions(const ref_run *r, size_t j, size_t *lo, size_t *hi)
{
    *lo = 0;
    *hi = r->n;
    if (!r->lin_causal)
        return;
    *lo = (j / r->c) * r->block;
    *hi = *lo + r->block < r->n ? *lo + r->block : r->n;
    if (*lo > r->n)
        *lo = r->n;
}

/* Slot j, column e of head hk's compressed keys and values: E K and F V
 * over the slot's positions, plus the late biases (fairseq). */
static void
compress_slot(ref_run *r, const float *E, const float *F, size_t hk, size_t j,
              size_t e)
{
    const ref_layer *l = r->l;
    const size_t col = hk * l->dh + e;
    double ak = 0.0, av = 0.0;
    size_t lo, hi, t;

    slot_positions(r, j, &lo, &hi);
    for (t = lo; t < hi; t++) {
        ak += (double)E[j * l->N + t] * r->kk[t * r->dkv + col];
        av += (double)F[j * l->N + t] * r->vv[t * r->dkv + col];
    }
    if (l->compressed_bias) {
        const float *bv = l->share_kv ? l->bk : l->bv;
        ak += l->bk ? l->bk[col] : 0.0;
        av += bv ? bv[col] : 0.0;
    }
    if (l->bE != NULL) { /* bias_proj: this head's E (F) row j's bias */
        const int f_is_e = F == E;
        ak += l->bE[(size_t)(E - l->E) / l->N + j];
        av += f_is_e ? l->bE[(size_t)(E - l->E) / l->N + j]
                     : l->bF[(size_t)(F - l->F) / l->N + j];
    }
    r->kb[j * l->dh + e] = ak;
    r->vb[j * l->dh + e] = av;
}

/* Row t, column ci of head hk's keys (values with v): zero past n. */
static double
kv_at(const ref_run *r, int v, size_t t, size_t hk, size_t ci)
{
    if (t >= r->n)
        return 0.0;
    return (v ? r->vv : r->kk)[t * r->dkv + hk * r->l->dh + ci];
}

/* Mean (compression 1) or max (2) pooling of one column over the window
 * of w positions from start. */
static double
window_pool(const ref_run *r, int v, size_t hk, size_t start, size_t w,
            size_t e)
{
    const int mean = r->l->compression == 1;
    double acc = mean ? 0.0 : -INFINITY;
    size_t t;

    for (t = start; t < start + w; t++) {
        const double x = kv_at(r, v, t, hk, e);
        if (mean)
            acc += x;
        else
            acc = (x > acc || isnan(x)) ? x : acc;
    }
    return mean ? acc / (double)w : acc;
}

/* The convolution (compression 3): output channel e of head h over the
 * window of w positions from start, and its bias. */
static double
window_conv(const ref_run *r, int v, size_t h, size_t hk, size_t start,
            size_t w, size_t e)
{
    const ref_layer *l = r->l;
    const size_t dh = l->dh, eh = l->per_head_E ? h : 0;
    const int own_f = v && !l->share_kv && !l->kv_shared;
    const float *W = own_f ? l->F : l->E, *b = own_f ? l->bF : l->bE;
    double acc = 0.0;
    size_t t, ci;

    for (t = start; t < start + w; t++)
        for (ci = 0; ci < dh; ci++)
            acc += (double)W[((eh * dh + e) * dh + ci) * w + (t - start)] *
                   kv_at(r, v, t, hk, ci);
    return b != NULL ? acc + b[eh * dh + e] : acc;
}

/* The windowed compressions: slot j, column e of one side (v: values) of
 * head h (reading K/V head hk) from its window of w positions. */
static double
window_slot(const ref_run *r, int v, size_t h, size_t hk, size_t j, size_t e)
{
    const ref_layer *l = r->l;
    const size_t w = l->N / l->k;
    const size_t start =
        r->lin_causal ? (j / r->c) * r->block + (j % r->c) * w : j * w;

    return l->compression == 3 ? window_conv(r, v, h, hk, start, w, e)
                               : window_pool(r, v, hk, start, w, e);
}

/* Linformer: head h's k compressed keys and values. */
static void
linformer_keys(ref_run *r, size_t h, size_t hk)
{
    const float *E, *F;
    size_t j, e;

    head_projections(r->l, h, &E, &F);
    for (j = 0; j < r->L; j++)
        for (e = 0; e < r->l->dh; e++) {
            if (r->l->compression == 0) {
                compress_slot(r, E, F, hk, j, e);
                continue;
            }
            r->kb[j * r->l->dh + e] = window_slot(r, 0, h, hk, j, e);
            r->vb[j * r->l->dh + e] = window_slot(r, 1, h, hk, j, e);
        }
}

/* Full attention: whether query i sees key j (padding and causality). */
static int
full_key_visible(const ref_run *r, size_t i, size_t j)
{
    if (r->mb != NULL && !r->mb[j])
        return 0;
    return !(r->causal && j > i);
}

/* Whether query i sees column j < L: under causal Linformer, only the
 * slots of the blocks before its own. */
static int
slot_visible(const ref_run *r, size_t i, size_t j)
{
    if (r->full)
        return full_key_visible(r, i, j);
    if (r->lin_causal)
        return j < (i / r->block) * r->c;
    return !r->l->slot_mask || j <= i;
}

/* The key row of query i's column j, NULL where it takes no part.  Columns
 * from L on (causal Linformer) are the exact keys of query i's own block,
 * from its offset `first` up to i itself. */
static const double *
key_row(const ref_run *r, size_t hk, size_t i, size_t first, size_t j)
{
    size_t pos;

    if (j < r->L)
        return slot_visible(r, i, j) ? r->kb + j * r->l->dh : NULL;
    pos = first + (j - r->L);
    if (pos <= i && (r->mb == NULL || r->mb[pos]))
        return r->kk + pos * r->dkv + hk * r->l->dh;
    return NULL;
}

/* Query i's scaled scores of head h into sc (use marks the columns that
 * take part); returns their maximum. */
static double
score_row(ref_run *r, size_t h, size_t hk, size_t i, size_t first)
{
    const size_t dh = r->l->dh;
    const double *qi = r->q + i * r->dq + h * dh;
    double m = -INFINITY;
    size_t j, e;

    for (j = 0; j < r->ncols; j++) {
        const double *kr = key_row(r, hk, i, first, j);
        double acc = 0.0;
        r->use[j] = kr != NULL;
        if (!r->use[j])
            continue;
        for (e = 0; e < dh; e++)
            acc += qi[e] * kr[e];
        r->sc[j] = acc / sqrt((double)dh);
        if (r->sc[j] > m)
            m = r->sc[j];
    }
    return m;
}

/* exp(sc - m) over the columns that take part; returns their sum. */
static double
exp_row(ref_run *r, double m)
{
    double sum = 0.0;
    size_t j;

    for (j = 0; j < r->ncols; j++) {
        r->sc[j] = r->use[j] ? exp(r->sc[j] - m) : 0.0;
        sum += r->sc[j];
    }
    return sum;
}

/* Query i's output of head h: the values weighted by sc / sum (zero when
 * no column takes part). */
static void
weigh_values(ref_run *r, size_t h, size_t hk, size_t i, size_t first,
             double sum)
{
    const size_t dh = r->l->dh;
    size_t j, e;

    for (e = 0; e < dh; e++) {
        double acc = 0.0;
        for (j = 0; j < r->ncols; j++) {
            double v;
            if (!r->use[j])
                continue;
            v = j < r->L ? r->vb[j * dh + e]
                         : r->vv[(first + j - r->L) * r->dkv + hk * dh + e];
            acc += r->sc[j] / sum * v;
        }
        r->o[i * r->dq + h * dh + e] = sum > 0.0 ? acc : 0.0;
    }
}

/* Head h of one batch row into o. */
static void
attend_head(ref_run *r, size_t h)
{
    const size_t hk = r->l->hkv == 1 ? 0 : h;
    size_t i;

    if (r->full)
        full_keys(r, hk);
    else
        linformer_keys(r, h, hk);
    for (i = 0; i < r->n; i++) {
        /* causal Linformer: the offset of query i's own block */
        const size_t first = r->lin_causal ? (i / r->block) * r->block : 0;
        const double m = score_row(r, h, hk, i, first);
        weigh_values(r, h, hk, i, first, exp_row(r, m));
    }
}

/* yb (n x D) = o W_o^T + b_o, zero on padding rows. */
static void
project_out(const ref_run *r, double *yb)
{
    const ref_layer *l = r->l;
    size_t i, j, e;

    for (i = 0; i < r->n; i++)
        for (j = 0; j < l->D; j++) {
            double acc = l->bo ? l->bo[j] : 0.0;
            for (e = 0; e < r->dq; e++)
                acc += r->o[i * r->dq + e] * l->wo[j * r->dq + e];
            yb[i * l->D + j] = (r->mb == NULL || r->mb[i]) ? acc : 0.0;
        }
}

void
ref_attention_ex(const ref_layer *l, int full, const float *x, size_t B,
                 size_t n, const unsigned char *mask, int causal, size_t block,
                 double *y)
{
    ref_run r;
    size_t b, h;

    run_open(&r, l, full, n, causal, block);
    for (b = 0; b < B; b++) {
        r.mb = mask ? mask + b * n : NULL;
        project_qkv(&r, x + b * n * l->D);
        mask_padding_keys(&r);
        for (h = 0; h < l->hq; h++)
            attend_head(&r, h);
        project_out(&r, y + b * n * l->D);
    }
    run_close(&r);
}

void
ref_attention(const ref_layer *l, int full, const float *x, size_t B, size_t n,
              double *y)
{
    ref_attention_ex(l, full, x, B, n, NULL, 0, 0, y);
}

void
ref_gemm(const ref_gemm_op *g, const float *a, const float *b, const float *c0,
         const float *bias, double *c, double *mag)
{
    size_t t, i, j, l;

    for (t = 0; t < g->batch; t++)
        for (i = 0; i < g->m; i++)
            for (j = 0; j < g->n; j++) {
                const size_t at = g->c_off + t * g->c_stride + i * g->ldc + j;
                double s = 0.0, m = 0.0, v;
                for (l = 0; l < g->k; l++) {
                    double x =
                        g->trans_a
                            ? a[g->a_off + t * g->a_stride + l * g->lda + i]
                            : a[g->a_off + t * g->a_stride + i * g->lda + l];
                    double y =
                        g->trans_b
                            ? b[g->b_off + t * g->b_stride + j * g->ldb + l]
                            : b[g->b_off + t * g->b_stride + l * g->ldb + j];
                    s += x * y;
                    m += fabs(x * y);
                }
                v = g->alpha * s + g->beta * c0[at];
                m = fabs(g->alpha) * m + fabs(g->beta * c0[at]);
                if (bias != NULL) {
                    v += bias[j];
                    m += fabs(bias[j]);
                }
                if (g->act == 1)
                    v = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
                else if (g->act == 2 && v < 0.0)
                    v = 0.0;
                c[at] = v;
                mag[at] = m;
            }
}

/* x rounded to binary16 (to nearest, ties to even), as a float. */
float
ref_round_half(float x)
{
    int e;
    double m;

    if (!isfinite(x) || x == 0.0f)
        return x;
    if (fabs(x) < 0x1.0p-14) /* subnormal: steps of 2^-24 */
        return (float)(nearbyint((double)x * 0x1.0p24) * 0x1.0p-24);
    m = frexp((double)x, &e); /* |m| in [0.5, 1): 11 bits kept */
    return (float)ldexp(nearbyint(ldexp(m, 11)), e - 11);
}
