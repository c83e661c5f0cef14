/* Trained models from safetensors files: the lucidrains `linformer` layouts
 * (self-attention, the Linformer encoder stack, sequential or reversible,
 * and LinformerLM), fairseq's Linformer attention and encoder layer, and
 * the linformer-pytorch package's MHAttention, Linformer and LinformerLM
 * and the single-head class.
 *
 *   lucidrains, pre-LN:  x += Attn(LN1(x));  x += W2 GELU(W1 LN2(x) + b1) + b2
 *   reversible:          x1 = x2 = x;  x1 += f(x2);  x2 += g(x1);  x1 + x2
 *   post-LN (fairseq, linformer-pytorch), each layer:
 *                        x = LN1(x + Attn(x));  x = LN2(x + FFN(x))
 *                        (FFN with GELU or ReLU, or none)
 *   LM:                  x = tok[ids] + pos[0..n);  stack;  x W^T + b
 * Layer norm: eps 1e-5, biased variance; GELU: exact erf.
 *
 * This file: the model object and its forward; the layouts are in
 * layouts.c and loading in model_load.c and load_lp.c. */
#include "model/model.h"
#include "model/model_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LN_EPS 1e-5f

void
clf__model_shard_hook(clf_model *m, clf__model_attend_fn fn, void *user,
                      size_t pos_offset)
{
    m->shard_attend = fn;
    m->shard_user = user;
    m->pos_offset = pos_offset;
}

clf_attention *
clf__model_layer(const clf_model *m, size_t l)
{
    return l < m->info.layers ? m->layers[l].att : NULL;
}

#define TRY CLF_TRY

static void
release(cl_mem *m)
{
    if (*m != NULL)
        clReleaseMemObject(*m);
    *m = NULL;
}

/* A weight registered with the GEMM floor (model_load.c, keep_transposed). */
static void
release_kept(clf_context *ctx, cl_mem *m)
{
    if (*m != NULL)
        clf__gemm_forget(ctx, *m);
    release(m);
}

CLF_EXTERN void
clf_model_destroy(clf_model *m)
{
    size_t l;
    int i;

    if (m == NULL)
        return;
    if (m->ctx != NULL)
        clFinish(m->ctx->queue);
    for (l = 0; m->layers != NULL && l < m->info.layers; l++) {
        struct model_layer *L = &m->layers[l];
        clf_attention_destroy(L->att);
        release(&L->ln1_g);
        release(&L->ln1_b);
        release(&L->ln2_g);
        release(&L->ln2_b);
        release_kept(m->ctx, &L->w1);
        release(&L->b1);
        release_kept(m->ctx, &L->w2);
        release(&L->b2);
        release_kept(m->ctx, &L->wr);
        release(&L->br);
    }
    free(m->layers);
    release(&m->tok);
    release(&m->pos);
    release_kept(m->ctx, &m->logit_w);
    release(&m->logit_b);
    for (i = 0; i < MW_COUNT; i++)
        release(&m->ws[i]);
    free(m->host_mask);
    free(m->host_ids);
    for (l = 0; l < m->n_unexpected; l++)
        free(m->unexpected[l]);
    free(m->unexpected);
    free(m);
}

int
clf__meta_size_get(const clf_safetensors *st, const char *key, size_t *out)
{
    const char *v = clf_safetensors_metadata(st, key);
    char *end;
    unsigned long long x;

    *out = 0;
    if (v == NULL)
        return 0;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (*v == '\0' || *v == '-' || *end != '\0' || errno != 0 || x > SIZE_MAX)
        return clf__fail(CLF_EFORMAT,
                         "metadata %s = \"%s\" is not a non-negative integer",
                         key, v);
    *out = (size_t)x;
    return 0;
}

int
clf__meta_sizes_agree(const clf_safetensors *st, const struct clf__meta_size *k,
                      size_t n)
{
    const char *v;
    size_t i, meta;

    for (i = 0; i < n; i++) {
        v = clf_safetensors_metadata(st, k[i].key);
        if (v == NULL || strcmp(v, "None") == 0 || k[i].value == 0)
            continue;
        TRY(clf__meta_size_get(st, k[i].key, &meta));
        if (meta != k[i].value)
            return clf__fail(CLF_ESHAPE_MISMATCH,
                             "metadata %s = %zu disagrees with the tensor "
                             "shapes, which give %s %zu%s",
                             k[i].key, meta, k[i].what, k[i].value, k[i].note);
    }
    return 0;
}

