/* The ways of attention's steps 3 to 5 (scores, softmax, weighted sum),
 * one row each of the table below: the GEMM path (score GEMMs, a row
 * softmax, weighting GEMMs), the fused kernel (fused.c), the streaming
 * kernel (flash.c) and the GPU-shaped streaming kernel (flash_wg.c).  A
 * row says whether the way applies to a shape, what workspace it needs
 * beyond the plan's, and runs the steps on a struct clf__steps.  The
 * single-device forward, the sharded forward and the timing of the choice
 * all run the ways through this table, on a shape clf__steps_shape fills;
 * the choice among them is made here (clf__ways_resolve), for plan.c. */
#include "layer/layer_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TRY CLF_TRY

/* Ends the running stage and starts `stage` where the caller marks them. */
static int
mark(const struct clf__steps *st, int stage)
{
    return st->mark != NULL ? st->mark(st->user, stage) : 0;
}

/* ------------------------------------------------------ the shape */

void
clf__steps_shape(const clf_attention *a, const struct plan *p,
                 struct clf__steps *st)
{
    struct clf__flash_shape *sh = &st->sh;
    const struct workspace *ws = a->ws;

    memset(st, 0, sizeof *st);
    sh->at.batch = p->B;
    sh->at.heads = a->hq;
    sh->at.n = p->n;
    sh->at.dh = a->dh;
    sh->at.dq = a->dq;
    sh->at.L = p->L;
    sh->at.kv_per_head = p->hc > 1;
    sh->at.scale = (float)(1.0 / sqrt((double)a->dh));
    sh->full = !p->linformer;
    sh->causal = !p->linformer && p->causal;
    if (p->linformer && p->causal) {
        sh->c = p->c;
        sh->block = a->desc.causal_block;
        sh->dkv = a->dkv;
        sh->window_per_head = a->hkv > 1;
    }
    st->ld = p->ld;
    st->seqs = p->seqs;
    st->chunk = p->chunk;
    st->fusable = p->fusable;
    st->slot_mask = p->slot_mask;
    st->ways.score = p->gemm[CLF_ROLE_SCORE];
    st->ways.weigh = p->gemm[CLF_ROLE_WEIGH];
    st->ways.softmax = p->softmax;
    st->q = ws[WS_Q].mem;
    st->kbar = ws[WS_KBAR].mem;
    st->vbar = p->v_is_k ? ws[WS_KBAR].mem : ws[WS_VBAR].mem;
    st->kt = ws[WS_KT].mem;
    st->s = ws[WS_S].mem;
    st->o = ws[WS_O].mem;
    st->pk = ws[WS_XE].mem;
    st->pv = p->v_is_k ? ws[WS_XE].mem : ws[WS_XF].mem;
    st->vf = ws[WS_VF].mem;
    st->nf = ws[WS_VNF].mem;
    st->mask = p->masked ? p->mask : NULL;
}

/* The causal window's shape (causal Linformer) of the steps. */
static void
window_shape(const struct clf__steps *st, struct clf__causal_shape *cs)
{
    const struct clf__flash_shape *sh = &st->sh;

    memset(cs, 0, sizeof *cs);
    cs->batch = sh->at.batch;
    cs->heads = sh->at.heads;
    cs->n = sh->at.n;
    cs->dh = sh->at.dh;
    cs->dq = sh->at.dq;
    cs->dkv = sh->dkv;
    cs->k = sh->at.L;
    cs->c = sh->c;
    cs->block = sh->block;
    cs->block0 = sh->block ? st->row0 / sh->block : 0;
    cs->kv_per_head = sh->window_per_head;
    cs->scale = sh->at.scale;
    cs->score_way = st->ways.score;
    cs->weigh_way = st->ways.weigh;
}

/* ------------------------------------------------------ the GEMM path */

/* Step 4 on one pass's scores (seqs sequences from b, query rows r0 ..
 * r0 + rows): full mode's padding mask and causal triangle, or
 * Linformer's slot mask (the same triangle over the slots), folded in. */
static int
softmax_pass(clf_context *ctx, const struct clf__steps *st, size_t b,
             size_t seqs, size_t r0, size_t rows)
{
    const struct clf__flash_shape *sh = &st->sh;
    const size_t count = seqs * sh->at.heads * rows;
    struct clf__score_mask m;

    if (sh->full ? !(st->mask != NULL || sh->causal) : !st->slot_mask)
        return clf__softmax_rows_variant(ctx, st->ways.softmax, st->s, 0, count,
                                         st->ld);
    m.mask = sh->full ? st->mask : NULL; /* Linformer's slots took it */
    m.mask_off = b * sh->at.L;
    m.heads = sh->at.heads;
    m.chunk = rows;
    m.row0 = st->row0 + r0;
    m.causal = !sh->full || sh->causal;
    return clf__softmax_masked(ctx, st->ways.softmax, st->s, count, st->ld, &m);
}

