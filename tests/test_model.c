/* Trained-model layouts against PyTorch: each fixture in tests/data/ holds
 * the weights (safetensors.torch.save_file of a state_dict), an input and
 * the output PyTorch computed (tests/data/gen_fixtures.py).  Tolerance:
 * max |y - y_torch| <= 1e-5 * max |y_torch|. */
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOL 1e-5

static char data_dir[1024];

static void
path_of(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", data_dir, name);
}

/* Loads case `name`, runs it (with opts), compares with the stored
 * output. */
static void
check_case_ex(const char *name, clf_layout layout, clf_layout expect,
              const clf_forward_opts *opts)
{
    char p[1200];
    clf_model *m = NULL;
    clf_model_opts mo;
    clf_model_info info;
    clf_array x, y;
    float *out;
    double *ref;
    size_t i, B, n;
    int rc;

    memset(&mo, 0, sizeof mo);
    mo.layout = layout;
    path_of(p, sizeof p, name);
    strcat(p, ".safetensors");
    rc = clf_model_load(&m, tu_context(), p, &mo);
    ck_assert_msg(rc == 0, "%s: %s", name, clf_last_error());
    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_str_eq(clf_layout_name(info.layout), clf_layout_name(expect));
    /* The mode the file asks for, reported (full_attention=True). */
    {
        clf_mode mode = (clf_mode)-1, now = (clf_mode)-1;
        ck_assert_int_eq(clf_model_get_mode(m, &mode), 0);
        const size_t nl = strlen(name);
        const clf_mode want = nl > 5 && strcmp(name + nl - 5, "_full") == 0
                                  ? CLF_MODE_FULL
                                  : CLF_MODE_LINFORMER;
        ck_assert_int_eq(mode, want);
        ck_assert_int_eq(clf_model_set_mode(m, (clf_mode)!mode), 0);
        ck_assert_int_eq(clf_model_get_mode(m, &now), 0);
        ck_assert_int_eq(now, (clf_mode)!mode);
        ck_assert_int_eq(clf_model_set_mode(m, mode), 0);
    }
    path_of(p, sizeof p, name);
    strcat(p, "_x.npy");
    ck_assert_msg(clf_npy_load(p, &x) == 0, "%s", clf_last_error());
    path_of(p, sizeof p, name);
    strcat(p, "_y.npy");
    ck_assert_msg(clf_npy_load(p, &y) == 0, "%s", clf_last_error());
    ck_assert_ptr_nonnull(y.data);
    B = x.shape[0];
    n = x.shape[1];
    out = tu_malloc(y.count * sizeof *out);
    ref = tu_malloc(y.count * sizeof *ref);
    for (i = 0; i < y.count; i++) {
        out[i] = NAN;
        ref[i] = y.data[i];
    }
    if (info.vocab) {
        ck_assert_ptr_nonnull(x.ids);
        rc = clf_model_forward_tokens(m, x.ids, B, n, out, opts);
    } else {
        ck_assert_ptr_nonnull(x.data);
        rc = clf_model_forward(m, x.data, B, n, out, opts);
    }
    ck_assert_msg(rc == 0, "%s forward: %s", name, clf_last_error());
    tu_assert_close(out, ref, y.count, TOL, name);
    free(out);
    free(ref);
    clf_array_free(&x);
    clf_array_free(&y);
    clf_model_destroy(m);
}

static void
check_case(const char *name, clf_layout layout, clf_layout expect)
{
    check_case_ex(name, layout, expect, NULL);
}

START_TEST(model_lucidrains_attention_matches_torch)
{
    check_case("lucidrains_attention", CLF_LAYOUT_AUTO,
               CLF_LAYOUT_LUCIDRAINS_ATTENTION);
    check_case("lucidrains_attention", CLF_LAYOUT_LUCIDRAINS_ATTENTION,
               CLF_LAYOUT_LUCIDRAINS_ATTENTION);
}
END_TEST

START_TEST(model_lucidrains_share_kv_one_kv_head_matches_torch)
{
    check_case("lucidrains_attention_sharekv_onekv", CLF_LAYOUT_AUTO,
               CLF_LAYOUT_LUCIDRAINS_ATTENTION);
}
END_TEST

START_TEST(model_lucidrains_encoder_matches_torch)
{
    check_case("lucidrains_encoder", CLF_LAYOUT_AUTO,
               CLF_LAYOUT_LUCIDRAINS_ENCODER);
    check_case("lucidrains_encoder_full_len", CLF_LAYOUT_AUTO,
               CLF_LAYOUT_LUCIDRAINS_ENCODER);
}
END_TEST

START_TEST(model_lucidrains_reversible_matches_torch)
{
    check_case("lucidrains_encoder_reversible", CLF_LAYOUT_AUTO,
               CLF_LAYOUT_LUCIDRAINS_ENCODER);
}
END_TEST

START_TEST(model_lucidrains_lm_matches_torch)
{
    check_case("lucidrains_lm", CLF_LAYOUT_AUTO, CLF_LAYOUT_LUCIDRAINS_LM);
}
END_TEST

START_TEST(model_fairseq_attention_matches_reference)
{
    check_case("fairseq_attention", CLF_LAYOUT_AUTO,
               CLF_LAYOUT_FAIRSEQ_ATTENTION);
}
END_TEST

START_TEST(model_fairseq_encoder_layer_matches_reference)
{
    check_case("fairseq_encoder_layer", CLF_LAYOUT_AUTO,
               CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER);
}
END_TEST

/* linformer-pytorch 0.19.3's models and the single-head class, as the
 * package computed them (tests/data/gen_fixtures.py): every sharing mode
 * (the shared ones saved by save_model, each shared tensor once), relu, a
 * k per layer, dim_d, w_o_1/w_o_2, no feed-forward, full attention, the
 * LM, a bare MHAttention, padding, the convolution compressor, causal=True
 * (its slot mask; in full attention the usual triangle), ff_intermediate
 * (widths 16, 24, 24, 16 through the resample linears). */
START_TEST(model_linformer_pytorch_matches_torch)
{
    static const char *const enc[] = {
        "lp_linformer_layerwise",   "lp_linformer_none",
        "lp_linformer_headwise",    "lp_linformer_kv",
        "lp_linformer_relu",        "lp_linformer_kreduce",
        "lp_linformer_dimd",        "lp_linformer_wo2",
        "lp_linformer_noff",        "lp_linformer_full",
        "lp_linformer_conv",        "lp_linformer_causal",
        "lp_linformer_causal_full", "lp_linformer_ffint"};
    const unsigned lengths[2] = {12, 7};
    clf_forward_opts o;
    size_t i;

    for (i = 0; i < sizeof enc / sizeof enc[0]; i++)
        check_case(enc[i], CLF_LAYOUT_AUTO,
                   CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER);
    check_case("lp_lm", CLF_LAYOUT_AUTO, CLF_LAYOUT_LINFORMER_PYTORCH_LM);
    check_case("lp_mhattention", CLF_LAYOUT_AUTO,
               CLF_LAYOUT_LINFORMER_PYTORCH_ATTENTION);
    check_case("lp_linformer_none", CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER,
               CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER);
    memset(&o, 0, sizeof o);
    o.lengths = lengths;
    check_case_ex("lp_linformer_padded", CLF_LAYOUT_AUTO,
                  CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER, &o);
    check_case("guide_attention", CLF_LAYOUT_AUTO,
               CLF_LAYOUT_SINGLE_HEAD_ATTENTION);
}
END_TEST

