/* The forward of the multi-head Linformer attention layer (the pipeline of
 * docs/design.md, section 2): plan the shape (plan.c, every
 * kernel choice resolved), then enqueue the stages in order.
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
 * distinct compressed K/V heads: hq when E is per head, else hkv. */
#include "layer/layer_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int
clf__attention_ensure(clf_attention *a, enum ws_id id, size_t need)
{
    struct workspace *w = &a->ws[id];
    cl_int err;

    if (need <= w->cap)
        return 0;
    if (w->mem != NULL)
        clReleaseMemObject(w->mem);
    w->mem = NULL;
    w->cap = 0;
    w->mem = clf__mem_create(a->ctx, CL_MEM_READ_WRITE, need * sizeof(float),
                             NULL, &err, clf__ws_names[id]);
    if (w->mem == NULL)
        return clf__fail(err, "%s: clCreateBuffer of %zu bytes failed (%d)",
                         clf__ws_names[id], need * sizeof(float), err);
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
            total += clf__half_weight_bytes(att, i) +
                     clf__gemm_kept_bytes(att->ctx, att->w[i]);
    for (i = 0; i < WS_COUNT; i++)
        total += att->ws[i].cap * sizeof(float);
    total += clf__half_scratch_bytes(att);
    *bytes = total;
    return 0;
}

#define TRY CLF_TRY

/* One side's weights for its GEMMs (W_k and E, or W_v and F): the buffers
 * the GEMMs read, the ways they take (the plan's for the projection and
 * the compression, with CLF_GEMM_HALF_B or _A where read as binary16) and
 * which weight E is (the row sums read its float32 copy). */
struct side {
    cl_mem w, e;
    int wway, eway;
    int e_which;
    int b_which; /* the slot bias of E or F (bias_proj) */
};

/* Compress first, the bias: rowsum(E diag(mask)) b^T added to Kbar (or b
 * itself once per slot in fairseq's order). */
static int
compress_bias(clf_attention *a, const struct plan *p, const struct side *sd,
              cl_mem bias, enum ws_id rowsum, cl_mem out)
{
    clf_context *ctx = a->ctx;
    const size_t k = a->k, nE = a->nE, hc = p->hc, dh = a->dh;
    cl_mem rs = a->ws[rowsum].mem, e;

    if (bias == NULL)
        return 0;
    if (a->desc.compressed_bias)
        return clf__add_rowsum_bias(ctx, out, p->B, k, hc, dh, NULL, 0, 0, bias,
                                    a->hkv > 1);
    TRY(clf__half_as_float(a, sd->e_which, &e));
    if (p->masked)
        TRY(clf__masked_rowsum(ctx, e, nE * k, p->n, a->N, p->B, p->mask, rs));
    else
        TRY(clf__rowsum(ctx, e, nE * k, p->n, a->N, rs));
    return clf__add_rowsum_bias(ctx, out, p->B, k, hc, dh, rs,
                                p->masked ? nE * k : 0, nE > 1, bias,
                                a->hkv > 1);
}

/* Compress first: Xbar = E[:, :n] X per sequence (and per head when E is)
 * into ws, unless reuse_work (ws already holds it), then Kbar = Xbar W^T. */
