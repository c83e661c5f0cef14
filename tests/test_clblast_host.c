/* A host program that uses CLBlast itself, on its own cl_context and queue
 * on the same device, before, during and after a clinformer context's whole
 * life (create, a forward, destroy), with stored tuning for the device in
 * the cache directory.  Its SGEMM must give the same results throughout and
 * run no slower: clinformer must neither throw CLBlast's compiled programs
 * away nor change CLBlast's parameters behind the host's back. */
#include "internal.h"
#include "testutil.h"

#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 256  /* host SGEMM: N x N x N */
#define RUNS 5 /* timed runs per phase */

static char dir[] = "/tmp/clf-host-XXXXXX";

struct host {
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    cl_mem a, b, c;
    float *out;
};

static void
host_open(struct host *h)
{
    cl_platform_id platform;
    cl_uint np = 0;
    cl_int err;
    float *v = tu_malloc(N * N * sizeof *v);

    ck_assert_int_eq(clGetPlatformIDs(1, &platform, &np), CL_SUCCESS);
    ck_assert_int_eq(
        clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &h->device, NULL),
        CL_SUCCESS);
    h->context = clCreateContext(NULL, 1, &h->device, NULL, NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    h->queue = clCreateCommandQueue(h->context, h->device, 0, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    tu_fill(v, N * N, 11, -1.0f, 1.0f);
    h->a = clCreateBuffer(h->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                          N * N * sizeof *v, v, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    tu_fill(v, N * N, 12, -1.0f, 1.0f);
    h->b = clCreateBuffer(h->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                          N * N * sizeof *v, v, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    h->c = clCreateBuffer(h->context, CL_MEM_READ_WRITE, N * N * sizeof *v,
                          NULL, &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    h->out = v;
}

static void
host_close(struct host *h)
{
    clReleaseMemObject(h->a);
    clReleaseMemObject(h->b);
    clReleaseMemObject(h->c);
    clReleaseCommandQueue(h->queue);
    clReleaseContext(h->context);
    free(h->out);
}

/* One SGEMM, finished; its seconds, and its result in h->out. */
static double
host_sgemm(struct host *h)
{
    double t0 = clf__now_s(), t;
    CLBlastStatusCode st;

    st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo,
                      CLBlastTransposeNo, N, N, N, 1.0f, h->a, 0, N, h->b, 0, N,
                      0.0f, h->c, 0, N, &h->queue, NULL);
    ck_assert_int_eq(st, CLBlastSuccess);
    ck_assert_int_eq(clFinish(h->queue), CL_SUCCESS);
    t = clf__now_s() - t0;
    ck_assert_int_eq(clEnqueueReadBuffer(h->queue, h->c, CL_TRUE, 0,
                                         N * N * sizeof(float), h->out, 0, NULL,
                                         NULL),
                     CL_SUCCESS);
    return t;
}

/* The host context's reference count once it has settled.  After a
 * finished command (host_sgemm ends with a blocking read) some
 * implementations still hold a reference for a moment: Mesa's rusticl
 * drops a command's event, which holds its context, in the queue's own
 * thread after it reports the command complete, so a read at once finds
 * one more than a read a few milliseconds later.  The count is read until
 * SETTLE_READS reads 5 ms apart agree, for at most 5 s. */
#define SETTLE_READS 40
static cl_uint
host_refs(const struct host *h)
{
    cl_uint n = 0, last = 0;
    int same = 0, i;

    for (i = 0; i < 1000 && same < SETTLE_READS; i++) {
        ck_assert_int_eq(clGetContextInfo(h->context,
                                          CL_CONTEXT_REFERENCE_COUNT, sizeof n,
                                          &n, NULL),
                         CL_SUCCESS);
        same = i > 0 && n == last ? same + 1 : 1;
        last = n;
        usleep(5000);
    }
    ck_assert_msg(same >= SETTLE_READS,
                  "host context reference count did not settle in 5 s");
    return n;
}

/* RUNS SGEMMs: the first one's time, the median, and the result. */
static void
host_phase(struct host *h, double *first, double *median, float *result)
{
    double t[RUNS], s;
    int i, j;

    for (i = 0; i < RUNS; i++)
        t[i] = host_sgemm(h);
    *first = t[0];
    for (i = 1; i < RUNS; i++)
        for (j = i; j > 0 && t[j - 1] > t[j]; j--) {
            s = t[j];
            t[j] = t[j - 1];
            t[j - 1] = s;
        }
    *median = t[RUNS / 2];
    memcpy(result, h->out, N * N * sizeof *result);
}

/* A tune file for the device with parameters CLBlast accepts but does not
 * use by default, as clf_tune() could have stored. */
static void
plant_tune_file(void)
{
    clf_device_info info;
    size_t count = 0;
    char path[4300];
    FILE *f;

    ck_assert_int_eq(clf_devices_list(&info, 1, &count), 0);
    clf__tune_path(&info, path, sizeof path);
    ck_assert_msg(path[0] != '\0', "no tune file path");
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "baseline ms=10.000\n"
               "best Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=8 MDIMC=8 "
               "MWG=16 NDIMB=8 NDIMC=8 NWG=16 SA=0 SB=0 STRM=0 STRN=0 "
               "VWM=1 VWN=1\n"
               "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128\n");
    ck_assert_int_eq(fclose(f), 0);
}

static void
clinformer_forward(clf_context *ctx)
{
    clf_attention *att = NULL;
    clf_attention_desc d;
    float *x, *y;

    memset(&d, 0, sizeof d);
    d.d_model = 64;
    d.heads = 4;
    d.max_seq_len = 128;
    d.k = 32;
    ck_assert_int_eq(clf_attention_create(&att, ctx, &d), 0);
    ck_assert_int_eq(clf_attention_randomize(att, 3), 0);
    x = tu_malloc(128 * 64 * sizeof *x);
    y = tu_malloc(128 * 64 * sizeof *y);
    tu_fill(x, 128 * 64, 4, -1.0f, 1.0f);
    ck_assert_msg(clf_attention_forward(att, x, 1, 128, y) == 0, "%s",
                  clf_last_error());
    clf_attention_destroy(att);
    free(x);
    free(y);
}

/* A later phase must not be much slower than the first (the failure this
 * catches is a recompile of CLBlast's GEMM: 0.1 to 20 s against 10 ms on
 * PoCL with its own kernel cache warm); 3x plus some slack for a busy
 * machine, more for a single run than for a median. */
static void
assert_not_slower(const char *what, double t, double before, double slack)
{
    ck_assert_msg(t <= 3.0 * before + slack,
                  "%s: host SGEMM %.1f ms, before clinformer %.1f ms", what,
                  t * 1e3, before * 1e3);
}

START_TEST(clblast_host_unaffected_by_a_context)
{
    struct host h;
    clf_context *ctx = NULL;
    clf_device_info info;
    float *before = tu_malloc(N * N * sizeof *before);
    float *during = tu_malloc(N * N * sizeof *during);
    float *after = tu_malloc(N * N * sizeof *after);
    double first, med0, med;
    char name[128];
    cl_uint refs;

    plant_tune_file();
    host_open(&h);
    host_sgemm(&h); /* CLBlast compiles its kernels for the host here */
    host_phase(&h, &first, &med0, before);
    refs = host_refs(&h);

    ck_assert_msg(clf_context_create(&ctx, "0") == 0, "%s", clf_last_error());
    ck_assert_int_eq(clf_context_device_info(ctx, &info), 0);
    ck_assert_int_eq(
        clGetDeviceInfo(h.device, CL_DEVICE_NAME, sizeof name, name, NULL),
        CL_SUCCESS);
    ck_assert_str_eq(info.name, name);
    ck_assert_str_eq(clf_context_tuning(ctx), "");
    clinformer_forward(ctx);
    ck_assert_uint_eq(host_refs(&h), refs);
    host_phase(&h, &first, &med, during);
    assert_not_slower("while a context lives (first run)", first, med0, 0.05);
    assert_not_slower("while a context lives (median)", med, med0, 0.02);
    clf_context_destroy(ctx);

    /* CLBlast's compiled programs for the host's context hold references
     * to it: a cleared cache shows as fewer. */
    ck_assert_uint_eq(host_refs(&h), refs);
    host_phase(&h, &first, &med, after);
    assert_not_slower("after the context (first run)", first, med0, 0.05);
    assert_not_slower("after the context (median)", med, med0, 0.02);
    ck_assert_msg(memcmp(before, during, N * N * sizeof *before) == 0,
                  "host SGEMM results changed while a context lived");
    ck_assert_msg(memcmp(before, after, N * N * sizeof *before) == 0,
                  "host SGEMM results changed after a context");
    host_close(&h);
    free(before);
    free(during);
    free(after);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("clblast_host");
    TCase *tc = tcase_create("clblast_host");
    int rc;

    if (mkdtemp(dir) == NULL) {
        printf("Bail out! cannot create a temporary cache directory\n");
        return 1;
    }
    setenv("CLINFORMER_CACHE_DIR", dir, 1);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, clblast_host_unaffected_by_a_context);
    suite_add_tcase(s, tc);
    rc = tu_run(s, 1);
    tu_clear_dir(dir);
    rmdir(dir);
    return rc;
}
