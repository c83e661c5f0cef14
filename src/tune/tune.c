/* Per-device GEMM tuning.  CLBlast's built-in parameters for an unknown
 * device (PoCL's CPU device, say) can be several times slower than the best
 * ones.  clf_tune() times real layer forwards under candidate parameter sets
 * of CLBlast's Xgemm kernel (through CLBlastOverrideParameters) and of its
 * direct/indirect switch, and stores the fastest per platform, device and
 * driver in the cache directory; every context on that device applies the
 * stored choice when it is created.
 *
 * The file is plain text, one record a line:
 *   best Xgemm NAME=VALUE ...          the parameters applied
 *   best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=VALUE
 *                                      the direct/indirect switch applied
 *   tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE=VALUE ms=T
 *   tried Xgemm NAME=VALUE ... ms=T    each candidate measured (resuming
 *                                      skips these)
 *   baseline ms=T                      the untuned forward
 *   best Tiled MWG=V NWG=V KWG=V MDIM=V NDIM=V VW=V
 *                                      the tiled GEMM kernel's sizes
 *                                      (gemm_tiled.c), applied per context
 *   tried Tiled ... ms=T               each set of sizes measured
 * A file without Tiled records (written before the tiled kernel) is read
 * as before, and the tiled kernel keeps its default sizes. */
#include "tune/tune.h"

#include <clblast_c.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPARAM CLF_TUNE_NPARAM
#define MAX_CANDS CLF_TUNE_MAX_TRIED
#define TUNE_FILE_MAX (1u << 20) /* a real one is a few kilobytes */
#define MI_COUNT 5
/* A build quicker than this came from a cache (the driver's own, such as
 * PoCL's under ~/.cache/pocl, which outlives clinformer's): it says
 * nothing about the next one, which may be a real compile. */
#define CACHED_BUILD_S 0.25

static const char *const xgemm_names[NPARAM] = {
    "GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
    "NDIMC", "NWG",  "SA",  "SB",  "STRM",  "STRN",  "VWM", "VWN"};

struct cand {
    size_t v[NPARAM];
};

enum {
    P_GEMMK,
    P_KREG,
    P_KWG,
    P_KWI,
    P_MDIMA,
    P_MDIMC,
    P_MWG,
    P_NDIMB,
    P_NDIMC,
    P_NWG,
    P_SA,
    P_SB,
    P_STRM,
    P_STRN,
    P_VWM,
    P_VWN
};

static const size_t mi_values[MI_COUNT] = {128, 256, 512, 1024, 2048};

void
clf__tune_path(const clf_device_info *info, char *buf, size_t cap)
{
    char dir[4096];
    uint64_t h = 0;

    clf__cache_dir(dir, sizeof dir);
    if (dir[0] == '\0') {
        buf[0] = '\0';
        return;
    }
    h = clf__hash64(info->platform, strlen(info->platform) + 1, h);
    h = clf__hash64(info->name, strlen(info->name) + 1, h);
    h = clf__hash64(info->driver, strlen(info->driver) + 1, h);
    if (snprintf(buf, cap, "%s/tune-%016llx.txt", dir, (unsigned long long)h) >=
        (int)cap)
        buf[0] = '\0';
}

static void
tune_path(const clf_context *ctx, char *buf, size_t cap)
{
    clf__tune_path(&ctx->info, buf, cap);
}

static void
format_cand(const struct cand *c, char *buf, size_t cap)
{
    size_t len = 0, i;

    buf[0] = '\0';
    for (i = 0; i < NPARAM && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s=%zu", i ? " " : "",
                                xgemm_names[i], c->v[i]);
}

/* ---------------------------------------------------------------------
 * The tune file, read as if hostile: every line a known record, every
 * value a number in range, and the Xgemm parameters inside the constraints
 * of CLBlast's Xgemm kernel and the device's limits.  Anything else makes
 * the whole file ignored: a zero tile size divides by zero in the kernel,
 * a zero unroll factor never ends its loop, and values the kernel was not
 * written for give wrong results or make CLBlast print. */

