/* The configuration matrix (bench/measure.h): for each configuration
 * (n, k, D, h, B) every requested mode and precision timed on one device
 * into the rows of bench/results.h, with their errors against the
 * reference modes.
 *
 * Timing.  Each timed run is one forward between device buffers followed
 * by clFinish, measured on the host clock (end to end) and split into
 * stages by the library's profiling markers.  The modes of one
 * configuration alternate within each round, so all of them see the same
 * machine load.  The first forward of each fresh layer is timed apart: on
 * a fresh context it includes CLBlast's compile of its GEMM kernels, and
 * every first call includes allocating the layer's workspaces.
 *
 * Each mode runs on its own layer, so that the device memory the layer
 * holds after its forward is that mode's alone.  All layers of one (D, h)
 * get the same W_q, W_k, W_v, W_out and b_out from the host, so the
 * Linformer and full outputs on the same input can be compared. */
#define _POSIX_C_SOURCE 200809L

#include "measure.h"
#include "roofline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The timings of one mode of one configuration while it runs. */
struct slot {
    struct layer l;
    size_t res; /* its row in the report */
    cl_mem y;
    float *out; /* host copy of its output, for the error */
    int active;
    size_t runs;
    size_t unprofiled; /* warm runs whose stage times were all zero */
    double flops, last_s;
    double wall[MAX_REPEAT], dev[MAX_REPEAT];
    double stage[CLF_STAGE_COUNT][MAX_REPEAT];
};

static clf_bench_result *
row(struct run *run, size_t i)
{
    return &run->rep->results[i];
}

/* Computes the reference output for mode ref in precision prec when it is
 * not among the timed rows: one forward, untimed.  Returns 0 and fills out,
 * 1 when the time budget has no room for it, or a library status. */
static int
reference_output(struct run *run, clf_context *ctx, const struct config *c,
                 const struct weights *w, clf_bench_mode ref,
                 clf_precision prec, cl_mem x, float *out)
{
    struct layer l;
    cl_mem y;
    double secs, flops = NAN;
    size_t count = c->B * c->n * c->D;
    int rc;

    if ((rc = clf_bench_layer_make_p(&l, ctx, ref, c->n, c->k, c->h, w,
                                     CLF_BENCH_INIT_LUCIDRAINS, run->o->seed,
                                     prec, CLF_COMPRESS_LINEAR)) != 0)
        return rc;
    clf_attention_flops_ex(l.att, clf_bench_layer_lib_mode(&l), c->B, c->n,
                           &l.fo, &flops);
    if (!clf_bench_fits(run, clf_bench_estimate_s(
                                 run, clf_bench_layer_lib_mode(&l), flops))) {
        clf_bench_layer_destroy(&l);
        return 1;
    }
    clf_bench_progress(run, "  %s%s reference for the error",
                       clf_bench_mode_name(ref),
                       prec == CLF_PRECISION_HALF ? " (half)" : "");
    y = clf_bench_make_buffer(ctx, count, NULL, &rc);
    if (y != NULL) {
        rc = clf_bench_timed_forward(ctx, &l, x, y, c->B, c->n, &secs);
        if (rc == 0)
            rc = clf_bench_read_buffer(ctx, y, out, count);
        clReleaseMemObject(y);
    }
    clf_bench_layer_destroy(&l);
    return rc;
}

/* One configuration while it runs: its modes' slots and the shared input. */
struct cfgrun {
    struct run *run;
    clf_context *ctx;
    const struct config *c;
    const struct weights *w;
    struct slot *slots;
    size_t ns, count;
    cl_mem x;
    char tag[96];
};

/* Appends a row for each requested mode and precision; returns 0, or -1
 * when out of memory. */
static int
add_rows(struct cfgrun *cr)
{
    const struct config *c = cr->c;
    int m, p;

    for (m = 0; m < 2 * CLF_BENCH_MODE_COUNT; m++) {
        clf_bench_result *r;
        struct slot *sl = &cr->slots[cr->ns];
        p = m % 2;
        if (!cr->run->o->modes[m / 2] || !cr->run->o->precisions[p])
            continue;
        r = clf_bench_report_add_result(cr->run->rep);
        if (r == NULL)
            return -1;
        sl->res = cr->run->rep->nresults - 1;
        sl->l.mode = (clf_bench_mode)(m / 2);
        sl->l.precision = (clf_precision)p;
        sl->l.compression =
            m / 2 == CLF_BENCH_FULL || m / 2 == CLF_BENCH_CAUSAL_FULL
                ? CLF_COMPRESS_LINEAR
                : cr->run->o->compression;
        r->compression = sl->l.compression;
        r->device = c->dev;
        r->mode = (clf_bench_mode)(m / 2);
        r->precision = (clf_precision)p;
        r->n = c->n;
        r->k_requested = c->k;
        r->d_model = c->D;
        r->heads = c->h;
        r->batch = c->B;
        r->io_bytes = 2.0 * (double)cr->count * sizeof(float);
        cr->ns++;
    }
    return 0;
}

