/* clinformer run: a trained model on a .npy input, written to a .npy. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct run_opts {
    const char *device, *weights, *input, *output, *mask, *lengths, *layout;
    size_t heads, block, repeat; /* 0: not given */
    int causal, full, layerwise, non_strict, verbose, shard_by, launches;
    int check_choices;
    int guard;     /* guard bands around every device buffer */
    int mpi;       /* one forward over the ranks of an mpirun (cli/mpi.c) */
    int precision; /* clf_precision */
};

#define RO(field) offsetof(struct run_opts, field)

static const struct cli_choice cli_precision_choices[] = {
    {"float", CLF_PRECISION_FLOAT}, {"half", CLF_PRECISION_HALF}, {NULL, 0}};

const struct cli_option cli_run_options[] = {
    {"weights", CLI_PATH, RO(weights), "FILE",
     "safetensors file (safetensors.torch.save_file of a\nstate_dict)", 0, 0,
     NULL},
    {"input", CLI_PATH, RO(input), "FILE", "input .npy", 0, 0, NULL},
    {"output", CLI_OUTPUT, RO(output), "FILE",
     "output .npy, written atomically; refused when it\n"
     "exists and is not a regular file, or is the same\n"
     "file as --weights, --input or --mask; - writes it\n"
     "to standard output and the report to stderr",
     0, 0, NULL},
    {"layout", CLI_STRING, RO(layout), "L",
     "auto (default), lucidrains-attention,\n"
     "lucidrains-encoder, lucidrains-lm, fairseq-attention,\n"
     "fairseq-encoder-layer, linformer-pytorch-attention,\n"
     "linformer-pytorch, linformer-pytorch-lm,\n"
     "single-head-attention",
     0, 0, NULL},
    {"heads", CLI_SIZE, RO(heads), "H",
     "heads, when the file's metadata lacks \"heads\"", 0, 0, NULL},
    {"lengths", CLI_STRING, RO(lengths), "L1,L2,..",
     "per-sequence lengths (right padding): one per\n"
     "sequence, each 1..n; not with --mask",
     0, 0, NULL},
    {"mask", CLI_PATH, RO(mask), "FILE",
     "(B, n) .npy key mask (bool, uint8, int32, int64 or\n"
     "float32), nonzero = real position; (n) when the\n"
     "input has no batch axis; not with --lengths",
     0, 0, NULL},
    {"causal", CLI_FLAG, RO(causal), NULL,
     "causal mode (Linformer needs --block)", 1, 0, NULL},
    {"block", CLI_SIZE, RO(block), "B",
     "causal block size b (with --causal, not --full)", 0, 0, NULL},
    {"full", CLI_FLAG, RO(full), NULL, "full attention instead of Linformer", 1,
     0, NULL},
    {"precision", CLI_CHOICE, RO(precision), "P",
     "float (default) or half: attention weights and E/F\n"
     "stored as 16-bit floats (half the memory), the\n"
     "arithmetic still float32 (half products where the\n"
     "kernel choice halfgemm is native)",
     0, 0, cli_precision_choices},
    {"layerwise", CLI_FLAG, RO(layerwise), NULL,
     "share layer 0's E and F with every layer", 1, 0, NULL},
    {"verbose", CLI_FLAG, RO(verbose), NULL,
     "also list the forward's choices one a line (the\n"
     "GEMMs' by role: gemm[proj], gemm[comp], ...) and\n"
     "every kernel choice stored or timed for the device,\n"
     "with where each came from",
     1, 0, NULL},
    {"check-choices", CLI_FLAG, RO(check_choices), NULL,
     "time each stored kernel choice the forward uses\n"
     "again, now, and list those times beside the stored\n"
     "ones (the forward still runs the stored kernels), so\n"
     "a choice stored on a busy machine shows (on the first\n"
     "device of a list)",
     1, 0, NULL},
    {"launches", CLI_FLAG, RO(launches), NULL,
     "also list the geometry of every kernel the forward\n"
     "launched (global and local size, work-groups,\n"
     "work-items; on the first device of a list)",
     1, 0, NULL},
    {"guard", CLI_FLAG, RO(guard), NULL,
     "guard bands around every device buffer of the model:\n"
     "a kernel that writes outside one fails the run with\n"
     "an error naming it (slow; one device)",
     1, 0, NULL},
    {"non-strict", CLI_FLAG, RO(non_strict), NULL,
     "skip tensors the layout does not use (listed on\n"
     "stderr); by default they are an error",
     1, 0, NULL},
    {"repeat", CLI_SIZE, RO(repeat), "R",
     "also time R (1..64) warm forwards and print their\nmedian", 0, 64, NULL},
    {"device", CLI_STRING, RO(device), "SEL",
     "stable name (pocl:0), device index, cpu, gpu, or\n"
     "part of a platform or device name (default:\n"
     "$CLINFORMER_DEVICE, else the first GPU, else the\n"
     "first CPU device); a comma list (0,1 or\n"
     "pocl:0,intel-cpu:0) or `all` runs one forward\n"
     "over several devices",
     0, 0, NULL},
    {"shard-by", CLI_CHOICE, RO(shard_by), "S",
     "with several devices: seq (positions of every\n"
     "sequence), batch (whole sequences) or auto\n"
     "(default: batch when every device gets a sequence)",
     0, 0, cli_shard_choices},
    {"mpi", CLI_FLAG, RO(mpi), NULL,
     "one forward sharded over the ranks of mpirun -np R\n"
     "(built with --with-mpi): each rank uses the device\n"
     "of its local rank (modulo the GPUs, else all\n"
     "devices) unless --device or CLINFORMER_DEVICE says;\n"
     "all read the same --weights (checksums compared)\n"
     "and take the same options but --input, --output,\n"
     "--device and --verbose (compared before the forward);\n"
     "rank 0 reads the input and writes the output",
     1, 0, NULL},
    {NULL, CLI_FLAG, 0, NULL, NULL, 0, 0, NULL}};

