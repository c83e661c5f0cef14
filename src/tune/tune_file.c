/* The tune file (src/tune/tune.h): its name in the cache directory, its
 * records read and checked as if hostile, and written whole.  Applying it
 * is src/tune/tune_apply.c's, the search that measures what it holds
 * src/tune/tune.c's.
 *
 * The file is plain text, one record a line:
 *   best Xgemm NAME=VALUE ...          the parameters applied
 *   best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=VALUE
 *                                      the direct/indirect switch applied
 *   tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE=VALUE ms=T
 *   tried Xgemm NAME=VALUE ... ms=T    each candidate measured (resuming
 *                                      skips these)
 *   baseline ms=T                      the untuned forward
 *   compile ms=T                       the last kernel build measured
 *   best Tiled MWG=V NWG=V KWG=V MDIM=V NDIM=V VW=V
 *                                      the tiled GEMM kernel's sizes
 *                                      (gemm_tiled.c), applied per context
 *   tried Tiled ... ms=T               each set of sizes measured
 *   best XgemmDirect NAME=VALUE ...    the parameters of CLBlast's direct
 *                                      GEMM kernel applied
 *   tried XgemmDirect NAME=VALUE ... ms=T
 *                                      each set measured, every GEMM direct
 *   baseline XgemmDirect ms=T          CLBlast's own XgemmDirect
 *                                      parameters, every GEMM direct
 * A file without Tiled or XgemmDirect records (written before those were
 * searched) is read as before, and those keep their defaults. */
#include "tune/tune.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const clf__tune_xgemm_names[CLF_TUNE_NPARAM] = {
    "GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
    "NDIMC", "NWG",  "SA",  "SB",  "STRM",  "STRN",  "VWM", "VWN"};

const char *const clf__tune_direct_names[CLF_TUNE_NDIRECT] = {
    "WGD",  "MDIMCD", "NDIMCD", "MDIMAD", "NDIMBD",
    "KWID", "VWMD",   "VWND",   "PADA",   "PADB"};

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
format_named(const char *const *names, size_t count, const size_t *v, char *buf,
             size_t cap)
{
    size_t len = 0, i;

    buf[0] = '\0';
    for (i = 0; i < count && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s=%zu", i ? " " : "",
                                names[i], v[i]);
}

void
clf__tune_format_xgemm(const size_t *v, char *buf, size_t cap)
{
    format_named(clf__tune_xgemm_names, CLF_TUNE_NPARAM, v, buf, cap);
}

