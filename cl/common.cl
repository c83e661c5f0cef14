/* Shared definitions for every clinformer kernel (OpenCL C 1.2).
 * Sizes that a build may tune arrive as -D options; these are defaults. */
#ifndef CLF_SOFTMAX_VEC
#define CLF_SOFTMAX_VEC 1
#endif
