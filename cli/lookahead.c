/* clinformer check-lookahead: audit a layer configuration for look-ahead. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

struct lookahead_opts {
    const char *device;
    size_t seq_len, max_seq_len, d_model, heads, k, block, positions, seed;
    int sharing, full, causal, slot_mask;
};

static const struct cli_choice sharings[] = {{"headwise", CLF_SHARE_HEADWISE},
                                             {"per-head", CLF_SHARE_PER_HEAD},
                                             {"key-value", CLF_SHARE_KEY_VALUE},
                                             {NULL, 0}};

#define LA(field) offsetof(struct lookahead_opts, field)

const struct cli_option cli_lookahead_options[] = {
    {"device", CLI_STRING, LA(device), "SEL",
     "stable name (pocl:0), device index, cpu, gpu, or\n"
     "part of a platform or device name (default:\n"
     "$CLINFORMER_DEVICE, else the first GPU, else the\n"
     "first CPU device); a comma list or `all` audits\n"
     "the forward split by positions over those devices",
     0, 0, NULL},
    {"seq-len", CLI_SIZE, LA(seq_len), "N", "sequence length (default 256)", 0,
     0, NULL},
    {"max-seq-len", CLI_SIZE, LA(max_seq_len), "N",
     "the layer's max_seq_len (default: --seq-len)", 0, 0, NULL},
    {"d-model", CLI_SIZE, LA(d_model), "D", "model width (default 64)", 0, 0,
     NULL},
    {"heads", CLI_SIZE, LA(heads), "H", "heads (default 4)", 0, 0, NULL},
    {"k", CLI_SIZE, LA(k), "K", "compressed length (default 64)", 0, 0, NULL},
    {"block", CLI_SIZE, LA(block), "B",
     "causal block size (default 16; not used with\n--no-causal)", 0, 0, NULL},
    {"sharing", CLI_CHOICE, LA(sharing), "S",
     "headwise, per-head or key-value (default headwise)", 0, 0, sharings},
    {"full", CLI_FLAG, LA(full), NULL,
     "audit full attention instead of Linformer", 1, 0, NULL},
    {"no-causal", CLI_FLAG, LA(causal), NULL,
     "audit the plain (non-causal) mode, which must FAIL", 0, 0, NULL},
    {"slot-mask", CLI_FLAG, LA(slot_mask), NULL,
     "audit a layer with the slot mask of linformer-pytorch's\n"
     "causal=True (implies --no-causal in Linformer mode),\n"
     "which must FAIL: each slot mixes every position",
     1, 0, NULL},
    {"positions", CLI_SIZE, LA(positions), "P",
     "positions t to test, spread over the sequence\n"
     "(default 32, or --seq-len when shorter; at most\n--seq-len)",
     0, 0, NULL},
    {"seed", CLI_SIZE, LA(seed), "S",
     "seed of weights, input and perturbations (default 1)", 0, 0, NULL},
    {NULL, CLI_FLAG, 0, NULL, NULL, 0, 0, NULL}};

/* Refuses sizes the audit cannot hold: 0 or CLI_USAGE. */
static int
check_sizes(const char *cmd, struct lookahead_opts *o, size_t *count)
{
    size_t bytes;

    if (o->max_seq_len == 0)
        o->max_seq_len = o->seq_len;
    if (o->positions == 0)
        o->positions = o->seq_len < 32 ? o->seq_len : 32;
    if (o->positions > o->seq_len) {
        cli_error(cmd, "--positions %zu exceeds --seq-len %zu", o->positions,
                  o->seq_len);
        return CLI_USAGE;
    }
    if (cli_mul(o->positions, sizeof(size_t), &bytes) != 0) {
        cli_error(cmd, "--positions %zu overflows size_t", o->positions);
        return CLI_USAGE;
    }
    if (cli_mul(o->seq_len, o->d_model, count) != 0 ||
        cli_mul(*count, sizeof(float), &bytes) != 0) {
        cli_error(cmd,
                  "--seq-len %zu times --d-model %zu floats overflows "
                  "size_t",
                  o->seq_len, o->d_model);
        return CLI_USAGE;
    }
    if (o->causal && !o->full && o->max_seq_len > (size_t)-1 - o->block) {
        cli_error(cmd, "--max-seq-len %zu plus --block %zu overflows size_t",
                  o->max_seq_len, o->block);
        return CLI_USAGE;
    }
    /* The layer is built for max_seq_len positions and k slots at most
     * that many: refused here, as usage, not by the library after the
     * context is made. */
    if (o->seq_len > o->max_seq_len || o->k > o->max_seq_len) {
        cli_error(cmd, "--%s %zu exceeds --max-seq-len %zu",
                  o->seq_len > o->max_seq_len ? "seq-len" : "k",
                  o->seq_len > o->max_seq_len ? o->seq_len : o->k,
                  o->max_seq_len);
        return CLI_USAGE;
    }
    return 0;
}

