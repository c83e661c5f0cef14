/* The thread contract: threads share one context, each with its own layer;
 * every output of 50 forwards per thread equals, bit for bit, the output
 * of the same layer run alone.  The layers cover the fused kernel, the
 * GEMM path, padding masks, chunked scores and full mode, so that every
 * kind of stage runs in several threads at once. */
#include "internal.h"
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8
#define FORWARDS 50
#define B 2
#define N 24
#define D 32

struct worker {
    clf_attention *att;
    clf_forward_opts opts;
    unsigned lengths[B];
    const float *x;
    float *serial; /* the output of the layer run alone */
    float *y;
    int mismatches;
    int status;
    char error[256];
};

static void *
work(void *arg)
{
    struct worker *w = arg;
    int i;

    for (i = 0; i < FORWARDS; i++) {
        memset(w->y, 0xff, B * N * D * sizeof(float)); /* poison */
        w->status =
            clf_attention_forward_ex(w->att, w->x, B, N, w->y, &w->opts);
        if (w->status != 0) {
            snprintf(w->error, sizeof w->error, "%s", clf_last_error());
            break;
        }
        if (memcmp(w->y, w->serial, B * N * D * sizeof(float)) != 0)
            w->mismatches++;
    }
    return NULL;
}

/* Layer t's kind: fused, GEMM path, masked, chunked scores, full mode. */
static void
make_layer(struct worker *w, int t)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = 2; /* head_dim 16: the fused kernel can run */
    d.max_seq_len = N;
    d.k = 8;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    d.sharing = t % 3 == 0 ? CLF_SHARE_HEADWISE : CLF_SHARE_PER_HEAD;
    ck_assert_int_eq(clf_attention_create(&w->att, tu_context(), &d), 0);
    ck_assert_int_eq(clf_attention_randomize(w->att, 1000 + (unsigned)t), 0);
    memset(&w->opts, 0, sizeof w->opts);
    clf__attention_set_attend(w->att,
                              t % 2 == 0 ? CLF_ATTEND_FUSED : CLF_ATTEND_GEMM);
    if (t % 4 == 1) {
        w->lengths[0] = N - 5;
        w->lengths[1] = N;
        w->opts.lengths = w->lengths;
    }
    if (t == 3 || t == 7)
        ck_assert_int_eq(clf_attention_set_mode(w->att, CLF_MODE_FULL), 0);
    if (t == 5)
        clf__attention_set_score_limit(w->att, 2 * 4 * N * sizeof(float));
    if (t == 7)
        w->opts.causal = 1;
}

START_TEST(threads_share_a_context_bit_exactly)
{
    struct worker w[THREADS];
    pthread_t tid[THREADS];
    float *x = tu_malloc(B * N * D * sizeof *x);
    int t, fused = 0, gemm = 0;

    tu_fill(x, B * N * D, 77, -1.0f, 1.0f);
    for (t = 0; t < THREADS; t++) {
        memset(&w[t], 0, sizeof w[t]);
        make_layer(&w[t], t);
        w[t].x = x;
        w[t].serial = tu_malloc(B * N * D * sizeof(float));
        w[t].y = tu_malloc(B * N * D * sizeof(float));
        ck_assert_msg(clf_attention_forward_ex(w[t].att, x, B, N, w[t].serial,
                                               &w[t].opts) == 0,
                      "layer %d alone: %s", t, clf_last_error());
        if (clf__attention_last_fused(w[t].att))
            fused++;
        else
            gemm++;
    }
    ck_assert_int_gt(fused, 0);
    ck_assert_int_gt(gemm, 0);
    for (t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_create(&tid[t], NULL, work, &w[t]), 0);
    for (t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_join(tid[t], NULL), 0);
    for (t = 0; t < THREADS; t++) {
        ck_assert_msg(w[t].status == 0, "thread %d: %s", t, w[t].error);
        ck_assert_msg(w[t].mismatches == 0,
                      "thread %d: %d of %d outputs differ from its layer's "
                      "output alone",
                      t, w[t].mismatches, FORWARDS);
        clf_attention_destroy(w[t].att);
        free(w[t].serial);
        free(w[t].y);
    }
    free(x);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, threads_share_a_context_bit_exactly);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
