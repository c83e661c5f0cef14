/* The Linformer attention layer itself: creation from a desc, the weights
 * (sizes, upload, random initialisation) and teardown.  What a forward
 * does is planned in plan.c and enqueued in attention.c. */
#include "layer/layer_impl.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const weight_names[CLF_WEIGHT_COUNT] = {
    "W_q", "W_k",   "W_v", "W_out", "b_q", "b_k",
    "b_v", "b_out", "E",   "F",     "b_E", "b_F"};

CLF_EXTERN const char *
clf_weight_name(clf_weight which)
{
    if ((int)which < 0 || which >= CLF_WEIGHT_COUNT)
        return "?";
    return weight_names[which];
}

/* ------------------------------------------------------------ creation */

/* The causal block against the sequence length and k. */
static int
check_causal(const clf_attention_desc *d)
{
    size_t nb;

    if (d->causal_block > d->max_seq_len)
        return clf__fail(CLF_EBAD_SIZE,
                         "causal_block %zu exceeds max_seq_len %zu",
                         d->causal_block, d->max_seq_len);
    if (d->slot_mask && d->causal_block != 0)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "slot_mask (linformer-pytorch's causal=True mask) "
                         "and causal_block (the prefix-safe causal mode) "
                         "exclude each other");
    if (d->causal_block == 0)
        return 0;
    nb = (d->max_seq_len + d->causal_block - 1) / d->causal_block;
    if (d->k % nb != 0)
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "causal mode needs k a multiple of the %zu "
                         "blocks ceil(max_seq_len / causal_block); k is "
                         "%zu",
                         nb, d->k);
    return 0;
}

int
clf__causal_desc_check(const clf_attention_desc *d)
{
    if (d->slot_mask)
        return clf__fail(CLF_EUNSUPPORTED,
                         "a causal Linformer forward on a layer with "
                         "slot_mask: the layer applies linformer-pytorch's "
                         "causal=True mask on every forward, and the "
                         "prefix-safe causal mode is not that mask");
    if (d->causal_block == 0)
        return clf__fail(CLF_EBAD_SIZE,
                         "causal Linformer needs causal_block > 0 in the "
                         "layer's desc (causal_block is 0)");
    if (d->compressed_bias)
        return clf__fail(CLF_EUNSUPPORTED,
                         "causal Linformer does not support compressed_bias "
                         "(fairseq's bias order)");
    if (d->bias_proj && d->compression != CLF_COMPRESS_CONV)
        return clf__fail(CLF_EUNSUPPORTED,
                         "causal Linformer does not support bias_proj (a bias "
                         "per compressed slot)");
    return 0;
}

