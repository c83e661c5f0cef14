/* GEMM tuning: stores what it measured, resumes, and a context created
 * afterwards applies the choice and still computes the right numbers.  Runs
 * in a temporary cache directory with a tiny layer and a short budget.
 *
 * Every Xgemm candidate, XgemmDirect set and setting of CLBlast's
 * direct/indirect switch the search measures is a new build of CLBlast's
 * GEMM program (a dozen kernels, 8 to 15 s on PoCL from an empty cache,
 * about 50 s for XgemmDirect's 64 x 64 tiles; the whole space took ten
 * minutes).  So the search runs on a narrowed space (clf__tune_in): the
 * grid's first two Xgemm candidates, two XgemmDirect sets (enough for the
 * second call to measure one more of each than the first: the grid's
 * first and third, both 32 x 32 tiles) and the switch's first setting, on
 * a one-head layer whose GEMMs are all single (no strided batched program
 * to build besides).  Every step of the search still runs.
 * CLF_TEST_TUNE_SPACE=full searches every Xgemm candidate and switch
 * setting and the first four XgemmDirect sets (make check-slow,
 * tests/slow/test_tune_full.sh); CLF_TEST_TUNE_DIRECT_GRID=1 also measures
 * the whole XgemmDirect grid in one call (about twenty minutes on PoCL). */
#include "internal.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/clf-tune-XXXXXX";
static int full_space; /* CLF_TEST_TUNE_SPACE=full */
static const struct clf__tune_space narrow = {2, 1, 2, 2};
/* CLF_TEST_TUNE_SPACE=full: every Xgemm candidate and switch setting, the
 * first four XgemmDirect sets (each a build of CLBlast's program: the
 * whole grid in every test took CI's slow part from 4 to 25 minutes);
 * CLF_TEST_TUNE_DIRECT_GRID=1 adds tune_full_direct_grid, the whole grid
 * in one call. */
static const struct clf__tune_space full = {0, 0, 4, 0};

/* The progress lines of the last tune() call, joined. */
static char progress_text[65536];

static void
collect(const char *line, void *user)
{
    size_t len = strlen(progress_text);

    (void)user;
    snprintf(progress_text + len, sizeof progress_text - len, "%s\n", line);
}

/* The switch's settings a call measures: all five, or the narrowed
 * space's. */
static int
switch_settings(void)
{
    return full_space ? 5 : (int)narrow.switches;
}

/* The search on the suite's context, over the space in use. */
static int
tune(const clf_tune_opts *o)
{
    clf_tune_opts with = *o;

    progress_text[0] = '\0';
    with.progress = collect;
    return clf__tune_in(tu_context(), &with, full_space ? &full : &narrow);
}

/* Whether the last call's progress holds text. */
static void
assert_said(const char *text)
{
    ck_assert_msg(strstr(progress_text, text) != NULL,
                  "progress lacks \"%s\":\n%s", text, progress_text);
}

/* Counts lines starting with prefix in the directory's tune file. */
static int
count_lines(const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[600], line[1024];
    int n = -1;
    FILE *f;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "tune-", 5) == 0 &&
            strstr(e->d_name, ".tmp") == NULL) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            f = fopen(path, "r");
            ck_assert_ptr_nonnull(f);
            n = 0;
            while (fgets(line, sizeof line, f) != NULL)
                n += strncmp(line, prefix, strlen(prefix)) == 0;
            fclose(f);
        }
    closedir(d);
    return n;
}

static clf_tune_opts
small(void)
{
    clf_tune_opts o;

    memset(&o, 0, sizeof o);
    o.d_model = 32;
    o.heads = 1; /* with B = 1, every GEMM a single one */
    o.k = 8;
    o.seq_len = 48;
    o.budget_s = 3600.0;  /* ample: the baselines, one Xgemm candidate and */
    o.max_candidates = 1; /* one XgemmDirect set per call, the switch's */
    return o;
}

START_TEST(tune_stores_and_resumes)
{
    clf_tune_opts o = small();
    int tried;

    ck_assert_msg(tune(&o) == 0, "%s", clf_last_error());
    ck_assert_int_eq(count_lines("baseline ms="), 1);
    tried = count_lines("tried Xgemm ");
    ck_assert_int_ge(tried, 1);
    ck_assert_int_eq(count_lines("tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE="),
                     switch_settings());
    /* XgemmDirect: CLBlast's own set and one of the grid (max_candidates),
     * every GEMM direct, reported and counted. */
    ck_assert_int_eq(count_lines("baseline XgemmDirect ms="), 1);
    ck_assert_int_eq(count_lines("tried XgemmDirect WGD="), 1);
    assert_said("XgemmDirect: CLBlast's own set, every GEMM direct: ");
    assert_said("XgemmDirect [1/");
    assert_said("; XgemmDirect sets: 1 of ");
    ck_assert_msg(strstr(progress_text, "XgemmDirect: best WGD=") != NULL ||
                      strstr(progress_text, "XgemmDirect: no set beat") != NULL,
                  "no XgemmDirect verdict:\n%s", progress_text);
    /* A second call keeps what was measured and adds to it. */
    ck_assert_msg(tune(&o) == 0, "%s", clf_last_error());
    ck_assert_int_eq(count_lines("baseline ms="), 1);
    ck_assert_int_gt(count_lines("tried Xgemm "), tried);
    ck_assert_int_eq(count_lines("baseline XgemmDirect ms="), 1);
    ck_assert_int_eq(count_lines("tried XgemmDirect WGD="), 2);
    /* the stored baseline resumed, not measured again */
    assert_said("XgemmDirect: CLBlast's own set, every GEMM direct (stored): ");
    assert_said("XgemmDirect [2/");
    assert_said("; XgemmDirect sets: 2 of ");
    /* The context's GEMM and attention choices were made against the old
     * parameters: they are made again at its next forward. */
    ck_assert_int_eq(clf__gemm_pinned(tu_context()), CLF_GEMM_UNDECIDED);
    ck_assert_int_eq(clf__ways_pinned(tu_context()), CLF_ATTEND_UNDECIDED);
}
END_TEST

/* Every set of the XgemmDirect grid keeps CLBlast's constraints: under
 * limits every set fits (work-groups of 1024, 64 KiB of local memory)
 * the checker refuses none, so only a device's own limits drop sets.
 * (Whether CLBlast builds each one is what tune_full_direct_grid runs.) */
START_TEST(tune_direct_grid_keeps_constraints)
{
    struct clf__limits lim;
    char why[256];
    const size_t *v;
    size_t i;

    memset(&lim, 0, sizeof lim);
    lim.max_wg = 1024;
    lim.max_item[0] = lim.max_item[1] = 1024;
    lim.local_mem = 65536;
    for (i = 0; (v = clf__tune_direct_set(i)) != NULL; i++)
        ck_assert_msg(clf__tune_check_direct(v, &lim, why, sizeof why) == 0,
                      "XgemmDirect set %zu: %s", i, why);
    ck_assert_uint_ge(i, 8);
    ck_assert_uint_le(i, CLF_TUNE_MAX_DIRECT);
}
END_TEST

/* The whole XgemmDirect grid (CLF_TEST_TUNE_DIRECT_GRID=1 only, one build of
 * CLBlast's GEMM program a set): every set valid for the device measured
 * in one call, none skipped, each stored, every output checked by the
 * tuner (a set that failed or computed wrong results is stored as
 * ms=0). */
START_TEST(tune_full_direct_grid)
{
    static const struct clf__tune_space direct_all = {1, 1, 0, 0};
    clf_tune_opts o = small();
    const char *p;
    size_t tried = 0, of = 0, skipped = 1;

    o.max_candidates = 0;
    o.progress = collect;
    progress_text[0] = '\0';
    ck_assert_msg(clf__tune_in(tu_context(), &o, &direct_all) == 0, "%s",
                  clf_last_error());
    p = strstr(progress_text, "; XgemmDirect sets: ");
    ck_assert_msg(p != NULL &&
                      sscanf(p, "; XgemmDirect sets: %zu of %zu tried, %zu",
                             &tried, &of, &skipped) == 3,
                  "%s", progress_text);
    ck_assert_uint_ge(of, 2);
    ck_assert_uint_eq(tried, of);
    ck_assert_uint_eq(skipped, 0);
    ck_assert_int_eq(count_lines("tried XgemmDirect WGD="), (int)of);
}
END_TEST

