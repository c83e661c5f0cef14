/* The multi-head Linformer attention layer: weights, workspaces and the
 * forward pipeline of DESIGN.md section 3.
 *
 * Shapes (row-major, per batch element b):
 *   X       n x D                      input rows
 *   Q       n x (hq*dh)                X W_q^T + b_q
 *   Kbar    L x (hc*dh)                compressed keys (L = k), or all n
 *                                      projected keys in full mode (L = n)
 *   S       hq x n x L                 scores, then probabilities in place
 *   O       n x (hq*dh)                P Vbar, heads side by side
 *   Y       n x D                      O W_o^T + b_o
 * hq query heads; hkv = 1 with one_kv_head, else hq; hc is the number of
 * distinct compressed K/V heads: hq when E is per head, else hkv.
 *
 * Sequence compression is exact in either order:
 *   E (X W^T + 1 b^T) = (E X) W^T + rowsum(E) b^T.
 * The order with fewer multiply-adds is chosen from the shapes
 * ("compress-first" wins whenever one E serves all heads and k < n). */
#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static const char *const ws_names[WS_COUNT] = {
    "input staging", "output staging", "queries",      "E-side workspace",
    "F-side workspace", "keys",        "values",       "scores",
    "head outputs",  "rowsum(E)",      "rowsum(F)",    "masked input",
    "mask",          "transposed keys"};

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
    cl_event *marks;    /* stage boundaries of the last forward (profiling) */
    int *mark_stage;    /* the stage each mark starts */
    size_t nmarks, cap_marks;
};

/* What one forward of a given shape does and needs. */
struct plan {
    size_t B, n, L, hc;
    size_t ld;    /* score row stride: L, or k + block in causal Linformer */
    size_t c;     /* causal Linformer: slots per block */
    size_t chunk; /* query rows per score chunk; n: one pass for the batch */
    int masked;   /* a padding mask applies */
    cl_mem mask;  /* its batch x n bytes on the device */
    int causal;
    int linformer;
    int compress_first_k, compress_first_v;
    int v_is_k;        /* share_kv: Vbar = Kbar */
    int xf_is_xe;      /* key-value sharing, compress-first: F X = E X */
    int fusable;       /* steps 3-5 may run in one kernel (cl/attend.cl) */
    size_t need[WS_COUNT];
    double flops;
};

static const char *const weight_names[CLF_WEIGHT_COUNT] = {
    "W_q", "W_k", "W_v", "W_out", "b_q", "b_k", "b_v", "b_out", "E", "F"};

CLF_EXTERN const char *
clf_weight_name(clf_weight which)
{
    if ((int)which < 0 || which >= CLF_WEIGHT_COUNT)
        return "?";
    return weight_names[which];
}

/* ------------------------------------------------------------ creation */

static int
check_desc(const clf_attention_desc *d, size_t *dh_out)
{
    size_t dh;

    if (d->d_model == 0)
        return clf__fail(CLF_EBAD_SIZE, "d_model is 0");
    if (d->heads == 0)
        return clf__fail(CLF_EBAD_SIZE, "heads is 0");
    if (d->max_seq_len == 0)
        return clf__fail(CLF_EBAD_SIZE, "max_seq_len is 0");
    if (d->k == 0)
        return clf__fail(CLF_EBAD_SIZE, "k is 0");
    if (d->k > d->max_seq_len)
        return clf__fail(CLF_EK_TOO_LARGE, "k %zu exceeds max_seq_len %zu",
                         d->k, d->max_seq_len);
    if ((int)d->sharing < CLF_SHARE_HEADWISE ||
        d->sharing > CLF_SHARE_KEY_VALUE)
        return clf__fail(CLF_EBAD_ENUM, "sharing %d is not a clf_sharing",
                         (int)d->sharing);
    dh = d->head_dim;
    if (dh == 0) {
        if (d->d_model % d->heads != 0)
            return clf__fail(CLF_ESHAPE_MISMATCH,
                             "d_model %zu is not a multiple of heads %zu "
                             "(set head_dim explicitly)",
                             d->d_model, d->heads);
        dh = d->d_model / d->heads;
    }
    if (d->share_kv && d->bias_v)
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "bias_v is set but share_kv uses the keys as values "
                         "(there is no W_v)");
    if (d->causal_block > d->max_seq_len)
        return clf__fail(CLF_EBAD_SIZE,
                         "causal_block %zu exceeds max_seq_len %zu",
                         d->causal_block, d->max_seq_len);
    if (d->causal_block > 0) {
        size_t nb = (d->max_seq_len + d->causal_block - 1) / d->causal_block;
        if (d->k % nb != 0)
            return clf__fail(CLF_ESHAPE_MISMATCH,
                             "causal mode needs k a multiple of the %zu "
                             "blocks ceil(max_seq_len / causal_block); k is "
                             "%zu",
                             nb, d->k);
    }
    /* Every dimension a kernel sees must fit in 32 bits. */
    if (d->d_model > UINT_MAX || d->heads > UINT_MAX || dh > UINT_MAX ||
        d->max_seq_len > UINT_MAX)
        return clf__fail(CLF_ETOO_LARGE, "a dimension exceeds 2^32-1");
    *dh_out = dh;
    return 0;
}

