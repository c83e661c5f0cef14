/* Prefix-safe causal Linformer (docs/design.md, section 3).  Positions are cut
 * into blocks of `block`; the c slots of block m are built from block m's
 * positions only.  Query t in block m = t / block sees the slots of blocks
 * 0..m-1 and, exactly, positions m*block..t of its own block, under one
 * softmax.  A score row holds k slot columns then `block` window columns:
 * row stride ld = k + block.  A shard of a sharded forward holds the
 * positions from block `block0` on: its t is counted from there. */

/* The own-block window runs through the GEMM floor (src/stages/causal.c):
 * S[t, k + w] = scale q_t . k_(first + w) for every (query, window
 * position) of a block, then the causal softmax below; O += P_window Vf
 * with the values' non-finite entries 0, then clf_causal_window_nonfinite. */

/* The causal softmax reads only what a row's query sees: the slots before
 * (m + block0) * c (at most k) and the positions of its block up to itself
 * that are not padding.  Everything else in the row (later slots, later
 * window positions, padding, positions past n) comes out 0 without being
 * read, so what the score GEMMs left there does not matter.  A row that
 * sees nothing (all -INFINITY) becomes zeros; a NaN it sees makes every
 * entry it sees NaN, as the plain softmax does. */
struct causal_row {
    __global float *row, *win;  /* the slot columns; the window's */
    __global const uchar *keep; /* the block's padding bytes */
    uint slots, seen;           /* slots seen; window positions up to t */
};

static struct causal_row
causal_row(__global float *s, const size_t r, const uint ld, const uint heads,
           const uint n, const uint k, const uint c, const uint block,
           __global const uchar *mask, const uint block0)
{
    struct causal_row v;
    const size_t bh = r / n;
    const size_t t = r - bh * n;
    const size_t b = bh / heads;
    const size_t m = t / block;

    v.row = s + r * ld;
    v.win = v.row + k;
    v.keep = mask + b * n + m * block;
    v.slots = (uint)min((m + block0) * c, (size_t)k);
    v.seen = (uint)(t - m * block + 1);
    return v;
}

/* x[j] as the softmax sees it: -INFINITY on padding where `hide`. */
static float
kept(__global const float *x, __global const uchar *keep, const uint j,
     const int hide)
{
    return !hide || keep[j] ? x[j] : -INFINITY;
}

#define CAUSAL_SOFTMAX_ARGS                                                  \
    __global float *s, const uint ld, const uint rows, const uint heads,     \
        const uint n, const uint k, const uint c, const uint block,          \
        __global const uchar *mask, const uint has_mask, const uint block0

/* One (sequence, head, query) row per work-item (CPU runtimes).  Padding
 * in the window is first written as -INFINITY; then the maximum, the exps
 * and their sum, sixteen lanes at a time (the range_ functions of
 * cl/softmax.cl, as clf_softmax_rows_vec runs them).  A NaN the row sees makes the
 * sum and so every entry it sees NaN; where every other entry is
 * -INFINITY the maximum is -INFINITY, so that case looks for a NaN before
 * writing zeros. */
__kernel void
clf_causal_softmax(CAUSAL_SOFTMAX_ARGS)
{
    const size_t r = get_global_id(0);
    if (r >= rows)
        return;
    const struct causal_row v =
        causal_row(s, r, ld, heads, n, k, c, block, mask, block0);
    if (has_mask)
        for (uint j = 0; j < v.seen; j++)
            if (!v.keep[j])
                v.win[j] = -INFINITY;
    const float m = fmax(range_max(v.row, v.slots), range_max(v.win, v.seen));
    if (m == -INFINITY) {
        const float z = range_nan(v.row, v.slots) || range_nan(v.win, v.seen)
                            ? NAN
                            : 0.0f;
        for (uint j = 0; j < v.slots; j++)
            v.row[j] = z;
        for (uint j = 0; j < v.seen; j++)
            v.win[j] = z;
    } else {
        const float sum =
            range_exp(v.row, v.slots, m) + range_exp(v.win, v.seen, m);
        range_scale(v.row, v.slots, 1.0f / sum);
        range_scale(v.win, v.seen, 1.0f / sum);
    }
    for (uint j = v.slots; j < k; j++)
        v.row[j] = 0.0f;
    for (uint j = v.seen; j < block; j++)
        v.win[j] = 0.0f;
}