/* A context created after tuning applies the stored choice (if any beat
 * the defaults) when asked to, and its forwards still match the
 * reference. */
START_TEST(tune_choice_keeps_results_right)
{
    clf_context *ctx = NULL;
    clf_attention_desc d;
    struct layer l;
    const size_t B = 2, n = 40;
    float *x, *y;
    double *ref;
    const char *t;

    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_str_eq(clf_context_tuning(ctx), ""); /* never implicit */
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    t = clf_context_tuning(ctx);
    ck_assert_msg(t[0] == '\0' || strncmp(t, "Xgemm ", 6) == 0 ||
                      strncmp(t, "XgemmDirect ", 12) == 0 ||
                      strncmp(t, "XGEMM_MIN_INDIRECT_SIZE=", 24) == 0 ||
                      strncmp(t, "Tiled ", 6) == 0,
                  "tuning \"%s\"", t);
    clf_context_destroy(ctx);

    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 2;
    d.max_seq_len = 48;
    d.k = 8;
    d.bias_k = d.bias_out = 1;
    layer_make(&l, &d, 5);
    x = tu_malloc(B * n * 32 * sizeof *x);
    y = tu_malloc(B * n * 32 * sizeof *y);
    ref = tu_malloc(B * n * 32 * sizeof *ref);
    tu_fill(x, B * n * 32, 6, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_forward(l.att, x, B, n, y), 0);
    ref_attention(&l.ref, 0, x, B, n, ref);
    tu_assert_close(y, ref, B * n * 32, 1e-5, "tuned forward");
    layer_free(&l);
    free(x);
    free(y);
    free(ref);
}
END_TEST

START_TEST(tune_needs_a_cache_directory)
{
    clf_tune_opts o = small();
    int rc;

    setenv("CLINFORMER_CACHE_DIR", "off", 1);
    rc = clf_tune(tu_context(), &o);
    setenv("CLINFORMER_CACHE_DIR", dir, 1);
    ck_assert_int_eq(rc, CLF_EIO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "cache directory"));
    ck_assert_int_eq(clf_tune(NULL, &o), CLF_ENULL_ARGUMENT);
}
END_TEST

/* A valid best Xgemm record's parameters, one of them replaced. */
static const char *const good_params =
    "GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=64 NDIMB=8 NDIMC=8 "
    "NWG=64 SA=1 SB=1 STRM=0 STRN=0 VWM=4 VWN=4";

static const struct clf__limits limits = {256, {256, 256}, 32768};

static void
with_param(char *out, size_t cap, const char *name, const char *value)
{
    const char *p = strstr(good_params, name);
    size_t pre;

    ck_assert_ptr_nonnull(p);
    pre = (size_t)(p - good_params);
    snprintf(out, cap, "best Xgemm %.*s%s=%s%s\n", (int)pre, good_params, name,
             value, strchr(p, ' ') ? strchr(p, ' ') : "");
}

static int
parse(const char *text, char *why, size_t cap)
{
    static struct clf__tune_file tf;

    return clf__tune_parse(text, strlen(text), &limits, &tf, why, cap);
}

/* Every class of bad value is refused, naming the field at fault. */
START_TEST(tune_file_rejects_bad_values)
{
    static const struct {
        const char *name, *value, *why;
    } bad[] = {
        {"MWG", "0", "MWG=0"},   /* zero: division in the kernel */
        {"KWI", "0", "KWI=0"},   /* zero: an endless loop */
        {"MWG", "48", "MWG=48"}, /* not a power of two */
        {"VWM", "3", "VWM=3"},   /* not a vector width */
        {"VWN", "32", "VWN=32"}, /* too wide */
        {"SA", "2", "SA=2"},     /* a switch is 0 or 1 */
        {"MWG", "16", "MWG=16 is not a multiple of MDIMC*VWM=32"},
        {"NWG", "16", "NWG=16 is not a multiple of NDIMC*VWN=32"},
        {"KWI", "64", "KWG=32 is not a multiple of KWI*1=64"},
        {"MDIMA", "128", "MWG=64 is not a multiple of MDIMA*VWM=512"},
        {"KWG", "4", "KWG=4 is not a multiple of MDIMC*NDIMC/MDIMA=8"},
        {"MDIMC", "32", "work-group"}, /* 32 x 8 fits, 32*... below */
        {"MWG", "99999999999999999999", "not a number"},
        {"MWG", "-64", "not a number"},
        {"MWG", "64x", "not a number"},
        {"MWG", "", "not a number"},
    };
    char text[1024], why[400];
    size_t i;

    with_param(text, sizeof text, "MWG", "64");
    ck_assert_msg(parse(text, why, sizeof why) == 0, "%s", why);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        with_param(text, sizeof text, bad[i].name, bad[i].value);
        if (i == 11) /* a 32 x 32 work-group exceeds the limit of 256 */
            snprintf(text, sizeof text,
                     "best Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=32 "
                     "MDIMC=32 MWG=128 NDIMB=32 NDIMC=32 NWG=128 SA=0 SB=0 "
                     "STRM=0 STRN=0 VWM=1 VWN=1\n");
        ck_assert_msg(parse(text, why, sizeof why) == -1, "accepted %s", text);
        ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: why \"%s\"", text,
                      why);
    }
}
END_TEST

/* A record the parser must refuse, and words its reason must hold. */
struct bad_record {
    const char *text, *why;
};

static void
expect_refused(const struct bad_record *bad, size_t n)
{
    char why[400];
    size_t i;

    for (i = 0; i < n; i++) {
        ck_assert_msg(parse(bad[i].text, why, sizeof why) == -1, "accepted %s",
                      bad[i].text);
        ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: why \"%s\"",
                      bad[i].text, why);
    }
}

/* Divisibility of the reshaped loads, the register-tiled kernel's rules,
 * local memory, and the records themselves. */
