/* The kernel arguments the library's GEMM kernels share: the blocked
 * kernel (cl/gemm.cl) and the native half kernels (cl/half_gemm.cl) take
 * the same first sixteen, set here from one struct clf__gemm_args. */
#include "gemm/gemm.h"

int
clf__gemm_set_operands(cl_kernel k, const struct clf__gemm_args *g)
{
    const cl_uint m = (cl_uint)g->m, n = (cl_uint)g->n, kk = (cl_uint)g->k;
    const cl_uint lda = (cl_uint)g->lda, ldb = (cl_uint)g->ldb;
    const cl_uint ldc = (cl_uint)g->ldc;
    const cl_ulong ao = g->a_off, as = g->a_stride, bo = g->b_off;
    const cl_ulong bs = g->b_stride, co = g->c_off, cs = g->c_stride;

    CLF_SET_ARG(k, 0, m);
    CLF_SET_ARG(k, 1, n);
    CLF_SET_ARG(k, 2, kk);
    CLF_SET_ARG(k, 3, g->alpha);
    CLF_SET_ARG(k, 4, g->a);
    CLF_SET_ARG(k, 5, ao);
    CLF_SET_ARG(k, 6, lda);
    CLF_SET_ARG(k, 7, as);
    CLF_SET_ARG(k, 8, g->b);
    CLF_SET_ARG(k, 9, bo);
    CLF_SET_ARG(k, 10, ldb);
    CLF_SET_ARG(k, 11, bs);
    CLF_SET_ARG(k, 12, g->c);
    CLF_SET_ARG(k, 13, co);
    CLF_SET_ARG(k, 14, ldc);
    CLF_SET_ARG(k, 15, cs);
    return 0;
}
