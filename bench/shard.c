/* clinformer bench --shard: one forward over several devices against each
 * device alone (bench/run.h).  Host-clock medians of whole forwards,
 * inputs and outputs in host memory, as an application sees them; the
 * records (bench/shard.h) are what the files are written from. */
#include "shard.h"
#include "run.h"

#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median ms of r warm forwards (after one untimed), alone on device i
 * (i < size) or over the group (i = size); -1 on failure. */
static double
time_forward(clf_group_attention *ga, size_t i, size_t size, const float *x,
             float *y, size_t B, size_t n, size_t r)
{
    double t[CLF_BENCH_MAX_REPEAT], t0;
    size_t k;
    int rc;

    if (r > CLF_BENCH_MAX_REPEAT) /* the option parser refuses more */
        r = CLF_BENCH_MAX_REPEAT;
    if (r == 0)
        r = 1;
    for (k = 0; k <= r; k++) {
        t0 = clf_bench_now();
        rc = i < size ? clf_attention_forward_ex(
                            clf_group_attention_part(ga, i), x, B, n, y, NULL)
                      : clf_group_attention_forward_ex(ga, x, B, n, y, NULL);
        if (rc != 0) {
            fprintf(stderr, "forward failed: %s\n", clf_last_error());
            return -1.0;
        }
        if (k > 0)
            t[k - 1] = (clf_bench_now() - t0) * 1e3;
    }
    qsort(t, r, sizeof t[0], cmp_double);
    return t[r / 2];
}

/* Bytes the shards receive per layer, all together: Linformer's allreduce
 * gives each shard the summed k x d_kv compressions of K and V (2 B k d_kv
 * floats); full mode's allgather gives each shard every row of K and V
 * (2 B n d_kv floats).  Each shard sends its own part: Linformer the same
 * 2 B k d_kv floats, full its 2 B n_r d_kv. */
static double
exchanged(int full, size_t B, size_t n, size_t k, size_t D, size_t shards)
{
    return 2.0 * (double)(B * (full ? n : k) * D) * 4.0 * (double)shards;
}

/* Records the group's devices in hdr and lists them on t; -1 when out of
 * memory. */
static int
add_devices(FILE *t, const clf_group *g, clf_bench_report *hdr)
{
    clf_device_info info;
    clf_bench_device *d;
    size_t i;

    for (i = 0; i < clf_group_size(g); i++) {
        clf_context_device_info(clf_group_context(g, i), &info);
        fprintf(t, "  device %zu: %s (%s / %s)\n", i, info.stable_name,
                info.platform, info.name);
        if ((d = clf_bench_report_add_device(hdr)) == NULL)
            return -1;
        clf_bench_device_describe(d, &info);
    }
    return 0;
}

/* A zeroed row of the mode at n, nothing measured yet. */
static void
row_init(clf_bench_shard_row *x, const struct clf_bench_options *o, int full,
         size_t n)
{
    size_t i;

    memset(x, 0, sizeof *x);
    x->full = full;
    x->n = n;
    x->k_requested = o->k[0];
    x->k = full ? 0 : o->k[0] < n ? o->k[0] : n;
    x->d_model = o->d[0];
    x->heads = o->h[0];
    x->batch = o->b[0];
    for (i = 0; i < CLF_BENCH_SHARD_MAX_DEVICES; i++)
        x->alone_s[i] = NAN;
    x->even.wall_s = x->weighted.wall_s = NAN;
    x->received_bytes = x->sent_bytes = NAN;
}

/* Times the forward over the group with the weights w (NULL: even) into
 * p: its median, how many devices it used and each one's share.  -1 on
 * failure. */
static int
time_split(clf_group_attention *ga, clf_group *g, const double *w,
           const float *x, float *y, const clf_bench_shard_row *row,
           size_t repeat, clf_bench_shard_split *p)
{
    const size_t size = clf_group_size(g);
    clf_shard_by by = CLF_SHARD_AUTO;
    double sum = 0.0, ms;
    size_t i;

    clf_group_set_weights(g, w);
    if ((ms = time_forward(ga, size, size, x, y, row->batch, row->n, repeat)) <
        0)
        return -1;
    p->wall_s = ms / 1e3;
    clf_group_last_split(g, &by, &p->devices);
    for (i = 0; i < size; i++)
        sum += w != NULL ? w[i] : 1.0;
    for (i = 0; i < size; i++)
        p->shares[i] = (w != NULL ? w[i] : 1.0) / sum;
    return 0;
}

/* The row's layer on the group, in its mode; -1 with the reason in the
 * row's note (also on stderr). */
