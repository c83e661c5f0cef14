/* The accuracy study (bench/measure.h): at each length, Linformer's speed
 * against full attention over k, its error under the lucidrains and the
 * fairseq inits of E and F, and the decisive token, timed alternating
 * with full attention on the same weights and input. */
#define _POSIX_C_SOURCE 200809L

#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decisive-token case through the device pipeline.  The input has an
 * indicator channel (1 at position j, 0 elsewhere) and a constant channel;
 * W_q turns the constant into a query of size alpha * sqrt(d_h) and W_k
 * copies the indicator into the key, so every query scores key j at alpha
 * and every other key at 0; W_v copies the indicator into the value and
 * W_out reads it back.  The output at any query is then the attention mass
 * that reaches position j: P[i, j] in full mode, sum_s P[i, s] F[s, j]
 * under Linformer.  Each sequence of the batch has its own j. */
#define DEC_D 8

/* The decisive-token case's host arrays and layer. */
struct decisive {
    size_t T, n, k;
    double alpha, diff;
    float *wq, *unit, *e, *f, *x, *y;
    clf_attention *att;
};

static void
decisive_free(struct decisive *dc)
{
    clf_attention_destroy(dc->att);
    free(dc->wq);
    free(dc->unit);
    free(dc->e);
    free(dc->f);
    free(dc->x);
    free(dc->y);
}

/* W_q, the unit weights, E and F under init, and the T input sequences
 * with their decisive positions. */
static int
decisive_inputs(struct decisive *dc, unsigned long long seed,
                clf_bench_init init)
{
    const size_t D = DEC_D, T = dc->T, n = dc->n, k = dc->k;
    size_t b, t;

    dc->wq = calloc(D * D, sizeof *dc->wq);
    dc->unit = calloc(D * D, sizeof *dc->unit);
    dc->e = malloc(k * n * sizeof *dc->e);
    dc->f = malloc(k * n * sizeof *dc->f);
    dc->x = calloc(T * n * D, sizeof *dc->x);
    dc->y = malloc(T * n * D * sizeof *dc->y);
    if (!dc->wq || !dc->unit || !dc->e || !dc->f || !dc->x || !dc->y)
        return CLF_ENO_MEMORY;
    dc->wq[0 * D + 1] = (float)(dc->alpha * sqrt((double)D));
    dc->unit[0] = 1.0f;
    clf_bench_fill_uniform(dc->e, k * n, clf_bench_mix_seed(seed, 1),
                           clf_bench_init_bound(init, k, n));
    clf_bench_fill_uniform(dc->f, k * n, clf_bench_mix_seed(seed, 2),
                           clf_bench_init_bound(init, k, n));
    for (b = 0; b < T; b++) {
        size_t j = (2 * b + 1) * n / (2 * T);
        for (t = 0; t < n; t++) {
            dc->x[(b * n + t) * D + 0] = t == j ? 1.0f : 0.0f;
            dc->x[(b * n + t) * D + 1] = 1.0f;
        }
    }
    return 0;
}

/* The layer of the case, and its Linformer forward of every sequence. */
static int
decisive_forward(struct decisive *dc, clf_context *ctx)
{
    const size_t D = DEC_D, kn = dc->k * dc->n;
    clf_attention_desc d;
    int rc;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = 1;
    d.max_seq_len = dc->n;
    d.k = dc->k;
    if ((rc = clf_attention_create(&dc->att, ctx, &d)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_WEIGHT_Q, dc->wq, D * D)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_WEIGHT_K, dc->unit,
                                       D * D)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_WEIGHT_V, dc->unit,
                                       D * D)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_WEIGHT_OUT, dc->unit,
                                       D * D)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_PROJ_E, dc->e, kn)) ||
        (rc = clf_attention_set_weight(dc->att, CLF_PROJ_F, dc->f, kn)))
        return rc;
    return clf_attention_forward(dc->att, dc->x, dc->T, dc->n, dc->y);
}