/* Steps 3 to 5 in passes of st->seqs sequences by st->chunk query rows
 * (the numbers the score workspace was sized from); in causal full mode
 * the weighted sum's rows weigh the values up to their query. */
static int
gemm_passes(clf_context *ctx, const struct clf__steps *st)
{
    const struct clf__attend_shape *at = &st->sh.at;
    const size_t n = at->n;
    struct clf__weigh_causal cz, *czp = NULL;
    size_t b, nb, r0, rows;

    if (st->sh.causal) {
        memset(&cz, 0, sizeof cz);
        cz.vf = st->vf;
        cz.first = st->nf;
        cz.row0 = st->row0;
        czp = &cz;
        TRY(mark(st, CLF_STAGE_WEIGHTED_SUM));
        TRY(clf__attend_finite(ctx, at, st->vbar, cz.vf, cz.first));
    }
    for (b = 0; b < at->batch; b += nb) {
        nb = at->batch - b < st->seqs ? at->batch - b : st->seqs;
        for (r0 = 0; r0 < n; r0 += rows) {
            rows = n - r0 < st->chunk ? n - r0 : st->chunk;
            TRY(mark(st, CLF_STAGE_SCORES));
            TRY(clf__attend_scores(ctx, st->ways.score, at, b, nb, r0, rows,
                                   st->q, st->kbar, st->s, 0, st->ld));
            TRY(mark(st, CLF_STAGE_SOFTMAX));
            TRY(softmax_pass(ctx, st, b, nb, r0, rows));
            TRY(mark(st, CLF_STAGE_WEIGHTED_SUM));
            TRY(clf__attend_weigh(ctx, st->ways.weigh, at, b, nb, r0, rows,
                                  st->s, 0, st->ld, st->vbar, st->o, czp));
        }
    }
    return 0;
}

/* Causal Linformer in one pass: scores over the past blocks' slots and
 * the own-block window, the causal softmax, the weighted sum of the slots,
 * then the window's values. */
static int
gemm_window(clf_context *ctx, const struct clf__steps *st)
{
    const struct clf__attend_shape *at = &st->sh.at;
    struct clf__causal_shape cs;
    struct clf__weigh_causal cz;

    window_shape(st, &cs);
    memset(&cz, 0, sizeof cz);
    cz.vf = st->vf;
    cz.first = st->nf;
    cz.row0 = st->row0;
    cz.c = st->sh.c;
    cz.block = st->sh.block;
    TRY(mark(st, CLF_STAGE_SCORES));
    TRY(clf__attend_scores(ctx, st->ways.score, at, 0, at->batch, 0, at->n,
                           st->q, st->kbar, st->s, 0, st->ld));
    TRY(clf__causal_scores(ctx, &cs, st->s, st->q, st->pk));
    TRY(mark(st, CLF_STAGE_SOFTMAX));
    TRY(clf__causal_softmax(ctx, &cs, st->ways.softmax, st->s, st->mask));
    TRY(mark(st, CLF_STAGE_WEIGHTED_SUM));
    TRY(clf__attend_finite(ctx, at, st->vbar, cz.vf, cz.first));
    TRY(clf__attend_weigh(ctx, st->ways.weigh, at, 0, at->batch, 0, at->n,
                          st->s, 0, st->ld, st->vbar, st->o, &cz));
    cs.c = 0;
    cs.scale = 0.0f;
    return clf__causal_apply(ctx, &cs, st->o, st->s, st->pv);
}

static int
gemm_run(clf_context *ctx, const struct clf__steps *st)
{
    return st->sh.block ? gemm_window(ctx, st) : gemm_passes(ctx, st);
}

/* ------------------------------------------------------- the kernels */

static int
fused_run(clf_context *ctx, const struct clf__steps *st)
{
    TRY(mark(st, CLF_STAGE_FUSED));
    return clf__fused(ctx, &st->sh.at, st->q, st->kbar, st->vbar, st->kt, st->s,
                      st->o);
}

/* The streaming kernels read the padding mask where it masks keys (full
 * mode) or the causal window; Linformer's slots took it in compression. */
static cl_mem
stream_mask(const struct clf__steps *st)
{
    return st->sh.full || st->sh.block ? st->mask : NULL;
}

static int
flash_run(clf_context *ctx, const struct clf__steps *st)
{
    const int w = st->sh.block != 0;

    TRY(mark(st, CLF_STAGE_FUSED));
    return clf__flash(ctx, &st->sh, st->q, st->kbar, st->vbar, st->kt, st->o,
                      stream_mask(st), w ? st->pk : NULL, w ? st->pv : NULL);
}

