/* Native half arithmetic for half-stored weights (docs/design.md, section
 * "Native half arithmetic").  cl/half_gemm.cl is a program of its own,
 * built only where the device reports cl_khr_fp16; before it is offered a
 * self-test runs its GEMMs on small odd shapes against a double-precision
 * host computation and checks a few half operations (rounding to even,
 * exact products, no flush of a representable subnormal, overflow to
 * infinity).  Whatever fails there, the layer keeps widening its weights
 * into float32, and the reason shows in the kernel choice line. */
#include "gemm/gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SET CLF_SET_ARG

/* The self-test's shapes: odd, not multiples of the kernels' 4 and 8. */
#define ST_M 7
#define ST_N 11
#define ST_K 37
#define ST_BATCH 2

/* binary16 bits as a double (every finite value, subnormals included). */
static double
half_value(uint16_t h)
{
    const int e = (h >> 10) & 0x1f, f = h & 0x3ff;
    const double s = (h & 0x8000) ? -1.0 : 1.0;

    if (e == 0x1f)
        return f ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp((double)f, -24);
    return s * ldexp(1024.0 + f, e - 25);
}

/* A random binary16 of magnitude in [2^-6, 2), either sign. */
static uint16_t
random_half(unsigned long long *state)
{
    unsigned long long r = clf__splitmix64(state);

    return (uint16_t)(((r & 1) << 15) | ((9 + (r >> 1) % 7) << 10) |
                      ((r >> 8) & 0x3ff));
}

static void
release_state(clf_context *ctx, void *state)
{
    struct clf__half_gemm_state *st = state;

    (void)ctx;
    if (st->nt != NULL)
        clReleaseKernel(st->nt);
    if (st->nn != NULL)
        clReleaseKernel(st->nn);
    if (st->sanity != NULL)
        clReleaseKernel(st->sanity);
    if (st->program != NULL)
        clReleaseProgram(st->program);
    st->nt = st->nn = st->sanity = NULL;
    st->program = NULL;
}

static const char state_key = 0;

struct clf__half_gemm_state *
clf__half_gemm_state(clf_context *ctx)
{
    return clf__feature(ctx, &state_key, sizeof(struct clf__half_gemm_state),
                        NULL, release_state);
}

/* Not offered: the reason kept, and the half-weight way listed as
 * widening for it (the note lives as long as the context). */
static int
not_offered(clf_context *ctx, struct clf__half_gemm_state *st, const char *why)
{
    snprintf(st->why, sizeof st->why, "%s", why);
    snprintf(st->note, sizeof st->note, "native not offered: %s", why);
    st->offered = -1;
    clf__choice_fixed(ctx, CLF_KIND_HALFGEMM, CLF_HALFGEMM_WIDEN, st->note);
    return 0;
}

/* Builds cl/half_gemm.cl; 0, or a reason in why. */
static int
build(clf_context *ctx, struct clf__half_gemm_state *st, char *why, size_t cap)
{
    cl_int err = CL_SUCCESS;

    if (st->program != NULL)
        return 0;
    if (clf__program_build_part(ctx, CLF_PART_HALF_GEMM, "-cl-std=CL1.2",
                                &st->program) != 0) {
        snprintf(why, cap, "%s", clf_last_error());
        return -1;
    }
    st->nt = clCreateKernel(st->program, "clf_half_gemm_nt", &err);
    if (err == CL_SUCCESS)
        st->nn = clCreateKernel(st->program, "clf_half_gemm_nn", &err);
    if (err == CL_SUCCESS)
        st->sanity = clCreateKernel(st->program, "clf_half_gemm_sanity", &err);
    if (err != CL_SUCCESS) {
        snprintf(why, cap, "half_gemm.cl: clCreateKernel failed (%d)", err);
        release_state(ctx, st);
        return -1;
    }
    return 0;
}

/* Sizes the kernels take as int. */
static int
fits_int(const struct clf__gemm_args *g)
{
    const size_t lim = 0x7fffffff;

    return g->m <= lim && g->n <= lim && g->k <= lim && g->lda <= lim &&
           g->ldb <= lim && g->ldc <= lim;
}

/* Enqueues kernel k over ceil(n / per) x ceil(m / rows) x batch
 * work-items. */
static int
launch(clf_context *ctx, struct clf__half_gemm_state *st, cl_kernel k,
       const struct clf__gemm_args *g, size_t per, size_t rows)
{
    size_t global[3] = {(g->n + per - 1) / per, (g->m + rows - 1) / rows,
                        g->batch};
    cl_int err;

    if (global[0] == 0 || global[1] == 0 || global[2] == 0)
        return 0;
    err = clf__enqueue_nd(ctx, k, 3, global, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err,
                         "native half GEMM %zux%zux%zu x%zu: enqueue failed "
                         "(%d)",
                         g->m, g->n, g->k, g->batch, err);
    st->calls++;
    return 0;
}

