/* Trained models from safetensors files: the lucidrains `linformer` layouts
 * (self-attention, the Linformer encoder stack, sequential or reversible,
 * and LinformerLM) and fairseq's Linformer attention and encoder layer.
 *
 *   lucidrains, pre-LN:  x += Attn(LN1(x));  x += W2 GELU(W1 LN2(x) + b1) + b2
 *   reversible:          x1 = x2 = x;  x1 += f(x2);  x2 += g(x1);  x1 + x2
 *   fairseq, post-LN:    x = LN1(x + Attn(x));  x = LN2(x + FFN(x))
 *   LM:                  x = tok[ids] + pos[0..n);  stack;  x W^T + b
 * Layer norm: eps 1e-5, biased variance; GELU: exact erf.
 *
 * Each layout is one entry of the `layouts` table (tensor names, shapes in
 * terms of the model's dimensions, and what each tensor becomes); loading
 * checks the whole file against it, strictly, before building anything. */
#include "model/model.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LN_EPS 1e-5f

struct model_layer {
    clf_attention *att;
    cl_mem ln1_g, ln1_b, ln2_g, ln2_b; /* LN1 before (pre-LN) or after
                                          (post-LN) attention */
    cl_mem w1, b1, w2, b2;             /* feed-forward */
};

enum model_ws {
    MW_IN,
    MW_OUT,
    MW_X,
    MW_X2,
    MW_H,
    MW_A,
    MW_F,
    MW_IDS,
    MW_MASK,
    MW_POS,
    MW_COUNT
};

struct clf_model {
    clf_context *ctx;
    clf_model_info info;
    struct model_layer *layers;
    cl_mem tok, pos, logit_w, logit_b; /* LM */
    cl_mem ws[MW_COUNT];
    size_t cap[MW_COUNT]; /* bytes */
    unsigned char *host_mask;
    int *host_ids;
    size_t host_cap;   /* entries of host_mask and host_ids */
    char **unexpected; /* tensors a non-strict load skipped */
    size_t n_unexpected;
    /* A sharded forward (shard_model.c): its attention, and the position
     * of the rows' first column (LM position embeddings). */
    clf__model_attend_fn shard_attend;
    void *shard_user;
    size_t pos_offset;
};

void
clf__model_shard_hook(clf_model *m, clf__model_attend_fn fn, void *user,
                      size_t pos_offset)
{
    m->shard_attend = fn;
    m->shard_user = user;
    m->pos_offset = pos_offset;
}

clf_attention *
clf__model_layer(const clf_model *m, size_t l)
{
    return l < m->info.layers ? m->layers[l].att : NULL;
}

static const char *const layout_names[] = {
    "auto",          "lucidrains-attention", "lucidrains-encoder",
    "lucidrains-lm", "fairseq-attention",    "fairseq-encoder-layer"};

CLF_EXTERN const char *
clf_layout_name(clf_layout layout)
{
    if ((int)layout < 0 || layout > CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER)
        return "?";
    return layout_names[layout];
}

CLF_EXTERN int
clf_layout_parse(const char *name, clf_layout *out)
{
    int i;

    if (name == NULL || out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "name or out is NULL");
    for (i = 0; i <= CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER; i++)
        if (strcmp(name, layout_names[i]) == 0) {
            *out = (clf_layout)i;
            return 0;
        }
    return clf__fail(CLF_EBAD_ENUM,
                     "unknown layout \"%s\" (auto, lucidrains-attention, "
                     "lucidrains-encoder, lucidrains-lm, fairseq-attention, "
                     "fairseq-encoder-layer)",
                     name);
}

/* ------------------------------------------------------------- loading */

#define TRY CLF_TRY

/* Every layout is one entry of the table below: the tensors of a layer (in
 * blocks: attention, first norm, feed-forward, second norm) and of the
 * model, each with its shape in terms of the model's dimensions and the
 * weight it becomes.  Loading is strict, like PyTorch's
 * load_state_dict(strict=True): each tensor the layout names must be there
 * with that shape, and a tensor it does not name is an error unless the
 * caller allows it.  The dimensions are not given: the first tensor that
 * uses one defines it (so each table starts with the query projection),
 * and every later use must agree. */
enum dim {
    X_NONE = 0, /* as cols: the tensor is a vector */
    X_D,        /* d_model */
    X_HD,       /* heads x head_dim */
    X_KV,       /* key/value width: heads x head_dim, or head_dim
                   (one_kv_head) */
    X_N,        /* max_seq_len */
    X_K,        /* compressed length */
    X_F,        /* feed-forward width */
    X_V,        /* vocabulary */
    X_COUNT
};

static const char *const dim_names[X_COUNT] = {
    "",        "d_model", "heads x head_dim", "kv width", "max_seq_len", "k",
    "ffn_dim", "vocab"};

/* Where a tensor goes: an attention weight, or a buffer of the model. */
enum dest {
    TO_ATT,
    TO_LN1_G,
    TO_LN1_B,
    TO_LN2_G,
    TO_LN2_B,
    TO_W1,
    TO_B1,
    TO_W2,
    TO_B2,
    TO_TOK,
    TO_POS,
    TO_LOGIT_W,
    TO_LOGIT_B
};

enum block { B_ATTN, B_NORM1, B_FF, B_NORM2, B_COUNT };

#define T_TRANSPOSE 1 /* stored (N, k): E and F are its transpose */
#define T_KV 2        /* absent when keys and values share (see kv_shared) */
#define T_LAYERWISE 4 /* layer 0's is used by every layer (opts.layerwise) */

struct tspec {
    unsigned char block;      /* enum block (layer tensors) */
    const char *name;         /* after the layer's and the block's prefix */
    unsigned char rows, cols; /* enum dim */
    unsigned char dest;       /* enum dest */
    signed char weight;       /* clf_weight for TO_ATT */
    unsigned char flags;
};

