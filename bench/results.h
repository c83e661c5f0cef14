/*
 * The records a bench run produces and the arithmetic done on them
 * (statistics, GFLOP/s, FLOP accounting, crossover), kept free of any
 * device so that tests can check it without one.  bench/run.h measures
 * into these records; bench/output.h writes and reads them.  Neither
 * includes the other.
 */
#ifndef CLF_BENCH_RESULTS_H
#define CLF_BENCH_RESULTS_H

#include "clinformer.h"

#include <stddef.h>

/* ------------------------------------------------------------- records */

/* What one row of the matrix runs.  causal is the prefix-safe causal
 * Linformer of the library; causal-full is full attention with the
 * lower-triangular mask, its reference. */
typedef enum clf_bench_mode {
    CLF_BENCH_LINFORMER = 0,
    CLF_BENCH_FULL,
    CLF_BENCH_CAUSAL,
    CLF_BENCH_CAUSAL_FULL,
    CLF_BENCH_MODE_COUNT
} clf_bench_mode;

/* "linformer", "full", "causal", "causal-full"; "?" for anything else. */
const char *clf_bench_mode_name(clf_bench_mode mode);

/* Parses a mode name; returns 0, or -1 for an unknown name. */
int clf_bench_mode_parse(const char *name, clf_bench_mode *out);

/* The mode a row's relative error is measured against (full for
 * linformer, causal-full for causal); the mode itself for the references. */
clf_bench_mode clf_bench_mode_reference(clf_bench_mode mode);

typedef enum clf_bench_status {
    CLF_BENCH_OK = 0,
    CLF_BENCH_TOO_LARGE,   /* a buffer exceeds the device's largest
                              allocation (CLF_ETOO_LARGE) */
    CLF_BENCH_OVER_BUDGET, /* not run: the time budget was spent */
    CLF_BENCH_FAILED,      /* an error; the note says which */
    CLF_BENCH_STATUS_COUNT
} clf_bench_status;

/* "ok", "too_large", "over_budget", "failed"; "?" otherwise. */
const char *clf_bench_status_name(clf_bench_status status);
int clf_bench_status_parse(const char *name, clf_bench_status *out);

/* Median and spread of a set of timings, in seconds.  With runs == 0 all
 * three are NaN (not measured). */
typedef struct clf_bench_stats {
    double median, min, max;
    double mad; /* median absolute deviation from the median, seconds;
                   NaN when not measured */
    size_t runs;
} clf_bench_stats;

/* The initialisations of E and F that the accuracy study compares. */
typedef enum clf_bench_init {
    CLF_BENCH_INIT_LUCIDRAINS = 0, /* uniform +-1/sqrt(k) */
    CLF_BENCH_INIT_FAIRSEQ,        /* xavier_uniform, gain 1/sqrt(2), on
                                      the (k, N) weight */
    CLF_BENCH_INIT_COUNT
} clf_bench_init;

/* "lucidrains", "fairseq"; "?" otherwise. */
const char *clf_bench_init_name(clf_bench_init init);

/* One device, as the run saw it. */
typedef struct clf_bench_device {
    unsigned index; /* flat index, as clf_devices_list numbers it */
    char platform[128];
    char name[128];
    char driver[64];
    char version[64];
    int is_gpu;
    unsigned compute_units;
    unsigned long long global_mem;
    unsigned long long max_alloc;
    double build_s;         /* clf_context_build: kernels built or loaded */
    unsigned source_builds; /* programs compiled from source by it */
    unsigned cache_loads;   /* programs loaded from the binary cache */
    char tuning[512];       /* clf_context_tuning, "" for none */
    char choices[512];      /* clf_context_kernel_choices after the runs */
    char stable_name[64];   /* clf_device_info.stable_name, e.g. "pocl:0";
                               the key of the device across runs */
    /* Measured peaks (NaN: not measured): fp32 FMA throughput, device
     * memory copy bandwidth, host-to-device transfer bandwidth. */
    double peak_gflops, peak_gbps, h2d_gbps;
    int peak_cached; /* the peaks came from the per-device cache */
    /* How they were set: the multiply-add kernel's grid point (vector
     * width x chains; 0 when not known) and the copy (1:
     * clEnqueueCopyBuffer, 0: the copy kernel).  Where a rate the run
     * measured on the device passed a peak, the peak was raised to it
     * (clf_bench_peaks_hold): fma_measured and copy_measured keep what the
     * kernels measured, peak_note says which row, so that no roof% is
     * above 100; NaN and "" where nothing was raised. */
    int fma_width, fma_chains, copy_api;
    double fma_measured, copy_measured;
    char peak_note[256];
} clf_bench_device;

