/* The parallel floor (src/parallel): one forward split over devices
 * (shard.c, shard_model.c), its transports (shard_threads.c, shard_mpi.c
 * or shard_mpi_none.c) and groups of devices (group.c, group_model.c). */
#ifndef CLF_PARALLEL_H
#define CLF_PARALLEL_H

#include "model/model.h"

/*
 * Sequence-parallel (sharded) forward: the collectives it needs, and the
 * entry points a shard calls (stable; usage under "the entry points"):
 *
 *   int clf__shard_model_forward(clf_model *m, const clf__shard_comm *comm,
 *                               size_t batch, size_t seq_len,
 *                               const size_t *bounds, const float *x,
 *                               float *y, const clf_forward_opts *opts);
 *
 * with clf__shard_model_forward_tokens for an LM and the split from
 * clf__shard_split(seq_len, comm->size, weights, clf__shard_unit(m, causal),
 * bounds).
 *
 * A sharded forward runs the same code on every shard (one shard per
 * device; in one process each shard is a thread, across processes each
 * shard is an MPI rank).  Shard r holds a contiguous range of positions of
 * every sequence and calls the collectives below between its phases; all
 * shards call them in the same order with the same counts.  The
 * transports are: threads of one process (shard_threads.c) and MPI
 * (shard_mpi.c, built with ./configure --with-mpi).
 *
 * Every collective returns 0 or a negative clf error code.  A shard that
 * fails calls abort_all so that no other shard waits forever in a
 * collective: the others' pending and later collectives return
 * an error (threads) or the process group stops (MPI).
 */

#include <stddef.h>

typedef struct clf__shard_comm {
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
} clf__shard_comm;

/* ------------------------------------------------------ the entry points
 *
 *   int clf__shard_model_forward(clf_model *m, const clf__shard_comm *comm,
 *                               size_t batch, size_t seq_len,
 *                               const size_t *bounds, const float *x,
 *                               float *y, const clf_forward_opts *opts);
 *   int clf__shard_model_forward_tokens(..., const long long *ids,
 *                                      float *logits, ...);
 *   int clf__shard_attention_forward(clf_attention *att, ...same...);
 *   int clf__shard_split(size_t seq_len, int shards, const double *weights,
 *                       size_t unit, size_t *bounds);
 *   size_t clf__shard_unit(const clf_model *m, int causal);
 *
 * Usage: every shard loads the same model on its own device (its own
 * clf_context), and all agree on the split: bounds (comm->size + 1
 * entries, bounds[0] = 0, bounds[size] = seq_len, each shard at least one
 * position, starts on multiples of clf__shard_unit(), which is the causal
 * block in causal Linformer mode, else 1) from clf__shard_split() with the
 * same arguments everywhere (weights: relative throughput per shard, NULL
 * for an even split).  Shard r then calls clf__shard_model_forward with the
 * whole batch's batch, seq_len and opts (lengths or key_mask over all
 * seq_len positions, causal), its own rows x (batch x (bounds[r+1] -
 * bounds[r]) x d_model, row-major, sequence by sequence) and receives its
 * rows of the output in y (same shape; an LM takes its ids and writes its
 * rows of logits).  The result equals the single-device forward's rows
 * within float rounding.  All shards must call the same entry points in
 * the same order.  On any failure the entry point calls comm->abort_all
 * before returning its error, so no shard waits forever; a shard whose
 * collective was aborted returns CLF_ESHARD_ABORTED. */

/* What one sharded attention layer's forward needs besides its rows. */
struct clf__shard_layer_args {
    size_t batch, seq_len;
    const size_t *bounds;      /* comm->size + 1 entries */
    const unsigned char *mask; /* batch x seq_len, 1 = real; NULL: none */
    int causal;
};

int clf__shard_model_forward(clf_model *m, const clf__shard_comm *comm,
                             size_t batch, size_t seq_len, const size_t *bounds,
                             const float *x, float *y,
                             const clf_forward_opts *opts);
int clf__shard_model_forward_tokens(clf_model *m, const clf__shard_comm *comm,
                                    size_t batch, size_t seq_len,
                                    const size_t *bounds, const long long *ids,
                                    float *logits,
                                    const clf_forward_opts *opts);
int clf__shard_attention_forward(clf_attention *att,
                                 const clf__shard_comm *comm, size_t batch,
                                 size_t seq_len, const size_t *bounds,
                                 const float *x, float *y,
                                 const clf_forward_opts *opts);

/* Splits seq_len positions over `shards` in whole units of `unit`
 * positions (the last may be short), in proportion to weights (NULL: even;
 * every shard gets at least one unit): bounds receives shards + 1
 * entries.  CLF_EBAD_SIZE when there are fewer units than shards. */
int clf__shard_split(size_t seq_len, int shards, const double *weights,
                     size_t unit, size_t *bounds);

