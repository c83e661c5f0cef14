/* Shared definitions for every clinformer kernel (OpenCL C 1.2).
 * The sizes host and kernels share (CLF_ATTEND_ROWS, CLF_SOFTMAX_WG, ...)
 * arrive as -D options from src/runtime/kernel_params.h, never as defaults here:
 * a build without them stops at once rather than disagreeing with the
 * host. */
#if !defined(CLF_ATTEND_ROWS) || !defined(CLF_ATTEND_SLOT_BLOCK) ||           \
    !defined(CLF_GEMM_ROWS) || !defined(CLF_SOFTMAX_WG)
#error "build with the -D options of src/runtime/kernel_params.h"
#endif

/* Index arithmetic in these kernels avoids '%': oclgrind's uninitialised-
 * value checker cannot follow the LLVM 'freeze' that a division/remainder
 * pair compiles to, and oclgrind runs in the test suite. */

/* max(m, v) that keeps a NaN from either side, so that a row holding a NaN
 * score has a NaN maximum and NaN probabilities, as PyTorch's softmax
 * gives (fmax returns the other operand and would let a row of NaN pass
 * for a fully masked row of zeros). */
static float
max_nan(const float m, const float v)
{
    return (m > v || isnan(m)) ? m : v;
}

/* The max_nan (sum == 0) or the sum of every work-item's x over a
 * work-group of lsz items (a power of two), through red (lsz floats of
 * local memory), in a fixed tree order; every item gets the result.
 * Every item of the group must call it. */
static float
group_reduce(__local float *red, const uint lid, const uint lsz, const float x,
             const int sum)
{
    red[lid] = x;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = lsz / 2; h > 0; h /= 2) {
        if (lid < h)
            red[lid] = sum ? red[lid] + red[lid + h]
                           : max_nan(red[lid], red[lid + h]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* Horizontal max and sum, lane by lane through private memory: oclgrind's
 * uninitialised-value checker misreads vector fmax and crashes on .lo/.hi,
 * and this costs nothing next to a row's work. */
static float
hmax16(const float16 v)
{
    float lane[16];
    vstore16(v, 0, lane);
    float m = lane[0];
    for (int i = 1; i < 16; i++)
        m = fmax(m, lane[i]);
    return m;
}

static float
hsum16(const float16 v)
{
    float lane[16];
    vstore16(v, 0, lane);
    float t = 0.0f;
    for (int i = 0; i < 16; i++)
        t += lane[i];
    return t;
}

/* x[0..3] += y * (v0, v1, v2, v3): one row of a register block of 64
 * columns, for the blocked GEMM and the fused attention. */
#define FMA_ROW64(x, y, v0, v1, v2, v3)                                       \
    do {                                                                     \
        const float y_ = (y);                                                \
        (x)[0] = fma(y_, (v0), (x)[0]);                                      \
        (x)[1] = fma(y_, (v1), (x)[1]);                                      \
        (x)[2] = fma(y_, (v2), (x)[2]);                                      \
        (x)[3] = fma(y_, (v3), (x)[3]);                                      \
    } while (0)
