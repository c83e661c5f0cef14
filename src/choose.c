/* Choosing between kernels that compute the same thing by timing them on
 * the context's device: the softmax variants, the GEMM (CLBlast or the
 * blocked kernel), attention over the slots (GEMM path or fused). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double
clf__now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int
clf__forced_variant(const char *var, const char *const *names, int count,
                    int *variant)
{
    const char *v = getenv(var);
    int i;

    if (v == NULL || *v == '\0')
        return 0;
    for (i = 0; i < count; i++)
        if (strcmp(v, names[i]) == 0) {
            *variant = i;
            return 1;
        }
    return clf__fail(CLF_EINVALID_ARGUMENT, "%s is \"%s\"; expected %s or %s",
                     var, v, names[0], names[count - 1]);
}

cl_mem
clf__timing_buffer(clf_context *ctx, size_t floats, unsigned seed, int *rc)
{
    float *host = malloc((floats ? floats : 1) * sizeof *host);
    cl_mem m;
    cl_int err;
    size_t i;

    if (host == NULL) {
        *rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        return NULL;
    }
    /* Values of order one, no zeros or infinities to take a fast path. */
    for (i = 0; i < floats; i++)
        host[i] = (float)((i * 7 + seed) % 101) * 0.01f - 0.505f;
    m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       (floats ? floats : 1) * sizeof(float), host, &err);
    free(host);
    if (m == NULL)
        *rc = clf__fail(err, "timing buffer of %zu bytes failed (%d)",
                        floats * sizeof(float), err);
    return m;
}

int
clf__time_variants(clf_context *ctx, int count, clf__variant_fn run,
                   void *user, int reps, double *ms)
{
    int v, rep, best = -1, rc = 0;

    for (v = 0; v < count; v++)
        ms[v] = 0.0;
    /* Round 0 pays any lazy compilation and is not kept; the variants take
     * turns in every round, so that a change in the machine's load falls
     * on all of them alike. */
    for (rep = 0; rep <= reps; rep++)
        for (v = 0; v < count; v++) {
            double t0, dt;
            cl_int err;
            int st;
            if (ms[v] < 0.0)
                continue; /* failed before */
            t0 = clf__now_s();
            st = run(ctx, v, user);
            if (st == 0 && (err = clFinish(ctx->queue)) != CL_SUCCESS)
                st = clf__fail(err, "timing: clFinish failed (%d)", err);
            if (st != 0) {
                ms[v] = -1.0;
                rc = st;
                continue;
            }
            dt = (clf__now_s() - t0) * 1e3;
            if (rep > 0 && (ms[v] == 0.0 || dt < ms[v]))
                ms[v] = dt;
        }
    for (v = 0; v < count; v++)
        if (ms[v] > 0.0 && (best < 0 || ms[v] < ms[best]))
            best = v;
    return best >= 0 ? best : rc;
}
