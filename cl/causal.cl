/* Prefix-safe causal Linformer (docs/design.md, section 3).  Positions are cut
 * into blocks of `block`; the c slots of block m are built from block m's
 * positions only.  Query t in block m = t / block sees the slots of blocks
 * 0..m-1 and, exactly, positions m*block..t of its own block, under one
 * softmax.  A score row holds k slot columns then `block` window columns:
 * row stride ld = k + block.  A shard of a sharded forward holds the
 * positions from block `block0` on: its t is counted from there. */

/* The own-block window runs through the GEMM floor (src/stages/causal.c):
 * S[t, k + w] = scale q_t . k_(first + w) for every (query, window
 * position) of a block, then clf_causal_mask; O += P_window Vf with the
 * values' non-finite entries 0, then clf_causal_window_nonfinite. */

/* One (sequence, head, query) row per work-item: -INFINITY over the slots
 * of the query's block and later, and over the window positions after the
 * query (past n too) or on padding. */
__kernel void
clf_causal_mask(__global float *s, const uint ld, const uint batch,
                const uint heads, const uint n, const uint k, const uint c,
                const uint block, __global const uchar *mask,
                const uint has_mask, const uint block0)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)batch * heads * n)
        return;
    const size_t bh = gid / n;
    const size_t t = gid - bh * n;
    const size_t b = bh / heads;
    const size_t m = t / block;
    const size_t first = m * block;
    __global float *row = s + gid * ld;

    for (size_t j = (m + block0) * c; j < k; j++)
        row[j] = -INFINITY;
    for (size_t w = 0; w < block; w++) {
        const size_t pos = first + w;
        if (pos > t || (has_mask && !mask[b * n + pos]))
            row[k + w] = -INFINITY;
    }
}

/* One (sequence, query, head, channel) per work-item: adds to o the terms
 * p v of the non-finite values v the query's window sees (positions of
 * its block up to itself), which the GEMM over vf (those values 0) left
 * out; first[b dkv + col] is the sequence's first row whose column col is
 * not finite (n: none), so a column without one costs a comparison. */
__kernel void
clf_causal_window_nonfinite(__global float *o, const uint dq,
                            __global const float *s, const uint ld,
                            __global const float *v, const uint dkv,
                            const uint batch, const uint heads, const uint n,
                            const uint dh, const uint k, const uint block,
                            const uint kv_per_head,
                            __global const int *first)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)batch * n * heads * dh)
        return;
    const size_t bth = gid / dh; /* (b, t, h) */
    const uint e = (uint)(gid - bth * dh);
    const size_t bt = bth / heads;
    const uint h = (uint)(bth - bt * heads);
    const size_t b = bt / n;
    const size_t t = bt - b * n;
    const uint col = (kv_per_head ? h * dh : 0) + e;
    const int f = first[b * dkv + col];
    if (f < 0 || (size_t)f > t)
        return;
    const size_t start = t / block * block;
    __global const float *row = s + ((b * heads + h) * n + t) * ld + k;
    float acc = 0.0f;
    int seen = 0;

    for (size_t pos = max(start, (size_t)f); pos <= t; pos++) {
        const float x = v[(b * n + pos) * dkv + col];
        if (!isfinite(x)) {
            acc = fma(row[pos - start], x, acc);
            seen = 1;
        }
    }
    if (seen)
        o[(b * n + t) * dq + h * dh + e] += acc;
}