/* linformer.LinformerSelfAttention */
static const struct tspec lucid_attn[] = {
    {B_ATTN, "to_q.weight", X_HD, X_D, TO_ATT, CLF_WEIGHT_Q, 0},
    {B_ATTN, "to_k.weight", X_KV, X_D, TO_ATT, CLF_WEIGHT_K, 0},
    {B_ATTN, "to_v.weight", X_KV, X_D, TO_ATT, CLF_WEIGHT_V, T_KV},
    {B_ATTN, "to_out.weight", X_D, X_HD, TO_ATT, CLF_WEIGHT_OUT, 0},
    {B_ATTN, "to_out.bias", X_D, X_NONE, TO_ATT, CLF_BIAS_OUT, 0},
    {B_ATTN, "proj_k", X_N, X_K, TO_ATT, CLF_PROJ_E, T_TRANSPOSE | T_LAYERWISE},
    {B_ATTN, "proj_v", X_N, X_K, TO_ATT, CLF_PROJ_F,
     T_TRANSPOSE | T_LAYERWISE | T_KV}};

/* fairseq's Linformer attention; compress_v is absent under
 * shared_kv_compressed. */
static const struct tspec fairseq_attn[] = {
    {B_ATTN, "q_proj.weight", X_HD, X_D, TO_ATT, CLF_WEIGHT_Q, 0},
    {B_ATTN, "q_proj.bias", X_HD, X_NONE, TO_ATT, CLF_BIAS_Q, 0},
    {B_ATTN, "k_proj.weight", X_HD, X_D, TO_ATT, CLF_WEIGHT_K, 0},
    {B_ATTN, "k_proj.bias", X_HD, X_NONE, TO_ATT, CLF_BIAS_K, 0},
    {B_ATTN, "v_proj.weight", X_HD, X_D, TO_ATT, CLF_WEIGHT_V, 0},
    {B_ATTN, "v_proj.bias", X_HD, X_NONE, TO_ATT, CLF_BIAS_V, 0},
    {B_ATTN, "out_proj.weight", X_D, X_HD, TO_ATT, CLF_WEIGHT_OUT, 0},
    {B_ATTN, "out_proj.bias", X_D, X_NONE, TO_ATT, CLF_BIAS_OUT, 0},
    {B_ATTN, "compress_k.weight", X_K, X_N, TO_ATT, CLF_PROJ_E, 0},
    {B_ATTN, "compress_v.weight", X_K, X_N, TO_ATT, CLF_PROJ_F, T_KV}};

/* Layer norms and feed-forward blocks. */
static const struct tspec lucid_ffn[] = {
    {B_NORM1, "weight", X_D, X_NONE, TO_LN1_G, -1, 0},
    {B_NORM1, "bias", X_D, X_NONE, TO_LN1_B, -1, 0},
    {B_FF, "w1.weight", X_F, X_D, TO_W1, -1, 0},
    {B_FF, "w1.bias", X_F, X_NONE, TO_B1, -1, 0},
    {B_FF, "w2.weight", X_D, X_F, TO_W2, -1, 0},
    {B_FF, "w2.bias", X_D, X_NONE, TO_B2, -1, 0},
    {B_NORM2, "weight", X_D, X_NONE, TO_LN2_G, -1, 0},
    {B_NORM2, "bias", X_D, X_NONE, TO_LN2_B, -1, 0}};

static const struct tspec fairseq_ffn[] = {
    {B_NORM1, "weight", X_D, X_NONE, TO_LN1_G, -1, 0},
    {B_NORM1, "bias", X_D, X_NONE, TO_LN1_B, -1, 0},
    {B_FF, "fc1.weight", X_F, X_D, TO_W1, -1, 0},
    {B_FF, "fc1.bias", X_F, X_NONE, TO_B1, -1, 0},
    {B_FF, "fc2.weight", X_D, X_F, TO_W2, -1, 0},
    {B_FF, "fc2.bias", X_D, X_NONE, TO_B2, -1, 0},
    {B_NORM2, "weight", X_D, X_NONE, TO_LN2_G, -1, 0},
    {B_NORM2, "bias", X_D, X_NONE, TO_LN2_B, -1, 0}};

/* LinformerLM's tensors outside the stack (full names). */
static const struct tspec lucid_lm[] = {
    {0, "token_emb.weight", X_V, X_D, TO_TOK, -1, 0},
    {0, "pos_emb.weight", X_N, X_D, TO_POS, -1, 0},
    {0, "to_logits.weight", X_V, X_D, TO_LOGIT_W, -1, 0},
    {0, "to_logits.bias", X_V, X_NONE, TO_LOGIT_B, -1, 0}};

struct layout_spec {
    clf_layout layout;
    int fairseq; /* attention as fairseq builds it (biases everywhere) */
    /* Prefix of layer l is root[reversible] followed by "l."; NULL: one
     * layer, no prefix. */
    const char *root[2];
    const char *block[2][B_COUNT]; /* block prefixes inside a layer */
    const struct tspec *attn;      /* the attention module's tensors */
    size_t nattn;
    const struct tspec *ffn; /* layer norms and feed-forward, or NULL */
    size_t nffn;
    const struct tspec *model; /* outside the layers, or NULL */
    size_t nmodel;
};

#define SPECS(a) a, sizeof a / sizeof a[0]
#define NONE NULL, 0
#define NO_ROOT                                                                \
    {                                                                          \
        NULL, NULL                                                             \
    }
#define NO_BLOCKS                                                              \
    {                                                                          \
        {"", "", "", ""}, { "", "", "", "" }                                   \
    }
#define LUCID_BLOCKS                                                           \
    {                                                                          \
        {"0.fn.", "0.norm.", "1.fn.", "1.norm."},                              \
        {                                                                      \
            "f.net.fn.", "f.net.norm.", "g.net.fn.", "g.net.norm."             \
        }                                                                      \
    }
#define FAIRSEQ_BLOCKS                                                         \
    {                                                                          \
        {"self_attn.", "self_attn_layer_norm.", "", "final_layer_norm."},      \
        {                                                                      \
            "", "", "", ""                                                     \
        }                                                                      \
    }

/* Detection tries the entries in this order (each by the name of its first
 * attention tensor in layer 0, sequential then reversible). */
