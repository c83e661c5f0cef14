/*
 * clinformer: Linformer attention on any OpenCL 1.2 device.
 *
 * One head of Linformer attention, with sequence length n, head width d and
 * k compressed slots, computes
 *
 *     Kbar = E K,  Vbar = F V,  Y = softmax(Q Kbar^T / sqrt(d)) Vbar
 *
 * where E and F (k x n) mix sequence positions.  This is an approximation of
 * full attention, not an equal; the "full" mode runs ordinary attention
 * through the same pipeline for comparison.  Its cost is O(n k) per head
 * only while k is fixed.  Plain Linformer is NOT causal: every compressed
 * slot mixes past and future positions.
 *
 * Conventions:
 *   - Every fallible function returns int: 0 on success, negative on
 *     failure.  OpenCL error codes (-1..-999) and CLBlast error codes pass
 *     through unchanged; clinformer's own codes start at -4000 (see
 *     CLF_ERRNO_MAP).  clf_last_error() gives a sentence naming the argument
 *     or stage that failed.
 *   - Matrices are row-major float32.
 *   - The library never prints and never exits.
 *   - Handles are not thread-safe; use one per thread or lock around them.
 */
#ifndef CLINFORMER_H
#define CLINFORMER_H

/* The caller chooses its OpenCL API version (CL_TARGET_OPENCL_VERSION, or
 * the headers' default); this header uses only OpenCL 1.2 declarations. */
#include <CL/cl.h>
#include <stddef.h>

#include "clinformer/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CLF_BUILDING_LIBRARY) && defined(__GNUC__)
#define CLF_EXTERN __attribute__((visibility("default")))
#else
#define CLF_EXTERN
#endif

/* ---------------------------------------------------------------- errors */

/* XX(name, value, message).  One table yields the enum, clf_strerror() and
 * clf_status_name(). */
#define CLF_ERRNO_MAP(XX)                                                      \
    XX(INVALID_ARGUMENT, -4000, "invalid argument")                            \
    XX(NULL_ARGUMENT, -4001, "a required pointer argument is NULL")            \
    XX(BAD_SIZE, -4002, "a size argument is zero or out of range")             \
    XX(SIZE_OVERFLOW, -4003, "a size product overflows")                       \
    XX(SEQ_TOO_LONG, -4004, "sequence length exceeds max_seq_len")             \
    XX(K_TOO_LARGE, -4005, "k exceeds max_seq_len")                            \
    XX(SHAPE_MISMATCH, -4006, "dimensions or weight shapes disagree")          \
    XX(BAD_ENUM, -4007, "unknown mode, sharing or weight identifier")          \
    XX(WEIGHT_UNSET, -4008, "a weight the layer needs has not been set")       \
    XX(WEIGHT_UNUSED, -4009, "this layer configuration has no such weight")    \
    XX(NO_DEVICE, -4010, "no OpenCL platform or device found")                 \
    XX(DEVICE_NOT_FOUND, -4011, "no device matches the selector")              \
    XX(NO_MEMORY, -4012, "host memory allocation failed")                      \
    XX(TOO_LARGE, -4013, "a buffer exceeds what the device can allocate")      \
    XX(BUFFER_TOO_SMALL, -4014, "a caller buffer is smaller than required")    \
    XX(WRONG_CONTEXT, -4015, "a caller object belongs to another context")     \
    XX(UNSUPPORTED, -4016, "the device or queue lacks a required feature")     \
    XX(IO, -4017, "file input or output failed")                               \
    XX(FORMAT, -4018, "a file is malformed")                                   \
    XX(NOT_FOUND, -4019, "no tensor or entry of that name")                    \
    XX(DTYPE, -4020, "unsupported data type")                                  \
    XX(SHARD_ABORTED, -4021, "another shard of a sharded forward failed")      \
    XX(OUT_OF_BOUNDS, -4022, "a kernel wrote outside a device buffer")

typedef enum clf_status {
    CLF_OK = 0,
#define CLF_ERRNO_ENUM(name, value, msg) CLF_E##name = value,
    CLF_ERRNO_MAP(CLF_ERRNO_ENUM)
#undef CLF_ERRNO_ENUM
        CLF_STATUS_END_ = -5000
} clf_status;

/* A static English sentence for any status: clinformer's own, OpenCL's or
 * CLBlast's.  Never NULL. */
CLF_EXTERN const char *clf_strerror(int status);

/* The status's symbolic name ("CLF_EBAD_SIZE", "CL_BUILD_PROGRAM_FAILURE",
 * "CLBlastInvalidDimension", ...).  Never NULL. */
CLF_EXTERN const char *clf_status_name(int status);

/* A sentence describing the most recent failure on the calling thread, naming
 * the argument, weight or stage involved ("seq_len 5000 exceeds max_seq_len
 * 4096").  Valid until the next failing call on this thread.  Never NULL.
 * It may belong to an earlier failure than the status in hand (a status
 * passed on by a caller's own code carries none): print clf_error_message()
 * with that status instead. */
CLF_EXTERN const char *clf_last_error(void);

/* The detail for status: clf_last_error() when the calling thread's most
 * recent failure returned this status, else clf_strerror(status), so a
 * message never belongs to another status.  Never NULL. */
CLF_EXTERN const char *clf_error_message(int status);

/* The version of the library actually linked (the header's is
 * CLF_VERSION_STRING). */
CLF_EXTERN const char *clf_version(void);

/* --------------------------------------------------------------- devices */

typedef struct clf_device_info {
    unsigned index;          /* flat index across platforms, as selected by
                                CLINFORMER_DEVICE=<index> */
    unsigned platform_index; /* index of the platform in ICD order */
    char platform[128];
    char name[128];
    char vendor[128];
    char driver[64];
    char version[64];   /* CL_DEVICE_VERSION */
    char c_version[64]; /* CL_DEVICE_OPENCL_C_VERSION */
    int is_gpu;
    int is_cpu;
    unsigned compute_units;
    unsigned max_clock_mhz;
    unsigned long long global_mem; /* bytes */
    unsigned long long max_alloc;  /* bytes */
    unsigned long long local_mem;  /* bytes */
    int fp16;                      /* cl_khr_fp16 */
    int fp64;                      /* cl_khr_fp64 or a double FP config */
    /* "<platform>:<i>", the device's name that stays the same while other
     * platforms come and go: <i> its index within its platform, <platform>
     * the platform's short name: "pocl" (PoCL), "rusticl", "clover",
     * "nvidia", "amd", "intel-gpu" (an Intel platform named "...Graphics"),
     * "intel-fpga", "intel-cpu" (any other Intel platform), "apple",
     * "oclgrind", else the first word of the platform name (its vendor's
     * when the name is empty) in lower case, letters and digits only, or
     * "platform".  The rules test the platform name, then its vendor,
     * case-insensitively.  A platform whose short name an earlier platform
     * (ICD order) already has gets "-2", "-3", ... appended.  Empty for a
     * device outside clf_devices_list's list (an adopted sub-device). */
    char stable_name[64];
} clf_device_info;

/* Lists the OpenCL devices of every platform.  Writes up to cap entries into
 * infos (which may be NULL when cap is 0) and the total count into *count.
 * Returns CLF_ENO_DEVICE when there is no platform at all. */
CLF_EXTERN int clf_devices_list(clf_device_info *infos, size_t cap,
                                size_t *count);

/* --------------------------------------------------------------- context */

typedef struct clf_context clf_context;

/* Creates a context on the device chosen by selector, or when selector is
 * NULL or empty by the environment variable CLINFORMER_DEVICE, or by default
 * the first GPU, else the first CPU device, else the first device.
 *
 * A selector is matched case-insensitively by the first of these rules that
 * names a device:
 *   1. digits: the flat device index ("0", "1", ...; see clf_devices_list);
 *   2. "cpu" or "gpu": the first device of that kind;
 *   3. a stable name ("pocl:0", "nvidia:1"; see clf_device_info), or a
 *      platform's short name alone ("pocl", "intel-cpu"): its first device;
 *   4. a piece of a platform name ("Portable", "CUDA", "intel"): the first
 *      device of the first such platform;
 *   5. a piece of a device name ("geforce", "epyc"): the first such device.
 * So a platform name wins over a device name: "intel" picks an Intel
 * platform's device, never another platform's CPU whose device name holds
 * the CPU brand.  Kernels are not built here but on first use or by
 * clf_context_build().
 *
 * On success *out owns a cl_context and an in-order cl_command_queue; free it
 * with clf_context_destroy().  Errors: CLF_ENULL_ARGUMENT, CLF_ENO_DEVICE,
 * CLF_EDEVICE_NOT_FOUND, CLF_EUNSUPPORTED (device below OpenCL 1.2),
 * CLF_ENO_MEMORY, OpenCL codes. */
CLF_EXTERN int clf_context_create(clf_context **out, const char *selector);

/* Flags for clf_context_create_ex(). */
#define CLF_CONTEXT_PROFILING 1u /* profiling queue: per-stage times */

/* clf_context_create() with flags (0 or CLF_CONTEXT_PROFILING).  Profiling
 * is never on by default; it makes clf_attention_stage_times() work.
 * Errors as clf_context_create, plus CLF_EINVALID_ARGUMENT for unknown
 * flags. */
CLF_EXTERN int clf_context_create_ex(clf_context **out, const char *selector,
                                     unsigned flags);

