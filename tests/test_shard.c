/* The sharded forward (src/parallel/parallel.h) against the double-precision
 * reference (tests/reference.c): one attention layer split by positions over 2
 * and 3 contexts of the suite's device (n = 7, so no split is even), in
 * Linformer, causal Linformer and full mode, with padding, every E/F
 * sharing and fairseq's bias order.  Tolerance: max |y - y_ref| <= 1e-5 *
 * max |y_ref|, as in test_attention.  Also the thread collectives: the
 * same bits on every shard, and a failing shard stops every other. */
#include "internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-5
#define NSEQ 7

static clf_group *
group_of(int shards)
{
    clf_group *g = NULL;
    char list[256];
    clf_device_info info;
    int i;

    /* copies on the suite's device, each its own context */
    ck_assert_int_eq(clf_context_device_info(tu_context(), &info), 0);
    list[0] = '\0';
    for (i = 0; i < shards; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 i ? "," : "", info.stable_name);
    ck_assert_msg(clf_group_create(&g, list, 0) == 0, "%s", clf_last_error());
    ck_assert_int_eq(clf_group_set_strategy(g, CLF_SHARD_SEQ), 0);
    return g;
}

/* The layer's weights on every copy of the group. */
static clf_group_attention *
copies(clf_group *g, const struct layer *l)
{
    clf_group_attention *ga = NULL;
    size_t i, count;
    int w;

    ck_assert_msg(clf_group_attention_create(&ga, g, &l->desc, 1) == 0, "%s",
                  clf_last_error());
    for (i = 0; i < clf_group_size(g); i++)
        for (w = 0; w < CLF_WEIGHT_COUNT; w++)
            if (l->w[w] != NULL) {
                clf_attention *a = clf_group_attention_part(ga, i);
                ck_assert_int_eq(
                    clf_attention_weight_size(a, (clf_weight)w, &count), 0);
                ck_assert_int_eq(
                    clf_attention_set_weight(a, (clf_weight)w, l->w[w], count),
                    0);
            }
    return ga;
}

/* One case: the sharded forward over `shards` against the reference. */
static void
check_case(const clf_attention_desc *d, int full, int causal, int masked,
           int shards, const char *what)
{
    const size_t B = 2, n = NSEQ, D = d->d_model;
    const unsigned lengths[2] = {NSEQ, 4};
    unsigned char mask[2 * NSEQ];
    struct layer l;
    clf_group *g = group_of(shards);
    clf_group_attention *ga;
    clf_forward_opts o;
    clf_shard_by by;
    size_t used;
    float *x = tu_malloc(B * n * D * sizeof *x), *y;
    double *ref = tu_malloc(B * n * D * sizeof *ref);
    char name[160];

    y = tu_malloc(B * n * D * sizeof *y);
    layer_make(&l, d, 5);
    ga = copies(g, &l);
    tu_fill(x, B * n * D, 9, -1.0f, 1.0f);
    memset(&o, 0, sizeof o);
    o.causal = causal;
    o.lengths = masked ? lengths : NULL;
    tu_lengths_mask(mask, lengths, B, n);
    ck_assert_int_eq(clf_group_attention_set_mode(
                         ga, full ? CLF_MODE_FULL : CLF_MODE_LINFORMER),
                     0);
    ck_assert_msg(clf_group_attention_forward_ex(ga, x, B, n, y, &o) == 0,
                  "%s: %s", what, clf_last_error());
    ck_assert_int_eq(clf_group_last_split(g, &by, &used), 0);
    ck_assert_int_eq(by, CLF_SHARD_SEQ);
    ck_assert_uint_eq(used, (size_t)shards);
    ref_attention_ex(&l.ref, full, x, B, n, masked ? mask : NULL, causal,
                     causal && !full ? d->causal_block : 0, ref);
    snprintf(name, sizeof name, "%s over %d shards", what, shards);
    tu_assert_close(y, ref, B * n * D, TOL, name);
    clf_group_attention_destroy(ga);
    clf_group_destroy(g);
    layer_free(&l);
    free(x);
    free(y);
    free(ref);
}

static clf_attention_desc
desc_base(void)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = 16;
    d.heads = 2;
    d.max_seq_len = 8;
    d.k = 4;
    d.bias_q = d.bias_k = d.bias_v = d.bias_out = 1;
    return d;
}