static int
compress_first(clf_attention *a, const struct plan *p, cl_mem x, size_t xoff,
               const struct side *sd, cl_mem ws, cl_mem out, int reuse_work)
{
    clf_context *ctx = a->ctx;
    const cl_mem e = sd->e, w = sd->w;
    const size_t B = p->B, n = p->n, k = a->k, D = a->D, N = a->N;
    const size_t dh = a->dh, hc = p->hc, nE = a->nE, width = hc * dh;
    size_t b;

    /* E X: per sequence, or per head of each sequence where E is. */
    struct clf__gemm_args ex = {.m = k,
                                .n = D,
                                .k = n,
                                .alpha = 1.0f,
                                .a = e,
                                .lda = N,
                                .b = x,
                                .b_off = xoff,
                                .ldb = D,
                                .b_stride = n * D,
                                .c = ws,
                                .ldc = D,
                                .c_stride = k * D,
                                .batch = B};
    /* Xbar W^T, likewise. */
    struct clf__gemm_args xw = {.trans_b = 1,
                                .m = B * k,
                                .n = a->dkv,
                                .k = D,
                                .alpha = 1.0f,
                                .a = ws,
                                .lda = D,
                                .b = w,
                                .ldb = D,
                                .c = out,
                                .ldc = a->dkv,
                                .batch = 1};

    if (!reuse_work && nE == 1)
        TRY(clf__gemm(ctx, sd->eway, &ex));
    ex.a_stride = k * N, ex.b_stride = 0, ex.batch = nE;
    for (b = 0; !reuse_work && nE > 1 && b < B; b++) {
        ex.b_off = xoff + b * n * D, ex.c_off = b * nE * k * D;
        TRY(clf__gemm(ctx, sd->eway, &ex));
    }
    if (nE == 1)
        return clf__gemm(ctx, sd->wway, &xw);
    xw.m = k, xw.n = dh, xw.a_stride = k * D, xw.ldc = width;
    xw.b_stride = a->hkv > 1 ? dh * D : 0, xw.c_stride = dh, xw.batch = hc;
    for (b = 0; b < B; b++) {
        xw.a_off = b * nE * k * D, xw.c_off = b * k * width;
        TRY(clf__gemm(ctx, sd->wway, &xw));
    }
    return 0;
}

int
clf__compress_rows(clf_attention *a, int way, size_t B, size_t hc, cl_mem e,
                   size_t e_col, size_t n, cl_mem p, cl_mem out)
{
    const size_t k = a->k, dh = a->dh, dkv = a->dkv, width = hc * dh;
    /* per sequence, or per head of each sequence where E is */
    struct clf__gemm_args ep = {.m = k,
                                .n = dkv,
                                .k = n,
                                .alpha = 1.0f,
                                .a = e,
                                .a_off = e_col,
                                .lda = a->N,
                                .b = p,
                                .ldb = dkv,
                                .b_stride = n * dkv,
                                .c = out,
                                .ldc = dkv,
                                .c_stride = k * dkv,
                                .batch = B};
    size_t b;

    if (a->nE == 1)
        return clf__gemm(a->ctx, way, &ep);
    ep.n = dh, ep.a_stride = k * a->N, ep.b_stride = a->hkv > 1 ? dh : 0;
    ep.ldc = width, ep.c_stride = dh, ep.batch = hc;
    for (b = 0; b < B; b++) {
        ep.b_off = b * n * dkv, ep.c_off = b * k * width;
        TRY(clf__gemm(a->ctx, way, &ep));
    }
    return 0;
}

/* Project first: P = X W^T + b (padding rows zeroed) into ws, then
 * Kbar = E[:, :n] P. */
static int
project_first(clf_attention *a, const struct plan *p, cl_mem x, size_t xoff,
              const struct side *sd, cl_mem bias, cl_mem ws, cl_mem out)
{
    clf_context *ctx = a->ctx;
    const size_t B = p->B, n = p->n, dkv = a->dkv;
    const struct clf__linear xw = {.rows = B * n,
                                   .in = a->D,
                                   .out = dkv,
                                   .x = x,
                                   .x_off = xoff,
                                   .w = sd->w,
                                   .y = ws,
                                   .bias =
                                       a->desc.compressed_bias ? NULL : bias};

    TRY(clf__gemm_linear(ctx, sd->wway, &xw));
    if (p->masked)
        TRY(clf__mask_rows(ctx, ws, 0, ws, 0, B * n, dkv, p->mask));
    TRY(clf__compress_rows(a, sd->eway, B, p->hc, sd->e, 0, n, ws, out));
    if (bias != NULL && a->desc.compressed_bias)
        TRY(clf__add_rowsum_bias(ctx, out, B, a->k, p->hc, a->dh, NULL, 0, 0,
                                 bias, a->hkv > 1));
    return 0;
}

/* Produces one side's compressed matrix (Kbar from E, W_k, b_k, or Vbar
 * from F, W_v, b_v) for every sequence of the batch.  With a padding mask,
 * x is already masked (compress-first), or the projection is masked after
 * it is made (project-first): either way E diag(mask). */
