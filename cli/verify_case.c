/* One case of clinformer verify (cli/verify.h): its data, its layer, the
 * forward twice, the double-precision reference, and for a failure the
 * files and the command that reproduce it. */
#define _POSIX_C_SOURCE 200809L

#include "verify.h"

#include "reference.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The lucidrains LinformerSelfAttention weights a case uses: no biases but
 * the output's, one E and one F for all heads.  The order of `names`. */
enum { W_Q, W_K, W_V, W_OUT, B_OUT, W_E, W_F, W_COUNT };

static const clf_weight weight_ids[W_COUNT] = {
    CLF_WEIGHT_Q, CLF_WEIGHT_K, CLF_WEIGHT_V, CLF_WEIGHT_OUT,
    CLF_BIAS_OUT, CLF_PROJ_E,   CLF_PROJ_F};

/* The data of one case. */
struct vdata {
    const struct verify_case *c;
    size_t B, n, N, D, hd, k, block;
    float *w[W_COUNT], *x, *y, *y2;
    size_t wn[W_COUNT];
    double *ref;
    unsigned *lengths;   /* B, or NULL */
    unsigned char *mask; /* B x n, or NULL */
    int full, causal;
};

static const char *const mode_names[VERIFY_MODES] = {"linformer", "full",
                                                     "causal", "causal-full"};

const char *
verify_mode_name(int mode)
{
    return mode >= 0 && mode < VERIFY_MODES ? mode_names[mode] : "?";
}