START_TEST(shard_linformer_matches_reference)
{
    clf_attention_desc d = desc_base();
    int shards;

    for (shards = 2; shards <= 3; shards++) {
        check_case(&d, 0, 0, 0, shards, "linformer");
        check_case(&d, 0, 0, 1, shards, "linformer padded");
        d.sharing = CLF_SHARE_PER_HEAD;
        d.one_kv_head = 1;
        check_case(&d, 0, 0, 1, shards, "per-head E, one kv head");
        d.one_kv_head = 0;
        d.sharing = CLF_SHARE_KEY_VALUE;
        d.compressed_bias = 1;
        check_case(&d, 0, 0, 1, shards, "key-value, fairseq bias");
        d.compressed_bias = 0;
        d.bias_proj = 1; /* the slot bias once, after the sum */
        check_case(&d, 0, 0, 1, shards, "key-value, slot bias");
        d.sharing = CLF_SHARE_PER_HEAD;
        check_case(&d, 0, 0, 1, shards, "per-head, slot bias");
        d.bias_proj = 0;
        d.sharing = CLF_SHARE_HEADWISE;
        d.share_kv = 1;
        d.bias_v = 0;
        check_case(&d, 0, 0, 1, shards, "share_kv");
        d = desc_base();
    }
}
END_TEST

/* What a split by positions cannot compute as partial sums is refused
 * with the reason, never run wrong: the windowed compressions (not sums
 * over positions) and the slot mask. */
START_TEST(shard_refuses_what_it_cannot_split)
{
    static const int comp[] = {CLF_COMPRESS_MEAN, CLF_COMPRESS_MAX,
                               CLF_COMPRESS_CONV, -1};
    const size_t B = 1, n = NSEQ, D = 16;
    float x[NSEQ * 16], y[NSEQ * 16];
    clf_group *g = group_of(2);
    clf_group_attention *ga;
    clf_attention_desc d;
    size_t i;

    tu_fill(x, B * n * D, 9, -1.0f, 1.0f);
    for (i = 0; i < sizeof comp / sizeof comp[0]; i++) {
        d = desc_base();
        if (comp[i] >= 0)
            d.compression = (clf_compression)comp[i];
        else
            d.slot_mask = 1;
        ga = NULL;
        ck_assert_msg(clf_group_attention_create(&ga, g, &d, 1) == 0, "%s",
                      clf_last_error());
        ck_assert_int_eq(clf_group_attention_forward_ex(ga, x, B, n, y, NULL),
                         CLF_EUNSUPPORTED);
        ck_assert_msg(strstr(clf_last_error(),
                             comp[i] >= 0 ? "compression" : "slot_mask") &&
                          strstr(clf_last_error(), "split by batch"),
                      "%s", clf_last_error());
        clf_group_attention_destroy(ga);
    }
    clf_group_destroy(g);
}
END_TEST

START_TEST(shard_causal_linformer_matches_reference)
{
    clf_attention_desc d = desc_base();
    int shards;

    d.causal_block = 2; /* 4 blocks, one slot each; n = 7: 4 blocks */
    for (shards = 2; shards <= 3; shards++) {
        check_case(&d, 0, 1, 0, shards, "causal");
        check_case(&d, 0, 1, 1, shards, "causal padded");
        d.sharing = CLF_SHARE_PER_HEAD;
        check_case(&d, 0, 1, 1, shards, "causal per-head E");
        d.sharing = CLF_SHARE_HEADWISE;
        d.share_kv = 1;
        d.bias_v = 0;
        check_case(&d, 0, 1, 1, shards, "causal share_kv");
        d = desc_base();
        d.causal_block = 2;
    }
}
END_TEST

START_TEST(shard_full_matches_reference)
{
    clf_attention_desc d = desc_base();
    int shards;

    for (shards = 2; shards <= 3; shards++) {
        check_case(&d, 1, 0, 1, shards, "full padded");
        check_case(&d, 1, 1, 1, shards, "full causal padded");
        d.one_kv_head = 1;
        check_case(&d, 1, 1, 0, shards, "full causal one kv head");
        d.one_kv_head = 0;
    }
}
END_TEST

