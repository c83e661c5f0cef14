/* The limits of NVIDIA's OpenCL driver, forced on the suite's device
 * through CLINFORMER_LIMITS: fewer work-items a kernel may take
 * (CL_KERNEL_WORK_GROUP_SIZE of 64 and 32, as a driver gives a kernel
 * with many registers), 48 KiB and 8 KiB of local memory a group, and no
 * cl_khr_fp16.  Under each, a forward in every mode (Linformer, full,
 * causal, causal full) with the GPU path forced (attend=flashwg,
 * gemm=tiled, softmax=group) and with the ways timed must match the
 * double-precision reference, and its launch log must show no work-group
 * over the limit and no kernel that needs more than the limit allows
 * (the work-group streaming kernel: 256 items and 12 KiB; the causal
 * window: 256 items; the tiled GEMM: 64 items and 8.5 KiB; the native
 * half GEMMs without cl_khr_fp16).  A malformed CLINFORMER_LIMITS is
 * refused by name. */
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5

struct limit_case {
    const char *limits;
    size_t max_items;      /* a launch's work-group at most; 0: any */
    const char *absent[4]; /* kernels that must not run under it */
};

static const struct limit_case cases[] = {
    {"wg=64", 64, {"clf_flash_wg", NULL}},
    {"wg=32", 32, {"clf_flash_wg", "clf_gemm_tiled", NULL}},
    {"local=49152", 0, {NULL}},
    {"local=8192", 0, {"clf_flash_wg", "clf_gemm_tiled", NULL}},
};

static const char *const forcings[] = {
    NULL, "attend=flashwg,gemm=tiled,softmax=group",
    "attend=gemm,gemm=tiled,softmax=group"};

/* A context of the suite's device made under CLINFORMER_LIMITS=limits. */
static clf_context *
limited_context(const char *limits)
{
    clf_context *ctx = NULL;
    int rc;

    setenv("CLINFORMER_LIMITS", limits, 1);
    rc = clf_context_create(&ctx, NULL);
    unsetenv("CLINFORMER_LIMITS");
    ck_assert_msg(rc == 0, "context under %s: %s", limits, clf_last_error());
    ck_assert_int_eq(clf_context_record_launches(ctx, 1), 0);
    return ctx;
}

/* No launch with an explicit work-group over max_items (0: any), and none
 * of the kernels named in absent. */
static void
check_launches(clf_context *ctx, const struct limit_case *c, const char *what)
{
    size_t count = 0, i;
    clf_launch l;

    ck_assert_int_eq(clf_context_launch_count(ctx, &count, NULL), 0);
    ck_assert_uint_gt(count, 0);
    for (i = 0; i < count; i++) {
        size_t items;
        ck_assert_int_eq(clf_context_launch(ctx, i, &l), 0);
        items = (l.local[0] ? l.local[0] : 1) * (l.local[1] ? l.local[1] : 1) *
                (l.local[2] ? l.local[2] : 1);
        ck_assert_msg(c->max_items == 0 || l.local[0] == 0 ||
                          items <= c->max_items,
                      "%s: %s launched with a work-group of %zu items", what,
                      l.kernel, items);
    }
    for (i = 0; c->absent[i] != NULL; i++)
        ck_assert_msg(!tu_launched(ctx, c->absent[i]), "%s: %s ran", what,
                      c->absent[i]);
}

static void
forward_checked(struct layer *l, clf_mode mode, int causal, size_t n,
                const char *what)
{
    const size_t B = 2, count = B * n * l->desc.d_model;
    float *x = tu_malloc(count * sizeof *x), *y = tu_malloc(count * sizeof *y);
    double *ref = tu_malloc(count * sizeof *ref);
    clf_forward_opts o;

    memset(&o, 0, sizeof o);
    o.causal = causal;
    tu_fill(x, count, 7 + n, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_set_mode(l->att, mode), 0);
    ck_assert_msg(clf_attention_forward_ex(l->att, x, B, n, y, &o) == 0,
                  "%s: %s", what, clf_last_error());
    ref_attention_ex(&l->ref, mode == CLF_MODE_FULL, x, B, n, NULL, causal,
                     l->desc.causal_block, ref);
    tu_assert_close(y, ref, count, TOL, what);
    free(x);
    free(y);
    free(ref);
}