static int
compress_side(clf_attention *a, const struct plan *p, cl_mem x, size_t xoff,
              const struct side *sd, cl_mem bias, enum ws_id work,
              enum ws_id rowsum, cl_mem out, int reuse_work)
{
    cl_mem ws = a->ws[work].mem;

    if (!p->compress_first_k)
        TRY(project_first(a, p, x, xoff, sd, bias, ws, out));
    else {
        TRY(compress_first(a, p, x, xoff, sd, ws, out, reuse_work));
        TRY(compress_bias(a, p, sd, bias, rowsum, out));
    }
    return clf__slot_bias(a, out, p->B, p->hc, sd->b_which);
}

int
clf__slot_bias(clf_attention *a, cl_mem out, size_t B, size_t hc, int which)
{
    if (!a->desc.bias_proj)
        return 0;
    return clf__add_rowsum_bias(a->ctx, out, B, a->k, hc, a->dh, a->w[which], 0,
                                a->nE > 1, a->ones, 0);
}

/* P = X W^T + b over all rows, padding rows zeroed: the exact keys or values
 * of full mode and of the causal window. */
static int
project(clf_attention *a, const struct plan *p, cl_mem x, size_t xoff,
        const struct side *sd, cl_mem bias, cl_mem out)
{
    const size_t rows = p->B * p->n;
    const struct clf__linear xw = {.rows = rows,
                                   .in = a->D,
                                   .out = a->dkv,
                                   .x = x,
                                   .x_off = xoff,
                                   .w = sd->w,
                                   .y = out,
                                   .bias = bias};

    TRY(clf__gemm_linear(a->ctx, sd->wway, &xw));
    if (p->masked)
        TRY(clf__mask_rows(a->ctx, out, 0, out, 0, rows, a->dkv, p->mask));
    return 0;
}

int
clf__compress_blocks(clf_attention *a, int way, const struct clf__blocks *bl,
                     cl_mem e, cl_mem p, cl_mem out)
{
    const size_t blk = a->desc.causal_block, c = bl->c, N = a->N;
    const size_t dh = a->dh, dkv = a->dkv, width = bl->hc * dh;
    const float zero = 0.0f;
    /* Block j's c rows of E times its blk positions, a strided batch over
     * the blocks; per head where E is per head. */
    struct clf__gemm_args ep = {.m = c,
                                .n = a->nE == 1 ? dkv : dh,
                                .k = blk,
                                .alpha = 1.0f,
                                .a = e,
                                .lda = N,
                                .a_stride = c * N + blk,
                                .b = p,
                                .ldb = dkv,
                                .b_stride = blk * dkv,
                                .c = out,
                                .ldc = width,
                                .c_stride = c * width,
                                .batch = bl->count};
    size_t b, h;
    cl_int err;

    err = clEnqueueFillBuffer(a->ctx->queue, out, &zero, sizeof zero, 0,
                              bl->B * bl->out_rows * width * sizeof(float), 0,
                              NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "clearing compressed keys failed (%d)", err);
    if (bl->count == 0 || c == 0)
        return 0;
    for (b = 0; b < bl->B; b++)
        for (h = 0; h < (a->nE == 1 ? 1 : bl->hc); h++) {
            ep.a_off = h * a->k * N + bl->j0 * (c * N + blk);
            ep.b_off = b * bl->p_rows * dkv + (a->hkv > 1 ? h * dh : 0);
            ep.c_off = b * bl->out_rows * width + h * dh;
            TRY(clf__gemm(a->ctx, way, &ep));
        }
    return 0;
}

/* Causal Linformer compression of the whole sequence: only blocks before
 * the last query's block are ever seen; the rest of Kbar is zero (and
 * masked out of every softmax). */
static int
compress_blocks(clf_attention *a, const struct plan *p, const struct side *sd,
                cl_mem pk, cl_mem out)
{
    const struct clf__blocks bl = {
        p->B, p->hc, p->c, 0, (p->n - 1) / a->desc.causal_block, p->n, a->k};

    return clf__compress_blocks(a, sd->eway, &bl, sd->e, pk, out);
}

/* Compression of projected keys (value 0) or values: the windowed
 * compressions (compression.c) or causal Linformer's blocks. */
