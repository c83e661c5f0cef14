/* Linformer attention over the compressed slots in one kernel: scores,
 * softmax and the weighted sum for four query rows of one head per
 * work-item.  With k slots of d_h values the slots of one head fit in a CPU
 * core's cache, and this saves the passes over the score matrix that
 * separate GEMM, softmax and GEMM calls make.  Which way is faster depends
 * on the device, so each context times both (src/attend.c). */

/* Rows of the transposed keys are padded to a multiple of ATT_KB slots;
 * a work-item handles ATT_R query rows. */
#define ATT_R 4
#define ATT_KB 64

/* kt[((b * hc + g) * dh + c) * lp + j] = kbar[b * L * width + j * width +
 * g * dh + c] for j < L, 0 for L <= j < lp.  One work-item per element of
 * kt: global size (lp, hc * dh, B). */
__kernel void
clf_kv_transpose(__global const float *kbar, const uint L, const uint width,
                 const uint dh, const uint hc, const uint lp,
                 __global float *kt)
{
    const uint j = get_global_id(0), gc = get_global_id(1);
    const uint b = get_global_id(2);
    if (j >= lp || gc >= hc * dh)
        return;
    const uint g = gc / dh, c = gc - g * dh;
    kt[((size_t)b * hc * dh + gc) * lp + j] =
        j < L ? kbar[((size_t)b * L + j) * width + g * dh + c] : 0.0f;
}

/* Attention for query rows r0..r0+ATT_R-1 (r0 = ATT_R * global id 0) of
 * head h = global id 1 of sequence b = global id 2:
 *   s_i = scale * q_i . kbar_j over slots j < L,
 *   o_i = sum_j softmax(s_i)_j vbar_j.
 * q: rows of ldq floats per position, head h at column h * dh; kt: from
 * clf_kv_transpose; vbar: L rows of width floats per sequence, head g at
 * column g * dh, where g = h if kv_per_head else 0; s: scratch of lp
 * floats for each of B * heads * np rows, np = n rounded up to ATT_R, so
 * no two work-items share a row; o: like q.  dh must be a multiple of 16
 * and lp of ATT_KB. */
