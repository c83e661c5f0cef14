/* The bench suite's entry point: parses the options, has bench/run.c
 * measure into a report (or reads one back), then has the writers of
 * bench/output.h print and write it. */
#define _POSIX_C_SOURCE 200809L

#include "suite.h"
#include "html.h"
#include "output.h"
#include "roofline.h"
#include "run.h"
#include "shard.h"
#include "stream.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST CLF_BENCH_MAX_LIST
#define MAX_REPEAT CLF_BENCH_MAX_REPEAT
#define MAX_TRIALS 1024

/* ---------------------------------------------------------------- main */

static const char usage_text[] =
    "Usage: %s [OPTIONS]\n"
    "\n"
    "Times multi-head attention layers on OpenCL devices, Linformer against\n"
    "full attention through the same pipeline, over a matrix of n, k, D, h,\n"
    "B and mode.  For each configuration: median and spread (min..max) of\n"
    "warm forwards end to end and per stage (profiling markers), the first\n"
    "call apart, FLOPs counted from the shapes and GFLOP/s, the device\n"
    "memory the layer holds, and the relative error of Linformer against\n"
    "full attention on the same weights and input.  Progress goes to\n"
    "stderr, tables to stdout.\n"
    "\n"
    "Each row is held against its device: the bytes each stage moves (each\n"
    "operand counted once) give its arithmetic intensity (FLOP/byte), and\n"
    "roof%% is the percent of the roofline bound min(peak GFLOP/s,\n"
    "intensity x peak GB/s) it reaches.  A row whose spread is over 10%%\n"
    "of its median is marked noisy (*); rMAD%% is its median absolute\n"
    "deviation over the median.  With several devices one table puts them\n"
    "side by side, each median also over the baseline device's.\n"
    "\n"
    "Matrix:\n"
    "  --device SEL|all  a device selector (index, cpu, gpu or a name\n"
    "                    substring, as CLINFORMER_DEVICE), a comma list of\n"
    "                    them, or all (default: the library's default)\n"
    "  --n LIST          sequence lengths (default 512,1024,2048,4096)\n"
    "  --k LIST          compressed lengths (default 256; clamped to n)\n"
    "  --d-model LIST    model widths (default 512)\n"
    "  --heads LIST      heads (default 8)\n"
    "  --batch LIST      batch sizes (default 1)\n"
    "  --modes LIST      comma list of linformer, full, causal and\n"
    "                    causal-full (default linformer,full); causal is\n"
    "                    prefix-safe causal Linformer (block b the smallest\n"
    "                    power of two with 2b^2 >= n, k rounded down to a\n"
    "                    multiple of the ceil(n/b) blocks), causal-full the\n"
    "                    masked full attention it is compared with\n"
    "  --precision LIST  comma list of float and half (default float):\n"
    "                    the layer's weight storage (half: W_q, W_k, W_v,\n"
    "                    W_out, E and F as 16-bit floats, arithmetic in\n"
    "                    float32, or half products where the kernel\n"
    "                    choice halfgemm is native); each mode runs in\n"
    "                    each, side by side, and half rows report their\n"
    "                    error against float32 weights (fp32 err) and\n"
    "                    their device memory\n"
    "  --compression C   how the linformer and causal rows compress:\n"
    "                    linear (E and F, default), mean or max pooling,\n"
    "                    or conv (a convolution over windows of\n"
    "                    floor(n/k) positions); their rows are marked\n"
    "                    :mean, :max or :conv and pair with the full rows\n"
    "                    (the accuracy study stays linear)\n"
    "  --repeat R        at most R warm runs per mode after the first\n"
    "                    call, 1..%d (default 15; --quick 9).  A row stops\n"
    "                    earlier once the medians have settled: after at\n"
    "                    least 5 runs (R when fewer), when for every mode\n"
    "                    of the configuration the median of all runs is\n"
    "                    within 1%% of the median without the last 2\n"
    "  --peak            measure the device peaks again (fp32 multiply-add\n"
    "                    GFLOP/s, device-memory copy and host-to-device\n"
    "                    GB/s, as clpeak does), not from the cache; they\n"
    "                    are measured before the matrix on each device and\n"
    "                    cached per device and driver\n"
    "  --no-peak         measure no peaks (no roofline figures)\n"
    "  --baseline SEL    the device the others are compared with, a\n"
    "                    selector as --device takes (default: the first\n"
    "                    device of the run)\n"
    "  --budget SECONDS  time budget of the whole run (default 600): what\n"
    "                    would not fit is reported as over_budget, and a\n"
    "                    row may have fewer warm runs; a forward already\n"
    "                    started is not interrupted\n"
    "  --seed S          seed of weights and inputs (default 1)\n"
    "\n"
    "Several devices (instead of the matrix):\n"
    "  --shard           with --device all or a list: for each n (first\n"
    "                    k, D, h, B), Linformer and full attention on each\n"
    "                    device alone, then one forward split by positions\n"
    "                    over all of them, evenly and in proportion to the\n"
    "                    throughput just measured alone, and the bytes\n"
    "                    exchanged per layer; float only; --json, --csv\n"
    "                    and --html save it (JSON schema\n"
    "                    clinformer-bench-shard/1); no --accuracy,\n"
    "                    --baseline, --svg, --from or --compare\n"
    "\n"
    "A stream (instead of the matrix):\n"
    "  --stream          one prefix-safe causal Linformer layer (first D,\n"
    "                    h, B, float) fed --chunk positions an append\n"
    "                    (clf_stream_append) up to the largest n; at each n\n"
    "                    of --n, the appends' median and max latency over\n"
    "                    the block before n, the whole causal forward over\n"
    "                    the n positions (median of --repeat), and the\n"
    "                    stream's state bytes; k is a multiple of the\n"
    "                    blocks of the largest n (at least --k's share);\n"
    "                    --json, --csv and --html save it (JSON schema\n"
    "                    clinformer-bench-stream/1); one device; no\n"
    "                    --accuracy, --shard, --baseline, --svg, --from or\n"
    "                    --compare\n"
    "  --block B         the causal block (default 64)\n"
    "  --chunk M         positions an append (default 1)\n"
    "\n"
    "Accuracy study (instead of the matrix):\n"
    "  --accuracy        for each n of --n (default 2048) and each D, h, B,\n"
    "                    sweep k over --k (default 32,64,128,256,512,1024):\n"
    "                    Linformer speed, relative error against full\n"
    "                    attention with E and F drawn as lucidrains\n"
    "                    (uniform +-1/sqrt(k)) and as fairseq\n"
    "                    (xavier_uniform, gain 1/sqrt(2), on (k, n)), and\n"
    "                    the decisive token: how much of the weight that a\n"
    "                    query puts sharply on one key (0.99 in full\n"
    "                    attention) survives compression\n"
    "  --trials T        decisive positions per k (default 64)\n"
    "\n"
    "  --quick           the README's main job in under 3 minutes on a\n"
    "                    2-core CPU: the matrix at n 256..2048 (k=256,\n"
    "                    repeat up to 9), then the accuracy study at\n"
    "                    n=1024, k 32..512, within a 150 s budget; ends\n"
    "                    with a summary table.  Options given explicitly\n"
    "                    win.\n"
    "\n"
    "Output:\n"
    "  --json FILE       the results as JSON (schema clinformer-bench/1):\n"
    "                    every row with its device's stable name, the\n"
    "                    devices' peaks, the host's load at start and end\n"
    "  --csv FILE        matrix rows as CSV; accuracy rows go to FILE with\n"
    "                    -accuracy before its .csv (with -, after a blank\n"
    "                    line)\n"
    "  --svg FILE        the figures: per mode, every device's median time\n"
    "                    against n on one shared log scale (crossover n\n"
    "                    marked), and a roofline per device with each\n"
    "                    stage as a point\n"
    "  --html FILE       one self-contained report (inline SVG and CSS, no\n"
    "                    script, nothing fetched): run metadata, devices\n"
    "                    and peaks, the device table, the figures, the\n"
    "                    stages (%% of roofline), the accuracy study\n"
    "                    FILE - is standard output (one of the four at\n"
    "                    most); the tables then go to stderr.  Files are\n"
    "                    written whole (a temporary file, mode 0600, renamed\n"
    "                    into place); an existing FILE that is not a\n"
    "                    regular file is refused\n"
    "  --compare FILE    an earlier run's JSON, from this machine or\n"
    "                    another: devices paired by stable name, else by\n"
    "                    platform, name and driver, else by position; for\n"
    "                    each row of the same mode, n, k, D, h and B on the\n"
    "                    paired device, both devices' names, both medians\n"
    "                    and now/baseline; rows on one side only are listed\n"
    "                    (also in --html's report)\n"
    "  --from FILE       measure nothing: print the tables of a saved JSON\n"
    "                    run and write its --csv, --svg, --html (and --json);\n"
    "                    --peak, --no-peak, --precision and --compression\n"
    "                    do not apply\n"
    "  --help            this text\n"
    "\n"
    "Exit status: 0 when everything was measured or reported as too large\n"
    "or over budget, 1 when a device, forward or file failed, 2 for bad\n"
    "usage.\n";