static int
compress_projected(clf_attention *a, const struct plan *p, int value,
                   const struct side *sd, cl_mem src, cl_mem out)
{
    if (a->desc.compression != CLF_COMPRESS_LINEAR)
        return clf__compress_windows(a, p, value, src, out);
    return compress_blocks(a, p, sd, src, out);
}

static const char *const stage_names[CLF_STAGE_COUNT] = {
    "projection",   "compression", "scores", "softmax",
    "weighted_sum", "fused",       "output"};

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
    if (att->nmarks < 2 || att->mark_stage[att->nmarks - 1] != CLF_STAGE_COUNT)
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

/* The weights of one side: W_k and E (value 0), or W_v and F (value 1; E
 * where F is E).  Half-stored weights are read natively where the plan
 * says so, else widened now into the context's scratch buffers, which the
 * other side then reuses (half.c). */
static int
side_weights(clf_attention *a, const struct plan *p, int value, struct side *sd)
{
    const int pe = value && a->wsize[CLF_PROJ_F] ? CLF_PROJ_F : CLF_PROJ_E;
    int half = 0;

    memset(sd, 0, sizeof *sd);
    sd->e_which = pe;
    sd->b_which = pe == CLF_PROJ_F ? CLF_BIAS_F : CLF_BIAS_E;
    TRY(clf__half_weight(a, p->half_native, value ? CLF_WEIGHT_V : CLF_WEIGHT_K,
                         &sd->w, &half));
    sd->wway = p->gemm[CLF_ROLE_PROJ] | (half ? CLF_GEMM_HALF_B : 0);
    if (!p->linformer || a->desc.compression != CLF_COMPRESS_LINEAR)
        return 0; /* no E GEMM (compression.c reads its own weights) */
    TRY(clf__half_weight(a, p->half_native, pe, &sd->e, &half));
    sd->eway = p->gemm[CLF_ROLE_COMP] | (half ? CLF_GEMM_HALF_A : 0);
    return 0;
}

/* Step 2: keys and values, compressed, or projected in full mode. */
static int
keys_values(clf_attention *a, const struct plan *p, cl_mem x, size_t xoff)
{
    cl_mem bk = a->desc.bias_k ? a->w[CLF_BIAS_K] : NULL;
    cl_mem bv = a->desc.bias_v ? a->w[CLF_BIAS_V] : NULL;
    struct side ks, vs;
    cl_mem kbar = a->ws[WS_KBAR].mem, vbar = a->ws[WS_VBAR].mem;
    cl_mem xc = x;
    size_t xcoff = xoff;

    TRY(side_weights(a, p, 0, &ks));
    if (p->linformer &&
        (p->causal || a->desc.compression != CLF_COMPRESS_LINEAR)) {
        cl_mem pk = a->ws[WS_XE].mem;
        cl_mem pv = p->v_is_k ? pk : a->ws[WS_XF].mem;
        TRY(project(a, p, x, xoff, &ks, bk, pk));
        TRY(compress_projected(a, p, 0, &ks, pk, kbar));
        if (p->v_is_k)
            return 0;
        TRY(side_weights(a, p, 1, &vs));
        TRY(project(a, p, x, xoff, &vs, bv, pv));
        return compress_projected(a, p, 1, &vs, pv, vbar);
    }
    if (!p->linformer) {
        TRY(project(a, p, x, xoff, &ks, bk, kbar));
        if (p->v_is_k)
            return 0;
        TRY(side_weights(a, p, 1, &vs));
        return project(a, p, x, xoff, &vs, bv, vbar);
    }
    if (p->masked && p->compress_first_k) {
        xc = a->ws[WS_XM].mem;
        xcoff = 0;
        TRY(clf__mask_rows(a->ctx, x, xoff, xc, 0, p->B * p->n, a->D, p->mask));
    }
    TRY(compress_side(a, p, xc, xcoff, &ks, bk, WS_XE, WS_RSE, kbar, 0));
    if (p->v_is_k)
        return 0;
    TRY(side_weights(a, p, 1, &vs));
    return compress_side(a, p, xc, xcoff, &vs, bv, p->xf_is_xe ? WS_XE : WS_XF,
                         WS_RSF, vbar, p->xf_is_xe);
}