/* The input buffer, the same for every mode. */
static int
make_input(struct cfgrun *cr)
{
    float *hx = malloc(cr->count * sizeof *hx);
    int rc = 0;

    if (hx == NULL)
        return CLF_ENO_MEMORY;
    clf_bench_fill_uniform(
        hx, cr->count, clf_bench_mix_seed(cr->run->o->seed, 1000 + cr->c->n),
        1.0);
    cr->x = clf_bench_make_buffer(cr->ctx, cr->count, hx, &rc);
    free(hx);
    return rc;
}

/* Each mode's layer, output buffer, FLOP count and its split by stage. */
static void
make_layers(struct cfgrun *cr, int rc)
{
    const struct config *c = cr->c;
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        struct slot *sl = &cr->slots[s];
        clf_bench_result *r = row(cr->run, sl->res);
        clf_bench_shape sh;
        if (rc != 0) {
            clf_bench_fail_row(cr->run, &r->status, r->note, sizeof r->note,
                               "input", rc);
            continue;
        }
        rc = clf_bench_layer_make_p(&sl->l, cr->ctx, sl->l.mode, c->n, c->k,
                                    c->h, cr->w, CLF_BENCH_INIT_LUCIDRAINS,
                                    cr->run->o->seed, sl->l.precision,
                                    sl->l.compression);
        if (rc == 0)
            rc = clf_attention_flops_ex(sl->l.att,
                                        clf_bench_layer_lib_mode(&sl->l), c->B,
                                        c->n, &sl->l.fo, &sl->flops);
        if (rc == 0)
            sl->y = clf_bench_make_buffer(cr->ctx, cr->count, NULL, &rc);
        if (rc != 0) {
            clf_bench_fail_row(cr->run, &r->status, r->note, sizeof r->note,
                               "layer", rc);
            clf_bench_layer_destroy(&sl->l);
            rc = 0;
            continue;
        }
        r->k = sl->l.k;
        r->causal_block = sl->l.block;
        r->flops = sl->flops;
        sh.mode = sl->l.mode;
        sh.batch = c->B;
        sh.n = c->n;
        sh.d_model = c->D;
        sh.heads = c->h;
        sh.k = sl->l.k;
        sh.causal_block = sl->l.block;
        clf_bench_flops_model(&sh, r->stage_flops);
        sl->active = 1;
    }
}

/* Nothing starts that the budget cannot hold: a first call and one warm
 * run of every mode. */
static void
check_budget(struct cfgrun *cr)
{
    double est = 0.0;
    size_t s;

    for (s = 0; s < cr->ns; s++)
        if (cr->slots[s].active)
            est += 2.0 * clf_bench_estimate_s(
                             cr->run, clf_bench_layer_lib_mode(&cr->slots[s].l),
                             cr->slots[s].flops);
    if (clf_bench_fits(cr->run, est))
        return;
    for (s = 0; s < cr->ns; s++) {
        clf_bench_result *r = row(cr->run, cr->slots[s].res);
        if (!cr->slots[s].active)
            continue;
        r->status = CLF_BENCH_OVER_BUDGET;
        clf_bench_set_note(
            r->note, sizeof r->note,
            "not run: about %.1f s needed, the time budget is spent", est);
        cr->slots[s].active = 0;
    }
    clf_bench_progress(cr->run, "%s: skipped, over the time budget", cr->tag);
}

static void
first_calls(struct cfgrun *cr)
{
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        struct slot *sl = &cr->slots[s];
        clf_bench_result *r = row(cr->run, sl->res);
        size_t bytes;
        double secs;
        int rc;
        if (!sl->active)
            continue;
        clf_bench_progress(cr->run, "%s: %s first call", cr->tag,
                           clf_bench_mode_name(sl->l.mode));
        rc = clf_bench_timed_forward(cr->ctx, &sl->l, cr->x, sl->y, cr->c->B,
                                     cr->c->n, &secs);
        if (rc != 0) {
            clf_bench_fail_row(cr->run, &r->status, r->note, sizeof r->note,
                               "forward", rc);
            sl->active = 0;
            /* free the space for the other modes */
            clf_bench_layer_destroy(&sl->l);
            continue;
        }
        r->first_call_s = secs;
        sl->last_s = secs;
        if (clf_attention_device_bytes(sl->l.att, &bytes) == 0)
            r->device_bytes = (double)bytes;
    }
}

