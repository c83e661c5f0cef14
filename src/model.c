/* Trained models from safetensors files: the lucidrains `linformer` layouts
 * (self-attention, the Linformer encoder stack, sequential or reversible,
 * and LinformerLM) and fairseq's Linformer attention and encoder layer.
 *
 *   lucidrains, pre-LN:  x += Attn(LN1(x));  x += W2 GELU(W1 LN2(x) + b1) + b2
 *   reversible:          x1 = x2 = x;  x1 += f(x2);  x2 += g(x1);  x1 + x2
 *   fairseq, post-LN:    x = LN1(x + Attn(x));  x = LN2(x + FFN(x))
 *   LM:                  x = tok[ids] + pos[0..n);  stack;  x W^T + b
 * Layer norm: eps 1e-5, biased variance; GELU: exact erf. */
#include "internal.h"

#include <errno.h>
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

enum model_ws { MW_IN, MW_OUT, MW_X, MW_X2, MW_H, MW_A, MW_F, MW_IDS,
                MW_MASK, MW_COUNT };

struct clf_model {
    clf_context *ctx;
    clf_model_info info;
    struct model_layer *layers;
    cl_mem tok, pos, logit_w, logit_b; /* LM */
    cl_mem ws[MW_COUNT];
    size_t cap[MW_COUNT]; /* bytes */
    unsigned char *host_mask;
    int *host_ids;
    size_t host_cap; /* entries of host_mask and host_ids */
};

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

static int
has(const clf_safetensors *st, const char *name)
{
    clf_tensor_info ti;
    return clf_safetensors_find(st, name, &ti) == 0;
}

/* The tensor's shape, which must have ndim dimensions. */
static int
shape_of(const clf_safetensors *st, const char *name, size_t ndim,
         size_t *shape)
{
    clf_tensor_info ti;
    size_t i;

    TRY(clf_safetensors_find(st, name, &ti));
    if (ti.ndim != ndim)
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has %zu dimensions; %zu expected", name,
                         ti.ndim, ndim);
    for (i = 0; i < ndim; i++)
        shape[i] = ti.shape[i];
    return 0;
}

/* Reads a tensor whose shape must be rows x cols (cols 0: a vector of
 * rows), optionally transposed, into a fresh host array. */
static int
read_tensor(const clf_safetensors *st, const char *name, size_t rows,
            size_t cols, int transpose, float **out)
{
    clf_tensor_info ti;
    size_t count = cols ? rows * cols : rows, r, c;
    float *buf, *t;
    int rc;

    *out = NULL;
    TRY(clf_safetensors_find(st, name, &ti));
    if ((cols == 0 && (ti.ndim != 1 || ti.shape[0] != rows)) ||
        (cols != 0 &&
         (ti.ndim != 2 || ti.shape[0] != rows || ti.shape[1] != cols))) {
        char got[160];
        clf__format_shape(got, sizeof got, ti.shape, ti.ndim, 1);
        if (cols)
            return clf__fail(CLF_ESHAPE_MISMATCH,
                             "tensor %s has shape %s; (%zu, %zu) expected",
                             name, got, rows, cols);
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has shape %s; (%zu,) expected", name, got,
                         rows);
    }
    buf = malloc(count * sizeof *buf);
    if (buf == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory for %s", name);
    rc = clf_safetensors_read_f32(st, name, buf, count);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    if (transpose && cols) {
        t = malloc(count * sizeof *t);
        if (t == NULL) {
            free(buf);
            return clf__fail(CLF_ENO_MEMORY, "out of host memory for %s",
                             name);
        }
        for (r = 0; r < rows; r++)
            for (c = 0; c < cols; c++)
                t[c * rows + r] = buf[r * cols + c];
        free(buf);
        buf = t;
    }
    *out = buf;
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
    *out = clCreateBuffer(m->ctx->context,
                          CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
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
    if (*v == '\0' || *v == '-' || *end != '\0' || errno != 0)
        return clf__fail(CLF_EFORMAT,
                         "metadata %s = \"%s\" is not a non-negative integer",
                         key, v);
    *out = (size_t)x;
    return 0;
}

static int
detect(const clf_safetensors *st, clf_layout *layout)
{
    if (has(st, "to_q.weight"))
        *layout = CLF_LAYOUT_LUCIDRAINS_ATTENTION;
    else if (has(st, "token_emb.weight"))
        *layout = CLF_LAYOUT_LUCIDRAINS_LM;
    else if (has(st, "net.layers.0.0.fn.to_q.weight") ||
             has(st, "net.blocks.0.f.net.fn.to_q.weight"))
        *layout = CLF_LAYOUT_LUCIDRAINS_ENCODER;
    else if (has(st, "self_attn.q_proj.weight"))
        *layout = CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER;
    else if (has(st, "q_proj.weight"))
        *layout = CLF_LAYOUT_FAIRSEQ_ATTENTION;
    else
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "cannot tell the layout from the tensor names (no "
                         "to_q.weight, net.layers.0.0.fn.to_q.weight, "
                         "token_emb.weight, q_proj.weight or "
                         "self_attn.q_proj.weight); pass a layout");
    return 0;
}

