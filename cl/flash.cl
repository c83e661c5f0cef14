/* Streaming (flash-style) attention: one work-item takes rows (at most
 * FL_R FL_NB, a multiple of FL_R chosen by the host) query
 * rows of one head of one sequence and streams over the keys (full mode) or the
 * compressed slots (Linformer) in tiles of FL_T, keeping per row a running
 * maximum m, a running sum l and the unnormalised output acc:
 *
 *   s_j = scale log2(e) q . k_j,      masked keys: s_j = -INFINITY
 *   m'  = max(m, max_j s_j),          alpha = 2^(m - m')
 *   l   = alpha l + sum_j 2^(s_j - m'),
 *   acc = alpha acc + sum_j 2^(s_j - m') v_j,     y = acc / l,
 *
 * the softmax of scale q . k_j with log2(e) folded into the scale, so
 * that each score costs one exp2.  Key tiles that every row of a block
 * sees whole (no mask, no causal limit inside) skip the masking.
 *
 * No score leaves the work-item: memory is O(n d) in every mode.  The
 * accumulator lives in the work-item's own rows of the output, so any
 * head width works.  A NaN score makes m, and so every output of the row,
 * NaN (max_nan), as the softmax kernels and PyTorch give; a row with every
 * key masked gives zeros.  The keys arrive transposed tile by tile
 * (clf_flash_keys, slots padded with zeros to a multiple of FL_T), so that
 * the dh x FL_T keys of one tile are one contiguous block of memory.
 *
 * Modes, from the arguments:
 *   Linformer     L = k slots, nothing masked
 *   full          L = n keys; causal: key j > query t masked, and tiles
 *                 wholly after the work-item's last row are never read;
 *                 has_mask: padding keys masked
 *   causal        block > 0: query t in block m = t / block sees slots
 *   Linformer     j < m c, then, exactly, positions m block .. t of its
 *                 own block from pk, pv (has_mask: padding positions of
 *                 that window masked), as cl/causal.cl and docs/design.md
 *                 section 3 define it. */
#if !defined(CLF_FLASH_ROWS) || !defined(CLF_FLASH_BLOCKS) ||               \
    !defined(CLF_ATTEND_SLOT_BLOCK)
#error "build with the -D options of src/runtime/kernel_params.h"
#endif
#define FL_R CLF_FLASH_ROWS
#define FL_NB CLF_FLASH_BLOCKS
#define FL_T CLF_ATTEND_SLOT_BLOCK
#if FL_T != 64
#error "the flash kernel's tiles are four float16 vectors"
#endif

/* kt[(((b hc + g) lp / FL_T + j / FL_T) dh + c) FL_T + j mod FL_T] =
 * kbar[b L width + j width + g dh + c] for j < L, 0 for L <= j < lp: each
 * tile of FL_T keys transposed into one block of dh rows of FL_T floats.
 * Transposed row by row (stride lp), a tile's dh rows lie 4 lp bytes apart
 * and fall into a few sets of a CPU's cache, which then cannot hold the
 * tile while the blocks of rows reuse it.  Global size (lp, hc dh, B). */
__kernel void
clf_flash_keys(__global const float *kbar, const uint L, const uint width,
               const uint dh, const uint hc, const uint lp,
               __global float *kt)
{
    const uint j = get_global_id(0), gc = get_global_id(1);
    const uint b = get_global_id(2);
    if (j >= lp || gc >= hc * dh)
        return;
    const uint g = gc / dh, c = gc - g * dh;
    const size_t tile = ((size_t)b * hc + g) * (lp / FL_T) + j / FL_T;
    kt[(tile * dh + c) * FL_T + j % FL_T] =
        j < L ? kbar[((size_t)b * L + j) * width + g * dh + c] : 0.0f;
}

/* vt[off + ((b hc + g) lp + j) dh + c] = vbar[b L width + j width + g dh +
 * c] for j < L, 0 for L <= j < lp: each key head's values as rows of dh
 * floats, so that a tile's values are one block of memory as its keys
 * are.  Global size (dh, lp, B hc). */
__kernel void
clf_flash_values(__global const float *vbar, const uint L, const uint width,
                 const uint dh, const uint hc, const uint lp, const ulong off,
                 __global float *vt)
{
    const uint c = get_global_id(0), j = get_global_id(1);
    const uint bg = get_global_id(2);
    if (c >= dh || j >= lp)
        return;
    const uint b = bg / hc, g = bg - b * hc;
    vt[off + ((size_t)bg * lp + j) * dh + c] =
        j < L ? vbar[((size_t)b * L + j) * width + g * dh + c] : 0.0f;
}

