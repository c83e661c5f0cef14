/* The file layouts trained models come in, one table entry each (tensor
 * names, shapes in terms of the model's dimensions, and what each tensor
 * becomes), and the layout names of the API. */
#include "model/model.h"
#include "model/model_impl.h"

#include <string.h>

static const char *const layout_names[] = {"auto",
                                           "lucidrains-attention",
                                           "lucidrains-encoder",
                                           "lucidrains-lm",
                                           "fairseq-attention",
                                           "fairseq-encoder-layer",
                                           "linformer-pytorch-attention",
                                           "linformer-pytorch",
                                           "linformer-pytorch-lm",
                                           "single-head-attention"};
#define NLAYOUTS (int)(sizeof layout_names / sizeof layout_names[0])

CLF_EXTERN const char *
clf_layout_name(clf_layout layout)
{
    if ((int)layout < 0 || (int)layout >= NLAYOUTS)
        return "?";
    return layout_names[layout];
}

CLF_EXTERN int
clf_layout_parse(const char *name, clf_layout *out)
{
    int i;

    if (name == NULL || out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "name or out is NULL");
    for (i = 0; i < NLAYOUTS; i++)
        if (strcmp(name, layout_names[i]) == 0) {
            *out = (clf_layout)i;
            return 0;
        }
    return clf__fail(CLF_EBAD_ENUM,
                     "unknown layout \"%s\" (auto, lucidrains-attention, "
                     "lucidrains-encoder, lucidrains-lm, fairseq-attention, "
                     "fairseq-encoder-layer, linformer-pytorch-attention, "
                     "linformer-pytorch, linformer-pytorch-lm, "
                     "single-head-attention)",
                     name);
}

const char *const clf__dim_names[X_COUNT] = {
    "",        "d_model", "heads x head_dim", "kv width", "max_seq_len", "k",
    "ffn_dim", "vocab"};

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
const struct layout_spec clf__layouts[] = {
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

const size_t clf__nlayouts = sizeof clf__layouts / sizeof clf__layouts[0];
