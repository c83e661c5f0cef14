/* Projection helpers: the rowsum(E) bias term of
 * compress-first (E (X W^T + 1 b^T) = (E X) W^T + rowsum(E) b^T). */

/* out[r] = sum over j < n of e[r*ld + j]: the row sums of the first n
 * columns of E, one row per work-item. */
__kernel void
clf_rowsum(__global const float *e, const uint rows, const uint n,
           const uint ld, __global float *out)
{
    const size_t r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float *row = e + r * ld;
    float acc = 0.0f;
    for (uint j = 0; j < n; j++)
        acc += row[j];
    out[r] = acc;
}

/* kbar is (batch, slots, heads*head_dim).  Adds rowsum[slot] * bias[col],
 * with rowsum per head (nE = heads) or shared, per sequence (a batch stride,
 * when a padding mask makes rowsum(E diag(mask)) differ) or shared (stride
 * 0), and the bias per head or one head wide (one_kv_head).  With
 * unit_rowsum the rowsum is taken as 1 (fairseq's compressed bias) and the
 * rowsum buffer is not read. */
__kernel void
clf_add_rowsum_bias(__global float *kbar, const uint batch, const uint slots,
                    const uint heads, const uint head_dim,
                    __global const float *rowsum, const uint rowsum_per_head,
                    __global const float *bias, const uint bias_per_head,
                    const uint rowsum_batch_stride, const uint unit_rowsum)
{
    const size_t gid = get_global_id(0);
    const size_t width = (size_t)heads * head_dim;
    if (gid >= (size_t)batch * slots * width)
        return;
    const size_t row = gid / width; /* (batch, slot) */
    const size_t col = gid - row * width;
    const size_t slot = row - (row / slots) * slots;
    const size_t head = col / head_dim;
    const size_t e = col - head * head_dim;
    const size_t seq = row / slots;
    const float rs = unit_rowsum ? 1.0f
                                 : rowsum[seq * rowsum_batch_stride +
                                          (rowsum_per_head ? head * slots
                                                           : 0) +
                                          slot];
    const float bv = bias[(bias_per_head ? head * head_dim : 0) + e];
    kbar[gid] += rs * bv;
}

/* Windowed compression: mean or max pooling, or the convolution compressor
 * (kernel = stride = window).  p holds batch sequences of n rows of ld
 * floats (projected keys or values, padding rows zero); out is (batch,
 * slots, heads*head_dim).  Slot r = g*group + i reads positions
 * g*stride + i*window .. + window-1, a position >= n read as a zero row;
 * slots r >= filled are zero (causal blocks not yet complete).  Head h
 * reads p's columns h*head_dim.. when in_per_head, else columns 0...
 * op 0: the window's sum over window; 1: its maximum (NaN wins); 2: the
 * convolution with w, head_dim x head_dim x window per head (PyTorch's
 * Conv1d (out, in, kW) order; per head when w_per_head) plus bias[c_out]
 * when has_bias. */
__kernel void
clf_compress_window(__global const float *p, const uint batch, const uint n,
                    const uint ld, const uint slots, const uint filled,
                    const uint group, const uint stride, const uint window,
                    const uint heads, const uint head_dim,
                    const uint in_per_head, const uint op,
                    __global const float *w, const uint w_per_head,
                    __global const float *bias, const uint has_bias,
                    __global float *out)
{
    const size_t gid = get_global_id(0);
    const size_t width = (size_t)heads * head_dim;
    if (gid >= (size_t)batch * slots * width)
        return;
    const size_t row = gid / width; /* (sequence, slot) */
    const size_t col = gid - row * width;
    const size_t seq = row / slots;
    const size_t slot = row - seq * slots;
    const size_t head = col / head_dim;
    const size_t c = col - head * head_dim;
    if (slot >= filled) {
        out[gid] = 0.0f;
        return;
    }
    const size_t start = (slot / group) * stride + (slot % group) * window;
    const size_t end = min(start + window, (size_t)n);
    __global const float *src =
        p + seq * (size_t)n * ld + (in_per_head ? head * head_dim : 0);
    float acc;
    if (op == 2) {
        const size_t hw = w_per_head ? head : 0;
        __global const float *wc =
            w + (hw * head_dim + c) * (size_t)head_dim * window;
        acc = has_bias ? bias[hw * head_dim + c] : 0.0f;
        for (uint ci = 0; ci < head_dim; ci++)
            for (size_t s = start; s < end; s++)
                acc += wc[ci * (size_t)window + (s - start)] * src[s * ld + ci];
    } else if (op == 1) {
        acc = end < start + window ? 0.0f : -INFINITY; /* zero rows past n */
        for (size_t s = start; s < end; s++) {
            const float v = src[s * ld + c];
            acc = (v > acc || isnan(v)) ? v : acc;
        }
    } else {
        acc = 0.0f;
        for (size_t s = start; s < end; s++)
            acc += src[s * ld + c];
        acc /= (float)window;
    }
    out[gid] = acc;
}
