/* Row softmax over the k slots (or n positions) of each score row:
 * max-subtracted, float accumulation.  A row whose entries are all -INFINITY
 * (every slot masked) becomes zeros, not NaN; a row holding a NaN becomes
 * NaN throughout (its maximum is NaN, see max_nan), as in PyTorch.
 *
 * Full mode's masks are folded in (no pass of their own over the scores):
 * with has_mask, the keys whose byte in the row's sequence's mask is 0
 * (the mask of sequence b starts at mask_off + b * cols), and with causal,
 * the keys after the row's query, read as -INFINITY whatever the buffer
 * holds, and come out as 0.  Row r of the launch is query row0 + r %
 * chunk of sequence r / seq_rows (seq_rows = heads * chunk score rows a
 * sequence).  Without either the arguments after cols are unused. */

/* The row's view of the masks: keys before lim that keep holds. */
struct row_view {
    __global const uchar *keep;
    uint lim, has_mask;
};

static struct row_view
row_view(const size_t r, const uint cols, __global const uchar *mask,
         const ulong mask_off, const uint has_mask, const uint causal,
         const uint seq_rows, const uint chunk, const uint row0)
{
    struct row_view v;
    const uint seq = (uint)(r / seq_rows);
    const uint in_seq = (uint)(r - (size_t)seq * seq_rows);
    const uint i = row0 + in_seq - in_seq / chunk * chunk;
    v.keep = mask + mask_off + (size_t)seq * cols;
    v.lim = causal && i < cols ? i + 1 : cols;
    v.has_mask = has_mask;
    return v;
}

/* Score j of the row as the softmax sees it; `hide` is a constant at each
 * call, so the unmasked rows compile to plain loads. */
static float
seen(__global const float *row, const uint j, const struct row_view *v,
     const int hide)
{
    if (!hide)
        return row[j];
    return j < v->lim && (!v->has_mask || v->keep[j]) ? row[j] : -INFINITY;
}

#define ROW_ARGS                                                             \
    __global float *s, const ulong off, const uint rows, const uint cols,    \
        __global const uchar *mask, const ulong mask_off,                    \
        const uint has_mask, const uint causal, const uint seq_rows,         \
        const uint chunk, const uint row0
#define ROW_VIEW(r)                                                          \
    row_view((r), cols, mask, mask_off, has_mask, causal, seq_rows, chunk,   \
             row0)

