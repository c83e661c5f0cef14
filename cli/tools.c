/* clinformer compare and clinformer tune. */
#include "cli.h"

#include <math.h>
#include <string.h>

struct compare_opts {
    double tol;
};

const struct cli_option cli_compare_options[] = {
    {"tol", CLI_NONNEG, offsetof(struct compare_opts, tol), "T",
     "relative tolerance (default 1e-5)", 0, 0, NULL},
    {NULL, CLI_FLAG, 0, NULL, NULL, 0, 0, NULL}};

struct tune_opts {
    const char *device;
    size_t d_model, heads, k, seq_len;
    double budget;
    int choices;
};

#define TO(field) offsetof(struct tune_opts, field)

const struct cli_option cli_tune_options[] = {
    {"device", CLI_STRING, TO(device), "SEL",
     "stable name (pocl:0), device index, cpu, gpu, or\n"
     "part of a platform or device name (default:\n"
     "$CLINFORMER_DEVICE, else the first GPU, else the\n"
     "first CPU device)",
     0, 0, NULL},
    {"d-model", CLI_SIZE, TO(d_model), "D",
     "model width of the timed layer (default 512)", 0, 0, NULL},
    {"heads", CLI_SIZE, TO(heads), "H", "heads (default 8)", 0, 0, NULL},
    {"k", CLI_SIZE, TO(k), "K",
     "compressed length (default 256, or --seq-len when\n"
     "shorter; at most --seq-len)",
     0, 0, NULL},
    {"seq-len", CLI_SIZE, TO(seq_len), "N", "sequence length (default 2048)", 0,
     0, NULL},
    {"budget", CLI_SECONDS, TO(budget), "SECONDS",
     "time to spend, kernel builds included (default 120):\n"
     "a step needing a new build starts only when one build\n"
     "(as measured, else 10 s on a GPU, 60 s on other\n"
     "devices) still fits; the progress ends with what was\n"
     "tried and what was skipped",
     0, 0, NULL},
    {"choices", CLI_FLAG, TO(choices), NULL,
     "instead: forget the device's stored kernel choices\n"
     "(listed first, with the times they were chosen by),\n"
     "so that the next forward of each shape times its\n"
     "candidates again: for choices timed on a busy machine",
     1, 0, NULL},
    {NULL, CLI_FLAG, 0, NULL, NULL, 0, 0, NULL}};

/* The largest difference, its element and max |B|. */
static void
max_difference(const clf_array *a, const clf_array *b, double *err,
               size_t *worst, double *scale)
{
    size_t i;

    *err = 0.0;
    *worst = 0;
    *scale = 0.0;
    for (i = 0; i < a->count; i++) {
        double d = fabs((double)a->data[i] - b->data[i]);
        if (fabs(b->data[i]) > *scale)
            *scale = fabs(b->data[i]);
        if (!(d <= *err)) {
            *err = isnan(d) ? INFINITY : d;
            *worst = i;
        }
    }
}

/* The verdict line: relative to max |B|, or absolute when B is all zeros,
 * where a relative difference has no meaning; 0 or CLI_DIFFER. */
static int
report(const clf_array *a, const clf_array *b, double tol)
{
    double scale, err;
    size_t worst;

    max_difference(a, b, &err, &worst, &scale);
    if (scale == 0.0)
        printf("max |A - B| = %.3g at element %zu; max |B| = 0 (B is all "
               "zeros), so the difference is held absolute to the tolerance "
               "%.3g\n",
               err, worst, tol);
    else
        printf("max |A - B| = %.3g at element %zu; max |B| = %.3g; relative "
               "%.3g (tolerance %.3g)\n",
               err, worst, scale, err / scale, tol);
    return err <= tol * (scale == 0.0 ? 1.0 : scale) ? 0 : CLI_DIFFER;
}

int
cli_compare_main(const struct cli_command *cmd, int argc, char **argv)
{
    struct compare_opts o = {1e-5};
    clf_array a, b;
    size_t i;
    int first, rc, status = CLI_ERROR;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if ((rc = cli_parse(cmd, argc, argv, &o, &first)) != 0)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    if ((rc = clf_npy_load(argv[first], &a)) != 0)
        return cli_fail(NULL, argv[first], rc);
    if ((rc = clf_npy_load(argv[first + 1], &b)) != 0) {
        clf_array_free(&a);
        return cli_fail(NULL, argv[first + 1], rc);
    }
    if (a.data == NULL || b.data == NULL || a.count != b.count ||
        a.ndim != b.ndim ||
        memcmp(a.shape, b.shape, a.ndim * sizeof a.shape[0])) {
        cli_error(cmd->name, "the arrays differ in shape or type");
        goto done;
    }
    if (a.count == 0) {
        /* Nothing can differ; there is no element to name. */
        printf("A and B have no elements: shape (");
        for (i = 0; i < a.ndim; i++)
            printf("%s%zu", i ? ", " : "", a.shape[i]);
        printf("%s), nothing to compare\n", a.ndim == 1 ? "," : "");
        status = 0;
    } else
        status = report(&a, &b, o.tol);
    printf("%s\n", status == 0 ? "MATCH" : "DIFFER");
done:
    clf_array_free(&a);
    clf_array_free(&b);
    return status;
}

