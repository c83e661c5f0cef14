/* Constants that the host code and the kernels must agree on.  The host
 * includes this header; every entry also reaches the kernels as a -D build
 * option (program.c), so the two sides cannot differ, and the options are
 * part of the program binary cache key.  The kernels have no defaults of
 * their own: the shared kernel definitions refuse to compile without these
 * options.
 *
 *   X(NAME, value)   value a decimal integer literal */
#ifndef CLINFORMER_KERNEL_PARAMS_H
#define CLINFORMER_KERNEL_PARAMS_H

#define CLF_KERNEL_PARAMS(X)                                                   \
    /* Query rows per work-item of the fused attention kernel. */              \
    X(CLF_ATTEND_ROWS, 6)                                                      \
    /* Slots of the fused attention's transposed keys are padded to a          \
     * multiple of this; its score loop takes this many at a time. */          \
    X(CLF_ATTEND_SLOT_BLOCK, 64)                                               \
    /* Rows of C per work-item of the register-blocked GEMM. */                \
    X(CLF_GEMM_ROWS, 6)                                                        \
    /* Largest work-group of the group-per-row softmax (a power of two): the   \
     * size of its local reduction array. */                                   \
    X(CLF_SOFTMAX_WG, 256)                                                     \
    /* The tiled GEMM's default sizes (cl/gemm_tiled.cl): a tile of C of       \
     * MWG x NWG per work-group of NDIM x MDIM work-items, KWG steps of the    \
     * inner dimension per local-memory slice, columns in vectors of VW.       \
     * clinformer tune searches other sets (src/gemm/gemm_tiled.c). */         \
    X(CLF_TILED_MWG, 64)                                                       \
    X(CLF_TILED_NWG, 64)                                                       \
    X(CLF_TILED_KWG, 16)                                                       \
    X(CLF_TILED_MDIM, 8)                                                       \
    X(CLF_TILED_NDIM, 8)                                                       \
    X(CLF_TILED_VW, 4)                                                         \
    /* Query rows per work-item of the kernels that add the terms of the       \
     * non-finite values a causal row sees (clf_weigh_nonfinite,               \
     * clf_causal_window_nonfinite): one test of the column's first            \
     * non-finite row serves them all where it has none. */                    \
    X(CLF_NONFINITE_ROWS, 32)                                                  \
    /* Query rows per work-item of the streaming (flash) attention kernel. */  \
    X(CLF_FLASH_ROWS, 6)                                                       \
    /* At most this many blocks of CLF_FLASH_ROWS rows per work-item of that   \
     * kernel (the host picks how many, src/stages/flash.c): each tile of keys \
     * and values serves all of them while it is in cache. */                  \
    X(CLF_FLASH_BLOCKS, 12)                                                    \
    /* The GPU-shaped streaming kernel (cl/flash_wg.cl): query rows per        \
     * work-group, work-items per row (each owns DH / SPLIT columns of the     \
     * query and the output), the widest head it takes (a multiple of 4        \
     * SPLIT) and keys per tile staged in local memory.  A group of 256        \
     * holds 4 (2 KEYS DH + SPLIT KEYS ROWS) = 12 KiB of local memory and      \
     * each item at most 128 registers on gfx90a, so that a compute unit       \
     * keeps five groups (20 waves) resident (scripts/gpu-shape.sh). */        \
    X(CLF_FLASHWG_ROWS, 64)                                                    \
    X(CLF_FLASHWG_SPLIT, 4)                                                    \
    X(CLF_FLASHWG_DH, 64)                                                      \
    X(CLF_FLASHWG_KEYS, 8)                                                     \
    /* Its build for heads wider than CLF_FLASHWG_DH, up to WIDE_DH: the       \
     * same 16 columns an item and groups of 256, so half as many rows a       \
     * group, and tiles of 4 keys: with 8, gfx90a needs 144 registers (3       \
     * waves) and gfx1100 spills; with 4, 103 and 111, no scratch, 8 KiB of    \
     * local memory (src/stages/flash_wg.c builds it on first need). */        \
    X(CLF_FLASHWG_WIDE_ROWS, 32)                                               \
    X(CLF_FLASHWG_WIDE_SPLIT, 8)                                               \
    X(CLF_FLASHWG_WIDE_DH, 128)                                                \
    X(CLF_FLASHWG_WIDE_KEYS, 4)

#define CLF_KERNEL_PARAM_ENUM(name, value) name = value,
enum clf__kernel_param { CLF_KERNEL_PARAMS(CLF_KERNEL_PARAM_ENUM) };
#undef CLF_KERNEL_PARAM_ENUM

/* The kernel build options the list yields: " -DNAME=value" each. */
#define CLF_KERNEL_PARAM_OPTION(name, value) " -D" #name "=" #value
#define CLF_KERNEL_PARAM_OPTIONS CLF_KERNEL_PARAMS(CLF_KERNEL_PARAM_OPTION)

#endif /* CLINFORMER_KERNEL_PARAMS_H */
