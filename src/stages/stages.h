/* The stages floor (src/stages): the host side of each attention stage's
 * kernels, one file per cl/<stem>.cl of the same stem (projection,
 * softmax, mask, causal, encoder, attend, flash, flash_wg).  It offers the
 * layer enqueue functions over device buffers and calls the GEMMs and the
 * runtime below. */
#ifndef CLF_STAGES_H
#define CLF_STAGES_H

#include "gemm/gemm.h"

/* How Linformer attention over the compressed slots runs (steps 3 to 5):
 * undecided until the first forward that could use the fused kernel. */
enum clf__attend_variant {
    CLF_ATTEND_UNDECIDED = 0,
    CLF_ATTEND_GEMM,   /* batched GEMM, row softmax, batched GEMM */
    CLF_ATTEND_FUSED,  /* the fused attention kernel */
    CLF_ATTEND_FLASH,  /* the streaming attention kernel (flash.c), any mode */
    CLF_ATTEND_FLASHWG /* the GPU-shaped streaming kernel (flash_wg.c), every
                          mode, d_h <= CLF_FLASHWG_WIDE_DH */
};

enum clf__softmax_variant {
    CLF_SOFTMAX_SCALAR = 0, /* one row per work-item */
    CLF_SOFTMAX_VECTOR,     /* one row per work-item, float16 */
    CLF_SOFTMAX_GROUP,      /* one work-group per row */
    CLF_SOFTMAX_VARIANTS
};

/* projection.c: host side of the projection kernels */
int clf__rowsum(clf_context *ctx, cl_mem e, size_t rows, size_t n, size_t ld,
                cl_mem out);
/* rowsum NULL: add the bias once per slot (rowsum taken as 1). */
int clf__add_rowsum_bias(clf_context *ctx, cl_mem kbar, size_t batch,
                         size_t slots, size_t heads, size_t head_dim,
                         cl_mem rowsum, size_t rowsum_batch_stride,
                         int rowsum_per_head, cl_mem bias, int bias_per_head);

/* Windowed compression (cl/projection.cl clf_compress_window): p holds
 * batch sequences of n rows of ld floats; out (batch x slots x
 * heads*head_dim) gets, for slot r = g*group + i, the window of positions
 * g*stride + i*window.. (a position >= n a zero row), slots >= filled zero.
 * op: enum clf__window_op; w and bias the convolution's (w_per_head: one
 * head_dim x head_dim*window block and head_dim biases a head), bias NULL
 * for none; in_per_head: head h reads columns h*head_dim of p. */
enum clf__window_op { CLF_WINDOW_MEAN = 0, CLF_WINDOW_MAX, CLF_WINDOW_CONV };
struct clf__window_args {
    cl_mem p, w, bias, out;
    size_t batch, n, ld, slots, filled, group, stride, window, heads, head_dim;
    int in_per_head, w_per_head;
    enum clf__window_op op;
};
int clf__compress_window(clf_context *ctx, const struct clf__window_args *a);

/* mask.c: host side of the mask kernels; mask is a batch x n byte buffer. */
/* The host mask (batch x n bytes, 1 = a real position) from lengths (each
 * 1..n; CLF_EBAD_SIZE naming the entry otherwise) or, when lengths is
 * NULL, from key_mask (nonzero = real). */
int clf__mask_build(unsigned char *mask, size_t batch, size_t n,
                    const unsigned *lengths, const unsigned char *key_mask);
int clf__mask_rows(clf_context *ctx, cl_mem src, size_t src_off, cl_mem dst,
                   size_t dst_off, size_t rows, size_t cols, cl_mem mask);
int clf__masked_rowsum(clf_context *ctx, cl_mem e, size_t rows, size_t n,
                       size_t ld, size_t batch, cl_mem mask, cl_mem out);

/* encoder.c: host side of the encoder kernels. */
int clf__layernorm(clf_context *ctx, cl_mem x, size_t x_off, cl_mem y,
                   size_t y_off, size_t rows, size_t cols, cl_mem gamma,
                   cl_mem beta, float eps);
int clf__residual_add(clf_context *ctx, cl_mem y, size_t y_off, cl_mem x,
                      size_t x_off, size_t count);
int clf__embed(clf_context *ctx, cl_mem ids, size_t rows, size_t n, size_t dim,
               cl_mem tokens, cl_mem positions, cl_mem out);

/* causal.c: host side of the causal kernels. */
struct clf__causal_shape {
    size_t batch, heads, n, dh, dq, dkv, k, c, block;
    size_t block0; /* a shard's first block (its t counts from there) */
    int kv_per_head;
    float scale;
    int score_way, weigh_way; /* the GEMM ways (gemm.h) of the window's
                                 scores and weighted sum: the plan's for
                                 the roles score and weigh */
};
/* The window's scores into the columns k.. of s (rows of ld = k + block)
 * through the GEMMs; the entries a query must not see are left as the
 * GEMMs wrote them, for clf__causal_softmax. */