/* A model trained with causal=True runs with its slot mask, and says so;
 * the mask is what makes it match (the same weights without it do not);
 * the prefix-safe causal mode, which is not that mask, is refused on it,
 * at load (a causal block) and at the forward. */
START_TEST(model_linformer_pytorch_causal_runs_its_slot_mask)
{
    char p[1200];
    clf_model *m = NULL, *plain = NULL;
    clf_model_opts mo;
    clf_model_info info;
    clf_forward_opts fo;
    clf_array x, y;
    float *out, *unmasked;
    double err = 0.0, off = 0.0;
    clf_attention *att;
    size_t i, l;

    path_of(p, sizeof p, "lp_linformer_causal.safetensors");
    ck_assert_int_eq(clf_model_load(&m, tu_context(), p, NULL), 0);
    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_int_eq(info.slot_mask, 1);
    path_of(p, sizeof p, "lp_linformer_none.safetensors");
    ck_assert_int_eq(clf_model_load(&plain, tu_context(), p, NULL), 0);
    ck_assert_int_eq(clf_model_info_get(plain, &info), 0);
    ck_assert_int_eq(info.slot_mask, 0);
    clf_model_destroy(plain);
    path_of(p, sizeof p, "lp_linformer_causal_x.npy");
    ck_assert_int_eq(clf_npy_load(p, &x), 0);
    path_of(p, sizeof p, "lp_linformer_causal_y.npy");
    ck_assert_int_eq(clf_npy_load(p, &y), 0);
    out = tu_malloc(x.count * sizeof *out);
    unmasked = tu_malloc(x.count * sizeof *unmasked);
    ck_assert_int_eq(
        clf_model_forward(m, x.data, x.shape[0], x.shape[1], out, NULL), 0);
    /* The same layers without the mask: their desc with slot_mask 0. */
    for (l = 0; (att = clf__model_layer(m, l)) != NULL; l++)
        att->desc.slot_mask = 0;
    ck_assert_int_eq(
        clf_model_forward(m, x.data, x.shape[0], x.shape[1], unmasked, NULL),
        0);
    for (l = 0; (att = clf__model_layer(m, l)) != NULL; l++)
        att->desc.slot_mask = 1;
    for (i = 0; i < x.count; i++) {
        double e = fabs((double)out[i] - y.data[i]);
        double d = fabs((double)unmasked[i] - y.data[i]);
        err = e > err ? e : err;
        off = d > off ? d : off;
    }
    ck_assert_msg(err <= 1e-5 * 3.0, "error %.3g", err);
    ck_assert_msg(off > 1e-2, "without the mask: %.3g", off);
    memset(&fo, 0, sizeof fo);
    fo.causal = 1;
    ck_assert_int_eq(
        clf_model_forward(m, x.data, x.shape[0], x.shape[1], out, &fo),
        CLF_EUNSUPPORTED);
    ck_assert_msg(strstr(clf_last_error(), "slot_mask") &&
                      strstr(clf_last_error(), "prefix-safe"),
                  "%s", clf_last_error());
    clf_model_destroy(m);
    memset(&mo, 0, sizeof mo);
    mo.causal_block = 4;
    path_of(p, sizeof p, "lp_linformer_causal.safetensors");
    m = (clf_model *)p;
    ck_assert_int_eq(clf_model_load(&m, tu_context(), p, &mo),
                     CLF_EINVALID_ARGUMENT);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(clf_last_error(), "causal=True") &&
                      strstr(clf_last_error(), "causal block"),
                  "%s", clf_last_error());
    free(out);
    free(unmasked);
    clf_array_free(&x);
    clf_array_free(&y);
}
END_TEST

/* A right-padded batch through the whole encoder equals each sequence
 * alone; padding rows of the output are zeros. */
START_TEST(model_padded_batch_equals_each_alone)
{
    char p[1200];
    clf_model *m = NULL;
    clf_array x;
    const unsigned lens[2] = {4, 10};
    clf_forward_opts o;
    float *y, *ya;
    size_t b, i, n, D;
    double err = 0.0, scale = 1e-30;

    path_of(p, sizeof p, "lucidrains_encoder.safetensors");
    ck_assert_int_eq(clf_model_load(&m, tu_context(), p, NULL), 0);
    path_of(p, sizeof p, "lucidrains_encoder_x.npy");
    ck_assert_int_eq(clf_npy_load(p, &x), 0);
    n = x.shape[1];
    D = x.shape[2];
    y = tu_malloc(x.count * sizeof *y);
    ya = tu_malloc(n * D * sizeof *ya);
    memset(&o, 0, sizeof o);
    o.lengths = lens;
    ck_assert_int_eq(clf_model_forward(m, x.data, 2, n, y, &o), 0);
    for (b = 0; b < 2; b++) {
        ck_assert_int_eq(
            clf_model_forward(m, x.data + b * n * D, 1, lens[b], ya, NULL), 0);
        for (i = 0; i < lens[b] * D; i++) {
            double d = fabs((double)y[b * n * D + i] - ya[i]);
            err = d > err ? d : err;
            scale = fabs(ya[i]) > scale ? fabs(ya[i]) : scale;
        }
        for (i = lens[b] * D; i < n * D; i++)
            ck_assert_float_eq(y[b * n * D + i], 0.0f);
    }
    ck_assert_msg(err <= TOL * scale, "error %.3g, scale %.3g", err, scale);
    {
        const unsigned bad[2] = {10, 0};
        o.lengths = bad;
        ck_assert_int_eq(clf_model_forward(m, x.data, 2, n, y, &o),
                         CLF_EBAD_SIZE);
        ck_assert_ptr_nonnull(strstr(clf_last_error(), "lengths[1] = 0"));
    }
    free(y);
    free(ya);
    clf_array_free(&x);
    clf_model_destroy(m);
}
END_TEST

