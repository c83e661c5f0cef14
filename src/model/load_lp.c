/* Loading the models of the linformer-pytorch package (tatp22; Linformer,
 * LinformerLM and a bare MHAttention) and of the single-head Linformer
 * attention class (query/key/value with biases, E and F, no output
 * projection).  Their state_dicts do not fit the table of layouts.c:
 *
 *   - each head has its own to_q/to_k/to_v (no biases): stacked by rows
 *     into the layer's W_q, W_k, W_v;
 *   - E and F are nn.Linear(N, k) over the sequence axis, a bias per
 *     compressed slot: the layer's bias_proj;
 *   - sharing none, headwise, kv or layerwise: safetensors' save_model
 *     keeps one name of each group of shared tensors, so a missing E or F
 *     is taken from the tensor those modes share it with (only from the
 *     mode the "parameter_sharing" metadata names, where the file has it);
 *     the layer then stores E and F per head, or once where every head's
 *     are equal (and once for both where E = F);
 *   - a k per layer (k_reduce_by_layer), head_dim free (dim_d), w_o or
 *     w_o_1 then w_o_2 (folded on the host, in double, into one);
 *   - post-LN residuals x = LN(x + f(x)), feed-forward w_1, gelu or relu
 *     ("activation" metadata), w_2, or no feed-forward (include_ff=False);
 *     where a feed-forward changes the width (ff_intermediate: the first
 *     layer widens to it, the last goes back), x = LN(resample(x) +
 *     f(x)) with the resample linear, and the next layer at that width;
 *   - full_attention=True ("full_attention" metadata): full mode, E and F
 *     loaded but unused;
 *   - LinformerLM: token embedding, the sinusoidal position table built
 *     from the stored inv_freq, the logits.
 *   - method="convolution": E and F are Conv1d(dh, dh, w, stride w),
 *     the layer's convolution compressor (k = floor(N / w) slots);
 *   - causal=True ("causal" metadata): the layers' slot_mask (query t
 *     sees slots 0..t, in full mode the ordinary causal mask), as
 *     trained; in Linformer mode it leaks the future, which the tool
 *     warns of;
 * What the package offers beyond this is refused with the reason:
 * method="no_params", emb_dim != channels (ProjectInOut) and
 * decoder_mode. */
#include "model/model.h"
#include "model/model_impl.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY CLF_TRY
#define NAME 256 /* a tensor's name */
#define PFX 96   /* a prefix of names */

enum lp_share { SH_ANY, SH_NONE, SH_HEADWISE, SH_KV, SH_LAYERWISE };

struct lp {
    clf_model *m;
    const clf_safetensors *st;
    const clf_model_opts *o;
    const char *root; /* "" or "linformer." (LM) */
    const char *what; /* the layout's name, for messages */
    char *used;       /* per file tensor: explained by the layout */
    enum lp_share share;
    int slot_mask; /* causal=True: the layers apply its slot mask */
    int method;    /* the "method" metadata: 0 learnable, 1 convolution, -1
                   not given (the tensors' shapes tell) */
    size_t heads, C, dh, N, F;
    char first[PFX]; /* the first attention's prefix (layerwise) */
};

/* A host array of floats, freed by the caller. */
struct arr {
    float *v;
    size_t rows, cols; /* cols 0: a vector */
};

static void
arr_free(struct arr *a)
{
    free(a->v);
    a->v = NULL;
}

static int
has(const struct lp *s, const char *name)
{
    clf_tensor_info ti;
    return clf_safetensors_find(s->st, name, &ti) == 0;
}

static void
mark_used(struct lp *s, const char *name)
{
    size_t n = clf_safetensors_count(s->st), i;
    clf_tensor_info ti;

    for (i = 0; i < n; i++)
        if (clf_safetensors_info(s->st, i, &ti) == 0 &&
            strcmp(ti.name, name) == 0)
            s->used[i] = 1;
}

/* "(16, 8)" with "?" for a dimension the file defines. */
static void
shape_text(char *buf, size_t cap, size_t rows, size_t cols, int ndim)
{
    char r[32] = "?", c[32] = "?";

    if (rows)
        snprintf(r, sizeof r, "%zu", rows);
    if (cols)
        snprintf(c, sizeof c, "%zu", cols);
    if (ndim == 1)
        snprintf(buf, cap, "(%s,)", r);
    else
        snprintf(buf, cap, "(%s, %s)", r, c);
}

