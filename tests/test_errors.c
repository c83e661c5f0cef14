/* Every documented error path returns its named status, and the detail
 * message names the argument; nothing crashes and nothing is left half
 * done. */
#include "internal.h"
#include "testutil.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static clf_attention_desc
good_desc(void)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = 8;
    d.heads = 2;
    d.max_seq_len = 10;
    d.k = 4;
    return d;
}

static clf_attention *
good_layer(void)
{
    clf_attention_desc d = good_desc();
    clf_attention *att = NULL;

    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    ck_assert_int_eq(clf_attention_randomize(att, 1), 0);
    return att;
}

START_TEST(error_table_is_consistent)
{
    static const int codes[] = {
#define XX(name, value, msg) value,
        CLF_ERRNO_MAP(XX)
#undef XX
    };
    size_t i, j;

    for (i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        ck_assert_int_le(codes[i], -4000);
        ck_assert_str_ne(clf_strerror(codes[i]), "unknown status");
        ck_assert_int_eq(strncmp(clf_status_name(codes[i]), "CLF_E", 5), 0);
        for (j = 0; j < i; j++) {
            ck_assert_int_ne(codes[i], codes[j]);
            ck_assert_str_ne(clf_status_name(codes[i]),
                             clf_status_name(codes[j]));
        }
    }
    ck_assert_str_eq(clf_status_name(CLF_ESEQ_TOO_LONG), "CLF_ESEQ_TOO_LONG");
    ck_assert_str_eq(clf_status_name(CL_BUILD_PROGRAM_FAILURE),
                     "CL_BUILD_PROGRAM_FAILURE");
    ck_assert_str_eq(clf_status_name(-1017), "CLBlastInvalidDimension");
    ck_assert_str_eq(clf_strerror(0), "success");
    ck_assert_str_eq(clf_strerror(-77), "OpenCL error");
    ck_assert_str_eq(clf_strerror(-1500), "CLBlast error");
    ck_assert_str_eq(clf_strerror(12345), "unknown status");
    ck_assert_str_eq(clf_version(), CLF_VERSION_STRING);
}
END_TEST

/* A thread's detail message belongs to the status it was set for: a status
 * that arrives with none (a caller's own, or one passed on) reads as its
 * own sentence, never as "no error" or an earlier failure's detail; an
 * empty detail reads as the status's sentence. */
static void *
fresh_thread_messages(void *arg)
{
    const char **out = arg;

    out[0] = clf_error_message(CLF_ENO_MEMORY);
    out[1] = clf_last_error();
    return NULL;
}