START_TEST(tune_file_rejects_bad_records)
{
    static const struct bad_record bad[] = {
        {"best Xgemm GEMMK=0 KREG=1 KWG=16 KWI=2 MDIMA=8 MDIMC=16 MWG=64 "
         "NDIMB=8 NDIMC=16 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=1 VWN=1\n",
         "KWG=16 is not a multiple of MDIMC*NDIMC/MDIMA=32"},
        {"best Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=2 MWG=64 "
         "NDIMB=8 NDIMC=2 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=1 VWN=1\n",
         "MDIMC*NDIMC=4 is not a multiple of MDIMA"},
        {"best Xgemm GEMMK=1 KREG=1 KWG=1 KWI=1 MDIMA=8 MDIMC=8 MWG=64 "
         "NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=2 VWN=2\n",
         "KREG=1 is not a multiple of VWN=2"},
        {"best Xgemm GEMMK=1 KREG=2 KWG=1 KWI=1 MDIMA=4 MDIMC=8 MWG=64 "
         "NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=2 VWN=2\n",
         "GEMMK=1 needs"},
        {"best Xgemm GEMMK=0 KREG=1 KWG=256 KWI=2 MDIMA=8 MDIMC=8 MWG=64 "
         "NDIMB=8 NDIMC=8 NWG=64 SA=1 SB=1 STRM=0 STRN=0 VWM=1 VWN=1\n",
         "131072 bytes of local memory"},
        {"best Xgemm GEMMK=0 KREG=1\n", "2 Xgemm parameters"},
        {"best Xgemm GEMMK=0 GEMMK=0 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=64 "
         "NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=1 VWN=1\n",
         "GEMMK given twice"},
        {"best Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=64 "
         "NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=1 XYZ=1\n",
         "unknown Xgemm parameter XYZ=1"},
        {"best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=0\n", "line 1: not"},
        {"# ok\nbaseline ms=-1\n", "line 2: not baseline"},
        {"baseline ms=nan\n", "not baseline"},
        {"baseline ms=inf\n", "not baseline"},
        /* times no forward takes: below the file's 0.001 ms, over a day */
        {"baseline ms=1e-300\n", "not baseline"},
        {"baseline ms=1e9\n", "not baseline"},
        {"tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128 ms=0.0001\n", "not"},
        {"tried Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=64 "
         "NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=1 VWN=1 "
         "ms=1e-300\n",
         "no valid ms=T"},
        {"tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128 ms=x\n", "not"},
        {"tried Xgemm MWG=64 ms=1\n", "1 Xgemm parameters"},
        {"frobnicate\n", "unknown record frobnicate"},
        {"best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128\n"
         "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=256\n",
         "line 2: a second best GemmRoutine"},
    };
    char why[400], line[1100];

    expect_refused(bad, sizeof bad / sizeof bad[0]);
    memset(line, 'x', sizeof line);
    line[sizeof line - 1] = '\0';
    ck_assert_int_eq(parse(line, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "longer than"));
    ck_assert_int_eq(clf__tune_parse("baseline ms=1\n\0", 15, &limits,
                                     &(struct clf__tune_file){0}, why,
                                     sizeof why),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "NUL"));
    /* 0 marks a candidate that failed, and the bounds are valid times */
    ck_assert_msg(parse("tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128 ms=0\n"
                        "baseline ms=0.001\n",
                        why, sizeof why) == 0,
                  "%s", why);
}
END_TEST

/* What clf_tune writes parses back, the tried records included. */
START_TEST(tune_file_parses_what_is_written)
{
    static struct clf__tune_file tf;
    const char *text =
        "# clinformer GEMM tuning: p / d / driver 1\n"
        "baseline ms=12.500\n"
        "compile ms=23125.000\n"
        "best Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=64 "
        "NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=1 VWN=4\n"
        "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=512\n"
        "tried GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128 ms=0.000\n"
        "tried Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=64 "
        "NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=1 VWN=4 "
        "ms=10.250\n";
    char why[400];

    ck_assert_msg(
        clf__tune_parse(text, strlen(text), &limits, &tf, why, sizeof why) == 0,
        "%s", why);
    ck_assert_int_eq(tf.have_best, 1);
    ck_assert_uint_eq(tf.best[6], 64); /* MWG */
    ck_assert_uint_eq(tf.best[15], 4); /* VWN */
    ck_assert_uint_eq(tf.min_indirect, 512);
    ck_assert_double_eq_tol(tf.baseline_ms, 12.5, 1e-9);
    ck_assert_double_eq_tol(tf.compile_ms, 23125.0, 1e-9);
    ck_assert_uint_eq(tf.ntried, 1);
    ck_assert_double_eq_tol(tf.tried_ms[0], 10.25, 1e-9);
    /* the build time a budget is planned with: positive, a number */
    ck_assert_int_eq(
        clf__tune_parse("compile ms=0\n", 13, &limits, &tf, why, sizeof why),
        -1);
    ck_assert_msg(strstr(why, "not compile ms=T") != NULL, "why \"%s\"", why);
    ck_assert_int_eq(
        clf__tune_parse("compile ms=x\n", 13, &limits, &tf, why, sizeof why),
        -1);
}
END_TEST

static void
write_tune_file(const char *text)
{
    char path[4300];
    FILE *f;

    clf__tune_path(&tu_context()->info, path, sizeof path);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The device's limits, as clf_tune checks them. */
static void
device_limits(clf_context *ctx, struct clf__limits *lim)
{
    size_t items[3] = {0, 0, 0};

    memset(lim, 0, sizeof *lim);
    lim->local_mem = ctx->info.local_mem;
    ck_assert_int_eq(clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                                     sizeof lim->max_wg, &lim->max_wg, NULL),
                     CL_SUCCESS);
    ck_assert_int_eq(clGetDeviceInfo(ctx->device, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                                     sizeof items, items, NULL),
                     CL_SUCCESS);
    lim->max_item[0] = items[0];
    lim->max_item[1] = items[1];
}

/* The tuner measures every set of the tiled kernel's space and stores the
 * fastest, valid for the device; a context applying the file runs the
 * tiled kernel with those sizes, and a forward forced through it matches
 * the reference. */
START_TEST(tune_picks_valid_tiled_sizes)
{
    static struct clf__tune_file tf;
    struct clf__tiled_cfg space[CLF_TUNE_MAX_TILED];
    struct clf__limits lim;
    clf_context *ctx = NULL;
    clf_attention_desc d;
    struct layer l;
    char path[4300], *text = NULL, why[400];
    float x[40 * 32], y[40 * 32];
    double ref[40 * 32];
    size_t len = 0, nspace;
    clf_tune_opts o = small();

    ck_assert_msg(tune(&o) == 0, "%s", clf_last_error());
    device_limits(tu_context(), &lim);
    nspace = clf__tiled_space(space, CLF_TUNE_MAX_TILED, &lim);
    ck_assert_int_eq(count_lines("best Tiled "), 1);
    ck_assert_int_eq(count_lines("tried Tiled "), (int)nspace);
    clf__tune_path(&tu_context()->info, path, sizeof path);
    ck_assert_int_eq(
        clf__file_read_all(path, "tune file", 1 << 20, &text, &len), 0);
    ck_assert_msg(clf__tune_parse(text, len, &lim, &tf, why, sizeof why) == 0,
                  "%s", why);
    free(text);
    ck_assert_int_eq(tf.have_tiled, 1);
    ck_assert_uint_eq(tf.ntiled_tried, nspace);
    ck_assert_int_eq(clf__tiled_check(&tf.tiled, &lim, why, sizeof why), 0);

    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    ck_assert(memcmp(clf__tiled_state(ctx)->cfg.v, tf.tiled.v,
                     sizeof tf.tiled.v) == 0);
    ck_assert_ptr_nonnull(strstr(clf_context_tuning(ctx), "Tiled MWG="));
    clf_context_destroy(ctx);

    /* The suite's context applies it too (clf_tune left it applied). */
    ck_assert(memcmp(clf__tiled_state(tu_context())->cfg.v, tf.tiled.v,
                     sizeof tf.tiled.v) == 0);
    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 2;
    d.max_seq_len = 48;
    d.k = 8;
    d.bias_out = 1;
    layer_make(&l, &d, 19);
    tu_fill(x, 40 * 32, 20, -1.0f, 1.0f);
    ck_assert_int_eq(clf_context_force_kernel(tu_context(), "gemm", "tiled"),
                     0);
    ck_assert_int_eq(clf_attention_forward(l.att, x, 1, 40, y), 0);
    ck_assert_int_eq(clf_context_force_kernel(tu_context(), "gemm", NULL), 0);
    ref_attention(&l.ref, 0, x, 1, 40, ref);
    tu_assert_close(y, ref, 40 * 32, 1e-5, "forward with the tuned tiled GEMM");
    layer_free(&l);
}
END_TEST

/* Tiled records: what is written parses back; sizes the kernel was not
 * written for, or past the device's limits, make the file invalid. */