/* Writes a safetensors file of F32 tensors: names[i] with shapes. */
static void
write_st(const char *path, size_t count, const char *const *names,
         const size_t (*shapes)[2], const char *metadata)
{
    char header[16384];
    size_t len = 0, off = 0, i, j, total = 0;
    unsigned char lenbytes[8];
    FILE *f;

    len += (size_t)snprintf(header + len, sizeof header - len, "{%s%s",
                            metadata ? metadata : "", metadata ? "," : "");
    for (i = 0; i < count; i++) {
        size_t elems = shapes[i][0] * (shapes[i][1] ? shapes[i][1] : 1);
        if (shapes[i][1])
            len += (size_t)snprintf(
                header + len, sizeof header - len,
                "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],"
                "\"data_offsets\":[%zu,%zu]}",
                i ? "," : "", names[i], shapes[i][0], shapes[i][1], off,
                off + elems * 4);
        else
            len += (size_t)snprintf(header + len, sizeof header - len,
                                    "%s\"%s\":{\"dtype\":\"F32\",\"shape\":"
                                    "[%zu],\"data_offsets\":[%zu,%zu]}",
                                    i ? "," : "", names[i], shapes[i][0], off,
                                    off + elems * 4);
        off += elems * 4;
    }
    len += (size_t)snprintf(header + len, sizeof header - len, "}");
    total = off;
    for (j = 0; j < 8; j++)
        lenbytes[j] = (unsigned char)((len >> (8 * j)) & 0xff);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(lenbytes, 1, 8, f);
    fwrite(header, 1, len, f);
    for (i = 0; i < total / 4; i++) {
        float v = 0.01f * (float)(i % 17);
        fwrite(&v, 4, 1, f);
    }
    fclose(f);
}

/* Metadata that the tensor shapes contradict is an error naming both
 * (heads 16 over 8 rows of heads x dim_head would give head_dim 0 or 1);
 * heads "0" is a bad value, not a missing one; a transposed proj_k is
 * named beside the proj_v it contradicts. */
START_TEST(model_metadata_checked_against_shapes)
{
    char dir[] = "/tmp/clf-model-XXXXXX", p[256];
    static const char *const names[] = {
        "to_q.weight",   "to_k.weight", "to_v.weight", "proj_k",
        "to_out.weight", "to_out.bias", "proj_v"};
    size_t shapes[7][2] = {{8, 8}, {8, 8}, {8, 8}, {6, 2},
                           {8, 8}, {8, 0}, {6, 2}};
    static const struct {
        const char *meta, *want;
        int rc;
    } bad[] = {
        {"{\"heads\":\"8\",\"dim_head\":\"4\"}",
         "metadata dim_head = 4 disagrees with the tensor shapes, which give "
         "head_dim 1",
         CLF_ESHAPE_MISMATCH},
        {"{\"heads\":\"2\",\"dim\":\"16\"}",
         "metadata dim = 16 disagrees with the tensor shapes, which give "
         "d_model 8",
         CLF_ESHAPE_MISMATCH},
        {"{\"heads\":\"2\",\"seq_len\":\"12\"}",
         "metadata seq_len = 12 disagrees", CLF_ESHAPE_MISMATCH},
        {"{\"heads\":\"2\",\"k\":\"3\"}", "metadata k = 3 disagrees",
         CLF_ESHAPE_MISMATCH},
        {"{\"heads\":\"2\",\"k\":\"two\"}",
         "metadata k = \"two\" is not a non-negative integer", CLF_EFORMAT},
        {"{\"heads\":\"0\"}", "metadata heads = \"0\"", CLF_EFORMAT},
    };
    char md[256];
    clf_model *m = NULL;
    size_t i;
    int rc;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/m.safetensors", dir);
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(md, sizeof md, "\"__metadata__\":%s", bad[i].meta);
        write_st(p, 7, names, (const size_t(*)[2])shapes, md);
        rc = clf_model_load(&m, tu_context(), p, NULL);
        ck_assert_msg(rc == bad[i].rc &&
                          strstr(clf_last_error(), bad[i].want) != NULL,
                      "%s: %d %s", bad[i].meta, rc, clf_last_error());
        ck_assert_ptr_null(m);
    }
    /* Agreeing values (and str(None) for dim_head) load. */
    write_st(p, 7, names, (const size_t(*)[2])shapes,
             "\"__metadata__\":{\"heads\":\"2\",\"dim\":\"8\","
             "\"seq_len\":\"6\",\"k\":\"2\",\"dim_head\":\"None\"}");
    rc = clf_model_load(&m, tu_context(), p, NULL);
    ck_assert_msg(rc == 0, "%s", clf_last_error());
    clf_model_destroy(m);
    m = NULL;
    /* proj_k transposed: the message names it, not only proj_v. */
    shapes[3][0] = 2;
    shapes[3][1] = 6;
    write_st(p, 7, names, (const size_t(*)[2])shapes,
             "\"__metadata__\":{\"heads\":\"2\"}");
    rc = clf_model_load(&m, tu_context(), p, NULL);
    ck_assert_int_eq(rc, CLF_ESHAPE_MISMATCH);
    ck_assert_msg(strstr(clf_last_error(), "tensor proj_v has shape (6, 2)") &&
                      strstr(clf_last_error(), "as tensor proj_k gives it"),
                  "%s", clf_last_error());
    remove(p);
    rmdir(dir);
}
END_TEST

