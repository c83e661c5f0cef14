/* Launch fill of the GPU path at the production shape (D = 512, h = 8,
 * d_h = 64, k = 256, n = 4096, B = 1), in the four modes (Linformer, full,
 * causal full, prefix-safe causal Linformer with blocks of 64), on both GPU
 * paths: the tiled GEMM with the GPU-shaped streaming kernel
 * (gemm=tiled,attend=flashwg) and the tiled GEMM with the GEMM path for
 * steps 3 to 5 and the work-group softmax (gemm=tiled,attend=gemm,
 * softmax=group), forced as CLINFORMER_KERNELS forces them, on the test's
 * device described as a GPU of 132 compute units (the tiled GEMM's split
 * over K reads ctx->info.compute_units).  The CPU path (gemm=blocked,
 * attend=flash) is held to the same target as the check's control: its
 * kernels are the known misfits.
 *
 * Each forward's launches come from the launch log
 * (clf_context_record_launches).  Each launch carries a share of the
 * forward: a tiled GEMM launch the FLOPs of the forward's GEMMs whose
 * geometry it has (clf__tiled_split on this context; a launch that is none
 * of them fails the test), over the FLOP model's total
 * (clf_attention_desc_flops); another kernel the larger of its stages'
 * FLOPs (the streaming kernels steps 3 to 5, softmax and masks the softmax
 * stage; bias, transposes and the causal window's kernels none) and its
 * work-items over the forward's (items x calls: the memory-bound kernels,
 * whose FLOPs say little).  Every launch of a kernel that carries at least
 * 5% must have at least 264 work-groups (two per compute unit; where the
 * driver picks the work-group, as many as groups of 256 items make) and
 * 32768 work-items, and the kernel must fit gfx90a offline (no scratch, at
 * least 4 waves per SIMD) in the table scripts/gpu-shape.sh --out writes
 * (CLF_GPU_SHAPE_TABLE, else the script is run here for gfx90a), and sm_90
 * too where the table has it (no spill or stack, at most 48 KiB of local
 * memory, at least 25% occupancy; CI's slow part gives both).  Without
 * the script (a device kit carries none) or without clang-15 and libclc-15
 * the test skips and says which, also under CLINFORMER_REQUIRE_DEVICE=1:
 * neither is a missing device.  A program that does not compile fails.
 *
 * The kernels known not to meet it are listed in `unfit` with the reason;
 * the list is checked both ways: a listed kernel that meets the target, or
 * that carries no share, fails the test until it is taken off the list.
 * Kernels under 5% that miss are printed, not held.  What this shows: the
 * launch geometry a GPU would get and the compiler's register and scratch
 * facts.  What it cannot show: time on a GPU, or how NVIDIA's compiler
 * allocates registers.
 *
 * Slow on a CPU (the full modes' n x n scores on the GEMM path, minutes):
 * run by make check-gpu-fill (CI's part gpu-shape), not make check. */
#include "internal.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FILL_D 512
#define FILL_H 8
#define FILL_K 256
#define FILL_N 4096
#define FILL_BLOCK 64
#define FILL_CUS 132
#define MIN_GROUPS (2 * FILL_CUS)
#define MIN_ITEMS 32768
#define MIN_SHARE 0.05

enum { LIN, FULL, CFULL, CLIN, MODES };
static const char *const mode_names[MODES] = {
    "linformer", "full", "causal-full", "causal-linformer"};

struct path {
    const char *name;
    const char *gemm, *attend, *softmax;
};
static const struct path paths[] = {
    {"flashwg", "tiled", "flashwg", "group"},
    {"gemm", "tiled", "gemm", "group"},
    /* The CPU path, held to the same target: the check's control. */
    {"cpu", "blocked", "flash", "vector"},
};
enum { PATHS = sizeof paths / sizeof paths[0] };

/* Kernels known to miss the target where they carry their share: path,
 * mode ("*" every mode), kernel, why. */