/* The expected seconds of one warm round; 0 when no mode is active. */
static double
round_estimate(const struct cfgrun *cr, int *active)
{
    double round = 0.0;
    size_t s;

    *active = 0;
    for (s = 0; s < cr->ns; s++)
        if (cr->slots[s].active) {
            double e = clf_bench_estimate_s(
                cr->run, clf_bench_layer_lib_mode(&cr->slots[s].l),
                cr->slots[s].flops);
            round += e > 0.0 ? e : cr->slots[s].last_s;
            (*active)++;
        }
    return round;
}

/* Notes on the active rows that the budget stopped them after i rounds. */
static void
stop_rounds(struct cfgrun *cr, size_t i)
{
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        clf_bench_result *r = row(cr->run, cr->slots[s].res);
        if (!cr->slots[s].active)
            continue;
        if (i == 0) {
            r->status = CLF_BENCH_OVER_BUDGET;
            clf_bench_set_note(r->note, sizeof r->note,
                               "first call only: the time budget is spent");
        } else {
            clf_bench_set_note(r->note, sizeof r->note,
                               "%zu of %zu warm runs: the time budget is spent",
                               i, cr->run->o->repeat);
        }
    }
    clf_bench_progress(
        cr->run, "%s: stopping after %zu warm runs (time budget)", cr->tag, i);
}

int
clf_bench_stage_sample(double st[CLF_STAGE_COUNT], double *sum)
{
    double total = 0.0;
    int g;

    for (g = 0; g < CLF_STAGE_COUNT; g++)
        total += st[g];
    if (total > 0.0) {
        *sum = total;
        return 1;
    }
    for (g = 0; g < CLF_STAGE_COUNT; g++)
        st[g] = NAN;
    *sum = NAN;
    return 0;
}

/* One warm forward of the slot, with its stage times. */
static void
warm_run(struct cfgrun *cr, struct slot *sl)
{
    clf_bench_result *r = row(cr->run, sl->res);
    double secs, st[CLF_STAGE_COUNT], sum;
    int g, rc;

    rc = clf_bench_timed_forward(cr->ctx, &sl->l, cr->x, sl->y, cr->c->B,
                                 cr->c->n, &secs);
    if (rc == 0)
        rc = clf_attention_stage_times(sl->l.att, st);
    if (rc != 0) {
        clf_bench_fail_row(cr->run, &r->status, r->note, sizeof r->note,
                           "forward", rc);
        sl->active = 0;
        return;
    }
    if (!clf_bench_stage_sample(st, &sum))
        sl->unprofiled++;
    sl->wall[sl->runs] = secs;
    for (g = 0; g < CLF_STAGE_COUNT; g++)
        sl->stage[g][sl->runs] = st[g];
    sl->dev[sl->runs] = sum;
    sl->runs++;
    sl->last_s = secs;
    clf_bench_note_rate(cr->run, clf_bench_layer_lib_mode(&sl->l), sl->flops,
                        secs);
}

/* Whether every active mode's median has settled (roofline.h: at least
 * CLF_BENCH_MIN_RUNS runs, or --repeat when fewer, and the median moved by
 * at most CLF_BENCH_SETTLE_TOL over the last CLF_BENCH_SETTLE_LAG runs). */
static int
all_settled(const struct cfgrun *cr)
{
    size_t s, floor = cr->run->o->repeat < CLF_BENCH_MIN_RUNS
                          ? cr->run->o->repeat
                          : CLF_BENCH_MIN_RUNS;

    for (s = 0; s < cr->ns; s++)
        if (cr->slots[s].active &&
            !clf_bench_median_settled(cr->slots[s].wall, cr->slots[s].runs,
                                      floor))
            return 0;
    return 1;
}

/* Warm rounds, the modes alternating, until every median has settled,
 * --repeat rounds ran or the budget is spent. */