START_TEST(shard_split_weighted_and_in_units)
{
    size_t b[4];
    const double w[3] = {3.0, 1.0, 1.0};

    ck_assert_int_eq(clf__shard_split(10, 3, NULL, 1, b), 0);
    ck_assert_uint_eq(b[0], 0);
    ck_assert_uint_eq(b[1], 3);
    ck_assert_uint_eq(b[2], 7);
    ck_assert_uint_eq(b[3], 10);
    ck_assert_int_eq(clf__shard_split(10, 3, w, 1, b), 0);
    ck_assert_uint_eq(b[1], 6);
    ck_assert_uint_eq(b[2], 8);
    /* causal blocks of 3: 4 units, the last one short */
    ck_assert_int_eq(clf__shard_split(10, 2, NULL, 3, b), 0);
    ck_assert_uint_eq(b[1], 6);
    ck_assert_uint_eq(b[2], 10);
    /* every shard keeps at least one unit */
    ck_assert_int_eq(clf__shard_split(4, 3, w, 1, b), 0);
    ck_assert_uint_eq(b[1], 2);
    ck_assert_uint_eq(b[2], 3);
    ck_assert_int_eq(clf__shard_split(5, 3, NULL, 3, b), CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "fewer than the 3 shards"));
}
END_TEST

/* --------------------------------------------------- the collectives */

struct coll_job {
    float data[3][5];
    int fail_rank; /* -1: none */
    int rc[3];
};

static int
coll_run(void *user, int rank, const clf__shard_comm *comm)
{
    struct coll_job *j = user;
    float gathered[15];
    size_t counts[3] = {2, 0, 3};
    int i, rc;

    if (rank == j->fail_rank) {
        rc = clf__fail(CLF_EINVALID_ARGUMENT, "shard %d gives up", rank);
        comm->abort_all(comm->self, rc);
        return j->rc[rank] = rc;
    }
    for (i = 0; i < 3; i++) { /* several rounds: later ones fail too */
        rc = comm->allreduce_sum(comm->self, j->data[rank], 5);
        if (rc != 0)
            return j->rc[rank] = rc;
    }
    rc = comm->allgatherv(comm->self, j->data[rank], gathered, counts);
    if (rc == 0 && rank == 2)
        rc = memcmp(gathered, j->data[0], 2 * sizeof(float)) ||
             memcmp(gathered + 2, j->data[2], 3 * sizeof(float));
    return j->rc[rank] = rc;
}

START_TEST(shard_threads_sum_same_bits_everywhere)
{
    struct coll_job j;
    double want;
    int r, i;

    memset(&j, 0, sizeof j);
    j.fail_rank = -1;
    for (r = 0; r < 3; r++)
        tu_fill(j.data[r], 5, 40 + (unsigned)r, -1.0f, 1.0f);
    j.data[0][0] = 1e8f; /* a sum whose order matters in float */
    j.data[1][0] = 1.0f;
    j.data[2][0] = -1e8f;
    ck_assert_int_eq(clf__group_run(3, coll_run, &j), 0);
    for (r = 1; r < 3; r++)
        ck_assert_int_eq(memcmp(j.data[0], j.data[r], sizeof j.data[0]), 0);
    want = 9.0; /* 1e8 + 1 - 1e8 in double, then 3 of it, then 9 */
    ck_assert_float_eq(j.data[0][0], (float)want);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(j.rc[i], 0);
}
END_TEST

START_TEST(shard_threads_abort_stops_every_shard)
{
    struct coll_job j;
    int r, rc;

    for (r = 0; r < 3; r++) {
        memset(&j, 0, sizeof j);
        j.fail_rank = r;
        rc = clf__group_run(3, coll_run, &j);
        ck_assert_int_eq(rc, CLF_EINVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(clf_last_error(), "gives up"));
        ck_assert_int_eq(j.rc[(r + 1) % 3], CLF_ESHARD_ABORTED);
        ck_assert_int_eq(j.rc[(r + 2) % 3], CLF_ESHARD_ABORTED);
    }
}
END_TEST

/* A real sharded forward in which shard 1 fails (a NULL layer): the
 * others, waiting in the exchange, return CLF_ESHARD_ABORTED. */
struct fw_job {
    clf_attention *a[2];
    size_t bounds[3];
    float x[NSEQ * 16], y[NSEQ * 16];
    int rc[2];
};

static int
fw_run(void *user, int rank, const clf__shard_comm *comm)
{
    struct fw_job *j = user;

    return j->rc[rank] = clf__shard_attention_forward(
               j->a[rank], comm, 1, NSEQ, j->bounds, j->x, j->y, NULL);
}

