/* The golden example of the design on whichever device CLINFORMER_DEVICE
 * selects, alone, so that the slowest implementations (rusticl on
 * llvmpipe) can run it without the rest of test_attention: one query
 * x = (1, 2, 3) with d_model = 1, W_q = W_k = W_o = 1, W_v = 10 and
 * E = F = [[0.5 0.5 0], [0 0 1]] gives 25.7521 in full attention and
 * 27.2636 compressed, as printed to 4 decimals. */
#include "testutil.h"

#include <math.h>
#include <string.h>

/* |got - want| below half a unit of the 4th decimal: equal as printed. */
static void
assert_4_decimals(float got, double want, const char *what)
{
    ck_assert_msg(fabs((double)got - want) < 0.5e-4,
                  "%s: %.6f does not round to %.4f", what, (double)got, want);
}

START_TEST(golden_example_to_four_decimals)
{
    clf_attention *att = tu_golden_layer();
    const float x[3] = {1.0f, 2.0f, 3.0f};
    float y[3] = {NAN, NAN, NAN};

    ck_assert_int_eq(clf_attention_set_mode(att, CLF_MODE_FULL), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 1, 3, y), 0);
    assert_4_decimals(y[0], 25.7521, "full attention");

    y[0] = NAN;
    ck_assert_int_eq(clf_attention_set_mode(att, CLF_MODE_LINFORMER), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 1, 3, y), 0);
    assert_4_decimals(y[0], 27.2636, "compressed attention");
    clf_attention_destroy(att);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("golden");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, golden_example_to_four_decimals);
    suite_add_tcase(s, tc);
    return tu_run(s, 1);
}
