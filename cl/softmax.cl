/* Row softmax over the k slots (or n positions) of each score row:
 * max-subtracted, float accumulation.  A row whose entries are all -INFINITY
 * (every slot masked) becomes zeros, not NaN; a row holding a NaN becomes
 * NaN throughout (its maximum is NaN, see max_nan), as in PyTorch. */

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
        m = max_nan(m, row[j]);
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

/* One row per work-item, eight independent lanes at a time: on CPU
 * runtimes, where the work-items of a group run as a loop, eight
 * accumulators along the row vectorise and pipeline far better than the
 * scalar walk.  (Written with scalars, not float8, so that oclgrind's
 * checkers can follow it.) */
__kernel void
clf_softmax_rows_vec(__global float *s, const ulong off, const uint rows,
                     const uint cols)
{
    const size_t r = get_global_id(0);
    if (r >= rows)
        return;
    __global float *row = s + off + r * (size_t)cols;
    const uint nv = cols / 8 * 8;
    float m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
    float m4 = -INFINITY, m5 = -INFINITY, m6 = -INFINITY, m7 = -INFINITY;
    for (uint j = 0; j < nv; j += 8) {
        m0 = max_nan(m0, row[j]);
        m1 = max_nan(m1, row[j + 1]);
        m2 = max_nan(m2, row[j + 2]);
        m3 = max_nan(m3, row[j + 3]);
        m4 = max_nan(m4, row[j + 4]);
        m5 = max_nan(m5, row[j + 5]);
        m6 = max_nan(m6, row[j + 6]);
        m7 = max_nan(m7, row[j + 7]);
    }
    for (uint j = nv; j < cols; j++)
        m0 = max_nan(m0, row[j]);
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
        const float e0 = exp(row[j] - m), e1 = exp(row[j + 1] - m);
        const float e2 = exp(row[j + 2] - m), e3 = exp(row[j + 3] - m);
        const float e4 = exp(row[j + 4] - m), e5 = exp(row[j + 5] - m);
        const float e6 = exp(row[j + 6] - m), e7 = exp(row[j + 7] - m);
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
        const float e = exp(row[j] - m);
        row[j] = e;
        s0 += e;
    }
    const float inv = 1.0f / (((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)));
    for (uint j = 0; j < cols; j++)
        row[j] *= inv;
}

/* One work-group per row (GPUs): the group strides along the row and
 * reduces the max and the sum in local memory.  The local size is a power
 * of two, at most CLF_SOFTMAX_WG. */
__kernel void
clf_softmax_rows_wg(__global float *s, const ulong off, const uint rows,
                    const uint cols)
{
    __local float red[CLF_SOFTMAX_WG];
    const size_t r = get_group_id(0);
    const uint lid = get_local_id(0);
    const uint lsz = get_local_size(0);
    __global float *row = s + off + r * (size_t)cols;
    float m = -INFINITY, sum = 0.0f;

    if (r >= rows)
        return; /* whole group: no barrier is skipped by part of it */
    for (uint j = lid; j < cols; j += lsz)
        m = max_nan(m, row[j]);
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
    for (uint j = lid; j < cols; j += lsz) {
        const float v = exp(row[j] - m);
        row[j] = v;
        sum += v;
    }
    red[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = lsz / 2; h > 0; h /= 2) {
        if (lid < h)
            red[lid] += red[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = 1.0f / red[0];
    for (uint j = lid; j < cols; j += lsz)
        row[j] *= inv;
}
