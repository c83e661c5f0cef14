/* Host side of cl/softmax.cl. */
#include "internal.h"

int
clf__softmax_rows(clf_context *ctx, cl_mem s, size_t off, size_t rows,
                  size_t cols)
{
    cl_kernel k = ctx->kernels[CLF_K_SOFTMAX_ROWS];
    cl_ulong o = off;
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols;
    cl_int err;

    if ((err = clSetKernelArg(k, 0, sizeof s, &s)) != CL_SUCCESS ||
        (err = clSetKernelArg(k, 1, sizeof o, &o)) != CL_SUCCESS ||
        (err = clSetKernelArg(k, 2, sizeof r, &r)) != CL_SUCCESS ||
        (err = clSetKernelArg(k, 3, sizeof c, &c)) != CL_SUCCESS)
        return clf__fail(err, "softmax: clSetKernelArg failed (%d)", err);
    return clf__launch_1d(ctx, CLF_K_SOFTMAX_ROWS, rows);
}
