/* Half-precision weight storage (half.c), for the attention layer's files:
 * weights.c stores a weight through clf__half_upload, attention.c asks
 * clf__half_weight for the float32 buffer a GEMM reads. */
#ifndef CLINFORMER_HALF_H
#define CLINFORMER_HALF_H

#include "attention.h"

/* CLF_EBAD_ENUM unless desc->precision is a clf_precision. */
int clf__half_check(const clf_attention_desc *desc);

/* 1 when the layer stores weight `which` as binary16 (the W matrices, E
 * and F of a CLF_PRECISION_HALF layer; never a bias). */
int clf__half_stored(const clf_attention *a, int which);

/* Bytes of device memory weight `which` takes (0 when unused). */
size_t clf__half_weight_bytes(const clf_attention *a, int which);

/* Bytes of the context's float32 widening scratch this layer's forward
 * needs: its largest W matrix plus E (0 for a float32 layer). */
size_t clf__half_scratch_bytes(const clf_attention *a);

/* Stores count floats of host data as binary16 in a->w[which] (created
 * when missing), through a float32 staging buffer and the narrowing
 * kernel; blocking.  CLF_EINVALID_ARGUMENT for a finite value beyond
 * binary16's range, naming the weight (name) and the element. */
int clf__half_upload(clf_attention *a, int which, const char *name,
                     const float *data, size_t count);

/* The float32 buffer a GEMM reads for weight `which`: a->w[which] itself
 * for a float32 weight, else the context's scratch slot for it, the weight
 * widened into it first unless the slot already holds it in this forward.
 * Call with the context locked, between clf__half_begin and the forward's
 * end. */
int clf__half_weight(clf_attention *a, int which, cl_mem *out);

/* m itself, unless it is a half-stored weight this forward's GEMMs read
 * natively (fp16.c): then its float32 copy, widened into the weight's
 * slot, for the kernels that are not GEMMs (the row sums of E). */
int clf__half_as_float(clf_attention *a, cl_mem m, cl_mem *out);

/* A new forward: the slots' contents are no longer trusted (a weight may
 * have been set since). */
void clf__half_begin(clf_context *ctx);

#endif /* CLINFORMER_HALF_H */