/* The count floats of tensor `name` into out->v (fresh), marked used. */
static int
read_all(struct lp *s, const char *name, size_t count, struct arr *out)
{
    int rc;

    out->v = malloc(count * sizeof *out->v);
    if (out->v == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory for %s", name);
    rc = clf_safetensors_read_f32(s->st, name, out->v, count);
    if (rc != 0) {
        arr_free(out);
        return rc;
    }
    mark_used(s, name);
    return 0;
}

/* Reads tensor `name` of ndim 1 or 2 into a fresh array; a dimension of 0
 * in *rows or *cols is defined by the file, any other must match. */
static int
get(struct lp *s, const char *name, int ndim, size_t *rows, size_t *cols,
    struct arr *out)
{
    clf_tensor_info ti;
    char want[80], got[160];

    out->v = NULL;
    if (clf_safetensors_find(s->st, name, &ti) != 0) {
        shape_text(want, sizeof want, *rows, cols ? *cols : 0, ndim);
        return clf__fail(CLF_ENOT_FOUND,
                         "tensor %s %s not found: a %s model needs it", name,
                         want, s->what);
    }
    if ((int)ti.ndim != ndim || ti.count == 0 ||
        (*rows != 0 && ti.shape[0] != *rows) ||
        (ndim == 2 && *cols != 0 && ti.shape[1] != *cols)) {
        shape_text(want, sizeof want, *rows, ndim == 2 ? *cols : 0, ndim);
        clf__format_shape(got, sizeof got, ti.shape, ti.ndim, 1);
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has shape %s; %s expected", name, got,
                         want);
    }
    *rows = ti.shape[0];
    if (ndim == 2)
        *cols = ti.shape[1];
    out->rows = *rows;
    out->cols = ndim == 2 ? *cols : 0;
    return read_all(s, name, ti.count, out);
}

static int
get_vec(struct lp *s, const char *name, size_t *len, struct arr *out)
{
    return get(s, name, 1, len, NULL, out);
}

/* ------------------------------------------------------------ metadata */

/* A True/False hyperparameter (Python's str(); true/false also taken);
 * dflt where the file does not say. */
static int
meta_bool(const struct lp *s, const char *key, int dflt, int *out)
{
    const char *v = clf_safetensors_metadata(s->st, key);

    *out = dflt;
    if (v == NULL)
        return 0;
    if (strcmp(v, "True") == 0 || strcmp(v, "true") == 0)
        *out = 1;
    else if (strcmp(v, "False") == 0 || strcmp(v, "false") == 0)
        *out = 0;
    else
        return clf__fail(CLF_EFORMAT,
                         "metadata %s = \"%s\" is not True or False", key, v);
    return 0;
}

/* A hyperparameter with one of `n` values; its index, dflt when absent. */
static int
meta_choice(const struct lp *s, const char *key, const char *const *values,
            int n, int dflt, int *out)
{
    const char *v = clf_safetensors_metadata(s->st, key);
    int i;

    *out = dflt;
    if (v == NULL)
        return 0;
    for (i = 0; i < n; i++)
        if (strcmp(v, values[i]) == 0) {
            *out = i;
            return 0;
        }
    return clf__fail(CLF_EFORMAT, "metadata %s = \"%s\" is not one of %s%s%s",
                     key, v, values[0], n > 1 ? ", " : "",
                     n > 1 ? values[1] : "");
}

/* What the package can build but a file cannot bring here. */
static int
refuse_options(struct lp *s, int *relu, int *full)
{
    static const char *const act[] = {"gelu", "relu"};
    static const char *const method[] = {"learnable", "convolution",
                                         "no_params"};
    static const char *const share[] = {"", "none", "headwise", "kv",
                                        "layerwise"};
    int causal, dec, meth, sh;

    TRY(meta_choice(s, "activation", act, 2, 0, relu));
    TRY(meta_bool(s, "full_attention", 0, full));
    TRY(meta_bool(s, "causal", 0, &causal));
    TRY(meta_bool(s, "decoder_mode", 0, &dec));
    TRY(meta_choice(s, "method", method, 3, -1, &meth));
    s->method = meth;
    TRY(meta_choice(s, "parameter_sharing", share, 5, 0, &sh));
    s->share = (enum lp_share)sh;
    s->slot_mask = causal;
    if (causal && s->o->causal_block != 0)
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "the model was trained with causal=True, whose "
                         "mask over the compressed slots it runs with; a "
                         "causal block (the prefix-safe causal mode) would "
                         "run it unlike it was trained");
    if (dec)
        return clf__fail(CLF_EUNSUPPORTED,
                         "decoder_mode=True (cross-attention to an encoder's "
                         "output) is not supported");
    if (meth == 2)
        return clf__fail(CLF_EUNSUPPORTED,
                         "method=\"no_params\" keeps E and F out of the "
                         "state_dict (random matrices drawn when the model "
                         "was built), so the file cannot reproduce the model");
    return 0;
}

/* ------------------------------------------------------- E and F lookup */

/* The name E or F (`side`) of head h under prefix a is stored as, where
 * sharing makes safetensors' save_model keep another name of its group;
 * the first of the candidates the sharing mode allows that the file has. */