START_TEST(limits_hold_on_every_mode)
{
    const struct limit_case *c = &cases[_i];
    clf_attention_desc d;
    struct layer l;
    clf_context *ctx;
    char what[200];
    size_t f;
    int m;

    setenv("CLINFORMER_CACHE_DIR", "off", 1); /* choices made under limits
                                                 stay in this context */
    ctx = limited_context(c->limits);
    memset(&d, 0, sizeof d);
    d.d_model = 64;
    d.heads = 4; /* d_h 16: every attention way applies without limits */
    d.max_seq_len = 96;
    d.k = 24;
    d.causal_block = 16;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    layer_make_on(&l, ctx, &d, 5100 + (unsigned long long)_i);
    for (f = 0; f < sizeof forcings / sizeof forcings[0]; f++) {
        if (forcings[f] != NULL)
            setenv("CLINFORMER_KERNELS", forcings[f], 1);
        else
            unsetenv("CLINFORMER_KERNELS");
        for (m = 0; m < 4; m++) {
            snprintf(what, sizeof what, "%s, %s, %s%s", c->limits,
                     forcings[f] ? forcings[f] : "timed",
                     m & 1 ? "full" : "linformer", m & 2 ? " causal" : "");
            ck_assert_int_eq(clf_context_record_launches(ctx, 1), 0);
            forward_checked(&l, m & 1 ? CLF_MODE_FULL : CLF_MODE_LINFORMER,
                            (m & 2) != 0, 90, what);
            check_launches(ctx, c, what);
        }
    }
    unsetenv("CLINFORMER_KERNELS");
    layer_free(&l);
    clf_context_destroy(ctx);
    tu_cache_dir_restore();
}
END_TEST

/* Without cl_khr_fp16 no half arithmetic runs, even forced: a half layer
 * widens its weights (the native half GEMMs are not built). */
START_TEST(limits_no_fp16_widens)
{
    clf_attention_desc d;
    clf_context *ctx;
    clf_attention *att = NULL;
    clf_device_info info;
    float x[2 * 40 * 32], y[2 * 40 * 32];
    size_t i;

    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    ctx = limited_context("fp16=0");
    ck_assert_int_eq(clf_context_device_info(ctx, &info), 0);
    ck_assert_int_eq(info.fp16, 0);
    ck_assert_int_eq(clf__device_has_extension(ctx, "cl_khr_fp16"), 0);
    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 2;
    d.max_seq_len = 40;
    d.k = 8;
    d.precision = CLF_PRECISION_HALF;
    ck_assert_int_eq(clf_attention_create(&att, ctx, &d), 0);
    ck_assert_int_eq(clf_attention_randomize(att, 3), 0);
    tu_fill(x, sizeof x / sizeof x[0], 11, -1.0f, 1.0f);
    setenv("CLINFORMER_KERNELS", "halfgemm=native", 1);
    ck_assert_msg(clf_attention_forward(att, x, 2, 40, y) == 0, "%s",
                  clf_last_error());
    unsetenv("CLINFORMER_KERNELS");
    for (i = 0; i < sizeof y / sizeof y[0]; i++)
        ck_assert(isfinite(y[i]));
    ck_assert(!tu_launched(ctx, "clf_gemm_fp16_nt"));
    ck_assert(!tu_launched(ctx, "clf_gemm_fp16_nn"));
    ck_assert(tu_launched(ctx, "clf_half_widen"));
    clf_attention_destroy(att);
    clf_context_destroy(ctx);
    tu_cache_dir_restore();
}
END_TEST

START_TEST(limits_malformed_are_refused)
{
    static const char *const bad[] = {"wg=0",
                                      "wg=x",
                                      "local=",
                                      "fp16=1",
                                      "threads=4",
                                      "wg=64,,local=1",
                                      "wg=99999999999999999999999"};
    clf_context *ctx = NULL;
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("CLINFORMER_LIMITS", bad[i], 1);
        ASSERT_FAILS(clf_context_create(&ctx, NULL), CLF_EINVALID_ARGUMENT,
                     "CLINFORMER_LIMITS");
        ck_assert_ptr_null(ctx);
    }
    unsetenv("CLINFORMER_LIMITS");
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");

    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, limits_hold_on_every_mode, 0,
                        (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, limits_no_fp16_widens);
    tcase_add_test(tc, limits_malformed_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
