/* GEMM tuning: stores what it measured, resumes, and a context created
 * afterwards applies the choice and still computes the right numbers.  Runs
 * in a temporary cache directory with a tiny layer and a short budget. */
#include "internal.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/clf-tune-XXXXXX";

/* Counts lines starting with prefix in the directory's tune file. */
static int
count_lines(const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[600], line[1024];
    int n = -1;
    FILE *f;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "tune-", 5) == 0 &&
            strstr(e->d_name, ".tmp") == NULL) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            f = fopen(path, "r");
            ck_assert_ptr_nonnull(f);
            n = 0;
            while (fgets(line, sizeof line, f) != NULL)
                n += strncmp(line, prefix, strlen(prefix)) == 0;
            fclose(f);
        }
    closedir(d);
    return n;
}

static clf_tune_opts
small(void)
{
    clf_tune_opts o;

    memset(&o, 0, sizeof o);
    o.d_model = 32;
    o.heads = 2;
    o.k = 8;
    o.seq_len = 48;
    o.budget_s = 0.01; /* the baseline and one candidate per call */
    return o;
}

START_TEST(tune_stores_and_resumes)
{
    clf_tune_opts o = small();
    int tried;

    ck_assert_msg(clf_tune(tu_context(), &o) == 0, "%s", clf_last_error());
    ck_assert_int_eq(count_lines("baseline ms="), 1);
    tried = count_lines("tried Xgemm ");
    ck_assert_int_ge(tried, 1);
    ck_assert_int_eq(count_lines("tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE="),
                     5);
    /* A second call keeps what was measured and adds to it. */
    ck_assert_msg(clf_tune(tu_context(), &o) == 0, "%s", clf_last_error());
    ck_assert_int_eq(count_lines("baseline ms="), 1);
    ck_assert_int_gt(count_lines("tried Xgemm "), tried);
    /* The context's GEMM and attention choices were made against the old
     * parameters: they are made again at its next forward. */
    ck_assert_int_eq(tu_context()->gemm_variant, CLF_GEMM_UNDECIDED);
    ck_assert_int_eq(tu_context()->attend_variant, CLF_ATTEND_UNDECIDED);
}
END_TEST

/* A context created after tuning applies the stored choice (if any beat
 * the defaults) when asked to, and its forwards still match the
 * reference. */
START_TEST(tune_choice_keeps_results_right)
{
    clf_context *ctx = NULL;
    clf_attention_desc d;
    struct layer l;
    const size_t B = 2, n = 40;
    float *x, *y;
    double *ref;
    const char *t;

    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_str_eq(clf_context_tuning(ctx), ""); /* never implicit */
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    t = clf_context_tuning(ctx);
    ck_assert_msg(t[0] == '\0' || strncmp(t, "Xgemm ", 6) == 0 ||
                      strncmp(t, "XGEMM_MIN_INDIRECT_SIZE=", 24) == 0,
                  "tuning \"%s\"", t);
    clf_context_destroy(ctx);

    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 2;
    d.max_seq_len = 48;
    d.k = 8;
    d.bias_k = d.bias_out = 1;
    layer_make(&l, &d, 5);
    x = tu_malloc(B * n * 32 * sizeof *x);
    y = tu_malloc(B * n * 32 * sizeof *y);
    ref = tu_malloc(B * n * 32 * sizeof *ref);
    tu_fill(x, B * n * 32, 6, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_forward(l.att, x, B, n, y), 0);
    ref_attention(&l.ref, 0, x, B, n, ref);
    tu_assert_close(y, ref, B * n * 32, 1e-5, "tuned forward");
    layer_free(&l);
    free(x);
    free(y);
    free(ref);
}
END_TEST

START_TEST(tune_needs_a_cache_directory)
{
    clf_tune_opts o = small();
    int rc;

    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    rc = clf_tune(tu_context(), &o);
    setenv("CLINFORMER_CACHE_DIR", dir, 1);
    ck_assert_int_eq(rc, CLF_EIO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "cache directory"));
    ck_assert_int_eq(clf_tune(NULL, &o), CLF_ENULL_ARGUMENT);
}
END_TEST

static void
clear_dir(void)
{
    tu_clear_dir(dir);
}

int
main(void)
{
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("tune");
    int rc;

    if (mkdtemp(dir) == NULL) {
        printf("Bail out! cannot create a temporary cache directory\n");
        return 1;
    }
    setenv("CLINFORMER_CACHE_DIR", dir, 1);
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, tune_stores_and_resumes);
    tcase_add_test(tc, tune_choice_keeps_results_right);
    tcase_add_test(tc, tune_needs_a_cache_directory);
    suite_add_tcase(s, tc);
    rc = tu_run(s, 1);
    clear_dir();
    rmdir(dir);
    return rc;
}
