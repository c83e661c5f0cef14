/* Host side of the GPU-shaped streaming attention kernel (cl/, same
 * stem): steps 3 to 5 in one kernel with work-groups of
 * CLF_FLASHWG_ROWS query rows, keys and values staged in local memory.
 * It reads Kbar and Vbar as the forward leaves them, so it needs no
 * workspace of its own. */
#include "stages/stages.h"

#define FW_ITEMS ((size_t)CLF_FLASHWG_ROWS * CLF_FLASHWG_SPLIT)
/* The kernel's __local arrays: two tiles of keys and values and the
 * partial scores of every item. */
#define FW_LOCAL_BYTES                                                         \
    (sizeof(float) *                                                           \
     (2 * (size_t)CLF_FLASHWG_KEYS * CLF_FLASHWG_DH +                          \
      (size_t)CLF_FLASHWG_SPLIT * CLF_FLASHWG_KEYS * CLF_FLASHWG_ROWS))

int
clf__flash_wg_applies(const clf_context *ctx, const struct clf__flash_shape *sh)
{
    /* The group is one tile of rows: a compiled kernel that takes fewer
     * work-items (CL_KERNEL_WORK_GROUP_SIZE, at most the device's limit),
     * or a device with less local memory, cannot run it. */
    return sh->at.dh <= CLF_FLASHWG_DH &&
           ctx->kernel_wg[CLF_K_FLASH_WG] >= FW_ITEMS &&
           ctx->info.local_mem >= FW_LOCAL_BYTES;
}

size_t
clf__flash_wg_groups(const struct clf__flash_shape *sh)
{
    return (sh->at.n + CLF_FLASHWG_ROWS - 1) / CLF_FLASHWG_ROWS * sh->at.heads *
           sh->at.batch;
}

int
clf__flash_set_mode_args(cl_kernel f, cl_uint first,
                         const struct clf__flash_shape *sh, cl_mem mask,
                         cl_mem pk, cl_mem pv, cl_mem any)
{
    cl_uint causal = sh->causal != 0, has = mask != NULL;
    cl_uint c = (cl_uint)sh->c, block = (cl_uint)sh->block;
    cl_uint dkv = (cl_uint)sh->dkv, wph = sh->window_per_head != 0;
    /* Any valid buffer where an argument is unused. */
    cl_mem m = mask != NULL ? mask : any, k = pk != NULL ? pk : any;
    cl_mem v = pv != NULL ? pv : any;

    CLF_SET_ARG(f, first, causal);
    CLF_SET_ARG(f, first + 1, m);
    CLF_SET_ARG(f, first + 2, has);
    CLF_SET_ARG(f, first + 3, c);
    CLF_SET_ARG(f, first + 4, block);
    CLF_SET_ARG(f, first + 5, k);
    CLF_SET_ARG(f, first + 6, v);
    CLF_SET_ARG(f, first + 7, dkv);
    CLF_SET_ARG(f, first + 8, wph);
    return 0;
}

static int
flash_wg_unlocked(clf_context *ctx, const struct clf__flash_shape *sh, cl_mem q,
                  cl_mem kbar, cl_mem vbar, cl_mem o, cl_mem mask, cl_mem pk,
                  cl_mem pv)
{
    const struct clf__attend_shape *a = &sh->at;
    cl_kernel f = ctx->kernels[CLF_K_FLASH_WG];
    cl_uint ldq = (cl_uint)a->dq, n = (cl_uint)a->n, L = (cl_uint)a->L;
    cl_uint dh = (cl_uint)a->dh, heads = (cl_uint)a->heads;
    cl_uint per = a->kv_per_head != 0;
    float scale = a->scale;
    size_t g[3], local[3] = {FW_ITEMS, 1, 1};
    cl_int err;

    if (a->n == 0 || a->batch == 0)
        return 0;
    if (!clf__flash_wg_applies(ctx, sh))
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "flashwg: d_h %zu or this device does not fit its "
                         "work-groups of %zu",
                         a->dh, FW_ITEMS);
    CLF_SET_ARG(f, 0, q);
    CLF_SET_ARG(f, 1, ldq);
    CLF_SET_ARG(f, 2, kbar);
    CLF_SET_ARG(f, 3, vbar);
    CLF_SET_ARG(f, 4, o);
    CLF_SET_ARG(f, 5, n);
    CLF_SET_ARG(f, 6, L);
    CLF_SET_ARG(f, 7, dh);
    CLF_SET_ARG(f, 8, heads);
    CLF_SET_ARG(f, 9, per);
    CLF_SET_ARG(f, 10, scale);
    CLF_TRY(clf__flash_set_mode_args(f, 11, sh, mask, pk, pv, q));
    g[0] = (a->n + CLF_FLASHWG_ROWS - 1) / CLF_FLASHWG_ROWS * FW_ITEMS;
    g[1] = a->heads;
    g[2] = a->batch;
    err = clf__enqueue_nd(ctx, f, 3, g, local);
    if (err != CL_SUCCESS)
        return clf__fail(err,
                         "streaming attention (work-groups): enqueue of %zu x "
                         "%zu x %zu failed (%d)",
                         g[0], g[1], g[2], err);
    return 0;
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__flash_wg(clf_context *ctx, const struct clf__flash_shape *sh, cl_mem q,
              cl_mem kbar, cl_mem vbar, cl_mem o, cl_mem mask, cl_mem pk,
              cl_mem pv)
{
    int rc;

    clf__lock(ctx);
    rc = flash_wg_unlocked(ctx, sh, q, kbar, vbar, o, mask, pk, pv);
    clf__unlock(ctx);
    return rc;
}