/* Name prefixes of attention layer l and of its blocks. */
struct names {
    char attn[96]; /* prefix of the attention module's tensors */
    char norm1[96], norm2[96], ff[96];
};

static void
layer_names(const clf_model *m, int reversible, size_t l, struct names *nm)
{
    const char *root =
        m->info.layout == CLF_LAYOUT_LUCIDRAINS_LM ? "linformer." : "";

    switch (m->info.layout) {
    case CLF_LAYOUT_LUCIDRAINS_ENCODER:
    case CLF_LAYOUT_LUCIDRAINS_LM:
        if (reversible) {
            snprintf(nm->attn, sizeof nm->attn, "%snet.blocks.%zu.f.net.fn.",
                     root, l);
            snprintf(nm->norm1, sizeof nm->norm1,
                     "%snet.blocks.%zu.f.net.norm.", root, l);
            snprintf(nm->ff, sizeof nm->ff, "%snet.blocks.%zu.g.net.fn.",
                     root, l);
            snprintf(nm->norm2, sizeof nm->norm2,
                     "%snet.blocks.%zu.g.net.norm.", root, l);
        } else {
            snprintf(nm->attn, sizeof nm->attn, "%snet.layers.%zu.0.fn.",
                     root, l);
            snprintf(nm->norm1, sizeof nm->norm1, "%snet.layers.%zu.0.norm.",
                     root, l);
            snprintf(nm->ff, sizeof nm->ff, "%snet.layers.%zu.1.fn.", root, l);
            snprintf(nm->norm2, sizeof nm->norm2, "%snet.layers.%zu.1.norm.",
                     root, l);
        }
        break;
    case CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER:
        snprintf(nm->attn, sizeof nm->attn, "self_attn.");
        snprintf(nm->norm1, sizeof nm->norm1, "self_attn_layer_norm.");
        snprintf(nm->norm2, sizeof nm->norm2, "final_layer_norm.");
        nm->ff[0] = '\0';
        break;
    default:
        nm->attn[0] = nm->norm1[0] = nm->norm2[0] = nm->ff[0] = '\0';
        break;
    }
}

/* The head width from the rows of a query projection tensor. */
static int
split_heads(const char *name, size_t rows, clf_model_info *in)
{
    if (rows % in->heads != 0)
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has %zu rows, not a multiple of heads %zu",
                         name, rows, in->heads);
    in->head_dim = rows / in->heads;
    return 0;
}

static int
lucidrains_layer(clf_model *m, const clf_safetensors *st,
                 const struct names *nm, const clf_model_opts *o,
                 struct model_layer *L, size_t l)
{
    clf_model_info *in = &m->info;
    clf_attention_desc d;
    char name[160];
    size_t q[2], kv[2], pk[2], dkv;