/* What a run holds; run_free() releases it. */
struct run_state {
    const struct run_opts *o;
    clf_context *ctx;
    clf_model *m;
    clf_group *g; /* several devices: ctx is its first, m its first copy */
    clf_group_model *gm;
    clf_model_info info;
    clf_forward_opts fo;
    clf_array x, mask;
    unsigned *lens;
    unsigned char *mbytes;
    float *y;
    size_t B, n, cols;
    int batched; /* the input has a batch axis */
};

static void
run_free(struct run_state *s)
{
    clf_array_free(&s->x);
    clf_array_free(&s->mask);
    free(s->lens);
    free(s->mbytes);
    free(s->y);
    if (s->g != NULL) {
        clf_group_model_destroy(s->gm);
        clf_group_destroy(s->g);
        return;
    }
    clf_model_destroy(s->m);
    cli_context_done(s->ctx);
}

static void
print_shape(const char *what, const clf_array *a)
{
    size_t i;

    printf("%s: (", what);
    for (i = 0; i < a->ndim; i++)
        printf("%s%zu", i ? ", " : "", a->shape[i]);
    printf(") %s\n", a->data ? "float32" : "int");
}

static void
print_model(const char *weights, const clf_model_info *info, double t_load)
{
    printf("loaded %s: layout %s, %zu layer%s%s, d_model %zu, heads %zu "
           "(head_dim %zu), max_seq_len %zu, k %zu",
           weights, clf_layout_name(info->layout), info->layers,
           info->layers == 1 ? "" : "s",
           info->reversible ? " (reversible)" : "", info->d_model, info->heads,
           info->head_dim, info->max_seq_len, info->k);
    if (info->ffn_dim)
        printf(", ffn %zu", info->ffn_dim);
    if (info->vocab)
        printf(", vocab %zu", info->vocab);
    if (info->share_kv)
        printf(", share_kv");
    if (info->one_kv_head)
        printf(", one_kv_head");
    printf(" (%.3f s)\n", t_load);
}

