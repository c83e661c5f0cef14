/* The runtime floor (src/runtime): errors and checked sizes, files read as
 * if hostile, devices, the kernel registry and program builds with their
 * cache, the context and its lock, kernel choices and their timing, the
 * launch log and device peaks.  It calls nothing above it; every other
 * floor includes it. */
#ifndef CLF_RUNTIME_H
#define CLF_RUNTIME_H

#include "clinformer.h"
#include "runtime/kernel_params.h"
#include "runtime/kernels.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* From cl_ext.h (cl_khr_icd); the ICD loader returns it with no platform. */
#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* The kernels, one program built from the files of the registry
 * (kernels.h): CLF_K_<ID> for each KERNEL(ID, name) line. */
#define CLF_KERNEL_ENUM_ENTRY(id, name) CLF_K_##id,
enum clf__kernel_id {
    CLF_KERNEL_REGISTRY(CLF_REGISTRY_SKIP_FILE, CLF_KERNEL_ENUM_ENTRY)
        CLF_K_COUNT
};
#undef CLF_KERNEL_ENUM_ENTRY

/* The kernel choices (choose.c), each with its candidates. */
enum clf__choice_kind {
    CLF_KIND_SOFTMAX = 0, /* enum clf__softmax_variant */
    CLF_KIND_GEMM,        /* enum clf__gemm_variant - 1 */
    CLF_KIND_ATTEND,      /* enum clf__attend_variant - 1 */
    CLF_KIND_HALFGEMM,    /* half-weight GEMMs: widen or native
                             (src/gemm/half_gemm.c) */
    CLF_KIND_COUNT
};
/* What a choice is remembered and listed by (ctx->last*, the lines of
 * clf_context_kernel_choices): a slot, one per kind, and kind gemm's split
 * by the role of the GEMM in a forward (enum clf__gemm_role, gemm.h): slot
 * CLF_KIND_GEMM is the projections', the slots from CLF_SLOT_GEMM_COMP the
 * other roles'.  A slot is forced and stored as its kind (the role is the
 * first word of its buckets), so gemm=NAME forces every role. */
enum clf__choice_slot {
    CLF_SLOT_GEMM_COMP = CLF_KIND_COUNT,
    CLF_SLOT_GEMM_SCORE,
    CLF_SLOT_GEMM_WEIGH,
    CLF_SLOT_GEMM_FFN,
    CLF_SLOT_COUNT
};
#define CLF_BUCKET_MAX 48
#define CLF_MAX_CANDIDATES 4

/* A winner for one kind and shape bucket. */
struct clf__choice_entry {
    int kind, winner;
    char bucket[CLF_BUCKET_MAX];
    clf_choice_source source;
    double ms[CLF_MAX_CANDIDATES];
    long long used; /* recency: higher = used later (see choose.c) */
    /* timed again by clf_context_check_kernel_choices: the times now */
    int checked;
    double check_ms[CLF_MAX_CANDIDATES];
};

struct clf__launch_log; /* launches.c */
struct clf__guard;      /* guard.c */

/* State a module above the runtime keeps per context (the GEMM scratch,
 * the tiled kernel's program, the half scratch buffers ...), in a list the
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
    int profiling;       /* the queue has CL_QUEUE_PROFILING_ENABLE */
    char tuned[512];     /* the stored GEMM tuning applied, or "" */
    int clblast_records; /* tuned holds CLBlast parameters this context
                            applied (tune_apply.c): a CLBlast failure
                            drops them (gemm.c) */
    int clblast_dropped; /* they were dropped: CLBlast's GEMMs run on the
                            library's own kernels */
    /* Kernel choices (choose.c), all under lock. */
    pthread_mutex_t lock;                  /* recursive; see clf__lock */
    int has_lock;                          /* lock was initialised */
    int forced[CLF_KIND_COUNT];            /* clf_context_force_kernel, or -1 */
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
    /* Per slot (enum clf__choice_slot): the last winner resolved, or -1,
     * where it came from, its bucket and the times it was timed with. */
    int last[CLF_SLOT_COUNT];
    clf_choice_source last_source[CLF_SLOT_COUNT];
    char last_bucket[CLF_SLOT_COUNT][CLF_BUCKET_MAX];
    /* Why the last winner was the only way (clf__choice_fixed), or NULL
     * when it was resolved from a forced name, the store or a timing. */
    const char *last_why[CLF_SLOT_COUNT];
    double last_ms[CLF_SLOT_COUNT][CLF_MAX_CANDIDATES];
    /* clf_context_check_kernel_choices: stored choices are timed again
     * once each (check_stored), the entry being checked between its
     * lookup and its record (checking, by kind and bucket), and each
     * slot's times now (last_check_ms; 0 when not checked). */
    int check_stored;
    int checking_kind;
    char checking_bucket[CLF_BUCKET_MAX];
    double last_check_ms[CLF_SLOT_COUNT][CLF_MAX_CANDIDATES];
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