static void
usage(FILE *f, const char *prog)
{
    fprintf(f, usage_text, prog, MAX_REPEAT);
}

static int
parse_modes(const char *list, int modes[CLF_BENCH_MODE_COUNT])
{
    char buf[128];
    char *tok, *save = NULL;
    int any = 0;

    if (strlen(list) >= sizeof buf)
        return -1;
    strcpy(buf, list);
    memset(modes, 0, CLF_BENCH_MODE_COUNT * sizeof *modes);
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        clf_bench_mode m;
        if (clf_bench_mode_parse(tok, &m) != 0)
            return -1;
        modes[m] = 1;
        any = 1;
    }
    return any ? 0 : -1;
}

/* A comma list of precision names into flags indexed by clf_precision. */
static int
parse_precisions(const char *list, int precisions[2])
{
    char buf[64];
    char *tok, *save = NULL;
    int any = 0;

    if (strlen(list) >= sizeof buf)
        return -1;
    strcpy(buf, list);
    precisions[0] = precisions[1] = 0;
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        clf_precision p;
        if (clf_precision_parse(tok, &p) != 0)
            return -1;
        precisions[p] = 1;
        any = 1;
    }
    return any ? 0 : -1;
}

static int
parse_count(const char *s, size_t lo, size_t hi, size_t *out)
{
    size_t v[1], n;

    if (clf_bench_parse_sizes(s, v, 1, &n) != 0 || v[0] < lo || v[0] > hi)
        return -1;
    *out = v[0];
    return 0;
}

