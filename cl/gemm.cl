/* A register-blocked GEMM for devices where it beats CLBlast's (each
 * context times both, src/gemm/gemm.c): C = act(alpha A B (+ C when
 * accumulate) (+ bias[column] when has_bias)), act the identity (act 0),
 * the exact GELU 0.5 v (1 + erf(v / sqrt 2)) (1) or ReLU (2, NaN kept);
 * row-major, A M x K, B K x N, with a batch of strided matrices.  A transposed B (a weight as
 * PyTorch stores it) is first copied by clf_transpose.
 *
 * A work-item computes a block of GEMM_R rows by 64 columns (GEMM_R x 4
 * accumulators of 16 lanes), or by 16 columns for the last columns when
 * N is not a multiple of 64: for each step of the inner dimension it loads
 * a row piece of B as vectors and broadcasts one element of each of its A
 * rows.  N must be a multiple of 16.  The loops over rows have constant
 * bounds and are unrolled, so the accumulators stay in registers. */

#define GEMM_R CLF_GEMM_ROWS /* a -D option from src/runtime/kernel_params.h */

/* Global size (at least ceil(M / GEMM_R), N / 64 + (N mod 64) / 16,
 * batch) when cols64: work-item (i, j) takes rows GEMM_R i.. and, while
 * 64 (j + 1) <= N, columns 64 j..; the remaining columns go 16 at a time
 * to the following ids.  Without cols64 (devices with 8-float vectors,
 * where 64 columns' accumulators spill) every id takes 16 columns:
 * global size (.., N / 16, batch).  Work-items past M return at once; rows past M within a
 * block repeat the last row and are not stored.  The body of both entries
 * below: `steps` steps of the inner dimension for this work-item's
 * matrix. */
static void
gemm_nn(const uint M, const uint N, const uint steps, const float alpha,
        __global const float *A, const ulong a_off, const uint lda,
        const ulong a_stride, __global const float *B, const ulong b_off,
        const uint ldb, const ulong b_stride, __global float *C,
        const ulong c_off, const uint ldc, const ulong c_stride,
        const uint accumulate, __global const float *bias, const uint has_bias,
        const uint act, const uint cols64)
{
    const uint r0 = get_global_id(0) * GEMM_R, jb = get_global_id(1);
    const uint batch = get_global_id(2);
    const uint wide = cols64 ? N / 64 : 0;
    if (r0 >= M)
        return;
    const uint j0 = jb < wide ? jb * 64 : wide * 64 + (jb - wide) * 16;
    if (j0 >= N)
        return;
    __global const float *a = A + a_off + batch * a_stride;
    __global const float *ar[GEMM_R];
#pragma unroll
    for (int r = 0; r < GEMM_R; r++)
        ar[r] = a + (size_t)min(r0 + r, M - 1) * lda;
    __global const float *bk = B + b_off + batch * b_stride + j0;
    __global float *c = C + c_off + batch * c_stride + j0;

    if (jb < wide) {
        float16 x[GEMM_R][4];
#pragma unroll
        for (int r = 0; r < GEMM_R; r++)
            x[r][0] = x[r][1] = x[r][2] = x[r][3] = 0.0f;
        for (uint k = 0; k < steps; k++, bk += ldb) {
            const float16 b0 = vload16(0, bk), b1 = vload16(1, bk);
            const float16 b2 = vload16(2, bk), b3 = vload16(3, bk);
#pragma unroll
            for (int r = 0; r < GEMM_R; r++) {
                FMA_ROW64(x[r], ar[r][k], b0, b1, b2, b3);
            }
        }
#pragma unroll
        for (int r = 0; r < GEMM_R; r++) {
            if (r0 + r < M) {
                __global float *row = c + (size_t)(r0 + r) * ldc;
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    float16 v = alpha * x[r][t];
                    if (accumulate)
                        v += vload16(t, row);
                    if (has_bias)
                        v += vload16(t, bias + j0);
                    if (act == 1)
                        v = 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
                    else if (act == 2)
                        v = select(v, (float16)0.0f, v < 0.0f);
                    vstore16(v, t, row);
                }
            }
        }
        return;
    }

    float16 x[GEMM_R];