CLF_EXTERN int
clf_attention_create(clf_attention **out, clf_context *ctx,
                     const clf_attention_desc *desc)
{
    clf_attention *att = NULL;
    size_t dh = 0, t;
    int rc, i;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (desc == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "desc is NULL");
    rc = check_desc(desc, &dh);
    if (rc != 0)
        return rc;
    att = calloc(1, sizeof *att);
    if (att == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    att->ctx = ctx;
    att->desc = *desc;
    att->desc.head_dim = dh;
    att->D = desc->d_model;
    att->hq = desc->heads;
    att->hkv = desc->one_kv_head ? 1 : desc->heads;
    att->dh = dh;
    att->N = desc->max_seq_len;
    att->k = desc->k;
    att->nE = desc->sharing == CLF_SHARE_PER_HEAD ? desc->heads : 1;
    att->mode = CLF_MODE_LINFORMER;
    att->score_limit = SCORE_LIMIT;
    if (clf__mul(att->hq, dh, &att->dq) || clf__mul(att->hkv, dh, &att->dkv) ||
        clf__mul3(att->dq, att->D, sizeof(float), &t) ||
        clf__mul3(att->nE, att->k, att->N, &t) ||
        clf__mul(t, sizeof(float), &t)) {
        rc = clf__fail(CLF_ESIZE_OVERFLOW,
                       "weight sizes overflow size_t (d_model %zu, heads "
                       "%zu, head_dim %zu, k %zu, max_seq_len %zu)",
                       att->D, att->hq, dh, att->k, att->N);
        goto fail;
    }
    att->wsize[CLF_WEIGHT_Q] = att->dq * att->D;
    att->wsize[CLF_WEIGHT_K] = att->dkv * att->D;
    att->wsize[CLF_WEIGHT_V] = desc->share_kv ? 0 : att->dkv * att->D;
    att->wsize[CLF_WEIGHT_OUT] = att->D * att->dq;
    att->wsize[CLF_BIAS_Q] = desc->bias_q ? att->dq : 0;
    att->wsize[CLF_BIAS_K] = desc->bias_k ? att->dkv : 0;
    att->wsize[CLF_BIAS_V] = desc->bias_v ? att->dkv : 0;
    att->wsize[CLF_BIAS_OUT] = desc->bias_out ? att->D : 0;
    att->wsize[CLF_PROJ_E] = att->nE * att->k * att->N;
    att->wsize[CLF_PROJ_F] =
        (desc->share_kv || desc->sharing == CLF_SHARE_KEY_VALUE)
            ? 0
            : att->nE * att->k * att->N;
    for (i = 0; i < CLF_WEIGHT_COUNT; i++) {
        if (att->wsize[i] * sizeof(float) > ctx->info.max_alloc &&
            ctx->info.max_alloc != 0) {
            rc = clf__fail(CLF_ETOO_LARGE,
                           "weight %s needs %zu bytes; the device allocates "
                           "at most %llu",
                           weight_names[i], att->wsize[i] * sizeof(float),
                           ctx->info.max_alloc);
            goto fail;
        }
    }
    rc = clf_context_build(ctx);
    if (rc != 0)
        goto fail;
    *out = att;
    return 0;
fail:
    clf_attention_destroy(att);
    return rc;
}

CLF_EXTERN void
clf_attention_destroy(clf_attention *att)
{
    int i;

    if (att == NULL)
        return;
    if (att->ctx != NULL && att->ctx->queue != NULL)
        clFinish(att->ctx->queue);
    for (i = 0; i < CLF_WEIGHT_COUNT; i++)
        if (att->w[i] != NULL)
            clReleaseMemObject(att->w[i]);
    for (i = 0; i < WS_COUNT; i++)
        if (att->ws[i].mem != NULL)
            clReleaseMemObject(att->ws[i].mem);
    for (i = 0; i < (int)att->nmarks; i++)
        clReleaseEvent(att->marks[i]);
    free(att->marks);
    free(att->mark_stage);
    free(att->host_mask);
    free(att);
}

/* ------------------------------------------------------------- weights */

static int
check_weight_id(const clf_attention *att, clf_weight which)
{
    if ((int)which < 0 || which >= CLF_WEIGHT_COUNT)
        return clf__fail(CLF_EBAD_ENUM, "weight id %d is not a clf_weight",
                         (int)which);
    if (att->wsize[which] == 0)
        return clf__fail(CLF_EWEIGHT_UNUSED,
                         "weight %s is not part of this layer (%s)",
                         weight_names[which],
                         which == CLF_PROJ_F ? "F is E under share_kv or "
                                               "key-value sharing"
                         : which == CLF_WEIGHT_V ? "share_kv uses keys as "
                                                   "values"
                                                 : "its bias flag is off");
    return 0;
}

CLF_EXTERN int
clf_attention_weight_size(const clf_attention *att, clf_weight which,
                          size_t *count)
{
    int rc;

    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    if (count == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "count is NULL");
    rc = check_weight_id(att, which);
    if (rc != 0)
        return rc;
    *count = att->wsize[which];
    return 0;
}

CLF_EXTERN int
clf_attention_set_weight(clf_attention *att, clf_weight which,
                         const float *data, size_t count)
{
    cl_int err;
    int rc;

    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    rc = check_weight_id(att, which);
    if (rc != 0)
        return rc;
    if (data == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "data for weight %s is NULL",
                         weight_names[which]);
    if (count != att->wsize[which])
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "weight %s has %zu elements; this layer needs %zu",
                         weight_names[which], count, att->wsize[which]);
    if (att->w[which] == NULL) {
        att->w[which] = clCreateBuffer(att->ctx->context, CL_MEM_READ_ONLY,
                                       count * sizeof(float), NULL, &err);
        if (att->w[which] == NULL)
            return clf__fail(err, "weight %s: clCreateBuffer of %zu bytes "
                                  "failed (%d)",
                             weight_names[which], count * sizeof(float), err);
    }
    /* Invalidate first: a failed write leaves the weight unset, never half
     * written and marked usable. */
    att->wset[which] = 0;
    err = clEnqueueWriteBuffer(att->ctx->queue, att->w[which], CL_TRUE, 0,
                               count * sizeof(float), data, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "weight %s: upload failed (%d)",
                         weight_names[which], err);
    att->wset[which] = 1;
    return 0;
}

CLF_EXTERN int
clf_attention_set_mode(clf_attention *att, clf_mode mode)
{
    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    if (mode != CLF_MODE_LINFORMER && mode != CLF_MODE_FULL)
        return clf__fail(CLF_EBAD_ENUM, "mode %d is not a clf_mode",
                         (int)mode);
    att->mode = mode;
    return 0;
}

/* ---------------------------------------------------------------- plan */

/* Multiply-adds of producing one side's Kbar for one sequence. */
static double
macs_compress_first(const clf_attention *a, size_t n, size_t hc)
{
    double x = (double)a->nE * a->k * n * a->D;
    if (a->nE == 1)
        return x + (double)a->k * a->D * a->dkv;
    return x + (double)hc * a->k * a->D * a->dh;
}

static double
macs_project_first(const clf_attention *a, size_t n, size_t hc)
{
    return (double)n * a->D * a->dkv + (double)hc * a->k * n * a->dh;
}

