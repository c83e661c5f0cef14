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
