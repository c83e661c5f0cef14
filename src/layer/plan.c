/* Planning a forward of the Linformer attention layer: from the layer and
 * the shape, what runs (compress-first or project-first order, chunked
 * scores, the fused kernel or the GEMM path), the workspaces it needs, its
 * floating-point operations, and every kernel choice resolved before
 * anything is enqueued.
 *
 * Sequence compression is exact in either order:
 *   E (X W^T + 1 b^T) = (E X) W^T + rowsum(E) b^T.
 * The order with fewer multiply-adds is chosen from the shapes
 * ("compress-first" wins whenever one E serves all heads and k < n). */
#include "layer/layer_impl.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

const char *const clf__ws_names[WS_COUNT] = {"input staging",
                                             "output staging",
                                             "queries",
                                             "E-side workspace",
                                             "F-side workspace",
                                             "keys",
                                             "values",
                                             "scores",
                                             "head outputs",
                                             "rowsum(E)",
                                             "rowsum(F)",
                                             "masked input",
                                             "mask",
                                             "transposed keys",
                                             "finite values",
                                             "non-finite rows"};

/* The shape and mode against the layer. */
static int
plan_check_shape(const clf_attention *a, clf_mode mode, size_t B, size_t n)
{
    if (B == 0)
        return clf__fail(CLF_EBAD_SIZE, "batch is 0");
    if (n == 0)
        return clf__fail(CLF_EBAD_SIZE, "seq_len is 0");
    if (n > a->N)
        return clf__fail(CLF_ESEQ_TOO_LONG,
                         "seq_len %zu exceeds max_seq_len %zu", n, a->N);
    if (mode != CLF_MODE_LINFORMER && mode != CLF_MODE_FULL)
        return clf__fail(CLF_EBAD_ENUM, "mode %d is not a clf_mode", (int)mode);
    return 0;
}

/* The arguments, and what follows from them alone. */
static int
plan_check(const clf_attention *a, clf_mode mode, size_t B, size_t n,
           const clf_forward_opts *opts, struct plan *p)
{
    CLF_TRY(plan_check_shape(a, mode, B, n));
    memset(p, 0, sizeof *p);
    p->B = B;
    p->n = n;
    p->linformer = mode == CLF_MODE_LINFORMER;
    if (opts != NULL) {
        p->causal = opts->causal != 0;
        p->masked = opts->lengths || opts->key_mask;
        if (opts->lengths && opts->key_mask)
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "give lengths or key_mask, not both");
    }
    /* The trained slot mask: the ordinary causal mask in full mode. */
    if (a->desc.slot_mask && !p->linformer)
        p->causal = 1;
    p->slot_mask = a->desc.slot_mask && p->linformer;
    p->L = p->linformer ? a->k : n;
    p->ld = p->L;
    p->hc = (p->linformer && a->nE > 1) ? a->hq : a->hkv;
    p->v_is_k = a->desc.share_kv != 0;
    if (p->causal && p->linformer) {
        CLF_TRY(clf__causal_desc_check(&a->desc));
        p->ld = a->k + a->desc.causal_block;
        p->c =
            a->k / ((a->N + a->desc.causal_block - 1) / a->desc.causal_block);
    }
    return 0;
}

/* B x n rows, checked against size_t and the kernels' 32-bit indices. */
static int
plan_rows(const clf_attention *a, const struct plan *p, size_t *bn)
{
    size_t t;

    if (clf__mul(p->B, p->n, bn) || clf__mul3(*bn, a->D, sizeof(float), &t) ||
        clf__mul3(*bn, a->hq, p->ld, &t) || clf__mul(t, sizeof(float), &t) ||
        clf__mul3(*bn, a->dq, sizeof(float), &t) ||
        clf__mul3(*bn, a->dkv, sizeof(float), &t))
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "batch %zu x seq_len %zu overflows size_t", p->B,
                         p->n);
    if (*bn > UINT_MAX || *bn * a->hq > UINT_MAX)
        return clf__fail(CLF_ETOO_LARGE,
                         "batch %zu x seq_len %zu x heads exceeds 2^32-1 rows",
                         p->B, p->n);
    return 0;
}

