/* Prefix-safe causal Linformer (docs/design.md, section 3).  Positions are cut
 * into blocks of `block`; the c slots of block m are built from block m's
 * positions only.  Query t in block m = t / block sees the slots of blocks
 * 0..m-1 and, exactly, positions m*block..t of its own block, under one
 * softmax.  A score row holds k slot columns then `block` window columns:
 * row stride ld = k + block.  A shard of a sharded forward holds the
 * positions from block `block0` on: its t is counted from there. */

/* One (sequence, head, query) per work-item: masks the slots of blocks
 * m and later, and fills the window columns with exact scores, -INFINITY
 * past the query, past n, or on padding. */
__kernel void
clf_causal_scores(__global float *s, const uint ld,
                  __global const float *q, const uint dq,
                  __global const float *kp, const uint dkv, const uint batch,
                  const uint heads, const uint n, const uint dh,
                  const uint k, const uint c, const uint block,
                  const uint kv_per_head, const float scale,
                  __global const uchar *mask, const uint has_mask,
                  const uint block0)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)batch * heads * n)
        return;
    const size_t bh = gid / n;
    const size_t t = gid - bh * n;
    const size_t b = bh / heads;
    const size_t h = bh - b * heads;
    const size_t m = t / block;
    const size_t first = m * block;
    __global float *row = s + gid * ld;
    __global const float *qt = q + (b * n + t) * dq + h * dh;
    const size_t hk = kv_per_head ? h : 0;

    for (size_t j = (m + block0) * c; j < k; j++)
        row[j] = -INFINITY;
    for (size_t w = 0; w < block; w++) {
        const size_t pos = first + w;
        float v = -INFINITY;
        if (pos <= t && (!has_mask || mask[b * n + pos])) {
            __global const float *kr = kp + (b * n + pos) * dkv + hk * dh;
            float acc = 0.0f;
            for (uint e = 0; e < dh; e++)
                acc += qt[e] * kr[e];
            v = acc * scale;
        }
        row[k + w] = v;
    }
}

/* The same scores, a work-group a tile of CLF_CAUSAL_TILE queries x
 * CLF_CAUSAL_TILE window positions of one block of one (sequence, head)
 * (GPUs): all queries of a block share its window, so the tile's keys are
 * staged in local memory, T columns of the head at a time, and read by
 * the tile's T queries from there; neighbouring work-items write
 * neighbouring window columns.  Tiles wholly after their queries are
 * -INFINITY without a load.  Global (T tiles, T tiles blocks, batch heads)
 * with tiles = ceil(block / T), local (T, T, 1).  The sum over the head's
 * columns runs in the same order as clf_causal_scores'. */
#define T CLF_CAUSAL_TILE
__kernel void
clf_causal_scores_wg(__global float *s, const uint ld,
                     __global const float *q, const uint dq,
                     __global const float *kp, const uint dkv,
                     const uint batch, const uint heads, const uint n,
                     const uint dh, const uint k, const uint c,
                     const uint block, const uint kv_per_head,
                     const float scale, __global const uchar *mask,
                     const uint has_mask, const uint block0)
{
    __local float qs[T][T + 1], ks[T][T + 1];
    const uint lx = get_local_id(0), ly = get_local_id(1);
    const uint tiles = (block + T - 1) / T;
    const uint wt = get_group_id(0), g1 = get_group_id(1);
    const uint m = g1 / tiles, qt = g1 - m * tiles;
    const size_t bh = get_global_id(2);
    const size_t b = bh / heads, h = bh - b * heads;
    const size_t hk = kv_per_head ? h : 0;
    const uint first = m * block;
    const uint qi = qt * T + ly, wi = wt * T + lx; /* within the block */
    const uint t = first + qi, pos = first + wi;
    const uint kr = first + wt * T + ly; /* the key row this item loads */
    const int query = qi < block && t < n;
    const int seen = wi < block && pos <= t && pos < n &&
                     (!has_mask || mask[b * n + pos]);
    __global float *row = s + (bh * n + t) * ld;
    __global const float *qrow = q + (b * n + t) * dq + h * dh;
    __global const float *krow = kp + (b * n + kr) * dkv + hk * dh;
    const int load_k = wt * T + ly < block && kr < n;
    float acc = 0.0f;

    if (wt <= qt) /* whole group: the tile holds positions up to a query */
        for (uint e0 = 0; e0 < dh; e0 += T) {
            const uint e = e0 + lx;
            qs[ly][lx] = query && e < dh ? qrow[e] : 0.0f;
            ks[ly][lx] = load_k && e < dh ? krow[e] : 0.0f;
            barrier(CLK_LOCAL_MEM_FENCE);
            const uint top = dh - e0 < T ? dh - e0 : T;
            for (uint j = 0; j < top; j++)
                acc += qs[ly][j] * ks[lx][j];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    if (!query)
        return;
    if (wi < block)
        row[k + wi] = seen ? acc * scale : -INFINITY;
    if (wt == 0)
        for (uint j = (m + block0) * c + lx; j < k; j += T)
            row[j] = -INFINITY;
}
#undef T

/* One (sequence, query, head, channel) per work-item: adds the window part
 * of the weighted sum, sum over the window of p * V, to o. */
__kernel void
clf_causal_apply(__global float *o, const uint dq, __global const float *s,
                 const uint ld, __global const float *vp, const uint dkv,
                 const uint batch, const uint heads, const uint n,
                 const uint dh, const uint k, const uint block,
                 const uint kv_per_head)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)batch * n * heads * dh)
        return;
    const size_t bth = gid / dh; /* (b, t, h) */
    const size_t e = gid - bth * dh;
    const size_t bt = bth / heads;
    const size_t h = bth - bt * heads;
    const size_t b = bt / n;
    const size_t t = bt - b * n;
    const size_t first = (t / block) * block;
    __global const float *row = s + ((b * heads + h) * n + t) * ld + k;
    const size_t hk = kv_per_head ? h : 0;
    float acc = 0.0f;

    for (size_t pos = first; pos <= t; pos++)
        acc += row[pos - first] * vp[(b * n + pos) * dkv + hk * dh + e];
    o[(b * n + t) * dq + h * dh + e] += acc;
}