/* bias_proj's columns: head_dim ones. */
static int
make_ones(clf_attention *att)
{
    float *one;
    size_t i;
    cl_int err;

    if (!att->desc.bias_proj)
        return 0;
    one = malloc(att->dh * sizeof *one);
    if (one == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (i = 0; i < att->dh; i++)
        one[i] = 1.0f;
    att->ones =
        clf__mem_create(att->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                        att->dh * sizeof *one, one, &err, "ones");
    free(one);
    if (att->ones == NULL)
        return clf__fail(err, "clCreateBuffer failed (%d)", err);
    return 0;
}

/* The sizes, each nonzero. */
static int
check_sizes(const clf_attention_desc *d)
{
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
    return 0;
}

int
clf__desc_check(const clf_attention_desc *d, size_t *dh_out)
{
    size_t dh;

    CLF_TRY(check_sizes(d));
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
    CLF_TRY(check_causal(d));
    CLF_TRY(clf__half_check(d));
    CLF_TRY(clf__compression_check(d));
    /* Every dimension a kernel sees must fit in 32 bits. */
    if (d->d_model > UINT_MAX || d->heads > UINT_MAX || dh > UINT_MAX ||
        d->max_seq_len > UINT_MAX)
        return clf__fail(CLF_ETOO_LARGE, "a dimension exceeds 2^32-1");
    *dh_out = dh;
    return 0;
}

/* The layer's dimensions from its checked desc. */
static void
set_dims(clf_attention *att, const clf_attention_desc *desc, size_t dh)
{
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
}

/* Every weight's element count; 0: not part of this layer. */
static void
fill_sizes(clf_attention *att, const clf_attention_desc *desc)
{
    const int f = !desc->share_kv && desc->sharing != CLF_SHARE_KEY_VALUE;
    size_t e, b;

    att->wsize[CLF_WEIGHT_Q] = att->dq * att->D;
    att->wsize[CLF_WEIGHT_K] = att->dkv * att->D;
    att->wsize[CLF_WEIGHT_V] = desc->share_kv ? 0 : att->dkv * att->D;
    att->wsize[CLF_WEIGHT_OUT] = att->D * att->dq;
    att->wsize[CLF_BIAS_Q] = desc->bias_q ? att->dq : 0;
    att->wsize[CLF_BIAS_K] = desc->bias_k ? att->dkv : 0;
    att->wsize[CLF_BIAS_V] = desc->bias_v ? att->dkv : 0;
    att->wsize[CLF_BIAS_OUT] = desc->bias_out ? att->D : 0;
    clf__compression_sizes(att, &e, &b);
    att->wsize[CLF_PROJ_E] = att->nE * e;
    att->wsize[CLF_PROJ_F] = f ? att->nE * e : 0;
    att->wsize[CLF_BIAS_E] = att->nE * b;
    att->wsize[CLF_BIAS_F] = f ? att->nE * b : 0;
}

/* Every weight's element count (0: not part of this layer), checked
 * against size_t and the device's largest allocation. */
static int
set_weight_sizes(clf_attention *att, const clf_attention_desc *desc)
{
    const unsigned long long max_alloc = att->ctx->info.max_alloc;
    size_t t;
    int i;

    if (clf__mul(att->hq, att->dh, &att->dq) ||
        clf__mul(att->hkv, att->dh, &att->dkv) ||
        clf__mul3(att->dq, att->D, sizeof(float), &t) ||
        clf__mul3(att->nE, att->k, att->N, &t) ||
        clf__mul(t, sizeof(float), &t) ||
        clf__mul3(att->nE, att->dh, att->dh, &t) ||
        clf__mul3(t, att->N, sizeof(float), &t))
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "weight sizes overflow size_t (d_model %zu, heads "
                         "%zu, head_dim %zu, k %zu, max_seq_len %zu)",
                         att->D, att->hq, att->dh, att->k, att->N);
    fill_sizes(att, desc);
    for (i = 0; i < CLF_WEIGHT_COUNT; i++)
        if (att->wsize[i] * sizeof(float) > max_alloc && max_alloc != 0)
            return clf__fail(CLF_ETOO_LARGE,
                             "weight %s needs %zu bytes; the device "
                             "allocates at most %llu",
                             weight_names[i], att->wsize[i] * sizeof(float),
                             max_alloc);
    return 0;
}

