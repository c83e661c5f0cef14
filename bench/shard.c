/* clinformer bench --shard: one forward over several devices against each
 * device alone (bench/run.h).  Host-clock medians of whole forwards,
 * inputs and outputs in host memory, as an application sees them. */
#include "run.h"

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

static void
print_names(const clf_group *g)
{
    clf_device_info info;
    size_t i;

    for (i = 0; i < clf_group_size(g); i++) {
        clf_context_device_info(clf_group_context(g, i), &info);
        printf("  device %zu: %s (%s / %s)\n", i, info.stable_name,
               info.platform, info.name);
    }
}

/* One row: each device alone, then the even and the weighted split. */
static int
shard_row(const struct clf_bench_options *o, clf_group *g, int full, size_t n)
{
    const size_t size = clf_group_size(g), B = o->b[0], D = o->d[0];
    const size_t k = o->k[0] < n ? o->k[0] : n;
    clf_attention_desc d;
    clf_group_attention *ga = NULL;
    double alone[16], w[16], even, weighted;
    float *x = malloc(B * n * D * sizeof *x),
          *y = malloc(B * n * D * sizeof *y);
    unsigned long long st = o->seed;
    size_t i;
    int rc = 1;

    memset(&d, 0, sizeof d);
    d.d_model = D;
    d.heads = o->h[0];
    d.max_seq_len = n;
    d.k = k;
    if (x == NULL || y == NULL || size > 16 ||
        clf_group_attention_create(&ga, g, &d, o->seed) != 0 ||
        clf_group_attention_set_mode(ga, full ? CLF_MODE_FULL
                                              : CLF_MODE_LINFORMER) != 0) {
        fprintf(stderr, "--shard: %s\n", clf_last_error());
        goto done;
    }
    for (i = 0; i < B * n * D; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(st >> 11) * 0x1.0p-52 - 1.0);
    }
    printf("%-9s n %6zu:", full ? "full" : "linformer", n);
    for (i = 0; i < size; i++) {
        if ((alone[i] = time_forward(ga, i, size, x, y, B, n, o->repeat)) < 0)
            goto done;
        w[i] = 1.0 / alone[i];
        printf(" alone[%zu] %8.2f ms", i, alone[i]);
    }
    clf_group_set_weights(g, NULL);
    if ((even = time_forward(ga, size, size, x, y, B, n, o->repeat)) < 0)
        goto done;
    clf_group_set_weights(g, w);
    if ((weighted = time_forward(ga, size, size, x, y, B, n, o->repeat)) < 0)
        goto done;
    printf("  even %8.2f ms  weighted %8.2f ms  received/layer %.0f KiB\n",
           even, weighted, exchanged(full, B, n, k, D, size) / 1024.0);
    rc = 0;
done:
    clf_group_attention_destroy(ga);
    free(x);
    free(y);
    return rc;
}

int
clf_bench_shard(const struct clf_bench_options *o)
{
    clf_group *g = NULL;
    size_t j;
    int full, failed = 0;

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
    clf_group_set_strategy(g, CLF_SHARD_SEQ);
    printf("one forward over %zu devices, split by positions; host-clock "
           "medians of %zu warm forwards; B %zu, D %zu, h %zu, k %zu\n",
           clf_group_size(g), o->repeat, o->b[0], o->d[0], o->h[0], o->k[0]);
    print_names(g);
    for (j = 0; j < o->nn; j++)
        for (full = 0; full <= 1; full++)
            failed |= shard_row(o, g, full, o->n[j]);
    clf_group_destroy(g);
    return failed ? 1 : 0;
}