START_TEST(tune_file_tiled_records)
{
    static struct clf__tune_file tf;
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"best Tiled MWG=48 NWG=64 KWG=16 MDIM=8 NDIM=8 VW=4\n",
         "MWG=48 is not a power of two"},
        {"best Tiled MWG=64 NWG=16 KWG=16 MDIM=8 NDIM=8 VW=4\n", "NDIM*VW"},
        {"best Tiled MWG=64 NWG=64 KWG=16 MDIM=8 NDIM=8 VW=16\n",
         "VW=16 is not a power of two from 1 to 8"},
        {"best Tiled MWG=64 NWG=64 KWG=0 MDIM=8 NDIM=8 VW=4\n", "KWG=0"},
        {"best Tiled MWG=128 NWG=128 KWG=64 MDIM=16 NDIM=16 VW=4\n",
         "bytes of local memory"},
        {"best Tiled MWG=256 NWG=256 KWG=8 MDIM=32 NDIM=32 VW=4\n",
         "work-group"},
        {"best Tiled MWG=64 NWG=64 KWG=16 MDIM=1 NDIM=8 VW=4\n",
         "register block"},
        {"best Tiled MWG=64 NWG=64 KWG=16 MDIM=8 NDIM=8\n", "5 Tiled sizes"},
        {"best Tiled MWG=64 MWG=64 KWG=16 MDIM=8 NDIM=8 VW=4\n",
         "MWG given twice"},
        {"best Tiled MWG=64 NWG=64 KWG=16 MDIM=8 NDIM=8 XW=4\n",
         "unknown Tiled size XW=4"},
        {"best Tiled MWG=99999 NWG=64 KWG=16 MDIM=8 NDIM=8 VW=4\n",
         "not a number up to 4096"},
        {"best Tiled MWG=-64 NWG=64 KWG=16 MDIM=8 NDIM=8 VW=4\n",
         "not a number"},
        {"tried Tiled MWG=64 NWG=64 KWG=16 MDIM=8 NDIM=8 VW=4\n",
         "no valid ms=T"},
        {"best Tiled MWG=64 NWG=64 KWG=16 MDIM=8 NDIM=8 VW=4\n"
         "best Tiled MWG=64 NWG=64 KWG=16 MDIM=8 NDIM=8 VW=4\n",
         "line 2: a second best Tiled"},
    };
    const char *good = "baseline ms=3\n"
                       "best Tiled MWG=128 NWG=64 KWG=16 MDIM=16 NDIM=16 "
                       "VW=4\n"
                       "tried Tiled MWG=64 NWG=64 KWG=16 MDIM=8 NDIM=8 VW=4 "
                       "ms=2.500\n";
    char why[400];
    size_t i;

    ck_assert_msg(
        clf__tune_parse(good, strlen(good), &limits, &tf, why, sizeof why) == 0,
        "%s", why);
    ck_assert_int_eq(tf.have_tiled, 1);
    ck_assert_int_eq(tf.have_best, 0); /* no Xgemm record: none applied */
    ck_assert_uint_eq(tf.tiled.v[CLF_TILED_P_MWG], 128);
    ck_assert_uint_eq(tf.tiled.v[CLF_TILED_P_VW], 4);
    ck_assert_uint_eq(tf.ntiled_tried, 1);
    ck_assert_double_eq_tol(tf.tiled_tried_ms[0], 2.5, 1e-9);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(parse(bad[i].text, why, sizeof why) == -1, "accepted %s",
                      bad[i].text);
        ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: why \"%s\"",
                      bad[i].text, why);
    }
}
END_TEST

/* A stored file whose Tiled sizes break the kernel's rules is ignored
 * whole, with a warning naming them; the tiled kernel keeps its
 * defaults and still computes right. */
START_TEST(tune_bad_tiled_sizes_are_ignored)
{
    clf_context *ctx = NULL;
    struct clf__tiled_cfg def;

    tu_clear_dir(dir);
    write_tune_file("baseline ms=5\n"
                    "best Tiled MWG=64 NWG=64 KWG=16 MDIM=8 NDIM=8 VW=3\n");
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    ck_assert_str_eq(clf_context_tuning(ctx), "");
    ck_assert_msg(strstr(clf_context_warnings(ctx), "best Tiled: VW=3") != NULL,
                  "warning \"%s\"", clf_context_warnings(ctx));
    clf__tiled_default(&def);
    ck_assert(memcmp(clf__tiled_state(ctx)->cfg.v, def.v, sizeof def.v) == 0);
    clf_context_destroy(ctx);
    tu_clear_dir(dir);
}
END_TEST

/* A stored file with a zero tile size (a division by zero in CLBlast's
 * kernel) is ignored whole, with a warning, and forwards still work. */
START_TEST(tune_bad_file_is_ignored_with_a_warning)
{
    clf_context *ctx = NULL;
    struct layer l;
    clf_attention_desc d;
    float x[40 * 32], y[40 * 32];
    double ref[40 * 32];

    tu_clear_dir(dir);
    write_tune_file("baseline ms=5\n"
                    "best Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 "
                    "MWG=0 NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 "
                    "VWM=1 VWN=1\n"
                    "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128\n");
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_str_eq(clf_context_warnings(ctx), "");
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    ck_assert_str_eq(clf_context_tuning(ctx), "");
    ck_assert_msg(strstr(clf_context_warnings(ctx), "MWG=0") != NULL,
                  "warning \"%s\"", clf_context_warnings(ctx));
    clf_context_destroy(ctx);

    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 2;
    d.max_seq_len = 48;
    d.k = 8;
    d.bias_out = 1;
    layer_make(&l, &d, 9);
    tu_fill(x, 40 * 32, 10, -1.0f, 1.0f);
    ck_assert_int_eq(clf_attention_forward(l.att, x, 1, 40, y), 0);
    ref_attention(&l.ref, 0, x, 1, 40, ref);
    tu_assert_close(y, ref, 40 * 32, 1e-5, "forward after a bad tune file");
    layer_free(&l);
    tu_clear_dir(dir);
}
END_TEST

/* A tune file in a directory others may write in is not trusted. */
START_TEST(tune_file_in_shared_directory_is_ignored)
{
    clf_context *ctx = NULL;

    tu_clear_dir(dir);
    write_tune_file("baseline ms=5\n"
                    "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128\n");
    ck_assert_int_eq(chmod(dir, 0777), 0);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    ck_assert_int_eq(chmod(dir, 0700), 0);
    ck_assert_str_eq(clf_context_tuning(ctx), "");
    ck_assert_msg(strstr(clf_context_warnings(ctx), "writable") != NULL,
                  "warning \"%s\"", clf_context_warnings(ctx));
    clf_context_destroy(ctx);
    tu_clear_dir(dir);
}
END_TEST

/* A symbolic link at the tune file's name, even to a good file, is not
 * followed: nothing is applied and the warning says why, as for a FIFO. */
START_TEST(tune_file_symlink_is_ignored_with_a_warning)
{
    char path[4300], moved[4400];
    clf_context *ctx = NULL;

    tu_clear_dir(dir);
    write_tune_file("baseline ms=5\n"
                    "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128\n");
    clf__tune_path(&tu_context()->info, path, sizeof path);
    snprintf(moved, sizeof moved, "%s/elsewhere", dir);
    ck_assert_int_eq(rename(path, moved), 0);
    ck_assert_int_eq(symlink(moved, path), 0);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    ck_assert_str_eq(clf_context_tuning(ctx), "");
    ck_assert_msg(strstr(clf_context_warnings(ctx), "symbolic link") != NULL,
                  "warning \"%s\"", clf_context_warnings(ctx));
    clf_context_destroy(ctx);
    tu_clear_dir(dir);
}
END_TEST

/* Symlinks planted at the temporary names a writer might use are not
 * written through when tuning stores its file. */
START_TEST(tune_write_does_not_follow_planted_links)
{
    clf_tune_opts o = small();
    char path[4300], l1[4400], l2[4400], buf[16] = {0};
    char victim[] = "/tmp/clf-victim-XXXXXX";
    int fd = mkstemp(victim);
    FILE *f;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "victim", 6), 6);
    close(fd);
    clf__tune_path(&tu_context()->info, path, sizeof path);
    snprintf(l1, sizeof l1, "%s.tmp", path);
    snprintf(l2, sizeof l2, "%s.tmp-%ld-0", path, (long)getpid());
    ck_assert_int_eq(symlink(victim, l1), 0);
    ck_assert_int_eq(symlink(victim, l2), 0);
    ck_assert_msg(tune(&o) == 0, "%s", clf_last_error());
    unlink(l1);
    unlink(l2);
    f = fopen(victim, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(buf, 1, sizeof buf - 1, f), 6);
    fclose(f);
    unlink(victim);
    ck_assert_str_eq(buf, "victim");
    ck_assert_int_eq(count_lines("baseline ms="), 1);
}
END_TEST