START_TEST(model_rejects_bad_files)
{
    char dir[] = "/tmp/clf-model-XXXXXX", p[256], fx[1200];
    static const char *const names[] = {
        "to_q.weight",   "to_k.weight", "to_v.weight", "proj_k",
        "to_out.weight", "to_out.bias", "proj_v"};
    size_t shapes[7][2] = {{8, 8}, {8, 8}, {8, 8}, {6, 2},
                           {8, 8}, {8, 0}, {6, 2}};
    clf_model_opts mo;
    clf_model *m = NULL;
    int rc;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/m.safetensors", dir);

    /* A well-formed file loads. */
    write_st(p, 7, names, (const size_t(*)[2])shapes,
             "\"__metadata__\":{\"heads\":\"2\"}");
    rc = clf_model_load(&m, tu_context(), p, NULL);
    ck_assert_msg(rc == 0, "%s", clf_last_error());
    clf_model_destroy(m);
    m = NULL;

    /* No heads anywhere. */
    write_st(p, 7, names, (const size_t(*)[2])shapes, NULL);
    rc = clf_model_load(&m, tu_context(), p, NULL);
    ck_assert_int_eq(rc, CLF_EINVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "heads"));
    memset(&mo, 0, sizeof mo);
    mo.heads = 2;
    ck_assert_int_eq(clf_model_load(&m, tu_context(), p, &mo), 0);
    clf_model_destroy(m);
    m = NULL;
    /* heads contradicting the metadata */
    write_st(p, 7, names, (const size_t(*)[2])shapes,
             "\"__metadata__\":{\"heads\":\"2\"}");
    mo.heads = 4;
    rc = clf_model_load(&m, tu_context(), p, &mo);
    ck_assert_int_eq(rc, CLF_EINVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "disagrees"));
    /* heads that do not divide the width */
    mo.heads = 3;
    write_st(p, 7, names, (const size_t(*)[2])shapes, NULL);
    rc = clf_model_load(&m, tu_context(), p, &mo);
    ck_assert_int_eq(rc, CLF_ESHAPE_MISMATCH);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "to_q.weight"));

    /* A tensor of the wrong shape is named. */
    shapes[4][1] = 7;
    write_st(p, 7, names, (const size_t(*)[2])shapes,
             "\"__metadata__\":{\"heads\":\"2\"}");
    rc = clf_model_load(&m, tu_context(), p, NULL);
    ck_assert_int_eq(rc, CLF_ESHAPE_MISMATCH);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "to_out.weight"));
    shapes[4][1] = 8;

    /* A missing tensor is named (proj_v while to_v is there). */
    write_st(p, 6, names, (const size_t(*)[2])shapes,
             "\"__metadata__\":{\"heads\":\"2\"}");
    rc = clf_model_load(&m, tu_context(), p, NULL);
    ck_assert_int_eq(rc, CLF_ENOT_FOUND);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "proj_v"));

    /* A forced layout the file does not hold. */
    write_st(p, 7, names, (const size_t(*)[2])shapes,
             "\"__metadata__\":{\"heads\":\"2\"}");
    mo.heads = 0;
    mo.layout = CLF_LAYOUT_FAIRSEQ_ATTENTION;
    rc = clf_model_load(&m, tu_context(), p, &mo);
    ck_assert_int_eq(rc, CLF_ENOT_FOUND);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "q_proj.weight"));

    /* An unrecognisable file, and a missing one. */
    write_st(p, 1, names + 3, (const size_t(*)[2])(shapes + 3), NULL);
    rc = clf_model_load(&m, tu_context(), p, NULL);
    ck_assert_int_eq(rc, CLF_EINVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "layout"));
    snprintf(p, sizeof p, "%s/absent.safetensors", dir);
    rc = clf_model_load(&m, tu_context(), p, NULL);
    ck_assert_int_eq(rc, CLF_EIO);
    ck_assert_ptr_null(m);

    /* Wrong use of the forward calls. */
    path_of(fx, sizeof fx, "lucidrains_lm.safetensors");
    ck_assert_int_eq(clf_model_load(&m, tu_context(), fx, NULL), 0);
    {
        float x[16], y[20];
        long long ids[2] = {3, 20};
        ck_assert_int_eq(clf_model_forward(m, x, 1, 1, y, NULL),
                         CLF_EINVALID_ARGUMENT);
        rc = clf_model_forward_tokens(m, ids, 1, 2, y, NULL);
        ck_assert_int_eq(rc, CLF_EBAD_SIZE);
        ck_assert_ptr_nonnull(strstr(clf_last_error(), "index 1"));
    }
    clf_model_destroy(m);
    snprintf(p, sizeof p, "%s/m.safetensors", dir);
    remove(p);
    rmdir(dir);
}
END_TEST

/* A hand-built file: tensors added one by one, then written. */
struct fake {
    char dir[64], path[128];
    char name[96][96];
    const char *names[96];
    size_t shapes[96][2];
    size_t n;
};

static void
fake_init(struct fake *f)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/clf-model-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/m.safetensors", f->dir);
}

static void
fake_add(struct fake *f, const char *prefix, const char *name, size_t rows,
         size_t cols)
{
    ck_assert_uint_lt(f->n, 96);
    snprintf(f->name[f->n], sizeof f->name[f->n], "%s%s", prefix, name);
    f->names[f->n] = f->name[f->n];
    f->shapes[f->n][0] = rows;
    f->shapes[f->n][1] = cols;
    f->n++;
}

/* Removes the tensor of that full name (it must be there). */
static void
fake_drop(struct fake *f, const char *name)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        if (strcmp(f->name[i], name) == 0)
            break;
    ck_assert_uint_lt(i, f->n);
    for (; i + 1 < f->n; i++) {
        memcpy(f->name[i], f->name[i + 1], sizeof f->name[i]);
        f->shapes[i][0] = f->shapes[i + 1][0];
        f->shapes[i][1] = f->shapes[i + 1][1];
    }
    f->n--;
}

/* The width the last feed-forward (seq.3) of two fake_lp_layer layers
 * writes: its w_2 and norm and, where it is not the input's 8, the
 * resample linear that ff_intermediate adds to its residual. */
static void
fake_lp_last_width(struct fake *f, size_t width)
{
    static const char *const out[] = {"seq.3.fn.w_2.weight",
                                      "seq.3.fn.w_2.bias", "seq.3.norm.weight",
                                      "seq.3.norm.bias"};
    size_t i, was = 0;

    for (i = 0; i < f->n; i++)
        if (strcmp(f->name[i], "seq.3.norm.weight") == 0)
            was = f->shapes[i][0];
    for (i = 0; i < 4; i++) {
        fake_drop(f, out[i]);
        fake_add(f, "", out[i], width, i == 0 ? 16 : 0);
    }
    if (was != 8) {
        fake_drop(f, "seq.3.resample.weight");
        fake_drop(f, "seq.3.resample.bias");
    }
    if (width != 8) {
        fake_add(f, "", "seq.3.resample.weight", width, 8);
        fake_add(f, "", "seq.3.resample.bias", width, 0);
    }
}

/* lucidrains attention, d_model 8, 2 heads, N 6, k 2. */
static void
fake_attention(struct fake *f, const char *p, int share_kv)
{
    fake_add(f, p, "to_q.weight", 8, 8);
    fake_add(f, p, "to_k.weight", 8, 8);
    if (!share_kv)
        fake_add(f, p, "to_v.weight", 8, 8);
    fake_add(f, p, "to_out.weight", 8, 8);
    fake_add(f, p, "to_out.bias", 8, 0);
    fake_add(f, p, "proj_k", 6, 2);
    if (!share_kv)
        fake_add(f, p, "proj_v", 6, 2);
}

/* Layer l of a sequential lucidrains encoder, ffn width 16. */
static void
fake_encoder_layer(struct fake *f, size_t l, int share_kv)
{
    char p[64];

    snprintf(p, sizeof p, "net.layers.%zu.0.fn.", l);
    fake_attention(f, p, share_kv);
    snprintf(p, sizeof p, "net.layers.%zu.0.norm.", l);
    fake_add(f, p, "weight", 8, 0);
    fake_add(f, p, "bias", 8, 0);
    snprintf(p, sizeof p, "net.layers.%zu.1.fn.", l);
    fake_add(f, p, "w1.weight", 16, 8);
    fake_add(f, p, "w1.bias", 16, 0);
    fake_add(f, p, "w2.weight", 8, 16);
    fake_add(f, p, "w2.bias", 8, 0);
    snprintf(p, sizeof p, "net.layers.%zu.1.norm.", l);
    fake_add(f, p, "weight", 8, 0);
    fake_add(f, p, "bias", 8, 0);
}

