/* The tune floor (src/tune): the tune file, its format and checks
 * (tune_file.c); its application to a context (tune_apply.c); the search
 * clinformer tune runs and its report (tune.c).  Calls go search ->
 * application -> file, never back. */
#ifndef CLF_TUNE_H
#define CLF_TUNE_H

#include "parallel/parallel.h"

/* ---------------------------------------------------- tune_file.c */

#define CLF_TUNE_NPARAM 16
#define CLF_TUNE_MAX_TRIED 256
#define CLF_TUNE_MAX_TILED 32
#define CLF_TUNE_MAX_MI 16
#define CLF_TUNE_NDIRECT 10
#define CLF_TUNE_MAX_DIRECT 64
#define CLF_TUNE_FILE_MAX (1u << 20) /* a real one is a few kilobytes */

/* CLBlast's Xgemm parameters, in the order of clf__tune_xgemm_names. */
enum {
    CLF__XG_GEMMK,
    CLF__XG_KREG,
    CLF__XG_KWG,
    CLF__XG_KWI,
    CLF__XG_MDIMA,
    CLF__XG_MDIMC,
    CLF__XG_MWG,
    CLF__XG_NDIMB,
    CLF__XG_NDIMC,
    CLF__XG_NWG,
    CLF__XG_SA,
    CLF__XG_SB,
    CLF__XG_STRM,
    CLF__XG_STRN,
    CLF__XG_VWM,
    CLF__XG_VWN
};
extern const char *const clf__tune_xgemm_names[CLF_TUNE_NPARAM];

/* CLBlast's XgemmDirect parameters (the single-kernel GEMM CLBlast runs
 * below XGEMM_MIN_INDIRECT_SIZE), in the order of clf__tune_direct_names:
 * the square tile WGD, the work-group MDIMCD x NDIMCD, the reshaped
 * work-group that loads the A and B tiles (MDIMAD, NDIMBD), the unroll
 * factor KWID, the vector widths VWMD, VWND and the local rows' padding
 * PADA, PADB. */
enum {
    CLF__XD_WGD,
    CLF__XD_MDIMCD,
    CLF__XD_NDIMCD,
    CLF__XD_MDIMAD,
    CLF__XD_NDIMBD,
    CLF__XD_KWID,
    CLF__XD_VWMD,
    CLF__XD_VWND,
    CLF__XD_PADA,
    CLF__XD_PADB
};
extern const char *const clf__tune_direct_names[CLF_TUNE_NDIRECT];

/* The tune file of a device in the cache directory, or "" (no directory,
 * or a path longer than cap). */
void clf__tune_path(const clf_device_info *info, char *buf, size_t cap);

/* Xgemm parameters v, or XgemmDirect parameters, as "NAME=V ..." (cut at
 * cap). */
void clf__tune_format_xgemm(const size_t *v, char *buf, size_t cap);
void clf__tune_format_direct(const size_t *v, char *buf, size_t cap);

/* A tune file's contents.  clf__tune_parse reads len bytes of buf (not
 * NUL-terminated) as if hostile: 0 with tf filled, or -1 with the line and
 * field at fault in why; the best Xgemm and XgemmDirect parameters are
 * checked against CLBlast's constraints and lim (clf__tune_check_xgemm,
 * clf__tune_check_direct). */
struct clf__tune_file {
    int have_best;
    size_t best[CLF_TUNE_NPARAM];
    size_t min_indirect; /* 0: none stored */
    double baseline_ms;  /* 0: none stored */
    double compile_ms;   /* the last kernel build measured; 0: none */
    size_t ntried;
    size_t tried[CLF_TUNE_MAX_TRIED][CLF_TUNE_NPARAM];
    double tried_ms[CLF_TUNE_MAX_TRIED];
    /* The switch values measured: written, not kept by clf__tune_parse
     * (a call times the switch anew). */
    size_t nmi_tried;
    size_t mi_tried[CLF_TUNE_MAX_MI];
    double mi_tried_ms[CLF_TUNE_MAX_MI];
    /* The tiled GEMM's sizes (src/gemm/gemm_tiled.c): the best, checked against
     * the kernel's rules and the device, and those measured. */
    int have_tiled;
    struct clf__tiled_cfg tiled;
    size_t ntiled_tried;
    struct clf__tiled_cfg tiled_tried[CLF_TUNE_MAX_TILED];
    double tiled_tried_ms[CLF_TUNE_MAX_TILED];
    /* XgemmDirect: the best, the forward under CLBlast's own parameters
     * with every GEMM direct (0: none stored), and the sets measured so. */
    int have_direct;
    size_t direct[CLF_TUNE_NDIRECT];
    double direct_baseline_ms;
    size_t ndirect_tried;
    size_t direct_tried[CLF_TUNE_MAX_DIRECT][CLF_TUNE_NDIRECT];
    double direct_tried_ms[CLF_TUNE_MAX_DIRECT];
};
int clf__tune_parse(const char *buf, size_t len, const struct clf__limits *lim,
                    struct clf__tune_file *tf, char *why, size_t cap);

