/* A shard's part of a sharded model forward (src/parallel/parallel.h): the
 * model's own forward on the shard's rows (layer norms, feed-forward blocks,
 * residuals and the LM's embeddings and logits are row-local), with each
 * attention layer replaced by its sharded forward (shard.c), and the split of
 * the positions. */
#include "parallel/parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct hook_state {
    const clf__shard_comm *comm;
    struct clf__shard_layer_args la;
};

static int
hook(void *user, clf_attention *att, cl_mem in, cl_mem out)
{
    struct hook_state *h = user;

    return clf__shard_attention(att, h->comm, &h->la, in, out);
}

int
clf__shard_split(size_t seq_len, int shards, const double *weights, size_t unit,
                 size_t *bounds)
{
    size_t units, lo, hi, u;
    double total = 0.0, cum = 0.0;
    int r;

    if (bounds == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "bounds is NULL");
    if (shards < 1 || unit == 0)
        return clf__fail(CLF_EBAD_SIZE, "%s is 0",
                         shards < 1 ? "shards" : "unit");
    units = seq_len / unit + (seq_len % unit != 0); /* no wrap at SIZE_MAX */
    if (units < (size_t)shards)
        return clf__fail(CLF_EBAD_SIZE,
                         "seq_len %zu gives %zu units of %zu positions, fewer "
                         "than the %d shards",
                         seq_len, units, unit, shards);
    for (r = 0; r < shards; r++) {
        double w = weights != NULL ? weights[r] : 1.0;
        if (!(w > 0.0) || !isfinite(w))
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "shard %d's weight %g is not a positive number", r,
                             w);
        total += w;
    }
    bounds[0] = 0;
    for (r = 1; r < shards; r++) {
        cum += weights != NULL ? weights[r - 1] : 1.0;
        u = (size_t)floor((double)units * cum / total + 0.5);
        lo = bounds[r - 1] / unit + 1;     /* one unit each before */
        hi = units - (size_t)(shards - r); /* and after */
        u = u < lo ? lo : (u > hi ? hi : u);
        bounds[r] = u * unit;
    }
    bounds[shards] = seq_len;
    return 0;
}

size_t
clf__shard_unit(const clf_model *m, int causal)
{
    const clf_attention *att = clf__model_layer(m, 0);
    struct clf__layer_shape L;

    if (!causal || att == NULL)
        return 1;
    clf__layer_shape(att, &L);
    if (L.mode != CLF_MODE_LINFORMER || L.desc.causal_block == 0)
        return 1;
    return L.desc.causal_block;
}

/* ------------------------------------------------ agreement of the shards */

/* The fields of a shard's record, in the order they are compared (the
 * first that differs is named). */
enum agree_field {
    AG_BATCH,
    AG_SEQ_LEN,
    AG_BOUNDS,
    AG_LAYOUT,
    AG_D_MODEL,
    AG_HEADS,
    AG_HEAD_DIM,
    AG_K,
    AG_MAX_SEQ_LEN,
    AG_LAYERS,
    AG_FFN_DIM,
    AG_VOCAB,
    AG_REVERSIBLE,
    AG_SHARE_KV,
    AG_ONE_KV_HEAD,
    AG_LAYERWISE,
    AG_MODE,
    AG_CAUSAL_BLOCK,
    AG_PRECISION,
    AG_CAUSAL,
    AG_PADDING,
    AG_PADDING_DATA,
    AG_COUNT
};

static const char *const agree_names[AG_COUNT] = {
    "batch",          "seq_len",
    "split (bounds)", "layout",
    "d_model",        "heads",
    "head_dim",       "k",
    "max_seq_len",    "layers",
    "ffn_dim",        "vocab",
    "reversible",     "share_kv",
    "one_kv_head",    "layerwise",
    "mode",           "causal_block",
    "precision",      "causal",
    "padding",        "padding (lengths or key_mask content)"};