/* C = alpha A W^T + bias: A float32, W (g->b) binary16. */
static int
run_nt(clf_context *ctx, struct clf__half_gemm_state *st,
       const struct clf__gemm_args *g)
{
    cl_kernel k = st->nt;
    const cl_int has_bias = g->bias != NULL;
    const cl_mem bias = g->bias != NULL ? g->bias : g->c; /* not read */

    CLF_TRY(clf__gemm_set_operands(k, g));
    SET(k, 16, bias);
    SET(k, 17, has_bias);
    return launch(ctx, st, k, g, 4, 1);
}

/* C = alpha E X: E (g->a) binary16, X float32. */
static int
run_nn(clf_context *ctx, struct clf__half_gemm_state *st,
       const struct clf__gemm_args *g)
{
    CLF_TRY(clf__gemm_set_operands(st->nn, g));
    return launch(ctx, st, st->nn, g, 8, 4);
}

/* ------------------------------------------------------- self-test */

/* Pairs of binary16 operands and the exact binary16 result: two sums
 * that round to even (1 + 2^-11 -> 1, 1 + 3 2^-11 -> 1 + 2^-9), exact
 * products of normal numbers, the smallest normal and a subnormal that
 * must not be flushed, and overflow to infinity. */
static const uint16_t sanity_in[] = {0x3C00, 0x1000, 0x3C00, 0x1600, 0x3D80,
                                     0x3E80, 0x2000, 0x2000, 0x2000, 0x1400,
                                     0x5C00, 0x5C00, 0xC200, 0x3800};
static const uint16_t sanity_want[] = {0x3C00, 0x3C02, 0x4078, 0x0400,
                                       0x0080, 0x7C00, 0xBE00};
#define SANITY_PAIRS 7

static int
run_sanity(clf_context *ctx, struct clf__half_gemm_state *st, char *why,
           size_t cap)
{
    cl_kernel k = st->sanity;
    uint16_t got[SANITY_PAIRS];
    const cl_int pairs = SANITY_PAIRS;
    cl_int err = CL_SUCCESS;
    cl_mem in, out;
    size_t global = SANITY_PAIRS;
    int i;

    in = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                        sizeof sanity_in, (void *)sanity_in, &err);
    out = in ? clCreateBuffer(ctx->context, CL_MEM_WRITE_ONLY, sizeof got, NULL,
                              &err)
             : NULL;
    if (out != NULL && (err = clSetKernelArg(k, 0, sizeof in, &in)) == 0 &&
        (err = clSetKernelArg(k, 1, sizeof out, &out)) == 0 &&
        (err = clSetKernelArg(k, 2, sizeof pairs, &pairs)) == 0 &&
        (err = clf__enqueue_nd(ctx, k, 1, &global, NULL)) == 0)
        err = clEnqueueReadBuffer(ctx->queue, out, CL_TRUE, 0, sizeof got, got,
                                  0, NULL, NULL);
    if (in != NULL)
        clReleaseMemObject(in);
    if (out != NULL)
        clReleaseMemObject(out);
    if (err != CL_SUCCESS) {
        snprintf(why, cap, "half sanity kernel failed (%d)", err);
        return -1;
    }
    for (i = 0; i < SANITY_PAIRS; i++)
        if (got[i] != sanity_want[i]) {
            snprintf(why, cap,
                     "half arithmetic check %d: 0x%04x %s 0x%04x gave "
                     "0x%04x, not 0x%04x",
                     i, sanity_in[2 * i], i < 2 ? "+" : "*",
                     sanity_in[2 * i + 1], got[i], sanity_want[i]);
            return -1;
        }
    return 0;
}

/* One self-test GEMM: host operands, the device's result, the check. */
struct st_case {
    int nn; /* E X (binary16 first), else A W^T + bias */
    float f[ST_BATCH * ST_K * ST_N]; /* the float32 operand */
    uint16_t h[ST_BATCH * ST_M * ST_K + ST_BATCH * ST_N * ST_K];
    float bias[ST_N], c[ST_BATCH * ST_M * ST_N];
};

