/* The GEMM floor (src/gemm): the dispatcher over CLBlast, the blocked
 * kernel (gemm.c, cl/gemm.cl; its arguments in gemm_args.c), the work-group
 * tiled kernel (gemm_tiled.c, cl/gemm_tiled.cl) and the native half GEMMs
 * (half_gemm.c, cl/half_gemm.cl).  It offers the floors above matrix products
 * on the context's queue and calls only the runtime. */
#ifndef CLF_GEMM_H
#define CLF_GEMM_H

#include "runtime/runtime.h"

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

/* The tiled kernel's state in a context (clf__tiled_state): its sizes,
 * the program built for sizes other than the defaults (else NULL: the main
 * program's kernel runs), the partial sums of a split over K, the slices
 * forced by tests (0: by the device) and the GEMMs it ran (tests). */
struct clf__tiled_state {
    struct clf__tiled_cfg cfg;
    cl_program program;
    cl_kernel kernel;
    cl_mem partial;
    size_t partial_cap; /* floats */
    size_t split;
    size_t calls;
    int usable; /* clf__tiled_usable's answer; -1 until asked */
};
/* ctx's, made with the default sizes on first use; NULL when memory runs
 * out (an error is set). */
struct clf__tiled_state *clf__tiled_state(clf_context *ctx);
/* Whether the tiled kernel of ctx's current sizes can run on its device
 * (ctx locked): its NDIM x MDIM work-group within the kernel's
 * CL_KERNEL_WORK_GROUP_SIZE and its local tiles within the device's local
 * memory, both as CLINFORMER_LIMITS may lower them.  Where it cannot, the
 * way is not offered (not timed; forced, the GEMM falls back), rather than
 * failing at the launch. */
int clf__tiled_usable(clf_context *ctx);

/* Who runs a GEMM. */
enum clf__gemm_variant {
    CLF_GEMM_UNDECIDED = 0, /* no choice: the pinned way, else CLBlast */
    CLF_GEMM_CLBLAST,
    CLF_GEMM_BLOCKED, /* the register-blocked kernel, where the shape fits */
    CLF_GEMM_TILED,   /* the work-group tiled kernel (gemm_tiled.c) */
    CLF_GEMM_SPLIT    /* the blocked kernel over slices of K at once, the
                         slices summed in order (a K over one slice) */
};

/* The way of one GEMM, the first argument of every entry point below
 * after the context: an enum clf__gemm_variant, or'ed with
 * CLF_GEMM_HALF_A (CLF_GEMM_HALF_B) where operand A (B) is a binary16
 * weight that the native half kernels read (half_gemm.c).  The caller
 * takes it from its plan, which resolved one per role; nothing else
 * decides a GEMM's kernel, but a way the context pins (clf__gemm_pin:
 * the tuner, tests) overrides the variant.  A variant whose kernel does
 * not take the shape falls back to CLBlast. */
#define CLF_GEMM_HALF_A 0x100
#define CLF_GEMM_HALF_B 0x200
#define CLF_GEMM_VARIANT(way) ((way)&0xff)

/* The way every GEMM of ctx runs, pinned by the tuner or a test (an enum
 * clf__gemm_variant), or CLF_GEMM_UNDECIDED: each GEMM's own way.  Pinning
 * returns 0 or CLF_ENO_MEMORY. */
int clf__gemm_pinned(const clf_context *ctx);
int clf__gemm_pin(clf_context *ctx, int variant);
/* The id of the kind of choice "gemm" (candidates: enum
 * clf__gemm_variant - 1); role r's id is the kind's + r. */
int clf__gemm_kind(void);
#define CLF_KIND_GEMM clf__gemm_kind()

/* The roles of a forward's GEMMs, each with its own way, resolved for its
 * own shape by clf__gemm_resolve and listed on its own line of the kernel
 * choices (kind gemm, so gemm=NAME forces them all). */