/* The weight that reached each decisive position, against the host's. */
static void
decisive_collect(struct decisive *dc, clf_bench_weight *wt)
{
    const size_t D = DEC_D, n = dc->n;
    double sum = 0.0, sum_abs = 0.0, max_abs = 0.0;
    size_t b;

    for (b = 0; b < dc->T; b++) {
        size_t j = (2 * b + 1) * n / (2 * dc->T);
        double got = dc->y[(b * n) * D];
        double last = dc->y[(b * n + n - 1) * D];
        double want =
            clf_bench_decisive_weight(dc->e, dc->f, dc->k, n, j, dc->alpha);
        sum += got;
        sum_abs += fabs(got);
        if (fabs(got) > max_abs)
            max_abs = fabs(got);
        /* every query of the sequence sees the same scores */
        dc->diff = fmax(dc->diff, fmax(fabs(got - want), fabs(last - want)));
    }
    wt->mean = sum / (double)dc->T;
    wt->mean_abs = sum_abs / (double)dc->T;
    wt->max_abs = max_abs;
}

/* Full attention on the first sequence: P[i, j] for every query. */
static int
decisive_full(struct decisive *dc, clf_bench_accuracy *a)
{
    double want = clf_bench_decisive_full(dc->n, dc->alpha);
    int rc;

    if ((rc = clf_attention_set_mode(dc->att, CLF_MODE_FULL)) != 0)
        return rc;
    rc = clf_attention_forward(dc->att, dc->x, 1, dc->n, dc->y);
    if (rc == CLF_ETOO_LARGE) {
        a->full_weight = want;
        clf_bench_set_note(a->note, sizeof a->note,
                           "full-mode decisive check too large: host value");
        return 0;
    }
    if (rc != 0)
        return rc;
    a->full_weight = dc->y[0];
    dc->diff = fmax(dc->diff, fmax(fabs(dc->y[0] - want),
                                   fabs(dc->y[(dc->n - 1) * DEC_D] - want)));
    return 0;
}

static int
run_decisive(struct run *run, clf_context *ctx, size_t n, size_t k,
             clf_bench_init init, clf_bench_accuracy *a)
{
    /* The same draws under both inits (both are uniform), so that they
     * differ in scale only. */
    unsigned long long seed = run->o->seed * 31 + 17;
    struct decisive dc;
    int rc;

    memset(&dc, 0, sizeof dc);
    dc.T = a->trials;
    dc.n = n;
    dc.k = k;
    dc.alpha = clf_bench_decisive_alpha(n, 0.99);
    if ((rc = decisive_inputs(&dc, seed, init)) != 0 ||
        (rc = decisive_forward(&dc, ctx)) != 0)
        goto done;
    decisive_collect(&dc, &a->weight[init]);
    if (init == CLF_BENCH_INIT_LUCIDRAINS && (rc = decisive_full(&dc, a)) != 0)
        goto done;
    if (isnan(a->host_max_diff) || dc.diff > a->host_max_diff)
        a->host_max_diff = dc.diff;
    /* Float accumulation of the full-mode softmax denominator, one dominant
     * term plus n - 1 tiny ones each rounded the same way, leaves about
     * 1e-4 at n = 2048; a wrong weight or stage would be off by far more. */
    if (dc.diff > 1e-3) {
        fprintf(stderr,
                "%s: warning: decisive token, n=%zu k=%zu %s: device and "
                "host differ by %.3g\n",
                run->o->prog, n, k, clf_bench_init_name(init), dc.diff);
        clf_bench_set_note(a->note, sizeof a->note,
                           "decisive token: device and host differ by %.3g",
                           dc.diff);
    }
done:
    decisive_free(&dc);
    return rc;
}

/* Times warm forwards of layers a and b (b may be NULL), alternating so
 * that both see the same machine load: a first call of a, then up to R
 * rounds of (a, b) while the budget allows.  a's output stays in ya.
 * Returns 0 (stats filled, possibly with fewer runs) or a status. */
