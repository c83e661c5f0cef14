/* Models and attention layers on a group of contexts (clf_group_model_*,
 * clf_group_attention_*): one copy per device, and a forward split over
 * the devices by positions (each device its rows of every sequence, the
 * sharded forward of src/parallel/parallel.h) or by whole sequences (batch
 * split). */
#include "parallel/parallel.h"

#include <stdlib.h>
#include <string.h>

/* What a group object holds: one part per device (a model or an attention
 * layer), and the two calls in which the kinds of part differ. */
struct parts {
    clf_group *g;
    void **at; /* g->count parts, NULL where not made */
    void (*destroy)(void *);
    int (*set_mode)(void *, clf_mode);
};

struct clf_group_model {
    struct parts parts; /* first: parts_free() frees the object by it */
    clf_model_info info;
    int half; /* half-precision attention layers: never split by positions */
};

struct clf_group_attention {
    struct parts parts; /* first: parts_free() frees the object by it */
    size_t D;
};

static int
parts_new(struct parts *s, clf_group *g, void (*destroy)(void *),
          int (*set_mode)(void *, clf_mode))
{
    s->g = g;
    s->destroy = destroy;
    s->set_mode = set_mode;
    s->at = calloc(g->count, sizeof *s->at);
    return s->at != NULL ? 0 : clf__fail(CLF_ENO_MEMORY, "out of host memory");
}

/* Frees a group object (NULL: nothing), whose first member is its parts. */
static void
parts_free(void *holder)
{
    struct parts *s = holder;
    size_t i;

    if (holder == NULL)
        return;
    for (i = 0; s->at != NULL && i < s->g->count; i++)
        s->destroy(s->at[i]);
    free(s->at);
    free(holder);
}

static void *
parts_get(const struct parts *s, size_t i)
{
    return i < s->g->count ? s->at[i] : NULL;
}

static int
parts_set_mode(struct parts *s, clf_mode mode)
{
    size_t i;

    for (i = 0; i < s->g->count; i++)
        CLF_TRY(s->set_mode(s->at[i], mode));
    return 0;
}

/* The arguments every constructor takes: NULL ones named. */
static int
check_new(const void *out, const clf_group *g, const void *what,
          const char *name)
{
    if (out == NULL || g == NULL || what == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         out == NULL ? "out"
                         : g == NULL ? "g"
                                     : name);
    return 0;
}

static clf_model *
model_at(const clf_group_model *gm, size_t i)
{
    return gm->parts.at[i];
}

static clf_attention *
layer_at(const clf_group_attention *ga, size_t i)
{
    return ga->parts.at[i];
}

static void
destroy_model(void *m)
{
    clf_model_destroy(m);
}

static int
set_model_mode(void *m, clf_mode mode)
{
    return clf_model_set_mode(m, mode);
}

CLF_EXTERN void
clf_group_model_destroy(clf_group_model *gm)
{
    parts_free(gm);
}

CLF_EXTERN int
clf_group_model_load(clf_group_model **out, clf_group *g, const char *path,
                     const clf_model_opts *opts)
{
    clf_group_model *gm;
    clf_model *m;
    size_t i;
    int rc;

    CLF_TRY(check_new(out, g, path, "path"));
    *out = NULL;
    gm = calloc(1, sizeof *gm);
    if (gm == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    gm->half = opts != NULL && opts->precision == CLF_PRECISION_HALF;
    rc = parts_new(&gm->parts, g, destroy_model, set_model_mode);
    for (i = 0; rc == 0 && i < g->count; i++) {
        m = NULL;
        rc = clf_model_load(&m, g->ctx[i], path, opts);
        gm->parts.at[i] = m;
    }
    if (rc == 0)
        rc = clf_model_info_get(model_at(gm, 0), &gm->info);
    if (rc != 0) {
        clf_group_model_destroy(gm);
        return rc;
    }
    *out = gm;
    return 0;
}

CLF_EXTERN clf_model *
clf_group_model_part(const clf_group_model *gm, size_t i)
{
    return gm != NULL ? parts_get(&gm->parts, i) : NULL;
}

CLF_EXTERN int
clf_group_model_set_mode(clf_group_model *gm, clf_mode mode)
{
    if (gm == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "gm is NULL");
    return parts_set_mode(&gm->parts, mode);
}

/* One forward over the group: what every shard needs. */
struct job {
    clf_group_model *gm;
    clf_group_attention *ga;
    size_t B, n, in_w, out_w; /* row widths of input (1: token ids), output */
    const void *x;
    float *y;
    const clf_forward_opts *opts;
    size_t *bounds; /* positions (seq) or sequences (batch) per shard */
    int batch;
};

/* CLF_ESIZE_OVERFLOW when batch x seq_len rows of in_bytes or out_bytes
 * (the host slices of a split) do not fit in size_t: refused before any
 * slice is sized or copied. */
static int
check_rows(size_t B, size_t n, size_t in_bytes, size_t out_bytes)
{
    size_t rows, t;

    if (clf__mul(B, n, &rows) || clf__mul(rows, in_bytes, &t) ||
        clf__mul(rows, out_bytes, &t))
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "batch %zu x seq_len %zu overflows size_t", B, n);
    return 0;
}

