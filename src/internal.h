/* Private declarations shared by the library's source files. */
#ifndef CLINFORMER_INTERNAL_H
#define CLINFORMER_INTERNAL_H

#include "clinformer.h"
#include "kernel_params.h"
#include "kernels.h"

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
    CLF_KIND_HALFGEMM,    /* half-weight GEMMs: widen or native (fp16.h) */
    CLF_KIND_COUNT
};
#define CLF_BUCKET_MAX 48
#define CLF_FP16_LIVE 8
#define CLF_MAX_CANDIDATES 4

/* A winner for one kind and shape bucket. */
struct clf__choice_entry {
    int kind, winner;
    char bucket[CLF_BUCKET_MAX];
    clf_choice_source source;
    double ms[CLF_MAX_CANDIDATES];
    long long used; /* recency: higher = used later (see choose.c) */
};

/* The sizes of the tiled GEMM kernel (cl/gemm_tiled.cl), its -D options:
 * MWG x NWG of C per work-group, KWG per local-memory slice, a work-group
 * of NDIM x MDIM, vectors of VW columns. */
enum {
    CLF_TILED_P_MWG,
    CLF_TILED_P_NWG,
    CLF_TILED_P_KWG,
    CLF_TILED_P_MDIM,
    CLF_TILED_P_NDIM,
    CLF_TILED_P_VW,
    CLF_TILED_NPARAM
};
struct clf__tiled_cfg {
    size_t v[CLF_TILED_NPARAM];
};

struct clf__launch_log; /* launches.c */

struct clf_context {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    clf_device_info info;
    cl_program program;
    cl_kernel kernels[CLF_K_COUNT];
    size_t kernel_wg[CLF_K_COUNT];       /* CL_KERNEL_WORK_GROUP_SIZE */
    size_t kernel_multiple[CLF_K_COUNT]; /* preferred multiple */
    char *build_log;
    clf_context_stats stats;
    int profiling;        /* the queue has CL_QUEUE_PROFILING_ENABLE */
    char tuned[512];      /* the stored GEMM tuning applied, or "" */
    int softmax_variant;  /* enum clf__softmax_variant outside a plan;
                             0 (scalar) as the context is made */
    int attend_variant;   /* enum clf__attend_variant pinned (tuning,
                             tests), else UNDECIDED: the plan's choice */
    int flash_blocks;     /* row blocks per work-item of the streaming
                             kernel pinned (tests), else 0: by key count */
    int gemm_variant;     /* enum clf__gemm_variant pinned (tuning, tests),
                             else UNDECIDED: clf__gemm_use */
    cl_mem scratch;       /* transposed GEMM operands */
    size_t scratch_cap;   /* floats */
    size_t blocked_calls; /* GEMMs run by the blocked kernel (tests) */
    size_t tiled_calls;   /* GEMMs run by the tiled kernel (tests) */
    struct clf__tiled_cfg tiled; /* the tiled kernel's sizes in use */
    cl_program tiled_program;    /* built for sizes other than the
                                    defaults, else NULL (the main
                                    program's kernel runs) */
    cl_kernel tiled_kernel;      /* of tiled_program */
    cl_mem tiled_partial;        /* slices of a split over K (tiled.c) */
    size_t tiled_partial_cap;    /* floats */
    size_t tiled_split;          /* tests: slices forced (0: by the device) */
    size_t gemm_calls;           /* GEMM calls of either way (tests) */
    int gemm_cols64;             /* blocked GEMM: 64-column blocks where the
                                    device prefers 16-float vectors, else 16 */
    /* Kernel choices (choose.c), all under lock. */
    pthread_mutex_t lock;                  /* recursive; see clf__lock */
    int has_lock;                          /* lock was initialised */
    int forced[CLF_KIND_COUNT];            /* clf_context_force_kernel, or -1 */
    struct clf__launch_log *launch_log;    /* NULL until recording starts */
    struct clf__choice_entry *choice_list; /* stored and timed winners */
    size_t nchoices, choice_cap;
    long long choice_clock;   /* last recency stamp given to a use */
    long long choice_floor;   /* last (lowest) stamp given to a read entry */
    int choices_loaded;       /* the device's store has been read */
    uint64_t choice_key;      /* hash of the store's key when it was read */
    int last[CLF_KIND_COUNT]; /* the last winner resolved, or -1 */
    clf_choice_source last_source[CLF_KIND_COUNT];
    char last_bucket[CLF_KIND_COUNT][CLF_BUCKET_MAX];
    /* Why the last winner was the only way (clf__choice_fixed), or NULL
     * when it was resolved from a forced name, the store or a timing. */
    const char *last_why[CLF_KIND_COUNT];
    double last_ms[CLF_KIND_COUNT][CLF_MAX_CANDIDATES];
    char choices[1024];  /* clf_context_kernel_choices */
    char warnings[5376]; /* clf_context_warnings: a path and a whole line */
    /* half.c: float32 copies of half-stored weights, widened just before
     * the GEMM that reads them (slot 0: W matrices, 1: E and F), shared by
     * every layer of the context, under the lock. */
    cl_mem half_slot[2];
    size_t half_cap[2]; /* floats */
    cl_mem half_src[2]; /* the weight a slot holds in this forward, or NULL */
    /* fp16.c: native half arithmetic, under the lock. */
    int fp16_state;          /* 0 not checked yet, 1 offered, -1 not */
    char fp16_why[256];      /* why it is not offered */
    cl_program fp16_program; /* cl/gemm_fp16.cl, where offered */
    cl_kernel fp16_nt, fp16_nn, fp16_sanity;
    int fp16_decided; /* this forward resolved its way */
    int fp16_native;  /* this forward reads half weights natively */
    cl_mem fp16_live[CLF_FP16_LIVE]; /* the binary16 weights it reads */
    size_t fp16_nlive;
    size_t fp16_calls; /* native half GEMMs enqueued (tests) */
};

