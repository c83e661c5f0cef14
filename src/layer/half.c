/* Half-precision storage of a layer's weights (docs/design.md, section
 * "Precision").  A CLF_PRECISION_HALF layer keeps W_q, W_k, W_v, W_out, E
 * and F as binary16 on the device, narrowed there from a float32 staging
 * buffer (vstore_half, round to nearest even).  CLBlast's GEMMs and the own
 * kernels read float32, so just before the GEMM that reads a weight the
 * forward widens it (vload_half) into one of two float32 scratch buffers
 * of the context, one for W matrices and one for E and F, which every
 * layer of the context reuses: stored weights take half the memory, and
 * the price is one extra pass over each weight per forward. */
#include "layer/layer_impl.h"

#include <math.h>
#include <string.h>

#define SET CLF_SET_ARG

/* binary16's largest finite value. */
#define HALF_MAX 65504.0f

static const char *const precision_names[] = {"float", "half"};

CLF_EXTERN const char *
clf_precision_name(clf_precision precision)
{
    if ((int)precision < 0 || precision > CLF_PRECISION_HALF)
        return "?";
    return precision_names[precision];
}

CLF_EXTERN int
clf_precision_parse(const char *name, clf_precision *out)
{
    if (name == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "precision name is NULL");
    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    if (strcmp(name, "float") == 0 || strcmp(name, "fp32") == 0) {
        *out = CLF_PRECISION_FLOAT;
        return 0;
    }
    if (strcmp(name, "half") == 0 || strcmp(name, "fp16") == 0) {
        *out = CLF_PRECISION_HALF;
        return 0;
    }
    return clf__fail(CLF_EBAD_ENUM,
                     "precision \"%s\" is not one of float, half (or fp32, "
                     "fp16)",
                     name);
}

int
clf__half_check(const clf_attention_desc *desc)
{
    if ((int)desc->precision < 0 || desc->precision > CLF_PRECISION_HALF)
        return clf__fail(CLF_EBAD_ENUM,
                         "precision %d is not a clf_precision (0 float, 1 "
                         "half)",
                         (int)desc->precision);
    return 0;
}

/* The scratch buffer a half-stored weight is widened into. */
static int
scratch_of(int which)
{
    return which == CLF_PROJ_E || which == CLF_PROJ_F;
}

int
clf__half_stored(const clf_attention *a, int which)
{
    if (a->desc.precision != CLF_PRECISION_HALF)
        return 0;
    return which == CLF_WEIGHT_Q || which == CLF_WEIGHT_K ||
           which == CLF_WEIGHT_V || which == CLF_WEIGHT_OUT ||
           which == CLF_PROJ_E || which == CLF_PROJ_F;
}

size_t
clf__half_weight_bytes(const clf_attention *a, int which)
{
    return a->wsize[which] *
           (clf__half_stored(a, which) ? sizeof(cl_half) : sizeof(float));
}

size_t
clf__half_scratch_bytes(const clf_attention *a)
{
    size_t w = 0, e = 0;
    int i;

    for (i = 0; i < CLF_WEIGHT_COUNT; i++) {
        if (!clf__half_stored(a, i) || a->w[i] == NULL)
            continue;
        if (scratch_of(i) && a->wsize[i] > e)
            e = a->wsize[i];
        else if (!scratch_of(i) && a->wsize[i] > w)
            w = a->wsize[i];
    }
    return (w + e) * sizeof(float);
}

/* CLF_EINVALID_ARGUMENT for the first finite value binary16 cannot hold. */
static int
check_range(const char *name, const float *data, size_t count)
{
    size_t i;

    for (i = 0; i < count; i++)
        if (isfinite(data[i]) && fabsf(data[i]) > HALF_MAX)
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "weight %s element %zu is %g, beyond the "
                             "half-precision range +-65504 (store it as "
                             "float)",
                             name, i, (double)data[i]);
    return 0;
}

/* Enqueues kernel id (widen or narrow) from src to dst over count
 * elements; with the context locked. */
static int
convert(clf_context *ctx, enum clf__kernel_id id, cl_mem src, cl_mem dst,
        size_t count)
{
    cl_kernel k = ctx->kernels[id];
    cl_ulong c = count;

    SET(k, 0, src);
    SET(k, 1, dst);
    SET(k, 2, c);
    return clf__launch_1d(ctx, id, (count + 3) / 4);
}

/* a->w[which], created with room for count binary16 values when missing. */
static int
half_buffer(clf_attention *a, int which, const char *name, size_t count)
{
    cl_int err;

    if (a->w[which] != NULL)
        return 0;
    a->w[which] = clf__mem_create(a->ctx, CL_MEM_READ_WRITE,
                                  count * sizeof(cl_half), NULL, &err, name);
    if (a->w[which] == NULL)
        return clf__fail(err,
                         "weight %s: clCreateBuffer of %zu bytes failed (%d)",
                         name, count * sizeof(cl_half), err);
    return 0;
}

