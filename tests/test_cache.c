/* The on-disk program binary cache: a second context loads instead of
 * building, a corrupted or truncated entry is rejected and rebuilt, a
 * changed kernel source gets its own entry, and "off" writes nothing. */
#include "internal.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/clf-cache-XXXXXX";

/* Path of the only .clbin file in dir, or "" (fails if several). */
static int
entries(char *path, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    path[0] = '\0';
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".clbin") == NULL)
            continue;
        ck_assert_msg(strstr(e->d_name, ".tmp") == NULL,
                      "temporary file %s left behind", e->d_name);
        snprintf(path, cap, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

static clf_context_stats
build_once(void)
{
    clf_context *ctx = NULL;
    clf_context_stats st;
    int rc;

    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    rc = clf_context_build(ctx);
    ck_assert_msg(rc == 0, "build: %s", clf_last_error());
    ck_assert_int_eq(clf_context_build(ctx), 0); /* idempotent */
    ck_assert_int_eq(clf_context_stats_get(ctx, &st), 0);
    /* The kernels work, whichever way they were obtained. */
    {
        float v[3] = {0.0f, 0.0f, 0.0f};
        cl_mem m = clCreateBuffer(ctx->context,
                                  CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                  sizeof v, v, NULL);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(clf__softmax_rows(ctx, m, 0, 1, 3), 0);
        ck_assert_int_eq(clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0,
                                             sizeof v, v, 0, NULL, NULL),
                         0);
        ck_assert_double_eq_tol(v[0], 1.0 / 3.0, 1e-6);
        clReleaseMemObject(m);
    }
    clf_context_destroy(ctx);
    return st;
}

static void
corrupt(const char *path, long at, int truncate_file)
{
    FILE *f = fopen(path, "r+b");
    int c;

    ck_assert_ptr_nonnull(f);
    if (truncate_file) {
        ck_assert_int_eq(ftruncate(fileno(f), at), 0);
    } else {
        ck_assert_int_eq(fseek(f, at, SEEK_SET), 0);
        c = fgetc(f);
        ck_assert_int_eq(fseek(f, at, SEEK_SET), 0);
        fputc(c ^ 0x5a, f);
    }
    fclose(f);
}

START_TEST(cache_second_context_builds_nothing)
{
    char path[512];
    clf_context_stats st;

    st = build_once();
    ck_assert_uint_eq(st.source_builds, 1);
    ck_assert_uint_eq(st.cache_loads, 0);
    ck_assert_uint_eq(st.cache_writes, 1);
    ck_assert_int_eq(entries(path, sizeof path), 1);

    st = build_once();
    ck_assert_uint_eq(st.source_builds, 0);
    ck_assert_uint_eq(st.cache_loads, 1);
    ck_assert_uint_eq(st.cache_writes, 0);
}
END_TEST

START_TEST(cache_corrupted_entry_is_rebuilt)
{
    char path[512];
    clf_context_stats st;
    long size;
    FILE *f;

    build_once();
    ck_assert_int_eq(entries(path, sizeof path), 1);
    f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fclose(f);

    corrupt(path, size / 2, 0); /* a flipped byte in the binary */
    st = build_once();
    ck_assert_uint_eq(st.cache_rejects, 1);
    ck_assert_uint_eq(st.source_builds, 1);
    ck_assert_uint_eq(st.cache_writes, 1);
    st = build_once();
    ck_assert_uint_eq(st.cache_loads, 1);

    corrupt(path, size / 3, 1); /* truncated */
    st = build_once();
    ck_assert_uint_eq(st.cache_rejects, 1);
    ck_assert_uint_eq(st.source_builds, 1);

    corrupt(path, 3, 0); /* a damaged header */
    st = build_once();
    ck_assert_uint_eq(st.cache_rejects, 1);
    ck_assert_uint_eq(st.source_builds, 1);

    corrupt(path, 0, 1); /* empty file */
    st = build_once();
    ck_assert_uint_eq(st.cache_rejects, 1);
    ck_assert_uint_eq(st.source_builds, 1);
    st = build_once();
    ck_assert_uint_eq(st.cache_loads, 1);
    ck_assert_int_eq(entries(path, sizeof path), 1);
}
END_TEST

/* A changed kernel source is a different key: it never loads a stale
 * binary, and it gets an entry of its own. */
