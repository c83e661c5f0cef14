/* Device peaks for clf_context_peaks (src/runtime/peaks.c), measured the way clpeak
 * does: arithmetic throughput from many independent multiply-add chains per
 * work-item, memory bandwidth from a large copy.  Neither kernel is part of
 * a forward. */

/* One step of eight independent float8 chains: 64 multiply-adds, 128 FLOPs.
 * Eight, so that a core with two FMA pipes of latency four has a chain
 * ready every cycle even when a work-item runs alone (PoCL on a CPU).
 * x -> x m + c with 0 < m < 1 converges to c / (1 - m), so values stay
 * normal (no overflow to inf, no denormals) however long it runs. */
#define CLF_PEAK_STEP                                                          \
    x0 = mad(x0, m, c);                                                        \
    x1 = mad(x1, m, c);                                                        \
    x2 = mad(x2, m, c);                                                        \
    x3 = mad(x3, m, c);                                                        \
    x4 = mad(x4, m, c);                                                        \
    x5 = mad(x5, m, c);                                                        \
    x6 = mad(x6, m, c);                                                        \
    x7 = mad(x7, m, c);
#define CLF_PEAK_STEP4 CLF_PEAK_STEP CLF_PEAK_STEP CLF_PEAK_STEP CLF_PEAK_STEP

/* iters blocks of 16 steps: 2048 x iters FLOPs per work-item.  One float
 * per work-item is stored so that nothing is optimised away. */
__kernel void
clf_peak_fma(__global float *out, const float m, const float c,
             const uint iters)
{
    const uint gid = (uint)get_global_id(0);
    float8 x0 = (float8)((float)(gid & 7u) * 0.125f);
    float8 x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f;
    float8 x4 = x0 + 4.0f, x5 = x0 + 5.0f, x6 = x0 + 6.0f, x7 = x0 + 7.0f;
    float8 s;
    uint i;

    for (i = 0; i < iters; i++) {
        CLF_PEAK_STEP4
        CLF_PEAK_STEP4
        CLF_PEAK_STEP4
        CLF_PEAK_STEP4
    }
    s = (x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7);
    out[gid] = s.s0 + s.s1 + s.s2 + s.s3 + s.s4 + s.s5 + s.s6 + s.s7;
}

/* The same with eight scalar chains: 256 x iters FLOPs per work-item.  A
 * CPU runtime that vectorises across work-items (PoCL) fills its vector
 * lanes from neighbouring work-items here; the host keeps the faster of
 * the two kernels, as clpeak reports the best of its vector widths. */
__kernel void
clf_peak_fma1(__global float *out, const float m, const float c,
              const uint iters)
{
    const uint gid = (uint)get_global_id(0);
    float x0 = (float)(gid & 7u) * 0.125f;
    float x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f;
    float x4 = x0 + 4.0f, x5 = x0 + 5.0f, x6 = x0 + 6.0f, x7 = x0 + 7.0f;
    uint i;

    for (i = 0; i < iters; i++) {
        CLF_PEAK_STEP4
        CLF_PEAK_STEP4
        CLF_PEAK_STEP4
        CLF_PEAK_STEP4
    }
    out[gid] = (x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7);
}

/* dst = src, one float4 per work-item: 32 bytes moved per item. */
__kernel void
clf_peak_copy(__global const float4 *src, __global float4 *dst, const uint n)
{
    const uint gid = (uint)get_global_id(0);

    if (gid < n)
        dst[gid] = src[gid];
}