/* program.c: build or load the kernels of ctx. */
int clf__program_build(clf_context *ctx);
uint64_t clf__hash64(const void *data, size_t len, uint64_t seed);
void clf__cache_dir(char *buf, size_t cap);
/* program.c: checks a whole cache entry in memory (magic, key, payload
 * length against len, checksum, size limit): 0 with the payload's offset
 * and length, or -1. */
int clf__cache_entry_check(const void *data, size_t len, uint64_t key,
                           size_t *payload_off, size_t *payload_len);

struct clf__limits {
    size_t max_wg, max_item[2];
    unsigned long long local_mem;
};

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

/* choose.c: timing kernels that compute the same thing.  A buffer of
 * `floats` values of order one (NULL and *rc set on failure); and
 * run(ctx, v, user) for v = 0..count-1 in turns, one round to warm up then
 * reps rounds, each run followed by clFinish, the best time in ms[v] (-1
 * when it failed).  Returns the fastest v, or the last failure's status
 * when every variant failed. */
typedef int (*clf__variant_fn)(clf_context *ctx, int variant, void *user);
/* Seconds on a monotonic clock. */
double clf__now_s(void);
/* The winner of slot `slot` (a kind, or a slot of enum clf__choice_slot)
 * for a shape bucket ([a-z0-9.], under CLF_BUCKET_MAX): forced
 * (clf_context_force_kernel, CLINFORMER_KERNELS, for the slot's kind) or
 * stored (read again under the store's lock when this context does not
 * know it, so that a process timing it now is waited for): sets *winner
 * and returns 1; not known: 0, with the store's lock held, and the caller
 * times the candidates, calls clf__choice_record, which stores the
 * winner, then clf__choice_release (on failure too).  CLF_EINVALID_ARGUMENT
 * for a bad CLINFORMER_KERNELS.  Call with ctx locked. */
int clf__choice_lookup(clf_context *ctx, int slot, const char *bucket,
                       int *winner);
/* Lets go of the store's lock a lookup that returned 0 took. */
void clf__choice_release(clf_context *ctx);
/* Records a timed winner with every candidate's time; returns the winner
 * the caller runs: `winner`, or the stored one where the lookup before it
 * was a check of a stored choice (clf_context_check_kernel_choices), so
 * that a process keeps the bits it started with. */
int clf__choice_record(clf_context *ctx, int slot, const char *bucket,
                       int winner, const double *ms);
/* Notes that a forward ran `winner` because it has no other way (why: a
 * phrase that outlives the context's next listing, e.g. static), so that
 * clf_context_kernel_choices says what ran instead of "not chosen yet".
 * Call with ctx locked. */
void clf__choice_fixed(clf_context *ctx, int slot, int winner, const char *why);
/* The kind of a slot. */
int clf__choice_slot_kind(int slot);
/* A device's measured throughput for a shape bucket (a sharded forward's
 * split), kept in the same store as the choices: 1 with *rate, or 0 when
 * not measured yet; and recording one (an integer, at least 1). */
int clf__rate_lookup(clf_context *ctx, const char *bucket, double *rate);
void clf__rate_record(clf_context *ctx, const char *bucket, double rate);
/* Checks CLINFORMER_KERNELS; 0 or CLF_EINVALID_ARGUMENT. */
int clf__choice_env_check(void);
const char *clf__choice_kind_name(int kind);
const char *clf__choice_name(int kind, int candidate);
int clf__choice_count(int kind);
/* The smallest power of two >= x, at most cap (a power of two). */
size_t clf__pow2_bucket(size_t x, size_t cap);
/* context.c: the context's recursive lock: kernel arguments, the GEMM
 * scratch buffer and the kernel choices are shared by the threads that
 * use the context. */
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
cl_mem clf__timing_buffer(clf_context *ctx, size_t floats, unsigned seed,
                          int *rc);
int clf__time_variants(clf_context *ctx, int count, clf__variant_fn run,
                       void *user, int reps, double *ms);

/* Enqueue one kernel over a 1-D range of `items` work-items, rounding the
 * global size up to the work-group size (kernels guard their tail). */
int clf__launch_1d(clf_context *ctx, enum clf__kernel_id id, size_t items);

/* launches.c: enqueue kernel id over the 3-D range g; grouped: work-groups of
 * twice the preferred multiple along dimension 0, g[0] padded up to it
 * (the kernel must skip the extra items), else the runtime's choice. */
int clf__enqueue3(clf_context *ctx, enum clf__kernel_id id, size_t g[3],
                  int grouped, const char *what);

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

/* program.c: the build options of every program ("-cl-std=CL1.2" and a
 * -D option for each entry of kernel_params.h), with the entries named in
 * over[0 .. n - 1] given the values val[] instead; truncated to cap. */
void clf__kernel_options(const char *const *over, const size_t *val, size_t n,
                         char *buf, size_t cap);