/* Wraps a caller's OpenCL objects for embedding.  The context retains them
 * (clRetain*) and releases its references on destroy; the caller keeps its
 * own.  The queue must be in order, belong to ctx and device.
 * Errors: CLF_ENULL_ARGUMENT, CLF_EWRONG_CONTEXT, CLF_EUNSUPPORTED
 * (out-of-order queue, OpenCL < 1.2), OpenCL codes. */
CLF_EXTERN int clf_context_adopt(clf_context **out, cl_context ctx,
                                 cl_device_id device, cl_command_queue queue);

/* Releases everything the context holds.  CLBlast's program cache is left
 * alone, since it is process-wide (clearing it would make every other
 * CLBlast user of the process recompile its kernels): CLBlast keeps the GEMM
 * programs it compiled for this context's cl_context for the life of the
 * process.  Destroy layers first.  NULL-safe. */
CLF_EXTERN void clf_context_destroy(clf_context *ctx);

/* Builds (or loads from the binary cache) the kernels now, so that the cost
 * is paid up front.  Idempotent.  On CL_BUILD_PROGRAM_FAILURE the compiler's
 * log is kept: see clf_context_build_log().
 *
 * Kernel binaries are cached on disk under CLINFORMER_CACHE_DIR, else
 * $XDG_CACHE_HOME/clinformer, else $HOME/.cache/clinformer, keyed by
 * platform, device, driver, library version, kernel source and build
 * options.  CLINFORMER_CACHE_DIR set to "off" disables the cache.  A corrupt
 * or stale entry is ignored and rebuilt from source: magic, key, payload
 * length against the file size and payload checksum are checked before the
 * driver sees it, and entries over 256 MiB are refused.  The directory is
 * created with mode 0700; one owned by another user or writable by group or
 * others is neither read nor written (nor are stored tune files in it).
 * Entries are written to a new file (O_EXCL | O_NOFOLLOW) and renamed into
 * place, so a symlink planted at either name is never written through.
 * CLINFORMER_KERNEL_DIR loads the .cl files from a directory instead of the
 * embedded copies. */
CLF_EXTERN int clf_context_build(clf_context *ctx);

/* GEMM tuning per device.  CLBlast's default parameters for a device it
 * does not know can be several times slower than good ones.  clf_tune()
 * times real forwards of the given layer shape under candidate parameters
 * of CLBlast's Xgemm kernel, of its XgemmDirect kernel (the single-kernel
 * GEMM CLBlast runs below its switch; timed with the switch set so that
 * every GEMM of the forward runs it, against CLBlast's own XgemmDirect
 * parameters timed so, a set kept only when more than 3% faster) and of
 * its switch between direct and indirect
 * GEMM (CLBlastOverrideParameters) and stores the fastest, keyed by
 * platform, device and driver, in the cache directory
 * (see clf_context_build).  No context applies it implicitly: the owner
 * of the process opts in with clf_tune_apply_process_wide(), and
 * clf_tune() itself leaves the fastest parameters applied (below).  The
 * candidates are tried through CLBlastOverrideParameters, which is
 * process-wide: while clf_tune() runs and afterwards (it leaves the fastest
 * parameters applied) every CLBlast GEMM of the process on that device uses
 * them.  Every candidate's output is checked against the output of the
 * parameters in force.  Tuning is explicit, never automatic.  The budget bounds
 * the whole call, compilation included: the clock is read before every step,
 * and a step under new parameters (an Xgemm candidate, an XgemmDirect set,
 * a switch setting, a tiled set: each a kernel to build) starts only while
 * the longest step's
 * forwards so far plus one kernel build still fit.  A build is timed apart
 * from the forwards; the estimate is the longest measured in the call (a
 * build under 0.25 s came from a cache and does not count), else the one
 * stored by an earlier call, else the setup's build or a guess of 10 s on
 * a GPU and 60 s on other devices, so a call overruns only when a build
 * takes longer than that estimate; the reference forward that every call
 * needs (the layer's kernels and CLBlast's defaults) always runs.
 * Candidates stop early enough to leave room for the forwards of the
 * later steps and the builds of XgemmDirect's baseline and next set; a later
 * call resumes where it stopped, and a budget too small for any step measures
 * nothing and returns 0.  The progress ends with a line saying how many
 * candidates, XgemmDirect sets, switch settings and tiled sets were tried and
 * how many were skipped for the budget.  A stored file that fails validation
 * (see clf_tune_apply_process_wide) is not resumed from but replaced.  A device
 * never tuned runs with CLBlast's defaults.  The timed forwards run every GEMM
 * through CLBlast; the stored kernel choices are keyed by the tuning in force,
 * so that afterwards the context times its kernel choices again at its next
 * forward, the tuned CLBlast against clinformer's own GEMM kernels among them,
 * and keeps the faster (clf_context_kernel_choices). The same call times
 * clinformer's tiled GEMM kernel under a few tile and vector sizes valid for
 * the device (every GEMM of the forward through it, its output checked) and
 * stores the fastest; applying the stored tuning builds the tiled kernel with
 * those sizes for that context only (not process-wide), and
 * clf_context_tuning() names them ("Tiled MWG=..."). */
typedef struct clf_tune_opts {
    size_t d_model, heads, k, seq_len; /* the layer to time; 0 = 512, 8,
                                          256, 2048 */
    double budget_s;                   /* seconds; 0 = 120 */
    void (*progress)(const char *line, void *user); /* or NULL */
    void *user;
    size_t max_candidates; /* new Xgemm candidates per call, and new
                              XgemmDirect sets; 0 = no limit */
} clf_tune_opts;

/* Errors: CLF_ENULL_ARGUMENT, CLF_ESIZE_OVERFLOW (seq_len * d_model floats
 * overflow), CLF_EIO (no cache directory, or it cannot be written),
 * CLF_ENO_MEMORY, and those of a forward. */
CLF_EXTERN int clf_tune(clf_context *ctx, const clf_tune_opts *opts);

/* Applies the GEMM tuning clf_tune() stored for ctx's device to CLBlast.
 * PROCESS-WIDE: CLBlastOverrideParameters changes the parameters of every
 * CLBlast GEMM in this process on this device, the host program's own and
 * other libraries' included, makes CLBlast recompile its GEMM kernels on
 * their next use, and cannot be undone within the process.  Meant for the
 * owner of the process (the clinformer tool, a program whose only CLBlast
 * user is clinformer); a library embedding clinformer should not call it.
 * Nothing calls it implicitly.  CLINFORMER_TUNE=off makes it apply nothing.
 * The file is validated first, as if hostile: every record known, every
 * value a number in range, the Xgemm and XgemmDirect parameters within the
 * constraints of CLBlast's kernels (nonzero powers of two, tile sizes
 * multiples of work-group size times vector width, ...) and the device's
 * work-group and local memory limits, and the tiled GEMM's sizes (powers of two
 * within the kernel's rules and the device's limits).  An invalid file is
 * ignored as a whole: nothing is applied and clf_context_warnings() says why.
 * The tiled GEMM's stored sizes apply to ctx alone (their kernel is built for
 * it); without them it keeps its defaults.  Should CLBlast still fail under
 * the applied parameters, they are dropped for ctx at the first failure:
 * clf_context_warnings() names them, and ctx's GEMMs that CLBlast would
 * run go to clinformer's own kernels from then on (CLBlast's defaults
 * cannot be restored within the process; a shape none of those kernels
 * takes on the device then fails, naming it).  Returns 0 also when nothing
 * is stored or the file was ignored (clf_context_tuning() then returns "");
 * errors: CLF_ENULL_ARGUMENT, CLF_ENO_MEMORY, CLBlast codes. */
CLF_EXTERN int clf_tune_apply_process_wide(clf_context *ctx);

/* The last warning of the context, or "" for none: a stored tune file that
 * failed validation and was ignored as a whole (its path, line and field).
 * Owned by the context, valid until its next call.  The library never
 * prints warnings; a program shows them if it wants to. */
CLF_EXTERN const char *clf_context_warnings(const clf_context *ctx);

/* The stored tuning that clf_tune_apply_process_wide() or clf_tune()
 * applied through this context ("Xgemm MWG=64 ..."), or "" for none.  Owned
 * by the context. */
CLF_EXTERN const char *clf_context_tuning(const clf_context *ctx);

/* Threads.  A context may be shared by threads, each using its own layers
 * and models: the context's kernels and their arguments, its GEMM scratch
 * buffer, its kernel choices and its program build are behind one lock,
 * held while a forward enqueues its stages (not while it waits for its
 * results).  A layer or model is used by one thread at a time; destroy it
 * in the thread that last used it, and the context after all of them.
 * Commands of all threads go to the context's one in-order queue, so a
 * forward's output is the same, bit for bit, whatever runs beside it.
 * clf_context_kernel_choices returns a buffer that the next call, from any
 * thread, rewrites.  Error messages (clf_last_error) are per thread. */

