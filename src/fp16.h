/* Native half arithmetic for half-stored weights (fp16.c): a GEMM that
 * reads a binary16 weight directly and multiplies in half, offered only
 * where the device reports cl_khr_fp16 and a self-test passes, and chosen
 * per device against widening the weight into float32 first (kind
 * "halfgemm" of the kernel choices: widen or native). */
#ifndef CLINFORMER_FP16_H
#define CLINFORMER_FP16_H

#include "internal.h"

/* The candidates of CLF_KIND_HALFGEMM. */
enum { CLF_HALFGEMM_WIDEN = 0, CLF_HALFGEMM_NATIVE };

/* 1 when the native way is offered on ctx's device: cl_khr_fp16 reported,
 * its program built and the self-test passed, all checked once per
 * context (under the lock) and cached; else 0 with the reason in
 * ctx->fp16_why. */
int clf__fp16_offered(clf_context *ctx);

/* The way for the half-weight GEMMs of a layer of width D and query width
 * dq: forced, stored, or timed now on a 512-row projection and stored;
 * bucketed by powers of two of D and dq.  A forced native way where it is
 * not offered falls back to widening (the reason stays in the choice
 * line).  Sets ctx->fp16_native.  Call with ctx locked. */
int clf__fp16_resolve(clf_context *ctx, size_t D, size_t dq);

/* Marks buffer m as a binary16 weight the GEMMs of this forward read
 * natively (at most CLF_FP16_LIVE at once; older marks are dropped). */
void clf__fp16_mark(clf_context *ctx, cl_mem m);

/* Drops the marks: a layer's buffers are about to be released, and a
 * later buffer may get the same handle. */
void clf__fp16_forget(clf_context *ctx);

/* Run by the GEMM entry points first: 1 when an operand of g is a marked
 * binary16 weight (then the native kernel ran, or *rc holds why not), 0
 * to go on with the float32 ways.  Call with ctx locked. */
int clf__fp16_gemm(clf_context *ctx, const struct clf__tiled_args *g, int *rc);

/* The self-test on ctx now, regardless of the cached verdict: 0 when it
 * passes, else CLF_EUNSUPPORTED with the reason (tests).  fault != 0
 * runs it with a wrong alpha, so that the comparison must fail. */
int clf__fp16_selftest(clf_context *ctx, int fault);

void clf__fp16_release(clf_context *ctx);

#endif /* CLINFORMER_FP16_H */