static int
resolve_ef(const struct lp *s, const char *a, size_t h, char side, char *out)
{
    char c[5][NAME];
    /* The modes each candidate is a name of: own name (every mode), E for
     * F (kv), head 0's (headwise, kv), head 0's E (kv, layerwise), the
     * first layer's head 0's E (layerwise). */
    static const unsigned allow[5] = {
        1u << SH_NONE | 1u << SH_HEADWISE | 1u << SH_KV | 1u << SH_LAYERWISE,
        1u << SH_KV | 1u << SH_LAYERWISE,
        1u << SH_HEADWISE | 1u << SH_KV | 1u << SH_LAYERWISE,
        1u << SH_KV | 1u << SH_LAYERWISE, 1u << SH_LAYERWISE};
    int i;

    snprintf(c[0], NAME, "%sheads.%zu.%c.weight", a, h, side);
    snprintf(c[1], NAME, "%sheads.%zu.E.weight", a, h);
    snprintf(c[2], NAME, "%sheads.0.%c.weight", a, side);
    snprintf(c[3], NAME, "%sheads.0.E.weight", a);
    snprintf(c[4], NAME, "%sheads.0.E.weight", s->first);
    for (i = 0; i < 5; i++)
        if ((s->share == SH_ANY || (allow[i] >> s->share & 1u)) &&
            has(s, c[i])) {
            memcpy(out, c[i], NAME);
            return 0;
        }
    return clf__fail(CLF_ENOT_FOUND,
                     "tensor %s (k, %zu) not found, nor a tensor the "
                     "sharing modes would share it with: a %s model needs "
                     "it",
                     c[0], s->N, s->what);
}

/* The sequence length of a model whose E and F are Conv1d compressors (no
 * tensor shows it): the "input_size" metadata. */
static int
conv_seq_len(struct lp *s, const char *name)
{
    const char *v = clf_safetensors_metadata(s->st, "input_size");
    char *end = NULL;
    unsigned long long n;

    if (v == NULL)
        return clf__fail(CLF_ENOT_FOUND,
                         "tensor %s is a Conv1d compressor, which does not "
                         "show the sequence length: the file's metadata "
                         "needs input_size (the constructor's argument)",
                         name);
    n = strtoull(v, &end, 10);
    if (end == v || *end != '\0' || n == 0 || n > UINT_MAX)
        return clf__fail(CLF_EFORMAT,
                         "metadata input_size = \"%s\" is not a sequence "
                         "length",
                         v);
    s->N = (size_t)n;
    return 0;
}

/* A Conv1d weight (dh, dh, w), w <= N, as dh x dh*w (PyTorch's order). */
static int
get_conv(struct lp *s, const char *name, size_t *w, struct arr *out)
{
    clf_tensor_info ti;
    char got[160];

    out->v = NULL;
    memset(&ti, 0, sizeof ti);
    if (clf_safetensors_find(s->st, name, &ti) != 0 || ti.ndim != 3 ||
        ti.shape[0] != s->dh || ti.shape[1] != s->dh || ti.shape[2] == 0 ||
        ti.shape[2] > s->N || (*w != 0 && ti.shape[2] != *w)) {
        clf__format_shape(got, sizeof got, ti.shape, ti.ndim, 1);
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has shape %s; a Conv1d compressor of "
                         "(%zu, %zu, w) with w %s expected",
                         name, got, s->dh, s->dh,
                         *w ? "the other heads'" : "<= max_seq_len");
    }
    *w = ti.shape[2];
    out->rows = s->dh;
    out->cols = s->dh * *w;
    return read_all(s, name, ti.count, out);
}

/* One E or F of head h: an nn.Linear's weight (k, N) and bias (k), or
 * (method="convolution") a Conv1d's weight (dh, dh, w) and bias (dh), its
 * k = floor(N / w) slots; *conv says which, and must agree across calls
 * (-1: not yet known). */
static int
read_ef(struct lp *s, const char *a, size_t h, char side, size_t *k, int *conv,
        struct arr *w, struct arr *b)
{
    char name[NAME], bias[NAME];
    size_t len, win = *k ? s->N / *k : 0, kk;
    clf_tensor_info ti;
    int is_conv;

    w->v = b->v = NULL;
    TRY(resolve_ef(s, a, h, side, name));
    is_conv = clf_safetensors_find(s->st, name, &ti) == 0 && ti.ndim == 3;
    if ((*conv >= 0 && is_conv != *conv) ||
        (s->method >= 0 && is_conv != (s->method == 1)))
        return clf__fail(CLF_ESHAPE_MISMATCH, "tensor %s is %s, but %s", name,
                         is_conv ? "a Conv1d weight" : "not a Conv1d weight",
                         *conv >= 0 ? "the layer's other E and F are not"
                                    : "the method metadata says otherwise");
    *conv = is_conv;
    len = strlen(name) - strlen("weight");
    snprintf(bias, sizeof bias, "%.*sbias", (int)len, name);
    if (!is_conv) {
        TRY(get(s, name, 2, k, &s->N, w));
        return get_vec(s, bias, k, b);
    }
    if (s->N == 0)
        TRY(conv_seq_len(s, name));
    TRY(get_conv(s, name, &win, w));
    kk = s->N / win;
    *k = kk;
    return get_vec(s, bias, &s->dh, b);
}

/* ------------------------------------------------------------ a layer */

/* The layer's weights on the host. */
struct lp_layer {
    size_t k;
    int conv;         /* E and F are Conv1d compressors */
    size_t per, bper; /* floats of one head's E and of its bias */
    struct arr q, kk, v, wo, bo;
    struct arr e, be, f, bf; /* stacked per head, or once (nE 1) */
    clf_sharing sharing;
    size_t nE;
};