static const struct layout_spec layouts[] = {
    {CLF_LAYOUT_LUCIDRAINS_ATTENTION, 0, NO_ROOT, NO_BLOCKS, SPECS(lucid_attn),
     NONE, NONE},
    {CLF_LAYOUT_LUCIDRAINS_ENCODER,
     0,
     {"net.layers.", "net.blocks."},
     LUCID_BLOCKS,
     SPECS(lucid_attn),
     SPECS(lucid_ffn),
     NONE},
    {CLF_LAYOUT_LUCIDRAINS_LM,
     0,
     {"linformer.net.layers.", "linformer.net.blocks."},
     LUCID_BLOCKS,
     SPECS(lucid_attn),
     SPECS(lucid_ffn),
     SPECS(lucid_lm)},
    {CLF_LAYOUT_FAIRSEQ_ATTENTION, 1, NO_ROOT, NO_BLOCKS, SPECS(fairseq_attn),
     NONE, NONE},
    {CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER, 1, NO_ROOT, FAIRSEQ_BLOCKS,
     SPECS(fairseq_attn), SPECS(fairseq_ffn), NONE}};

#define NLAYOUTS (sizeof layouts / sizeof layouts[0])

/* What loading has learnt so far. */
struct load_state {
    const clf_safetensors *st;
    const clf_model_opts *o;
    const struct layout_spec *ls;
    size_t dims[X_COUNT]; /* 0: not yet known */
    int rev;              /* reversible stack */
    int shared;           /* keys and values share: no T_KV tensors */
    size_t heads, layers;
};

static int
has(const clf_safetensors *st, const char *name)
{
    clf_tensor_info ti;
    return clf_safetensors_find(st, name, &ti) == 0;
}

/* The full name of a tensor of layer l (or of the model, for NULL l). */
static void
tensor_name(const struct load_state *s, const struct tspec *t, const size_t *l,
            char *buf, size_t cap)
{
    if (l == NULL)
        snprintf(buf, cap, "%s", t->name);
    else if (s->ls->root[s->rev] != NULL)
        snprintf(buf, cap, "%s%zu.%s%s", s->ls->root[s->rev], *l,
                 s->ls->block[s->rev][t->block], t->name);
    else
        snprintf(buf, cap, "%s%s", s->ls->block[s->rev][t->block], t->name);
}

/* "(16, 8)", "(16,)", or with names for dimensions not yet known. */
static void
expected_shape(const struct load_state *s, const struct tspec *t, char *buf,
               size_t cap)
{
    char r[40], c[40];
    unsigned char d[2] = {t->rows, t->cols};
    char *out[2] = {r, c};
    int i;

    for (i = 0; i < 2; i++) {
        if (s->dims[d[i]] != 0)
            snprintf(out[i], sizeof r, "%zu", s->dims[d[i]]);
        else
            snprintf(out[i], sizeof r, "%s", dim_names[d[i]]);
    }
    if (t->cols == X_NONE)
        snprintf(buf, cap, "(%s,)", r);
    else
        snprintf(buf, cap, "(%s, %s)", r, c);
}

/* Called when a tensor first defines dimension d. */
static int
dim_defined(struct load_state *s, enum dim d, const char *name)
{
    size_t *x = s->dims, heads = s->heads;

    if (d == X_HD) {
        if (x[X_HD] % heads != 0)
            return clf__fail(CLF_ESHAPE_MISMATCH,
                             "tensor %s has %zu rows, not a multiple of "
                             "heads %zu",
                             name, x[X_HD], heads);
    } else if (d == X_KV && x[X_KV] != x[X_HD] &&
               !(heads > 1 && x[X_KV] == x[X_HD] / heads)) {
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has %zu rows; %zu (heads x head_dim) or "
                         "%zu (one_kv_head) expected",
                         name, x[X_KV], x[X_HD], x[X_HD] / heads);
    }
    return 0;
}

/* Checks one tensor against the spec, defining the dimensions it is the
 * first to use. */
static int
check_tensor(struct load_state *s, const struct tspec *t, const char *name)
{
    unsigned char d[2] = {t->rows, t->cols};
    size_t ndim = t->cols == X_NONE ? 1 : 2, i;
    clf_tensor_info ti;
    char want[100], got[160];

    if (clf_safetensors_find(s->st, name, &ti) != 0) {
        expected_shape(s, t, want, sizeof want);
        return clf__fail(CLF_ENOT_FOUND,
                         "tensor %s %s not found: a %s model needs it", name,
                         want, clf_layout_name(s->ls->layout));
    }
    for (i = 0; i < ndim && ti.ndim == ndim; i++)
        if (s->dims[d[i]] != 0 && s->dims[d[i]] != ti.shape[i])
            break;
    if (ti.ndim != ndim || i < ndim || ti.count == 0) {
        expected_shape(s, t, want, sizeof want);
        clf__format_shape(got, sizeof got, ti.shape, ti.ndim, 1);
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has shape %s; %s expected", name, got,
                         want);
    }
    for (i = 0; i < ndim; i++)
        if (s->dims[d[i]] == 0) {
            s->dims[d[i]] = ti.shape[i];
            TRY(dim_defined(s, (enum dim)d[i], name));
        }
    return 0;
}

static int
check_specs(struct load_state *s, const struct tspec *t, size_t n,
            const size_t *l)
{
    char name[200];
    size_t i;

    for (i = 0; i < n; i++) {
        if ((t[i].flags & T_KV) && s->shared)
            continue;
        tensor_name(s, &t[i], l, name, sizeof name);
        TRY(check_tensor(s, &t[i], name));
    }
    return 0;
}

/* Layer l's index in a name under root ("net.layers.12.0.fn..." gives 12,
 * rest "0.fn..."); 0 for a name that is not a layer's, or not written the
 * way PyTorch writes indices (no sign, no leading zero). */
static int
layer_index(const char *name, const char *root, size_t *idx, const char **rest)
{
    size_t len = strlen(root);
    unsigned long long v;
    char *end;

    if (strncmp(name, root, len) != 0 || name[len] < '0' || name[len] > '9' ||
        (name[len] == '0' && name[len + 1] != '.'))
        return 0;
    errno = 0;
    v = strtoull(name + len, &end, 10);
    if (*end != '.' || errno != 0 || v >= SIZE_MAX)
        return 0;
    *idx = (size_t)v;
    *rest = end + 1;
    return 1;
}

