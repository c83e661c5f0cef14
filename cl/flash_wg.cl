/* Streaming attention shaped for GPUs (FlashAttention-2 partitioning):
 * one work-group per tile of FW_Q query rows of one head of one sequence,
 * FW_S work-items per row, each owning FW_DH / FW_S columns of the row's
 * query (in registers, scaled once) and of its output accumulator.  The
 * group streams over the keys (full mode) or compressed slots (Linformer)
 * in tiles of FW_K, staged in local memory and shared by all its rows:
 *
 *   partial dots over each item's columns, summed through local memory
 *   (every item of a row reads the FW_S partials back in the same order,
 *   so they hold the same scores, bit for bit, and the same m and l);
 *   m' = max(m, max_j s_j), alpha = 2^(m - m'),
 *   l = alpha l + sum_j 2^(s_j - m'), acc = alpha acc + sum_j 2^(s_j - m') v_j
 *
 * with log2(e) folded into the scale, as cl/flash.cl.  The register cost
 * is fixed by the -D sizes, not by n or L: that is what keeps the kernel
 * free of scratch on GPUs, where the CPU-shaped clf_flash (36 rows an item)
 * spills.  Heads wider than FW_DH do not fit; the host then does not offer
 * the kernel (src/stages/flash_wg.c).
 *
 * Masked keys score -INFINITY; while every score a row has seen is
 * -INFINITY the value subtracted is 0, so exp2 gives 0, never NaN, and a
 * row with every key masked ends with l = 0 and gives zeros.  A NaN score
 * makes the row NaN (max_nan), as the other attention kernels do.
 *
 * Modes, from the arguments (as clf_flash):
 *   Linformer     L = k slots, nothing masked
 *   full          L = n keys; causal: key j > query t masked, and tiles
 *                 past the group's last row are never read; has_mask:
 *                 padding keys masked
 *   causal        block > 0: query t in block m = t / block sees slots
 *   Linformer     j < m c, then, exactly, positions m block .. t of its
 *                 own block from pk, pv (has_mask: padding positions of
 *                 that window masked), docs/design.md section 3; the
 *                 group stages pk, pv rows from its first row's block on
 *                 as it stages keys. */
#if !defined(CLF_FLASHWG_ROWS) || !defined(CLF_FLASHWG_SPLIT) ||            \
    !defined(CLF_FLASHWG_DH) || !defined(CLF_FLASHWG_KEYS)
#error "build with the -D options of src/runtime/kernel_params.h"
#endif
#define FW_Q CLF_FLASHWG_ROWS
#define FW_S CLF_FLASHWG_SPLIT
#define FW_DH CLF_FLASHWG_DH
#define FW_K CLF_FLASHWG_KEYS
#define FW_ITEMS (FW_Q * FW_S)
#define FW_C (FW_DH / FW_S)
#if FW_DH % (4 * FW_S) != 0
#error "each item's columns are whole float4 vectors of the head"
#endif

/* Keys j0 .. j0 + FW_K - 1 of kb and vb (rows of `width` floats, the
 * head's dh columns first) into kl and vl as FW_K rows of FW_DH, zeros
 * past `end` and past dh, so that the inner loops need no guards: an
 * item's columns past dh meet zeros in the query and in the values.
 * Float4 loads where the head is whole vectors; consecutive items read
 * consecutive floats of a key row either way. */
static void
fw_load(__local float *kl, __local float *vl, __global const float *kb,
        __global const float *vb, const uint j0, const uint end,
        const uint width, const uint dh, const uint lid)
{
    if (dh % 4 == 0) {
        for (uint e = lid; e < FW_K * FW_DH / 4; e += FW_ITEMS) {
            const uint j = e / (FW_DH / 4), c = 4 * (e % (FW_DH / 4));
            const size_t at = (size_t)(j0 + j) * width + c;
            const int in = j0 + j < end && c < dh;
            vstore4(in ? vload4(0, kb + at) : (float4)0.0f, 0,
                    kl + j * FW_DH + c);
            vstore4(in ? vload4(0, vb + at) : (float4)0.0f, 0,
                    vl + j * FW_DH + c);
        }
        return;
    }
    for (uint e = lid; e < FW_K * FW_DH; e += FW_ITEMS) {
        const uint j = e / FW_DH, c = e % FW_DH;
        const size_t at = (size_t)(j0 + j) * width + c;
        const int in = j0 + j < end && c < dh;
        kl[e] = in ? kb[at] : 0.0f;
        vl[e] = in ? vb[at] : 0.0f;
    }
}