static unsigned long long
fnv(unsigned long long h, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    size_t i;

    for (i = 0; i < bytes; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static void
agree_shape(unsigned long long *rec, const clf_model *m,
            const clf_attention *att)
{
    clf_model_info info;
    struct clf__layer_shape L;

    memset(&info, 0, sizeof info);
    clf__layer_shape(att, &L);
    if (m != NULL)
        clf_model_info_get(m, &info);
    rec[AG_LAYOUT] = (unsigned long long)info.layout;
    rec[AG_D_MODEL] = L.desc.d_model;
    rec[AG_HEADS] = L.desc.heads;
    rec[AG_HEAD_DIM] = L.dh;
    rec[AG_K] = L.desc.k;
    rec[AG_MAX_SEQ_LEN] = L.desc.max_seq_len;
    rec[AG_LAYERS] = m != NULL ? info.layers : 1;
    rec[AG_FFN_DIM] = info.ffn_dim;
    rec[AG_VOCAB] = info.vocab;
    rec[AG_REVERSIBLE] = info.reversible != 0;
    rec[AG_SHARE_KV] = L.desc.share_kv != 0;
    rec[AG_ONE_KV_HEAD] = L.desc.one_kv_head != 0;
    rec[AG_LAYERWISE] = info.layerwise != 0;
    rec[AG_MODE] = (unsigned long long)L.mode;
    rec[AG_CAUSAL_BLOCK] = L.desc.causal_block;
    rec[AG_PRECISION] = (unsigned long long)L.desc.precision;
}

static void
agree_record(unsigned long long *rec, const clf__shard_comm *comm, size_t batch,
             size_t seq_len, const size_t *bounds, const clf_forward_opts *opts)
{
    const unsigned long long h0 = 0xcbf29ce484222325ULL;

    rec[AG_BATCH] = batch;
    rec[AG_SEQ_LEN] = seq_len;
    rec[AG_BOUNDS] =
        bounds == NULL
            ? 0
            : fnv(h0, bounds, ((size_t)comm->size + 1) * sizeof *bounds);
    rec[AG_CAUSAL] = opts != NULL && opts->causal;
    rec[AG_PADDING] = 0;
    rec[AG_PADDING_DATA] = h0;
    if (opts != NULL && opts->lengths != NULL) {
        rec[AG_PADDING] = 1;
        rec[AG_PADDING_DATA] =
            fnv(h0, opts->lengths, batch * sizeof *opts->lengths);
    } else if (opts != NULL && opts->key_mask != NULL) {
        rec[AG_PADDING] = 2;
        rec[AG_PADDING_DATA] = fnv(h0, opts->key_mask, batch * seq_len);
    }
}

/* "full", "lengths", "half"... for the fields with names, else the number;
 * a content hash is not worth printing. */
static void
agree_value(char *buf, size_t cap, int field, unsigned long long v)
{
    static const char *const modes[] = {"linformer", "full"};
    static const char *const precisions[] = {"float", "half"};
    static const char *const paddings[] = {"none", "lengths", "key_mask"};

    if (field == AG_MODE && v < 2)
        snprintf(buf, cap, "%s", modes[v]);
    else if (field == AG_PRECISION && v < 2)
        snprintf(buf, cap, "%s", precisions[v]);
    else if (field == AG_PADDING && v < 3)
        snprintf(buf, cap, "%s", paddings[v]);
    else if (field == AG_LAYOUT)
        snprintf(buf, cap, "%s", clf_layout_name((clf_layout)v));
    else if (field == AG_BOUNDS || field == AG_PADDING_DATA)
        snprintf(buf, cap, "other");
    else
        snprintf(buf, cap, "%llu", v);
}

int
clf__shard_agree(const clf__shard_comm *comm, const clf_model *m,
                 const clf_attention *att, size_t batch, size_t seq_len,
                 const size_t *bounds, const clf_forward_opts *opts)
{
    unsigned long long mine[AG_COUNT], first[AG_COUNT];
    char here[64], there[64];
    int f;

    if (m != NULL)
        att = clf__model_layer(m, 0);
    if (comm == NULL || att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         comm == NULL ? "comm" : "the model's first layer");
    agree_shape(mine, m, att);
    agree_record(mine, comm, batch, seq_len, bounds, opts);
    memcpy(first, mine, sizeof first);
    CLF_TRY(comm->bcast(comm->self, first, sizeof first, 0));
    for (f = 0; f < AG_COUNT; f++)
        if (mine[f] != first[f])
            break;
    if (f == AG_COUNT)
        return 0;
    agree_value(here, sizeof here, f, mine[f]);
    agree_value(there, sizeof there, f, first[f]);
    return clf__fail(CLF_EINVALID_ARGUMENT,
                     "%s differs between shards: %s on shard %d, %s on "
                     "shard 0; every shard must run the same forward",
                     agree_names[f], here, comm->rank, there);
}

/* The whole batch's mask (NULL when the options give none), the shard's
 * slice of it as the local options' key_mask. */
struct masks {
    unsigned char *global, *local;
};

static int
build_masks(const clf_forward_opts *opts, size_t B, size_t n, size_t b0,
            size_t nl, struct masks *mk, clf_forward_opts *lo)
{
    size_t b;

    memset(mk, 0, sizeof *mk);
    memset(lo, 0, sizeof *lo);
    if (opts == NULL)
        return 0;
    lo->causal = opts->causal;
    if (opts->lengths == NULL && opts->key_mask == NULL)
        return 0;
    if (opts->lengths != NULL && opts->key_mask != NULL)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "give lengths or key_mask, not both");
    mk->global = malloc(B * n);
    mk->local = malloc(B * nl);
    if (mk->global == NULL || mk->local == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    CLF_TRY(clf__mask_build(mk->global, B, n, opts->lengths, opts->key_mask));
    for (b = 0; b < B; b++)
        memcpy(mk->local + b * nl, mk->global + b * n + b0, nl);
    lo->key_mask = mk->local;
    return 0;
}

static int
check_args(const clf__shard_comm *comm, size_t B, size_t n,
           const size_t *bounds, size_t width)
{
    size_t t;
    int r;

    if (comm == NULL || bounds == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         comm == NULL ? "comm" : "bounds");
    if (comm->rank < 0 || comm->rank >= comm->size)
        return clf__fail(CLF_EINVALID_ARGUMENT, "shard %d of %d", comm->rank,
                         comm->size);
    if (B == 0 || n == 0)
        return clf__fail(CLF_EBAD_SIZE, "%s is 0",
                         B == 0 ? "batch" : "seq_len");
    /* the masks hold B x n bytes, the rows B x n x width floats */
    if (clf__mul3(B, n, width * sizeof(float), &t))
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "batch %zu x seq_len %zu overflows size_t", B, n);
    for (r = 0; r < comm->size; r++)
        if (bounds[r + 1] <= bounds[r] || bounds[comm->size] != n)
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "shard bounds must rise from 0 to seq_len %zu "
                             "(shard %d: %zu..%zu)",
                             n, r, bounds[r], bounds[r + 1]);
    return bounds[0] == 0
               ? 0
               : clf__fail(CLF_EINVALID_ARGUMENT,
                           "shard bounds start at %zu, not 0", bounds[0]);
}