/* Who runs the GEMMs: undecided until the first one. */
enum clf__gemm_variant {
    CLF_GEMM_UNDECIDED = 0,
    CLF_GEMM_CLBLAST,
    CLF_GEMM_BLOCKED, /* the register-blocked kernel, where the shape fits */
    CLF_GEMM_TILED    /* the work-group tiled kernel (tiled.c) */
};

/* How Linformer attention over the compressed slots runs (steps 3 to 5):
 * undecided until the first forward that could use the fused kernel. */
enum clf__attend_variant {
    CLF_ATTEND_UNDECIDED = 0,
    CLF_ATTEND_GEMM,   /* batched GEMM, row softmax, batched GEMM */
    CLF_ATTEND_FUSED,  /* the fused attention kernel */
    CLF_ATTEND_FLASH,  /* the streaming attention kernel (flash.c), any mode */
    CLF_ATTEND_FLASHWG /* the GPU-shaped streaming kernel (flash_wg.c), every
                          mode, d_h <= CLF_FLASHWG_DH */
};

enum clf__softmax_variant {
    CLF_SOFTMAX_SCALAR = 0, /* one row per work-item */
    CLF_SOFTMAX_VECTOR,     /* one row per work-item, float8 */
    CLF_SOFTMAX_GROUP,      /* one work-group per row */
    CLF_SOFTMAX_VARIANTS
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

/* The tune file of a device in the cache directory, or "" (no directory,
 * or a path longer than cap). */
void clf__tune_path(const clf_device_info *info, char *buf, size_t cap);
/* A tune file's contents.  clf__tune_parse reads len bytes of buf (not
 * NUL-terminated) as if hostile: 0 with tf filled, or -1 with the line and
 * field at fault in why; the best Xgemm parameters are checked against
 * CLBlast's constraints and lim (clf__tune_check_xgemm). */
#define CLF_TUNE_NPARAM 16
#define CLF_TUNE_MAX_TRIED 256
#define CLF_TUNE_MAX_TILED 32
struct clf__tune_limits {
    size_t max_wg, max_item[2];
    unsigned long long local_mem;
};
struct clf__tune_file {
    int have_best;
    size_t best[CLF_TUNE_NPARAM];
    size_t min_indirect; /* 0: none stored */
    double baseline_ms;  /* 0: none stored */
    double compile_ms;   /* the last kernel build measured; 0: none */
    size_t ntried;
    size_t tried[CLF_TUNE_MAX_TRIED][CLF_TUNE_NPARAM];
    double tried_ms[CLF_TUNE_MAX_TRIED];
    /* The tiled GEMM's sizes (tiled.c): the best, checked against the
     * kernel's rules and the device, and those measured. */
    int have_tiled;
    struct clf__tiled_cfg tiled;
    size_t ntiled_tried;
    struct clf__tiled_cfg tiled_tried[CLF_TUNE_MAX_TILED];
    double tiled_tried_ms[CLF_TUNE_MAX_TILED];
};
int clf__tune_parse(const char *buf, size_t len,
                    const struct clf__tune_limits *lim,
                    struct clf__tune_file *tf, char *why, size_t cap);
int clf__tune_check_xgemm(const size_t *v, const struct clf__tune_limits *lim,
                          char *why, size_t cap);
/* tune.c: the limits of ctx's device that sizes are checked against; a
 * failed query leaves max_wg 0, which no size fits. */
void clf__tune_device_limits(const clf_context *ctx,
                             struct clf__tune_limits *lim);

/* choose.c: timing kernels that compute the same thing.  A buffer of
 * `floats` values of order one (NULL and *rc set on failure); and
 * run(ctx, v, user) for v = 0..count-1 in turns, one round to warm up then
 * reps rounds, each run followed by clFinish, the best time in ms[v] (-1
 * when it failed).  Returns the fastest v, or the last failure's status
 * when every variant failed. */
typedef int (*clf__variant_fn)(clf_context *ctx, int variant, void *user);
/* Seconds on a monotonic clock. */
double clf__now_s(void);
/* The winner of `kind` for a shape bucket ([a-z0-9.], under
 * CLF_BUCKET_MAX): forced (clf_context_force_kernel, CLINFORMER_KERNELS)
 * or stored: sets *winner and returns 1; not known: 0, the caller times
 * the candidates and calls clf__choice_record, which stores the winner.
 * CLF_EINVALID_ARGUMENT for a bad CLINFORMER_KERNELS.  Call with ctx
 * locked. */
int clf__choice_lookup(clf_context *ctx, int kind, const char *bucket,
                       int *winner);
void clf__choice_record(clf_context *ctx, int kind, const char *bucket,
                        int winner, const double *ms);
/* Notes that a forward ran `winner` because it has no other way (why: a
 * static phrase), so that clf_context_kernel_choices says what ran instead
 * of "not chosen yet".  Call with ctx locked. */
void clf__choice_fixed(clf_context *ctx, int kind, int winner, const char *why);
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
void clf__lock(clf_context *ctx);
void clf__unlock(clf_context *ctx);
cl_mem clf__timing_buffer(clf_context *ctx, size_t floats, unsigned seed,
                          int *rc);
int clf__time_variants(clf_context *ctx, int count, clf__variant_fn run,
                       void *user, int reps, double *ms);

/* Enqueue one kernel over a 1-D range of `items` work-items, rounding the
 * global size up to the work-group size (kernels guard their tail). */
int clf__launch_1d(clf_context *ctx, enum clf__kernel_id id, size_t items);

/* gemm.c: enqueue kernel id over the 3-D range g; grouped: work-groups of
 * twice the preferred multiple along dimension 0, g[0] padded up to it
 * (the kernel must skip the extra items), else the runtime's choice. */
int clf__enqueue3(clf_context *ctx, enum clf__kernel_id id, size_t g[3],
                  int grouped, const char *what);

/* projection.c: host side of the projection kernels */
int clf__add_bias(clf_context *ctx, cl_mem y, size_t off, size_t rows,
                  size_t cols, size_t ld, cl_mem bias);
int clf__rowsum(clf_context *ctx, cl_mem e, size_t rows, size_t n, size_t ld,
                cl_mem out);
/* rowsum NULL: add the bias once per slot (rowsum taken as 1). */
int clf__add_rowsum_bias(clf_context *ctx, cl_mem kbar, size_t batch,
                         size_t slots, size_t heads, size_t head_dim,
                         cl_mem rowsum, size_t rowsum_batch_stride,
                         int rowsum_per_head, cl_mem bias, int bias_per_head);

/* Returns from the caller with the status of expr when it fails. */
#define CLF_TRY(expr)                                                          \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != 0)                                                          \
            return rc_;                                                        \
    } while (0)

