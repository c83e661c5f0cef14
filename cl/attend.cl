/* Linformer attention over the compressed slots in one kernel: scores,
 * softmax and the weighted sum for ATT_R query rows of one head per
 * work-item.  With k slots of d_h values the slots of one head fit in a CPU
 * core's cache, and this saves the passes over the score matrix that
 * separate GEMM, softmax and GEMM calls make.  Which way is faster depends
 * on the device, so each context times both (src/stages/attend.c). */

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

/* p[i] = v for i < count: the first non-finite rows reset before
 * clf_finite_values (a kernel, so that every device and simulator sees
 * the buffer written as any kernel output). */
__kernel void
clf_fill_int(__global int *p, const int v, const uint count)
{
    const size_t gid = get_global_id(0);
    if (gid < count)
        p[gid] = v;
}

/* The weighted sum of a causal row through a GEMM (P V over all L keys or
 * slots) reads every value: those after the row's limit with p = 0, and
 * 0 x NaN and 0 x inf are NaN.  So the GEMM reads vf, v with each
 * non-finite entry 0, and clf_weigh_nonfinite adds the terms of the
 * non-finite values a row does see; a finite v is read unchanged, so
 * finite inputs keep the GEMM's bits.
 *
 * vf[i] = v[i] where finite, else 0, for batch sequences of L rows of
 * width floats; first[b width + col]: the first row of column col of
 * sequence b holding a non-finite value (atomic_min, over L written by
 * the host first).  One element per work-item. */
__kernel void
clf_finite_values(__global const float *v, const uint L, const uint width,
                  const uint batch, __global float *vf,
                  volatile __global int *first)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)batch * L * width)
        return;
    const size_t row = gid / width; /* b L + j */
    const uint col = (uint)(gid - row * width);
    const size_t b = row / L;
    const float x = v[gid];
    if (isfinite(x)) {
        vf[gid] = x;
        return;
    }
    vf[gid] = 0.0f;
    atomic_min(first + b * width + col, (int)(row - b * L));
}

/* The keys (or slots) the query at position t sees, at most L. */
static uint
row_limit(const uint t, const uint L, const uint c, const uint block)
{
    return min(L, block ? t / block * c : t + 1);
}

/* o += sum over j from first to lim - 1 of p_j v_j for the non-finite v_j
 * of the row's column: the terms the GEMM over vf left out.  Row r of
 * the pass is the query at position T = row0 + r, which sees lim = T + 1
 * keys (block 0: causal full mode) or T / block * c slots (causal
 * Linformer, its own block's window added apart), at most L.  Layouts as
 * the GEMM path's (seqs sequences of the pass, heads, rows; s: P at
 * ((j heads + h) rows + r) ld; o: rows of dq floats, n a sequence; v:
 * L rows of width floats a sequence, head column kv_per_head ? h dh : 0;
 * first from first_off: the pass's sequences' first non-finite rows).
 * One (sequence, head, CLF_NONFINITE_ROWS rows, column) per work-item;
 * the limit only grows with the row, so a column without a non-finite
 * value before its last row's limit costs one comparison for all of
 * them. */
__kernel void
clf_weigh_nonfinite(__global float *o, const ulong o_off, const uint dq,
                    const uint n, __global const float *s, const ulong s_off,
                    const uint ld, const uint rows, const uint seqs,
                    const uint heads, __global const float *v,
                    const ulong v_off, const uint L, const uint width,
                    const uint dh, const uint kv_per_head,
                    __global const int *first, const ulong first_off,
                    const uint row0, const uint c, const uint block)
{
    const size_t gid = get_global_id(0);
    const uint chunks = (rows + CLF_NONFINITE_ROWS - 1) / CLF_NONFINITE_ROWS;
    if (gid >= (size_t)seqs * heads * chunks * dh)
        return;
    const size_t bhq = gid / dh; /* (sequence, head, chunk) */
    const uint e = (uint)(gid - bhq * dh);
    const size_t bh = bhq / chunks;
    const uint r1 = (uint)(bhq - bh * chunks) * CLF_NONFINITE_ROWS;
    const uint r2 = min(rows, r1 + CLF_NONFINITE_ROWS);
    const size_t j = bh / heads;
    const uint h = (uint)(bh - j * heads);
    const uint col = (kv_per_head ? h * dh : 0) + e;
    const int f = first[first_off + j * width + col];
    if (f < 0 || (uint)f >= row_limit(row0 + r2 - 1, L, c, block))
        return;
    __global const float *vc = v + v_off + j * L * width + col;
    for (uint r = r1; r < r2; r++) {
        const uint lim = row_limit(row0 + r, L, c, block);
        __global const float *p = s + s_off + (bh * rows + r) * ld;
        float acc = 0.0f;
        if ((uint)f >= lim)
            continue;
        for (uint i = (uint)f; i < lim; i++) {
            const float x = vc[(size_t)i * width];
            if (!isfinite(x))
                acc = fma(p[i], x, acc);
        }
        o[o_off + (j * n + r) * dq + h * dh + e] += acc;
    }
}
