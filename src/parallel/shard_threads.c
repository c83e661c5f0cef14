/* The collectives of a sharded forward between the threads of one process
 * (src/parallel/parallel.h): one thread per shard, host buffers, a barrier
 * between the phases of each collective.  Sums run in double, over the shards
 * in rank order, so every shard gets the same bits.  abort_all wakes every
 * waiting shard; from then on every collective returns CLF_ESHARD_ABORTED. */
#include "parallel/parallel.h"

#include <stdlib.h>
#include <string.h>

struct shard_rank {
    struct clf__shard_threads *t;
    int rank;
};

struct clf__shard_threads {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int size, arrived;
    unsigned long generation;
    int aborted, abort_rc, abort_rank;
    const void **slot; /* per rank: the buffer it posted */
    const size_t *counts;
    struct shard_rank *ranks;
};

int
clf__shard_threads_create(struct clf__shard_threads **out, int size)
{
    struct clf__shard_threads *t;
    int r;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (size < 1)
        return clf__fail(CLF_EBAD_SIZE,
                         "a shard group needs at least one "
                         "shard (size %d)",
                         size);
    t = calloc(1, sizeof *t);
    if (t != NULL) {
        t->slot = calloc((size_t)size, sizeof *t->slot);
        t->ranks = calloc((size_t)size, sizeof *t->ranks);
    }
    if (t == NULL || t->slot == NULL || t->ranks == NULL) {
        if (t != NULL) {
            free(t->slot);
            free(t->ranks);
        }
        free(t);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    t->size = size;
    for (r = 0; r < size; r++) {
        t->ranks[r].t = t;
        t->ranks[r].rank = r;
    }
    *out = t;
    return 0;
}

void
clf__shard_threads_destroy(struct clf__shard_threads *t)
{
    if (t == NULL)
        return;
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cond);
    free(t->slot);
    free(t->ranks);
    free(t);
}

static int
aborted_rc(const struct clf__shard_threads *t)
{
    return clf__fail(CLF_ESHARD_ABORTED,
                     "shard %d of %d failed (%s), so the sharded forward "
                     "stopped",
                     t->abort_rank, t->size, clf_status_name(t->abort_rc));
}

/* Waits until every shard has arrived; an error when a shard aborted. */
static int
barrier(struct clf__shard_threads *t)
{
    unsigned long gen;
    int rc = 0;

    pthread_mutex_lock(&t->lock);
    gen = t->generation;
    if (!t->aborted && ++t->arrived == t->size) {
        t->arrived = 0;
        t->generation++;
        pthread_cond_broadcast(&t->cond);
    }
    while (!t->aborted && t->generation == gen)
        pthread_cond_wait(&t->cond, &t->lock);
    if (t->aborted)
        rc = aborted_rc(t);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

static int
threads_allreduce(void *self, float *buf, size_t count)
{
    struct shard_rank *me = self;
    struct clf__shard_threads *t = me->t;
    float *sum = NULL;
    size_t i;
    int r, rc;

    if (count > 0 && (sum = malloc(count * sizeof *sum)) == NULL) {
        me->t->slot[me->rank] = NULL;
        clf__shard_threads_abort(t, me->rank, CLF_ENO_MEMORY);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    t->slot[me->rank] = buf;
    rc = barrier(t);
    for (i = 0; rc == 0 && i < count; i++) {
        double acc = 0.0;
        for (r = 0; r < t->size; r++)
            acc += (double)((const float *)t->slot[r])[i];
        sum[i] = (float)acc;
    }
    if (rc == 0)
        rc = barrier(t); /* everyone has read every buffer */
    if (rc == 0 && count > 0)
        memcpy(buf, sum, count * sizeof *sum);
    free(sum);
    return rc;
}

static int
threads_allgatherv(void *self, const float *send, float *recv,
                   const size_t *counts)
{
    struct shard_rank *me = self;
    struct clf__shard_threads *t = me->t;
    size_t off = 0;
    int r, rc;

    t->slot[me->rank] = send;
    rc = barrier(t);
    for (r = 0; rc == 0 && r < t->size; r++) {
        if (counts[r] > 0)
            memcpy(recv + off, t->slot[r], counts[r] * sizeof *recv);
        off += counts[r];
    }
    return rc == 0 ? barrier(t) : rc;
}

static int
threads_bcast(void *self, void *buf, size_t bytes, int root)
{
    struct shard_rank *me = self;
    struct clf__shard_threads *t = me->t;
    int rc;

    if (root < 0 || root >= t->size)
        return clf__fail(CLF_EINVALID_ARGUMENT, "bcast root %d is not a shard",
                         root);
    if (me->rank == root)
        t->slot[root] = buf;
    rc = barrier(t);
    if (rc == 0 && me->rank != root && bytes > 0)
        memcpy(buf, t->slot[root], bytes);
    return rc == 0 ? barrier(t) : rc;
}

void
clf__shard_threads_abort(struct clf__shard_threads *t, int rank, int rc)
{
    pthread_mutex_lock(&t->lock);
    if (!t->aborted) {
        t->aborted = 1;
        t->abort_rc = rc;
        t->abort_rank = rank;
    }
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

static void
threads_abort(void *self, int rc)
{
    struct shard_rank *me = self;

    clf__shard_threads_abort(me->t, me->rank, rc);
}

void
clf__shard_threads_comm(struct clf__shard_threads *t, int rank,
                        clf__shard_comm *out)
{
    out->rank = rank;
    out->size = t->size;
    out->self = &t->ranks[rank];
    out->allreduce_sum = threads_allreduce;
    out->allgatherv = threads_allgatherv;
    out->bcast = threads_bcast;
    out->abort_all = threads_abort;
}