/* splitmix64: a small, portable generator for reproducible random data. */
unsigned long long clf__splitmix64(unsigned long long *state);

/* Sets kernel argument i from a variable; returns from the caller on
 * failure. */
#define CLF_SET_ARG(kernel, i, var)                                            \
    do {                                                                       \
        cl_int e_ = clSetKernelArg((kernel), (i), sizeof(var), &(var));        \
        if (e_ != CL_SUCCESS)                                                  \
            return clf__fail(e_, "clSetKernelArg %d failed (%d)", (i), e_);    \
    } while (0)

/* mask.c: host side of the mask kernels; mask is a batch x n byte buffer. */
/* The host mask (batch x n bytes, 1 = a real position) from lengths (each
 * 1..n; CLF_EBAD_SIZE naming the entry otherwise) or, when lengths is
 * NULL, from key_mask (nonzero = real). */
int clf__mask_build(unsigned char *mask, size_t batch, size_t n,
                    const unsigned *lengths, const unsigned char *key_mask);
int clf__mask_rows(clf_context *ctx, cl_mem src, size_t src_off, cl_mem dst,
                   size_t dst_off, size_t rows, size_t cols, cl_mem mask);
int clf__masked_rowsum(clf_context *ctx, cl_mem e, size_t rows, size_t n,
                       size_t ld, size_t batch, cl_mem mask, cl_mem out);