/* seq_len * d_model floats that overflow size_t are refused before any
 * allocation. */
START_TEST(tune_size_overflow_is_refused)
{
    clf_tune_opts o = small();

    o.seq_len = (size_t)-1 / 64;
    o.d_model = 64;
    o.k = 8;
    ck_assert_int_eq(clf_tune(tu_context(), &o), CLF_ESIZE_OVERFLOW);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "seq_len"));
    o.seq_len = (size_t)-1 / 2 + 2;
    o.d_model = 2;
    ck_assert_int_eq(clf_tune(tu_context(), &o), CLF_ESIZE_OVERFLOW);
}
END_TEST

/* A budget far below one compile: the call returns without starting one
 * (the kernels of the reference forward are warm from a first call). */
START_TEST(tune_tiny_budget_returns_quickly)
{
    clf_tune_opts o = small();
    double t0;

    o.budget_s = 1e-3;
    o.max_candidates = 0;
    ck_assert_msg(clf_tune(tu_context(), &o) == 0, "%s", clf_last_error());
    t0 = clf__now_s();
    ck_assert_msg(clf_tune(tu_context(), &o) == 0, "%s", clf_last_error());
    ck_assert_msg(clf__now_s() - t0 < 2.0, "a 1 ms budget took %.1f s",
                  clf__now_s() - t0);
}
END_TEST

/* A valid XgemmDirect set (the grid's first) as the text of a record. */
static const char *const good_direct =
    "WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 VWMD=4 VWND=4 PADA=1 "
    "PADB=1";

/* XgemmDirect records: every class of bad value or record is refused
 * naming the line and the field. */
static const struct bad_record bad_direct[] = {
    {"best XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=1\n",
     "line 1: 9 XgemmDirect parameters, not 10"},
    {"best XgemmDirect WGD=48 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=1 PADB=1\n",
     "best XgemmDirect: WGD=48 is not a power of two"},
    {"best XgemmDirect WGD=0 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=1 PADB=1\n",
     "WGD=0 is not a power of two"},
    {"best XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=2 PADB=1\n",
     "PADA=2 is not 0 or 1"},
    {"best XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=32 VWND=4 PADA=1 PADB=1\n",
     "VWMD=32 is not a power of two from 1 to 16"},
    {"best XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=64 "
     "VWMD=4 VWND=4 PADA=1 PADB=1\n",
     "WGD=32 is not a multiple of KWID*1=64"},
    {"best XgemmDirect WGD=16 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=1 PADA=1 PADB=1\n",
     "WGD=16 is not a multiple of MDIMCD*VWMD=32"},
    {"best XgemmDirect WGD=16 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=1 VWND=4 PADA=1 PADB=1\n",
     "WGD=16 is not a multiple of NDIMCD*VWND=32"},
    {"best XgemmDirect WGD=8 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=2 VWND=1 PADA=1 PADB=1\n",
     "WGD=8 is not a multiple of MDIMCD*VWMD=16"},
    {"best XgemmDirect WGD=32 MDIMCD=2 NDIMCD=2 MDIMAD=8 NDIMBD=2 KWID=2 "
     "VWMD=1 VWND=1 PADA=1 PADB=1\n",
     "MDIMCD*NDIMCD=4 is not a multiple of MDIMAD and NDIMBD"},
    {"best XgemmDirect WGD=8 MDIMCD=8 NDIMCD=8 MDIMAD=1 NDIMBD=8 KWID=2 "
     "VWMD=1 VWND=1 PADA=1 PADB=1\n",
     "WGD=8 is not a multiple of MDIMCD*NDIMCD/MDIMAD=64"},
    {"best XgemmDirect WGD=32 MDIMCD=32 NDIMCD=32 MDIMAD=32 NDIMBD=32 "
     "KWID=2 VWMD=1 VWND=1 PADA=1 PADB=1\n",
     "a work-group of MDIMCD=32 x NDIMCD=32 exceeds"},
    {"best XgemmDirect WGD=128 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=1 PADB=1\n",
     "132096 bytes of local memory"},
    {"best XgemmDirect WGD=32 WGD=32 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=1 PADB=1\n",
     "WGD given twice"},
    {"best XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=1 XYZ=1\n",
     "unknown XgemmDirect parameter XYZ=1"},
    {"best XgemmDirect WGD=-32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=1 PADB=1\n",
     "WGD=-32 is not a number"},
    {"# a comment\ntried XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 "
     "NDIMBD=8 KWID=2 VWMD=4 VWND=4 PADA=1 PADB=1\n",
     "line 2: no valid ms=T"},
    {"tried XgemmDirect WGD=32 ms=1\n", "1 XgemmDirect parameters"},
    {"baseline XgemmDirect ms=0\n", "line 1: not baseline XgemmDirect"},
    {"baseline XgemmDirect ms=x\n", "not baseline XgemmDirect ms=T"},
    {"baseline XgemmDirect ms=1\nbaseline XgemmDirect ms=2\n",
     "line 2: a second baseline XgemmDirect record"},
    {"best XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=1 PADB=1\n"
     "best XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 "
     "VWMD=4 VWND=4 PADA=1 PADB=1\n",
     "line 2: a second best XgemmDirect record"},
};

START_TEST(tune_file_refuses_bad_direct_records)
{
    expect_refused(bad_direct, sizeof bad_direct / sizeof bad_direct[0]);
}
END_TEST

/* What clf__tune_write writes of XgemmDirect parses back field for
 * field. */
START_TEST(tune_file_direct_records_round_trip)
{
    static struct clf__tune_file tf, back;
    char why[400], path[600], *text = NULL;
    size_t len = 0;

    memset(&tf, 0, sizeof tf);
    tf.baseline_ms = 40.5;
    tf.direct_baseline_ms = 31.25;
    tf.have_direct = 1;
    memcpy(tf.direct, (size_t[]){64, 16, 8, 16, 8, 4, 4, 8, 0, 0},
           sizeof tf.direct);
    tf.ndirect_tried = 2;
    memcpy(tf.direct_tried[0], tf.direct, sizeof tf.direct);
    tf.direct_tried_ms[0] = 12.125;
    memcpy(tf.direct_tried[1], (size_t[]){32, 8, 8, 8, 8, 2, 4, 4, 1, 1},
           sizeof tf.direct);
    tf.direct_tried_ms[1] = 0.0; /* failed */
    snprintf(path, sizeof path, "%s/roundtrip.txt", dir);
    ck_assert_int_eq(clf__tune_write(path, &tu_context()->info, &tf), 0);
    ck_assert_int_eq(
        clf__file_read_all(path, "tune file", 1 << 20, &text, &len), 0);
    unlink(path);
    ck_assert_msg(clf__tune_parse(text, len, &limits, &back, why, sizeof why) ==
                      0,
                  "%s", why);
    ck_assert_ptr_nonnull(strstr(text, "best XgemmDirect WGD=64 MDIMCD=16 "));
    free(text);
    ck_assert_int_eq(back.have_direct, 1);
    ck_assert(memcmp(back.direct, tf.direct, sizeof tf.direct) == 0);
    ck_assert_double_eq_tol(back.direct_baseline_ms, 31.25, 1e-9);
    ck_assert_uint_eq(back.ndirect_tried, 2);
    ck_assert(memcmp(back.direct_tried, tf.direct_tried,
                     2 * sizeof tf.direct_tried[0]) == 0);
    ck_assert_double_eq_tol(back.direct_tried_ms[0], 12.125, 1e-9);
    ck_assert_double_eq_tol(back.direct_tried_ms[1], 0.0, 1e-9);
    ck_assert_int_eq(back.have_best, 0);
    ck_assert_int_eq(back.have_tiled, 0);
}
END_TEST

