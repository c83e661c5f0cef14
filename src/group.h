/* Private to the group files: group.c (the group and its thread runner)
 * and group_model.c (models and layers on a group). */
#ifndef CLINFORMER_GROUP_H
#define CLINFORMER_GROUP_H

#include "shard.h"

struct clf_group {
    size_t count;
    clf_context **ctx;
    double *weights;    /* relative throughput per device; NULL: even */
    clf_shard_by by;    /* the strategy in force */
    clf_shard_by last;  /* what the last forward used */
    size_t last_shards; /* and over how many devices */
};

/* Runs run(job, rank, comm) for rank 0..shards-1, one thread each, over
 * the thread collectives; the first shard's own error (rather than
 * another's CLF_ESHARD_ABORTED), naming the shard, or 0. */
int clf__group_run(int shards, int (*run)(void *, int, const clf_shard_comm *),
                   void *job);

#endif
