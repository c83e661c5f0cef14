/* The stored tuning applied (src/tune/tune.h): the tune file of a
 * context's device read (src/tune/tune_file.c) and its Xgemm and
 * XgemmDirect parameters and direct/indirect switch handed to CLBlast,
 * process-wide, and its
 * tiled GEMM sizes set on the context; what was applied, and why a file
 * was ignored, as the context reports them. */
#include "tune/tune.h"

#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The three below hand one set to CLBlast as it is, for the tuner's
 * trials and the tests: a CLBlast failure under it stays an error (the
 * context's CLBlast records cleared); apply_clblast marks the sets of a
 * tune file, whose failure drops them instead (src/gemm/gemm.c). */
static void
on_trial(clf_context *ctx)
{
    clf__lock(ctx);
    clf__gemm_clblast_records(ctx, 0);
    clf__unlock(ctx);
}

int
clf__tune_apply_xgemm(clf_context *ctx, const size_t *v)
{
    CLBlastStatusCode st;

    on_trial(ctx);
    st = CLBlastOverrideParameters(ctx->device, "Xgemm", CLBlastPrecisionSingle,
                                   CLF_TUNE_NPARAM,
                                   (const char **)clf__tune_xgemm_names, v);
    if (st != CLBlastSuccess)
        return clf__fail((int)st,
                         "CLBlastOverrideParameters(Xgemm) failed "
                         "(%d)",
                         (int)st);
    return 0;
}

int
clf__tune_apply_direct(clf_context *ctx, const size_t *v)
{
    CLBlastStatusCode st;

    on_trial(ctx);
    st = CLBlastOverrideParameters(ctx->device, "XgemmDirect",
                                   CLBlastPrecisionSingle, CLF_TUNE_NDIRECT,
                                   (const char **)clf__tune_direct_names, v);
    if (st != CLBlastSuccess)
        return clf__fail((int)st,
                         "CLBlastOverrideParameters(XgemmDirect) failed (%d)",
                         (int)st);
    return 0;
}

int
clf__tune_apply_min_indirect(clf_context *ctx, size_t v)
{
    const char *name = "XGEMM_MIN_INDIRECT_SIZE";
    CLBlastStatusCode st;

    on_trial(ctx);
    st = CLBlastOverrideParameters(ctx->device, "GemmRoutine",
                                   CLBlastPrecisionSingle, 1, &name, &v);
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
        clf__file_read_cache(path, "tune file", CLF_TUNE_FILE_MAX, buf, len) !=
            0) {
        snprintf(why, cap, "%s", clf_last_error());
        return -1;
    }
    return 1;
}

/* Loads ctx's tune file into tf: 1 when a valid one was read, 0 when there
 * is none or it is invalid (then ignored whole, with a warning kept in the
 * context). */
int
clf__tune_load(clf_context *ctx, const char *path, struct clf__tune_file *tf)
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
        return clf__tiled_reset(ctx);
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

/* Whether the device has a tune file of its own (valid or not: an invalid
 * one is ignored with a warning, and the shipped entry does not stand in
 * for it). */
static int
user_file(const char *path)
{
    struct stat st;

    return path[0] != '\0' && lstat(path, &st) == 0;
}

/* The shipped entry of ctx's device into tf: 1 when there is one and it
 * passes the tune file's checks on this device. */
static int
load_shipped(clf_context *ctx, struct clf__tune_file *tf)
{
    const struct clf__tune_shipped *s = clf__tune_shipped_for(&ctx->info);
    struct clf__limits lim;
    char why[1100];

    if (s == NULL)
        return 0;
    clf__device_limits(ctx, &lim);
    if (clf__tune_parse(s->record, strlen(s->record), &lim, tf, why,
                        sizeof why) != 0) {
        snprintf(ctx->warnings, sizeof ctx->warnings,
                 "ignored the GEMM parameters shipped for this device: %s",
                 why);
        memset(tf, 0, sizeof *tf);
        return 0;
    }
    return 1;
}