/* Checks the input against the model: B, n and the output's columns. */
static int
input_shape(struct run_state *s)
{
    const clf_array *x = &s->x;
    size_t bytes, shape[3];

    if (s->info.vocab != 0) {
        if (x->ids == NULL || x->ndim < 1 || x->ndim > 2) {
            cli_error("run",
                      "%s: an LM takes an int array of token ids "
                      "shaped (B, n) or (n)",
                      s->o->input);
            return CLI_ERROR;
        }
        s->batched = x->ndim == 2;
        s->n = x->shape[x->ndim - 1];
        s->cols = s->info.vocab;
    } else {
        if (x->data == NULL || x->ndim < 2 || x->ndim > 3 ||
            x->shape[x->ndim - 1] != s->info.d_model) {
            cli_error("run",
                      "%s: expected float32 shaped (B, n, %zu) or "
                      "(n, %zu)",
                      s->o->input, s->info.d_model, s->info.d_model);
            return CLI_ERROR;
        }
        s->batched = x->ndim == 3;
        s->n = x->shape[x->ndim - 2];
        s->cols = s->info.d_model;
    }
    s->B = s->batched ? x->shape[0] : 1;
    if (s->B == 0 || s->n == 0) {
        cli_error("run", "%s is empty", s->o->input);
        return CLI_ERROR;
    }
    shape[0] = s->B;
    shape[1] = s->n;
    shape[2] = s->cols;
    if (cli_bytes(shape, 3, sizeof(float), &bytes) != 0) {
        cli_error("run",
                  "%s: the output of (%zu, %zu, %zu) floats "
                  "overflows size_t",
                  s->o->input, s->B, s->n, s->cols);
        return CLI_ERROR;
    }
    return 0;
}

/* B and n of the input as its array says them (int ids (B, n) or (n),
 * floats (B, n, D) or (n, D)), before the model is loaded; 0 when the
 * shape is none of these or empty, which input_shape() reports. */
static int
input_dims(const clf_array *x, size_t *B, size_t *n)
{
    int batched;

    if (x->ids != NULL && x->ndim >= 1 && x->ndim <= 2)
        batched = x->ndim == 2;
    else if (x->data != NULL && x->ndim >= 2 && x->ndim <= 3)
        batched = x->ndim == 3;
    else
        return 0;
    *B = batched ? x->shape[0] : 1;
    *n = x->shape[batched ? 1 : 0];
    return *B != 0 && *n != 0;
}

/* --lengths against the input: one length per sequence, each 1..n, so a
 * bad list is a usage error before the model is loaded. */
static int
check_lengths(struct run_state *s, const size_t *lens, size_t count)
{
    const char *text = s->o->lengths;
    size_t B, n, i;

    if (lens == NULL || !input_dims(&s->x, &B, &n))
        return 0;
    if (count != B) {
        cli_error("run",
                  "--lengths \"%s\" gives %zu length%s; the input has %zu "
                  "sequence%s",
                  text, count, count == 1 ? "" : "s", B, B == 1 ? "" : "s");
        return CLI_USAGE;
    }
    for (i = 0; i < count; i++)
        if (lens[i] > n) {
            cli_error("run",
                      "--lengths \"%s\": %zu is not a valid length for the "
                      "input's sequences of %zu positions (1..%zu)",
                      text, lens[i], n, n);
            return CLI_USAGE;
        }
    s->lens = calloc(B, sizeof *s->lens);
    if (s->lens == NULL) {
        fprintf(stderr, "clinformer run: out of host memory\n");
        return CLI_ERROR;
    }
    for (i = 0; i < count; i++)
        s->lens[i] = (unsigned)lens[i];
    s->fo.lengths = s->lens;
    return 0;
}

