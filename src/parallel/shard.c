/* The sharded (sequence-parallel) forward of one attention layer, run by
 * every shard on its own device (src/parallel/parallel.h).  Shard r holds
 * positions [bounds[r], bounds[r+1]) of every sequence.
 *
 *   Linformer:        E[:, R] P[R] and F[:, R] P_v[R] on the shard's rows
 *                     (P = X W^T + b, padding rows zeroed), allreduce_sum
 *                     of the k x width partials, then each shard attends its
 *                     own queries over the summed slots.
 *   causal Linformer: the slots of block j come from block j only; shard
 *                     boundaries fall on block boundaries, so each shard
 *                     makes its own blocks' slots and they are gathered
 *                     (allgatherv); the own-block window is local.
 *   full:             the shards' projected keys and values are gathered.
 *
 * The stages are the single-device forward's (projection, GEMMs, softmax,
 * the causal and mask kernels), on the layer's own workspaces. */
#include "parallel/parallel.h"

#include <stdlib.h>
#include <string.h>

#define TRY CLF_TRY

/* One shard's view of a forward. */
struct shard_fw {
    clf_attention *a;
    struct clf__layer_shape L; /* a's shape and settings, its context */
    const clf__shard_comm *comm;
    struct plan p;            /* of the whole sequence: hc, c, v_is_k, ... */
    size_t B, n, b0, nl;      /* batch, length, first position, count */
    const size_t *bounds;     /* comm->size + 1 entries */
    const unsigned char *gm;  /* B x n host mask, or NULL */
    cl_mem lmask;             /* B x nl mask on the device, or NULL */
    size_t width;             /* compressed K/V row: hc * dh */
    int gemm[CLF_ROLE_COUNT]; /* kernel choices for the shard's shapes */
    int softmax;
};

/* A workspace of at least `need` floats and never a NULL buffer (need 0
 * counts as 1). */
static int
ensure(clf_attention *a, enum ws_id id, size_t need)
{
    return clf__attention_ensure(a, id, need == 0 ? 1 : need);
}

/* Weight `which` of the shard's layer, NULL where it has none. */
static cl_mem
weight(const struct shard_fw *s, int which)
{
    return clf__layer_weight(s->a, which);
}

/* F, or E where the layer has one matrix for both sides. */
static cl_mem
weight_f(const struct shard_fw *s)
{
    cl_mem f = weight(s, CLF_PROJ_F);

    return f != NULL ? f : weight(s, CLF_PROJ_E);
}

static int
upload(clf_context *ctx, cl_mem m, const void *src, size_t bytes)
{
    cl_int err = clEnqueueWriteBuffer(ctx->queue, m, CL_TRUE, 0, bytes, src, 0,
                                      NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "upload of %zu bytes failed (%d)", bytes, err);
    return 0;
}

static int
download(clf_context *ctx, cl_mem m, void *dst, size_t bytes)
{
    cl_int err = clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0, bytes, dst, 0,
                                     NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "read-back of %zu bytes failed (%d)", bytes, err);
    return 0;
}

/* P = X W^T (+ bias) over the shard's rows, padding rows zeroed. */
static int
project_rows(struct shard_fw *s, cl_mem x, cl_mem w, cl_mem bias, cl_mem out)
{
    const size_t rows = s->B * s->nl;
    const struct clf__linear xw = {.rows = rows,
                                   .in = s->L.D,
                                   .out = s->L.dkv,
                                   .x = x,
                                   .w = w,
                                   .y = out,
                                   .bias = bias};

    TRY(clf__gemm_linear(s->L.ctx, s->gemm[CLF_ROLE_PROJ], &xw));
    if (s->lmask != NULL)
        TRY(clf__mask_rows(s->L.ctx, out, 0, out, 0, rows, s->L.dkv, s->lmask));
    return 0;
}

/* out (B x k x width) = E[:, b0 : b0 + nl] P per sequence (and per head
 * when E is): this shard's part of the compression. */
static int
compress_part(struct shard_fw *s, cl_mem e, cl_mem pr, cl_mem out)
{
    return clf__compress_rows(s->a, s->gemm[CLF_ROLE_COMP], s->B, s->p.hc, e,
                              s->b0, s->nl, pr, out);
}