/* Hands tf's CLBlast records (Xgemm, XgemmDirect, the switch) to CLBlast
 * and names them in ctx->tuned; marks them as the tune file's, so that a
 * CLBlast failure under them drops them (src/gemm/gemm.c). */
static int
apply_clblast(clf_context *ctx, const struct clf__tune_file *tf)
{
    size_t len;
    int rc = 0, mark;

    if (tf->have_best && (rc = clf__tune_apply_xgemm(ctx, tf->best)) == 0) {
        memcpy(ctx->tuned, "Xgemm ", 7);
        clf__tune_format_xgemm(tf->best, ctx->tuned + 6, sizeof ctx->tuned - 6);
    }
    if (rc == 0 && tf->have_direct &&
        (rc = clf__tune_apply_direct(ctx, tf->direct)) == 0) {
        len = strlen(ctx->tuned);
        snprintf(ctx->tuned + len, sizeof ctx->tuned - len, "%sXgemmDirect ",
                 len ? "; " : "");
        len = strlen(ctx->tuned);
        clf__tune_format_direct(tf->direct, ctx->tuned + len,
                                sizeof ctx->tuned - len);
    }
    if (rc == 0 && tf->min_indirect != 0 &&
        (rc = clf__tune_apply_min_indirect(ctx, tf->min_indirect)) == 0) {
        len = strlen(ctx->tuned);
        snprintf(ctx->tuned + len, sizeof ctx->tuned - len,
                 "%sXGEMM_MIN_INDIRECT_SIZE=%zu", len ? "; " : "",
                 tf->min_indirect);
    }
    mark = clf__gemm_clblast_records(ctx, rc == 0 && ctx->tuned[0] != '\0');
    return rc != 0 ? rc : mark;
}

int
clf__tune_apply_records(clf_context *ctx, const struct clf__tune_file *tf)
{
    int rc;

    clf__lock(ctx);
    ctx->tuned[0] = '\0';
    rc = apply_clblast(ctx, tf);
    clf__unlock(ctx);
    return rc;
}

/* Applies the stored tuning of ctx's device to CLBlast, process-wide (its
 * tune file, else the parameters shipped for it); the caller holds the
 * context lock (ctx->tuned is part of the key that forwards of other
 * threads read). */
static int
apply_stored_locked(clf_context *ctx)
{
    static const char note[] = " (shipped for this device)";
    char path[4300];
    const char *env = getenv("CLINFORMER_TUNE");
    struct clf__tune_file *tf;
    int rc, shipped = 0;

    ctx->tuned[0] = '\0';
    CLF_TRY(clf__gemm_clblast_records(ctx, 0));
    if (env != NULL && strcmp(env, "off") == 0)
        return 0;
    tf = malloc(sizeof *tf);
    if (tf == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    clf__tune_path(&ctx->info, path, sizeof path);
    if (clf__tune_load(ctx, path, tf) == 0 && !user_file(path))
        shipped = load_shipped(ctx, tf);
    rc = apply_clblast(ctx, tf);
    if (rc == 0)
        rc = apply_tiled(ctx, tf);
    if (rc == 0 && shipped && ctx->tuned[0] != '\0' &&
        strlen(ctx->tuned) + sizeof note <= sizeof ctx->tuned)
        strcat(ctx->tuned, note);
    free(tf);
    return rc;
}

int
clf__tune_apply_stored(clf_context *ctx)
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
    return clf__tune_apply_stored(ctx);
}

CLF_EXTERN const char *
clf_context_tuning(const clf_context *ctx)
{
    if (ctx == NULL || ctx->tuned[0] == '\0')
        return "";
    return ctx->tuned;
}

CLF_EXTERN const char *
clf_context_warnings(const clf_context *ctx)
{
    if (ctx == NULL)
        return "";
    return ctx->warnings;
}