static void
describe(const struct lookahead_opts *o, const clf_attention_desc *d)
{
    printf("layer: D=%zu h=%zu N=%zu k=%zu %s, %s%s, n=%zu\n", d->d_model,
           d->heads, d->max_seq_len, d->k,
           o->sharing == CLF_SHARE_PER_HEAD    ? "per-head E/F"
           : o->sharing == CLF_SHARE_KEY_VALUE ? "key-value E=F"
                                               : "headwise E/F",
           o->full ? "full attention" : "Linformer",
           o->causal      ? (o->full ? ", causal" : ", causal (prefix-safe)")
           : o->slot_mask ? (o->full ? ", causal (slot mask)"
                                     : ", slot mask (linformer-pytorch's "
                                       "causal=True)")
                          : ", not causal",
           o->seq_len);
    if (d->causal_block != 0)
        printf("causal block b=%zu: %zu slots per block\n", d->causal_block,
               d->k /
                   ((d->max_seq_len + d->causal_block - 1) / d->causal_block));
}

/* One layer, or its copies on a group of devices. */
struct audited {
    clf_context *ctx;
    clf_attention *att;
    clf_group *g;
    clf_group_attention *ga;
};

/* The attention ways the audit runs in turn on one device: each that can
 * run the mode (a way forced where it does not apply falls back to the
 * GEMM path, which is audited anyway).  CLINFORMER_KERNELS naming an
 * attention way wins over forcing: then that way alone. */
static const char *const ways[] = {"gemm", "flash", "flashwg", "fused"};

static size_t
way_count(const struct lookahead_opts *o, const struct audited *l)
{
    const char *env = getenv("CLINFORMER_KERNELS");

    if (l->ga != NULL || (env != NULL && strstr(env, "attend=") != NULL))
        return 0; /* the way already chosen, audited once */
    return !o->causal && !o->full ? 4 : 3;
}

static int
audit_way(const struct audited *l, const struct lookahead_opts *o,
          const float *x, const size_t *pos, const char *way)
{
    clf_forward_opts fo;
    clf_lookahead_result r;
    int rc;

    memset(&fo, 0, sizeof fo);
    fo.causal = o->causal;
    if (way != NULL &&
        (rc = clf_context_force_kernel(l->ctx, "attend", way)) != 0)
        return cli_fail(l->ctx, "forcing the attention way", rc);
    rc = l->ga != NULL
             ? clf_group_attention_check_lookahead(l->ga, x, o->seq_len, &fo,
                                                   pos, o->positions,
                                                   o->seed + 1, &r)
             : clf_attention_check_lookahead(l->att, x, o->seq_len, &fo, pos,
                                             o->positions, o->seed + 1, &r);
    if (rc != 0)
        return cli_fail(l->ctx, "look-ahead audit", rc);
    if (l->g != NULL)
        cli_print_split(l->g);
    if (!r.passed) {
        printf("FAIL: changing the inputs after t=%zu moved the output at "
               "position %zu (max change at positions <= t: %.6g)%s%s\n",
               r.t, r.moved, r.change, way ? ", attention way " : "",
               way ? way : "");
        return CLI_DIFFER;
    }
    printf("PASS: for each of %zu positions t, changing every input after t "
           "(to random values, NaN, +inf, -inf, values near 1e30) left the "
           "outputs at positions 0..t unchanged, bit for bit%s%s\n",
           r.checked, way ? ", attention way " : "", way ? way : "");
    return 0;
}