struct unfit {
    const char *path, *mode, *kernel, *why;
};
static const struct unfit unfit[] = {
    {"cpu", "*", "clf_gemm_nn",
     "blocked GEMM: 6 x 64 of C an item, 344 groups of 16 items for the "
     "projections; 452 bytes of scratch, 1 wave on gfx90a"},
    {"cpu", "full", "clf_flash",
     "36 rows an item: 64 groups of 16 items; "
     "4464 bytes of scratch, 1 wave on gfx90a"},
    {"cpu", "causal-full", "clf_flash", "as in full mode"},
    {"cpu", "causal-linformer", "clf_flash", "as in full mode"},
    {"cpu", "linformer", "clf_flash", "as in full mode"},
    {NULL, NULL, NULL, NULL},
};

/* The GEMMs of one forward at this shape (B = 1), as the FLOP model
 * counts them (src/layer/flops.c): m x n x k, batch, how many. */
struct gemm {
    size_t m, n, k, batch, count;
};

static size_t
forward_gemms(int mode, int flash, struct gemm *g)
{
    const size_t n = FILL_N, D = FILL_D, dh = D / FILL_H,
                 c = FILL_K / (FILL_N / FILL_BLOCK);
    size_t i = 0;

    g[i++] = (struct gemm){n, D, D, 1, mode == LIN ? 2 : 4}; /* Q (K V) out */
    if (mode == LIN) {
        g[i++] = (struct gemm){FILL_K, D, n, 1, 2}; /* E X, F X */
        g[i++] = (struct gemm){FILL_K, D, D, 1, 2}; /* W_k, W_v on them */
    }
    if (mode == CLIN) /* each complete block before the last query's */
        g[i++] = (struct gemm){c, D, FILL_BLOCK, (n - 1) / FILL_BLOCK, 2};
    if (!flash) {
        const size_t L = mode == LIN || mode == CLIN ? FILL_K : n;
        g[i++] = (struct gemm){n, L, dh, FILL_H, 1}; /* scores */
        g[i++] = (struct gemm){n, dh, L, FILL_H, 1}; /* weighted sum */
    }
    if (!flash && mode == CLIN) { /* the window: a batch of blocks a head */
        g[i++] =
            (struct gemm){FILL_BLOCK, FILL_BLOCK, dh, n / FILL_BLOCK, FILL_H};
        g[i++] =
            (struct gemm){FILL_BLOCK, dh, FILL_BLOCK, n / FILL_BLOCK, FILL_H};
    }
    return i;
}

/* The FLOPs of a clf_gemm_tiled launch entry: the forward's GEMMs whose
 * tiles, batch and split over K (clf__tiled_split on this context) give
 * its geometry, as many of them as it counts launches; -1 when they do
 * not add up. */
static double
tiled_flops(clf_context *ctx, int mode, int flash, const clf_launch *e)
{
    struct clf__tiled_state *st = clf__tiled_state(ctx);
    struct gemm g[8];
    size_t count = forward_gemms(mode, flash, g), i, calls = 0, kc;
    double f = 0.0;

    ck_assert_ptr_nonnull(st);
    for (i = 0; i < count; i++) {
        const size_t *v = st->cfg.v;
        size_t split =
            clf__tiled_split(ctx, g[i].m, g[i].n, g[i].k, g[i].batch, &kc);
        if (e->local[0] == 0 || e->local[1] == 0 ||
            e->global[0] / e->local[0] !=
                (g[i].n + v[CLF_TILED_P_NWG] - 1) / v[CLF_TILED_P_NWG] ||
            e->global[1] / e->local[1] !=
                (g[i].m + v[CLF_TILED_P_MWG] - 1) / v[CLF_TILED_P_MWG] ||
            e->global[2] != g[i].batch * split)
            continue;
        calls += g[i].count;
        f += 2.0 * (double)g[i].m * (double)g[i].n * (double)g[i].k *
             (double)g[i].batch * (double)g[i].count;
    }
    return calls == e->calls ? f : -1.0;
}