/* Both sides' device buffers into one host buffer, run the exchange, and
 * the result back; `sides` is 1 (share_kv) or 2. */
static int
exchange_sum(struct shard_fw *s, cl_mem kbar, cl_mem vbar, size_t count,
             int sides)
{
    float *h = malloc(2 * count * sizeof *h);
    int rc;

    if (h == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    rc = download(s->L.ctx, kbar, h, count * sizeof *h);
    if (rc == 0 && sides == 2)
        rc = download(s->L.ctx, vbar, h + count, count * sizeof *h);
    if (rc == 0)
        rc = s->comm->allreduce_sum(s->comm->self, h, sides * count);
    if (rc == 0)
        rc = upload(s->L.ctx, kbar, h, count * sizeof *h);
    if (rc == 0 && sides == 2)
        rc = upload(s->L.ctx, vbar, h + count, count * sizeof *h);
    free(h);
    return rc;
}

/* Linformer keys and values: partial compressions, summed over shards. */
static int
linformer_kv(struct shard_fw *s, cl_mem x)
{
    clf_attention *a = s->a;
    const int cb = s->L.desc.compressed_bias != 0;
    cl_mem bk = s->L.desc.bias_k ? weight(s, CLF_BIAS_K) : NULL;
    cl_mem bv = s->L.desc.bias_v ? weight(s, CLF_BIAS_V) : NULL;
    cl_mem f = weight_f(s);
    cl_mem kbar = clf__layer_ws(a, WS_KBAR), vbar = clf__layer_ws(a, WS_VBAR);
    const size_t count = s->B * s->L.k * s->width;
    const int sides = s->p.v_is_k ? 1 : 2;

    TRY(project_rows(s, x, weight(s, CLF_WEIGHT_K), cb ? NULL : bk,
                     clf__layer_ws(a, WS_XE)));
    TRY(compress_part(s, weight(s, CLF_PROJ_E), clf__layer_ws(a, WS_XE), kbar));
    if (sides == 2) {
        TRY(project_rows(s, x, weight(s, CLF_WEIGHT_V), cb ? NULL : bv,
                         clf__layer_ws(a, WS_XF)));
        TRY(compress_part(s, f, clf__layer_ws(a, WS_XF), vbar));
    }
    TRY(exchange_sum(s, kbar, vbar, count, sides));
    /* fairseq's order: the bias once per slot, after the sum. */
    if (cb && bk != NULL)
        TRY(clf__add_rowsum_bias(s->L.ctx, kbar, s->B, s->L.k, s->p.hc, s->L.dh,
                                 NULL, 0, 0, bk, s->L.hkv > 1));
    if (cb && bv != NULL && sides == 2)
        TRY(clf__add_rowsum_bias(s->L.ctx, vbar, s->B, s->L.k, s->p.hc, s->L.dh,
                                 NULL, 0, 0, bv, s->L.hkv > 1));
    /* A slot bias (bias_proj) likewise once, after the sum. */
    TRY(clf__slot_bias(a, kbar, s->B, s->p.hc, CLF_BIAS_E));
    if (sides == 2)
        TRY(clf__slot_bias(a, vbar, s->B, s->p.hc,
                           weight(s, CLF_BIAS_F) != NULL ? CLF_BIAS_F
                                                         : CLF_BIAS_E));
    return 0;
}

/* Shard r's blocks: its first block and how many it holds. */
static void
shard_blocks(const struct shard_fw *s, int r, size_t *first, size_t *count)
{
    const size_t blk = s->L.desc.causal_block;
    const size_t lo = s->bounds[r], hi = s->bounds[r + 1];

    *first = lo / blk;
    *count = (hi - lo + blk - 1) / blk;
}

/* The slots of this shard's blocks (c per block, B x c*nbl x width) into
 * out: only blocks before the last query's block are ever seen; the rest
 * are zero. */
static int
compress_own_blocks(struct shard_fw *s, cl_mem e, cl_mem pr, cl_mem out)
{
    const size_t nbq = (s->n - 1) / s->L.desc.causal_block;
    size_t j0, nbl;
    struct clf__blocks bl;

    shard_blocks(s, s->comm->rank, &j0, &nbl);
    bl = (struct clf__blocks){s->B,
                              s->p.hc,
                              s->p.c,
                              j0,
                              j0 >= nbq ? 0 : (nbq - j0 < nbl ? nbq - j0 : nbl),
                              s->nl,
                              s->p.c * nbl};
    return clf__compress_blocks(s->a, s->gemm[CLF_ROLE_COMP], &bl, e, pr, out);
}

/* Gathers every shard's rows of `per` floats per unit (a block's c slots,
 * or a position) of both sides and scatters them into full B x total x per
 * host arrays, then onto the device.  units(r) gives shard r's first unit
 * and unit count. */
struct gather_spec {
    size_t per, total; /* floats per unit, units per sequence */
    int sides;
    void (*units)(const struct shard_fw *s, int r, size_t *first,
                  size_t *count);
};

static void
shard_positions(const struct shard_fw *s, int r, size_t *first, size_t *count)
{
    *first = s->bounds[r];
    *count = s->bounds[r + 1] - s->bounds[r];
}

static void
scatter(const struct shard_fw *s, const struct gather_spec *g,
        const float *recv, float *full)
{
    const size_t side = s->B * g->total * g->per;
    size_t off = 0, first, cnt, b;
    int r, v;

    for (r = 0; r < s->comm->size; r++) {
        g->units(s, r, &first, &cnt);
        for (v = 0; v < g->sides; v++)
            for (b = 0; b < s->B; b++) {
                memcpy(full + v * side + (b * g->total + first) * g->per,
                       recv + off, cnt * g->per * sizeof *full);
                off += cnt * g->per;
            }
    }
}

/* Each rank's share of the gathered floats into counts; their total. */
static size_t
gather_counts(const struct shard_fw *s, const struct gather_spec *g,
              size_t *counts)
{
    size_t first, cnt, total = 0;
    int r;

    for (r = 0; r < s->comm->size; r++) {
        g->units(s, r, &first, &cnt);
        counts[r] = (size_t)g->sides * s->B * cnt * g->per;
        total += counts[r];
    }
    return total;
}

/* This rank's mine floats downloaded into send (the keys' half, then the
 * values'), then every rank's into recv. */
static int
gather_exchange(struct shard_fw *s, const struct gather_spec *g, cl_mem kdev,
                cl_mem vdev, size_t mine, float *send, float *recv,
                const size_t *counts)
{
    if (mine > 0)
        TRY(download(s->L.ctx, kdev, send, mine / g->sides * sizeof *send));
    if (mine > 0 && g->sides == 2)
        TRY(download(s->L.ctx, vdev, send + mine / 2, mine / 2 * sizeof *send));
    return s->comm->allgatherv(s->comm->self, send, recv, counts);
}

static int
gather(struct shard_fw *s, const struct gather_spec *g, cl_mem kdev,
       cl_mem vdev, cl_mem kout, cl_mem vout)
{
    const size_t side = s->B * g->total * g->per;
    size_t mine, total, *counts;
    float *send, *recv, *full;
    int rc;

    counts = calloc((size_t)s->comm->size, sizeof *counts);
    if (counts == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    total = gather_counts(s, g, counts);
    mine = counts[s->comm->rank];
    send = malloc((mine ? mine : 1) * sizeof *send);
    recv = malloc((total ? total : 1) * sizeof *recv);
    full = calloc((size_t)g->sides * side, sizeof *full);
    rc = send && recv && full ? 0
                              : clf__fail(CLF_ENO_MEMORY, "out of host memory");
    if (rc == 0)
        rc = gather_exchange(s, g, kdev, vdev, mine, send, recv, counts);
    if (rc == 0) {
        scatter(s, g, recv, full);
        rc = upload(s->L.ctx, kout, full, side * sizeof *full);
    }
    if (rc == 0 && g->sides == 2)
        rc = upload(s->L.ctx, vout, full + side, side * sizeof *full);
    free(counts);
    free(send);
    free(recv);
    free(full);
    return rc;
}

int
clf__shard_gather_layout(clf_attention *att, size_t batch, size_t seq_len,
                         struct clf__gather_layout *out)
{
    clf_forward_opts o;
    struct plan p;
    struct clf__layer_shape L;

    memset(&o, 0, sizeof o);
    clf__layer_shape(att, &L);
    memset(out, 0, sizeof *out);
    o.causal = 1;
    TRY(clf__plan_make(att, L.mode, batch, seq_len, &o, &p));
    out->sides = p.v_is_k ? 1 : 2;
    if (!p.linformer) {
        out->per = L.dkv;
        out->unit = 1;
        out->units = seq_len;
        return 0;
    }
    if (!p.causal || p.c == 0)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "a causal Linformer layer needs a causal_block "
                         "(it has %zu)",
                         L.desc.causal_block);
    out->per = p.c * p.hc * L.dh;
    out->unit = L.desc.causal_block;
    out->units = L.k / p.c;
    return 0;
}

/* Causal Linformer keys and values: exact projections of the shard's rows
 * (for the own-block window) and every block's slots, gathered. */
static int
causal_kv(struct shard_fw *s, cl_mem x)
{
    clf_attention *a = s->a;
    cl_mem f = weight_f(s);
    cl_mem pk = clf__layer_ws(a, WS_XE), pv = clf__layer_ws(a, WS_XF);
    const struct gather_spec g = {s->p.c * s->width, s->L.k / s->p.c,
                                  s->p.v_is_k ? 1 : 2, shard_blocks};

    TRY(project_rows(s, x, weight(s, CLF_WEIGHT_K),
                     s->L.desc.bias_k ? weight(s, CLF_BIAS_K) : NULL, pk));
    TRY(compress_own_blocks(s, weight(s, CLF_PROJ_E), pk,
                            clf__layer_ws(a, WS_S)));
    if (g.sides == 2) {
        TRY(project_rows(s, x, weight(s, CLF_WEIGHT_V),
                         s->L.desc.bias_v ? weight(s, CLF_BIAS_V) : NULL, pv));
        TRY(compress_own_blocks(s, f, pv, clf__layer_ws(a, WS_O)));
    }
    return gather(s, &g, clf__layer_ws(a, WS_S), clf__layer_ws(a, WS_O),
                  clf__layer_ws(a, WS_KBAR), clf__layer_ws(a, WS_VBAR));
}

/* Full mode: every shard's projected keys and values, gathered. */
static int
full_kv(struct shard_fw *s, cl_mem x)
{
    clf_attention *a = s->a;
    const struct gather_spec g = {s->L.dkv, s->n, s->p.v_is_k ? 1 : 2,
                                  shard_positions};

    TRY(project_rows(s, x, weight(s, CLF_WEIGHT_K),
                     s->L.desc.bias_k ? weight(s, CLF_BIAS_K) : NULL,
                     clf__layer_ws(a, WS_XE)));
    if (g.sides == 2)
        TRY(project_rows(s, x, weight(s, CLF_WEIGHT_V),
                         s->L.desc.bias_v ? weight(s, CLF_BIAS_V) : NULL,
                         clf__layer_ws(a, WS_XF)));
    return gather(s, &g, clf__layer_ws(a, WS_XE), clf__layer_ws(a, WS_XF),
                  clf__layer_ws(a, WS_KBAR), clf__layer_ws(a, WS_VBAR));
}

/* Steps 3 to 5 of the shard's queries on the GEMM path (ways.c), over the
 * gathered keys of full mode (one sequence a pass, the global mask and the
 * causal triangle from the shard's first position) or over the summed (or
 * gathered) slots, with the own-block window in causal Linformer. */
static int
attend(struct shard_fw *s, cl_mem gmask)
{
    struct clf__steps st;

    clf__steps_shape(s->a, &s->p, &st);
    st.sh.at.n = s->nl;
    st.row0 = s->b0;
    st.seqs = s->p.linformer ? s->B : 1;
    st.chunk = s->nl;
    st.mask = s->p.linformer ? s->lmask : gmask;
    st.ways.score = s->gemm[CLF_ROLE_SCORE];
    st.ways.weigh = s->gemm[CLF_ROLE_WEIGH];
    st.ways.softmax = s->softmax;
    return clf__way(CLF_ATTEND_GEMM)->run(s->L.ctx, &st);
}

/* The workspaces a shard's forward uses, in the layer's own set. */
static int
workspaces(struct shard_fw *s)
{
    clf_attention *a = s->a;
    const size_t B = s->B, nl = s->nl, hq = s->L.hq;
    const size_t L = s->p.linformer ? s->L.k : s->n;
    size_t slots = L * s->width, sc = B * hq * nl * s->p.ld, nbl = 0, j0;

    if (!s->p.linformer)
        slots = s->n * s->L.dkv;
    if (s->p.linformer && s->p.causal) {
        shard_blocks(s, s->comm->rank, &j0, &nbl);
        /* WS_S and WS_O first hold the shard's blocks' slots */
        if (sc < B * s->p.c * nbl * s->width)
            sc = B * s->p.c * nbl * s->width;
    }
    if (!s->p.linformer)
        sc = hq * nl * s->n;
    TRY(ensure(a, WS_Q, B * nl * s->L.dq));
    TRY(ensure(a, WS_O,
               B * nl * s->L.dq > B * s->p.c * nbl * s->width
                   ? B * nl * s->L.dq
                   : B * s->p.c * nbl * s->width));
    TRY(ensure(a, WS_XE, B * nl * s->L.dkv));
    TRY(ensure(a, WS_XF, B * nl * s->L.dkv));
    TRY(ensure(a, WS_KBAR, B * slots));
    TRY(ensure(a, WS_VBAR, B * slots));
    TRY(ensure(a, WS_S, sc));
    TRY(ensure(a, WS_MASK, (B * nl + 3) / 4));
    /* A causal weighted sum's values without their non-finite entries. */
    TRY(ensure(a, WS_VF, s->p.causal ? B * slots : 1));
    TRY(ensure(a, WS_VNF, s->p.causal ? B * s->width : 1));
    return ensure(a, WS_XM, s->gm != NULL ? (B * s->n + 3) / 4 : 1);
}

/* Uploads the shard's slice of the mask (and the whole mask in full
 * mode). */
static int
masks(struct shard_fw *s, cl_mem *gmask)
{
    clf_attention *a = s->a;
    unsigned char *lm;
    size_t b;
    int rc;

    s->lmask = NULL;
    *gmask = NULL;
    if (s->gm == NULL)
        return 0;
    lm = malloc(s->B * s->nl);
    if (lm == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (b = 0; b < s->B; b++)
        memcpy(lm + b * s->nl, s->gm + b * s->n + s->b0, s->nl);
    rc = upload(s->L.ctx, clf__layer_ws(a, WS_MASK), lm, s->B * s->nl);
    free(lm);
    s->lmask = clf__layer_ws(a, WS_MASK);
    if (rc != 0 || s->p.linformer)
        return rc;
    *gmask = clf__layer_ws(a, WS_XM);
    return upload(s->L.ctx, *gmask, s->gm, s->B * s->n);
}

static int
check_bounds(const clf__shard_comm *comm, const size_t *bounds, size_t n,
             size_t unit)
{
    int r;

    if (bounds[0] != 0 || bounds[comm->size] != n)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "shard bounds run from %zu to %zu, not 0 to seq_len "
                         "%zu",
                         bounds[0], bounds[comm->size], n);
    for (r = 0; r < comm->size; r++) {
        if (bounds[r + 1] <= bounds[r])
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "shard %d holds no positions (bounds %zu..%zu)", r,
                             bounds[r], bounds[r + 1]);
        if (bounds[r] % unit != 0)
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "shard %d starts at position %zu, not on a "
                             "causal block boundary (block %zu)",
                             r, bounds[r], unit);
    }
    return 0;
}

