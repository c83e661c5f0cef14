/* The kernel registry: every program file of cl/, in build order, each
 * followed by the kernels it defines.
 *
 *   FILE(stem)         the file cl/<stem>.cl, embedded as clf__cl_<stem>
 *   KERNEL(ID, name)   the kernel `name`, reached as ctx->kernels[CLF_K_ID]
 *
 * The kernel enum (runtime.h), the kernel names, the file names that
 * CLINFORMER_KERNEL_DIR must hold and the embedded-source table (program.c)
 * all expand this one list (and the files built apart, below).  Adding a
 * kernel file means: the .cl file, its
 * FILE and KERNEL lines here, its name in KERNEL_FILES in Makefile.am, and
 * the host code that calls it (and, for a program built apart, its row in
 * CLF_PROGRAM_PARTS below).  The files are concatenated in this order
 * into one program, so common.cl comes first. */
#ifndef CLINFORMER_KERNELS_H
#define CLINFORMER_KERNELS_H

#define CLF_KERNEL_REGISTRY(FILE, KERNEL)                                      \
    FILE(common)                                                               \
    FILE(projection)                                                           \
    KERNEL(ROWSUM, clf_rowsum)                                                 \
    KERNEL(ADD_ROWSUM_BIAS, clf_add_rowsum_bias)                               \
    KERNEL(COMPRESS_WINDOW, clf_compress_window)                               \
    FILE(softmax)                                                              \
    KERNEL(SOFTMAX_ROWS, clf_softmax_rows)                                     \
    KERNEL(SOFTMAX_VEC, clf_softmax_rows_vec)                                  \
    KERNEL(SOFTMAX_WG, clf_softmax_rows_wg)                                    \
    FILE(mask)                                                                 \
    KERNEL(MASK_ROWS, clf_mask_rows)                                           \
    KERNEL(MASKED_ROWSUM, clf_masked_rowsum)                                   \
    FILE(causal)                                                               \
    KERNEL(CAUSAL_SOFTMAX, clf_causal_softmax)                                 \
    KERNEL(CAUSAL_SOFTMAX_WG, clf_causal_softmax_wg)                           \
    KERNEL(CAUSAL_WINDOW_NONFINITE, clf_causal_window_nonfinite)               \
    FILE(encoder)                                                              \
    KERNEL(LAYERNORM, clf_layernorm)                                           \
    KERNEL(ADD, clf_add)                                                       \
    KERNEL(EMBED, clf_embed)                                                   \
    FILE(fused)                                                                \
    KERNEL(KV_TRANSPOSE, clf_kv_transpose)                                     \
    KERNEL(FUSED, clf_fused)                                                   \
    FILE(attend_gemm)                                                          \
    KERNEL(FILL_INT, clf_fill_int)                                             \
    KERNEL(FINITE_VALUES, clf_finite_values)                                   \
    KERNEL(WEIGH_NONFINITE, clf_weigh_nonfinite)                               \
    FILE(gemm)                                                                 \
    KERNEL(GEMM_NN, clf_gemm_nn)                                               \
    KERNEL(GEMM_NN_SLICES, clf_gemm_nn_slices)                                 \
    KERNEL(TRANSPOSE, clf_transpose)                                           \
    KERNEL(ADD_BIAS, clf_add_bias)                                             \
    KERNEL(ACT, clf_act)                                                       \
    FILE(peaks)                                                                \
    KERNEL(PEAK_FMA_W1C8, clf_peak_fma_w1c8)                                   \
    KERNEL(PEAK_FMA_W1C16, clf_peak_fma_w1c16)                                 \
    KERNEL(PEAK_FMA_W4C16, clf_peak_fma_w4c16)                                 \
    KERNEL(PEAK_FMA_W8C8, clf_peak_fma_w8c8)                                   \
    KERNEL(PEAK_FMA_W8C16, clf_peak_fma_w8c16)                                 \
    KERNEL(PEAK_FMA_W8C24, clf_peak_fma_w8c24)                                 \
    KERNEL(PEAK_FMA_W16C24, clf_peak_fma_w16c24)                               \
    KERNEL(PEAK_COPY, clf_peak_copy)                                           \
    FILE(gemm_tiled)                                                           \
    KERNEL(GEMM_TILED, clf_gemm_tiled)                                         \
    KERNEL(GEMM_TILED_REDUCE, clf_gemm_tiled_reduce)                           \
    FILE(half)                                                                 \
    KERNEL(HALF_WIDEN, clf_half_widen)                                         \
    KERNEL(HALF_NARROW, clf_half_narrow)                                       \
    FILE(flash)                                                                \
    KERNEL(FLASH, clf_flash)                                                   \
    KERNEL(FLASH_KEYS, clf_flash_keys)                                         \
    KERNEL(FLASH_VALUES, clf_flash_values)                                     \
    FILE(flash_wg)                                                             \
    KERNEL(FLASH_WG, clf_flash_wg)

/* The files built apart, each as a program of its own and only where the
 * device reports the OpenCL extension it needs (clf__program_build_part
 * refuses it elsewhere, naming the extension); the host file of the same
 * stem creates its kernels.
 *
 *   FILE_APART(stem, extension)
 *
 * They follow the files above in clf__kernel_files, so that one table
 * names every file of cl/. */
#define CLF_KERNEL_REGISTRY_APART(FILE_APART) FILE_APART(half_gemm, cl_khr_fp16)

/* The programs built apart from the main one, each with the files it is
 * made of, in build order: the tiled GEMM at tuned sizes (gemm_tiled.c),
 * the work-group streaming kernel for wide heads (flash_wg.c), and the
 * half GEMM (half_gemm.c).  clf__program_build_part builds one by its ID;
 * no module picks files by name.
 *
 *   PART(ID, FILES)   FILES: F(stem) for each file, F the caller's
 */
#define CLF_PROGRAM_PARTS(PART, F)                                             \
    PART(TILED_SET, F(common) F(gemm_tiled))                                   \
    PART(FLASH_WG_WIDE, F(common) F(flash_wg))                                 \
    PART(HALF_GEMM, F(half_gemm))

/* Expansion helpers: a FILE or KERNEL argument that expands to nothing. */
#define CLF_REGISTRY_SKIP_FILE(stem)
#define CLF_REGISTRY_SKIP_KERNEL(id, name)

#endif /* CLINFORMER_KERNELS_H */
