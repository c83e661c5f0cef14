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
 *   baseline ms=T                      the untuned forward */
#include "internal.h"

#include <clblast_c.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPARAM 16

static const char *const xgemm_names[NPARAM] = {
    "GEMMK", "KREG", "KWG",  "KWI",  "MDIMA", "MDIMC", "MWG", "NDIMB",
    "NDIMC", "NWG",  "SA",   "SB",   "STRM",  "STRN",  "VWM", "VWN"};

struct cand {
    size_t v[NPARAM];
};

enum { P_GEMMK, P_KREG, P_KWG, P_KWI, P_MDIMA, P_MDIMC, P_MWG, P_NDIMB,
       P_NDIMC, P_NWG, P_SA, P_SB, P_STRM, P_STRN, P_VWM, P_VWN };

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
    if (snprintf(buf, cap, "%s/tune-%016llx.txt", dir,
                 (unsigned long long)h) >= (int)cap)
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
        len += (size_t)snprintf(buf + len, cap - len, "%s%s=%zu",
                                i ? " " : "", xgemm_names[i], c->v[i]);
}

/* Parses "NAME=V NAME=V ..." into c; returns 0 when all NPARAM were set. */
static int
parse_cand(const char *s, struct cand *c)
{
    int seen = 0;
    size_t i;

    while (*s) {
        char name[16];
        size_t v;
        int used = 0;
        if (sscanf(s, " %15[A-Z]=%zu%n", name, &v, &used) != 2 || used == 0)
            break;
        for (i = 0; i < NPARAM; i++)
            if (strcmp(name, xgemm_names[i]) == 0) {
                c->v[i] = v;
                seen |= 1 << i;
            }
        s += used;
    }
    return seen == (1 << NPARAM) - 1 ? 0 : -1;
}