/* The kernel choices for the shard's shapes, made by the layer's planner
 * on the whole sequence's plan with the shard's rows (its positions, one
 * pass: every sequence in Linformer mode, one a pass over the gathered
 * keys of full mode; compression after projection): stored, or timed now
 * (before any exchange) and stored. */
static int
shard_choose(struct shard_fw *s)
{
    struct plan q = s->p;

    q.n = s->nl;
    q.chunk = s->nl;
    q.seqs = s->p.linformer ? s->B : 1;
    q.compress_first_k = 0;
    TRY(clf__plan_choose_path(s->a, &q));
    memcpy(s->gemm, q.gemm, sizeof s->gemm);
    s->softmax = q.softmax;
    return 0;
}

static int
shard_setup(struct shard_fw *s, clf_attention *att, const clf__shard_comm *comm,
            const struct clf__shard_layer_args *la)
{
    clf_forward_opts o;

    memset(s, 0, sizeof *s);
    memset(&o, 0, sizeof o);
    clf__layer_shape(att, &s->L);
    /* The shard forward reads the weight buffers as float32: a layer that
     * stores them as binary16 is refused, never read as floats. */
    if (s->L.desc.precision == CLF_PRECISION_HALF)
        return clf__fail(CLF_EUNSUPPORTED,
                         "a forward split by positions takes float32 layers "
                         "only (this layer stores half-precision weights; "
                         "split by batch or run on one device)");
    /* Its partial compressions are sums over positions: E's only. */
    if (s->L.mode == CLF_MODE_LINFORMER &&
        s->L.desc.compression != CLF_COMPRESS_LINEAR)
        return clf__fail(CLF_EUNSUPPORTED,
                         "a forward split by positions takes the linear "
                         "compression only (this layer's is %s; split by "
                         "batch or run on one device)",
                         clf_compression_name(s->L.desc.compression));
    if (s->L.desc.slot_mask)
        return clf__fail(CLF_EUNSUPPORTED,
                         "a forward split by positions does not apply a "
                         "layer's slot_mask (linformer-pytorch's causal=True "
                         "mask; split by batch or run on one device)");
    o.causal = la->causal;
    s->a = att;
    s->comm = comm;
    s->B = la->batch;
    s->n = la->seq_len;
    s->bounds = la->bounds;
    s->gm = la->mask;
    TRY(clf__plan_make(att, s->L.mode, s->B, s->n, &o, &s->p));
    TRY(clf__attention_check_weights(att, s->p.linformer));
    TRY(check_bounds(comm, la->bounds, s->n,
                     s->p.linformer && s->p.causal ? s->L.desc.causal_block
                                                   : 1));
    s->b0 = la->bounds[comm->rank];
    s->nl = la->bounds[comm->rank + 1] - s->b0;
    s->width = s->p.hc * s->L.dh;
    TRY(shard_choose(s));
    /* The exchange between the phases fixes the attention to scores,
     * softmax and weighting as separate GEMM steps. */
    clf__lock(s->L.ctx);
    clf__choice_fixed(s->L.ctx, CLF_KIND_ATTEND, CLF_ATTEND_GEMM - 1,
                      "the only way of a forward split by positions");
    clf__unlock(s->L.ctx);
    return workspaces(s);
}

