/* Private to the layer floor's files (src/layer): the layer's struct and
 * workspaces, and the functions no floor above calls: the planner's
 * choices, the ways' timing, the descriptor checks, the windowed
 * compressions, the FLOP model's parts and half-stored weights.  The
 * floors above use layer.h, which gives them the layer's shape, its
 * workspaces and its weights through functions (clf__layer_shape,
 * clf__layer_ws, clf__layer_weight), not its fields; the tests reach this
 * header through src/internal.h. */
#ifndef CLF_LAYER_IMPL_H
#define CLF_LAYER_IMPL_H

#include "layer/layer.h"

/* Bytes of scores made at once before query rows are chunked. */
#define SCORE_LIMIT ((size_t)512 << 20)

struct workspace {
    cl_mem mem;
    size_t cap; /* floats */
};

/* plan.c: the workspaces' names, for messages. */
extern const char *const clf__ws_names[WS_COUNT];

struct clf_attention {
    clf_context *ctx;
    clf_attention_desc desc;
    size_t D, hq, hkv, dh, dq, dkv, N, k, nE;
    clf_mode mode;
    cl_mem w[CLF_WEIGHT_COUNT];
    size_t wsize[CLF_WEIGHT_COUNT]; /* floats; 0 = not part of this layer */
    int wset[CLF_WEIGHT_COUNT];
    cl_mem ones; /* bias_proj: head_dim ones, the columns a slot's bias
                    is added to */
    struct workspace ws[WS_COUNT];
    unsigned char *host_mask; /* lengths turned into a mask */
    size_t host_mask_cap;
    size_t score_limit; /* SCORE_LIMIT; tests lower it to force chunks */
    int attend;         /* tests: force a clf__attend_variant; 0: the
                           context's choice */
    int last_way;       /* the way of steps 3-5 the last forward ran */
    cl_event *marks;    /* stage boundaries of the last forward (profiling) */
    int *mark_stage;    /* the stage each mark starts */
    size_t nmarks, cap_marks;
};

int clf__plan_choose(const clf_attention *a, struct plan *p);

/* The way that runs: variant where it applies, else the GEMM path. */
int clf__way_taken(clf_context *ctx, const struct clf__steps *st, int variant);
/* The way (enum clf__attend_variant) for these steps: pinned, forced,
 * stored, or timed now among the ways that apply (the GEMM path in the
 * steps' ways) and stored; bucketed by mode, powers of two of n and L,
 * heads and d_h.  The caller takes clf__way_taken of it. */
int clf__ways_resolve(clf_context *ctx, const struct clf__steps *st,
                      int *variant);

/* The sequence length a way's timing runs for n queries (full mode: n
 * keys too) of `heads` heads: n, or a shorter one with n's remainder mod
 * 16, so that the GEMMs fit the same GEMM ways as the forward's. */
size_t clf__ways_timing_rows(size_t n, size_t heads, int full);

/* plan.c, for tests: the order a Linformer forward of this shape uses. */
int clf__attention_compress_first(const clf_attention *att, size_t batch,
                                  size_t seq_len);

void clf__attention_desc(const clf_attention *att, clf_attention_desc *out);
void clf__attention_set_score_limit(clf_attention *att, size_t bytes);
void clf__attention_set_attend(clf_attention *att, int variant);
int clf__attention_last_fused(const clf_attention *att);
/* The last forward used the streaming (flash) kernel. */
int clf__attention_last_flash(const clf_attention *att);
/* ... the GPU-shaped streaming kernel (flash_wg.c). */
int clf__attention_last_flash_wg(const clf_attention *att);

/* weights.c: what a causal Linformer forward needs of the desc (a causal
 * block; no compressed_bias; no bias_proj but the convolution's). */
int clf__causal_desc_check(const clf_attention_desc *d);

/* weights.c: the checks clf_attention_create makes of a desc (sizes,
 * sharing, head width, share_kv against bias_v, the causal block against
 * k, 32-bit dimensions); *dh receives d_h. */
int clf__desc_check(const clf_attention_desc *d, size_t *dh);