int clf__causal_scores(clf_context *ctx, const struct clf__causal_shape *sh,
                       cl_mem s, cl_mem q, cl_mem kp);
/* The softmax of every score row over only the slots and window positions
 * its query sees (mask: padding bytes, or NULL), the rest of the row 0;
 * variant CLF_SOFTMAX_GROUP: a work-group a row, else a row a work-item. */
int clf__causal_softmax(clf_context *ctx, const struct clf__causal_shape *sh,
                        int variant, cl_mem s, cl_mem mask);
/* o += P_window V through the GEMMs over the values with their
 * non-finite entries 0 (a finite copy in the context's buffers), then
 * the terms of the non-finite values each query sees. */
int clf__causal_apply(clf_context *ctx, const struct clf__causal_shape *sh,
                      cl_mem o, cl_mem s, cl_mem vp);

/* fused.c: host side of the fused attention kernel: Linformer attention
 * over L slots in one kernel for `batch` sequences of n queries: kbar and
 * vbar hold L rows of (kv_per_head ? heads : 1) * dh floats per sequence,
 * q and o rows of dq floats.  kt needs batch * (kv_per_head ? heads : 1) * dh *
 * clf__attend_slots(L) floats, s batch * heads * clf__fused_rows(n) *
 * clf__attend_slots(L).  dh must be a multiple of 16. */
struct clf__attend_shape {
    size_t batch, heads, n, dh, dq, L;
    int kv_per_head;
    float scale;
};
size_t clf__attend_slots(size_t L);
size_t clf__fused_rows(size_t n);
int clf__fused(clf_context *ctx, const struct clf__attend_shape *sh, cl_mem q,
               cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem s, cl_mem o);
/* attend_gemm.c: the GEMM path of the same steps, for `seqs` sequences from b,
 * query rows r0 to r0 + rows of each (seqs > 1: all rows): S = Q_h Kbar_h^T *
 * scale into s at s_off (sequence j, head h at s_off + (j * heads + h) *
 * rows * ld, rows of stride ld), and O_h = P_h Vbar_h; the GEMMs in the
 * way `way` (gemm.h), the plan's for the role (scores, weighted sum). */
int clf__attend_scores(clf_context *ctx, int way,
                       const struct clf__attend_shape *sh, size_t b,
                       size_t seqs, size_t r0, size_t rows, cl_mem q,
                       cl_mem kbar, cl_mem s, size_t s_off, size_t ld);
/* A causal weighted sum's rows see only the keys (or slots) up to their
 * limit; the others' p is 0, but 0 x NaN and 0 x inf are NaN, so the GEMM
 * reads vf (vbar with its non-finite values 0, from clf__attend_finite)
 * and a kernel adds each row's terms of the non-finite values it sees.
 * Row r of a pass is the query at position row0 + r0 + r, which sees
 * that position + 1 keys (block 0: causal full mode) or position / block
 * * c slots (causal Linformer).  first: batch * (kv_per_head ? heads :
 * 1) * dh ints. */
struct clf__weigh_causal {
    cl_mem vf, first;
    size_t row0, c, block;
};
int clf__attend_finite(clf_context *ctx, const struct clf__attend_shape *sh,
                       cl_mem vbar, cl_mem vf, cl_mem first);
/* Work-items a sequence's `rows` rows take in the kernels adding the
 * non-finite values' terms (CLF_NONFINITE_ROWS rows each). */
size_t clf__nonfinite_chunks(size_t rows);
/* cz: NULL where every row sees every key or slot (no causal limit). */
int clf__attend_weigh(clf_context *ctx, int way,
                      const struct clf__attend_shape *sh, size_t b, size_t seqs,
                      size_t r0, size_t rows, cl_mem s, size_t s_off, size_t ld,
                      cl_mem vbar, cl_mem o,
                      const struct clf__weigh_causal *cz);

/* flash.c: streaming (online-softmax) attention in one kernel, every
 * mode.  at: as for clf__attend, L the slots (Linformer) or n (full mode);
 * causal: full mode masks keys after the query; block > 0: prefix-safe
 * causal Linformer, c slots per block, the exact window read from pk and
 * pv (n rows of dkv floats per sequence, head column h * dh when
 * window_per_head).  mask: batch x n bytes or NULL (full mode: padding
 * keys; causal Linformer: padding in the window).  kt needs
 * clf__flash_kt_floats(sh) floats (the keys and the values repacked tile
 * by tile); no score buffer. */