/* The item's partial dots of its columns (c0 ..) with each key of the
 * tile. */
static void
fw_dots(float sc[FW_K], const float qv[FW_C], __local const float *kl,
        const uint c0)
{
#pragma unroll
    for (int j = 0; j < FW_K; j++)
        sc[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < FW_C; i += 4) {
#pragma unroll
        for (int j = 0; j < FW_K; j++) {
            const float4 k4 = vload4(0, kl + j * FW_DH + c0 + i);
            sc[j] = fma(qv[i], k4.x, sc[j]);
            sc[j] = fma(qv[i + 1], k4.y, sc[j]);
            sc[j] = fma(qv[i + 2], k4.z, sc[j]);
            sc[j] = fma(qv[i + 3], k4.w, sc[j]);
        }
    }
}

/* Row r's whole scores from the partials of its FW_S items (s: this
 * item's share), through xl.  The caller makes sure no item still reads
 * xl from the step before. */
static void
fw_exchange(float sc[FW_K], __local float *xl, const uint r, const uint s)
{
#pragma unroll
    for (int j = 0; j < FW_K; j++)
        xl[(s * FW_K + (uint)j) * FW_Q + r] = sc[j];
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int j = 0; j < FW_K; j++) {
        float t = 0.0f;
        for (uint u = 0; u < FW_S; u++)
            t += xl[(u * FW_K + (uint)j) * FW_Q + r];
        sc[j] = t;
    }
}

/* The online update for scores sc (masked ones -INFINITY): m and l
 * updated, sc turned into 2^(s - m'), alpha returned. */
static float
fw_update(float sc[FW_K], float *m, float *l)
{
    float mt = -INFINITY, sum = 0.0f;
#pragma unroll
    for (int j = 0; j < FW_K; j++)
        mt = max_nan(mt, sc[j]);
    const float mn = max_nan(*m, mt);
    const float mu = mn == -INFINITY ? 0.0f : mn;
    const float alpha = exp2(*m - mu);
#pragma unroll
    for (int j = 0; j < FW_K; j++) {
        sc[j] = exp2(sc[j] - mu);
        sum += sc[j];
    }
    *m = mn;
    *l = *l * alpha + sum;
    return alpha;
}

/* acc = alpha acc + sum_j p_j v_j over the tile's values in vl, key
 * j0 + j taking part only from lo up to hi (the row's own keys or window):
 * the others' p_j is 0, but 0 v_j is NaN where v_j, a value after the
 * row or in another block, is NaN or infinite, so they are skipped. */
static void
fw_weigh(float acc[FW_C], const float alpha, const float p[FW_K],
         __local const float *vl, const uint c0, const uint j0,
         const uint lo, const uint hi)
{
#pragma unroll
    for (int i = 0; i < FW_C; i++)
        acc[i] *= alpha;
#pragma unroll
    for (int j = 0; j < FW_K; j++) {
        if (j0 + (uint)j < lo || j0 + (uint)j >= hi)
            continue;
#pragma unroll
        for (int i = 0; i < FW_C; i += 4) {
            const float4 v4 = vload4(0, vl + j * FW_DH + c0 + i);
            acc[i] = fma(p[j], v4.x, acc[i]);
            acc[i + 1] = fma(p[j], v4.y, acc[i + 1]);
            acc[i + 2] = fma(p[j], v4.z, acc[i + 2]);
            acc[i + 3] = fma(p[j], v4.w, acc[i + 3]);
        }
    }
}

/* Masks the scores of one step: a tile of keys j0 .. (past the row's
 * limit, or padding in full mode), or of positions j0 .. of causal
 * Linformer's windows (outside the row's own block up to t, or
 * padding). */
static void
fw_mask(float sc[FW_K], const int win, const uint j0, const uint lim,
        const uint ws, const uint t, __global const uchar *mb,
        const uint key_mask, const uint has_mask)
{
#pragma unroll
    for (int j = 0; j < FW_K; j++) {
        const uint key = j0 + (uint)j;
        if (win ? key < ws || key > t || (has_mask && !mb[key])
                : key >= lim || (key_mask && !mb[key]))
            sc[j] = -INFINITY;
    }
}

/* The keys or slots query t sees before any window. */
static uint
fw_limit(const uint t, const uint L, const uint causal, const uint c,
         const uint block)
{
    return block ? min(L, t / block * c) : causal ? min(L, t + 1) : L;
}