CLF_EXTERN int
clf_attention_create(clf_attention **out, clf_context *ctx,
                     const clf_attention_desc *desc)
{
    clf_attention *att = NULL;
    size_t dh = 0;
    int rc;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (desc == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "desc is NULL");
    rc = clf__desc_check(desc, &dh);
    if (rc != 0)
        return rc;
    att = calloc(1, sizeof *att);
    if (att == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    att->ctx = ctx;
    set_dims(att, desc, dh);
    rc = set_weight_sizes(att, desc);
    if (rc == 0)
        rc = make_ones(att);
    if (rc == 0)
        rc = clf_context_build(ctx);
    if (rc != 0) {
        clf_attention_destroy(att);
        return rc;
    }
    *out = att;
    return 0;
}

CLF_EXTERN void
clf_attention_destroy(clf_attention *att)
{
    int i;

    if (att == NULL)
        return;
    if (att->ctx != NULL && att->ctx->queue != NULL)
        clFinish(att->ctx->queue);
    if (att->ctx != NULL && att->desc.precision == CLF_PRECISION_HALF) {
        /* A later layer may be made at the same address. */
        clf__lock(att->ctx);
        clf__half_begin(att->ctx);
        clf__unlock(att->ctx);
    }
    for (i = 0; i < CLF_WEIGHT_COUNT; i++)
        if (att->w[i] != NULL) {
            clf__gemm_forget(att->ctx, att->w[i]);
            clReleaseMemObject(att->w[i]);
        }
    if (att->ones != NULL)
        clReleaseMemObject(att->ones);
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
                         : which == CLF_BIAS_F && att->desc.bias_proj
                             ? "F is E under share_kv or key-value sharing, "
                               "b_E its bias"
                         : which == CLF_WEIGHT_V ? "share_kv uses keys as "
                                                   "values"
                         : (which == CLF_PROJ_E || which == CLF_BIAS_E) &&
                                 att->desc.compression != CLF_COMPRESS_LINEAR
                             ? "mean and max pooling have no weights"
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

/* The W matrices, which every GEMM reads transposed (X W^T): registered
 * with the GEMM floor, whose blocked way then keeps their transposes. */
static int
read_transposed(clf_weight which)
{
    return which == CLF_WEIGHT_Q || which == CLF_WEIGHT_K ||
           which == CLF_WEIGHT_V || which == CLF_WEIGHT_OUT;
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
    if (clf__half_stored(att, which))
        return clf__half_upload(att, which, weight_names[which], data, count);
    if (att->w[which] == NULL) {
        att->w[which] =
            clf__mem_create(att->ctx, CL_MEM_READ_ONLY, count * sizeof(float),
                            NULL, &err, weight_names[which]);
        if (att->w[which] == NULL)
            return clf__fail(err,
                             "weight %s: clCreateBuffer of %zu bytes "
                             "failed (%d)",
                             weight_names[which], count * sizeof(float), err);
    }
    /* Invalidate first: a failed write leaves the weight unset, never half
     * written and marked usable, and no transpose of the old one kept. */
    att->wset[which] = 0;
    clf__gemm_forget(att->ctx, att->w[which]);
    err = clEnqueueWriteBuffer(att->ctx->queue, att->w[which], CL_TRUE, 0,
                               count * sizeof(float), data, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "weight %s: upload failed (%d)",
                         weight_names[which], err);
    if (read_transposed(which))
        CLF_TRY(clf__gemm_keep(att->ctx, att->w[which]));
    att->wset[which] = 1;
    return 0;
}

CLF_EXTERN int
clf_attention_set_mode(clf_attention *att, clf_mode mode)
{
    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    if (mode != CLF_MODE_LINFORMER && mode != CLF_MODE_FULL)
        return clf__fail(CLF_EBAD_ENUM, "mode %d is not a clf_mode", (int)mode);
    att->mode = mode;
    return 0;
}

cl_mem
clf__layer_weight(const clf_attention *a, int which)
{
    return which >= 0 && which < CLF_WEIGHT_COUNT && a->wsize[which] != 0
               ? a->w[which]
               : NULL;
}

int
clf__attention_check_weights(const clf_attention *a, int linformer)
{
    int i;

    for (i = 0; i < CLF_WEIGHT_COUNT; i++) {
        if (a->wsize[i] == 0 || a->wset[i])
            continue;
        if (!linformer && (i == CLF_PROJ_E || i == CLF_PROJ_F ||
                           i == CLF_BIAS_E || i == CLF_BIAS_F))
            continue;
        return clf__fail(CLF_EWEIGHT_UNSET, "weight %s has not been set",
                         weight_names[i]);
    }
    return 0;
}

/* ------------------------------------------------------- random weights */

/* PyTorch's init bound is 1/sqrt(fan_in) of weight w: nn.Linear's, E and
 * F as the lucidrains package draws them, the Conv1d compressor's. */
static double
fan_in_of(const clf_attention *att, int w)
{
    const int conv = att->desc.compression == CLF_COMPRESS_CONV;
    const double fan_conv = (double)(att->dh * clf__compression_window(att));

    switch (w) {
    case CLF_WEIGHT_OUT:
    case CLF_BIAS_OUT:
        return (double)att->dq;
    case CLF_PROJ_E:
    case CLF_PROJ_F:
        return conv ? fan_conv : (double)att->k;
    case CLF_BIAS_E:
    case CLF_BIAS_F:
        return conv ? fan_conv : (double)att->N; /* nn.Linear(N, k)'s */
    default:
        return (double)att->D;
    }
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
        const double fan_in = fan_in_of(att, w);
        if (att->wsize[w] == 0)
            continue;
        for (i = 0; i < att->wsize[w]; i++) {
            double u = (double)(clf__splitmix64(&state) >> 11) * 0x1.0p-53;
            buf[i] = (float)((2.0 * u - 1.0) / sqrt(fan_in));
        }
        rc = clf_attention_set_weight(att, (clf_weight)w, buf, att->wsize[w]);
    }
    free(buf);
    return rc;
}
