/* Guard bands (src/runtime/guard.c, clf_context_guard_buffers): a kernel
 * of the test's own writes at a chosen index of a guarded buffer; a write
 * inside passes, one element past the end or before the start is reported
 * with the kernel and the buffer, an add to a band (y[i] += ...) too, a
 * buffer whose size is no multiple of 4 is guarded to its last byte, the
 * band is refilled after a report, a released buffer leaves the checks, and
 * with guards off buffers are plain.  A whole forward with guards on gives
 * the same bits as without. */
#include "internal.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static const char probe_src[] =
    "__kernel void probe_store(__global float *p, const int i)\n"
    "{ p[i] = 1.0f; }\n"
    "__kernel void probe_add(__global float *p, const int i)\n"
    "{ p[i] += 1.0f; }\n"
    "__kernel void probe_byte(__global uchar *p, const int i)\n"
    "{ p[i] = 7; }\n";

struct probe {
    clf_context *ctx;
    cl_program prog;
    cl_kernel store, add, byte;
};

static void
probe_make(struct probe *p)
{
    const char *src = probe_src;
    cl_int err;

    p->ctx = tu_context();
    ck_assert_ptr_nonnull(p->ctx);
    p->prog = clCreateProgramWithSource(p->ctx->context, 1, &src, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(
        clBuildProgram(p->prog, 1, &p->ctx->device, "", NULL, NULL),
        CL_SUCCESS);
    p->store = clCreateKernel(p->prog, "probe_store", &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    p->add = clCreateKernel(p->prog, "probe_add", &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    p->byte = clCreateKernel(p->prog, "probe_byte", &err);
    ck_assert_int_eq(err, CL_SUCCESS);
}

static void
probe_free(struct probe *p)
{
    clReleaseKernel(p->store);
    clReleaseKernel(p->add);
    clReleaseKernel(p->byte);
    clReleaseProgram(p->prog);
    clf_context_guard_buffers(p->ctx, 0);
}

/* One work-item of k at index i of m, through the library's launcher. */
static void
poke(struct probe *p, cl_kernel k, cl_mem m, int i)
{
    size_t one = 1;

    ck_assert_int_eq(clSetKernelArg(k, 0, sizeof m, &m), CL_SUCCESS);
    ck_assert_int_eq(clSetKernelArg(k, 1, sizeof i, &i), CL_SUCCESS);
    ck_assert_int_eq(clf__enqueue_nd(p->ctx, k, 1, &one, &one), CL_SUCCESS);
}

static cl_mem
guarded(struct probe *p, size_t bytes, const char *what)
{
    cl_int err;
    cl_mem m =
        clf__mem_create(p->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err, what);

    ck_assert_msg(m != NULL, "clf__mem_create failed (%d)", err);
    return m;
}

START_TEST(guard_finds_writes_outside)
{
    struct probe p;
    cl_mem m;

    probe_make(&p);
    ck_assert_int_eq(clf_context_guard_buffers(p.ctx, 1), 0);
    ck_assert_int_eq(clf_context_guard_check(p.ctx), 0);
    m = guarded(&p, 25 * sizeof(float), "probe floats");
    poke(&p, p.store, m, 0);
    poke(&p, p.store, m, 24);
    ck_assert_int_eq(clf_context_guard_check(p.ctx), 0);
    poke(&p, p.store, m, 25);
    ASSERT_FAILS(clf_context_guard_check(p.ctx), CLF_EOUT_OF_BOUNDS,
                 "kernel probe_store wrote outside device buffer probe "
                 "floats (100 bytes): the first byte changed is byte 0 "
                 "past its end");
    /* Reported once, the band refilled. */
    ck_assert_int_eq(clf_context_guard_check(p.ctx), 0);
    poke(&p, p.store, m, 3);
    ck_assert_int_eq(clf_context_guard_check(p.ctx), 0);
    poke(&p, p.store, m, -1);
    ASSERT_FAILS(clf_context_guard_check(p.ctx), CLF_EOUT_OF_BOUNDS,
                 "4 bytes before its start");
    /* An add to a signalling NaN quiets it: the band changes. */
    poke(&p, p.add, m, 26);
    ASSERT_FAILS(clf_context_guard_check(p.ctx), CLF_EOUT_OF_BOUNDS,
                 "kernel probe_add wrote outside device buffer probe floats");
    clReleaseMemObject(m);
    probe_free(&p);
}
END_TEST

START_TEST(guard_covers_odd_sizes_and_releases)
{
    struct probe p;
    cl_mem m, b;

    probe_make(&p);
    ck_assert_int_eq(clf_context_guard_buffers(p.ctx, 1), 0);
    b = guarded(&p, 5, "probe bytes");
    poke(&p, p.byte, b, 4);
    ck_assert_int_eq(clf_context_guard_check(p.ctx), 0);
    poke(&p, p.byte, b, 5);
    ASSERT_FAILS(clf_context_guard_check(p.ctx), CLF_EOUT_OF_BOUNDS,
                 "probe bytes (5 bytes): the first byte changed is byte 0 "
                 "past its end");
    /* A released buffer is no longer checked, and later ones are. */
    clReleaseMemObject(b);
    m = guarded(&p, 8, "probe later");
    poke(&p, p.store, m, 1);
    ck_assert_int_eq(clf_context_guard_check(p.ctx), 0);
    poke(&p, p.store, m, 2);
    ASSERT_FAILS(clf_context_guard_check(p.ctx), CLF_EOUT_OF_BOUNDS,
                 "probe later");
    clReleaseMemObject(m);
    /* Guards off: a plain buffer, nothing checked. */
    ck_assert_int_eq(clf_context_guard_buffers(p.ctx, 0), 0);
    m = guarded(&p, 100, "plain");
    poke(&p, p.store, m, 24);
    ck_assert_int_eq(clf_context_guard_check(p.ctx), 0);
    clReleaseMemObject(m);
    probe_free(&p);
}
END_TEST

/* y of one Linformer forward (D 24, h 3, n 37, k 11, B 2), guards on or
 * off for the layer's buffers. */
static float *
forward(clf_context *ctx, int guards)
{
    clf_attention_desc d;
    clf_attention *att = NULL;
    float *x = tu_malloc(2 * 37 * 24 * sizeof *x);
    float *y = tu_malloc(2 * 37 * 24 * sizeof *y);

    memset(&d, 0, sizeof d);
    d.d_model = 24, d.heads = 3, d.max_seq_len = 40, d.k = 11;
    d.bias_out = 1;
    ck_assert_int_eq(clf_context_guard_buffers(ctx, guards), 0);
    ck_assert_int_eq(clf_attention_create(&att, ctx, &d), 0);
    ck_assert_int_eq(clf_attention_randomize(att, 5), 0);
    tu_fill(x, 2 * 37 * 24, 6, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_forward(att, x, 2, 37, y), 0);
    ck_assert_int_eq(clf_context_guard_check(ctx), 0);
    clf_attention_destroy(att);
    clf_context_guard_buffers(ctx, 0);
    free(x);
    return y;
}

START_TEST(guard_keeps_the_forward_bits)
{
    clf_context *ctx = tu_context();
    float *plain, *guard;

    ck_assert_ptr_nonnull(ctx);
    plain = forward(ctx, 0);
    guard = forward(ctx, 1);
    ck_assert_msg(memcmp(plain, guard, 2 * 37 * 24 * sizeof *plain) == 0,
                  "the forward with guard bands gave other bits");
    free(plain);
    free(guard);
}
END_TEST

START_TEST(guard_null_context)
{
    ASSERT_FAILS(clf_context_guard_buffers(NULL, 1), CLF_ENULL_ARGUMENT, "ctx");
    ASSERT_FAILS(clf_context_guard_check(NULL), CLF_ENULL_ARGUMENT, "ctx");
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("guard");
    TCase *tc = tcase_create("guard");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, guard_finds_writes_outside);
    tcase_add_test(tc, guard_covers_odd_sizes_and_releases);
    tcase_add_test(tc, guard_keeps_the_forward_bits);
    tcase_add_test(tc, guard_null_context);
    suite_add_tcase(s, tc);
    return tu_run(s, 1);
}