/* The forward's stage marks, for the steps' table (ways.c). */
static int
mark_stage(void *user, int stage)
{
    return mark(user, stage);
}

/* Enqueues the stages of a planned forward, in order; with the context
 * locked, so that no other thread's kernel arguments come between. */
static int
run_forward(clf_attention *a, const struct plan *p, cl_mem x, size_t xoff,
            cl_mem y, size_t yoff)
{
    clf_context *ctx = a->ctx;
    const size_t B = p->B, n = p->n, D = a->D, dq = a->dq;
    cl_mem *w = a->w;
    const int proj = p->gemm[CLF_ROLE_PROJ];
    cl_mem wq, wo;
    int hq, ho;
    struct clf__steps st;
    struct clf__linear xw;

    clf__half_begin(ctx);
    a->last_way = p->way;
    clf__steps_shape(a, p, &st);
    st.mark = mark_stage;
    st.user = a;

    /* 1. Q = X W_q^T + b_q over all B*n rows. */
    TRY(mark(a, CLF_STAGE_PROJECTION));
    TRY(clf__half_weight(a, p->half_native, CLF_WEIGHT_Q, &wq, &hq));
    xw = (struct clf__linear){.rows = B * n,
                              .in = D,
                              .out = dq,
                              .x = x,
                              .x_off = xoff,
                              .w = wq,
                              .y = st.q,
                              .bias = a->desc.bias_q ? w[CLF_BIAS_Q] : NULL};
    TRY(clf__gemm_linear(ctx, proj | (hq ? CLF_GEMM_HALF_B : 0), &xw));
    /* 2. Keys and values. */
    TRY(mark(a, CLF_STAGE_COMPRESSION));
    TRY(keys_values(a, p, x, xoff));
    /* 3 to 5: attention over the slots (or positions), the plan's way. */
    TRY(clf__way(p->way)->run(ctx, &st));
    /* 6. Y = O W_o^T + b_o; padding rows are zeros. */
    TRY(mark(a, CLF_STAGE_OUTPUT));
    TRY(clf__half_weight(a, p->half_native, CLF_WEIGHT_OUT, &wo, &ho));
    xw =
        (struct clf__linear){.rows = B * n,
                             .in = dq,
                             .out = D,
                             .x = st.o,
                             .w = wo,
                             .y = y,
                             .y_off = yoff,
                             .bias = a->desc.bias_out ? w[CLF_BIAS_OUT] : NULL};
    TRY(clf__gemm_linear(ctx, proj | (ho ? CLF_GEMM_HALF_B : 0), &xw));
    if (p->masked)
        TRY(clf__mask_rows(ctx, y, yoff, y, yoff, B * n, D, p->mask));
    return mark(a, CLF_STAGE_COUNT);
}

static int
run_forward_locked(clf_attention *a, const struct plan *p, cl_mem x,
                   size_t xoff, cl_mem y, size_t yoff)
{
    int rc;

    clf__lock(a->ctx);
    rc = run_forward(a, p, x, xoff, y, yoff);
    clf__unlock(a->ctx);
    return rc;
}

/* Builds the mask the options describe and uploads it (blocking, so the
 * caller's arrays may go away when the call returns). */