/* The FLOPs of the stages (clf_stage) a kernel other than the tiled GEMM
 * does on this path: the streaming kernel steps 3 to 5, the softmax (the
 * masks folded in) the softmax stage; others (bias, transposes, the causal
 * window's) none counted: their work-items speak for them. */
static double
kernel_flops(const char *k, const struct path *p, const double st[])
{
    const double attend = st[CLF_STAGE_SCORES] + st[CLF_STAGE_SOFTMAX] +
                          st[CLF_STAGE_WEIGHTED_SUM];

    if ((strcmp(k, "clf_flash_wg") == 0 && strcmp(p->attend, "flashwg") == 0) ||
        (strcmp(k, "clf_flash") == 0 && strcmp(p->attend, "flash") == 0))
        return attend;
    if (strcmp(k, "clf_gemm_nn") == 0)
        return st[CLF_STAGE_PROJECTION] + st[CLF_STAGE_COMPRESSION] +
               st[CLF_STAGE_OUTPUT];
    if (strcmp(k, "clf_softmax_rows_wg") == 0)
        return st[CLF_STAGE_SOFTMAX];
    return 0.0;
}

/* One forward's launch entries, each with its share of the forward. */
struct forward_use {
    clf_launch e[128];
    double share[128];
    size_t count;
};

/* Work-items x calls of the entries of kernel k (all entries: k NULL). */
static double
items_of(const struct forward_use *u, const char *k)
{
    double t = 0.0;
    size_t i;

    for (i = 0; i < u->count; i++)
        if (k == NULL || strcmp(u->e[i].kernel, k) == 0)
            t += (double)u->e[i].items * (double)u->e[i].calls;
    return t;
}

/* Each entry's share: a tiled GEMM launch its GEMMs' FLOPs over the
 * forward's; another kernel the larger of its stages' FLOPs (in proportion
 * to its launches' work-items) and its work-items over the forward's. */
static void
shares(clf_context *ctx, int mode, const struct path *p, const double st[],
       double total, struct forward_use *u)
{
    const int flash = strcmp(p->attend, "flashwg") == 0;
    const double all = items_of(u, NULL);
    size_t i;

    for (i = 0; i < u->count; i++) {
        const clf_launch *e = &u->e[i];
        const double w = (double)e->items * (double)e->calls;
        double f;

        if (strcmp(e->kernel, "clf_gemm_tiled") == 0) {
            f = tiled_flops(ctx, mode, flash, e);
            ck_assert_msg(f >= 0.0,
                          "%s %s: a tiled GEMM launch of %zu x %zu x %zu "
                          "items (%zu calls) is none of the forward's GEMMs",
                          p->name, mode_names[mode], e->global[0], e->global[1],
                          e->global[2], e->calls);
            u->share[i] = f / total; /* its work is its FLOPs */
            continue;
        }
        f = kernel_flops(e->kernel, p, st) / total * w / items_of(u, e->kernel);
        u->share[i] = f > w / all ? f : w / all;
    }
}

/* One forward of `mode` on path p and its launch entries' shares. */
static void
run_forward(struct layer *l, const struct path *p, int mode, const float *x,
            float *y, struct forward_use *u)
{
    clf_context *ctx = l->att->ctx;
    const clf_mode m =
        mode == LIN || mode == CLIN ? CLF_MODE_LINFORMER : CLF_MODE_FULL;
    clf_forward_opts o;
    double st[CLF_STAGE_COUNT], total;
    size_t n, i, dropped;

    memset(u, 0, sizeof *u);
    memset(&o, 0, sizeof o);
    o.causal = mode == CFULL || mode == CLIN;
    ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", p->gemm), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", p->attend), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "softmax", p->softmax), 0);
    ck_assert_int_eq(clf_attention_set_mode(l->att, m), 0);
    ck_assert_int_eq(clf_context_record_launches(ctx, 1), 0);
    ck_assert_msg(clf_attention_forward_ex(l->att, x, 1, FILL_N, y, &o) == 0,
                  "forward: %s", clf_last_error());
    ck_assert_int_eq(clf_context_record_launches(ctx, 0), 0);
    ck_assert_int_eq(clf_context_launch_count(ctx, &n, &dropped), 0);
    ck_assert_uint_eq(dropped, 0);
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_le(n, sizeof u->e / sizeof u->e[0]);
    for (i = 0; i < n; i++)
        ck_assert_int_eq(clf_context_launch(ctx, i, &u->e[i]), 0);
    u->count = n;
    ck_assert_int_eq(
        clf_attention_desc_flops(&l->desc, m, 1, FILL_N, o.causal, st, &total),
        0);
    shares(ctx, mode, p, st, total, u);
    for (i = 0; i < n; i++)
        printf("#   %-8s %-17s %-22s %8zu groups %10zu items x %zu: %5.1f%%\n",
               p->name, mode_names[mode], u->e[i].kernel, u->e[i].groups,
               u->e[i].items, u->e[i].calls, 100.0 * u->share[i]);
    if (strcmp(p->attend, "flashwg") == 0)
        ck_assert_int_eq(clf__attention_last_flash_wg(l->att), 1);
}