/* Kernel choices.  Some stages have several kernels that compute the same
 * thing, one faster on one device, another on the next: the softmax
 * ("softmax": "scalar", "vector" or "group"), who runs the GEMMs ("gemm":
 * "clblast", "blocked" or "tiled", chosen for each role of a forward's
 * GEMMs on its own shape) and how attention over the compressed slots
 * (or all positions, in full mode) runs ("attend": "gemm", a batched GEMM path;
 * "fused", one kernel, plain Linformer with d_h a multiple of 16 only;
 * "flash", one streaming kernel with an online softmax and no score buffer, in
 * every mode; or "flashwg", the same shaped for GPUs, work-groups of 64 query
 * rows with keys staged in local memory, every mode, d_h up to 64 only and
 * where the device takes work-groups of 256: forced elsewhere, the GEMM path
 * runs).  A forward first plans: every choice its shape needs is
 * resolved, from a forced name, else from the device's store, else by timing
 * the candidates on that shape (powers of two of the sizes form the buckets
 * that share a choice) and storing the winner; only then are the stages
 * enqueued.  The store is a small text file in the cache directory (see
 * clf_context_build) keyed by platform, device, vendor, driver, clinformer
 * version and GEMM tuning (clf_tune), so that another process on the same
 * device and driver takes the same kernels, and gets the same bits, without
 * timing.  A store that is corrupt, of another device, or not a regular file is
 * ignored.  CLINFORMER_KERNELS=softmax=NAME,gemm=NAME, attend=NAME (any subset)
 * forces choices for every context; a bad entry fails the next forward with
 * CLF_EINVALID_ARGUMENT listing the valid names.
 *
 * Half-precision layers add the kind "halfgemm" (halfgemm=NAME there too):
 * "widen", each 16-bit weight widened to float32 before its GEMM, or
 * "native", a GEMM that reads the binary16 weight directly and multiplies
 * in half arithmetic, summing in float32.  "native" is offered only where
 * the device reports cl_khr_fp16 and a self-test at first use passes;
 * forced where it is not offered, the layer widens and
 * clf_context_kernel_choices says why. */
typedef enum clf_choice_source {
    CLF_SOURCE_NONE = 0, /* not chosen yet */
    CLF_SOURCE_STORED,   /* read from the device's store */
    CLF_SOURCE_TIMED,    /* timed by this context, then stored */
    CLF_SOURCE_FORCED    /* clf_context_force_kernel or CLINFORMER_KERNELS */
} clf_choice_source;

/* Besides the kernel choices, a store lists kind "throughput": the
 * device's measured speed for a split over several devices (clf_group_*),
 * name "measured", ms[0] the rate in positions per second. */
typedef struct clf_kernel_choice {
    const char *kind; /* "softmax", "gemm" or "attend"; static storage */
    const char *name; /* the kernel chosen; static storage */
    char bucket[48];  /* the shapes it covers, e.g. "m1024.n512.k512";
                         a GEMM role's other than the projections' begins
                         with the role ("comp.", "score.", "weigh.",
                         "ffn.") */
    clf_choice_source source; /* CLF_SOURCE_STORED or CLF_SOURCE_TIMED */
    double ms[4]; /* each candidate's best time when it was timed, by this
                     context or by the one that stored it, in the order
                     listed above (-1 failed, 0 did not apply or not
                     known) */
} clf_kernel_choice;

/* Forces `name` for `kind` on this context (CLINFORMER_KERNELS still
 * wins); name NULL lifts the force.  Takes effect at the next forward.
 * Errors: CLF_ENULL_ARGUMENT, CLF_EINVALID_ARGUMENT (an unknown kind or
 * name; the message lists the valid ones). */
CLF_EXTERN int clf_context_force_kernel(clf_context *ctx, const char *kind,
                                        const char *name);

/* The stored and timed choices the context knows for its device (the
 * store is read at the first call): *count of them, and entry `index`
 * copied to *out.  Errors: CLF_ENULL_ARGUMENT, CLF_EINVALID_ARGUMENT
 * (index past the count). */
CLF_EXTERN int clf_context_kernel_choice_count(clf_context *ctx, size_t *count);
CLF_EXTERN int clf_context_kernel_choice(clf_context *ctx, size_t index,
                                         clf_kernel_choice *out);

/* With on != 0, each stored choice a later forward of this context looks
 * up is timed again once on this machine, now: the forward still runs
 * the stored winner (results keep their bits), and
 * clf_context_kernel_choices lists the times now beside the stored ones
 * ("; now: ..."), saying where another candidate now runs in less than
 * two thirds of the stored winner's time (a choice stored while the
 * machine was busy).  Costs the timing the store saves.  Errors:
 * CLF_ENULL_ARGUMENT. */
CLF_EXTERN int clf_context_check_kernel_choices(clf_context *ctx, int on);

/* The name of candidate `index` of a choice kind ("softmax", "gemm",
 * "attend", "halfgemm"), in the order of clf_kernel_choice.ms; NULL for
 * an unknown kind or an index past its candidates. */
CLF_EXTERN const char *clf_kernel_candidate_name(const char *kind, int index);

/* Forgets the kernel choices stored for the context's device, in the
 * store and in the context (not those forced), so that the next forward
 * of each shape times its candidates again: for choices timed while the
 * machine was busy, whose stored times (clf_kernel_choice.ms) say so.
 * Other contexts keep what they already read until they are made again.
 * *dropped (may be NULL) receives how many there were.  Errors:
 * CLF_ENULL_ARGUMENT. */
CLF_EXTERN int clf_context_forget_kernel_choices(clf_context *ctx,
                                                 size_t *dropped);

/* The choice each kind last took in the context's plans and where it came
 * from, e.g. "softmax: vector (stored r2048.c256); gemm: blocked (timed
 * m1024.n512.k512: clblast 14.10 ms, blocked 4.20 ms); gemm[comp]: tiled
 * (stored comp.m256.n512.k4096.b1); attend: fused (forced)", "not chosen
 * yet" before the first plan needing it.  Kind "gemm" has a part per role
 * of a forward's GEMMs, each chosen for its own shape: "gemm" the
 * projections X W^T, "gemm[comp]" the sequence compression E X, the
 * scores "gemm[score]", the weighted sum "gemm[weigh]", a model's
 * feed-forward and logits "gemm[ffn]"; those four, and "halfgemm", are
 * listed once a plan resolved them.  Owned by the context; valid until the
 * next call. */
CLF_EXTERN const char *clf_context_kernel_choices(clf_context *ctx);

/* The launch log: the geometry of the kernels a context enqueues, to read
 * a forward's shape on a device (work-groups and work-items per kernel)
 * without a profiler.  One entry per kernel and geometry, counting its
 * launches.  A GEMM handed to CLBlast, whose own kernels the library does
 * not see, is an entry "CLBlast" with dims 0, m, n, k in global and the
 * batch in local[0]. */
typedef struct clf_launch {
    char kernel[64];  /* the kernel's name */
    unsigned dims;    /* 1 to 3; 0 for CLBlast */
    size_t global[3]; /* work-items in each dimension (unused ones 0) */
    size_t local[3];  /* the work-group; all 0 where the driver picks it */
    size_t groups;    /* work-groups of one launch; 0 where the driver picks */
    size_t items;     /* work-items of one launch */
    size_t calls;     /* launches of this kernel with this geometry */
} clf_launch;

/* Starts (on != 0, clearing the log) or stops recording the context's
 * launches; stopped, the log stays readable.  Recording costs a name
 * query per launch: it is off by default.  Errors: CLF_ENULL_ARGUMENT,
 * CLF_ENO_MEMORY. */
CLF_EXTERN int clf_context_record_launches(clf_context *ctx, int on);
/* The log's *count of entries and, when dropped is not NULL, the launches
 * it had no room for (past 4096 distinct geometries).  Errors:
 * CLF_ENULL_ARGUMENT. */
CLF_EXTERN int clf_context_launch_count(clf_context *ctx, size_t *count,
                                        size_t *dropped);
/* Entry `index` of the log, copied to *out.  Errors: CLF_ENULL_ARGUMENT,
 * CLF_EINVALID_ARGUMENT (index past the count). */
CLF_EXTERN int clf_context_launch(clf_context *ctx, size_t index,
                                  clf_launch *out);

/* Guard bands, a checking aid for kernels (slow: every launch waits and
 * reads buffers back).  With on != 0, every device buffer the context
 * creates from then on for a layer, a model, a stream or a GEMM's scratch
 * gets a band of at least 1 KiB on either side, filled with the 4-byte
 * pattern 0xFFBFFFFF (a signalling NaN as float, NaNs as half: a kernel
 * reading a band spoils its result, and one adding to it changes its
 * bits, as arithmetic quiets the NaN);
 * after every kernel the context launches, and every GEMM handed to
 * CLBlast, the bands of all its live guarded buffers are read back.  The
 * first damaged band is kept (and the band refilled): the forward itself
 * goes on and returns as usual, and clf_context_guard_check reports it.
 * Buffers made while guards were off stay unguarded; turn guards on before
 * creating the layer or model.  Errors: CLF_ENULL_ARGUMENT,
 * CLF_ENO_MEMORY. */
CLF_EXTERN int clf_context_guard_buffers(clf_context *ctx, int on);

/* 0 when no guard band was damaged since the last call; else
 * CLF_EOUT_OF_BOUNDS, and clf_last_error() names the kernel launched just
 * before the damage was seen, the buffer, its size and where outside it the
 * first changed byte lies ("kernel clf_add_bias wrote outside device buffer
 * output staging (11544 bytes): the first byte changed is byte 2 past its
 * end").  Clears the record.  Errors: CLF_ENULL_ARGUMENT. */
CLF_EXTERN int clf_context_guard_check(clf_context *ctx);

/* The build log of the last failed kernel build on this context, or "" when
 * none failed.  Owned by the context; valid until the context's next
 * kernel build, from any thread. */
CLF_EXTERN const char *clf_context_build_log(const clf_context *ctx);

