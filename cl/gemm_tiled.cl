/* A work-group tiled GEMM, shaped for GPUs: C = act(alpha op(A) op(B)
 * (+ beta C) (+ bias[column])), act the identity, the exact GELU or ReLU,
 * row-major, op(A) M x K, op(B) K x N, either operand transposed, with a
 * batch of strided matrices.
 *
 * A work-group of CLF_TILED_NDIM x CLF_TILED_MDIM work-items computes a
 * CLF_TILED_MWG x CLF_TILED_NWG tile of C.  For each slice of
 * CLF_TILED_KWG steps of the inner dimension the group first copies the
 * slices of op(A) and op(B) into local memory (consecutive work-items read
 * consecutive addresses of the stored matrix, whichever operand is
 * transposed), then every work-item multiplies its register block of
 * MWG/MDIM rows by NWG/NDIM columns out of local memory, the columns in
 * vectors of CLF_TILED_VW.  Parts of a tile past M, N or K (edge tiles) are
 * read as zeros and not stored, so any size works.
 *
 * Split over K: with ksplit > 1 the third dimension of the launch runs
 * batch x ksplit work-groups a tile, each over its own run of K (a whole
 * number of KWG steps), writing alpha times its partial product to slice
 * s of a workspace (C, with s_stride between slices; beta 0, no bias, no
 * activation); clf_gemm_tiled_reduce then sums the slices in order and
 * finishes C.  A small C with a long K (the compression E X at batch 1)
 * so fills a device's work-groups; with ksplit 1 nothing changes.
 *
 * The six sizes are -D options (src/runtime/kernel_params.h has the defaults; the
 * tuner builds other sets, src/gemm/gemm_tiled.c), all powers of two, with MWG a
 * multiple of MDIM and NWG of NDIM * VW. */

#if !defined(CLF_TILED_MWG) || !defined(CLF_TILED_NWG) ||                    \
    !defined(CLF_TILED_KWG) || !defined(CLF_TILED_MDIM) ||                   \
    !defined(CLF_TILED_NDIM) || !defined(CLF_TILED_VW)
#error "build with the -D options of src/runtime/kernel_params.h"
#endif

#define TL_M CLF_TILED_MWG
#define TL_N CLF_TILED_NWG
#define TL_K CLF_TILED_KWG
#define TL_WM CLF_TILED_MDIM
#define TL_WN CLF_TILED_NDIM
#define TL_VW CLF_TILED_VW
#define TL_RM (TL_M / TL_WM)          /* rows per work-item */
#define TL_CN (TL_N / (TL_WN * TL_VW)) /* vectors per row per work-item */
#define TL_WG (TL_WM * TL_WN)
/* Rows of the local tiles, padded: a slice stored along k is written
 * down a column of the tile, TL_M (or TL_N) floats apart, which without
 * padding puts a half-warp's 16 stores on one bank of 32.  One float more
 * for A (read as scalars) spreads them over 16 banks; VW more for B keeps
 * its vector reads aligned and spreads them over 8. */
#define TL_LDA (TL_M + 1)
#define TL_LDB (TL_N + TL_VW)

#if TL_M % TL_WM != 0 || TL_N % (TL_WN * TL_VW) != 0
#error "CLF_TILED_MWG must be a multiple of MDIM, NWG of NDIM * VW"
#endif

#if TL_VW == 1
typedef float tl_vec;
#define TL_VLOAD(i, p) ((p)[i])
#define TL_VSTORE(v, i, p) ((p)[i] = (v))
#elif TL_VW == 2
typedef float2 tl_vec;
#define TL_VLOAD vload2
#define TL_VSTORE vstore2
#elif TL_VW == 4
typedef float4 tl_vec;
#define TL_VLOAD vload4
#define TL_VSTORE vstore4
#elif TL_VW == 8
typedef float8 tl_vec;
#define TL_VLOAD vload8
#define TL_VSTORE vstore8
#else
#error "CLF_TILED_VW must be 1, 2, 4 or 8"
#endif

/* The slice k0.. of op(X) (rows x TL_K of it when `rows_first`, as A is,
 * else TL_K x cols, as B is) into t[TL_K][ldt] (width of each row used),
 * zeros outside the matrix.  Stored untransposed, A runs along k and B along n; the index
 * order follows the stored matrix so that neighbouring work-items read
 * neighbouring addresses. */
static void
tl_load(__local float *t, const uint width, const uint ldt,
        __global const float *x,
        const uint ld, const uint trans, const uint rows_first,
        const uint r0, const uint rlim, const uint k0, const uint K,
        const uint lid)
{
    /* Along k in memory: A stored M x K, or B^T stored N x K. */
    const uint k_fast = rows_first ? !trans : trans;
    for (uint i = lid; i < TL_K * width; i += TL_WG) {
        uint kk, rr;
        if (k_fast) {
            rr = i / TL_K;
            kk = i - rr * TL_K;
        } else {
            kk = i / width;
            rr = i - kk * width;
        }
        const uint gr = r0 + rr, gk = k0 + kk;
        float v = 0.0f;
        if (gr < rlim && gk < K)
            v = k_fast ? x[(size_t)gr * ld + gk] : x[(size_t)gk * ld + gr];
        t[kk * ldt + rr] = v;
    }
}