struct clf__flash_shape {
    struct clf__attend_shape at;
    int full; /* full mode: L = n keys */
    int causal;
    size_t c, block, dkv;
    int window_per_head;
};
size_t clf__flash_kt_floats(const struct clf__flash_shape *sh);
/* Blocks of CLF_FLASH_ROWS query rows each work-item of the streaming
 * kernel takes for this shape: CLF_FLASH_BLOCKS from CLF_FLASH_LONG_KEYS
 * keys (or slots) on, half as many below (the count a test set with
 * clf__flash_set_blocks, 1 to CLF_FLASH_BLOCKS, instead; 0 unsets it);
 * where the device ends loops early (clf__loop_limit), fewer, so that a
 * work-item's loops stay within its limit, and 0 where not even one block
 * does: the kernel then does not apply (clf__flash fails with
 * CLF_EUNSUPPORTED; the layer's choice takes the GEMM path). */
#define CLF_FLASH_LONG_KEYS 8192
size_t clf__flash_blocks(const clf_context *ctx,
                         const struct clf__flash_shape *sh);
int clf__flash_set_blocks(clf_context *ctx, int blocks);
int clf__flash(clf_context *ctx, const struct clf__flash_shape *sh, cl_mem q,
               cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem o, cl_mem mask,
               cl_mem pk, cl_mem pv);
/* flash_wg.c: the same steps in the GPU-shaped streaming kernel, work-groups
 * of clf__flash_wg_rows rows of one head and sequence, reading kbar and
 * vbar (batch x L rows of hc dh floats) directly: no workspace.  Arguments
 * as clf__flash.  It applies (1, else 0) where d_h <= CLF_FLASHWG_WIDE_DH
 * and the device and compiled kernel take its work-groups and local memory
 * (heads wider than CLF_FLASHWG_DH need a build of their own, made here
 * on first need; takes the lock); clf__flash_wg fails with
 * CLF_EINVALID_ARGUMENT where it does not apply. */
int clf__flash_wg_applies(clf_context *ctx, const struct clf__flash_shape *sh);
/* The query rows of one work-group for the shape's heads, and the
 * work-groups one launch has: ceil(n / rows) x heads x batch. */
size_t clf__flash_wg_rows(const struct clf__flash_shape *sh);
size_t clf__flash_wg_groups(const struct clf__flash_shape *sh);
int clf__flash_wg(clf_context *ctx, const struct clf__flash_shape *sh, cl_mem q,
                  cl_mem kbar, cl_mem vbar, cl_mem o, cl_mem mask, cl_mem pk,
                  cl_mem pv);
/* The arguments both streaming kernels end with, from index first on: the
 * causal switch, the mask (and whether there is one), the causal window
 * (c, block, the packed K and V rows, their width, one window per head);
 * `any` stands in for a buffer not used.  Returns 0 or a status. */
int clf__flash_set_mode_args(cl_kernel f, cl_uint first,
                             const struct clf__flash_shape *sh, cl_mem mask,
                             cl_mem pk, cl_mem pv, cl_mem any);

/* softmax.c: host side of the softmax kernels; rows of `cols` contiguous floats
 * starting at element `off`. */
int clf__softmax_rows(clf_context *ctx, cl_mem s, size_t off, size_t rows,
                      size_t cols);
int clf__softmax_rows_variant(clf_context *ctx, int variant, cl_mem s,
                              size_t off, size_t rows, size_t cols);
/* The variant clf__softmax_rows runs (a softmax outside a plan): scalar
 * until a test pins another (0, or CLF_ENO_MEMORY). */
int clf__softmax_pinned(const clf_context *ctx);
int clf__softmax_pin(clf_context *ctx, int variant);
/* The id of the kind of choice "softmax" (candidates: enum
 * clf__softmax_variant). */
int clf__softmax_kind(void);
#define CLF_KIND_SOFTMAX clf__softmax_kind()
/* Full mode's masks folded into the softmax: the scores of `rows` rows of n
 * = cols keys from element 0, heads * chunk rows a sequence, the queries
 * row0 .. row0 + chunk - 1 of each.  Keys that mask (batch x n bytes, NULL:
 * none; sequence 0's at mask_off) marks as padding, and with causal the
 * keys after the query, get probability 0 whatever the scores hold. */
struct clf__score_mask {
    cl_mem mask;
    size_t mask_off, heads, chunk, row0;
    int causal;
};
int clf__softmax_masked(clf_context *ctx, int variant, cl_mem s, size_t rows,
                        size_t cols, const struct clf__score_mask *m);
/* The variant for rows x cols scores: forced, stored, or timed now on that
 * shape and stored (choose.c); bucketed by powers of two of rows and cols. */
int clf__softmax_resolve(clf_context *ctx, size_t rows, size_t cols,
                         int *variant);
/* Enqueues kernel `id`, its arguments set, with a work-group a row: a
 * power of two as wide as a row of `cols` needs, at most CLF_SOFTMAX_WG
 * and the kernel's limit (the group softmaxes, plain and causal); `what`
 * names it in the error.  ctx locked. */
int clf__softmax_launch_group(clf_context *ctx, enum clf__kernel_id id,
                              size_t rows, size_t cols, const char *what);

#endif /* CLF_STAGES_H */
