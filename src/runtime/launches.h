/* The runtime's launches (launches.c) and guard bands (guard.c): every
 * kernel launch and CLBlast call of the library goes through them.
 * Included by runtime.h. */
#ifndef CLF_RUNTIME_LAUNCHES_H
#define CLF_RUNTIME_LAUNCHES_H

#include "clinformer.h"
#include "runtime/program.h"

/* launches.c: enqueue kernel id over the 3-D range g; grouped: work-groups of
 * twice the preferred multiple along dimension 0, g[0] padded up to it
 * (the kernel must skip the extra items), else the runtime's choice. */
int clf__enqueue3(clf_context *ctx, enum clf__kernel_id id, size_t g[3],
                  int grouped, const char *what);

/* The launch log (launches.c): what the stages offer it.  Every kernel
 * launch of the library goes through clf__enqueue_nd, and every GEMM
 * handed to CLBlast is noted by clf__launch_clblast, so that the log sees
 * them all while recording is on. */

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

/* Guard bands (guard.c): a checking aid that finds kernels writing outside
 * their device buffers (clf_context_guard_buffers).  Every device buffer a
 * layer, model or GEMM makes goes through clf__mem_create; while the
 * context's guards are on, each such buffer is a sub-buffer of a larger one
 * with a band of known bytes on either side, and every launch is followed
 * by a check of all live bands (clf__guard_after). */

/* clCreateBuffer(ctx->context, flags, bytes, host, err); with guards on,
 * a guarded sub-buffer named `what` in the guard's report (host data,
 * under CL_MEM_COPY_HOST_PTR, written into it with a blocking write).  The
 * buffer is released with clReleaseMemObject as any other. */
cl_mem clf__mem_create(clf_context *ctx, cl_mem_flags flags, size_t bytes,
                       void *host, cl_int *err, const char *what);

/* After a launch of `what` (a kernel name, or NULL to ask the kernel k),
 * with guards on: waits for the queue and checks every live band; the
 * first damaged one is kept for clf_context_guard_check and its band
 * refilled.  Nothing when guards are off. */
void clf__guard_after(clf_context *ctx, cl_kernel k, const char *what);

/* Releases the context's guard records (context teardown). */
void clf__guard_free(clf_context *ctx);

#endif /* CLF_RUNTIME_LAUNCHES_H */
