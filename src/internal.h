/* Every floor's private header, for the tests and the bench, which reach
 * internal functions of all of them.  No library file includes it: each
 * includes its own folder's header, which includes the floors below
 * (docs/design.md section 4; scripts/check-layers.sh checks it). */
#ifndef CLINFORMER_INTERNAL_H
#define CLINFORMER_INTERNAL_H

#include "layer/layer_impl.h"
#include "parallel/parallel.h"
#include "tune/tune.h"

#endif /* CLINFORMER_INTERNAL_H */