/* Keys and values share (lucidrains share_kv, fairseq
 * shared_kv_compressed) exactly when the first layer stores none of the
 * T_KV tensors: PyTorch then creates neither to_v nor proj_v (nor
 * compress_v), and otherwise all of them, so one without the other is a
 * missing tensor, not sharing.  A "share_kv" metadata entry ("true" or
 * "false"), where the file has one, decides instead. */
static int
kv_shared(struct load_state *s)
{
    const char *meta = clf_safetensors_metadata(s->st, "share_kv");
    const size_t zero = 0;
    char name[200];
    size_t i;

    if (meta != NULL) {
        if (strcmp(meta, "true") != 0 && strcmp(meta, "false") != 0)
            return clf__fail(CLF_EFORMAT,
                             "metadata share_kv = \"%s\" is not true or "
                             "false",
                             meta);
        s->shared = strcmp(meta, "true") == 0;
        return 0;
    }
    s->shared = 1;
    for (i = 0; i < s->ls->nattn; i++) {
        if (!(s->ls->attn[i].flags & T_KV))
            continue;
        tensor_name(s, &s->ls->attn[i], &zero, name, sizeof name);
        if (has(s->st, name))
            s->shared = 0;
    }
    return 0;
}

/* The layout whose first layer's query projection the file holds. */
static int
detect(struct load_state *s)
{
    const size_t zero = 0;
    char name[200], tried[600] = "";
    size_t i, used = 0;

    for (i = 0; i < 2 * NLAYOUTS; i++) {
        s->ls = &layouts[i / 2];
        s->rev = (int)(i % 2);
        if (s->rev && s->ls->root[1] == NULL)
            continue;
        tensor_name(s, &s->ls->attn[0], &zero, name, sizeof name);
        if (has(s->st, name))
            return 0;
        used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s",
                                 used ? ", " : "", name);
        if (used >= sizeof tried)
            used = sizeof tried - 1;
    }
    return clf__fail(CLF_EINVALID_ARGUMENT,
                     "cannot tell the layout from the tensor names (none "
                     "of %s); pass a layout",
                     tried);
}

static int
pick_layout(struct load_state *s)
{
    const size_t zero = 0;
    char name[200];
    size_t i;

    if (s->o->layout == CLF_LAYOUT_AUTO)
        return detect(s);
    for (i = 0; i < NLAYOUTS; i++)
        if (layouts[i].layout == s->o->layout)
            s->ls = &layouts[i];
    if (s->ls == NULL)
        return clf__fail(CLF_EBAD_ENUM, "layout %d is not a clf_layout",
                         (int)s->o->layout);
    /* ReversibleSequence names its blocks net.blocks.{l}.f/g. */
    s->rev = 1;
    if (s->ls->root[1] != NULL) {
        tensor_name(s, &s->ls->attn[0], &zero, name, sizeof name);
        if (has(s->st, name))
            return 0;
    }
    s->rev = 0;
    return 0;
}

static int
metadata_size(const clf_safetensors *st, const char *key, size_t *out)
{
    const char *v = clf_safetensors_metadata(st, key);
    char *end;
    unsigned long long x;

    *out = 0;
    if (v == NULL)
        return 0;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (*v == '\0' || *v == '-' || *end != '\0' || errno != 0 || x > SIZE_MAX)
        return clf__fail(CLF_EFORMAT,
                         "metadata %s = \"%s\" is not a non-negative integer",
                         key, v);
    *out = (size_t)x;
    return 0;
}

static int
pick_heads(struct load_state *s)
{
    size_t meta = 0;

    TRY(metadata_size(s->st, "heads", &meta));
    if (s->o->heads != 0 && meta != 0 && s->o->heads != meta)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "heads %zu disagrees with the file's metadata "
                         "(heads %zu)",
                         s->o->heads, meta);
    s->heads = s->o->heads ? s->o->heads : meta;
    if (s->heads == 0)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "the number of heads is not in the file's metadata; "
                         "pass it (--heads)");
    return 0;
}

/* Whether rest (a name inside a layer) is one of the specs'. */
static int
in_layer(const struct load_state *s, const struct tspec *t, size_t n,
         const char *rest)
{
    size_t i, len;

    for (i = 0; i < n; i++) {
        const char *bp = s->ls->block[s->rev][t[i].block];
        if ((t[i].flags & T_KV) && s->shared)
            continue;
        len = strlen(bp);
        if (strncmp(rest, bp, len) == 0 && strcmp(rest + len, t[i].name) == 0)
            return 1;
    }
    return 0;
}

/* One more than the highest layer index of a tensor the layout names, so
 * that a gap in the numbering is a missing layer, not the end of the stack
 * (other names under a layer's prefix are merely unexpected).  No file can
 * complete more layers than it has tensors, which bounds the count. */
static void
count_layers(struct load_state *s)
{
    const char *root = s->ls->root[s->rev], *rest;
    size_t n = clf_safetensors_count(s->st), i, idx;
    clf_tensor_info ti;

    s->layers = 1;
    if (root == NULL)
        return;
    for (i = 0; i < n; i++)
        if (clf_safetensors_info(s->st, i, &ti) == 0 &&
            layer_index(ti.name, root, &idx, &rest) && idx + 1 > s->layers &&
            (in_layer(s, s->ls->attn, s->ls->nattn, rest) ||
             in_layer(s, s->ls->ffn, s->ls->nffn, rest)))
            s->layers = idx < n ? idx + 1 : n + 1;
}

/* Whether the layout uses the file's tensor `name`. */
static int
expected(const struct load_state *s, const char *name)
{
    const struct layout_spec *ls = s->ls;
    const char *rest = name;
    size_t i, idx;

    for (i = 0; i < ls->nmodel; i++)
        if (strcmp(name, ls->model[i].name) == 0)
            return 1;
    if (ls->root[s->rev] != NULL &&
        (!layer_index(name, ls->root[s->rev], &idx, &rest) || idx >= s->layers))
        return 0;
    return in_layer(s, ls->attn, ls->nattn, rest) ||
           in_layer(s, ls->ffn, ls->nffn, rest);
}

