/* Device discovery happens once per process, so contexts created from many
 * threads at the same moment all succeed (the first enumeration used to
 * race inside the OpenCL runtime and crash or report no device); and the
 * selector's rules, on a made-up device list and on this machine's. */
#include "internal.h"
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8
#define ROUNDS 4

struct worker {
    pthread_barrier_t *start;
    int rc;
    char error[256];
    char device[128];
};

static void *
create_destroy(void *arg)
{
    struct worker *w = arg;
    clf_context *ctx = NULL;
    clf_device_info info;

    pthread_barrier_wait(w->start);
    w->rc = clf_context_create(&ctx, NULL);
    if (w->rc != 0) {
        snprintf(w->error, sizeof w->error, "%s", clf_last_error());
        return NULL;
    }
    if (clf_context_device_info(ctx, &info) == 0)
        snprintf(w->device, sizeof w->device, "%s", info.name);
    clf_context_destroy(ctx);
    return NULL;
}

static int
ci_has(const char *hay, const char *needle)
{
    return strstr(hay, needle) != NULL;
}

/* A machine with no OpenCL device at all (then every thread, and a
 * single-threaded try, report CLF_ENO_DEVICE) passes visibly as a skip,
 * unless CLINFORMER_REQUIRE_DEVICE=1. */
static int
no_device(int rc)
{
    const char *req = getenv("CLINFORMER_REQUIRE_DEVICE");
    clf_context *ctx = NULL;

    if (rc != CLF_ENO_DEVICE || clf_context_create(&ctx, NULL) == 0) {
        clf_context_destroy(ctx);
        return 0;
    }
    ck_assert_msg(req == NULL || strcmp(req, "1") != 0,
                  "no OpenCL device but CLINFORMER_REQUIRE_DEVICE=1: %s",
                  clf_last_error());
    printf("# SKIP no OpenCL device: %s\n", clf_last_error());
    return 1;
}

START_TEST(discovery_concurrent_contexts_all_succeed)
{
    struct worker w[THREADS];
    pthread_t t[THREADS];
    pthread_barrier_t start;
    int round, i;

    for (round = 0; round < ROUNDS; round++) {
        ck_assert_int_eq(pthread_barrier_init(&start, NULL, THREADS), 0);
        memset(w, 0, sizeof w);
        for (i = 0; i < THREADS; i++) {
            w[i].start = &start;
            w[i].rc = -1;
            ck_assert_int_eq(pthread_create(&t[i], NULL, create_destroy, &w[i]),
                             0);
        }
        for (i = 0; i < THREADS; i++)
            ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        pthread_barrier_destroy(&start);
        if (round == 0 && no_device(w[0].rc))
            return;
        for (i = 0; i < THREADS; i++) {
            ck_assert_msg(w[i].rc == 0, "round %d thread %d: %s (%s)", round, i,
                          clf_status_name(w[i].rc), w[i].error);
            /* Every thread chose the same device by the default rule. */
            ck_assert_str_eq(w[i].device, w[0].device);
        }
    }
}
END_TEST

/* The list clf_devices_list reports is the one the contexts choose from:
 * each index selects the device the list describes there. */
START_TEST(discovery_list_matches_selection)
{
    clf_device_info infos[16], got;
    clf_context *ctx = NULL;
    size_t count = 0, i;
    char sel[16];

    if (clf_devices_list(infos, 16, &count) == CLF_ENO_DEVICE &&
        no_device(CLF_ENO_DEVICE))
        return;
    ck_assert_int_ge(count, 1);
    for (i = 0; i < count && i < 16; i++) {
        ck_assert_uint_eq(infos[i].index, i);
        snprintf(sel, sizeof sel, "%zu", i);
        if (clf_context_create(&ctx, sel) != 0)
            continue; /* a device below OpenCL 1.2 is listed, not usable */
        ck_assert_int_eq(clf_context_device_info(ctx, &got), 0);
        ck_assert_uint_eq(got.index, i);
        ck_assert_str_eq(got.name, infos[i].name);
        ck_assert_str_eq(got.platform, infos[i].platform);
        clf_context_destroy(ctx);
    }
}
END_TEST

/* A made-up machine: PoCL on an Intel CPU listed first, then Intel's GPU
 * platform, NVIDIA with two GPUs, and Intel's CPU runtime. */
