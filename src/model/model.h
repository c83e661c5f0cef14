/* The model floor (src/model): stacks of layers and their file layouts
 * (model.c), safetensors and .npy files (safetensors.c, npy.c).  It offers
 * the sharded forward a way to replace each layer's attention. */
#ifndef CLF_MODEL_H
#define CLF_MODEL_H

#include "layer/layer.h"

/* model.c: a sharded forward's attention replaces each layer's (in and out
 * hold the shard's rows), and the rows start at position pos_offset;
 * fn NULL restores the plain forward. */
typedef int (*clf__model_attend_fn)(void *user, clf_attention *att, cl_mem in,
                                    cl_mem out);
void clf__model_shard_hook(clf_model *m, clf__model_attend_fn fn, void *user,
                           size_t pos_offset);
/* Layer l's attention, NULL past the last. */
clf_attention *clf__model_layer(const clf_model *m, size_t l);

#endif /* CLF_MODEL_H */
