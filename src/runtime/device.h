/* The runtime's devices (device.c): discovery and selection, the limits
 * sizes are checked against, and CLINFORMER_LIMITS.  Included by
 * runtime.h. */
#ifndef CLF_RUNTIME_DEVICE_H
#define CLF_RUNTIME_DEVICE_H

#include "clinformer.h"

/* device.c: limits lowered below the device's own, from CLINFORMER_LIMITS
 * ("wg=N,local=BYTES,fp16=0", any of them, read when a context is made):
 * every kernel's CL_KERNEL_WORK_GROUP_SIZE and the device's maximum
 * work-group at most wg, its local memory at most local bytes, and no
 * cl_khr_fp16.  They let a CPU device run the code paths of a smaller GPU
 * (NVIDIA's driver: no cl_khr_fp16, 48 KiB of local memory, and fewer
 * work-items for a kernel with many registers).  0: not lowered. */
struct clf__caps {
    size_t wg;
    unsigned long long local_mem;
    int no_fp16;
};
/* Parses CLINFORMER_LIMITS into caps (zeroed when unset); a clear error
 * naming the variable on a bad value. */
int clf__caps_from_env(struct clf__caps *caps);

/* device.c */
int clf__device_info_fill(cl_platform_id platform, unsigned platform_index,
                          cl_device_id device, unsigned index,
                          clf_device_info *info);
/* The process's devices in flat index order, enumerated once (the first
 * call, from any thread, does it; the others wait for it).  The list lives
 * until the process ends.  A failed discovery fails every call the same
 * way. */
struct clf__device {
    cl_platform_id platform;
    cl_device_id device;
    clf_device_info info;
};
int clf__devices(const struct clf__device **list, size_t *count);
/* Which of n devices a selector names (the rules of clf_context_create);
 * pure: reads only infos, so tests can pass a made-up list.  Errors:
 * CLF_EDEVICE_NOT_FOUND naming the selector, CLF_ENO_DEVICE when n is 0. */
int clf__device_select(const clf_device_info *infos, size_t n,
                       const char *selector, size_t *chosen);
/* A platform's short name from its name and vendor, the stable device
 * names' prefix (the rules of clf_device_info.stable_name, before the
 * suffix that tells duplicates apart); pure. */
void clf__platform_short(const char *name, const char *vendor, char *buf,
                         size_t cap);
/* Whether ctx's device reports the OpenCL extension `name` (a whole word
 * of CL_DEVICE_EXTENSIONS); 0 when the query fails. */
int clf__device_has_extension(clf_context *ctx, const char *name);
/* clf__device_select over the process's devices. */
int clf__device_find(const char *selector, struct clf__device *out);
/* The description of a device: its entry of the process's list, or, for a
 * device outside it, a fresh one with index 0. */
void clf__device_describe(cl_platform_id platform, cl_device_id device,
                          clf_device_info *info);

struct clf__limits {
    size_t max_wg, max_item[2];
    unsigned long long local_mem;
};
/* A kernel's work-group of nx x ny work-items (dimension 0 first, their
 * parameters' names x and y) and the bytes of local memory its tiles
 * (`tiles`, for the message) take. */
struct clf__footprint {
    const char *x, *y;
    size_t nx, ny;
    unsigned long long local;
    const char *tiles;
};
/* device.c: 0 when f fits lim, else -1 with why (cap bytes) saying which
 * limit it exceeds. */
int clf__limits_check(const struct clf__limits *lim,
                      const struct clf__footprint *f, char *why, size_t cap);

/* device.c: the limits of ctx's device that sizes are checked against; a
 * failed query leaves max_wg 0, which no size fits. */
void clf__device_limits(const clf_context *ctx, struct clf__limits *lim);
/* device.c: CL_KERNEL_WORK_GROUP_SIZE of kernel k on ctx's device, within
 * CLINFORMER_LIMITS's wg; 0 when the query fails. */
size_t clf__kernel_wg(const clf_context *ctx, cl_kernel k);
/* device.c: applies ctx->caps to ctx->info (local memory, fp16). */
void clf__caps_apply(clf_context *ctx);
/* device.c: loop iterations one work-item of a kernel may run in all, its
 * loops together, before the device ends them early and silently; 0 where
 * there is no such limit.  Mesa's llvmpipe (rusticl's CPU device) counts
 * every loop's iterations of a work-item against one budget of 65535
 * (LP_MAX_TGSI_LOOP_ITERATIONS in its gallivm): past it each loop runs its
 * body once more and exits, so a kernel longer than that gives wrong
 * results there.  Kernels whose loops grow with the shape check their
 * count against it (clf__flash_blocks). */
#define CLF_LLVMPIPE_LOOP_LIMIT 65535
size_t clf__loop_limit(const clf_context *ctx);

#endif /* CLF_RUNTIME_DEVICE_H */