static int
time_alternating(struct run *run, clf_context *ctx, struct layer *a,
                 struct layer *b, cl_mem x, cl_mem ya, cl_mem yb, size_t B,
                 size_t n, clf_bench_stats *sa, clf_bench_stats *sb)
{
    double ta[MAX_REPEAT], tb[MAX_REPEAT], secs, fa = NAN, fb = NAN;
    double last_a, last_b = 0.0;
    size_t i, runs = 0;
    int rc;

    clf_attention_flops_ex(a->att, clf_bench_layer_lib_mode(a), B, n, &a->fo,
                           &fa);
    if (b != NULL)
        clf_attention_flops_ex(b->att, clf_bench_layer_lib_mode(b), B, n,
                               &b->fo, &fb);
    if ((rc = clf_bench_timed_forward(ctx, a, x, ya, B, n, &last_a)) != 0)
        return rc;
    for (i = 0; i < run->o->repeat; i++) {
        double ea = clf_bench_estimate_s(run, clf_bench_layer_lib_mode(a), fa),
               eb = 0.0;
        if (b != NULL) {
            eb = clf_bench_estimate_s(run, clf_bench_layer_lib_mode(b), fb);
            if (!(eb > 0.0))
                eb = last_b;
        }
        if (!clf_bench_fits(run, (ea > 0.0 ? ea : last_a) + eb))
            break;
        if ((rc = clf_bench_timed_forward(ctx, a, x, ya, B, n, &secs)) != 0)
            return rc;
        ta[runs] = last_a = secs;
        clf_bench_note_rate(run, clf_bench_layer_lib_mode(a), fa, secs);
        if (b != NULL) {
            if ((rc = clf_bench_timed_forward(ctx, b, x, yb, B, n, &secs)) != 0)
                return rc;
            tb[runs] = last_b = secs;
            clf_bench_note_rate(run, clf_bench_layer_lib_mode(b), fb, secs);
        }
        runs++;
    }
    *sa = clf_bench_stats_of(ta, runs);
    if (sb != NULL)
        *sb = clf_bench_stats_of(tb, b != NULL ? runs : 0);
    return 0;
}

/* One length of the accuracy study while it runs. */
struct accrun {
    struct run *run;
    clf_context *ctx;
    const struct weights *w;
    size_t dev, n, D, h, B, count;
    float *hx, *yfull, *ylin;
    cl_mem x, y, yf;
    struct layer full;
    int have_full;
    char full_note[200];
};

/* The input and output buffers. */
static int
acc_buffers(struct accrun *ar)
{
    int rc = 0;

    ar->hx = malloc(ar->count * sizeof *ar->hx);
    ar->yfull = malloc(ar->count * sizeof *ar->yfull);
    ar->ylin = malloc(ar->count * sizeof *ar->ylin);
    if (ar->hx == NULL || ar->yfull == NULL || ar->ylin == NULL)
        return CLF_ENO_MEMORY;
    clf_bench_fill_uniform(ar->hx, ar->count,
                           clf_bench_mix_seed(ar->run->o->seed, 1000 + ar->n),
                           1.0);
    ar->x = clf_bench_make_buffer(ar->ctx, ar->count, ar->hx, &rc);
    if (rc == 0)
        ar->y = clf_bench_make_buffer(ar->ctx, ar->count, NULL, &rc);
    if (rc == 0)
        ar->yf = clf_bench_make_buffer(ar->ctx, ar->count, NULL, &rc);
    return rc;
}

/* Full attention: the reference output, from its first call; its timed
 * runs alternate with each k's Linformer runs. */
static void
acc_full(struct accrun *ar)
{
    double secs;
    int rc;

    clf_bench_progress(ar->run,
                       "accuracy n=%zu D=%zu h=%zu B=%zu: full attention",
                       ar->n, ar->D, ar->h, ar->B);
    rc = clf_bench_layer_make(&ar->full, ar->ctx, CLF_BENCH_FULL, ar->n, 1,
                              ar->h, ar->w, CLF_BENCH_INIT_LUCIDRAINS,
                              ar->run->o->seed);
    if (rc == 0)
        rc = clf_bench_timed_forward(ar->ctx, &ar->full, ar->x, ar->yf, ar->B,
                                     ar->n, &secs);
    if (rc == 0)
        rc = clf_bench_read_buffer(ar->ctx, ar->yf, ar->yfull, ar->count);
    if (rc == 0) {
        ar->have_full = 1;
        return;
    }
    clf_bench_layer_destroy(&ar->full);
    if (rc == CLF_ETOO_LARGE) {
        snprintf(ar->full_note, sizeof ar->full_note,
                 "full attention too large: no error, no speed-up");
    } else {
        snprintf(ar->full_note, sizeof ar->full_note,
                 "full attention failed: %s", clf_last_error());
        ar->run->failures++;
    }
}