static void
softmax_row(__global float *row, const uint cols, const struct row_view *v,
            const int hide)
{
    float m = -INFINITY;
    for (uint j = 0; j < cols; j++)
        m = max_nan(m, seen(row, j, v, hide));
    if (m == -INFINITY) {
        for (uint j = 0; j < cols; j++)
            row[j] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (uint j = 0; j < cols; j++) {
        const float e = exp(seen(row, j, v, hide) - m);
        row[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (uint j = 0; j < cols; j++)
        row[j] *= inv;
}

/* A kernel of one row per work-item over a row function: the masked
 * rows through its hiding form, the others through its plain loads. */
#define ROW_PER_ITEM(name, row_fn)                                           \
    __kernel void name(ROW_ARGS)                                             \
    {                                                                        \
        const size_t r = get_global_id(0);                                   \
        if (r >= rows)                                                       \
            return;                                                          \
        const struct row_view v = ROW_VIEW(r);                               \
        __global float *row = s + off + r * (size_t)cols;                    \
        if (has_mask || v.lim < cols)                                        \
            row_fn(row, cols, &v, 1);                                        \
        else                                                                 \
            row_fn(row, cols, &v, 0);                                        \
    }

/* One row per work-item; rows of cols contiguous floats from off. */
ROW_PER_ITEM(clf_softmax_rows, softmax_row)

/* One row per work-item, eight independent lanes at a time: on CPU
 * runtimes, where the work-items of a group run as a loop, eight
 * accumulators along the row vectorise and pipeline far better than the
 * scalar walk.  (Written with scalars, not float8, so that oclgrind's
 * checkers can follow it.) */
static void
softmax_row_vec(__global float *row, const uint cols, const struct row_view *v,
                const int hide)
{
    const uint nv = cols / 8 * 8;
    float m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
    float m4 = -INFINITY, m5 = -INFINITY, m6 = -INFINITY, m7 = -INFINITY;
    for (uint j = 0; j < nv; j += 8) {
        m0 = max_nan(m0, seen(row, j, v, hide));
        m1 = max_nan(m1, seen(row, j + 1, v, hide));
        m2 = max_nan(m2, seen(row, j + 2, v, hide));
        m3 = max_nan(m3, seen(row, j + 3, v, hide));
        m4 = max_nan(m4, seen(row, j + 4, v, hide));
        m5 = max_nan(m5, seen(row, j + 5, v, hide));
        m6 = max_nan(m6, seen(row, j + 6, v, hide));
        m7 = max_nan(m7, seen(row, j + 7, v, hide));
    }
    for (uint j = nv; j < cols; j++)
        m0 = max_nan(m0, seen(row, j, v, hide));
    const float m = max_nan(max_nan(max_nan(m0, m1), max_nan(m2, m3)),
                            max_nan(max_nan(m4, m5), max_nan(m6, m7)));
    if (m == -INFINITY) {
        for (uint j = 0; j < cols; j++)
            row[j] = 0.0f;
        return;
    }
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    float s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
    for (uint j = 0; j < nv; j += 8) {
        const float e0 = exp(seen(row, j, v, hide) - m);
        const float e1 = exp(seen(row, j + 1, v, hide) - m);
        const float e2 = exp(seen(row, j + 2, v, hide) - m);
        const float e3 = exp(seen(row, j + 3, v, hide) - m);
        const float e4 = exp(seen(row, j + 4, v, hide) - m);
        const float e5 = exp(seen(row, j + 5, v, hide) - m);
        const float e6 = exp(seen(row, j + 6, v, hide) - m);
        const float e7 = exp(seen(row, j + 7, v, hide) - m);
        row[j] = e0;
        row[j + 1] = e1;
        row[j + 2] = e2;
        row[j + 3] = e3;
        row[j + 4] = e4;
        row[j + 5] = e5;
        row[j + 6] = e6;
        row[j + 7] = e7;
        s0 += e0;
        s1 += e1;
        s2 += e2;
        s3 += e3;
        s4 += e4;
        s5 += e5;
        s6 += e6;
        s7 += e7;
    }
    for (uint j = nv; j < cols; j++) {
        const float e = exp(seen(row, j, v, hide) - m);
        row[j] = e;
        s0 += e;
    }
    const float inv = 1.0f / (((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)));
    for (uint j = 0; j < cols; j++)
        row[j] *= inv;
}

ROW_PER_ITEM(clf_softmax_rows_vec, softmax_row_vec)

/* One work-group per row (GPUs): the group strides along the row, so that
 * neighbouring work-items read and write neighbouring scores, and reduces
 * the max and the sum in local memory.  The local size is a power of two,
 * at most CLF_SOFTMAX_WG.  In causal rows the keys past the query are
 * never read: the group writes their zeros. */
__kernel void
clf_softmax_rows_wg(ROW_ARGS)
{
    __local float red[CLF_SOFTMAX_WG];
    const size_t r = get_group_id(0);
    const uint lid = get_local_id(0);
    const uint lsz = get_local_size(0);
    __global float *row = s + off + r * (size_t)cols;
    float m = -INFINITY, sum = 0.0f;

    if (r >= rows)
        return; /* whole group: no barrier is skipped by part of it */
    const struct row_view v = ROW_VIEW(r);
    const uint lim = v.lim;
    for (uint j = lid; j < lim; j += lsz)
        m = max_nan(m, seen(row, j, &v, 1));
    red[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = lsz / 2; h > 0; h /= 2) {
        if (lid < h)
            red[lid] = max_nan(red[lid], red[lid + h]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (m == -INFINITY) {
        for (uint j = lid; j < cols; j += lsz)
            row[j] = 0.0f;
        return;
    }
    for (uint j = lid; j < lim; j += lsz) {
        const float e = exp(seen(row, j, &v, 1) - m);
        row[j] = e;
        sum += e;
    }
    red[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = lsz / 2; h > 0; h /= 2) {
        if (lid < h)
            red[lid] += red[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = 1.0f / red[0];
    for (uint j = lid; j < lim; j += lsz)
        row[j] *= inv;
    for (uint j = lim + lid; j < cols; j += lsz)
        row[j] = 0.0f;
}
