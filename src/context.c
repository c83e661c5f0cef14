/* Contexts: device selection, owned or adopted OpenCL objects, teardown. */
#include "internal.h"

#include <clblast_c.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct candidate {
    cl_platform_id platform;
    unsigned platform_index;
    cl_device_id device;
    clf_device_info info;
};

static int
ci_contains(const char *hay, const char *needle)
{
    size_t hn = strlen(hay), nn = strlen(needle), i, j;

    if (nn == 0 || nn > hn)
        return nn == 0;
    for (i = 0; i + nn <= hn; i++) {
        for (j = 0; j < nn; j++)
            if (tolower((unsigned char)hay[i + j]) !=
                tolower((unsigned char)needle[j]))
                break;
        if (j == nn)
            return 1;
    }
    return 0;
}

static int
all_digits(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* Collects every device of every platform into a calloc'd array. */
static int
gather(struct candidate **out, size_t *count)
{
    cl_uint nplat = 0, p;
    cl_platform_id plats[64];
    struct candidate *c = NULL;
    size_t n = 0, cap = 0;
    cl_int err;

    *out = NULL;
    *count = 0;
    err = clGetPlatformIDs(64, plats, &nplat);
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && nplat == 0))
        return clf__fail(CLF_ENO_DEVICE,
                         "no OpenCL platform found (is an ICD such as "
                         "pocl-opencl-icd installed?)");
    if (err != CL_SUCCESS)
        return clf__fail(err, "clGetPlatformIDs failed (%d)", err);
    if (nplat > 64)
        nplat = 64;
    for (p = 0; p < nplat; p++) {
        cl_device_id devs[64];
        cl_uint ndev = 0, d;

        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, devs, &ndev) !=
            CL_SUCCESS)
            continue;
        if (ndev > 64)
            ndev = 64;
        for (d = 0; d < ndev; d++) {
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 8;
                struct candidate *g = realloc(c, ncap * sizeof *c);
                if (g == NULL) {
                    free(c);
                    return clf__fail(CLF_ENO_MEMORY, "out of host memory");
                }
                c = g;
                cap = ncap;
            }
            c[n].platform = plats[p];
            c[n].platform_index = p;
            c[n].device = devs[d];
            clf__device_info_fill(plats[p], p, devs[d], (unsigned)n,
                                  &c[n].info);
            n++;
        }
    }
    if (n == 0) {
        free(c);
        return clf__fail(CLF_ENO_DEVICE,
                         "OpenCL platforms exist but expose no device");
    }
    *out = c;
    *count = n;
    return 0;
}

static int
pick(const struct candidate *c, size_t n, const char *sel, size_t *chosen)
{
    size_t i;

    if (sel == NULL || *sel == '\0') {
        for (i = 0; i < n; i++)
            if (c[i].info.is_gpu) {
                *chosen = i;
                return 0;
            }
        for (i = 0; i < n; i++)
            if (c[i].info.is_cpu) {
                *chosen = i;
                return 0;
            }
        *chosen = 0;
        return 0;
    }
    if (all_digits(sel)) {
        unsigned long idx = strtoul(sel, NULL, 10);
        if (idx >= n)
            return clf__fail(CLF_EDEVICE_NOT_FOUND,
                             "device index %lu out of range (%zu devices)",
                             idx, n);
        *chosen = idx;
        return 0;
    }
    for (i = 0; i < n; i++) {
        if ((ci_contains(sel, "gpu") && strlen(sel) == 3 &&
             c[i].info.is_gpu) ||
            (ci_contains(sel, "cpu") && strlen(sel) == 3 &&
             c[i].info.is_cpu) ||
            ci_contains(c[i].info.name, sel) ||
            ci_contains(c[i].info.platform, sel)) {
            *chosen = i;
            return 0;
        }
    }
    return clf__fail(CLF_EDEVICE_NOT_FOUND,
                     "no OpenCL device matches selector \"%s\" (try an index, "
                     "cpu, gpu, or part of a name from 'clinformer devices')",
                     sel);
}

/* Refuses devices below OpenCL 1.2, whose kernels we cannot build. */
static int
check_version(const clf_device_info *info)
{
    int major = 0, minor = 0;

    if (sscanf(info->version, "OpenCL %d.%d", &major, &minor) != 2 ||
        major < 1 || (major == 1 && minor < 2))
        return clf__fail(CLF_EUNSUPPORTED,
                         "device \"%s\" reports \"%s\"; OpenCL 1.2 is needed",
                         info->name, info->version);
    return 0;
}