static void
warm_rounds(struct cfgrun *cr)
{
    size_t i, s;
    int active;

    for (i = 0; i < cr->run->o->repeat; i++) {
        double round = round_estimate(cr, &active);
        if (active == 0 || (i > 0 && all_settled(cr)))
            break;
        if (!clf_bench_fits(cr->run, round)) {
            stop_rounds(cr, i);
            break;
        }
        clf_bench_progress(cr->run, "%s: warm round %zu/%zu", cr->tag, i + 1,
                           cr->run->o->repeat);
        for (s = 0; s < cr->ns; s++)
            if (cr->slots[s].active)
                warm_run(cr, &cr->slots[s]);
    }
}

/* Outputs and statistics of the rows that ran. */
static void
collect(struct cfgrun *cr)
{
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        struct slot *sl = &cr->slots[s];
        clf_bench_result *r = row(cr->run, sl->res);
        int g;
        if (sl->runs == 0 || r->status != CLF_BENCH_OK)
            continue;
        sl->out = malloc(cr->count * sizeof *sl->out);
        if (sl->out != NULL &&
            clf_bench_read_buffer(cr->ctx, sl->y, sl->out, cr->count) != 0) {
            free(sl->out);
            sl->out = NULL;
        }
        r->wall = clf_bench_stats_of(sl->wall, sl->runs);
        r->device_s = clf_bench_stats_of(sl->dev, sl->runs);
        for (g = 0; g < CLF_STAGE_COUNT; g++)
            r->stage[g] = clf_bench_stats_of(sl->stage[g], sl->runs);
        if (r->stage[CLF_STAGE_FUSED].median > 0.0)
            clf_bench_fused_split(r->stage_flops);
        r->gflops = clf_bench_gflops(r->flops, r->wall.median);
        clf_bench_result_bytes(r);
        clf_bench_result_roofline(r, &cr->run->rep->devices[r->device]);
        if (sl->unprofiled > 0)
            clf_bench_set_note(
                r->note, sizeof r->note,
                "no stage times: the driver's profiling timestamps "
                "are zero, so only host-clock times of whole "
                "forwards are shown");
    }
}

/* Reports each row's outcome on stderr and frees the configuration. */
static void
release(struct cfgrun *cr)
{
    size_t s;

    for (s = 0; s < cr->ns; s++) {
        clf_bench_result *r = row(cr->run, cr->slots[s].res);
        if (r->status == CLF_BENCH_OK && cr->slots[s].runs > 0)
            clf_bench_progress(
                cr->run, "%s: %-11s median %8.1f ms (%zu warm run%s)", cr->tag,
                clf_bench_mode_name(r->mode), r->wall.median * 1e3,
                r->wall.runs, r->wall.runs == 1 ? "" : "s");
        else if (r->status != CLF_BENCH_OK)
            clf_bench_progress(cr->run, "%s: %-11s %s", cr->tag,
                               clf_bench_mode_name(r->mode), r->note);
        free(cr->slots[s].out);
        if (cr->slots[s].y != NULL)
            clReleaseMemObject(cr->slots[s].y);
        clf_bench_layer_destroy(&cr->slots[s].l);
    }
    if (cr->x != NULL)
        clReleaseMemObject(cr->x);
    free(cr->slots);
}

/* Why the reference of a row's error could not be had (rc, as
 * reference_output returns it), on the row's note. */
static void
note_no_reference(clf_bench_result *r, clf_bench_mode ref, int rc)
{
    const char *name = clf_bench_mode_name(ref);

    if (rc == 1)
        clf_bench_set_note(r->note, sizeof r->note,
                           "no error: no time left for the %s reference", name);
    else if (rc == CLF_ETOO_LARGE)
        clf_bench_set_note(r->note, sizeof r->note,
                           "no error: the %s reference is too large", name);
    else
        clf_bench_set_note(r->note, sizeof r->note,
                           "no error: the %s reference failed: %s", name,
                           clf_last_error());
}

/* The output that slot sl's error is taken against: the row of mode ref
 * in the same precision, else (no such row) one untimed forward into
 * *own, which the caller frees.  NULL, with a note on sl's row, when there
 * is none. */