static void
progress_line(const char *line, void *user)
{
    (void)user;
    fprintf(stderr, "%s\n", line);
}

/* Refuses a layer the timed forwards could not hold. */
static int
tune_sizes(const char *cmd, struct tune_opts *o)
{
    size_t in[2], scores[3], bytes;

    if (o->k == 0)
        o->k = o->seq_len < 256 ? o->seq_len : 256;
    if (o->k > o->seq_len) {
        cli_error(cmd, "--k %zu exceeds --seq-len %zu", o->k, o->seq_len);
        return CLI_USAGE;
    }
    in[0] = scores[1] = o->seq_len;
    in[1] = o->d_model;
    scores[0] = o->heads;
    scores[2] = o->k;
    if (cli_bytes(in, 2, sizeof(float), &bytes) != 0) {
        cli_error(cmd,
                  "--seq-len %zu times --d-model %zu floats overflows "
                  "size_t",
                  o->seq_len, o->d_model);
        return CLI_USAGE;
    }
    if (cli_bytes(scores, 3, sizeof(float), &bytes) != 0) {
        cli_error(cmd,
                  "--heads %zu times --seq-len %zu times --k %zu floats "
                  "overflows size_t",
                  o->heads, o->seq_len, o->k);
        return CLI_USAGE;
    }
    return 0;
}

/* tune --choices: the stored choices listed, then forgotten. */
static int
forget_choices(clf_context *ctx)
{
    clf_kernel_choice c;
    size_t count = 0, i;
    char kind[32], times[160];
    int rc;

    if ((rc = clf_context_kernel_choice_count(ctx, &count)) != 0)
        return cli_fail(ctx, "reading the kernel choices", rc);
    for (i = 0; i < count; i++)
        if (clf_context_kernel_choice(ctx, i, &c) == 0 &&
            strcmp(c.kind, "throughput") != 0) {
            cli_choice_kind(&c, kind, sizeof kind);
            cli_choice_times(&c, times, sizeof times);
            printf("forgetting %-11s %-24s %-8s%s%s%s\n", kind, c.bucket,
                   c.name, times[0] ? " (timed: " : "", times,
                   times[0] ? ")" : "");
        }
    if ((rc = clf_context_forget_kernel_choices(ctx, &count)) != 0)
        return cli_fail(ctx, "forgetting the kernel choices", rc);
    printf("%zu kernel choice%s forgotten: the next forward of each shape "
           "times its candidates again\n",
           count, count == 1 ? "" : "s");
    return 0;
}

int
cli_tune_main(const struct cli_command *cmd, int argc, char **argv)
{
    struct tune_opts o = {NULL, 512, 8, 0, 2048, 120.0, 0};
    clf_context *ctx = NULL;
    clf_tune_opts to;
    int first, rc;

    if ((rc = cli_parse(cmd, argc, argv, &o, &first)) != 0)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    if ((rc = tune_sizes(cmd->name, &o)) != 0)
        return rc;
    memset(&to, 0, sizeof to);
    to.d_model = o.d_model;
    to.heads = o.heads;
    to.k = o.k;
    to.seq_len = o.seq_len;
    to.budget_s = o.budget;
    to.progress = progress_line;
    if ((rc = clf_context_create(&ctx, o.device)) != 0)
        return cli_fail(NULL, "creating a context", rc);
    if (o.choices) {
        rc = forget_choices(ctx);
        clf_context_destroy(ctx);
        return rc;
    }
    rc = clf_tune(ctx, &to);
    if (rc != 0) {
        cli_fail(ctx, "tuning", rc);
        clf_context_destroy(ctx);
        return CLI_ERROR;
    }
    printf("GEMM tuning in use: %s\n", clf_context_tuning(ctx)[0]
                                           ? clf_context_tuning(ctx)
                                           : "CLBlast defaults");
    clf_context_destroy(ctx);
    return 0;
}
