/* clinformer verify: the correctness driver of a device (cli/verify.h).
 * The cases are every shape x mode x padding x precision x kernel setting
 * below, numbered in that order; they run in a strided order so that a
 * budget that cuts the run still samples every shape, mode and setting. */
#define _POSIX_C_SOURCE 200809L

#include "verify.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct verify_opts {
    const char *device, *json, *save;
    double budget;
    size_t seed, only; /* only: --case id + 1, 0 for all */
    int verbose;
};

#define VO(field) offsetof(struct verify_opts, field)

const struct cli_option cli_verify_options[] = {
    {"budget", CLI_SECONDS, VO(budget), "S",
     "seconds to spend (default 180): cases still to run\n"
     "then are reported as not run",
     0, 0, NULL},
    {"seed", CLI_SIZE, VO(seed), "N", "seed of the data (default 1)", 0, 0,
     NULL},
    {"case", CLI_SIZE, VO(only), "ID",
     "run case ID alone (as a failure's reproducer names\nit)", 0, 0, NULL},
    {"json", CLI_OUTPUT, VO(json), "FILE",
     "also write every case and its result as JSON\n"
     "(schema clinformer-verify/1; - is standard output)",
     0, 0, NULL},
    {"save", CLI_STRING, VO(save), "DIR",
     "where a failing case's weights, input and reference\n"
     "output are written (default verify-failures)",
     0, 0, NULL},
    {"verbose", CLI_FLAG, VO(verbose), NULL,
     "print every case, not only failures", 1, 0, NULL},
    {"device", CLI_STRING, VO(device), "SEL",
     "the device, as clinformer run takes it (one device)", 0, 0, NULL},
    {NULL, CLI_FLAG, 0, NULL, NULL, 0, 0, NULL}};

/* Odd shapes: n, k and d_h multiples of no tile; n = 1; k > n; many short
 * sequences; a head of 67; heads of 16, which the fused kernel takes; a
 * sequence longer than one slice of the split GEMM way (its compression and
 * full mode's weighted sum over 601 positions: 512 and 89).  kc is k
 * in causal Linformer (a multiple of ceil(N / block)). */
static const struct verify_shape shapes[] = {
    /* name      B   n    N    D   h  dh  k   block kc */
    {"odd", 2, 37, 40, 39, 3, 13, 11, 14, 12},
    {"n1", 3, 1, 8, 16, 2, 8, 5, 4, 6},
    {"k>n", 2, 7, 40, 24, 2, 12, 19, 20, 20},
    {"batch", 48, 3, 6, 20, 4, 5, 2, 3, 2},
    {"tiles", 2, 130, 130, 96, 3, 32, 33, 45, 33},
    {"wide", 2, 70, 72, 134, 2, 67, 24, 24, 24},
    {"fused", 3, 45, 50, 48, 3, 16, 21, 17, 21},
    {"longk", 2, 601, 610, 48, 3, 16, 9, 61, 10}};
#define SHAPES (sizeof shapes / sizeof shapes[0])

/* Each attention way with two GEMM ways, on the GEMM path each softmax
 * with two GEMM ways, and the split GEMM way under the GEMM path and the
 * fused kernel; half weights alternate the two half GEMMs. */
static const char *const settings[] = {
    "attend=gemm,softmax=scalar,gemm=clblast",
    "attend=gemm,softmax=vector,gemm=blocked",
    "attend=gemm,softmax=group,gemm=tiled",
    "attend=gemm,softmax=scalar,gemm=tiled",
    "attend=gemm,softmax=vector,gemm=clblast",
    "attend=gemm,softmax=group,gemm=blocked",
    "attend=fused,softmax=scalar,gemm=clblast",
    "attend=fused,softmax=vector,gemm=tiled",
    "attend=flash,softmax=group,gemm=blocked",
    "attend=flash,softmax=scalar,gemm=clblast",
    "attend=flashwg,softmax=vector,gemm=tiled",
    "attend=flashwg,softmax=group,gemm=blocked",
    "attend=gemm,softmax=vector,gemm=split",
    "attend=fused,softmax=group,gemm=split"};
#define SETTINGS (sizeof settings / sizeof settings[0])

/* Every case, numbered from 1; *count of them (no padded case where n is
 * 1: every length would be n). */
static struct verify_case *
case_list(size_t *count)
{
    struct verify_case *list =
        calloc(SHAPES * VERIFY_MODES * 2 * 2 * SETTINGS, sizeof *list);
    size_t n = 0, s, m, p, h, k;

    if (list == NULL)
        return NULL;
    for (s = 0; s < SHAPES; s++)
        for (m = 0; m < VERIFY_MODES; m++)
            for (p = 0; p < (shapes[s].n > 1 ? 2u : 1u); p++)
                for (h = 0; h < 2; h++)
                    for (k = 0; k < SETTINGS; k++) {
                        struct verify_case *c = &list[n];
                        c->id = ++n; /* from 1 */
                        c->shape = &shapes[s];
                        c->mode = (int)m;
                        c->padded = (int)p;
                        c->half = (int)h;
                        snprintf(c->kernels, sizeof c->kernels, "%s%s",
                                 settings[k],
                                 !h      ? ""
                                 : k % 2 ? ",halfgemm=native"
                                         : ",halfgemm=widen");
                    }
    *count = n;
    return list;
}