int
clf__half_upload(clf_attention *a, int which, const char *name,
                 const float *data, size_t count)
{
    clf_context *ctx = a->ctx;
    cl_mem stage;
    cl_int err;
    int rc;

    /* Invalidate first: a refused or failed upload leaves the weight unset,
     * as a float32 one does. */
    a->wset[which] = 0;
    CLF_TRY(check_range(name, data, count));
    CLF_TRY(half_buffer(a, which, name, count));
    stage = clf__mem_create(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                            count * sizeof(float), (void *)data, &err, name);
    if (stage == NULL)
        return clf__fail(err,
                         "weight %s: staging buffer of %zu bytes failed (%d)",
                         name, count * sizeof(float), err);
    clf__lock(ctx);
    rc = convert(ctx, CLF_K_HALF_NARROW, stage, a->w[which], count);
    clf__unlock(ctx);
    if (rc == 0 && (err = clFinish(ctx->queue)) != CL_SUCCESS)
        rc = clf__fail(err, "weight %s: narrowing to half failed (%d)", name,
                       err);
    clReleaseMemObject(stage);
    if (rc == 0)
        a->wset[which] = 1;
    return rc;
}

/* half.c's state in a context: the float32 scratch buffers (0: W matrices, 1: E
 * and F), shared by every layer of the context, and which weight of which
 * layer each holds in this forward (none: owner NULL).  Under the lock. */
struct half_state {
    cl_mem scratch[2];
    size_t cap[2]; /* floats */
    const clf_attention *owner[2];
    int which[2];
};

static void
release_state(clf_context *ctx, void *state)
{
    struct half_state *st = state;
    int s;

    (void)ctx;
    for (s = 0; s < 2; s++)
        if (st->scratch[s] != NULL)
            clReleaseMemObject(st->scratch[s]);
}

static const char state_key = 0;

static struct half_state *
half_state(clf_context *ctx)
{
    return clf__feature(ctx, &state_key, sizeof(struct half_state), NULL,
                        release_state);
}

/* Grows scratch buffer s of the context to at least `floats`. */
static int
scratch_reserve(clf_context *ctx, struct half_state *st, int s, size_t floats)
{
    cl_int err;

    if (floats <= st->cap[s])
        return 0;
    if (st->scratch[s] != NULL)
        clReleaseMemObject(st->scratch[s]);
    st->cap[s] = 0;
    st->owner[s] = NULL;
    st->scratch[s] =
        clf__mem_create(ctx, CL_MEM_READ_WRITE, floats * sizeof(float), NULL,
                        &err, "half-precision widening scratch");
    if (st->scratch[s] == NULL)
        return clf__fail(err,
                         "half-precision widening scratch: clCreateBuffer "
                         "of %zu bytes failed (%d)",
                         floats * sizeof(float), err);
    st->cap[s] = floats;
    return 0;
}

/* The float32 copy of half-stored weight `which` in its scratch buffer, widened
 * now unless the buffer holds it already in this forward. */
static int
widened(clf_attention *a, int which, cl_mem *out)
{
    clf_context *ctx = a->ctx;
    struct half_state *st = half_state(ctx);
    const int s = scratch_of(which);

    if (st == NULL)
        return CLF_ENO_MEMORY;
    if (st->owner[s] != a || st->which[s] != which) {
        CLF_TRY(scratch_reserve(ctx, st, s, a->wsize[which]));
        st->owner[s] = NULL;
        CLF_TRY(convert(ctx, CLF_K_HALF_WIDEN, a->w[which], st->scratch[s],
                        a->wsize[which]));
        st->owner[s] = a;
        st->which[s] = which;
    }
    *out = st->scratch[s];
    return 0;
}

int
clf__half_weight(clf_attention *a, int native, int which, cl_mem *out,
                 int *half)
{
    *half = 0;
    if (!clf__half_stored(a, which) || a->w[which] == NULL) {
        *out = a->w[which];
        return 0;
    }
    if (native) { /* read as binary16 by the GEMM (half_gemm.c) */
        *half = 1;
        *out = a->w[which];
        return 0;
    }
    return widened(a, which, out);
}

int
clf__half_as_float(clf_attention *a, int which, cl_mem *out)
{
    if (!clf__half_stored(a, which) || a->w[which] == NULL) {
        *out = a->w[which];
        return 0;
    }
    return widened(a, which, out);
}

void
clf__half_begin(clf_context *ctx)
{
    struct half_state *st = clf__feature_find(ctx, &state_key);

    if (st != NULL)
        st->owner[0] = st->owner[1] = NULL;
}

/* ---------------------------------------------------------- choice */

/* Buffers of a timing projection: X (m x k), W as binary16 and its
 * float32 copy (n x k), C (m x n); the projections' GEMM way. */
struct timing {
    struct clf__gemm_args g;
    cl_mem wf;
    int way;
};