/* The mask must be (B, n), or (n) when the input has no batch axis. */
static int
load_mask(struct run_state *s)
{
    const clf_array *a = &s->mask;
    size_t i, count = s->B * s->n;
    int rc = cli_mpi_load_npy(s->o->mask, &s->mask, 1);

    if (rc != 0)
        return rc;
    if (!((a->ndim == 2 && a->shape[0] == s->B && a->shape[1] == s->n) ||
          (!s->batched && a->ndim == 1 && a->shape[0] == s->n))) {
        fprintf(stderr, "clinformer run: --mask %s: shape (", s->o->mask);
        for (i = 0; i < a->ndim; i++)
            fprintf(stderr, "%s%zu", i ? ", " : "", a->shape[i]);
        fprintf(stderr, "%s does not match the input's (B, n) = (%zu, %zu)\n",
                a->ndim == 1 ? ",)" : ")", s->B, s->n);
        return CLI_ERROR;
    }
    for (i = 0; a->data != NULL && i < count; i++)
        if (isnan(a->data[i])) {
            fprintf(stderr,
                    "clinformer run: --mask %s: element %zu is NaN: a "
                    "position is real (nonzero) or padding (0)\n",
                    s->o->mask, i);
            return CLI_ERROR;
        }
    s->mbytes = malloc(count);
    if (s->mbytes == NULL)
        return CLI_ERROR;
    for (i = 0; i < count; i++)
        s->mbytes[i] = a->data ? a->data[i] != 0.0f : a->ids[i] != 0;
    s->fo.key_mask = s->mbytes;
    return 0;
}

static int
forward(struct run_state *s)
{
    if (s->o->mpi)
        return clf_model_forward_mpi(s->m, s->x.data, s->x.ids, s->B, s->n,
                                     s->y, &s->fo);
    if (s->gm != NULL)
        return s->info.vocab ? clf_group_model_forward_tokens(
                                   s->gm, s->x.ids, s->B, s->n, s->y, &s->fo)
                             : clf_group_model_forward(s->gm, s->x.data, s->B,
                                                       s->n, s->y, &s->fo);
    return s->info.vocab
               ? clf_model_forward_tokens(s->m, s->x.ids, s->B, s->n, s->y,
                                          &s->fo)
               : clf_model_forward(s->m, s->x.data, s->B, s->n, s->y, &s->fo);
}

static int
time_repeats(struct run_state *s)
{
    double t[64], t0;
    size_t r, repeat = s->o->repeat;

    for (r = 0; r < repeat; r++) {
        int rc;
        t0 = cli_now();
        rc = forward(s);
        t[r] = cli_now() - t0;
        if (rc != 0)
            return cli_fail(s->ctx, "forward", rc);
    }
    qsort(t, repeat, sizeof t[0], cli_cmp_double);
    printf("warm forward: median %.3f ms over %zu runs (min %.3f, max "
           "%.3f)\n",
           t[repeat / 2] * 1e3, repeat, t[0] * 1e3, t[repeat - 1] * 1e3);
    return 0;
}

/* The output, on rank 0 alone under --mpi; checked again, since the
 * path may have changed while the forward ran. */
static int
write_output(struct run_state *s, const struct cli_file *inputs)
{
    size_t shape[3];
    int rc;

    shape[0] = s->B;
    shape[1] = s->n;
    shape[2] = s->cols;
    if (cli_mpi_rank() != 0)
        return 0;
    if ((rc = cli_output_check("run", "--output", s->o->output, inputs, 3)) !=
        0)
        return rc;
    return cli_npy_write(s->o->output, s->y, shape, 3);
}

/* The mode the model runs in: --full, else the file's. */
static clf_mode
mode_in_force(const struct run_state *s)
{
    const clf_model *m = s->gm != NULL ? clf_group_model_part(s->gm, 0) : s->m;
    clf_mode mode = CLF_MODE_LINFORMER;

    (void)clf_model_get_mode(m, &mode);
    return mode;
}

/* What the first forward ran, where, and with which kernels. */
static void
print_forward(const struct run_state *s, double t_fwd)
{
    const struct run_opts *o = s->o;
    const int full = mode_in_force(s) == CLF_MODE_FULL;

    printf("forward: batch %zu, seq_len %zu, %s%s%s in %.3f s (first call "
           "includes kernel compilation)\n",
           s->B, s->n, full ? "full attention" : "Linformer",
           o->causal || (s->info.slot_mask && full) ? ", causal"
           : s->info.slot_mask                      ? ", slot mask"
                                                    : "",
           o->precision == CLF_PRECISION_HALF ? ", half-precision weights" : "",
           t_fwd);
    if (s->g != NULL)
        cli_print_split(s->g);
    cli_print_choices(s->ctx, o->verbose);
    if (o->launches)
        cli_print_launches(s->ctx);
}

