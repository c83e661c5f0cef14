/* clinformer stream: a trained model fed its input a chunk of positions at
 * a time (clf_stream_*), in prefix-safe causal mode. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct stream_opts {
    const char *device, *weights, *input, *output, *lengths;
    size_t heads, block, chunk; /* 0: not given */
    int full, check;
};

#define SO(field) offsetof(struct stream_opts, field)

const struct cli_option cli_stream_options[] = {
    {"weights", CLI_PATH, SO(weights), "FILE",
     "safetensors file (as clinformer run takes it)", 0, 0, NULL},
    {"input", CLI_PATH, SO(input), "FILE",
     "input .npy: float32 (B, n, D) or (n, D); an LM's int\n"
     "token ids (B, n) or (n)",
     0, 0, NULL},
    {"output", CLI_OUTPUT, SO(output), "FILE",
     "the outputs of every append, (B, n, D) or (B, n, vocab)\n"
     "float32 (- is standard output)",
     0, 0, NULL},
    {"chunk", CLI_SIZE, SO(chunk), "M", "positions per append (default 1)", 0,
     0, NULL},
    {"block", CLI_SIZE, SO(block), "B",
     "causal block size b of prefix-safe causal Linformer\n"
     "(required unless --full)",
     0, 0, NULL},
    {"full", CLI_FLAG, SO(full), NULL,
     "causal full attention instead (its key/value cache\n"
     "grows with the stream)",
     1, 0, NULL},
    {"lengths", CLI_STRING, SO(lengths), "L1,L2,..",
     "per-sequence lengths: positions from a sequence's\n"
     "length on are appended as padding",
     0, 0, NULL},
    {"check", CLI_FLAG, SO(check), NULL,
     "also run the whole-sequence causal forward and compare\n"
     "(MATCH within 1e-5 of its largest value, exit 0;\n"
     "else DIFFER, exit 3)",
     1, 0, NULL},
    {"heads", CLI_SIZE, SO(heads), "H",
     "heads, when the file's metadata lacks \"heads\"", 0, 0, NULL},
    {"device", CLI_STRING, SO(device), "SEL",
     "the device, as clinformer run takes it (one device)", 0, 0, NULL},
    {NULL, CLI_FLAG, 0, NULL, NULL, 0, 0, NULL}};

struct stream_run {
    const struct stream_opts *o;
    clf_context *ctx;
    clf_model *m;
    clf_stream *st;
    clf_model_info info;
    clf_array x;
    unsigned char *mask; /* B x n, or NULL */
    float *y;
    double *lat; /* seconds per append */
    size_t B, n, w_in, w_out, appends;
};

static void
stream_free(struct stream_run *r)
{
    clf_stream_destroy(r->st);
    clf_model_destroy(r->m);
    cli_context_done(r->ctx);
    clf_array_free(&r->x);
    free(r->mask);
    free(r->y);
    free(r->lat);
}

/* Whether the input's type and rank suit the model (said when not). */
static int
input_kind(const struct stream_run *r)
{
    const clf_array *x = &r->x;

    if (r->info.vocab != 0) {
        if (x->ids != NULL && x->ndim >= 1 && x->ndim <= 2)
            return 0;
        cli_error("stream",
                  "%s: an LM takes an int array of token ids shaped (B, n) "
                  "or (n)",
                  r->o->input);
        return CLI_ERROR;
    }
    if (x->data != NULL && x->ndim >= 2 && x->ndim <= 3 &&
        x->shape[x->ndim - 1] == r->info.d_model)
        return 0;
    cli_error("stream", "%s: expected float32 shaped (B, n, %zu) or (n, %zu)",
              r->o->input, r->info.d_model, r->info.d_model);
    return CLI_ERROR;
}

/* B, n and the widths, from the input against the model. */
static int
input_shape(struct stream_run *r)
{
    const clf_array *x = &r->x;
    const int lm = r->info.vocab != 0;
    size_t shape[3], bytes;

    if (input_kind(r) != 0)
        return CLI_ERROR;
    r->B = x->ndim == (lm ? 2u : 3u) ? x->shape[0] : 1;
    r->n = x->shape[lm ? x->ndim - 1 : x->ndim - 2];
    r->w_in = lm ? 1 : r->info.d_model;
    r->w_out = lm ? r->info.vocab : r->info.d_model;
    shape[0] = r->B;
    shape[1] = r->n;
    shape[2] = r->w_out;
    if (r->B == 0 || r->n == 0 || cli_bytes(shape, 3, sizeof(double), &bytes)) {
        cli_error("stream", "%s: empty, or too large", r->o->input);
        return CLI_ERROR;
    }
    return 0;
}