static void
layer_free(struct lp_layer *L)
{
    arr_free(&L->q);
    arr_free(&L->kk);
    arr_free(&L->v);
    arr_free(&L->wo);
    arr_free(&L->bo);
    arr_free(&L->e);
    arr_free(&L->be);
    arr_free(&L->f);
    arr_free(&L->bf);
}

/* to_<which>.{h}.weight (dh, C) of every head, stacked by rows. */
static int
stack_heads(struct lp *s, const char *a, const char *which, struct arr *out)
{
    char name[NAME];
    struct arr one;
    size_t h, per;

    out->v = NULL;
    for (h = 0; h < s->heads; h++) {
        snprintf(name, sizeof name, "%s%s.%zu.weight", a, which, h);
        TRY(get(s, name, 2, &s->dh, &s->C, &one));
        per = s->dh * s->C;
        if (out->v == NULL) {
            out->v = malloc(s->heads * per * sizeof *out->v);
            if (out->v == NULL) {
                arr_free(&one);
                return clf__fail(CLF_ENO_MEMORY, "out of host memory");
            }
            out->rows = s->heads * s->dh;
            out->cols = s->C;
        }
        memcpy(out->v + h * per, one.v, per * sizeof *one.v);
        arr_free(&one);
    }
    return 0;
}

