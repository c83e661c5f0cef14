/* Placeholder suite for the safetensors reader. */
#include "testutil.h"

START_TEST(safetensors_placeholder)
{
    ck_assert_int_eq(0, 0);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");

    tcase_add_test(tc, safetensors_placeholder);
    suite_add_tcase(s, tc);
    return tu_run(s, 0);
}
