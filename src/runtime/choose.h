/* The runtime's kernel choices (choose.c): the kinds the floors above
 * register, the store's entries, lookup, record and listing, timing
 * candidates, and the throughput rates of sharded forwards.  Included by
 * runtime.h. */
#ifndef CLF_RUNTIME_CHOOSE_H
#define CLF_RUNTIME_CHOOSE_H

#include "clinformer.h"

/* The kernel choices (choose.c).  The runtime keeps the mechanism (the
 * store, the timing, the buckets, CLINFORMER_KERNELS and the listing);
 * each floor registers the kinds it chooses among, with its candidates
 * (CLF_CHOICE_KIND below), when the library is loaded.  A kind is chosen
 * for one role or several (the GEMM's, enum clf__gemm_role), each
 * remembered and listed on its own but forced and stored as the kind; a
 * kind's id is the id of its first role, and role r of a kind is its id
 * + r. */
struct clf__choice_kind {
    const char *name;              /* KIND of CLINFORMER_KERNELS, the store */
    const char *const *candidates; /* NAME of KIND=NAME, in the kind's order */
    int count;                     /* candidates, at most CLF_MAX_CANDIDATES */
    const char *const *labels;     /* each role's name in the listing */
    int roles;                     /* at least 1 */
    int rank;                      /* the listing's order: lower first */
    int listed; /* listed "not chosen yet" before its first choice */
};
#define CLF_MAX_ROLES 16
/* Registers kind (static storage) and returns its id, or -1 when the
 * roles are all taken or kind is malformed (its lookups then fail). */
int clf__choice_register(const struct clf__choice_kind *kind);
/* Defines int get(void), the id of kind `desc`, registered when the
 * library is loaded, so that every kind is known before a context is
 * made (CLINFORMER_KERNELS, clf_context_force_kernel, the store). */
#define CLF_CHOICE_KIND(get, desc)                                             \
    static int get##_id = -1;                                                  \
    static void get##_register(void) __attribute__((constructor));             \
    static void get##_register(void)                                           \
    {                                                                          \
        get##_id = clf__choice_register(&(desc));                              \
    }                                                                          \
    int get(void) { return get##_id; }
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

/* choose.c: timing kernels that compute the same thing.  A buffer of
 * `floats` values of order one (NULL and *rc set on failure); and
 * run(ctx, v, user) for v = 0..count-1 in turns, one round to warm up then
 * reps rounds, each run followed by clFinish, the best time in ms[v] (-1
 * when it failed).  Returns the fastest v, or the last failure's status
 * when every variant failed. */
typedef int (*clf__variant_fn)(clf_context *ctx, int variant, void *user);
/* Seconds on a monotonic clock. */
double clf__now_s(void);
/* The winner for role `role` (a kind's id, + r for its role r) and a shape
 * bucket ([a-z0-9.], under CLF_BUCKET_MAX): forced
 * (clf_context_force_kernel, CLINFORMER_KERNELS, for the role's kind) or
 * stored (read again under the store's lock when this context does not
 * know it, so that a process timing it now is waited for): sets *winner
 * and returns 1; not known: 0, with the store's lock held, and the caller
 * times the candidates, calls clf__choice_record, which stores the
 * winner, then clf__choice_release (on failure too).  CLF_EINVALID_ARGUMENT
 * for a bad CLINFORMER_KERNELS.  Call with ctx locked. */
int clf__choice_lookup(clf_context *ctx, int role, const char *bucket,
                       int *winner);
/* Lets go of the store's lock a lookup that returned 0 took. */
void clf__choice_release(clf_context *ctx);
/* Records a timed winner with every candidate's time; returns the winner
 * the caller runs: `winner`, or the stored one where the lookup before it
 * was a check of a stored choice (clf_context_check_kernel_choices), so
 * that a process keeps the bits it started with. */
int clf__choice_record(clf_context *ctx, int role, const char *bucket,
                       int winner, const double *ms);
/* Notes that a forward ran `winner` because it has no other way (why: a
 * phrase that outlives the context's next listing, e.g. static), so that
 * clf_context_kernel_choices says what ran instead of "not chosen yet".
 * Call with ctx locked. */
void clf__choice_fixed(clf_context *ctx, int role, int winner, const char *why);
/* The kind of a role. */
int clf__choice_role_kind(int role);
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

cl_mem clf__timing_buffer(clf_context *ctx, size_t floats, unsigned seed,
                          int *rc);
int clf__time_variants(clf_context *ctx, int count, clf__variant_fn run,
                       void *user, int reps, double *ms);

#endif /* CLF_RUNTIME_CHOOSE_H */
