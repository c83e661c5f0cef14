/* Loading a trained model from a safetensors file: the whole file is
 * checked against its layout (layouts.c), strictly, before anything is
 * built; then each tensor is uploaded where the layout says. */
#include "model/model.h"
#include "model/model_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY CLF_TRY

/* What loading has learnt so far. */
struct load_state {
    const clf_safetensors *st;
    const clf_model_opts *o;
    const struct layout_spec *ls;
    size_t dims[X_COUNT];       /* 0: not yet known */
    char dim_src[X_COUNT][200]; /* the tensor that defined each */
    int rev;                    /* reversible stack */
    int shared;                 /* keys and values share: no T_KV tensors */
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
            snprintf(out[i], sizeof r, "%s", clf__dim_names[d[i]]);
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
        /* The size it disagrees with came from an earlier tensor, which
         * may be the wrong one (a transposed proj_k against proj_v). */
        if (i < ndim && ti.ndim == ndim)
            return clf__fail(CLF_ESHAPE_MISMATCH,
                             "tensor %s has shape %s; %s expected (%s %zu "
                             "as tensor %s gives it: one of the two is "
                             "wrong or transposed)",
                             name, got, want, clf__dim_names[d[i]],
                             s->dims[d[i]], s->dim_src[d[i]]);
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor %s has shape %s; %s expected", name, got,
                         want);
    }
    for (i = 0; i < ndim; i++)
        if (s->dims[d[i]] == 0) {
            s->dims[d[i]] = ti.shape[i];
            snprintf(s->dim_src[d[i]], sizeof s->dim_src[d[i]], "%s", name);
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

    for (i = 0; i < 2 * clf__nlayouts; i++) {
        s->ls = &clf__layouts[i / 2];
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
    for (i = 0; i < clf__nlayouts; i++)
        if (clf__layouts[i].layout == s->o->layout)
            s->ls = &clf__layouts[i];
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
pick_heads(struct load_state *s)
{
    size_t meta = 0;

    TRY(clf__meta_size_get(s->st, "heads", &meta));
    if (meta == 0 && clf_safetensors_metadata(s->st, "heads") != NULL)
        return clf__fail(CLF_EFORMAT,
                         "metadata heads = \"0\": a model has at least one "
                         "head");
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

/* The hyperparameters the tensor shapes show, where the metadata has
 * them too under the lucidrains constructor's names: they must agree (a
 * wrong "heads" would otherwise split the heads differently). */
static int
check_metadata(const struct load_state *s)
{
    const size_t *x = s->dims;
    static const char heads_note[] =
        " (the query weight's rows over the heads: is the metadata's heads "
        "right?)";
    const struct clf__meta_size k[] = {
        {"dim", x[X_D], "d_model", ""},
        {"seq_len", x[X_N], "max_seq_len", ""},
        {"k", x[X_K], "k", ""},
        {"dim_head", x[X_HD] / s->heads, "head_dim", heads_note},
        {"depth", s->ls->root[s->rev] != NULL ? s->layers : 0, "layers", ""},
        {"num_tokens", x[X_V], "vocab", ""},
    };

    return clf__meta_sizes_agree(s->st, k, sizeof k / sizeof *k);
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

/* The tensors the layout does not use, listed (an error unless allowed). */
static int
collect_unexpected(clf_model *m, const struct load_state *s)
{
    size_t n = clf_safetensors_count(s->st), i;
    clf_tensor_info ti;
    char *used = calloc(n + 1, 1);
    int rc;

    if (used == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (i = 0; i < n; i++)
        used[i] =
            clf_safetensors_info(s->st, i, &ti) == 0 && expected(s, ti.name);
    rc = clf__model_unexpected(m, s->st, used, s->o->allow_unexpected,
                               s->ls->layout);
    free(used);
    return rc;
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
    *out = clf__mem_create(m->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                           count * sizeof(float), buf, &err, name);
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
    m->post_ln = s->ls->fairseq;
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
    TRY(check_metadata(s));
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

/* Every layer's widths: d_model where its loader set none; the widest. */
static void
widths(clf_model *m)
{
    size_t l;

    m->width = m->info.d_model;
    for (l = 0; m->layers != NULL && l < m->info.layers; l++) {
        struct model_layer *L = &m->layers[l];
        if (L->d_in == 0)
            L->d_in = m->info.d_model;
        if (L->d_out == 0)
            L->d_out = m->info.d_model;
        m->width = L->d_in > m->width ? L->d_in : m->width;
        m->width = L->d_out > m->width ? L->d_out : m->width;
    }
}

/* The weights the model's GEMMs read transposed (X W^T: the feed-forward,
 * the resample linear, the logits), registered with the GEMM floor once
 * loaded: a model never changes them, and clf_model_destroy forgets them
 * before releasing them. */
static int
keep_transposed(clf_model *m)
{
    size_t l;

    for (l = 0; l < m->info.layers; l++) {
        const struct model_layer *L = &m->layers[l];
        const cl_mem w[3] = {L->w1, L->w2, L->wr};
        int i;
        for (i = 0; i < 3; i++)
            if (w[i] != NULL)
                CLF_TRY(clf__gemm_keep(m->ctx, w[i]));
    }
    return m->logit_w != NULL ? clf__gemm_keep(m->ctx, m->logit_w) : 0;
}

CLF_EXTERN int
clf_model_load(clf_model **out, clf_context *ctx, const char *path,
               const clf_model_opts *opts)
{
    clf_safetensors *st = NULL;
    clf_model_opts zero;
    clf_model *m = NULL;
    clf_layout lp;
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
    m->act = CLF_ACT_GELU;
    lp = opts->layout;
    if ((lp == CLF_LAYOUT_AUTO && clf__lp_detect(st, &lp)) ||
        (lp >= CLF_LAYOUT_LINFORMER_PYTORCH_ATTENTION &&
         lp <= CLF_LAYOUT_SINGLE_HEAD_ATTENTION))
        rc = clf__lp_load(m, st, opts, lp);
    else
        rc = load(m, st, opts);
    clf_safetensors_close(st);
    if (rc != 0) {
        clf_model_destroy(m);
        return rc;
    }
    widths(m);
    rc = keep_transposed(m);
    if (rc != 0) {
        clf_model_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
}
