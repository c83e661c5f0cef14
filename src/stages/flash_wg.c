/* Host side of the GPU-shaped streaming attention kernel (cl/, same
 * stem): steps 3 to 5 in one kernel with work-groups of
 * CLF_FLASHWG_ROWS query rows (CLF_FLASHWG_WIDE_ROWS for heads wider than
 * CLF_FLASHWG_DH), keys and values staged in local memory.
 * It reads Kbar and Vbar as the forward leaves them, so it needs no
 * workspace of its own. */
#include "stages/stages.h"

#include <string.h>

/* The two builds of the kernel: the main program's for heads up to
 * CLF_FLASHWG_DH, and one of its own for heads up to CLF_FLASHWG_WIDE_DH
 * (the same columns an item, more items a row, fewer rows a group). */
struct fw_geom {
    size_t rows, split, dh, keys;
};
static const struct fw_geom narrow = {CLF_FLASHWG_ROWS, CLF_FLASHWG_SPLIT,
                                      CLF_FLASHWG_DH, CLF_FLASHWG_KEYS};
static const struct fw_geom wide = {CLF_FLASHWG_WIDE_ROWS,
                                    CLF_FLASHWG_WIDE_SPLIT, CLF_FLASHWG_WIDE_DH,
                                    CLF_FLASHWG_WIDE_KEYS};

/* The build for heads of dh, NULL when none takes them. */
static const struct fw_geom *
geom_for(size_t dh)
{
    return dh <= narrow.dh ? &narrow : dh <= wide.dh ? &wide : NULL;
}

static size_t
fw_items(const struct fw_geom *g)
{
    return g->rows * g->split;
}

/* The kernel's __local arrays: two tiles of keys and values and the
 * partial scores of every item. */
static size_t
fw_local_bytes(const struct fw_geom *g)
{
    return sizeof(float) * (2 * g->keys * g->dh + g->split * g->keys * g->rows);
}

/* The wide build in a context: made on first need; failed 1 when its
 * build failed (then it is not offered, and not tried again). */
struct fw_state {
    cl_program program;
    cl_kernel kernel;
    size_t wg; /* CL_KERNEL_WORK_GROUP_SIZE */
    int failed;
};

static void
release_state(clf_context *ctx, void *state)
{
    struct fw_state *st = state;

    (void)ctx;
    if (st->kernel != NULL)
        clReleaseKernel(st->kernel);
    if (st->program != NULL)
        clReleaseProgram(st->program);
}

static const char state_key = 0;

static int
build_wide(clf_context *ctx, struct fw_state *st)
{
    static const char *const over[] = {"CLF_FLASHWG_ROWS", "CLF_FLASHWG_SPLIT",
                                       "CLF_FLASHWG_DH"};
    const size_t val[] = {wide.rows, wide.split, wide.dh};
    char options[2048];
    cl_int err;

    clf__kernel_options(over, val, sizeof val / sizeof val[0], options,
                        sizeof options);
    CLF_TRY(clf__program_build_part(ctx, CLF_PART_FLASH_WG_WIDE, options,
                                    &st->program));
    st->kernel = clCreateKernel(st->program, "clf_flash_wg", &err);
    if (st->kernel == NULL)
        return clf__fail(err,
                         "kernel clf_flash_wg (d_h <= %zu): "
                         "clCreateKernel failed (%d)",
                         wide.dh, err);
    st->wg = clf__kernel_wg(ctx, st->kernel);
    return 0;
}

/* The kernel of build g and the work-items it takes a group (0: none);
 * the wide one is built here the first time (ctx locked). */
static cl_kernel
kernel_of(clf_context *ctx, const struct fw_geom *g, size_t *wg)
{
    struct fw_state *st;

    *wg = 0;
    if (g == &narrow) {
        *wg = ctx->kernel_wg[CLF_K_FLASH_WG];
        return ctx->kernels[CLF_K_FLASH_WG];
    }
    st = clf__feature(ctx, &state_key, sizeof *st, NULL, release_state);
    if (st == NULL || st->failed)
        return NULL;
    if (st->kernel == NULL && build_wide(ctx, st) != 0) {
        st->failed = 1; /* the forward falls back: not offered */
        return NULL;
    }
    *wg = st->wg;
    return st->kernel;
}

int
clf__flash_wg_applies(clf_context *ctx, const struct clf__flash_shape *sh)
{
    const struct fw_geom *g = geom_for(sh->at.dh);
    size_t wg;
    int ok;

    /* The group is one tile of rows: a compiled kernel that takes fewer
     * work-items (CL_KERNEL_WORK_GROUP_SIZE, at most the device's limit),
     * or a device with less local memory, cannot run it. */
    if (g == NULL || ctx->info.local_mem < fw_local_bytes(g))
        return 0;
    clf__lock(ctx);
    ok = kernel_of(ctx, g, &wg) != NULL && wg >= fw_items(g);
    clf__unlock(ctx);
    return ok;
}

size_t
clf__flash_wg_rows(const struct clf__flash_shape *sh)
{
    const struct fw_geom *g = geom_for(sh->at.dh);

    return g != NULL ? g->rows : narrow.rows;
}

size_t
clf__flash_wg_groups(const struct clf__flash_shape *sh)
{
    const size_t rows = clf__flash_wg_rows(sh);

    return (sh->at.n + rows - 1) / rows * sh->at.heads * sh->at.batch;
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
    const struct fw_geom *geo = geom_for(a->dh);
    cl_kernel f;
    cl_uint ldq = (cl_uint)a->dq, n = (cl_uint)a->n, L = (cl_uint)a->L;
    cl_uint dh = (cl_uint)a->dh, heads = (cl_uint)a->heads;
    cl_uint per = a->kv_per_head != 0;
    float scale = a->scale;
    size_t g[3], local[3] = {0, 1, 1}, wg;
    cl_int err;

    if (a->n == 0 || a->batch == 0)
        return 0;
    if (!clf__flash_wg_applies(ctx, sh))
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "flashwg: d_h %zu (at most %zu) or this device does "
                         "not fit its work-groups of %zu",
                         a->dh, wide.dh, fw_items(geo ? geo : &narrow));
    f = kernel_of(ctx, geo, &wg);
    local[0] = fw_items(geo);
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
    g[0] = (a->n + geo->rows - 1) / geo->rows * local[0];
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
