/* The kernel registry: the files it names are exactly the kernel files of
 * the source tree, embedded unchanged; CLINFORMER_KERNEL_DIR loads them
 * from disk; the shared constants reach the kernels as build options. */
#include "internal.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *
kernel_src_dir(char *buf, size_t cap)
{
    const char *top = getenv("top_srcdir");

    snprintf(buf, cap, "%s/cl", top != NULL && *top != '\0' ? top : ".");
    return buf;
}

static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long len;

    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    ck_assert_int_ge(len, 0);
    rewind(f);
    buf = tu_malloc((size_t)len + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = '\0';
    fclose(f);
    return buf;
}

static int
registered(const char *file)
{
    int i;

    for (i = 0; i < CLF_KERNEL_FILES; i++)
        if (strcmp(clf__kernel_files[i], file) == 0)
            return i;
    return -1;
}

/* Every .cl file of cl/ is registered (the main program's and those built
 * apart), and every registered file exists there with the text the
 * library embeds; only the files built apart need an extension. */
START_TEST(registry_names_every_kernel_file)
{
    char dir[4096], path[4400];
    struct dirent *e;
    DIR *d;
    int seen = 0, i;

    d = opendir(kernel_src_dir(dir, sizeof dir));
    ck_assert_msg(d != NULL, "cannot list %s", dir);
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".cl") != 0)
            continue;
        ck_assert_msg(registered(e->d_name) >= 0,
                      "%s is not in the kernel registry", e->d_name);
        seen++;
    }
    closedir(d);
    ck_assert_int_eq(seen, CLF_KERNEL_FILES);
    for (i = 0; i < CLF_KERNEL_FILES; i++)
        ck_assert_msg((clf__kernel_needs[i] != NULL) ==
                          (i >= CLF_KERNEL_MAIN_FILES),
                      "%s: %s", clf__kernel_files[i],
                      clf__kernel_needs[i] ? clf__kernel_needs[i] : "none");
    ck_assert_str_eq(clf__kernel_files[CLF_KERNEL_MAIN_FILES], "half_gemm.cl");
    ck_assert_str_eq(clf__kernel_needs[CLF_KERNEL_MAIN_FILES], "cl_khr_fp16");
    for (i = 0; i < CLF_KERNEL_FILES; i++) {
        char *text;
        snprintf(path, sizeof path, "%s/%s", dir, clf__kernel_files[i]);
        text = slurp(path);
        ck_assert_msg(strcmp(text, clf__kernel_sources[i]) == 0,
                      "%s differs from its embedded copy", path);
        free(text);
    }
}
END_TEST

/* A fresh context (cache off) builds from the directory, and its softmax
 * computes a known row: exp(j) / sum_j exp(j) for j = 0, 1, 2, 3. */
static void
build_and_run(void)
{
    clf_context *ctx = NULL;
    clf_context_stats st;
    float row[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    double sum = 1.0 + exp(1.0) + exp(2.0) + exp(3.0);
    cl_mem m;
    cl_int err;
    int j, rc;

    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    rc = clf_context_build(ctx);
    ck_assert_msg(rc == 0, "build: %s; log: %s", clf_last_error(),
                  clf_context_build_log(ctx));
    ck_assert_int_eq(clf_context_stats_get(ctx, &st), 0);
    ck_assert_uint_eq(st.source_builds, 1);
    m = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       sizeof row, row, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clf__softmax_rows(ctx, m, 0, 1, 4), 0);
    ck_assert_int_eq(clEnqueueReadBuffer(ctx->queue, m, CL_TRUE, 0, sizeof row,
                                         row, 0, NULL, NULL),
                     CL_SUCCESS);
    clReleaseMemObject(m);
    for (j = 0; j < 4; j++)
        ck_assert_double_eq_tol(row[j], exp((double)j) / sum, 1e-6);
    clf_context_destroy(ctx);
}

/* The programs built apart: each names at least one registered file, none
 * twice; a file that needs an extension is in exactly one, alone (so that
 * the main program never needs it); a part that uses the shared
 * definitions has common.cl first, as the main program does; and a part
 * builds on the suite's device where its files' extensions are there. */