    snprintf(name, sizeof name, "%sto_q.weight", nm->attn);
    TRY(shape_of(st, name, 2, q));
    if (q[1] != in->d_model && in->d_model != 0)
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has %zu columns; d_model is %zu", name,
                         q[1], in->d_model);
    in->d_model = q[1];
    TRY(split_heads(name, q[0], in));
    snprintf(name, sizeof name, "%sto_k.weight", nm->attn);
    TRY(shape_of(st, name, 2, kv));
    dkv = kv[0];
    in->one_kv_head = dkv == in->head_dim && in->heads > 1;
    if (dkv != q[0] && !in->one_kv_head)
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has %zu rows; %zu (heads x head_dim) or "
                         "%zu (one_kv_head) expected",
                         name, dkv, q[0], in->head_dim);
    snprintf(name, sizeof name, "%sto_v.weight", nm->attn);
    in->share_kv = !has(st, name);
    /* proj_k is stored (N, k) and used as E = proj_k^T. */
    snprintf(name, sizeof name, "%sproj_k", nm->attn);
    if (o->layerwise && l > 0) {
        struct names first;
        layer_names(m, in->reversible, 0, &first);
        snprintf(name, sizeof name, "%sproj_k", first.attn);
    }
    TRY(shape_of(st, name, 2, pk));
    in->max_seq_len = pk[0];
    in->k = pk[1];

    memset(&d, 0, sizeof d);
    d.d_model = in->d_model;
    d.heads = in->heads;
    d.head_dim = in->head_dim;
    d.max_seq_len = in->max_seq_len;
    d.k = in->k;
    d.sharing = CLF_SHARE_HEADWISE;
    d.share_kv = in->share_kv;
    d.one_kv_head = in->one_kv_head;
    d.bias_out = 1;
    d.causal_block = o->causal_block;
    TRY(clf_attention_create(&L->att, m->ctx, &d));
    snprintf(name, sizeof name, "%sto_q.weight", nm->attn);
    TRY(set_from(L->att, st, name, CLF_WEIGHT_Q, q[0], in->d_model, 0));
    snprintf(name, sizeof name, "%sto_k.weight", nm->attn);
    TRY(set_from(L->att, st, name, CLF_WEIGHT_K, dkv, in->d_model, 0));
    if (!in->share_kv) {
        snprintf(name, sizeof name, "%sto_v.weight", nm->attn);
        TRY(set_from(L->att, st, name, CLF_WEIGHT_V, dkv, in->d_model, 0));
    }
    snprintf(name, sizeof name, "%sto_out.weight", nm->attn);
    TRY(set_from(L->att, st, name, CLF_WEIGHT_OUT, in->d_model, q[0], 0));
    snprintf(name, sizeof name, "%sto_out.bias", nm->attn);
    TRY(set_from(L->att, st, name, CLF_BIAS_OUT, in->d_model, 0, 0));
    {
        struct names src = *nm;
        if (o->layerwise && l > 0)
            layer_names(m, in->reversible, 0, &src);
        snprintf(name, sizeof name, "%sproj_k", src.attn);
        TRY(set_from(L->att, st, name, CLF_PROJ_E, in->max_seq_len, in->k,
                     1));
        if (!in->share_kv) {
            snprintf(name, sizeof name, "%sproj_v", src.attn);
            TRY(set_from(L->att, st, name, CLF_PROJ_F, in->max_seq_len,
                         in->k, 1));
        }
    }
    return 0;
}

static int
fairseq_attention(clf_model *m, const clf_safetensors *st,
                  const struct names *nm, const clf_model_opts *o,
                  struct model_layer *L)
{
    clf_model_info *in = &m->info;
    clf_attention_desc d;
    char name[160];
    size_t q[2], ck[2];

    snprintf(name, sizeof name, "%sq_proj.weight", nm->attn);
    TRY(shape_of(st, name, 2, q));
    in->d_model = q[1];
    TRY(split_heads(name, q[0], in));
    /* compress_k.weight is E as stored, (k, N). */
    snprintf(name, sizeof name, "%scompress_k.weight", nm->attn);
    TRY(shape_of(st, name, 2, ck));
    in->k = ck[0];
    in->max_seq_len = ck[1];
    snprintf(name, sizeof name, "%scompress_v.weight", nm->attn);
    in->share_kv = 0;

    memset(&d, 0, sizeof d);
    d.d_model = in->d_model;
    d.heads = in->heads;
    d.head_dim = in->head_dim;
    d.max_seq_len = in->max_seq_len;
    d.k = in->k;
    d.sharing = has(st, name) ? CLF_SHARE_HEADWISE : CLF_SHARE_KEY_VALUE;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    d.compressed_bias = 1;
    d.causal_block = o->causal_block;
    TRY(clf_attention_create(&L->att, m->ctx, &d));
#define FS(key, which, rows, cols)                                             \
    do {                                                                       \
        snprintf(name, sizeof name, "%s" key, nm->attn);                       \
        TRY(set_from(L->att, st, name, which, rows, cols, 0));                 \
    } while (0)
    FS("q_proj.weight", CLF_WEIGHT_Q, q[0], in->d_model);
    FS("q_proj.bias", CLF_BIAS_Q, q[0], 0);
    FS("k_proj.weight", CLF_WEIGHT_K, q[0], in->d_model);
    FS("k_proj.bias", CLF_BIAS_K, q[0], 0);
    FS("v_proj.weight", CLF_WEIGHT_V, q[0], in->d_model);
    FS("v_proj.bias", CLF_BIAS_V, q[0], 0);
    FS("out_proj.weight", CLF_WEIGHT_OUT, in->d_model, q[0]);
    FS("out_proj.bias", CLF_BIAS_OUT, in->d_model, 0);
    FS("compress_k.weight", CLF_PROJ_E, in->k, in->max_seq_len);
    if (d.sharing == CLF_SHARE_HEADWISE)
        FS("compress_v.weight", CLF_PROJ_F, in->k, in->max_seq_len);
#undef FS
    return 0;
}