START_TEST(error_message_belongs_to_its_status)
{
    const char *got[2] = {NULL, NULL};
    pthread_t t;

    ck_assert_int_eq(pthread_create(&t, NULL, fresh_thread_messages, got), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_str_eq(got[0], clf_strerror(CLF_ENO_MEMORY));
    ck_assert_ptr_null(strstr(got[1], "no error"));

    ck_assert_int_eq(clf__fail(CLF_EBAD_SIZE, "n is %d", 0), CLF_EBAD_SIZE);
    ck_assert_str_eq(clf_error_message(CLF_EBAD_SIZE), "n is 0");
    ck_assert_str_eq(clf_error_message(CLF_ENO_MEMORY),
                     "host memory allocation failed");
    ck_assert_str_eq(clf_error_message(0), "success");
    ck_assert_str_eq(clf_error_message(CL_OUT_OF_RESOURCES),
                     "OpenCL: out of device resources");
    clf__fail(CLF_EIO, "%s", "");
    ck_assert_str_eq(clf_last_error(), clf_strerror(CLF_EIO));
    ck_assert_str_eq(clf_error_message(CLF_EIO), clf_strerror(CLF_EIO));
}
END_TEST

/* Every status OpenCL 1.2 defines has its own sentence and name. */
START_TEST(error_every_opencl_status_is_named)
{
    int code;

    for (code = -1; code >= -68; code--) {
        if (code == -20)
            code = -30; /* -20..-29 are not used */
        ck_assert_msg(strcmp(clf_strerror(code), "OpenCL error") != 0,
                      "status %d has no sentence", code);
        ck_assert_msg(strncmp(clf_status_name(code), "CL_", 3) == 0,
                      "status %d is %s", code, clf_status_name(code));
    }
}
END_TEST

START_TEST(context_rejects_bad_selectors)
{
    clf_context *ctx = (clf_context *)1;

    ASSERT_FAILS(clf_context_create(NULL, NULL), CLF_ENULL_ARGUMENT, "out");
    ASSERT_FAILS(clf_context_create(&ctx, "no-such-device-xyz"),
                 CLF_EDEVICE_NOT_FOUND, "no-such-device-xyz");
    ck_assert_ptr_null(ctx);
    ASSERT_FAILS(clf_context_create(&ctx, "999"), CLF_EDEVICE_NOT_FOUND, "999");
    ck_assert_int_eq(clf_context_build(NULL), CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf_context_finish(NULL), CLF_ENULL_ARGUMENT);
    ck_assert_str_eq(clf_context_build_log(NULL), "");
    ck_assert_int_eq(clf_context_stats_get(NULL, NULL), CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf_context_device_info(tu_context(), NULL),
                     CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf_devices_list(NULL, 3, NULL), CLF_ENULL_ARGUMENT);
    clf_context_destroy(NULL);
    clf_attention_destroy(NULL);
}
END_TEST

START_TEST(context_selects_by_kind_and_name)
{
    clf_device_info info, first;
    clf_context *ctx = NULL;
    size_t count = 0;
    char sel[16];

    ck_assert_int_eq(clf_devices_list(&first, 1, &count), 0);
    ck_assert_uint_ge(count, 1);
    ck_assert_int_eq(clf_devices_list(NULL, 0, &count), 0);
    /* By index, by a piece of the device name in another case, by kind. */
    snprintf(sel, sizeof sel, "%u", first.index);
    ck_assert_int_eq(clf_context_create(&ctx, sel), 0);
    ck_assert_int_eq(clf_context_device_info(ctx, &info), 0);
    ck_assert_str_eq(info.name, first.name);
    clf_context_destroy(ctx);
    if (strlen(first.name) >= 4) {
        char part[5];
        size_t i;
        for (i = 0; i < 4; i++) {
            int c = (unsigned char)first.name[i];
            part[i] = (char)(islower(c) ? toupper(c) : tolower(c));
        }
        part[4] = '\0';
        ck_assert_int_eq(clf_context_create(&ctx, part), 0);
        clf_context_destroy(ctx);
    }
    ck_assert_int_eq(clf_context_create(&ctx, first.is_gpu ? "gpu" : "cpu"), 0);
    clf_context_destroy(ctx);
}
END_TEST

START_TEST(context_adopt_rejects_bad_objects)
{
    clf_context *own = tu_context(), *ctx = NULL;
    cl_context c = clf_context_cl_context(own);
    cl_device_id d = clf_context_cl_device(own);
    cl_command_queue q = clf_context_cl_queue(own), ooo;
    cl_int err;

    ASSERT_FAILS(clf_context_adopt(NULL, c, d, q), CLF_ENULL_ARGUMENT, "out");
    ASSERT_FAILS(clf_context_adopt(&ctx, NULL, d, q), CLF_ENULL_ARGUMENT,
                 "context");
    ASSERT_FAILS(clf_context_adopt(&ctx, c, NULL, q), CLF_ENULL_ARGUMENT,
                 "device");
    ASSERT_FAILS(clf_context_adopt(&ctx, c, d, NULL), CLF_ENULL_ARGUMENT,
                 "queue");
    ooo = clCreateCommandQueue(c, d, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE,
                               &err);
    if (ooo != NULL) {
        ASSERT_FAILS(clf_context_adopt(&ctx, c, d, ooo), CLF_EUNSUPPORTED,
                     "out of order");
        clReleaseCommandQueue(ooo);
    }
    ck_assert_ptr_null(ctx);
}
END_TEST

START_TEST(attention_create_validates_desc)
{
    clf_context *ctx = tu_context();
    clf_attention *att = NULL;
    clf_attention_desc d;

    d = good_desc();
    ASSERT_FAILS(clf_attention_create(NULL, ctx, &d), CLF_ENULL_ARGUMENT,
                 "out");
    ASSERT_FAILS(clf_attention_create(&att, NULL, &d), CLF_ENULL_ARGUMENT,
                 "ctx");
    ASSERT_FAILS(clf_attention_create(&att, ctx, NULL), CLF_ENULL_ARGUMENT,
                 "desc");
    d = good_desc();
    d.d_model = 0;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_EBAD_SIZE, "d_model");
    d = good_desc();
    d.heads = 0;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_EBAD_SIZE, "heads");
    d = good_desc();
    d.max_seq_len = 0;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_EBAD_SIZE,
                 "max_seq_len");
    d = good_desc();
    d.k = 0;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_EBAD_SIZE, "k is");
    d = good_desc();
    d.k = 11;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_EK_TOO_LARGE,
                 "k 11 exceeds max_seq_len 10");
    d = good_desc();
    d.heads = 3;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_ESHAPE_MISMATCH,
                 "not a multiple of heads");
    d = good_desc();
    d.sharing = (clf_sharing)7;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_EBAD_ENUM, "sharing");
    d = good_desc();
    d.share_kv = 1;
    d.bias_v = 1;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_ESHAPE_MISMATCH,
                 "bias_v");
    /* Absurd sizes: products overflow size_t, or exceed the device. */
    d = good_desc();
    d.d_model = SIZE_MAX / 2;
    d.heads = 1;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_ETOO_LARGE,
                 "dimension");
    d = good_desc();
    d.d_model = (size_t)1 << 20;
    d.heads = (size_t)1 << 31;
    d.head_dim = (size_t)1 << 31;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_ESIZE_OVERFLOW,
                 "overflow");
    d = good_desc();
    d.max_seq_len = 1u << 30;
    d.k = 1u << 10;
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CLF_ETOO_LARGE, "E");
    ck_assert_ptr_null(att);
}
END_TEST