int
clf__shard_attention(clf_attention *att, const clf__shard_comm *comm,
                     const struct clf__shard_layer_args *la, cl_mem x, cl_mem y)
{
    struct shard_fw s;
    cl_mem gmask;
    struct clf__linear xw;

    TRY(shard_setup(&s, att, comm, la));
    TRY(masks(&s, &gmask));
    xw = (struct clf__linear){.rows = s.B * s.nl,
                              .in = s.L.D,
                              .out = s.L.dq,
                              .x = x,
                              .w = weight(&s, CLF_WEIGHT_Q),
                              .y = clf__layer_ws(att, WS_Q),
                              .bias = s.L.desc.bias_q ? weight(&s, CLF_BIAS_Q)
                                                      : NULL};
    TRY(clf__gemm_linear(s.L.ctx, s.gemm[CLF_ROLE_PROJ], &xw));
    if (!s.p.linformer)
        TRY(full_kv(&s, x));
    else
        TRY(s.p.causal ? causal_kv(&s, x) : linformer_kv(&s, x));
    TRY(attend(&s, gmask));
    xw = (struct clf__linear){
        .rows = s.B * s.nl,
        .in = s.L.dq,
        .out = s.L.D,
        .x = clf__layer_ws(att, WS_O),
        .w = weight(&s, CLF_WEIGHT_OUT),
        .y = y,
        .bias = s.L.desc.bias_out ? weight(&s, CLF_BIAS_OUT) : NULL};
    TRY(clf__gemm_linear(s.L.ctx, s.gemm[CLF_ROLE_PROJ], &xw));
    if (s.lmask != NULL)
        TRY(clf__mask_rows(s.L.ctx, y, 0, y, 0, s.B * s.nl, s.L.D, s.lmask));
    return 0;
}