static void
st_fill(struct st_case *s, unsigned long long seed)
{
    size_t i;

    for (i = 0; i < sizeof s->h / sizeof s->h[0]; i++)
        s->h[i] = random_half(&seed);
    for (i = 0; i < sizeof s->f / sizeof s->f[0]; i++)
        s->f[i] =
            (float)((double)(clf__splitmix64(&seed) >> 11) * 0x1p-52 - 1.0);
    for (i = 0; i < ST_N; i++)
        s->bias[i] = (float)i * 0.125f - 0.5f;
    /* An activation binary16 cannot hold: its group runs in float32. */
    s->f[3] = 1.0e5f;
}

/* Element (t, i, j) of the exact result and the bound on its error. */
static void
st_expect(const struct st_case *s, size_t t, size_t i, size_t j, double *ref,
          double *bound)
{
    double sum = 0.0, mag = 0.0, a, w;
    size_t p;

    for (p = 0; p < ST_K; p++) {
        if (s->nn) {
            w = half_value(s->h[(t * ST_M + i) * ST_K + p]);
            a = s->f[(t * ST_K + p) * ST_N + j];
        } else {
            a = s->f[(t * ST_M + i) * ST_K + p];
            w = half_value(s->h[(t * ST_N + j) * ST_K + p]);
        }
        sum += a * w;
        mag += fabs(a * w);
    }
    *ref = sum + (s->nn ? 0.0 : s->bias[j]);
    *bound = 0x1p-9 * mag + 1e-6 * fabs(*ref);
}

/* The GEMM of the case over buffers f, h, bias, c. */
static void
st_args(const struct st_case *s, float alpha, cl_mem f, cl_mem h, cl_mem bias,
        cl_mem c, struct clf__gemm_args *g)
{
    memset(g, 0, sizeof *g);
    g->m = ST_M, g->n = ST_N, g->k = ST_K, g->alpha = alpha;
    g->batch = ST_BATCH;
    g->a = s->nn ? h : f, g->b = s->nn ? f : h, g->c = c;
    g->bias = s->nn ? NULL : bias;
    g->lda = ST_K, g->ldb = s->nn ? ST_N : ST_K, g->ldc = ST_N;
    g->a_stride = ST_M * ST_K;
    g->b_stride = s->nn ? ST_K * ST_N : ST_N * ST_K;
    g->c_stride = ST_M * ST_N;
}

/* Runs the case on the device into s->c. */
static int
st_run(clf_context *ctx, struct clf__half_gemm_state *st, struct st_case *s,
       float alpha)
{
    cl_mem m[4]; /* f, h, bias, c */
    cl_int err = CL_SUCCESS,
           e[4] = {CL_SUCCESS, CL_SUCCESS, CL_SUCCESS, CL_SUCCESS};
    struct clf__gemm_args g;
    int rc, i, ok = 1;

    m[0] = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                          sizeof s->f, s->f, &e[0]);
    m[1] = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                          sizeof s->h, s->h, &e[1]);
    m[2] = clCreateBuffer(ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                          sizeof s->bias, s->bias, &e[2]);
    m[3] = clCreateBuffer(ctx->context, CL_MEM_WRITE_ONLY, sizeof s->c, NULL,
                          &e[3]);
    for (i = 0; i < 4; i++) { /* the first failure, not the last call's */
        if (err == CL_SUCCESS)
            err = e[i];
        ok = ok && m[i] != NULL;
    }
    if (err == CL_SUCCESS && !ok)
        err = CL_OUT_OF_HOST_MEMORY;
    st_args(s, alpha, m[0], m[1], m[2], m[3], &g);
    rc = ok ? (s->nn ? run_nn(ctx, st, &g) : run_nt(ctx, st, &g))
            : clf__fail(err, "self-test buffers (%d)", err);
    if (rc == 0 &&
        (err = clEnqueueReadBuffer(ctx->queue, m[3], CL_TRUE, 0, sizeof s->c,
                                   s->c, 0, NULL, NULL)) != CL_SUCCESS)
        rc = clf__fail(err, "self-test read failed (%d)", err);
    for (i = 0; i < 4; i++)
        if (m[i] != NULL)
            clReleaseMemObject(m[i]);
    return rc;
}