START_TEST(attention_set_weight_validates)
{
    clf_attention *att = good_layer();
    clf_attention_desc d = good_desc();
    float w[64] = {0};
    size_t count = 0;

    ASSERT_FAILS(clf_attention_set_weight(NULL, CLF_WEIGHT_Q, w, 64),
                 CLF_ENULL_ARGUMENT, "att");
    ASSERT_FAILS(clf_attention_set_weight(att, CLF_WEIGHT_Q, NULL, 64),
                 CLF_ENULL_ARGUMENT, "W_q");
    ASSERT_FAILS(clf_attention_set_weight(att, (clf_weight)99, w, 64),
                 CLF_EBAD_ENUM, "99");
    ASSERT_FAILS(clf_attention_set_weight(att, (clf_weight)-1, w, 64),
                 CLF_EBAD_ENUM, "-1");
    ASSERT_FAILS(clf_attention_set_weight(att, CLF_WEIGHT_Q, w, 63),
                 CLF_ESHAPE_MISMATCH, "W_q has 63 elements");
    ASSERT_FAILS(clf_attention_set_weight(att, CLF_BIAS_Q, w, 8),
                 CLF_EWEIGHT_UNUSED, "b_q");
    ASSERT_FAILS(clf_attention_weight_size(att, CLF_BIAS_OUT, &count),
                 CLF_EWEIGHT_UNUSED, "b_out");
    ck_assert_int_eq(clf_attention_weight_size(att, CLF_PROJ_E, &count), 0);
    ck_assert_uint_eq(count, 4 * 10);
    ck_assert_int_eq(clf_attention_weight_size(att, CLF_PROJ_E, NULL),
                     CLF_ENULL_ARGUMENT);
    clf_attention_destroy(att);

    d.sharing = CLF_SHARE_KEY_VALUE;
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    ASSERT_FAILS(clf_attention_set_weight(att, CLF_PROJ_F, w, 40),
                 CLF_EWEIGHT_UNUSED, "F");
    clf_attention_destroy(att);
    d.sharing = CLF_SHARE_HEADWISE;
    d.share_kv = 1;
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    ASSERT_FAILS(clf_attention_set_weight(att, CLF_WEIGHT_V, w, 64),
                 CLF_EWEIGHT_UNUSED, "W_v");
    clf_attention_destroy(att);
    ck_assert_str_eq(clf_weight_name(CLF_PROJ_E), "E");
    ck_assert_str_eq(clf_weight_name((clf_weight)42), "?");
}
END_TEST

