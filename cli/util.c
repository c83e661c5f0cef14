/* clinformer command-line tool: errors, checked sizes, the clock. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stdint.h>
#include <string.h>
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

/* How much of the warnings of the context cli_context made last were
 * printed (the tool makes one at a time). */
static size_t warned;

int
cli_context(clf_context **ctx, const char *selector)
{
    int rc = clf_context_create(ctx, selector);
    const char *warn;

    if (rc != 0)
        return cli_fail(NULL, "creating a context", rc);
    /* The tool owns its process, so it may apply stored GEMM tuning to
     * CLBlast process-wide; a library caller decides for itself. */
    rc = clf_tune_apply_process_wide(*ctx);
    warn = clf_context_warnings(*ctx);
    if (warn[0] != '\0')
        fprintf(stderr, "clinformer: warning: %s\n", warn);
    warned = strlen(warn);
    if (rc != 0) {
        cli_fail(*ctx, "applying stored GEMM tuning", rc);
        clf_context_destroy(*ctx);
        *ctx = NULL;
        return CLI_ERROR;
    }
    return 0;
}

void
cli_context_done(clf_context *ctx)
{
    const char *warn = clf_context_warnings(ctx);

    if (ctx != NULL && strlen(warn) > warned)
        fprintf(stderr, "clinformer: warning: %s\n",
                warn + warned + (warned > 0 ? 2 : 0));
    warned = 0;
    clf_context_destroy(ctx);
}

const struct cli_choice cli_shard_choices[] = {{"auto", CLF_SHARD_AUTO},
                                               {"seq", CLF_SHARD_SEQ},
                                               {"batch", CLF_SHARD_BATCH},
                                               {NULL, 0}};

int
cli_is_device_list(const char *selector)
{
    return selector != NULL &&
           (strcmp(selector, "all") == 0 || strchr(selector, ',') != NULL);
}

int
cli_group(clf_group **g, const char *devices, int shard_by)
{
    size_t i;
    int rc = clf_group_create(g, devices, 0);

    if (rc != 0) {
        *g = NULL;
        return cli_fail(NULL, "creating the device group", rc);
    }
    clf_group_set_strategy(*g, (clf_shard_by)shard_by);
    for (i = 0; i < clf_group_size(*g); i++) {
        clf_context *ctx = clf_group_context(*g, i);
        const char *warn;
        rc = clf_tune_apply_process_wide(ctx);
        warn = clf_context_warnings(ctx);
        if (warn[0] != '\0')
            fprintf(stderr, "clinformer: warning: %s\n", warn);
        if (rc != 0) {
            cli_fail(ctx, "applying stored GEMM tuning", rc);
            clf_group_destroy(*g);
            *g = NULL;
            return CLI_ERROR;
        }
    }
    return 0;
}

void
cli_print_split(const clf_group *g)
{
    clf_device_info info;
    clf_shard_by by = CLF_SHARD_AUTO;
    size_t i, used = 0;

    printf("devices:");
    for (i = 0; i < clf_group_size(g); i++) {
        clf_context_device_info(clf_group_context(g, i), &info);
        printf("%s %s", i ? "," : "", info.stable_name);
    }
    clf_group_last_split(g, &by, &used);
    printf("; split by %s over %zu\n",
           by == CLF_SHARD_BATCH ? "sequences" : "positions", used);
}

static const char *const source_names[] = {"not chosen", "stored", "timed",
                                           "forced"};

void
cli_choice_kind(const clf_kernel_choice *c, char *buf, size_t cap)
{
    static const char *const roles[] = {"comp", "score", "weigh", "ffn"};
    const char *role = "proj";
    size_t i, len;

    if (strcmp(c->kind, "gemm") != 0) {
        snprintf(buf, cap, "%s", c->kind);
        return;
    }
    for (i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        len = strlen(roles[i]);
        if (strncmp(c->bucket, roles[i], len) == 0 && c->bucket[len] == '.')
            role = roles[i];
    }
    snprintf(buf, cap, "gemm[%s]", role);
}