/* Layer norms and the feed-forward block of one layer. */
static int
blocks(clf_model *m, const clf_safetensors *st, const struct names *nm,
       struct model_layer *L)
{
    clf_model_info *in = &m->info;
    const size_t D = in->d_model;
    const char *w1 = in->layout == CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER
                         ? "fc1."
                         : "w1.";
    const char *w2 = in->layout == CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER
                         ? "fc2."
                         : "w2.";
    char name[160];
    size_t f[2];

    snprintf(name, sizeof name, "%sweight", nm->norm1);
    TRY(upload(m, st, name, D, 0, &L->ln1_g));
    snprintf(name, sizeof name, "%sbias", nm->norm1);
    TRY(upload(m, st, name, D, 0, &L->ln1_b));
    snprintf(name, sizeof name, "%sweight", nm->norm2);
    TRY(upload(m, st, name, D, 0, &L->ln2_g));
    snprintf(name, sizeof name, "%sbias", nm->norm2);
    TRY(upload(m, st, name, D, 0, &L->ln2_b));
    snprintf(name, sizeof name, "%s%sweight", nm->ff, w1);
    TRY(shape_of(st, name, 2, f));
    if (in->ffn_dim != 0 && f[0] != in->ffn_dim)
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has %zu rows; the first layer's has %zu",
                         name, f[0], in->ffn_dim);
    in->ffn_dim = f[0];
    TRY(upload(m, st, name, in->ffn_dim, D, &L->w1));
    snprintf(name, sizeof name, "%s%sbias", nm->ff, w1);
    TRY(upload(m, st, name, in->ffn_dim, 0, &L->b1));
    snprintf(name, sizeof name, "%s%sweight", nm->ff, w2);
    TRY(upload(m, st, name, D, in->ffn_dim, &L->w2));
    snprintf(name, sizeof name, "%s%sbias", nm->ff, w2);
    TRY(upload(m, st, name, D, 0, &L->b2));
    return 0;
}

