/* Host side of the streaming attention kernel (cl/, same stem): steps 3 to
 * 5 of the forward in one kernel, in every mode, without a score buffer.
 * The choice between it and the other ways of those steps is the layer's
 * (src/layer/ways.c). */
#include "stages/stages.h"

#include <string.h>

/* Keys (or slots) transposed tile by tile, clf__attend_slots(L) / 64
 * tiles of dh rows of 64 per sequence and key head: the layout the kernel
 * streams (clf_flash_keys). */
static int
transpose_keys(clf_context *ctx, const struct clf__attend_shape *sh,
               cl_mem kbar, cl_mem kt)
{
    cl_kernel t = ctx->kernels[CLF_K_FLASH_KEYS];
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    cl_uint L = (cl_uint)sh->L, width = (cl_uint)(hc * sh->dh);
    cl_uint dh = (cl_uint)sh->dh, hcu = (cl_uint)hc;
    cl_uint lp = (cl_uint)clf__attend_slots(sh->L);
    size_t g[3];

    CLF_SET_ARG(t, 0, kbar);
    CLF_SET_ARG(t, 1, L);
    CLF_SET_ARG(t, 2, width);
    CLF_SET_ARG(t, 3, dh);
    CLF_SET_ARG(t, 4, hcu);
    CLF_SET_ARG(t, 5, lp);
    CLF_SET_ARG(t, 6, kt);
    g[0] = lp;
    g[1] = hc * sh->dh;
    g[2] = sh->batch;
    return clf__enqueue3(ctx, CLF_K_FLASH_KEYS, g, 0, "key transpose");
}

/* The keys' part of kt: batch * hc * dh * clf__attend_slots(L) floats;
 * the values follow it. */
static size_t
keys_floats(const struct clf__attend_shape *a)
{
    return a->batch * (a->kv_per_head ? a->heads : 1) * a->dh *
           clf__attend_slots(a->L);
}

size_t
clf__flash_kt_floats(const struct clf__flash_shape *sh)
{
    return 2 * keys_floats(&sh->at);
}

/* Loop iterations one work-item of clf_flash runs with `blocks` blocks of
 * rows, the loops of cl/flash.cl counted as llvmpipe counts them (each run
 * of a loop costs its iterations plus one; both sides of a branch run):
 * per tile and block of rows the scores (4 passes over dh), the rows'
 * online update and the weighted sum (per 16 columns and per column of the
 * tail, a pass over the tile's keys); per row the zeroing, the
 * normalisation and (causal Linformer) the exact window of up to `block`
 * positions.  Against rusticl on llvmpipe (a probe loop after the kernel
 * read the iterations left) it came within -4% and +8% of the count. */
static size_t
flash_trips(const struct clf__flash_shape *sh, size_t blocks)
{
    const size_t fr = CLF_FLASH_ROWS, rows = fr * blocks, dh = sh->at.dh;
    const size_t L = sh->at.L, t = (L + 63) / 64, v = dh / 16, c = dh % 16;
    const size_t tile = 8 + (5 + 4 * (15 + 8 * dh)) + (7 + 31 * fr) + 1;
    const size_t weigh = t * (v + c + 2) + v * (14 * t + (L + t) + 7 * L) +
                         c * (7 * t + fr * (L + t));
    const size_t nw = (sh->block + 63) / 64;
    const size_t window =
        sh->block ? nw + 1 + nw * (2 * dh + 3) + sh->block * (2 * dh + 2) : 0;

    return 2 * fr * CLF_FLASH_BLOCKS + 1 + 2 * (rows + 1 + rows * (dh + 1)) +
           67 * t + blocks * (t * tile + weigh) + rows * window;
}

/* More rows share each key tile when there are many keys: a head's keys
 * and values then outgrow the caches, and every pass over them costs more
 * (bench/RESULTS.md section 12.4: at n = 16384 twelve blocks ran the
 * kernel 1.1-1.4x faster than six, at n = 4096 about 0.9x).  Where the
 * device ends loops early (clf__loop_limit), as many blocks as keep
 * flash_trips within 85% of its limit (the margin covers the count's
 * error), and 0 where not even one does. */
static const char blocks_key = 0;

int
clf__flash_set_blocks(clf_context *ctx, int blocks)
{
    return clf__feature_int_set(ctx, &blocks_key, blocks);
}

size_t
clf__flash_blocks(const clf_context *ctx, const struct clf__flash_shape *sh)
{
    const size_t limit = clf__loop_limit(ctx) / 100 * 85;
    const int set = clf__feature_int_get(ctx, &blocks_key);
    size_t blocks = sh->at.L >= CLF_FLASH_LONG_KEYS ? CLF_FLASH_BLOCKS
                                                    : CLF_FLASH_BLOCKS / 2;

    if (set > 0 && set <= CLF_FLASH_BLOCKS)
        blocks = (size_t)set;
    while (limit > 0 && blocks > 0 && flash_trips(sh, blocks) > limit)
        blocks--;
    return blocks;
}

