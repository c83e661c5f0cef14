/* Helpers shared by the Check suites. */
#ifndef CLF_TESTUTIL_H
#define CLF_TESTUTIL_H

#include "clinformer.h"

#include "../bench/reference.h"

#include <check.h>
#include <stddef.h>
#include <string.h>

/* The suite's device context, created once (tests do not fork, since
 * OpenCL drivers do not survive fork).  NULL when there is no device. */
clf_context *tu_context(void);
/* Where ctx's device refuses the tiled GEMM's default sizes (rusticl on
 * llvmpipe takes 32 work-items a group, the defaults 64), the first sizes
 * of the tuning space it runs, so that the tiled kernel's tests run there
 * too; nothing where the defaults run (or ctx is NULL). */
clf_context *tu_tiled_fit(clf_context *ctx); /* returns ctx */

/* Puts back the CLINFORMER_CACHE_DIR the suite started with (make check
 * gives every suite of a run one cache directory, tests/cache), or none,
 * after a test pointed it elsewhere. */
void tu_cache_dir_restore(void);

/* Runs the suite with TAP on stdout and no forking.  With no OpenCL device
 * it reports the whole suite as skipped, unless CLINFORMER_REQUIRE_DEVICE=1
 * (set in CI), where that is a failure.  Returns the process exit code. */
int tu_run(Suite *s, int needs_device);

/* Uniform values in [lo, hi) from a fixed seed. */
void tu_fill(float *a, size_t n, unsigned long long seed, float lo, float hi);

/* Largest |ref| (at least tiny) and the largest |got - ref|. */
double tu_scale(const double *ref, size_t n);
double tu_max_err(const float *got, const double *ref, size_t n);

/* Fails the test unless max |got - ref| <= rtol * max |ref|, and no element
 * is NaN or infinite. */
void tu_assert_close(const float *got, const double *ref, size_t n, double rtol,
                     const char *what);

/* Fails the test unless expr returns status and clf_last_error() names
 * needle. */
#define ASSERT_FAILS(expr, status, needle)                                     \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        ck_assert_msg(rc_ == (status), "%s returned %d (%s), expected %s",     \
                      #expr, rc_, clf_status_name(rc_), #status);              \
        ck_assert_msg(strstr(clf_last_error(), (needle)) != NULL,              \
                      "message \"%s\" does not name \"%s\"", clf_last_error(), \
                      (needle));                                               \
    } while (0)

void *tu_malloc(size_t bytes);

/* Writes the n low bytes of v to b, little-endian (file headers in the
 * reader tests). */
void tu_put_le(unsigned char *b, unsigned long long v, size_t n);

/* How many entries the directory holds besides . and .. */
size_t tu_dir_entries(const char *dir);

/* Removes the plain files of a directory (the directory stays). */
void tu_clear_dir(const char *dir);

/* A read-write buffer of the suite's context holding h[0..n) (one float
 * when n is 0); fails the test when it cannot be made. */
cl_mem tu_upload(clf_context *ctx, const float *h, size_t n);

/* Reads n floats of m back into h (blocking); fails the test on error. */
void tu_download(clf_context *ctx, cl_mem m, float *h, size_t n);

/* The operands of a random GEMM test: A, B and C of na, nb and nc floats,
 * uniform in [-1, 1) from seeds seed, seed + 1 and seed + 2, C0 a copy of
 * the starting C, and their buffers on the context (built first). */
typedef struct tu_gemm_data {
    size_t na, nb, nc;
    float *a, *b, *c, *c0;
    cl_mem ma, mb, mc;
} tu_gemm_data;

void tu_gemm_data_make(tu_gemm_data *g, clf_context *ctx, size_t na, size_t nb,
                       size_t nc, unsigned long long seed);
void tu_gemm_data_free(tu_gemm_data *g);

/* An attention layer on the suite's context with random weights at
 * PyTorch-like scales, and its host copy for the reference. */
struct layer {
    clf_attention_desc desc;
    clf_attention *att;
    float *w[CLF_WEIGHT_COUNT];
    ref_layer ref;
};

void layer_make(struct layer *l, const clf_attention_desc *d,
                unsigned long long seed);
/* The same on a context of the caller's. */
void layer_make_on(struct layer *l, clf_context *ctx,
                   const clf_attention_desc *d, unsigned long long seed);
void layer_free(struct layer *l);

/* Resolves the GEMM way of an m x n x k product as a fresh process
 * would (the context built, no store read or written, no choice loaded,
 * no way pinned), then restores the cache setting and the pinned way;
 * fails the test unless resolving succeeds.  Returns the way chosen. */
int tu_gemm_resolve_fresh(clf_context *ctx, size_t m, size_t n, size_t k);

/* The padding mask of a right-padded batch: mask[b * n + j] = 1 for
 * j < lengths[b], else 0 (B x n bytes, as ref_attention_ex takes). */
void tu_lengths_mask(unsigned char *mask, const unsigned *lengths, size_t B,
                     size_t n);

/* Forwards x (two sequences of n) through l in both modes, plain and
 * causal, with the second sequence all padding (key_mask): fails the test
 * unless every output is finite and the second sequence's are zero. */
/* Whether the context's launch log (clf_context_record_launches) holds a
 * launch of the kernel named `kernel` ("CLBlast" for CLBlast's GEMMs). */
int tu_launched(clf_context *ctx, const char *kernel);
void tu_check_padded_sequence_zero(struct layer *l, const float *x, size_t n);

/* The worked example of the design as a layer on tu_context(): q = 1,
 * d = 1, K = (1,2,3), V = (10,20,30), E = F = [[1/2,1/2,0],[0,0,1]]
 * (the input x = (1,2,3) with unit W_q, W_k, W_o and W_v = 10). */
clf_attention *tu_golden_layer(void);

/* A peer fixture in dir run as float32 and as half-precision models: the
 * half output within tol_ref of the fixture's, within tol_float of the
 * float32 model's and not equal to it. */
void tu_check_half_fixture(const char *dir, const char *name, double tol_ref,
                           double tol_float);

#endif