/* A model trained with linformer-pytorch's causal=True leaks the future in
 * Linformer mode: said on stderr (rank 0), as it runs. */
static void
warn_slot_mask(const struct run_state *s)
{
    if (!s->info.slot_mask || mode_in_force(s) != CLF_MODE_LINFORMER ||
        cli_mpi_rank() != 0)
        return;
    fprintf(stderr,
            "clinformer run: warning: %s was trained with causal=True: "
            "its mask over the compressed slots is applied as trained, "
            "but each slot mixes every position, so the output at t "
            "depends on positions after t (the prefix-safe causal mode "
            "does not; docs/masks.md)\n",
            s->o->weights);
}

/* Everything after the model is loaded: input, forward, output. */
/* The forward, timed into *t_fwd, with what --check-choices, --launches
 * and --guard put around it. */
static int
checked_forward(struct run_state *s, double *t_fwd)
{
    const struct run_opts *o = s->o;
    double t0;
    int rc;

    if (o->check_choices &&
        (rc = clf_context_check_kernel_choices(s->ctx, 1)) != 0)
        return cli_fail(s->ctx, "--check-choices", rc);
    if (o->launches && (rc = clf_context_record_launches(s->ctx, 1)) != 0)
        return cli_fail(s->ctx, "--launches", rc);
    t0 = cli_now();
    rc = forward(s);
    *t_fwd = cli_now() - t0;
    if (o->launches)
        (void)clf_context_record_launches(s->ctx, 0);
    if (rc != 0)
        return cli_fail(s->ctx, "forward", rc);
    if (o->guard && (rc = clf_context_guard_check(s->ctx)) != 0)
        return cli_fail(s->ctx, "--guard", rc);
    return 0;
}

static int
run_forward(struct run_state *s, const struct cli_file *inputs)
{
    const struct run_opts *o = s->o;
    double t_fwd = 0.0;
    int rc;

    print_shape("input", &s->x);
    if ((rc = input_shape(s)) != 0 ||
        (o->mask != NULL && (rc = load_mask(s)) != 0))
        return rc;
    s->fo.causal = o->causal;
    if (o->full &&
        (rc = s->gm != NULL ? clf_group_model_set_mode(s->gm, CLF_MODE_FULL)
                            : clf_model_set_mode(s->m, CLF_MODE_FULL)) != 0)
        return cli_fail(s->ctx, "--full", rc);
    warn_slot_mask(s);
    /* Under --mpi only rank 0 receives the output. */
    if (cli_mpi_rank() == 0)
        s->y = malloc(s->B * s->n * s->cols * sizeof *s->y);
    if (s->y == NULL && cli_mpi_rank() == 0) {
        fprintf(stderr, "clinformer run: out of host memory\n");
        return CLI_ERROR;
    }
    if ((rc = checked_forward(s, &t_fwd)) != 0 ||
        (rc = write_output(s, inputs)) != 0)
        return rc;
    print_forward(s, t_fwd);
    if (o->repeat != 0 && (rc = time_repeats(s)) != 0)
        return rc;
    printf("wrote %s: (%zu, %zu, %zu) float32\n",
           cli_is_stdout(o->output) ? "standard output" : o->output, s->B, s->n,
           s->cols);
    return 0;
}

/* With --non-strict, the tensors the layout did not use. */
static void
print_unexpected(const clf_model *m)
{
    size_t i, count = clf_model_unexpected_count(m);

    for (i = 0; i < count; i++)
        fprintf(stderr, "clinformer run: skipped unexpected tensor %s\n",
                clf_model_unexpected_name(m, i));
}