void
clf__tune_format_direct(const size_t *v, char *buf, size_t cap)
{
    format_named(clf__tune_direct_names, CLF_TUNE_NDIRECT, v, buf, cap);
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

/* One "NAME=V" token of a record into v[the name's index]: the name one
 * of the count names (what names their kind in a complaint), not seen
 * before (seen marks the names given), V a number up to max. */
static int
parse_named(const char *tok, const char *const *names, size_t count,
            const char *what, size_t max, size_t *v, unsigned *seen,
            size_t line, char *why, size_t cap)
{
    const char *eq = strchr(tok, '=');
    size_t i;

    for (i = 0; i < count && eq != NULL; i++)
        if (strlen(names[i]) == (size_t)(eq - tok) &&
            strncmp(tok, names[i], (size_t)(eq - tok)) == 0)
            break;
    if (eq == NULL || i == count)
        return why_line(why, cap, line, "unknown %s %s", what, tok);
    if (*seen & (1u << i))
        return why_line(why, cap, line, "%s given twice", names[i]);
    if (parse_size_at_most(eq + 1, max, &v[i]) != 0)
        return why_line(why, cap, line, "%s=%s is not a number up to %zu",
                        names[i], eq + 1, max);
    *seen |= 1u << i;
    return 0;
}

/* The 16 "NAME=V" tokens of an Xgemm record, each name once. */
static int
parse_params(char *const *tok, size_t ntok, size_t *v, size_t line, char *why,
             size_t cap)
{
    unsigned seen = 0;
    size_t t;

    if (ntok != CLF_TUNE_NPARAM)
        return why_line(why, cap, line, "%zu Xgemm parameters, not %d", ntok,
                        CLF_TUNE_NPARAM);
    for (t = 0; t < ntok; t++)
        if (parse_named(tok[t], clf__tune_xgemm_names, CLF_TUNE_NPARAM,
                        "Xgemm parameter", (size_t)1 << 20, v, &seen, line, why,
                        cap) != 0)
            return -1;
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

    for (i = 0; i < CLF_TUNE_NPARAM; i++) {
        int flag = i == CLF__XG_GEMMK || i == CLF__XG_SA || i == CLF__XG_SB ||
                   i == CLF__XG_STRM || i == CLF__XG_STRN;
        size_t max = i == CLF__XG_VWM || i == CLF__XG_VWN ? 16 : 1024;
        if (flag && v[i] > 1) {
            snprintf(why, cap, "%s=%zu is not 0 or 1", clf__tune_xgemm_names[i],
                     v[i]);
            return -1;
        }
        if (!flag && (!is_pow2(v[i]) || v[i] > max)) {
            snprintf(why, cap, "%s=%zu is not a power of two from 1 to %zu",
                     clf__tune_xgemm_names[i], v[i], max);
            return -1;
        }
    }
    return 0;
}

/* x must be a multiple of y * z (z = CLF_TUNE_NPARAM for none): whole work per
 * work-item, whole loads per work-item, a whole unrolled loop. */
static const struct {
    unsigned char x, y, z;
} multiples[] = {{CLF__XG_KWG, CLF__XG_KWI, CLF_TUNE_NPARAM},
                 {CLF__XG_MWG, CLF__XG_MDIMC, CLF__XG_VWM},
                 {CLF__XG_NWG, CLF__XG_NDIMC, CLF__XG_VWN},
                 {CLF__XG_MWG, CLF__XG_MDIMA, CLF__XG_VWM},
                 {CLF__XG_NWG, CLF__XG_NDIMB, CLF__XG_VWN}};

static int
check_multiples(const size_t *v, char *why, size_t cap)
{
    size_t i, kdima, kdimb, wg = v[CLF__XG_MDIMC] * v[CLF__XG_NDIMC];

    for (i = 0; i < sizeof multiples / sizeof multiples[0]; i++) {
        size_t y = v[multiples[i].y], z = 1;
        if (multiples[i].z != CLF_TUNE_NPARAM)
            z = v[multiples[i].z];
        if (v[multiples[i].x] % (y * z) != 0) {
            snprintf(why, cap, "%s=%zu is not a multiple of %s*%s=%zu",
                     clf__tune_xgemm_names[multiples[i].x], v[multiples[i].x],
                     clf__tune_xgemm_names[multiples[i].y],
                     multiples[i].z != CLF_TUNE_NPARAM
                         ? clf__tune_xgemm_names[multiples[i].z]
                         : "1",
                     y * z);
            return -1;
        }
    }
    /* A work-group of MDIMC*NDIMC reshaped into KDIMA x MDIMA and
     * KDIMB x NDIMB to load the tiles. */
    if (wg % v[CLF__XG_MDIMA] != 0 || wg % v[CLF__XG_NDIMB] != 0) {
        snprintf(why, cap,
                 "MDIMC*NDIMC=%zu is not a multiple of MDIMA and "
                 "NDIMB",
                 wg);
        return -1;
    }
    kdima = wg / v[CLF__XG_MDIMA];
    kdimb = wg / v[CLF__XG_NDIMB];
    if (v[CLF__XG_GEMMK] == 0 &&
        (v[CLF__XG_KWG] % kdima != 0 || v[CLF__XG_KWG] % kdimb != 0)) {
        snprintf(why, cap,
                 "KWG=%zu is not a multiple of "
                 "MDIMC*NDIMC/MDIMA=%zu and MDIMC*NDIMC/NDIMB=%zu",
                 v[CLF__XG_KWG], kdima, kdimb);
        return -1;
    }
    return 0;
}

/* The kernel with 2-D register tiling (GEMMK=1), as CLBlast's tuner
 * builds it: no unrolled k loop of its own and no local-memory tiles.
 * KWG or KWI past 1 writes outside C and SA or SB does not build
 * (tests/test_tune.c, tune_checks_agree_with_clblast). */
static int
check_gemmk1(const size_t *v, char *why, size_t cap)
{
    if (v[CLF__XG_GEMMK] != 1)
        return 0;
    if (v[CLF__XG_KWG] != 1 || v[CLF__XG_KWI] != 1) {
        snprintf(why, cap, "GEMMK=1 needs KWG=1 and KWI=1 (KWG=%zu KWI=%zu)",
                 v[CLF__XG_KWG], v[CLF__XG_KWI]);
        return -1;
    }
    if (v[CLF__XG_SA] != 0 || v[CLF__XG_SB] != 0) {
        snprintf(why, cap, "GEMMK=1 needs SA=0 and SB=0 (SA=%zu SB=%zu)",
                 v[CLF__XG_SA], v[CLF__XG_SB]);
        return -1;
    }
#if !defined(CLF_CLBLAST_VERSION) || CLF_CLBLAST_VERSION < 10603
    /* Before CLBlast 1.6.3 the kernel indexes its tiles wrongly when
     * MWG != NWG and writes outside C. */
    if (v[CLF__XG_MWG] != v[CLF__XG_NWG]) {
        snprintf(why, cap,
                 "GEMMK=1 needs MWG=NWG with CLBlast before 1.6.3 (MWG=%zu "
                 "NWG=%zu)",
                 v[CLF__XG_MWG], v[CLF__XG_NWG]);
        return -1;
    }
#endif
    if (v[CLF__XG_KREG] % v[CLF__XG_VWN] != 0) {
        snprintf(why, cap, "KREG=%zu is not a multiple of VWN=%zu",
                 v[CLF__XG_KREG], v[CLF__XG_VWN]);
        return -1;
    }
    if (v[CLF__XG_MDIMC] != v[CLF__XG_MDIMA] ||
        v[CLF__XG_NDIMC] != v[CLF__XG_NDIMB]) {
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
    const struct clf__footprint f = {
        "MDIMC",
        "NDIMC",
        v[CLF__XG_MDIMC],
        v[CLF__XG_NDIMC],
        4ull * (v[CLF__XG_SA] * v[CLF__XG_KWG] * v[CLF__XG_MWG] +
                v[CLF__XG_SB] * v[CLF__XG_KWG] * v[CLF__XG_NWG]),
        "SA/SB tiles"};

    return clf__limits_check(lim, &f, why, cap);
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

/* ---------------------------------------------------------------------
 * XgemmDirect, after CLBlast's kernel (xgemm_direct_part1.opencl) and the
 * constraints of its tuner (src/tuning/kernels/xgemm_direct.hpp): a
 * work-group of MDIMCD x NDIMCD computes a WGD x WGD tile of C, each
 * work-item WGD/MDIMCD x WGD/NDIMCD of it in vectors of VWMD (A, C) and
 * VWND (B); the group, reshaped MDIMAD x KDIMAD (KDIMAD =
 * MDIMCD*NDIMCD/MDIMAD) and NDIMBD x KDIMBD, loads WGD x WGD tiles of A
 * and B into local memory, their rows padded by PADA and PADB floats; the
 * loop over a tile's k is unrolled by KWID.  A size that breaks these
 * leaves part of a tile unloaded (wrong results) or divides by zero. */

/* Ranges: PADA, PADB 0 or 1 (what CLBlast's tuner tries), the vector
 * widths 1..16 (the kernel's vector types), every other size 1..1024, all
 * powers of two. */
static int
check_direct_ranges(const size_t *v, char *why, size_t cap)
{
    size_t i;

    for (i = 0; i < CLF_TUNE_NDIRECT; i++) {
        int flag = i == CLF__XD_PADA || i == CLF__XD_PADB;
        size_t max = i == CLF__XD_VWMD || i == CLF__XD_VWND ? 16 : 1024;
        if (flag && v[i] > 1) {
            snprintf(why, cap, "%s=%zu is not 0 or 1",
                     clf__tune_direct_names[i], v[i]);
            return -1;
        }
        if (!flag && (!is_pow2(v[i]) || v[i] > max)) {
            snprintf(why, cap, "%s=%zu is not a power of two from 1 to %zu",
                     clf__tune_direct_names[i], v[i], max);
            return -1;
        }
    }
    return 0;
}

/* WGD must be a multiple of y * z (z = CLF_TUNE_NDIRECT for none): a whole
 * unrolled loop, whole work per work-item, whole loads per work-item. */
static const struct {
    unsigned char y, z;
} direct_multiples[] = {{CLF__XD_KWID, CLF_TUNE_NDIRECT},
                        {CLF__XD_MDIMCD, CLF__XD_VWMD},
                        {CLF__XD_NDIMCD, CLF__XD_VWND},
                        {CLF__XD_MDIMAD, CLF__XD_VWMD},
                        {CLF__XD_NDIMBD, CLF__XD_VWND}};

static int
check_direct_multiples(const size_t *v, char *why, size_t cap)
{
    size_t i, wgd = v[CLF__XD_WGD], wg = v[CLF__XD_MDIMCD] * v[CLF__XD_NDIMCD];

    for (i = 0; i < sizeof direct_multiples / sizeof direct_multiples[0]; i++) {
        size_t y = v[direct_multiples[i].y], z = 1;
        if (direct_multiples[i].z != CLF_TUNE_NDIRECT)
            z = v[direct_multiples[i].z];
        if (wgd % (y * z) != 0) {
            snprintf(why, cap, "WGD=%zu is not a multiple of %s*%s=%zu", wgd,
                     clf__tune_direct_names[direct_multiples[i].y],
                     direct_multiples[i].z != CLF_TUNE_NDIRECT
                         ? clf__tune_direct_names[direct_multiples[i].z]
                         : "1",
                     y * z);
            return -1;
        }
    }
    /* The group reshaped KDIMAD x MDIMAD and KDIMBD x NDIMBD: KDIMAD and
     * KDIMBD whole, nonzero, and dividing the tile. */
    if (wg % v[CLF__XD_MDIMAD] != 0 || wg % v[CLF__XD_NDIMBD] != 0) {
        snprintf(why, cap,
                 "MDIMCD*NDIMCD=%zu is not a multiple of MDIMAD and "
                 "NDIMBD",
                 wg);
        return -1;
    }
    if (wgd % (wg / v[CLF__XD_MDIMAD]) != 0 ||
        wgd % (wg / v[CLF__XD_NDIMBD]) != 0) {
        snprintf(why, cap,
                 "WGD=%zu is not a multiple of MDIMCD*NDIMCD/MDIMAD=%zu and "
                 "MDIMCD*NDIMCD/NDIMBD=%zu",
                 wgd, wg / v[CLF__XD_MDIMAD], wg / v[CLF__XD_NDIMBD]);
        return -1;
    }
    return 0;
}

/* The device: the work-group, and the two padded tiles in local memory. */
static int
check_direct_device(const size_t *v, const struct clf__limits *lim, char *why,
                    size_t cap)
{
    const size_t wgd = v[CLF__XD_WGD];
    char tiles[48];
    const struct clf__footprint f = {
        "MDIMCD",
        "NDIMCD",
        v[CLF__XD_MDIMCD],
        v[CLF__XD_NDIMCD],
        4ull * wgd * (2 * wgd + v[CLF__XD_PADA] + v[CLF__XD_PADB]),
        tiles};

    snprintf(tiles, sizeof tiles, "the WGD=%zu tiles", wgd);
    return clf__limits_check(lim, &f, why, cap);
}

int
clf__tune_check_direct(const size_t *v, const struct clf__limits *lim,
                       char *why, size_t cap)
{
    if (check_direct_ranges(v, why, cap) != 0 ||
        check_direct_multiples(v, why, cap) != 0 ||
        check_direct_device(v, lim, why, cap) != 0)
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

/* "best XgemmDirect NAME=V ..." or "tried XgemmDirect NAME=V ... ms=T":
 * the ten parameters, each once, numbers up to 2^20 (their constraints
 * are checked after the whole file is read). */
static int
record_direct(struct clf__tune_file *tf, char **tok, size_t n, int tried,
              size_t line, char *why, size_t cap)
{
    size_t *v = tried ? tf->direct_tried[tf->ndirect_tried] : tf->direct;
    unsigned seen = 0;
    size_t t;

    if (tried && tf->ndirect_tried == CLF_TUNE_MAX_DIRECT)
        return why_line(why, cap, line,
                        "more than %d tried XgemmDirect records",
                        CLF_TUNE_MAX_DIRECT);
    if (!tried && tf->have_direct)
        return why_line(why, cap, line, "a second best XgemmDirect record");
    if (tried && (n < 1 || parse_ms(tok[n - 1],
                                    &tf->direct_tried_ms[tf->ndirect_tried])))
        return why_line(why, cap, line, "no valid ms=T at the end");
    n -= (size_t)tried;
    if (n != CLF_TUNE_NDIRECT)
        return why_line(why, cap, line, "%zu XgemmDirect parameters, not %d", n,
                        CLF_TUNE_NDIRECT);
    for (t = 0; t < n; t++)
        if (parse_named(tok[t], clf__tune_direct_names, CLF_TUNE_NDIRECT,
                        "XgemmDirect parameter", (size_t)1 << 20, v, &seen,
                        line, why, cap) != 0)
            return -1;
    if (tried)
        tf->ndirect_tried++;
    else
        tf->have_direct = 1;
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
    size_t t;

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
    for (t = 0; t < n; t++)
        if (parse_named(tok[t], clf__tiled_names, CLF_TILED_NPARAM,
                        "Tiled size", 4096, c->v, &seen, line, why, cap) != 0)
            return -1;
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

/* "baseline ms=T" (the untuned forward), "compile ms=T" (the last kernel
 * build measured under new parameters) or "baseline XgemmDirect ms=T"
 * (CLBlast's own XgemmDirect parameters, every GEMM direct), T > 0, each
 * once. */
static int
record_time(struct clf__tune_file *tf, char **tok, size_t n, size_t line,
            char *why, size_t cap)
{
    int direct =
        n == 3 && tok[0][0] == 'b' && strcmp(tok[1], "XgemmDirect") == 0;
    double *out = direct             ? &tf->direct_baseline_ms
                  : tok[0][0] == 'b' ? &tf->baseline_ms
                                     : &tf->compile_ms;
    const char *what = direct ? "baseline XgemmDirect" : tok[0];

    if (*out > 0.0)
        return why_line(why, cap, line, "a second %s record", what);
    if ((n != 2 && !direct) || parse_ms(tok[n - 1], out) != 0 || *out <= 0.0) {
        *out = 0.0;
        return why_line(why, cap, line, "not %s ms=T (T > 0)", what);
    }
    return 0;
}

/* One line, NUL-terminated and writable. */
static int
parse_line(struct clf__tune_file *tf, char *s, size_t line, char *why,
           size_t cap)
{
    char *tok[CLF_TUNE_NPARAM + 4];
    size_t n;
    int tried;

    if (split(s, tok, CLF_TUNE_NPARAM + 4, &n) != 0)
        return why_line(why, cap, line, "too many fields");
    if (n == 0 || tok[0][0] == '#')
        return 0;
    if (strcmp(tok[0], "baseline") == 0 || strcmp(tok[0], "compile") == 0)
        return record_time(tf, tok, n, line, why, cap);
    tried = strcmp(tok[0], "tried") == 0;
    if ((tried || strcmp(tok[0], "best") == 0) && n >= 2) {
        if (strcmp(tok[1], "Xgemm") == 0)
            return record_xgemm(tf, tok + 2, n - 2, tried, line, why, cap);
        if (strcmp(tok[1], "GemmRoutine") == 0)
            return record_gemm_routine(tf, tok + 2, n - 2, tried, line, why,
                                       cap);
        if (strcmp(tok[1], "Tiled") == 0)
            return record_tiled(tf, tok + 2, n - 2, tried, line, why, cap);
        if (strcmp(tok[1], "XgemmDirect") == 0)
            return record_direct(tf, tok + 2, n - 2, tried, line, why, cap);
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
    if (len > CLF_TUNE_FILE_MAX) {
        snprintf(why, cap, "larger than %u bytes", CLF_TUNE_FILE_MAX);
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
    if (tf->have_direct &&
        clf__tune_check_direct(tf->direct, lim, s, sizeof s) != 0) {
        snprintf(why, cap, "best XgemmDirect: %s", s);
        return -1;
    }
    return 0;
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
write_records(const clf_device_info *info, const struct clf__tune_file *tf,
              struct text *f)
{
    char text[512];
    size_t i;

    text_add(f, "# clinformer GEMM tuning: %s / %s / driver %s\n",
             info->platform, info->name, info->driver);
    text_add(f, "baseline ms=%.3f\n", tf->baseline_ms);
    if (tf->compile_ms > 0.0)
        text_add(f, "compile ms=%.3f\n", tf->compile_ms);
    if (tf->have_best) {
        clf__tune_format_xgemm(tf->best, text, sizeof text);
        text_add(f, "best Xgemm %s\n", text);
    }
    if (tf->min_indirect != 0)
        text_add(f, "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu\n",
                 tf->min_indirect);
    for (i = 0; i < tf->nmi_tried; i++)
        text_add(f,
                 "tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu "
                 "ms=%.3f\n",
                 tf->mi_tried[i], tf->mi_tried_ms[i]);
    for (i = 0; i < tf->ntried; i++) {
        clf__tune_format_xgemm(tf->tried[i], text, sizeof text);
        text_add(f, "tried Xgemm %s ms=%.3f\n", text, tf->tried_ms[i]);
    }
    if (tf->have_tiled) {
        clf__tiled_format(&tf->tiled, text, sizeof text);
        text_add(f, "best Tiled %s\n", text);
    }
    for (i = 0; i < tf->ntiled_tried; i++) {
        clf__tiled_format(&tf->tiled_tried[i], text, sizeof text);
        text_add(f, "tried Tiled %s ms=%.3f\n", text, tf->tiled_tried_ms[i]);
    }
    if (tf->direct_baseline_ms > 0.0)
        text_add(f, "baseline XgemmDirect ms=%.3f\n", tf->direct_baseline_ms);
    if (tf->have_direct) {
        clf__tune_format_direct(tf->direct, text, sizeof text);
        text_add(f, "best XgemmDirect %s\n", text);
    }
    for (i = 0; i < tf->ndirect_tried; i++) {
        clf__tune_format_direct(tf->direct_tried[i], text, sizeof text);
        text_add(f, "tried XgemmDirect %s ms=%.3f\n", text,
                 tf->direct_tried_ms[i]);
    }
}

/* Written whole to a new file that is renamed into place (see
 * clf__file_write_atomic): a reader never sees half a file, and a name
 * planted in the directory is never written through. */
int
clf__tune_write(const char *path, const clf_device_info *info,
                const struct clf__tune_file *tf)
{
    struct text t = {NULL, 0, 0, 0};
    int rc;

    t.p = malloc(4096);
    t.cap = t.p != NULL ? 4096 : 0;
    t.failed = t.p == NULL;
    write_records(info, tf, &t);
    if (t.failed) {
        free(t.p);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    rc = clf__file_write_atomic(path, t.p, t.len);
    free(t.p);
    return rc;
}