static int
make_plan(const clf_attention *a, clf_mode mode, size_t B, size_t n,
          const clf_forward_opts *opts, struct plan *p)
{
    size_t bn, t;
    double fb = (double)B;
    int i;

    if (B == 0)
        return clf__fail(CLF_EBAD_SIZE, "batch is 0");
    if (n == 0)
        return clf__fail(CLF_EBAD_SIZE, "seq_len is 0");
    if (n > a->N)
        return clf__fail(CLF_ESEQ_TOO_LONG,
                         "seq_len %zu exceeds max_seq_len %zu", n, a->N);
    if (mode != CLF_MODE_LINFORMER && mode != CLF_MODE_FULL)
        return clf__fail(CLF_EBAD_ENUM, "mode %d is not a clf_mode",
                         (int)mode);
    memset(p, 0, sizeof *p);
    p->B = B;
    p->n = n;
    p->linformer = mode == CLF_MODE_LINFORMER;
    p->causal = opts != NULL && opts->causal;
    p->masked = opts != NULL && (opts->lengths || opts->key_mask);
    if (opts != NULL && opts->lengths && opts->key_mask)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "give lengths or key_mask, not both");
    if (p->causal && p->linformer && a->desc.causal_block == 0)
        return clf__fail(CLF_EBAD_SIZE,
                         "causal Linformer needs causal_block > 0 in the "
                         "layer's desc (causal_block is 0)");
    if (p->causal && p->linformer && a->desc.compressed_bias)
        return clf__fail(CLF_EUNSUPPORTED,
                         "causal Linformer does not support compressed_bias "
                         "(fairseq's bias order)");
    p->L = p->linformer ? a->k : n;
    p->ld = p->L;
    if (p->causal && p->linformer) {
        p->ld = a->k + a->desc.causal_block;
        p->c = a->k / ((a->N + a->desc.causal_block - 1) /
                       a->desc.causal_block);
    }
    p->hc = (p->linformer && a->nE > 1) ? a->hq : a->hkv;
    p->v_is_k = a->desc.share_kv != 0;

    if (clf__mul(B, n, &bn) || clf__mul3(bn, a->D, sizeof(float), &t) ||
        clf__mul3(bn, a->hq, p->ld, &t) || clf__mul(t, sizeof(float), &t) ||
        clf__mul3(bn, a->dq, sizeof(float), &t) ||
        clf__mul3(bn, a->dkv, sizeof(float), &t))
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "batch %zu x seq_len %zu overflows size_t", B, n);
    if (bn > UINT_MAX || bn * a->hq > UINT_MAX)
        return clf__fail(CLF_ETOO_LARGE,
                         "batch %zu x seq_len %zu x heads exceeds 2^32-1 rows",
                         B, n);

    p->need[WS_Q] = bn * a->dq;
    p->need[WS_O] = bn * a->dq;
    /* Scores are made in chunks of query rows when the whole batch's would
     * pass SCORE_LIMIT bytes (full mode at large n): memory then stays
     * bounded while every row is still computed exactly.  Causal Linformer
     * runs in one pass. */
    p->chunk = n;
    p->need[WS_S] = bn * a->hq * p->ld;
    {
        size_t limit = a->score_limit;
        if (a->ctx->info.max_alloc != 0 && a->ctx->info.max_alloc < limit)
            limit = (size_t)a->ctx->info.max_alloc;
        if (!(p->causal && p->linformer) &&
            (double)p->need[WS_S] * sizeof(float) > (double)limit) {
            size_t per_row = a->hq * p->ld * sizeof(float);
            p->chunk = limit / per_row;
            if (p->chunk == 0)
                p->chunk = 1;
            if (p->chunk > n)
                p->chunk = n;
            p->need[WS_S] = a->hq * p->chunk * p->ld;
        }
    }
    /* Linformer without causality may run steps 3 to 5 in one kernel; its
     * workspaces cover either way. */
    p->fusable = p->linformer && !p->causal && p->chunk == n &&
                 a->dh % 16 == 0;
    if (p->fusable) {
        size_t lp = clf__attend_slots(p->L);
        p->need[WS_S] = B * a->hq * clf__attend_rows(n) * lp;
        p->need[WS_KT] = B * p->hc * a->dh * lp;
    }
    p->need[WS_KBAR] = B * p->L * p->hc * a->dh;
    p->need[WS_VBAR] = p->v_is_k ? 0 : p->need[WS_KBAR];
    if (p->masked)
        p->need[WS_MASK] = (bn + sizeof(float) - 1) / sizeof(float);

    /* Q and output projections, with their biases. */
    p->flops = 2.0 * fb * n * a->D * a->dq * 2.0;
    if (a->desc.bias_q)
        p->flops += fb * n * a->dq;
    if (a->desc.bias_out)
        p->flops += fb * n * a->D;

    if (p->linformer && p->causal) {
        /* Exact keys and values for the window, then block compression of
         * the complete blocks before the last query's block. */
        size_t nbq = (n - 1) / a->desc.causal_block;
        int sides = p->v_is_k ? 1 : 2;
        double win = 0.0;
        size_t q;

        p->need[WS_XE] = bn * a->dkv;
        p->need[WS_XF] = p->v_is_k ? 0 : bn * a->dkv;
        p->flops += 2.0 * fb * n * a->D * a->dkv * sides;
        if (a->desc.bias_k)
            p->flops += fb * n * a->dkv;
        if (a->desc.bias_v && !p->v_is_k)
            p->flops += fb * n * a->dkv;
        p->flops += 2.0 * fb * nbq * p->c * a->desc.causal_block *
                    p->hc * a->dh * sides;
        for (q = 0; q < n; q++)
            win += (double)(q % a->desc.causal_block + 1);
        /* window scores and window weighted sum */
        p->flops += 2.0 * 2.0 * fb * a->hq * win * a->dh;
    } else if (p->linformer) {
        double cf = macs_compress_first(a, n, p->hc);
        double pf = macs_project_first(a, n, p->hc);
        int sides = p->v_is_k ? 1 : 2;
        int s;

        p->compress_first_k = cf <= pf;
        p->compress_first_v = p->compress_first_k;
        p->xf_is_xe = p->compress_first_k && !p->v_is_k &&
                      a->desc.sharing == CLF_SHARE_KEY_VALUE;
        if (p->compress_first_k && p->masked)
            p->need[WS_XM] = bn * a->D;
        for (s = 0; s < sides; s++) {
            int has_bias = s == 0 ? a->desc.bias_k : a->desc.bias_v;
            enum ws_id x = s == 0 ? WS_XE : WS_XF;
            enum ws_id rs = s == 0 ? WS_RSE : WS_RSF;
            if (p->compress_first_k) {
                if (!(s == 1 && p->xf_is_xe)) {
                    p->need[x] = B * a->nE * a->k * a->D;
                    p->flops += 2.0 * fb * a->nE * a->k * n * a->D;
                }
                p->flops += 2.0 * fb * (cf - (double)a->nE * a->k * n * a->D);
                if (has_bias && a->desc.compressed_bias) {
                    p->flops += fb * a->k * p->hc * a->dh;
                } else if (has_bias) {
                    p->need[rs] = (p->masked ? B : 1) * a->nE * a->k;
                    p->flops += (double)(p->masked ? B : 1) * a->nE * a->k *
                                    n +
                                2.0 * fb * a->k * p->hc * a->dh;
                }
            } else {
                p->need[x] = bn * a->dkv;
                p->flops += 2.0 * fb * pf;
                if (has_bias)
                    p->flops += a->desc.compressed_bias
                                    ? fb * a->k * p->hc * a->dh
                                    : fb * n * a->dkv;
            }
        }
    } else {
        int sides = p->v_is_k ? 1 : 2;
        p->flops += 2.0 * fb * n * a->D * a->dkv * sides;
        if (a->desc.bias_k)
            p->flops += fb * n * a->dkv;
        if (a->desc.bias_v && !p->v_is_k)
            p->flops += fb * n * a->dkv;
    }
    /* Scores, softmax (max, subtract, exp, sum, scale: 5 per entry) and the
     * weighted sum over the L compressed slots (or n positions). */
    p->flops += 2.0 * fb * a->hq * n * p->L * a->dh * 2.0;
    p->flops += 5.0 * fb * a->hq * n * p->ld;

    for (i = 0; i < WS_COUNT; i++) {
        if (p->need[i] > SIZE_MAX / sizeof(float))
            return clf__fail(CLF_ESIZE_OVERFLOW, "%s size overflows",
                             ws_names[i]);
        if (a->ctx->info.max_alloc != 0 &&
            p->need[i] * sizeof(float) > a->ctx->info.max_alloc)
            return clf__fail(
                CLF_ETOO_LARGE,
                "%s buffer of %zu bytes (batch %zu, seq_len %zu, %s mode) "
                "exceeds the device's largest allocation, %llu bytes",
                ws_names[i], p->need[i] * sizeof(float), B, n,
                p->linformer ? "linformer" : "full", a->ctx->info.max_alloc);
    }
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
    rc = make_plan(att, mode, batch, seq_len, &o, &p);
    if (rc != 0)
        return rc;
    *flops = p.flops;
    return 0;
}

