/* Linformer attention over the compressed slots in one kernel: scores,
 * softmax and the weighted sum for ATT_R query rows of one head per
 * work-item.  With k slots of d_h values the slots of one head fit in a CPU
 * core's cache, and this saves the passes over the score matrix that
 * separate GEMM, softmax and GEMM calls make.  Which way is faster depends
 * on the device, so each context times the ways (src/layer/ways.c); the host
 * side is src/stages/fused.c. */

/* Rows of the transposed keys are padded to a multiple of ATT_KB slots;
 * a work-item handles ATT_R query rows.  Both are -D options from
 * src/runtime/kernel_params.h, shared with the host.  The loops over rows have
 * constant bounds and are unrolled, so the accumulators stay in registers. */
#define ATT_R CLF_ATTEND_ROWS
#define ATT_KB CLF_ATTEND_SLOT_BLOCK

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
clf_fused(__global const float *q, const uint ldq,
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
    const uint np = (n + ATT_R - 1) / ATT_R * ATT_R;
    __global const float *k = kt + ((size_t)b * hc + g) * dh * lp;
    __global const float *v = vbar + (size_t)b * L * width + g * dh;
    __global const float *qr[ATT_R];
    __global float *sr[ATT_R];
    /* Rows past n repeat the last row and are not stored. */
#pragma unroll
    for (int r = 0; r < ATT_R; r++) {
        qr[r] = q + ((size_t)b * n + min(r0 + r, n - 1)) * ldq + h * dh;
        sr[r] = s + (((size_t)b * heads + h) * np + r0 + r) * lp;
    }

    /* 1. Scores, ATT_KB slots at a time. */
    for (uint j0 = 0; j0 < lp; j0 += ATT_KB) {
        float16 x[ATT_R][4];
#pragma unroll
        for (int r = 0; r < ATT_R; r++)
            x[r][0] = x[r][1] = x[r][2] = x[r][3] = 0.0f;
        __global const float *kc = k + j0;
        for (uint c = 0; c < dh; c++, kc += lp) {
            const float16 k0 = vload16(0, kc), k1 = vload16(1, kc);
            const float16 k2 = vload16(2, kc), k3 = vload16(3, kc);
#pragma unroll
            for (int r = 0; r < ATT_R; r++) {
                FMA_ROW64(x[r], qr[r][c], k0, k1, k2, k3);
            }
        }
#pragma unroll
        for (int r = 0; r < ATT_R; r++) {
            vstore16(x[r][0] * scale, 0, sr[r] + j0);
            vstore16(x[r][1] * scale, 1, sr[r] + j0);
            vstore16(x[r][2] * scale, 2, sr[r] + j0);
            vstore16(x[r][3] * scale, 3, sr[r] + j0);
        }
    }

    /* 2. Padding slots take no part; exp(s - max) and the row sums.  A NaN
     * score makes its exp, the row sum and so every output of the row NaN,
     * whatever the maximum, as the softmax kernels and PyTorch give. */
    float u[ATT_R];
#pragma unroll
    for (int r = 0; r < ATT_R; r++) {
        __global float *row = sr[r];
        for (uint j = L; j < lp; j++)
            row[j] = -INFINITY;
        float16 w = vload16(0, row);
        for (uint j = 16; j < lp; j += 16)
            w = fmax(w, vload16(0, row + j));
        const float m = hmax16(w);
        float16 t = 0.0f;
        for (uint j = 0; j < lp; j += 16) {
            const float16 e = exp(vload16(0, row + j) - m);
            vstore16(e, 0, row + j);
            t += e;
        }
        u[r] = 1.0f / hsum16(t);
    }

    /* 3. o_i = sum_j e_ij vbar_j / t_i, 64 columns at a time, then 16. */
    uint c0 = 0;
    for (; c0 + 64 <= dh; c0 += 64) {
        float16 x[ATT_R][4];
#pragma unroll
        for (int r = 0; r < ATT_R; r++)
            x[r][0] = x[r][1] = x[r][2] = x[r][3] = 0.0f;
        __global const float *vj = v + c0;
        for (uint j = 0; j < L; j++, vj += width) {
            const float16 v0 = vload16(0, vj), v1 = vload16(1, vj);
            const float16 v2 = vload16(2, vj), v3 = vload16(3, vj);
#pragma unroll
            for (int r = 0; r < ATT_R; r++) {
                FMA_ROW64(x[r], sr[r][j], v0, v1, v2, v3);
            }
        }
#pragma unroll
        for (int r = 0; r < ATT_R; r++) {
            if (r0 + r < n) {
                __global float *out =
                    o + ((size_t)b * n + r0 + r) * ldq + h * dh + c0;
                vstore16(x[r][0] * u[r], 0, out);
                vstore16(x[r][1] * u[r], 1, out);
                vstore16(x[r][2] * u[r], 2, out);
                vstore16(x[r][3] * u[r], 3, out);
            }
        }
    }
    for (; c0 < dh; c0 += 16) {
        float16 x[ATT_R];
#pragma unroll
        for (int r = 0; r < ATT_R; r++)
            x[r] = 0.0f;
        __global const float *vj = v + c0;
        for (uint j = 0; j < L; j++, vj += width) {
            const float16 v0 = vload16(0, vj);
#pragma unroll
            for (int r = 0; r < ATT_R; r++)
                x[r] = fma(sr[r][j], v0, x[r]);
        }
#pragma unroll
        for (int r = 0; r < ATT_R; r++) {
            if (r0 + r < n)
                vstore16(x[r] * u[r], 0,
                         o + ((size_t)b * n + r0 + r) * ldq + h * dh + c0);
        }
    }
}
