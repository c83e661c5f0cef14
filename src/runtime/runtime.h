/* The runtime floor (src/runtime): the context and its lock, the state
 * the floors above keep in it, errors and checked sizes (context.c,
 * error.c); with the headers of its other files, grouped by the file that
 * defines each name: programs (program.h), devices (device.h), kernel
 * choices (choose.h), files (fileio.h), launches and guard bands
 * (launches.h).  It calls nothing above it; every other floor includes
 * it. */
#ifndef CLF_RUNTIME_H
#define CLF_RUNTIME_H

#include "clinformer.h"
#include "runtime/choose.h"
#include "runtime/device.h"
#include "runtime/fileio.h"
#include "runtime/launches.h"
#include "runtime/program.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* From cl_ext.h (cl_khr_icd); the ICD loader returns it with no platform. */
#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

struct clf__launch_log; /* launches.c */
struct clf__guard;      /* guard.c */

/* State a module above the runtime keeps per context (its scratch
 * buffers, programs built apart, pinned choices ...), in a list the
 * runtime knows only as keys: clf__feature returns the state of the module
 * whose key (the address of one of its static objects) is given, made zeroed
 * with `size` bytes and handed to `init` on first use, and
 * clf_context_destroy hands it to
 * `release` before it frees it, latest made first.  NULL when memory runs
 * out (an error is set).  Takes the context lock. */
typedef void (*clf__feature_release_fn)(clf_context *ctx, void *state);
/* Fills a state just made (zeroed), under the lock; NULL for none. */
typedef void (*clf__feature_init_fn)(clf_context *ctx, void *state);
struct clf__feature {
    const void *key;
    void *state;
    clf__feature_release_fn release;
    struct clf__feature *next;
};
void *clf__feature(clf_context *ctx, const void *key, size_t size,
                   clf__feature_init_fn init, clf__feature_release_fn release);
/* The state if made, else NULL; never makes it. */
void *clf__feature_find(const clf_context *ctx, const void *key);
/* A state of one int (a choice a floor lets the tuner or a test pin, a
 * test's override), 0 until set: its value (0 where never set; never
 * makes it), and setting it (0, or CLF_ENO_MEMORY). */
int clf__feature_int_get(const clf_context *ctx, const void *key);
int clf__feature_int_set(clf_context *ctx, const void *key, int value);
/* Defines int get(const clf_context *ctx) and int set(clf_context *ctx,
 * int value) over such a state, keyed by a static object of its own. */