START_TEST(registry_parts_name_their_files)
{
    int in_parts[CLF_KERNEL_FILES] = {0};
    int p, f, prev, i, n;

    for (p = 0; p < CLF_PART_COUNT; p++) {
        unsigned char seen[CLF_KERNEL_FILES] = {0};
        for (n = 0; (f = clf__program_part_file(p, n)) >= 0; n++) {
            ck_assert_int_lt(f, CLF_KERNEL_FILES);
            ck_assert_msg(!seen[f], "part %d names %s twice", p,
                          clf__kernel_files[f]);
            seen[f] = 1;
            in_parts[f]++;
        }
        ck_assert_msg(n >= 1, "part %d names no file", p);
        for (i = 0; i < n; i++) {
            f = clf__program_part_file(p, i);
            if (clf__kernel_needs[f] != NULL)
                ck_assert_msg(n == 1, "part %d: %s needs %s and is not alone",
                              p, clf__kernel_files[f], clf__kernel_needs[f]);
            if (f == CLF_FILE_common)
                ck_assert_msg(i == 0, "part %d: common.cl is not first", p);
            prev = i > 0 ? clf__program_part_file(p, i - 1) : -1;
            ck_assert_msg(prev < f, "part %d: %s out of build order", p,
                          clf__kernel_files[f]);
        }
    }
    ck_assert_int_eq(clf__program_part_file(CLF_PART_COUNT, 0), -1);
    for (f = 0; f < CLF_KERNEL_FILES; f++)
        if (clf__kernel_needs[f] != NULL)
            ck_assert_msg(in_parts[f] == 1, "%s is built in %d parts",
                          clf__kernel_files[f], in_parts[f]);
    ck_assert_int_eq(clf__program_part_file(CLF_PART_TILED_SET, 0),
                     CLF_FILE_common);
    ck_assert_int_eq(clf__program_part_file(CLF_PART_TILED_SET, 1),
                     CLF_FILE_gemm_tiled);
    ck_assert_int_eq(clf__program_part_file(CLF_PART_HALF_GEMM, 0),
                     CLF_FILE_half_gemm);
    {
        char opts[2048];
        cl_program prog = NULL;
        clf__kernel_options(NULL, NULL, 0, opts, sizeof opts);
        ck_assert_msg(clf__program_build_part(tu_context(), CLF_PART_TILED_SET,
                                              opts, &prog) == 0,
                      "%s", clf_last_error());
        clReleaseProgram(prog);
        ck_assert_int_eq(
            clf__program_build_part(tu_context(), CLF_PART_COUNT, opts, &prog),
            CLF_EINVALID_ARGUMENT);
        ck_assert_ptr_null(prog);
    }
}
END_TEST

START_TEST(registry_kernel_dir_loads_the_source_tree)
{
    char dir[4096];

    setenv("CLINFORMER_KERNEL_DIR", kernel_src_dir(dir, sizeof dir), 1);
    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    build_and_run();
    unsetenv("CLINFORMER_KERNEL_DIR");
    tu_cache_dir_restore();
}
END_TEST

/* The kernels see each shared constant with the host's value: a copy of
 * the kernel files whose last file stops the build on any difference
 * builds. */
#define PARAM_CHECK(name, value)                                               \
    "#if !defined(" #name ") || " #name " != " #value "\n"                     \
    "#error " #name " differs from the host's " #value "\n#endif\n"

START_TEST(registry_params_reach_the_kernels)
{
    char dir[] = "/tmp/clf-kparams-XXXXXX";
    char path[256];
    int i;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (i = 0; i < CLF_KERNEL_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, clf__kernel_files[i]);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(clf__kernel_sources[i], f);
        if (i == CLF_KERNEL_MAIN_FILES - 1) /* the main program's last */
            fputs(CLF_KERNEL_PARAMS(PARAM_CHECK), f);
        fclose(f);
    }
    setenv("CLINFORMER_KERNEL_DIR", dir, 1);
    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    build_and_run();
    unsetenv("CLINFORMER_KERNEL_DIR");
    tu_cache_dir_restore();
    tu_clear_dir(dir);
    rmdir(dir);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("registry");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, registry_names_every_kernel_file);
    tcase_add_test(tc, registry_parts_name_their_files);
    tcase_add_test(tc, registry_kernel_dir_loads_the_source_tree);
    tcase_add_test(tc, registry_params_reach_the_kernels);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