/* The model on one device, or on a group (a device list). */
static int
load(struct run_state *s, const clf_model_opts *mo, double *t0)
{
    int rc;

    if (!cli_is_device_list(s->o->device)) {
        if ((rc = cli_context(&s->ctx, s->o->device)) != 0)
            return 0; /* reported; s->ctx stays NULL */
        if (s->o->guard && (rc = clf_context_guard_buffers(s->ctx, 1)) != 0)
            return rc;
        *t0 = cli_now();
        return clf_model_load(&s->m, s->ctx, s->o->weights, mo);
    }
    if ((rc = cli_group(&s->g, s->o->device, s->o->shard_by)) != 0)
        return 0;
    s->ctx = clf_group_context(s->g, 0);
    *t0 = cli_now();
    rc = clf_group_model_load(&s->gm, s->g, s->o->weights, mo);
    if (rc == 0)
        s->m = clf_group_model_part(s->gm, 0);
    return rc;
}

/* --block is causal Linformer's: refused without --causal or with --full
 * (the layer would be built for blocks it never uses, and refused when k
 * is no multiple of them), required otherwise. */
static int
check_causal(const char *cmd, const struct run_opts *o)
{
    if (o->block != 0 && !o->causal) {
        cli_error(cmd, "--block %zu needs --causal", o->block);
        return CLI_USAGE;
    }
    if (o->causal && !o->full && o->block == 0) {
        cli_error(cmd, "--causal needs --block B for Linformer (or --full)");
        return CLI_USAGE;
    }
    return cli_exclusive(cmd, "--full", o->full, "--block", o->block != 0,
                         "full attention has no causal blocks");
}

/* What the options alone decide: required ones, the layout, options
 * that cannot go together, the --lengths list.  0 or CLI_USAGE, before
 * anything is read. */
static int
check_options(const char *cmd, const struct run_opts *o, clf_model_opts *mo,
              size_t **lens, size_t *nlens)
{
    if (o->weights == NULL || o->input == NULL || o->output == NULL) {
        cli_error(cmd, "--weights, --input and --output are required");
        return CLI_USAGE;
    }
    if (o->layout != NULL && clf_layout_parse(o->layout, &mo->layout) != 0) {
        cli_error(cmd, "%s", clf_last_error());
        return CLI_USAGE;
    }
    if (o->mpi && cli_is_device_list(o->device)) {
        cli_error(cmd,
                  "--mpi: each rank takes one device, not the "
                  "list \"%s\"",
                  o->device);
        return CLI_USAGE;
    }
    if (check_causal(cmd, o) != 0 ||
        cli_exclusive(cmd, "--mask", o->mask != NULL, "--lengths",
                      o->lengths != NULL,
                      "both say which positions are real") != 0 ||
        cli_exclusive(cmd, "--guard", o->guard, "a device list",
                      cli_is_device_list(o->device),
                      "guard bands check one device") != 0)
        return CLI_USAGE;
    return o->lengths == NULL
               ? 0
               : cli_list_parse(cmd, "--lengths", "length", o->lengths,
                                0xffffffffULL, lens, nlens);
}

/* Options each rank of an --mpi run may set for itself: its own files
 * (--weights are compared by checksum; only rank 0 reads --input and --mask
 * and writes --output), device and printing (--verbose, --launches).  Every
 * other option shapes the forward and so the collectives, and must agree;
 * --mask counts as given or not. */
static const char *const per_rank_options[] = {
    "weights",  "input",         "output", "device", "verbose",
    "launches", "check-choices", "mpi",    "guard",  NULL};

static int
per_rank(const char *name)
{
    size_t i;

    for (i = 0; per_rank_options[i] != NULL; i++)
        if (strcmp(per_rank_options[i], name) == 0)
            return 1;
    return 0;
}

