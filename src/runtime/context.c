/* Contexts: device selection, owned or adopted OpenCL objects, teardown. */
#include "runtime/runtime.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    pthread_mutexattr_t attr;
    int i, ok;

    if (ctx == NULL)
        return NULL;
    ctx->build_log = calloc(1, 1);
    /* Recursive: a forward holds the lock across its stages, and each
     * stage takes it again for its own kernel arguments. */
    ok = ctx->build_log != NULL && pthread_mutexattr_init(&attr) == 0;
    if (ok) {
        ok = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE) == 0 &&
             pthread_mutex_init(&ctx->lock, &attr) == 0;
        pthread_mutexattr_destroy(&attr);
    }
    if (!ok) {
        free(ctx->build_log);
        free(ctx);
        return NULL;
    }
    ctx->has_lock = 1;
    ctx->checking_kind = -1; /* no check under way */
    for (i = 0; i < CLF_MAX_ROLES; i++)
        ctx->forced[i] = ctx->last[i] = -1;
    return ctx;
}

CLF_EXTERN int
clf_context_create(clf_context **out, const char *selector)
{
    return clf_context_create_ex(out, selector, 0);
}

CLF_EXTERN int
clf_context_create_ex(clf_context **out, const char *selector, unsigned flags)
{
    struct clf__device dev;
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
    rc = clf__device_find(selector, &dev);
    if (rc != 0)
        return rc;
    rc = check_version(&dev.info);
    if (rc != 0)
        goto fail;
    ctx = context_alloc();
    if (ctx == NULL) {
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        goto fail;
    }
    ctx->platform = dev.platform;
    ctx->device = dev.device;
    ctx->info = dev.info;
    rc = clf__caps_from_env(&ctx->caps);
    if (rc != 0)
        goto fail;
    clf__caps_apply(ctx);
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
    *out = ctx;
    return 0;

fail:
    clf_context_destroy(ctx);
    return rc;
}

/* The device belongs to the context. */
static int
device_in_context(cl_context context, cl_device_id device)
{
    cl_device_id devs[64];
    cl_uint ndev = 0, i;
    int found = 0;
    cl_int err;

    err =
        clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof devs, devs, NULL);
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
    return 0;
}

/* The queue is an in-order queue of that context and device; its
 * properties in *props. */
static int
queue_fits(cl_command_queue queue, cl_context context, cl_device_id device,
           cl_command_queue_properties *props)
{
    cl_context qctx = NULL;
    cl_device_id qdev = NULL;
    cl_int err;

    err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx,
                                NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qdev, &qdev,
                                    NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof *props,
                                    props, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "queue: clGetCommandQueueInfo failed (%d)", err);
    if (qctx != context || qdev != device)
        return clf__fail(CLF_EWRONG_CONTEXT,
                         "queue belongs to another context or device");
    if (*props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return clf__fail(CLF_EUNSUPPORTED,
                         "queue is out of order; clinformer chains CLBlast "
                         "calls and needs an in-order queue");
    return 0;
}

CLF_EXTERN int
clf_context_adopt(clf_context **out, cl_context context, cl_device_id device,
                  cl_command_queue queue)
{
    clf_context *ctx = NULL;
    cl_command_queue_properties qprops = 0;
    cl_platform_id platform = NULL;
    int rc;
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
    CLF_TRY(device_in_context(context, device));
    CLF_TRY(queue_fits(queue, context, device, &qprops));
    err = clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform,
                          &platform, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "device: clGetDeviceInfo failed (%d)", err);

    ctx = context_alloc();
    if (ctx == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    ctx->platform = platform;
    ctx->device = device;
    clf__device_describe(platform, device, &ctx->info);
    rc = check_version(&ctx->info);
    if (rc == 0)
        rc = clf__caps_from_env(&ctx->caps);
    if (rc != 0) {
        clf_context_destroy(ctx);
        return rc;
    }
    clf__caps_apply(ctx);
    clRetainContext(context);
    ctx->context = context;
    clRetainCommandQueue(queue);
    ctx->queue = queue;
    ctx->profiling = (qprops & CL_QUEUE_PROFILING_ENABLE) != 0;
    *out = ctx;
    return 0;
}

void *
clf__feature_find(const clf_context *ctx, const void *key)
{
    const struct clf__feature *f;

    for (f = ctx->features; f != NULL; f = f->next)
        if (f->key == key)
            return f->state;
    return NULL;
}

int
clf__feature_int_get(const clf_context *ctx, const void *key)
{
    const int *v = clf__feature_find(ctx, key);

    return v != NULL ? *v : 0;
}

int
clf__feature_int_set(clf_context *ctx, const void *key, int value)
{
    int *v = clf__feature(ctx, key, sizeof *v, NULL, NULL);

    if (v == NULL)
        return CLF_ENO_MEMORY;
    *v = value;
    return 0;
}

void *
clf__feature(clf_context *ctx, const void *key, size_t size,
             clf__feature_init_fn init, clf__feature_release_fn release)
{
    struct clf__feature *f;
    void *state;

    clf__lock(ctx);
    state = clf__feature_find(ctx, key);
    if (state == NULL) {
        f = malloc(sizeof *f);
        state = calloc(1, size);
        if (f == NULL || state == NULL) {
            free(f);
            free(state);
            clf__unlock(ctx);
            clf__fail(CLF_ENO_MEMORY,
                      "out of host memory for a context's state (%zu bytes)",
                      size);
            return NULL;
        }
        f->key = key;
        f->state = state;
        f->release = release;
        f->next = ctx->features;
        ctx->features = f;
        if (init != NULL)
            init(ctx, state);
    }
    clf__unlock(ctx);
    return state;
}

/* Each module's state, latest made first. */
static void
release_features(clf_context *ctx)
{
    while (ctx->features != NULL) {
        struct clf__feature *f = ctx->features;

        ctx->features = f->next;
        if (f->release != NULL)
            f->release(ctx, f->state);
        free(f->state);
        free(f);
    }
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
    release_features(ctx);
    clf__launch_log_free(ctx);
    clf__guard_free(ctx);
    if (ctx->queue != NULL)
        clReleaseCommandQueue(ctx->queue);
    if (ctx->context != NULL)
        clReleaseContext(ctx->context);
    free(ctx->build_log);
    while (ctx->store_locks > 0) /* a timing cut short */
        clf__choice_release(ctx);
    free(ctx->choice_list);
    if (ctx->has_lock)
        pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

CLF_EXTERN int
clf_context_build(clf_context *ctx)
{
    int rc = 0;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    /* Layers created in several threads build once. */
    clf__lock(ctx);
    if (ctx->program == NULL)
        rc = clf__program_build(ctx);
    clf__unlock(ctx);
    return rc;
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