static int
load(clf_model *m, const clf_safetensors *st, const clf_model_opts *o)
{
    clf_model_info *in = &m->info;
    size_t meta_heads = 0, l;
    char name[160];
    int reversible;

    if (o->layout == CLF_LAYOUT_AUTO) {
        TRY(detect(st, &in->layout));
    } else {
        if ((int)o->layout < 0 || o->layout > CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER)
            return clf__fail(CLF_EBAD_ENUM, "layout %d is not a clf_layout",
                             (int)o->layout);
        in->layout = o->layout;
    }
    /* ReversibleSequence names its blocks net.blocks.{l}.f/g. */
    reversible = has(st, "net.blocks.0.f.net.fn.to_q.weight") ||
                 has(st, "linformer.net.blocks.0.f.net.fn.to_q.weight");
    in->reversible = reversible;
    in->layerwise = o->layerwise != 0;

    TRY(metadata_size(st, "heads", &meta_heads));
    if (o->heads != 0 && meta_heads != 0 && o->heads != meta_heads)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "heads %zu disagrees with the file's metadata "
                         "(heads %zu)",
                         o->heads, meta_heads);
    in->heads = o->heads ? o->heads : meta_heads;
    if (in->heads == 0)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "the number of heads is not in the file's metadata; "
                         "pass it (--heads)");

    /* Count the layers. */
    in->layers = 1;
    if (in->layout == CLF_LAYOUT_LUCIDRAINS_ENCODER ||
        in->layout == CLF_LAYOUT_LUCIDRAINS_LM) {
        for (l = 0;; l++) {
            struct names nm;
            layer_names(m, reversible, l, &nm);
            snprintf(name, sizeof name, "%sto_q.weight", nm.attn);
            if (!has(st, name))
                break;
        }
        if (l == 0) {
            struct names nm;
            layer_names(m, reversible, 0, &nm);
            snprintf(name, sizeof name, "%sto_q.weight", nm.attn);
            return clf__fail(CLF_ENOT_FOUND,
                             "tensor %s not found: not a %s model", name,
                             clf_layout_name(in->layout));
        }
        in->layers = l;
    }
    m->layers = calloc(in->layers, sizeof *m->layers);
    if (m->layers == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");

    for (l = 0; l < in->layers; l++) {
        struct names nm;
        layer_names(m, reversible, l, &nm);
        switch (in->layout) {
        case CLF_LAYOUT_LUCIDRAINS_ATTENTION:
            TRY(lucidrains_layer(m, st, &nm, o, &m->layers[l], l));
            break;
        case CLF_LAYOUT_LUCIDRAINS_ENCODER:
        case CLF_LAYOUT_LUCIDRAINS_LM:
            TRY(lucidrains_layer(m, st, &nm, o, &m->layers[l], l));
            TRY(blocks(m, st, &nm, &m->layers[l]));
            break;
        case CLF_LAYOUT_FAIRSEQ_ATTENTION:
            TRY(fairseq_attention(m, st, &nm, o, &m->layers[l]));
            break;
        case CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER:
            TRY(fairseq_attention(m, st, &nm, o, &m->layers[l]));
            TRY(blocks(m, st, &nm, &m->layers[l]));
            break;
        default:
            return clf__fail(CLF_EBAD_ENUM, "layout %d", (int)in->layout);
        }
    }

    if (in->layout == CLF_LAYOUT_LUCIDRAINS_LM) {
        size_t t[2];
        TRY(shape_of(st, "token_emb.weight", 2, t));
        in->vocab = t[0];
        if (t[1] != in->d_model)
            return clf__fail(CLF_ESHAPE_MISMATCH,
                             "tensor token_emb.weight has %zu columns; "
                             "d_model is %zu",
                             t[1], in->d_model);
        TRY(upload(m, st, "token_emb.weight", in->vocab, in->d_model,
                   &m->tok));
        TRY(upload(m, st, "pos_emb.weight", in->max_seq_len, in->d_model,
                   &m->pos));
        TRY(upload(m, st, "to_logits.weight", in->vocab, in->d_model,
                   &m->logit_w));
        TRY(upload(m, st, "to_logits.bias", in->vocab, 0, &m->logit_b));
    }
    return 0;
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
    free(m);
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
    m->ws[id] = clCreateBuffer(m->ctx->context, CL_MEM_READ_WRITE, bytes,
                               NULL, &err);
    if (m->ws[id] == NULL)
        return clf__fail(err, "model workspace of %zu bytes: clCreateBuffer "
                              "failed (%d)",
                         bytes, err);
    m->cap[id] = bytes;
    return 0;
}

/* out = W2 GELU(W1 h + b1) + b2 over rows, added to out when residual:
 * bias, GELU and residual go into the GEMMs' last step where the blocked
 * kernel runs them, saving three passes over the rows. */
static int
feed_forward(clf_model *m, const struct model_layer *L, cl_mem h, cl_mem out,
             size_t rows, int residual)
{
    clf_context *ctx = m->ctx;
    const size_t D = m->info.d_model, F = m->info.ffn_dim;
    cl_mem f = m->ws[MW_F];

    TRY(clf__gemm_ex(ctx, 1, rows, F, D, h, 0, D, L->w1, 0, D, 0, f, 0, F,
                     L->b1, 1));
    return clf__gemm_ex(ctx, 1, rows, D, F, f, 0, F, L->w2, 0, F, residual,
                        out, 0, D, L->b2, 0);
}