int clf__mask_scores(clf_context *ctx, cl_mem s, size_t batch, size_t heads,
                     size_t rows, size_t n, size_t row0, cl_mem mask,
                     size_t mask_off, int causal);

/* encoder.c: host side of the encoder kernels. */
int clf__layernorm(clf_context *ctx, cl_mem x, size_t x_off, cl_mem y,
                   size_t y_off, size_t rows, size_t cols, cl_mem gamma,
                   cl_mem beta, float eps);
int clf__gelu(clf_context *ctx, cl_mem y, size_t off, size_t count);
int clf__residual_add(clf_context *ctx, cl_mem y, size_t y_off, cl_mem x,
                      size_t x_off, size_t count);
int clf__embed(clf_context *ctx, cl_mem ids, size_t rows, size_t n, size_t dim,
               cl_mem tokens, cl_mem positions, cl_mem out);

/* model.c: a sharded forward's attention replaces each layer's (in and out
 * hold the shard's rows), and the rows start at position pos_offset;
 * fn NULL restores the plain forward. */
typedef int (*clf__model_attend_fn)(void *user, clf_attention *att, cl_mem in,
                                    cl_mem out);
void clf__model_shard_hook(clf_model *m, clf__model_attend_fn fn, void *user,
                           size_t pos_offset);
/* Layer l's attention, NULL past the last. */
clf_attention *clf__model_layer(const clf_model *m, size_t l);

/* lookahead.c: the audit over any forward of one sequence of D-wide rows
 * (a layer's, or a group's). */
typedef int (*clf__lookahead_fn)(void *user, const float *x, size_t seq_len,
                                 float *y, const clf_forward_opts *opts);
int clf__lookahead_run(clf__lookahead_fn forward, void *user, size_t D,
                       const float *x, size_t seq_len,
                       const clf_forward_opts *opts, const size_t *positions,
                       size_t npositions, unsigned long long seed,
                       clf_lookahead_result *result);