/* Candidate v on the timing projection: widen W then the float32 GEMM
 * (the projections' way), or the native kernel. */
static int
time_one(clf_context *ctx, int v, void *user)
{
    struct timing *t = user;
    const struct clf__gemm_args *g = &t->g;
    cl_kernel k = ctx->kernels[CLF_K_HALF_WIDEN];
    const cl_ulong count = g->n * g->k;
    struct clf__gemm_args wide = *g;

    if (v == CLF_HALFGEMM_NATIVE)
        return clf__gemm(ctx, t->way | CLF_GEMM_HALF_B, g);
    CLF_SET_ARG(k, 0, g->b);
    CLF_SET_ARG(k, 1, t->wf);
    CLF_SET_ARG(k, 2, count);
    CLF_TRY(clf__launch_1d(ctx, CLF_K_HALF_WIDEN, (count + 3) / 4));
    wide.b = t->wf;
    return clf__gemm(ctx, t->way, &wide);
}

/* t->g.b: the float32 timing weight t->wf narrowed to binary16. */
static int
timing_weight(clf_context *ctx, struct timing *t)
{
    cl_kernel k = ctx->kernels[CLF_K_HALF_NARROW];
    const cl_ulong count = t->g.n * t->g.k;
    cl_int err;

    t->g.b = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE,
                            count * sizeof(cl_half), NULL, &err);
    if (t->g.b == NULL)
        return clf__fail(err, "timing weight of %zu bytes failed (%d)",
                         (size_t)count * sizeof(cl_half), err);
    CLF_SET_ARG(k, 0, t->wf);
    CLF_SET_ARG(k, 1, t->g.b);
    CLF_SET_ARG(k, 2, count);
    return clf__launch_1d(ctx, CLF_K_HALF_NARROW, (count + 3) / 4);
}

static int
time_ways(clf_context *ctx, const char *bucket, size_t D, size_t dq, int way,
          int *native)
{
    struct timing t = {{0}, NULL, way};
    double ms[2] = {0.0, 0.0};
    int rc = 0, best;

    t.g.m = 512, t.g.n = dq, t.g.k = D, t.g.alpha = 1.0f, t.g.batch = 1;
    t.g.trans_b = 1, t.g.lda = D, t.g.ldb = D, t.g.ldc = dq;
    t.g.a = clf__timing_buffer(ctx, t.g.m * D, 1, &rc);
    t.wf = rc == 0 ? clf__timing_buffer(ctx, dq * D, 3, &rc) : NULL;
    t.g.c = rc == 0 ? clf__timing_buffer(ctx, t.g.m * dq, 4, &rc) : NULL;
    if (rc == 0)
        rc = timing_weight(ctx, &t);
    best = rc == 0 ? clf__time_variants(ctx, 2, time_one, &t, 3, ms) : rc;
    if (best >= 0)
        *native = clf__choice_record(ctx, CLF_KIND_HALFGEMM, bucket, best,
                                     ms) == CLF_HALFGEMM_NATIVE;
    /* Timing is optional: where its buffers or a run fail (a nearly full
     * device), the forward widens, which needs none of them. */
    if (t.g.a)
        clReleaseMemObject(t.g.a);
    if (t.g.b)
        clReleaseMemObject(t.g.b);
    if (t.wf)
        clReleaseMemObject(t.wf);
    if (t.g.c)
        clReleaseMemObject(t.g.c);
    return 0;
}

int
clf__half_gemm_resolve(clf_context *ctx, size_t D, size_t dq, int way,
                       int *native)
{
    char bucket[CLF_BUCKET_MAX];
    int found, best = CLF_HALFGEMM_WIDEN, offered, rc;

    *native = 0;
    offered = clf__half_gemm_offered(ctx);
    snprintf(bucket, sizeof bucket, "d%zu.q%zu",
             clf__pow2_bucket(D, (size_t)1 << 20),
             clf__pow2_bucket(dq, (size_t)1 << 20));
    clf__lock(ctx);
    found = clf__choice_lookup(ctx, CLF_KIND_HALFGEMM, bucket, &best);
    if (found == 1)
        *native = best == CLF_HALFGEMM_NATIVE;
    rc = found != 0 || !offered ? found
                                : time_ways(ctx, bucket, D, dq, way, native);
    if (found == 0)
        clf__choice_release(ctx);
    /* Native (forced or stored) where it is not offered: widen, and the
     * listing says why (clf__half_gemm_offered). */
    if (rc >= 0 && !offered) {
        struct clf__half_gemm_state *st = clf__half_gemm_state(ctx);
        *native = 0;
        if (st != NULL)
            clf__choice_fixed(ctx, CLF_KIND_HALFGEMM, CLF_HALFGEMM_WIDEN,
                              st->note);
    }
    clf__unlock(ctx);
    return rc < 0 ? rc : 0;
}