CLF_EXTERN int
clf_attention_flops(const clf_attention *att, clf_mode mode, size_t batch,
                    size_t seq_len, double *flops)
{
    return clf_attention_flops_ex(att, mode, batch, seq_len, NULL, flops);
}

/* Grows workspace id to at least `need` floats (contents not kept). */
static int
ensure(clf_attention *a, enum ws_id id, size_t need)
{
    struct workspace *w = &a->ws[id];
    cl_int err;

    if (need <= w->cap)
        return 0;
    if (w->mem != NULL)
        clReleaseMemObject(w->mem);
    w->mem = NULL;
    w->cap = 0;
    w->mem = clCreateBuffer(a->ctx->context, CL_MEM_READ_WRITE,
                            need * sizeof(float), NULL, &err);
    if (w->mem == NULL)
        return clf__fail(err, "%s: clCreateBuffer of %zu bytes failed (%d)",
                         ws_names[id], need * sizeof(float), err);
    w->cap = need;
    return 0;
}

CLF_EXTERN int
clf_attention_device_bytes(const clf_attention *att, size_t *bytes)
{
    size_t total = 0;
    int i;

    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    if (bytes == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "bytes is NULL");
    for (i = 0; i < CLF_WEIGHT_COUNT; i++)
        if (att->w[i] != NULL)
            total += att->wsize[i] * sizeof(float);
    for (i = 0; i < WS_COUNT; i++)
        total += att->ws[i].cap * sizeof(float);
    *bytes = total;
    return 0;
}

/* ------------------------------------------------------------- forward */

static int
check_weights(const clf_attention *a, int linformer)
{
    int i;

    for (i = 0; i < CLF_WEIGHT_COUNT; i++) {
        if (a->wsize[i] == 0 || a->wset[i])
            continue;
        if (!linformer && (i == CLF_PROJ_E || i == CLF_PROJ_F))
            continue;
        return clf__fail(CLF_EWEIGHT_UNSET, "weight %s has not been set",
                         weight_names[i]);
    }
    return 0;
}

#define TRY CLF_TRY

/* Produces one side's compressed matrix (Kbar from E, W_k, b_k, or Vbar
 * from F, W_v, b_v) for every sequence of the batch.  With a padding mask,
 * x is already masked (compress-first), or the projection is masked after
 * it is made (project-first): either way E diag(mask). */
static int
compress_side(clf_attention *a, const struct plan *p, cl_mem x, size_t xoff,
              cl_mem e, cl_mem w, cl_mem bias, enum ws_id work,
              enum ws_id rowsum, cl_mem out, int reuse_work)
{
    clf_context *ctx = a->ctx;
    const size_t B = p->B, n = p->n, k = a->k, D = a->D, N = a->N;
    const size_t dh = a->dh, dkv = a->dkv, hc = p->hc, nE = a->nE;
    const size_t width = hc * dh; /* row width of Kbar */
    cl_mem ws = a->ws[work].mem;
    cl_mem mask = p->mask;
    size_t b;

    if (p->compress_first_k) {
        /* Xbar = E[:, :n] X per sequence (and per head when E is). */
        if (!reuse_work) {
            if (nE == 1) {
                TRY(clf__gemm_batched(ctx, 0, 0, k, D, n, 1.0f, e, 0, N, 0, x,
                                      xoff, D, n * D, 0.0f, ws, 0, D, k * D,
                                      B));
            } else {
                for (b = 0; b < B; b++)
                    TRY(clf__gemm_batched(ctx, 0, 0, k, D, n, 1.0f, e, 0, N,
                                          k * N, x, xoff + b * n * D, D, 0,
                                          0.0f, ws, b * nE * k * D, D, k * D,
                                          nE));
            }
        }
        /* Kbar = Xbar W^T. */
        if (nE == 1) {
            TRY(clf__gemm(ctx, 0, 1, B * k, dkv, D, 1.0f, ws, 0, D, w, 0, D,
                          0.0f, out, 0, dkv));
        } else {
            for (b = 0; b < B; b++)
                TRY(clf__gemm_batched(ctx, 0, 1, k, dh, D, 1.0f, ws,
                                      b * nE * k * D, D, k * D, w, 0, D,
                                      a->hkv > 1 ? dh * D : 0, 0.0f, out,
                                      b * k * width, width, dh, hc));
        }
        if (bias != NULL && a->desc.compressed_bias) {
            TRY(clf__add_rowsum_bias(ctx, out, B, k, hc, dh, NULL, 0, 0, bias,
                                     a->hkv > 1));
        } else if (bias != NULL) {
            cl_mem rs = a->ws[rowsum].mem;
            if (p->masked)
                TRY(clf__masked_rowsum(ctx, e, nE * k, n, N, B, mask, rs));
            else
                TRY(clf__rowsum(ctx, e, nE * k, n, N, rs));
            TRY(clf__add_rowsum_bias(ctx, out, B, k, hc, dh, rs,
                                     p->masked ? nE * k : 0, nE > 1, bias,
                                     a->hkv > 1));
        }
        return 0;
    }

