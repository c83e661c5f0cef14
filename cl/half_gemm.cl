/* Native half-precision GEMMs for half-stored weights (src/gemm/half_gemm.c).  Built
 * as a program of its own, only on a device that reports cl_khr_fp16, so
 * that no other device ever compiles it.
 *
 * The weight is read as binary16 straight from its buffer; the float32
 * activation is rounded to binary16 (to nearest even) and each product
 * is taken in half arithmetic, then widened and summed in float32.  A
 * product of normal binary16 numbers is therefore within about 2^-10 (two
 * half roundings) of the exact product of the activation and the stored
 * weight, and the sum adds only float32 rounding:
 * |C - C_exact| <= (2^-10 + k 2^-24) sum |a w| per element, plus 2^-25
 * |w| for an activation and 2^-25 for a product in the subnormal range
 * (docs/design.md, "Native half arithmetic").  A group of
 * products with one that is not finite (an activation beyond +-65504, or
 * a product past it) is taken again in float32, so that an activation
 * binary16 cannot hold never turns into a wrong finite or infinite
 * result the float32 layer would not give. */
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

/* The 8 products of a (float32) and w (binary16), as float32. */
inline float8
clf_half_prod8(const float8 a, const half8 w)
{
    const half8 p = convert_half8(a) * w;
    if (all(isfinite(p)))
        return convert_float8(p);
    return a * convert_float8(w);
}

/* One product of a (float32) and w (binary16), as float32. */
inline float
clf_half_prod1(const float a, const half w)
{
    const half p = convert_half(a) * w;
    return isfinite(p) ? (float)p : a * (float)w;
}

inline float
clf_half_sum8(const float8 v)
{
    const float4 s = v.lo + v.hi;
    return (s.x + s.y) + (s.z + s.w);
}

/* C = alpha A W^T (+ bias[j]), batched: A float32 m x k (row stride lda),
 * W binary16 n x k (row stride ldw), C float32 m x n (row stride ldc),
 * matrix t of the batch at t * stride.  Work-item (j4, i, t): columns
 * 4 j4 .. 4 j4 + 3 of row i (fewer at the right edge). */
__kernel void
clf_half_gemm_nt(const int m, const int n, const int k, const float alpha,
                 __global const float *a, const ulong a_off, const int lda,
                 const ulong a_stride, __global const half *w,
                 const ulong w_off, const int ldw, const ulong w_stride,
                 __global float *c, const ulong c_off, const int ldc,
                 const ulong c_stride, __global const float *bias,
                 const int has_bias)
{
    const int j0 = (int)get_global_id(0) * 4;
    const int i = (int)get_global_id(1);
    const ulong t = get_global_id(2);
    if (j0 >= n || i >= m)
        return;
    __global const float *ar = a + a_off + t * a_stride + (ulong)i * lda;
    __global const half *wb = w + w_off + t * w_stride;
    /* Rows past the edge read the last row again; never stored. */
    __global const half *w0 = wb + (ulong)j0 * ldw;
    __global const half *w1 = wb + (ulong)min(j0 + 1, n - 1) * ldw;
    __global const half *w2 = wb + (ulong)min(j0 + 2, n - 1) * ldw;
    __global const half *w3 = wb + (ulong)min(j0 + 3, n - 1) * ldw;
    float8 s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int p = 0;
    for (; p + 8 <= k; p += 8) {
        const float8 av = vload8(0, ar + p);
        s0 += clf_half_prod8(av, vload8(0, w0 + p));
        s1 += clf_half_prod8(av, vload8(0, w1 + p));
        s2 += clf_half_prod8(av, vload8(0, w2 + p));
        s3 += clf_half_prod8(av, vload8(0, w3 + p));
    }
    float r[4] = {clf_half_sum8(s0), clf_half_sum8(s1), clf_half_sum8(s2),
                  clf_half_sum8(s3)};
    for (; p < k; p++) {
        const float av = ar[p];
        r[0] += clf_half_prod1(av, w0[p]);
        r[1] += clf_half_prod1(av, w1[p]);
        r[2] += clf_half_prod1(av, w2[p]);
        r[3] += clf_half_prod1(av, w3[p]);
    }
    __global float *cr = c + c_off + t * c_stride + (ulong)i * ldc;
    for (int q = 0; q < 4 && j0 + q < n; q++)
        cr[j0 + q] = alpha * r[q] + (has_bias ? bias[j0 + q] : 0.0f);
}