#pragma unroll
    for (int r = 0; r < GEMM_R; r++)
        x[r] = 0.0f;
    for (uint k = 0; k < steps; k++, bk += ldb) {
        const float16 v = vload16(0, bk);
#pragma unroll
        for (int r = 0; r < GEMM_R; r++)
            x[r] = fma(ar[r][k], v, x[r]);
    }
#pragma unroll
    for (int r = 0; r < GEMM_R; r++) {
        if (r0 + r < M) {
            __global float *row = c + (size_t)(r0 + r) * ldc;
            float16 v = alpha * x[r];
            if (accumulate)
                v += vload16(0, row);
            if (has_bias)
                v += vload16(0, bias + j0);
            if (act == 1)
                v = 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
            else if (act == 2)
                v = select(v, (float16)0.0f, v < 0.0f);
            vstore16(v, 0, row);
        }
    }
}

/* Every matrix of the batch K steps long. */
__kernel void
clf_gemm_nn(const uint M, const uint N, const uint K, const float alpha,
            __global const float *A, const ulong a_off, const uint lda,
            const ulong a_stride, __global const float *B, const ulong b_off,
            const uint ldb, const ulong b_stride, __global float *C,
            const ulong c_off, const uint ldc, const ulong c_stride,
            const uint accumulate, __global const float *bias,
            const uint has_bias, const uint act, const uint cols64)
{
    gemm_nn(M, N, K, alpha, A, a_off, lda, a_stride, B, b_off, ldb, b_stride,
            C, c_off, ldc, c_stride, accumulate, bias, has_bias, act, cols64);
}

/* The split way's product (src/gemm/gemm.c): the batch is the slices of
 * one GEMM's inner dimension, K steps each but the last, k_last steps. */
__kernel void
clf_gemm_nn_slices(const uint M, const uint N, const uint K, const float alpha,
                   __global const float *A, const ulong a_off, const uint lda,
                   const ulong a_stride, __global const float *B,
                   const ulong b_off, const uint ldb, const ulong b_stride,
                   __global float *C, const ulong c_off, const uint ldc,
                   const ulong c_stride, const uint accumulate,
                   __global const float *bias, const uint has_bias,
                   const uint act, const uint cols64, const uint k_last)
{
    const uint steps = get_global_id(2) + 1 == get_global_size(2) ? k_last : K;

    gemm_nn(M, N, steps, alpha, A, a_off, lda, a_stride, B, b_off, ldb,
            b_stride, C, c_off, ldc, c_stride, accumulate, bias, has_bias, act,
            cols64);
}

/* dst[t * rows * cols + c * rows + r] = src[off + t * stride + r * ld + c]:
 * a batch of row-major rows x cols matrices transposed into a packed
 * buffer.  Global size (cols, rows, batch). */
__kernel void
clf_transpose(__global const float *src, const ulong off, const uint rows,
              const uint cols, const uint ld, const ulong stride,
              __global float *dst)
{
    const uint c = get_global_id(0), r = get_global_id(1);
    const uint t = get_global_id(2);
    if (c >= cols || r >= rows)
        return;
    dst[((size_t)t * cols + c) * rows + r] =
        src[off + t * stride + (size_t)r * ld + c];
}

/* The epilogues of a GEMM run by CLBlast, which has none: a bias per
 * column and the exact GELU. */

/* y[off + r*ld + c] += bias[c] for r < rows, c < cols. */
__kernel void
clf_add_bias(__global float *y, const ulong off, const uint rows,
             const uint cols, const uint ld, __global const float *bias)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)rows * cols)
        return;
    const size_t r = gid / cols;
    const size_t c = gid - r * cols;
    y[off + r * ld + c] += bias[c];
}

/* An activation in place: the exact GELU 0.5 x (1 + erf(x / sqrt(2)))
 * (act 1) or ReLU (act 2, NaN kept). */
__kernel void
clf_act(__global float *y, const ulong off, const ulong count, const uint act)
{
    const size_t i = get_global_id(0);
    if (i >= count)
        return;
    const float v = y[off + i];
    y[off + i] = act == 1   ? 0.5f * v * (1.0f + erf(v * 0.70710678118654752f))
                 : v < 0.0f ? 0.0f
                            : v;
}