/* causal.c: host side of the causal kernels. */
struct clf__causal_shape {
    size_t batch, heads, n, dh, dq, dkv, k, c, block;
    size_t block0; /* a shard's first block (its t counts from there) */
    int kv_per_head;
    float scale;
};
int clf__causal_scores(clf_context *ctx, const struct clf__causal_shape *sh,
                       cl_mem s, cl_mem q, cl_mem kp, cl_mem mask);
int clf__causal_apply(clf_context *ctx, const struct clf__causal_shape *sh,
                      cl_mem o, cl_mem s, cl_mem vp);

/* attend.c: host side of the fused attention kernel: Linformer attention
 * over L slots in one kernel for `batch` sequences of n queries: kbar and
 * vbar hold L rows of (kv_per_head ? heads : 1) * dh floats per sequence,
 * q and o rows of dq floats.  kt needs batch * (kv_per_head ? heads : 1) * dh *
 * clf__attend_slots(L) floats, s batch * heads * clf__attend_rows(n) *
 * clf__attend_slots(L).  dh must be a multiple of 16. */
struct clf__attend_shape {
    size_t batch, heads, n, dh, dq, L;
    int kv_per_head;
    float scale;
};
size_t clf__attend_slots(size_t L);
size_t clf__attend_rows(size_t n);
int clf__attend(clf_context *ctx, const struct clf__attend_shape *sh, cl_mem q,
                cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem s, cl_mem o);
/* The GEMM path of the same steps, for `seqs` sequences from b, query
 * rows r0 to r0 + rows of each (seqs > 1: all rows): S = Q_h Kbar_h^T *
 * scale into s at s_off (sequence j, head h at s_off + (j * heads + h) *
 * rows * ld, rows of stride ld), and O_h = P_h Vbar_h. */
int clf__attend_scores(clf_context *ctx, const struct clf__attend_shape *sh,
                       size_t b, size_t seqs, size_t r0, size_t rows, cl_mem q,
                       cl_mem kbar, cl_mem s, size_t s_off, size_t ld);
int clf__attend_weigh(clf_context *ctx, const struct clf__attend_shape *sh,
                      size_t b, size_t seqs, size_t r0, size_t rows, cl_mem s,
                      size_t s_off, size_t ld, cl_mem vbar, cl_mem o);

/* flash.c: streaming (online-softmax) attention in one kernel, every
 * mode.  at: as for clf__attend, L the slots (Linformer) or n (full mode);
 * causal: full mode masks keys after the query; block > 0: prefix-safe
 * causal Linformer, c slots per block, the exact window read from pk and
 * pv (n rows of dkv floats per sequence, head column h * dh when
 * window_per_head).  mask: batch x n bytes or NULL (full mode: padding
 * keys; causal Linformer: padding in the window).  kt needs
 * clf__flash_kt_floats(sh) floats (the keys and the values repacked tile
 * by tile); no score buffer. */
struct clf__flash_shape {
    struct clf__attend_shape at;
    int full; /* full mode: L = n keys */
    int causal;
    size_t c, block, dkv;
    int window_per_head;
};
size_t clf__flash_kt_floats(const struct clf__flash_shape *sh);
/* Blocks of CLF_FLASH_ROWS query rows each work-item of the streaming
 * kernel takes for L keys or slots: CLF_FLASH_BLOCKS from
 * CLF_FLASH_LONG_KEYS keys on, half as many below (ctx->flash_blocks,
 * when set, instead). */
#define CLF_FLASH_LONG_KEYS 8192
size_t clf__flash_blocks(const clf_context *ctx, size_t L);
int clf__flash(clf_context *ctx, const struct clf__flash_shape *sh, cl_mem q,
               cl_mem kbar, cl_mem vbar, cl_mem kt, cl_mem o, cl_mem mask,
               cl_mem pk, cl_mem pv);
