/* A stream (include/clinformer.h, "streams"): a prefix-safe causal layer or
 * model fed a few positions at a time.
 *
 * An append is the sharded forward (shard.c, shard_model.c) with two
 * shards: shard 0 is the past, shard 1 the positions being computed.  The
 * past never runs; its part of each layer's exchange is the stream's
 * state, and the exchange (allgatherv below) hands it over and keeps what
 * shard 1 sends for the next append.
 *
 *   causal Linformer: shard 1 starts at the block of the last position
 *     already seen (the open block), so it holds that block's earlier
 *     positions (kept as the model's input rows) and the new ones.  A query
 *     sees the slots of the blocks before its own, which are the past's, and
 *     its own block's positions, which are shard 1's.  Each block's slots
 *     are kept once a position after the block has arrived; the state is
 *     the k slots per layer and at most one block of input rows, whatever
 *     the stream's length.
 *   causal full mode: shard 1 holds the new positions only; the past's
 *     part is every earlier position's projected key and value, per layer
 *     (a growing cache, for comparison).
 *
 * State changes only when an append succeeds: the exchange writes the
 * units shard 1 sends past the kept ones, and they count once the forward
 * has returned. */
#include "parallel/parallel.h"

#include <stdlib.h>
#include <string.h>

struct layer_state {
    struct clf__gather_layout g;
    float *kept; /* unit-major: [unit][side][sequence][per] */
    size_t cap;  /* units allocated */
};

struct clf_stream {
    clf_model *m;       /* or */
    clf_attention *att; /* a bare layer */
    clf_mode mode;      /* at creation; an append checks it still holds */
    int tokens;         /* an LM: token ids in, logits out */
    int linformer;
    size_t B, N, w_in, w_out, blk;
    size_t pos; /* positions appended */
    size_t layers;
    struct layer_state *ls;
    void *open;          /* input rows (or ids) of positions open0..pos */
    size_t open0;        /* first position of shard 1 at the next append */
    unsigned char *hist; /* B x N: 1 = a real position, 0 = padding */
    int masked;          /* some append gave padding */
    /* during an append */
    size_t call;  /* the exchange of layer `call` comes next */
    size_t first; /* shard 1's first unit */
};

static size_t
elem_size(const clf_stream *s)
{
    return s->tokens ? sizeof(long long) : sizeof(float);
}

/* ------------------------------------------------ the past as shard 0 */

static int
no_sum(void *self, float *buf, size_t count)
{
    (void)self;
    (void)buf;
    (void)count;
    return clf__fail(CLF_EINVALID_ARGUMENT,
                     "a stream runs causal attention only");
}

static int
no_bcast(void *self, void *buf, size_t bytes, int root)
{
    (void)self; /* every shard's record is this one's */
    (void)buf;
    (void)bytes;
    (void)root;
    return 0;
}

static void
no_abort(void *self, int rc)
{
    (void)self;
    (void)rc;
}

/* Copies `units` units from (unit-major kept) to (side, sequence major)
 * or back. */
static void
past_copy(const struct layer_state *l, size_t B, size_t u0, size_t units,
          float *flat, int to_flat)
{
    const size_t per = l->g.per, sides = l->g.sides;
    size_t v, b, u;

    for (v = 0; v < sides; v++)
        for (b = 0; b < B; b++)
            for (u = 0; u < units; u++) {
                float *k = l->kept + (((u0 + u) * sides + v) * B + b) * per;
                float *f = flat + ((v * B + b) * units + u) * per;
                memcpy(to_flat ? f : k, to_flat ? k : f, per * sizeof *f);
            }
}

static int
exchange(void *self, const float *send, float *recv, const size_t *counts)
{
    clf_stream *s = self;
    struct layer_state *l;
    const size_t me = s->first > 0;
    size_t units, want;

    if (s->call >= s->layers)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "a stream's forward exchanged more often than its "
                         "%zu layers",
                         s->layers);
    l = &s->ls[s->call++];
    want = l->g.sides * s->B * l->g.per;
    units = counts[me] / want;
    if (units * want != counts[me] || (me && counts[0] != s->first * want) ||
        s->first + units > l->cap)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "a stream's exchange of %zu floats does not fit its "
                         "state",
                         counts[me]);
    if (me)
        past_copy(l, s->B, 0, s->first, recv, 1);
    memcpy(recv + (me ? counts[0] : 0), send, counts[me] * sizeof *send);
    /* shard 1's units, kept past the ones that count (a block's slots are
     * complete, and count, once a later position has arrived) */
    past_copy(l, s->B, s->first, units, (float *)send, 0);
    return 0;
}