typedef struct clf_context_stats {
    unsigned source_builds; /* programs compiled from source */
    unsigned cache_loads;   /* programs loaded from the binary cache */
    unsigned cache_rejects; /* cache entries found corrupt or unusable */
    unsigned cache_writes;  /* cache entries written */
} clf_context_stats;

CLF_EXTERN int clf_context_stats_get(const clf_context *ctx,
                                     clf_context_stats *out);

/* Fills *out with the context's device.  Errors: CLF_ENULL_ARGUMENT. */
CLF_EXTERN int clf_context_device_info(const clf_context *ctx,
                                       clf_device_info *out);

/* The underlying OpenCL objects (borrowed; do not release). */
CLF_EXTERN cl_context clf_context_cl_context(const clf_context *ctx);
CLF_EXTERN cl_device_id clf_context_cl_device(const clf_context *ctx);
CLF_EXTERN cl_command_queue clf_context_cl_queue(const clf_context *ctx);

/* Waits until all work enqueued on the context's queue has finished. */
CLF_EXTERN int clf_context_finish(clf_context *ctx);

/* ------------------------------------------------------------- attention */

/* How E and F are shared (the Linformer paper's section 4). */
typedef enum clf_sharing {
    CLF_SHARE_HEADWISE = 0, /* one E and one F for all heads (default; the
                               lucidrains package's layout) */
    CLF_SHARE_PER_HEAD = 1, /* each head its own E and F */
    CLF_SHARE_KEY_VALUE = 2 /* one E, used as F too (E = F) */
} clf_sharing;

/* How the n positions become k compressed slots (the Linformer paper's
 * section 4).  The windowed ones (mean, max, convolution) read the
 * projected keys and values (padding rows zero) in windows of
 * w = floor(max_seq_len / k) positions: slot r covers positions r*w ..
 * r*w + w - 1 (positions past the last are not read, as in PyTorch's
 * pooling with kernel = stride = w); a position at or past a call's n
 * counts as a zero row, as the linear E reads only its first n columns.
 * In prefix-safe causal Linformer, slot i of block m covers m*b + i*w ..
 * + w - 1 (c*w <= b always holds), so no slot mixes two blocks. */
typedef enum clf_compression {
    CLF_COMPRESS_LINEAR = 0, /* E and F, k x max_seq_len matrices (default) */
    CLF_COMPRESS_MEAN = 1,   /* mean pooling: a window's sum over w; no
                                weights (no E, F or their biases) */
    CLF_COMPRESS_MAX = 2,    /* max pooling, per channel; no weights; a NaN
                                in a window gives NaN */
    CLF_COMPRESS_CONV = 3    /* a convolution over the sequence with kernel
                                = stride = w, mixing a head's d_h channels
                                (linformer-pytorch's method="convolution"):
                                E and F are nE*d_h x d_h*w, each head's
                                d_h rows PyTorch's Conv1d weight (out, in,
                                w) as stored, with bias_proj a bias per
                                output channel */
} clf_compression;

/* "linear", "mean", "max", "conv"; "?" for others. */
CLF_EXTERN const char *clf_compression_name(clf_compression compression);

/* Parses one of the names above.  Errors: CLF_ENULL_ARGUMENT, CLF_EBAD_ENUM
 * naming the value and the valid ones. */
CLF_EXTERN int clf_compression_parse(const char *name, clf_compression *out);

typedef enum clf_mode {
    CLF_MODE_LINFORMER = 0, /* compressed attention over k slots (default) */
    CLF_MODE_FULL = 1       /* ordinary attention over all n positions */
} clf_mode;

/* How a layer stores its weights on the device (docs/design.md, section
 * "Precision").  Arithmetic is float32 either way. */
typedef enum clf_precision {
    CLF_PRECISION_FLOAT = 0, /* float32 (default) */
    CLF_PRECISION_HALF = 1   /* W_q, W_k, W_v, W_out, E and F as IEEE 754
                                binary16 (read and written with vload_half /
                                vstore_half, so no cl_khr_fp16 is needed),
                                half their float32 bytes; each is widened
                                to float32 into a scratch buffer of the
                                context just before the GEMM that reads it
                                (or read directly where the kernel choice
                                "halfgemm" is "native", cl_khr_fp16 only).
                                Biases, activations and workspaces stay
                                float32.  A weight value beyond binary16's
                                range (|v| > 65504) is refused.  Expect a
                                relative error of a few 1e-4 against
                                float32 */
} clf_precision;

/* "float", "half"; "?" for others. */
CLF_EXTERN const char *clf_precision_name(clf_precision precision);

/* Parses "float" or "half" (also "fp32", "fp16").  Errors: CLF_ENULL_ARGUMENT,
 * CLF_EBAD_ENUM naming the value and the valid ones. */
CLF_EXTERN int clf_precision_parse(const char *name, clf_precision *out);

/* A layer's shape.  Zero-initialise it and fill in d_model, heads,
 * max_seq_len and k; the zero defaults mean: head_dim = d_model / heads,
 * headwise sharing, separate V, one K/V head per query head, no biases. */
typedef struct clf_attention_desc {
    size_t d_model;     /* D, width of the layer input and output */
    size_t heads;       /* h */
    size_t head_dim;    /* d_h; 0 means d_model / heads */
    size_t max_seq_len; /* N; calls may use any n <= N */
    size_t k;           /* compressed length, 1 <= k <= N */
    clf_sharing sharing;
    int share_kv;    /* lucidrains share_kv: V = K (no W_v) and F = E */
    int one_kv_head; /* one K/V head of width d_h shared by all heads */
    int bias_q, bias_k, bias_v, bias_out; /* which projections have biases */
    int compressed_bias; /* fairseq's order: K/V biases added once per
                            compressed slot, Kbar = (E X) W_k^T + b_k,
                            instead of E (X W_k^T + b_k).  Not with
                            causal Linformer */
    size_t causal_block; /* b for prefix-safe causal Linformer; 0 = none.
                            With nb = ceil(max_seq_len / b) blocks, k must
                            be a multiple of nb: c = k / nb slots a block */
    /* Weight storage; 0 = float32.  Another value fails
     * clf_attention_create with CLF_EBAD_ENUM. */
    clf_precision precision;
    int bias_proj; /* a bias per compressed slot after E and F (E and F
                      as nn.Linear over the sequence axis, as in the
                      linformer-pytorch package): Kbar = E K + b_E 1^T,
                      Vbar = F V + b_F 1^T.  Linformer mode only (full
                      mode has no compression); not with causal
                      Linformer.  With CLF_COMPRESS_CONV, the
                      convolution's bias per output channel instead
                      (causal Linformer too); not with mean or max */
    /* How positions are compressed; 0 = the linear E and F.  Mean and max
     * pooling take no compressed_bias or bias_proj; the convolution no
     * compressed_bias.  A forward split by positions (CLF_SHARD_SEQ, MPI)
     * takes the linear one only. */
    clf_compression compression;
    /* The linformer-pytorch package's causal=True mask, applied by every
     * forward (for running models trained with it as they were trained):
     * in Linformer mode the query at position t attends to slots 0..t
     * only (to all k from t = k - 1 on), in full mode the ordinary
     * lower-triangular mask.  Each slot mixes every position, so in
     * Linformer mode the future still reaches the output at t:
     * clf_attention_check_lookahead fails such a layer, and the
     * prefix-safe mode (causal_block, clf_forward_opts.causal) is the one
     * for causal use.  Not with causal_block; a Linformer forward with
     * opts->causal is refused; the steps 3 to 5 run on the GEMM path;
     * not with the sharded forward. */
    int slot_mask;
} clf_attention_desc;

/* The layer's parameters.  Shapes (rows x cols, row-major), with
 * hq = heads, hkv = one_kv_head ? 1 : heads, nE = per-head ? heads : 1:
 *   CLF_WEIGHT_Q    (hq*d_h)  x D       CLF_BIAS_Q    hq*d_h
 *   CLF_WEIGHT_K    (hkv*d_h) x D       CLF_BIAS_K    hkv*d_h
 *   CLF_WEIGHT_V    (hkv*d_h) x D       CLF_BIAS_V    hkv*d_h
 *   CLF_WEIGHT_OUT  D x (hq*d_h)        CLF_BIAS_OUT  D
 *   CLF_PROJ_E      (nE*k) x N          CLF_PROJ_F    (nE*k) x N
 *   CLF_BIAS_E      nE*k                CLF_BIAS_F    nE*k   (bias_proj)
 * With CLF_COMPRESS_CONV, w = floor(N / k):
 *   CLF_PROJ_E      (nE*d_h) x (d_h*w)  CLF_PROJ_F    (nE*d_h) x (d_h*w)
 *   CLF_BIAS_E      nE*d_h              CLF_BIAS_F    nE*d_h (bias_proj)
 * and with mean or max pooling no E, F or their biases.
 * E is stored as used, Kbar = E K (the lucidrains proj_k is its transpose;
 * fairseq's compress_k.weight is E as stored).  Calls with n < N use the
 * first n columns. */
typedef enum clf_weight {
    CLF_WEIGHT_Q = 0,
    CLF_WEIGHT_K,
    CLF_WEIGHT_V,
    CLF_WEIGHT_OUT,
    CLF_BIAS_Q,
    CLF_BIAS_K,
    CLF_BIAS_V,
    CLF_BIAS_OUT,
    CLF_PROJ_E,
    CLF_PROJ_F,
    CLF_BIAS_E,
    CLF_BIAS_F,
    CLF_WEIGHT_COUNT
} clf_weight;

