/* Guard bands (runtime.h): each guarded buffer is the middle of a larger one,
 * [band | the buffer | band], the whole filled with the 4-byte pattern
 * 0xFFBFFFFF, a signalling NaN as binary32 (and NaNs as binary16): a
 * kernel reading a band spoils its result, and one adding to a band
 * (y[i] += ...) changes its bits, as arithmetic quiets a signalling NaN
 * (a quiet NaN would come back unchanged).  After each launch the bands of
 * every live buffer are read back;
 * the first changed byte names the kernel just launched, the buffer and how
 * far outside it the write landed.  The record of a buffer ends when its
 * sub-buffer is destroyed (a destructor callback marks it, the next check
 * releases its parent). */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAND_MIN 1024

/* The pattern's bytes, little-endian 0xFFBFFFFF. */
static const unsigned char pattern[4] = {0xFF, 0xFF, 0xBF, 0xFF};

struct guard_entry {
    cl_mem parent;
    size_t bytes, total; /* the buffer's, its parent's */
    char what[64];
    int dead; /* set by the destructor callback (atomic) */
    struct guard_entry *next;
};

struct clf__guard {
    int on;
    size_t band;
    struct guard_entry *list;
    int fault;
    char msg[384];
};

static void CL_CALLBACK
entry_gone(cl_mem mem, void *user)
{
    struct guard_entry *e = user;

    (void)mem;
    __atomic_store_n(&e->dead, 1, __ATOMIC_RELEASE);
}

/* The band: at least BAND_MIN bytes, a multiple of the device's sub-buffer
 * alignment. */
static size_t
band_bytes(const clf_context *ctx)
{
    cl_uint bits = 0;
    size_t align, band;

    if (clGetDeviceInfo(ctx->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits,
                        &bits, NULL) != CL_SUCCESS ||
        bits < 8)
        bits = 8;
    align = bits / 8;
    band = (BAND_MIN + align - 1) / align * align;
    return band;
}

static cl_mem
plain(clf_context *ctx, cl_mem_flags flags, size_t bytes, void *host,
      cl_int *err)
{
    return clCreateBuffer(ctx->context, flags, bytes, host, err);
}

static cl_mem
guarded(clf_context *ctx, cl_mem_flags flags, size_t bytes, void *host,
        cl_int *err, const char *what)
{
    struct clf__guard *g = ctx->guard;
    const size_t band = g->band;
    cl_mem_flags access =
        flags & (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY);
    cl_buffer_region region;
    struct guard_entry *e;
    cl_mem parent, sub = NULL;
    size_t total;

    if (bytes > (size_t)-1 - 2 * band - 4) {
        *err = CL_INVALID_BUFFER_SIZE;
        return NULL;
    }
    e = calloc(1, sizeof *e);
    if (e == NULL) {
        *err = CL_OUT_OF_HOST_MEMORY;
        return NULL;
    }
    total = 2 * band + (bytes + 3) / 4 * 4;
    parent = plain(ctx, CL_MEM_READ_WRITE, total, NULL, err);
    if (parent == NULL) {
        free(e);
        return NULL;
    }
    region.origin = band;
    region.size = bytes;
    *err = clEnqueueFillBuffer(ctx->queue, parent, pattern, sizeof pattern, 0,
                               total, 0, NULL, NULL);
    if (*err == CL_SUCCESS)
        sub = clCreateSubBuffer(parent, access ? access : CL_MEM_READ_WRITE,
                                CL_BUFFER_CREATE_TYPE_REGION, &region, err);
    if (sub != NULL && host != NULL && (flags & CL_MEM_COPY_HOST_PTR))
        *err = clEnqueueWriteBuffer(ctx->queue, sub, CL_TRUE, 0, bytes, host, 0,
                                    NULL, NULL);
    if (sub != NULL && *err == CL_SUCCESS)
        *err = clFinish(ctx->queue);
    if (sub != NULL && *err == CL_SUCCESS)
        *err = clSetMemObjectDestructorCallback(sub, entry_gone, e);
    if (*err != CL_SUCCESS) {
        if (sub != NULL)
            clReleaseMemObject(sub);
        clReleaseMemObject(parent);
        free(e);
        return NULL;
    }
    e->parent = parent;
    e->bytes = bytes;
    e->total = total;
    snprintf(e->what, sizeof e->what, "%s", what);
    clf__lock(ctx);
    e->next = g->list;
    g->list = e;
    clf__unlock(ctx);
    return sub;
}

cl_mem
clf__mem_create(clf_context *ctx, cl_mem_flags flags, size_t bytes, void *host,
                cl_int *err, const char *what)
{
    if (ctx->guard == NULL || !ctx->guard->on || bytes == 0)
        return plain(ctx, flags, bytes, host, err);
    return guarded(ctx, flags, bytes, host, err, what);
}