/* splitmix64 */
static uint64_t
next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void
fill(float *v, size_t count, double bound, uint64_t *s)
{
    size_t i;

    for (i = 0; i < count; i++)
        v[i] =
            (float)(((double)(next(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0) * bound);
}

static void
vdata_free(struct vdata *d)
{
    size_t i;

    for (i = 0; i < W_COUNT; i++)
        free(d->w[i]);
    free(d->x);
    free(d->y);
    free(d->y2);
    free(d->ref);
    free(d->lengths);
    free(d->mask);
}

/* The case's sizes, and its arrays allocated. */
static int
vdata_alloc(struct vdata *d, const struct verify_case *c)
{
    const struct verify_shape *sh = c->shape;
    const size_t count = sh->B * sh->n * sh->D;
    size_t i;

    memset(d, 0, sizeof *d);
    d->c = c;
    d->B = sh->B, d->n = sh->n, d->N = sh->N, d->D = sh->D;
    d->hd = sh->heads * sh->dh;
    d->k = c->mode == VERIFY_CAUSAL ? sh->kc : sh->k;
    d->block = c->mode == VERIFY_CAUSAL ? sh->block : 0;
    d->full = c->mode == VERIFY_FULL || c->mode == VERIFY_CAUSAL_FULL;
    d->causal = c->mode == VERIFY_CAUSAL || c->mode == VERIFY_CAUSAL_FULL;
    d->wn[W_Q] = d->wn[W_K] = d->wn[W_V] = d->hd * d->D;
    d->wn[W_OUT] = d->D * d->hd;
    d->wn[B_OUT] = d->D;
    d->wn[W_E] = d->wn[W_F] = d->k * d->N;
    for (i = 0; i < W_COUNT; i++)
        if ((d->w[i] = malloc(d->wn[i] * sizeof(float))) == NULL)
            return -1;
    d->x = malloc(count * sizeof(float));
    d->y = malloc(count * sizeof(float));
    d->y2 = malloc(count * sizeof(float));
    d->ref = malloc(count * sizeof(double));
    return d->x && d->y && d->y2 && d->ref ? 0 : -1;
}

/* Lengths that pad every sequence but the first, and their mask. */
static int
vdata_pad(struct vdata *d)
{
    size_t b, t;

    d->lengths = malloc(d->B * sizeof *d->lengths);
    d->mask = calloc(d->B * d->n, 1);
    if (d->lengths == NULL || d->mask == NULL)
        return -1;
    for (b = 0; b < d->B; b++) {
        d->lengths[b] =
            (unsigned)(b == 0 ? d->n : 1 + (b * 7 + 3) % (d->n - 1));
        for (t = 0; t < d->lengths[b]; t++)
            d->mask[b * d->n + t] = 1;
    }
    return 0;
}

/* Weights as nn.Linear makes them (uniform in +-1/sqrt(fan_in)), E and F
 * in +-1/sqrt(k), the input in +-1; padded cases get their lengths. */
static int
vdata_make(struct vdata *d, const struct verify_case *c, uint64_t seed)
{
    uint64_t s = seed * 0x100000001b3ULL + c->id;
    size_t i;

    if (vdata_alloc(d, c) != 0)
        return -1;
    for (i = 0; i < W_COUNT; i++)
        fill(d->w[i], d->wn[i],
             i == W_E || i == W_F       ? 1.0 / sqrt((double)d->k)
             : i == W_OUT || i == B_OUT ? 1.0 / sqrt((double)d->hd)
                                        : 1.0 / sqrt((double)d->D),
             &s);
    fill(d->x, d->B * d->n * d->D, 1.0, &s);
    return c->padded ? vdata_pad(d) : 0;
}

/* The reference, fed the weights as the layer stores them (rounded to
 * binary16 for half; the output bias stays float32). */
static int
vdata_reference(struct vdata *d)
{
    const struct verify_shape *sh = d->c->shape;
    float *r[W_COUNT] = {NULL};
    ref_layer l;
    size_t i, j;
    int rc = 0;

    for (i = 0; i < W_COUNT; i++) {
        r[i] = d->w[i];
        if (!d->c->half || i == B_OUT)
            continue;
        if ((r[i] = malloc(d->wn[i] * sizeof(float))) == NULL) {
            rc = -1;
            break;
        }
        for (j = 0; j < d->wn[i]; j++)
            r[i][j] = ref_round_half(d->w[i][j]);
    }
    memset(&l, 0, sizeof l);
    l.D = d->D, l.hq = l.hkv = sh->heads, l.dh = sh->dh, l.N = d->N;
    l.k = d->k;
    l.wq = r[W_Q], l.wk = r[W_K], l.wv = r[W_V], l.wo = r[W_OUT];
    l.bo = r[B_OUT], l.E = r[W_E], l.F = r[W_F];
    if (rc == 0)
        ref_attention_ex(&l, d->full, d->x, d->B, d->n, d->mask, d->causal,
                         d->block, d->ref);
    for (i = 0; i < W_COUNT; i++)
        if (r[i] != d->w[i])
            free(r[i]);
    return rc;
}

/* max |y - ref| / max |ref| (max |y - ref| when ref is all zeros); a NaN
 * or infinity in y gives infinity. */
static double
rel_error(const float *y, const double *ref, size_t count)
{
    double diff = 0.0, scale = 0.0;
    size_t i;

    for (i = 0; i < count; i++) {
        double e = fabs((double)y[i] - ref[i]);
        if (!(e <= diff))
            diff = isnan(e) ? INFINITY : e;
        if (fabs(ref[i]) > scale)
            scale = fabs(ref[i]);
    }
    return scale > 0.0 ? diff / scale : diff;
}

/* Forces the case's kernels (each kind in c->kernels; the others lifted). */
static int
force_kernels(clf_context *ctx, const char *kernels)
{
    static const char *const kinds[] = {"softmax", "gemm", "attend",
                                        "halfgemm"};
    char buf[96], *save = NULL, *tok;
    size_t i;
    int rc;

    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if ((rc = clf_context_force_kernel(ctx, kinds[i], NULL)) != 0)
            return rc;
    snprintf(buf, sizeof buf, "%s", kernels);
    for (tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (eq == NULL)
            return CLF_EINVALID_ARGUMENT;
        *eq = '\0';
        if ((rc = clf_context_force_kernel(ctx, tok, eq + 1)) != 0)
            return rc;
    }
    return 0;
}

/* The layer of the case, its weights set. */
static int
make_layer(const struct verify_env *env, const struct vdata *d,
           clf_attention **att)
{
    const struct verify_shape *sh = d->c->shape;
    clf_attention_desc desc;
    size_t i;
    int rc;

    memset(&desc, 0, sizeof desc);
    desc.d_model = d->D;
    desc.heads = sh->heads;
    desc.head_dim = sh->dh;
    desc.max_seq_len = d->N;
    desc.k = d->k;
    desc.bias_out = 1;
    desc.causal_block = d->block;
    desc.precision = d->c->half ? CLF_PRECISION_HALF : CLF_PRECISION_FLOAT;
    if ((rc = clf_attention_create(att, env->ctx, &desc)) != 0)
        return rc;
    for (i = 0; i < W_COUNT && rc == 0; i++)
        rc = clf_attention_set_weight(*att, weight_ids[i], d->w[i], d->wn[i]);
    if (rc == 0 && d->full)
        rc = clf_attention_set_mode(*att, CLF_MODE_FULL);
    return rc;
}

/* The distinct kernels the context launched, comma-separated. */
static void
launched(clf_context *ctx, char *buf, size_t cap)
{
    size_t count = 0, i, j, len = 0;
    clf_launch l, prev;

    buf[0] = '\0';
    if (clf_context_launch_count(ctx, &count, NULL) != 0)
        return;
    for (i = 0; i < count; i++) {
        int seen = 0;
        if (clf_context_launch(ctx, i, &l) != 0)
            continue;
        for (j = 0; j < i && !seen; j++)
            seen = clf_context_launch(ctx, j, &prev) == 0 &&
                   strcmp(prev.kernel, l.kernel) == 0;
        if (seen || len + strlen(l.kernel) + 2 >= cap)
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? "," : "",
                                l.kernel);
    }
}

/* Both forwards, the guard check and the comparison. */
static void
forward_twice(const struct verify_env *env, struct vdata *d, clf_attention *att,
              struct verify_result *r)
{
    clf_forward_opts opts;
    const size_t count = d->B * d->n * d->D;
    int rc;

    memset(&opts, 0, sizeof opts);
    opts.lengths = d->lengths;
    opts.causal = d->causal;
    clf_context_record_launches(env->ctx, 1);
    rc = clf_attention_forward_ex(att, d->x, d->B, d->n, d->y, &opts);
    if (rc == 0)
        rc = clf_attention_forward_ex(att, d->x, d->B, d->n, d->y2, &opts);
    clf_context_record_launches(env->ctx, 0);
    launched(env->ctx, r->ran, sizeof r->ran);
    if (rc == 0)
        rc = clf_context_guard_check(env->ctx);
    if (rc != 0) {
        r->status = rc == CLF_EUNSUPPORTED ? VERIFY_REFUSED : VERIFY_FAIL;
        snprintf(r->error, sizeof r->error, "%s (%s): %s", clf_strerror(rc),
                 clf_status_name(rc), clf_error_message(rc));
        return;
    }
    r->compared = 1;
    r->rel_error = rel_error(d->y, d->ref, count);
    r->repeat_same = memcmp(d->y, d->y2, count * sizeof(float)) == 0;
    if (!(r->rel_error <= r->tol))
        snprintf(r->error, sizeof r->error,
                 "max |y - ref| / max |ref| = %.3g, above the tolerance %.0e",
                 r->rel_error, r->tol);
    else if (!r->repeat_same)
        snprintf(r->error, sizeof r->error,
                 "the same input twice gave different bits");
    r->status = r->error[0] ? VERIFY_FAIL : VERIFY_PASS;
}

/* ------------------------------------------------------------ reproducer */

/* Appends tensor `name` (rows x cols, cols 0 for a vector) to the header
 * and its bytes to the data. */
static int
st_add(json_t *hdr, const char *name, size_t rows, size_t cols, size_t *offset)
{
    size_t bytes = rows * (cols ? cols : 1) * sizeof(float);
    json_t *t = json_pack("{s:s,s:[I],s:[I,I]}", "dtype", "F32", "shape",
                          (json_int_t)rows, "data_offsets", (json_int_t)*offset,
                          (json_int_t)(*offset + bytes));

    if (t != NULL && cols)
        json_array_append_new(json_object_get(t, "shape"),
                              json_integer((json_int_t)cols));
    *offset += bytes;
    return t == NULL ? -1 : json_object_set_new(hdr, name, t);
}

/* The safetensors header of the case's layer as a lucidrains
 * LinformerSelfAttention state_dict (proj_k and proj_v are E and F
 * transposed, n x k), as JSON text (free it), or NULL. */
static char *
st_header(const struct vdata *d)
{
    static const char *const names[W_COUNT] = {
        "to_q.weight", "to_k.weight", "to_v.weight", "to_out.weight",
        "to_out.bias", "proj_k",      "proj_v"};
    const size_t rows[W_COUNT] = {d->hd, d->hd, d->hd, d->D, d->D, d->N, d->N};
    const size_t cols[W_COUNT] = {d->D, d->D, d->D, d->hd, 0, d->k, d->k};
    json_t *hdr = json_object();
    char heads[32], *text = NULL;
    size_t off = 0, i;
    int rc;

    snprintf(heads, sizeof heads, "%zu", d->c->shape->heads);
    rc = hdr == NULL ||
         json_object_set_new(hdr, "__metadata__",
                             json_pack("{s:s}", "heads", heads)) != 0;
    for (i = 0; i < W_COUNT && rc == 0; i++)
        rc = st_add(hdr, names[i], rows[i], cols[i], &off);
    if (rc == 0)
        text = json_dumps(hdr, JSON_PRESERVE_ORDER | JSON_COMPACT);
    json_decref(hdr);
    return text;
}

/* The case's layer in safetensors at path: the header, padded with spaces
 * to 8 bytes, then each tensor's floats. */
static int
save_weights(const struct vdata *d, const char *path)
{
    char *text = st_header(d);
    FILE *f = text != NULL ? fopen(path, "wb") : NULL;
    size_t i, j, len, pad;
    unsigned long long hlen;
    int rc;

    if (f == NULL) {
        free(text);
        return -1;
    }
    len = strlen(text);
    pad = (8 - len % 8) % 8;
    hlen = len + pad;
    for (i = 0; i < 8; i++)
        fputc((int)((hlen >> (8 * i)) & 0xff), f);
    fprintf(f, "%s%*s", text, (int)pad, "");
    for (i = 0; i < W_COUNT; i++) {
        if (i != W_E && i != W_F) {
            fwrite(d->w[i], sizeof(float), d->wn[i], f);
            continue;
        }
        for (j = 0; j < d->N * d->k; j++) /* (k x N) -> (N x k) */
            fwrite(&d->w[i][(j % d->k) * d->N + j / d->k], sizeof(float), 1, f);
    }
    rc = ferror(f) ? -1 : 0;
    if (fclose(f) != 0)
        rc = -1;
    free(text);
    return rc;
}

/* The reproducer's run options: mode, padding, precision. */
static void
run_flags(const struct vdata *d, char *buf, size_t cap)
{
    size_t len = 0, b;

    buf[0] = '\0';
    if (d->full)
        len += (size_t)snprintf(buf + len, cap - len, " --full");
    if (d->causal)
        len += (size_t)snprintf(buf + len, cap - len, " --causal");
    if (d->block)
        len += (size_t)snprintf(buf + len, cap - len, " --block %zu", d->block);
    for (b = 0; d->lengths != NULL && b < d->B && len < cap; b++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%u",
                                b ? "," : " --lengths ", d->lengths[b]);
    if (d->c->half && len < cap)
        snprintf(buf + len, cap - len, " --precision half");
}

/* Writes the case's weights, input and reference output under env->save
 * and the command that runs and compares them into r->repro. */
static void
save_case(const struct verify_env *env, const struct vdata *d,
          struct verify_result *r)
{
    const size_t id = d->c->id, count = d->B * d->n * d->D;
    const size_t shape[3] = {d->B, d->n, d->D};
    char w[512], x[512], ref[512], flags[512];
    float *rf = malloc(count * sizeof *rf);
    size_t i;
    int ok;

    if (rf == NULL || (mkdir(env->save, 0755) != 0 && errno != EEXIST)) {
        free(rf);
        return;
    }
    for (i = 0; i < count; i++)
        rf[i] = (float)d->ref[i];
    snprintf(w, sizeof w, "%s/case%zu.safetensors", env->save, id);
    snprintf(x, sizeof x, "%s/case%zu_x.npy", env->save, id);
    snprintf(ref, sizeof ref, "%s/case%zu_ref.npy", env->save, id);
    ok = save_weights(d, w) == 0 && clf_npy_save(x, d->x, shape, 3) == 0 &&
         clf_npy_save(ref, rf, shape, 3) == 0;
    free(rf);
    if (!ok)
        return;
    run_flags(d, flags, sizeof flags);
    snprintf(r->repro, sizeof r->repro,
             "CLINFORMER_KERNELS=%s clinformer run --guard%s%s --weights %s "
             "--input %s --output %s/case%zu_y.npy%s && clinformer compare "
             "%s/case%zu_y.npy %s --tol %.0e",
             d->c->kernels, env->device ? " --device " : "",
             env->device ? env->device : "", w, x, env->save, id, flags,
             env->save, id, ref, r->tol);
}

void
verify_run_case(const struct verify_env *env, const struct verify_case *c,
                struct verify_result *r)
{
    struct vdata d;
    clf_attention *att = NULL;
    double t0 = cli_now();
    int rc;

    memset(r, 0, sizeof *r);
    r->tol =
        c->half && env->fp16 && strstr(c->kernels, "halfgemm=widen") == NULL
            ? VERIFY_TOL_NATIVE
            : VERIFY_TOL;
    if (vdata_make(&d, c, env->seed) != 0 || vdata_reference(&d) != 0) {
        r->status = VERIFY_FAIL;
        snprintf(r->error, sizeof r->error, "out of host memory");
        vdata_free(&d);
        return;
    }
    rc = force_kernels(env->ctx, c->kernels);
    if (rc == 0)
        rc = make_layer(env, &d, &att);
    if (rc != 0) {
        r->status = rc == CLF_EUNSUPPORTED ? VERIFY_REFUSED : VERIFY_FAIL;
        snprintf(r->error, sizeof r->error, "%s (%s): %s", clf_strerror(rc),
                 clf_status_name(rc), clf_error_message(rc));
    } else
        forward_twice(env, &d, att, r);
    clf_attention_destroy(att);
    clf_context_guard_check(env->ctx); /* a fault is this case's alone */
    if (r->status == VERIFY_FAIL)
        save_case(env, &d, r);
    r->seconds = cli_now() - t0;
    vdata_free(&d);
}