#define CLF_FEATURE_INT(get, set)                                              \
    static const char get##_key = 0;                                           \
    int get(const clf_context *ctx)                                            \
    {                                                                          \
        return clf__feature_int_get(ctx, &get##_key);                          \
    }                                                                          \
    int set(clf_context *ctx, int value)                                       \
    {                                                                          \
        return clf__feature_int_set(ctx, &get##_key, value);                   \
    }

struct clf_context {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    clf_device_info info;
    cl_program program;
    cl_kernel kernels[CLF_K_COUNT];
    size_t kernel_wg[CLF_K_COUNT];       /* CL_KERNEL_WORK_GROUP_SIZE */
    struct clf__caps caps;               /* CLINFORMER_LIMITS */
    size_t kernel_multiple[CLF_K_COUNT]; /* preferred multiple */
    char *build_log;
    clf_context_stats stats;
    int profiling;   /* the queue has CL_QUEUE_PROFILING_ENABLE */
    char tuned[512]; /* the stored tuning applied, or "": part of the
                        choice store's key */
    /* Kernel choices (choose.c), all under lock. */
    pthread_mutex_t lock;                  /* recursive; see clf__lock */
    int has_lock;                          /* lock was initialised */
    int forced[CLF_MAX_ROLES];             /* clf_context_force_kernel, or -1,
                                              by kind */
    struct clf__launch_log *launch_log;    /* NULL until recording starts */
    struct clf__guard *guard;              /* guard.c; NULL until turned on */
    struct clf__feature *features;         /* clf__feature */
    struct clf__choice_entry *choice_list; /* stored and timed winners */
    size_t nchoices, choice_cap;
    long long choice_clock; /* last recency stamp given to a use */
    long long choice_floor; /* last (lowest) stamp given to a read entry */
    int choices_loaded;     /* the device's store has been read */
    uint64_t choice_key;    /* hash of the store's key when it was read */
    /* The store's lock (choose.c): held from a lookup that misses until
     * the timing's release, nested that many times; store_lock_fd is
     * open while store_locks > 0, or -1 when the lock could not be had. */
    int store_locks;
    int store_lock_fd;
    /* Per role: the last winner resolved, or -1,
     * where it came from, its bucket and the times it was timed with. */
    int last[CLF_MAX_ROLES];
    clf_choice_source last_source[CLF_MAX_ROLES];
    char last_bucket[CLF_MAX_ROLES][CLF_BUCKET_MAX];
    /* Why the last winner was the only way (clf__choice_fixed), or NULL
     * when it was resolved from a forced name, the store or a timing. */
    const char *last_why[CLF_MAX_ROLES];
    double last_ms[CLF_MAX_ROLES][CLF_MAX_CANDIDATES];
    /* clf_context_check_kernel_choices: stored choices are timed again
     * once each (check_stored), the entry being checked between its
     * lookup and its record (checking, by kind and bucket), and each
     * role's times now (last_check_ms; 0 when not checked). */
    int check_stored;
    int checking_kind;
    char checking_bucket[CLF_BUCKET_MAX];
    double last_check_ms[CLF_MAX_ROLES][CLF_MAX_CANDIDATES];
    /* For tests: called after each timed run of clf__time_variants
     * (candidate v, round r; round 0 is not kept), before its clFinish,
     * so that a test can plant load on chosen runs.  NULL in use. */
    void (*timing_hook)(void *user, int v, int round);
    void *timing_hook_user;
    /* For tests: measured peaks (peaks.c) take a few milliseconds, on
     * 1 MiB copies, rather than a few seconds: figures of no worth, for
     * the suites that check the peaks' cache, not the figures.  0 in use. */
    int peaks_quick;
    char choices[2048];  /* clf_context_kernel_choices */
    char warnings[5376]; /* clf_context_warnings: a path and a whole line */
};

/* error.c: set the thread's detail message and return status. */
int clf__fail(int status, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Checked size arithmetic: return 0 and store the result, or -1 on
 * overflow. */
int clf__mul(size_t a, size_t b, size_t *out);
int clf__mul3(size_t a, size_t b, size_t c, size_t *out);
int clf__add(size_t a, size_t b, size_t *out);

/* A shape for messages, truncated to cap: python != 0 writes a tuple
 * ("(3, 4)", "(5,)", "()"), else a JSON list ("[3, 4]"). */
void clf__format_shape(char *buf, size_t cap, const size_t *shape, size_t ndim,
                       int python);

/* context.c: the context's recursive lock: kernel arguments, the
 * floors' state (clf__feature) and the kernel choices are shared by the
 * threads that use the context. */
static inline void
clf__lock(clf_context *ctx)
{
    pthread_mutex_lock(&ctx->lock);
}
static inline void
clf__unlock(clf_context *ctx)
{
    pthread_mutex_unlock(&ctx->lock);
}
/* Returns from the caller with the status of expr when it fails. */
#define CLF_TRY(expr)                                                          \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != 0)                                                          \
            return rc_;                                                        \
    } while (0)

/* splitmix64: a small, portable generator for reproducible random data,
 * the same on every platform. */
static inline unsigned long long
clf__splitmix64(unsigned long long *state)
{
    unsigned long long z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Sets kernel argument i from a variable; returns from the caller on
 * failure. */
#define CLF_SET_ARG(kernel, i, var)                                            \
    do {                                                                       \
        cl_int e_ = clSetKernelArg((kernel), (i), sizeof(var), &(var));        \
        if (e_ != CL_SUCCESS)                                                  \
            return clf__fail(e_, "clSetKernelArg %d failed (%d)", (i), e_);    \
    } while (0)

#endif /* CLF_RUNTIME_H */
