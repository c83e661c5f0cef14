/* Device peaks: measured figures are positive and finite, the cache gives
 * them back unchanged, and a cache file that is corrupt, of another device
 * or unreadable is ignored and measured again. */
#include "internal.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void
setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/clf-peaks-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(setenv("CLINFORMER_CACHE_DIR", dir, 1), 0);
}

static void
teardown(void)
{
    tu_clear_dir(dir);
    rmdir(dir);
}

/* The path of the one peaks file in dir, or "" when there is none. */
static const char *
peaks_file(void)
{
    static char path[600];
    struct dirent *e;
    DIR *d = opendir(dir);
    int found = 0;

    ck_assert_ptr_nonnull(d);
    path[0] = '\0';
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "peaks-", 6) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            found++;
        }
    closedir(d);
    ck_assert_int_le(found, 1);
    return path;
}

static void
put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

static void
assert_measured(const clf_device_peaks *p)
{
    ck_assert_int_eq(p->cached, 0);
    ck_assert(isfinite(p->fma_gflops) && p->fma_gflops > 0.0);
    ck_assert(isfinite(p->copy_gbps) && p->copy_gbps > 0.0);
    ck_assert(isfinite(p->h2d_gbps) && p->h2d_gbps > 0.0);
    /* the grid point that set the multiply-add figure */
    ck_assert(p->fma_width >= 1 && p->fma_width <= 16);
    ck_assert(p->fma_chains >= 8 && p->fma_chains <= 24);
}

static void
assert_same(const clf_device_peaks *a, const clf_device_peaks *b)
{
    /* stored with 6 significant digits */
    ck_assert(fabs(a->fma_gflops - b->fma_gflops) <= 1e-5 * a->fma_gflops);
    ck_assert(fabs(a->copy_gbps - b->copy_gbps) <= 1e-5 * a->copy_gbps);
    ck_assert(fabs(a->h2d_gbps - b->h2d_gbps) <= 1e-5 * a->h2d_gbps);
    ck_assert(a->fma_width == b->fma_width && a->fma_chains == b->fma_chains &&
              a->copy_api == b->copy_api);
}

START_TEST(peaks_bad_arguments)
{
    clf_device_peaks p;

    ck_assert_int_eq(clf_context_peaks(NULL, 0, &p), CLF_ENULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "ctx"));
    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, NULL),
                     CLF_ENULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "out"));
    ck_assert_int_eq(clf_context_peaks(tu_context(), 6u, &p), CLF_EBAD_ENUM);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "flags"));
}
END_TEST

/* Measured, stored, read back; CLF_PEAKS_MEASURE measures again. */
START_TEST(peaks_cached_round_trip)
{
    clf_device_peaks a, b, c;
    struct stat st;

    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &a), 0);
    assert_measured(&a);
    ck_assert_str_ne(peaks_file(), "");
    ck_assert_int_eq(stat(peaks_file(), &st), 0);
    ck_assert_int_eq(st.st_mode & 077, 0);
    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &b), 0);
    ck_assert_int_eq(b.cached, 1);
    assert_same(&a, &b);
    ck_assert_int_eq(clf_context_peaks(tu_context(), CLF_PEAKS_MEASURE, &c), 0);
    assert_measured(&c);
}
END_TEST