/* Writes the file and loads it; returns the status, *m the model. */
static int
fake_load(struct fake *f, const char *meta, int allow_unexpected, clf_model **m)
{
    clf_model_opts mo;
    char md[200];

    snprintf(md, sizeof md, "\"__metadata__\":{\"heads\":\"2\"%s%s}",
             meta ? "," : "", meta ? meta : "");
    write_st(f->path, f->n, f->names, (const size_t(*)[2])f->shapes, md);
    memset(&mo, 0, sizeof mo);
    mo.allow_unexpected = allow_unexpected;
    *m = (clf_model *)f;
    return clf_model_load(m, tu_context(), f->path, &mo);
}

static void
fake_done(struct fake *f)
{
    remove(f->path);
    rmdir(f->dir);
}

static void
assert_msg_has(const char *a, const char *b)
{
    const char *msg = clf_last_error();

    ck_assert_msg(strstr(msg, a) != NULL && (b == NULL || strstr(msg, b)),
                  "\"%s\" should name \"%s\" and \"%s\"", msg, a, b ? b : "");
}

START_TEST(model_strict_rejects_missing_tensor)
{
    struct fake f;
    clf_model *m;

    fake_init(&f);
    fake_attention(&f, "", 0);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), 0);
    clf_model_destroy(m);
    /* to_v alone missing used to be taken for share_kv: proj_v is there,
     * so keys and values do not share, and to_v is missing. */
    fake_drop(&f, "to_v.weight");
    ck_assert_int_eq(fake_load(&f, NULL, 1, &m), CLF_ENOT_FOUND);
    ck_assert_ptr_null(m);
    assert_msg_has("to_v.weight", "(8, 8)");
    fake_add(&f, "", "to_v.weight", 8, 8);
    fake_drop(&f, "to_out.bias");
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ENOT_FOUND);
    assert_msg_has("to_out.bias", "(8,)");
    fake_done(&f);
}
END_TEST

START_TEST(model_strict_rejects_unexpected_tensor)
{
    struct fake f;
    clf_model *m;

    fake_init(&f);
    fake_attention(&f, "", 0);
    fake_add(&f, "", "extra.weight", 4, 4);
    fake_add(&f, "", "to_q.bias", 8, 0);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_EWEIGHT_UNUSED);
    ck_assert_ptr_null(m);
    assert_msg_has("extra.weight", "2 unexpected");
    /* Allowed, they are skipped and listed. */
    ck_assert_int_eq(fake_load(&f, NULL, 1, &m), 0);
    ck_assert_uint_eq(clf_model_unexpected_count(m), 2);
    ck_assert_str_eq(clf_model_unexpected_name(m, 0), "extra.weight");
    ck_assert_str_eq(clf_model_unexpected_name(m, 1), "to_q.bias");
    ck_assert_ptr_null(clf_model_unexpected_name(m, 2));
    clf_model_destroy(m);
    ck_assert_uint_eq(clf_model_unexpected_count(NULL), 0);
    ck_assert_ptr_null(clf_model_unexpected_name(NULL, 0));
    /* Nothing unexpected: nothing listed. */
    fake_drop(&f, "extra.weight");
    fake_drop(&f, "to_q.bias");
    ck_assert_int_eq(fake_load(&f, NULL, 1, &m), 0);
    ck_assert_uint_eq(clf_model_unexpected_count(m), 0);
    clf_model_destroy(m);
    fake_done(&f);
}
END_TEST

START_TEST(model_strict_rejects_misshapen_tensor)
{
    struct fake f;
    clf_model *m;

    fake_init(&f);
    fake_attention(&f, "", 0);
    f.shapes[6][1] = 3; /* proj_v (6, 3) while proj_k is (6, 2) */
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ESHAPE_MISMATCH);
    assert_msg_has("proj_v", "(6, 2) expected");
    f.shapes[6][1] = 2;
    f.shapes[4][1] = 8; /* to_out.bias as a matrix */
    ck_assert_int_eq(fake_load(&f, NULL, 1, &m), CLF_ESHAPE_MISMATCH);
    assert_msg_has("to_out.bias", "(8,) expected");
    f.shapes[4][1] = 0;
    f.shapes[1][0] = 5; /* to_k neither 8 nor one head's 4 rows */
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ESHAPE_MISMATCH);
    assert_msg_has("to_k.weight", "one_kv_head");
    fake_done(&f);
}
END_TEST

START_TEST(model_strict_rejects_layer_number_gap)
{
    struct fake f;
    clf_model *m;
    clf_model_info info;

    fake_init(&f);
    fake_encoder_layer(&f, 0, 0);
    fake_encoder_layer(&f, 1, 0);
    fake_encoder_layer(&f, 2, 0);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), 0);
    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_uint_eq(info.layers, 3);
    ck_assert_uint_eq(info.ffn_dim, 16);
    clf_model_destroy(m);
    /* Without layer 1, layer 2 used to be dropped unseen. */
    f.n = 0;
    fake_encoder_layer(&f, 0, 0);
    fake_encoder_layer(&f, 2, 0);
    ck_assert_int_eq(fake_load(&f, NULL, 1, &m), CLF_ENOT_FOUND);
    assert_msg_has("net.layers.1.0.fn.to_q.weight", NULL);
    /* A far-off layer number is a missing layer too, not a huge stack. */
    f.n = 0;
    fake_encoder_layer(&f, 0, 0);
    fake_add(&f, "net.layers.99999999999.0.fn.", "to_q.weight", 8, 8);
    ck_assert_int_eq(fake_load(&f, NULL, 1, &m), CLF_ENOT_FOUND);
    assert_msg_has("net.layers.1.0.fn.to_q.weight", NULL);
    /* An unknown name under a far layer number is unexpected, not a
     * missing layer: allowed, the stack keeps its one layer. */
    f.n = 0;
    fake_encoder_layer(&f, 0, 0);
    fake_add(&f, "net.layers.7.0.fn.", "extra", 8, 0);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_EWEIGHT_UNUSED);
    assert_msg_has("net.layers.7.0.fn.extra", NULL);
    ck_assert_int_eq(fake_load(&f, NULL, 1, &m), 0);
    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_uint_eq(info.layers, 1);
    ck_assert_uint_eq(clf_model_unexpected_count(m), 1);
    clf_model_destroy(m);
    /* A layer's tensor under another block of the layer is unexpected. */
    f.n = 0;
    fake_encoder_layer(&f, 0, 0);
    fake_add(&f, "net.layers.0.2.fn.", "w1.weight", 16, 8);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_EWEIGHT_UNUSED);
    assert_msg_has("net.layers.0.2.fn.w1.weight", NULL);
    fake_done(&f);
}
END_TEST

/* Keys and values share exactly when the first layer holds neither to_v
 * nor proj_v, unless the metadata says otherwise. */
