/* A register-blocked GEMM for devices where it beats CLBlast's (each
 * context times both, src/gemm.c): C = alpha A B (+ C when accumulate),
 * row-major, A M x K, B K x N, with a batch of strided matrices.  A
 * transposed B (a weight as PyTorch stores it) is first copied by
 * clf_transpose.
 *
 * A work-item computes a block of GEMM_R rows by 64 columns (16
 * accumulators of 16 lanes), or by 16 columns for the last columns when
 * N is not a multiple of 64: for each step of the inner dimension it loads
 * a row piece of B as vectors and broadcasts one element of each of its A
 * rows.  N must be a multiple of 16. */

#define GEMM_R 4

/* Global size (ceil(M / GEMM_R), N / 16 rounded as below, batch): work-item
 * (i, j) takes rows GEMM_R i.. and, while 64 (j + 1) <= N, columns 64 j..;
 * the remaining columns go 16 at a time to the following ids. */
__kernel void
clf_gemm_nn(const uint M, const uint N, const uint K, const float alpha,
            __global const float *A, const ulong a_off, const uint lda,
            const ulong a_stride, __global const float *B, const ulong b_off,
            const uint ldb, const ulong b_stride, __global float *C,
            const ulong c_off, const uint ldc, const ulong c_stride,
            const uint accumulate)
{
    const uint r0 = get_global_id(0) * GEMM_R, jb = get_global_id(1);
    const uint batch = get_global_id(2);
    const uint wide = N / 64;
    if (r0 >= M)
        return;
    uint j0, cols;
    if (jb < wide) {
        j0 = jb * 64;
        cols = 64;
    } else {
        j0 = wide * 64 + (jb - wide) * 16;
        cols = 16;
        if (j0 >= N)
            return;
    }
    /* Rows past M repeat the last row and are not stored. */
    const uint i1 = min(r0 + 1, M - 1), i2 = min(r0 + 2, M - 1);
    const uint i3 = min(r0 + 3, M - 1);
    __global const float *a = A + a_off + batch * a_stride;
    __global const float *a0 = a + (size_t)r0 * lda;
    __global const float *a1 = a + (size_t)i1 * lda;
    __global const float *a2 = a + (size_t)i2 * lda;
    __global const float *a3 = a + (size_t)i3 * lda;
    __global const float *b = B + b_off + batch * b_stride + j0;
    __global float *c = C + c_off + batch * c_stride + j0;
    __global float *c0 = c + (size_t)r0 * ldc;
    __global float *c1 = c + (size_t)i1 * ldc;
    __global float *c2 = c + (size_t)i2 * ldc;
    __global float *c3 = c + (size_t)i3 * ldc;

    if (cols == 64) {
        float16 x00 = 0.0f, x01 = 0.0f, x02 = 0.0f, x03 = 0.0f;
        float16 x10 = 0.0f, x11 = 0.0f, x12 = 0.0f, x13 = 0.0f;
        float16 x20 = 0.0f, x21 = 0.0f, x22 = 0.0f, x23 = 0.0f;
        float16 x30 = 0.0f, x31 = 0.0f, x32 = 0.0f, x33 = 0.0f;
        __global const float *bk = b;
        for (uint k = 0; k < K; k++, bk += ldb) {
            const float16 b0 = vload16(0, bk), b1 = vload16(1, bk);
            const float16 b2 = vload16(2, bk), b3 = vload16(3, bk);
            const float y0 = a0[k], y1 = a1[k], y2 = a2[k], y3 = a3[k];
            x00 = fma(y0, b0, x00);
            x01 = fma(y0, b1, x01);
            x02 = fma(y0, b2, x02);
            x03 = fma(y0, b3, x03);
            x10 = fma(y1, b0, x10);
            x11 = fma(y1, b1, x11);
            x12 = fma(y1, b2, x12);
            x13 = fma(y1, b3, x13);
            x20 = fma(y2, b0, x20);
            x21 = fma(y2, b1, x21);
            x22 = fma(y2, b2, x22);
            x23 = fma(y2, b3, x23);
            x30 = fma(y3, b0, x30);
            x31 = fma(y3, b1, x31);
            x32 = fma(y3, b2, x32);
            x33 = fma(y3, b3, x33);
        }
#define GEMM_STORE(row, v, i)                                                \
    vstore16(alpha * (v) + (accumulate ? vload16(i, row) : (float16)0.0f),  \
             i, row)
        GEMM_STORE(c0, x00, 0);
        GEMM_STORE(c0, x01, 1);
        GEMM_STORE(c0, x02, 2);
        GEMM_STORE(c0, x03, 3);
        if (r0 + 1 < M) {
            GEMM_STORE(c1, x10, 0);
            GEMM_STORE(c1, x11, 1);
            GEMM_STORE(c1, x12, 2);
            GEMM_STORE(c1, x13, 3);
        }
        if (r0 + 2 < M) {
            GEMM_STORE(c2, x20, 0);
            GEMM_STORE(c2, x21, 1);
            GEMM_STORE(c2, x22, 2);
            GEMM_STORE(c2, x23, 3);
        }
        if (r0 + 3 < M) {
            GEMM_STORE(c3, x30, 0);
            GEMM_STORE(c3, x31, 1);
            GEMM_STORE(c3, x32, 2);
            GEMM_STORE(c3, x33, 3);
        }
        return;
    }
    float16 x0 = 0.0f, x1 = 0.0f, x2 = 0.0f, x3 = 0.0f;
    __global const float *bk = b;
    for (uint k = 0; k < K; k++, bk += ldb) {
        const float16 v = vload16(0, bk);
        x0 = fma(a0[k], v, x0);
        x1 = fma(a1[k], v, x1);
        x2 = fma(a2[k], v, x2);
        x3 = fma(a3[k], v, x3);
    }
    GEMM_STORE(c0, x0, 0);
    if (r0 + 1 < M)
        GEMM_STORE(c1, x1, 0);
    if (r0 + 2 < M)
        GEMM_STORE(c2, x2, 0);
    if (r0 + 3 < M)
        GEMM_STORE(c3, x3, 0);
#undef GEMM_STORE
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