/* The offline compile facts: "yes", "no" or NULL (not in the table) for
 * kernel k on gfx90a and on sm_90, from the tab-separated table of
 * gpu-shape.sh --out (target, program, kernel, registers, agprs, scratch,
 * local, occupancy, fit, work-group size).  A table with sm_90 rows is
 * held on both targets. */
struct shape_table {
    char kernel[128][64];
    int nv[128]; /* the row is sm_90's, else gfx90a's */
    int fit[128];
    size_t count;
    int has_nv;
};

static int
load_table(const char *path, struct shape_table *t)
{
    FILE *f = fopen(path, "r");
    char line[512], target[32], prog[32], kernel[64], fit[8];

    memset(t, 0, sizeof *t);
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL && t->count < 128)
        if (sscanf(line, "%31s %31s %63s %*s %*s %*s %*s %*s %7s", target, prog,
                   kernel, fit) == 4 &&
            (strcmp(target, "gfx90a") == 0 || strcmp(target, "sm_90") == 0)) {
            snprintf(t->kernel[t->count], sizeof t->kernel[0], "%s", kernel);
            t->nv[t->count] = strcmp(target, "sm_90") == 0;
            t->has_nv |= t->nv[t->count];
            t->fit[t->count++] = strcmp(fit, "yes") == 0;
        }
    fclose(f);
    return 0;
}

static const int *
table_fit(const struct shape_table *t, const char *kernel, int nv)
{
    size_t i;

    for (i = 0; i < t->count; i++)
        if (t->nv[i] == nv && strcmp(t->kernel[i], kernel) == 0)
            return &t->fit[i];
    return NULL;
}

static const char *
fit_word(const int *c)
{
    return c == NULL ? "?" : *c ? "fit" : "no";
}

/* The table: CLF_GPU_SHAPE_TABLE when set, else gpu-shape.sh run now for
 * gfx90a.  0 when it was read; 1 when it cannot be made here, `why` saying
 * so (the script is absent, or it exited 2: clang-15 or libclc-15
 * missing), and the suite skips; -1 on any other failure, `why` naming
 * it, and the test fails. */