/* A new accuracy row for k; NULL when out of memory. */
static clf_bench_accuracy *
acc_add_row(struct accrun *ar, size_t k)
{
    clf_bench_accuracy *a = clf_bench_report_add_accuracy(ar->run->rep);
    size_t trials = ar->run->o->trials;

    if (a == NULL)
        return NULL;
    a->device = ar->dev;
    a->n = ar->n;
    a->k = k;
    a->d_model = ar->D;
    a->heads = ar->h;
    a->batch = ar->B;
    a->trials = trials < ar->n ? trials : ar->n;
    if (ar->full_note[0] != '\0')
        clf_bench_set_note(a->note, sizeof a->note, "%s", ar->full_note);
    return a;
}

/* Whether the budget holds two Linformer forwards and a full one. */
static int
acc_fits(struct accrun *ar, struct layer *l)
{
    double fl = NAN, ff = NAN;

    clf_attention_flops_ex(l->att, CLF_MODE_LINFORMER, ar->B, ar->n, NULL, &fl);
    if (ar->have_full)
        clf_attention_flops_ex(ar->full.att, CLF_MODE_FULL, ar->B, ar->n, NULL,
                               &ff);
    return clf_bench_fits(
        ar->run,
        2.0 * clf_bench_estimate_s(ar->run, CLF_MODE_LINFORMER, fl) +
            (ar->have_full ? clf_bench_estimate_s(ar->run, CLF_MODE_FULL, ff)
                           : 0.0));
}

/* Linformer's output under the layer's E and F, and its error against
 * full attention's. */
static int
acc_error(struct accrun *ar, double *rel_error)
{
    int rc = clf_bench_read_buffer(ar->ctx, ar->y, ar->ylin, ar->count);

    if (rc == 0 && ar->have_full)
        *rel_error = clf_bench_rel_error(ar->ylin, ar->yfull, ar->count);
    return rc;
}

/* Timing and error under the lucidrains init, the error under fairseq's
 * (the same layer with E and F redrawn). */
static int
acc_measure(struct accrun *ar, struct layer *l, clf_bench_accuracy *a)
{
    const struct clf_bench_options *o = ar->run->o;
    int rc;

    rc = time_alternating(ar->run, ar->ctx, l, ar->have_full ? &ar->full : NULL,
                          ar->x, ar->y, ar->yf, ar->B, ar->n, &a->linformer,
                          &a->full);
    if (rc != 0)
        return rc;
    if (a->linformer.runs < o->repeat)
        clf_bench_set_note(a->note, sizeof a->note,
                           "%zu of %zu warm runs: the time budget is spent",
                           a->linformer.runs, o->repeat);
    if ((rc = acc_error(ar, &a->rel_error[CLF_BENCH_INIT_LUCIDRAINS])) != 0 ||
        (rc = clf_bench_set_projections(
             l->att, a->k, ar->n, CLF_BENCH_INIT_FAIRSEQ, o->seed)) != 0 ||
        (rc = clf_attention_forward_cl_ex(l->att, ar->x, 0, ar->y, 0, ar->B,
                                          ar->n, NULL)) != 0)
        return rc;
    return acc_error(ar, &a->rel_error[CLF_BENCH_INIT_FAIRSEQ]);
}