/* W = W2 W1 (C x hd) and b = W2 b1 + b2, in double. */
static int
fold(struct lp_layer *L, size_t C, size_t hd, size_t I, const struct arr *w1,
     const struct arr *b1, const struct arr *w2, const struct arr *b2)
{
    size_t r, c, i;

    L->wo.v = malloc(C * hd * sizeof(float));
    L->bo.v = malloc(C * sizeof(float));
    if (L->wo.v == NULL || L->bo.v == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    L->wo.rows = L->bo.rows = C;
    L->wo.cols = hd;
    L->bo.cols = 0;
    for (r = 0; r < C; r++) {
        double bb = b2->v[r];
        for (i = 0; i < I; i++)
            bb += (double)w2->v[r * I + i] * b1->v[i];
        L->bo.v[r] = (float)bb;
        for (c = 0; c < hd; c++) {
            double acc = 0.0;
            for (i = 0; i < I; i++)
                acc += (double)w2->v[r * I + i] * w1->v[i * hd + c];
            L->wo.v[r * hd + c] = (float)acc;
        }
    }
    return 0;
}

/* w_o_1 then w_o_2 (w_o_intermediate_dim), read into w[0..3]. */
static int
read_two(struct lp *s, const char *a, size_t hd, size_t *I, struct arr *w)
{
    char n[NAME];

    snprintf(n, sizeof n, "%sw_o_1.weight", a);
    TRY(get(s, n, 2, I, &hd, &w[0]));
    snprintf(n, sizeof n, "%sw_o_1.bias", a);
    TRY(get_vec(s, n, I, &w[1]));
    snprintf(n, sizeof n, "%sw_o_2.weight", a);
    TRY(get(s, n, 2, &s->C, I, &w[2]));
    snprintf(n, sizeof n, "%sw_o_2.bias", a);
    return get_vec(s, n, &s->C, &w[3]);
}

/* w_o, or w_o_2 (w_o_1 x + b_1) + b_2 folded into one linear in double. */
static int
out_proj(struct lp *s, const char *a, struct lp_layer *L)
{
    char n1[NAME], n2[NAME];
    size_t hd = s->heads * s->dh, I = 0;
    struct arr w[4];
    int rc, i;

    snprintf(n1, sizeof n1, "%sw_o.weight", a);
    snprintf(n2, sizeof n2, "%sw_o_1.weight", a);
    if (has(s, n1) || !has(s, n2)) {
        TRY(get(s, n1, 2, &s->C, &hd, &L->wo));
        snprintf(n1, sizeof n1, "%sw_o.bias", a);
        return get_vec(s, n1, &s->C, &L->bo);
    }
    memset(w, 0, sizeof w);
    rc = read_two(s, a, hd, &I, w);
    if (rc == 0)
        rc = fold(L, s->C, hd, I, &w[0], &w[1], &w[2], &w[3]);
    for (i = 0; i < 4; i++)
        arr_free(&w[i]);
    return rc;
}

static int
same(const struct arr *a, size_t ia, const struct arr *b, size_t ib, size_t len)
{
    return memcmp(a->v + ia * len, b->v + ib * len, len * sizeof(float)) == 0;
}

/* Appends head h's E or F (w, b) to the stacked arrays. */
static int
append(struct arr *all, struct arr *ball, const struct arr *w,
       const struct arr *b, size_t h, size_t heads)
{
    const size_t per = w->rows * w->cols;

    if (h == 0) {
        all->v = malloc(heads * per * sizeof(float));
        ball->v = malloc(heads * w->rows * sizeof(float));
        if (all->v == NULL || ball->v == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        all->rows = heads * w->rows;
        all->cols = w->cols;
        ball->rows = heads * w->rows;
        ball->cols = 0;
    }
    memcpy(all->v + h * per, w->v, per * sizeof(float));
    memcpy(ball->v + h * w->rows, b->v, w->rows * sizeof(float));
    return 0;
}

/* The sharing the values allow: one E and F for all heads where each
 * head's are the same, and E as F where equal. */
static void
choose_sharing(const struct lp *s, struct lp_layer *L)
{
    const size_t kk = L->bper, per = L->per;
    size_t h;
    int eq = 1, kv = 1;

    for (h = 1; h < s->heads; h++)
        eq = eq && same(&L->e, 0, &L->e, h, per) &&
             same(&L->f, 0, &L->f, h, per) && same(&L->be, 0, &L->be, h, kk) &&
             same(&L->bf, 0, &L->bf, h, kk);
    for (h = 0; h < s->heads; h++)
        kv = kv && same(&L->e, h, &L->f, h, per) &&
             same(&L->be, h, &L->bf, h, kk);
    L->nE = eq ? 1 : s->heads;
    L->sharing = !eq  ? CLF_SHARE_PER_HEAD
                 : kv ? CLF_SHARE_KEY_VALUE
                      : CLF_SHARE_HEADWISE;
    L->e.rows = L->f.rows = L->be.rows = L->bf.rows = L->nE * kk;
}

/* Every head's E and F (stacked), then their sharing. */
static int
read_projections(struct lp *s, const char *a, struct lp_layer *L)
{
    struct arr w, b;
    size_t h;
    int side, rc = 0;

    L->k = 0;
    L->conv = -1;
    for (side = 0; side < 2 && rc == 0; side++)
        for (h = 0; h < s->heads && rc == 0; h++) {
            rc = read_ef(s, a, h, side ? 'F' : 'E', &L->k, &L->conv, &w, &b);
            if (rc == 0) {
                L->per = w.rows * w.cols;
                L->bper = b.rows;
            }
            if (rc == 0)
                rc = side ? append(&L->f, &L->bf, &w, &b, h, s->heads)
                          : append(&L->e, &L->be, &w, &b, h, s->heads);
            arr_free(&w);
            arr_free(&b);
        }
    if (rc == 0)
        choose_sharing(s, L);
    return rc;
}

static int
read_layer(struct lp *s, const char *a, struct lp_layer *L)
{
    TRY(stack_heads(s, a, "to_q", &L->q));
    TRY(stack_heads(s, a, "to_k", &L->kk));
    TRY(stack_heads(s, a, "to_v", &L->v));
    TRY(read_projections(s, a, L));
    return out_proj(s, a, L);
}

static int
set_w(clf_attention *att, clf_weight which, const struct arr *a)
{
    size_t count = a->cols ? a->rows * a->cols : a->rows;
    return clf_attention_set_weight(att, which, a->v, count);
}

/* The layer on the device from its host weights. */
static int
make_layer(struct lp *s, const struct lp_layer *L, clf_attention **out)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = s->C;
    d.heads = s->heads;
    d.head_dim = s->dh;
    d.max_seq_len = s->N;
    d.k = L->k;
    d.sharing = L->sharing;
    d.bias_out = 1;
    d.bias_proj = 1;
    d.compression = L->conv ? CLF_COMPRESS_CONV : CLF_COMPRESS_LINEAR;
    d.causal_block = s->o->causal_block;
    d.slot_mask = s->slot_mask;
    d.precision = s->o->precision;
    TRY(clf_attention_create(out, s->m->ctx, &d));
    TRY(set_w(*out, CLF_WEIGHT_Q, &L->q));
    TRY(set_w(*out, CLF_WEIGHT_K, &L->kk));
    TRY(set_w(*out, CLF_WEIGHT_V, &L->v));
    TRY(set_w(*out, CLF_WEIGHT_OUT, &L->wo));
    TRY(set_w(*out, CLF_BIAS_OUT, &L->bo));
    TRY(set_w(*out, CLF_PROJ_E, &L->e));
    TRY(set_w(*out, CLF_BIAS_E, &L->be));
    if (L->sharing == CLF_SHARE_KEY_VALUE)
        return 0;
    TRY(set_w(*out, CLF_PROJ_F, &L->f));
    return set_w(*out, CLF_BIAS_F, &L->bf);
}

/* ------------------------------------------------- buffers of the model */

static int
upload(struct lp *s, const float *v, size_t count, const char *name,
       cl_mem *out)
{
    cl_int err;

    *out = clf__mem_create(s->m->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                           count * sizeof(float), (void *)v, &err, name);
    if (*out == NULL)
        return clf__fail(err, "tensor %s: clCreateBuffer failed (%d)", name,
                         err);
    return 0;
}

/* Tensor `name` (a vector of len, or len x cols) onto the device. */
static int
load_buf(struct lp *s, const char *name, size_t *len, size_t *cols, cl_mem *out)
{
    struct arr a;
    int rc;

    TRY(get(s, name, cols ? 2 : 1, len, cols, &a));
    rc = upload(s, a.v, cols ? *len * *cols : *len, name, out);
    arr_free(&a);
    return rc;
}

/* A residual's LayerNorm of `width` columns: <r>norm.weight and .bias, as
 * LN1 or LN2. */
static int
load_norm(struct lp *s, const char *r, size_t *width, cl_mem *g, cl_mem *b)
{
    char name[NAME];

    snprintf(name, sizeof name, "%snorm.weight", r);
    TRY(load_buf(s, name, width, NULL, g));
    snprintf(name, sizeof name, "%snorm.bias", r);
    return load_buf(s, name, width, NULL, b);
}

/* The feed-forward residual at width s->C in: w_1, w_2 and, where it
 * changes the width (ff_intermediate), the resample linear, whose rows
 * give the width out; then s->C is the width out. */
static int
load_ffn(struct lp *s, const char *r, struct model_layer *M)
{
    char name[NAME];
    size_t out = 0;

    M->d_in = s->C;
    snprintf(name, sizeof name, "%sresample.weight", r);
    if (has(s, name)) {
        TRY(load_buf(s, name, &out, &s->C, &M->wr));
        snprintf(name, sizeof name, "%sresample.bias", r);
        TRY(load_buf(s, name, &out, NULL, &M->br));
    } else {
        out = s->C;
    }
    snprintf(name, sizeof name, "%sfn.w_1.weight", r);
    TRY(load_buf(s, name, &s->F, &s->C, &M->w1));
    snprintf(name, sizeof name, "%sfn.w_1.bias", r);
    TRY(load_buf(s, name, &s->F, NULL, &M->b1));
    snprintf(name, sizeof name, "%sfn.w_2.weight", r);
    TRY(load_buf(s, name, &out, &s->F, &M->w2));
    snprintf(name, sizeof name, "%sfn.w_2.bias", r);
    TRY(load_buf(s, name, &out, NULL, &M->b2));
    TRY(load_norm(s, r, &out, &M->ln2_g, &M->ln2_b));
    M->d_out = out;
    s->C = out;
    return 0;
}

/* One attention layer (prefix a) into M. */
static int
attention_layer(struct lp *s, const char *a, struct model_layer *M, size_t *k)
{
    struct lp_layer L;
    int rc;

    memset(&L, 0, sizeof L);
    rc = read_layer(s, a, &L);
    if (rc == 0)
        rc = make_layer(s, &L, &M->att);
    *k = L.k;
    layer_free(&L);
    return rc;
}

/* ------------------------------------------------------------- models */

/* The number of heads: to_q.0, to_q.1, ... under prefix a; against the
 * caller's and the metadata's. */
static int
count_heads(struct lp *s, const char *a)
{
    char name[NAME];
    size_t h = 0, meta = 0;
    const char *v = clf_safetensors_metadata(s->st, "nhead");

    for (;; h++) {
        snprintf(name, sizeof name, "%sto_q.%zu.weight", a, h);
        if (!has(s, name))
            break;
    }
    if (h == 0)
        return clf__fail(CLF_ENOT_FOUND,
                         "tensor %sto_q.0.weight not found: a %s model needs "
                         "it",
                         a, s->what);
    TRY(clf__meta_size_get(s->st, "nhead", &meta));
    if ((v != NULL && meta != h) || (s->o->heads != 0 && s->o->heads != h))
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "the file holds to_q of %zu heads; %s says %zu", h,
                         v != NULL && meta != h ? "its metadata nhead"
                                                : "heads",
                         v != NULL && meta != h ? meta : s->o->heads);
    s->heads = h;
    return 0;
}

