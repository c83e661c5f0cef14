#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static clf_context *shared_ctx;
static int tried;

clf_context *
tu_context(void)
{
    if (!tried) {
        tried = 1;
        if (clf_context_create(&shared_ctx, NULL) != 0)
            shared_ctx = NULL;
    }
    return shared_ctx;
}

int
tu_run(Suite *s, int needs_device)
{
    SRunner *sr;
    int failed;

    if (needs_device && tu_context() == NULL) {
        const char *req = getenv("CLINFORMER_REQUIRE_DEVICE");
        if (req != NULL && strcmp(req, "1") == 0) {
            printf("Bail out! no OpenCL device but "
                   "CLINFORMER_REQUIRE_DEVICE=1: %s\n",
                   clf_last_error());
            return 1;
        }
        printf("1..0 # SKIP no OpenCL device: %s\n", clf_last_error());
        return 0;
    }
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_set_tap(sr, "-");
    srunner_run_all(sr, CK_SILENT);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    clf_context_destroy(shared_ctx);
    shared_ctx = NULL;
    return failed == 0 ? 0 : 1;
}

void
tu_fill(float *a, size_t n, unsigned long long seed, float lo, float hi)
{
    unsigned long long st = seed * 2654435761ULL + 1;
    size_t i;

    for (i = 0; i < n; i++) {
        double u;
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        u = (double)(st >> 11) * 0x1.0p-53;
        a[i] = (float)(lo + (hi - lo) * u);
    }
}

double
tu_scale(const double *ref, size_t n)
{
    double m = 1e-30;
    size_t i;

    for (i = 0; i < n; i++)
        if (fabs(ref[i]) > m)
            m = fabs(ref[i]);
    return m;
}

double
tu_max_err(const float *got, const double *ref, size_t n)
{
    double m = 0.0;
    size_t i;

    for (i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= m)) /* also catches NaN */
            m = isnan(e) ? INFINITY : e;
    }
    return m;
}

void
tu_assert_close(const float *got, const double *ref, size_t n, double rtol,
                const char *what)
{
    double scale = tu_scale(ref, n);
    double err = tu_max_err(got, ref, n);

    ck_assert_msg(err <= rtol * scale,
                  "%s: max abs error %.3g exceeds %.1g x scale %.3g", what,
                  err, rtol, scale);
}

void *
tu_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}