/* The unit a model's split must respect: the causal block in causal
 * Linformer mode, else 1. */
size_t clf__shard_unit(const clf_model *m, int causal);

/* Checks, before the first collective of a forward, that every shard runs
 * the same forward: a shard whose batch, seq_len, split, model shape
 * (layout, d_model, heads, head_dim, k, max_seq_len, layers, ffn_dim,
 * vocab, sharing, layerwise), mode, causal block, precision, causal flag
 * or padding (lengths or key_mask, by content) differs from shard 0's
 * would call other collectives, or the same ones with other counts, and
 * wait forever.  Shard 0 broadcasts its record (one bcast of fixed size);
 * each shard compares.  m is NULL for a bare layer's forward (att is then
 * used); bounds is NULL before the split is made.  Returns 0, or on a
 * shard that differs CLF_EINVALID_ARGUMENT
 * naming the first field that differs, this shard and both values; it
 * does not call abort_all (the caller does). */
int clf__shard_agree(const clf__shard_comm *comm, const clf_model *m,
                     const clf_attention *att, size_t batch, size_t seq_len,
                     const size_t *bounds, const clf_forward_opts *opts);

/* What a causal forward split by positions exchanges per layer (shard.c):
 * per sequence, `units` units of `per` floats on each of `sides` sides
 * (keys, then values unless they are the keys), a unit covering `unit`
 * positions.  Causal Linformer: a unit is a block's c slots (unit =
 * causal_block, units = k / c); full mode: a position's projected key or
 * value (unit 1, units = seq_len).  In the exchange (allgatherv) a shard
 * sends, per side and sequence, its own units in order. */
struct clf__gather_layout {
    size_t sides, per, unit, units;
};
int clf__shard_gather_layout(clf_attention *att, size_t batch, size_t seq_len,
                             struct clf__gather_layout *out);

/* shard.c: one attention layer's part, on the shard's device rows x and
 * y (cl_mem of the layer's context). */
int clf__shard_attention(clf_attention *att, const clf__shard_comm *comm,
                         const struct clf__shard_layer_args *la, cl_mem x,
                         cl_mem y);

/* shard_threads.c: the collectives over the threads of one process.  One
 * group per forward; clf__shard_threads_comm fills shard `rank`'s comm. */
struct clf__shard_threads;
int clf__shard_threads_create(struct clf__shard_threads **out, int size);
void clf__shard_threads_destroy(struct clf__shard_threads *t);
void clf__shard_threads_comm(struct clf__shard_threads *t, int rank,
                             clf__shard_comm *out);
/* What abort_all does: every pending and later collective fails. */
void clf__shard_threads_abort(struct clf__shard_threads *t, int rank, int rc);

/* Private to the group files: group.c (the group and its thread runner)
 * and group_model.c (models and layers on a group). */

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
int clf__group_run(int shards, int (*run)(void *, int, const clf__shard_comm *),
                   void *job);

/*
 * The MPI transport of the sharded forward (shard_mpi.c), built only with
 * ./configure --with-mpi.  One shard per rank of MPI_COMM_WORLD; the
 * collectives run on host buffers (no GPU-aware MPI).
 *
 * allreduce_sum gives every rank the same bits whatever algorithm the MPI
 * library picks.  On up to 4 ranks it gathers every rank's contribution
 * (MPI_Allgather) and sums them in rank order in double precision, the
 * same bits as the thread transport's shard-order sum; that moves
 * (size - 1) * count floats into each rank.  On more ranks each rank sums
 * one block of the elements in double (MPI_Reduce_scatter) and every rank
 * then receives every block (MPI_Allgatherv): each element is summed once,
 * on one rank, in the MPI library's order, and the bytes per rank stay
 * about 4 (size - 1) / size * count floats' worth, whatever the number of
 * ranks (docs/scaling.md).
 *
 * abort_all writes "clinformer: rank R of S: <the error>" to stderr and
 * calls MPI_Abort, which ends every rank with a nonzero status; it is the
 * one place the library prints or ends the process, because MPI offers no
 * other way to release ranks waiting in a collective.
 */

/* Fills *comm with the transport over MPI_COMM_WORLD.  The caller has
 * initialised MPI (MPI_Init) and finalises it after the last collective.
 * Returns 0, or CLF_EUNSUPPORTED when MPI is not initialised. */
int clf__shard_mpi_comm(clf__shard_comm *comm);

/* The deterministic sum allreduce_sum computes from the gathered
 * contributions: out[i] = float(sum over r in order of all[r * count + i]),
 * accumulated in double.  Exposed for the tests and the bench. */
void clf__shard_sum_ranks(const float *all, size_t ranks, size_t count,
                          float *out);

#endif /* CLF_PARALLEL_H */
