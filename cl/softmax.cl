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

/* The maximum of x[0..len), sixteen lanes at a time (a CPU runtime runs
 * the vector exp and max of its math library, not a scalar call a score).
 * fmax drops a NaN; the exps and their sum carry it (see the caller). */
static float
range_max(__global const float *x, const uint len)
{
    const uint nv = len / 16 * 16;
    float16 w = -INFINITY;
    for (uint j = 0; j < nv; j += 16)
        w = fmax(w, vload16(0, x + j));
    float m = hmax16(w);
    for (uint j = nv; j < len; j++)
        m = fmax(m, x[j]);
    return m;
}

/* x[j] = exp(x[j] - m) over x[0..len), and their sum. */
static float
range_exp(__global float *x, const uint len, const float m)
{
    const uint nv = len / 16 * 16;
    float16 t = 0.0f;
    for (uint j = 0; j < nv; j += 16) {
        const float16 e = exp(vload16(0, x + j) - m);
        vstore16(e, 0, x + j);
        t += e;
    }
    float sum = hsum16(t);
    for (uint j = nv; j < len; j++) {
        const float e = exp(x[j] - m);
        x[j] = e;
        sum += e;
    }
    return sum;
}

static void
range_scale(__global float *x, const uint len, const float f)
{
    const uint nv = len / 16 * 16;
    for (uint j = 0; j < nv; j += 16)
        vstore16(vload16(0, x + j) * f, 0, x + j);
    for (uint j = nv; j < len; j++)
        x[j] *= f;
}

/* Whether x[0..len) holds a NaN. */
static int
range_nan(__global const float *x, const uint len)
{
    for (uint j = 0; j < len; j++)
        if (isnan(x[j]))
            return 1;
    return 0;
}

/* One row per work-item, sixteen lanes at a time: on CPU runtimes, where
 * the work-items of a group run as a loop, a float16 exp runs the math
 * library's vector code, where a scalar walk calls the scalar exp once a
 * score (about 15x slower on AVX-512, bench/RESULTS.md section 20).  In a
 * causal row only the keys before lim are read; the others come out 0.
 * Padding keys are first written as -INFINITY.  fmax drops a NaN; the exps
 * and their sum carry it to every entry, and a row whose other entries
 * are all -INFINITY is looked through for one before it becomes zeros. */
static void
softmax_row_vec(__global float *row, const uint cols, const struct row_view *v,
                const int hide)
{
    const uint lim = hide ? v->lim : cols;
    if (hide && v->has_mask)
        for (uint j = 0; j < lim; j++)
            if (!v->keep[j])
                row[j] = -INFINITY;
    const float m = range_max(row, lim);
    if (m == -INFINITY) {
        const float z = range_nan(row, lim) ? NAN : 0.0f;
        for (uint j = 0; j < cols; j++)
            row[j] = z;
        return;
    }
    range_scale(row, lim, 1.0f / range_exp(row, lim, m));
    for (uint j = lim; j < cols; j++)
        row[j] = 0.0f;
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
    m = group_reduce(red, lid, lsz, m, 0);
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
    const float inv = 1.0f / group_reduce(red, lid, lsz, sum, 1);
    for (uint j = lid; j < lim; j += lsz)
        row[j] *= inv;
    for (uint j = lim + lid; j < cols; j += lsz)
        row[j] = 0.0f;
}