/* Whether any tensor's name starts with prefix. */
static int
any_under(const struct lp *s, const char *prefix)
{
    size_t n = clf_safetensors_count(s->st), i, len = strlen(prefix);
    clf_tensor_info ti;

    for (i = 0; i < n; i++)
        if (clf_safetensors_info(s->st, i, &ti) == 0 &&
            strncmp(ti.name, prefix, len) == 0)
            return 1;
    return 0;
}

/* Linformer's seq: attention residuals, each followed by a feed-forward
 * one unless include_ff=False. */
static int
encoder(struct lp *s)
{
    clf_model *m = s->m;
    char a[PFX], r[64], f[NAME];
    size_t i = 0, l, k, C0 = 0;
    int ffn = -1;

    snprintf(s->first, sizeof s->first, "%sseq.0.fn.", s->root);
    TRY(count_heads(s, s->first));
    m->layers = calloc(clf_safetensors_count(s->st) + 1, sizeof *m->layers);
    if (m->layers == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (l = 0;; l++) {
        snprintf(r, sizeof r, "%sseq.%zu.", s->root, i);
        snprintf(f, sizeof f, "%sfn.to_q.0.weight", r);
        if (!has(s, f))
            break;
        snprintf(a, sizeof a, "%sfn.", r);
        m->info.layers = l + 1;
        TRY(attention_layer(s, a, &m->layers[l], &k));
        if (l == 0) {
            m->info.k = k;
            C0 = s->C;
        }
        m->layers[l].d_in = m->layers[l].d_out = s->C;
        TRY(load_norm(s, r, &s->C, &m->layers[l].ln1_g, &m->layers[l].ln1_b));
        snprintf(f, sizeof f, "%sseq.%zu.fn.w_1.weight", s->root, i + 1);
        if (ffn < 0)
            ffn = has(s, f);
        i++;
        if (ffn) {
            snprintf(r, sizeof r, "%sseq.%zu.", s->root, i);
            TRY(load_ffn(s, r, &m->layers[l]));
            i++;
        }
    }
    snprintf(r, sizeof r, "%sseq.%zu.", s->root, i);
    if (any_under(s, r)) {
        snprintf(f, sizeof f, "%sfn.to_q.0.weight", r);
        return clf__fail(CLF_ENOT_FOUND,
                         "tensor %s not found: the file has other tensors "
                         "of %s",
                         f, r);
    }
    m->info.ffn_dim = ffn == 1 ? s->F : 0;
    if (s->C != C0) /* ff_intermediate: the last layer goes back */
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "the last feed-forward's output is %zu wide, its "
                         "input %zu (seq.0's width): a model's output must "
                         "have its input's width",
                         s->C, C0);
    return 0;
}