/* The parameter's name ("W_q", "E", ...), or "?" for an unknown id. */
CLF_EXTERN const char *clf_weight_name(clf_weight which);

typedef struct clf_attention clf_attention;

/* Creates a layer on ctx (which must outlive it) and builds the kernels if
 * they are not built yet.  Weights start unset.
 * Errors: CLF_ENULL_ARGUMENT, CLF_EBAD_SIZE (a zero dimension),
 * CLF_ESHAPE_MISMATCH (d_model not a multiple of heads with head_dim 0),
 * CLF_EK_TOO_LARGE, CLF_EBAD_ENUM, CLF_ESIZE_OVERFLOW, CLF_ETOO_LARGE,
 * CL_BUILD_PROGRAM_FAILURE (log in clf_context_build_log), OpenCL codes. */
CLF_EXTERN int clf_attention_create(clf_attention **out, clf_context *ctx,
                                    const clf_attention_desc *desc);

/* Releases the layer's device buffers.  NULL-safe. */
CLF_EXTERN void clf_attention_destroy(clf_attention *att);

/* The element count a weight must have in this layer's configuration, in
 * *count.  Errors: CLF_EBAD_ENUM, CLF_EWEIGHT_UNUSED (e.g. a bias the desc
 * does not enable, W_v with share_kv, F with key-value sharing). */
CLF_EXTERN int clf_attention_weight_size(const clf_attention *att,
                                         clf_weight which, size_t *count);

/* Copies count floats from host memory into the layer's weight (blocking).
 * count must equal clf_attention_weight_size().  Errors: CLF_ENULL_ARGUMENT,
 * CLF_EBAD_ENUM, CLF_EWEIGHT_UNUSED, CLF_ESHAPE_MISMATCH (wrong count),
 * CLF_EINVALID_ARGUMENT (a half-precision layer's weight holding a finite
 * value beyond +-65504; the weight is then left unset), OpenCL codes. */
CLF_EXTERN int clf_attention_set_weight(clf_attention *att, clf_weight which,
                                        const float *data, size_t count);

/* Fills every weight this layer uses with reproducible pseudo-random values
 * from seed, initialised as PyTorch does: nn.Linear weights and biases
 * uniform in +-1/sqrt(fan_in), E and F uniform in +-1/sqrt(k) (the
 * lucidrains package's init).  For demos, benchmarks and tests.
 * Errors: CLF_ENULL_ARGUMENT, CLF_ENO_MEMORY, OpenCL codes. */
CLF_EXTERN int clf_attention_randomize(clf_attention *att,
                                       unsigned long long seed);

/* Selects Linformer (default) or full attention for later forwards.  Full
 * mode does not need E or F; on the GEMM path its n x n scores are made in
 * chunks of query rows when a batch's would pass 512 MiB, and the streaming
 * kernel ("attend" "flash") holds no scores at all.
 * Errors: CLF_EBAD_ENUM. */
CLF_EXTERN int clf_attention_set_mode(clf_attention *att, clf_mode mode);

/* Options of one forward; zero-initialised means no mask, not causal.
 *
 * Padding: positions whose mask byte is 0 (or at index >= lengths[b]) are
 * padding.  They take no part in compression (E is used as E diag(mask),
 * exactly) nor in full-mode scores, and their output rows are zeros.  A
 * right-padded sequence gives what the same sequence alone gives at its own
 * length.
 *
 * Causal: in full mode, the ordinary lower-triangular mask.  In Linformer
 * mode, the prefix-safe construction: positions are cut into blocks of
 * desc.causal_block = b; the c slots of block j use only E's entries over
 * block j's positions (other entries of E are ignored); a query at t in
 * block m attends to the slots of blocks 0..m-1 and exactly to positions
 * m*b..t, under one softmax.  Nothing after t reaches the output at t.
 * Cost per head: O(n (k + b)) with k >= N/b, i.e. O(n (N/b + b)), smallest
 * near b = sqrt(N): O(n sqrt(N)), not linear.  Plain (non-causal) Linformer
 * mixes future positions into every slot and must not be used causally. */
typedef struct clf_forward_opts {
    const unsigned *lengths;       /* batch entries, each 1..seq_len, or
                                      NULL: right padding */
    const unsigned char *key_mask; /* batch*seq_len bytes, nonzero = real,
                                      or NULL; not with lengths */
    int causal;                    /* nonzero: causal, as above */
} clf_forward_opts;

/* Forward from host memory: x holds batch*seq_len rows of D floats, y
 * receives the same shape (x and y may be the same array).  Blocks until y
 * is written.  Errors: CLF_ENULL_ARGUMENT, CLF_EBAD_SIZE, CLF_ESEQ_TOO_LONG,
 * CLF_EWEIGHT_UNSET, CLF_ESIZE_OVERFLOW, CLF_ETOO_LARGE, OpenCL and CLBlast
 * codes. */
CLF_EXTERN int clf_attention_forward(clf_attention *att, const float *x,
                                     size_t batch, size_t seq_len, float *y);

/* Forward between caller buffers of the same cl_context, offsets counted in
 * floats.  Only enqueues (on the context's in-order queue); nothing is read
 * back to the host.  Call clf_context_finish() or wait on the queue before
 * reading y.  x and y may alias.  A forward whose shape needs a kernel
 * choice neither forced nor stored (clf_context_kernel_choices) first times
 * the candidates on buffers of its own, which waits for the queue.
 * Errors as clf_attention_forward, plus CLF_EWRONG_CONTEXT and
 * CLF_EBUFFER_TOO_SMALL. */
CLF_EXTERN int clf_attention_forward_cl(clf_attention *att, cl_mem x,
                                        size_t x_offset, cl_mem y,
                                        size_t y_offset, size_t batch,
                                        size_t seq_len);

/* The same with options (opts may be NULL).  With a padding mask or lengths,
 * the mask is copied to the device before the call returns (a blocking
 * write), so the caller's arrays may be freed at once.  Errors as above, plus
 * CLF_EINVALID_ARGUMENT (lengths and key_mask both given), CLF_EBAD_SIZE
 * (a length of 0 or above seq_len; causal Linformer with causal_block 0). */
CLF_EXTERN int clf_attention_forward_ex(clf_attention *att, const float *x,
                                        size_t batch, size_t seq_len, float *y,
                                        const clf_forward_opts *opts);
CLF_EXTERN int clf_attention_forward_cl_ex(clf_attention *att, cl_mem x,
                                           size_t x_offset, cl_mem y,
                                           size_t y_offset, size_t batch,
                                           size_t seq_len,
                                           const clf_forward_opts *opts);

/* The look-ahead audit: for each query position t in positions, replaces
 * every input row after t with fresh random values (from seed), then with
 * NaN, +inf, -inf and huge finite values (of order 1e30) in turn, and
 * checks each time that the outputs at positions 0..t are unchanged, bit
 * for bit (a future value weighed by 0 rather than skipped shows only
 * there: 0 x NaN and 0 x inf are NaN).  One sequence (batch 1) of seq_len
 * rows from x, with the layer's current mode and the given options (a
 * key_mask, if any, is left as given).  On return
 * result->passed is 1 when nothing moved; otherwise result->t is the first
 * perturbation point that moved an output, result->moved the first output
 * position that changed and result->change the largest absolute change at
 * positions <= t.  Errors as clf_attention_forward_ex, plus CLF_EBAD_SIZE
 * for a position >= seq_len. */
typedef struct clf_lookahead_result {
    int passed;
    size_t checked; /* perturbation points tried */
    size_t t;
    size_t moved;
    double change;
} clf_lookahead_result;

CLF_EXTERN int clf_attention_check_lookahead(
    clf_attention *att, const float *x, size_t seq_len,
    const clf_forward_opts *opts, const size_t *positions, size_t npositions,
    unsigned long long seed, clf_lookahead_result *result);

/* Stages of one forward, as timed by clf_attention_stage_times(). */
typedef enum clf_stage {
    CLF_STAGE_PROJECTION = 0, /* Q = X W_q^T + b_q */
    CLF_STAGE_COMPRESSION,    /* Kbar, Vbar: compression (and K/V
                                 projection), or K/V projection in full
                                 mode */
    CLF_STAGE_SCORES,         /* Q Kbar^T / sqrt(d_h) (and causal window) */
    CLF_STAGE_SOFTMAX,        /* masks and row softmax */
    CLF_STAGE_WEIGHTED_SUM,   /* P Vbar (and causal window) */
    CLF_STAGE_FUSED,          /* scores, softmax and weighted sum in one
                                 kernel: the attend way fused, flash or
                                 flashwg, where one runs (then the three
                                 stages above take no time) */
    CLF_STAGE_OUTPUT,         /* O W_o^T + b_o, padding rows zeroed */
    CLF_STAGE_COUNT
} clf_stage;

/* The stage's name ("projection", "softmax", ...), or "?". */
CLF_EXTERN const char *clf_stage_name(clf_stage stage);

/* Seconds each stage of the layer's most recent forward took on the device,
 * from profiling marker events between stages (CLBlast's own event would
 * cover only its last kernel).  Waits for that forward to finish.  Needs a
 * context made with CLF_CONTEXT_PROFILING (or an adopted queue with
 * profiling enabled).  Errors: CLF_ENULL_ARGUMENT, CLF_EUNSUPPORTED (no
 * profiling, or no forward yet), OpenCL codes. */
CLF_EXTERN int clf_attention_stage_times(clf_attention *att,
                                         double seconds[CLF_STAGE_COUNT]);