static int
make_layer(const struct clf_bench_options *o, clf_group *g,
           clf_bench_shard_row *row, clf_group_attention **ga)
{
    clf_attention_desc d;

    memset(&d, 0, sizeof d);
    d.d_model = row->d_model;
    d.heads = row->heads;
    d.max_seq_len = row->n;
    d.k = o->k[0] < row->n ? o->k[0] : row->n;
    if (clf_group_size(g) > CLF_BENCH_SHARD_MAX_DEVICES) {
        snprintf(row->note, sizeof row->note, "more than %d devices",
                 CLF_BENCH_SHARD_MAX_DEVICES);
    } else if (clf_group_attention_create(ga, g, &d, o->seed) != 0 ||
               clf_group_attention_set_mode(
                   *ga, row->full ? CLF_MODE_FULL : CLF_MODE_LINFORMER) != 0) {
        snprintf(row->note, sizeof row->note, "%s", clf_last_error());
    } else {
        return 0;
    }
    fprintf(stderr, "--shard: %s\n", row->note);
    return -1;
}

/* count inputs uniform in [-1, 1) from the seed. */
static void
fill_input(float *x, size_t count, unsigned long long st)
{
    size_t i;

    for (i = 0; i < count; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(st >> 11) * 0x1.0p-52 - 1.0);
    }
}

/* One row: each device alone, then the even and the weighted split. */
static int
shard_row(const struct clf_bench_options *o, FILE *t, clf_group *g,
          clf_bench_shard_row *row)
{
    const size_t size = clf_group_size(g), B = row->batch, D = row->d_model;
    const size_t n = row->n, k = o->k[0] < n ? o->k[0] : n;
    clf_group_attention *ga = NULL;
    double w[CLF_BENCH_SHARD_MAX_DEVICES];
    float *x = malloc(B * n * D * sizeof *x),
          *y = malloc(B * n * D * sizeof *y);
    size_t i;
    int rc = 1;

    if (x == NULL || y == NULL) {
        snprintf(row->note, sizeof row->note, "out of host memory");
        goto done;
    }
    if (make_layer(o, g, row, &ga) != 0)
        goto done;
    fill_input(x, B * n * D, o->seed);
    fprintf(t, "%-9s n %6zu:", row->full ? "full" : "linformer", n);
    for (i = 0; i < size; i++) {
        double ms = time_forward(ga, i, size, x, y, B, n, o->repeat);
        if (ms < 0)
            goto failed;
        row->alone_s[i] = ms / 1e3;
        w[i] = 1.0 / ms;
        fprintf(t, " alone[%zu] %8.2f ms", i, ms);
    }
    if (time_split(ga, g, NULL, x, y, row, o->repeat, &row->even) != 0 ||
        time_split(ga, g, w, x, y, row, o->repeat, &row->weighted) != 0)
        goto failed;
    row->received_bytes = exchanged(row->full, B, n, k, D, size);
    /* Each shard sends its own part: Linformer its compressions, as many
     * bytes as it receives; full attention its n_r rows of K and V. */
    row->sent_bytes =
        row->full ? row->received_bytes / (double)size : row->received_bytes;
    fprintf(t, "  even %8.2f ms  weighted %8.2f ms  received/layer %.0f KiB\n",
            row->even.wall_s * 1e3, row->weighted.wall_s * 1e3,
            row->received_bytes / 1024.0);
    row->ok = 1;
    rc = 0;
    goto done;
failed:
    snprintf(row->note, sizeof row->note, "forward failed: %s",
             clf_last_error());
    fputc('\n', t);
done:
    clf_group_attention_destroy(ga);
    free(x);
    free(y);
    return rc;
}

int
clf_bench_shard(const struct clf_bench_options *o, FILE *t,
                clf_bench_report *hdr, clf_bench_shard_report *s)
{
    clf_group *g = NULL;
    size_t j;
    int full, failed = 0;
    double t0 = clf_bench_now();

    s->hdr = hdr;
    if (o->device == NULL ||
        (strcmp(o->device, "all") != 0 && strchr(o->device, ',') == NULL)) {
        fprintf(stderr, "%s: --shard needs --device all or a comma list\n",
                o->prog);
        return 2;
    }
    if (clf_group_create(&g, o->device, 0) != 0) {
        fprintf(stderr, "%s: %s\n", o->prog, clf_last_error());
        return 1;
    }
    s->rows = calloc(2 * o->nn, sizeof *s->rows);
    if (s->rows == NULL) {
        fprintf(stderr, "%s: out of host memory\n", o->prog);
        clf_group_destroy(g);
        return 1;
    }
    clf_group_set_strategy(g, CLF_SHARD_SEQ);
    fprintf(t,
            "one forward over %zu devices, split by positions; host-clock "
            "medians of %zu warm forwards; B %zu, D %zu, h %zu, k %zu\n",
            clf_group_size(g), o->repeat, o->b[0], o->d[0], o->h[0], o->k[0]);
    if (add_devices(t, g, hdr) != 0) {
        fprintf(stderr, "%s: out of host memory\n", o->prog);
        clf_group_destroy(g);
        return 1;
    }
    for (j = 0; j < o->nn; j++)
        for (full = 0; full <= 1; full++) {
            clf_bench_shard_row *row = &s->rows[s->nrows++];
            row_init(row, o, full, o->n[j]);
            failed |= shard_row(o, t, g, row);
        }
    clf_group_destroy(g);
    hdr->wall_s = clf_bench_now() - t0;
    return failed ? 1 : 0;
}