/* Both model entry points: x is float rows or token ids. */
static int
model_part(clf_model *m, const clf__shard_comm *comm, size_t B, size_t n,
           const size_t *bounds, const void *x, int tokens, float *y,
           const clf_forward_opts *opts)
{
    struct hook_state hs;
    struct masks mk = {NULL, NULL};
    clf_forward_opts lo;
    clf_model_info info;
    size_t b0, nl;
    int rc;

    if (m == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "m is NULL");
    CLF_TRY(check_args(comm, B, n, bounds, 1));
    CLF_TRY(clf_model_info_get(m, &info));
    if (n > info.max_seq_len)
        return clf__fail(CLF_ESEQ_TOO_LONG,
                         "seq_len %zu exceeds max_seq_len %zu", n,
                         info.max_seq_len);
    CLF_TRY(clf__shard_agree(comm, m, NULL, B, n, bounds, opts));
    b0 = bounds[comm->rank];
    nl = bounds[comm->rank + 1] - b0;
    rc = build_masks(opts, B, n, b0, nl, &mk, &lo);
    if (rc == 0) {
        hs.comm = comm;
        hs.la.batch = B;
        hs.la.seq_len = n;
        hs.la.bounds = bounds;
        hs.la.mask = mk.global;
        hs.la.causal = lo.causal;
        clf__model_shard_hook(m, hook, &hs, b0);
        rc = tokens ? clf_model_forward_tokens(m, x, B, nl, y, &lo)
                    : clf_model_forward(m, x, B, nl, y, &lo);
        clf__model_shard_hook(m, NULL, NULL, 0);
    }
    free(mk.global);
    free(mk.local);
    return rc;
}