/* Bytes of device memory the layer holds now: weights plus workspaces, which
 * grow to the largest batch and length seen and are then reused, plus the
 * transposed copies of W_q, W_k, W_v and W_out kept where the library's
 * blocked GEMM runs the projections (a copy each, made by the first
 * forward that needs it, dropped when the weight is set again).  With
 * CLF_PRECISION_HALF the weights count 2 bytes an element, plus the float32
 * scratch the layer's forward widens them into (its largest W matrix plus
 * its E): that scratch belongs to the context and every layer of the context
 * shares it, so a stack of layers needs it once, not once a layer. */
CLF_EXTERN int clf_attention_device_bytes(const clf_attention *att,
                                          size_t *bytes);

/* Floating-point operations one forward of this shape performs in the given
 * mode, counted from the shapes (2 per multiply-add, plus softmax and bias
 * work), the same way on every device.  Errors: CLF_ENULL_ARGUMENT,
 * CLF_EBAD_SIZE, CLF_ESEQ_TOO_LONG, CLF_EBAD_ENUM. */
CLF_EXTERN int clf_attention_flops(const clf_attention *att, clf_mode mode,
                                   size_t batch, size_t seq_len, double *flops);

/* The same for a forward with options (causal changes the work; masks do
 * not change the count).  opts may be NULL. */
CLF_EXTERN int clf_attention_flops_ex(const clf_attention *att, clf_mode mode,
                                      size_t batch, size_t seq_len,
                                      const clf_forward_opts *opts,
                                      double *flops);

/* The same count from a desc alone, no device or layer needed, split by
 * stage: stage_flops (may be NULL) receives the projection, compression,
 * scores (with the causal window), softmax, weighted sum and output work;
 * CLF_STAGE_FUSED is 0 (a fused kernel does the work of the three stages it
 * replaces).  *total receives their sum, the number clf_attention_flops_ex
 * gives for a layer of this desc.  causal != 0 counts a causal forward.
 * Errors, naming the argument: CLF_ENULL_ARGUMENT (desc, total),
 * CLF_EBAD_SIZE (a zero size, causal Linformer without causal_block),
 * CLF_EK_TOO_LARGE, CLF_ESHAPE_MISMATCH, CLF_ESEQ_TOO_LONG, CLF_EBAD_ENUM,
 * CLF_EUNSUPPORTED (causal Linformer with compressed_bias). */
CLF_EXTERN int clf_attention_desc_flops(const clf_attention_desc *desc,
                                        clf_mode mode, size_t batch,
                                        size_t seq_len, int causal,
                                        double stage_flops[CLF_STAGE_COUNT],
                                        double *total);

/* ----------------------------------------------------------------- peaks */

/* What the context's device can do at best, measured as clpeak measures it:
 * the yardstick that a forward's GFLOP/s and bytes are held against (the
 * roofline bound min(fma_gflops, intensity x copy_gbps)). */
typedef struct clf_device_peaks {
    double fma_gflops; /* fp32 multiply-add throughput, GFLOP/s (2 FLOPs a
                          multiply-add): the best of a grid of kernels,
                          float to float16, 8 to 24 independent chains
                          per work-item, 2048 work-items per compute
                          unit */
    double copy_gbps;  /* device-memory copy bandwidth, GB/s (bytes read
                          plus bytes written): the faster of a float4
                          copy kernel and clEnqueueCopyBuffer over a
                          buffer of up to 128 MiB */
    double h2d_gbps;   /* host-to-device bandwidth, GB/s: a blocking
                          clEnqueueWriteBuffer of the same buffer */
    int cached;        /* 1: read from the cache, not measured by this call */
    int fma_width, fma_chains; /* the grid point that set fma_gflops */
    int copy_api; /* 1: clEnqueueCopyBuffer set copy_gbps, 0: the kernel */
} clf_device_peaks;

/* Measures again even when the cache holds the device's peaks. */
#define CLF_PEAKS_MEASURE 1u

/* The device's peaks.  Each figure is the best of several timed runs on the
 * host clock (enqueue to clFinish), each run long enough to dwarf the launch
 * (the multiply-adds about 50 ms, the copy repeated to 20 ms at least); other
 * work on the machine lowers them, so measure an idle one.  They are cached per
 * device and driver (platform, name, vendor, driver and device version, stable
 * name, and the measuring kernels' text) in the cache directory
 * (CLINFORMER_CACHE_DIR, as the kernel cache; not with "off"), as a small text
 * file written atomically in a private directory; a file that is unreadable, of
 * another device or holds a figure that is not a positive number is ignored and
 * measured again.  flags: 0 or CLF_PEAKS_MEASURE. Builds the context's kernels
 * when not built yet; takes about a second on a CPU.  Errors:
 * CLF_ENULL_ARGUMENT, CLF_EBAD_ENUM (unknown flags), kernel build errors,
 * OpenCL codes (CLF_ENO_MEMORY when the buffers cannot be allocated). */
CLF_EXTERN int clf_context_peaks(clf_context *ctx, unsigned flags,
                                 clf_device_peaks *out);

/* ---------------------------------------------------------------- models */

/* Weight layouts of trained models (docs/design.md, section 1). */
typedef enum clf_layout {
    CLF_LAYOUT_AUTO = 0,              /* detect from the tensor names */
    CLF_LAYOUT_LUCIDRAINS_ATTENTION,  /* linformer.LinformerSelfAttention */
    CLF_LAYOUT_LUCIDRAINS_ENCODER,    /* linformer.Linformer (sequential or
                                         reversible) */
    CLF_LAYOUT_LUCIDRAINS_LM,         /* linformer.LinformerLM */
    CLF_LAYOUT_FAIRSEQ_ATTENTION,     /* fairseq's Linformer attention */
    CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER, /* fairseq's post-LN encoder layer */
    /* The linformer-pytorch package (docs/models.md): */
    CLF_LAYOUT_LINFORMER_PYTORCH_ATTENTION, /* a bare MHAttention */
    CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER,   /* Linformer */
    CLF_LAYOUT_LINFORMER_PYTORCH_LM,        /* LinformerLM */
    CLF_LAYOUT_SINGLE_HEAD_ATTENTION        /* one head: query/key/value linears
                                               with biases, E and F (k, N), no
                                               output projection */
} clf_layout;

/* "auto", "lucidrains-attention", "lucidrains-encoder", "lucidrains-lm",
 * "fairseq-attention", "fairseq-encoder-layer",
 * "linformer-pytorch-attention", "linformer-pytorch",
 * "linformer-pytorch-lm", "single-head-attention"; "?" for others. */
CLF_EXTERN const char *clf_layout_name(clf_layout layout);

/* Parses a layout name as printed by clf_layout_name().  Errors:
 * CLF_EBAD_ENUM. */
CLF_EXTERN int clf_layout_parse(const char *name, clf_layout *out);

/* Loading options; zero-initialised means: detect the layout, take heads
 * from the file's metadata, no causal block, each layer its own E/F. */
typedef struct clf_model_opts {
    clf_layout layout;
    size_t heads;         /* 0: from the "heads" metadata entry */
    size_t causal_block;  /* for causal Linformer forwards; 0 = none */
    int layerwise;        /* share layer 0's E and F with every layer (the
                             paper's layerwise sharing) */
    int allow_unexpected; /* nonzero: tensors the layout does not use are
                             skipped and listed (clf_model_unexpected_*);
                             0 (strict): they are an error */
    /* Weight storage of every attention layer (clf_attention_desc's
     * precision); 0 = float32.  Feed-forward, norm and embedding weights
     * stay float32. */
    clf_precision precision;
} clf_model_opts;

typedef struct clf_model_info {
    clf_layout layout;
    size_t d_model, heads, head_dim, max_seq_len, k;
    size_t layers;  /* attention layers (1 for a bare attention layer) */
    size_t ffn_dim; /* 0 without feed-forward blocks */
    size_t vocab;   /* LM: input token ids, output logits of this width */
    int reversible, share_kv, one_kv_head, layerwise;
    int slot_mask; /* the attention layers apply the slot mask of a
                      linformer-pytorch model trained with causal=True
                      (clf_attention_desc.slot_mask: it leaks the
                      future in Linformer mode) */
} clf_model_info;

typedef struct clf_model clf_model;

/* Loads a model from a safetensors file (what safetensors.torch.save_file
 * writes from a state_dict) onto ctx, which must outlive it.  Strict, like
 * PyTorch's load_state_dict(strict=True): every tensor the layout names
 * must be present, for every layer from 0 to the highest layer number in
 * the file, with the shape the first tensors imply, and a tensor the layout
 * does not name is an error unless opts->allow_unexpected.  Keys and values
 * share (lucidrains share_kv, fairseq shared_kv_compressed) when the file
 * holds none of to_v.weight/proj_v (compress_v.weight) in its first layer,
 * or when its "share_kv" metadata entry says "true"; one of the two without
 * the other is a missing tensor.  Errors name the tensor (and the shape
 * expected): CLF_ENOT_FOUND (missing), CLF_ESHAPE_MISMATCH (misshapen),
 * CLF_EWEIGHT_UNUSED (unexpected), CLF_EDTYPE, CLF_EFORMAT, CLF_EIO (also a
 * path that is not a regular file), CLF_EINVALID_ARGUMENT (heads unknown or
 * contradicting the metadata; a layout that cannot be detected), plus the
 * errors of clf_attention_create. */
