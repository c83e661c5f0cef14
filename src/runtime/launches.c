/* The launch log: the geometry of every kernel a context enqueues while
 * recording is on (clf_context_record_launches), so that a forward's shape
 * on a device (how many work-groups and work-items each kernel gets) can
 * be read without a profiler.  Launches of one kernel with one geometry
 * share an entry that counts them; the log holds LOG_MAX entries and
 * counts the launches it had no room for. */
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

#define LOG_MAX 4096

struct clf__launch_log {
    pthread_mutex_t lock;
    int on;
    int paused; /* timing a kernel choice: those launches are not the forward's
                 */
    size_t count, cap, dropped;
    clf_launch *list;
};

static int
same(const clf_launch *e, const clf_launch *l)
{
    return strcmp(e->kernel, l->kernel) == 0 && e->dims == l->dims &&
           memcmp(e->global, l->global, sizeof e->global) == 0 &&
           memcmp(e->local, l->local, sizeof e->local) == 0;
}

/* Adds one launch (calls 0) to the log. */
static void
note(struct clf__launch_log *log, const clf_launch *l)
{
    size_t i;

    pthread_mutex_lock(&log->lock);
    for (i = 0; i < log->count && !same(&log->list[i], l); i++)
        ;
    if (i == log->count && log->count == log->cap) {
        size_t cap = log->cap ? 2 * log->cap : 32;
        clf_launch *n =
            cap <= LOG_MAX ? realloc(log->list, cap * sizeof *n) : NULL;
        if (n == NULL) {
            log->dropped++;
            pthread_mutex_unlock(&log->lock);
            return;
        }
        log->list = n;
        log->cap = cap;
    }
    if (i == log->count)
        log->list[log->count++] = *l;
    log->list[i].calls++;
    pthread_mutex_unlock(&log->lock);
}

static int
recording(const clf_context *ctx)
{
    struct clf__launch_log *log = ctx->launch_log;
    int on;

    if (log == NULL)
        return 0;
    pthread_mutex_lock(&log->lock);
    on = log->on && log->paused == 0;
    pthread_mutex_unlock(&log->lock);
    return on;
}

void
clf__launch_pause(clf_context *ctx, int pause)
{
    struct clf__launch_log *log = ctx->launch_log;

    if (log == NULL)
        return;
    pthread_mutex_lock(&log->lock);
    log->paused += pause ? 1 : -1;
    pthread_mutex_unlock(&log->lock);
}

cl_int
clf__enqueue_nd(clf_context *ctx, cl_kernel k, unsigned dims,
                const size_t *global, const size_t *local)
{
    cl_int err = clEnqueueNDRangeKernel(ctx->queue, k, dims, NULL, global,
                                        local, 0, NULL, NULL);
    clf_launch l;
    unsigned d;

    if (err != CL_SUCCESS)
        return err;
    clf__guard_after(ctx, k, NULL);
    if (!recording(ctx))
        return err;
    memset(&l, 0, sizeof l);
    if (clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof l.kernel, l.kernel,
                        NULL) != CL_SUCCESS)
        strcpy(l.kernel, "?");
    l.kernel[sizeof l.kernel - 1] = '\0';
    l.dims = dims;
    l.items = 1;
    l.groups = local != NULL ? 1 : 0;
    for (d = 0; d < dims && d < 3; d++) {
        l.global[d] = global[d];
        l.items *= global[d];
        if (local != NULL) {
            l.local[d] = local[d];
            l.groups *= local[d] ? (global[d] + local[d] - 1) / local[d] : 0;
        }
    }
    note(ctx->launch_log, &l);
    return err;
}

void
clf__launch_clblast(clf_context *ctx, size_t m, size_t n, size_t k,
                    size_t batch)
{
    clf_launch l;

    if (!recording(ctx))
        return;
    memset(&l, 0, sizeof l);
    strcpy(l.kernel, "CLBlast");
    l.global[0] = m;
    l.global[1] = n;
    l.global[2] = k;
    l.local[0] = batch;
    note(ctx->launch_log, &l);
}

void
clf__launch_log_free(clf_context *ctx)
{
    if (ctx->launch_log == NULL)
        return;
    pthread_mutex_destroy(&ctx->launch_log->lock);
    free(ctx->launch_log->list);
    free(ctx->launch_log);
    ctx->launch_log = NULL;
}

CLF_EXTERN int
clf_context_record_launches(clf_context *ctx, int on)
{
    struct clf__launch_log *log;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    clf__lock(ctx);
    log = ctx->launch_log;
    if (log == NULL && on) {
        log = calloc(1, sizeof *log);
        if (log == NULL || pthread_mutex_init(&log->lock, NULL) != 0) {
            free(log);
            clf__unlock(ctx);
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        }
        ctx->launch_log = log;
    }
    if (log != NULL) {
        pthread_mutex_lock(&log->lock);
        if (on)
            log->count = log->dropped = 0;
        log->on = on != 0;
        pthread_mutex_unlock(&log->lock);
    }
    clf__unlock(ctx);
    return 0;
}

CLF_EXTERN int
clf_context_launch_count(clf_context *ctx, size_t *count, size_t *dropped)
{
    struct clf__launch_log *log;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (count == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "count is NULL");
    clf__lock(ctx);
    log = ctx->launch_log;
    if (log != NULL)
        pthread_mutex_lock(&log->lock);
    *count = log != NULL ? log->count : 0;
    if (dropped != NULL)
        *dropped = log != NULL ? log->dropped : 0;
    if (log != NULL)
        pthread_mutex_unlock(&log->lock);
    clf__unlock(ctx);
    return 0;
}

CLF_EXTERN int
clf_context_launch(clf_context *ctx, size_t index, clf_launch *out)
{
    struct clf__launch_log *log;
    int rc = 0;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    clf__lock(ctx);
    log = ctx->launch_log;
    if (log != NULL)
        pthread_mutex_lock(&log->lock);
    if (log == NULL || index >= log->count)
        rc = clf__fail(CLF_EINVALID_ARGUMENT,
                       "launch index %zu is past the log's %zu entries", index,
                       log != NULL ? log->count : (size_t)0);
    else
        *out = log->list[index];
    if (log != NULL)
        pthread_mutex_unlock(&log->lock);
    clf__unlock(ctx);
    return rc;
}

int
clf__enqueue3(clf_context *ctx, enum clf__kernel_id id, size_t g[3],
              int grouped, const char *what)
{
    size_t local[3] = {1, 1, 1};
    cl_int err;

    if (grouped) {
        /* Work-groups of twice the device's preferred multiple along
         * dimension 0, the global size padded to it (the kernels skip the
         * extra items).  On PoCL (multiple 8) groups of 16 ran the layer
         * 1.4-1.7x faster than the runtime's own choice, which for some
         * sizes is a single group and so a single core, and 1.1-1.2x
         * faster than groups of 8; 32 and 64 were no faster. */
        local[0] = 2 * ctx->kernel_multiple[id];
        if (local[0] > ctx->kernel_wg[id])
            local[0] = ctx->kernel_wg[id];
        g[0] = (g[0] + local[0] - 1) / local[0] * local[0];
    }
    err = clf__enqueue_nd(ctx, ctx->kernels[id], 3, g, grouped ? local : NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "%s: enqueue of %zu x %zu x %zu failed (%d)",
                         what, g[0], g[1], g[2], err);
    return 0;
}
