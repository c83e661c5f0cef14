/* Row softmax over the k slots (or n positions) of each score row:
 * max-subtracted, float accumulation.  A row whose entries are all -INFINITY
 * (every slot masked) becomes zeros, not NaN. */

/* One row per work-item; rows of cols contiguous floats from off. */
__kernel void
clf_softmax_rows(__global float *s, const ulong off, const uint rows,
                 const uint cols)
{
    const size_t r = get_global_id(0);
    if (r >= rows)
        return;
    __global float *row = s + off + r * (size_t)cols;
    float m = -INFINITY;
    for (uint j = 0; j < cols; j++)
        m = fmax(m, row[j]);
    if (m == -INFINITY) {
        for (uint j = 0; j < cols; j++)
            row[j] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (uint j = 0; j < cols; j++) {
        const float v = exp(row[j] - m);
        row[j] = v;
        sum += v;
    }
    const float inv = 1.0f / sum;
    for (uint j = 0; j < cols; j++)
        row[j] *= inv;
}
