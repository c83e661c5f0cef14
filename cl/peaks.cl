/* Device peaks for clf_context_peaks (src/runtime/peaks.c), measured the way clpeak
 * does: arithmetic throughput from many independent multiply-add chains per
 * work-item, memory bandwidth from a large copy.  No kernel here is part of
 * a forward. */

/* The multiply-add kernels: a grid of vector widths (float, float4,
 * float8, float16) and numbers of independent chains per work-item (8 to
 * 24), one kernel per point; the host keeps the fastest, as clpeak
 * reports the best of its vector widths.  Which point wins depends on the
 * device: a GPU runs scalar chains across its lanes, a CPU runtime fills
 * its vector units from a vector type (PoCL on AVX-512: 16 chains of
 * float8 run at almost twice the rate of 8), and a core with two FMA
 * pipes of latency four needs at least eight chains in flight.
 * x -> x m + c with 0 < m < 1 converges to c / (1 - m), so values stay
 * normal (no overflow to inf, no denormals) however long it runs.  Each
 * iteration makes 4 steps of every chain: 8 x chains x width FLOPs.  One
 * float per work-item is stored so that nothing is optimised away. */
#define CLF_C8(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7)
#define CLF_C16(op)                                                            \
    CLF_C8(op) op(8) op(9) op(10) op(11) op(12) op(13) op(14) op(15)
#define CLF_C24(op)                                                            \
    CLF_C16(op) op(16) op(17) op(18) op(19) op(20) op(21) op(22) op(23)
#define CLF_PEAK_DECL(i) CLF_PT x##i = (CLF_PT)(g + (float)(i));
#define CLF_PEAK_MAD(i) x##i = mad(x##i, m, c);
#define CLF_PEAK_SUM(i) s += x##i;
#define CLF_PEAK_KERNEL(name, chains)                                          \
    __kernel void name(__global float *out, const float m, const float c,      \
                       const uint iters)                                       \
    {                                                                          \
        const uint gid = (uint)get_global_id(0);                               \
        const float g = (float)(gid & 7u) * 0.125f;                            \
        CLF_PT s = (CLF_PT)(0.0f);                                             \
        uint i;                                                                \
        chains(CLF_PEAK_DECL) for (i = 0; i < iters; i++)                      \
        {                                                                      \
            chains(CLF_PEAK_MAD) chains(CLF_PEAK_MAD) chains(CLF_PEAK_MAD)     \
                chains(CLF_PEAK_MAD)                                           \
        }                                                                      \
        chains(CLF_PEAK_SUM) out[gid] = CLF_PEAK_REDUCE(s);                    \
    }

#define CLF_PT float
#define CLF_PEAK_REDUCE(s) (s)
CLF_PEAK_KERNEL(clf_peak_fma_w1c8, CLF_C8)
CLF_PEAK_KERNEL(clf_peak_fma_w1c16, CLF_C16)
#undef CLF_PT
#undef CLF_PEAK_REDUCE

#define CLF_PT float4
#define CLF_PEAK_REDUCE(s) ((s).x + (s).y + (s).z + (s).w)
CLF_PEAK_KERNEL(clf_peak_fma_w4c16, CLF_C16)
#undef CLF_PT
#undef CLF_PEAK_REDUCE

#define CLF_PT float8
#define CLF_PEAK_REDUCE(s) dot((s).lo + (s).hi, (float4)(1.0f))
CLF_PEAK_KERNEL(clf_peak_fma_w8c8, CLF_C8)
CLF_PEAK_KERNEL(clf_peak_fma_w8c16, CLF_C16)
CLF_PEAK_KERNEL(clf_peak_fma_w8c24, CLF_C24)
#undef CLF_PT
#undef CLF_PEAK_REDUCE

#define CLF_PT float16
#define CLF_PEAK_REDUCE(s) dot((s).lo.lo + (s).lo.hi + (s).hi.lo + (s).hi.hi, \
                               (float4)(1.0f))
CLF_PEAK_KERNEL(clf_peak_fma_w16c24, CLF_C24)
#undef CLF_PT
#undef CLF_PEAK_REDUCE

/* dst = src, one float4 per work-item: 32 bytes moved per item. */
__kernel void
clf_peak_copy(__global const float4 *src, __global float4 *dst, const uint n)
{
    const uint gid = (uint)get_global_id(0);

    if (gid < n)
        dst[gid] = src[gid];
}