static void
set_default(size_t *list, size_t *count, const size_t *values, size_t n)
{
    if (*count != 0)
        return;
    memcpy(list, values, n * sizeof *values);
    *count = n;
}

static int
takes_value(const char *opt)
{
    static const char *const valued[] = {
        "--device", "--n",         "--k",           "--d-model", "--heads",
        "--batch",  "--modes",     "--repeat",      "--budget",  "--seed",
        "--trials", "--json",      "--csv",         "--svg",     "--compare",
        "--from",   "--precision", "--compression", "--block",   "--chunk"};
    size_t i;

    if (strcmp(opt, "--html") == 0 || strcmp(opt, "--baseline") == 0)
        return 1;

    for (i = 0; i < sizeof valued / sizeof valued[0]; i++)
        if (strcmp(opt, valued[i]) == 0)
            return 1;
    return 0;
}

/* The list that a size-list option (--n, --k, --d-model, --heads,
 * --batch) fills, or NULL for another option. */
static size_t *
size_list(struct clf_bench_options *o, const char *opt, size_t **count)
{
    static const char *const names[] = {"--n", "--k", "--d-model", "--heads",
                                        "--batch"};
    size_t *lists[5], *counts[5];
    size_t i;

    lists[0] = o->n, counts[0] = &o->nn;
    lists[1] = o->k, counts[1] = &o->nk;
    lists[2] = o->d, counts[2] = &o->nd;
    lists[3] = o->h, counts[3] = &o->nh;
    lists[4] = o->b, counts[4] = &o->nb;
    for (i = 0; i < 5; i++)
        if (strcmp(opt, names[i]) == 0) {
            *count = counts[i];
            return lists[i];
        }
    return NULL;
}

static int
parse_budget(const char *val, double *out)
{
    char *end;
    double v = strtod(val, &end);

    /* Decimal only: strtod also takes leading space, a sign and hex. */
    if (!((*val >= '0' && *val <= '9') || *val == '.') ||
        strpbrk(val, "xX") != NULL || *end != '\0' || !(v > 0.0) || v > 1e7)
        return -1;
    *out = v;
    return 0;
}

static int
parse_seed(const char *val, unsigned long long *out)
{
    char *end;

    errno = 0;
    *out = strtoull(val, &end, 10);
    /* JSON integers are signed 64-bit */
    if (*val < '0' || *val > '9' || *end != '\0' || errno != 0 ||
        *out > 0x7FFFFFFFFFFFFFFFULL)
        return -1;
    return 0;
}

/* --block and --chunk (--stream's): 0 or 2 (reported), -1 for another
 * option. */
static int
parse_stream_size(struct clf_bench_options *o, const char *opt, const char *val)
{
    size_t *v;

    if (strcmp(opt, "--block") != 0 && strcmp(opt, "--chunk") != 0)
        return -1;
    v = opt[2] == 'b' ? &o->stream_block : &o->stream_chunk;
    if (parse_count(val, 1, 65536, v) == 0)
        return 0;
    fprintf(stderr, "%s: bad %s \"%s\" (1..65536)\n", o->prog, opt, val);
    return 2;
}

/* Options with a number: --repeat, --trials, --budget, --seed, --modes.
 * Returns 0, 2 (reported), or -1 for another option. */
static int
parse_number(struct clf_bench_options *o, const char *opt, const char *val)
{
    if (strcmp(opt, "--modes") == 0) {
        if (parse_modes(val, o->modes) == 0) {
            o->modes_given = 1;
            return 0;
        }
        fprintf(stderr,
                "%s: bad --modes \"%s\" (a comma list of linformer, full, "
                "causal, causal-full)\n",
                o->prog, val);
    } else if (strcmp(opt, "--precision") == 0) {
        if (parse_precisions(val, o->precisions) == 0)
            return 0;
        fprintf(stderr,
                "%s: bad --precision \"%s\" (a comma list of float and "
                "half)\n",
                o->prog, val);
    } else if (strcmp(opt, "--compression") == 0) {
        if (clf_compression_parse(val, &o->compression) == 0) {
            o->compression_given = 1;
            return 0;
        }
        fprintf(stderr,
                "%s: bad --compression \"%s\" (linear, mean, max or "
                "conv)\n",
                o->prog, val);
    } else if (strcmp(opt, "--repeat") == 0) {
        if (parse_count(val, 1, MAX_REPEAT, &o->repeat) == 0)
            return 0;
        fprintf(stderr, "%s: bad --repeat \"%s\" (1..%d)\n", o->prog, val,
                MAX_REPEAT);
    } else if (strcmp(opt, "--trials") == 0) {
        if (parse_count(val, 1, MAX_TRIALS, &o->trials) == 0)
            return 0;
        fprintf(stderr, "%s: bad --trials \"%s\" (1..%d)\n", o->prog, val,
                MAX_TRIALS);
    } else if (strcmp(opt, "--budget") == 0) {
        if (parse_budget(val, &o->budget) == 0)
            return 0;
        fprintf(stderr, "%s: bad --budget \"%s\" (seconds > 0)\n", o->prog,
                val);
    } else if (strcmp(opt, "--seed") == 0) {
        if (parse_seed(val, &o->seed) == 0)
            return 0;
        fprintf(stderr, "%s: bad --seed \"%s\"\n", o->prog, val);
    } else {
        return -1;
    }
    return 2;
}