START_TEST(shard_failing_shard_aborts_the_forward)
{
    clf_attention_desc d = desc_base();
    struct fw_job j;
    int rc;

    memset(&j, 0, sizeof j);
    ck_assert_int_eq(clf_attention_create(&j.a[0], tu_context(), &d), 0);
    ck_assert_int_eq(clf_attention_randomize(j.a[0], 3), 0);
    ck_assert_int_eq(clf__shard_split(NSEQ, 2, NULL, 1, j.bounds), 0);
    tu_fill(j.x, sizeof j.x / sizeof j.x[0], 4, -1.0f, 1.0f);
    rc = clf__group_run(2, fw_run, &j);
    ck_assert_int_eq(rc, CLF_ENULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "shard 1: att is NULL"));
    ck_assert_int_eq(j.rc[0], CLF_ESHARD_ABORTED);
    clf_attention_destroy(j.a[0]);
}
END_TEST

/* A model's forward over the group weights the split by each device's
 * throughput, measured once and kept in its kernel-choice store, and
 * gives the one-device output. */
START_TEST(shard_model_split_by_stored_throughput)
{
    const char *top = getenv("top_srcdir");
    char path[1200];
    clf_group *g = group_of(2);
    clf_group_model *gm = NULL;
    clf_model *one = NULL;
    clf_kernel_choice kc;
    clf_array x;
    float *y1, *y2;
    double *ref;
    size_t i, count, rates;

    snprintf(path, sizeof path, "%s/tests/data/lucidrains_encoder_x.npy",
             top ? top : ".");
    ck_assert_msg(clf_npy_load(path, &x) == 0, "%s", clf_last_error());
    snprintf(path, sizeof path, "%s/tests/data/lucidrains_encoder.safetensors",
             top ? top : ".");
    ck_assert_msg(clf_group_model_load(&gm, g, path, NULL) == 0, "%s",
                  clf_last_error());
    ck_assert_int_eq(clf_model_load(&one, tu_context(), path, NULL), 0);
    y1 = tu_malloc(x.count * sizeof *y1);
    y2 = tu_malloc(x.count * sizeof *y2);
    ref = tu_malloc(x.count * sizeof *ref);
    ck_assert_int_eq(
        clf_model_forward(one, x.data, x.shape[0], x.shape[1], y1, NULL), 0);
    ck_assert_msg(clf_group_model_forward(gm, x.data, x.shape[0], x.shape[1],
                                          y2, NULL) == 0,
                  "%s", clf_last_error());
    for (i = 0; i < x.count; i++)
        ref[i] = y1[i];
    tu_assert_close(y2, ref, x.count, TOL, "encoder over 2 shards");
    for (i = 0; i < 2; i++) {
        clf_context *ctx = clf_group_context(g, i);
        size_t c;
        ck_assert_int_eq(clf_context_kernel_choice_count(ctx, &count), 0);
        for (c = 0, rates = 0; c < count; c++) {
            ck_assert_int_eq(clf_context_kernel_choice(ctx, c, &kc), 0);
            if (strcmp(kc.kind, "throughput") == 0 &&
                strncmp(kc.bucket, "shard.enc.d16.l2.", 17) == 0) {
                ck_assert_str_eq(kc.name, "measured");
                ck_assert(kc.ms[0] >= 1.0);
                rates++;
            }
        }
        ck_assert_uint_eq(rates, 1);
    }
    free(y1);
    free(y2);
    free(ref);
    clf_array_free(&x);
    clf_model_destroy(one);
    clf_group_model_destroy(gm);
    clf_group_destroy(g);
}
END_TEST

/* batch x seq_len whose host slices wrap size_t: refused with
 * CLF_ESIZE_OVERFLOW before a slice is sized or read, by a layer's and a
 * model's forward (weights given, so no throughput run comes first). */
