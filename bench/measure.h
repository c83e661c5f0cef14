/*
 * What the bench's runs measure with, shared by the configuration matrix
 * (bench/matrix.c), the accuracy study (bench/accuracy.c) and the run over
 * the devices (bench/run.c): the run's clock, budget and progress lines,
 * seeded host data, layers that share one set of weights, device buffers
 * and the notes of a row.  Private to those files and bench/measure.c.
 */
#ifndef CLF_BENCH_MEASURE_H
#define CLF_BENCH_MEASURE_H

#include "run.h"

#define MAX_REPEAT CLF_BENCH_MAX_REPEAT

/* One call of clf_bench_run, while it runs. */
struct run {
    const struct clf_bench_options *o;
    clf_bench_report *rep;
    double t0;           /* start of the run */
    double deadline;     /* end of the whole run's budget */
    double dev_deadline; /* end of this device's share of it */
    double min_rate;     /* slowest FLOP/s of a warm forward on this
                                device; 0 until one ran */
    double rate[2];      /* the latest warm forward's FLOP/s in Linformer
                            ([0]) and full ([1]) mode; 0 until one ran */
    int failures;
};

/* The feature weights every layer of one (D, h) shares, initialised as
 * PyTorch's nn.Linear does (uniform +-1/sqrt(fan_in)). */
struct weights {
    size_t D;
    float *wq, *wk, *wv, *wo, *bo;
};

/* One layer of the matrix: its shape, mode and options. */
struct layer {
    clf_bench_mode mode;
    clf_attention *att;
    clf_forward_opts fo;
    size_t k, block; /* k = 0: not used (full modes) */
    clf_precision precision;
    clf_compression compression; /* linear in full modes */
};

/* One (n, k, D, h, B) with every requested mode. */
struct config {
    size_t dev, n, k, D, h, B;
};

/* A progress line on stderr, stamped with the seconds since run->t0. */
void clf_bench_progress(const struct run *run, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Seconds a forward of `flops` in the library's mode m should take, from
 * the rates seen so far; 0 when there is nothing to judge by. */
double clf_bench_estimate_s(const struct run *run, clf_mode m, double flops);
/* Whether `seconds` from now still fall in this device's share of the
 * budget. */
int clf_bench_fits(const struct run *run, double seconds);
/* Records the rate of a warm forward of mode m. */
void clf_bench_note_rate(struct run *run, clf_mode m, double flops,
                         double seconds);

/* A stream's seed from the run's seed and a tag naming the stream. */
unsigned long long clf_bench_mix_seed(unsigned long long seed,
                                      unsigned long long tag);
/* Uniform values in [-bound, bound) from seed. */
void clf_bench_fill_uniform(float *a, size_t count, unsigned long long seed,
                            double bound);

/* The shared weights of width D from seed; returns 0, or -1 when out of
 * memory (nothing held). */
int clf_bench_weights_make(struct weights *w, size_t D,
                           unsigned long long seed);
void clf_bench_weights_free(struct weights *w);

/* Sets the layer's E and F (k x n) drawn under init. */
int clf_bench_set_projections(clf_attention *att, size_t k, size_t n,
                              clf_bench_init init, unsigned long long seed);

/* A layer of mode m at max_seq_len n with the shared weights w and E, F
 * under init, its weights stored in precision prec and compressing by
 * comp (clf_bench_layer_make: float32, linear).  Full modes get k = 1 and
 * no E or F; a convolution's E and F are drawn as PyTorch's Conv1d
 * (uniform +-1/sqrt(d_h w)), mean and max pooling have none.  Returns a
 * library status. */
int clf_bench_layer_make_p(struct layer *l, clf_context *ctx, clf_bench_mode m,
                           size_t n, size_t k, size_t heads,
                           const struct weights *w, clf_bench_init init,
                           unsigned long long seed, clf_precision prec,
                           clf_compression comp);
int clf_bench_layer_make(struct layer *l, clf_context *ctx, clf_bench_mode m,
                         size_t n, size_t k, size_t heads,
                         const struct weights *w, clf_bench_init init,
                         unsigned long long seed);
void clf_bench_layer_destroy(struct layer *l);
/* The library's mode the layer runs in. */
clf_mode clf_bench_layer_lib_mode(const struct layer *l);

/* One forward of B x n from x into y and clFinish, its host-clock seconds
 * in *secs.  Returns a library status. */
int clf_bench_timed_forward(clf_context *ctx, struct layer *l, cl_mem x,
                            cl_mem y, size_t B, size_t n, double *secs);

/* A device buffer of count floats (a copy of host unless NULL), *rc the
 * status; and a blocking read of count floats. */
cl_mem clf_bench_make_buffer(clf_context *ctx, size_t count, const float *host,
                             int *rc);
int clf_bench_read_buffer(clf_context *ctx, cl_mem m, float *host,
                          size_t count);

/* Appends a sentence to a row's note ("; " between sentences). */
void clf_bench_set_note(char *note, size_t len, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Records a failed library call (what) on a row: too large, or an error
 * (counted in run->failures). */
void clf_bench_fail_row(struct run *run, clf_bench_status *status, char *note,
                        size_t len, const char *what, int rc);

/* Whether a * b * c * d fits size_t (all nonzero). */
int clf_bench_fits_size(size_t a, size_t b, size_t c, size_t d);

/* bench/matrix.c: every k and n of the matrix at c's device, D, h and B
 * (c->n and c->k are set in turn), each configuration's modes timed
 * alternating, with their errors against the reference modes. */
void clf_bench_run_matrix(struct run *run, clf_context *ctx, struct config *c,
                          const struct weights *w);

/* bench/accuracy.c: the accuracy study at length n over every k of
 * --k: Linformer's speed and error against full attention under both
 * inits, and the decisive token. */
void clf_bench_run_accuracy(struct run *run, clf_context *ctx, size_t dev,
                            size_t n, size_t D, size_t h, size_t B,
                            const struct weights *w);
/* Checks the study's own buffers (E and F, the decisive-token inputs)
 * against size_t; returns 0, or -1 with a sentence in why. */
int clf_bench_check_study(const struct clf_bench_options *o, char *why,
                          size_t len);

#endif