void
cli_choice_times(const clf_kernel_choice *c, char *buf, size_t cap)
{
    size_t len = 0;
    const char *name;
    int i;

    buf[0] = '\0';
    for (i = 0; i < 4 && len < cap; i++) {
        if ((name = clf_kernel_candidate_name(c->kind, i)) == NULL)
            break;
        if (c->ms[i] == 0.0)
            continue;
        len += (size_t)(c->ms[i] < 0.0
                            ? snprintf(buf + len, cap - len, "%s%s failed",
                                       len ? ", " : "", name)
                            : snprintf(buf + len, cap - len, "%s%s %.2f ms",
                                       len ? ", " : "", name, c->ms[i]));
    }
}

/* One line per choice of the listing "softmax: X (...); gemm: Y (...);
 * gemm[comp]: ...", as "  softmax = X (...)", the projections' GEMMs
 * named gemm[proj]. */
static void
print_choice_lines(const char *text)
{
    const char *s = text, *end, *colon;

    while (*s != '\0') {
        end = strstr(s, "; ");
        if (end == NULL)
            end = s + strlen(s);
        colon = memchr(s, ':', (size_t)(end - s));
        if (colon == NULL)
            break;
        printf("  %.*s%s =%.*s\n", (int)(colon - s), s,
               colon - s == 4 && strncmp(s, "gemm", 4) == 0 ? "[proj]" : "",
               (int)(end - colon - 1), colon + 1);
        s = *end != '\0' ? end + 2 : end;
    }
}

void
cli_print_choices(clf_context *ctx, int verbose)
{
    clf_kernel_choice c;
    size_t count = 0, i;
    char kind[32], times[160];

    printf("kernel choices: %s\n", clf_context_kernel_choices(ctx));
    if (!verbose)
        return;
    print_choice_lines(clf_context_kernel_choices(ctx));
    if (clf_context_kernel_choice_count(ctx, &count) != 0)
        return;
    printf("stored or timed on this device (%zu):\n", count);
    for (i = 0; i < count; i++)
        if (clf_context_kernel_choice(ctx, i, &c) == 0) {
            cli_choice_kind(&c, kind, sizeof kind);
            cli_choice_times(&c, times, sizeof times);
            printf("  %-11s %-24s %-8s (%s)\n", kind, c.bucket, c.name,
                   (unsigned)c.source < 4 ? source_names[c.source] : "?");
            if (times[0] != '\0')
                printf("      times: %s\n", times);
        }
}

/* "64x32x1" for the dims sizes of v. */
static void
dims_text(char *buf, size_t cap, const size_t *v, unsigned dims)
{
    int len = snprintf(buf, cap, "%zu", v[0]);
    unsigned d;

    for (d = 1; d < dims && len > 0 && (size_t)len < cap; d++)
        len += snprintf(buf + len, cap - (size_t)len, "x%zu", v[d]);
}

void
cli_print_launches(clf_context *ctx)
{
    size_t count = 0, dropped = 0, i;
    char g[64], l[64];
    clf_launch e;

    if (clf_context_launch_count(ctx, &count, &dropped) != 0)
        return;
    printf("launches (%zu kernels and geometries):\n", count);
    printf("  %-22s %-16s %-12s %10s %12s %6s\n", "kernel", "global", "local",
           "groups", "items", "calls");
    for (i = 0; i < count; i++) {
        if (clf_context_launch(ctx, i, &e) != 0)
            return;
        if (e.dims == 0) {
            printf("  %-22s m %zu, n %zu, k %zu, batch %zu (its own kernels "
                   "not seen) %6zu\n",
                   e.kernel, e.global[0], e.global[1], e.global[2], e.local[0],
                   e.calls);
            continue;
        }
        dims_text(g, sizeof g, e.global, e.dims);
        if (e.local[0] != 0)
            dims_text(l, sizeof l, e.local, e.dims);
        else
            snprintf(l, sizeof l, "driver's");
        printf("  %-22s %-16s %-12s %10zu %12zu %6zu\n", e.kernel, g, l,
               e.groups, e.items, e.calls);
    }
    if (dropped != 0)
        printf("  (%zu launches past the log's room not listed)\n", dropped);
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