/* One element of C after the product: scaled, plus beta C, the bias and
 * the activation (act 1 GELU, 2 ReLU). */
static float
tl_finish(float v, const float beta, __global const float *c,
          __global const float *bias, const uint has_bias, const uint act,
          const uint col)
{
    if (beta != 0.0f)
        v += beta * *c;
    if (has_bias)
        v += bias[col];
    if (act == 1)
        v = 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
    else if (act == 2 && v < 0.0f)
        v = 0.0f;
    return v;
}

/* Local size (NDIM, MDIM, 1); global size (ceil(N / NWG) * NDIM,
 * ceil(M / MWG) * MDIM, batch * ksplit).  beta 0 never reads C. */
__kernel __attribute__((reqd_work_group_size(TL_WN, TL_WM, 1))) void
clf_gemm_tiled(const uint M, const uint N, const uint K, const float alpha,
               __global const float *A, const ulong a_off, const uint lda,
               const ulong a_stride, const uint trans_a,
               __global const float *B, const ulong b_off, const uint ldb,
               const ulong b_stride, const uint trans_b, const float beta,
               __global float *C, const ulong c_off, const uint ldc,
               const ulong c_stride, __global const float *bias,
               const uint has_bias, const uint act, const uint ksplit,
               const uint kchunk, const ulong s_stride)
{
    __local float as[TL_K * TL_LDA]; /* as[k][m] */
    __local float bs[TL_K * TL_LDB]; /* bs[k][n] */
    const uint tx = get_local_id(0), ty = get_local_id(1);
    const uint lid = ty * TL_WN + tx;
    const uint n0 = get_group_id(0) * TL_N, m0 = get_group_id(1) * TL_M;
    const size_t t = get_global_id(2) / ksplit;
    const uint s = (uint)(get_global_id(2) - t * ksplit);
    const uint kb = s * kchunk;
    const uint ke = ksplit > 1 ? min(K, kb + kchunk) : K;
    __global const float *a = A + a_off + t * a_stride;
    __global const float *b = B + b_off + t * b_stride;
    __global float *c = C + c_off + t * c_stride + s * s_stride;
    tl_vec acc[TL_RM][TL_CN];

#pragma unroll
    for (int i = 0; i < TL_RM; i++)
#pragma unroll
        for (int j = 0; j < TL_CN; j++)
            acc[i][j] = (tl_vec)0.0f;
    for (uint k0 = kb; k0 < ke; k0 += TL_K) {
        tl_load(as, TL_M, TL_LDA, a, lda, trans_a, 1, m0, M, k0, ke, lid);
        tl_load(bs, TL_N, TL_LDB, b, ldb, trans_b, 0, n0, N, k0, ke, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TL_K; kk++) {
            float av[TL_RM];
            tl_vec bv[TL_CN];
#pragma unroll
            for (int i = 0; i < TL_RM; i++)
                av[i] = as[kk * TL_LDA + i * TL_WM + ty];
#pragma unroll
            for (int j = 0; j < TL_CN; j++)
                bv[j] = TL_VLOAD(j * TL_WN + tx, bs + kk * TL_LDB);
#pragma unroll
            for (int i = 0; i < TL_RM; i++)
#pragma unroll
                for (int j = 0; j < TL_CN; j++)
                    acc[i][j] = fma((tl_vec)av[i], bv[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    /* Unrolled with guards rather than left at the first row or column
     * past C: acc is then indexed by constants and stays in registers. */
#pragma unroll
    for (int i = 0; i < TL_RM; i++) {
        const uint row = m0 + i * TL_WM + ty;
        __global float *cr = c + (size_t)row * ldc;
#pragma unroll
        for (int j = 0; j < TL_CN; j++) {
            const uint col = n0 + (j * TL_WN + tx) * TL_VW;
            float lane[TL_VW];
            TL_VSTORE(alpha * acc[i][j], 0, lane);
#pragma unroll
            for (uint e = 0; e < TL_VW; e++)
                if (row < M && col + e < N)
                    cr[col + e] = tl_finish(lane[e], beta, cr + col + e, bias,
                                            has_bias, act, col + e);
        }
    }
}

/* The slices of a split over K summed in order (so every run gives the
 * same bits), then finished: C = sum + beta C (+ bias) (act), one element
 * a work-item over batch x M x N.  P holds slice s of product t at
 * s * s_stride + t * M * N, rows of N. */
__kernel void
clf_gemm_tiled_reduce(__global const float *P, const uint ksplit,
                      const ulong s_stride, const uint batch, const uint M,
                      const uint N, const float beta, __global float *C,
                      const ulong c_off, const uint ldc, const ulong c_stride,
                      __global const float *bias, const uint has_bias,
                      const uint act)
{
    const size_t gid = get_global_id(0), mn = (size_t)M * N;
    if (gid >= batch * mn)
        return;
    const size_t t = gid / mn, e = gid - t * mn;
    const uint row = (uint)(e / N), col = (uint)(e - (size_t)row * N);
    float v = 0.0f;
    for (uint s = 0; s < ksplit; s++)
        v += P[s * s_stride + gid];
    __global float *c = C + c_off + t * c_stride + (size_t)row * ldc + col;
    *c = tl_finish(v, beta, c, bias, has_bias, act, col);
}
