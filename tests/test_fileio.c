/* Files handled as hostile: readers refuse FIFOs, devices and directories
 * without blocking, writers never write through a planted name, and private
 * directories are checked before they are trusted. */
#include "testutil.h"

#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static char dir[256];

static const char *
path_of(const char *name)
{
    static char path[2][512];
    static int turn;

    turn = !turn;
    snprintf(path[turn], sizeof path[turn], "%s/%s", dir, name);
    return path[turn];
}

static void
put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

/* The whole content of a small file, as a static string. */
static const char *
get_file(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "rb");
    size_t n;

    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void
assert_error_names(const char *a, const char *b)
{
    const char *msg = clf_last_error();

    ck_assert_msg(strstr(msg, a) != NULL && strstr(msg, b) != NULL,
                  "message \"%s\" should name \"%s\" and \"%s\"", msg, a, b);
}

/* A FIFO with no writer would block a plain open forever; the alarm turns
 * a hang into a visible failure instead of a stuck test run. */
static const char *
make_fifo(void)
{
    const char *p = path_of("fifo");

    unlink(p);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    return p;
}

START_TEST(fileio_open_read_reads_regular_file)
{
    const char *p = path_of("plain");
    FILE *f = NULL;
    char buf[16] = {0};

    put_file(p, "hello");
    ck_assert_int_eq(clf__file_open_read(p, "weights", &f), 0);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(buf, 1, sizeof buf - 1, f), 5);
    ck_assert_str_eq(buf, "hello");
    fclose(f);
}
END_TEST

START_TEST(fileio_open_read_refuses_fifo_without_blocking)
{
    const char *p = make_fifo();
    FILE *f = (FILE *)&f;

    alarm(10);
    ck_assert_int_eq(clf__file_open_read(p, "weights", &f), CLF_EIO);
    alarm(0);
    ck_assert_ptr_null(f);
    assert_error_names("weights", p);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "not a regular file"));
}
END_TEST

START_TEST(fileio_open_read_refuses_device)
{
    FILE *f = NULL;

    ck_assert_int_eq(clf__file_open_read("/dev/zero", "array", &f), CLF_EIO);
    ck_assert_ptr_null(f);
    assert_error_names("array", "/dev/zero");
}
END_TEST

START_TEST(fileio_open_read_refuses_directory)
{
    FILE *f = NULL;

    ck_assert_int_eq(clf__file_open_read(dir, "weights", &f), CLF_EIO);
    ck_assert_ptr_null(f);
    assert_error_names("weights", dir);
}
END_TEST

START_TEST(fileio_open_read_reports_missing_file)
{
    const char *p = path_of("absent");
    FILE *f = NULL;

    ck_assert_int_eq(clf__file_open_read(p, "weights", &f), CLF_EIO);
    assert_error_names("weights", p);
    ck_assert_int_eq(clf__file_open_read(NULL, "weights", &f),
                     CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf__file_open_read(p, "weights", NULL),
                     CLF_ENULL_ARGUMENT);
}
END_TEST

START_TEST(fileio_read_all_reads_whole_file_nul_terminated)
{
    const char *p = path_of("text");
    char *data = NULL;
    size_t len = 0;

    put_file(p, "0123456789");
    ck_assert_int_eq(clf__file_read_all(p, "tune file", 10, &data, &len), 0);
    ck_assert_uint_eq(len, 10);
    ck_assert_str_eq(data, "0123456789");
    free(data);
    /* An empty file is a valid, empty result. */
    put_file(p, "");
    ck_assert_int_eq(clf__file_read_all(p, "tune file", 10, &data, &len), 0);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(data, "");
    free(data);
}
END_TEST

START_TEST(fileio_read_all_refuses_file_over_max)
{
    const char *p = path_of("big");
    char *data = (char *)&data;
    size_t len = 7;
    char text[10001];

    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    put_file(p, text);
    ck_assert_int_eq(clf__file_read_all(p, "tune file", 9999, &data, &len),
                     CLF_EIO);
    ck_assert_ptr_null(data);
    ck_assert_uint_eq(len, 0);
    assert_error_names("tune file", "9999");
    ck_assert_int_eq(clf__file_read_all(p, "tune file", 10000, &data, &len), 0);
    ck_assert_uint_eq(len, 10000);
    free(data);
}
END_TEST