START_TEST(model_share_kv_comes_from_the_file)
{
    struct fake f;
    clf_model *m;
    clf_model_info info;

    fake_init(&f);
    fake_attention(&f, "", 1);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), 0);
    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_int_eq(info.share_kv, 1);
    clf_model_destroy(m);
    ck_assert_int_eq(fake_load(&f, "\"share_kv\":\"true\"", 0, &m), 0);
    clf_model_destroy(m);
    ck_assert_int_eq(fake_load(&f, "\"share_kv\":\"false\"", 0, &m),
                     CLF_ENOT_FOUND);
    assert_msg_has("to_v.weight", NULL);
    ck_assert_int_eq(fake_load(&f, "\"share_kv\":\"maybe\"", 0, &m),
                     CLF_EFORMAT);
    assert_msg_has("share_kv", "maybe");
    /* Only proj_v: to_v is missing, not shared. */
    fake_add(&f, "", "proj_v", 6, 2);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ENOT_FOUND);
    assert_msg_has("to_v.weight", NULL);
    /* The metadata's sharing makes a to_v that is there unexpected. */
    fake_drop(&f, "proj_v");
    fake_add(&f, "", "to_v.weight", 8, 8);
    fake_add(&f, "", "proj_v", 6, 2);
    ck_assert_int_eq(fake_load(&f, "\"share_kv\":\"true\"", 0, &m),
                     CLF_EWEIGHT_UNUSED);
    assert_msg_has("to_v.weight", NULL);
    /* A later layer must follow the first. */
    f.n = 0;
    fake_encoder_layer(&f, 0, 1);
    fake_encoder_layer(&f, 1, 0);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_EWEIGHT_UNUSED);
    assert_msg_has("net.layers.1.0.fn.to_v.weight", NULL);
    f.n = 0;
    fake_encoder_layer(&f, 0, 0);
    fake_encoder_layer(&f, 1, 1);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ENOT_FOUND);
    assert_msg_has("net.layers.1.0.fn.to_v.weight", NULL);
    fake_done(&f);
}
END_TEST

START_TEST(model_load_refuses_device_and_fifo)
{
    char dir[] = "/tmp/clf-model-XXXXXX", p[256];
    clf_model *m = (clf_model *)&m;

    ck_assert_int_eq(clf_model_load(&m, tu_context(), "/dev/zero", NULL),
                     CLF_EIO);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "not a regular file"));
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/fifo.safetensors", dir);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    alarm(10);
    ck_assert_int_eq(clf_model_load(&m, tu_context(), p, NULL), CLF_EIO);
    alarm(0);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), p));
    unlink(p);
    rmdir(dir);
}
END_TEST

/* Layer l of a linformer-pytorch Linformer (d_model 8, 2 heads of 4,
 * N 6, k 2, feed-forward 16, sharing none), at seq.{2l} and seq.{2l+1}. */
static void
fake_lp_layer(struct fake *f, size_t l)
{
    static const char *const proj[] = {"to_q", "to_k", "to_v"};
    char p[64], n[64];
    size_t h, i;

    snprintf(p, sizeof p, "seq.%zu.fn.", 2 * l);
    for (i = 0; i < 3; i++)
        for (h = 0; h < 2; h++) {
            snprintf(n, sizeof n, "%s.%zu.weight", proj[i], h);
            fake_add(f, p, n, 4, 8);
        }
    for (h = 0; h < 2; h++)
        for (i = 0; i < 2; i++) {
            snprintf(n, sizeof n, "heads.%zu.%c.weight", h, "EF"[i]);
            fake_add(f, p, n, 2, 6);
            snprintf(n, sizeof n, "heads.%zu.%c.bias", h, "EF"[i]);
            fake_add(f, p, n, 2, 0);
        }
    fake_add(f, p, "w_o.weight", 8, 8);
    fake_add(f, p, "w_o.bias", 8, 0);
    snprintf(p, sizeof p, "seq.%zu.", 2 * l);
    fake_add(f, p, "norm.weight", 8, 0);
    fake_add(f, p, "norm.bias", 8, 0);
    snprintf(p, sizeof p, "seq.%zu.", 2 * l + 1);
    fake_add(f, p, "fn.w_1.weight", 16, 8);
    fake_add(f, p, "fn.w_1.bias", 16, 0);
    fake_add(f, p, "fn.w_2.weight", 8, 16);
    fake_add(f, p, "fn.w_2.bias", 8, 0);
    fake_add(f, p, "norm.weight", 8, 0);
    fake_add(f, p, "norm.bias", 8, 0);
}

/* linformer-pytorch files: every tensor missing, extra or misshapen is
 * named; what the package builds but clinformer does not run is refused
 * with the reason; a shared E or F stored once is found. */
