/* Encoder stages around attention: layer norm, GELU, residual adds and
 * token/position embeddings. */

/* y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta over rows of cols
 * floats, biased variance (PyTorch's LayerNorm).  One row per work-item;
 * x and y may be the same buffer. */
__kernel void
clf_layernorm(__global const float *x, const ulong x_off, __global float *y,
              const ulong y_off, const uint rows, const uint cols,
              __global const float *gamma, __global const float *beta,
              const float eps)
{
    const size_t r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float *xr = x + x_off + r * (size_t)cols;
    __global float *yr = y + y_off + r * (size_t)cols;
    float mean = 0.0f, var = 0.0f;
    for (uint j = 0; j < cols; j++)
        mean += xr[j];
    mean /= (float)cols;
    for (uint j = 0; j < cols; j++) {
        const float d = xr[j] - mean;
        var += d * d;
    }
    var /= (float)cols;
    const float inv = 1.0f / sqrt(var + eps);
    for (uint j = 0; j < cols; j++)
        yr[j] = (xr[j] - mean) * inv * gamma[j] + beta[j];
}

/* y += x over count floats (residual connections). */
__kernel void
clf_add(__global float *y, const ulong y_off, __global const float *x,
        const ulong x_off, const ulong count)
{
    const size_t i = get_global_id(0);
    if (i >= count)
        return;
    y[y_off + i] += x[x_off + i];
}

/* out[r] = tokens[ids[r]] + positions[r mod n]: rows of dim floats for
 * batch*n token ids, already checked to be below the vocabulary size. */
__kernel void
clf_embed(__global const int *ids, const uint rows, const uint n,
          const uint dim, __global const float *tokens,
          __global const float *positions, __global float *out)
{
    const size_t gid = get_global_id(0);
    if (gid >= (size_t)rows * dim)
        return;
    const size_t r = gid / dim;
    const size_t c = gid - r * dim;
    const size_t pos = r - (r / n) * n;
    out[gid] = tokens[(size_t)ids[r] * dim + c] + positions[pos * dim + c];
}