START_TEST(fileio_read_all_refuses_device_and_fifo)
{
    char *data = NULL;
    size_t len = 0;
    const char *p = make_fifo();

    ck_assert_int_eq(
        clf__file_read_all("/dev/zero", "tune file", 1 << 20, &data, &len),
        CLF_EIO);
    ck_assert_ptr_null(data);
    alarm(10);
    ck_assert_int_eq(clf__file_read_all(p, "tune file", 100, &data, &len),
                     CLF_EIO);
    alarm(0);
    assert_error_names("tune file", p);
}
END_TEST

/* A cache reader reads a regular file, also through a linked directory
 * above it, but never a symbolic link at the file's own name, even one to
 * a good file: such links are only ever planted. */
START_TEST(fileio_read_cache_refuses_symlink)
{
    const char *good = path_of("good");
    const char *link = path_of("link");
    char *data = (char *)&data, above[600], via[700];
    size_t len = 7;

    put_file(good, "cached");
    unlink(link);
    ck_assert_int_eq(symlink(good, link), 0);
    ck_assert_int_eq(
        clf__file_read_cache(link, "peaks cache file", 100, &data, &len),
        CLF_EIO);
    ck_assert_ptr_null(data);
    ck_assert_uint_eq(len, 0);
    assert_error_names("peaks cache file", "symbolic link");
    ck_assert_int_eq(
        clf__file_read_cache(good, "peaks cache file", 100, &data, &len), 0);
    ck_assert_str_eq(data, "cached");
    free(data);
    snprintf(above, sizeof above, "%s-above", dir);
    unlink(above);
    ck_assert_int_eq(symlink(dir, above), 0);
    snprintf(via, sizeof via, "%s/good", above);
    ck_assert_int_eq(
        clf__file_read_cache(via, "peaks cache file", 100, &data, &len), 0);
    ck_assert_str_eq(data, "cached");
    free(data);
    unlink(above);
    /* A FIFO is still refused without blocking. */
    alarm(10);
    ck_assert_int_eq(
        clf__file_read_cache(make_fifo(), "tune file", 100, &data, &len),
        CLF_EIO);
    alarm(0);
    unlink(link);
}
END_TEST

START_TEST(fileio_write_atomic_replaces_regular_file)
{
    const char *p = path_of("target");
    struct stat st;
    char tmp[600];

    tu_clear_dir(dir);
    put_file(p, "old contents");
    ck_assert_int_eq(clf__file_write_atomic(p, "new", 3), 0);
    ck_assert_str_eq(get_file(p), "new");
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_int_eq(st.st_mode & 077, 0);
    /* No temporary file is left behind. */
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld-0", p, (long)getpid());
    ck_assert_int_eq(access(tmp, F_OK), -1);
    ck_assert_int_eq(clf__file_write_atomic(path_of("fresh"), "x", 1), 0);
    ck_assert_str_eq(get_file(path_of("fresh")), "x");
}
END_TEST