/* A stride coprime with count, near count / 2.6, to spread the run order. */
static size_t
stride_of(size_t count)
{
    size_t s = count / 2.6 > 1 ? (size_t)(count / 2.6) : 1, a, b, t;

    for (;; s++) {
        for (a = s, b = count; b != 0; t = a % b, a = b, b = t)
            ;
        if (a == 1)
            return s;
    }
}

static const char *const status_names[] = {"pass", "fail", "refused",
                                           "not run"};

static void
describe(const struct verify_case *c, char *buf, size_t cap)
{
    const struct verify_shape *sh = c->shape;

    snprintf(buf, cap,
             "case %zu: %s B=%zu n=%zu N=%zu D=%zu h=%zu d_h=%zu k=%zu, %s%s, "
             "%s, %s",
             c->id, sh->name, sh->B, sh->n, sh->N, sh->D, sh->heads, sh->dh,
             c->mode == VERIFY_CAUSAL ? sh->kc : sh->k,
             verify_mode_name(c->mode), c->padded ? ", padded" : "",
             c->half ? "half" : "float", c->kernels);
}

static void
print_case(const struct verify_opts *o, const struct verify_case *c,
           const struct verify_result *r)
{
    char what[256];

    if (r->status == VERIFY_PASS && !o->verbose)
        return;
    describe(c, what, sizeof what);
    printf("%s %s", status_names[r->status], what);
    if (r->status == VERIFY_PASS)
        printf(": error %.2g (tol %.0e), ran %s\n", r->rel_error, r->tol,
               r->ran);
    else
        printf("\n  %s\n  ran: %s\n", r->error, r->ran[0] ? r->ran : "-");
    if (r->repro[0])
        printf("  reproduce: %s\n", r->repro);
    if (r->status == VERIFY_FAIL)
        printf("  or: CLINFORMER_KERNELS=%s clinformer verify%s%s --seed %llu "
               "--case %zu\n",
               c->kernels, o->device ? " --device " : "",
               o->device ? o->device : "",
               (unsigned long long)(o->seed ? o->seed : 1), c->id);
}

static json_t *
case_json(const struct verify_case *c, const struct verify_result *r)
{
    const struct verify_shape *sh = c->shape;
    json_t *j = json_pack(
        "{s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:b,s:s,s:s,s:s}", "id",
        (json_int_t)c->id, "shape", sh->name, "batch", (json_int_t)sh->B, "n",
        (json_int_t)sh->n, "max_seq_len", (json_int_t)sh->N, "d_model",
        (json_int_t)sh->D, "heads", (json_int_t)sh->heads, "head_dim",
        (json_int_t)sh->dh, "k",
        (json_int_t)(c->mode == VERIFY_CAUSAL ? sh->kc : sh->k), "block",
        (json_int_t)(c->mode == VERIFY_CAUSAL ? sh->block : 0), "mode",
        verify_mode_name(c->mode), "padded", c->padded, "precision",
        c->half ? "half" : "float", "kernels", c->kernels, "status",
        status_names[r->status]);

    if (j == NULL || r->status == VERIFY_NOT_RUN)
        return j;
    json_object_set_new(j, "seconds", json_real(r->seconds));
    json_object_set_new(j, "tol", json_real(r->tol));
    json_object_set_new(j, "ran", json_string(r->ran));
    if (r->compared) {
        /* a NaN or infinite output: null */
        json_object_set_new(j, "rel_error",
                            isfinite(r->rel_error) ? json_real(r->rel_error)
                                                   : json_null());
        json_object_set_new(j, "repeat_identical",
                            json_boolean(r->repeat_same));
    }
    if (r->error[0])
        json_object_set_new(j, "error", json_string(r->error));
    if (r->repro[0])
        json_object_set_new(j, "reproduce", json_string(r->repro));
    return j;
}

/* The run: the cases, their results, the counts. */
struct verify_run {
    const struct verify_opts *o;
    struct verify_env env;
    struct verify_case *cases;
    struct verify_result *results;
    size_t count, counts[4];
    double wall;
};