/* The shard's rows of every sequence, gathered into one array. */
static void *
slice_rows(const struct job *j, int rank, size_t elem)
{
    const size_t b0 = j->bounds[rank], nl = j->bounds[rank + 1] - b0;
    const size_t row = j->in_w * elem;
    char *out = malloc(j->B * nl * row);
    size_t b;

    if (out == NULL)
        return NULL;
    for (b = 0; b < j->B; b++)
        memcpy(out + b * nl * row, (const char *)j->x + (b * j->n + b0) * row,
               nl * row);
    return out;
}

static void
unslice_rows(const struct job *j, int rank, const float *yl)
{
    const size_t b0 = j->bounds[rank], nl = j->bounds[rank + 1] - b0;
    size_t b;

    for (b = 0; b < j->B; b++)
        memcpy(j->y + (b * j->n + b0) * j->out_w, yl + b * nl * j->out_w,
               nl * j->out_w * sizeof *yl);
}

static int
seq_part(struct job *j, int rank, const clf__shard_comm *comm, void *xl,
         float *yl)
{
    if (j->ga != NULL)
        return clf__shard_attention_forward(layer_at(j->ga, rank), comm, j->B,
                                            j->n, j->bounds, xl, yl, j->opts);
    if (j->in_w == 1)
        return clf__shard_model_forward_tokens(model_at(j->gm, rank), comm,
                                               j->B, j->n, j->bounds, xl, yl,
                                               j->opts);
    return clf__shard_model_forward(model_at(j->gm, rank), comm, j->B, j->n,
                                    j->bounds, xl, yl, j->opts);
}

static int
run_seq(void *user, int rank, const clf__shard_comm *comm)
{
    struct job *j = user;
    const size_t nl = j->bounds[rank + 1] - j->bounds[rank];
    void *xl =
        slice_rows(j, rank, j->in_w == 1 ? sizeof(long long) : sizeof(float));
    float *yl = malloc(j->B * nl * j->out_w * sizeof *yl);
    int rc;

    if (xl == NULL || yl == NULL) {
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        comm->abort_all(comm->self, rc);
    } else {
        rc = seq_part(j, rank, comm, xl, yl);
    }
    if (rc == 0)
        unslice_rows(j, rank, yl);
    free(xl);
    free(yl);
    return rc;
}

/* Whole sequences [bounds[r], bounds[r+1]) on device r: no exchange. */
static int
run_batch(void *user, int rank, const clf__shard_comm *comm)
{
    struct job *j = user;
    const size_t s0 = j->bounds[rank], cnt = j->bounds[rank + 1] - s0;
    const size_t elem = j->in_w == 1 ? sizeof(long long) : sizeof(float);
    const void *x = (const char *)j->x + s0 * j->n * j->in_w * elem;
    float *y = j->y + s0 * j->n * j->out_w;
    clf_forward_opts o;

    (void)comm;
    memset(&o, 0, sizeof o);
    if (j->opts != NULL) {
        o = *j->opts;
        if (o.lengths != NULL)
            o.lengths += s0;
        if (o.key_mask != NULL)
            o.key_mask += s0 * j->n;
    }
    if (j->ga != NULL)
        return clf_attention_forward_ex(layer_at(j->ga, rank), x, cnt, j->n, y,
                                        &o);
    if (j->in_w == 1)
        return clf_model_forward_tokens(model_at(j->gm, rank), x, cnt, j->n, y,
                                        &o);
    return clf_model_forward(model_at(j->gm, rank), x, cnt, j->n, y, &o);
}

/* The cost model: a batch split moves nothing between devices and runs
 * whole sequences, so it wins whenever every device gets a sequence;
 * below that, positions are split, except for half-precision layers,
 * which the split by positions does not take (fewer devices then run). */