static int why_line(char *why, size_t cap, size_t line, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int
why_line(char *why, size_t cap, size_t line, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(why, cap, "line %zu: ", line);

    if (n >= 0 && (size_t)n < cap) {
        va_start(ap, fmt);
        vsnprintf(why + n, cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A decimal number of at most max, digits only (no sign, no space). */
static int
parse_size_at_most(const char *s, size_t max, size_t *out)
{
    size_t v = 0;

    if (*s == '\0')
        return -1;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (size_t)(*s - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

/* "ms=T": 0 (a candidate that failed) or a time from 0.001 ms (the
 * three decimals the file is written with: a smaller positive time was
 * not written here, and would win every comparison on resume) to a day. */
static int
parse_ms(const char *tok, double *out)
{
    char *end;
    double v;

    if (strncmp(tok, "ms=", 3) != 0 || tok[3] == '\0' || tok[3] == '-' ||
        tok[3] == '+' || tok[3] == ' ')
        return -1;
    v = strtod(tok + 3, &end);
    if (*end != '\0' || !isfinite(v) || (v != 0.0 && v < 1e-3) || v < 0.0 ||
        v > 86400e3)
        return -1;
    *out = v;
    return 0;
}

/* The 16 "NAME=V" tokens of an Xgemm record, each name once. */
static int
parse_params(char *const *tok, size_t ntok, size_t *v, size_t line, char *why,
             size_t cap)
{
    unsigned seen = 0;
    size_t t, i;

    if (ntok != NPARAM)
        return why_line(why, cap, line, "%zu Xgemm parameters, not %d", ntok,
                        NPARAM);
    for (t = 0; t < ntok; t++) {
        const char *eq = strchr(tok[t], '=');
        for (i = 0; i < NPARAM && eq != NULL; i++)
            if (strlen(xgemm_names[i]) == (size_t)(eq - tok[t]) &&
                strncmp(tok[t], xgemm_names[i], (size_t)(eq - tok[t])) == 0)
                break;
        if (eq == NULL || i == NPARAM)
            return why_line(why, cap, line, "unknown Xgemm parameter %s",
                            tok[t]);
        if (seen & (1u << i))
            return why_line(why, cap, line, "%s given twice", xgemm_names[i]);
        if (parse_size_at_most(eq + 1, 1u << 20, &v[i]) != 0)
            return why_line(why, cap, line,
                            "%s=%s is not a number up to "
                            "1048576",
                            xgemm_names[i], eq + 1);
        seen |= 1u << i;
    }
    return 0;
}

static int
is_pow2(size_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

/* Ranges: the switches 0 or 1, the vector widths 1..16 and every other
 * size 1..1024, all powers of two as CLBlast's tuner only ever uses. */
static int
check_ranges(const size_t *v, char *why, size_t cap)
{
    size_t i;

    for (i = 0; i < NPARAM; i++) {
        int flag = i == P_GEMMK || i == P_SA || i == P_SB || i == P_STRM ||
                   i == P_STRN;
        size_t max = i == P_VWM || i == P_VWN ? 16 : 1024;
        if (flag && v[i] > 1) {
            snprintf(why, cap, "%s=%zu is not 0 or 1", xgemm_names[i], v[i]);
            return -1;
        }
        if (!flag && (!is_pow2(v[i]) || v[i] > max)) {
            snprintf(why, cap, "%s=%zu is not a power of two from 1 to %zu",
                     xgemm_names[i], v[i], max);
            return -1;
        }
    }
    return 0;
}

/* x must be a multiple of y * z (z = NPARAM for none): whole work per
 * work-item, whole loads per work-item, a whole unrolled loop. */
static const struct {
    unsigned char x, y, z;
} multiples[] = {{P_KWG, P_KWI, NPARAM},
                 {P_MWG, P_MDIMC, P_VWM},
                 {P_NWG, P_NDIMC, P_VWN},
                 {P_MWG, P_MDIMA, P_VWM},
                 {P_NWG, P_NDIMB, P_VWN}};

static int
check_multiples(const size_t *v, char *why, size_t cap)
{
    size_t i, kdima, kdimb, wg = v[P_MDIMC] * v[P_NDIMC];

    for (i = 0; i < sizeof multiples / sizeof multiples[0]; i++) {
        size_t y = v[multiples[i].y], z = 1;
        if (multiples[i].z != NPARAM)
            z = v[multiples[i].z];
        if (v[multiples[i].x] % (y * z) != 0) {
            snprintf(why, cap, "%s=%zu is not a multiple of %s*%s=%zu",
                     xgemm_names[multiples[i].x], v[multiples[i].x],
                     xgemm_names[multiples[i].y],
                     multiples[i].z != NPARAM ? xgemm_names[multiples[i].z]
                                              : "1",
                     y * z);
            return -1;
        }
    }
    /* A work-group of MDIMC*NDIMC reshaped into KDIMA x MDIMA and
     * KDIMB x NDIMB to load the tiles. */
    if (wg % v[P_MDIMA] != 0 || wg % v[P_NDIMB] != 0) {
        snprintf(why, cap,
                 "MDIMC*NDIMC=%zu is not a multiple of MDIMA and "
                 "NDIMB",
                 wg);
        return -1;
    }
    kdima = wg / v[P_MDIMA];
    kdimb = wg / v[P_NDIMB];
    if (v[P_GEMMK] == 0 && (v[P_KWG] % kdima != 0 || v[P_KWG] % kdimb != 0)) {
        snprintf(why, cap,
                 "KWG=%zu is not a multiple of "
                 "MDIMC*NDIMC/MDIMA=%zu and MDIMC*NDIMC/NDIMB=%zu",
                 v[P_KWG], kdima, kdimb);
        return -1;
    }
    return 0;
}

/* The kernel with 2-D register tiling (GEMMK=1). */
static int
check_gemmk1(const size_t *v, char *why, size_t cap)
{
    if (v[P_GEMMK] != 1)
        return 0;
    if (v[P_KREG] % v[P_VWN] != 0) {
        snprintf(why, cap, "KREG=%zu is not a multiple of VWN=%zu", v[P_KREG],
                 v[P_VWN]);
        return -1;
    }
    if (v[P_MDIMC] != v[P_MDIMA] || v[P_NDIMC] != v[P_NDIMB]) {
        snprintf(why, cap, "GEMMK=1 needs MDIMA=MDIMC and NDIMB=NDIMC");
        return -1;
    }
    return 0;
}

/* The device: work-group size and local memory (floats of the A and B
 * tiles kept there when SA, SB). */
static int
check_device(const size_t *v, const struct clf__limits *lim, char *why,
             size_t cap)
{
    size_t wg = v[P_MDIMC] * v[P_NDIMC];
    size_t local =
        4 * (v[P_SA] * v[P_KWG] * v[P_MWG] + v[P_SB] * v[P_KWG] * v[P_NWG]);

    if (wg > lim->max_wg || v[P_MDIMC] > lim->max_item[0] ||
        v[P_NDIMC] > lim->max_item[1]) {
        snprintf(why, cap,
                 "a work-group of MDIMC=%zu x NDIMC=%zu exceeds "
                 "the device's %zu (%zu x %zu)",
                 v[P_MDIMC], v[P_NDIMC], lim->max_wg, lim->max_item[0],
                 lim->max_item[1]);
        return -1;
    }
    if (local > lim->local_mem) {
        snprintf(why, cap,
                 "%zu bytes of local memory for SA/SB tiles exceed "
                 "the device's %llu",
                 local, lim->local_mem);
        return -1;
    }
    return 0;
}

int
clf__tune_check_xgemm(const size_t *v, const struct clf__limits *lim, char *why,
                      size_t cap)
{
    if (check_ranges(v, why, cap) != 0 || check_multiples(v, why, cap) != 0 ||
        check_gemmk1(v, why, cap) != 0 || check_device(v, lim, why, cap) != 0)
        return -1;
    return 0;
}

/* Splits a line at spaces and tabs; -1 when it has more than cap words. */
static int
split(char *s, char **tok, size_t cap, size_t *n)
{
    *n = 0;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\r')
            *s++ = '\0';
        if (*s == '\0')
            return 0;
        if (*n == cap)
            return -1;
        tok[(*n)++] = s;
        while (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\r')
            s++;
    }
}

static int
parse_min_indirect(const char *tok, size_t *out)
{
    const char *name = "XGEMM_MIN_INDIRECT_SIZE=";

    if (strncmp(tok, name, strlen(name)) != 0 ||
        parse_size_at_most(tok + strlen(name), 1u << 16, out) != 0 || *out == 0)
        return -1;
    return 0;
}

static int
record_xgemm(struct clf__tune_file *tf, char **tok, size_t n, int tried,
             size_t line, char *why, size_t cap)
{
    size_t *v = tried ? tf->tried[tf->ntried] : tf->best;

    if (tried && tf->ntried == CLF_TUNE_MAX_TRIED)
        return why_line(why, cap, line, "more than %d tried records",
                        CLF_TUNE_MAX_TRIED);
    if (!tried && tf->have_best)
        return why_line(why, cap, line, "a second best Xgemm record");
    if (tried && (n < 1 || parse_ms(tok[n - 1], &tf->tried_ms[tf->ntried])))
        return why_line(why, cap, line, "no valid ms=T at the end");
    if (parse_params(tok, n - (size_t)tried, v, line, why, cap) != 0)
        return -1;
    if (tried) {
        tf->ntried++;
        return 0;
    }
    tf->have_best = 1;
    return 0;
}

/* "best Tiled NAME=V ..." or "tried Tiled NAME=V ... ms=T": the six sizes,
 * each once, numbers up to 4096 (their rules are checked after the whole
 * file is read). */
static int
record_tiled(struct clf__tune_file *tf, char **tok, size_t n, int tried,
             size_t line, char *why, size_t cap)
{
    struct clf__tiled_cfg *c =
        tried ? &tf->tiled_tried[tf->ntiled_tried] : &tf->tiled;
    unsigned seen = 0;
    size_t t, i;

    if (tried && tf->ntiled_tried == CLF_TUNE_MAX_TILED)
        return why_line(why, cap, line, "more than %d tried Tiled records",
                        CLF_TUNE_MAX_TILED);
    if (!tried && tf->have_tiled)
        return why_line(why, cap, line, "a second best Tiled record");
    if (tried &&
        (n < 1 || parse_ms(tok[n - 1], &tf->tiled_tried_ms[tf->ntiled_tried])))
        return why_line(why, cap, line, "no valid ms=T at the end");
    n -= (size_t)tried;
    if (n != CLF_TILED_NPARAM)
        return why_line(why, cap, line, "%zu Tiled sizes, not %d", n,
                        CLF_TILED_NPARAM);
    for (t = 0; t < n; t++) {
        const char *eq = strchr(tok[t], '=');
        for (i = 0; i < CLF_TILED_NPARAM && eq != NULL; i++)
            if (strlen(clf__tiled_names[i]) == (size_t)(eq - tok[t]) &&
                strncmp(tok[t], clf__tiled_names[i], (size_t)(eq - tok[t])) ==
                    0)
                break;
        if (eq == NULL || i == CLF_TILED_NPARAM)
            return why_line(why, cap, line, "unknown Tiled size %s", tok[t]);
        if (seen & (1u << i))
            return why_line(why, cap, line, "%s given twice",
                            clf__tiled_names[i]);
        if (parse_size_at_most(eq + 1, 4096, &c->v[i]) != 0)
            return why_line(why, cap, line, "%s=%s is not a number up to 4096",
                            clf__tiled_names[i], eq + 1);
        seen |= 1u << i;
    }
    if (tried)
        tf->ntiled_tried++;
    else
        tf->have_tiled = 1;
    return 0;
}

static int
record_gemm_routine(struct clf__tune_file *tf, char **tok, size_t n, int tried,
                    size_t line, char *why, size_t cap)
{
    size_t v;
    double ms;

    if (n != 1u + (size_t)tried || parse_min_indirect(tok[0], &v) != 0 ||
        (tried && parse_ms(tok[1], &ms) != 0))
        return why_line(why, cap, line,
                        "not XGEMM_MIN_INDIRECT_SIZE=V (1 to "
                        "65536)%s",
                        tried ? " ms=T" : "");
    if (tried)
        return 0;
    if (tf->min_indirect != 0)
        return why_line(why, cap, line, "a second best GemmRoutine record");
    tf->min_indirect = v;
    return 0;
}

/* "baseline ms=T" (the untuned forward) or "compile ms=T" (the last
 * kernel build measured under new parameters), T > 0. */
static int
record_time(double *out, char **tok, size_t n, size_t line, char *why,
            size_t cap)
{
    if (n != 2 || parse_ms(tok[1], out) != 0 || *out <= 0.0)
        return why_line(why, cap, line, "not %s ms=T (T > 0)", tok[0]);
    return 0;
}

/* One line, NUL-terminated and writable. */
static int
parse_line(struct clf__tune_file *tf, char *s, size_t line, char *why,
           size_t cap)
{
    char *tok[NPARAM + 4];
    size_t n;
    int tried;

    if (split(s, tok, NPARAM + 4, &n) != 0)
        return why_line(why, cap, line, "too many fields");
    if (n == 0 || tok[0][0] == '#')
        return 0;
    if (strcmp(tok[0], "baseline") == 0 || strcmp(tok[0], "compile") == 0)
        return record_time(tok[0][0] == 'b' ? &tf->baseline_ms
                                            : &tf->compile_ms,
                           tok, n, line, why, cap);
    tried = strcmp(tok[0], "tried") == 0;
    if ((tried || strcmp(tok[0], "best") == 0) && n >= 2) {
        if (strcmp(tok[1], "Xgemm") == 0)
            return record_xgemm(tf, tok + 2, n - 2, tried, line, why, cap);
        if (strcmp(tok[1], "GemmRoutine") == 0)
            return record_gemm_routine(tf, tok + 2, n - 2, tried, line, why,
                                       cap);
        if (strcmp(tok[1], "Tiled") == 0)
            return record_tiled(tf, tok + 2, n - 2, tried, line, why, cap);
    }
    return why_line(why, cap, line, "unknown record %s", tok[0]);
}

int
clf__tune_parse(const char *buf, size_t len, const struct clf__limits *lim,
                struct clf__tune_file *tf, char *why, size_t cap)
{
    char s[1024];
    size_t pos = 0, line = 0;

    memset(tf, 0, sizeof *tf);
    why[0] = '\0';
    if (len > TUNE_FILE_MAX) {
        snprintf(why, cap, "larger than %u bytes", TUNE_FILE_MAX);
        return -1;
    }
    while (pos < len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t n = nl != NULL ? (size_t)(nl - (buf + pos)) : len - pos;
        line++;
        if (n >= sizeof s || memchr(buf + pos, '\0', n) != NULL)
            return why_line(why, cap, line, "%s",
                            n >= sizeof s ? "longer than 1023 "
                                            "bytes"
                                          : "holds a NUL byte");
        memcpy(s, buf + pos, n);
        s[n] = '\0';
        if (parse_line(tf, s, line, why, cap) != 0)
            return -1;
        pos += n + 1;
    }
    if (tf->have_best &&
        clf__tune_check_xgemm(tf->best, lim, s, sizeof s) != 0) {
        snprintf(why, cap, "best Xgemm: %s", s);
        return -1;
    }
    if (tf->have_tiled && clf__tiled_check(&tf->tiled, lim, s, sizeof s) != 0) {
        snprintf(why, cap, "best Tiled: %s", s);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */

static int
apply_xgemm(clf_context *ctx, const struct cand *c)
{
    CLBlastStatusCode st =
        CLBlastOverrideParameters(ctx->device, "Xgemm", CLBlastPrecisionSingle,
                                  NPARAM, (const char **)xgemm_names, c->v);
    if (st != CLBlastSuccess)
        return clf__fail((int)st,
                         "CLBlastOverrideParameters(Xgemm) failed "
                         "(%d)",
                         (int)st);
    return 0;
}

static int
apply_min_indirect(clf_context *ctx, size_t v)
{
    const char *name = "XGEMM_MIN_INDIRECT_SIZE";
    CLBlastStatusCode st = CLBlastOverrideParameters(
        ctx->device, "GemmRoutine", CLBlastPrecisionSingle, 1, &name, &v);
    if (st != CLBlastSuccess)
        return clf__fail((int)st,
                         "CLBlastOverrideParameters(GemmRoutine) failed (%d)",
                         (int)st);
    return 0;
}

/* Reads the file whole: 1 with *buf set, 0 when there is none, -1 when it
 * cannot be trusted or read (the reason in why).  The directory must be
 * private: a file others could have planted is not read. */
static int
read_tune_file(const char *path, char **buf, size_t *len, char *why, size_t cap)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    struct stat st;

    *buf = NULL;
    if (lstat(path, &st) != 0)
        return 0;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1,
             slash ? path : ".");
    if (clf__dir_private(dir) != 0 ||
        clf__file_read_cache(path, "tune file", TUNE_FILE_MAX, buf, len) != 0) {
        snprintf(why, cap, "%s", clf_last_error());
        return -1;
    }
    return 1;
}

/* Loads ctx's tune file into tf: 1 when a valid one was read, 0 when there
 * is none or it is invalid (then ignored whole, with a warning kept in the
 * context). */
static int
load_tune_file(clf_context *ctx, const char *path, struct clf__tune_file *tf)
{
    struct clf__limits lim;
    /* Room for a whole line of the file (at most 1023 bytes) and its
     * number, so that the text rejected is quoted whole. */
    char why[1100];
    size_t len = 0;
    char *buf = NULL;
    int rc;

    memset(tf, 0, sizeof *tf);
    if (path[0] == '\0')
        return 0;
    rc = read_tune_file(path, &buf, &len, why, sizeof why);
    if (rc == 0)
        return 0;
    if (rc == 1) {
        clf__device_limits(ctx, &lim);
        rc = clf__tune_parse(buf, len, &lim, tf, why, sizeof why);
        free(buf);
    }
    if (rc != 0) {
        snprintf(ctx->warnings, sizeof ctx->warnings,
                 "ignored the tune file %s: %s", path, why);
        memset(tf, 0, sizeof *tf);
        return 0;
    }
    return 1;
}

/* The stored sizes of the tiled kernel (this context only), else its
 * defaults; named in ctx->tuned, so kernel choices are made again. */
static int
apply_tiled(clf_context *ctx, const struct clf__tune_file *tf)
{
    struct clf__tiled_cfg d;
    size_t len = strlen(ctx->tuned);

    clf__tiled_default(&d);
    if (!tf->have_tiled) {
        if (memcmp(clf__tiled_state(ctx)->cfg.v, d.v, sizeof d.v) == 0)
            return 0;
        return clf__tiled_set(ctx, &d);
    }
    if (clf__tiled_set(ctx, &tf->tiled) != 0) {
        /* The kernel of those sizes failed to build here: the defaults
         * stay, and the reason is kept. */
        snprintf(ctx->warnings, sizeof ctx->warnings,
                 "kept the tiled GEMM's default sizes: %s", clf_last_error());
        return 0;
    }
    if (len + 8 < sizeof ctx->tuned) {
        snprintf(ctx->tuned + len, sizeof ctx->tuned - len, "%sTiled ",
                 len ? "; " : "");
        len = strlen(ctx->tuned);
        clf__tiled_format(&tf->tiled, ctx->tuned + len,
                          sizeof ctx->tuned - len);
    }
    return 0;
}

/* Applies the stored tuning of ctx's device to CLBlast, process-wide;
 * the caller holds the context lock (ctx->tuned is part of the key that
 * forwards of other threads read). */
static int
apply_stored_locked(clf_context *ctx)
{
    char path[4300];
    const char *env = getenv("CLINFORMER_TUNE");
    struct clf__tune_file *tf;
    int rc = 0;

    ctx->tuned[0] = '\0';
    if (env != NULL && strcmp(env, "off") == 0)
        return 0;
    tf = malloc(sizeof *tf);
    if (tf == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    tune_path(ctx, path, sizeof path);
    if (load_tune_file(ctx, path, tf) == 1 && tf->have_best) {
        struct cand c;
        memcpy(c.v, tf->best, sizeof c.v);
        rc = apply_xgemm(ctx, &c);
        if (rc == 0) {
            memcpy(ctx->tuned, "Xgemm ", 7);
            format_cand(&c, ctx->tuned + 6, sizeof ctx->tuned - 6);
        }
    }
    if (rc == 0 && tf->min_indirect != 0 &&
        (rc = apply_min_indirect(ctx, tf->min_indirect)) == 0) {
        size_t len = strlen(ctx->tuned);
        snprintf(ctx->tuned + len, sizeof ctx->tuned - len,
                 "%sXGEMM_MIN_INDIRECT_SIZE=%zu", len ? "; " : "",
                 tf->min_indirect);
    }
    if (rc == 0)
        rc = apply_tiled(ctx, tf);
    free(tf);
    return rc;
}

static int
apply_stored(clf_context *ctx)
{
    int rc;

    clf__lock(ctx);
    rc = apply_stored_locked(ctx);
    clf__unlock(ctx);
    return rc;
}

/* A new context applies nothing: CLBlast's parameter overrides hold for
 * every CLBlast user of the process on the device, so applying them is
 * left to the process's owner (clf_tune_apply_process_wide). */
CLF_EXTERN int
clf_tune_apply_process_wide(clf_context *ctx)
{
    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    return apply_stored(ctx);
}

CLF_EXTERN const char *
clf_context_tuning(const clf_context *ctx)
{
    if (ctx == NULL || ctx->tuned[0] == '\0')
        return "";
    return ctx->tuned;
}

/* A curated grid around parameters that work on CPU and GPU OpenCL
 * runtimes; the first entries are the likeliest winners so that a short
 * budget still finds a good one. */
static size_t
make_candidates(struct cand *out, size_t cap, const struct clf__limits *lim)
{
    char why[256];
    static const size_t mwg[] = {64, 32, 128}, nwg[] = {64, 32, 128};
    static const size_t vwm[] = {1, 2, 4}, vwn[] = {4, 1, 2, 8};
    static const size_t kwg[] = {32, 16};
    size_t n = 0, a, b, c, d, e;

    for (e = 0; e < 2; e++)
        for (c = 0; c < 3; c++)
            for (d = 0; d < 4; d++)
                for (a = 0; a < 3; a++)
                    for (b = 0; b < 3; b++) {
                        struct cand x;
                        memset(&x, 0, sizeof x);
                        x.v[P_GEMMK] = 0;
                        x.v[P_KREG] = 1;
                        x.v[P_KWG] = kwg[e];
                        x.v[P_KWI] = 2;
                        x.v[P_MDIMA] = 8;
                        x.v[P_MDIMC] = 8;
                        x.v[P_NDIMB] = 8;
                        x.v[P_NDIMC] = 8;
                        x.v[P_MWG] = mwg[a];
                        x.v[P_NWG] = nwg[b];
                        x.v[P_VWM] = vwm[c];
                        x.v[P_VWN] = vwn[d];
                        if (clf__tune_check_xgemm(x.v, lim, why, sizeof why) !=
                            0)
                            continue;
                        if (n < cap)
                            out[n++] = x;
                    }
    return n;
}

/* Median seconds of `runs` forwards after one warm-up, which also pays any
 * kernel build: its time beyond the median goes to *build (when not
 * NULL). */
static int
time_forward_ex(clf_context *ctx, clf_attention *att, cl_mem x, cl_mem y,
                size_t n, int runs, double *out, double *build)
{
    double t[8], t0 = clf__now_s(), warm;
    int r, i, j;

    if (clf_attention_forward_cl(att, x, 0, y, 0, 1, n) != 0 ||
        clf_context_finish(ctx) != 0)
        return -1;
    warm = clf__now_s() - t0;
    for (r = 0; r < runs; r++) {
        t0 = clf__now_s();
        if (clf_attention_forward_cl(att, x, 0, y, 0, 1, n) != 0 ||
            clf_context_finish(ctx) != 0)
            return -1;
        t[r] = clf__now_s() - t0;
    }
    for (i = 1; i < runs; i++)
        for (j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double s = t[j];
            t[j] = t[j - 1];
            t[j - 1] = s;
        }
    *out = t[runs / 2];
    if (build != NULL)
        *build = warm > *out ? warm - *out : 0.0;
    return 0;
}

static int
time_forward(clf_context *ctx, clf_attention *att, cl_mem x, cl_mem y, size_t n,
             int runs, double *out)
{
    return time_forward_ex(ctx, att, x, y, n, runs, out, NULL);
}

/* 0 when the forward's output y matches ref to 1e-4 of its scale: a
 * parameter set that computes wrong results is never chosen, however
 * fast. */
static int
same_output(clf_context *ctx, cl_mem y, const float *ref, float *tmp,
            size_t count)
{
    double scale = 1e-30, err = 0.0;
    size_t i;

    if (clEnqueueReadBuffer(ctx->queue, y, CL_TRUE, 0, count * sizeof(float),
                            tmp, 0, NULL, NULL) != CL_SUCCESS)
        return -1;
    for (i = 0; i < count; i++) {
        double d = fabs((double)tmp[i] - ref[i]);
        if (fabs(ref[i]) > scale)
            scale = fabs(ref[i]);
        if (!(d <= err))
            err = isnan(d) ? INFINITY : d;
    }
    return err <= 1e-4 * scale ? 0 : -1;
}

static void say(const clf_tune_opts *o, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void
say(const clf_tune_opts *o, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    if (o->progress == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->progress(line, o->user);
}

/* One call of clf_tune.  The budget bounds the whole call, kernel builds
 * included: before each step that runs forwards the clock is read, and a
 * step starts only when it still fits: the longest step's forwards so far,
 * and for a step under new parameters (an Xgemm candidate, a switch
 * setting, a tiled set: each a new kernel to build, tens of seconds on a
 * CPU runtime) one build as build_estimate() expects it.  Steps whose
 * layer was built from a cache say nothing about what a new build costs,
 * so builds are timed apart from the forwards. */
struct run {
    clf_context *ctx;
    clf_tune_opts o;
    char path[4300];
    clf_attention *att;
    cl_mem x, y;
    float *ref, *got;
    size_t count; /* floats of a layer's input */
    struct cand cands[MAX_CANDS];
    double tried_ms[MAX_CANDS]; /* -1: not measured, 0: failed */
    size_t ncand, done, measured;
    size_t nmi; /* the switch settings searched: the first nmi of mi_values */
    double start, step_max; /* step_max: the longest step's forwards */
    double build_s;         /* the longest build under new parameters in this
                               call; 0: none yet */
    double stored_build_s;  /* the one an earlier call stored; 0: none */
    double setup_build_s;   /* the setup's (perhaps from caches) */
    size_t skipped;         /* candidates left out for the budget */
    size_t tiled_tried, tiled_skipped, mi_tried, mi_skipped;
    double base; /* seconds, 0 before it is known */
    struct cand best;
    double best_ms;
    int have_best;
    size_t prev_mi, best_mi;
    double best_mi_ms, mi_ms[MI_COUNT];              /* -1: not measured */
    struct clf__tiled_cfg tiled[CLF_TUNE_MAX_TILED]; /* the tiled space */
    double tiled_ms[CLF_TUNE_MAX_TILED]; /* -1: not measured, 0: failed */
    size_t ntiled, tiled_best;           /* tiled_best: ntiled for none */
    int forced; /* the context's GEMM and attention choices overridden */
    int was_gemm, was_attend; /* what they were pinned to before */
};

/* Whether a step expected to take the longest step so far, `reserve`
 * times over, still fits in the budget. */
static int
may_start(const struct run *r, double reserve)
{
    return clf__now_s() - r->start + reserve * r->step_max <= r->o.budget_s;
}

/* Seconds a new kernel build is expected to take: the longest measured in
 * this call (builds from a cache aside, see CACHED_BUILD_S), else the one
 * stored by the last call that measured one, else (none measured on this device
 * yet) the setup's build or, when that came from a cache, a guess by the kind
 * of device: CLBlast's Xgemm kernel takes tens of seconds to compile on a CPU
 * runtime such as PoCL, seconds on GPU drivers.  A guess too high only delays
 * tuning to a call with a larger budget; too low, the call overruns by one
 * build. */
static double
build_estimate(const struct run *r)
{
    double guess = r->ctx->info.is_gpu ? 10.0 : 60.0;

    if (r->build_s > 0.0)
        return r->build_s;
    if (r->stored_build_s > 0.0)
        return r->stored_build_s;
    return r->setup_build_s > guess ? r->setup_build_s : guess;
}

/* may_start for a step under new parameters: one build besides. */
static int
may_build(const struct run *r, double reserve)
{
    return clf__now_s() - r->start + build_estimate(r) +
               reserve * r->step_max <=
           r->o.budget_s;
}

/* Ends a step begun at t0 whose kernel build took `build` of its time
 * (0: none). */
static void
step_end_built(struct run *r, double t0, double build)
{
    double t = clf__now_s() - t0 - build;

    if (t > r->step_max)
        r->step_max = t;
    if (build >= CACHED_BUILD_S && build > r->build_s)
        r->build_s = build;
}

static void
step_end(struct run *r, double t0)
{
    step_end_built(r, t0, 0.0);
}

/* The options with defaults filled in and every size product checked. */
static int
tune_opts(const clf_tune_opts *in, clf_tune_opts *o, size_t *count)
{
    size_t bytes;

    memset(o, 0, sizeof *o);
    if (in != NULL)
        *o = *in;
    if (o->d_model == 0)
        o->d_model = 512;
    if (o->heads == 0)
        o->heads = 8;
    if (o->k == 0)
        o->k = 256;
    if (o->seq_len == 0)
        o->seq_len = 2048;
    if (!(o->budget_s > 0.0)) /* also NaN */
        o->budget_s = 120.0;
    if (o->k > o->seq_len)
        o->k = o->seq_len;
    if (clf__mul(o->seq_len, o->d_model, count) != 0 ||
        clf__mul(*count, sizeof(float), &bytes) != 0)
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "opts: seq_len %zu * d_model %zu floats overflow",
                         o->seq_len, o->d_model);
    return 0;
}

/* Resume: the untuned time, the switch value and the candidates already
 * measured, from a valid stored file. */
static int
tune_resume(struct run *r)
{
    struct clf__tune_file *tf = malloc(sizeof *tf);
    size_t i, j;

    if (tf == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    if (load_tune_file(r->ctx, r->path, tf) == 1) {
        r->base = tf->baseline_ms / 1e3;
        r->stored_build_s = tf->compile_ms / 1e3;
        r->prev_mi = tf->min_indirect;
        for (j = 0; j < tf->ntried; j++)
            for (i = 0; i < r->ncand; i++)
                if (memcmp(tf->tried[j], r->cands[i].v, sizeof r->cands[i].v) ==
                    0)
                    r->tried_ms[i] = tf->tried_ms[j];
        for (j = 0; j < tf->ntiled_tried; j++)
            for (i = 0; i < r->ntiled; i++)
                if (memcmp(tf->tiled_tried[j].v, r->tiled[i].v,
                           sizeof r->tiled[i].v) == 0)
                    r->tiled_ms[i] = tf->tiled_tried_ms[j];
    }
    free(tf);
    return 0;
}

/* The layer, its buffers and the reference output of the parameters in
 * force now (CLBlast's defaults, or parameters applied before). */
static int
tune_setup(struct run *r)
{
    clf_attention_desc d;
    float *hx;
    cl_int err = CL_SUCCESS;
    double t0, t;
    size_t i;
    int rc;

    memset(&d, 0, sizeof d);
    d.d_model = r->o.d_model;
    d.heads = r->o.heads;
    d.max_seq_len = r->o.seq_len;
    d.k = r->o.k;
    d.bias_out = 1;
    if ((rc = clf_attention_create(&r->att, r->ctx, &d)) != 0 ||
        (rc = clf_attention_randomize(r->att, 7)) != 0)
        return rc;
    hx = malloc(r->count * sizeof *hx);
    r->ref = malloc(r->count * sizeof *r->ref);
    r->got = malloc(r->count * sizeof *r->got);
    if (hx == NULL || r->ref == NULL || r->got == NULL) {
        free(hx);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    for (i = 0; i < r->count; i++)
        hx[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    r->x = clCreateBuffer(r->ctx->context,
                          CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                          r->count * sizeof(float), hx, &err);
    if (r->x != NULL)
        r->y = clCreateBuffer(r->ctx->context, CL_MEM_READ_WRITE,
                              r->count * sizeof(float), NULL, &err);
    free(hx);
    if (r->x == NULL || r->y == NULL)
        return clf__fail(err, "tuning buffers: clCreateBuffer failed (%d)",
                         err);
    t0 = clf__now_s();
    if (time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 1, &t,
                        &r->setup_build_s) != 0 ||
        clEnqueueReadBuffer(r->ctx->queue, r->y, CL_TRUE, 0,
                            r->count * sizeof(float), r->ref, 0, NULL,
                            NULL) != CL_SUCCESS)
        return clf__fail(CLF_EINVALID_ARGUMENT, "reference forward failed: %s",
                         clf_last_error());
    /* Its build says nothing certain about a new one (it may have come
     * from a cache): build_estimate() weighs it, the steps do not. */
    r->step_max = clf__now_s() - t0 - r->setup_build_s;
    return 0;
}

/* The untuned time: stored, or measured now.  1 when the budget ran out
 * first. */
static int
tune_baseline(struct run *r)
{
    double t0 = clf__now_s();

    if (r->base > 0.0) {
        say(&r->o, "resuming: untuned %.1f ms per forward (stored)",
            r->base * 1e3);
        return 0;
    }
    if (r->ctx->tuned[0] != '\0')
        return clf__fail(CLF_EINVALID_ARGUMENT,
                         "this context already applies stored parameters "
                         "but their file lacks the untuned baseline; remove "
                         "%s and tune again",
                         r->path);
    if (!may_start(r, 1.0))
        return 1;
    if (time_forward(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &r->base) !=
        0)
        return clf__fail(CLF_EINVALID_ARGUMENT, "baseline forward failed: %s",
                         clf_last_error());
    step_end(r, t0);
    say(&r->o, "CLBlast's defaults: %.1f ms per forward", r->base * 1e3);
    return 0;
}

/* Time one parameter set: 0 when it failed or computed wrong results. */
static double
time_candidate(struct run *r, const struct cand *c)
{
    double t0 = clf__now_s(), t, build = 0.0;

    if (apply_xgemm(r->ctx, c) != 0 ||
        time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &t,
                        &build) != 0 ||
        same_output(r->ctx, r->y, r->ref, r->got, r->count) != 0)
        t = 0.0; /* rejected by CLBlast, failed or wrong: never chosen */
    step_end_built(r, t0, build);
    return t;
}

static void
note_best(struct run *r, size_t i)
{
    if (r->tried_ms[i] > 0.0 && r->tried_ms[i] < r->best_ms) {
        r->best_ms = r->tried_ms[i];
        r->best = r->cands[i];
        r->have_best = 1;
    }
}

/* The Xgemm candidates not measured yet, while the budget lasts; room is
 * left for the switch's settings and the tiled kernel's sets after them. */
static void
tune_candidates(struct run *r)
{
    char text[512];
    size_t i;
    double t;

    for (i = 0; i < r->ncand; i++) {
        if (r->tried_ms[i] >= 0.0) {
            note_best(r, i);
            r->done++;
            continue;
        }
        if (r->o.max_candidates != 0 && r->measured == r->o.max_candidates)
            return;
        /* Room for this one's build and forwards, and the later steps'
         * forwards (each of those checks its own build when it comes). */
        if (!may_build(r, 2.0 + (double)r->nmi + (double)r->ntiled)) {
            r->skipped = r->ncand - r->done;
            say(&r->o,
                "budget reached after %zu of %zu candidates (a kernel "
                "build estimated at %.1f s would not fit); run again "
                "with a larger --budget to continue",
                r->done, r->ncand, build_estimate(r));
            return;
        }
        t = time_candidate(r, &r->cands[i]);
        r->tried_ms[i] = t * 1e3;
        r->done++;
        r->measured++;
        format_cand(&r->cands[i], text, sizeof text);
        if (t > 0.0)
            say(&r->o, "[%zu/%zu] %s: %.1f ms", r->done, r->ncand, text,
                t * 1e3);
        else
            say(&r->o, "[%zu/%zu] %s: failed or wrong results", r->done,
                r->ncand, text);
        note_best(r, i);
    }
}

/* CLBlast's switch between its direct GEMM kernel and the indirect one
 * (pad, transpose, Xgemm), with the chosen Xgemm parameters in place.  An
 * override cannot be undone within a process, so the configuration as it
 * stands is timed first and a value is kept only when it beats that by
 * more than 3% (a value stored earlier stays otherwise). */
static void
tune_switch(struct run *r)
{
    double t, now_ms, t0 = clf__now_s(), build = 0.0;
    size_t i;

    /* The best may come from an earlier call: then it is built anew. */
    if (!may_build(r, 1.0)) {
        r->mi_skipped = r->nmi;
        return;
    }
    if (r->have_best)
        apply_xgemm(r->ctx, &r->best);
    if (time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &t,
                        &build) != 0)
        return;
    step_end_built(r, t0, build);
    now_ms = t * 1e3;
    say(&r->o, "direct/indirect switch as it stands: %.1f ms", now_ms);
    for (i = 0; i < r->nmi; i++) {
        if (!may_build(r, 1.0)) {
            r->mi_skipped = r->nmi - i;
            break;
        }
        t0 = clf__now_s();
        build = 0.0;
        if (apply_min_indirect(r->ctx, mi_values[i]) != 0 ||
            time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &t,
                            &build) != 0 ||
            same_output(r->ctx, r->y, r->ref, r->got, r->count) != 0)
            t = 0.0;
        step_end_built(r, t0, build);
        r->mi_tried++;
        r->mi_ms[i] = t * 1e3;
        say(&r->o, "direct/indirect switch XGEMM_MIN_INDIRECT_SIZE=%zu: %s%.1f",
            mi_values[i], t > 0.0 ? "ms " : "failed or wrong results ",
            t * 1e3);
        if (t > 0.0 && t * 1e3 < 0.97 * now_ms &&
            (r->best_mi == 0 || t * 1e3 < r->best_mi_ms)) {
            r->best_mi = mi_values[i];
            r->best_mi_ms = t * 1e3;
        }
    }
}

/* One set of the tiled kernel's sizes: built, then forwards timed with
 * every GEMM through it; 0 when it failed or computed wrong results. */
static double
time_tiled(struct run *r, const struct clf__tiled_cfg *c)
{
    double t0 = clf__now_s(), t, build = 0.0;

    clf__lock(r->ctx);
    r->ctx->gemm_variant = CLF_GEMM_TILED;
    clf__unlock(r->ctx);
    if (clf__tiled_set(r->ctx, c) != 0 ||
        time_forward_ex(r->ctx, r->att, r->x, r->y, r->o.seq_len, 3, &t,
                        &build) != 0 ||
        same_output(r->ctx, r->y, r->ref, r->got, r->count) != 0)
        t = 0.0;
    clf__lock(r->ctx);
    r->ctx->gemm_variant = CLF_GEMM_CLBLAST;
    clf__unlock(r->ctx);
    step_end_built(r, t0, build);
    return t;
}

/* The tiled kernel's space (clf__tiled_space), the sets not measured yet
 * while the budget lasts; the fastest becomes its best, whatever CLBlast
 * does (the kernel choice compares the two per shape). */
static void
tune_tiled(struct run *r)
{
    struct clf__tiled_cfg was = clf__tiled_state(r->ctx)->cfg;
    char text[128];
    size_t i;

    for (i = 0; i < r->ntiled; i++) {
        if (r->tiled_ms[i] < 0.0 && !may_build(r, 1.0)) {
            r->tiled_skipped++;
        } else if (r->tiled_ms[i] < 0.0) {
            double t = time_tiled(r, &r->tiled[i]);
            r->tiled_tried++;
            r->tiled_ms[i] = t * 1e3;
            clf__tiled_format(&r->tiled[i], text, sizeof text);
            if (t > 0.0)
                say(&r->o, "tiled GEMM %s: %.1f ms", text, t * 1e3);
            else
                say(&r->o, "tiled GEMM %s: failed or wrong results", text);
        }
        if (r->tiled_ms[i] > 0.0 &&
            (r->tiled_best == r->ntiled ||
             r->tiled_ms[i] < r->tiled_ms[r->tiled_best]))
            r->tiled_best = i;
    }
    (void)clf__tiled_set(r->ctx, &was);
    if (r->tiled_best < r->ntiled) {
        clf__tiled_format(&r->tiled[r->tiled_best], text, sizeof text);
        say(&r->o, "tiled GEMM: best %s, %.1f ms per forward", text,
            r->tiled_ms[r->tiled_best]);
    }
}

/* Text built in memory, written in one piece. */
struct text {
    char *p;
    size_t len, cap;
    int failed;
};

static void text_add(struct text *t, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void
text_add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = t->failed ? 0 : vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (t->failed || n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        {
            size_t cap = t->cap * 2 + (size_t)n + 1;
            char *p = realloc(t->p, cap);
            if (p == NULL) {
                t->failed = 1;
                return;
            }
            t->p = p;
            t->cap = cap;
        }
    }
}

static void
write_records(const struct run *r, struct text *f)
{
    char text[512];
    size_t i;

    text_add(f, "# clinformer GEMM tuning: %s / %s / driver %s\n",
             r->ctx->info.platform, r->ctx->info.name, r->ctx->info.driver);
    text_add(f, "baseline ms=%.3f\n", r->base * 1e3);
    if (r->build_s > 0.0 || r->stored_build_s > 0.0)
        text_add(f, "compile ms=%.3f\n",
                 (r->build_s > 0.0 ? r->build_s : r->stored_build_s) * 1e3);
    if (r->have_best && r->best_ms < r->base * 1e3) {
        format_cand(&r->best, text, sizeof text);
        text_add(f, "best Xgemm %s\n", text);
    }
    if (r->best_mi != 0)
        text_add(f, "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu\n",
                 r->best_mi);
    for (i = 0; i < MI_COUNT; i++)
        if (r->mi_ms[i] >= 0.0)
            text_add(f,
                     "tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu "
                     "ms=%.3f\n",
                     mi_values[i], r->mi_ms[i]);
    for (i = 0; i < r->ncand; i++)
        if (r->tried_ms[i] >= 0.0) {
            format_cand(&r->cands[i], text, sizeof text);
            text_add(f, "tried Xgemm %s ms=%.3f\n", text, r->tried_ms[i]);
        }
    if (r->tiled_best < r->ntiled) {
        clf__tiled_format(&r->tiled[r->tiled_best], text, sizeof text);
        text_add(f, "best Tiled %s\n", text);
    }
    for (i = 0; i < r->ntiled; i++)
        if (r->tiled_ms[i] >= 0.0) {
            clf__tiled_format(&r->tiled[i], text, sizeof text);
            text_add(f, "tried Tiled %s ms=%.3f\n", text, r->tiled_ms[i]);
        }
}

/* Everything measured, and the winner if it beats the untuned parameters,
 * written whole to a new file that is renamed into place (see
 * clf__file_write_atomic): a reader never sees half a file, and a name
 * planted in the directory is never written through. */
static int
tune_write(const struct run *r)
{
    struct text t = {NULL, 0, 0, 0};
    int rc;

    t.p = malloc(4096);
    t.cap = t.p != NULL ? 4096 : 0;
    t.failed = t.p == NULL;
    write_records(r, &t);
    if (t.failed) {
        free(t.p);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    rc = clf__file_write_atomic(r->path, t.p, t.len);
    free(t.p);
    return rc;
}

static void
tune_report(const struct run *r)
{
    char text[512];
    double base_ms = r->base * 1e3;

    if (!(r->have_best && r->best_ms < base_ms)) {
        say(&r->o,
            "no candidate beat the current parameters (%.1f ms); "
            "stored the measurements in %s",
            base_ms, r->path);
        return;
    }
    format_cand(&r->best, text, sizeof text);
    say(&r->o,
        "best: %s: %.1f ms per forward (%.2fx the untuned %.1f ms); "
        "stored in %s",
        text, r->best_ms, base_ms / r->best_ms, base_ms, r->path);
    if (r->best_mi != 0 && r->best_mi_ms > 0.0)
        say(&r->o,
            "with XGEMM_MIN_INDIRECT_SIZE=%zu: %.1f ms (%.2fx the "
            "untuned)",
            r->best_mi, r->best_mi_ms, base_ms / r->best_mi_ms);
    else if (r->best_mi != 0)
        say(&r->o, "keeping the stored XGEMM_MIN_INDIRECT_SIZE=%zu",
            r->best_mi);
}

static void
run_free(struct run *r)
{
    clf_attention_destroy(r->att);
    if (r->x != NULL)
        clReleaseMemObject(r->x);
    if (r->y != NULL)
        clReleaseMemObject(r->y);
    free(r->ref);
    free(r->got);
    /* The context's choices were made against the old parameters: they are
     * made again at its next forward (those not made yet stay unmade). */
    if (r->forced) {
        clf__lock(r->ctx);
        r->ctx->gemm_variant = r->was_gemm;
        r->ctx->attend_variant = r->was_attend;
        clf__unlock(r->ctx);
    }
    free(r);
}

/* The first `want` of n (all of them when want is 0). */
static size_t
first_of(size_t n, size_t want)
{
    return want != 0 && want < n ? want : n;
}

static int
run_init(struct run *r, clf_context *ctx, const struct clf__tune_space *space)
{
    struct clf__limits lim;
    size_t i;

    r->ctx = ctx;
    r->start = clf__now_s();
    r->best_ms = INFINITY;
    tune_path(ctx, r->path, sizeof r->path);
    if (r->path[0] == '\0')
        return clf__fail(CLF_EIO, "no cache directory to store tuning in "
                                  "(CLINFORMER_CACHE_DIR is off and no "
                                  "HOME)");
    clf__device_limits(ctx, &lim);
    r->ncand = first_of(make_candidates(r->cands, MAX_CANDS, &lim),
                        space != NULL ? space->xgemm : 0);
    r->nmi = first_of(MI_COUNT, space != NULL ? space->switches : 0);
    for (i = 0; i < MAX_CANDS; i++)
        r->tried_ms[i] = -1.0;
    r->ntiled = clf__tiled_space(r->tiled, CLF_TUNE_MAX_TILED, &lim);
    r->tiled_best = r->ntiled;
    for (i = 0; i < CLF_TUNE_MAX_TILED; i++)
        r->tiled_ms[i] = -1.0;
    for (i = 0; i < MI_COUNT; i++)
        r->mi_ms[i] = -1.0;
    return 0;
}

/* How far the call got within its budget: what was tried of each step
 * and what was left out for the budget. */
static void
say_budget(const struct run *r)
{
    say(&r->o,
        "budget: %.1f s of %.3g s; candidates: %zu of %zu tried, %zu "
        "skipped for the budget; switch settings: %zu tried, %zu skipped; "
        "tiled sets: %zu tried, %zu skipped (a kernel build estimated at "
        "%.1f s)",
        clf__now_s() - r->start, r->o.budget_s, r->done, r->ncand, r->skipped,
        r->mi_tried, r->mi_skipped, r->tiled_tried, r->tiled_skipped,
        build_estimate(r));
}

/* The steps in order; 1 when the budget ran out before anything was
 * measured. */
static int
tune_steps(struct run *r)
{
    char dir[4096];
    int rc;

    clf__cache_dir(dir, sizeof dir);
    CLF_TRY(clf__dir_private(dir));
    CLF_TRY(tune_resume(r));
    /* Every GEMM of the timed forwards through CLBlast, whose parameters
     * are what is tuned. */
    clf__lock(r->ctx);
    r->was_gemm = r->ctx->gemm_variant;
    r->was_attend = r->ctx->attend_variant;
    r->ctx->gemm_variant = CLF_GEMM_CLBLAST;
    r->ctx->attend_variant = CLF_ATTEND_GEMM;
    clf__unlock(r->ctx);
    r->forced = 1;
    CLF_TRY(tune_setup(r));
    say(&r->o, "tuning %s / %s for D=%zu h=%zu k=%zu n=%zu, budget %.0f s",
        r->ctx->info.platform, r->ctx->info.name, r->o.d_model, r->o.heads,
        r->o.k, r->o.seq_len, r->o.budget_s);
    rc = tune_baseline(r);
    if (rc != 0)
        return rc;
    tune_candidates(r);
    tune_switch(r);
    tune_tiled(r);
    if (r->best_mi == 0 && r->prev_mi != 0)
        r->best_mi = r->prev_mi;
    CLF_TRY(tune_write(r));
    tune_report(r);
    say_budget(r);
    return apply_stored(r->ctx);
}

int
clf__tune_in(clf_context *ctx, const clf_tune_opts *opts,
             const struct clf__tune_space *space)
{
    struct run *r;
    int rc;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    r = calloc(1, sizeof *r);
    if (r == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    rc = tune_opts(opts, &r->o, &r->count);
    if (rc == 0)
        rc = run_init(r, ctx, space);
    if (rc == 0)
        rc = tune_steps(r);
    if (rc == 1) {
        say(&r->o, "budget of %.3g s reached before anything was measured",
            r->o.budget_s);
        r->skipped = r->ncand - r->done;
        r->mi_skipped = r->nmi;
        r->tiled_skipped = r->ntiled;
        say_budget(r);
        rc = 0;
    }
    run_free(r);
    return rc;
}

CLF_EXTERN int
clf_tune(clf_context *ctx, const clf_tune_opts *opts)
{
    return clf__tune_in(ctx, opts, NULL);
}

CLF_EXTERN const char *
clf_context_warnings(const clf_context *ctx)
{
    if (ctx == NULL)
        return "";
    return ctx->warnings;
}
