/* The tune floor (src/tune): the tune file (its format and checks), its
 * application to a context and the search clinformer tune runs. */
#ifndef CLF_TUNE_H
#define CLF_TUNE_H

#include "parallel/parallel.h"

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
int clf__tune_parse(const char *buf, size_t len, const struct clf__limits *lim,
                    struct clf__tune_file *tf, char *why, size_t cap);
int clf__tune_check_xgemm(const size_t *v, const struct clf__limits *lim,
                          char *why, size_t cap);

/* How much of the search space a call considers: the first xgemm
 * candidates of the Xgemm grid and the first `switches` settings of
 * XGEMM_MIN_INDIRECT_SIZE (0: all of them).  Each is a new build of
 * CLBlast's GEMM programs (a dozen kernels, about 15 s on PoCL), so
 * tests/test_tune.c narrows the space; clf_tune() searches all of it
 * (clf__tune_in with a NULL space). */
struct clf__tune_space {
    size_t xgemm, switches;
};
int clf__tune_in(clf_context *ctx, const clf_tune_opts *opts,
                 const struct clf__tune_space *space);

#endif /* CLF_TUNE_H */