/* max_nan over the lanes of four vectors: lane by lane as vectors, then
 * across the lanes through private memory (see hmax16 in common.cl). */
static float16
fl_max16(const float16 a, const float16 b)
{
    return select(b, a, (a > b) | isnan(a));
}

static float
fl_hmax64(const float16 *x)
{
    float lane[16];
    vstore16(fl_max16(fl_max16(x[0], x[1]), fl_max16(x[2], x[3])), 0, lane);
    float m = lane[0];
    for (int i = 1; i < 16; i++)
        m = max_nan(m, lane[i]);
    return m;
}

/* The running maximum after scores with maximum mt: m is updated, alpha
 * (the factor for what was summed so far) returned and *mu set to the
 * value to subtract (0 while every score seen is -INFINITY, so that
 * masked scores give exp(-inf) = 0, not NaN). */
static float
fl_step(float *m, const float mt, float *mu)
{
    const float mn = max_nan(*m, mt);
    *mu = mn == -INFINITY ? 0.0f : mn;
    const float alpha = exp2(*m - *mu);
    *m = mn;
    return alpha;
}

/* Scores of rows qr[0..FL_R) against the keys of one tile of kt (dh rows
 * of FL_T):
 * x[r][v] lanes 16 v .. 16 v + 15.  One vector of 16 keys at a time, so
 * that the FL_R accumulators and the keys stay in registers (16 of them
 * with AVX2) rather than spilling. */
static void
fl_scores(float16 x[FL_R][4], __global const float *const qr[FL_R],
          __global const float *kt, const uint dh)
{
    for (int v = 0; v < 4; v++) {
        float16 a[FL_R];
#pragma unroll
        for (int r = 0; r < FL_R; r++)
            a[r] = 0.0f;
        __global const float *kv = kt + 16 * v;
        for (uint c = 0; c < dh; c++, kv += FL_T) {
            const float16 k0 = vload16(0, kv);
#pragma unroll
            for (int r = 0; r < FL_R; r++)
                a[r] = fma(qr[r][c], k0, a[r]);
        }
#pragma unroll
        for (int r = 0; r < FL_R; r++)
            x[r][v] = a[r];
    }
}

/* acc[r] (columns of out[r], the first nr rows) = alpha[r] acc[r] +
 * sum over j < cnt[r] of p[r][j] v_j, v_j = v + j * dh: 16 columns at a
 * time (registers, as fl_scores), then one at a time.  Row r weighs only
 * the cnt[r] <= cnt[nr - 1] keys it sees (a causal row's limit falls
 * inside the tile): a key after its limit is skipped, not weighed by its
 * 0, since 0 v_j is NaN where v_j is NaN or infinite.  The keys all the
 * rows see (the first cnt[0]) run without the test. */
static void
fl_weigh(__global float *const out[FL_R], const int nr, const float *alpha,
         const float p[FL_R][FL_T], __global const float *v,
         const uint cnt[FL_R], const uint dh)
{
    const uint all = cnt[0], most = cnt[nr - 1];
    uint c0 = 0;
    for (; c0 + 16 <= dh; c0 += 16) {
        float16 y[FL_R];
#pragma unroll
        for (int r = 0; r < FL_R; r++)
            y[r] = r < nr ? vload16(0, out[r] + c0) * alpha[r] : 0.0f;
        __global const float *vj = v + c0;
        uint j = 0;
        for (; j < all; j++, vj += dh) {
            const float16 v0 = vload16(0, vj);
#pragma unroll
            for (int r = 0; r < FL_R; r++)
                y[r] = fma(p[r][j], v0, y[r]);
        }
        for (; j < most; j++, vj += dh) {
            const float16 v0 = vload16(0, vj);
#pragma unroll
            for (int r = 0; r < FL_R; r++)
                if (j < cnt[r])
                    y[r] = fma(p[r][j], v0, y[r]);
        }
#pragma unroll
        for (int r = 0; r < FL_R; r++)
            if (r < nr)
                vstore16(y[r], 0, out[r] + c0);
    }
    for (; c0 < dh; c0++)
        for (int r = 0; r < nr; r++) {
            float y = out[r][c0] * alpha[r];
            for (uint j = 0; j < cnt[r]; j++)
                y = fma(p[r][j], v[j * dh + c0], y);
            out[r][c0] = y;
        }
}