/* Work-group (x, h, b): rows x FW_Q .. of head h of sequence b; local id
 * lid: row lid % FW_Q, columns (lid / FW_Q) FW_C .. of the head.  q, o:
 * rows of ldq floats, head h at column h dh; kbar, vbar: per sequence L
 * rows of hc dh floats (hc = kv_per_head ? heads : 1), head g = kv_per_head
 * ? h : 0 at column g dh; mask: batch x n bytes; pk, pv: n rows of dkv
 * floats per sequence, head column window_per_head ? h : 0. */
__kernel __attribute__((reqd_work_group_size(FW_ITEMS, 1, 1))) void
clf_flash_wg(__global const float *q, const uint ldq,
             __global const float *kbar, __global const float *vbar,
             __global float *o, const uint n, const uint L, const uint dh,
             const uint heads, const uint kv_per_head, const float scale,
             const uint causal, __global const uchar *mask,
             const uint has_mask, const uint c, const uint block,
             __global const float *pk, __global const float *pv,
             const uint dkv, const uint window_per_head)
{
    __local float kl[FW_K * FW_DH], vl[FW_K * FW_DH];
    __local float xl[FW_S * FW_K * FW_Q];
    const uint lid = get_local_id(0), r = lid % FW_Q, s = lid / FW_Q;
    const uint h = get_group_id(1), b = get_group_id(2);
    const uint t0 = get_group_id(0) * FW_Q, t = t0 + r;
    /* Rows past n compute the last row again and store nothing: every
     * item of the group must meet the same barriers. */
    const uint tc = min(t, n - 1), last = min(t0 + FW_Q, n) - 1;
    const uint g = kv_per_head ? h : 0, width = (kv_per_head ? heads : 1) * dh;
    const uint c0 = s * FW_C, lim = fw_limit(tc, L, causal, c, block);
    const uint end = fw_limit(last, L, causal, c, block);
    __global const float *kb = kbar + (size_t)b * L * width + g * dh;
    __global const float *vb = vbar + (size_t)b * L * width + g * dh;
    __global const uchar *mb = mask + (size_t)b * n;
    __global const float *qt = q + ((size_t)b * n + tc) * ldq + h * dh;
    const float scale2 = scale * M_LOG2E_F;
    float qv[FW_C], acc[FW_C], m = -INFINITY, l = 0.0f;
#pragma unroll
    for (int i = 0; i < FW_C; i++) {
        qv[i] = c0 + (uint)i < dh ? qt[c0 + (uint)i] * scale2 : 0.0f;
        acc[i] = 0.0f;
    }
    /* The steps: tiles of keys or slots, then (causal Linformer) the
     * positions from the first row's block start to the last row, staged
     * as the keys are, each row masking those outside its own window.
     * One loop and one load whose sources are chosen by value: PoCL 3.1
     * gave wrong rows for this kernel with a second loop of barriers, and
     * with a branch between two loads, though oclgrind found no race. */
    const uint hk = window_per_head ? h : 0;
    const size_t base = (size_t)b * n * dkv + hk * dh;
    const uint ws = block ? tc / block * block : 0;
    const uint p0 = block ? t0 / block * block : 0;
    const uint tiles = (end + FW_K - 1) / FW_K;
    const uint steps = tiles + (block ? (last + FW_K - p0) / FW_K : 0);
    const uint first = fw_limit(t0, L, causal, c, block);
    const uint key_mask = has_mask && !block;
    for (uint st = 0; st < steps; st++) {
        const int win = st >= tiles;
        const uint j0 = win ? p0 + (st - tiles) * FW_K : st * FW_K;
        float sc[FW_K];
        barrier(CLK_LOCAL_MEM_FENCE);
        fw_load(kl, vl, win ? pk + base : kb, win ? pv + base : vb, j0,
                win ? last + 1 : end, win ? dkv : width, dh, lid);
        barrier(CLK_LOCAL_MEM_FENCE);
        fw_dots(sc, qv, kl, c0);
        fw_exchange(sc, xl, r, s);
        /* Tiles that every row sees whole skip the masking. */
        if (win || j0 + FW_K > first || key_mask)
            fw_mask(sc, win, j0, lim, ws, tc, mb, key_mask, has_mask);
        fw_weigh(acc, fw_update(sc, &m, &l), sc, vl, c0, j0, win ? ws : 0,
                 win ? tc + 1 : lim);
    }
    if (t >= n)
        return;
    const float u = l == 0.0f ? 0.0f : 1.0f / l;
    __global float *out = o + ((size_t)b * n + t) * ldq + h * dh;
#pragma unroll
    for (int i = 0; i < FW_C; i++)
        if (c0 + (uint)i < dh)
            out[c0 + (uint)i] = acc[i] * u;
}