static int
upload_mask(clf_attention *a, const struct plan *p,
            const clf_forward_opts *opts)
{
    const size_t bn = p->B * p->n;
    cl_int err;

    if (a->host_mask_cap < bn) {
        unsigned char *m = realloc(a->host_mask, bn);
        if (m == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        a->host_mask = m;
        a->host_mask_cap = bn;
    }
    TRY(clf__mask_build(a->host_mask, p->B, p->n, opts->lengths,
                        opts->key_mask));
    err = clEnqueueWriteBuffer(a->ctx->queue, a->ws[WS_MASK].mem, CL_TRUE, 0,
                               bn, a->host_mask, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "mask upload failed (%d)", err);
    return 0;
}

/* The plan with its kernel choices, workspaces and mask.  dev_mask: the
 * padding mask already on the device (batch x n bytes, as the options
 * describe it), or NULL to upload it from the options. */
static int
prepare(clf_attention *a, size_t B, size_t n, const clf_forward_opts *opts,
        struct plan *p, int host, cl_mem dev_mask)
{
    int i;

    TRY(clf__plan_make(a, a->mode, B, n, opts, p));
    TRY(clf__attention_check_weights(a, p->linformer));
    TRY(clf__plan_choose(a, p));
    if (host) {
        p->need[WS_X] = B * n * a->D;
        p->need[WS_Y] = B * n * a->D;
    }
    for (i = 0; i < WS_COUNT; i++)
        TRY(clf__attention_ensure(a, (enum ws_id)i, p->need[i]));
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
                         size_t seq_len, float *y, const clf_forward_opts *opts)
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
    err = clEnqueueWriteBuffer(att->ctx->queue, att->ws[WS_X].mem, CL_FALSE, 0,
                               bytes, x, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "input upload of %zu bytes failed (%d)", bytes,
                         err);
    TRY(run_forward_locked(att, &p, att->ws[WS_X].mem, 0, att->ws[WS_Y].mem,
                           0));
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
        return clf__fail(CLF_EWRONG_CONTEXT, "%s belongs to another cl_context",
                         name);
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
    TRY(clf__plan_make(att, att->mode, batch, seq_len, opts, &p));
    TRY(check_caller_buffer(att, x, "x", x_offset, batch * seq_len * att->D));
    TRY(check_caller_buffer(att, y, "y", y_offset, batch * seq_len * att->D));
    TRY(prepare(att, batch, seq_len, opts, &p, 0, dev_mask));
    return run_forward_locked(att, &p, x, x_offset, y, y_offset);
}

CLF_EXTERN int
clf_attention_forward_cl_ex(clf_attention *att, cl_mem x, size_t x_offset,
                            cl_mem y, size_t y_offset, size_t batch,
                            size_t seq_len, const clf_forward_opts *opts)
{
    return clf__attention_forward_cl_mask(att, x, x_offset, y, y_offset, batch,
                                          seq_len, opts, NULL);
}

CLF_EXTERN int
clf_attention_forward_cl(clf_attention *att, cl_mem x, size_t x_offset,
                         cl_mem y, size_t y_offset, size_t batch,
                         size_t seq_len)
{
    return clf_attention_forward_cl_ex(att, x, x_offset, y, y_offset, batch,
                                       seq_len, NULL);
}
/* The layer's resolved desc (head_dim filled in). */
void
clf__layer_shape(const clf_attention *a, struct clf__layer_shape *out)
{
    out->ctx = a->ctx;
    out->desc = a->desc;
    out->mode = a->mode;
    out->D = a->D, out->hq = a->hq, out->hkv = a->hkv, out->dh = a->dh;
    out->dq = a->dq, out->dkv = a->dkv, out->N = a->N, out->k = a->k;
    out->nE = a->nE;
}

cl_mem
clf__layer_ws(const clf_attention *a, enum ws_id id)
{
    return a->ws[id].mem;
}

void
clf__attention_desc(const clf_attention *att, clf_attention_desc *out)
{
    *out = att->desc;
}

/* For tests: force the fused kernel (CLF_ATTEND_FUSED), the streaming
 * kernel (CLF_ATTEND_FLASH), the work-group streaming kernel
 * (CLF_ATTEND_FLASHWG, where it applies) or the GEMM path for steps 3 to 5;
 * CLF_ATTEND_UNDECIDED follows the context. */
void
clf__attention_set_attend(clf_attention *att, int variant)
{
    att->attend = variant;
}

int
clf__attention_last_fused(const clf_attention *att)
{
    return att->last_way == CLF_ATTEND_FUSED;
}

int
clf__attention_last_flash(const clf_attention *att)
{
    return att->last_way == CLF_ATTEND_FLASH;
}

int
clf__attention_last_flash_wg(const clf_attention *att)
{
    return att->last_way == CLF_ATTEND_FLASHWG;
}

/* For tests: scores above `bytes` are made in chunks of query rows. */
void
clf__attention_set_score_limit(clf_attention *att, size_t bytes)
{
    att->score_limit = bytes;
}