static const float *
reference_of(struct cfgrun *cr, const struct slot *sl, clf_bench_mode ref,
             float **own)
{
    clf_bench_result *r = row(cr->run, sl->res);
    const float *yref = NULL;
    int listed = 0, rc;
    size_t j;

    for (j = 0; j < cr->ns; j++)
        if (cr->slots[j].l.mode == ref &&
            cr->slots[j].l.precision == sl->l.precision) {
            listed = 1;
            if (cr->slots[j].out != NULL)
                yref = cr->slots[j].out;
        }
    if (yref != NULL)
        return yref;
    if (listed) {
        clf_bench_set_note(r->note, sizeof r->note,
                           "no error: the %s reference did not run",
                           clf_bench_mode_name(ref));
        return NULL;
    }
    *own = malloc(cr->count * sizeof **own);
    if (*own == NULL) {
        clf_bench_set_note(r->note, sizeof r->note, "no error: out of memory");
        return NULL;
    }
    rc = reference_output(cr->run, cr->ctx, cr->c, cr->w, ref, sl->l.precision,
                          cr->x, *own);
    if (rc != 0) {
        note_no_reference(r, ref, rc);
        return NULL;
    }
    return *own;
}

/* Each row's error against its reference mode (linformer against full,
 * causal against causal-full) in the same precision. */
static void
finish_errors(struct cfgrun *cr)
{
    size_t i;

    for (i = 0; i < cr->ns; i++) {
        struct slot *sl = &cr->slots[i];
        clf_bench_mode ref = clf_bench_mode_reference(sl->l.mode);
        const float *yref;
        float *own = NULL;

        if (ref == sl->l.mode || sl->out == NULL)
            continue;
        yref = reference_of(cr, sl, ref, &own);
        if (yref != NULL)
            row(cr->run, sl->res)->rel_error =
                clf_bench_rel_error(sl->out, yref, cr->count);
        free(own);
    }
}

/* Half rows: the error against the same mode with float32 weights, from
 * the configuration's float row, else from one untimed float forward. */
static void
fp32_errors(struct cfgrun *cr)
{
    size_t i, j;

    for (i = 0; i < cr->ns; i++) {
        struct slot *sl = &cr->slots[i];
        clf_bench_result *r = row(cr->run, sl->res);
        const float *yf = NULL;
        float *own = NULL;
        int rc = 0;
        if (sl->l.precision != CLF_PRECISION_HALF || sl->out == NULL)
            continue;
        for (j = 0; j < cr->ns; j++)
            if (cr->slots[j].l.mode == sl->l.mode &&
                cr->slots[j].l.precision == CLF_PRECISION_FLOAT)
                yf = cr->slots[j].out;
        if (yf == NULL) {
            own = malloc(cr->count * sizeof *own);
            rc = own == NULL ? CLF_ENO_MEMORY
                             : reference_output(cr->run, cr->ctx, cr->c, cr->w,
                                                sl->l.mode, CLF_PRECISION_FLOAT,
                                                cr->x, own);
            yf = own;
        }
        if (rc == 0)
            r->fp32_error = clf_bench_rel_error(sl->out, yf, cr->count);
        else
            clf_bench_set_note(r->note, sizeof r->note, "no fp32 error: %s",
                               rc == 1 ? "no time left for the float32 forward"
                                       : clf_error_message(rc));
        free(own);
    }
}

static void
run_config(struct run *run, clf_context *ctx, const struct config *c,
           const struct weights *w)
{
    struct cfgrun cr;

    memset(&cr, 0, sizeof cr);
    cr.run = run;
    cr.ctx = ctx;
    cr.c = c;
    cr.w = w;
    cr.count = c->B * c->n * c->D;
    snprintf(cr.tag, sizeof cr.tag, "n=%zu k=%zu D=%zu h=%zu B=%zu", c->n, c->k,
             c->D, c->h, c->B);
    cr.slots = calloc(2 * CLF_BENCH_MODE_COUNT, sizeof *cr.slots);
    if (cr.slots == NULL || add_rows(&cr) != 0) {
        fprintf(stderr, "%s: out of host memory\n", run->o->prog);
        run->failures++;
        if (cr.slots == NULL)
            return;
    }
    make_layers(&cr, make_input(&cr));
    check_budget(&cr);
    first_calls(&cr);
    warm_rounds(&cr);
    collect(&cr);
    finish_errors(&cr);
    fp32_errors(&cr);
    release(&cr);
}

/* The matrix of one (D, h, B): every k and n. */
void
clf_bench_run_matrix(struct run *run, clf_context *ctx, struct config *c,
                     const struct weights *w)
{
    const struct clf_bench_options *o = run->o;
    size_t ik, in;

    for (ik = 0; ik < o->nk; ik++)
        for (in = 0; in < o->nn; in++) {
            c->n = o->n[in];
            c->k = o->k[ik];
            run_config(run, ctx, c, w);
        }
}