static int
flash_wg_run(clf_context *ctx, const struct clf__steps *st)
{
    const int w = st->sh.block != 0;

    TRY(mark(st, CLF_STAGE_FUSED));
    return clf__flash_wg(ctx, &st->sh, st->q, st->kbar, st->vbar, st->o,
                         stream_mask(st), w ? st->pk : NULL, w ? st->pv : NULL);
}

/* --------------------------------------------------- applies, workspace */

static int
gemm_applies(clf_context *ctx, const struct clf__steps *st)
{
    (void)ctx;
    (void)st;
    return 1;
}

/* Plain Linformer in one pass, d_h a multiple of 16, its scores within
 * the device's largest allocation (plan.c decides: st->fusable). */
static int
fused_applies(clf_context *ctx, const struct clf__steps *st)
{
    (void)ctx;
    return st->fusable;
}

static int
flash_applies(clf_context *ctx, const struct clf__steps *st)
{
    return clf__flash_blocks(ctx, &st->sh) > 0;
}

static int
flash_wg_applies(clf_context *ctx, const struct clf__steps *st)
{
    return clf__flash_wg_applies(ctx, &st->sh);
}

/* The GEMM path in a causal mode weighs every key or slot of a row,
 * those after its limit by 0: the values with their non-finite entries
 * zeroed and, per column, the first row holding one (stages.h,
 * clf__weigh_causal).  The score workspace is the plan's. */
static void
gemm_workspace(const struct clf__steps *st, size_t need[WS_COUNT])
{
    const struct clf__attend_shape *at = &st->sh.at;
    const size_t hc = at->kv_per_head ? at->heads : 1;

    if (!st->sh.causal && !st->sh.block)
        return;
    need[WS_VF] = at->batch * at->L * hc * at->dh;
    need[WS_VNF] = at->batch * hc * at->dh;
}

/* The fused kernel's scores and transposed keys: sized with the plan,
 * which offers it only where they fit. */
static void
fused_workspace(const struct clf__steps *st, size_t need[WS_COUNT])
{
    (void)st;
    (void)need;
}

/* The streaming kernels store no scores: the queries, keys, values,
 * outputs and (flash) the keys and values repacked, O(n d) in every mode. */
static void
flash_workspace(const struct clf__steps *st, size_t need[WS_COUNT])
{
    need[WS_S] = 0;
    need[WS_KT] = clf__flash_kt_floats(&st->sh);
}

static void
flash_wg_workspace(const struct clf__steps *st, size_t need[WS_COUNT])
{
    (void)st;
    need[WS_S] = 0;
    need[WS_KT] = 0;
}

/* The table, by enum clf__attend_variant - 1: name, applies, workspace,
 * run, and whether the way stores scores (runs in passes). */
static const struct clf__way ways[] = {
    {"gemm", gemm_applies, gemm_workspace, gemm_run, 1},
    {"fused", fused_applies, fused_workspace, fused_run, 1},
    {"flash", flash_applies, flash_workspace, flash_run, 0},
    {"flashwg", flash_wg_applies, flash_wg_workspace, flash_wg_run, 0},
};
#define WAY_COUNT ((int)(sizeof ways / sizeof ways[0]))

const struct clf__way *
clf__way(int variant)
{
    return variant > CLF_ATTEND_UNDECIDED && variant <= WAY_COUNT
               ? &ways[variant - 1]
               : &ways[CLF_ATTEND_GEMM - 1];
}

int
clf__way_taken(clf_context *ctx, const struct clf__steps *st, int variant)
{
    if (variant > CLF_ATTEND_UNDECIDED && variant <= WAY_COUNT &&
        ways[variant - 1].applies(ctx, st))
        return variant;
    return CLF_ATTEND_GEMM;
}

/* ------------------------------------------------------ the choice */

enum { T_Q, T_KBAR, T_VBAR, T_KT, T_S, T_O, T_PK, T_PV, T_VF, T_NF, T_COUNT };

/* The ways timed: the steps on the timing's buffers, the candidates that
 * apply (CLF_ATTEND_* - 1) and the buffers. */
struct timing {
    struct clf__steps st;
    int way[CLF_MAX_CANDIDATES], count;
    cl_mem m[T_COUNT];
};

static int
run_way(clf_context *ctx, int v, void *user)
{
    const struct timing *t = user;

    return ways[t->way[v]].run(ctx, &t->st);
}

