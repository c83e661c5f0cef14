/* clinformer command-line tool: errors, checked sizes, the clock. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stdint.h>
#include <time.h>

int
cli_fail(clf_context *ctx, const char *what, int rc)
{
    const char *log = ctx != NULL ? clf_context_build_log(ctx) : "";

    fprintf(stderr, "clinformer: %s: %s (%s): %s\n", what, clf_strerror(rc),
            clf_status_name(rc), clf_error_message(rc));
    if (log != NULL && log[0] != '\0')
        fprintf(stderr, "clinformer: kernel build log:\n%s\n", log);
    return CLI_ERROR;
}

int
cli_mul(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

int
cli_bytes(const size_t *sizes, size_t count, size_t elem, size_t *out)
{
    size_t i, total = elem;

    for (i = 0; i < count; i++)
        if (cli_mul(total, sizes[i], &total) != 0)
            return -1;
    *out = total;
    return 0;
}

double
cli_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int
cli_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}