/* An option that takes a value; returns 0 or 2 (reported). */
static int
parse_value(struct clf_bench_options *o, const char *opt, const char *val)
{
    static const char *const paths[] = {"--device", "--json",    "--csv",
                                        "--svg",    "--compare", "--from"};
    const char **dest[6];
    size_t *list, *cnt = NULL, i;
    int rc;

    /* An empty value is an unset variable in a script: refused before
     * anything is measured rather than failing at the write. */
    if (*val == '\0') {
        fprintf(stderr, "%s: %s wants a value, got \"\" (see --help)\n",
                o->prog, opt);
        return 2;
    }
    dest[0] = &o->device, dest[1] = &o->json, dest[2] = &o->csv;
    dest[3] = &o->svg, dest[4] = &o->compare, dest[5] = &o->from;
    for (i = 0; i < 6; i++)
        if (strcmp(opt, paths[i]) == 0) {
            *dest[i] = val;
            return 0;
        }
    if (strcmp(opt, "--html") == 0) {
        o->html = val;
        return 0;
    }
    if (strcmp(opt, "--baseline") == 0) {
        o->baseline = val;
        return 0;
    }
    if ((rc = parse_stream_size(o, opt, val)) >= 0 ||
        (rc = parse_number(o, opt, val)) >= 0)
        return rc;
    if ((list = size_list(o, opt, &cnt)) == NULL) {
        fprintf(stderr, "%s: unknown option %s (see --help)\n", o->prog, opt);
        return 2;
    }
    if (clf_bench_parse_sizes(val, list, MAX_LIST, cnt) != 0) {
        fprintf(stderr,
                "%s: bad %s \"%s\" (a comma list of up to %d positive "
                "integers)\n",
                o->prog, opt, val, MAX_LIST);
        return 2;
    }
    return 0;
}

/* Parses the command line into *o; returns 0, 1 after --help, or 2. */
static int
parse_args(int argc, char **argv, struct clf_bench_options *o)
{
    int a, rc;

    for (a = 1; a < argc; a++) {
        const char *opt = argv[a];

        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            usage(stdout, o->prog);
            return 1;
        } else if (strcmp(opt, "--accuracy") == 0) {
            o->accuracy = 1;
            continue;
        } else if (strcmp(opt, "--quick") == 0) {
            o->quick = 1;
            continue;
        } else if (strcmp(opt, "--peak") == 0 ||
                   strcmp(opt, "--no-peak") == 0) {
            o->peak = opt[2] == 'p' ? 1 : -1;
            continue;
        } else if (strcmp(opt, "--shard") == 0) {
            o->shard = 1;
            continue;
        } else if (strcmp(opt, "--stream") == 0) {
            o->stream = 1;
            continue;
        }
        if (strncmp(opt, "--", 2) != 0) {
            fprintf(stderr, "%s: unexpected argument \"%s\"\n", o->prog, opt);
            return 2;
        }
        if (!takes_value(opt)) {
            fprintf(stderr, "%s: unknown option %s (see --help)\n", o->prog,
                    opt);
            return 2;
        }
        if (a + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value (see --help)\n", o->prog,
                    opt);
            return 2;
        }
        if ((rc = parse_value(o, opt, argv[++a])) != 0)
            return rc;
    }
    return 0;
}

static void
fill_defaults(struct clf_bench_options *o)
{
    static const size_t n_matrix[] = {512, 1024, 2048, 4096};
    static const size_t n_quick[] = {256, 512, 1024, 2048};
    static const size_t n_acc[] = {2048};
    static const size_t n_acc_quick[] = {1024};
    static const size_t k_acc[] = {32, 64, 128, 256, 512, 1024};
    static const size_t k_acc_quick[] = {32, 64, 128, 256, 512};
    static const size_t k_matrix[] = {256};
    static const size_t d_def[] = {512};
    static const size_t h_def[] = {8};
    static const size_t b_def[] = {1};
    static const size_t n_stream[] = {256, 1024, 4096, 16384};

    if (o->stream) {
        set_default(o->n, &o->nn, n_stream, 4);
        if (o->stream_block == 0)
            o->stream_block = 64;
        if (o->stream_chunk == 0)
            o->stream_chunk = 1;
    }
    if (o->accuracy) {
        /* --n and --k are the study's */
        set_default(o->n, &o->nn, n_acc, 1);
        set_default(o->k, &o->nk, k_acc, 6);
        memcpy(o->acc_n, o->n, o->nn * sizeof *o->n);
        o->acc_nn = o->nn;
        memcpy(o->acc_k, o->k, o->nk * sizeof *o->k);
        o->acc_nk = o->nk;
    } else if (o->quick) {
        set_default(o->acc_n, &o->acc_nn, n_acc_quick, 1);
        set_default(o->acc_k, &o->acc_nk, k_acc_quick, 5);
        set_default(o->n, &o->nn, n_quick, 4);
    }
    if (o->quick) {
        if (o->repeat == 0)
            o->repeat = 9;
        if (!(o->budget > 0.0))
            o->budget = 150.0;
    }
    set_default(o->n, &o->nn, n_matrix, 4);
    set_default(o->k, &o->nk, k_matrix, 1);
    set_default(o->d, &o->nd, d_def, 1);
    set_default(o->h, &o->nh, h_def, 1);
    set_default(o->b, &o->nb, b_def, 1);
    if (!o->modes_given)
        o->modes[CLF_BENCH_LINFORMER] = o->modes[CLF_BENCH_FULL] = 1;
    if (!o->precisions[CLF_PRECISION_HALF])
        o->precisions[CLF_PRECISION_FLOAT] = 1;
    if (o->repeat == 0)
        o->repeat = 15;
    if (o->trials == 0)
        o->trials = 64;
    if (!(o->budget > 0.0))
        o->budget = 600.0;
}