/* Each bad file is ignored (cached == 0) and replaced by a good one. */
START_TEST(peaks_bad_cache_ignored)
{
    /* M: the method line of a good file */
#define M "method 8x16 kernel\n"
    static const char *const bad[] = {
        "garbage\n", "",
        /* a figure that is not a positive number */
        "clinformer-peaks 1\n%s\nfma_gflops -3\ncopy_gbps 1\nh2d_gbps 1\n" M,
        "clinformer-peaks 1\n%s\nfma_gflops nan\ncopy_gbps 1\nh2d_gbps 1\n" M,
        /* a figure no device reaches: below 1e-3 or above 1e7 */
        "clinformer-peaks 1\n%s\nfma_gflops 1e-300\ncopy_gbps 1\nh2d_gbps "
        "1\n" M,
        "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps 0.0009\nh2d_gbps "
        "1\n" M,
        "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps 1\nh2d_gbps 2e7\n" M,
        "clinformer-peaks 1\n%s\nfma_gflops 5e8\ncopy_gbps 1\nh2d_gbps 1\n" M,
        /* a figure's number on the next line, or after more space */
        "clinformer-peaks 1\n%s\nfma_gflops\n3\ncopy_gbps 1\nh2d_gbps 1\n" M,
        "clinformer-peaks 1\n%s\nfma_gflops \n3\ncopy_gbps 1\nh2d_gbps 1\n" M,
        "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps  1\nh2d_gbps 1\n" M,
        /* a figure missing, one too many, a cut-off line */
        "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps 1\n" M,
        "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps 1\nh2d_gbps 1\n" M
        "x 1\n",
        "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps 1\nh2d_gbps 1\n"
        "method 8x16 kernel",
        /* the method: missing, a point not in the grid, an unknown copy */
        "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps 1\nh2d_gbps 1\n",
        "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps 1\nh2d_gbps 1\n"
        "method 3x5 kernel\n",
        "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps 1\nh2d_gbps 1\n"
        "method 8x16 dma\n",
        /* another device's key */
        "clinformer-peaks 1\nkey other|device\nfma_gflops 3\ncopy_gbps 1\n"
        "h2d_gbps 1\n" M,
        /* another format version */
        "clinformer-peaks 2\n%s\nfma_gflops 3\ncopy_gbps 1\nh2d_gbps 1\n" M};
#undef M
    char key[700], text[1400], path[600];
    clf_device_peaks p;
    FILE *f;
    size_t i;

    tu_context()->peaks_quick = 1; /* the cache is tested, not the figures */
    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &p), 0);
    snprintf(path, sizeof path, "%s", peaks_file());
    /* the key line of the good file */
    f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(key, sizeof key, f));
    ck_assert_ptr_nonnull(fgets(key, sizeof key, f));
    fclose(f);
    key[strcspn(key, "\n")] = '\0';
    ck_assert_int_eq(strncmp(key, "key ", 4), 0);
    /* the file the library wrote is what a good one looks like */
    snprintf(text, sizeof text,
             "clinformer-peaks 1\n%s\nfma_gflops 3\ncopy_gbps 1.5\n"
             "h2d_gbps 0.25\nmethod 16x24 buffer\n",
             key);
    put_file(path, text);
    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &p), 0);
    ck_assert_int_eq(p.cached, 1);
    ck_assert(p.fma_gflops == 3.0 && p.copy_gbps == 1.5 && p.h2d_gbps == 0.25);
    ck_assert(p.fma_width == 16 && p.fma_chains == 24 && p.copy_api == 1);
    /* the bounds themselves are plausible */
    snprintf(text, sizeof text,
             "clinformer-peaks 1\n%s\nfma_gflops 1e7\ncopy_gbps 0.001\n"
             "h2d_gbps 1\nmethod 1x8 kernel\n",
             key);
    put_file(path, text);
    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &p), 0);
    ck_assert_int_eq(p.cached, 1);
    ck_assert(p.fma_gflops == 1e7 && p.copy_gbps == 0.001);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, bad[i], key);
        put_file(path, text);
        ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &p), 0);
        ck_assert_msg(p.cached == 0, "bad cache file %zu was trusted", i);
        assert_measured(&p);
        /* and measured figures replaced it */
        ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &p), 0);
        ck_assert_int_eq(p.cached, 1);
    }
    tu_context()->peaks_quick = 0;
}
END_TEST

/* A symlink at the cache file's name is not followed, even to a good
 * file: the figures are measured again and the link left alone. */
START_TEST(peaks_symlink_cache_ignored)
{
    char path[600], moved[700];
    clf_device_peaks p;
    struct stat st;

    tu_context()->peaks_quick = 1; /* the cache is tested, not the figures */
    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &p), 0);
    snprintf(path, sizeof path, "%s", peaks_file());
    snprintf(moved, sizeof moved, "%s/elsewhere", dir);
    ck_assert_int_eq(rename(path, moved), 0);
    ck_assert_int_eq(symlink(moved, path), 0);
    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &p), 0);
    ck_assert_msg(p.cached == 0, "a linked cache file was trusted");
    assert_measured(&p);
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    unlink(path);
    unlink(moved);
    tu_context()->peaks_quick = 0;
}
END_TEST

/* With the cache off, nothing is written and every call measures. */
START_TEST(peaks_cache_off)
{
    clf_device_peaks p;

    tu_context()->peaks_quick = 1; /* the cache is tested, not the figures */
    ck_assert_int_eq(setenv("CLINFORMER_CACHE_DIR", "off", 1), 0);
    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &p), 0);
    assert_measured(&p);
    ck_assert_int_eq(clf_context_peaks(tu_context(), 0, &p), 0);
    assert_measured(&p);
    ck_assert_int_eq(setenv("CLINFORMER_CACHE_DIR", dir, 1), 0);
    ck_assert_str_eq(peaks_file(), "");
    tu_context()->peaks_quick = 0;
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("peaks");
    TCase *tc = tcase_create("peaks");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, peaks_bad_arguments);
    tcase_add_test(tc, peaks_cached_round_trip);
    tcase_add_test(tc, peaks_bad_cache_ignored);
    tcase_add_test(tc, peaks_symlink_cache_ignored);
    tcase_add_test(tc, peaks_cache_off);
    suite_add_tcase(s, tc);
    return tu_run(s, 1);
}