/* Lists the tensors not marked in used[] (one flag per file tensor);
 * unless the caller allows them, the first is an error. */
int
clf__model_unexpected(clf_model *m, const clf_safetensors *st, const char *used,
                      int allow, clf_layout layout)
{
    size_t n = clf_safetensors_count(st), i;
    clf_tensor_info ti;

    for (i = 0; i < n; i++) {
        if (used[i] || clf_safetensors_info(st, i, &ti) != 0)
            continue;
        if (m->unexpected == NULL) {
            m->unexpected = calloc(n, sizeof *m->unexpected);
            if (m->unexpected == NULL)
                return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        }
        m->unexpected[m->n_unexpected] = strdup(ti.name);
        if (m->unexpected[m->n_unexpected] == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        m->n_unexpected++;
    }
    if (m->n_unexpected > 0 && !allow)
        return clf__fail(CLF_EWEIGHT_UNUSED,
                         "tensor %s is not part of a %s model (%zu unexpected "
                         "tensor%s); allow unexpected tensors to skip them",
                         m->unexpected[0], clf_layout_name(layout),
                         m->n_unexpected, m->n_unexpected == 1 ? "" : "s");
    return 0;
}

CLF_EXTERN size_t
clf_model_unexpected_count(const clf_model *m)
{
    return m != NULL ? m->n_unexpected : 0;
}

CLF_EXTERN const char *
clf_model_unexpected_name(const clf_model *m, size_t index)
{
    if (m == NULL || index >= m->n_unexpected)
        return NULL;
    return m->unexpected[index];
}

CLF_EXTERN int
clf_model_info_get(const clf_model *m, clf_model_info *out)
{
    if (m == NULL || out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         m == NULL ? "m" : "out");
    *out = m->info;
    return 0;
}

CLF_EXTERN int
clf_model_set_mode(clf_model *m, clf_mode mode)
{
    size_t l;

    if (m == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "m is NULL");
    for (l = 0; l < m->info.layers; l++)
        TRY(clf_attention_set_mode(m->layers[l].att, mode));
    m->mode = mode;
    return 0;
}

CLF_EXTERN int
clf_model_get_mode(const clf_model *m, clf_mode *out)
{
    if (m == NULL || out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL", m ? "out" : "m");
    *out = m->mode;
    return 0;
}

/* ------------------------------------------------------------- forward */

static int
ensure(clf_model *m, enum model_ws id, size_t bytes)
{
    cl_int err;

    if (bytes <= m->cap[id])
        return 0;
    release(&m->ws[id]);
    m->cap[id] = 0;
    if (m->ctx->info.max_alloc != 0 && bytes > m->ctx->info.max_alloc)
        return clf__fail(CLF_ETOO_LARGE,
                         "a model workspace of %zu bytes exceeds the "
                         "device's largest allocation, %llu bytes",
                         bytes, m->ctx->info.max_alloc);
    m->ws[id] = clf__mem_create(m->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err,
                                "model workspace");
    if (m->ws[id] == NULL)
        return clf__fail(err,
                         "model workspace of %zu bytes: clCreateBuffer "
                         "failed (%d)",
                         bytes, err);
    m->cap[id] = bytes;
    return 0;
}

/* The way of the feed-forward GEMMs over `rows` rows, resolved for the
 * model's own shape (rows x ffn_dim x d_model): the model's choice, never
 * what the attention layers' plans chose (the resample linear and layers
 * of other widths take it too). */
static int
ffn_way(clf_model *m, size_t rows, int *way)
{
    return clf__gemm_resolve(m->ctx, CLF_ROLE_FFN, rows, m->info.ffn_dim,
                             m->info.d_model, 1, way);
}

/* out = W2 act(W1 h + b1) + b2 over rows (h of the layer's d_in columns,
 * out of its d_out), added to out when residual: bias, activation and
 * residual go into the GEMMs' last step where the blocked kernel runs
 * them, saving three passes over the rows. */
static int
feed_forward(clf_model *m, int way, const struct model_layer *L, cl_mem h,
             cl_mem out, size_t rows, int residual)
{
    clf_context *ctx = m->ctx;
    const size_t Di = L->d_in, Do = L->d_out, F = m->info.ffn_dim;
    cl_mem f = m->ws[MW_F];
    const struct clf__linear up = {.rows = rows,
                                   .in = Di,
                                   .out = F,
                                   .x = h,
                                   .w = L->w1,
                                   .y = f,
                                   .bias = L->b1,
                                   .act = m->act};
    const struct clf__linear down = {.rows = rows,
                                     .in = F,
                                     .out = Do,
                                     .x = f,
                                     .w = L->w2,
                                     .y = out,
                                     .bias = L->b2,
                                     .accumulate = residual};

    TRY(clf__gemm_linear(ctx, way, &up));
    return clf__gemm_linear(ctx, way, &down);
}

/* The post-LN feed-forward residual x = LN2(r(x) + FFN(x)) over rows, with
 * r the identity or, where the layer changes the width, the resample
 * linear (into a first, the FFN added to it). */
static int
ffn_residual(clf_model *m, int way, const struct model_layer *L, cl_mem x,
             cl_mem a, size_t rows)
{
    clf_context *ctx = m->ctx;

    if (L->wr != NULL) {
        const struct clf__linear resample = {.rows = rows,
                                             .in = L->d_in,
                                             .out = L->d_out,
                                             .x = x,
                                             .w = L->wr,
                                             .y = a,
                                             .bias = L->br};
        TRY(clf__gemm_linear(ctx, way, &resample));
        TRY(feed_forward(m, way, L, x, a, rows, 1));
    } else {
        TRY(feed_forward(m, way, L, x, a, rows, 0));
        TRY(clf__residual_add(ctx, a, 0, x, 0, rows * L->d_out));
    }
    return clf__layernorm(ctx, a, 0, x, 0, rows, L->d_out, L->ln2_g, L->ln2_b,
                          LN_EPS);
}

/* One attention layer, with the model's device copy of the mask. */
static int
attend(clf_model *m, const struct model_layer *L, cl_mem in, cl_mem out,
       size_t B, size_t n, const clf_forward_opts *o)
{
    int masked = o != NULL && (o->lengths != NULL || o->key_mask != NULL);

    if (m->shard_attend != NULL)
        return m->shard_attend(m->shard_user, L->att, in, out);
    return clf__attention_forward_cl_mask(L->att, in, 0, out, 0, B, n, o,
                                          masked ? m->ws[MW_MASK] : NULL);
}

/* The post-LN layers on MW_X, each x = LN1(x + Attn(x)), then, where the
 * model has feed-forward blocks, x = LN2(x + FFN(x)). */
static int
post_ln_stack(clf_model *m, size_t B, size_t n, const clf_forward_opts *o)
{
    clf_context *ctx = m->ctx;
    const size_t rows = B * n;
    cl_mem x = m->ws[MW_X], a = m->ws[MW_A];
    size_t l;
    int ffn = CLF_GEMM_UNDECIDED;

    if (m->info.ffn_dim != 0)
        TRY(ffn_way(m, rows, &ffn));
    for (l = 0; l < m->info.layers; l++) {
        const struct model_layer *L = &m->layers[l];
        TRY(attend(m, L, x, a, B, n, o));
        TRY(clf__residual_add(ctx, a, 0, x, 0, rows * L->d_in));
        TRY(clf__layernorm(ctx, a, 0, x, 0, rows, L->d_in, L->ln1_g, L->ln1_b,
                           LN_EPS));
        if (m->info.ffn_dim != 0)
            TRY(ffn_residual(m, ffn, L, x, a, rows));
    }
    return 0;
}

/* Runs the stack on MW_X (batch*n rows of D); the result is left in
 * MW_X. */
static int
run_stack(clf_model *m, size_t B, size_t n, const clf_forward_opts *o)
{
    clf_context *ctx = m->ctx;
    const size_t D = m->info.d_model, rows = B * n;
    cl_mem x = m->ws[MW_X], x2 = m->ws[MW_X2], h = m->ws[MW_H], a = m->ws[MW_A];
    size_t l;
    cl_int err;
    int ffn = CLF_GEMM_UNDECIDED;

    if (m->layers[0].ln1_g == NULL) { /* a bare attention module */
        TRY(attend(m, &m->layers[0], x, a, B, n, o));
        err = clEnqueueCopyBuffer(ctx->queue, a, x, 0, 0,
                                  rows * D * sizeof(float), 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return clf__fail(err, "copy failed (%d)", err);
        return 0;
    }
    if (m->post_ln)
        return post_ln_stack(m, B, n, o);

    /* lucidrains: pre-LN blocks, sequential or reversible. */
    TRY(ffn_way(m, rows, &ffn));
    if (m->info.reversible) {
        err = clEnqueueCopyBuffer(ctx->queue, x, x2, 0, 0,
                                  rows * D * sizeof(float), 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return clf__fail(err, "copy failed (%d)", err);
    }
    for (l = 0; l < m->info.layers; l++) {
        const struct model_layer *L = &m->layers[l];
        cl_mem in1 = m->info.reversible ? x2 : x; /* f reads x2 */
        TRY(clf__layernorm(ctx, in1, 0, h, 0, rows, D, L->ln1_g, L->ln1_b,
                           LN_EPS));
        TRY(attend(m, L, h, a, B, n, o));
        TRY(clf__residual_add(ctx, x, 0, a, 0, rows * D));
        TRY(clf__layernorm(ctx, x, 0, h, 0, rows, D, L->ln2_g, L->ln2_b,
                           LN_EPS));
        TRY(feed_forward(m, ffn, L, h, m->info.reversible ? x2 : x, rows, 1));
    }
    if (m->info.reversible)
        TRY(clf__residual_add(ctx, x, 0, x2, 0, rows * D));
    return 0;
}

/* The device workspaces of a forward of `rows` rows (n per sequence). */
static int
ensure_all(clf_model *m, size_t rows, size_t n, size_t bytes, size_t fb,
           size_t ob)
{
    const size_t D = m->info.d_model;

    TRY(ensure(m, MW_IN, bytes));
    TRY(ensure(m, MW_OUT, ob));
    TRY(ensure(m, MW_X, bytes));
    TRY(ensure(m, MW_X2, m->info.reversible ? bytes : 1));
    TRY(ensure(m, MW_H, bytes));
    TRY(ensure(m, MW_A, bytes));
    TRY(ensure(m, MW_F, fb ? fb : 1));
    TRY(ensure(m, MW_IDS, rows * sizeof(cl_int)));
    TRY(ensure(m, MW_MASK, rows));
    return ensure(m, MW_POS, m->pos_offset ? n * D * sizeof(float) : 1);
}

/* The host copies of the mask and token ids, grown to `rows`. */
static int
host_buffers(clf_model *m, size_t rows)
{
    unsigned char *hm;
    int *hi;

    if (m->host_cap >= rows)
        return 0;
    hm = realloc(m->host_mask, rows);
    if (hm == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    m->host_mask = hm;
    hi = realloc(m->host_ids, rows * sizeof *hi);
    if (hi == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    m->host_ids = hi;
    m->host_cap = rows;
    return 0;
}

/* The padding mask the options describe, built and uploaded. */
static int
upload_mask(clf_model *m, size_t B, size_t n, const clf_forward_opts *o)
{
    cl_int err;

    if (o == NULL || (o->lengths == NULL && o->key_mask == NULL))
        return 0;
    if (o->lengths != NULL && o->key_mask != NULL)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "give lengths or key_mask, not both");
    TRY(clf__mask_build(m->host_mask, B, n, o->lengths, o->key_mask));
    err = clEnqueueWriteBuffer(m->ctx->queue, m->ws[MW_MASK], CL_TRUE, 0, B * n,
                               m->host_mask, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "mask upload failed (%d)", err);
    return 0;
}

/* Sizes the workspaces and uploads the padding mask for the final
 * zeroing. */
static int
prepare(clf_model *m, size_t B, size_t n, size_t out_cols,
        const clf_forward_opts *o)
{
    const size_t D = m->info.d_model;
    size_t rows, bytes, fb, ob;

    if (B == 0 || n == 0)
        return clf__fail(CLF_EBAD_SIZE, "%s is 0",
                         B == 0 ? "batch" : "seq_len");
    if (n > m->info.max_seq_len)
        return clf__fail(CLF_ESEQ_TOO_LONG,
                         "seq_len %zu exceeds max_seq_len %zu", n,
                         m->info.max_seq_len);
    if (clf__mul(B, n, &rows) ||
        clf__mul3(rows, D > m->width ? D : m->width, sizeof(float), &bytes) ||
        clf__mul3(rows, m->info.ffn_dim, sizeof(float), &fb) ||
        clf__mul3(rows, out_cols, sizeof(float), &ob))
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "batch %zu x seq_len %zu overflows size_t", B, n);
    TRY(ensure_all(m, rows, n, bytes, fb, ob));
    TRY(host_buffers(m, rows));
    return upload_mask(m, B, n, o);
}

static int
finish(clf_model *m, size_t rows, size_t cols, float *y,
       const clf_forward_opts *o)
{
    cl_int err;

    if (o != NULL && (o->lengths != NULL || o->key_mask != NULL))
        TRY(clf__mask_rows(m->ctx, m->ws[MW_OUT], 0, m->ws[MW_OUT], 0, rows,
                           cols, m->ws[MW_MASK]));
    err = clEnqueueReadBuffer(m->ctx->queue, m->ws[MW_OUT], CL_TRUE, 0,
                              rows * cols * sizeof(float), y, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "output read-back failed (%d)", err);
    return 0;
}

CLF_EXTERN int
clf_model_forward(clf_model *m, const float *x, size_t batch, size_t seq_len,
                  float *y, const clf_forward_opts *opts)
{
    const size_t D = m ? m->info.d_model : 0;
    size_t rows;
    cl_int err;

    if (m == NULL || x == NULL || y == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         m == NULL   ? "m"
                         : x == NULL ? "x"
                                     : "y");
    if (m->info.vocab != 0)
        return clf__fail(CLF_EINVALID_ARGUMENT, "an LM takes token ids: use "
                                                "clf_model_forward_tokens");
    TRY(prepare(m, batch, seq_len, D, opts));
    rows = batch * seq_len;
    err = clEnqueueWriteBuffer(m->ctx->queue, m->ws[MW_X], CL_TRUE, 0,
                               rows * D * sizeof(float), x, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "input upload failed (%d)", err);
    TRY(run_stack(m, batch, seq_len, opts));
    err = clEnqueueCopyBuffer(m->ctx->queue, m->ws[MW_X], m->ws[MW_OUT], 0, 0,
                              rows * D * sizeof(float), 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "copy failed (%d)", err);
    return finish(m, rows, D, y, opts);
}

/* A shard's rows start at position pos_offset: its position embeddings. */
static int
positions(clf_model *m, size_t n)
{
    const size_t row = m->info.d_model * sizeof(float);
    cl_int err;

    if (m->pos_offset == 0)
        return 0;
    err = clEnqueueCopyBuffer(m->ctx->queue, m->pos, m->ws[MW_POS],
                              m->pos_offset * row, 0, n * row, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "copy of position embeddings failed (%d)", err);
    return 0;
}

CLF_EXTERN int
clf_model_forward_tokens(clf_model *m, const long long *ids, size_t batch,
                         size_t seq_len, float *logits,
                         const clf_forward_opts *opts)
{
    size_t rows, i, D, V;
    cl_int err;
    int way = CLF_GEMM_UNDECIDED;
    struct clf__linear logits_gemm;

    if (m == NULL || ids == NULL || logits == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         m == NULL     ? "m"
                         : ids == NULL ? "ids"
                                       : "logits");
    if (m->info.vocab == 0)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "a %s model takes float inputs: use "
                         "clf_model_forward",
                         clf_layout_name(m->info.layout));
    D = m->info.d_model;
    V = m->info.vocab;
    TRY(prepare(m, batch, seq_len, V, opts));
    rows = batch * seq_len;
    for (i = 0; i < rows; i++) {
        if (ids[i] < 0 || (unsigned long long)ids[i] >= V)
            return clf__fail(CLF_EBAD_SIZE,
                             "token id %lld at index %zu is outside the "
                             "vocabulary (0..%zu)",
                             ids[i], i, V - 1);
        m->host_ids[i] = (int)ids[i];
    }
    err =
        clEnqueueWriteBuffer(m->ctx->queue, m->ws[MW_IDS], CL_TRUE, 0,
                             rows * sizeof(cl_int), m->host_ids, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "token upload failed (%d)", err);
    TRY(positions(m, seq_len));
    /* The logits' GEMM takes the feed-forward role's choice for its own
     * shape, resolved before the layers' so that the listing shows the
     * feed-forward one. */
    TRY(clf__gemm_resolve(m->ctx, CLF_ROLE_FFN, rows, V, D, 1, &way));
    TRY(clf__embed(m->ctx, m->ws[MW_IDS], rows, seq_len, D, m->tok,
                   m->pos_offset ? m->ws[MW_POS] : m->pos, m->ws[MW_X]));
    TRY(run_stack(m, batch, seq_len, opts));
    logits_gemm = (struct clf__linear){.rows = rows,
                                       .in = D,
                                       .out = V,
                                       .x = m->ws[MW_X],
                                       .w = m->logit_w,
                                       .y = m->ws[MW_OUT]};
    TRY(clf__gemm_linear(m->ctx, way, &logits_gemm));
    TRY(clf__add_bias(m->ctx, m->ws[MW_OUT], 0, rows, V, V, m->logit_b));
    return finish(m, rows, V, logits, opts);
}