int
clf__shard_model_forward(clf_model *m, const clf__shard_comm *comm,
                         size_t batch, size_t seq_len, const size_t *bounds,
                         const float *x, float *y, const clf_forward_opts *opts)
{
    int rc = model_part(m, comm, batch, seq_len, bounds, x, 0, y, opts);

    if (rc != 0 && comm != NULL)
        comm->abort_all(comm->self, rc);
    return rc;
}

int
clf__shard_model_forward_tokens(clf_model *m, const clf__shard_comm *comm,
                                size_t batch, size_t seq_len,
                                const size_t *bounds, const long long *ids,
                                float *logits, const clf_forward_opts *opts)
{
    int rc = model_part(m, comm, batch, seq_len, bounds, ids, 1, logits, opts);

    if (rc != 0 && comm != NULL)
        comm->abort_all(comm->self, rc);
    return rc;
}

/* One layer: the shard's rows up, the sharded layer, its rows back. */
static int
attention_part(clf_attention *att, const clf__shard_comm *comm, size_t B,
               size_t n, const size_t *bounds, const float *x, float *y,
               const clf_forward_opts *opts)
{
    struct clf__shard_layer_args la;
    struct masks mk = {NULL, NULL};
    clf_forward_opts lo;
    cl_mem in = NULL, out = NULL;
    size_t bytes;
    cl_int err = CL_SUCCESS;
    struct clf__layer_shape L;
    int rc;

    if (att == NULL || x == NULL || y == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         att == NULL ? "att"
                         : x == NULL ? "x"
                                     : "y");
    clf__layer_shape(att, &L);
    CLF_TRY(check_args(comm, B, n, bounds, L.D));
    CLF_TRY(clf__shard_agree(comm, NULL, att, B, n, bounds, opts));
    bytes =
        B * (bounds[comm->rank + 1] - bounds[comm->rank]) * L.D * sizeof(float);
    rc = build_masks(opts, B, n, bounds[comm->rank],
                     bounds[comm->rank + 1] - bounds[comm->rank], &mk, &lo);
    if (rc == 0) {
        in = clf__mem_create(L.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                             bytes, (void *)x, &err, "shard input");
        if (in != NULL)
            out = clf__mem_create(L.ctx, CL_MEM_READ_WRITE, bytes, NULL, &err,
                                  "shard output");
        if (out == NULL)
            rc = clf__fail(err, "a shard's buffers of %zu bytes (%d)", bytes,
                           err);
    }
    if (rc == 0) {
        la.batch = B;
        la.seq_len = n;
        la.bounds = bounds;
        la.mask = mk.global;
        la.causal = lo.causal;
        rc = clf__shard_attention(att, comm, &la, in, out);
    }
    if (rc == 0 &&
        (err = clEnqueueReadBuffer(L.ctx->queue, out, CL_TRUE, 0, bytes, y, 0,
                                   NULL, NULL)) != CL_SUCCESS)
        rc = clf__fail(err, "output read-back failed (%d)", err);
    if (in != NULL)
        clReleaseMemObject(in);
    if (out != NULL)
        clReleaseMemObject(out);
    free(mk.global);
    free(mk.local);
    return rc;
}

int
clf__shard_attention_forward(clf_attention *att, const clf__shard_comm *comm,
                             size_t batch, size_t seq_len, const size_t *bounds,
                             const float *x, float *y,
                             const clf_forward_opts *opts)
{
    int rc = attention_part(att, comm, batch, seq_len, bounds, x, y, opts);

    if (rc != 0 && comm != NULL)
        comm->abort_all(comm->self, rc);
    return rc;
}
