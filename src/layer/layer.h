/* The layer floor (src/layer): one attention layer: its weights and their
 * checks (weights.c), half-stored weights (half.c, cl/half.cl), the plan
 * of a forward (plan.c), the FLOP model (flops.c), the forward itself
 * (attention.c), the windowed compressions (compression.c) and the
 * look-ahead audit (lookahead.c).  It offers the
 * models and the sharded forward clf_attention and its plan. */
#ifndef CLF_LAYER_H
#define CLF_LAYER_H

#include "stages/stages.h"

/* What the floors above use of a layer: its plan, the steps of attention,
 * its workspaces by id, and its shape and weights through functions.  The
 * layer's struct and the rest of the floor's internals are in
 * layer_impl.h, which only the layer's files include.  The sharded
 * forward (shard.c) plans through the layer's planner and runs its stages
 * on the layer's workspaces. */

/* A layer's shape and settings, copied (clf__layer_shape): its context,
 * descriptor and mode, d_model, query and key/value heads, head width,
 * query and key/value widths, max_seq_len, k and the number of distinct
 * E (1, or the heads where E is per head). */
struct clf__layer_shape {
    clf_context *ctx;
    clf_attention_desc desc;
    clf_mode mode;
    size_t D, hq, hkv, dh, dq, dkv, N, k, nE;
};
void clf__layer_shape(const clf_attention *a, struct clf__layer_shape *out);

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
/* The way of steps 3 to 5 pinned for every forward of ctx by the tuner or
 * a test, or CLF_ATTEND_UNDECIDED (each plan's); pinning returns 0 or
 * CLF_ENO_MEMORY. */
int clf__ways_pinned(const clf_context *ctx);
int clf__ways_pin(clf_context *ctx, int variant);
/* The id of the kind of choice "attend" (candidates: the table's rows,
 * enum clf__attend_variant - 1). */
int clf__ways_kind(void);
#define CLF_KIND_ATTEND clf__ways_kind()
/* attention.c: out (B x k x hc d_h) = E[:, e_col : e_col + n] P for each
 * of B sequences of P (n rows of d_kv each), per head where E is per head,
 * in GEMM way `way`: the compression of projected keys or values (the
 * sharded forward's part of it from column e_col). */
int clf__compress_rows(clf_attention *a, int way, size_t B, size_t hc, cl_mem e,
                       size_t e_col, size_t n, cl_mem p, cl_mem out);
/* attention.c: causal Linformer's compression of `count` blocks from
 * block j0, for each of B sequences: the c slots of block j are E[j c + i,
 * j blk ..] times block j's rows of P (p_rows rows of d_kv per sequence,
 * block j0's first), written to out (B x out_rows x hc d_h, zeroed first,
 * block j0's slots first); per head where E is per head, in GEMM way
 * `way`.  The forward compresses the blocks before the last query's; a
 * shard its own. */
struct clf__blocks {
    size_t B, hc, c, j0, count, p_rows, out_rows;
};
int clf__compress_blocks(clf_attention *a, int way,
                         const struct clf__blocks *bl, cl_mem e, cl_mem p,
                         cl_mem out);
/* attention.c: grows workspace id to at least `need` floats (contents
 * not kept); with need 0 the buffer may stay NULL. */
int clf__attention_ensure(clf_attention *a, enum ws_id id, size_t need);
/* attention.c: workspace id's buffer (NULL until grown). */
cl_mem clf__layer_ws(const clf_attention *a, enum ws_id id);
/* weights.c: weight `which`'s buffer as stored (a half layer's W, E and F
 * in binary16), NULL where the layer has no such weight. */
cl_mem clf__layer_weight(const clf_attention *a, int which);

/* weights.c: 0 when every weight the mode uses has been set. */
int clf__attention_check_weights(const clf_attention *a, int linformer);

/* clf_attention_forward_cl_ex with the padding mask the options describe
 * already on the device (batch x n bytes), so a stack of layers uploads it
 * once; NULL uploads it from the options. */
int clf__attention_forward_cl_mask(clf_attention *att, cl_mem x,
                                   size_t x_offset, cl_mem y, size_t y_offset,
                                   size_t batch, size_t seq_len,
                                   const clf_forward_opts *opts,
                                   cl_mem dev_mask);

/* attention.c: bias_proj's slot bias (b_E or b_F, `which`) added to the
 * compressed keys or values out (B x k x hc*head_dim); nothing without
 * bias_proj. */
int clf__slot_bias(clf_attention *a, cl_mem out, size_t B, size_t hc,
                   int which);

/* lookahead.c: the audit over any forward of one sequence of D-wide rows
 * (a layer's, or a group's). */
typedef int (*clf__lookahead_fn)(void *user, const float *x, size_t seq_len,
                                 float *y, const clf_forward_opts *opts);
int clf__lookahead_run(clf__lookahead_fn forward, void *user, size_t D,
                       const float *x, size_t seq_len,
                       const clf_forward_opts *opts, const size_t *positions,
                       size_t npositions, unsigned long long seed,
                       clf_lookahead_result *result);

#endif /* CLF_LAYER_H */