static int
write_json(const struct verify_run *v)
{
    const clf_device_info *info = &v->env.info;
    json_t *root, *cases = json_array();
    size_t i;
    int rc;

    for (i = 0; cases != NULL && i < v->count; i++)
        if (!v->o->only || i == v->o->only - 1)
            json_array_append_new(cases,
                                  case_json(&v->cases[i], &v->results[i]));
    root = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s},s:I,s:f,s:f,s:b,s:{s:f,s:f},"
                     "s:{s:I,s:I,s:I,s:I,s:I},s:o}",
                     "schema", "clinformer-verify/1", "clinformer_version",
                     clf_version(), "device", "stable_name", info->stable_name,
                     "platform", info->platform, "name", info->name, "driver",
                     info->driver, "seed", (json_int_t)v->env.seed, "budget_s",
                     v->o->budget, "wall_s", v->wall, "guard_bands", 1,
                     "tolerances", "float", VERIFY_TOL, "half_native",
                     VERIFY_TOL_NATIVE, "counts", "cases",
                     (json_int_t)(v->o->only ? 1 : v->count), "passed",
                     (json_int_t)v->counts[VERIFY_PASS], "failed",
                     (json_int_t)v->counts[VERIFY_FAIL], "refused",
                     (json_int_t)v->counts[VERIFY_REFUSED], "not_run",
                     (json_int_t)v->counts[VERIFY_NOT_RUN], "cases", cases);
    if (root == NULL)
        return cli_fail(NULL, "writing --json", CLF_ENO_MEMORY);
    if (cli_is_stdout(v->o->json)) {
        char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        rc = text == NULL || cli_data_write(text, strlen(text)) != 0 ||
             cli_data_write("\n", 1) != 0;
        free(text);
    } else
        rc = json_dump_file(root, v->o->json,
                            JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (rc != 0) {
        cli_error("verify", "%s: cannot write the JSON report", v->o->json);
        return CLI_ERROR;
    }
    return 0;
}

/* Runs the cases in strided order until the budget is spent. */
static void
run_cases(struct verify_run *v)
{
    const size_t stride = stride_of(v->count);
    const double t0 = cli_now();
    size_t i;

    for (i = 0; i < v->count; i++)
        v->results[i].status = VERIFY_NOT_RUN;
    for (i = 0; i < v->count; i++) {
        size_t at = v->o->only ? v->o->only - 1 : i * stride % v->count;
        if (cli_now() - t0 > v->o->budget)
            break;
        verify_run_case(&v->env, &v->cases[at], &v->results[at]);
        print_case(v->o, &v->cases[at], &v->results[at]);
        fflush(stdout);
        if (v->o->only)
            break;
    }
    v->wall = cli_now() - t0;
    for (i = 0; i < v->count; i++)
        if (!v->o->only || i == v->o->only - 1)
            v->counts[v->results[i].status]++;
}

static int
verify_setup(struct verify_run *v, const struct verify_opts *o)
{
    const char *env = getenv("CLINFORMER_KERNELS");
    int rc;

    memset(v, 0, sizeof *v);
    v->o = o;
    v->cases = case_list(&v->count);
    v->results = calloc(v->count ? v->count : 1, sizeof *v->results);
    if (v->cases == NULL || v->results == NULL)
        return cli_fail(NULL, "listing the cases", CLF_ENO_MEMORY);
    if (o->only > v->count) {
        cli_error("verify", "--case %zu: the cases are 1 to %zu", o->only,
                  v->count);
        return CLI_USAGE;
    }
    if (env != NULL && *env != '\0' && !o->only)
        fprintf(stderr,
                "clinformer verify: warning: CLINFORMER_KERNELS=%s is set and "
                "wins over each case's own kernels\n",
                env);
    if ((rc = cli_context(&v->env.ctx, o->device)) != 0)
        return rc;
    if ((rc = clf_context_guard_buffers(v->env.ctx, 1)) != 0)
        return cli_fail(v->env.ctx, "turning guard bands on", rc);
    v->env.device = o->device;
    v->env.save = o->save ? o->save : "verify-failures";
    v->env.seed = o->seed ? o->seed : 1;
    if ((rc = clf_context_device_info(v->env.ctx, &v->env.info)) != 0)
        return cli_fail(v->env.ctx, "reading the device", rc);
    v->env.fp16 = v->env.info.fp16;
    return 0;
}

int
cli_verify_main(const struct cli_command *cmd, int argc, char **argv)
{
    struct verify_opts o;
    struct verify_run v;
    int first, rc;

    memset(&o, 0, sizeof o);
    o.budget = 180;
    if ((rc = cli_parse(cmd, argc, argv, &o, &first)) != 0)
        return rc == CLI_HELP_SHOWN ? 0 : rc;
    if (o.json && (rc = cli_output_check("verify", "--json", o.json, NULL, 0)))
        return rc;
    if (o.json && cli_is_stdout(o.json) &&
        (rc = cli_stdout_for_data("verify")) != 0)
        return rc;
    rc = verify_setup(&v, &o);
    if (rc == 0) {
        const clf_device_info *info = &v.env.info;
        printf("verify: %s (%s, %s), seed %llu, guard bands on, %zu "
               "case%s\n",
               info->stable_name, info->name, info->platform, v.env.seed,
               o.only ? (size_t)1 : v.count, o.only ? "" : "s");
        run_cases(&v);
        printf("verify: %zu passed, %zu failed, %zu refused, %zu not run "
               "(budget %.0f s) in %.1f s\n",
               v.counts[VERIFY_PASS], v.counts[VERIFY_FAIL],
               v.counts[VERIFY_REFUSED], v.counts[VERIFY_NOT_RUN], o.budget,
               v.wall);
        if (o.json)
            rc = write_json(&v);
        if (rc == 0 && v.counts[VERIFY_FAIL] > 0)
            rc = CLI_DIFFER;
    }
    if (v.env.ctx != NULL)
        cli_context_done(v.env.ctx);
    free(v.cases);
    free(v.results);
    return rc;
}
