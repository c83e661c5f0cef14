/* Private to src/model: the model object, shared by its loader
 * (model_load.c) and its forward (model.c), and the table of file layouts
 * (layouts.c) the loader checks a file against.  The floors above see
 * only model.h. */
#ifndef CLF_MODEL_IMPL_H
#define CLF_MODEL_IMPL_H

#include "model/model.h"

struct model_layer {
    clf_attention *att;
    cl_mem ln1_g, ln1_b, ln2_g, ln2_b; /* LN1 before (pre-LN) or after
                                          (post-LN) attention */
    cl_mem w1, b1, w2, b2;             /* feed-forward */
    /* Widths: the layer's attention and feed-forward read d_in columns,
     * the feed-forward writes d_out (both d_model, except in a
     * linformer-pytorch model with ff_intermediate), and where they
     * differ the residual is wr x + br (the package's resample linear). */
    size_t d_in, d_out;
    cl_mem wr, br;
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
    int post_ln;   /* x = LN1(x + Attn(x)) (and LN2 after the
                      feed-forward), not pre-LN */
    size_t width;  /* the widest activation row: d_model, or a layer's
                      d_in or d_out where wider (ff_intermediate) */
    int act;       /* the feed-forward's activation, an enum clf__act */
    clf_mode mode; /* every layer's (clf_model_set_mode; the load's) */
    clf__model_attend_fn shard_attend;
    void *shard_user;
    size_t pos_offset;
};

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

/* layouts.c: the names of the dimensions (messages) and the layouts, in
 * the order detection tries them. */
extern const char *const clf__dim_names[X_COUNT];
extern const struct layout_spec clf__layouts[];
extern const size_t clf__nlayouts;

/* A hyperparameter the tensor shapes show, as the metadata may hold it
 * too: its key, the value the shapes give (0: this file has no such
 * size), its name in messages and a note after it. */
struct clf__meta_size {
    const char *key;
    size_t value;
    const char *what, *note;
};

/* model.c: the metadata's integer under key into *out (0 when absent); a
 * value that is not a non-negative integer is a CLF_EFORMAT error. */
int clf__meta_size_get(const clf_safetensors *st, const char *key, size_t *out);
/* model.c: each of the n sizes the metadata holds (str(None) counts as
 * absent) must equal the shapes' value: else a CLF_ESHAPE_MISMATCH error
 * naming both. */
int clf__meta_sizes_agree(const clf_safetensors *st,
                          const struct clf__meta_size *k, size_t n);

/* model.c: lists the file's tensors not marked in used[] (one flag
 * per tensor) as the model's unexpected ones; unless allow, the first is a
 * CLF_EWEIGHT_UNUSED error naming it and the layout. */
int clf__model_unexpected(clf_model *m, const clf_safetensors *st,
                          const char *used, int allow, clf_layout layout);

/* load_lp.c: the layouts of the linformer-pytorch package and of the
 * single-head class.  detect: whether the file is one of them (its layout
 * into *out); load: the whole model from the file, strictly. */
int clf__lp_detect(const clf_safetensors *st, clf_layout *out);
int clf__lp_load(clf_model *m, const clf_safetensors *st,
                 const clf_model_opts *o, clf_layout layout);

#endif /* CLF_MODEL_IMPL_H */
