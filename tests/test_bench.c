/* Placeholder suite. */
#include "testutil.h"

START_TEST(bench_placeholder)
{
    ck_assert_int_eq(0, 0);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("bench");

    tcase_add_test(tc, bench_placeholder);
    suite_add_tcase(s, tc);
    return tu_run(s, 0);
}