/* The way (enum clf__attend_variant) for steps 3 to 5 of this shape in any
 * mode: pinned, forced, stored, or timed now among the ways that apply
 * (fused only where fusable, flashwg only where clf__flash_wg_applies)
 * and stored; bucketed by mode, powers of two
 * of n and L, heads and dh exact.  A forced way that does not apply falls
 * back to the GEMM path. */
int clf__flash_resolve(clf_context *ctx, const struct clf__flash_shape *sh,
                       int fusable, int softmax, int *variant);

/* flash_wg.c: the same steps in the GPU-shaped streaming kernel, work-groups
 * of CLF_FLASHWG_ROWS rows of one head and sequence, reading kbar and vbar
 * (batch x L rows of hc dh floats) directly: no workspace.  Arguments as
 * clf__flash.  It applies (1, else 0) where d_h <= CLF_FLASHWG_DH and the
 * device and compiled kernel take its work-groups and local memory;
 * clf__flash_wg fails with CLF_EINVALID_ARGUMENT where it does not. */
int clf__flash_wg_applies(const clf_context *ctx,
                          const struct clf__flash_shape *sh);
/* The work-groups one launch has: ceil(n / rows) x heads x batch. */
size_t clf__flash_wg_groups(const struct clf__flash_shape *sh);
int clf__flash_wg(clf_context *ctx, const struct clf__flash_shape *sh, cl_mem q,
                  cl_mem kbar, cl_mem vbar, cl_mem o, cl_mem mask, cl_mem pk,
                  cl_mem pv);

/* softmax.c: host side of the softmax kernels; rows of `cols` contiguous floats
 * starting at element `off`. */
int clf__softmax_rows(clf_context *ctx, cl_mem s, size_t off, size_t rows,
                      size_t cols);
int clf__softmax_rows_variant(clf_context *ctx, int variant, cl_mem s,
                              size_t off, size_t rows, size_t cols);
/* The variant for rows x cols scores: forced, stored, or timed now on that
 * shape and stored (choose.c); bucketed by powers of two of rows and cols. */
int clf__softmax_resolve(clf_context *ctx, size_t rows, size_t cols,
                         int *variant);

/* gemm.c: row-major GEMMs on the context's queue, C = alpha op(A) op(B) +
 * beta C, batched with element strides: the blocked kernel where the
 * context chose it and the shape fits it, else CLBlast (batch 1 uses
 * Sgemm). */
int clf__gemm(clf_context *ctx, int trans_a, int trans_b, size_t m, size_t n,
              size_t k, float alpha, cl_mem a, size_t a_off, size_t lda,
              cl_mem b, size_t b_off, size_t ldb, float beta, cl_mem c,
              size_t c_off, size_t ldc);
/* C = act(A op(B) (+ C when accumulate) + bias), one matrix, bias one per
 * column (NULL for none), act the exact GELU when gelu, else none: all in
 * the blocked kernel's last step, else separate passes after CLBlast. */
int clf__gemm_ex(clf_context *ctx, int trans_b, size_t m, size_t n, size_t k,
                 cl_mem a, size_t a_off, size_t lda, cl_mem b, size_t b_off,
                 size_t ldb, int accumulate, cl_mem c, size_t c_off, size_t ldc,
                 cl_mem bias, int gelu);
/* clf__gemm_ex without accumulation or activation. */
int clf__gemm_bias(clf_context *ctx, int trans_b, size_t m, size_t n, size_t k,
                   cl_mem a, size_t a_off, size_t lda, cl_mem b, size_t b_off,
                   size_t ldb, cl_mem c, size_t c_off, size_t ldc, cl_mem bias);
int clf__gemm_batched(clf_context *ctx, int trans_a, int trans_b, size_t m,
                      size_t n, size_t k, float alpha, cl_mem a, size_t a_off,
                      size_t lda, size_t a_stride, cl_mem b, size_t b_off,
                      size_t ldb, size_t b_stride, float beta, cl_mem c,
                      size_t c_off, size_t ldc, size_t c_stride, size_t batch);

