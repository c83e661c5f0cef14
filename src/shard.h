/*
 * Sequence-parallel (sharded) forward: the collectives it needs.
 *
 * A sharded forward runs the same code on every shard (one shard per
 * device; in one process each shard is a thread, across processes each
 * shard is an MPI rank).  Shard r holds a contiguous range of positions of
 * every sequence and calls the collectives below between its phases; all
 * shards call them in the same order with the same counts.  The
 * transports are: threads of one process (src/shard_threads.c) and MPI
 * (src/shard_mpi.c, built with ./configure --with-mpi).
 *
 * Every collective returns 0 or a negative clf error code.  A shard that
 * fails calls abort_all so that no other shard waits forever in a
 * collective: the others' pending and later collectives return
 * an error (threads) or the process group stops (MPI).
 */
#ifndef CLF_SHARD_H
#define CLF_SHARD_H

#include <stddef.h>

typedef struct clf_shard_comm {
    int rank, size;
    void *self;
    /* Sums count floats element-wise over all shards, in place, in double
     * precision where the transport allows; the same bits on every shard. */
    int (*allreduce_sum)(void *self, float *buf, size_t count);
    /* Shard r contributes counts[r] floats from send; recv receives the
     * contributions in shard order (sum of counts floats). */
    int (*allgatherv)(void *self, const float *send, float *recv,
                      const size_t *counts);
    /* bytes from shard root to all. */
    int (*bcast)(void *self, void *buf, size_t bytes, int root);
    /* Tells every other shard to give up; rc is this shard's error. */
    void (*abort_all)(void *self, int rc);
} clf_shard_comm;

#endif