/* LinformerLM's embeddings and logits around its encoder. */
static int
lm(struct lp *s)
{
    clf_model *m = s->m;
    size_t V = 0, half = 0, p, i;
    struct arr inv;
    float *pos;
    int rc;

    if (has(s, "linformer.project_in.weight"))
        return clf__fail(CLF_EUNSUPPORTED,
                         "tensor linformer.project_in.weight: emb_dim "
                         "different from channels (ProjectInOut) is not "
                         "supported");
    TRY(encoder(s));
    TRY(load_buf(s, "to_token_emb.weight", &V, &s->C, &m->tok));
    TRY(load_buf(s, "to_logits.weight", &V, &s->C, &m->logit_w));
    TRY(load_buf(s, "to_logits.bias", &V, NULL, &m->logit_b));
    m->info.vocab = V;
    if (s->C % 2 != 0)
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "channels %zu is odd: the sinusoidal position table "
                         "needs an even width",
                         s->C);
    half = s->C / 2;
    TRY(get_vec(s, "pos_emb.inv_freq", &half, &inv));
    pos = malloc(s->N * s->C * sizeof *pos);
    if (pos == NULL) {
        arr_free(&inv);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    /* PositionalEmbedding: [sin(p f), cos(p f)], p f rounded to float. */
    for (p = 0; p < s->N; p++)
        for (i = 0; i < half; i++) {
            float t = (float)p * inv.v[i];
            pos[p * s->C + i] = (float)sin((double)t);
            pos[p * s->C + half + i] = (float)cos((double)t);
        }
    rc = upload(s, pos, s->N * s->C, "pos_emb", &m->pos);
    free(pos);
    arr_free(&inv);
    return rc;
}