START_TEST(fileio_write_atomic_refuses_symlink_target)
{
    const char *victim = path_of("victim");
    const char *link = path_of("link");

    put_file(victim, "precious");
    unlink(link);
    ck_assert_int_eq(symlink(victim, link), 0);
    ck_assert_int_eq(clf__file_write_atomic(link, "evil", 4), CLF_EIO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), link));
    ck_assert_str_eq(get_file(victim), "precious");
    /* The link itself is still a link, not replaced by a file. */
    {
        struct stat st;
        ck_assert_int_eq(lstat(link, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
    }
}
END_TEST

START_TEST(fileio_write_atomic_refuses_directory_and_fifo)
{
    const char *sub = path_of("sub");
    const char *fifo = make_fifo();

    ck_assert_int_eq(mkdir(sub, 0700) == 0 || errno == EEXIST, 1);
    ck_assert_int_eq(clf__file_write_atomic(sub, "x", 1), CLF_EIO);
    alarm(10);
    ck_assert_int_eq(clf__file_write_atomic(fifo, "x", 1), CLF_EIO);
    alarm(0);
    ck_assert_int_eq(rmdir(sub), 0);
}
END_TEST

/* Someone who can guess the temporary name plants a symlink there; the
 * write must not follow it, whatever it then does. */
START_TEST(fileio_write_atomic_ignores_planted_temp_symlink)
{
    const char *victim = path_of("victim2");
    const char *target = path_of("out");
    char planted[600];
    int i;

    put_file(victim, "precious");
    unlink(target);
    snprintf(planted, sizeof planted, "%s.tmp-%ld-0", target, (long)getpid());
    unlink(planted);
    ck_assert_int_eq(symlink(victim, planted), 0);
    ck_assert_int_eq(clf__file_write_atomic(target, "data", 4), 0);
    ck_assert_str_eq(get_file(victim), "precious");
    ck_assert_str_eq(get_file(target), "data");
    /* With every name taken the write fails rather than following one. */
    for (i = 1; i < 64; i++) {
        snprintf(planted, sizeof planted, "%s.tmp-%ld-%d", target,
                 (long)getpid(), i);
        unlink(planted);
        ck_assert_int_eq(symlink(victim, planted), 0);
    }
    ck_assert_int_eq(clf__file_write_atomic(target, "more", 4), CLF_EIO);
    ck_assert_str_eq(get_file(victim), "precious");
    ck_assert_str_eq(get_file(target), "data");
    tu_clear_dir(dir);
}
END_TEST

START_TEST(fileio_dir_private_creates_missing_dirs_0700)
{
    const char *deep = path_of("a/b/c");
    struct stat st;

    ck_assert_int_eq(clf__dir_private(deep), 0);
    ck_assert_int_eq(stat(deep, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    ck_assert_int_eq(stat(path_of("a"), &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    /* Again, now that it exists: still fine. */
    ck_assert_int_eq(clf__dir_private(deep), 0);
    ck_assert_int_eq(rmdir(deep), 0);
    ck_assert_int_eq(rmdir(path_of("a/b")), 0);
    ck_assert_int_eq(rmdir(path_of("a")), 0);
}
END_TEST

START_TEST(fileio_dir_private_refuses_writable_by_others)
{
    const char *sub = path_of("shared");

    ck_assert_int_eq(mkdir(sub, 0700) == 0 || errno == EEXIST, 1);
    ck_assert_int_eq(chmod(sub, 0777), 0);
    ck_assert_int_eq(clf__dir_private(sub), CLF_EIO);
    assert_error_names(sub, "writable");
    ck_assert_int_eq(chmod(sub, 0720), 0);
    ck_assert_int_eq(clf__dir_private(sub), CLF_EIO);
    ck_assert_int_eq(chmod(sub, 0755), 0);
    ck_assert_int_eq(clf__dir_private(sub), 0);
    ck_assert_int_eq(rmdir(sub), 0);
}
END_TEST

START_TEST(fileio_dir_private_refuses_non_directory)
{
    const char *p = path_of("afile");

    put_file(p, "x");
    ck_assert_int_eq(clf__dir_private(p), CLF_EIO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), p));
    ck_assert_int_eq(clf__dir_private(NULL), CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf__dir_private(""), CLF_EINVALID_ARGUMENT);
    unlink(p);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("fileio");
    TCase *tc = tcase_create("fileio");
    const char *base = getenv("TMPDIR");
    int rc;

    snprintf(dir, sizeof dir, "%s/clf-fileio-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(dir) == NULL) {
        printf("Bail out! cannot create a directory under %s\n", dir);
        return 1;
    }
    tcase_add_test(tc, fileio_open_read_reads_regular_file);
    tcase_add_test(tc, fileio_open_read_refuses_fifo_without_blocking);
    tcase_add_test(tc, fileio_open_read_refuses_device);
    tcase_add_test(tc, fileio_open_read_refuses_directory);
    tcase_add_test(tc, fileio_open_read_reports_missing_file);
    tcase_add_test(tc, fileio_read_all_reads_whole_file_nul_terminated);
    tcase_add_test(tc, fileio_read_all_refuses_file_over_max);
    tcase_add_test(tc, fileio_read_all_refuses_device_and_fifo);
    tcase_add_test(tc, fileio_read_cache_refuses_symlink);
    tcase_add_test(tc, fileio_write_atomic_replaces_regular_file);
    tcase_add_test(tc, fileio_write_atomic_refuses_symlink_target);
    tcase_add_test(tc, fileio_write_atomic_refuses_directory_and_fifo);
    tcase_add_test(tc, fileio_write_atomic_ignores_planted_temp_symlink);
    tcase_add_test(tc, fileio_dir_private_creates_missing_dirs_0700);
    tcase_add_test(tc, fileio_dir_private_refuses_writable_by_others);
    tcase_add_test(tc, fileio_dir_private_refuses_non_directory);
    suite_add_tcase(s, tc);
    rc = tu_run(s, 0);
    tu_clear_dir(dir);
    rmdir(dir);
    return rc;
}