/* Sorts a list ascending (lengths run from short to long, so that the
 * budget is spent on what finishes first) and drops repeats. */
static int
cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;

    return (x > y) - (x < y);
}

static void
sort_sizes(size_t *v, size_t *n)
{
    size_t i, m = 0;

    qsort(v, *n, sizeof *v, cmp_size);
    for (i = 0; i < *n; i++)
        if (m == 0 || v[i] != v[m - 1])
            v[m++] = v[i];
    *n = m;
}

/* Why writing a file failed, from errno. */
static const char *
why_not_written(void)
{
    if (errno == EEXIST)
        return "it exists and is not a regular file: refused";
    return strerror(errno);
}

/* Whether a file option names standard output. */
static int
is_stdout(const char *path)
{
    return path != NULL && strcmp(path, "-") == 0;
}

/* Whether one of the files goes to standard output (then the tables go to
 * standard error), and how many do. */
static int
stdout_taken(const struct clf_bench_options *o)
{
    return is_stdout(o->json) + is_stdout(o->csv) + is_stdout(o->svg) +
           is_stdout(o->html);
}

/* Refuses, before anything is measured, an output path that exists and is
 * not a regular file (it would be refused when written).  Returns 0, or 2
 * (reported). */
static int
check_output_paths(const struct clf_bench_options *o)
{
    const char *const opts[] = {"--json", "--csv", "--svg", "--html"};
    const char *const paths[] = {o->json, o->csv, o->svg, o->html};
    struct stat st;
    size_t i;

    for (i = 0; i < 4; i++)
        if (paths[i] != NULL && !is_stdout(paths[i]) &&
            lstat(paths[i], &st) == 0 && !S_ISREG(st.st_mode)) {
            fprintf(stderr,
                    "%s: %s %s: it exists and is not a regular file: "
                    "refused\n",
                    o->prog, opts[i], paths[i]);
            return 2;
        }
    return 0;
}

/* Writes path with a writer (atomically), or standard output for "-".
 * Returns 0, or -1 with errno set. */
static int
write_to(const char *path, clf_bench_writer write, const clf_bench_report *rep)
{
    if (!is_stdout(path))
        return clf_bench_write_file(path, write, rep);
    errno = 0;
    if (write(stdout, rep) != 0 || fflush(stdout) != 0) {
        if (errno == 0)
            errno = EIO;
        return -1;
    }
    return 0;
}

/* The CSV files: matrix rows to --csv's path, accuracy rows to the same
 * path with -accuracy before its .csv (on standard output, after a blank
 * line).  Returns 1 when one failed. */
static int
write_csvs(const struct clf_bench_options *o, const clf_bench_report *rep)
{
    char path[4096];
    size_t len = strlen(o->csv);
    int bad = 0;

    if (write_to(o->csv, clf_bench_csv_write, rep) != 0) {
        fprintf(stderr, "%s: writing %s: %s\n", o->prog, o->csv,
                why_not_written());
        bad = 1;
    }
    if (rep->naccuracy == 0)
        return bad;
    if (is_stdout(o->csv))
        snprintf(path, sizeof path, "-");
    else if (len >= 4 && strcmp(o->csv + len - 4, ".csv") == 0)
        snprintf(path, sizeof path, "%.*s-accuracy.csv", (int)(len - 4),
                 o->csv);
    else
        snprintf(path, sizeof path, "%s-accuracy.csv", o->csv);
    if ((is_stdout(path) && putchar('\n') == EOF) ||
        write_to(path, clf_bench_csv_accuracy_write, rep) != 0) {
        fprintf(stderr, "%s: writing %s: %s\n", o->prog, path,
                why_not_written());
        bad = 1;
    }
    return bad;
}

/* The HTML report, with the comparison when --compare gave a baseline. */
struct html_job {
    const clf_bench_report *rep, *base;
};

static int
write_html(FILE *f, const void *ctx)
{
    const struct html_job *job = ctx;

    return clf_bench_html_write_compared(f, job->rep, job->base);
}