static void
fake(clf_device_info *d, const char *platform, const char *name,
     const char *stable, int gpu)
{
    memset(d, 0, sizeof *d);
    snprintf(d->platform, sizeof d->platform, "%s", platform);
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->stable_name, sizeof d->stable_name, "%s", stable);
    d->is_gpu = gpu;
    d->is_cpu = !gpu;
}

enum { POCL0, INTELGPU0, NVIDIA0, NVIDIA1, INTELCPU0, FAKES };

static void
fake_machine(clf_device_info *d)
{
    fake(&d[POCL0], "Portable Computing Language",
         "pthread-Intel(R) Core(TM) i7-9700 CPU @ 3.00GHz", "pocl:0", 0);
    fake(&d[INTELGPU0], "Intel(R) OpenCL Graphics", "Intel(R) UHD Graphics 630",
         "intel-gpu:0", 1);
    fake(&d[NVIDIA0], "NVIDIA CUDA", "NVIDIA GeForce RTX 3080", "nvidia:0", 1);
    fake(&d[NVIDIA1], "NVIDIA CUDA", "NVIDIA GeForce GTX 1060", "nvidia:1", 1);
    fake(&d[INTELCPU0], "Intel(R) CPU Runtime for OpenCL(TM) Applications",
         "Intel(R) Core(TM) i7-9700 CPU @ 3.00GHz", "intel-cpu:0", 0);
}

static size_t
select_fake(const clf_device_info *d, size_t n, const char *sel)
{
    size_t chosen = 999;
    int rc = clf__device_select(d, n, sel, &chosen);

    ck_assert_msg(rc == 0, "selector \"%s\": %s", sel, clf_last_error());
    return chosen;
}

START_TEST(selector_rules_in_order)
{
    clf_device_info d[FAKES];
    size_t chosen;

    fake_machine(d);
    ck_assert_uint_eq(select_fake(d, FAKES, NULL), INTELGPU0);
    ck_assert_uint_eq(select_fake(d, FAKES, ""), INTELGPU0);
    ck_assert_uint_eq(select_fake(d, FAKES, "3"), NVIDIA1);
    ck_assert_uint_eq(select_fake(d, FAKES, "CPU"), POCL0);
    ck_assert_uint_eq(select_fake(d, FAKES, "gpu"), INTELGPU0);
    /* Stable names, whole or the platform part alone, any case. */
    ck_assert_uint_eq(select_fake(d, FAKES, "pocl"), POCL0);
    ck_assert_uint_eq(select_fake(d, FAKES, "PoCL:0"), POCL0);
    ck_assert_uint_eq(select_fake(d, FAKES, "nvidia:1"), NVIDIA1);
    ck_assert_uint_eq(select_fake(d, FAKES, "nvidia"), NVIDIA0);
    ck_assert_uint_eq(select_fake(d, FAKES, "intel-cpu"), INTELCPU0);
    /* A platform name wins over a device name listed earlier. */
    ck_assert_uint_eq(select_fake(d, FAKES, "intel"), INTELGPU0);
    ck_assert_uint_eq(select_fake(d, FAKES, "cpu runtime"), INTELCPU0);
    ck_assert_uint_eq(select_fake(d, FAKES, "cuda"), NVIDIA0);
    /* Device names last. */
    ck_assert_uint_eq(select_fake(d, FAKES, "i7-9700"), POCL0);
    ck_assert_uint_eq(select_fake(d, FAKES, "gtx"), NVIDIA1);
    /* Only PoCL: "intel" falls through to its device's name. */
    ck_assert_uint_eq(select_fake(d, 1, "intel"), POCL0);
    /* No such index within a platform, no such name. */
    ck_assert_int_eq(clf__device_select(d, FAKES, "nvidia:2", &chosen),
                     CLF_EDEVICE_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "nvidia:2"));
    ck_assert_int_eq(clf__device_select(d, FAKES, "pocl:", &chosen),
                     CLF_EDEVICE_NOT_FOUND);
    ck_assert_int_eq(clf__device_select(d, FAKES, "5", &chosen),
                     CLF_EDEVICE_NOT_FOUND);
    ck_assert_int_eq(clf__device_select(d, 0, "", &chosen), CLF_ENO_DEVICE);
}
END_TEST

