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
ref_attention_ex(const ref_layer *l, int full, const float *x, size_t B,
                 size_t n, const unsigned char *mask, int causal, size_t block,
                 double *y)
{
    const size_t D = l->D, dh = l->dh, dq = l->hq * dh, dkv = l->hkv * dh;
    const size_t L = full ? n : l->k;
    const size_t nb = block ? (l->N + block - 1) / block : 1;
    const size_t c = block ? l->k / nb : 0;
    const int lin_causal = causal && !full;
    const size_t ncols = L + (lin_causal ? block : 0);
    double *q = malloc(n * dq * sizeof *q);
    double *kk = malloc(n * dkv * sizeof *kk);
    double *vv = malloc(n * dkv * sizeof *vv);
    double *kb = malloc(L * dh * sizeof *kb);
    double *vb = malloc(L * dh * sizeof *vb);
    double *o = malloc(n * dq * sizeof *o);
    double *sc = malloc(ncols * sizeof *sc);
    int *use = malloc(ncols * sizeof *use);
    size_t b, h, i, j, e, t;

    for (b = 0; b < B; b++) {
        const float *xb = x + b * n * D;
        const unsigned char *mb = mask ? mask + b * n : NULL;
        linear(xb, n, D, l->wq, dq, l->bq, q);
        {
            /* fairseq adds the K/V biases after compression. */
            int late = l->compressed_bias && !full;
            linear(xb, n, D, l->wk, dkv, late ? NULL : l->bk, kk);
            if (l->share_kv) {
                for (i = 0; i < n * dkv; i++)
                    vv[i] = kk[i];
            } else {
                linear(xb, n, D, l->wv, dkv, late ? NULL : l->bv, vv);
            }
        }
        if (mb != NULL) /* padding keys take no part: E diag(mask) */
            for (t = 0; t < n; t++)
                if (!mb[t])
                    for (e = 0; e < dkv; e++)
                        kk[t * dkv + e] = vv[t * dkv + e] = 0.0;
        for (h = 0; h < l->hq; h++) {
            size_t hk = l->hkv == 1 ? 0 : h;
            size_t eh = l->per_head_E ? h : 0;
            const float *E = l->E ? l->E + eh * l->k * l->N : NULL;
            const float *F = (l->share_kv || l->kv_shared || E == NULL)
                                 ? E
                                 : l->F + eh * l->k * l->N;
            for (j = 0; j < L; j++)
                for (e = 0; e < dh; e++) {
                    double ak = 0.0, av = 0.0;
                    size_t lo = 0, hi = n;
                    if (full) {
                        kb[j * dh + e] = kk[j * dkv + hk * dh + e];
                        vb[j * dh + e] = vv[j * dkv + hk * dh + e];
                        continue;
                    }
                    if (lin_causal) { /* slot j belongs to block j / c */
                        lo = (j / c) * block;
                        hi = lo + block < n ? lo + block : n;
                        if (lo > n)
                            lo = n;
                    }
                    for (t = lo; t < hi; t++) {
                        ak +=
                            (double)E[j * l->N + t] * kk[t * dkv + hk * dh + e];
                        av +=
                            (double)F[j * l->N + t] * vv[t * dkv + hk * dh + e];
                    }
                    if (l->compressed_bias) {
                        const float *bv = l->share_kv ? l->bk : l->bv;
                        ak += l->bk ? l->bk[hk * dh + e] : 0.0;
                        av += bv ? bv[hk * dh + e] : 0.0;
                    }
                    kb[j * dh + e] = ak;
                    vb[j * dh + e] = av;
                }
            for (i = 0; i < n; i++) {
                double m = -INFINITY, sum = 0.0;
                size_t first = lin_causal ? (i / block) * block : 0;
                for (j = 0; j < ncols; j++) {
                    const double *kr;
                    double acc = 0.0;
                    if (j < L) {
                        use[j] = 1;
                        if (full && mb != NULL && !mb[j])
                            use[j] = 0;
                        if (full && causal && j > i)
                            use[j] = 0;
                        if (lin_causal && j >= (i / block) * c)
                            use[j] = 0;
                        kr = kb + j * dh;
                    } else {
                        size_t pos = first + (j - L);
                        use[j] = pos <= i && (mb == NULL || mb[pos]);
                        kr = use[j] ? kk + pos * dkv + hk * dh : NULL;
                    }
                    if (!use[j])
                        continue;
                    for (e = 0; e < dh; e++)
                        acc += q[i * dq + h * dh + e] * kr[e];
                    sc[j] = acc / sqrt((double)dh);
                    if (sc[j] > m)
                        m = sc[j];
                }
                for (j = 0; j < ncols; j++) {
                    sc[j] = use[j] ? exp(sc[j] - m) : 0.0;
                    sum += sc[j];
                }
                for (e = 0; e < dh; e++) {
                    double acc = 0.0;
                    for (j = 0; j < ncols; j++) {
                        double v;
                        if (!use[j])
                            continue;
                        v = j < L ? vb[j * dh + e]
                                  : vv[(first + j - L) * dkv + hk * dh + e];
                        acc += sc[j] / sum * v;
                    }
                    o[i * dq + h * dh + e] = sum > 0.0 ? acc : 0.0;
                }
            }
        }
        for (i = 0; i < n; i++)
            for (j = 0; j < D; j++) {
                double acc = l->bo ? l->bo[j] : 0.0;
                for (e = 0; e < dq; e++)
                    acc += o[i * dq + e] * l->wo[j * dq + e];
                y[(b * n + i) * D + j] = (mb == NULL || mb[i]) ? acc : 0.0;
            }
    }
    free(q);
    free(kk);
    free(vv);
    free(kb);
    free(vb);
    free(o);
    free(sc);
    free(use);
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
                if (g->gelu)
                    v = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
                c[at] = v;
                mag[at] = m;
            }
}
