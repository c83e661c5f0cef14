/* A group of contexts running one forward together (include/clinformer.h,
 * clf_group_*): one thread per device, each running its shard's part of
 * the sharded forward (src/parallel/parallel.h) over the thread collectives
 * (shard_threads.c), or whole sequences per device (batch split). */
#include "parallel/parallel.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the group */

static int
add_context(clf_group *g, const char *sel, unsigned flags)
{
    clf_context **c = realloc(g->ctx, (g->count + 1) * sizeof *c);

    if (c == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    g->ctx = c;
    CLF_TRY(clf_context_create_ex(&g->ctx[g->count], sel, flags));
    g->count++;
    return 0;
}

/* "all", or selectors separated by commas. */
static int
add_contexts(clf_group *g, const char *devices, unsigned flags)
{
    char sel[256];
    const char *p = devices, *end;
    size_t i, count;

    if (strcmp(devices, "all") == 0) {
        CLF_TRY(clf_devices_list(NULL, 0, &count));
        for (i = 0; i < count; i++) {
            snprintf(sel, sizeof sel, "%zu", i);
            CLF_TRY(add_context(g, sel, flags));
        }
        return count ? 0 : clf__fail(CLF_ENO_DEVICE, "no OpenCL device");
    }
    for (;;) {
        end = strchr(p, ',');
        i = end ? (size_t)(end - p) : strlen(p);
        if (i == 0 || i >= sizeof sel)
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "device list \"%s\" has an empty or overlong "
                             "entry",
                             devices);
        memcpy(sel, p, i);
        sel[i] = '\0';
        CLF_TRY(add_context(g, sel, flags));
        if (end == NULL)
            return 0;
        p = end + 1;
    }
}

CLF_EXTERN int
clf_group_create(clf_group **out, const char *devices, unsigned flags)
{
    clf_group *g;
    int rc;

    if (out == NULL || devices == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         out == NULL ? "out" : "devices");
    *out = NULL;
    g = calloc(1, sizeof *g);
    if (g == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    rc = add_contexts(g, devices, flags);
    if (rc != 0) {
        clf_group_destroy(g);
        return rc;
    }
    *out = g;
    return 0;
}

CLF_EXTERN void
clf_group_destroy(clf_group *g)
{
    size_t i;

    if (g == NULL)
        return;
    for (i = 0; i < g->count; i++)
        clf_context_destroy(g->ctx[i]);
    free(g->ctx);
    free(g->weights);
    free(g);
}

CLF_EXTERN size_t
clf_group_size(const clf_group *g)
{
    return g != NULL ? g->count : 0;
}

CLF_EXTERN clf_context *
clf_group_context(const clf_group *g, size_t i)
{
    return g != NULL && i < g->count ? g->ctx[i] : NULL;
}

CLF_EXTERN int
clf_group_set_strategy(clf_group *g, clf_shard_by by)
{
    if (g == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "g is NULL");
    if (by != CLF_SHARD_AUTO && by != CLF_SHARD_SEQ && by != CLF_SHARD_BATCH)
        return clf__fail(CLF_EBAD_ENUM, "%d is not a clf_shard_by", (int)by);
    g->by = by;
    return 0;
}

CLF_EXTERN int
clf_group_set_weights(clf_group *g, const double *weights)
{
    size_t i;

    if (g == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "g is NULL");
    if (weights == NULL) {
        free(g->weights);
        g->weights = NULL;
        return 0;
    }
    for (i = 0; i < g->count; i++)
        if (!(weights[i] > 0.0) || weights[i] > 1e300)
            return clf__fail(CLF_EINVALID_ARGUMENT,
                             "weights[%zu] = %g is not a positive number", i,
                             weights[i]);
    if (g->weights == NULL &&
        (g->weights = malloc(g->count * sizeof *g->weights)) == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    memcpy(g->weights, weights, g->count * sizeof *weights);
    return 0;
}

CLF_EXTERN int
clf_group_last_split(const clf_group *g, clf_shard_by *by, size_t *devices)
{
    if (g == NULL || by == NULL || devices == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL",
                         g == NULL    ? "g"
                         : by == NULL ? "by"
                                      : "devices");
    *by = g->last;
    *devices = g->last_shards;
    return 0;
}

/* ------------------------------------------------------------ the runner */

/* One shard's work: run(job, rank, comm) in its own thread. */
struct runner {
    int (*run)(void *job, int rank, const clf__shard_comm *comm);
    void *job;
    struct clf__shard_threads *t;
};

struct shard_thread {
    struct runner *r;
    int rank, rc;
    char msg[512];
};

static void *
shard_main(void *arg)
{
    struct shard_thread *st = arg;
    clf__shard_comm comm;

    clf__shard_threads_comm(st->r->t, st->rank, &comm);
    st->rc = st->r->run(st->r->job, st->rank, &comm);
    if (st->rc != 0)
        snprintf(st->msg, sizeof st->msg, "%s", clf_last_error());
    return NULL;
}

/* The first shard's own error, else the first error. */
static int
first_error(const struct shard_thread *st, int shards)
{
    int r, pick = -1;

    for (r = 0; r < shards; r++)
        if (st[r].rc != 0 && (pick < 0 || (st[pick].rc == CLF_ESHARD_ABORTED &&
                                           st[r].rc != CLF_ESHARD_ABORTED)))
            pick = r;
    if (pick < 0)
        return 0;
    return clf__fail(st[pick].rc, "shard %d: %s", pick, st[pick].msg);
}

int
clf__group_run(int shards, int (*run)(void *, int, const clf__shard_comm *),
               void *job)
{
    struct runner r;
    struct shard_thread *st;
    pthread_t *tid;
    int i, started = 0, rc;

    st = calloc((size_t)shards, sizeof *st);
    tid = calloc((size_t)shards, sizeof *tid);
    if (st == NULL || tid == NULL) {
        free(st);
        free(tid);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    r.run = run;
    r.job = job;
    rc = clf__shard_threads_create(&r.t, shards);
    for (i = 0; rc == 0 && i < shards; i++) {
        st[i].r = &r;
        st[i].rank = i;
        if (pthread_create(&tid[i], NULL, shard_main, &st[i]) != 0) {
            clf__shard_threads_abort(r.t, i, CLF_ENO_MEMORY);
            rc =
                clf__fail(CLF_ENO_MEMORY, "starting shard thread %d failed", i);
            break;
        }
        started++;
    }
    for (i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    if (rc == 0)
        rc = first_error(st, shards);
    clf__shard_threads_destroy(r.t);
    free(st);
    free(tid);
    return rc;
}