START_TEST(cache_changed_source_is_a_new_entry)
{
    char kdir[] = "/tmp/clf-ksrc-XXXXXX";
    const char *const *names = clf__kernel_files;
    const char *const *srcs = clf__kernel_sources;
    char path[512];
    clf_context_stats st;
    size_t i;
    FILE *f;

    build_once();
    ck_assert_int_eq(entries(path, sizeof path), 1);
    ck_assert_ptr_nonnull(mkdtemp(kdir));
    for (i = 0; i < (size_t)CLF_KERNEL_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", kdir, names[i]);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(srcs[i], f);
        if (i == 0)
            fputs("/* edited */\n", f);
        fclose(f);
    }
    setenv("CLINFORMER_KERNEL_DIR", kdir, 1);
    st = build_once();
    ck_assert_uint_eq(st.source_builds, 1);
    ck_assert_uint_eq(st.cache_loads, 0);
    ck_assert_int_eq(entries(path, sizeof path), 2);
    st = build_once();
    ck_assert_uint_eq(st.cache_loads, 1);
    unsetenv("CLINFORMER_KERNEL_DIR");
    for (i = 0; i < (size_t)CLF_KERNEL_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", kdir, names[i]);
        remove(path);
    }
    rmdir(kdir);
}
END_TEST

START_TEST(cache_off_writes_nothing)
{
    char path[512];
    clf_context_stats st;
    int before = entries(path, sizeof path);

    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    st = build_once();
    ck_assert_uint_eq(st.source_builds, 1);
    ck_assert_uint_eq(st.cache_writes, 0);
    ck_assert_uint_eq(st.cache_loads, 0);
    setenv("CLINFORMER_CACHE_DIR", dir, 1);
    ck_assert_int_eq(entries(path, sizeof path), before);
}
END_TEST

static long
file_size(const char *path)
{
    struct stat st;

    ck_assert_int_eq(stat(path, &st), 0);
    return (long)st.st_size;
}

/* A header whose payload length disagrees with the file is refused, longer
 * or shorter, as is an entry over the size limit (a sparse file). */
static unsigned long long
le64(const unsigned char *b)
{
    unsigned long long v = 0;
    int i;

    for (i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

START_TEST(cache_wrong_length_entry_is_rejected)
{
    char path[512];
    unsigned char b[8];
    clf_context_stats st;
    long size;
    FILE *f;
    int i;

    for (i = 0; i < 3; i++) {
        build_once();
        ck_assert_int_eq(entries(path, sizeof path), 1);
        size = file_size(path);
        if (i < 2) {
            /* The length field follows the magic and the key. */
            tu_put_le(b, (unsigned long long)(size - 32 + (i ? 1 : -1)), 8);
            f = fopen(path, "r+b");
            ck_assert_ptr_nonnull(f);
            ck_assert_int_eq(fseek(f, 16, SEEK_SET), 0);
            ck_assert_uint_eq(fwrite(b, 1, 8, f), 8);
            fclose(f);
        } else {
            ck_assert_int_eq(truncate(path, (256L << 20) + 1), 0);
        }
        st = build_once();
        ck_assert_uint_eq(st.cache_rejects, 1);
        ck_assert_uint_eq(st.cache_loads, 0);
        ck_assert_uint_eq(st.source_builds, 1);
        ck_assert_uint_eq(st.cache_writes, 1);
        /* Rewritten whole: its length field is its size again (a driver
         * may make a binary of another size on a rebuild). */
        f = fopen(path, "rb");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fseek(f, 16, SEEK_SET), 0);
        ck_assert_uint_eq(fread(b, 1, 8, f), 8);
        fclose(f);
        ck_assert_uint_eq(le64(b), (unsigned long long)(file_size(path) - 32));
        st = build_once();
        ck_assert_uint_eq(st.cache_loads, 1);
    }
}
END_TEST

static void
make_victim(char *victim)
{
    int fd = mkstemp(victim);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "victim", 6), 6);
    close(fd);
}

static void
assert_victim(const char *victim)
{
    char buf[16] = {0};
    FILE *f = fopen(victim, "rb");

    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(buf, 1, sizeof buf - 1, f), 6);
    fclose(f);
    ck_assert_str_eq(buf, "victim");
}

/* A symlink planted at the entry's name is neither written through nor
 * replaced, and what it points to is not loaded. */