static int
shape_table(struct shape_table *t, char *why, size_t why_size)
{
    const char *given = getenv("CLF_GPU_SHAPE_TABLE");
    const char *top = getenv("top_srcdir");
    char path[] = "/tmp/clf-gpu-fill-XXXXXX", cmd[1024], script[768];
    int fd, rc;

    if (given != NULL && given[0] != '\0') {
        if (load_table(given, t) != 0 || t->count == 0) {
            snprintf(why, why_size, "cannot read a gfx90a table from %s",
                     given);
            return -1;
        }
        return 0;
    }
    snprintf(script, sizeof script, "%s/scripts/gpu-shape.sh",
             top != NULL ? top : ".");
    if (access(script, R_OK) != 0) {
        snprintf(why, why_size,
                 "no %s (a device kit carries none: run from a source tree, "
                 "or give CLF_GPU_SHAPE_TABLE)",
                 script);
        return 1;
    }
    fd = mkstemp(path);
    if (fd < 0) {
        snprintf(why, why_size, "mkstemp %s failed", path);
        return -1;
    }
    close(fd);
    snprintf(cmd, sizeof cmd,
             "sh '%s' --targets gfx90a --out '%s' >/dev/null 2>&1", script,
             path);
    rc = system(cmd);
    if (rc != 0) {
        unlink(path);
        if (WIFEXITED(rc) && WEXITSTATUS(rc) == 2) {
            snprintf(why, why_size,
                     "%s found no clang-15 or no libclc-15 (Debian's "
                     "clang-15 and libclc-15 packages)",
                     script);
            return 1;
        }
        snprintf(why, why_size,
                 "%s --targets gfx90a failed (status %d): a program did not "
                 "compile for gfx90a",
                 script, rc);
        return -1;
    }
    rc = load_table(path, t) == 0 && t->count > 0 ? 0 : -1;
    if (rc != 0)
        snprintf(why, why_size, "%s wrote no gfx90a kernel", script);
    unlink(path);
    return rc;
}

/* Made once by main, before the suite runs. */
static struct shape_table table;
static int table_rc;
static char table_why[1024];

static const struct unfit *
listed(const struct path *p, int mode, const char *kernel, size_t *at)
{
    size_t i;

    for (i = 0; unfit[i].path != NULL; i++)
        if (strcmp(unfit[i].path, p->name) == 0 &&
            (strcmp(unfit[i].mode, "*") == 0 ||
             strcmp(unfit[i].mode, mode_names[mode]) == 0) &&
            strcmp(unfit[i].kernel, kernel) == 0) {
            *at = i;
            return &unfit[i];
        }
    return NULL;
}

/* The work-groups of a launch; where the driver picks them (groups 0),
 * as many as work-groups of 256 items (the GPU path's largest) make. */
static size_t
groups_of(const clf_launch *e)
{
    return e->groups != 0 ? e->groups : (e->items + 255) / 256;
}

/* Kernel k's entries that carry at least MIN_SHARE: their summed share,
 * the fewest groups and items among them, whether all meet the launch
 * target; 0 when none carries. */
static int
carried(const struct forward_use *u, const char *k, double *share,
        size_t *groups, size_t *items, int *launch)
{
    int any = 0;
    size_t i;

    *share = 0.0;
    *groups = *items = (size_t)-1;
    *launch = 1;
    for (i = 0; i < u->count; i++) {
        const clf_launch *e = &u->e[i];
        if (strcmp(e->kernel, k) != 0 || u->share[i] < MIN_SHARE)
            continue;
        any = 1;
        *share += u->share[i];
        *groups = groups_of(e) < *groups ? groups_of(e) : *groups;
        *items = e->items < *items ? e->items : *items;
        *launch &= groups_of(e) >= MIN_GROUPS && e->items >= MIN_ITEMS;
    }
    return any;
}

/* The carrying kernels of one forward against the target and the list;
 * used[i] set for each list entry met.  Returns the failures. */