static int
pick_batch(const clf_group *g, const struct job *j)
{
    struct clf__layer_shape L;
    int half = j->gm != NULL && j->gm->half;

    if (j->gm == NULL) {
        clf__layer_shape(layer_at(j->ga, 0), &L);
        half = L.desc.precision == CLF_PRECISION_HALF;
    }

    if (g->by == CLF_SHARD_BATCH)
        return 1;
    if (g->by == CLF_SHARD_SEQ)
        return 0;
    return half || j->B >= g->count;
}

static int
run_job(clf_group *g, struct job *j, size_t unit, const double *weights)
{
    size_t units = (j->n + unit - 1) / unit, shards = g->count;
    int rc;

    j->batch = pick_batch(g, j);
    if (j->batch && shards > j->B)
        shards = j->B;
    if (!j->batch && shards > units)
        shards = units;
    j->bounds = malloc((shards + 1) * sizeof *j->bounds);
    if (j->bounds == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    rc = j->batch
             ? clf__shard_split(j->B, (int)shards, weights, 1, j->bounds)
             : clf__shard_split(j->n, (int)shards, weights, unit, j->bounds);
    if (rc == 0)
        rc = clf__group_run((int)shards, j->batch ? run_batch : run_seq, j);
    g->last = j->batch ? CLF_SHARD_BATCH : CLF_SHARD_SEQ;
    g->last_shards = shards;
    free(j->bounds);
    j->bounds = NULL;
    return rc;
}

/* Device i's throughput (positions per second) for this model and shape:
 * stored, or one forward of the whole input alone on it timed now (after
 * a warm-up) and stored. */
static int
measure(clf_group_model *gm, size_t i, const struct job *j, double *rate)
{
    clf_context *ctx = gm->parts.g->ctx[i];
    char bucket[48];
    float *y;
    double t0 = 0.0;
    int r, rc = 0;

    snprintf(bucket, sizeof bucket, "shard.%s.d%zu.l%zu.n%zu",
             gm->info.vocab ? "lm" : "enc", gm->info.d_model, gm->info.layers,
             clf__pow2_bucket(j->B * j->n, (size_t)1 << 30));
    for (r = 0; bucket[r] != '\0'; r++)
        if (bucket[r] == '-')
            bucket[r] = '.';
    if (clf__rate_lookup(ctx, bucket, rate))
        return 0;
    y = malloc(j->B * j->n * j->out_w * sizeof *y);
    if (y == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (r = 0; rc == 0 && r < 2; r++) {
        t0 = clf__now_s();
        rc = j->in_w == 1 ? clf_model_forward_tokens(model_at(gm, i), j->x,
                                                     j->B, j->n, y, j->opts)
                          : clf_model_forward(model_at(gm, i), j->x, j->B, j->n,
                                              y, j->opts);
    }
    free(y);
    if (rc != 0)
        return rc;
    *rate = (double)(j->B * j->n) / (clf__now_s() - t0 + 1e-9);
    clf__rate_record(ctx, bucket, *rate);
    return 0;
}

/* The weights of a model's forward: the caller's, else each device's
 * measured throughput (a single device needs none). */
static int
model_weights(clf_group_model *gm, const struct job *j, double **w)
{
    size_t i;

    *w = NULL;
    if (gm->parts.g->weights != NULL || gm->parts.g->count < 2)
        return 0;
    *w = malloc(gm->parts.g->count * sizeof **w);
    if (*w == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (i = 0; i < gm->parts.g->count; i++)
        CLF_TRY(measure(gm, i, j, &(*w)[i]));
    return 0;
}

static int
model_forward(clf_group_model *gm, const void *x, size_t B, size_t n, float *y,
              const clf_forward_opts *opts, int tokens)
{
    struct job j;
    double *w = NULL;
    int rc;

    if (gm == NULL || x == NULL || y == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         gm == NULL  ? "gm"
                         : x == NULL ? "x"
                                     : "y");
    if ((gm->info.vocab != 0) != tokens)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         tokens ? "a %s model takes float inputs"
                                : "a %s model takes token ids",
                         clf_layout_name(gm->info.layout));
    if (B == 0 || n == 0)
        return clf__fail(CLF_EBAD_SIZE, "%s is 0",
                         B == 0 ? "batch" : "seq_len");
    CLF_TRY(check_rows(
        B, n, tokens ? sizeof(long long) : gm->info.d_model * sizeof(float),
        (tokens ? gm->info.vocab : gm->info.d_model) * sizeof(float)));
    memset(&j, 0, sizeof j);
    j.gm = gm;
    j.B = B;
    j.n = n;
    j.in_w = tokens ? 1 : gm->info.d_model;
    j.out_w = tokens ? gm->info.vocab : gm->info.d_model;
    j.x = x;
    j.y = y;
    j.opts = opts;
    rc = model_weights(gm, &j, &w);
    if (rc == 0)
        rc = run_job(
            gm->parts.g, &j,
            clf__shard_unit(model_at(gm, 0), opts != NULL && opts->causal),
            w != NULL ? w : gm->parts.g->weights);
    free(w);
    return rc;
}

CLF_EXTERN int
clf_group_model_forward(clf_group_model *gm, const float *x, size_t batch,
                        size_t seq_len, float *y, const clf_forward_opts *opts)
{
    return model_forward(gm, x, batch, seq_len, y, opts, 0);
}

CLF_EXTERN int
clf_group_model_forward_tokens(clf_group_model *gm, const long long *ids,
                               size_t batch, size_t seq_len, float *logits,
                               const clf_forward_opts *opts)
{
    return model_forward(gm, ids, batch, seq_len, logits, opts, 1);
}

/* ------------------------------------------------------ attention layers */

static void
destroy_layer(void *a)
{
    clf_attention_destroy(a);
}

static int
set_layer_mode(void *a, clf_mode mode)
{
    return clf_attention_set_mode(a, mode);
}

CLF_EXTERN void
clf_group_attention_destroy(clf_group_attention *ga)
{
    parts_free(ga);
}

CLF_EXTERN int
clf_group_attention_create(clf_group_attention **out, clf_group *g,
                           const clf_attention_desc *desc,
                           unsigned long long seed)
{
    clf_group_attention *ga;
    clf_attention *a;
    size_t i;
    int rc;

    CLF_TRY(check_new(out, g, desc, "desc"));
    *out = NULL;
    ga = calloc(1, sizeof *ga);
    if (ga == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    ga->D = desc->d_model;
    rc = parts_new(&ga->parts, g, destroy_layer, set_layer_mode);
    for (i = 0; rc == 0 && i < g->count; i++) {
        a = NULL;
        rc = clf_attention_create(&a, g->ctx[i], desc);
        ga->parts.at[i] = a;
        if (rc == 0)
            rc = clf_attention_randomize(a, seed);
    }
    if (rc != 0) {
        clf_group_attention_destroy(ga);
        return rc;
    }
    *out = ga;
    return 0;
}

CLF_EXTERN clf_attention *
clf_group_attention_part(const clf_group_attention *ga, size_t i)
{
    return ga != NULL ? parts_get(&ga->parts, i) : NULL;
}

CLF_EXTERN int
clf_group_attention_set_mode(clf_group_attention *ga, clf_mode mode)
{
    if (ga == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ga is NULL");
    return parts_set_mode(&ga->parts, mode);
}

CLF_EXTERN int
clf_group_attention_forward_ex(clf_group_attention *ga, const float *x,
                               size_t batch, size_t seq_len, float *y,
                               const clf_forward_opts *opts)
{
    struct clf__layer_shape a0;
    struct job j;
    size_t unit = 1;

    if (ga == NULL || x == NULL || y == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         ga == NULL  ? "ga"
                         : x == NULL ? "x"
                                     : "y");
    if (batch == 0 || seq_len == 0)
        return clf__fail(CLF_EBAD_SIZE, "%s is 0",
                         batch == 0 ? "batch" : "seq_len");
    CLF_TRY(check_rows(batch, seq_len, ga->D * sizeof(float),
                       ga->D * sizeof(float)));
    clf__layer_shape(layer_at(ga, 0), &a0);
    if (opts != NULL && opts->causal && a0.mode == CLF_MODE_LINFORMER &&
        a0.desc.causal_block > 0)
        unit = a0.desc.causal_block;
    memset(&j, 0, sizeof j);
    j.ga = ga;
    j.B = batch;
    j.n = seq_len;
    j.in_w = j.out_w = ga->D;
    j.x = x;
    j.y = y;
    j.opts = opts;
    return run_job(ga->parts.g, &j, unit, ga->parts.g->weights);
}

static int
lookahead_forward(void *user, const float *x, size_t seq_len, float *y,
                  const clf_forward_opts *opts)
{
    return clf_group_attention_forward_ex(user, x, 1, seq_len, y, opts);
}

CLF_EXTERN int
clf_group_attention_check_lookahead(clf_group_attention *ga, const float *x,
                                    size_t seq_len,
                                    const clf_forward_opts *opts,
                                    const size_t *positions, size_t npositions,
                                    unsigned long long seed,
                                    clf_lookahead_result *result)
{
    if (ga == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ga is NULL");
    return clf__lookahead_run(lookahead_forward, ga, ga->D, x, seq_len, opts,
                              positions, npositions, seed, result);
}