    /* Project first: P = X W^T + b (padding rows zeroed), then
     * Kbar = E[:, :n] P. */
    TRY(clf__gemm_bias(ctx, 1, B * n, dkv, D, x, xoff, D, w, 0, D, ws, 0, dkv,
                       a->desc.compressed_bias ? NULL : bias));
    if (p->masked)
        TRY(clf__mask_rows(ctx, ws, 0, ws, 0, B * n, dkv, mask));
    if (nE == 1) {
        TRY(clf__gemm_batched(ctx, 0, 0, k, dkv, n, 1.0f, e, 0, N, 0, ws, 0,
                              dkv, n * dkv, 0.0f, out, 0, dkv, k * dkv, B));
    } else {
        for (b = 0; b < B; b++)
            TRY(clf__gemm_batched(ctx, 0, 0, k, dh, n, 1.0f, e, 0, N, k * N,
                                  ws, b * n * dkv, dkv,
                                  a->hkv > 1 ? dh : 0, 0.0f, out,
                                  b * k * width, width, dh, hc));
    }
    if (bias != NULL && a->desc.compressed_bias)
        TRY(clf__add_rowsum_bias(ctx, out, B, k, hc, dh, NULL, 0, 0, bias,
                                 a->hkv > 1));
    return 0;
}

/* P = X W^T + b over all rows, padding rows zeroed: the exact keys or values
 * of full mode and of the causal window. */
static int
project(clf_attention *a, const struct plan *p, cl_mem x, size_t xoff,
        cl_mem w, cl_mem bias, cl_mem out)
{
    const size_t rows = p->B * p->n;

    TRY(clf__gemm_bias(a->ctx, 1, rows, a->dkv, a->D, x, xoff, a->D, w, 0,
                       a->D, out, 0, a->dkv, bias));
    if (p->masked)
        TRY(clf__mask_rows(a->ctx, out, 0, out, 0, rows, a->dkv, p->mask));
    return 0;
}

/* Causal Linformer compression: the c slots of block m come from block m's
 * positions only, Kbar[m*c + i] = sum over s in block m of E[m*c + i, s]
 * P[s].  Only blocks before the last query's block are ever seen; the rest
 * of Kbar is zero (and masked out of every softmax). */
static int
compress_blocks(clf_attention *a, const struct plan *p, cl_mem e, cl_mem pk,
                cl_mem out)
{
    clf_context *ctx = a->ctx;
    const size_t blk = a->desc.causal_block, c = p->c, N = a->N;
    const size_t n = p->n, nbq = (n - 1) / blk, dh = a->dh, dkv = a->dkv;
    const size_t width = p->hc * dh;
    const float zero = 0.0f;
    size_t b, h;
    cl_int err;

    err = clEnqueueFillBuffer(ctx->queue, out, &zero, sizeof zero, 0,
                              p->B * a->k * width * sizeof(float), 0, NULL,
                              NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "clearing compressed keys failed (%d)", err);
    if (nbq == 0 || c == 0)
        return 0;
    for (b = 0; b < p->B; b++) {
        if (a->nE == 1) {
            TRY(clf__gemm_batched(ctx, 0, 0, c, dkv, blk, 1.0f, e, 0, N,
                                  c * N + blk, pk, b * n * dkv, dkv,
                                  blk * dkv, 0.0f, out, b * a->k * dkv, dkv,
                                  c * dkv, nbq));
            continue;
        }
        for (h = 0; h < p->hc; h++)
            TRY(clf__gemm_batched(
                ctx, 0, 0, c, dh, blk, 1.0f, e, h * a->k * N, N, c * N + blk,
                pk, b * n * dkv + (a->hkv > 1 ? h * dh : 0), dkv, blk * dkv,
                0.0f, out, b * a->k * width + h * dh, width, c * width, nbq));
    }
    return 0;
}

static const char *const stage_names[CLF_STAGE_COUNT] = {
    "projection", "compression", "scores", "softmax", "weighted_sum",
    "fused",      "output"};

CLF_EXTERN const char *
clf_stage_name(clf_stage stage)
{
    if ((int)stage < 0 || stage >= CLF_STAGE_COUNT)
        return "?";
    return stage_names[stage];
}

/* Ends the running stage and starts `stage` (CLF_STAGE_COUNT: the end of
 * the forward) with a marker event, when the queue profiles.  Stages may
 * repeat (one set per score chunk); their times add up. */