/* One k of the study; returns -1 when out of memory. */
static int
acc_k(struct accrun *ar, size_t k)
{
    struct run *run = ar->run;
    clf_bench_accuracy *a;
    struct layer l;
    int rc, init;

    if (k > ar->n) {
        clf_bench_progress(run, "accuracy n=%zu: k=%zu exceeds n, left out",
                           ar->n, k);
        return 0;
    }
    if ((a = acc_add_row(ar, k)) == NULL)
        return -1;
    rc = clf_bench_layer_make(&l, ar->ctx, CLF_BENCH_LINFORMER, ar->n, k, ar->h,
                              ar->w, CLF_BENCH_INIT_LUCIDRAINS, run->o->seed);
    if (rc != 0) {
        clf_bench_fail_row(run, &a->status, a->note, sizeof a->note, "layer",
                           rc);
        return 0;
    }
    if (!acc_fits(ar, &l)) {
        a->status = CLF_BENCH_OVER_BUDGET;
        clf_bench_set_note(a->note, sizeof a->note,
                           "not run: the time budget is spent");
        clf_bench_layer_destroy(&l);
        clf_bench_progress(
            run, "accuracy n=%zu k=%zu: skipped, over the time budget", ar->n,
            k);
        return 0;
    }
    clf_bench_progress(run, "accuracy n=%zu k=%zu: Linformer%s, decisive token",
                       ar->n, k, ar->have_full ? " and full, alternating" : "");
    rc = acc_measure(ar, &l, a);
    clf_bench_layer_destroy(&l);
    for (init = 0; rc == 0 && init < CLF_BENCH_INIT_COUNT; init++)
        rc = run_decisive(run, ar->ctx, ar->n, k, (clf_bench_init)init, a);
    if (rc != 0)
        clf_bench_fail_row(run, &a->status, a->note, sizeof a->note, "accuracy",
                           rc);
    return 0;
}

static void
acc_free(struct accrun *ar)
{
    clf_bench_layer_destroy(&ar->full);
    if (ar->x != NULL)
        clReleaseMemObject(ar->x);
    if (ar->y != NULL)
        clReleaseMemObject(ar->y);
    if (ar->yf != NULL)
        clReleaseMemObject(ar->yf);
    free(ar->hx);
    free(ar->yfull);
    free(ar->ylin);
}

void
clf_bench_run_accuracy(struct run *run, clf_context *ctx, size_t dev, size_t n,
                       size_t D, size_t h, size_t B, const struct weights *w)
{
    struct accrun ar;
    size_t i;
    int rc;

    memset(&ar, 0, sizeof ar);
    ar.run = run;
    ar.ctx = ctx;
    ar.w = w;
    ar.dev = dev;
    ar.n = n;
    ar.D = D;
    ar.h = h;
    ar.B = B;
    ar.count = B * n * D;
    if ((rc = acc_buffers(&ar)) != 0) {
        fprintf(stderr, "%s: accuracy study n=%zu: %s\n", run->o->prog, n,
                clf_strerror(rc));
        run->failures++;
        acc_free(&ar);
        return;
    }
    acc_full(&ar);
    for (i = 0; i < run->o->acc_nk; i++)
        if (acc_k(&ar, run->o->acc_k[i]) != 0) {
            run->failures++;
            break;
        }
    acc_free(&ar);
}

/* The study's E and F (k x n) and decisive-token inputs (trials x n x 8
 * floats). */
int
clf_bench_check_study(const struct clf_bench_options *o, char *why, size_t len)
{
    size_t in, ik, trials = o->trials > 0 ? o->trials : 1;

    for (in = 0; in < o->acc_nn; in++) {
        size_t n = o->acc_n[in];
        for (ik = 0; ik < o->acc_nk; ik++)
            if (!clf_bench_fits_size(o->acc_k[ik], n, sizeof(float), 1)) {
                snprintf(why, len,
                         "--k %zu x --n %zu floats overflow the address "
                         "space",
                         o->acc_k[ik], n);
                return -1;
            }
        if (!clf_bench_fits_size(trials, n, DEC_D, sizeof(float))) {
            snprintf(why, len,
                     "--trials %zu x --n %zu x %d floats overflow the "
                     "address space",
                     trials, n, DEC_D);
            return -1;
        }
    }
    return 0;
}