/* One row's scores of one tile: masked lanes (key j0 + lane at or past
 * lim, or keep 0) -INFINITY unless the tile is whole (every lane seen);
 * then the online update of m and l, the exponentials into p; returns
 * alpha. */
static float
fl_row(float16 x[4], const uint j0, const uint lim, const uchar *keep,
       const int whole, const float scale, float *m, float *l, float *p)
{
    const uint16 lane =
        (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    float mu;
    if (whole && lim >= j0 + FL_T)
        for (int v = 0; v < 4; v++)
            x[v] *= scale;
    else
        for (int v = 0; v < 4; v++) {
            const uint16 idx = lane + (j0 + 16 * (uint)v);
            const int16 ok =
                (idx < (uint16)lim) & (convert_int16(vload16(v, keep)) != 0);
            x[v] = select((float16)(-INFINITY), x[v] * scale, ok);
        }
    const float alpha = fl_step(m, fl_hmax64(x), &mu);
    float16 t = 0.0f;
    for (int v = 0; v < 4; v++) {
        const float16 e = exp2(x[v] - mu);
        vstore16(e, v, p);
        t += e;
    }
    *l = *l * alpha + hsum16(t);
    return alpha;
}

/* The exact window of causal Linformer for one query row t: positions
 * first..t of pk, pv (rows of dkv, head column hk), up to FL_T at a time. */
static void
fl_window(__global float *out, __global const float *qt, const uint first,
          const uint t, __global const float *pk, __global const float *pv,
          const uint dkv, __global const uchar *mask, const uint has_mask,
          const uint dh, const float scale, float *m, float *l)
{
    float p[FL_T];
    for (uint w0 = first; w0 <= t; w0 += FL_T) {
        const uint cnt = min((uint)FL_T, t + 1 - w0);
        float mt = -INFINITY, mu, sum = 0.0f;
        for (uint j = 0; j < cnt; j++) {
            __global const float *kr = pk + (size_t)(w0 + j) * dkv;
            float acc = 0.0f;
            for (uint e = 0; e < dh; e++)
                acc = fma(qt[e], kr[e], acc);
            p[j] = (has_mask && !mask[w0 + j]) ? -INFINITY : acc * scale;
            mt = max_nan(mt, p[j]);
        }
        const float alpha = fl_step(m, mt, &mu);
        for (uint j = 0; j < cnt; j++) {
            p[j] = exp2(p[j] - mu);
            sum += p[j];
        }
        *l = *l * alpha + sum;
        for (uint e = 0; e < dh; e++) {
            float y = out[e] * alpha;
            for (uint j = 0; j < cnt; j++)
                y = fma(p[j], pv[(size_t)(w0 + j) * dkv + e], y);
            out[e] = y;
        }
    }
}

/* One key tile (keys j0 .. j0 + cnt - 1) for rows rb .. rb + nr - 1,
 * nr <= FL_R, of a sequence and head (q, o: its first row and head
 * column): scores, the online update of those rows' m and l, and the
 * weighted sum. */
static void
fl_tile(__global const float *q, __global float *o, const uint ldq,
        const uint rb, const int nr, const uint j0, const uint cnt,
        const uchar *keep, const int whole, const uint *lim, float *m, float *l,
        __global const float *k, __global const float *vb,
        const uint dh, const float scale)
{
    __global const float *qr[FL_R];
    __global float *out[FL_R];
    float alpha[FL_R], p[FL_R][FL_T];
    uint seen[FL_R];
    float16 x[FL_R][4];
    /* Rows past nr repeat the last row, weigh nothing and are not
     * stored.  seen[r]: the tile's keys row r sees, rising with r. */
#pragma unroll
    for (int r = 0; r < FL_R; r++) {
        const size_t t = rb + (uint)min(r, nr - 1);
        qr[r] = q + t * ldq;
        out[r] = o + t * ldq;
        seen[r] = lim[min(r, nr - 1)] > j0
                      ? min(cnt, lim[min(r, nr - 1)] - j0)
                      : 0;
    }
    for (int r = nr; r < FL_R; r++)
        for (int j = 0; j < FL_T; j++)
            p[r][j] = 0.0f;
    fl_scores(x, qr, k + (size_t)j0 * dh, dh);
#pragma unroll
    for (int r = 0; r < FL_R; r++)
        alpha[r] = r < nr ? fl_row(x[r], j0, lim[r], keep, whole, scale, &m[r], &l[r],
                                   p[r])
                          : 0.0f;
    fl_weigh(out, nr, alpha, p, vb + (size_t)j0 * dh, seen, dh);
}

/* Rows r0 .. r0 + rows - 1 (r0 = rows * global id 0) of head
 * h = global id 1 of sequence b = global id 2, FL_R rows at a time for
 * each key tile, so that a tile of keys and values is read from memory
 * once for all the work-item's rows.  q, o: rows of ldq floats, head h at column
 * h dh; kt: per sequence and key head g, lp / FL_T tiles of dh rows of
 * FL_T floats (clf_flash_keys; L slots used);
 * v + v_off: per sequence and key head g, lp rows of dh floats
 * (clf_flash_values), g = kv_per_head ? h : 0; mask: batch x n bytes; pk, pv: n rows of dkv
 * floats per sequence, head column window_per_head ? h : 0. */
__kernel void
clf_flash(__global const float *q, const uint ldq, __global const float *kt,
          const uint lp, __global const float *v, const ulong v_off,
          __global float *o, const uint n, const uint L, const uint dh,
          const uint heads, const uint kv_per_head, const float scale,
          const uint causal, __global const uchar *mask, const uint has_mask,
          const uint c, const uint block, __global const float *pk,
          __global const float *pv, const uint dkv,
          const uint window_per_head, const uint rows)
{
    const uint r0 = get_global_id(0) * rows, h = get_global_id(1);
    const uint b = get_global_id(2);
    if (r0 >= n)
        return;
    const uint g = kv_per_head ? h : 0, hc = kv_per_head ? heads : 1;
    const uint nrow = min(min(rows, (uint)(FL_R * FL_NB)), n - r0);
    __global const float *k = kt + ((size_t)b * hc + g) * dh * lp;
    __global const float *vb = v + v_off + ((size_t)b * hc + g) * lp * dh;
    __global const uchar *mb = mask + (size_t)b * n;
    __global const float *q0 = q + (size_t)b * n * ldq + h * dh;
    __global float *o0 = o + (size_t)b * n * ldq + h * dh;
    float m[FL_R * FL_NB], l[FL_R * FL_NB];
    uint lim[FL_R * FL_NB];
    uchar keep[FL_T];
    const float scale2 = scale * M_LOG2E_F;
    for (uint i = 0; i < FL_R * FL_NB; i++) {
        const uint t = r0 + min(i, nrow - 1);
        m[i] = -INFINITY;
        l[i] = 0.0f;
        lim[i] = block ? min(L, t / block * c) : causal ? min(L, t + 1) : L;
    }
    for (uint i = 0; i < nrow; i++)
        for (uint e = 0; e < dh; e++)
            o0[(size_t)(r0 + i) * ldq + e] = 0.0f;
    /* Keys at or past the last row's limit are masked for every row, and
     * a block of rows skips the tiles past its own last row's. */
    const uint end = lim[nrow - 1];
    for (uint j0 = 0; j0 < end; j0 += FL_T) {
        const uint cnt = min((uint)FL_T, end - j0);
        int whole = 1;
        for (uint j = 0; j < FL_T; j++) {
            keep[j] = j < cnt && (block || !has_mask || mb[j0 + j]);
            whole &= keep[j];
        }
        for (uint i0 = 0; i0 < nrow; i0 += FL_R) {
            const int nr = (int)min((uint)FL_R, nrow - i0);
            const uint e = lim[i0 + (uint)nr - 1];
            if (e > j0)
                fl_tile(q0, o0, ldq, r0 + i0, nr, j0, min(cnt, e - j0), keep,
                        whole, lim + i0, m + i0, l + i0, k, vb, dh,
                        scale2);
        }
    }
    const uint hk = window_per_head ? h : 0;
    for (uint i = 0; i < nrow; i++) {
        const uint t = r0 + i;
        __global float *out = o0 + (size_t)t * ldq;
        if (block)
            fl_window(out, q0 + (size_t)t * ldq, t / block * block, t,
                      pk + (size_t)b * n * dkv + hk * dh,
                      pv + (size_t)b * n * dkv + hk * dh, dkv, mb, has_mask,
                      dh, scale2, &m[i], &l[i]);
        const float u = l[i] == 0.0f ? 0.0f : 1.0f / l[i];
        for (uint e = 0; e < dh; e++)
            out[e] *= u;
    }
}