START_TEST(shard_huge_shapes_refused_not_wrapped)
{
    const char *top = getenv("top_srcdir");
    const double w[2] = {1.0, 1.0};
    const size_t B = (size_t)1 << 33, n = (size_t)1 << 32;
    clf_attention_desc d = desc_base();
    clf_group *g = group_of(2);
    clf_group_attention *ga = NULL;
    clf_group_model *gm = NULL;
    float x[64], y[64];
    char path[1200];

    memset(x, 0, sizeof x);
    ck_assert_int_eq(clf_group_attention_create(&ga, g, &d, 1), 0);
    ck_assert_int_eq(clf_group_attention_forward_ex(ga, x, B, n, y, NULL),
                     CLF_ESIZE_OVERFLOW);
    ck_assert_msg(strstr(clf_last_error(), "seq_len") != NULL, "%s",
                  clf_last_error());
    snprintf(path, sizeof path, "%s/tests/data/lucidrains_encoder.safetensors",
             top ? top : ".");
    ck_assert_msg(clf_group_model_load(&gm, g, path, NULL) == 0, "%s",
                  clf_last_error());
    ck_assert_int_eq(clf_group_set_weights(g, w), 0);
    ck_assert_int_eq(clf_group_model_forward(gm, x, B, n, y, NULL),
                     CLF_ESIZE_OVERFLOW);
    ck_assert_msg(strstr(clf_last_error(), "batch") != NULL, "%s",
                  clf_last_error());
    clf_group_model_destroy(gm);
    clf_group_attention_destroy(ga);
    clf_group_destroy(g);
}
END_TEST

/* NULL arguments of the group's getters: refused, the argument named. */
START_TEST(shard_last_split_names_null_argument)
{
    clf_group *g = group_of(1);
    clf_shard_by by;
    size_t used;

    ck_assert_int_eq(clf_group_last_split(NULL, &by, &used),
                     CLF_ENULL_ARGUMENT);
    ck_assert_str_eq(clf_last_error(), "g is NULL");
    ck_assert_int_eq(clf_group_last_split(g, NULL, &used), CLF_ENULL_ARGUMENT);
    ck_assert_str_eq(clf_last_error(), "by is NULL");
    ck_assert_int_eq(clf_group_last_split(g, &by, NULL), CLF_ENULL_ARGUMENT);
    ck_assert_str_eq(clf_last_error(), "devices is NULL");
    clf_group_destroy(g);
}
END_TEST

/* A shard's layer forward over batch x seq_len that wraps size_t (its
 * masks and rows): refused before the lengths are read or a buffer is
 * sized.  And a split of SIZE_MAX positions, whose unit count must not
 * wrap to 0. */
static int
huge_run(void *user, int rank, const clf__shard_comm *comm)
{
    const size_t bounds[2] = {0, (size_t)1 << 32};
    const unsigned lengths[2] = {1, 1};
    clf_forward_opts o;
    float x[16], y[16];

    memset(&o, 0, sizeof o);
    memset(x, 0, sizeof x);
    o.lengths = lengths;
    (void)rank;
    return clf__shard_attention_forward(user, comm, (size_t)1 << 33,
                                        (size_t)1 << 32, bounds, x, y, &o);
}

START_TEST(shard_entry_points_refuse_wrapping_sizes)
{
    clf_attention_desc d = desc_base();
    clf_attention *a = NULL;
    size_t b[3];

    ck_assert_int_eq(clf_attention_create(&a, tu_context(), &d), 0);
    ck_assert_int_eq(clf__group_run(1, huge_run, a), CLF_ESIZE_OVERFLOW);
    ck_assert_msg(strstr(clf_last_error(), "overflows") != NULL, "%s",
                  clf_last_error());
    clf_attention_destroy(a);
    ck_assert_msg(clf__shard_split(SIZE_MAX, 2, NULL, 2, b) == 0, "%s",
                  clf_last_error());
    ck_assert_uint_eq(b[0], 0);
    ck_assert(b[1] > 0 && b[1] < SIZE_MAX && b[1] % 2 == 0);
    ck_assert_uint_eq(b[2], SIZE_MAX);
}
END_TEST

static Suite *
suite(void)
{
    Suite *s = suite_create("shard");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, shard_split_weighted_and_in_units);
    tcase_add_test(tc, shard_threads_sum_same_bits_everywhere);
    tcase_add_test(tc, shard_threads_abort_stops_every_shard);
    tcase_add_test(tc, shard_failing_shard_aborts_the_forward);
    tcase_add_test(tc, shard_linformer_matches_reference);
    tcase_add_test(tc, shard_causal_linformer_matches_reference);
    tcase_add_test(tc, shard_refuses_what_it_cannot_split);
    tcase_add_test(tc, shard_full_matches_reference);
    tcase_add_test(tc, shard_model_split_by_stored_throughput);
    tcase_add_test(tc, shard_huge_shapes_refused_not_wrapped);
    tcase_add_test(tc, shard_last_split_names_null_argument);
    tcase_add_test(tc, shard_entry_points_refuse_wrapping_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return tu_run(suite(), 1);
}