/* One configuration and mode on one device. */
typedef struct clf_bench_result {
    size_t device; /* index into the report's devices */
    clf_bench_mode mode;
    size_t n, k, k_requested, d_model, heads, batch, causal_block;
    clf_bench_status status;
    char note[256];           /* why a row is not ok, or what was cut short */
    double first_call_s;      /* the first forward of a fresh layer: includes
                                 CLBlast's GEMM compile on a fresh context */
    clf_bench_stats wall;     /* warm forwards, host clock around
                                 enqueue + clFinish */
    clf_bench_stats device_s; /* sum of the stage times */
    clf_bench_stats stage[CLF_STAGE_COUNT];
    double flops;                        /* the library's count */
    double stage_flops[CLF_STAGE_COUNT]; /* the library's split */
    double gflops;                       /* flops / wall.median */
    double device_bytes; /* weights + workspaces after the forward */
    double io_bytes;     /* the bench's own input and output buffers */
    double rel_error;    /* ||Y - Y_ref||_F / ||Y_ref||_F; NaN: none */
    /* The layer's weight storage (--precision), and for half rows
     * ||Y - Y_fp32||_F / ||Y_fp32||_F against the same mode with float32
     * weights on the same input (NaN: float rows, or not measured). */
    clf_precision precision;
    double fp32_error;
    /* How the row's layer compresses (--compression; linear in full
     * modes). */
    clf_compression compression;
    /* Roofline (NaN where not known): counted bytes moved to and from
     * device memory, FLOPs per byte, and the percent of
     * min(peak_gflops, intensity * peak_gbps) reached, for the whole
     * forward and per stage. */
    double bytes, intensity, roofline_pct;
    double stage_bytes[CLF_STAGE_COUNT];
    double stage_intensity[CLF_STAGE_COUNT];
    double stage_roofline_pct[CLF_STAGE_COUNT];
    int noisy; /* the spread (max - min) of wall is over 10% of its median */
} clf_bench_result;

/* Whether two rows measure the same configuration (mode, n, the matrix's
 * k, D, h, B, weight precision and compression), whatever their devices:
 * the key that lines rows up across devices and across runs. */
int clf_bench_same_config(const clf_bench_result *a, const clf_bench_result *b);
/* The row's mode, with ":" and its compression after it where that is not
 * the linear one ("linformer:mean") and "/h" for half-precision weights,
 * into buf; returns buf. */
#define CLF_BENCH_MODE_LABEL 40
const char *clf_bench_mode_label(const clf_bench_result *x, char *buf,
                                 size_t len);
/* Whether two rows compress alike: the same compression, or one of them
 * a full mode's (which has none, and is compared with every one). */
int clf_bench_same_compression(const clf_bench_result *a,
                               const clf_bench_result *b);

/* Weight that reaches the decisive position, over the trials. */
typedef struct clf_bench_weight {
    double mean, mean_abs, max_abs;
} clf_bench_weight;

/* One k of the accuracy study. */
typedef struct clf_bench_accuracy {
    size_t device;
    size_t n, k, d_model, heads, batch;
    clf_bench_status status;
    char note[256];
    clf_bench_stats linformer; /* warm Linformer forwards at this k */
    clf_bench_stats full;      /* warm full forwards at this n */
    double rel_error[CLF_BENCH_INIT_COUNT]; /* against full attention */
    double full_weight; /* the decisive position's weight in full mode */
    size_t trials;
    clf_bench_weight weight[CLF_BENCH_INIT_COUNT];
    double host_max_diff; /* device against the double-precision host */
} clf_bench_accuracy;

typedef struct clf_bench_report {
    char version[32]; /* library version */
    char started[32]; /* UTC, ISO 8601 */
    char host[64];
    char command[1024];
    size_t repeat;
    double budget_s;
    unsigned long long seed;
    int quick;
    double wall_s;                     /* the whole run */
    double load_start[3], load_end[3]; /* the host's 1/5/15-minute load
                                          averages; NaN: unknown */
    size_t baseline; /* index into devices of the comparison's baseline */
    clf_bench_device *devices;
    size_t ndevices, cap_devices;
    clf_bench_result *results;
    size_t nresults, cap_results;
    clf_bench_accuracy *accuracy;
    size_t naccuracy, cap_accuracy;
} clf_bench_report;

/* A zeroed report; free what it holds with clf_bench_report_free(). */
void clf_bench_report_init(clf_bench_report *r);
void clf_bench_report_free(clf_bench_report *r);

/* Appends a zeroed record (NaN in every measured field, status ok) and
 * returns it, or NULL when out of memory.  The pointer is valid until the
 * next append of the same kind. */
clf_bench_device *clf_bench_report_add_device(clf_bench_report *r);
/* A device record from what the library says of the device (index,
 * platform, name, driver, version, is_gpu, compute units, memory, largest
 * allocation, stable name; the peaks and their notes are left as they
 * are). */
void clf_bench_device_describe(clf_bench_device *d,
                               const clf_device_info *info);
clf_bench_result *clf_bench_report_add_result(clf_bench_report *r);
clf_bench_accuracy *clf_bench_report_add_accuracy(clf_bench_report *r);

/* The row of device dev (an index into r->devices) that measures x's
 * configuration (clf_bench_same_config), or NULL. */