static int
apply_xgemm(clf_context *ctx, const struct cand *c)
{
    CLBlastStatusCode st = CLBlastOverrideParameters(
        ctx->device, "Xgemm", CLBlastPrecisionSingle, NPARAM,
        (const char **)xgemm_names, c->v);
    if (st != CLBlastSuccess)
        return clf__fail((int)st, "CLBlastOverrideParameters(Xgemm) failed "
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

/* Applies the stored tuning of ctx's device to CLBlast, process-wide. */
static int
apply_stored(clf_context *ctx)
{
    char path[4300], line[1024];
    const char *env = getenv("CLINFORMER_TUNE");
    FILE *f;

    ctx->tuned[0] = '\0';
    if (env != NULL && strcmp(env, "off") == 0)
        return 0;
    tune_path(ctx, path, sizeof path);
    if (path[0] == '\0' || (f = fopen(path, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL) {
        struct cand c;
        size_t v;
        if (strncmp(line, "best Xgemm ", 11) == 0 &&
            parse_cand(line + 11, &c) == 0 && apply_xgemm(ctx, &c) == 0) {
            snprintf(ctx->tuned, sizeof ctx->tuned, "Xgemm %.*s",
                     (int)strcspn(line + 11, "\n"), line + 11);
        } else if (sscanf(line,
                          "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu",
                          &v) == 1 &&
                   apply_min_indirect(ctx, v) == 0) {
            size_t len = strlen(ctx->tuned);
            snprintf(ctx->tuned + len, sizeof ctx->tuned - len,
                     "%sXGEMM_MIN_INDIRECT_SIZE=%zu", len ? "; " : "", v);
        }
    }
    fclose(f);
    return 0;
}

/* A new context applies nothing: CLBlast's parameter overrides hold for
 * every CLBlast user of the process on the device, so applying them is
 * left to the process's owner (clf_tune_apply_process_wide). */
int
clf__tune_apply(clf_context *ctx)
{
    ctx->tuned[0] = '\0';
    return 0;
}

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
make_candidates(struct cand *out, size_t cap)
{
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
                        if (x.v[P_MWG] % (8 * x.v[P_VWM]) != 0 ||
                            x.v[P_NWG] % (8 * x.v[P_VWN]) != 0 ||
                            x.v[P_KWG] % x.v[P_KWI] != 0)
                            continue;
                        if (n < cap)
                            out[n++] = x;
                    }
    return n;
}

/* Median seconds of `runs` forwards after one warm-up (which also pays any
 * kernel compilation). */
static int
time_forward(clf_context *ctx, clf_attention *att, cl_mem x, cl_mem y,
             size_t n, int runs, double *out)
{
    double t[8], t0;
    int r, i, j;

    if (clf_attention_forward_cl(att, x, 0, y, 0, 1, n) != 0 ||
        clf_context_finish(ctx) != 0)
        return -1;
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
    return 0;
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

CLF_EXTERN int
clf_tune(clf_context *ctx, const clf_tune_opts *opts)
{
    clf_tune_opts o;
    clf_attention_desc d;
    clf_attention *att = NULL;
    struct cand cands[256], best;
    size_t ncand, i;
    char path[4300], line[1024], text[512], dir[4096];
    double start = clf__now_s(), base = 0.0, best_ms = INFINITY, t;
    double *tried_ms = NULL;
    cl_mem x = NULL, y = NULL;
    float *hx = NULL, *ref = NULL, *got = NULL;
    FILE *f = NULL;
    static const size_t mi_values[] = {128, 256, 512, 1024, 2048};
    double mi_ms[sizeof mi_values / sizeof mi_values[0]] = {0.0};
    size_t prev_mi = 0;
    double best_mi_ms = 0.0;
    size_t count, done = 0, best_mi = 0, measured = 0;
    cl_int err;
    int rc = 0, have_best = 0;

    if (ctx == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "ctx is NULL");
    memset(&o, 0, sizeof o);
    if (opts != NULL)
        o = *opts;
    if (o.d_model == 0)
        o.d_model = 512;
    if (o.heads == 0)
        o.heads = 8;
    if (o.k == 0)
        o.k = 256;
    if (o.seq_len == 0)
        o.seq_len = 2048;
    if (o.budget_s <= 0.0)
        o.budget_s = 120.0;
    if (o.k > o.seq_len)
        o.k = o.seq_len;
    tune_path(ctx, path, sizeof path);
    if (path[0] == '\0')
        return clf__fail(CLF_EIO, "no cache directory to store tuning in "
                                  "(CLINFORMER_CACHE_DIR is off and no "
                                  "HOME)");
    clf__cache_dir(dir, sizeof dir);
    if (clf__mkdir_p(dir) != 0)
        return clf__fail(CLF_EIO, "cannot create %s", dir);

    ncand = make_candidates(cands, 256);
    tried_ms = malloc(ncand * sizeof *tried_ms);
    if (tried_ms == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    /* Every GEMM of the timed forwards through CLBlast, whose parameters
     * are what is tuned.  At the end the context's choices are made again,
     * at its next forward, against the parameters now in force (those it
     * had not made yet stay unmade). */
    ctx->gemm_variant = CLF_GEMM_CLBLAST;
    ctx->attend_variant = CLF_ATTEND_GEMM;
    for (i = 0; i < ncand; i++)
        tried_ms[i] = -1.0;

    /* Resume: candidates already measured keep their times. */
    f = fopen(path, "r");
    if (f != NULL) {
        while (fgets(line, sizeof line, f) != NULL) {
            struct cand c;
            char *ms = strstr(line, " ms=");
            double b;
            /* The untuned time: a context now starts with the stored
             * parameters applied, so it cannot be measured again. */
            if (sscanf(line, "baseline ms=%lf", &b) == 1 && b > 0.0)
                base = b / 1e3;
            if (sscanf(line, "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu",
                       &prev_mi) != 1 &&
                strncmp(line, "best GemmRoutine", 16) == 0)
                prev_mi = 0;
            if (strncmp(line, "tried Xgemm ", 12) != 0 || ms == NULL)
                continue;
            *ms = '\0';
            if (parse_cand(line + 12, &c) != 0)
                continue;
            for (i = 0; i < ncand; i++)
                if (memcmp(&c, &cands[i], sizeof c) == 0)
                    tried_ms[i] = atof(ms + 4);
        }
        fclose(f);
        f = NULL;
    }

    memset(&d, 0, sizeof d);
    d.d_model = o.d_model;
    d.heads = o.heads;
    d.max_seq_len = o.seq_len;
    d.k = o.k;
    d.bias_out = 1;
    count = o.seq_len * o.d_model;
    hx = malloc(count * sizeof *hx);
    if (hx == NULL) {
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        goto done;
    }
    for (i = 0; i < count; i++)
        hx[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    x = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                       count * sizeof(float), hx, &err);
    if (x != NULL)
        y = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE,
                           count * sizeof(float), NULL, &err);
    if (x == NULL || y == NULL) {
        rc = clf__fail(err, "tuning buffers: clCreateBuffer failed (%d)",
                       err);
        goto done;
    }
    if ((rc = clf_attention_create(&att, ctx, &d)) != 0 ||
        (rc = clf_attention_randomize(att, 7)) != 0)
        goto done;
    ref = malloc(count * sizeof *ref);
    got = malloc(count * sizeof *got);
    if (ref == NULL || got == NULL) {
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        goto done;
    }
    /* The reference output, from the parameters in force now (CLBlast's
     * defaults, or a stored choice that passed this check before). */
    if (time_forward(ctx, att, x, y, o.seq_len, 1, &t) != 0 ||
        clEnqueueReadBuffer(ctx->queue, y, CL_TRUE, 0, count * sizeof(float),
                            ref, 0, NULL, NULL) != CL_SUCCESS) {
        rc = clf__fail(CLF_EINVALID_ARGUMENT, "reference forward failed: %s",
                       clf_last_error());
        goto done;
    }

    say(&o, "tuning %s / %s for D=%zu h=%zu k=%zu n=%zu, budget %.0f s",
        ctx->info.platform, ctx->info.name, o.d_model, o.heads, o.k,
        o.seq_len, o.budget_s);
    if (base > 0.0) {
        say(&o, "resuming: untuned %.1f ms per forward (stored)", base * 1e3);
    } else if (ctx->tuned[0] != '\0') {
        rc = clf__fail(CLF_EINVALID_ARGUMENT,
                       "this context already applies stored parameters "
                       "but their file lacks the untuned baseline; remove "
                       "%s and tune again",
                       path);
        goto done;
    } else {
        if (time_forward(ctx, att, x, y, o.seq_len, 3, &base) != 0) {
            rc = clf__fail(CLF_EINVALID_ARGUMENT,
                           "baseline forward failed: %s", clf_last_error());
            goto done;
        }
        say(&o, "CLBlast's defaults: %.1f ms per forward", base * 1e3);
    }

    for (i = 0; i < ncand; i++) {
        if (tried_ms[i] >= 0.0) {
            if (tried_ms[i] > 0.0 && tried_ms[i] < best_ms) {
                best_ms = tried_ms[i];
                best = cands[i];
                have_best = 1;
            }
            done++;
            continue;
        }
        /* Every call measures at least one new candidate, so that short
         * budgets still make progress. */
        if (measured > 0 && clf__now_s() - start > o.budget_s) {
            say(&o, "budget reached after %zu of %zu candidates; run again "
                    "to continue",
                done, ncand);
            break;
        }
        if (apply_xgemm(ctx, &cands[i]) != 0 ||
            time_forward(ctx, att, x, y, o.seq_len, 3, &t) != 0 ||
            same_output(ctx, y, ref, got, count) != 0)
            t = 0.0; /* rejected by CLBlast, failed or wrong: never chosen */
        tried_ms[i] = t * 1e3;
        done++;
        measured++;
        format_cand(&cands[i], text, sizeof text);
        if (t > 0.0)
            say(&o, "[%zu/%zu] %s: %.1f ms", done, ncand, text, t * 1e3);
        else
            say(&o, "[%zu/%zu] %s: failed or wrong results", done, ncand,
                text);
        if (t > 0.0 && t * 1e3 < best_ms) {
            best_ms = t * 1e3;
            best = cands[i];
            have_best = 1;
        }
    }

    /* CLBlast's switch between its direct GEMM kernel and the indirect one
     * (pad, transpose, Xgemm), with the chosen Xgemm parameters in place.
     * An override cannot be undone within a process, so the configuration
     * as it stands is timed first and a value is kept only when it beats
     * that by more than 3% (a value stored earlier stays otherwise). */
    if (have_best)
        apply_xgemm(ctx, &best);
    if (time_forward(ctx, att, x, y, o.seq_len, 3, &t) == 0) {
        double now_ms = t * 1e3;
        say(&o, "direct/indirect switch as it stands: %.1f ms", now_ms);
        for (i = 0; i < sizeof mi_values / sizeof mi_values[0]; i++) {
            if (apply_min_indirect(ctx, mi_values[i]) != 0 ||
                time_forward(ctx, att, x, y, o.seq_len, 3, &t) != 0 ||
                same_output(ctx, y, ref, got, count) != 0)
                t = 0.0;
            mi_ms[i] = t * 1e3;
            if (t > 0.0)
                say(&o, "direct/indirect switch XGEMM_MIN_INDIRECT_SIZE=%zu: "
                        "%.1f ms",
                    mi_values[i], t * 1e3);
            else
                say(&o, "direct/indirect switch XGEMM_MIN_INDIRECT_SIZE=%zu: "
                        "failed or wrong results",
                    mi_values[i]);
            if (t > 0.0 && t * 1e3 < 0.97 * now_ms &&
                (best_mi == 0 || t * 1e3 < best_mi_ms)) {
                best_mi = mi_values[i];
                best_mi_ms = t * 1e3;
            }
        }
    }
    if (best_mi == 0 && prev_mi != 0)
        best_mi = prev_mi;

    /* Write everything measured, and the winner if it beats the untuned
     * parameters.  Written whole and renamed, so a reader never sees half a
     * file. */
    {
        char tmp[4400];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        f = fopen(tmp, "w");
        if (f == NULL) {
            rc = clf__fail(CLF_EIO, "cannot write %s", tmp);
            goto done;
        }
        fprintf(f, "# clinformer GEMM tuning: %s / %s / driver %s\n",
                ctx->info.platform, ctx->info.name, ctx->info.driver);
        fprintf(f, "baseline ms=%.3f\n", base * 1e3);
        if (have_best && best_ms < base * 1e3) {
            format_cand(&best, text, sizeof text);
            fprintf(f, "best Xgemm %s\n", text);
        }
        if (best_mi != 0)
            fprintf(f, "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu\n",
                    best_mi);
        for (i = 0; i < sizeof mi_values / sizeof mi_values[0]; i++)
            fprintf(f, "tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE=%zu "
                       "ms=%.3f\n",
                    mi_values[i], mi_ms[i]);
        for (i = 0; i < ncand; i++)
            if (tried_ms[i] >= 0.0) {
                format_cand(&cands[i], text, sizeof text);
                fprintf(f, "tried Xgemm %s ms=%.3f\n", text, tried_ms[i]);
            }
        if (fclose(f) != 0 || rename(tmp, path) != 0) {
            f = NULL;
            remove(tmp);
            rc = clf__fail(CLF_EIO, "cannot write %s", path);
            goto done;
        }
        f = NULL;
    }
    if (have_best && best_ms < base * 1e3) {
        format_cand(&best, text, sizeof text);
        say(&o, "best: %s: %.1f ms per forward (%.2fx the untuned %.1f ms); "
                "stored in %s",
            text, best_ms, base * 1e3 / best_ms, base * 1e3, path);
        if (best_mi != 0 && best_mi_ms > 0.0)
            say(&o, "with XGEMM_MIN_INDIRECT_SIZE=%zu: %.1f ms (%.2fx the "
                    "untuned)",
                best_mi, best_mi_ms, base * 1e3 / best_mi_ms);
        else if (best_mi != 0)
            say(&o, "keeping the stored XGEMM_MIN_INDIRECT_SIZE=%zu",
                best_mi);
    } else {
        say(&o, "no candidate beat the current parameters (%.1f ms); stored "
                "the measurements in %s",
            base * 1e3, path);
    }
    apply_stored(ctx);
done:
    if (f != NULL)
        fclose(f);
    clf_attention_destroy(att);
    if (x != NULL)
        clReleaseMemObject(x);
    if (y != NULL)
        clReleaseMemObject(y);
    free(hx);
    free(ref);
    free(got);
    free(tried_ms);
    ctx->gemm_variant = CLF_GEMM_UNDECIDED;
    ctx->attend_variant = CLF_ATTEND_UNDECIDED;
    return rc;
}