/* The first byte of [at, at + len) in e's parent that is not the
 * pattern's, counted from at, or -1; the bytes refilled when one is
 * found. */
static long
band_damage(clf_context *ctx, const struct guard_entry *e, size_t at,
            size_t len, unsigned char *buf)
{
    size_t i, first;

    if (clEnqueueReadBuffer(ctx->queue, e->parent, CL_TRUE, at, len, buf, 0,
                            NULL, NULL) != CL_SUCCESS)
        return -1;
    for (first = 0; first < len && buf[first] == pattern[(at + first) % 4];
         first++)
        ;
    if (first == len)
        return -1;
    for (i = 0; i < len; i++)
        buf[i] = pattern[(at + i) % 4];
    clEnqueueWriteBuffer(ctx->queue, e->parent, CL_TRUE, at, len, buf, 0, NULL,
                         NULL);
    return (long)first;
}

static void
note_fault(struct clf__guard *g, clf_context *ctx, cl_kernel k,
           const char *what, const struct guard_entry *e, int before, long at)
{
    char name[128] = "?";

    if (g->fault)
        return;
    if (what != NULL)
        snprintf(name, sizeof name, "%s", what);
    else if (k != NULL &&
             clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name,
                             NULL) != CL_SUCCESS)
        strcpy(name, "?");
    name[sizeof name - 1] = '\0';
    g->fault = 1;
    if (before)
        snprintf(g->msg, sizeof g->msg,
                 "kernel %s wrote outside device buffer %s (%zu bytes): "
                 "the first byte changed is %zu bytes before its start",
                 name, e->what, e->bytes, g->band - (size_t)at);
    else
        snprintf(g->msg, sizeof g->msg,
                 "kernel %s wrote outside device buffer %s (%zu bytes): "
                 "the first byte changed is byte %zu past its end",
                 name, e->what, e->bytes, (size_t)at);
    (void)ctx;
}

/* Releases the parents of destroyed buffers. */
static void
reap(struct clf__guard *g)
{
    struct guard_entry **p = &g->list, *e;

    while ((e = *p) != NULL) {
        if (__atomic_load_n(&e->dead, __ATOMIC_ACQUIRE)) {
            *p = e->next;
            clReleaseMemObject(e->parent);
            free(e);
        } else
            p = &e->next;
    }
}

void
clf__guard_after(clf_context *ctx, cl_kernel k, const char *what)
{
    struct clf__guard *g = ctx->guard;
    struct guard_entry *e;
    unsigned char *buf;
    long at;

    if (g == NULL || !g->on)
        return;
    buf = malloc(g->band + 4);
    if (buf == NULL)
        return;
    clf__lock(ctx); /* the list is the context's, its threads' too */
    clFinish(ctx->queue);
    reap(g);
    for (e = g->list; e != NULL; e = e->next) {
        if (__atomic_load_n(&e->dead, __ATOMIC_ACQUIRE))
            continue;
        if ((at = band_damage(ctx, e, 0, g->band, buf)) >= 0)
            note_fault(g, ctx, k, what, e, 1, at);
        at = band_damage(ctx, e, g->band + e->bytes,
                         e->total - g->band - e->bytes, buf);
        if (at >= 0)
            note_fault(g, ctx, k, what, e, 0, at);
    }
    clf__unlock(ctx);
    free(buf);
}

void
clf__guard_free(clf_context *ctx)
{
    struct clf__guard *g = ctx->guard;
    struct guard_entry *e, *next;

    if (g == NULL)
        return;
    /* A buffer still alive (a layer not destroyed before its context)
     * keeps its record: its destructor callback writes to it. */
    for (e = g->list; e != NULL; e = next) {
        next = e->next;
        clReleaseMemObject(e->parent);
        if (__atomic_load_n(&e->dead, __ATOMIC_ACQUIRE))
            free(e);
    }
    free(g);
    ctx->guard = NULL;
}

int
clf_context_guard_buffers(clf_context *ctx, int on)
{
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    clf__lock(ctx);
    if (ctx->guard == NULL && on) {
        ctx->guard = calloc(1, sizeof *ctx->guard);
        if (ctx->guard == NULL) {
            clf__unlock(ctx);
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        }
        ctx->guard->band = band_bytes(ctx);
    }
    if (ctx->guard != NULL)
        ctx->guard->on = on != 0;
    clf__unlock(ctx);
    return 0;
}

int
clf_context_guard_check(clf_context *ctx)
{
    struct clf__guard *g;
    int rc;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    clf__lock(ctx);
    g = ctx->guard;
    if (g == NULL || !g->fault) {
        clf__unlock(ctx);
        return 0;
    }
    g->fault = 0;
    rc = clf__fail(CLF_EOUT_OF_BOUNDS, "%s", g->msg);
    clf__unlock(ctx);
    return rc;
}