/* clf__gemm_batched over `count` groups of `batch` entries, group o's
 * operands o * a (b, c) elements after group 0's: min(count, batch)
 * strided-batched calls, each over the larger of the two, so that the
 * launches of many short sequences do not grow with their number. */
struct clf__gemm_group {
    size_t count, a, b, c;
};
int clf__gemm_grouped(clf_context *ctx, int trans_a, int trans_b, size_t m,
                      size_t n, size_t k, float alpha, cl_mem a, size_t a_off,
                      size_t lda, size_t a_stride, cl_mem b, size_t b_off,
                      size_t ldb, size_t b_stride, float beta, cl_mem c,
                      size_t c_off, size_t ldc, size_t c_stride, size_t batch,
                      const struct clf__gemm_group *g);

/* gemm.c: the register-blocked GEMM kernel, C = alpha A B (+ C when
 * accumulate), A and B not transposed, n a multiple of 16, strides in
 * elements. */
int clf__gemm_nn(clf_context *ctx, size_t m, size_t n, size_t k, float alpha,
                 cl_mem a, size_t a_off, size_t lda, size_t a_stride, cl_mem b,
                 size_t b_off, size_t ldb, size_t b_stride, int accumulate,
                 cl_mem c, size_t c_off, size_t ldc, size_t c_stride,
                 size_t batch, cl_mem bias, int gelu);
/* dst (packed, batch x cols x rows) = the transposes of batch row-major
 * rows x cols matrices at off + t * stride with leading dimension ld. */
int clf__transpose(clf_context *ctx, cl_mem src, size_t off, size_t rows,
                   size_t cols, size_t ld, size_t stride, size_t batch,
                   cl_mem dst);
/* The GEMM way (enum clf__gemm_variant) for a layer whose projections are
 * m x n x k: pinned, forced, stored, or timed now on that projection and
 * stored (choose.c); bucketed by powers of two of m, n and k.  Plans call
 * it and hand the way to clf__gemm_use. */
int clf__gemm_resolve(clf_context *ctx, size_t m, size_t n, size_t k,
                      int *variant);
/* The GEMM way of the calling thread's GEMMs from now on (a forward sets
 * its plan's; the feed-forward GEMMs of a model layer that follow take the
 * same), unless the context pins one.  Per thread, so that what runs in
 * another thread never changes a forward's kernels. */
void clf__gemm_use(int variant);

/* program.c: a program of the registry's files marked in files (indexed
 * as clf__kernel_files), built with `options` in place of the usual ones
 * and cached on disk the same way (the options are part of the key). */
int clf__program_build_part(clf_context *ctx, const unsigned char *files,
                            const char *options, cl_program *out);

/* tiled.c: the tiled GEMM kernel.  Sizes: the defaults of kernel_params.h,
 * the checks of a set against the kernel's rules and a device's limits
 * (CLF_TUNE_* limits below; -1 with the reason in why), the small space
 * clinformer tune searches (the valid ones, at most cap; the defaults
 * first), their text "MWG=64 NWG=64 ..." and its names. */
void clf__tiled_default(struct clf__tiled_cfg *cfg);
int clf__tiled_check(const struct clf__tiled_cfg *cfg,
                     const struct clf__tune_limits *lim, char *why, size_t cap);
size_t clf__tiled_space(struct clf__tiled_cfg *out, size_t cap,
                        const struct clf__tune_limits *lim);
void clf__tiled_format(const struct clf__tiled_cfg *cfg, char *buf, size_t cap);
extern const char *const clf__tiled_names[CLF_TILED_NPARAM];
/* Makes cfg the context's tiled sizes: the main program's kernel for the
 * defaults, else a program built (or loaded from the cache) for them.
 * Checked against the device first; the context keeps its sizes on
 * failure.  Takes the context lock. */
int clf__tiled_set(clf_context *ctx, const struct clf__tiled_cfg *cfg);
void clf__tiled_release(clf_context *ctx);
/* Whether the tiled kernel takes the shape (32-bit sizes). */
int clf__tiled_fits(size_t m, size_t n, size_t k, size_t lda, size_t ldb,
                    size_t ldc);