static clf_context *
context_alloc(void)
{
    clf_context *ctx = calloc(1, sizeof *ctx);

    if (ctx != NULL) {
        ctx->build_log = calloc(1, 1);
        if (ctx->build_log == NULL) {
            free(ctx);
            return NULL;
        }
    }
    return ctx;
}

CLF_EXTERN int
clf_context_create(clf_context **out, const char *selector)
{
    return clf_context_create_ex(out, selector, 0);
}

CLF_EXTERN int
clf_context_create_ex(clf_context **out, const char *selector,
                      unsigned flags)
{
    struct candidate *cands = NULL;
    size_t ncand = 0, chosen = 0;
    clf_context *ctx = NULL;
    cl_context_properties props[3];
    cl_int err;
    int rc;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (flags & ~CLF_CONTEXT_PROFILING)
        return clf__fail(CLF_EINVALID_ARGUMENT, "unknown flags 0x%x",
                         flags & ~CLF_CONTEXT_PROFILING);
    if (selector == NULL || *selector == '\0')
        selector = getenv("CLINFORMER_DEVICE");
    rc = gather(&cands, &ncand);
    if (rc != 0)
        return rc;
    rc = pick(cands, ncand, selector, &chosen);
    if (rc != 0)
        goto fail;
    rc = check_version(&cands[chosen].info);
    if (rc != 0)
        goto fail;
    ctx = context_alloc();
    if (ctx == NULL) {
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        goto fail;
    }
    ctx->platform = cands[chosen].platform;
    ctx->device = cands[chosen].device;
    ctx->info = cands[chosen].info;
    props[0] = CL_CONTEXT_PLATFORM;
    props[1] = (cl_context_properties)ctx->platform;
    props[2] = 0;
    ctx->context = clCreateContext(props, 1, &ctx->device, NULL, NULL, &err);
    if (ctx->context == NULL) {
        rc = clf__fail(err, "clCreateContext on \"%s\" failed (%d)",
                       ctx->info.name, err);
        goto fail;
    }
    ctx->profiling = (flags & CLF_CONTEXT_PROFILING) != 0;
    ctx->queue = clCreateCommandQueue(
        ctx->context, ctx->device,
        ctx->profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    if (ctx->queue == NULL) {
        rc = clf__fail(err, "clCreateCommandQueue on \"%s\" failed (%d)",
                       ctx->info.name, err);
        goto fail;
    }
    clf__tune_apply(ctx);
    free(cands);
    *out = ctx;
    return 0;

fail:
    free(cands);
    clf_context_destroy(ctx);
    return rc;
}

CLF_EXTERN int
clf_context_adopt(clf_context **out, cl_context context, cl_device_id device,
                  cl_command_queue queue)
{
    clf_context *ctx = NULL;
    cl_context qctx = NULL;
    cl_device_id qdev = NULL;
    cl_command_queue_properties qprops = 0;
    cl_platform_id platform = NULL;
    cl_uint ndev = 0, i;
    cl_device_id devs[64];
    int found = 0, rc;
    cl_int err;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (context == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "context is NULL");
    if (device == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "device is NULL");
    if (queue == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "queue is NULL");

    err = clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof devs, devs,
                           NULL);
    if (err == CL_SUCCESS)
        err = clGetContextInfo(context, CL_CONTEXT_NUM_DEVICES, sizeof ndev,
                               &ndev, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "context: clGetContextInfo failed (%d)", err);
    for (i = 0; i < ndev && i < 64; i++)
        found |= devs[i] == device;
    if (!found)
        return clf__fail(CLF_EWRONG_CONTEXT,
                         "device does not belong to context");
    err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx,
                                NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qdev,
                                    &qdev, NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof qprops,
                                    &qprops, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "queue: clGetCommandQueueInfo failed (%d)",
                         err);
    if (qctx != context || qdev != device)
        return clf__fail(CLF_EWRONG_CONTEXT,
                         "queue belongs to another context or device");
    if (qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return clf__fail(CLF_EUNSUPPORTED,
                         "queue is out of order; clinformer chains CLBlast "
                         "calls and needs an in-order queue");
    err = clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform,
                          &platform, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "device: clGetDeviceInfo failed (%d)", err);

    ctx = context_alloc();
    if (ctx == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    ctx->platform = platform;
    ctx->device = device;
    clf__device_info_fill(platform, 0, device, 0, &ctx->info);
    rc = check_version(&ctx->info);
    if (rc != 0) {
        clf_context_destroy(ctx);
        return rc;
    }
    clRetainContext(context);
    ctx->context = context;
    clRetainCommandQueue(queue);
    ctx->queue = queue;
    ctx->profiling = (qprops & CL_QUEUE_PROFILING_ENABLE) != 0;
    clf__tune_apply(ctx);
    *out = ctx;
    return 0;
}