static int
mark(clf_attention *a, int stage)
{
    cl_int err;

    if (!a->ctx->profiling)
        return 0;
    if (stage == CLF_STAGE_PROJECTION) { /* a new forward */
        size_t i;
        for (i = 0; i < a->nmarks; i++)
            clReleaseEvent(a->marks[i]);
        a->nmarks = 0;
    }
    if (a->nmarks == a->cap_marks) {
        size_t cap = a->cap_marks ? 2 * a->cap_marks : 16;
        cl_event *ev = realloc(a->marks, cap * sizeof *ev);
        int *st;
        if (ev == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        a->marks = ev;
        st = realloc(a->mark_stage, cap * sizeof *st);
        if (st == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        a->mark_stage = st;
        a->cap_marks = cap;
    }
    err = clEnqueueMarkerWithWaitList(a->ctx->queue, 0, NULL,
                                      &a->marks[a->nmarks]);
    if (err != CL_SUCCESS)
        return clf__fail(err, "profiling marker failed (%d)", err);
    a->mark_stage[a->nmarks++] = stage;
    return 0;
}

CLF_EXTERN int
clf_attention_stage_times(clf_attention *att, double seconds[CLF_STAGE_COUNT])
{
    cl_ulong prev = 0, t;
    cl_int err;
    size_t i;

    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    if (seconds == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "seconds is NULL");
    if (!att->ctx->profiling)
        return clf__fail(CLF_EUNSUPPORTED,
                         "the context's queue does not profile (create it "
                         "with CLF_CONTEXT_PROFILING)");
    if (att->nmarks < 2 ||
        att->mark_stage[att->nmarks - 1] != CLF_STAGE_COUNT)
        return clf__fail(CLF_EUNSUPPORTED, "no complete forward has run");
    err = clWaitForEvents(1, &att->marks[att->nmarks - 1]);
    if (err != CL_SUCCESS)
        return clf__fail(err, "waiting for the forward failed (%d)", err);
    for (i = 0; i < CLF_STAGE_COUNT; i++)
        seconds[i] = 0.0;
    for (i = 0; i < att->nmarks; i++) {
        err = clGetEventProfilingInfo(att->marks[i], CL_PROFILING_COMMAND_END,
                                      sizeof t, &t, NULL);
        if (err != CL_SUCCESS)
            return clf__fail(err, "reading profiling info failed (%d)", err);
        if (i > 0 && t > prev)
            seconds[att->mark_stage[i - 1]] += (double)(t - prev) * 1e-9;
        prev = t;
    }
    return 0;
}

static int
run_forward(clf_attention *a, const struct plan *p, cl_mem x, size_t xoff,
            cl_mem y, size_t yoff)
{
    clf_context *ctx = a->ctx;
    const size_t B = p->B, n = p->n, D = a->D, dh = a->dh, dq = a->dq;
    const size_t hq = a->hq, hc = p->hc, L = p->L, ld = p->ld;
    const size_t width = hc * dh;
    const float scale = (float)(1.0 / sqrt((double)dh));
    cl_mem q = a->ws[WS_Q].mem, s = a->ws[WS_S].mem, o = a->ws[WS_O].mem;
    cl_mem kbar = a->ws[WS_KBAR].mem;
    cl_mem vbar = p->v_is_k ? kbar : a->ws[WS_VBAR].mem;
    cl_mem mask = p->masked ? p->mask : NULL;
    cl_mem *w = a->w;
    cl_mem bk = a->desc.bias_k ? w[CLF_BIAS_K] : NULL;
    cl_mem bv = a->desc.bias_v ? w[CLF_BIAS_V] : NULL;
    cl_mem f = a->wsize[CLF_PROJ_F] ? w[CLF_PROJ_F] : w[CLF_PROJ_E];
    size_t b;

    a->last_fused = 0;
    /* The context's timed choices, before the first stage so that their
     * timing stays out of the profile. */
    TRY(clf__gemm_choose(ctx));
    if (p->fusable && a->attend == CLF_ATTEND_UNDECIDED)
        TRY(clf__attend_choose(ctx));

    /* 1. Q = X W_q^T + b_q over all B*n rows. */
    TRY(mark(a, CLF_STAGE_PROJECTION));
    TRY(clf__gemm_bias(ctx, 1, B * n, dq, D, x, xoff, D, w[CLF_WEIGHT_Q], 0,
                       D, q, 0, dq, a->desc.bias_q ? w[CLF_BIAS_Q] : NULL));

    /* 2. Keys and values: compressed, or projected in full mode. */
    TRY(mark(a, CLF_STAGE_COMPRESSION));
    if (p->linformer && p->causal) {
        cl_mem pk = a->ws[WS_XE].mem;
        cl_mem pv = p->v_is_k ? pk : a->ws[WS_XF].mem;
        TRY(project(a, p, x, xoff, w[CLF_WEIGHT_K], bk, pk));
        TRY(compress_blocks(a, p, w[CLF_PROJ_E], pk, kbar));
        if (!p->v_is_k) {
            TRY(project(a, p, x, xoff, w[CLF_WEIGHT_V], bv, pv));
            TRY(compress_blocks(a, p, f, pv, vbar));
        }
    } else if (p->linformer) {
        cl_mem xc = x;
        size_t xcoff = xoff;
        if (p->masked && p->compress_first_k) {
            xc = a->ws[WS_XM].mem;
            xcoff = 0;
            TRY(clf__mask_rows(ctx, x, xoff, xc, 0, B * n, D, mask));
        }
        TRY(compress_side(a, p, xc, xcoff, w[CLF_PROJ_E], w[CLF_WEIGHT_K],
                          bk, WS_XE, WS_RSE, kbar, 0));
        if (!p->v_is_k)
            TRY(compress_side(a, p, xc, xcoff, f, w[CLF_WEIGHT_V], bv,
                              p->xf_is_xe ? WS_XE : WS_XF, WS_RSF, vbar,
                              p->xf_is_xe));
    } else {
        TRY(project(a, p, x, xoff, w[CLF_WEIGHT_K], bk, kbar));
        if (!p->v_is_k)
            TRY(project(a, p, x, xoff, w[CLF_WEIGHT_V], bv, vbar));
    }

    if (p->chunk < n) {
        /* Steps 3 to 5 for one chunk of query rows of one sequence at a
         * time, so the scores never exceed SCORE_LIMIT bytes. */
        size_t r0, rows;
        for (b = 0; b < B; b++)
            for (r0 = 0; r0 < n; r0 += rows) {
                rows = n - r0 < p->chunk ? n - r0 : p->chunk;
                TRY(mark(a, CLF_STAGE_SCORES));
                TRY(clf__gemm_batched(ctx, 0, 1, rows, L, dh, scale, q,
                                      (b * n + r0) * dq, dq, dh, kbar,
                                      b * L * width, width, hc > 1 ? dh : 0,
                                      0.0f, s, 0, ld, rows * ld, hq));
                TRY(mark(a, CLF_STAGE_SOFTMAX));
                if (!p->linformer && (p->masked || p->causal))
                    TRY(clf__mask_scores(ctx, s, 1, hq, rows, n, r0, mask,
                                         b * n, p->causal));
                TRY(clf__softmax_rows(ctx, s, 0, hq * rows, ld));
                TRY(mark(a, CLF_STAGE_WEIGHTED_SUM));
                TRY(clf__gemm_batched(ctx, 0, 0, rows, dh, L, 1.0f, s, 0, ld,
                                      rows * ld, vbar, b * L * width, width,
                                      hc > 1 ? dh : 0, 0.0f, o,
                                      (b * n + r0) * dq, dq, dh, hq));
            }
        goto output;
    }

    if (p->fusable && a->attend != CLF_ATTEND_GEMM &&
        (a->attend == CLF_ATTEND_FUSED ||
         ctx->attend_variant == CLF_ATTEND_FUSED)) {
        /* Steps 3 to 5 in one kernel. */
        struct clf__attend_shape sh;
        sh.batch = B;
        sh.heads = hq;
        sh.n = n;
        sh.dh = dh;
        sh.dq = dq;
        sh.L = L;
        sh.kv_per_head = hc > 1;
        sh.scale = scale;
        a->last_fused = 1;
        TRY(mark(a, CLF_STAGE_FUSED));
        TRY(clf__attend(ctx, &sh, q, kbar, vbar, a->ws[WS_KT].mem, s, o));
        goto output;
    }

    /* 3. S = Q_h Kbar_h^T / sqrt(d_h), batched over heads. */
    TRY(mark(a, CLF_STAGE_SCORES));
    for (b = 0; b < B; b++)
        TRY(clf__gemm_batched(ctx, 0, 1, n, L, dh, scale, q, b * n * dq, dq,
                              dh, kbar, b * L * width, width,
                              hc > 1 ? dh : 0, 0.0f, s, b * hq * n * ld, ld,
                              n * ld, hq));

    /* The causal window and the slots of unfinished blocks. */
    if (p->linformer && p->causal) {
        struct clf__causal_shape sh;
        sh.batch = B;
        sh.heads = hq;
        sh.n = n;
        sh.dh = dh;
        sh.dq = dq;
        sh.dkv = a->dkv;
        sh.k = a->k;
        sh.c = p->c;
        sh.block = a->desc.causal_block;
        sh.kv_per_head = a->hkv > 1;
        sh.scale = scale;
        TRY(clf__causal_scores(ctx, &sh, s, q, a->ws[WS_XE].mem, mask));
    }

    /* 4. Masks (full mode) and the softmax over each score row. */
    TRY(mark(a, CLF_STAGE_SOFTMAX));
    if (!p->linformer && (p->masked || p->causal))
        TRY(clf__mask_scores(ctx, s, B, hq, n, n, 0, mask, 0, p->causal));
    TRY(clf__softmax_rows(ctx, s, 0, B * hq * n, ld));

    /* 5. O_h = P_h Vbar_h, written into head h's columns of O. */
    TRY(mark(a, CLF_STAGE_WEIGHTED_SUM));
    for (b = 0; b < B; b++)
        TRY(clf__gemm_batched(ctx, 0, 0, n, dh, L, 1.0f, s, b * hq * n * ld,
                              ld, n * ld, vbar, b * L * width, width,
                              hc > 1 ? dh : 0, 0.0f, o, b * n * dq, dq, dh,
                              hq));
    if (p->linformer && p->causal) {
        struct clf__causal_shape sh;
        memset(&sh, 0, sizeof sh);
        sh.batch = B;
        sh.heads = hq;
        sh.n = n;
        sh.dh = dh;
        sh.dq = dq;
        sh.dkv = a->dkv;
        sh.k = a->k;
        sh.block = a->desc.causal_block;
        sh.kv_per_head = a->hkv > 1;
        TRY(clf__causal_apply(ctx, &sh, o, s,
                              p->v_is_k ? a->ws[WS_XE].mem
                                        : a->ws[WS_XF].mem));
    }

output:
    /* 6. Y = O W_o^T + b_o; padding rows are zeros. */
    TRY(mark(a, CLF_STAGE_OUTPUT));
    TRY(clf__gemm_bias(ctx, 1, B * n, D, dq, o, 0, dq, w[CLF_WEIGHT_OUT], 0,
                       dq, y, yoff, D,
                       a->desc.bias_out ? w[CLF_BIAS_OUT] : NULL));
    if (p->masked)
        TRY(clf__mask_rows(ctx, y, yoff, y, yoff, B * n, D, mask));
    TRY(mark(a, CLF_STAGE_COUNT));
    return 0;
}

/* Checks the options against the shape and uploads the mask (blocking, so
 * the caller's arrays may go away when the call returns). */
static int
upload_mask(clf_attention *a, const struct plan *p,
            const clf_forward_opts *opts)
{
    const size_t B = p->B, n = p->n;
    const unsigned char *bytes = opts->key_mask;
    cl_int err;
    size_t b, j;

    if (opts->lengths != NULL) {
        if (a->host_mask_cap < B * n) {
            unsigned char *m = realloc(a->host_mask, B * n);
            if (m == NULL)
                return clf__fail(CLF_ENO_MEMORY, "out of host memory");
            a->host_mask = m;
            a->host_mask_cap = B * n;
        }
        for (b = 0; b < B; b++) {
            unsigned len = opts->lengths[b];
            if (len == 0 || len > n)
                return clf__fail(CLF_EBAD_SIZE,
                                 "lengths[%zu] = %u is outside 1..seq_len "
                                 "(%zu)",
                                 b, len, n);
            for (j = 0; j < n; j++)
                a->host_mask[b * n + j] = j < len;
        }
        bytes = a->host_mask;
    }
    err = clEnqueueWriteBuffer(a->ctx->queue, a->ws[WS_MASK].mem, CL_TRUE, 0,
                               B * n, bytes, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "mask upload failed (%d)", err);
    return 0;
}

/* dev_mask: the padding mask already on the device (batch x n bytes, as
 * the options describe it), or NULL to upload it from the options. */
static int
prepare(clf_attention *a, size_t B, size_t n, const clf_forward_opts *opts,
        struct plan *p, int host, cl_mem dev_mask)
{
    int i;

    TRY(make_plan(a, a->mode, B, n, opts, p));
    TRY(check_weights(a, p->linformer));
    if (host) {
        p->need[WS_X] = B * n * a->D;
        p->need[WS_Y] = B * n * a->D;
    }
    for (i = 0; i < WS_COUNT; i++)
        TRY(ensure(a, (enum ws_id)i, p->need[i]));
    p->mask = NULL;
    if (p->masked && dev_mask != NULL) {
        p->mask = dev_mask;
    } else if (p->masked) {
        TRY(upload_mask(a, p, opts));
        p->mask = a->ws[WS_MASK].mem;
    }
    return 0;
}

CLF_EXTERN int
clf_attention_forward_ex(clf_attention *att, const float *x, size_t batch,
                         size_t seq_len, float *y,
                         const clf_forward_opts *opts)
{
    struct plan p;
    size_t bytes;
    cl_int err;

    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    if (x == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "x is NULL");
    if (y == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "y is NULL");
    TRY(prepare(att, batch, seq_len, opts, &p, 1, NULL));
    bytes = batch * seq_len * att->D * sizeof(float);
    err = clEnqueueWriteBuffer(att->ctx->queue, att->ws[WS_X].mem, CL_FALSE,
                               0, bytes, x, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "input upload of %zu bytes failed (%d)", bytes,
                         err);
    TRY(run_forward(att, &p, att->ws[WS_X].mem, 0, att->ws[WS_Y].mem, 0));
    err = clEnqueueReadBuffer(att->ctx->queue, att->ws[WS_Y].mem, CL_TRUE, 0,
                              bytes, y, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "output read-back of %zu bytes failed (%d)",
                         bytes, err);
    return 0;
}

CLF_EXTERN int
clf_attention_forward(clf_attention *att, const float *x, size_t batch,
                      size_t seq_len, float *y)
{
    return clf_attention_forward_ex(att, x, batch, seq_len, y, NULL);
}

static int
check_caller_buffer(const clf_attention *a, cl_mem m, const char *name,
                    size_t off, size_t count)
{
    cl_context mc = NULL;
    size_t size = 0, end;
    cl_int err;

    err = clGetMemObjectInfo(m, CL_MEM_CONTEXT, sizeof mc, &mc, NULL);
    if (err == CL_SUCCESS)
        err = clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "%s is not a valid cl_mem (%d)", name, err);
    if (mc != a->ctx->context)
        return clf__fail(CLF_EWRONG_CONTEXT,
                         "%s belongs to another cl_context", name);
    if (clf__add(off, count, &end) || end > SIZE_MAX / sizeof(float))
        return clf__fail(CLF_ESIZE_OVERFLOW, "%s offset %zu overflows", name,
                         off);
    if (end * sizeof(float) > size)
        return clf__fail(CLF_EBUFFER_TOO_SMALL,
                         "%s holds %zu bytes; offset %zu + %zu floats needs "
                         "%zu",
                         name, size, off, count, end * sizeof(float));
    return 0;
}

int
clf__attention_forward_cl_mask(clf_attention *att, cl_mem x, size_t x_offset,
                               cl_mem y, size_t y_offset, size_t batch,
                               size_t seq_len, const clf_forward_opts *opts,
                               cl_mem dev_mask)
{
    struct plan p;

    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    if (x == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "x is NULL");
    if (y == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "y is NULL");
    TRY(make_plan(att, att->mode, batch, seq_len, opts, &p));
    TRY(check_caller_buffer(att, x, "x", x_offset, batch * seq_len * att->D));
    TRY(check_caller_buffer(att, y, "y", y_offset, batch * seq_len * att->D));
    TRY(prepare(att, batch, seq_len, opts, &p, 0, dev_mask));
    return run_forward(att, &p, x, x_offset, y, y_offset);
}

CLF_EXTERN int
clf_attention_forward_cl_ex(clf_attention *att, cl_mem x, size_t x_offset,
                            cl_mem y, size_t y_offset, size_t batch,
                            size_t seq_len, const clf_forward_opts *opts)
{
    return clf__attention_forward_cl_mask(att, x, x_offset, y, y_offset,
                                          batch, seq_len, opts, NULL);
}

CLF_EXTERN int
clf_attention_forward_cl(clf_attention *att, cl_mem x, size_t x_offset,
                         cl_mem y, size_t y_offset, size_t batch,
                         size_t seq_len)
{
    return clf_attention_forward_cl_ex(att, x, x_offset, y, y_offset, batch,
                                       seq_len, NULL);
}

/* ------------------------------------------------------- random weights */

/* splitmix64: small, fast and the same on every platform. */
unsigned long long
clf__splitmix64(unsigned long long *state)
{
    unsigned long long z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

CLF_EXTERN int
clf_attention_randomize(clf_attention *att, unsigned long long seed)
{
    unsigned long long state = seed;
    size_t largest = 0, i;
    float *buf;
    int w, rc = 0;

    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    for (w = 0; w < CLF_WEIGHT_COUNT; w++)
        if (att->wsize[w] > largest)
            largest = att->wsize[w];
    buf = malloc(largest * sizeof *buf);
    if (buf == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (w = 0; w < CLF_WEIGHT_COUNT && rc == 0; w++) {
        double fan_in;
        if (att->wsize[w] == 0)
            continue;
        switch (w) {
        case CLF_WEIGHT_OUT:
        case CLF_BIAS_OUT:
            fan_in = (double)att->dq;
            break;
        case CLF_PROJ_E:
        case CLF_PROJ_F:
            fan_in = (double)att->k;
            break;
        default:
            fan_in = (double)att->D;
            break;
        }
        for (i = 0; i < att->wsize[w]; i++) {
            double u = (double)(clf__splitmix64(&state) >> 11) * 0x1.0p-53;
            buf[i] = (float)((2.0 * u - 1.0) / sqrt(fan_in));
        }
        rc = clf_attention_set_weight(att, (clf_weight)w, buf, att->wsize[w]);
    }
    free(buf);
    return rc;
}

/* For tests: 1 when a Linformer forward of this shape compresses first,
 * 0 when it projects first, negative on a bad shape. */
int
clf__attention_compress_first(const clf_attention *att, size_t batch,
                              size_t seq_len)
{
    struct plan p;
    int rc = make_plan(att, CLF_MODE_LINFORMER, batch, seq_len, NULL, &p);

    return rc != 0 ? rc : p.compress_first_k;
}

/* The layer's resolved desc (head_dim filled in). */
void
clf__attention_desc(const clf_attention *att, clf_attention_desc *out)
{
    *out = att->desc;
}

/* For tests: force the fused kernel (CLF_ATTEND_FUSED) or the GEMM path
 * for steps 3 to 5; CLF_ATTEND_UNDECIDED follows the context. */
void
clf__attention_set_attend(clf_attention *att, int variant)
{
    att->attend = variant;
}

int
clf__attention_last_fused(const clf_attention *att)
{
    return att->last_fused;
}

/* For tests: scores above `bytes` are made in chunks of query rows. */
void
clf__attention_set_score_limit(clf_attention *att, size_t bytes)
{
    att->score_limit = bytes;
}
