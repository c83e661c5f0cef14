/* A double-precision host reference of multi-head Linformer attention,
 * written straight from the equations (project, then compress). */
#ifndef CLF_TEST_REFERENCE_H
#define CLF_TEST_REFERENCE_H

#include <stddef.h>

typedef struct ref_layer {
    size_t D, hq, hkv, dh, N, k;
    int per_head_E;      /* each head its own E (and F) */
    int share_kv;        /* V = K, F = E */
    int kv_shared;       /* F = E */
    int compressed_bias; /* K/V bias added after compression (fairseq) */
    const float *wq, *wk, *wv, *wo; /* NULL wv with share_kv */
    const float *bq, *bk, *bv, *bo; /* NULL = no bias */
    const float *E, *F;             /* (nE*k) x N */
    const float *bE, *bF; /* a bias per slot (nE*k; bias_proj), or NULL */
    /* 0: E and F as above; 1 mean, 2 max pooling, 3 the convolution over
     * windows of w = N / k positions (slot j: positions j*w.., in causal
     * mode slot i of block m: m*block + i*w..; positions >= n zero rows);
     * for 3, E and F are (nE*dh) x (dh*w), bE and bF nE*dh (or NULL). */
    int compression;
    /* linformer-pytorch's causal=True: in Linformer mode query t sees
     * slots 0..t only (not with a causal block); in full mode it is the
     * causal mask */
    int slot_mask;
} ref_layer;

/* y (B*n x D) = attention of x (B*n x D); full != 0 for full attention. */
void ref_attention(const ref_layer *l, int full, const float *x, size_t B,
                   size_t n, double *y);

/* The same with a padding mask (batch x n bytes, nonzero = real; NULL for
 * none) and causality: full mode masks keys after the query; Linformer mode
 * (block > 0) builds slot j of block m = j / c (c = k / ceil(N / block))
 * from block m's positions only, and lets query t in block m see the slots
 * of blocks before m plus positions m*block..t exactly. */
void ref_attention_ex(const ref_layer *l, int full, const float *x, size_t B,
                      size_t n, const unsigned char *mask, int causal,
                      size_t block, double *y);

/* Row softmax in double, for kernel tests. */
void ref_softmax(const float *s, size_t rows, size_t cols, double *out);
/* The same with full mode's masks: row r is query row0 + r % chunk of
 * sequence r / (heads * chunk); key j is seen where mask (batch x cols
 * bytes, NULL: none) holds it and, with causal, j <= the query.  Unseen keys
 * get 0; a row that sees none is zeros. */
void ref_softmax_masked(const float *s, size_t rows, size_t cols,
                        const unsigned char *mask, size_t heads, size_t chunk,
                        size_t row0, int causal, double *out);

/* C = act(alpha op(A) op(B) + beta C0 (+ bias[column])), row-major,
 * batched with element strides; act as the kernels' act.  c and mag
 * are indexed like C: c the result, mag the sum of the magnitudes of its
 * terms (the scale of its float32 rounding error). */
typedef struct ref_gemm_op {
    int trans_a, trans_b, act; /* act: 0 none, 1 exact GELU, 2 ReLU */
    size_t m, n, k, batch;
    double alpha, beta;
    size_t a_off, lda, a_stride, b_off, ldb, b_stride, c_off, ldc, c_stride;
} ref_gemm_op;
void ref_gemm(const ref_gemm_op *g, const float *a, const float *b,
              const float *c0, const float *bias, double *c, double *mag);

/* x rounded to binary16 (to nearest, ties to even), as a float;
 * infinities, NaN and zeros unchanged. */
float ref_round_half(float x);

#endif