START_TEST(cache_symlink_at_entry_is_not_followed)
{
    char path[512], victim[] = "/tmp/clf-victim-XXXXXX";
    clf_context_stats st;
    struct stat ls;

    build_once();
    ck_assert_int_eq(entries(path, sizeof path), 1);
    make_victim(victim);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(symlink(victim, path), 0);
    st = build_once();
    ck_assert_uint_eq(st.cache_loads, 0);
    ck_assert_uint_eq(st.source_builds, 1);
    ck_assert_uint_eq(st.cache_writes, 0);
    assert_victim(victim);
    ck_assert_int_eq(lstat(path, &ls), 0);
    ck_assert(S_ISLNK(ls.st_mode));
    unlink(path);
    unlink(victim);
}
END_TEST

/* A symlink at the entry's name to a good entry is not loaded either:
 * the link is refused (a reject, counted) and the kernels built from
 * source, rather than followed to whatever it points to. */
START_TEST(cache_symlink_to_good_entry_is_rejected)
{
    char path[512], moved[600];
    clf_context_stats st;

    build_once();
    ck_assert_int_eq(entries(path, sizeof path), 1);
    snprintf(moved, sizeof moved, "%s/elsewhere", dir);
    ck_assert_int_eq(rename(path, moved), 0);
    ck_assert_int_eq(symlink(moved, path), 0);
    st = build_once();
    ck_assert_uint_eq(st.cache_loads, 0);
    ck_assert_uint_eq(st.cache_rejects, 1);
    ck_assert_uint_eq(st.source_builds, 1);
    unlink(path);
    unlink(moved);
}
END_TEST

/* Symlinks planted at the temporary names a writer might use are not
 * written through; the entry is still written. */
START_TEST(cache_symlink_at_temp_name_is_not_followed)
{
    char path[512], link1[600], link2[600];
    char victim[] = "/tmp/clf-victim-XXXXXX";
    clf_context_stats st;

    build_once();
    ck_assert_int_eq(entries(path, sizeof path), 1);
    ck_assert_int_eq(unlink(path), 0);
    make_victim(victim);
    snprintf(link1, sizeof link1, "%s.tmp.%ld", path, (long)getpid());
    snprintf(link2, sizeof link2, "%s.tmp-%ld-0", path, (long)getpid());
    ck_assert_int_eq(symlink(victim, link1), 0);
    ck_assert_int_eq(symlink(victim, link2), 0);
    st = build_once();
    ck_assert_uint_eq(st.source_builds, 1);
    assert_victim(victim);
    unlink(link1);
    unlink(link2);
    unlink(victim);
    ck_assert_uint_eq(st.cache_writes, 1);
    ck_assert_int_eq(entries(path, sizeof path), 1);
    st = build_once();
    ck_assert_uint_eq(st.cache_loads, 1);
}
END_TEST

/* A cache directory others may write in is neither read nor written. */
START_TEST(cache_shared_directory_is_not_used)
{
    char path[512];
    clf_context_stats st;

    build_once();
    ck_assert_int_eq(entries(path, sizeof path), 1);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    st = build_once();
    ck_assert_int_eq(chmod(dir, 0700), 0);
    ck_assert_uint_eq(st.cache_loads, 0);
    ck_assert_uint_eq(st.source_builds, 1);
    ck_assert_uint_eq(st.cache_writes, 0);
}
END_TEST

static void
clear_dir(void)
{
    tu_clear_dir(dir);
}

static Suite *
suite(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("cache");

    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, clear_dir, clear_dir);
    tcase_add_test(tc, cache_second_context_builds_nothing);
    tcase_add_test(tc, cache_corrupted_entry_is_rebuilt);
    tcase_add_test(tc, cache_changed_source_is_a_new_entry);
    tcase_add_test(tc, cache_off_writes_nothing);
    tcase_add_test(tc, cache_wrong_length_entry_is_rejected);
    tcase_add_test(tc, cache_symlink_at_entry_is_not_followed);
    tcase_add_test(tc, cache_symlink_to_good_entry_is_rejected);
    tcase_add_test(tc, cache_symlink_at_temp_name_is_not_followed);
    tcase_add_test(tc, cache_shared_directory_is_not_used);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    int rc;

    if (mkdtemp(dir) == NULL) {
        printf("Bail out! cannot create a temporary cache directory\n");
        return 1;
    }
    setenv("CLINFORMER_CACHE_DIR", dir, 1);
    rc = tu_run(suite(), 1);
    clear_dir();
    rmdir(dir);
    return rc;
}
