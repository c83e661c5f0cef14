/* Device discovery happens once per process, so contexts created from many
 * threads at the same moment all succeed (the first enumeration used to
 * race inside the OpenCL runtime and crash or report no device). */
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
            ck_assert_int_eq(
                pthread_create(&t[i], NULL, create_destroy, &w[i]), 0);
        }
        for (i = 0; i < THREADS; i++)
            ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        pthread_barrier_destroy(&start);
        if (round == 0 && no_device(w[0].rc))
            return;
        for (i = 0; i < THREADS; i++) {
            ck_assert_msg(w[i].rc == 0, "round %d thread %d: %s (%s)", round,
                          i, clf_status_name(w[i].rc), w[i].error);
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

static Suite *
suite(void)
{
    Suite *s = suite_create("discovery");
    TCase *tc = tcase_create("discovery");

    tcase_set_timeout(tc, 120);
    /* First, so that its threads are the process's first discovery. */
    tcase_add_test(tc, discovery_concurrent_contexts_all_succeed);
    tcase_add_test(tc, discovery_list_matches_selection);
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
