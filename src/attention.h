/* Private to the attention layer's files: weights.c (the layer and its
 * weights), plan.c (what a forward of a given shape does and needs, every
 * kernel choice resolved) and attention.c (the forward: stages enqueued in
 * order).  They call down into the stage files, never the other way.  The
 * sharded forward (shard.c, shard_model.c, group_model.c) reads the
 * layer's shapes and runs its stages on the layer's workspaces. */
#ifndef CLINFORMER_ATTENTION_H
#define CLINFORMER_ATTENTION_H

#include "internal.h"

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
    struct workspace ws[WS_COUNT];
    unsigned char *host_mask; /* lengths turned into a mask */
    size_t host_mask_cap;
    size_t score_limit; /* SCORE_LIMIT; tests lower it to force chunks */
    int attend;         /* tests: force a clf__attend_variant; 0: the
                           context's choice */
    int last_fused;     /* the last forward used the fused kernel */
    int last_flash;     /* ... the streaming kernel */
    int last_flash_wg;  /* ... the GPU-shaped streaming kernel */
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
    int linformer;
    int compress_first_k, compress_first_v;
    int v_is_k;   /* share_kv: Vbar = Kbar */
    int xf_is_xe; /* key-value sharing, compress-first: F X = E X */
    int fusable;  /* steps 3-5 may run in one fused kernel */
    int fused;    /* ... and will (resolved) */
    int flash;    /* steps 3-5 run in the streaming kernel (resolved) */
    int flash_wg; /* ... in the GPU-shaped streaming kernel (resolved) */
    int softmax;  /* enum clf__softmax_variant (resolved) */
    int gemm;     /* enum clf__gemm_variant (resolved) */
    size_t need[WS_COUNT];
};

/* plan.c: the plan of a forward of batch x seq_len in `mode`, without its
 * kernel choices; then the choices, resolved (which may time kernels). */
int clf__plan_make(const clf_attention *a, clf_mode mode, size_t B, size_t n,
                   const clf_forward_opts *opts, struct plan *p);
int clf__plan_choose(const clf_attention *a, struct plan *p);

/* plan.c: the streaming kernel's shape for a plan. */
void clf__plan_flash_shape(const clf_attention *a, const struct plan *p,
                           struct clf__flash_shape *sh);

/* attention.c: grows workspace id to at least `need` floats (contents
 * not kept); with need 0 the buffer may stay NULL. */
int clf__attention_ensure(clf_attention *a, enum ws_id id, size_t need);

/* weights.c: 0 when every weight the mode uses has been set. */
int clf__attention_check_weights(const clf_attention *a, int linformer);

#endif /* CLINFORMER_ATTENTION_H */