static int
lengths_mask(struct stream_run *r)
{
    size_t *lens = NULL, count, b, t;
    int rc;

    if (r->o->lengths == NULL)
        return 0;
    rc = cli_list_parse("stream", "--lengths", "length", r->o->lengths, r->n,
                        &lens, &count);
    if (rc != 0)
        return rc;
    if (count != r->B) {
        cli_error("stream",
                  "--lengths gives %zu lengths; the input has %zu "
                  "sequences",
                  count, r->B);
        free(lens);
        return CLI_USAGE;
    }
    r->mask = malloc(r->B * r->n);
    for (b = 0; r->mask != NULL && b < r->B; b++)
        for (t = 0; t < r->n; t++)
            r->mask[b * r->n + t] = t < lens[b];
    free(lens);
    return r->mask != NULL ? 0 : CLI_ERROR;
}

/* One append of positions t..t+m-1 of every sequence, timed. */
static int
append_one(struct stream_run *r, size_t t, size_t m, void *xc,
           unsigned char *mc, float *yc)
{
    const size_t esz = r->x.ids ? sizeof(long long) : sizeof(float);
    const char *src =
        r->x.ids ? (const char *)r->x.ids : (const char *)r->x.data;
    double t0;
    size_t b;
    int rc;

    for (b = 0; b < r->B; b++) {
        memcpy((char *)xc + b * m * r->w_in * esz,
               src + (b * r->n + t) * r->w_in * esz, m * r->w_in * esz);
        if (r->mask != NULL)
            memcpy(mc + b * m, r->mask + b * r->n + t, m);
    }
    t0 = cli_now();
    rc = r->x.ids
             ? clf_stream_append_tokens(r->st, xc, r->B, m, r->mask ? mc : NULL,
                                        yc)
             : clf_stream_append(r->st, xc, r->B, m, r->mask ? mc : NULL, yc);
    r->lat[r->appends++] = cli_now() - t0;
    if (rc != 0)
        return rc;
    for (b = 0; b < r->B; b++)
        memcpy(r->y + (b * r->n + t) * r->w_out, yc + b * m * r->w_out,
               m * r->w_out * sizeof *yc);
    return 0;
}

static int
feed(struct stream_run *r)
{
    const size_t m = r->o->chunk ? r->o->chunk : 1;
    const size_t esz = r->x.ids ? sizeof(long long) : sizeof(float);
    void *xc = malloc(r->B * m * r->w_in * esz);
    unsigned char *mc = malloc(r->B * m);
    float *yc = malloc(r->B * m * r->w_out * sizeof *yc);
    size_t t, step;
    int rc = 0;

    r->y = malloc(r->B * r->n * r->w_out * sizeof *r->y);
    r->lat = malloc(((r->n + m - 1) / m) * sizeof *r->lat);
    if (xc == NULL || mc == NULL || yc == NULL || r->y == NULL ||
        r->lat == NULL)
        rc = CLF_ENO_MEMORY;
    for (t = 0; rc == 0 && t < r->n; t += step) {
        step = r->n - t < m ? r->n - t : m;
        rc = append_one(r, t, step, xc, mc, yc);
    }
    free(xc);
    free(mc);
    free(yc);
    return rc;
}

/* Median and 99th percentile of the appends' latencies (the first
 * excluded when there are others: it builds the kernels). */
static void
print_latency(const struct stream_run *r)
{
    const size_t skip = r->appends > 1, cnt = r->appends - skip;
    double *t = malloc(cnt * sizeof *t);
    size_t p99;

    if (t == NULL)
        return;
    memcpy(t, r->lat + skip, cnt * sizeof *t);
    qsort(t, cnt, sizeof *t, cli_cmp_double);
    p99 = (size_t)ceil(0.99 * (double)cnt);
    printf("append latency: median %.3f ms, p99 %.3f ms, max %.3f ms over "
           "%zu appends (the first, %.3f ms, builds the kernels%s)\n",
           t[cnt / 2] * 1e3, t[p99 ? p99 - 1 : 0] * 1e3, t[cnt - 1] * 1e3, cnt,
           r->lat[0] * 1e3, skip ? ", left out" : "");
    free(t);
}