CLF_EXTERN int clf_model_load(clf_model **out, clf_context *ctx,
                              const char *path, const clf_model_opts *opts);

CLF_EXTERN void clf_model_destroy(clf_model *m); /* NULL-safe */

/* The tensors a load with allow_unexpected skipped, in file order: their
 * number (0 for NULL), and the index-th one's name (owned by the model;
 * NULL when index is out of range). */
CLF_EXTERN size_t clf_model_unexpected_count(const clf_model *m);
CLF_EXTERN const char *clf_model_unexpected_name(const clf_model *m,
                                                 size_t index);

CLF_EXTERN int clf_model_info_get(const clf_model *m, clf_model_info *out);

/* Linformer (default) or full attention in every layer. */
CLF_EXTERN int clf_model_set_mode(clf_model *m, clf_mode mode);
/* The mode in force: the last set, else the file's (full for a
 * linformer-pytorch model saved with full_attention=True), else
 * Linformer. */
CLF_EXTERN int clf_model_get_mode(const clf_model *m, clf_mode *out);

/* Runs the model on batch*seq_len rows of d_model floats; y receives
 * batch*seq_len rows of d_model floats.  Not for LM layouts.  Padding
 * (opts) applies to every attention layer, and output rows at padding
 * positions are zeros.  Errors as clf_attention_forward_ex, plus
 * CLF_EINVALID_ARGUMENT for an LM. */
CLF_EXTERN int clf_model_forward(clf_model *m, const float *x, size_t batch,
                                 size_t seq_len, float *y,
                                 const clf_forward_opts *opts);

/* Runs an LM on batch*seq_len token ids; logits receives batch*seq_len rows
 * of vocab floats.  Errors as clf_model_forward, plus CLF_EBAD_SIZE for a
 * token id outside the vocabulary (naming its index) and
 * CLF_EINVALID_ARGUMENT for a model that is not an LM. */
CLF_EXTERN int clf_model_forward_tokens(clf_model *m, const long long *ids,
                                        size_t batch, size_t seq_len,
                                        float *logits,
                                        const clf_forward_opts *opts);

/* ------------------------------------------------------------- streams
 *
 * A stream runs a layer or a model in prefix-safe causal mode over
 * positions that arrive a few at a time: each append takes the next
 * `count` positions of every sequence of the batch and returns their
 * outputs, equal to what the whole-sequence causal forward
 * (clf_forward_opts.causal) gives at those positions, within float
 * rounding.
 *
 * Causal Linformer (the mode the layer or model is in when the stream is
 * made, with a causal_block b): a query at t in block m needs only the
 * slots of blocks 0..m-1 and the positions m*b..t, so the stream keeps
 * per layer the k slots (keys and values) and, for the whole model, the
 * input rows of the open block (at most b): its state does not grow with
 * the stream.  An append recomputes the open block's earlier positions
 * with the new ones (b + count positions at most) through every layer, so
 * its cost depends on b, count and k, not on how long the stream is; a
 * block's slots are kept once a position after it has arrived.  Full mode
 * (causal) keeps every position's projected keys and values per layer, a
 * cache that grows with the stream, for comparison.
 * The state is held in host memory and sent to the device at each append.
 * A stream ends at max_seq_len (reset it to start again).  Padding: a
 * key_mask of batch x count bytes per append (0 = padding: that position
 * is left out of every later position's attention and its output row is
 * zeros), as clf_forward_opts.key_mask over the whole sequence.
 * A stream is used by one thread at a time, and the layer or model it
 * runs on is not used by another thread during an append; it must
 * outlive the stream, and its mode must not change (an append then fails).
 * A failed append leaves the state as it was. */
typedef struct clf_stream clf_stream;

typedef struct clf_stream_info {
    size_t batch, position, max_seq_len;
    size_t block;          /* causal_block in Linformer mode; 0 in full */
    size_t width_in;       /* floats per input row; 0: token ids (an LM) */
    size_t width_out;      /* floats per output row (vocab for an LM) */
    size_t open_positions; /* kept input rows per sequence (recomputed by
                              the next append) */
    size_t state_bytes;    /* host memory of the state: every layer's kept
                              slots (full mode: keys and values as
                              allocated), the open block's rows, the
                              padding of batch x max_seq_len bytes */
} clf_stream_info;

/* A stream over a model (clf_stream_create) or one attention layer, for
 * `batch` sequences.  Errors: CLF_ENULL_ARGUMENT, CLF_EBAD_SIZE (batch 0),
 * CLF_EINVALID_ARGUMENT (Linformer mode without causal_block: plain
 * Linformer is not causal), CLF_EUNSUPPORTED (half-precision weights, a
 * compression other than linear, a layer's slot_mask), CLF_ENO_MEMORY,
 * CLF_ESIZE_OVERFLOW. */
CLF_EXTERN int clf_stream_create(clf_stream **out, clf_model *m, size_t batch);
CLF_EXTERN int clf_stream_create_attention(clf_stream **out, clf_attention *att,
                                           size_t batch);
CLF_EXTERN void clf_stream_destroy(clf_stream *s); /* NULL-safe */

/* Appends count positions to each of batch sequences: x holds batch x
 * count rows of d_model floats (sequence by sequence), y receives batch x
 * count output rows; key_mask (batch x count bytes) may be NULL.  Errors:
 * CLF_ENULL_ARGUMENT, CLF_EBAD_SIZE (count 0), CLF_EINVALID_ARGUMENT (a
 * batch other than the stream's; floats to an LM's stream or ids to
 * another; the mode changed), CLF_ESEQ_TOO_LONG (past max_seq_len), and
 * those of the forward. */
CLF_EXTERN int clf_stream_append(clf_stream *s, const float *x, size_t batch,
                                 size_t count, const unsigned char *key_mask,
                                 float *y);
/* The same for an LM: batch x count token ids in, batch x count rows of
 * vocab logits out. */
CLF_EXTERN int clf_stream_append_tokens(clf_stream *s, const long long *ids,
                                        size_t batch, size_t count,
                                        const unsigned char *key_mask,
                                        float *logits);
/* Back to position 0 (the state's memory is kept). */
CLF_EXTERN int clf_stream_reset(clf_stream *s);
CLF_EXTERN int clf_stream_info_get(const clf_stream *s, clf_stream_info *out);

/* ------------------------------------------ several devices: a group
 *
 * One forward over several devices, which may come from different
 * platforms.  A group holds one context per device; a model or layer on a
 * group holds one copy per device.  A forward is split one of two ways:
 *   - by positions (CLF_SHARD_SEQ): device r holds positions
 *     [p_r, p_{r+1}) of every sequence (any seq_len; in causal Linformer
 *     the cuts fall on causal blocks).  Linformer's compression is a sum
 *     over positions, so the devices exchange only their k x d partial
 *     compressions per layer (summed on the host in a fixed order, so the
 *     result does not depend on timing); causal Linformer exchanges each
 *     block's slots, full mode all projected keys and values.  Queries,
 *     layer norms, feed-forward blocks and residuals stay on their device.
 *   - by sequences (CLF_SHARD_BATCH): whole sequences per device, nothing
 *     exchanged.
 * CLF_SHARD_AUTO (the default) splits by sequences when the batch has at
 * least one sequence per device or the layers store half-precision
 * weights (which a split by positions refuses, CLF_EUNSUPPORTED), else by
 * positions.  Positions (or
 * sequences) are dealt in proportion to each device's throughput
 * (measured and stored, or given with clf_group_set_weights).  With
 * fewer positions (causal blocks) or sequences than devices, fewer devices
 * take part.  The output equals the single-device forward's within float
 * rounding (the sums run in another order).  Each forward runs one thread
 * per device; a group is used by one thread at a time.  When a device
 * fails, every device stops and the error names the failing one
 * ("shard 1: ...").
 */
typedef enum clf_shard_by {
    CLF_SHARD_AUTO = 0,
    CLF_SHARD_SEQ,  /* positions of every sequence */
    CLF_SHARD_BATCH /* whole sequences */
} clf_shard_by;

typedef struct clf_group clf_group;

/* Creates a group from a device list: "all" (every device, in index
 * order), or selectors (clf_context_create's rules: "pocl:0", "1", "cpu")
 * separated by commas; flags as clf_context_create_ex.  Errors: those of
 * clf_context_create (naming the selector), CLF_EINVALID_ARGUMENT (an
 * empty entry). */
CLF_EXTERN int clf_group_create(clf_group **out, const char *devices,
                                unsigned flags);
/* Destroy models and layers on the group first.  NULL-safe. */
CLF_EXTERN void clf_group_destroy(clf_group *g);
/* The number of devices (0 for NULL), and device i's context (NULL past
 * the end; owned by the group). */
CLF_EXTERN size_t clf_group_size(const clf_group *g);
CLF_EXTERN clf_context *clf_group_context(const clf_group *g, size_t i);
/* Forces the split (CLF_SHARD_SEQ or CLF_SHARD_BATCH) or lets the cost
 * model pick (CLF_SHARD_AUTO).  Errors: CLF_EBAD_ENUM. */
CLF_EXTERN int clf_group_set_strategy(clf_group *g, clf_shard_by by);
/* Relative throughput of each device (clf_group_size entries, each > 0),
 * which then deals the positions or sequences of every forward; NULL (the
 * default): a model's forward weights the split by each device's measured
 * throughput for the model and shape: timed once per device (one forward
 * of the whole input alone on it, after a warm-up), kept in the device's
 * kernel-choice store ("throughput" entries, see clf_kernel_choice) and
 * reused by later forwards and processes; a layer's forward
 * (clf_group_attention_forward_ex) splits evenly.  Errors:
 * CLF_EINVALID_ARGUMENT naming the entry. */