__kernel void
clf_attend(__global const float *q, const uint ldq,
           __global const float *kt, __global const float *vbar,
           const uint width, __global float *s, __global float *o,
           const uint n, const uint L, const uint lp, const uint dh,
           const uint heads, const uint kv_per_head, const float scale)
{
    const uint r0 = get_global_id(0) * ATT_R, h = get_global_id(1);
    const uint b = get_global_id(2);
    if (r0 >= n)
        return;
    const uint g = kv_per_head ? h : 0, hc = kv_per_head ? heads : 1;
    /* Rows past n repeat the last row and are not stored. */
    const uint i1 = min(r0 + 1, n - 1), i2 = min(r0 + 2, n - 1);
    const uint i3 = min(r0 + 3, n - 1);
    __global const float *q0 = q + ((size_t)b * n + r0) * ldq + h * dh;
    __global const float *q1 = q + ((size_t)b * n + i1) * ldq + h * dh;
    __global const float *q2 = q + ((size_t)b * n + i2) * ldq + h * dh;
    __global const float *q3 = q + ((size_t)b * n + i3) * ldq + h * dh;
    __global const float *k = kt + ((size_t)b * hc + g) * dh * lp;
    __global const float *v = vbar + (size_t)b * L * width + g * dh;
    const uint np = (n + ATT_R - 1) / ATT_R * ATT_R;
    __global float *s0 = s + (((size_t)b * heads + h) * np + r0) * lp;
    __global float *s1 = s0 + lp, *s2 = s1 + lp, *s3 = s2 + lp;

    /* 1. Scores, ATT_KB slots at a time: 16 accumulators of 16 lanes. */
    for (uint j0 = 0; j0 < lp; j0 += ATT_KB) {
        float16 a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f;
        float16 a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f;
        float16 a20 = 0.0f, a21 = 0.0f, a22 = 0.0f, a23 = 0.0f;
        float16 a30 = 0.0f, a31 = 0.0f, a32 = 0.0f, a33 = 0.0f;
        __global const float *kc = k + j0;
        for (uint c = 0; c < dh; c++, kc += lp) {
            const float16 k0 = vload16(0, kc), k1 = vload16(1, kc);
            const float16 k2 = vload16(2, kc), k3 = vload16(3, kc);
            const float x0 = q0[c], x1 = q1[c], x2 = q2[c], x3 = q3[c];
            a00 = fma(x0, k0, a00);
            a01 = fma(x0, k1, a01);
            a02 = fma(x0, k2, a02);
            a03 = fma(x0, k3, a03);
            a10 = fma(x1, k0, a10);
            a11 = fma(x1, k1, a11);
            a12 = fma(x1, k2, a12);
            a13 = fma(x1, k3, a13);
            a20 = fma(x2, k0, a20);
            a21 = fma(x2, k1, a21);
            a22 = fma(x2, k2, a22);
            a23 = fma(x2, k3, a23);
            a30 = fma(x3, k0, a30);
            a31 = fma(x3, k1, a31);
            a32 = fma(x3, k2, a32);
            a33 = fma(x3, k3, a33);
        }
        vstore16(a00 * scale, 0, s0 + j0);
        vstore16(a01 * scale, 1, s0 + j0);
        vstore16(a02 * scale, 2, s0 + j0);
        vstore16(a03 * scale, 3, s0 + j0);
        vstore16(a10 * scale, 0, s1 + j0);
        vstore16(a11 * scale, 1, s1 + j0);
        vstore16(a12 * scale, 2, s1 + j0);
        vstore16(a13 * scale, 3, s1 + j0);
        vstore16(a20 * scale, 0, s2 + j0);
        vstore16(a21 * scale, 1, s2 + j0);
        vstore16(a22 * scale, 2, s2 + j0);
        vstore16(a23 * scale, 3, s2 + j0);
        vstore16(a30 * scale, 0, s3 + j0);
        vstore16(a31 * scale, 1, s3 + j0);
        vstore16(a32 * scale, 2, s3 + j0);
        vstore16(a33 * scale, 3, s3 + j0);
    }

    /* Padding slots take no part. */
    for (uint j = L; j < lp; j++)
        s0[j] = s1[j] = s2[j] = s3[j] = -INFINITY;

    /* 2. exp(s - max) and the row sums, 16 slots at a time. */
    float16 w0 = vload16(0, s0), w1 = vload16(0, s1);
    float16 w2 = vload16(0, s2), w3 = vload16(0, s3);
    for (uint j = 16; j < lp; j += 16) {
        w0 = fmax(w0, vload16(0, s0 + j));
        w1 = fmax(w1, vload16(0, s1 + j));
        w2 = fmax(w2, vload16(0, s2 + j));
        w3 = fmax(w3, vload16(0, s3 + j));
    }
    const float m0 = hmax16(w0), m1 = hmax16(w1), m2 = hmax16(w2);
    const float m3 = hmax16(w3);
    float16 t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
    for (uint j = 0; j < lp; j += 16) {
        const float16 e0 = exp(vload16(0, s0 + j) - m0);
        const float16 e1 = exp(vload16(0, s1 + j) - m1);
        const float16 e2 = exp(vload16(0, s2 + j) - m2);
        const float16 e3 = exp(vload16(0, s3 + j) - m3);
        vstore16(e0, 0, s0 + j);
        vstore16(e1, 0, s1 + j);
        vstore16(e2, 0, s2 + j);
        vstore16(e3, 0, s3 + j);
        t0 += e0;
        t1 += e1;
        t2 += e2;
        t3 += e3;
    }
    const float u0 = 1.0f / hsum16(t0), u1 = 1.0f / hsum16(t1);
    const float u2 = 1.0f / hsum16(t2), u3 = 1.0f / hsum16(t3);

    /* 3. o_i = sum_j e_ij vbar_j / t_i, 64 columns at a time, then 16. */
    __global float *o0 = o + ((size_t)b * n + r0) * ldq + h * dh;
    __global float *o1 = o + ((size_t)b * n + i1) * ldq + h * dh;
    __global float *o2 = o + ((size_t)b * n + i2) * ldq + h * dh;
    __global float *o3 = o + ((size_t)b * n + i3) * ldq + h * dh;
    uint c0 = 0;
    for (; c0 + 64 <= dh; c0 += 64) {
        float16 a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f;
        float16 a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f;
        float16 a20 = 0.0f, a21 = 0.0f, a22 = 0.0f, a23 = 0.0f;
        float16 a30 = 0.0f, a31 = 0.0f, a32 = 0.0f, a33 = 0.0f;
        __global const float *vj = v + c0;
        for (uint j = 0; j < L; j++, vj += width) {
            const float16 v0 = vload16(0, vj), v1 = vload16(1, vj);
            const float16 v2 = vload16(2, vj), v3 = vload16(3, vj);
            const float x0 = s0[j], x1 = s1[j], x2 = s2[j], x3 = s3[j];
            a00 = fma(x0, v0, a00);
            a01 = fma(x0, v1, a01);
            a02 = fma(x0, v2, a02);
            a03 = fma(x0, v3, a03);
            a10 = fma(x1, v0, a10);
            a11 = fma(x1, v1, a11);
            a12 = fma(x1, v2, a12);
            a13 = fma(x1, v3, a13);
            a20 = fma(x2, v0, a20);
            a21 = fma(x2, v1, a21);
            a22 = fma(x2, v2, a22);
            a23 = fma(x2, v3, a23);
            a30 = fma(x3, v0, a30);
            a31 = fma(x3, v1, a31);
            a32 = fma(x3, v2, a32);
            a33 = fma(x3, v3, a33);
        }
        vstore16(a00 * u0, 0, o0 + c0);
        vstore16(a01 * u0, 1, o0 + c0);
        vstore16(a02 * u0, 2, o0 + c0);
        vstore16(a03 * u0, 3, o0 + c0);
        if (r0 + 1 < n) {
            vstore16(a10 * u1, 0, o1 + c0);
            vstore16(a11 * u1, 1, o1 + c0);
            vstore16(a12 * u1, 2, o1 + c0);
            vstore16(a13 * u1, 3, o1 + c0);
        }
        if (r0 + 2 < n) {
            vstore16(a20 * u2, 0, o2 + c0);
            vstore16(a21 * u2, 1, o2 + c0);
            vstore16(a22 * u2, 2, o2 + c0);
            vstore16(a23 * u2, 3, o2 + c0);
        }
        if (r0 + 3 < n) {
            vstore16(a30 * u3, 0, o3 + c0);
            vstore16(a31 * u3, 1, o3 + c0);
            vstore16(a32 * u3, 2, o3 + c0);
            vstore16(a33 * u3, 3, o3 + c0);
        }
    }
    for (; c0 < dh; c0 += 16) {
        float16 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        __global const float *vj = v + c0;
        for (uint j = 0; j < L; j++, vj += width) {
            const float16 x = vload16(0, vj);
            a0 = fma(s0[j], x, a0);
            a1 = fma(s1[j], x, a1);
            a2 = fma(s2[j], x, a2);
            a3 = fma(s3[j], x, a3);
        }
        vstore16(a0 * u0, 0, o0 + c0);
        if (r0 + 1 < n)
            vstore16(a1 * u1, 0, o1 + c0);
        if (r0 + 2 < n)
            vstore16(a2 * u2, 0, o2 + c0);
        if (r0 + 3 < n)
            vstore16(a3 * u3, 0, o3 + c0);
    }
}