START_TEST(attention_forward_validates)
{
    clf_attention *att = good_layer();
    clf_attention_desc d = good_desc();
    float x[8 * 10 * 2] = {0}, y[8 * 10 * 2];
    double flops;

    ASSERT_FAILS(clf_attention_forward(NULL, x, 1, 3, y), CLF_ENULL_ARGUMENT,
                 "att");
    ASSERT_FAILS(clf_attention_forward(att, NULL, 1, 3, y), CLF_ENULL_ARGUMENT,
                 "x is NULL");
    ASSERT_FAILS(clf_attention_forward(att, x, 1, 3, NULL), CLF_ENULL_ARGUMENT,
                 "y is NULL");
    ASSERT_FAILS(clf_attention_forward(att, x, 0, 3, y), CLF_EBAD_SIZE,
                 "batch");
    ASSERT_FAILS(clf_attention_forward(att, x, 1, 0, y), CLF_EBAD_SIZE,
                 "seq_len");
    ASSERT_FAILS(clf_attention_forward(att, x, 1, 11, y), CLF_ESEQ_TOO_LONG,
                 "seq_len 11 exceeds max_seq_len 10");
    ASSERT_FAILS(clf_attention_forward(att, x, SIZE_MAX / 4, 10, y),
                 CLF_ESIZE_OVERFLOW, "batch");
    ASSERT_FAILS(clf_attention_forward(att, x, (size_t)1 << 29, 10, y),
                 CLF_ETOO_LARGE, "batch");
    ASSERT_FAILS(clf_attention_set_mode(att, (clf_mode)5), CLF_EBAD_ENUM,
                 "mode 5");
    ASSERT_FAILS(clf_attention_flops(att, (clf_mode)5, 1, 3, &flops),
                 CLF_EBAD_ENUM, "mode");
    ASSERT_FAILS(clf_attention_flops(att, CLF_MODE_FULL, 1, 3, NULL),
                 CLF_ENULL_ARGUMENT, "flops");
    ck_assert_int_eq(clf_attention_flops(att, CLF_MODE_FULL, 1, 3, &flops), 0);
    ck_assert(flops > 0);
    /* A valid call still works after all of that. */
    ck_assert_int_eq(clf_attention_forward(att, x, 2, 10, y), 0);
    clf_attention_destroy(att);

    /* Unset weights are named; full mode does not need E and F. */
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    ASSERT_FAILS(clf_attention_forward(att, x, 1, 3, y), CLF_EWEIGHT_UNSET,
                 "W_q");
    ck_assert_int_eq(clf_attention_randomize(att, 2), 0);
    ck_assert_int_eq(clf_attention_forward(att, x, 1, 3, y), 0);
    clf_attention_destroy(att);
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    {
        float w[80];
        memset(w, 0, sizeof w);
        ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_Q, w, 64), 0);
        ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_K, w, 64), 0);
        ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_V, w, 64), 0);
        ck_assert_int_eq(clf_attention_set_weight(att, CLF_WEIGHT_OUT, w, 64),
                         0);
        ASSERT_FAILS(clf_attention_forward(att, x, 1, 3, y), CLF_EWEIGHT_UNSET,
                     "weight E");
        ck_assert_int_eq(clf_attention_set_mode(att, CLF_MODE_FULL), 0);
        ck_assert_int_eq(clf_attention_forward(att, x, 1, 3, y), 0);
    }
    clf_attention_destroy(att);
}
END_TEST