/* Scores are made in passes when the whole batch's would pass
 * SCORE_LIMIT bytes (full mode at large n, or a large batch): as many
 * whole sequences as fit, else chunks of query rows of one sequence.
 * Memory then stays bounded while every row is still computed exactly.
 * The score workspace is sized from the very pass (seqs x chunk) that the
 * enqueue loop makes.  Causal Linformer runs in one pass. */
static void
plan_passes(const clf_attention *a, struct plan *p, size_t bn)
{
    size_t limit = a->score_limit, rows;

    p->chunk = p->n;
    p->seqs = p->B;
    if (a->ctx->info.max_alloc != 0 && a->ctx->info.max_alloc < limit)
        limit = (size_t)a->ctx->info.max_alloc;
    if (!(p->causal && p->linformer) &&
        (double)bn * a->hq * p->ld * sizeof(float) > (double)limit) {
        rows = limit / (a->hq * p->ld * sizeof(float));
        if (rows >= p->n) {
            p->seqs = rows / p->n; /* < B: the whole batch did not fit */
        } else {
            p->seqs = 1;
            p->chunk = rows == 0 ? 1 : rows;
        }
    }
    p->need[WS_S] = p->seqs * a->hq * p->chunk * p->ld;
}

/* Linformer without causality may run steps 3 to 5 in one kernel over the
 * whole batch; its workspaces cover either way, so it is offered only
 * where its own score buffer fits the device. */
static void
plan_fusable(const clf_attention *a, struct plan *p)
{
    size_t lp = clf__attend_slots(p->L), need;

    p->fusable = p->linformer && !p->causal && !p->slot_mask &&
                 p->seqs == p->B && p->chunk == p->n && a->dh % 16 == 0;
    if (!p->fusable)
        return;
    need = p->B * a->hq * clf__fused_rows(p->n) * lp;
    if (a->ctx->info.max_alloc != 0 &&
        (double)need * sizeof(float) > (double)a->ctx->info.max_alloc) {
        p->fusable = 0;
        return;
    }
    p->need[WS_S] = need;
    p->need[WS_KT] = p->B * p->hc * a->dh * lp;
}

/* Queries, scores (in passes when too large), keys, values and mask. */
static void
plan_scores(const clf_attention *a, struct plan *p, size_t bn)
{
    const size_t B = p->B;

    p->need[WS_Q] = bn * a->dq;
    p->need[WS_O] = bn * a->dq;
    plan_passes(a, p, bn);
    plan_fusable(a, p);
    p->need[WS_KBAR] = B * p->L * p->hc * a->dh;
    p->need[WS_VBAR] = p->v_is_k ? 0 : p->need[WS_KBAR];
    if (p->masked)
        p->need[WS_MASK] = (bn + sizeof(float) - 1) / sizeof(float);
}

/* Causal Linformer: exact keys and values for the window, then block
 * compression of the complete blocks before the last query's block; the
 * windowed compressions: the keys and values they read. */
static void
plan_causal(const clf_attention *a, struct plan *p, size_t bn)
{
    p->need[WS_XE] = bn * a->dkv;
    p->need[WS_XF] = p->v_is_k ? 0 : bn * a->dkv;
}

/* One side (s 0: keys, 1: values) of Linformer compression in the order
 * chosen: its workspaces. */
static void
plan_side(const clf_attention *a, struct plan *p, int s, size_t bn)
{
    int has_bias = s == 0 ? a->desc.bias_k : a->desc.bias_v;
    enum ws_id x = s == 0 ? WS_XE : WS_XF;
    enum ws_id rs = s == 0 ? WS_RSE : WS_RSF;

    if (!p->compress_first_k) {
        p->need[x] = bn * a->dkv;
        return;
    }
    if (!(s == 1 && p->xf_is_xe))
        p->need[x] = p->B * a->nE * a->k * a->D;
    if (has_bias && !a->desc.compressed_bias)
        p->need[rs] = (p->masked ? p->B : 1) * a->nE * a->k;
}

