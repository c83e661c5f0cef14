/* bench_layer --gemm: the layer's GEMM stages with the `gemm` kernel
 * choice forced to each named kernel in turn (clblast, blocked, tiled,
 * split),
 * side by side: every round runs one forward per kernel, so each sees the
 * same machine load, and the table gives each stage's median time as
 * GFLOP/s.  Attention over the slots is forced to its GEMM path, so that
 * the scores and the weighted sum are GEMMs too.  Public API only. */
#include "gemm_ways.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WAYS 4
#define MAX_ROUNDS 101

static const clf_stage shown[] = {CLF_STAGE_PROJECTION, CLF_STAGE_COMPRESSION,
                                  CLF_STAGE_SCORES, CLF_STAGE_WEIGHTED_SUM,
                                  CLF_STAGE_OUTPUT};
#define NSHOWN (sizeof shown / sizeof shown[0])

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double
median_of(double *t, size_t n)
{
    qsort(t, n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Splits the comma list into at most MAX_WAYS names (list is modified). */
int
gemm_ways_parse(char *list, const char **ways, size_t *count)
{
    char *tok, *save = NULL;

    *count = 0;
    for (tok = strtok_r(list, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (*count == MAX_WAYS) {
            fprintf(stderr, "bench_layer: --gemm takes at most %d kernels\n",
                    MAX_WAYS);
            return 2;
        }
        ways[(*count)++] = tok;
    }
    if (*count == 0) {
        fprintf(stderr, "bench_layer: --gemm is empty\n");
        return 2;
    }
    return 0;
}

/* One forward with `way` forced; its stage times into st. */
static int
one(clf_context *ctx, clf_attention *att, const char *way,
    const struct gemm_ways_run *r, double st[CLF_STAGE_COUNT])
{
    int rc;

    if ((rc = clf_context_force_kernel(ctx, "gemm", way)) != 0 ||
        (rc = clf_attention_forward_cl(att, r->x, 0, r->y, 0, r->batch,
                                       r->n)) != 0 ||
        (rc = clf_attention_stage_times(att, st)) != 0)
        return rc;
    return 0;
}

/* Rounds (a warm-up, then `repeat`) of one forward per way, in turn;
 * t[w][s][round] the times of way w's shown stage s, total[w][round] their
 * sum over all stages. */
static int
rounds(clf_context *ctx, clf_attention *att, const struct gemm_ways_run *r,
       double t[MAX_WAYS][NSHOWN][MAX_ROUNDS], double total[][MAX_ROUNDS])
{
    double st[CLF_STAGE_COUNT];
    size_t round, w, s;
    int rc = 0, i;

    for (round = 0; round <= r->repeat && rc == 0; round++)
        for (w = 0; w < r->nways && rc == 0; w++) {
            if ((rc = one(ctx, att, r->ways[w], r, st)) != 0 || round == 0)
                continue;
            total[w][round - 1] = 0.0;
            for (i = 0; i < CLF_STAGE_COUNT; i++)
                total[w][round - 1] += st[i];
            for (s = 0; s < NSHOWN; s++)
                t[w][s][round - 1] = st[shown[s]];
        }
    return rc;
}

static void
print_table(const struct gemm_ways_run *r,
            double t[MAX_WAYS][NSHOWN][MAX_ROUNDS], double total[][MAX_ROUNDS],
            const double *flops)
{
    size_t w, s;

    if (r->print_header) {
        printf("%7s  %-8s", "n", "gemm");
        for (s = 0; s < NSHOWN; s++)
            printf("  %16s", clf_stage_name(shown[s]));
        printf("  %10s\n", "forward ms");
    }
    for (w = 0; w < r->nways; w++) {
        printf("%7zu  %-8s", r->n, r->ways[w]);
        for (s = 0; s < NSHOWN; s++) {
            double m = median_of(t[w][s], r->repeat);
            char cell[40];
            snprintf(cell, sizeof cell, "%.1f (%.1f)", m * 1e3,
                     m > 0.0 ? flops[shown[s]] * 1e-9 / m : 0.0);
            printf("  %16s", cell);
        }
        printf("  %10.1f\n", median_of(total[w], r->repeat) * 1e3);
    }
}

int
gemm_ways_measure(clf_context *ctx, clf_attention *att,
                  const clf_attention_desc *d, const struct gemm_ways_run *r)
{
    static double t[MAX_WAYS][NSHOWN][MAX_ROUNDS];
    static double total[MAX_WAYS][MAX_ROUNDS];
    double flops[CLF_STAGE_COUNT], all;
    int rc;

    if (r->nways > MAX_WAYS || r->repeat == 0 || r->repeat >= MAX_ROUNDS)
        return CLF_EINVALID_ARGUMENT;
    if ((rc = clf_attention_desc_flops(d, CLF_MODE_LINFORMER, r->batch, r->n, 0,
                                       flops, &all)) != 0 ||
        (rc = clf_attention_set_mode(att, CLF_MODE_LINFORMER)) != 0 ||
        (rc = clf_context_force_kernel(ctx, "attend", "gemm")) != 0)
        return rc;
    rc = rounds(ctx, att, r, t, total);
    if (rc == 0)
        print_table(r, t, total, flops);
    clf_context_force_kernel(ctx, "gemm", NULL);
    clf_context_force_kernel(ctx, "attend", NULL);
    return rc;
}
