/* The launch log (launches.c): what the stages offer it.  Every kernel
 * launch of the library goes through clf__enqueue_nd, and every GEMM
 * handed to CLBlast is noted by clf__launch_clblast, so that the log sees
 * them all while recording is on. */
#ifndef CLINFORMER_LAUNCHES_H
#define CLINFORMER_LAUNCHES_H

#include "internal.h"

/* clEnqueueNDRangeKernel on the context's queue (no offset, no events),
 * logged when it succeeds; its status. */
cl_int clf__enqueue_nd(clf_context *ctx, cl_kernel k, unsigned dims,
                       const size_t *global, const size_t *local);

/* Notes an m x n x k GEMM (batch of them) given to CLBlast, whose own
 * launches the library does not see. */
void clf__launch_clblast(clf_context *ctx, size_t m, size_t n, size_t k,
                         size_t batch);

/* Pauses (pause != 0) or resumes the log, in pairs: the launches of
 * timing a kernel choice are not the forward's.  Under the context's
 * lock. */
void clf__launch_pause(clf_context *ctx, int pause);

/* Releases the context's log (context teardown). */
void clf__launch_log_free(clf_context *ctx);

#endif /* CLINFORMER_LAUNCHES_H */