/* Lists the tensors the layout does not use; unless the caller allows
 * them, the first is an error. */
static int
collect_unexpected(clf_model *m, const struct load_state *s)
{
    size_t n = clf_safetensors_count(s->st), i;
    clf_tensor_info ti;

    for (i = 0; i < n; i++) {
        if (clf_safetensors_info(s->st, i, &ti) != 0 || expected(s, ti.name))
            continue;
        if (m->unexpected == NULL) {
            m->unexpected = calloc(n, sizeof *m->unexpected);
            if (m->unexpected == NULL)
                return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        }
        m->unexpected[m->n_unexpected] = strdup(ti.name);
        if (m->unexpected[m->n_unexpected] == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        m->n_unexpected++;
    }
    if (m->n_unexpected > 0 && !s->o->allow_unexpected)
        return clf__fail(CLF_EWEIGHT_UNUSED,
                         "tensor %s is not part of a %s model (%zu unexpected "
                         "tensor%s); allow unexpected tensors to skip them",
                         m->unexpected[0], clf_layout_name(s->ls->layout),
                         m->n_unexpected, m->n_unexpected == 1 ? "" : "s");
    return 0;
}

/* Reads a tensor whose shape has been checked into a fresh host array,
 * transposed when asked. */
static int
read_tensor(const clf_safetensors *st, const char *name, size_t rows,
            size_t cols, int transpose, float **out)
{
    size_t count = cols ? rows * cols : rows, r, c;
    float *buf, *t;
    int rc;

    *out = NULL;
    buf = malloc(count * sizeof *buf);
    if (buf == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory for %s", name);
    rc = clf_safetensors_read_f32(st, name, buf, count);
    if (rc != 0 || !transpose || cols == 0) {
        if (rc != 0)
            free(buf);
        else
            *out = buf;
        return rc;
    }
    t = malloc(count * sizeof *t);
    if (t == NULL) {
        free(buf);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory for %s", name);
    }
    for (r = 0; r < rows; r++)
        for (c = 0; c < cols; c++)
            t[c * rows + r] = buf[r * cols + c];
    free(buf);
    *out = t;
    return 0;
}

static int
upload(clf_model *m, const clf_safetensors *st, const char *name, size_t rows,
       size_t cols, cl_mem *out)
{
    float *buf = NULL;
    size_t count = cols ? rows * cols : rows;
    cl_int err;

    TRY(read_tensor(st, name, rows, cols, 0, &buf));
    *out =
        clCreateBuffer(m->ctx->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                       count * sizeof(float), buf, &err);
    free(buf);
    if (*out == NULL)
        return clf__fail(err, "tensor %s: clCreateBuffer failed (%d)", name,
                         err);
    return 0;
}

/* Sets a layer weight from a tensor (transposed when the file stores it the
 * other way round). */
static int
set_from(clf_attention *att, const clf_safetensors *st, const char *name,
         clf_weight which, size_t rows, size_t cols, int transpose)
{
    float *buf = NULL;
    int rc;

    TRY(read_tensor(st, name, rows, cols, transpose, &buf));
    rc = clf_attention_set_weight(att, which, buf, cols ? rows * cols : rows);
    free(buf);
    return rc;
}

static cl_mem *
slot(clf_model *m, struct model_layer *L, enum dest d)
{
    if (d >= TO_TOK) {
        cl_mem *model[] = {&m->tok, &m->pos, &m->logit_w, &m->logit_b};
        return model[d - TO_TOK];
    } else {
        cl_mem *layer[] = {NULL,   &L->ln1_g, &L->ln1_b, &L->ln2_g, &L->ln2_b,
                           &L->w1, &L->b1,    &L->w2,    &L->b2};
        return layer[d];
    }
}

/* Reads the specs' tensors of layer l (NULL: the model's) into place. */
static int
load_specs(clf_model *m, const struct load_state *s, const struct tspec *t,
           size_t n, const size_t *l, struct model_layer *L)
{
    const size_t zero = 0;
    char name[200];
    size_t i, rows, cols;

    for (i = 0; i < n; i++) {
        int first = (t[i].flags & T_LAYERWISE) && s->o->layerwise;
        if ((t[i].flags & T_KV) && s->shared)
            continue;
        tensor_name(s, &t[i], first ? &zero : l, name, sizeof name);
        rows = s->dims[t[i].rows];
        cols = t[i].cols == X_NONE ? 0 : s->dims[t[i].cols];
        if (t[i].dest == TO_ATT)
            TRY(set_from(L->att, s->st, name, (clf_weight)t[i].weight, rows,
                         cols, t[i].flags & T_TRANSPOSE));
        else
            TRY(upload(m, s->st, name, rows, cols, slot(m, L, t[i].dest)));
    }
    return 0;
}

static int
make_attention(clf_model *m, const struct load_state *s, struct model_layer *L)
{
    const size_t *x = s->dims;
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = x[X_D];
    d.heads = s->heads;
    d.head_dim = x[X_HD] / s->heads;
    d.max_seq_len = x[X_N];
    d.k = x[X_K];
    d.causal_block = s->o->causal_block;
    d.precision = s->o->precision;
    d.sharing = CLF_SHARE_HEADWISE;
    d.bias_out = 1;
    if (s->ls->fairseq) {
        d.bias_q = d.bias_k = d.bias_v = 1;
        d.compressed_bias = 1;
        if (s->shared)
            d.sharing = CLF_SHARE_KEY_VALUE;
    } else {
        d.share_kv = s->shared;
        d.one_kv_head = x[X_KV] != x[X_HD];
    }
    return clf_attention_create(&L->att, m->ctx, &d);
}

static void
fill_info(clf_model *m, const struct load_state *s)
{
    clf_model_info *in = &m->info;
    const size_t *x = s->dims;

    in->layout = s->ls->layout;
    in->d_model = x[X_D];
    in->heads = s->heads;
    in->head_dim = x[X_HD] / s->heads;
    in->max_seq_len = x[X_N];
    in->k = x[X_K];
    in->layers = s->layers;
    in->ffn_dim = x[X_F];
    in->vocab = x[X_V];
    in->reversible = s->rev;
    in->share_kv = !s->ls->fairseq && s->shared;
    in->one_kv_head = !s->ls->fairseq && x[X_KV] != x[X_HD];
    in->layerwise = s->o->layerwise != 0;
}

/* Checks the whole file against the layout before anything is built, so
 * that the first error is the first missing or misshapen tensor. */
static int
check_file(clf_model *m, struct load_state *s)
{
    const struct layout_spec *ls;
    size_t l;

    TRY(pick_layout(s));
    ls = s->ls;
    TRY(pick_heads(s));
    TRY(kv_shared(s));
    count_layers(s);
    for (l = 0; l < s->layers; l++) {
        TRY(check_specs(s, ls->attn, ls->nattn, &l));
        TRY(check_specs(s, ls->ffn, ls->nffn, &l));
    }
    TRY(check_specs(s, ls->model, ls->nmodel, NULL));
    return collect_unexpected(m, s);
}

static int
load(clf_model *m, const clf_safetensors *st, const clf_model_opts *o)
{
    struct load_state s;
    const struct layout_spec *ls;
    size_t l;

    memset(&s, 0, sizeof s);
    s.st = st;
    s.o = o;
    TRY(check_file(m, &s));
    ls = s.ls;
    fill_info(m, &s);
    m->layers = calloc(s.layers, sizeof *m->layers);
    if (m->layers == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (l = 0; l < s.layers; l++) {
        struct model_layer *L = &m->layers[l];
        TRY(make_attention(m, &s, L));
        TRY(load_specs(m, &s, ls->attn, ls->nattn, &l, L));
        TRY(load_specs(m, &s, ls->ffn, ls->nffn, &l, L));
    }
    return load_specs(m, &s, ls->model, ls->nmodel, NULL, NULL);
}

CLF_EXTERN int
clf_model_load(clf_model **out, clf_context *ctx, const char *path,
               const clf_model_opts *opts)
{
    clf_safetensors *st = NULL;
    clf_model_opts zero;
    clf_model *m = NULL;
    int rc;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    if (path == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "path is NULL");
    if (opts == NULL) {
        memset(&zero, 0, sizeof zero);
        opts = &zero;
    }
    rc = clf_safetensors_open(&st, path);
    if (rc != 0)
        return rc;
    m = calloc(1, sizeof *m);
    if (m == NULL) {
        clf_safetensors_close(st);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    m->ctx = ctx;
    rc = load(m, st, opts);
    clf_safetensors_close(st);
    if (rc != 0) {
        clf_model_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
}

static void
release(cl_mem *m)
{
    if (*m != NULL)
        clReleaseMemObject(*m);
    *m = NULL;
}

CLF_EXTERN void
clf_model_destroy(clf_model *m)
{
    size_t l;
    int i;

    if (m == NULL)
        return;
    if (m->ctx != NULL)
        clFinish(m->ctx->queue);
    for (l = 0; m->layers != NULL && l < m->info.layers; l++) {
        struct model_layer *L = &m->layers[l];
        clf_attention_destroy(L->att);
        release(&L->ln1_g);
        release(&L->ln1_b);
        release(&L->ln2_g);
        release(&L->ln2_b);
        release(&L->w1);
        release(&L->b1);
        release(&L->w2);
        release(&L->b2);
    }
    free(m->layers);
    release(&m->tok);
    release(&m->pos);
    release(&m->logit_w);
    release(&m->logit_b);
    for (i = 0; i < MW_COUNT; i++)
        release(&m->ws[i]);
    free(m->host_mask);
    free(m->host_ids);
    for (l = 0; l < m->n_unexpected; l++)
        free(m->unexpected[l]);
    free(m->unexpected);
    free(m);
}

CLF_EXTERN size_t
clf_model_unexpected_count(const clf_model *m)
{
    return m != NULL ? m->n_unexpected : 0;
}

CLF_EXTERN const char *
clf_model_unexpected_name(const clf_model *m, size_t index)
{
    if (m == NULL || index >= m->n_unexpected)
        return NULL;
    return m->unexpected[index];
}

CLF_EXTERN int
clf_model_info_get(const clf_model *m, clf_model_info *out)
{
    if (m == NULL || out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         m == NULL ? "m" : "out");
    *out = m->info;
    return 0;
}

CLF_EXTERN int
clf_model_set_mode(clf_model *m, clf_mode mode)
{
    size_t l;

    if (m == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "m is NULL");
    for (l = 0; l < m->info.layers; l++)
        TRY(clf_attention_set_mode(m->layers[l].att, mode));
    return 0;
}

/* ------------------------------------------------------------- forward */

static int
ensure(clf_model *m, enum model_ws id, size_t bytes)
{
    cl_int err;

    if (bytes <= m->cap[id])
        return 0;
    release(&m->ws[id]);
    m->cap[id] = 0;
    if (m->ctx->info.max_alloc != 0 && bytes > m->ctx->info.max_alloc)
        return clf__fail(CLF_ETOO_LARGE,
                         "a model workspace of %zu bytes exceeds the "
                         "device's largest allocation, %llu bytes",
                         bytes, m->ctx->info.max_alloc);
    m->ws[id] =
        clCreateBuffer(m->ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (m->ws[id] == NULL)
        return clf__fail(err,
                         "model workspace of %zu bytes: clCreateBuffer "
                         "failed (%d)",
                         bytes, err);
    m->cap[id] = bytes;
    return 0;
}

/* The way of the feed-forward GEMMs over `rows` rows, resolved for the
 * model's own shape (rows x ffn_dim x d_model): the model's choice, never
 * what the attention layers' plans chose. */
static int
ffn_way(clf_model *m, size_t rows, int *way)
{
    return clf__gemm_resolve(m->ctx, CLF_ROLE_FFN, rows, m->info.ffn_dim,
                             m->info.d_model, 1, way);
}

/* out = W2 GELU(W1 h + b1) + b2 over rows, added to out when residual:
 * bias, GELU and residual go into the GEMMs' last step where the blocked
 * kernel runs them, saving three passes over the rows. */
static int
feed_forward(clf_model *m, int way, const struct model_layer *L, cl_mem h,
             cl_mem out, size_t rows, int residual)
{
    clf_context *ctx = m->ctx;
    const size_t D = m->info.d_model, F = m->info.ffn_dim;
    cl_mem f = m->ws[MW_F];

    TRY(clf__gemm_ex(ctx, way, 1, rows, F, D, h, 0, D, L->w1, 0, D, 0, f, 0, F,
                     L->b1, 1));
    return clf__gemm_ex(ctx, way, 1, rows, D, F, f, 0, F, L->w2, 0, F, residual,
                        out, 0, D, L->b2, 0);
}

/* One attention layer, with the model's device copy of the mask. */
static int
attend(clf_model *m, const struct model_layer *L, cl_mem in, cl_mem out,
       size_t B, size_t n, const clf_forward_opts *o)
{
    int masked = o != NULL && (o->lengths != NULL || o->key_mask != NULL);

    if (m->shard_attend != NULL)
        return m->shard_attend(m->shard_user, L->att, in, out);
    return clf__attention_forward_cl_mask(L->att, in, 0, out, 0, B, n, o,
                                          masked ? m->ws[MW_MASK] : NULL);
}

/* Runs the stack on MW_X (batch*n rows of D); the result is left in
 * MW_X. */
static int
run_stack(clf_model *m, size_t B, size_t n, const clf_forward_opts *o)
{
    clf_context *ctx = m->ctx;
    const size_t D = m->info.d_model, rows = B * n;
    cl_mem x = m->ws[MW_X], x2 = m->ws[MW_X2], h = m->ws[MW_H], a = m->ws[MW_A];
    size_t l;
    cl_int err;
    int ffn = CLF_GEMM_UNDECIDED;

    switch (m->info.layout) {
    case CLF_LAYOUT_LUCIDRAINS_ATTENTION:
    case CLF_LAYOUT_FAIRSEQ_ATTENTION:
        TRY(attend(m, &m->layers[0], x, a, B, n, o));
        err = clEnqueueCopyBuffer(ctx->queue, a, x, 0, 0,
                                  rows * D * sizeof(float), 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return clf__fail(err, "copy failed (%d)", err);
        return 0;
    case CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER: {
        const struct model_layer *L = &m->layers[0];
        TRY(ffn_way(m, rows, &ffn));
        TRY(attend(m, L, x, a, B, n, o));
        TRY(clf__residual_add(ctx, a, 0, x, 0, rows * D));
        TRY(clf__layernorm(ctx, a, 0, x, 0, rows, D, L->ln1_g, L->ln1_b,
                           LN_EPS));
        TRY(feed_forward(m, ffn, L, x, a, rows, 0));
        TRY(clf__residual_add(ctx, a, 0, x, 0, rows * D));
        return clf__layernorm(ctx, a, 0, x, 0, rows, D, L->ln2_g, L->ln2_b,
                              LN_EPS);
    }
    default:
        break;
    }

    /* lucidrains: pre-LN blocks, sequential or reversible. */
    TRY(ffn_way(m, rows, &ffn));
    if (m->info.reversible) {
        err = clEnqueueCopyBuffer(ctx->queue, x, x2, 0, 0,
                                  rows * D * sizeof(float), 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return clf__fail(err, "copy failed (%d)", err);
    }
    for (l = 0; l < m->info.layers; l++) {
        const struct model_layer *L = &m->layers[l];
        cl_mem in1 = m->info.reversible ? x2 : x; /* f reads x2 */
        TRY(clf__layernorm(ctx, in1, 0, h, 0, rows, D, L->ln1_g, L->ln1_b,
                           LN_EPS));
        TRY(attend(m, L, h, a, B, n, o));
        TRY(clf__residual_add(ctx, x, 0, a, 0, rows * D));
        TRY(clf__layernorm(ctx, x, 0, h, 0, rows, D, L->ln2_g, L->ln2_b,
                           LN_EPS));
        TRY(feed_forward(m, ffn, L, h, m->info.reversible ? x2 : x, rows, 1));
    }
    if (m->info.reversible)
        TRY(clf__residual_add(ctx, x, 0, x2, 0, rows * D));
    return 0;
}

/* The device workspaces of a forward of `rows` rows (n per sequence). */
static int
ensure_all(clf_model *m, size_t rows, size_t n, size_t bytes, size_t fb,
           size_t ob)
{
    const size_t D = m->info.d_model;

    TRY(ensure(m, MW_IN, bytes));
    TRY(ensure(m, MW_OUT, ob));
    TRY(ensure(m, MW_X, bytes));
    TRY(ensure(m, MW_X2, m->info.reversible ? bytes : 1));
    TRY(ensure(m, MW_H, bytes));
    TRY(ensure(m, MW_A, bytes));
    TRY(ensure(m, MW_F, fb ? fb : 1));
    TRY(ensure(m, MW_IDS, rows * sizeof(cl_int)));
    TRY(ensure(m, MW_MASK, rows));
    return ensure(m, MW_POS, m->pos_offset ? n * D * sizeof(float) : 1);
}

/* The host copies of the mask and token ids, grown to `rows`. */
static int
host_buffers(clf_model *m, size_t rows)
{
    unsigned char *hm;
    int *hi;

    if (m->host_cap >= rows)
        return 0;
    hm = realloc(m->host_mask, rows);
    if (hm == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    m->host_mask = hm;
    hi = realloc(m->host_ids, rows * sizeof *hi);
    if (hi == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    m->host_ids = hi;
    m->host_cap = rows;
    return 0;
}

/* The padding mask the options describe, built and uploaded. */
static int
upload_mask(clf_model *m, size_t B, size_t n, const clf_forward_opts *o)
{
    cl_int err;

    if (o == NULL || (o->lengths == NULL && o->key_mask == NULL))
        return 0;
    if (o->lengths != NULL && o->key_mask != NULL)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "give lengths or key_mask, not both");
    TRY(clf__mask_build(m->host_mask, B, n, o->lengths, o->key_mask));
    err = clEnqueueWriteBuffer(m->ctx->queue, m->ws[MW_MASK], CL_TRUE, 0, B * n,
                               m->host_mask, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "mask upload failed (%d)", err);
    return 0;
}

/* Sizes the workspaces and uploads the padding mask for the final
 * zeroing. */
static int
prepare(clf_model *m, size_t B, size_t n, size_t out_cols,
        const clf_forward_opts *o)
{
    const size_t D = m->info.d_model;
    size_t rows, bytes, fb, ob;

    if (B == 0 || n == 0)
        return clf__fail(CLF_EBAD_SIZE, "%s is 0",
                         B == 0 ? "batch" : "seq_len");
    if (n > m->info.max_seq_len)
        return clf__fail(CLF_ESEQ_TOO_LONG,
                         "seq_len %zu exceeds max_seq_len %zu", n,
                         m->info.max_seq_len);
    if (clf__mul(B, n, &rows) || clf__mul3(rows, D, sizeof(float), &bytes) ||
        clf__mul3(rows, m->info.ffn_dim, sizeof(float), &fb) ||
        clf__mul3(rows, out_cols, sizeof(float), &ob))
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "batch %zu x seq_len %zu overflows size_t", B, n);
    TRY(ensure_all(m, rows, n, bytes, fb, ob));
    TRY(host_buffers(m, rows));
    return upload_mask(m, B, n, o);
}

static int
finish(clf_model *m, size_t rows, size_t cols, float *y,
       const clf_forward_opts *o)
{
    cl_int err;

    if (o != NULL && (o->lengths != NULL || o->key_mask != NULL))
        TRY(clf__mask_rows(m->ctx, m->ws[MW_OUT], 0, m->ws[MW_OUT], 0, rows,
                           cols, m->ws[MW_MASK]));
    err = clEnqueueReadBuffer(m->ctx->queue, m->ws[MW_OUT], CL_TRUE, 0,
                              rows * cols * sizeof(float), y, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "output read-back failed (%d)", err);
    return 0;
}

CLF_EXTERN int
clf_model_forward(clf_model *m, const float *x, size_t batch, size_t seq_len,
                  float *y, const clf_forward_opts *opts)
{
    const size_t D = m ? m->info.d_model : 0;
    size_t rows;
    cl_int err;

    if (m == NULL || x == NULL || y == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         m == NULL   ? "m"
                         : x == NULL ? "x"
                                     : "y");
    if (m->info.layout == CLF_LAYOUT_LUCIDRAINS_LM)
        return clf__fail(CLF_EINVALID_ARGUMENT, "an LM takes token ids: use "
                                                "clf_model_forward_tokens");
    TRY(prepare(m, batch, seq_len, D, opts));
    rows = batch * seq_len;
    err = clEnqueueWriteBuffer(m->ctx->queue, m->ws[MW_X], CL_TRUE, 0,
                               rows * D * sizeof(float), x, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "input upload failed (%d)", err);
    TRY(run_stack(m, batch, seq_len, opts));
    err = clEnqueueCopyBuffer(m->ctx->queue, m->ws[MW_X], m->ws[MW_OUT], 0, 0,
                              rows * D * sizeof(float), 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "copy failed (%d)", err);
    return finish(m, rows, D, y, opts);
}

/* A shard's rows start at position pos_offset: its position embeddings. */
static int
positions(clf_model *m, size_t n)
{
    const size_t row = m->info.d_model * sizeof(float);
    cl_int err;

    if (m->pos_offset == 0)
        return 0;
    err = clEnqueueCopyBuffer(m->ctx->queue, m->pos, m->ws[MW_POS],
                              m->pos_offset * row, 0, n * row, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "copy of position embeddings failed (%d)", err);
    return 0;
}

CLF_EXTERN int
clf_model_forward_tokens(clf_model *m, const long long *ids, size_t batch,
                         size_t seq_len, float *logits,
                         const clf_forward_opts *opts)
{
    size_t rows, i, D, V;
    cl_int err;
    int way = CLF_GEMM_UNDECIDED;

    if (m == NULL || ids == NULL || logits == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         m == NULL     ? "m"
                         : ids == NULL ? "ids"
                                       : "logits");
    if (m->info.layout != CLF_LAYOUT_LUCIDRAINS_LM)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "a %s model takes float inputs: use "
                         "clf_model_forward",
                         clf_layout_name(m->info.layout));
    D = m->info.d_model;
    V = m->info.vocab;
    TRY(prepare(m, batch, seq_len, V, opts));
    rows = batch * seq_len;
    for (i = 0; i < rows; i++) {
        if (ids[i] < 0 || (unsigned long long)ids[i] >= V)
            return clf__fail(CLF_EBAD_SIZE,
                             "token id %lld at index %zu is outside the "
                             "vocabulary (0..%zu)",
                             ids[i], i, V - 1);
        m->host_ids[i] = (int)ids[i];
    }
    err =
        clEnqueueWriteBuffer(m->ctx->queue, m->ws[MW_IDS], CL_TRUE, 0,
                             rows * sizeof(cl_int), m->host_ids, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "token upload failed (%d)", err);
    TRY(positions(m, seq_len));
    /* The logits' GEMM takes the feed-forward role's choice for its own
     * shape, resolved before the layers' so that the listing shows the
     * feed-forward one. */
    TRY(clf__gemm_resolve(m->ctx, CLF_ROLE_FFN, rows, V, D, 1, &way));
    TRY(clf__embed(m->ctx, m->ws[MW_IDS], rows, seq_len, D, m->tok,
                   m->pos_offset ? m->ws[MW_POS] : m->pos, m->ws[MW_X]));
    TRY(run_stack(m, batch, seq_len, opts));
    TRY(clf__gemm(m->ctx, way, 0, 1, rows, V, D, 1.0f, m->ws[MW_X], 0, D,
                  m->logit_w, 0, D, 0.0f, m->ws[MW_OUT], 0, V));
    TRY(clf__add_bias(m->ctx, m->ws[MW_OUT], 0, rows, V, V, m->logit_b));
    return finish(m, rows, V, logits, opts);
}