const clf_bench_result *clf_bench_report_row_on(const clf_bench_report *r,
                                                const clf_bench_result *x,
                                                size_t dev);

/* Whether a row before row i of r measures row i's configuration: tables
 * with a line per configuration print only the first. */
int clf_bench_report_config_seen(const clf_bench_report *r, size_t i);

/* ---------------------------------------------------------- arithmetic */

/* Median, minimum and maximum of count values (not reordered).  NaN
 * values are not counted. */
clf_bench_stats clf_bench_stats_of(const double *values, size_t count);

/* flops / seconds / 1e9; NaN when seconds is not positive or either is
 * NaN. */
double clf_bench_gflops(double flops, double seconds);

/* ||a - b||_F / ||b||_F in double precision; NaN when b is all zeros. */
double clf_bench_rel_error(const float *a, const float *b, size_t count);

/* The shape of a benchmarked layer: max_seq_len = n, headwise sharing,
 * separate V, head_dim = d_model / heads, an output bias and no other
 * biases (the lucidrains layout).  k and causal_block as the layer has
 * them. */
typedef struct clf_bench_shape {
    clf_bench_mode mode;
    size_t batch, n, d_model, heads, k, causal_block;
} clf_bench_shape;

/* FLOPs of one forward of that shape, per stage into stage_flops (may be
 * NULL), and the total: the library's count, clf_attention_desc_flops(), for
 * the layer the bench makes of the shape.  Returns NaN for an impossible
 * shape. */
double clf_bench_flops_model(const clf_bench_shape *shape,
                             double stage_flops[CLF_STAGE_COUNT]);

/* The model puts attention over the slots under scores, softmax and
 * weighted sum; where the forward ran them as one fused kernel (its stage
 * took time), this moves their sum to CLF_STAGE_FUSED and zeroes them. */
void clf_bench_fused_split(double stage_flops[CLF_STAGE_COUNT]);

/* The block and slot count used for causal Linformer at length n, as
 * bench/bench_layer --causal chooses them: b = the smallest power of two
 * with 2 b^2 >= n (within a factor sqrt(2) of sqrt(n), where the cost
 * O(n (n/b + b)) is smallest); k clamped to n and rounded down to a
 * multiple of the ceil(n / b) blocks, at least one slot a block. */
void clf_bench_causal_shape(size_t n, size_t k, size_t *block, size_t *k_out);

/* Half-width of the uniform distribution of E and F under an init:
 * 1/sqrt(k) (lucidrains) or sqrt(6 / (k + N)) / sqrt(2) (fairseq). */
double clf_bench_init_bound(clf_bench_init init, size_t k, size_t max_seq_len);

/* The score gap alpha that makes full attention put `target` of its weight
 * on one key among n when every other key scores 0:
 * e^alpha / (e^alpha + n - 1) = target. */
double clf_bench_decisive_alpha(size_t n, double target);

/* Full attention's weight on the decisive key for that gap. */
double clf_bench_decisive_full(size_t n, double alpha);

/* The weight that reaches position j through Linformer when the only
 * nonzero key is at j with score gap alpha:  slot s scores alpha E[s, j];
 * the result is sum_s softmax(alpha E[:, j])_s F[s, j].  E and F are k x N
 * row-major.  Double precision. */
double clf_bench_decisive_weight(const float *E, const float *F, size_t k,
                                 size_t N, size_t j, double alpha);

/* The crossover of one (configuration, pair of modes): given count lengths
 * n (ascending) with the Linformer and reference medians at each (NaN where
 * either was not measured), returns the smallest measured n from which
 * Linformer is faster at every measured n, or 0 when it never is (or
 * nothing was measured).  *estimate (may be NULL) receives the crossing
 * interpolated in log n between the last losing and the first winning
 * point, or NaN when there is no losing point before it. */
size_t clf_bench_crossover(const size_t *n, const double *linformer,
                           const double *reference, size_t count,
                           double *estimate);

/* One crossover group of a report. */
typedef struct clf_bench_crossing {
    size_t device, d_model, heads, batch, k_requested;
    int causal;        /* causal against causal-full */
    size_t points;     /* lengths where both modes were measured */
    size_t n;          /* 0: none measured */
    double n_estimate; /* NaN when not bracketed */
    /* the weight storage of both modes */
    clf_precision precision;
    clf_compression compression; /* the Linformer mode's */
} clf_bench_crossing;

/* The crossovers of every group of the report's results that has both
 * modes of a pair.  Writes up to cap entries and the total count into
 * *count.  Returns 0, or -1 when out of memory. */
int clf_bench_report_crossings(const clf_bench_report *r,
                               clf_bench_crossing *out, size_t cap,
                               size_t *count);

/* Parses a comma-separated list of positive integers into out (up to cap);
 * returns 0, or -1 for an empty list, a bad entry or too many. */
int clf_bench_parse_sizes(const char *list, size_t *out, size_t cap,
                          size_t *count);

#endif
