/* Models and attention layers on a group of contexts (clf_group_model_*,
 * clf_group_attention_*): one copy per device, and a forward split over
 * the devices by positions (each device its rows of every sequence, the
 * sharded forward of src/parallel/parallel.h) or by whole sequences (batch
 * split). */
#include "parallel/parallel.h"

#include <stdlib.h>
#include <string.h>

struct clf_group_model {
    clf_group *g;
    clf_model **m;
    clf_model_info info;
    int half; /* half-precision attention layers: never split by positions */
};

struct clf_group_attention {
    clf_group *g;
    clf_attention **a;
    size_t D;
};

CLF_EXTERN void
clf_group_model_destroy(clf_group_model *gm)
{
    size_t i;

    if (gm == NULL)
        return;
    for (i = 0; gm->m != NULL && i < gm->g->count; i++)
        clf_model_destroy(gm->m[i]);
    free(gm->m);
    free(gm);
}

CLF_EXTERN int
clf_group_model_load(clf_group_model **out, clf_group *g, const char *path,
                     const clf_model_opts *opts)
{
    clf_group_model *gm;
    size_t i;
    int rc = 0;

    if (out == NULL || g == NULL || path == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         out == NULL ? "out"
                         : g == NULL ? "g"
                                     : "path");
    *out = NULL;
    gm = calloc(1, sizeof *gm);
    if (gm != NULL)
        gm->m = calloc(g->count, sizeof *gm->m);
    if (gm == NULL || gm->m == NULL) {
        free(gm);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    gm->g = g;
    gm->half = opts != NULL && opts->precision == CLF_PRECISION_HALF;
    for (i = 0; rc == 0 && i < g->count; i++)
        rc = clf_model_load(&gm->m[i], g->ctx[i], path, opts);
    if (rc == 0)
        rc = clf_model_info_get(gm->m[0], &gm->info);
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
    return gm != NULL && i < gm->g->count ? gm->m[i] : NULL;
}

CLF_EXTERN int
clf_group_model_set_mode(clf_group_model *gm, clf_mode mode)
{
    size_t i;

    if (gm == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "gm is NULL");
    for (i = 0; i < gm->g->count; i++)
        CLF_TRY(clf_model_set_mode(gm->m[i], mode));
    return 0;
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
        return clf__shard_attention_forward(j->ga->a[rank], comm, j->B, j->n,
                                            j->bounds, xl, yl, j->opts);
    if (j->in_w == 1)
        return clf__shard_model_forward_tokens(j->gm->m[rank], comm, j->B, j->n,
                                               j->bounds, xl, yl, j->opts);
    return clf__shard_model_forward(j->gm->m[rank], comm, j->B, j->n, j->bounds,
                                    xl, yl, j->opts);
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
        return clf_attention_forward_ex(j->ga->a[rank], x, cnt, j->n, y, &o);
    if (j->in_w == 1)
        return clf_model_forward_tokens(j->gm->m[rank], x, cnt, j->n, y, &o);
    return clf_model_forward(j->gm->m[rank], x, cnt, j->n, y, &o);
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
        clf__layer_shape(j->ga->a[0], &L);
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
    clf_context *ctx = gm->g->ctx[i];
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
        rc = j->in_w == 1
                 ? clf_model_forward_tokens(gm->m[i], j->x, j->B, j->n, y,
                                            j->opts)
                 : clf_model_forward(gm->m[i], j->x, j->B, j->n, y, j->opts);
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
    if (gm->g->weights != NULL || gm->g->count < 2)
        return 0;
    *w = malloc(gm->g->count * sizeof **w);
    if (*w == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (i = 0; i < gm->g->count; i++)
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
        rc = run_job(gm->g, &j,
                     clf__shard_unit(gm->m[0], opts != NULL && opts->causal),
                     w != NULL ? w : gm->g->weights);
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

CLF_EXTERN void
clf_group_attention_destroy(clf_group_attention *ga)
{
    size_t i;

    if (ga == NULL)
        return;
    for (i = 0; ga->a != NULL && i < ga->g->count; i++)
        clf_attention_destroy(ga->a[i]);
    free(ga->a);
    free(ga);
}

CLF_EXTERN int
clf_group_attention_create(clf_group_attention **out, clf_group *g,
                           const clf_attention_desc *desc,
                           unsigned long long seed)
{
    clf_group_attention *ga;
    size_t i;
    int rc = 0;

    if (out == NULL || g == NULL || desc == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         out == NULL ? "out"
                         : g == NULL ? "g"
                                     : "desc");
    *out = NULL;
    ga = calloc(1, sizeof *ga);
    if (ga != NULL)
        ga->a = calloc(g->count, sizeof *ga->a);
    if (ga == NULL || ga->a == NULL) {
        free(ga);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    ga->g = g;
    ga->D = desc->d_model;
    for (i = 0; rc == 0 && i < g->count; i++) {
        rc = clf_attention_create(&ga->a[i], g->ctx[i], desc);
        if (rc == 0)
            rc = clf_attention_randomize(ga->a[i], seed);
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
    return ga != NULL && i < ga->g->count ? ga->a[i] : NULL;
}

CLF_EXTERN int
clf_group_attention_set_mode(clf_group_attention *ga, clf_mode mode)
{
    size_t i;

    if (ga == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ga is NULL");
    for (i = 0; i < ga->g->count; i++)
        CLF_TRY(clf_attention_set_mode(ga->a[i], mode));
    return 0;
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
    clf__layer_shape(ga->a[0], &a0);
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
    return run_job(ga->g, &j, unit, ga->g->weights);
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