/* A bare MHAttention. */
static int
mhattention(struct lp *s)
{
    clf_model *m = s->m;
    size_t k;

    s->first[0] = '\0';
    TRY(count_heads(s, ""));
    m->layers = calloc(1, sizeof *m->layers);
    if (m->layers == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    m->info.layers = 1;
    TRY(attention_layer(s, "", &m->layers[0], &k));
    m->info.k = k;
    return 0;
}

/* The single-head class's weights on the host: W_q, W_k, W_v, b_q, b_k,
 * b_v, E, F, and the identity as W_out (no output projection; exact in
 * float). */
struct sh_weights {
    struct arr a[8], eye;
    size_t k;
};

static void
sh_free(struct sh_weights *w)
{
    int i;

    for (i = 0; i < 8; i++)
        arr_free(&w->a[i]);
    arr_free(&w->eye);
}

static int
sh_read(struct lp *s, struct sh_weights *w)
{
    static const char *const lin[3] = {"query", "key", "value"};
    char name[NAME];
    size_t i;

    for (i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s.weight", lin[i]);
        TRY(get(s, name, 2, &s->C, &s->C, &w->a[i]));
        if (w->a[i].rows != w->a[i].cols)
            return clf__fail(CLF_ESHAPE_MISMATCH,
                             "tensor %s has shape (%zu, %zu); a square "
                             "(embed_dim, embed_dim) expected",
                             name, w->a[i].rows, w->a[i].cols);
        snprintf(name, sizeof name, "%s.bias", lin[i]);
        TRY(get_vec(s, name, &s->C, &w->a[3 + i]));
    }
    TRY(get(s, "E", 2, &w->k, &s->N, &w->a[6]));
    TRY(get(s, "F", 2, &w->k, &s->N, &w->a[7]));
    w->eye.v = calloc(s->C * s->C, sizeof(float));
    if (w->eye.v == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    w->eye.rows = w->eye.cols = s->C;
    for (i = 0; i < s->C; i++)
        w->eye.v[i * s->C + i] = 1.0f;
    return 0;
}

static int
sh_build(struct lp *s, const struct sh_weights *w)
{
    static const clf_weight which[8] = {
        CLF_WEIGHT_Q, CLF_WEIGHT_K, CLF_WEIGHT_V, CLF_BIAS_Q,
        CLF_BIAS_K,   CLF_BIAS_V,   CLF_PROJ_E,   CLF_PROJ_F};
    clf_model *m = s->m;
    clf_attention_desc d;
    int i;

    m->layers = calloc(1, sizeof *m->layers);
    if (m->layers == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    memset(&d, 0, sizeof d);
    d.d_model = s->C;
    d.heads = 1;
    d.max_seq_len = s->N;
    d.k = w->k;
    d.bias_q = d.bias_k = d.bias_v = 1;
    d.causal_block = s->o->causal_block;
    d.precision = s->o->precision;
    m->info.layers = 1;
    m->info.k = w->k;
    TRY(clf_attention_create(&m->layers[0].att, m->ctx, &d));
    for (i = 0; i < 8; i++)
        TRY(set_w(m->layers[0].att, which[i], &w->a[i]));
    return set_w(m->layers[0].att, CLF_WEIGHT_OUT, &w->eye);
}

/* The single-head class: Q/K/V linears with biases, E and F (k, N), no
 * output projection. */
static int
single_head(struct lp *s)
{
    struct sh_weights w;
    int rc;

    memset(&w, 0, sizeof w);
    rc = sh_read(s, &w);
    if (rc == 0)
        rc = sh_build(s, &w);
    sh_free(&w);
    return rc;
}

int
clf__lp_detect(const clf_safetensors *st, clf_layout *out)
{
    static const struct {
        const char *name;
        clf_layout layout;
    } marks[] = {
        {"seq.0.fn.to_q.0.weight", CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER},
        {"linformer.seq.0.fn.to_q.0.weight", CLF_LAYOUT_LINFORMER_PYTORCH_LM},
        {"linformer.fn.seq.0.fn.to_q.0.weight",
         CLF_LAYOUT_LINFORMER_PYTORCH_LM},
        {"to_q.0.weight", CLF_LAYOUT_LINFORMER_PYTORCH_ATTENTION},
        {"query.weight", CLF_LAYOUT_SINGLE_HEAD_ATTENTION}};
    clf_tensor_info ti;
    size_t i;

    for (i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (clf_safetensors_find(st, marks[i].name, &ti) == 0) {
            *out = marks[i].layout;
            return 1;
        }
    return 0;
}

/* Linformer's and LinformerLM's constructor arguments that the shapes
 * show, where the metadata has them (dim_k: the first layer's, as
 * k_reduce_by_layer shrinks the later ones). */
static int
sizes_agree(const struct lp *s, clf_layout layout)
{
    const clf_model_info *in = &s->m->info;
    const struct clf__meta_size k[] = {
        {"input_size", s->N, "max_seq_len", ""},
        {"channels", s->C, "channels", ""},
        {"dim_k", in->k, "k", ""},
        {"dim_ff", in->ffn_dim, "the feed-forward width", ""},
        {"dim_d", s->dh, "the head width", ""},
        {"depth", in->layers, "layers", ""},
        {"num_tokens", in->vocab, "vocab", ""},
    };

    if (layout != CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER &&
        layout != CLF_LAYOUT_LINFORMER_PYTORCH_LM)
        return 0;
    return clf__meta_sizes_agree(s->st, k, sizeof k / sizeof *k);
}

int
clf__lp_load(clf_model *m, const clf_safetensors *st, const clf_model_opts *o,
             clf_layout layout)
{
    struct lp s;
    int relu = 0, full = 0, rc;

    memset(&s, 0, sizeof s);
    s.m = m;
    s.st = st;
    s.o = o;
    s.root = layout == CLF_LAYOUT_LINFORMER_PYTORCH_LM ? "linformer." : "";
    s.what = clf_layout_name(layout);
    s.used = calloc(clf_safetensors_count(st) + 1, 1);
    if (s.used == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    m->info.layout = layout;
    m->post_ln = 1;
    if (o->layerwise) {
        free(s.used);
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "layerwise is for the lucidrains and fairseq "
                         "layouts: a %s file shows its own sharing",
                         s.what);
    }
    rc = layout == CLF_LAYOUT_SINGLE_HEAD_ATTENTION
             ? 0
             : refuse_options(&s, &relu, &full);
    m->act = relu ? CLF_ACT_RELU : CLF_ACT_GELU;
    if (rc == 0)
        rc = layout == CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER ? encoder(&s)
             : layout == CLF_LAYOUT_LINFORMER_PYTORCH_LM    ? lm(&s)
             : layout == CLF_LAYOUT_LINFORMER_PYTORCH_ATTENTION
                 ? mhattention(&s)
                 : single_head(&s);
    if (rc == 0)
        rc = clf__model_unexpected(m, st, s.used, o->allow_unexpected, layout);
    free(s.used);
    if (rc != 0)
        return rc;
    m->info.d_model = s.C;
    m->info.heads = layout == CLF_LAYOUT_SINGLE_HEAD_ATTENTION ? 1 : s.heads;
    m->info.head_dim = layout == CLF_LAYOUT_SINGLE_HEAD_ATTENTION ? s.C : s.dh;
    m->info.max_seq_len = s.N;
    m->info.slot_mask = s.slot_mask;
    TRY(sizes_agree(&s, layout));
    return full ? clf_model_set_mode(m, CLF_MODE_FULL) : 0;
}