enum clf__gemm_role {
    CLF_ROLE_PROJ,  /* X W^T: the projections ("gemm", buckets m.n.k) */
    CLF_ROLE_COMP,  /* E X, E P: sequence compression ("comp.m.n.k.b") */
    CLF_ROLE_SCORE, /* Q Kbar^T per head ("score.m.n.k.b") */
    CLF_ROLE_WEIGH, /* P Vbar per head ("weigh.m.n.k.b") */
    CLF_ROLE_FFN,   /* a model's feed-forward and logits ("ffn.m.n.k") */
    CLF_ROLE_COUNT
};

/* gemm.c's state in a context (clf__gemm_state): the scratch buffer of
 * transposed operands, the GEMMs run by the blocked kernel and by any way
 * (tests), and the blocked kernel's block width: 64-column blocks where
 * the device prefers 16-float vectors, else 16 (tests may change it). */
struct clf__gemm_state {
    cl_mem scratch;
    size_t scratch_cap; /* floats */
    size_t blocked_calls;
    size_t split_calls; /* GEMMs the split way ran split (tests) */
    size_t gemm_calls;
    int cols64;
    int clblast_records; /* CLBlast's parameters in force are a tune
                            file's (tune_apply.c): a failure drops them */
    int clblast_dropped; /* they were dropped: CLBlast's GEMMs run on the
                            library's own kernels */
};
/* ctx's, made on first use; NULL when memory runs out (an error is set). */
struct clf__gemm_state *clf__gemm_state(clf_context *ctx);
/* Says whether CLBlast's parameters now in force are a tune file's
 * (records 1: a CLBlast failure drops them) or not (0: a trial's, or
 * CLBlast's own), and forgets an earlier drop; 0 or CLF_ENO_MEMORY. */
int clf__gemm_clblast_records(clf_context *ctx, int records);

/* One GEMM's arguments, whichever way runs it (CLBlast, blocked, tiled,
 * native half): C = act(alpha op(A) op(B) + beta C + bias), row-major,
 * batched with element strides (batch 0: nothing to do), bias one per
 * column or NULL, act an enum clf__act.  A bias or an activation goes
 * with batch 1 where CLBlast may run the GEMM (it adds them after, over
 * the first matrix).  half is set by clf__gemm from its way. */
struct clf__gemm_args {
    int trans_a, trans_b;
    size_t m, n, k;
    float alpha, beta;
    cl_mem a, b, c, bias;
    size_t a_off, lda, a_stride, b_off, ldb, b_stride, c_off, ldc, c_stride;
    size_t batch;
    int act;
    unsigned half; /* CLF_GEMM_HALF_A, _B: the operands stored as binary16 */
};

/* The activations a GEMM's last step applies (the kernels' `act`). */
enum clf__act {
    CLF_ACT_NONE = 0,
    CLF_ACT_GELU = 1, /* exact: 0.5 v (1 + erf(v / sqrt 2)) */
    CLF_ACT_RELU = 2  /* max(v, 0), NaN kept */
};

/* gemm.c: the GEMM g on the context's queue in the way `way` (above): the
 * way's kernel where it takes the shape, else CLBlast (batch 1 uses
 * Sgemm); bias and activation in the library kernels' last step, or
 * separate passes after CLBlast.  Takes the context lock. */
int clf__gemm(clf_context *ctx, int way, const struct clf__gemm_args *g);
/* A linear layer's GEMM, y = act(x W^T + bias) (+ y where accumulate), W
 * out x in as PyTorch's nn.Linear stores it: `rows` rows of x (in
 * columns) from x_off and of y (out columns) from y_off, both packed;
 * bias NULL for none, act an enum clf__act.  clf__gemm_linear runs it as
 * clf__gemm. */
struct clf__linear {
    size_t rows, in, out;
    cl_mem x, w, y, bias;
    size_t x_off, y_off;
    int act, accumulate;
};
int clf__gemm_linear(clf_context *ctx, int way, const struct clf__linear *l);
/* The epilogues of a GEMM that CLBlast ran (cl/gemm.cl): y[off + r ld + c]
 * += bias[c] for r < rows, c < cols; and the activation act (an enum
 * clf__act) in place over count floats from off. */
int clf__add_bias(clf_context *ctx, cl_mem y, size_t off, size_t rows,
                  size_t cols, size_t ld, cl_mem bias);
int clf__act(clf_context *ctx, cl_mem y, size_t off, size_t count, int act);