/* Values (or slots) repacked after the keys in kt, lp rows of dh floats
 * per sequence and key head (clf_flash_values). */
static int
pack_values(clf_context *ctx, const struct clf__attend_shape *sh, cl_mem vbar,
            cl_mem kt)
{
    cl_kernel t = ctx->kernels[CLF_K_FLASH_VALUES];
    const size_t hc = sh->kv_per_head ? sh->heads : 1;
    cl_uint L = (cl_uint)sh->L, width = (cl_uint)(hc * sh->dh);
    cl_uint dh = (cl_uint)sh->dh, hcu = (cl_uint)hc;
    cl_uint lp = (cl_uint)clf__attend_slots(sh->L);
    cl_ulong off = keys_floats(sh);
    size_t g[3];

    CLF_SET_ARG(t, 0, vbar);
    CLF_SET_ARG(t, 1, L);
    CLF_SET_ARG(t, 2, width);
    CLF_SET_ARG(t, 3, dh);
    CLF_SET_ARG(t, 4, hcu);
    CLF_SET_ARG(t, 5, lp);
    CLF_SET_ARG(t, 6, off);
    CLF_SET_ARG(t, 7, kt);
    g[0] = sh->dh;
    g[1] = lp;
    g[2] = sh->batch * hc;
    return clf__enqueue3(ctx, CLF_K_FLASH_VALUES, g, 0, "value repack");
}

static int
flash_unlocked(clf_context *ctx, const struct clf__flash_shape *sh, cl_mem q,
               cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem o, cl_mem mask,
               cl_mem pk, cl_mem pv)
{
    const struct clf__attend_shape *a = &sh->at;
    cl_kernel f = ctx->kernels[CLF_K_FLASH];
    cl_uint ldq = (cl_uint)a->dq, lp = (cl_uint)clf__attend_slots(a->L);
    cl_uint n = (cl_uint)a->n;
    cl_uint L = (cl_uint)a->L, dh = (cl_uint)a->dh;
    cl_ulong v_off = keys_floats(a);
    cl_uint heads = (cl_uint)a->heads, per = a->kv_per_head != 0;
    float scale = a->scale;
    const size_t rows = CLF_FLASH_ROWS * clf__flash_blocks(ctx, sh);
    cl_uint urows = (cl_uint)rows;
    size_t g[3];

    if (a->n == 0 || a->batch == 0)
        return 0;
    if (rows == 0)
        return clf__fail(CLF_EUNSUPPORTED,
                         "streaming attention: %zu keys of d_h %zu take more "
                         "loop iterations a work-item than %s allows",
                         a->L, a->dh, ctx->info.name);
    if (a->L > 0) {
        CLF_TRY(transpose_keys(ctx, a, kbar, kt));
        CLF_TRY(pack_values(ctx, a, vbar, kt));
    }
    CLF_SET_ARG(f, 0, q);
    CLF_SET_ARG(f, 1, ldq);
    CLF_SET_ARG(f, 2, kt);
    CLF_SET_ARG(f, 3, lp);
    CLF_SET_ARG(f, 4, kt);
    CLF_SET_ARG(f, 5, v_off);
    CLF_SET_ARG(f, 6, o);
    CLF_SET_ARG(f, 7, n);
    CLF_SET_ARG(f, 8, L);
    CLF_SET_ARG(f, 9, dh);
    CLF_SET_ARG(f, 10, heads);
    CLF_SET_ARG(f, 11, per);
    CLF_SET_ARG(f, 12, scale);
    CLF_TRY(clf__flash_set_mode_args(f, 13, sh, mask, pk, pv, q));
    CLF_SET_ARG(f, 22, urows);
    g[0] = (a->n + rows - 1) / rows;
    g[1] = a->heads;
    g[2] = a->batch;
    return clf__enqueue3(ctx, CLF_K_FLASH, g, 1, "streaming attention");
}

/* Kernel arguments are shared by the context's threads: set and enqueue
 * under its lock. */
int
clf__flash(clf_context *ctx, const struct clf__flash_shape *sh, cl_mem q,
           cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem o, cl_mem mask,
           cl_mem pk, cl_mem pv)
{
    int rc;

    clf__lock(ctx);
    rc = flash_unlocked(ctx, sh, q, kbar, vbar, kt, o, mask, pk, pv);
    clf__unlock(ctx);
    return rc;
}