/* ------------------------------------------------------- creation */

static int
check_layer(clf_attention *att, clf_mode mode)
{
    struct clf__layer_shape L;

    clf__layer_shape(att, &L);
    if (mode == CLF_MODE_LINFORMER && L.desc.causal_block == 0)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "a stream runs prefix-safe causal attention: a "
                         "Linformer layer needs a causal_block (plain "
                         "Linformer mixes future positions into every slot)");
    if (L.desc.slot_mask)
        return clf__fail(CLF_EUNSUPPORTED,
                         "a stream cannot apply a layer's slot_mask "
                         "(linformer-pytorch's causal=True mask, which leaks "
                         "the future)");
    if (L.desc.precision == CLF_PRECISION_HALF)
        return clf__fail(CLF_EUNSUPPORTED,
                         "a stream takes float32 layers only (this layer "
                         "stores half-precision weights)");
    if (mode == CLF_MODE_LINFORMER && L.desc.compression != CLF_COMPRESS_LINEAR)
        return clf__fail(CLF_EUNSUPPORTED,
                         "a stream takes the linear compression only (this "
                         "layer's is %s)",
                         clf_compression_name(L.desc.compression));
    return 0;
}

/* Each layer's exchange layout and its kept units (full mode grows them
 * as the stream does). */