/* clf__gemm over `count` groups of g->batch entries, group o's operands
 * o * a (b, c) elements after group 0's: min(count, batch) strided-batched
 * calls, each over the larger of the two, so that the launches of many
 * short sequences do not grow with their number. */
struct clf__gemm_group {
    size_t count, a, b, c;
};
int clf__gemm_grouped(clf_context *ctx, int way, const struct clf__gemm_args *g,
                      const struct clf__gemm_group *group);

/* gemm_args.c: kernel arguments 0-15 of the blocked and the native half
 * GEMM kernels from g: m, n, k, alpha, then A, B and C each with its
 * offset, leading dimension and batch stride (sizes as 32-bit, offsets
 * and strides as 64-bit integers). */
int clf__gemm_set_operands(cl_kernel k, const struct clf__gemm_args *g);
/* gemm.c: the register-blocked GEMM kernel on g, A and B not transposed
 * (trans_a and trans_b are not read), C added to where beta is not 0 (so
 * beta 0 or 1), n a multiple of 16. */
int clf__gemm_nn(clf_context *ctx, const struct clf__gemm_args *g);
/* dst (packed, batch x cols x rows) = the transposes of batch row-major
 * rows x cols matrices at off + t * stride with leading dimension ld. */
int clf__transpose(clf_context *ctx, cl_mem src, size_t off, size_t rows,
                   size_t cols, size_t ld, size_t stride, size_t batch,
                   cl_mem dst);
/* gemm_kept.c: weights whose transposes the blocked way keeps.  An owner
 * that changes buffer w only through its own calls registers it with
 * clf__gemm_keep after writing it, again after every later write, and
 * calls clf__gemm_forget before releasing it.  A blocked GEMM that reads
 * a registered B transposed then reads a copy of B^T made on its first
 * such GEMM (the same bits as the copy it would make each time).
 * clf__gemm_kept_bytes: the device bytes of w's copies.  The first three
 * take the context lock. */
int clf__gemm_keep(clf_context *ctx, cl_mem w);
void clf__gemm_forget(clf_context *ctx, cl_mem w);
size_t clf__gemm_kept_bytes(clf_context *ctx, cl_mem w);
/* The registrations held (tests). */
size_t clf__gemm_kept_count(clf_context *ctx);
/* For gemm.c, ctx locked: *t = the kept transpose (k x n, packed) of the
 * n x k part of b at off with leading dimension ld, made by `fill` (the
 * arguments of clf__transpose for one matrix) if there is none yet; NULL
 * when b is not registered. */
typedef int (*clf__kept_fill_fn)(clf_context *ctx, cl_mem src, size_t off,
                                 size_t rows, size_t cols, size_t ld,
                                 cl_mem dst);
int clf__gemm_kept_copy(clf_context *ctx, cl_mem b, size_t off, size_t n,
                        size_t k, size_t ld, clf__kept_fill_fn fill, cl_mem *t);
/* The way (enum clf__gemm_variant) for the GEMMs of `role` whose shape is
 * batch x m x n x k: pinned, forced, stored, or timed now on that shape
 * (m capped) and stored (choose.c); bucketed by powers of two of m, n, k
 * and the batch (when above 1), the role's prefix first.  Plans call it
 * once per role and pass the way to each GEMM of the role. */
int clf__gemm_resolve(clf_context *ctx, int role, size_t m, size_t n, size_t k,
                      size_t batch, int *variant);

/* gemm_tiled.c: the tiled GEMM kernel.  Sizes: the defaults of kernel_params.h,
 * the checks of a set against the kernel's rules and a device's limits
 * (CLF_TUNE_* limits below; -1 with the reason in why), the small space
 * clinformer tune searches (the valid ones, at most cap; the defaults
 * first), their text "MWG=64 NWG=64 ..." and its names. */
void clf__tiled_default(struct clf__tiled_cfg *cfg);
int clf__tiled_check(const struct clf__tiled_cfg *cfg,
                     const struct clf__limits *lim, char *why, size_t cap);
size_t clf__tiled_space(struct clf__tiled_cfg *out, size_t cap,
                        const struct clf__limits *lim);