/* Writes the HTML report to --html's path or standard output; returns 1
 * when that failed. */
static int
write_html_file(const struct clf_bench_options *o, const clf_bench_report *rep,
                const clf_bench_report *base)
{
    struct html_job job;
    int rc;

    job.rep = rep;
    job.base = o->compare != NULL ? base : NULL;
    errno = 0;
    if (is_stdout(o->html))
        rc = write_html(stdout, &job) != 0 || fflush(stdout) != 0 ? -1 : 0;
    else
        rc = clf_bench_write_file_ctx(o->html, write_html, &job);
    if (rc == 0)
        return 0;
    if (errno == 0)
        errno = EIO;
    fprintf(stderr, "%s: writing %s: %s\n", o->prog, o->html,
            why_not_written());
    return 1;
}

static int
write_outputs(const struct clf_bench_options *o, const clf_bench_report *rep,
              const clf_bench_report *base)
{
    int bad = 0;

    if (o->json != NULL && write_to(o->json, clf_bench_json_fwrite, rep) != 0) {
        fprintf(stderr, "%s: writing %s: %s\n", o->prog, o->json,
                why_not_written());
        bad = 1;
    }
    if (o->csv != NULL)
        bad |= write_csvs(o, rep);
    if (o->svg != NULL && rep->nresults == 0) {
        fprintf(stderr, "%s: --svg: no matrix results to plot\n", o->prog);
    } else if (o->svg != NULL &&
               write_to(o->svg, clf_bench_svg_write, rep) != 0) {
        fprintf(stderr, "%s: writing %s: %s\n", o->prog, o->svg,
                why_not_written());
        bad = 1;
    }
    if (o->html != NULL)
        bad |= write_html_file(o, rep, base);
    return bad;
}

/* The name to print: "clinformer bench" when the CLI calls the suite,
 * else the program's base name (without libtool's "lt-" prefix). */
static const char *
program_name(const char *argv0)
{
    const char *base;

    if (argv0 == NULL || strcmp(argv0, "bench") == 0)
        return "clinformer bench";
    base = strrchr(argv0, '/');
    base = base ? base + 1 : argv0;
    if (strncmp(base, "lt-", 3) == 0)
        base += 3;
    return *base ? base : "clinformer-bench";
}

/* Reads --compare's baseline into base; returns 0, or 2 (usage). */
static int
read_baseline(const struct clf_bench_options *o, clf_bench_report *base)
{
    char why[256];

    clf_bench_report_init(base);
    if (o->compare == NULL)
        return 0;
    if (clf_bench_json_read(o->compare, base, why, sizeof why) != 0) {
        fprintf(stderr, "%s: --compare %s: %s\n", o->prog, o->compare, why);
        return 2;
    }
    return 0;
}