static int
st_gemm(clf_context *ctx, struct clf__half_gemm_state *st, int nn, int fault,
        char *why, size_t cap)
{
    struct st_case *s = calloc(1, sizeof *s);
    size_t t, i, j;
    double ref, bound;
    float got;
    int rc = -1;

    if (s == NULL) {
        snprintf(why, cap, "out of host memory");
        return -1;
    }
    s->nn = nn;
    st_fill(s, 0x66703136ULL + (unsigned)nn);
    if (st_run(ctx, st, s, fault ? 1.5f : 1.0f) != 0) {
        snprintf(why, cap, "self-test GEMM failed to run: %s",
                 clf_last_error());
        free(s);
        return -1;
    }
    rc = 0;
    for (t = 0; t < ST_BATCH && rc == 0; t++)
        for (i = 0; i < ST_M && rc == 0; i++)
            for (j = 0; j < ST_N && rc == 0; j++) {
                st_expect(s, t, i, j, &ref, &bound);
                got = s->c[(t * ST_M + i) * ST_N + j];
                if (!(fabs(got - ref) <= bound)) {
                    snprintf(why, cap,
                             "self-test %s GEMM %dx%dx%d: element (%zu, %zu, "
                             "%zu) is %.9g, the exact %.9g (allowed %.3g)",
                             nn ? "E X" : "X W^T", ST_M, ST_N, ST_K, t, i, j,
                             (double)got, ref, bound);
                    rc = -1;
                }
            }
    free(s);
    return rc;
}

int
clf__half_gemm_selftest(clf_context *ctx, int fault)
{
    struct clf__half_gemm_state *st = clf__half_gemm_state(ctx);
    char why[sizeof st->why];

    if (st == NULL)
        return CLF_ENO_MEMORY;
    clf__lock(ctx);
    if (!clf__device_has_extension(ctx, "cl_khr_fp16"))
        snprintf(why, sizeof why, "the device does not report cl_khr_fp16");
    else if (build(ctx, st, why, sizeof why) == 0 &&
             run_sanity(ctx, st, why, sizeof why) == 0 &&
             st_gemm(ctx, st, 0, fault, why, sizeof why) == 0 &&
             st_gemm(ctx, st, 1, fault, why, sizeof why) == 0)
        why[0] = '\0';
    if (why[0] == '\0') {
        /* Offered (again): the way is the plan's to choose. */
        if (st->offered < 0 && ctx->last_why[CLF_KIND_HALFGEMM] == st->note)
            clf__choice_fixed(ctx, CLF_KIND_HALFGEMM, -1, NULL);
        st->offered = 1;
        st->why[0] = st->note[0] = '\0';
    } else {
        not_offered(ctx, st, why);
    }
    clf__unlock(ctx);
    if (why[0] != '\0')
        return clf__fail(CLF_EUNSUPPORTED, "native half arithmetic: %s", why);
    return 0;
}

/* The kind of choice "halfgemm": widening a half weight into float32 or
 * the native kernels, listed last and only once chosen. */
static const char *const halfgemm_names[] = {"widen", "native"};
static const char *const halfgemm_labels[] = {"halfgemm"};
static const struct clf__choice_kind halfgemm_kind = {
    "halfgemm", halfgemm_names, 2, halfgemm_labels, 1, 3, 0};
CLF_CHOICE_KIND(clf__half_gemm_kind, halfgemm_kind)

int
clf__half_gemm_offered(clf_context *ctx)
{
    struct clf__half_gemm_state *st = clf__half_gemm_state(ctx);
    int offered;

    if (st == NULL)
        return 0;
    clf__lock(ctx);
    if (st->offered == 0)
        (void)clf__half_gemm_selftest(ctx, 0);
    offered = st->offered > 0;
    clf__unlock(ctx);
    return offered;
}

/* Why the native kernels cannot take g, or 0 when they can. */
static int
refuse(const struct clf__half_gemm_state *st, const struct clf__gemm_args *g)
{
    if (st->offered <= 0 || st->nt == NULL)
        return clf__fail(CLF_EUNSUPPORTED,
                         "native half GEMM: not offered on this device%s%s",
                         st->why[0] ? ": " : "", st->why);
    if (!fits_int(g))
        return clf__fail(CLF_ETOO_LARGE,
                         "native half GEMM %zux%zux%zu: a size or stride "
                         "past 2^31-1",
                         g->m, g->n, g->k);
    return 0;
}

int
clf__half_gemm(clf_context *ctx, const struct clf__gemm_args *g, int half_a,
               int half_b)
{
    struct clf__half_gemm_state *st = clf__half_gemm_state(ctx);
    const int plain = !g->trans_a && g->beta == 0.0f && !g->act;

    if (st == NULL)
        return CLF_ENO_MEMORY;
    CLF_TRY(refuse(st, g));
    if (half_b && !half_a && plain && g->trans_b)
        return run_nt(ctx, st, g);
    if (half_a && !half_b && plain && !g->trans_b && g->bias == NULL)
        return run_nn(ctx, st, g);
    return clf__fail(CLF_EUNSUPPORTED,
                     "native half GEMM: operands or transposes "
                     "(trans_a %d, trans_b %d, beta %g) it does not take",
                     g->trans_a, g->trans_b, (double)g->beta);
}