/* One attention layer, with the model's device copy of the mask. */
static int
attend(clf_model *m, const struct model_layer *L, cl_mem in, cl_mem out,
       size_t B, size_t n, const clf_forward_opts *o)
{
    int masked = o != NULL && (o->lengths != NULL || o->key_mask != NULL);

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
    cl_mem x = m->ws[MW_X], x2 = m->ws[MW_X2], h = m->ws[MW_H],
           a = m->ws[MW_A];
    size_t l;
    cl_int err;

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
        TRY(attend(m, L, x, a, B, n, o));
        TRY(clf__residual_add(ctx, a, 0, x, 0, rows * D));
        TRY(clf__layernorm(ctx, a, 0, x, 0, rows, D, L->ln1_g, L->ln1_b,
                           LN_EPS));
        TRY(feed_forward(m, L, x, a, rows, 0));
        TRY(clf__residual_add(ctx, a, 0, x, 0, rows * D));
        return clf__layernorm(ctx, a, 0, x, 0, rows, D, L->ln2_g, L->ln2_b,
                              LN_EPS);
    }
    default:
        break;
    }

    /* lucidrains: pre-LN blocks, sequential or reversible. */
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
        TRY(feed_forward(m, L, h, m->info.reversible ? x2 : x, rows, 1));
    }
    if (m->info.reversible)
        TRY(clf__residual_add(ctx, x, 0, x2, 0, rows * D));
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
        return clf__fail(CLF_EBAD_SIZE, "%s is 0", B == 0 ? "batch"
                                                          : "seq_len");
    if (n > m->info.max_seq_len)
        return clf__fail(CLF_ESEQ_TOO_LONG,
                         "seq_len %zu exceeds max_seq_len %zu", n,
                         m->info.max_seq_len);
    if (clf__mul(B, n, &rows) || clf__mul3(rows, D, sizeof(float), &bytes) ||
        clf__mul3(rows, m->info.ffn_dim, sizeof(float), &fb) ||
        clf__mul3(rows, out_cols, sizeof(float), &ob))
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "batch %zu x seq_len %zu overflows size_t", B, n);
    TRY(ensure(m, MW_IN, bytes));
    TRY(ensure(m, MW_OUT, ob));
    TRY(ensure(m, MW_X, bytes));
    TRY(ensure(m, MW_X2, m->info.reversible ? bytes : 1));
    TRY(ensure(m, MW_H, bytes));
    TRY(ensure(m, MW_A, bytes));
    TRY(ensure(m, MW_F, fb ? fb : 1));
    TRY(ensure(m, MW_IDS, rows * sizeof(cl_int)));
    TRY(ensure(m, MW_MASK, rows));
    if (m->host_cap < rows) {
        unsigned char *hm = realloc(m->host_mask, rows);
        int *hi;
        if (hm == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        m->host_mask = hm;
        hi = realloc(m->host_ids, rows * sizeof *hi);
        if (hi == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        m->host_ids = hi;
        m->host_cap = rows;
    }
    if (o != NULL && (o->lengths != NULL || o->key_mask != NULL)) {
        cl_int err;
        if (o->lengths != NULL && o->key_mask != NULL)
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "give lengths or key_mask, not both");
        TRY(clf__mask_build(m->host_mask, B, n, o->lengths, o->key_mask));
        err = clEnqueueWriteBuffer(m->ctx->queue, m->ws[MW_MASK], CL_TRUE, 0,
                                   rows, m->host_mask, 0, NULL, NULL);
        if (err != CL_SUCCESS)
            return clf__fail(err, "mask upload failed (%d)", err);
    }
    return 0;
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
                         m == NULL ? "m" : x == NULL ? "x" : "y");
    if (m->info.layout == CLF_LAYOUT_LUCIDRAINS_LM)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "an LM takes token ids: use "
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

CLF_EXTERN int
clf_model_forward_tokens(clf_model *m, const long long *ids, size_t batch,
                         size_t seq_len, float *logits,
                         const clf_forward_opts *opts)
{
    size_t rows, i, D, V;
    cl_int err;

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
    err = clEnqueueWriteBuffer(m->ctx->queue, m->ws[MW_IDS], CL_TRUE, 0,
                               rows * sizeof(cl_int), m->host_ids, 0, NULL,
                               NULL);
    if (err != CL_SUCCESS)
        return clf__fail(err, "token upload failed (%d)", err);
    TRY(clf__embed(m->ctx, m->ws[MW_IDS], rows, seq_len, D, m->tok, m->pos,
                   m->ws[MW_X]));
    TRY(run_stack(m, batch, seq_len, opts));
    TRY(clf__gemm(m->ctx, 0, 1, rows, V, D, 1.0f, m->ws[MW_X], 0, D,
                  m->logit_w, 0, D, 0.0f, m->ws[MW_OUT], 0, V));
    TRY(clf__add_bias(m->ctx, m->ws[MW_OUT], 0, rows, V, V, m->logit_b));
    return finish(m, rows, V, logits, opts);
}