/* C = alpha E X, batched: E binary16 m x k (row stride lde), X float32
 * k x n (row stride ldx), C float32 m x n (row stride ldc), matrix t of
 * the batch at t * stride.  Work-item (j8, i4, t): columns 8 j8 ..
 * 8 j8 + 7 of rows 4 i4 .. 4 i4 + 3, so that each row of X is rounded to
 * binary16 once for four rows of E; one column at a time at the right
 * edge.  Rows past the bottom edge read the last row again, never
 * stored. */
__kernel void
clf_half_gemm_nn(const int m, const int n, const int k, const float alpha,
                 __global const half *e, const ulong e_off, const int lde,
                 const ulong e_stride, __global const float *x,
                 const ulong x_off, const int ldx, const ulong x_stride,
                 __global float *c, const ulong c_off, const int ldc,
                 const ulong c_stride)
{
    const int j0 = (int)get_global_id(0) * 8;
    const int i0 = (int)get_global_id(1) * 4;
    const ulong t = get_global_id(2);
    if (j0 >= n || i0 >= m)
        return;
    __global const half *eb = e + e_off + t * e_stride;
    __global const half *e0 = eb + (ulong)i0 * lde;
    __global const half *e1 = eb + (ulong)min(i0 + 1, m - 1) * lde;
    __global const half *e2 = eb + (ulong)min(i0 + 2, m - 1) * lde;
    __global const half *e3 = eb + (ulong)min(i0 + 3, m - 1) * lde;
    __global const float *xb = x + x_off + t * x_stride + j0;
    __global float *cr = c + c_off + t * c_stride + (ulong)i0 * ldc + j0;
    const int rows = min(4, m - i0);
    if (j0 + 8 <= n) {
        float8 s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int p = 0; p < k; p++) {
            const float8 xv = vload8(0, xb + (ulong)p * ldx);
            s0 += clf_half_prod8(xv, (half8)(e0[p]));
            s1 += clf_half_prod8(xv, (half8)(e1[p]));
            s2 += clf_half_prod8(xv, (half8)(e2[p]));
            s3 += clf_half_prod8(xv, (half8)(e3[p]));
        }
        vstore8(alpha * s0, 0, cr);
        if (rows > 1)
            vstore8(alpha * s1, 0, cr + ldc);
        if (rows > 2)
            vstore8(alpha * s2, 0, cr + 2 * (ulong)ldc);
        if (rows > 3)
            vstore8(alpha * s3, 0, cr + 3 * (ulong)ldc);
        return;
    }
    for (int q = 0; j0 + q < n; q++) {
        float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int p = 0; p < k; p++) {
            const float xv = xb[(ulong)p * ldx + q];
            r[0] += clf_half_prod1(xv, e0[p]);
            r[1] += clf_half_prod1(xv, e1[p]);
            r[2] += clf_half_prod1(xv, e2[p]);
            r[3] += clf_half_prod1(xv, e3[p]);
        }
        for (int rr = 0; rr < rows; rr++)
            cr[(ulong)rr * ldc + q] = alpha * r[rr];
    }
}

/* Half-arithmetic sanity checks for the self-test: out[i] = in[2 i] op
 * in[2 i + 1], op + for the first two pairs, * for the rest. */
__kernel void
clf_half_gemm_sanity(__global const half *in, __global half *out, const int pairs)
{
    const int i = (int)get_global_id(0);
    if (i >= pairs)
        return;
    const half x = in[2 * i], y = in[2 * i + 1];
    out[i] = i < 2 ? x + y : x * y;
}
