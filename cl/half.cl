/* Half-precision storage: weights kept as IEEE 754 binary16 and moved
 * to and from float32 with vload_half / vstore_half, which are core OpenCL
 * C 1.2 (a half pointer needs no cl_khr_fp16; only half arithmetic would).
 * All arithmetic stays in float32. */

/* dst[i] = src[i] widened to float32, for i < count; four elements a
 * work-item, the last work-item taking the tail one by one. */
__kernel void
clf_half_widen(__global const half *src, __global float *dst,
               const ulong count)
{
    const size_t i = get_global_id(0);
    const size_t j = 4 * i;
    if (j >= count)
        return;
    if (j + 4 <= count) {
        vstore4(vload_half4(i, src), i, dst);
        return;
    }
    for (size_t t = j; t < count; t++)
        dst[t] = vload_half(t, src);
}

/* dst[i] = src[i] rounded to binary16 (to nearest, ties to even), for
 * i < count; four elements a work-item as above. */
__kernel void
clf_half_narrow(__global const float *src, __global half *dst,
                const ulong count)
{
    const size_t i = get_global_id(0);
    const size_t j = 4 * i;
    if (j >= count)
        return;
    if (j + 4 <= count) {
        vstore_half4_rte(vload4(i, src), i, dst);
        return;
    }
    for (size_t t = j; t < count; t++)
        vstore_half_rte(src[t], t, dst);
}