CLF_EXTERN void
clf_context_destroy(clf_context *ctx)
{
    int i;

    if (ctx == NULL)
        return;
    if (ctx->queue != NULL)
        clFinish(ctx->queue);
    for (i = 0; i < CLF_K_COUNT; i++)
        if (ctx->kernels[i] != NULL)
            clReleaseKernel(ctx->kernels[i]);
    if (ctx->program != NULL)
        clReleaseProgram(ctx->program);
    if (ctx->scratch != NULL)
        clReleaseMemObject(ctx->scratch);
    if (ctx->queue != NULL)
        clReleaseCommandQueue(ctx->queue);
    if (ctx->context != NULL)
        clReleaseContext(ctx->context);
    free(ctx->build_log);
    free(ctx);
}

CLF_EXTERN int
clf_context_build(clf_context *ctx)
{
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (ctx->program != NULL)
        return 0;
    return clf__program_build(ctx);
}

CLF_EXTERN const char *
clf_context_build_log(const clf_context *ctx)
{
    if (ctx == NULL || ctx->build_log == NULL)
        return "";
    return ctx->build_log;
}

CLF_EXTERN int
clf_context_stats_get(const clf_context *ctx, clf_context_stats *out)
{
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = ctx->stats;
    return 0;
}

CLF_EXTERN int
clf_context_device_info(const clf_context *ctx, clf_device_info *out)
{
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = ctx->info;
    return 0;
}

CLF_EXTERN cl_context
clf_context_cl_context(const clf_context *ctx)
{
    return ctx ? ctx->context : NULL;
}

CLF_EXTERN cl_device_id
clf_context_cl_device(const clf_context *ctx)
{
    return ctx ? ctx->device : NULL;
}

CLF_EXTERN cl_command_queue
clf_context_cl_queue(const clf_context *ctx)
{
    return ctx ? ctx->queue : NULL;
}

CLF_EXTERN int
clf_context_finish(clf_context *ctx)
{
    cl_int err;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    err = clFinish(ctx->queue);
    if (err != CL_SUCCESS)
        return clf__fail(err, "clFinish failed (%d)", err);
    return 0;
}

/* One choice for clf_context_kernel_choices: "name (a 1.2 ms, b 3.4 ms)";
 * a time of 0 for the chosen one means the choice was forced, a negative
 * one that the variant failed. */
static void
describe(char *buf, size_t cap, const char *what, int chosen,
         const char *const *names, const double *ms, int count)
{
    size_t len = strlen(buf);
    int i;

    if (len >= cap)
        return;
    if (chosen < 0) {
        snprintf(buf + len, cap - len, "%s%s: not chosen yet", len ? "; " : "",
                 what);
        return;
    }
    if (ms[chosen] <= 0.0) {
        snprintf(buf + len, cap - len, "%s%s: %s (forced)", len ? "; " : "",
                 what, names[chosen]);
        return;
    }
    len += (size_t)snprintf(buf + len, cap - len, "%s%s: %s (",
                            len ? "; " : "", what, names[chosen]);
    for (i = 0; i < count && len < cap; i++)
        len += ms[i] < 0.0
                   ? (size_t)snprintf(buf + len, cap - len, "%s%s failed",
                                      i ? ", " : "", names[i])
                   : (size_t)snprintf(buf + len, cap - len, "%s%s %.2f ms",
                                      i ? ", " : "", names[i], ms[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, ")");
}

CLF_EXTERN const char *
clf_context_kernel_choices(clf_context *ctx)
{
    static const char *const softmax[] = {"scalar", "vector", "group"};
    static const char *const gemm[] = {"CLBlast", "blocked"};
    static const char *const attend[] = {"GEMM path", "fused"};

    if (ctx == NULL)
        return "";
    ctx->choices[0] = '\0';
    describe(ctx->choices, sizeof ctx->choices, "softmax",
             ctx->program != NULL ? ctx->softmax_variant : -1, softmax,
             ctx->softmax_ms, CLF_SOFTMAX_VARIANTS);
    describe(ctx->choices, sizeof ctx->choices, "GEMM",
             ctx->gemm_variant - 1, gemm, ctx->gemm_ms, 2);
    describe(ctx->choices, sizeof ctx->choices, "attention",
             ctx->attend_variant - 1, attend, ctx->attend_ms, 2);
    return ctx->choices;
}