/* A stored file with a bad XgemmDirect line is ignored whole, and the
 * warning names the file, the line and the field. */
START_TEST(tune_bad_direct_line_is_ignored_with_a_warning)
{
    char path[4300];
    clf_context *ctx = NULL;
    const char *w;

    tu_clear_dir(dir);
    write_tune_file("baseline ms=5\n"
                    "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=128\n"
                    "tried XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 "
                    "NDIMBD=8 KWID=2 VWMD=4 VWND=4 PADA=1 PADB=1 ms=1e-9\n");
    clf__tune_path(&tu_context()->info, path, sizeof path);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    ck_assert_str_eq(clf_context_tuning(ctx), "");
    w = clf_context_warnings(ctx);
    ck_assert_msg(strstr(w, path) != NULL &&
                      strstr(w, "line 3: no valid ms=T") != NULL,
                  "warning \"%s\"", w);
    clf_context_destroy(ctx);
    tu_clear_dir(dir);
}
END_TEST

/* The largest error of y against ref, relative to ref's largest
 * magnitude; NaN counts as infinite. */
static double
rel_error(const float *y, const double *ref, size_t count)
{
    double scale = 1e-30, err = 0.0;
    size_t i;

    for (i = 0; i < count; i++) {
        double d = fabs((double)y[i] - ref[i]);
        if (fabs(ref[i]) > scale)
            scale = fabs(ref[i]);
        if (!(d <= err))
            err = isnan(d) ? INFINITY : d;
    }
    return err / scale;
}

/* A one-batch forward of a small layer with every GEMM through CLBlast
 * (as the tuner times them): its error against the reference, or
 * INFINITY when the forward failed.  One head, so every GEMM is a single
 * one: each set applied is then one build of CLBlast's program, not a
 * second of its batched one too (on PoCL from a cold cache, two heads made
 * this suite's CLBlast tests take three times as long). */
static double
clblast_forward_error(unsigned long long seed)
{
    clf_attention_desc d;
    struct layer l;
    float x[40 * 32], y[40 * 32];
    double ref[40 * 32], err = INFINITY;

    memset(&d, 0, sizeof d);
    d.d_model = 32;
    d.heads = 1;
    d.max_seq_len = 48;
    d.k = 8;
    d.bias_k = d.bias_out = 1;
    layer_make(&l, &d, seed);
    tu_fill(x, 40 * 32, seed + 1, -1.0f, 1.0f);
    ck_assert_int_eq(clf_context_force_kernel(tu_context(), "gemm", "clblast"),
                     0);
    ck_assert_int_eq(clf_context_force_kernel(tu_context(), "attend", "gemm"),
                     0);
    if (clf_attention_forward(l.att, x, 1, 40, y) == 0) {
        ref_attention(&l.ref, 0, x, 1, 40, ref);
        err = rel_error(y, ref, 40 * 32);
    }
    ck_assert_int_eq(clf_context_force_kernel(tu_context(), "gemm", NULL), 0);
    ck_assert_int_eq(clf_context_force_kernel(tu_context(), "attend", NULL), 0);
    layer_free(&l);
    return err;
}

/* What the tuner relies on: with XGEMM_MIN_INDIRECT_SIZE at 65536 (as it
 * times XgemmDirect) the GEMMs of a forward run XgemmDirect, and with it
 * at 1 they do not.  A set outside the kernel's constraints (WGD=8 with
 * vectors of 2 along MDIMAD=8: no work-item loads A's tile), refused by
 * the checks but accepted by CLBlast, spoils the forward under the first
 * switch and not under the second. */
START_TEST(tune_direct_switch_runs_xgemm_direct)
{
    static const size_t odd[CLF_TUNE_NDIRECT] = {8, 8, 8, 8, 8, 2, 2, 1, 1, 1};
    static const size_t ok[CLF_TUNE_NDIRECT] = {32, 8, 8, 8, 8, 2, 4, 4, 1, 1};
    struct clf__limits lim;
    char why[400];
    double err;

    device_limits(tu_context(), &lim);
    ck_assert_int_eq(clf__tune_check_direct(odd, &lim, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "WGD=8 is not a multiple of "
                                      "MDIMCD*VWMD=16"));
    ck_assert_int_eq(clf__tune_check_direct(ok, &lim, why, sizeof why), 0);
    ck_assert_int_eq(clf__tune_apply_direct(tu_context(), odd), 0);
    ck_assert_int_eq(clf__tune_apply_min_indirect(tu_context(), 65536), 0);
    err = clblast_forward_error(31);
    ck_assert_msg(err > 1e-3, "every GEMM direct under a broken set: error %g",
                  err);
    ck_assert_int_eq(clf__tune_apply_min_indirect(tu_context(), 1), 0);
    err = clblast_forward_error(31);
    ck_assert_msg(err <= 1e-5, "every GEMM indirect: error %g", err);
    /* A valid set, every GEMM direct: right again (and left in force for
     * what runs after this test in the process). */
    ck_assert_int_eq(clf__tune_apply_direct(tu_context(), ok), 0);
    ck_assert_int_eq(clf__tune_apply_min_indirect(tu_context(), 65536), 0);
    err = clblast_forward_error(33);
    ck_assert_msg(err <= 1e-5, "every GEMM direct, valid set: error %g", err);
}
END_TEST

/* "NAME=V NAME=V ..." in the order of clf__tune_xgemm_names into v. */
static void
xgemm_values(const char *params, size_t *v)
{
    const char *p = params;
    size_t i, len;

    for (i = 0; i < CLF_TUNE_NPARAM; i++) {
        len = strlen(clf__tune_xgemm_names[i]);
        ck_assert_msg(strncmp(p, clf__tune_xgemm_names[i], len) == 0 &&
                          p[len] == '=',
                      "%s at %s", clf__tune_xgemm_names[i], p);
        v[i] = strtoul(p + len + 1, (char **)&p, 10);
        while (*p == ' ')
            p++;
    }
}

/* The Xgemm checks against CLBlast itself: every record they accept gives
 * a forward matching the reference with every GEMM through Xgemm
 * (XGEMM_MIN_INDIRECT_SIZE 1), and the register-tiled kernel's records
 * they refuse really break CLBlast: local-memory tiles (SA, SB) do not
 * build.  Two are not run here, as the kernel then writes outside C (NaN
 * results, and on a CPU device, whose buffers are host memory, a
 * corrupted heap): KWG and KWI past 1 (CLBlast's tuner only ever pairs
 * GEMMK=1 with KWG=KWI=1), and, before CLBlast 1.6.3 (its fix of the
 * GEMMK=1 kernel), MWG != NWG. */
