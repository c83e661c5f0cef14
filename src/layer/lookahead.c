/* The look-ahead audit: does anything after position t reach the output at
 * positions <= t? */
#include "layer/layer_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int
layer_forward(void *user, const float *x, size_t seq_len, float *y,
              const clf_forward_opts *opts)
{
    return clf_attention_forward_ex(user, x, 1, seq_len, y, opts);
}

CLF_EXTERN int
clf_attention_check_lookahead(clf_attention *att, const float *x,
                              size_t seq_len, const clf_forward_opts *opts,
                              const size_t *positions, size_t npositions,
                              unsigned long long seed,
                              clf_lookahead_result *result)
{
    clf_attention_desc desc;

    if (att == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "att is NULL");
    clf__attention_desc(att, &desc);
    return clf__lookahead_run(layer_forward, att, desc.d_model, x, seq_len,
                              opts, positions, npositions, seed, result);
}

/* The arguments of an audit, checked; *count the floats of one input. */
static int
check_args(const float *x, size_t D, size_t seq_len, const size_t *positions,
           size_t npositions, const clf_lookahead_result *result, size_t *count)
{
    size_t p;

    if (x == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "x is NULL");
    if (result == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "result is NULL");
    if (positions == NULL && npositions > 0)
        return clf__fail(CLF_ENULL_ARGUMENT, "positions is NULL");
    if (npositions == 0)
        return clf__fail(CLF_EBAD_SIZE, "npositions is 0");
    for (p = 0; p < npositions; p++)
        if (positions[p] >= seq_len)
            return clf__fail(CLF_EBAD_SIZE,
                             "positions[%zu] = %zu is not below seq_len %zu", p,
                             positions[p], seq_len);
    if (clf__mul(seq_len, D, count) || *count > SIZE_MAX / sizeof(float))
        return clf__fail(CLF_ESIZE_OVERFLOW, "seq_len %zu overflows", seq_len);
    return 0;
}

/* Outputs y1 differ from y0 in rows 0..t: the first row that moved and
 * the largest change (NaN counts as the largest). */
static void
record_change(const float *y0, const float *y1, size_t t, size_t D,
              clf_lookahead_result *result)
{
    size_t r, c;

    result->passed = 0;
    result->t = t;
    result->moved = t + 1;
    result->change = 0.0;
    for (r = 0; r <= t; r++)
        for (c = 0; c < D; c++) {
            double d = fabs((double)y1[r * D + c] - y0[r * D + c]);
            if (memcmp(&y0[r * D + c], &y1[r * D + c], sizeof *y0) != 0 &&
                result->moved > t)
                result->moved = r;
            if (d > result->change || isnan(d))
                result->change = d;
        }
}

/* The perturbations of the inputs after t, in turn: random values, then
 * NaN, +inf, -inf and huge finite values.  A kernel that weighs a future
 * value by 0 instead of skipping it passes the first (0 x v = 0) but not
 * the non-finite ones (0 x NaN and 0 x inf are NaN); huge values catch a
 * future term whose weight is tiny rather than 0, and an overflow. */
enum { RANDOM, NOT_A_NUMBER, PLUS_INF, MINUS_INF, HUGE_VALUES, KINDS };

static void
perturb(float *xp, size_t from, size_t count, int kind,
        unsigned long long *state)
{
    size_t i;

    for (i = from; i < count; i++) {
        double r;
        switch (kind) {
        case NOT_A_NUMBER:
            xp[i] = NAN;
            break;
        case PLUS_INF:
            xp[i] = INFINITY;
            break;
        case MINUS_INF:
            xp[i] = -INFINITY;
            break;
        default:
            r = (double)(clf__splitmix64(state) >> 11) * 0x1.0p-51 - 2.0;
            xp[i] = (float)(kind == HUGE_VALUES ? r * 1e30 : r);
        }
    }
}

int
clf__lookahead_run(clf__lookahead_fn forward, void *user, size_t D,
                   const float *x, size_t seq_len, const clf_forward_opts *opts,
                   const size_t *positions, size_t npositions,
                   unsigned long long seed, clf_lookahead_result *result)
{
    unsigned long long state = seed, huge = seed ^ 0x9e3779b97f4a7c15ULL;
    size_t count = 0, p;
    float *y0 = NULL, *y1 = NULL, *xp = NULL;
    int rc, kind;

    CLF_TRY(check_args(x, D, seq_len, positions, npositions, result, &count));
    memset(result, 0, sizeof *result);
    y0 = malloc(count * sizeof *y0);
    y1 = malloc(count * sizeof *y1);
    xp = malloc(count * sizeof *xp);
    if (y0 == NULL || y1 == NULL || xp == NULL) {
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        goto done;
    }
    rc = forward(user, x, seq_len, y0, opts);
    if (rc != 0)
        goto done;
    result->passed = 1;
    for (p = 0; p < npositions && result->passed; p++) {
        size_t t = positions[p];
        for (kind = 0; kind < KINDS; kind++) {
            memcpy(xp, x, count * sizeof *xp);
            /* The random values draw from the seed's stream as they always
             * have; the huge ones from a stream of their own. */
            perturb(xp, (t + 1) * D, count, kind,
                    kind == HUGE_VALUES ? &huge : &state);
            rc = forward(user, xp, seq_len, y1, opts);
            if (rc != 0)
                goto done;
            if (memcmp(y0, y1, (t + 1) * D * sizeof *y0) != 0) {
                record_change(y0, y1, t, D, result);
                break;
            }
        }
        result->checked++;
    }
done:
    free(y0);
    free(y1);
    free(xp);
    return rc;
}