START_TEST(model_linformer_pytorch_bad_files)
{
    struct fake f;
    clf_model *m;
    clf_model_info info;

    fake_init(&f);
    fake_lp_layer(&f, 0);
    fake_lp_layer(&f, 1);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), 0);
    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_uint_eq(info.layout, CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER);
    ck_assert_uint_eq(info.layers, 2);
    ck_assert_uint_eq(info.heads, 2);
    ck_assert_uint_eq(info.head_dim, 4);
    ck_assert_uint_eq(info.k, 2);
    ck_assert_uint_eq(info.ffn_dim, 16);
    clf_model_destroy(m);
    /* Missing. */
    fake_drop(&f, "seq.2.fn.to_k.1.weight");
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ENOT_FOUND);
    ck_assert_ptr_null(m);
    assert_msg_has("seq.2.fn.to_k.1.weight", "(4, 8)");
    fake_add(&f, "", "seq.2.fn.to_k.1.weight", 4, 8);
    fake_drop(&f, "seq.3.norm.bias");
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ENOT_FOUND);
    assert_msg_has("seq.3.norm.bias", "(8,)");
    fake_add(&f, "", "seq.3.norm.bias", 8, 0);
    /* A head's F stored once (save_model of kv sharing) is E; under
     * parameter_sharing "none" it is missing. */
    fake_drop(&f, "seq.0.fn.heads.1.F.weight");
    fake_drop(&f, "seq.0.fn.heads.1.F.bias");
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), 0);
    clf_model_destroy(m);
    ck_assert_int_eq(fake_load(&f, "\"parameter_sharing\":\"none\"", 0, &m),
                     CLF_ENOT_FOUND);
    assert_msg_has("seq.0.fn.heads.1.F.weight", "sharing");
    fake_add(&f, "", "seq.0.fn.heads.1.F.weight", 2, 6);
    fake_add(&f, "", "seq.0.fn.heads.1.F.bias", 2, 0);
    /* Extra and misshapen. */
    fake_add(&f, "", "seq.1.fn.extra", 3, 0);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_EWEIGHT_UNUSED);
    assert_msg_has("seq.1.fn.extra", "linformer-pytorch");
    fake_drop(&f, "seq.1.fn.extra");
    fake_drop(&f, "seq.2.fn.w_o.bias");
    fake_add(&f, "", "seq.2.fn.w_o.bias", 7, 0);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ESHAPE_MISMATCH);
    assert_msg_has("seq.2.fn.w_o.bias", "(8,) expected");
    fake_drop(&f, "seq.2.fn.w_o.bias");
    fake_add(&f, "", "seq.2.fn.w_o.bias", 8, 0);
    fake_drop(&f, "seq.0.fn.heads.0.E.bias");
    fake_add(&f, "", "seq.0.fn.heads.0.E.bias", 3, 0);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ESHAPE_MISMATCH);
    assert_msg_has("seq.0.fn.heads.0.E.bias", "(2,) expected");
    fake_drop(&f, "seq.0.fn.heads.0.E.bias");
    fake_add(&f, "", "seq.0.fn.heads.0.E.bias", 2, 0);
    /* causal=True: loads with the slot mask; refused with the reason;
     * a bad hyperparameter named. */
    ck_assert_int_eq(fake_load(&f, "\"causal\":\"True\"", 0, &m), 0);
    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_int_eq(info.slot_mask, 1);
    clf_model_destroy(m);
    ck_assert_int_eq(fake_load(&f, "\"causal\":\"yes\"", 0, &m), CLF_EFORMAT);
    assert_msg_has("causal", "yes");
    ck_assert_int_eq(fake_load(&f, "\"method\":\"no_params\"", 0, &m),
                     CLF_EUNSUPPORTED);
    assert_msg_has("no_params", "state_dict");
    ck_assert_int_eq(fake_load(&f, "\"activation\":\"tanh\"", 0, &m),
                     CLF_EFORMAT);
    assert_msg_has("activation", "tanh");
    ck_assert_int_eq(fake_load(&f, "\"nhead\":\"4\"", 0, &m),
                     CLF_EINVALID_ARGUMENT);
    assert_msg_has("nhead", "2 heads");
    ck_assert_int_eq(fake_load(&f, "\"nhead\":\"two\"", 0, &m), CLF_EFORMAT);
    assert_msg_has("nhead", "not a non-negative integer");
    /* Sizes the shapes show, contradicted by the metadata. */
    ck_assert_int_eq(fake_load(&f, "\"dim_k\":\"3\"", 0, &m),
                     CLF_ESHAPE_MISMATCH);
    assert_msg_has("metadata dim_k = 3", "give k 2");
    ck_assert_int_eq(fake_load(&f, "\"depth\":\"3\"", 0, &m),
                     CLF_ESHAPE_MISMATCH);
    assert_msg_has("metadata depth = 3", "give layers 2");
    ck_assert_int_eq(fake_load(&f, "\"channels\":\"16\"", 0, &m),
                     CLF_ESHAPE_MISMATCH);
    assert_msg_has("metadata channels = 16", "give channels 8");
    ck_assert_int_eq(fake_load(&f,
                               "\"dim_k\":\"2\",\"depth\":\"2\","
                               "\"channels\":\"8\",\"dim_ff\":\"16\","
                               "\"dim_d\":\"None\"",
                               0, &m),
                     0);
    clf_model_destroy(m);
    /* relu and full attention come from the metadata. */
    ck_assert_int_eq(fake_load(&f,
                               "\"activation\":\"relu\","
                               "\"full_attention\":\"True\"",
                               0, &m),
                     0);
    clf_model_destroy(m);
    fake_done(&f);
}
END_TEST

/* The fixture `name` with `from` replaced by `to` in its header (the
 * tensors' bytes as they are) written to dst, then loaded: the status. */
static int
load_edited(const char *name, const char *from, const char *to, const char *dst)
{
    char p[1200], *head, *at, *out;
    unsigned char len8[8];
    size_t len, size, i;
    unsigned long long newlen;
    FILE *f;
    clf_model *m = NULL;
    unsigned char *body;
    int rc;

    path_of(p, sizeof p, name);
    f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(len8, 1, 8, f), 8);
    for (len = 0, i = 8; i-- > 0;)
        len = len << 8 | len8[i];
    head = tu_malloc(len + 1);
    ck_assert_uint_eq(fread(head, 1, len, f), len);
    head[len] = '\0';
    body = tu_malloc(1 << 20);
    size = fread(body, 1, 1 << 20, f);
    fclose(f);
    at = strstr(head, from);
    ck_assert_msg(at != NULL, "%s not in the header", from);
    out = tu_malloc(len + strlen(to) + 1);
    snprintf(out, len + strlen(to) + 1, "%.*s%s%s", (int)(at - head), head, to,
             at + strlen(from));
    newlen = strlen(out);
    f = fopen(dst, "wb");
    ck_assert_ptr_nonnull(f);
    tu_put_le(len8, newlen, 8);
    fwrite(len8, 1, 8, f);
    fwrite(out, 1, (size_t)newlen, f);
    fwrite(body, 1, size, f);
    fclose(f);
    rc = clf_model_load(&m, tu_context(), dst, NULL);
    clf_model_destroy(m);
    remove(dst);
    free(head);
    free(body);
    free(out);
    return rc;
}

/* linformer-pytorch's convolution compressor: a misshapen Conv1d, a
 * missing sequence length and a method the tensors contradict are named
 * errors. */
START_TEST(model_linformer_pytorch_conv_bad_files)
{
    static const char *const fx = "lp_linformer_conv.safetensors";
    const char *dst = "/tmp/clf-conv-edited.safetensors";

    ck_assert_int_eq(load_edited(fx,
                                 "\"seq.0.fn.heads.1.F.weight\":"
                                 "{\"dtype\":\"F32\",\"shape\":[8,8,3]",
                                 "\"seq.0.fn.heads.1.F.weight\":"
                                 "{\"dtype\":\"F32\",\"shape\":[8,4,6]",
                                 dst),
                     CLF_ESHAPE_MISMATCH);
    assert_msg_has("seq.0.fn.heads.1.F.weight", "(8, 8, w)");
    ck_assert_int_eq(
        load_edited(fx, "\"input_size\":\"12\"", "\"input_sizes\":\"12\"", dst),
        CLF_ENOT_FOUND);
    assert_msg_has("Conv1d", "input_size");
    ck_assert_int_eq(
        load_edited(fx, "\"input_size\":\"12\"", "\"input_size\":\"2\"", dst),
        CLF_ESHAPE_MISMATCH);
    assert_msg_has("(8, 8, 3)", "w <= max_seq_len");
    ck_assert_int_eq(load_edited(fx, "\"method\":\"convolution\"",
                                 "\"method\":\"learnable\"", dst),
                     CLF_ESHAPE_MISMATCH);
    assert_msg_has("Conv1d weight", "method");
}
END_TEST

