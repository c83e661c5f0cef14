/* Key padding masks.  mask is a batch x n array of bytes, nonzero = a real
 * position, zero = padding. */

/* dst[r*cols + c] = keep(r) ? src[r*cols + c] : 0 for rows*cols elements,
 * where row r of the batch-major block is position r % n of sequence r / n.
 * src and dst may be the same buffer (each element is read, then written, by
 * one work-item). */
__kernel void
clf_mask_rows(__global const float *src, const ulong src_off,
              __global float *dst, const ulong dst_off, const uint rows,
              const uint cols, __global const uchar *mask)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)rows * cols)
        return;
    const size_t r = gid / cols;
    const float v = src[src_off + gid];
    dst[dst_off + gid] = mask[r] ? v : 0.0f;
}

/* out[b*rows + r] = sum over j < n of e[r*ld + j] * keep(b, j): the row sums
 * of E diag(mask_b), one (sequence, row) per work-item. */
__kernel void
clf_masked_rowsum(__global const float *e, const uint rows, const uint n,
                  const uint ld, const uint batch, __global const uchar *mask,
                  __global float *out)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)batch * rows)
        return;
    const size_t b = gid / rows;
    const size_t r = gid - b * rows;
    __global const float *row = e + r * ld;
    __global const uchar *m = mask + b * n;
    float acc = 0.0f;
    for (uint j = 0; j < n; j++)
        acc += m[j] ? row[j] : 0.0f;
    out[gid] = acc;
}