/* The programs built apart (kernels.h, CLF_PROGRAM_PARTS). */
#define CLF_PART_ID(id, files) CLF_PART_##id,
enum clf__program_part {
    CLF_PROGRAM_PARTS(CLF_PART_ID, CLF_REGISTRY_SKIP_FILE) CLF_PART_COUNT
};
#undef CLF_PART_ID
/* program.c: program part built with `options` in place of the usual ones
 * and cached on disk as the main program is (the options are part of the
 * key); a file that needs an extension the device lacks is refused,
 * naming both. */
int clf__program_build_part(clf_context *ctx, enum clf__program_part part,
                            const char *options, cl_program *out);
/* The index in clf__kernel_files of part's i-th file, -1 past its last. */
int clf__program_part_file(enum clf__program_part part, size_t i);

/* The embedded kernel sources, clf__cl_<stem> for each FILE(stem) of the
 * registry (generated from cl/ at build time). */
#define CLF_KERNEL_SOURCE_DECL(stem) extern const char clf__cl_##stem[];
#define CLF_KERNEL_SOURCE_DECL_APART(stem, ext)                                \
    extern const char clf__cl_##stem[];
CLF_KERNEL_REGISTRY(CLF_KERNEL_SOURCE_DECL, CLF_REGISTRY_SKIP_KERNEL)
CLF_KERNEL_REGISTRY_APART(CLF_KERNEL_SOURCE_DECL_APART)
#undef CLF_KERNEL_SOURCE_DECL
#undef CLF_KERNEL_SOURCE_DECL_APART

/* program.c: every kernel file, those of the main program in build order
 * (CLF_KERNEL_MAIN_FILES of them) then those built apart
 * (CLINFORMER_KERNEL_DIR holds files of these names), their embedded
 * texts, and the extension each needs (NULL: none, part of the main
 * program). */
#define CLF_KERNEL_FILE_COUNT(stem) +1
#define CLF_KERNEL_FILE_COUNT_APART(stem, ext) +1
enum {
    CLF_KERNEL_MAIN_FILES =
        0 CLF_KERNEL_REGISTRY(CLF_KERNEL_FILE_COUNT, CLF_REGISTRY_SKIP_KERNEL),
    CLF_KERNEL_FILES = CLF_KERNEL_MAIN_FILES +
                       0 CLF_KERNEL_REGISTRY_APART(CLF_KERNEL_FILE_COUNT_APART)
};
#undef CLF_KERNEL_FILE_COUNT
#undef CLF_KERNEL_FILE_COUNT_APART
/* Each file's index in those tables, CLF_FILE_<stem>. */
#define CLF_KERNEL_FILE_ID(stem) CLF_FILE_##stem,
#define CLF_KERNEL_FILE_ID_APART(stem, ext) CLF_FILE_##stem,
enum clf__kernel_file {
    CLF_KERNEL_REGISTRY(CLF_KERNEL_FILE_ID, CLF_REGISTRY_SKIP_KERNEL)
        CLF_KERNEL_REGISTRY_APART(CLF_KERNEL_FILE_ID_APART)
};
#undef CLF_KERNEL_FILE_ID
#undef CLF_KERNEL_FILE_ID_APART
extern const char *const clf__kernel_files[CLF_KERNEL_FILES];
extern const char *const clf__kernel_sources[CLF_KERNEL_FILES];
extern const char *const clf__kernel_needs[CLF_KERNEL_FILES];

/* fileio.c: files read and written as if hostile. */
int clf__file_open_read(
    const char *path, const char *what,
    FILE **out); /* regular files only (refuses FIFO, device, directory with an
                    error naming `what` and path, without blocking on a FIFO:
                    open O_RDONLY|O_NONBLOCK|O_NOCTTY, fstat, S_ISREG, then
                    clear O_NONBLOCK, fdopen) */
int
clf__file_read_all(const char *path, const char *what, size_t max, char **data,
                   size_t *len); /* whole regular file, at most max bytes (else
                                    an error), malloc'd, NUL-terminated */
int clf__file_read_cache(
    const char *path, const char *what, size_t max, char **data,
    size_t *len); /* as clf__file_read_all, and a symbolic link at path is
                     refused (O_NOFOLLOW; "... is a symbolic link"): every
                     reader of the cache directory or a tune file uses it */
int clf__file_write_atomic(
    const char *path, const void *data,
    size_t len); /* temp file in path's directory opened with
                    open(O_CREAT|O_EXCL|O_NOFOLLOW|O_WRONLY, 0600), write,
                    fsync, rename over path; an existing path that is not a
                    regular file (symlink included, lstat) is refused */
int clf__dir_private(
    const char *path); /* mkdir -p with mode 0700; an existing directory must be
                          owned by the user and not group/other-writable, else
                          an error naming it */

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

#endif /* CLF_RUNTIME_H */
