/* The layer floor (src/layer): one attention layer: its weights and their
 * checks (weights.c), half-stored weights (half.c, cl/half.cl), the plan
 * of a forward (plan.c), the FLOP model (flops.c), the forward itself
 * (attention.c), the windowed compressions (compression.c) and the
 * look-ahead audit (lookahead.c).  It offers the
 * models and the sharded forward clf_attention and its plan. */
#ifndef CLF_LAYER_H
#define CLF_LAYER_H

#include "stages/stages.h"

/* Private to the attention layer's files: weights.c (the layer and its
 * weights), plan.c (what a forward of a given shape does and needs, every
 * kernel choice resolved) and attention.c (the forward: stages enqueued in
 * order).  They call down into the stage files, never the other way.  The
 * sharded forward (shard.c, shard_model.c, group_model.c) reads the
 * layer's shapes and runs its stages on the layer's workspaces. */

/* Bytes of scores made at once before query rows are chunked. */
#define SCORE_LIMIT ((size_t)512 << 20)

struct workspace {
    cl_mem mem;
    size_t cap; /* floats */
};

enum ws_id {
    WS_X,    /* host-path input staging */
    WS_Y,    /* host-path output staging */
    WS_Q,    /* queries */
    WS_XE,   /* E X (compress-first) or X W_k^T (project-first) */
    WS_XF,   /* F X or X W_v^T */
    WS_KBAR, /* compressed (or full) keys */
    WS_VBAR, /* compressed (or full) values */
    WS_S,    /* scores / probabilities */
    WS_O,    /* per-head outputs */
    WS_RSE,  /* rowsum of E's first n columns */
    WS_RSF,  /* rowsum of F's first n columns */
    WS_XM,   /* input with padding rows zeroed */
    WS_MASK, /* batch x n mask bytes (capacity counted in floats) */
    WS_KT,   /* compressed keys transposed, for the fused kernel */
    WS_VF,   /* values, non-finite entries 0: a causal weighted sum's */
    WS_VNF,  /* per column of those, its first non-finite row (ints) */
    WS_COUNT
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

/* What one forward of a given shape does and needs. */
struct plan {
    size_t B, n, L, hc;
    size_t ld;    /* score row stride: L, or k + block in causal Linformer */
    size_t c;     /* causal Linformer: slots per block */
    size_t chunk; /* query rows per score pass (n: whole sequences) */
    size_t seqs;  /* sequences per score pass (B: the batch in one pass) */
    int masked;   /* a padding mask applies */
    cl_mem mask;  /* its batch x n bytes on the device */
    int causal;
    int slot_mask; /* Linformer with the layer's slot_mask */
    int linformer;
    int compress_first_k, compress_first_v;
    int v_is_k;   /* share_kv: Vbar = Kbar */
    int xf_is_xe; /* key-value sharing, compress-first: F X = E X */
    int fusable;  /* steps 3-5 may run in one fused kernel */
    int way;      /* ... and run in this enum clf__attend_variant
                     (resolved; ways.c) */
    int softmax;  /* enum clf__softmax_variant (resolved) */
    /* The way of each role's GEMMs (enum clf__gemm_role; resolved for
     * the roles this forward runs, else CLF_GEMM_UNDECIDED) and whether
     * the half-stored weights are read natively (halfgemm, resolved for
     * a half layer). */
    int gemm[CLF_ROLE_COUNT];
    int half_native;
    size_t need[WS_COUNT];
};

/* plan.c: the plan of a forward of batch x seq_len in `mode`, without its
 * kernel choices; then the choices, resolved (which may time kernels). */
int clf__plan_make(const clf_attention *a, clf_mode mode, size_t B, size_t n,
                   const clf_forward_opts *opts, struct plan *p);
int clf__plan_choose(const clf_attention *a, struct plan *p);
/* The choices of a forward that runs steps 3 to 5 on the GEMM path alone
 * (a shard's, whose plan holds its own rows: n, chunk and seqs), every
 * other one as clf__plan_choose makes them. */
int clf__plan_choose_path(const clf_attention *a, struct plan *p);

/* The ways of the GEMM path's steps: its two GEMMs' (gemm.h) and the
 * softmax variant. */
struct clf__path_ways {
    int score, weigh, softmax;
};

/* Steps 3 to 5 (scores, softmax, weighted sum) of one forward, of a
 * shard's, or of the choice's timing: the shape, the GEMM path's passes
 * and ways, the buffers, and where each stage starts.  ways.c fills it
 * from a layer and its plan (clf__steps_shape, the one filler; a shard
 * then sets its own query rows, row0, ways and mask). */
struct clf__steps {
    struct clf__flash_shape sh; /* at.n: query rows; at.L: slots or keys */
    size_t ld;                  /* score row stride */
    size_t seqs, chunk;         /* the GEMM path's passes (plan.c) */
    size_t row0;                /* the position of query row 0 (a shard's) */
    int fusable;                /* the fused kernel applies (plan.c) */
    int slot_mask;              /* Linformer's slot triangle, in the softmax */
    struct clf__path_ways ways; /* the GEMM path's score, weigh, softmax */
    cl_mem q, kbar, vbar, kt, s, o;
    cl_mem pk, pv; /* causal Linformer: the window's keys and values */
    cl_mem vf, nf; /* causal GEMM path: finite values, first non-finite */
    cl_mem mask;   /* padding bytes (full mode's keys, the causal window)
                      or NULL */
    int (*mark)(void *user, int stage); /* NULL: stages not marked */
    void *user;
};
void clf__steps_shape(const clf_attention *a, const struct plan *p,
                      struct clf__steps *st);

/* ways.c: a way of steps 3 to 5, one row of its table per enum
 * clf__attend_variant: whether it applies to the steps' shape, the
 * workspace it needs beyond the plan's (need[], floats), how it runs
 * them, and whether it stores scores (runs in the plan's passes).  A new
 * way is one row there and one kernel file. */
struct clf__way {
    const char *name;
    int (*applies)(clf_context *ctx, const struct clf__steps *st);
    void (*workspace)(const struct clf__steps *st, size_t need[WS_COUNT]);
    int (*run)(clf_context *ctx, const struct clf__steps *st);
    int passes;
};
/* The row of variant (the GEMM path's for CLF_ATTEND_UNDECIDED). */
const struct clf__way *clf__way(int variant);
/* The way that runs: variant where it applies, else the GEMM path. */
int clf__way_taken(clf_context *ctx, const struct clf__steps *st, int variant);
/* The way (enum clf__attend_variant) for these steps: pinned, forced,
 * stored, or timed now among the ways that apply (the GEMM path in the
 * steps' ways) and stored; bucketed by mode, powers of two of n and L,
 * heads and d_h.  The caller takes clf__way_taken of it. */
int clf__ways_resolve(clf_context *ctx, const struct clf__steps *st,
                      int *variant);
/* The way of steps 3 to 5 pinned for every forward of ctx by the tuner or
 * a test, or CLF_ATTEND_UNDECIDED (each plan's); pinning returns 0 or
 * CLF_ENO_MEMORY. */
int clf__ways_pinned(const clf_context *ctx);
int clf__ways_pin(clf_context *ctx, int variant);
/* The id of the kind of choice "attend" (candidates: the table's rows,
 * enum clf__attend_variant - 1). */
int clf__ways_kind(void);
#define CLF_KIND_ATTEND clf__ways_kind()
/* The sequence length a way's timing runs for n queries (full mode: n
 * keys too) of `heads` heads: n, or a shorter one with n's remainder mod
 * 16, so that the GEMMs fit the same GEMM ways as the forward's. */
size_t clf__ways_timing_rows(size_t n, size_t heads, int full);

/* attention.c: out (B x k x hc d_h) = E[:, e_col : e_col + n] P for each
 * of B sequences of P (n rows of d_kv each), per head where E is per head,
 * in GEMM way `way`: the compression of projected keys or values (the
 * sharded forward's part of it from column e_col). */
int clf__compress_rows(clf_attention *a, int way, size_t B, size_t hc, cl_mem e,
                       size_t e_col, size_t n, cl_mem p, cl_mem out);
/* attention.c: grows workspace id to at least `need` floats (contents
 * not kept); with need 0 the buffer may stay NULL. */
int clf__attention_ensure(clf_attention *a, enum ws_id id, size_t need);

/* weights.c: 0 when every weight the mode uses has been set. */
int clf__attention_check_weights(const clf_attention *a, int linformer);

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
/* clf_attention_forward_cl_ex with the padding mask the options describe
 * already on the device (batch x n bytes), so a stack of layers uploads it
 * once; NULL uploads it from the options. */
int clf__attention_forward_cl_mask(clf_attention *att, cl_mem x,
                                   size_t x_offset, cl_mem y, size_t y_offset,
                                   size_t batch, size_t seq_len,
                                   const clf_forward_opts *opts,
                                   cl_mem dev_mask);

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

/* attention.c: bias_proj's slot bias (b_E or b_F, `which`) added to the
 * compressed keys or values out (B x k x hc*head_dim); nothing without
 * bias_proj. */
int clf__slot_bias(clf_attention *a, cl_mem out, size_t B, size_t hc,
                   int which);

/* flops.c: the multiply-adds of one side (K or V) of Linformer's
 * compression per sequence, compressing first (E X, then the projection
 * on k rows; *cf) and projecting first (X W^T on n rows, then E; *pf),
 * for nE distinct E, hc compressed heads of width dh, dkv = K/V width.
 * The forward compresses first when *cf <= *pf, and the FLOP count
 * follows the same order. */
void clf__kv_macs(double nE, double k, double n, double D, double dkv,
                  double hc, double dh, double *cf, double *pf);

/* lookahead.c: the audit over any forward of one sequence of D-wide rows
 * (a layer's, or a group's). */
typedef int (*clf__lookahead_fn)(void *user, const float *x, size_t seq_len,
                                 float *y, const clf_forward_opts *opts);
int clf__lookahead_run(clf__lookahead_fn forward, void *user, size_t D,
                       const float *x, size_t seq_len,
                       const clf_forward_opts *opts, const size_t *positions,
                       size_t npositions, unsigned long long seed,
                       clf_lookahead_result *result);

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

#endif /* CLF_LAYER_H */