/* compression.c: the windowed compressions (mean, max, convolution).
 * clf__compression_check: the desc's compression against its other
 * options (clf__desc_check calls it).  clf__compression_window: the
 * window w = floor(N / k).  clf__compression_sizes: the floats of one E
 * (or F) and of its bias per distinct E (0: none).
 * clf__compress_windows: side `value` (0 keys, 1 values) compressed from
 * src (B x n x dkv, padding rows zero) into out (B x k x hc*d_h); in
 * causal Linformer only the complete blocks before the last query's. */
int clf__compression_check(const clf_attention_desc *d);
size_t clf__compression_window(const clf_attention *a);
void clf__compression_sizes(const clf_attention *a, size_t *e, size_t *b);
int clf__compress_windows(clf_attention *a, const struct plan *p, int value,
                          cl_mem src, cl_mem out);

/* flops.c: the multiply-adds of one side (K or V) of Linformer's
 * compression per sequence, compressing first (E X, then the projection
 * on k rows; *cf) and projecting first (X W^T on n rows, then E; *pf),
 * for nE distinct E, hc compressed heads of width dh, dkv = K/V width.
 * The forward compresses first when *cf <= *pf, and the FLOP count
 * follows the same order. */
void clf__kv_macs(double nE, double k, double n, double D, double dkv,
                  double hc, double dh, double *cf, double *pf);

/* Half-precision weight storage (half.c), for the attention layer's files:
 * weights.c stores a weight through clf__half_upload, attention.c asks
 * clf__half_weight for the float32 buffer a GEMM reads. */

/* CLF_EBAD_ENUM unless desc->precision is a clf_precision. */
int clf__half_check(const clf_attention_desc *desc);

/* 1 when the layer stores weight `which` as binary16 (the W matrices, E
 * and F of a CLF_PRECISION_HALF layer; never a bias). */
int clf__half_stored(const clf_attention *a, int which);

/* Bytes of device memory weight `which` takes (0 when unused). */
size_t clf__half_weight_bytes(const clf_attention *a, int which);

/* Bytes of the context's float32 widening scratch this layer's forward
 * needs: its largest W matrix plus E (0 for a float32 layer). */
size_t clf__half_scratch_bytes(const clf_attention *a);

/* Stores count floats of host data as binary16 in a->w[which] (created
 * when missing), through a float32 staging buffer and the narrowing
 * kernel; blocking.  CLF_EINVALID_ARGUMENT for a finite value beyond
 * binary16's range, naming the weight (name) and the element. */
int clf__half_upload(clf_attention *a, int which, const char *name,
                     const float *data, size_t count);

/* The buffer a GEMM reads for weight `which`: a->w[which] itself for a
 * float32 weight, and for a half-stored one too where native (the plan's
 * half_native; *half is then 1: the GEMM's way must say CLF_GEMM_HALF_A or
 * _B), else the context's float32 scratch buffer for it, the weight widened
 * into it first unless the buffer already holds it in this forward.  Call with
 * the context locked, between clf__half_begin and the forward's end. */
int clf__half_weight(clf_attention *a, int native, int which, cl_mem *out,
                     int *half);

/* The float32 copy of weight `which` whatever the plan (the kernels that
 * are not GEMMs, e.g. the row sums of E): a->w[which] for a float32
 * weight, else its scratch buffer, widened as above. */
int clf__half_as_float(clf_attention *a, int which, cl_mem *out);

/* A new forward: the slots' contents are no longer trusted (a weight may
 * have been set since). */
void clf__half_begin(clf_context *ctx);

/* The way for the half-weight GEMMs of a layer of width D and query width
 * dq: forced, stored, or timed now on a 512-row projection (the
 * projections' GEMM way `way` after widening) and stored; bucketed by
 * powers of two of D and dq.  *native: 1 to read the weights natively.  A
 * native way where it is not offered falls back to widening (the reason
 * stays in the choice line).  Plans call it (plan.c). */
int clf__half_gemm_resolve(clf_context *ctx, size_t D, size_t dq, int way,
                           int *native);

#endif /* CLF_LAYER_IMPL_H */