START_TEST(tune_checks_agree_with_clblast)
{
    static const struct {
        const char *params, *why; /* why: NULL where accepted */
        int run;                  /* whether to apply it */
    } rec[] = {
        {"GEMMK=1 KREG=2 KWG=16 KWI=2 MDIMA=8 MDIMC=8 MWG=32 NDIMB=8 "
         "NDIMC=8 NWG=32 SA=0 SB=0 STRM=0 STRN=0 VWM=2 VWN=2",
         "GEMMK=1 needs KWG=1 and KWI=1", 0},
        {"GEMMK=1 KREG=2 KWG=1 KWI=1 MDIMA=8 MDIMC=8 MWG=32 NDIMB=8 "
         "NDIMC=8 NWG=32 SA=1 SB=1 STRM=0 STRN=0 VWM=2 VWN=2",
         "GEMMK=1 needs SA=0 and SB=0", 1},
        {"GEMMK=1 KREG=2 KWG=1 KWI=1 MDIMA=8 MDIMC=8 MWG=32 NDIMB=8 "
         "NDIMC=8 NWG=32 SA=0 SB=0 STRM=0 STRN=0 VWM=2 VWN=2",
         NULL, 1},
        {"GEMMK=1 KREG=4 KWG=1 KWI=1 MDIMA=4 MDIMC=4 MWG=16 NDIMB=8 "
         "NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=4 VWN=4",
         "GEMMK=1 needs MWG=NWG with CLBlast before 1.6.3", 0},
        {"GEMMK=1 KREG=4 KWG=1 KWI=1 MDIMA=4 MDIMC=4 MWG=32 NDIMB=8 "
         "NDIMC=8 NWG=32 SA=0 SB=0 STRM=0 STRN=0 VWM=4 VWN=4",
         NULL, 1},
        {"GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=64 NDIMB=8 "
         "NDIMC=8 NWG=64 SA=1 SB=1 STRM=1 STRN=0 VWM=4 VWN=2",
         NULL, 1},
        {"GEMMK=0 KREG=1 KWG=32 KWI=8 MDIMA=16 MDIMC=8 MWG=32 NDIMB=4 "
         "NDIMC=16 NWG=64 SA=0 SB=1 STRM=0 STRN=1 VWM=2 VWN=4",
         NULL, 1},
    };
    struct clf__tune_file tf;
    struct clf__limits lim;
    char text[400], why[400];
    size_t i;
    double err;
    int rc;

    device_limits(tu_context(), &lim);
    for (i = 0; i < sizeof rec / sizeof rec[0]; i++) {
        snprintf(text, sizeof text, "best Xgemm %s\n", rec[i].params);
        rc = clf__tune_parse(text, strlen(text), &lim, &tf, why, sizeof why);
        if (rec[i].why != NULL) {
            ck_assert_msg(rc == -1 && strstr(why, rec[i].why) != NULL, "%s: %s",
                          rec[i].params, rc ? why : "accepted");
        } else
            ck_assert_msg(rc == 0, "%s: %s", rec[i].params, why);
    }
    /* Each applied (the refused ones by hand: the library never does),
     * every GEMM through Xgemm. */
    for (i = 0; i < sizeof rec / sizeof rec[0]; i++) {
        size_t v[CLF_TUNE_NPARAM];
        xgemm_values(rec[i].params, v);
        if (!rec[i].run)
            continue;
        if (rec[i].why == NULL &&
            clf__tune_check_xgemm(v, &lim, why, sizeof why) != 0)
            continue; /* past this device's limits */
        ck_assert_int_eq(clf__tune_apply_xgemm(tu_context(), v), 0);
        ck_assert_int_eq(clf__tune_apply_min_indirect(tu_context(), 1), 0);
        err = clblast_forward_error(51 + i);
        if (rec[i].why == NULL)
            ck_assert_msg(err <= 1e-5, "%s accepted, CLBlast's error %g",
                          rec[i].params, err);
        else
            ck_assert_msg(!(err <= 1e-3), "%s refused, CLBlast's error %g",
                          rec[i].params, err);
    }
    /* A valid set left in force for what runs after this test. */
    {
        size_t v[CLF_TUNE_NPARAM];
        xgemm_values(rec[5].params, v);
        ck_assert_int_eq(clf__tune_apply_xgemm(tu_context(), v), 0);
    }
}
END_TEST

/* A tune file's CLBlast record that CLBlast fails with at run time is
 * dropped at its first failure: the forward goes on, right, on the
 * library's own GEMM kernels (where they take its shapes, below), and the
 * context's warning names the record.
 * The record here is one the checks refuse (GEMMK=1 with SA=SB=1, which
 * CLBlast 1.5.3 cannot build), handed to CLBlast past them as a record
 * that passed them would be.  The same set applied for a trial (as the
 * tuner applies candidates) still fails the forward. */
START_TEST(tune_failing_record_is_dropped)
{
    static const char bad[] =
        "GEMMK=1 KREG=2 KWG=1 KWI=1 MDIMA=8 MDIMC=8 MWG=32 NDIMB=8 "
        "NDIMC=8 NWG=32 SA=1 SB=1 STRM=0 STRN=0 VWM=2 VWN=2";
    static const char good[] =
        "GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=64 NDIMB=8 "
        "NDIMC=8 NWG=64 SA=1 SB=1 STRM=1 STRN=0 VWM=4 VWN=2";
    struct clf__tune_file tf;
    size_t v[CLF_TUNE_NPARAM];
    const char *w;
    double err;
    int own_all;

    memset(&tf, 0, sizeof tf);
    xgemm_values(bad, tf.best);
    tf.have_best = 1;
    tf.min_indirect = 1;
    ck_assert_int_eq(clf__tune_apply_xgemm(tu_context(), tf.best), 0);
    ck_assert_int_eq(clf__tune_apply_min_indirect(tu_context(), 1), 0);
    err = clblast_forward_error(61);
    ck_assert_msg(!(err <= 1e-3), "the set on trial: CLBlast's error %g", err);

    ck_assert_int_eq(clf__tune_apply_records(tu_context(), &tf), 0);
    ck_assert_ptr_nonnull(strstr(clf_context_tuning(tu_context()), "SA=1"));
    /* The library's own kernels take every GEMM of this layer where the
     * tiled one runs (it takes any shape); without it (rusticl on
     * llvmpipe allows 32 work-items a group, the tiled kernel's groups
     * are 64) the blocked one takes only n a multiple of 16, and the
     * forward fails (INFINITY), never computes wrong values. */
    clf__lock(tu_context());
    own_all = clf__tiled_usable(tu_context());
    clf__unlock(tu_context());
    err = clblast_forward_error(62);
    w = clf_context_warnings(tu_context());
    ck_assert_msg(own_all ? err <= 1e-5 : err == INFINITY,
                  "the tune file's set: error %g (warnings: %s)", err, w);
    ck_assert_msg(strstr(w, "dropped the tune file's CLBlast parameters "
                            "(Xgemm ") != NULL &&
                      strstr(w, "SA=1") != NULL &&
                      strstr(w, "CLBlastSgemm") != NULL,
                  "warnings: %s", w);
    err = clblast_forward_error(63);
    ck_assert_msg(own_all ? err <= 1e-5 : err == INFINITY,
                  "a second forward: error %g", err);

    /* A valid set left in force for what runs after this test. */
    xgemm_values(good, v);
    ck_assert_int_eq(clf__tune_apply_xgemm(tu_context(), v), 0);
    err = clblast_forward_error(64);
    ck_assert_msg(err <= 1e-5, "a valid set after the drop: error %g", err);
}
END_TEST

/* A stored XgemmDirect set is applied (CLBlast accepts it), named in the
 * context's tuning, and a forward whose every GEMM runs it (the stored
 * switch at 65536) matches the reference. */
START_TEST(tune_stored_direct_set_is_applied)
{
    char text[1024];
    clf_context *ctx = NULL;
    const char *t;
    double err;

    tu_clear_dir(dir);
    snprintf(text, sizeof text,
             "baseline ms=5\n"
             "best GemmRoutine XGEMM_MIN_INDIRECT_SIZE=65536\n"
             "baseline XgemmDirect ms=4\n"
             "best XgemmDirect %s\n",
             good_direct);
    write_tune_file(text);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    ck_assert_msg(clf_tune_apply_process_wide(ctx) == 0, "%s",
                  clf_last_error());
    t = clf_context_tuning(ctx);
    ck_assert_msg(strstr(t, "XgemmDirect WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 "
                            "NDIMBD=8 KWID=2 VWMD=4 VWND=4 PADA=1 "
                            "PADB=1") != NULL &&
                      strstr(t, "XGEMM_MIN_INDIRECT_SIZE=65536") != NULL,
                  "tuning \"%s\", warnings \"%s\"", t,
                  clf_context_warnings(ctx));
    clf_context_destroy(ctx);
    ck_assert_msg(clf_tune_apply_process_wide(tu_context()) == 0, "%s",
                  clf_last_error());
    err = clblast_forward_error(35);
    ck_assert_msg(err <= 1e-5, "forward under the stored set: error %g", err);
    tu_clear_dir(dir);
}
END_TEST

