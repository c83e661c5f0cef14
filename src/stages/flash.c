/* Host side of the streaming attention kernel (cl/, same stem): steps 3 to
 * 5 of the forward in one kernel, in every mode, without a score buffer;
 * and the choice, per device and shape, between it, the GEMM path, (plain
 * Linformer, d_h a multiple of 16) the fused kernel and (d_h up to
 * CLF_FLASHWG_WIDE_DH, where the device takes its work-groups) the GPU-shaped
 * streaming kernel of flash_wg.c. */
#include "stages/stages.h"

#include <math.h>
#include <stdio.h>
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
size_t
clf__flash_blocks(const clf_context *ctx, const struct clf__flash_shape *sh)
{
    const size_t limit = clf__loop_limit(ctx) / 100 * 85;
    size_t blocks = sh->at.L >= CLF_FLASH_LONG_KEYS ? CLF_FLASH_BLOCKS
                                                    : CLF_FLASH_BLOCKS / 2;

    if (ctx->flash_blocks > 0 && ctx->flash_blocks <= CLF_FLASH_BLOCKS)
        blocks = (size_t)ctx->flash_blocks;
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

/* ------------------------------------------------------------ the choice */

enum { T_Q, T_KBAR, T_VBAR, T_KT, T_S, T_O, T_PK, T_PV, T_VF, T_NF, T_COUNT };

struct flash_timing {
    struct clf__flash_shape sh;
    struct clf__path_ways ways;
    size_t ld;                          /* score row stride on the GEMM path */
    int way[CLF_MAX_CANDIDATES], count; /* the candidates that apply
                                           (CLF_ATTEND_* - 1) */
    cl_mem m[T_COUNT];
};

/* The GEMM path as the forward runs it in this mode (one sequence). */
static int
run_gemm_path(clf_context *ctx, const struct flash_timing *t)
{
    const struct clf__flash_shape *sh = &t->sh;
    const size_t n = sh->at.n, rows = sh->at.heads * n;
    const cl_mem *m = t->m;
    struct clf__causal_shape cs;
    struct clf__weigh_causal cz, *czp = NULL;

    memset(&cs, 0, sizeof cs);
    cs.batch = 1;
    cs.heads = sh->at.heads;
    cs.n = n;
    cs.dh = sh->at.dh;
    cs.dq = sh->at.dq;
    cs.dkv = sh->dkv;
    cs.k = sh->at.L;
    cs.c = sh->c;
    cs.block = sh->block;
    cs.kv_per_head = sh->window_per_head;
    cs.scale = sh->at.scale;
    cs.score_way = t->ways.score;
    cs.weigh_way = t->ways.weigh;
    CLF_TRY(clf__attend_scores(ctx, t->ways.score, &sh->at, 0, 1, 0, n, m[T_Q],
                               m[T_KBAR], m[T_S], 0, t->ld));
    if (sh->block) {
        CLF_TRY(clf__causal_scores(ctx, &cs, m[T_S], m[T_Q], m[T_PK]));
        CLF_TRY(clf__causal_softmax(ctx, &cs, t->ways.softmax, m[T_S], NULL));
    } else if (sh->causal) {
        const struct clf__score_mask tri = {NULL, 0, sh->at.heads, n, 0, 1};
        CLF_TRY(clf__softmax_masked(ctx, t->ways.softmax, m[T_S], rows, t->ld,
                                    &tri));
    } else {
        CLF_TRY(clf__softmax_rows_variant(ctx, t->ways.softmax, m[T_S], 0, rows,
                                          t->ld));
    }
    if (sh->causal || sh->block) {
        memset(&cz, 0, sizeof cz);
        cz.vf = m[T_VF];
        cz.first = m[T_NF];
        cz.c = sh->c;
        cz.block = sh->block;
        CLF_TRY(clf__attend_finite(ctx, &sh->at, m[T_VBAR], cz.vf, cz.first));
        czp = &cz;
    }
    CLF_TRY(clf__attend_weigh(ctx, t->ways.weigh, &sh->at, 0, 1, 0, n, m[T_S],
                              0, t->ld, m[T_VBAR], m[T_O], czp));
    return sh->block ? clf__causal_apply(ctx, &cs, m[T_O], m[T_S], m[T_PV]) : 0;
}

static int
run_way(clf_context *ctx, int v, void *user)
{
    const struct flash_timing *t = user;
    const cl_mem *m = t->m;

    switch (t->way[v] + 1) {
    case CLF_ATTEND_FUSED:
        return clf__attend(ctx, &t->sh.at, m[T_Q], m[T_KBAR], m[T_VBAR],
                           m[T_KT], m[T_S], m[T_O]);
    case CLF_ATTEND_FLASH:
        return clf__flash(ctx, &t->sh, m[T_Q], m[T_KBAR], m[T_VBAR], m[T_KT],
                          m[T_O], NULL, m[T_PK], m[T_PV]);
    case CLF_ATTEND_FLASHWG:
        return clf__flash_wg(ctx, &t->sh, m[T_Q], m[T_KBAR], m[T_VBAR], m[T_O],
                             NULL, m[T_PK], m[T_PV]);
    default:
        return run_gemm_path(ctx, t);
    }
}

/* The timing buffers' sizes in floats. */
static void
timing_sizes(const struct flash_timing *t, size_t sizes[T_COUNT])
{
    const struct clf__attend_shape *a = &t->sh.at;
    const size_t hc = a->kv_per_head ? a->heads : 1;
    const size_t lp = clf__attend_slots(a->L);
    size_t fused = a->heads * clf__attend_rows(a->n) * lp;

    sizes[T_Q] = sizes[T_O] = a->n * a->dq;
    sizes[T_KBAR] = sizes[T_VBAR] = a->L * hc * a->dh;
    sizes[T_KT] = clf__flash_kt_floats(&t->sh);
    sizes[T_S] = a->heads * a->n * t->ld;
    if (t->count > 1 && t->way[1] == CLF_ATTEND_FUSED - 1 && fused > sizes[T_S])
        sizes[T_S] = fused;
    sizes[T_PK] = sizes[T_PV] = t->sh.block ? a->n * t->sh.dkv : 1;
    sizes[T_VF] = t->sh.causal || t->sh.block ? sizes[T_VBAR] : 1;
    sizes[T_NF] = t->sh.causal || t->sh.block ? hc * a->dh : 1;
}

static int
time_ways(clf_context *ctx, const char *bucket, struct flash_timing *t,
          int *variant)
{
    size_t sizes[T_COUNT];
    double ms[CLF_MAX_CANDIDATES] = {0}, got[CLF_MAX_CANDIDATES] = {0};
    int rc = 0, best = -1, i;

    timing_sizes(t, sizes);
    for (i = 0; i < T_COUNT && rc == 0; i++)
        t->m[i] = clf__timing_buffer(ctx, sizes[i], (unsigned)i, &rc);
    if (rc == 0)
        best = clf__time_variants(ctx, t->count, run_way, t, 2, got);
    for (i = 0; i < T_COUNT; i++)
        if (t->m[i] != NULL)
            clReleaseMemObject(t->m[i]);
    if (rc != 0 || best < 0)
        return rc != 0 ? rc : best;
    /* Candidates that do not apply keep 0: not timed. */
    for (i = 0; i < t->count; i++)
        ms[t->way[i]] = got[i];
    *variant = CLF_ATTEND_GEMM + clf__choice_record(ctx, CLF_KIND_ATTEND,
                                                    bucket, t->way[best], ms);
    return 0;
}

/* The sequence length the ways are timed on: n at most 4096 (full mode:
 * at most 2048 and 64 MiB of scores), so the timing stays short; a cut n
 * is the longest under the cap with n's remainder mod 16, so the GEMMs fit the
 * blocked kernel (n a multiple of 16) where the forward's do and not elsewhere
 * (full mode's cut to 1448 once sent the GEMM path's score GEMM to CLBlast in
 * the timing alone, bench/RESULTS.md section 20). */
size_t
clf__flash_timing_rows(size_t n, size_t heads, int full)
{
    size_t cap = 4096;

    if (full) {
        cap = (size_t)sqrt((double)((size_t)1 << 24) /
                           (double)(heads ? heads : 1));
        cap = cap > 2048 ? 2048 : cap < 1 ? 1 : cap;
    }
    if (n <= cap)
        return n;
    return cap < 16 ? cap : (cap - n % 16) / 16 * 16 + n % 16;
}

/* The shape the candidates are timed on: one sequence of
 * clf__flash_timing_rows; the way candidates apply (the work-group kernel
 * where its groups fit the device and d_h fits its tiles). */
static void
timing_shape(clf_context *ctx, const struct clf__flash_shape *sh, int fusable,
             const struct clf__path_ways *ways, struct flash_timing *t)
{
    memset(t, 0, sizeof *t);
    t->sh = *sh;
    t->sh.at.batch = 1;
    t->ways = *ways;
    t->sh.at.n = clf__flash_timing_rows(sh->at.n, sh->at.heads, sh->full);
    if (sh->full)
        t->sh.at.L = t->sh.at.n;
    t->ld = t->sh.at.L + t->sh.block;
    t->way[t->count++] = CLF_ATTEND_GEMM - 1;
    if (fusable)
        t->way[t->count++] = CLF_ATTEND_FUSED - 1;
    if (clf__flash_blocks(ctx, &t->sh) > 0)
        t->way[t->count++] = CLF_ATTEND_FLASH - 1;
    if (clf__flash_wg_applies(ctx, sh))
        t->way[t->count++] = CLF_ATTEND_FLASHWG - 1;
}

/* The bucket: the mode, powers of two of n and L, heads, d_h, K/V heads. */
static void
bucket_of(const struct clf__flash_shape *sh, char *bucket, size_t cap)
{
    const char *mode = sh->full    ? (sh->causal ? "cfull" : "full")
                       : sh->block ? "clin"
                                   : "lin";

    snprintf(bucket, cap, "%s.n%zu.l%zu.h%zu.d%zu.%s", mode,
             clf__pow2_bucket(sh->at.n, (size_t)1 << 20),
             clf__pow2_bucket(sh->at.L, (size_t)1 << 20), sh->at.heads,
             sh->at.dh, sh->at.kv_per_head ? "kvh" : "kv1");
}

int
clf__flash_resolve(clf_context *ctx, const struct clf__flash_shape *sh,
                   int fusable, const struct clf__path_ways *ways, int *variant)
{
    struct flash_timing t;
    char bucket[CLF_BUCKET_MAX];
    int found, best = 0, rc;

    clf__lock(ctx);
    /* Pinned (by the tuner, or tests) under the lock like the rest. */
    if (ctx->attend_variant != CLF_ATTEND_UNDECIDED) {
        *variant = ctx->attend_variant;
        rc = 0;
    } else {
        bucket_of(sh, bucket, sizeof bucket);
        found = clf__choice_lookup(ctx, CLF_KIND_ATTEND, bucket, &best);
        if (found == 1)
            *variant = CLF_ATTEND_GEMM + best;
        if (found == 0) {
            timing_shape(ctx, sh, fusable, ways, &t);
            rc = time_ways(ctx, bucket, &t, variant);
            clf__choice_release(ctx);
        } else
            rc = found;
    }
    clf__unlock(ctx);
    /* Forced (or stored) where it does not apply. */
    if (rc >= 0 &&
        ((*variant == CLF_ATTEND_FUSED && !fusable) ||
         (*variant == CLF_ATTEND_FLASH && clf__flash_blocks(ctx, sh) == 0) ||
         (*variant == CLF_ATTEND_FLASHWG && !clf__flash_wg_applies(ctx, sh))))
        *variant = CLF_ATTEND_GEMM;
    return rc < 0 ? rc : 0;
}