/* One option's value as the line "--NAME VALUE"; "" when not given. */
static void
option_line(const struct cli_option *op, const struct run_opts *o, char *line,
            size_t cap)
{
    const char *field = (const char *)o + op->offset;
    const struct cli_choice *c;
    const char *str;
    int v;

    line[0] = '\0';
    switch (op->type) {
    case CLI_STRING:
        memcpy(&str, field, sizeof str);
        if (str != NULL)
            snprintf(line, cap, "--%s %s",
                     op->offset == RO(mask) ? "mask" : op->name,
                     op->offset == RO(mask) ? "FILE" : str);
        return;
    case CLI_SIZE:
        if (*(const size_t *)(const void *)field != 0)
            snprintf(line, cap, "--%s %zu", op->name,
                     *(const size_t *)(const void *)field);
        return;
    case CLI_CHOICE:
        memcpy(&v, field, sizeof v);
        for (c = op->choices; c->name != NULL && c->value != v; c++)
            ;
        if (v != 0 && c->name != NULL)
            snprintf(line, cap, "--%s %s", op->name, c->name);
        return;
    default:
        memcpy(&v, field, sizeof v);
        if (v != 0)
            snprintf(line, cap, "--%s", op->name);
    }
}

/* Every rank of --mpi runs the same forward: its options that shape it
 * must be rank 0's (compared before the first collective). */
static int
same_options(const struct run_opts *o)
{
    const struct cli_option *op;
    char lines[32][256];
    const char *names[32], *values[32];
    size_t count = 0;

    for (op = cli_run_options; op->name != NULL && count < 32; op++)
        if (!per_rank(op->name)) {
            names[count] = op->name;
            option_line(op, o, lines[count], sizeof lines[count]);
            values[count] = lines[count];
            count++;
        }
    return cli_mpi_same_options(names, values, count);
}

/* Under --mpi, before the first collective: the same options on every
 * rank, then the same --weights (checksums). */
static int
ranks_agree(const struct run_opts *o)
{
    int rc = o->mpi ? same_options(o) : 0;

    return rc != 0 ? rc : cli_mpi_same_file("--weights", o->weights);
}

int
cli_run_main(const struct cli_command *cmd, int argc, char **argv)
{
    struct run_opts o;
    struct run_state s;
    clf_model_opts mo;
    struct cli_file inputs[3];
    size_t *lens = NULL, nlens = 0;
    double t0 = 0.0;
    int first, rc;

    memset(&o, 0, sizeof o);
    memset(&s, 0, sizeof s);
    memset(&mo, 0, sizeof mo);
    if ((rc = cli_parse(cmd, argc, argv, &o, &first)) != 0)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    if ((rc = check_options(cmd->name, &o, &mo, &lens, &nlens)) != 0)
        return rc;
    inputs[0].option = "--weights";
    inputs[0].path = o.weights;
    inputs[1].option = "--input";
    inputs[1].path = o.input;
    inputs[2].option = "--mask";
    inputs[2].path = o.mask;
    /* Before MPI, so that the ranks whose stdout it discards discard the
     * text, and rank 0's text goes to stderr beside the data. */
    if (cli_is_stdout(o.output) && (rc = cli_stdout_for_data(cmd->name)) != 0) {
        free(lens);
        return rc;
    }
    if (o.mpi && (rc = cli_mpi_begin(&o.device)) != 0) {
        free(lens);
        return rc;
    }
    mo.heads = o.heads;
    mo.causal_block = o.block;
    mo.layerwise = o.layerwise;
    mo.precision = (clf_precision)o.precision;
    mo.allow_unexpected = o.non_strict;
    s.o = &o;
    rc = cli_output_check(cmd->name, "--output", o.output, inputs, 3);
    if (rc == 0)
        rc = ranks_agree(&o);
    if (rc == 0)
        rc = cli_mpi_load_npy(o.input, &s.x, 0);
    if (rc == 0)
        rc = check_lengths(&s, lens, nlens);
    free(lens);
    if (rc == 0 && (rc = load(&s, &mo, &t0)) != 0)
        rc = cli_fail(s.ctx, o.weights, rc);
    else if (rc == 0 && s.ctx == NULL)
        rc = CLI_ERROR;
    else if (rc == 0) {
        cli_mpi_devices(s.ctx);
        clf_model_info_get(s.m, &s.info);
        print_model(o.weights, &s.info, cli_now() - t0);
        print_unexpected(s.m);
        rc = run_forward(&s, inputs);
    }
    run_free(&s);
    return cli_mpi_end(rc);
}