/* tune_shipped.c: the GEMM parameters shipped for a device CLBlast's
 * database lacks, as tune file text measured on it by clinformer tune;
 * applied where the device has no tune file of its own. */
struct clf__tune_shipped {
    const char *platform, *device, *driver; /* matched exactly */
    const char *record;                     /* tune file lines */
    const char *source;                     /* the run that measured it */
};
/* Entry i, NULL past the end. */
const struct clf__tune_shipped *clf__tune_shipped_at(size_t i);
/* The entry of info's device, or NULL. */
const struct clf__tune_shipped *
clf__tune_shipped_for(const clf_device_info *info);
int clf__tune_check_xgemm(const size_t *v, const struct clf__limits *lim,
                          char *why, size_t cap);
/* Set i of the tuner's XgemmDirect grid (CLF_TUNE_NDIRECT values in
 * clf__tune_direct_names' order), NULL past its end. */
const size_t *clf__tune_direct_set(size_t i);
int clf__tune_check_direct(const size_t *v, const struct clf__limits *lim,
                           char *why, size_t cap);

/* Writes tf's records (under a heading naming info's device) to path,
 * whole: a new file renamed into place.  Returns 0 or a status. */
int clf__tune_write(const char *path, const clf_device_info *info,
                    const struct clf__tune_file *tf);

/* --------------------------------------------------- tune_apply.c */

/* Hands Xgemm parameters v, XgemmDirect parameters v, or the
 * direct/indirect switch v, to CLBlast for ctx's device (process-wide).
 * Return 0 or CLBlast's status.  CLBlast checks only that every parameter
 * is named: the values are the caller's to check. */
int clf__tune_apply_xgemm(clf_context *ctx, const size_t *v);
int clf__tune_apply_direct(clf_context *ctx, const size_t *v);
int clf__tune_apply_min_indirect(clf_context *ctx, size_t v);

/* Hands the CLBlast records of tf (Xgemm, XgemmDirect, the switch) to
 * CLBlast as a tune file's (what clf__tune_apply_stored does with them,
 * checks not repeated): named in ctx->tuned, and dropped for ctx when a
 * CLBlast GEMM fails under them (src/gemm/gemm.c).  Returns 0 or
 * CLBlast's status. */
int clf__tune_apply_records(clf_context *ctx, const struct clf__tune_file *tf);

/* Loads the tune file at path into tf: 1 when a valid one was read, 0
 * when there is none or it is invalid (then ignored whole, with a warning
 * kept in ctx). */
int clf__tune_load(clf_context *ctx, const char *path,
                   struct clf__tune_file *tf);

/* Applies the stored tuning of ctx's device (CLBlast process-wide, the
 * tiled sizes to ctx), under the context lock.  Returns 0 or a status. */
int clf__tune_apply_stored(clf_context *ctx);

/* How much of the search space a call considers: the first xgemm
 * candidates of the Xgemm grid, the first `switches` settings of
 * XGEMM_MIN_INDIRECT_SIZE and the first `direct` candidates of the
 * XgemmDirect grid (0: all of them), taking every `direct_step`-th of
 * the grid's sets valid for the device, from the first (0 or 1: each
 * one).  Each is a new
 * build of CLBlast's GEMM programs (a dozen kernels, 8 to 60 s on
 * PoCL), so tests/test_tune.c narrows the space; clf_tune() searches
 * all of it (clf__tune_in with a NULL space). */
struct clf__tune_space {
    size_t xgemm, switches, direct, direct_step;
};
int clf__tune_in(clf_context *ctx, const clf_tune_opts *opts,
                 const struct clf__tune_space *space);

#endif /* CLF_TUNE_H */
