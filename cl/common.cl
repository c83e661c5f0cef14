/* Shared definitions for every clinformer kernel (OpenCL C 1.2).
 * Sizes that a build may tune arrive as -D options; these are defaults. */
/* Largest work-group of the group-per-row softmax (a power of two). */
#ifndef CLF_SOFTMAX_WG
#define CLF_SOFTMAX_WG 256
#endif

/* Index arithmetic in these kernels avoids '%': oclgrind's uninitialised-
 * value checker cannot follow the LLVM 'freeze' that a division/remainder
 * pair compiles to, and oclgrind runs in the test suite. */