/* The tiled GEMM: C = act(alpha op(A) op(B) + beta C + bias), batched with
 * element strides, bias one per column or NULL; call with ctx locked. */
struct clf__tiled_args {
    int trans_a, trans_b;
    size_t m, n, k;
    float alpha, beta;
    cl_mem a, b, c, bias;
    size_t a_off, lda, a_stride, b_off, ldb, b_stride, c_off, ldc, c_stride;
    size_t batch;
    int gelu;
};
int clf__tiled_gemm(clf_context *ctx, const struct clf__tiled_args *g);
/* The slices a tiled GEMM of that shape is split into over K (1: none). */
size_t clf__tiled_split(const clf_context *ctx, size_t m, size_t n, size_t k,
                        size_t batch, size_t *kchunk);

/* attention.c, for tests: the order a Linformer forward of this shape uses. */
int clf__attention_compress_first(const clf_attention *att, size_t batch,
                                  size_t seq_len);

void clf__attention_desc(const clf_attention *att, clf_attention_desc *out);
void clf__attention_set_score_limit(clf_attention *att, size_t bytes);
void clf__attention_set_attend(clf_attention *att, int variant);
int clf__attention_last_fused(const clf_attention *att);
/* The last forward used the streaming (flash) kernel. */
int clf__attention_last_flash(const clf_attention *att);
/* ... the GPU-shaped streaming kernel (flash_wg.c). */
int clf__attention_last_flash_wg(const clf_attention *att);
/* clf_attention_forward_cl_ex with the padding mask the options describe
 * already on the device (batch x n bytes), so a stack of layers uploads it
 * once; NULL uploads it from the options. */
int clf__attention_forward_cl_mask(clf_attention *att, cl_mem x,
                                   size_t x_offset, cl_mem y, size_t y_offset,
                                   size_t batch, size_t seq_len,
                                   const clf_forward_opts *opts,
                                   cl_mem dev_mask);

/* The embedded kernel sources, clf__cl_<stem> for each FILE(stem) of the
 * registry (generated from cl/ at build time). */
#define CLF_KERNEL_SOURCE_DECL(stem) extern const char clf__cl_##stem[];
CLF_KERNEL_REGISTRY(CLF_KERNEL_SOURCE_DECL, CLF_REGISTRY_SKIP_KERNEL)
#undef CLF_KERNEL_SOURCE_DECL

/* program.c: the kernel files in build order (CLINFORMER_KERNEL_DIR holds
 * files of these names) and their embedded texts. */
#define CLF_KERNEL_FILE_COUNT(stem) +1
enum {
    CLF_KERNEL_FILES =
        0 CLF_KERNEL_REGISTRY(CLF_KERNEL_FILE_COUNT, CLF_REGISTRY_SKIP_KERNEL)
};
#undef CLF_KERNEL_FILE_COUNT
extern const char *const clf__kernel_files[CLF_KERNEL_FILES];
extern const char *const clf__kernel_sources[CLF_KERNEL_FILES];

/* weights.c: the checks clf_attention_create makes of a desc (sizes,
 * sharing, head width, share_kv against bias_v, the causal block against
 * k, 32-bit dimensions); *dh receives d_h. */
int clf__desc_check(const clf_attention_desc *d, size_t *dh);

/* flops.c: the multiply-adds of one side (K or V) of Linformer's
 * compression per sequence, compressing first (E X, then the projection
 * on k rows; *cf) and projecting first (X W^T on n rows, then E; *pf),
 * for nE distinct E, hc compressed heads of width dh, dkv = K/V width.
 * The forward compresses first when *cf <= *pf, and the FLOP count
 * follows the same order. */
void clf__kv_macs(double nE, double k, double n, double D, double dkv,
                  double hc, double dh, double *cf, double *pf);

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

#endif /* CLINFORMER_INTERNAL_H */