static int
judge(const struct path *p, int mode, const struct forward_use *u,
      const struct shape_table *t, int *used)
{
    int bad = 0, launch;
    size_t i, j, at = 0, groups, items;
    double share;

    for (i = 0; i < u->count; i++) {
        const char *k = u->e[i].kernel;
        const int *c = table_fit(t, k, 0), *cn = table_fit(t, k, 1);
        const struct unfit *f;
        int meets;

        for (j = 0; j < i && strcmp(u->e[j].kernel, k) != 0; j++)
            ;
        if (u->share[i] < MIN_SHARE &&
            (groups_of(&u->e[i]) < MIN_GROUPS || u->e[i].items < MIN_ITEMS))
            printf("# %-8s %-17s %-22s share %5.1f%% groups %8zu items %9zu "
                   "misses, under %.0f%%: not held\n",
                   p->name, mode_names[mode], k, 100.0 * u->share[i],
                   groups_of(&u->e[i]), u->e[i].items, 100.0 * MIN_SHARE);
        if (j < i || !carried(u, k, &share, &groups, &items, &launch))
            continue; /* seen, or carrying under MIN_SHARE */
        meets =
            launch && c != NULL && *c && (!t->has_nv || (cn != NULL && *cn));
        f = listed(p, mode, k, &at);
        printf("# %-8s %-17s %-22s share %5.1f%% groups %8zu items %9zu "
               "gfx90a %-3s sm_90 %-3s -> %s%s\n",
               p->name, mode_names[mode], k, 100.0 * share, groups, items,
               fit_word(c), t->has_nv ? fit_word(cn) : "-",
               meets ? "meets" : "misses", f != NULL ? " (listed unfit)" : "");
        if (f != NULL)
            used[at] = 1;
        if (meets && f != NULL) {
            printf("# %s %s: %s meets the target now: take it off the "
                   "unfit list (%s)\n",
                   p->name, mode_names[mode], k, f->why);
            bad++;
        } else if (!meets && f == NULL) {
            printf("# %s %s: %s misses the target (>= %d groups, >= %d "
                   "items, gfx90a fit, and sm_90 fit where the table has "
                   "it) and is not listed\n",
                   p->name, mode_names[mode], k, MIN_GROUPS, MIN_ITEMS);
            bad++;
        }
    }
    return bad;
}

START_TEST(gpu_path_fills_a_large_gpu)
{
    clf_attention_desc d;
    struct layer l;
    struct forward_use u;
    clf_context *ctx;
    unsigned cus;
    float *x, *y;
    int used[sizeof unfit / sizeof unfit[0]] = {0}, bad = 0, mode;
    size_t p, i;

    ck_assert_msg(table_rc == 0, "%s", table_why);
    memset(&d, 0, sizeof d);
    d.d_model = FILL_D;
    d.heads = FILL_H;
    d.max_seq_len = FILL_N;
    d.k = FILL_K;
    d.causal_block = FILL_BLOCK;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    layer_make(&l, &d, 31000);
    ctx = l.att->ctx;
    cus = ctx->info.compute_units;
    ctx->info.compute_units = FILL_CUS;
    x = tu_malloc((size_t)FILL_N * FILL_D * sizeof *x);
    y = tu_malloc((size_t)FILL_N * FILL_D * sizeof *y);
    tu_fill(x, (size_t)FILL_N * FILL_D, 31001, -1.0f, 1.0f);
    for (p = 0; p < PATHS; p++)
        for (mode = 0; mode < MODES; mode++) {
            run_forward(&l, &paths[p], mode, x, y, &u);
            bad += judge(&paths[p], mode, &u, &table, used);
        }
    for (i = 0; unfit[i].path != NULL; i++)
        if (!used[i]) {
            printf("# the unfit entry %s %s %s carries no share in any "
                   "forward: take it off the list\n",
                   unfit[i].path, unfit[i].mode, unfit[i].kernel);
            bad++;
        }
    ck_assert_int_eq(clf_context_force_kernel(ctx, "gemm", NULL), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "attend", NULL), 0);
    ck_assert_int_eq(clf_context_force_kernel(ctx, "softmax", NULL), 0);
    ctx->info.compute_units = cus;
    free(x);
    free(y);
    layer_free(&l);
    ck_assert_msg(bad == 0,
                  "%d kernel(s) against the fill target or the "
                  "unfit list (see the lines above)",
                  bad);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("gpu_fill");
    TCase *tc = tcase_create("gpu_fill");

    table_rc = shape_table(&table, table_why, sizeof table_why);
    if (table_rc == 1) {
        /* not a missing device: a skip also under
         * CLINFORMER_REQUIRE_DEVICE=1 */
        printf("1..0 # SKIP %s\n", table_why);
        return 0;
    }
    tcase_set_timeout(tc, 3600);
    tcase_add_test(tc, gpu_path_fills_a_large_gpu);
    suite_add_tcase(s, tc);
    return tu_run(s, 1);
}