static int
layers_setup(clf_stream *s)
{
    size_t i;

    s->ls = calloc(s->layers, sizeof *s->ls);
    if (s->ls == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (i = 0; i < s->layers; i++) {
        clf_attention *a = s->m ? clf__model_layer(s->m, i) : s->att;
        struct layer_state *l = &s->ls[i];

        CLF_TRY(check_layer(a, s->mode));
        CLF_TRY(clf__shard_gather_layout(a, s->B, s->N, &l->g));
        if (s->linformer) {
            l->cap = l->g.units;
            l->kept =
                calloc(l->cap * l->g.sides * s->B * l->g.per, sizeof *l->kept);
            if (l->kept == NULL)
                return clf__fail(CLF_ENO_MEMORY,
                                 "out of host memory for a stream's state");
        }
    }
    s->blk = s->linformer ? s->ls[0].g.unit : 1;
    return 0;
}

/* The shapes of the stream's model or layer, and its mode now. */
static int
stream_shape(clf_stream *s)
{
    clf_model_info info;
    size_t t;

    if (s->m != NULL) {
        CLF_TRY(clf_model_info_get(s->m, &info));
        CLF_TRY(clf_model_get_mode(s->m, &s->mode));
        s->layers = info.layers;
        s->N = info.max_seq_len;
        s->tokens = info.vocab > 0;
        s->w_in = s->tokens ? 1 : info.d_model;
        s->w_out = s->tokens ? info.vocab : info.d_model;
    } else {
        struct clf__layer_shape L;

        clf__layer_shape(s->att, &L);
        s->mode = L.mode;
        s->layers = 1;
        s->N = L.N;
        s->w_in = s->w_out = L.D;
    }
    s->linformer = s->mode == CLF_MODE_LINFORMER;
    if (clf__mul3(s->B, s->N, s->w_in + s->w_out, &t))
        return clf__fail(CLF_ESIZE_OVERFLOW, "batch %zu overflows size_t",
                         s->B);
    return 0;
}

static int
stream_new(clf_stream **out, clf_model *m, clf_attention *att, size_t batch)
{
    clf_stream *s;
    int rc;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (batch == 0)
        return clf__fail(CLF_EBAD_SIZE, "batch is 0");
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    s->m = m;
    s->att = att;
    s->B = batch;
    rc = stream_shape(s);
    if (rc == 0)
        rc = layers_setup(s);
    if (rc == 0) {
        s->hist = malloc(batch * s->N);
        s->open = malloc(batch * s->blk * s->w_in * elem_size(s));
        if (s->hist == NULL || s->open == NULL)
            rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    if (rc != 0) {
        clf_stream_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

int
clf_stream_create(clf_stream **out, clf_model *m, size_t batch)
{
    if (m == NULL) {
        if (out != NULL)
            *out = NULL;
        return clf__fail(CLF_ENULL_ARGUMENT, "m is NULL");
    }
    return stream_new(out, m, NULL, batch);
}

int
clf_stream_create_attention(clf_stream **out, clf_attention *att, size_t batch)
{
    if (att == NULL) {
        if (out != NULL)
            *out = NULL;
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    }
    return stream_new(out, NULL, att, batch);
}

void
clf_stream_destroy(clf_stream *s)
{
    size_t i;

    if (s == NULL)
        return;
    for (i = 0; s->ls != NULL && i < s->layers; i++)
        free(s->ls[i].kept);
    free(s->ls);
    free(s->hist);
    free(s->open);
    free(s);
}

int
clf_stream_reset(clf_stream *s)
{
    if (s == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "s is NULL");
    s->pos = s->open0 = 0;
    s->masked = 0;
    return 0;
}

int
clf_stream_info_get(const clf_stream *s, clf_stream_info *out)
{
    size_t i, bytes = 0;

    if (s == NULL || out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         s == NULL ? "s" : "out");
    memset(out, 0, sizeof *out);
    out->batch = s->B;
    out->position = s->pos;
    out->max_seq_len = s->N;
    out->block = s->linformer ? s->blk : 0;
    out->width_in = s->tokens ? 0 : s->w_in;
    out->width_out = s->w_out;
    for (i = 0; i < s->layers; i++)
        bytes += s->ls[i].cap * s->ls[i].g.sides * s->B * s->ls[i].g.per *
                 sizeof(float);
    out->state_bytes =
        bytes + s->B * s->blk * s->w_in * elem_size(s) + s->B * s->N;
    out->open_positions = s->pos - s->open0;
    return 0;
}

/* --------------------------------------------------------- appending */

/* Full mode's kept keys and values for positions up to `units`. */
static int
grow(clf_stream *s, size_t units)
{
    size_t i;

    for (i = 0; i < s->layers; i++) {
        struct layer_state *l = &s->ls[i];
        size_t cap = l->cap ? l->cap : 64;
        float *k;

        if (units <= l->cap)
            continue;
        while (cap < units)
            cap *= 2;
        if (cap > s->N)
            cap = s->N;
        k = realloc(l->kept, cap * l->g.sides * s->B * l->g.per * sizeof *k);
        if (k == NULL)
            return clf__fail(CLF_ENO_MEMORY,
                             "out of host memory for a stream's state");
        l->kept = k;
        l->cap = cap;
    }
    return 0;
}

/* The layer's or model's mode is still the stream's. */
static int
mode_holds(const clf_stream *s)
{
    struct clf__layer_shape L;
    clf_mode mode = s->mode;

    if (s->att != NULL) {
        clf__layer_shape(s->att, &L);
        mode = L.mode;
    }

    if (s->m != NULL && clf_model_get_mode(s->m, &mode) != 0)
        return clf__fail(CLF_EINVALID_ARGUMENT, "the model's mode is unknown");
    if (mode != s->mode)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "the %s's mode changed since the stream was made "
                         "(make a new stream)",
                         s->m ? "model" : "layer");
    return 0;
}

static int
check_append(clf_stream *s, const void *in, size_t batch, size_t count,
             const float *y, int tokens)
{
    if (s == NULL || in == NULL || y == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         s == NULL    ? "s"
                         : in == NULL ? (tokens ? "ids" : "x")
                                      : (tokens ? "logits" : "y"));
    if (tokens != s->tokens)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         s->tokens ? "this stream's model is an LM: append "
                                     "token ids (clf_stream_append_tokens)"
                                   : "this stream's model takes rows of "
                                     "floats, not token ids "
                                     "(clf_stream_append)");
    if (batch != s->B)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "batch %zu does not match the stream's %zu", batch,
                         s->B);
    if (count == 0)
        return clf__fail(CLF_EBAD_SIZE, "count is 0");
    if (count > s->N - s->pos)
        return clf__fail(CLF_ESEQ_TOO_LONG,
                         "appending %zu position(s) at position %zu passes "
                         "max_seq_len %zu (a stream ends there; reset it)",
                         count, s->pos, s->N);
    return mode_holds(s);
}

/* Shard 1's rows: the open block's kept rows, then the new ones. */
static void *
rows_of_shard(const clf_stream *s, const void *in, size_t count, size_t nl)
{
    const size_t row = s->w_in * elem_size(s), keep = nl - count;
    char *x = malloc(s->B * nl * row);
    size_t b;

    if (x == NULL)
        return NULL;
    for (b = 0; b < s->B; b++) {
        memcpy(x + b * nl * row, (const char *)s->open + b * keep * row,
               keep * row);
        memcpy(x + (b * nl + keep) * row, (const char *)in + b * count * row,
               count * row);
    }
    return x;
}

/* The padding of positions 0..t1-1 (NULL when none was ever given). */
static unsigned char *
mask_of(clf_stream *s, const unsigned char *km, size_t count, size_t t1)
{
    unsigned char *mk;
    size_t b;

    for (b = 0; km != NULL && b < s->B * count; b++)
        s->masked |= km[b] == 0;
    for (b = 0; b < s->B; b++) {
        if (km != NULL)
            memcpy(s->hist + b * s->N + s->pos, km + b * count, count);
        else
            memset(s->hist + b * s->N + s->pos, 1, count);
    }
    if (!s->masked)
        return NULL;
    mk = malloc(s->B * t1);
    for (b = 0; mk != NULL && b < s->B; b++)
        memcpy(mk + b * t1, s->hist + b * s->N, t1);
    return mk;
}

static int
run_shards(clf_stream *s, const void *x, size_t t1, float *out,
           const unsigned char *mk)
{
    const size_t bounds[3] = {0, s->open0, t1};
    const int two = s->open0 > 0;
    clf__shard_comm comm = {two,      two + 1,  s,       no_sum,
                            exchange, no_bcast, no_abort};
    clf_forward_opts o;

    memset(&o, 0, sizeof o);
    o.causal = 1;
    o.key_mask = mk;
    s->call = 0;
    s->first = s->open0 / s->blk;
    if (s->att != NULL)
        return clf__shard_attention_forward(
            s->att, &comm, s->B, t1, two ? bounds : bounds + 1, x, out, &o);
    if (s->tokens)
        return clf__shard_model_forward_tokens(
            s->m, &comm, s->B, t1, two ? bounds : bounds + 1, x, out, &o);
    return clf__shard_model_forward(s->m, &comm, s->B, t1,
                                    two ? bounds : bounds + 1, x, out, &o);
}

/* After a forward that succeeded: the new rows' outputs to y, and the
 * state moved on to t1. */
static void
commit(clf_stream *s, const char *x, const float *out, size_t count, size_t t1,
       float *y)
{
    const size_t nl = t1 - s->open0, keep = nl - count;
    const size_t row = s->w_in * elem_size(s);
    size_t b, open0, nk;

    for (b = 0; b < s->B; b++)
        memcpy(y + b * count * s->w_out, out + (b * nl + keep) * s->w_out,
               count * s->w_out * sizeof *y);
    /* the units kept: every block before the last position's, or every
     * position in full mode */
    open0 = s->linformer ? (t1 - 1) / s->blk * s->blk : t1;
    nk = t1 - open0;
    for (b = 0; nk > 0 && b < s->B; b++)
        memcpy((char *)s->open + b * nk * row,
               x + (b * nl + (open0 - s->open0)) * row, nk * row);
    s->open0 = open0;
    s->pos = t1;
}

static int
append(clf_stream *s, const void *in, size_t batch, size_t count,
       const unsigned char *km, float *y, int tokens)
{
    const int masked = s != NULL ? s->masked : 0;
    size_t t1, nl;
    void *x = NULL;
    float *out = NULL;
    unsigned char *mk = NULL;
    int rc;

    CLF_TRY(check_append(s, in, batch, count, y, tokens));
    t1 = s->pos + count;
    nl = t1 - s->open0;
    if (!s->linformer)
        CLF_TRY(grow(s, t1));
    x = rows_of_shard(s, in, count, nl);
    out = malloc(s->B * nl * s->w_out * sizeof *out);
    mk = mask_of(s, km, count, t1);
    rc = x == NULL || out == NULL || (s->masked && mk == NULL)
             ? clf__fail(CLF_ENO_MEMORY, "out of host memory")
             : run_shards(s, x, t1, out, mk);
    if (rc == 0)
        commit(s, x, out, count, t1, y);
    else
        s->masked = masked;
    free(x);
    free(out);
    free(mk);
    return rc;
}

int
clf_stream_append(clf_stream *s, const float *x, size_t batch, size_t count,
                  const unsigned char *key_mask, float *y)
{
    return append(s, x, batch, count, key_mask, y, 0);
}

int
clf_stream_append_tokens(clf_stream *s, const long long *ids, size_t batch,
                         size_t count, const unsigned char *key_mask,
                         float *logits)
{
    return append(s, ids, batch, count, key_mask, logits, 1);
}
