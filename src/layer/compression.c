/* The compressions of the Linformer paper's section 4 other than the
 * linear E and F: mean and max pooling and the convolution compressor,
 * each over windows of w = floor(N / k) positions of the projected keys
 * and values (cl/projection.cl clf_compress_window).  The linear one is
 * attention.c's (GEMMs with E and F). */
#include "layer/layer_impl.h"

#include <string.h>

static const char *const compression_names[] = {"linear", "mean", "max",
                                                "conv"};

CLF_EXTERN const char *
clf_compression_name(clf_compression compression)
{
    if ((int)compression < 0 || compression > CLF_COMPRESS_CONV)
        return "?";
    return compression_names[compression];
}

CLF_EXTERN int
clf_compression_parse(const char *name, clf_compression *out)
{
    int i;

    if (name == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "compression name is NULL");
    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    for (i = 0; i <= CLF_COMPRESS_CONV; i++)
        if (strcmp(name, compression_names[i]) == 0) {
            *out = (clf_compression)i;
            return 0;
        }
    return clf__fail(CLF_EBAD_ENUM,
                     "compression \"%s\" is not one of linear, mean, max, "
                     "conv",
                     name);
}

int
clf__compression_check(const clf_attention_desc *d)
{
    const char *name = clf_compression_name(d->compression);

    if ((int)d->compression < 0 || d->compression > CLF_COMPRESS_CONV)
        return clf__fail(CLF_EBAD_ENUM,
                         "compression %d is not a clf_compression (0 linear, "
                         "1 mean, 2 max, 3 conv)",
                         (int)d->compression);
    if (d->compression == CLF_COMPRESS_LINEAR)
        return 0;
    if (d->compressed_bias)
        return clf__fail(CLF_EUNSUPPORTED,
                         "compressed_bias (fairseq's bias order) needs the "
                         "linear compression, not %s",
                         name);
    if (d->bias_proj && d->compression != CLF_COMPRESS_CONV)
        return clf__fail(CLF_EUNSUPPORTED,
                         "bias_proj needs E and F weights; %s pooling has "
                         "none",
                         name);
    return 0;
}

size_t
clf__compression_window(const clf_attention *a)
{
    return a->N / a->k;
}

/* The size of E (and F) and of b_E (and b_F), per distinct E. */
void
clf__compression_sizes(const clf_attention *a, size_t *e, size_t *b)
{
    switch (a->desc.compression) {
    case CLF_COMPRESS_MEAN:
    case CLF_COMPRESS_MAX:
        *e = *b = 0;
        return;
    case CLF_COMPRESS_CONV:
        *e = a->dh * a->dh * clf__compression_window(a);
        *b = a->desc.bias_proj ? a->dh : 0;
        return;
    default:
        *e = a->k * a->N;
        *b = a->desc.bias_proj ? a->k : 0;
    }
}

int
clf__compress_windows(clf_attention *a, const struct plan *p, int value,
                      cl_mem src, cl_mem out)
{
    static const enum clf__window_op ops[] = {CLF_WINDOW_MEAN, CLF_WINDOW_MEAN,
                                              CLF_WINDOW_MAX, CLF_WINDOW_CONV};
    const int conv = a->desc.compression == CLF_COMPRESS_CONV;
    const int pe = value && a->wsize[CLF_PROJ_F] ? CLF_PROJ_F : CLF_PROJ_E;
    const int pb = pe == CLF_PROJ_F ? CLF_BIAS_F : CLF_BIAS_E;
    struct clf__window_args w;

    memset(&w, 0, sizeof w);
    if (conv)
        CLF_TRY(clf__half_as_float(a, pe, &w.w));
    w.bias = conv && a->desc.bias_proj ? a->w[pb] : NULL;
    w.p = src;
    w.out = out;
    w.batch = p->B;
    w.n = p->n;
    w.ld = a->dkv;
    w.slots = a->k;
    w.window = clf__compression_window(a);
    w.group = a->k;
    w.filled = a->k;
    if (p->causal) { /* block m's c slots; blocks before the last query's */
        w.group = p->c;
        w.stride = a->desc.causal_block;
        w.filled = (p->n - 1) / a->desc.causal_block * p->c;
    }
    w.heads = p->hc;
    w.head_dim = a->dh;
    w.in_per_head = a->hkv > 1;
    w.w_per_head = a->nE > 1;
    w.op = ops[a->desc.compression];
    return clf__compress_window(a->ctx, &w);
}