/* Linformer without causality: the order of compression, then each side. */
static void
plan_linformer(const clf_attention *a, struct plan *p, size_t bn)
{
    double cf, pf;
    int s;

    clf__kv_macs((double)a->nE, (double)a->k, (double)p->n, (double)a->D,
                 (double)a->dkv, (double)p->hc, (double)a->dh, &cf, &pf);
    p->compress_first_k = cf <= pf;
    p->compress_first_v = p->compress_first_k;
    p->xf_is_xe = p->compress_first_k && !p->v_is_k &&
                  a->desc.sharing == CLF_SHARE_KEY_VALUE;
    if (p->compress_first_k && p->masked)
        p->need[WS_XM] = bn * a->D;
    for (s = 0; s < (p->v_is_k ? 1 : 2); s++)
        plan_side(a, p, s, bn);
}

/* Every workspace fits size_t and the device's largest allocation. */
static int
plan_limits(const clf_attention *a, const struct plan *p)
{
    int i;

    for (i = 0; i < WS_COUNT; i++) {
        if (p->need[i] > SIZE_MAX / sizeof(float))
            return clf__fail(CLF_ESIZE_OVERFLOW, "%s size overflows",
                             clf__ws_names[i]);
        if (a->ctx->info.max_alloc != 0 &&
            p->need[i] * sizeof(float) > a->ctx->info.max_alloc)
            return clf__fail(
                CLF_ETOO_LARGE,
                "%s buffer of %zu bytes (batch %zu, seq_len %zu, %s mode) "
                "exceeds the device's largest allocation, %llu bytes",
                clf__ws_names[i], p->need[i] * sizeof(float), p->B, p->n,
                p->linformer ? "linformer" : "full", a->ctx->info.max_alloc);
    }
    return 0;
}

int
clf__plan_make(const clf_attention *a, clf_mode mode, size_t B, size_t n,
               const clf_forward_opts *opts, struct plan *p)
{
    size_t bn;

    CLF_TRY(plan_check(a, mode, B, n, opts, p));
    CLF_TRY(plan_rows(a, p, &bn));
    plan_scores(a, p, bn);
    /* Full mode's keys and values need no workspace beyond Kbar, Vbar;
     * causal Linformer and the windowed compressions project first. */
    if (p->linformer &&
        (p->causal || a->desc.compression != CLF_COMPRESS_LINEAR))
        plan_causal(a, p, bn);
    else if (p->linformer)
        plan_linformer(a, p, bn);
    return plan_limits(a, p);
}

/* Steps 3 to 5: the GEMM path, the fused kernel (where fusable) or a
 * streaming kernel, forced by a test or resolved (the GEMM path timed with
 * the plan's ways of its steps; ways.c); a way that does not apply
 * (flashwg: d_h too wide, groups too large for the device; flash: loops
 * past the device's limit) leaves the GEMM path.  The way then adds its
 * workspace; one that stores no scores runs in one pass. */
static int
plan_attend(const clf_attention *a, struct plan *p)
{
    struct clf__steps st;
    const struct clf__way *w;
    int way = a->attend;

    clf__steps_shape(a, p, &st);
    if (p->slot_mask) /* the softmax folds the slot mask in */
        way = CLF_ATTEND_GEMM;
    else if (way == CLF_ATTEND_UNDECIDED)
        CLF_TRY(clf__ways_resolve(a->ctx, &st, &way));
    p->way = clf__way_taken(a->ctx, &st, way);
    w = clf__way(p->way);
    if (!w->passes) {
        p->chunk = p->n;
        p->seqs = p->B;
    }
    w->workspace(&st, p->need);
    return plan_limits(a, p);
}

/* The compression GEMMs' shape: E X (k x D over n, compressing first), E P
 * (k x dkv over n) or, causal, one block's c slots (c x dkv over the
 * block); per sequence (and per head where E is). */
static int
plan_comp(const clf_attention *a, struct plan *p)
{
    size_t m = a->k, n = p->compress_first_k ? a->D : a->dkv, k = p->n;

    if (p->causal) {
        m = p->c, n = a->nE > 1 ? a->dh : a->dkv, k = a->desc.causal_block;
        if (m == 0)
            return 0; /* no slots: no compression GEMM runs */
    } else if (a->nE > 1 && !p->compress_first_k) {
        n = a->dh;
    }
    return clf__gemm_resolve(a->ctx, CLF_ROLE_COMP, m, n, k, p->B * a->nE,
                             &p->gemm[CLF_ROLE_COMP]);
}