void clf__tiled_format(const struct clf__tiled_cfg *cfg, char *buf, size_t cap);
extern const char *const clf__tiled_names[CLF_TILED_NPARAM];
/* Makes cfg the context's tiled sizes: the main program's kernel for the
 * defaults, else a program built (or loaded from the cache) for them.
 * Checked against the device first; the context keeps its sizes on
 * failure.  Takes the context lock. */
int clf__tiled_set(clf_context *ctx, const struct clf__tiled_cfg *cfg);
/* Back to the default sizes a new context starts with, unchecked. */
int clf__tiled_reset(clf_context *ctx);
/* Whether the tiled kernel takes the shape (32-bit sizes). */
int clf__tiled_fits(size_t m, size_t n, size_t k, size_t lda, size_t ldb,
                    size_t ldc);
/* The tiled GEMM of g; call with ctx locked. */
int clf__tiled_gemm(clf_context *ctx, const struct clf__gemm_args *g);
/* The workspace of partial sums of a split over K, the tiled state's,
 * grown to `floats` (ctx locked); NULL when it cannot be had (the GEMM
 * then runs unsplit). */
cl_mem clf__gemm_partial(clf_context *ctx, size_t floats);
/* The ksplit slices of a split over K in partial (slice s of product t at
 * s * s_stride + t * m * n, rows of n, alpha applied) summed in order into
 * g's C, finished with beta, bias and activation (ctx locked): the same
 * bits in every run, whatever order the slices ran in. */
int clf__gemm_reduce(clf_context *ctx, const struct clf__gemm_args *g,
                     cl_mem partial, size_t ksplit, size_t s_stride);
/* The slices a tiled GEMM of that shape is split into over K (1: none). */
size_t clf__tiled_split(clf_context *ctx, size_t m, size_t n, size_t k,
                        size_t batch, size_t *kchunk);

/* Native half arithmetic for half-stored weights (half_gemm.c): a GEMM that
 * reads a binary16 weight directly and multiplies in half, offered only
 * where the device reports cl_khr_fp16 and a self-test passes, and chosen
 * per device against widening the weight into float32 first (kind
 * "halfgemm" of the kernel choices: widen or native). */

/* The candidates of the kind of choice "halfgemm", and its id. */
enum { CLF_HALFGEMM_WIDEN = 0, CLF_HALFGEMM_NATIVE };
int clf__half_gemm_kind(void);
#define CLF_KIND_HALFGEMM clf__half_gemm_kind()

/* half_gemm.c's state in a context (clf__half_gemm_state): whether the native
 * way is offered (0 not checked yet, 1 offered, -1 not, with the reason in
 * why and the line of the kernel choices in note), its program and
 * kernels, and the native GEMMs enqueued (tests).  Under the lock. */
struct clf__half_gemm_state {
    int offered;
    char why[256];
    char note[300];
    cl_program program; /* cl/half_gemm.cl, where offered */
    cl_kernel nt, nn, sanity;
    size_t calls;
};
/* ctx's, made on first use; NULL when memory runs out (an error is set). */
struct clf__half_gemm_state *clf__half_gemm_state(clf_context *ctx);

/* 1 when the native way is offered on ctx's device: cl_khr_fp16 reported,
 * its program built and the self-test passed, all checked once per
 * context (under the lock) and cached; else 0 with the reason in the
 * state's why, and halfgemm listed as widening for that reason. */
int clf__half_gemm_offered(clf_context *ctx);

/* Run by the GEMM entry points for a way with CLF_GEMM_HALF_A or _B: the
 * native kernel on g, operand A (half_a) or B (half_b) binary16, or why it
 * cannot take g.  Call with ctx locked. */
int clf__half_gemm(clf_context *ctx, const struct clf__gemm_args *g, int half_a,
                   int half_b);

/* The self-test on ctx now, regardless of the cached verdict: 0 when it
 * passes, else CLF_EUNSUPPORTED with the reason (tests).  fault != 0
 * runs it with a wrong alpha, so that the comparison must fail. */
int clf__half_gemm_selftest(clf_context *ctx, int fault);

#endif /* CLF_GEMM_H */