static void
check_short(const char *name, const char *vendor, const char *want)
{
    char buf[32];

    memset(buf, 'x', sizeof buf);
    clf__platform_short(name, vendor, buf, sizeof buf);
    ck_assert_msg(strcmp(buf, want) == 0, "\"%s\" / \"%s\": got %s, want %s",
                  name, vendor, buf, want);
}

START_TEST(selector_platform_short_names)
{
    check_short("Portable Computing Language", "The pocl project", "pocl");
    check_short("rusticl", "Mesa/X.org", "rusticl");
    check_short("Clover", "Mesa", "clover");
    check_short("NVIDIA CUDA", "NVIDIA Corporation", "nvidia");
    check_short("AMD Accelerated Parallel Processing",
                "Advanced Micro Devices, Inc.", "amd");
    check_short("Intel(R) OpenCL HD Graphics", "Intel(R) Corporation",
                "intel-gpu");
    check_short("Intel(R) FPGA Emulation Platform for OpenCL(TM)",
                "Intel(R) Corporation", "intel-fpga");
    check_short("Intel(R) CPU Runtime for OpenCL(TM) Applications",
                "Intel(R) Corporation", "intel-cpu");
    check_short("Apple", "Apple", "apple");
    check_short("Oclgrind", "University of Bristol", "oclgrind");
    /* Unknown: the vendor is tried, then the name's first word. */
    check_short("Acme Compute", "Nvidia-partner", "nvidia");
    check_short("Acme(TM) Compute 2", "Acme", "acmetm");
    check_short("", "Foo Labs", "foo");
    check_short("", "", "platform");
    check_short("(R)", "", "r");
}
END_TEST

/* On this machine: every device has a unique stable name that selects it;
 * "pocl" selects PoCL's first device wherever PoCL is installed. */
START_TEST(selector_stable_names_select_their_device)
{
    clf_device_info infos[16], got;
    clf_context *ctx = NULL;
    size_t count = 0, i, j;
    int pocl = -1;

    if (clf_devices_list(infos, 16, &count) == CLF_ENO_DEVICE &&
        no_device(CLF_ENO_DEVICE))
        return;
    for (i = 0; i < count && i < 16; i++) {
        ck_assert_ptr_nonnull(strchr(infos[i].stable_name, ':'));
        for (j = 0; j < i; j++)
            ck_assert_str_ne(infos[i].stable_name, infos[j].stable_name);
        if (pocl < 0 && strncmp(infos[i].stable_name, "pocl:", 5) == 0)
            pocl = (int)i;
        if (clf_context_create(&ctx, infos[i].stable_name) != 0)
            continue; /* listed, but below OpenCL 1.2 */
        ck_assert_int_eq(clf_context_device_info(ctx, &got), 0);
        ck_assert_uint_eq(got.index, i);
        ck_assert_str_eq(got.stable_name, infos[i].stable_name);
        clf_context_destroy(ctx);
    }
    for (i = 0; i < count && i < 16; i++)
        if (ci_has(infos[i].platform, "Portable Computing Language"))
            ck_assert_int_ge(pocl, 0);
    if (pocl >= 0) {
        setenv("CLINFORMER_DEVICE", "pocl", 1);
        ck_assert_msg(clf_context_create(&ctx, NULL) == 0, "pocl: %s",
                      clf_last_error());
        unsetenv("CLINFORMER_DEVICE");
        ck_assert_int_eq(clf_context_device_info(ctx, &got), 0);
        ck_assert_str_eq(got.stable_name, infos[pocl].stable_name);
        ck_assert_str_eq(got.stable_name, "pocl:0");
        clf_context_destroy(ctx);
    }
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("discovery");
    TCase *tc = tcase_create("discovery");

    tcase_set_timeout(tc, 120);
    /* First, so that its threads are the process's first discovery. */
    tcase_add_test(tc, discovery_concurrent_contexts_all_succeed);
    tcase_add_test(tc, discovery_list_matches_selection);
    tcase_add_test(tc, selector_rules_in_order);
    tcase_add_test(tc, selector_platform_short_names);
    tcase_add_test(tc, selector_stable_names_select_their_device);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    /* No device check before the suite: the threads of the first test must
     * be the process's first discovery. */
    return tu_run(suite(), 0);
}
