/* Full mode at B = 8, n = 4096 on every way of steps 3 to 5 (the GEMM
 * path, fused, flash, flashwg) with every GEMM way (clblast, blocked,
 * tiled), against the streaming path (attend=flash with the blocked GEMM):
 * max |y - y_flash| <= 1e-5 * max |y_flash| over the whole output, and the
 * streaming path against the double-precision reference within the same
 * tolerance; the launch log shows each forced GEMM way's kernel ran.  Two
 * heads of 8 keep it affordable; the GEMM path's scores
 * (8 x 2 x 4096 x 4096 floats, 1 GiB) pass the layer's score limit
 * (SCORE_LIMIT, 512 MiB), so its workspace holds chunks of them: asserted.
 * Where a way does not apply (fused: Linformer only; flashwg where the
 * device cannot run its work-groups) the forward falls back to the GEMM
 * path, which is checked all the same.
 *
 * Slow on a CPU (about 9 GFLOP a forward, 12 forwards): run by
 * make check-slow (CI's part gpu-shape), not make check. */
#include "../bench/reference.h"
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5
#define BF_B 8
#define BF_N 4096
#define BF_D 16
#define BF_H 2

static const char *const attends[] = {"gemm", "fused", "flash", "flashwg"};
static const char *const gemms[] = {"clblast", "blocked", "tiled"};

/* The kernel the launch log names for each GEMM way, as gemms[]. */
static const char *const gemm_kernels[] = {"CLBlast", "clf_gemm_nn",
                                           "clf_gemm_tiled"};

/* One forward with the ways forced (names as CLINFORMER_KERNELS takes);
 * the launch log must show the forced GEMM way's kernel. */
static void
forward(struct layer *l, const char *attend, size_t g, const float *x, float *y)
{
    clf_context *ctx = l->att->ctx;

    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", attend), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", gemms[g]), 0);
    ck_assert_int_eq(clf_context_record_launches(ctx, 1), 0);
    ck_assert_msg(clf_attention_forward(l->att, x, BF_B, BF_N, y) == 0,
                  "attend=%s gemm=%s: %s", attend, gemms[g], clf_last_error());
    ck_assert_int_eq(clf_context_record_launches(ctx, 0), 0);
    ck_assert_msg(tu_launched(ctx, gemm_kernels[g]),
                  "attend=%s gemm=%s: no %s launch", attend, gemms[g],
                  gemm_kernels[g]);
}

START_TEST(batch_full_every_way_matches_streaming)
{
    const size_t count = (size_t)BF_B * BF_N * BF_D;
    const size_t scores = (size_t)BF_B * BF_H * BF_N * BF_N;
    clf_attention_desc d;
    struct layer l;
    float *x = tu_malloc(count * sizeof *x), *y = tu_malloc(count * sizeof *y);
    float *ys = tu_malloc(count * sizeof *ys);
    double *ref = tu_malloc(count * sizeof *ref), *yd;
    char what[128];
    size_t a, g, i;

    memset(&d, 0, sizeof d);
    d.d_model = BF_D;
    d.heads = BF_H;
    d.max_seq_len = BF_N;
    d.k = 16;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    layer_make(&l, &d, 41000);
    tu_fill(x, count, 41001, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_set_mode(l.att, CLF_MODE_FULL), 0);
    forward(&l, "flash", 1, x, ys);
    ck_assert_int_eq(clf__attention_last_flash(l.att), 1);
    ref_attention_ex(&l.ref, 1, x, BF_B, BF_N, NULL, 0, 0, ref);
    tu_assert_close(ys, ref, count, TOL,
                    "streaming path against the reference");
    yd = ref; /* the streaming output, as doubles, is the yardstick now */
    for (i = 0; i < count; i++)
        yd[i] = ys[i];
    for (a = 0; a < sizeof attends / sizeof attends[0]; a++)
        for (g = 0; g < sizeof gemms / sizeof gemms[0]; g++) {
            for (i = 0; i < count; i++)
                y[i] = NAN; /* poison: an unwritten element fails */
            forward(&l, attends[a], g, x, y);
            snprintf(what, sizeof what,
                     "full B=%d n=%d attend=%s gemm=%s against attend=flash",
                     BF_B, BF_N, attends[a], gemms[g]);
            printf("# %s: max abs difference %.3g of scale %.3g\n", what,
                   tu_max_err(y, yd, count), tu_scale(yd, count));
            tu_assert_close(y, yd, count, TOL, what);
            if (!clf__attention_last_flash(l.att) &&
                !clf__attention_last_flash_wg(l.att)) {
                /* The GEMM path: its scores in chunks under the limit. */
                ck_assert_uint_gt(l.att->ws[WS_S].cap, 0);
                ck_assert_uint_lt(l.att->ws[WS_S].cap, scores);
                ck_assert_uint_le(l.att->ws[WS_S].cap * sizeof(float),
                                  SCORE_LIMIT);
            }
        }
    ck_assert_int_eq(clf_context_force_kernel(l.att->ctx, "attend", NULL), 0);
    ck_assert_int_eq(clf_context_force_kernel(l.att->ctx, "gemm", NULL), 0);
    layer_free(&l);
    free(x);
    free(y);
    free(ys);
    free(ref);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("batch_full");
    TCase *tc = tcase_create("batch_full");

    tcase_set_timeout(tc, 3600);
    tcase_add_test(tc, batch_full_every_way_matches_streaming);
    suite_add_tcase(s, tc);
    return tu_run(s, 1);
}