/* The audit under each attention way, stopping at the first that fails;
 * the context's forced way lifted after. */
static int
audit(const struct audited *l, const struct lookahead_opts *o, const float *x,
      const size_t *pos)
{
    const size_t count = way_count(o, l);
    size_t w;
    int rc = 0;

    if (count == 0)
        return audit_way(l, o, x, pos, NULL);
    for (w = 0; w < count && rc == 0; w++)
        rc = audit_way(l, o, x, pos, ways[w]);
    clf_context_force_kernel(l->ctx, "attend", NULL);
    return rc;
}

/* Random input and the positions, spread from 0 to seq_len - 1; then the
 * audit. */
static int
audit_layer(const struct audited *l, const struct lookahead_opts *o,
            const clf_attention_desc *d, size_t count)
{
    float *x = malloc(count * sizeof *x);
    size_t *pos = malloc(o->positions * sizeof *pos), i, np = o->positions;
    unsigned long long st = o->seed;
    int rc = CLI_ERROR;

    if (x == NULL || pos == NULL) {
        fprintf(stderr, "clinformer: out of host memory\n");
        goto done;
    }
    for (i = 0; i < count; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(st >> 11) * 0x1.0p-52 - 1.0);
    }
    for (i = 0; i < np; i++)
        pos[i] = np == 1 ? 0 : i * (o->seq_len - 1) / (np - 1);
    describe(o, d);
    rc = audit(l, o, x, pos);
done:
    free(x);
    free(pos);
    return rc;
}

/* The audit of the forward split by positions over a device list. */
static int
audit_group(struct audited *l, const struct lookahead_opts *o,
            const clf_attention_desc *d, size_t count)
{
    int rc = cli_group(&l->g, o->device, CLF_SHARD_SEQ);

    if (rc != 0)
        return rc;
    l->ctx = clf_group_context(l->g, 0);
    if ((rc = clf_group_attention_create(&l->ga, l->g, d, o->seed)) != 0 ||
        (rc = clf_group_attention_set_mode(
             l->ga, o->full ? CLF_MODE_FULL : CLF_MODE_LINFORMER)) != 0)
        rc = cli_fail(l->ctx, "creating the layer", rc);
    else
        rc = audit_layer(l, o, d, count);
    clf_group_attention_destroy(l->ga);
    clf_group_destroy(l->g);
    return rc;
}

int
cli_lookahead_main(const struct cli_command *cmd, int argc, char **argv)
{
    struct lookahead_opts o = {
        NULL, 256, 0, 64, 4, 64, 16, 0, 1, CLF_SHARE_HEADWISE, 0, 1, 0};
    struct audited l = {NULL, NULL, NULL, NULL};
    clf_attention_desc d;
    size_t count;
    int first, rc = cli_parse(cmd, argc, argv, &o, &first);

    if (rc != 0)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    if (o.slot_mask && !o.full)
        o.causal = 0; /* the slot mask is the layer's causal mask */
    if ((rc = check_sizes(cmd->name, &o, &count)) != 0)
        return rc;
    memset(&d, 0, sizeof d);
    d.slot_mask = o.slot_mask;
    d.d_model = o.d_model;
    d.heads = o.heads;
    d.max_seq_len = o.max_seq_len;
    d.k = o.k;
    d.sharing = (clf_sharing)o.sharing;
    /* The block size is a property of causal Linformer only. */
    d.causal_block = o.full || !o.causal ? 0 : o.block;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    if (cli_is_device_list(o.device))
        return audit_group(&l, &o, &d, count);
    if ((rc = cli_context(&l.ctx, o.device)) != 0)
        return rc;
    if ((rc = clf_attention_create(&l.att, l.ctx, &d)) != 0 ||
        (rc = clf_attention_randomize(l.att, o.seed)) != 0 ||
        (rc = clf_attention_set_mode(l.att, o.full ? CLF_MODE_FULL
                                                   : CLF_MODE_LINFORMER)) != 0)
        rc = cli_fail(l.ctx, "creating the layer", rc);
    else
        rc = audit_layer(&l, &o, &d, count);
    clf_attention_destroy(l.att);
    cli_context_done(l.ctx);
    return rc;
}