/* The report's header: version, start time, host, command and settings. */
static void
fill_header(const struct clf_bench_options *o, int argc, char **argv,
            clf_bench_report *rep)
{
    size_t i, used = 0;
    time_t wall;
    struct tm tmv;

    snprintf(rep->version, sizeof rep->version, "%s", clf_version());
    wall = time(NULL);
    gmtime_r(&wall, &tmv);
    strftime(rep->started, sizeof rep->started, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    if (gethostname(rep->host, sizeof rep->host) != 0)
        rep->host[0] = '\0';
    rep->host[sizeof rep->host - 1] = '\0';
    for (i = 0; i < (size_t)argc; i++) {
        int w = snprintf(rep->command + used, sizeof rep->command - used,
                         "%s%s", i ? " " : "", i == 0 ? o->prog : argv[i]);
        if (w < 0 || (size_t)w >= sizeof rep->command - used)
            break;
        used += (size_t)w;
    }
    (void)clf_bench_loadavg("/proc/loadavg", rep->load_start);
    rep->repeat = o->repeat;
    rep->budget_s = o->budget;
    rep->seed = o->seed;
    rep->quick = o->quick;
}

/* Prints the tables (to stderr when standard output carries JSON, CSV or
 * SVG) and writes the files; returns 1 when a file failed. */
static int
report(const struct clf_bench_options *o, const clf_bench_report *rep,
       const clf_bench_report *base)
{
    FILE *t = stdout_taken(o) ? stderr : stdout;

    if (rep->nresults > 0)
        clf_bench_print_matrix(t, rep);
    if (rep->naccuracy > 0)
        clf_bench_print_accuracy(t, rep);
    if (o->compare != NULL && clf_bench_print_compare(t, rep, base) == 0)
        fprintf(t, "\n--compare %s: no row of this run matches one there\n",
                o->compare);
    if (o->quick)
        clf_bench_print_summary(t, rep);
    fflush(t);
    return write_outputs(o, rep, base);
}

/* The comparison's baseline: --baseline's device among the report's, else
 * (with a warning when it named none of them) the first. */
static void
set_baseline(const struct clf_bench_options *o, clf_bench_report *rep)
{
    long b;

    if (o->baseline == NULL)
        return;
    b = clf_bench_find_device(rep, o->baseline);
    if (b >= 0) {
        rep->baseline = (size_t)b;
        return;
    }
    rep->baseline = 0;
    if (rep->ndevices > 0)
        fprintf(stderr,
                "%s: --baseline \"%s\" names none of the run's devices; "
                "the first is the baseline\n",
                o->prog, o->baseline);
}

/* --baseline must name a device of the machine for a run; with --from,
 * one naming none of the saved run's devices falls back to the first
 * with a warning (set_baseline).  Returns 0, or 2 (reported). */
static int
check_baseline(const struct clf_bench_options *o)
{
    clf_device_info infos[32];
    clf_bench_report all;
    size_t n = 0, i;
    long b;

    if (o->baseline == NULL || o->from != NULL)
        return 0;
    if (clf_devices_list(infos, 32, &n) != 0)
        return 0; /* the run reports it */
    clf_bench_report_init(&all);
    for (i = 0; i < n && i < 32; i++) {
        clf_bench_device *d = clf_bench_report_add_device(&all);
        if (d == NULL)
            break;
        clf_bench_device_describe(d, &infos[i]);
    }
    b = clf_bench_find_device(&all, o->baseline);
    clf_bench_report_free(&all);
    if (b >= 0)
        return 0;
    fprintf(stderr,
            "%s: --baseline \"%s\" names no device (see clinformer "
            "devices)\n",
            o->prog, o->baseline);
    return 2;
}

/* --from measures nothing: an option that says how to measure is a
 * usage error with it; returns 0, or 2 (reported).  Called before the
 * defaults fill the precisions. */
static int
check_from_options(const struct clf_bench_options *o)
{
    const char *what = o->peak > 0   ? "--peak"
                       : o->peak < 0 ? "--no-peak"
                       : o->precisions[CLF_PRECISION_FLOAT] ||
                               o->precisions[CLF_PRECISION_HALF]
                           ? "--precision"
                       : o->compression_given ? "--compression"
                                              : NULL;

    if (o->from == NULL || what == NULL)
        return 0;
    fprintf(stderr, "%s: --from measures nothing: %s does not apply\n", o->prog,
            what);
    return 2;
}

/* --shard writes its own table and files (--json, --csv, --html; no
 * figures, nothing to read back or compare): an option it would ignore is
 * a usage error; returns 0, or 2 (reported). */
static int
check_shard_options(const struct clf_bench_options *o)
{
    const char *names[] = {"--from", "--compare", "--svg", "--baseline"};
    const char *vals[4];
    size_t i;

    vals[0] = o->from, vals[1] = o->compare, vals[2] = o->svg;
    vals[3] = o->baseline;
    for (i = 0; i < 4; i++)
        if (vals[i] != NULL) {
            fprintf(stderr, "%s: --shard takes no %s\n", o->prog, names[i]);
            return 2;
        }
    if (o->accuracy || o->precisions[CLF_PRECISION_HALF] ||
        o->compression != CLF_COMPRESS_LINEAR) {
        fprintf(stderr, "%s: --shard takes no %s\n", o->prog,
                o->accuracy                         ? "--accuracy"
                : o->precisions[CLF_PRECISION_HALF] ? "--precision half"
                                                    : "--compression");
        return 2;
    }
    return 0;
}

/* Writes one of --shard's or --stream's files (the report s) to path, or
 * standard output for "-"; returns 1 when it failed (reported). */
static int
write_run_file(const struct clf_bench_options *o, const char *opt,
               const char *path, clf_bench_ctx_writer write, const void *s)
{
    int rc;

    if (path == NULL)
        return 0;
    errno = 0;
    if (is_stdout(path))
        rc = write(stdout, s) != 0 || fflush(stdout) != 0 ? -1 : 0;
    else
        rc = clf_bench_write_file_ctx(path, write, s);
    if (rc == 0)
        return 0;
    if (errno == 0)
        errno = EIO;
    fprintf(stderr, "%s: %s %s: %s\n", o->prog, opt, path, why_not_written());
    return 1;
}

/* --shard: measures, then writes the files; returns the exit status. */
static int
run_shard(const struct clf_bench_options *o, int argc, char **argv)
{
    clf_bench_report hdr;
    clf_bench_shard_report s;
    int rc, bad = 0;

    clf_bench_report_init(&hdr);
    memset(&s, 0, sizeof s);
    fill_header(o, argc, argv, &hdr);
    rc = clf_bench_shard(o, stdout_taken(o) ? stderr : stdout, &hdr, &s);
    if (s.nrows > 0) {
        bad |= write_run_file(o, "--json", o->json, clf_bench_shard_json_fwrite,
                              &s);
        bad |=
            write_run_file(o, "--csv", o->csv, clf_bench_shard_csv_fwrite, &s);
        bad |= write_run_file(o, "--html", o->html, clf_bench_shard_html_fwrite,
                              &s);
    }
    free(s.rows);
    clf_bench_report_free(&hdr);
    return rc != 0 ? rc : bad;
}

/* --stream: one device, a float layer, its own files (--json, --csv,
 * --html); returns 0, or 2 (reported). */
static int
check_stream_options(const struct clf_bench_options *o)
{
    const char *what = o->from                             ? "--from"
                       : o->compare                        ? "--compare"
                       : o->svg                            ? "--svg"
                       : o->baseline                       ? "--baseline"
                       : o->accuracy                       ? "--accuracy"
                       : o->shard                          ? "--shard"
                       : o->precisions[CLF_PRECISION_HALF] ? "--precision half"
                       : o->compression != CLF_COMPRESS_LINEAR ? "--compression"
                                                               : NULL;

    if (what != NULL) {
        fprintf(stderr, "%s: --stream takes no %s\n", o->prog, what);
        return 2;
    }
    if (o->device != NULL &&
        (strcmp(o->device, "all") == 0 || strchr(o->device, ',') != NULL)) {
        fprintf(stderr, "%s: --stream runs on one device, not %s\n", o->prog,
                o->device);
        return 2;
    }
    if (o->stream_block > o->n[o->nn - 1] ||
        o->stream_chunk > o->n[o->nn - 1]) {
        fprintf(stderr,
                "%s: --stream: --block %zu and --chunk %zu must not pass "
                "the largest n, %zu\n",
                o->prog, o->stream_block, o->stream_chunk, o->n[o->nn - 1]);
        return 2;
    }
    return 0;
}

/* --stream: measures, then writes the files; returns the exit status. */
static int
run_stream(const struct clf_bench_options *o, int argc, char **argv)
{
    clf_bench_report hdr;
    clf_bench_stream_report s;
    int rc, bad = 0;

    clf_bench_report_init(&hdr);
    memset(&s, 0, sizeof s);
    fill_header(o, argc, argv, &hdr);
    rc = clf_bench_stream(o, stdout_taken(o) ? stderr : stdout, &hdr, &s);
    if (s.nrows > 0) {
        bad |= write_run_file(o, "--json", o->json,
                              clf_bench_stream_json_fwrite, &s);
        bad |=
            write_run_file(o, "--csv", o->csv, clf_bench_stream_csv_fwrite, &s);
        bad |= write_run_file(o, "--html", o->html,
                              clf_bench_stream_html_fwrite, &s);
    }
    free(s.rows);
    clf_bench_report_free(&hdr);
    return rc != 0 ? rc : bad;
}

/* Measures, or with --from reads the report back; returns the exit status
 * so far (0, 1 for failures, 2 for a bad --from file), or -1 when there is
 * no device to run on (nothing to report). */
static int
measure(struct clf_bench_options *o, int argc, char **argv,
        clf_bench_report *rep, double t0)
{
    char why[256];
    int failures;

    if (o->from != NULL) {
        if (clf_bench_json_read(o->from, rep, why, sizeof why) != 0) {
            fprintf(stderr, "%s: --from %s: %s\n", o->prog, o->from, why);
            return 2;
        }
        o->quick = rep->quick;
        set_baseline(o, rep);
        return 0;
    }
    fill_header(o, argc, argv, rep);
    failures = clf_bench_run(o, rep, t0);
    (void)clf_bench_loadavg("/proc/loadavg", rep->load_end);
    if (failures < 0)
        return -1;
    set_baseline(o, rep);
    return failures != 0 ? 1 : 0;
}

int
clf_bench_main(int argc, char **argv)
{
    struct clf_bench_options o;
    clf_bench_report rep, base;
    char why[256];
    double t0;
    int rc;

    memset(&o, 0, sizeof o);
    o.prog = program_name(argc > 0 ? argv[0] : NULL);
    o.seed = 1;
    rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    if (check_from_options(&o) != 0)
        return 2;
    if (!o.stream && (o.stream_block != 0 || o.stream_chunk != 0)) {
        fprintf(stderr, "%s: --block and --chunk are --stream's\n", o.prog);
        return 2;
    }
    fill_defaults(&o);
    if (clf_bench_check_sizes(&o, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n", o.prog, why);
        return 2;
    }
    if (stdout_taken(&o) > 1) {
        fprintf(stderr,
                "%s: only one of --json, --csv, --svg and --html can be - "
                "(standard output)\n",
                o.prog);
        return 2;
    }
    if (check_output_paths(&o) != 0)
        return 2;
    sort_sizes(o.n, &o.nn);
    sort_sizes(o.k, &o.nk);
    sort_sizes(o.d, &o.nd);
    sort_sizes(o.h, &o.nh);
    sort_sizes(o.b, &o.nb);
    sort_sizes(o.acc_n, &o.acc_nn);
    sort_sizes(o.acc_k, &o.acc_nk);
    if (o.stream)
        return check_stream_options(&o) != 0 ? 2 : run_stream(&o, argc, argv);
    if (o.shard)
        return check_shard_options(&o) != 0 ? 2 : run_shard(&o, argc, argv);
    if (read_baseline(&o, &base) != 0 || check_baseline(&o) != 0)
        return 2;
    clf_bench_report_init(&rep);
    t0 = clf_bench_now();
    rc = measure(&o, argc, argv, &rep, t0);
    if (rc == 0 || rc == 1) {
        if (report(&o, &rep, &base) != 0)
            rc = 1;
        if (o.from == NULL)
            fprintf(stderr, "[%6.1f s] done in %.1f s (budget %.0f s)\n",
                    clf_bench_now() - t0, rep.wall_s, o.budget);
    }
    clf_bench_report_free(&rep);
    clf_bench_report_free(&base);
    return rc < 0 ? 1 : rc;
}