CLF_EXTERN int clf_group_set_weights(clf_group *g, const double *weights);
/* How the last forward was split, and over how many devices. */
CLF_EXTERN int clf_group_last_split(const clf_group *g, clf_shard_by *by,
                                    size_t *devices);

typedef struct clf_group_model clf_group_model;

/* Loads the model file onto every device of g (which must outlive it).
 * Errors as clf_model_load. */
CLF_EXTERN int clf_group_model_load(clf_group_model **out, clf_group *g,
                                    const char *path,
                                    const clf_model_opts *opts);
CLF_EXTERN void clf_group_model_destroy(clf_group_model *gm); /* NULL-safe */
/* Device i's copy (owned by the group model), NULL past the end. */
CLF_EXTERN clf_model *clf_group_model_part(const clf_group_model *gm, size_t i);
CLF_EXTERN int clf_group_model_set_mode(clf_group_model *gm, clf_mode mode);
/* clf_model_forward and clf_model_forward_tokens over the group: same
 * arguments, same results, same errors, plus CLF_ESHARD_ABORTED, and
 * CLF_EUNSUPPORTED for a split by positions of half-precision layers
 * (those split by sequences only). */
CLF_EXTERN int clf_group_model_forward(clf_group_model *gm, const float *x,
                                       size_t batch, size_t seq_len, float *y,
                                       const clf_forward_opts *opts);
CLF_EXTERN int clf_group_model_forward_tokens(clf_group_model *gm,
                                              const long long *ids,
                                              size_t batch, size_t seq_len,
                                              float *logits,
                                              const clf_forward_opts *opts);

typedef struct clf_group_attention clf_group_attention;

/* One attention layer on every device of g, with the same weights
 * (clf_attention_randomize(seed) on each copy; set others through
 * clf_group_attention_part).  Errors as clf_attention_create. */
CLF_EXTERN int clf_group_attention_create(clf_group_attention **out,
                                          clf_group *g,
                                          const clf_attention_desc *desc,
                                          unsigned long long seed);
CLF_EXTERN void clf_group_attention_destroy(clf_group_attention *ga);
CLF_EXTERN clf_attention *
clf_group_attention_part(const clf_group_attention *ga, size_t i);
CLF_EXTERN int clf_group_attention_set_mode(clf_group_attention *ga,
                                            clf_mode mode);
/* clf_attention_forward_ex over the group. */
CLF_EXTERN int clf_group_attention_forward_ex(clf_group_attention *ga,
                                              const float *x, size_t batch,
                                              size_t seq_len, float *y,
                                              const clf_forward_opts *opts);
/* clf_attention_check_lookahead over the group's forward. */
CLF_EXTERN int clf_group_attention_check_lookahead(
    clf_group_attention *ga, const float *x, size_t seq_len,
    const clf_forward_opts *opts, const size_t *positions, size_t npositions,
    unsigned long long seed, clf_lookahead_result *result);

/* ------------------------------------------------------------------ MPI */

/* Nonzero when the library was built with ./configure --with-mpi (Open
 * MPI), so that clf_model_forward_mpi works. */
CLF_EXTERN int clf_mpi_available(void);

/* One forward of clf_model_forward (x, not an LM) or
 * clf_model_forward_tokens (ids, an LM; pass NULL for the other) sharded
 * over the ranks of MPI_COMM_WORLD: sequence parallel, each rank computing
 * a contiguous range of every sequence's positions on its own model's
 * device, the ranks exchanging only the Linformer compressions (causal
 * Linformer: the blocks' slots; full mode: K and V) between layers.  The
 * caller has called MPI_Init.  Every rank calls it, collectively, with its
 * own model loaded from the same weights and the same batch, seq_len and
 * opts (lengths or key_mask over all positions, causal); x or ids and the
 * output y (batch*seq_len rows, as the single-device calls) are used on
 * rank 0 only, which scatters the input and gathers the output.  The split
 * is even, in whole causal blocks in causal Linformer mode, with no
 * divisibility constraint on seq_len; each rank needs at least one
 * position (one block).  The result equals the single-device forward
 * within float rounding.  Errors: CLF_EUNSUPPORTED (built without MPI, or
 * MPI not initialised), CLF_EBAD_SIZE (fewer positions or blocks than
 * ranks), CLF_EINVALID_ARGUMENT on a rank whose batch, seq_len, model
 * shape, mode, causal block, precision, causal flag or padding differs
 * from rank 0's (checked before the first collective; that rank then
 * ends every rank as below), those of the single-device calls; a rank
 * that fails in the
 * sharded part prints its error to stderr and ends every rank
 * (MPI_Abort), since MPI cannot release ranks waiting in a collective. */
CLF_EXTERN int clf_model_forward_mpi(clf_model *m, const float *x,
                                     const long long *ids, size_t batch,
                                     size_t seq_len, float *y,
                                     const clf_forward_opts *opts);

/* ------------------------------------------------------- files: .npy */

/* An n-dimensional array read from a NumPy .npy file.  Exactly one of data
 * (float32 files) and ids (int32, int64, uint8 or bool files, widened;
 * bools as 0 and 1) is non-NULL; both
 * are owned by the array: free with clf_array_free(). */
typedef struct clf_array {
    float *data;
    long long *ids;
    size_t ndim;
    size_t shape[8];
    size_t count; /* product of shape (1 for a 0-d array) */
} clf_array;

/* Reads a version 1, 2 or 3 .npy file holding little-endian '<f4', '<i4'
 * or '<i8', or '|u1' or '|b1', in C order.  Anything else is an error
 * naming the field: a bad magic or header (CLF_EFORMAT), another dtype or
 * Fortran order
 * (CLF_EDTYPE), a shape that overflows (CLF_ESIZE_OVERFLOW), a file shorter
 * or longer than its header says (CLF_EFORMAT), an unreadable file
 * (CLF_EIO).  On failure *out is left empty. */
CLF_EXTERN int clf_npy_load(const char *path, clf_array *out);

/* Writes a version 1 .npy file of little-endian float32 in C order,
 * atomically (a new temporary file beside path, opened with O_EXCL |
 * O_NOFOLLOW, synced, then renamed into place), so an existing file is
 * never left half written.  An existing path that is not a regular file
 * (a symlink, device, FIFO or directory) is refused with CLF_EIO.
 * Errors: CLF_ENULL_ARGUMENT, CLF_EBAD_SIZE (ndim 0 or > 8),
 * CLF_ESIZE_OVERFLOW, CLF_EIO. */
CLF_EXTERN int clf_npy_save(const char *path, const float *data,
                            const size_t *shape, size_t ndim);

/* Frees the array's data and empties it.  NULL-safe. */
CLF_EXTERN void clf_array_free(clf_array *a);

/* ------------------------------------------------ files: safetensors */

/* A safetensors file, as written by safetensors.torch.save_file: an 8-byte
 * little-endian header length, a JSON header naming each tensor's dtype,
 * shape and byte range, then the raw little-endian data. */
typedef struct clf_safetensors clf_safetensors;

typedef struct clf_tensor_info {
    const char *name;  /* owned by the file handle */
    const char *dtype; /* "F32", "F16", "BF16", ... (owned likewise) */
    size_t ndim;
    size_t shape[8];
    size_t count; /* elements */
} clf_tensor_info;

/* Opens and validates the whole file: header length against the file size,
 * well-formed UTF-8 JSON, each tensor's dtype and shape, shape products
 * against byte ranges, ranges inside the data area and not overlapping,
 * no duplicate names.  Tensors of dtypes other than F32, F16 and BF16 are
 * listed but cannot be read.  Errors name the tensor or field: CLF_EIO,
 * CLF_EFORMAT, CLF_ESIZE_OVERFLOW, CLF_ENO_MEMORY. */
CLF_EXTERN int clf_safetensors_open(clf_safetensors **out, const char *path);

/* The same from memory (the bytes are copied). */
CLF_EXTERN int clf_safetensors_open_memory(clf_safetensors **out,
                                           const void *bytes, size_t size);

CLF_EXTERN void clf_safetensors_close(clf_safetensors *st); /* NULL-safe */

/* Number of tensors, and the index-th one's description (file order). */
CLF_EXTERN size_t clf_safetensors_count(const clf_safetensors *st);
CLF_EXTERN int clf_safetensors_info(const clf_safetensors *st, size_t index,
                                    clf_tensor_info *out);

/* Looks a tensor up by name.  Errors: CLF_ENOT_FOUND (naming it). */
CLF_EXTERN int clf_safetensors_find(const clf_safetensors *st, const char *name,
                                    clf_tensor_info *out);

/* Copies a tensor into dst as float32, converting F16 and BF16.  count must
 * equal the tensor's element count.  Errors: CLF_ENOT_FOUND,
 * CLF_ESHAPE_MISMATCH (count), CLF_EDTYPE (naming tensor and dtype). */
CLF_EXTERN int clf_safetensors_read_f32(const clf_safetensors *st,
                                        const char *name, float *dst,
                                        size_t count);

/* A string from the header's __metadata__ map, or NULL when absent. */
CLF_EXTERN const char *clf_safetensors_metadata(const clf_safetensors *st,
                                                const char *key);

#ifdef __cplusplus
}
#endif

#endif /* CLINFORMER_H */