/* Entry j of what the row sees: its slots, then its window. */
static float
causal_seen(const struct causal_row *v, const uint j, const uint has_mask)
{
    if (j < v->slots)
        return v->row[j];
    return kept(v->win, v->keep, j - v->slots, has_mask);
}

static __global float *
causal_at(const struct causal_row *v, const uint j)
{
    return j < v->slots ? v->row + j : v->win + (j - v->slots);
}

/* One work-group per row (GPUs): neighbouring work-items read and write
 * neighbouring scores of what the row sees, the max and the sum reduced in
 * local memory; the local size a power of two, at most CLF_SOFTMAX_WG. */
__kernel void
clf_causal_softmax_wg(CAUSAL_SOFTMAX_ARGS)
{
    __local float red[CLF_SOFTMAX_WG];
    const size_t r = get_group_id(0);
    const uint lid = get_local_id(0);
    const uint lsz = get_local_size(0);
    float m = -INFINITY, sum = 0.0f;

    if (r >= rows)
        return; /* whole group: no barrier is skipped by part of it */
    const struct causal_row v =
        causal_row(s, r, ld, heads, n, k, c, block, mask, block0);
    const uint len = v.slots + v.seen;
    for (uint j = lid; j < len; j += lsz)
        m = max_nan(m, causal_seen(&v, j, has_mask));
    m = group_reduce(red, lid, lsz, m, 0);
    if (m == -INFINITY) {
        for (uint j = lid; j < ld; j += lsz)
            v.row[j] = 0.0f;
        return;
    }
    for (uint j = lid; j < len; j += lsz) {
        const float e = exp(causal_seen(&v, j, has_mask) - m);
        *causal_at(&v, j) = e;
        sum += e;
    }
    const float inv = 1.0f / group_reduce(red, lid, lsz, sum, 1);
    for (uint j = lid; j < len; j += lsz)
        *causal_at(&v, j) *= inv;
    for (uint j = v.slots + lid; j < k; j += lsz)
        v.row[j] = 0.0f;
    for (uint j = v.seen + lid; j < block; j += lsz)
        v.win[j] = 0.0f;
}

/* One (sequence, CLF_NONFINITE_ROWS queries, head, channel) per
 * work-item: adds to o the terms p v of the non-finite values v each
 * query's window sees (positions of its block up to itself), which the
 * GEMM over vf (those values 0) left out; first[b dkv + col] is the
 * sequence's first row whose column col is not finite (n: none), so a
 * column without one before the last of the item's queries costs one
 * comparison. */
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
    const uint chunks = (n + CLF_NONFINITE_ROWS - 1) / CLF_NONFINITE_ROWS;
    if (gid >= (size_t)batch * chunks * heads * dh)
        return;
    const size_t bqh = gid / dh; /* (b, chunk, h) */
    const uint e = (uint)(gid - bqh * dh);
    const size_t bq = bqh / heads;
    const uint h = (uint)(bqh - bq * heads);
    const size_t b = bq / chunks;
    const uint t1 = (uint)(bq - b * chunks) * CLF_NONFINITE_ROWS;
    const uint t2 = min(n, t1 + CLF_NONFINITE_ROWS);
    const uint col = (kv_per_head ? h * dh : 0) + e;
    const int f = first[b * dkv + col];
    if (f < 0 || (uint)f >= t2)
        return;
    for (uint t = max(t1, (uint)f); t < t2; t++) {
        const uint start = t / block * block;
        __global const float *row = s + ((b * heads + h) * n + t) * ld + k;
        float acc = 0.0f;
        int seen = 0;
        for (uint pos = max(start, (uint)f); pos <= t; pos++) {
            const float x = v[(b * n + pos) * dkv + col];
            if (!isfinite(x)) {
                acc = fma(row[pos - start], x, acc);
                seen = 1;
            }
        }
        if (seen)
            o[(b * n + t) * dq + h * dh + e] += acc;
    }
}