/* ff_intermediate's widths are read from the shapes: a resample that does
 * not fit its layer, a missing one, or a last layer that does not go back
 * to the input's width are named. */
START_TEST(model_linformer_pytorch_ffint_bad_files)
{
    static const char *const fx = "lp_linformer_ffint.safetensors";
    const char *dst = "/tmp/clf-ffint-edited.safetensors";
    struct fake f;
    clf_model *m;

    /* (24, 16) written as (16, 24): it does not read the layer's 16 */
    ck_assert_int_eq(load_edited(fx,
                                 "\"seq.1.resample.weight\":"
                                 "{\"dtype\":\"F32\",\"shape\":[24,16]",
                                 "\"seq.1.resample.weight\":"
                                 "{\"dtype\":\"F32\",\"shape\":[16,24]",
                                 dst),
                     CLF_ESHAPE_MISMATCH);
    assert_msg_has("seq.1.resample.weight", "(?, 16) expected");
    /* the last layer's resample missing: its w_2 does not fit */
    ck_assert_int_eq(load_edited(fx, "\"seq.5.resample.weight\"",
                                 "\"seq.5.resample.wEight\"", dst),
                     CLF_ESHAPE_MISMATCH);
    assert_msg_has("seq.5.fn.w_2.weight", "(24, 32) expected");
    /* the last layer's output width not the input's */
    ck_assert_int_eq(
        load_edited(fx, "\"channels\":\"16\"", "\"channels\":\"24\"", dst),
        CLF_ESHAPE_MISMATCH);
    assert_msg_has("channels", NULL);
    /* A resample belongs to a feed-forward residual, never to an
     * attention's. */
    fake_init(&f);
    fake_lp_layer(&f, 0);
    fake_lp_layer(&f, 1);
    fake_add(&f, "", "seq.0.resample.weight", 8, 8);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_EWEIGHT_UNUSED);
    assert_msg_has("seq.0.resample.weight", NULL);
    fake_drop(&f, "seq.0.resample.weight");
    /* The last feed-forward widening to 12 (ff_intermediate that never
     * comes back): the model's output would not have its input's width. */
    fake_lp_last_width(&f, 12);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ESHAPE_MISMATCH);
    assert_msg_has("output is 12 wide", "input 8");
    fake_lp_last_width(&f, 8);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), 0);
    clf_model_destroy(m);
    fake_done(&f);
}
END_TEST

/* The single-head class: query/key/value with biases, E and F. */
START_TEST(model_single_head_bad_files)
{
    static const char *const w[] = {"query", "key", "value"};
    struct fake f;
    clf_model *m;
    clf_model_info info;
    char n[32];
    int i;

    fake_init(&f);
    for (i = 0; i < 3; i++) {
        snprintf(n, sizeof n, "%s.weight", w[i]);
        fake_add(&f, "", n, 8, 8);
        snprintf(n, sizeof n, "%s.bias", w[i]);
        fake_add(&f, "", n, 8, 0);
    }
    fake_add(&f, "", "E", 3, 6);
    fake_add(&f, "", "F", 3, 6);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), 0);
    ck_assert_int_eq(clf_model_info_get(m, &info), 0);
    ck_assert_uint_eq(info.layout, CLF_LAYOUT_SINGLE_HEAD_ATTENTION);
    ck_assert_uint_eq(info.heads, 1);
    ck_assert_uint_eq(info.head_dim, 8);
    ck_assert_uint_eq(info.k, 3);
    clf_model_destroy(m);
    fake_drop(&f, "F");
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ENOT_FOUND);
    assert_msg_has("tensor F", "(3, 6)");
    fake_add(&f, "", "F", 3, 5);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ESHAPE_MISMATCH);
    assert_msg_has("tensor F", "(3, 6) expected");
    fake_drop(&f, "F");
    fake_add(&f, "", "F", 3, 6);
    fake_drop(&f, "key.bias");
    fake_add(&f, "", "key.bias", 7, 0);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_ESHAPE_MISMATCH);
    assert_msg_has("key.bias", "(8,) expected");
    fake_drop(&f, "key.bias");
    fake_add(&f, "", "key.bias", 8, 0);
    fake_add(&f, "", "out.weight", 8, 8);
    ck_assert_int_eq(fake_load(&f, NULL, 0, &m), CLF_EWEIGHT_UNUSED);
    assert_msg_has("out.weight", "single-head-attention");
    fake_done(&f);
}
END_TEST

START_TEST(model_layout_names_round_trip)
{
    clf_layout l;
    int i;

    for (i = 0; i <= CLF_LAYOUT_SINGLE_HEAD_ATTENTION; i++) {
        ck_assert_int_eq(clf_layout_parse(clf_layout_name((clf_layout)i), &l),
                         0);
        ck_assert_int_eq((int)l, i);
    }
    ck_assert_int_eq(clf_layout_parse("pytorch", &l), CLF_EBAD_ENUM);
    ck_assert_str_eq(clf_layout_name((clf_layout)42), "?");
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, model_lucidrains_attention_matches_torch);
    tcase_add_test(tc, model_lucidrains_share_kv_one_kv_head_matches_torch);
    tcase_add_test(tc, model_lucidrains_encoder_matches_torch);
    tcase_add_test(tc, model_lucidrains_reversible_matches_torch);
    tcase_add_test(tc, model_lucidrains_lm_matches_torch);
    tcase_add_test(tc, model_fairseq_attention_matches_reference);
    tcase_add_test(tc, model_fairseq_encoder_layer_matches_reference);
    tcase_add_test(tc, model_padded_batch_equals_each_alone);
    tcase_add_test(tc, model_rejects_bad_files);
    tcase_add_test(tc, model_metadata_checked_against_shapes);
    tcase_add_test(tc, model_load_refuses_device_and_fifo);
    tcase_add_test(tc, model_strict_rejects_missing_tensor);
    tcase_add_test(tc, model_strict_rejects_unexpected_tensor);
    tcase_add_test(tc, model_strict_rejects_misshapen_tensor);
    tcase_add_test(tc, model_strict_rejects_layer_number_gap);
    tcase_add_test(tc, model_share_kv_comes_from_the_file);
    tcase_add_test(tc, model_layout_names_round_trip);
    tcase_add_test(tc, model_linformer_pytorch_bad_files);
    tcase_add_test(tc, model_linformer_pytorch_matches_torch);
    tcase_add_test(tc, model_linformer_pytorch_causal_runs_its_slot_mask);
    tcase_add_test(tc, model_single_head_bad_files);
    tcase_add_test(tc, model_linformer_pytorch_conv_bad_files);
    tcase_add_test(tc, model_linformer_pytorch_ffint_bad_files);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    const char *top = getenv("top_srcdir");

    snprintf(data_dir, sizeof data_dir, "%s/tests/data", top ? top : ".");
    return tu_run(suite(), 1);
}