/* The GEMM parameters shipped for devices CLBlast's database lacks: each
 * entry is found for its exact platform, device and driver only, passes
 * the tune file's checks, and, applied to this suite's device where its
 * limits allow (CLBlast builds a valid set on any device), gives a
 * forward matching the reference with every GEMM through Xgemm. */
START_TEST(tune_shipped_entries_are_sound)
{
    const struct clf__tune_shipped *s;
    struct clf__tune_file tf;
    struct clf__limits lim;
    clf_device_info info;
    char why[1100];
    size_t i;
    double err;

    device_limits(tu_context(), &lim);
    for (i = 0; (s = clf__tune_shipped_at(i)) != NULL; i++) {
        memset(&info, 0, sizeof info);
        snprintf(info.platform, sizeof info.platform, "%s", s->platform);
        snprintf(info.name, sizeof info.name, "%s", s->device);
        snprintf(info.driver, sizeof info.driver, "%s", s->driver);
        ck_assert_ptr_eq(clf__tune_shipped_for(&info), s);
        snprintf(info.driver, sizeof info.driver, "%s.1", s->driver);
        ck_assert_ptr_null(clf__tune_shipped_for(&info));
        ck_assert_msg(s->source != NULL && s->source[0] != '\0',
                      "entry %zu names no measurement", i);
        ck_assert_msg(clf__tune_parse(s->record, strlen(s->record), &limits,
                                      &tf, why, sizeof why) == 0 &&
                          tf.have_best,
                      "entry %zu (%s): %s", i, s->device, why);
        if (clf__tune_check_xgemm(tf.best, &lim, why, sizeof why) != 0) {
            printf("# %s's set is past this device's limits: %s\n", s->device,
                   why);
            continue;
        }
        ck_assert_int_eq(clf__tune_apply_xgemm(tu_context(), tf.best), 0);
        ck_assert_int_eq(clf__tune_apply_min_indirect(tu_context(), 1), 0);
        err = clblast_forward_error(41 + i);
        ck_assert_msg(err <= 1e-5, "%s's set: error %g", s->device, err);
    }
    ck_assert_uint_gt(i, 0);
}
END_TEST

/* A context whose device matches a shipped entry and has no tune file of
 * its own applies the entry and says so; with a tune file of its own,
 * that file wins, and an invalid one is not replaced by the entry. */
START_TEST(tune_shipped_entry_is_applied_without_a_tune_file)
{
    const struct clf__tune_shipped *s = clf__tune_shipped_at(0);
    clf_context *ctx = NULL;
    const char *t;
    char path[4300];
    FILE *f;

    ck_assert_ptr_nonnull(s);
    tu_clear_dir(dir);
    ck_assert_int_eq(clf_context_create(&ctx, NULL), 0);
    snprintf(ctx->info.platform, sizeof ctx->info.platform, "%s", s->platform);
    snprintf(ctx->info.name, sizeof ctx->info.name, "%s", s->device);
    snprintf(ctx->info.driver, sizeof ctx->info.driver, "%s", s->driver);
    ck_assert_msg(clf_tune_apply_process_wide(ctx) == 0, "%s",
                  clf_last_error());
    t = clf_context_tuning(ctx);
    ck_assert_msg(strncmp(t, s->record + 5, 30) == 0 &&
                      strstr(t, "(shipped for this device)") != NULL,
                  "tuning \"%s\"", t);
    /* a tune file of its own: that one, not the entry */
    clf__tune_path(&ctx->info, path, sizeof path);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "baseline ms=5\nbest Xgemm %s\n", good_params);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    t = clf_context_tuning(ctx);
    ck_assert_msg(strstr(t, "shipped") == NULL && t[0] != '\0', "tuning \"%s\"",
                  t);
    /* an invalid one: ignored with a warning, and nothing stands in */
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("best Xgemm GEMMK=7\n", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(clf_tune_apply_process_wide(ctx), 0);
    ck_assert_str_eq(clf_context_tuning(ctx), "");
    ck_assert_ptr_nonnull(strstr(clf_context_warnings(ctx), "ignored"));
    clf_context_destroy(ctx);
    tu_clear_dir(dir);
    /* the suite's device back under its own (absent) file */
    ck_assert_int_eq(clf_tune_apply_process_wide(tu_context()), 0);
}
END_TEST

static void
clear_dir(void)
{
    tu_clear_dir(dir);
}

int
main(void)
{
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("tune");
    int rc, host_only;

    if (mkdtemp(dir) == NULL) {
        printf("Bail out! cannot create a temporary cache directory\n");
        return 1;
    }
    setenv("CLINFORMER_CACHE_DIR", dir, 1);
    full_space = getenv("CLF_TEST_TUNE_SPACE") != NULL &&
                 strcmp(getenv("CLF_TEST_TUNE_SPACE"), "full") == 0;
    /* CLF_TEST_TUNE_HOST_ONLY=1 (CI's sanitizer build): only the tune
     * files' checks, which are host code; the searches, each many kernel
     * builds, take over a quarter of an hour under the sanitizers' heap
     * and run in the plain build. */
    host_only = getenv("CLF_TEST_TUNE_HOST_ONLY") != NULL &&
                strcmp(getenv("CLF_TEST_TUNE_HOST_ONLY"), "1") == 0;
    if (!host_only) {
        tcase_set_timeout(tc, 900);
        tcase_add_test(tc, tune_stores_and_resumes);
        tcase_add_test(tc, tune_picks_valid_tiled_sizes);
        tcase_add_test(tc, tune_choice_keeps_results_right);
        tcase_add_test(tc, tune_needs_a_cache_directory);
        tcase_add_test(tc, tune_tiny_budget_returns_quickly);
        tcase_add_test(tc, tune_write_does_not_follow_planted_links);
        if (getenv("CLF_TEST_TUNE_DIRECT_GRID") != NULL &&
            strcmp(getenv("CLF_TEST_TUNE_DIRECT_GRID"), "1") == 0)
            tcase_add_test(tc, tune_full_direct_grid);
        suite_add_tcase(s, tc);
    }
    /* What a stored file may hold, and the checks before any work. */
    tc = tcase_create("tune_file");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, tune_file_rejects_bad_values);
    tcase_add_test(tc, tune_file_rejects_bad_records);
    tcase_add_test(tc, tune_direct_grid_keeps_constraints);
    tcase_add_test(tc, tune_file_parses_what_is_written);
    tcase_add_test(tc, tune_file_tiled_records);
    tcase_add_test(tc, tune_bad_tiled_sizes_are_ignored);
    tcase_add_test(tc, tune_bad_file_is_ignored_with_a_warning);
    tcase_add_test(tc, tune_size_overflow_is_refused);
    tcase_add_test(tc, tune_file_in_shared_directory_is_ignored);
    tcase_add_test(tc, tune_file_symlink_is_ignored_with_a_warning);
    tcase_add_test(tc, tune_file_refuses_bad_direct_records);
    tcase_add_test(tc, tune_file_direct_records_round_trip);
    tcase_add_test(tc, tune_bad_direct_line_is_ignored_with_a_warning);
    suite_add_tcase(s, tc);
    if (!host_only) {
        /* XgemmDirect against the device: each a build of CLBlast's GEMM
         * program (after the searches: these leave overrides in force). */
        tc = tcase_create("direct");
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, tune_direct_switch_runs_xgemm_direct);
        tcase_add_test(tc, tune_stored_direct_set_is_applied);
        tcase_add_test(tc, tune_checks_agree_with_clblast);
        tcase_add_test(tc, tune_failing_record_is_dropped);
        tcase_add_test(tc, tune_shipped_entries_are_sound);
        tcase_add_test(tc, tune_shipped_entry_is_applied_without_a_tune_file);
        suite_add_tcase(s, tc);
    }
    rc = tu_run(s, 1);
    clear_dir();
    rmdir(dir);
    return rc;
}
