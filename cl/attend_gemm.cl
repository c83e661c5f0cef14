/* Kernels of the GEMM path's attention steps (src/stages/attend_gemm.c):
 * the finite copy of the values a causal weighted sum's GEMM reads, and
 * the terms of the non-finite values each causal row sees. */

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