/* The timing buffers' sizes in floats. */
static void
timing_sizes(const struct timing *t, size_t sizes[T_COUNT])
{
    const struct clf__steps *st = &t->st;
    const struct clf__attend_shape *a = &st->sh.at;
    const size_t hc = a->kv_per_head ? a->heads : 1;
    const size_t lp = clf__attend_slots(a->L);
    const int window = st->sh.causal || st->sh.block;
    size_t fused = a->heads * clf__fused_rows(a->n) * lp;

    sizes[T_Q] = sizes[T_O] = a->n * a->dq;
    sizes[T_KBAR] = sizes[T_VBAR] = a->L * hc * a->dh;
    sizes[T_KT] = clf__flash_kt_floats(&st->sh);
    sizes[T_S] = a->heads * a->n * st->ld;
    if (st->fusable && fused > sizes[T_S])
        sizes[T_S] = fused;
    sizes[T_PK] = sizes[T_PV] = st->sh.block ? a->n * st->sh.dkv : 1;
    sizes[T_VF] = window ? sizes[T_VBAR] : 1;
    sizes[T_NF] = window ? hc * a->dh : 1;
}

static int
time_ways(clf_context *ctx, const char *bucket, struct timing *t, int *variant)
{
    cl_mem *const slot[T_COUNT] = {
        &t->st.q, &t->st.kbar, &t->st.vbar, &t->st.kt, &t->st.s,
        &t->st.o, &t->st.pk,   &t->st.pv,   &t->st.vf, &t->st.nf};
    size_t sizes[T_COUNT];
    double ms[CLF_MAX_CANDIDATES] = {0}, got[CLF_MAX_CANDIDATES] = {0};
    int rc = 0, best = -1, i;

    timing_sizes(t, sizes);
    for (i = 0; i < T_COUNT && rc == 0; i++)
        *slot[i] = t->m[i] =
            clf__timing_buffer(ctx, sizes[i], (unsigned)i, &rc);
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
 * is the longest under the cap with n's remainder mod 16, so the GEMMs fit
 * the blocked kernel (n a multiple of 16) where the forward's do and not
 * elsewhere (full mode's cut to 1448 once sent the GEMM path's score GEMM
 * to CLBlast in the timing alone, bench/RESULTS.md section 20). */
size_t
clf__ways_timing_rows(size_t n, size_t heads, int full)
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

/* The steps the candidates are timed on: one sequence of
 * clf__ways_timing_rows in one pass, unmasked, unmarked; the ways that
 * apply to the forward's shape. */
static void
timing_steps(clf_context *ctx, const struct clf__steps *st, struct timing *t)
{
    struct clf__flash_shape *sh = &t->st.sh;
    int v;

    memset(t, 0, sizeof *t);
    *sh = st->sh;
    sh->at.batch = 1;
    sh->at.n = clf__ways_timing_rows(st->sh.at.n, sh->at.heads, sh->full);
    if (sh->full)
        sh->at.L = sh->at.n;
    t->st.ld = sh->at.L + sh->block;
    t->st.seqs = 1;
    t->st.chunk = sh->at.n;
    t->st.fusable = st->fusable;
    t->st.ways = st->ways;
    for (v = 0; v < WAY_COUNT; v++)
        if (ways[v].applies(ctx, st))
            t->way[t->count++] = v;
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

/* The way the tuner or a test pins for every forward of a context. */
CLF_FEATURE_INT(clf__ways_pinned, clf__ways_pin)

/* The kind of choice "attend": the rows of the table, by enum
 * clf__attend_variant - 1, listed third. */
static const char *const attend_names[] = {"gemm", "fused", "flash", "flashwg"};
static const char *const attend_labels[] = {"attend"};
static const struct clf__choice_kind attend_kind = {
    "attend", attend_names, 4, attend_labels, 1, 2, 1};
CLF_CHOICE_KIND(clf__ways_kind, attend_kind)

int
clf__ways_resolve(clf_context *ctx, const struct clf__steps *st, int *variant)
{
    struct timing t;
    char bucket[CLF_BUCKET_MAX];
    int found, best = 0, rc;

    clf__lock(ctx);
    /* Pinned (by the tuner, or tests) under the lock like the rest. */
    if ((*variant = clf__ways_pinned(ctx)) != CLF_ATTEND_UNDECIDED) {
        rc = 0;
    } else {
        bucket_of(&st->sh, bucket, sizeof bucket);
        found = clf__choice_lookup(ctx, CLF_KIND_ATTEND, bucket, &best);
        if (found == 1)
            *variant = CLF_ATTEND_GEMM + best;
        if (found == 0) {
            timing_steps(ctx, st, &t);
            rc = time_ways(ctx, bucket, &t, variant);
            clf__choice_release(ctx);
        } else
            rc = found;
    }
    clf__unlock(ctx);
    return rc < 0 ? rc : 0;
}