/* --check: the whole-sequence causal forward against the stream's. */
static int
check_whole(struct stream_run *r)
{
    const size_t count = r->B * r->n * r->w_out;
    float *w = malloc(count * sizeof *w);
    clf_forward_opts fo;
    double err = 0.0, scale = 0.0;
    size_t i;
    int rc;

    if (w == NULL)
        return cli_fail(r->ctx, "--check", CLF_ENO_MEMORY);
    memset(&fo, 0, sizeof fo);
    fo.causal = 1;
    fo.key_mask = r->mask;
    rc = r->x.ids ? clf_model_forward_tokens(r->m, r->x.ids, r->B, r->n, w, &fo)
                  : clf_model_forward(r->m, r->x.data, r->B, r->n, w, &fo);
    if (rc != 0) {
        free(w);
        return cli_fail(r->ctx, "--check: the whole forward", rc);
    }
    for (i = 0; i < count; i++) {
        double d = fabs((double)r->y[i] - (double)w[i]);
        err = d > err || isnan(d) ? d : err;
        scale = fabs((double)w[i]) > scale ? fabs((double)w[i]) : scale;
    }
    free(w);
    err = scale > 0.0 ? err / scale : err;
    printf("check: max |stream - whole forward| / max |whole| = %.3g: %s "
           "(tol 1e-5)\n",
           err, err <= 1e-5 ? "MATCH" : "DIFFER");
    return err <= 1e-5 ? 0 : CLI_DIFFER;
}

static int
stream_model(struct stream_run *r)
{
    clf_stream_info si;
    size_t shape[3];
    int rc;

    if ((rc = input_shape(r)) != 0 || (rc = lengths_mask(r)) != 0)
        return rc;
    if (r->o->full && (rc = clf_model_set_mode(r->m, CLF_MODE_FULL)) != 0)
        return cli_fail(r->ctx, "--full", rc);
    if ((rc = clf_stream_create(&r->st, r->m, r->B)) != 0)
        return cli_fail(r->ctx, "stream", rc);
    if ((rc = feed(r)) != 0)
        return cli_fail(r->ctx, "append", rc);
    (void)clf_stream_info_get(r->st, &si);
    printf("stream: batch %zu, %zu positions in chunks of %zu, %s\n", r->B,
           r->n, r->o->chunk ? r->o->chunk : 1,
           r->o->full ? "causal full attention"
                      : "prefix-safe causal Linformer");
    print_latency(r);
    printf("state: %zu bytes in host memory (%zu open position%s kept)\n",
           si.state_bytes, si.open_positions,
           si.open_positions == 1 ? "" : "s");
    if (r->o->output != NULL) {
        shape[0] = r->B;
        shape[1] = r->n;
        shape[2] = r->w_out;
        if ((rc = cli_npy_write(r->o->output, r->y, shape, 3)) != 0)
            return rc;
    }
    return r->o->check ? check_whole(r) : 0;
}

int
cli_stream_main(const struct cli_command *cmd, int argc, char **argv)
{
    struct stream_opts o;
    struct stream_run r;
    clf_model_opts mo;
    struct cli_file inputs[2];
    int rc, first;

    memset(&o, 0, sizeof o);
    rc = cli_parse(cmd, argc, argv, &o, &first);
    if (rc != 0)
        return rc == CLI_HELP_SHOWN ? CLI_OK : rc;
    if (o.weights == NULL || o.input == NULL) {
        cli_error("stream", "--weights and --input are required");
        return CLI_USAGE;
    }
    if ((rc = cli_exclusive("stream", "--block", o.block != 0, "--full", o.full,
                            "full attention has no blocks")) != 0)
        return rc;
    if (!o.full && o.block == 0) {
        cli_error("stream", "prefix-safe causal Linformer needs --block B "
                            "(or --full)");
        return CLI_USAGE;
    }
    inputs[0].option = "--weights";
    inputs[0].path = o.weights;
    inputs[1].option = "--input";
    inputs[1].path = o.input;
    if (o.output != NULL &&
        ((rc = cli_output_check("stream", "--output", o.output, inputs, 2)) !=
             0 ||
         (cli_is_stdout(o.output) &&
          (rc = cli_stdout_for_data("stream")) != 0)))
        return rc;
    memset(&r, 0, sizeof r);
    r.o = &o;
    if (clf_npy_load(o.input, &r.x) != 0) {
        cli_error("stream", "--input %s: %s", o.input, clf_last_error());
        return CLI_ERROR;
    }
    memset(&mo, 0, sizeof mo);
    mo.heads = o.heads;
    mo.causal_block = o.block;
    if ((rc = cli_context(&r.ctx, o.device)) == 0) {
        rc = clf_model_load(&r.m, r.ctx, o.weights, &mo);
        rc = rc != 0 ? cli_fail(r.ctx, o.weights, rc)
                     : clf_model_info_get(r.m, &r.info);
        if (rc == 0)
            rc = stream_model(&r);
    }
    stream_free(&r);
    return rc;
}