/* A length whose per-row buffers exceed the device's largest allocation is
 * refused before anything runs, naming the buffer.  (Full mode's n x n
 * scores no longer count: they are made in chunks of rows.) */
START_TEST(attention_workspace_too_large_is_named)
{
    clf_attention_desc d;
    clf_attention *att = NULL;
    clf_device_info info;
    cl_mem small;
    cl_int err;

    ck_assert_int_eq(clf_context_device_info(tu_context(), &info), 0);
    memset(&d, 0, sizeof d);
    d.d_model = 256;
    d.heads = 1;
    d.max_seq_len = (size_t)(info.max_alloc / (256 * sizeof(float))) + 16;
    d.k = 1;
    ck_assert_int_eq(clf_attention_create(&att, tu_context(), &d), 0);
    small = clCreateBuffer(clf_context_cl_context(tu_context()),
                           CL_MEM_READ_WRITE, 64, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ASSERT_FAILS(
        clf_attention_forward_cl(att, small, 0, small, 0, 1, d.max_seq_len),
        CLF_ETOO_LARGE, "queries buffer");
    ck_assert_int_eq(clf_attention_set_mode(att, CLF_MODE_FULL), 0);
    ASSERT_FAILS(
        clf_attention_forward_cl(att, small, 0, small, 0, 1, d.max_seq_len),
        CLF_ETOO_LARGE, "queries buffer");
    clReleaseMemObject(small);
    clf_attention_destroy(att);
}
END_TEST

START_TEST(attention_forward_cl_validates_buffers)
{
    clf_context *ctx = tu_context(), *other = NULL;
    clf_attention *att = good_layer();
    cl_mem small, big, foreign;
    cl_int err;

    small = clCreateBuffer(clf_context_cl_context(ctx), CL_MEM_READ_WRITE,
                           8 * 3 * sizeof(float) - 4, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    big = clCreateBuffer(clf_context_cl_context(ctx), CL_MEM_READ_WRITE,
                         8 * 10 * sizeof(float), NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ASSERT_FAILS(clf_attention_forward_cl(att, NULL, 0, big, 0, 1, 3),
                 CLF_ENULL_ARGUMENT, "x");
    ASSERT_FAILS(clf_attention_forward_cl(att, big, 0, NULL, 0, 1, 3),
                 CLF_ENULL_ARGUMENT, "y");
    ASSERT_FAILS(clf_attention_forward_cl(att, small, 0, big, 0, 1, 3),
                 CLF_EBUFFER_TOO_SMALL, "x holds 92 bytes");
    ASSERT_FAILS(clf_attention_forward_cl(att, big, 0, big, 57, 1, 3),
                 CLF_EBUFFER_TOO_SMALL, "y holds");
    ASSERT_FAILS(clf_attention_forward_cl(att, big, SIZE_MAX - 3, big, 0, 1, 3),
                 CLF_ESIZE_OVERFLOW, "x offset");
    /* A buffer of another context. */
    ck_assert_int_eq(clf_context_create(&other, NULL), 0);
    foreign = clCreateBuffer(clf_context_cl_context(other), CL_MEM_READ_WRITE,
                             8 * 10 * sizeof(float), NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ASSERT_FAILS(clf_attention_forward_cl(att, foreign, 0, big, 0, 1, 3),
                 CLF_EWRONG_CONTEXT, "x belongs to another");
    clReleaseMemObject(foreign);
    clf_context_destroy(other);
    ck_assert_int_eq(clf_attention_forward_cl(att, big, 0, big, 0, 1, 10), 0);
    ck_assert_int_eq(clf_context_finish(ctx), 0);
    clReleaseMemObject(small);
    clReleaseMemObject(big);
    clf_attention_destroy(att);
}
END_TEST

/* A kernel that does not compile: the build fails with OpenCL's status and
 * its log is kept on the context; a missing kernel file is an I/O error. */
START_TEST(kernel_build_failure_keeps_log)
{
    char dir[] = "/tmp/clf-kernels-XXXXXX";
    const char *const *names = clf__kernel_files;
    char path[256];
    clf_context *ctx = NULL;
    clf_attention *att = NULL;
    clf_attention_desc d = good_desc();
    size_t i;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (i = 0; i < (size_t)CLF_KERNEL_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(i == 2 ? "__kernel void clf_softmax_rows(__global float *s) "
                       "{ s[0] = undeclared_symbol_xyz; }\n"
                     : "\n",
              f);
        fclose(f);
    }
    setenv("CLINFORMER_KERNEL_DIR", dir, 1);
    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ASSERT_FAILS(clf_attention_create(&att, ctx, &d), CL_BUILD_PROGRAM_FAILURE,
                 "build");
    ck_assert_ptr_null(att);
    ck_assert_msg(strstr(clf_context_build_log(ctx), "undeclared_symbol_xyz"),
                  "log: %s", clf_context_build_log(ctx));
    clf_context_destroy(ctx);

    snprintf(path, sizeof path, "%s/%s", dir, names[1]);
    remove(path);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ASSERT_FAILS(clf_context_build(ctx), CLF_EIO, names[1]);
    clf_context_destroy(ctx);
    /* A FIFO in its place is refused at once, not waited on. */
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    alarm(10);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ASSERT_FAILS(clf_context_build(ctx), CLF_EIO, "not a regular file");
    alarm(0);
    clf_context_destroy(ctx);
    unsetenv("CLINFORMER_KERNEL_DIR");
    tu_cache_dir_restore();
    for (i = 0; i < (size_t)CLF_KERNEL_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        remove(path);
    }
    rmdir(dir);
}
END_TEST

/* CLINFORMER_KERNELS with an unknown kind or kernel name is an error at
 * the next forward, naming the variable; nothing is written. */
static void
check_override(const char *name, const char *bad, const char *good)
{
    clf_attention_desc d = good_desc();
    clf_context *ctx = NULL;
    clf_attention *att = NULL;
    float x[4 * 32], y[4 * 32];
    size_t i;

    d.d_model = 32;
    d.heads = 2; /* d_h = 16: the fused kernel could run */
    for (i = 0; i < 4 * 32; i++) {
        x[i] = (float)i * 0.01f;
        y[i] = 7.0f;
    }
    setenv(name, bad, 1);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_int_eq(clf_attention_create(&att, ctx, &d), 0);
    ck_assert_int_eq(clf_attention_randomize(att, 1), 0);
    ASSERT_FAILS(clf_attention_forward(att, x, 1, 4, y), CLF_EINVALID_ARGUMENT,
                 name);
    for (i = 0; i < 4 * 32; i++)
        ck_assert_float_eq(y[i], 7.0f);
    setenv(name, good, 1);
    ck_assert_int_eq(clf_attention_forward(att, x, 1, 4, y), 0);
    unsetenv(name);
    clf_attention_destroy(att);
    clf_context_destroy(ctx);
}

START_TEST(overrides_are_checked)
{
    check_override("CLINFORMER_KERNELS", "attend=fast", "attend=gemm");
    check_override("CLINFORMER_KERNELS", "gemm=openblas", "gemm=blocked");
    check_override("CLINFORMER_KERNELS", "speed=fast", "softmax=group");
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, error_table_is_consistent);
    tcase_add_test(tc, context_rejects_bad_selectors);
    tcase_add_test(tc, context_selects_by_kind_and_name);
    tcase_add_test(tc, context_adopt_rejects_bad_objects);
    tcase_add_test(tc, attention_create_validates_desc);
    tcase_add_test(tc, attention_set_weight_validates);
    tcase_add_test(tc, attention_forward_validates);
    tcase_add_test(tc, attention_workspace_too_large_is_named);
    tcase_add_test(tc, attention_forward_cl_validates_buffers);
    tcase_add_test(tc, kernel_build_failure_keeps_log);
    tcase_add_test(tc, overrides_are_checked);
    tcase_add_test(tc, error_message_belongs_to_its_status);
    tcase_add_test(tc, error_every_opencl_status_is_named);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