/* The ways of the GEMM path's scores and weighted sum, for chunk query
 * rows of seqs x heads (sequences x heads) over L slots or positions. */
static int
plan_path(const clf_attention *a, struct plan *p)
{
    const size_t heads = p->seqs * a->hq;

    CLF_TRY(clf__gemm_resolve(a->ctx, CLF_ROLE_SCORE, p->chunk, p->L, a->dh,
                              heads, &p->gemm[CLF_ROLE_SCORE]));
    return clf__gemm_resolve(a->ctx, CLF_ROLE_WEIGH, p->chunk, a->dh, p->L,
                             heads, &p->gemm[CLF_ROLE_WEIGH]);
}

/* The projections', the compression's and the softmax's choices. */
static int
plan_front(const clf_attention *a, struct plan *p)
{
    clf_context *ctx = a->ctx;
    const size_t rows = p->seqs * a->hq * p->chunk;
    int r;

    for (r = 0; r < CLF_ROLE_COUNT; r++)
        p->gemm[r] = CLF_GEMM_UNDECIDED;
    CLF_TRY(clf__choice_env_check());
    CLF_TRY(clf__gemm_resolve(ctx, CLF_ROLE_PROJ, p->B * p->n, a->dq, a->D, 1,
                              &p->gemm[CLF_ROLE_PROJ]));
    if (p->linformer && a->desc.compression == CLF_COMPRESS_LINEAR)
        CLF_TRY(plan_comp(a, p));
    return clf__softmax_resolve(ctx, rows, p->ld, &p->softmax);
}

int
clf__plan_choose_path(const clf_attention *a, struct plan *p)
{
    CLF_TRY(plan_front(a, p));
    p->way = CLF_ATTEND_GEMM;
    return plan_path(a, p);
}

/* Every GEMM role's way, in the order the forward runs them, the softmax,
 * the attention way, and the half weights' way.  The GEMM path's roles
 * come before the attention way, whose timing runs that path with them,
 * unless the way is pinned (tests, the tuner): then only where the path
 * runs. */
int
clf__plan_choose(const clf_attention *a, struct plan *p)
{
    clf_context *ctx = a->ctx;
    const int pinned = a->attend != CLF_ATTEND_UNDECIDED ||
                       clf__ways_pinned(ctx) != CLF_ATTEND_UNDECIDED;

    CLF_TRY(plan_front(a, p));
    if (!pinned)
        CLF_TRY(plan_path(a, p));
    CLF_TRY(plan_attend(a, p));
    if (pinned && p->way == CLF_ATTEND_GEMM)
        CLF_TRY(plan_path(a, p));
    if (a->desc.precision == CLF_PRECISION_HALF)
        CLF_TRY(clf__half_gemm_resolve(ctx, a->D, a->dq, p->gemm[CLF_ROLE_PROJ],
                                       &p->half_native));
    return 0;
}

CLF_EXTERN int
clf_attention_flops_ex(const clf_attention *att, clf_mode mode, size_t batch,
                       size_t seq_len, const clf_forward_opts *opts,
                       double *flops)
{
    struct plan p;
    clf_forward_opts o;
    int rc;

    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    if (flops == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "flops is NULL");
    memset(&o, 0, sizeof o);
    o.causal = opts != NULL && opts->causal;
    /* The plan checks the call against the layer; the count is the
     * library's one FLOP model, from the layer's description. */
    rc = clf__plan_make(att, mode, batch, seq_len, &o, &p);
    if (rc != 0)
        return rc;
    return clf_attention_desc_flops(&att->desc, mode, batch, seq_len, o.causal,
                                    NULL, flops);
}

CLF_EXTERN int
clf_attention_flops(const clf_attention *att, clf_mode mode, size_t batch,
                    size_t seq_len, double *flops)
{
    return clf_attention_flops_ex(att, mode, batch, seq_len, NULL, flops);
}

/* For tests: 1 when a Linformer forward of this shape compresses first,
 * 0 when it projects first, negative on a bad shape. */
int
clf__attention_compress_first(const clf_attention *att, size_t batch,
                              size_t seq_len)
{
    struct plan p;
    int rc = clf__plan_make(att, CLF_MODE_LINFORMER, batch, seq_len, NULL, &p);

    return rc != 0 ? rc : p.compress_first_k;
}
