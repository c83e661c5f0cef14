/*
 * The MPI transport of the sharded forward (src/shard.h), built only with
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
#ifndef CLF_SHARD_MPI_H
#define CLF_SHARD_MPI_H

#include "shard.h"

/* Fills *comm with the transport over MPI_COMM_WORLD.  The caller has
 * initialised MPI (MPI_Init) and finalises it after the last collective.
 * Returns 0, or CLF_EUNSUPPORTED when MPI is not initialised. */
int clf__shard_mpi_comm(clf_shard_comm *comm);

/* The deterministic sum allreduce_sum computes from the gathered
 * contributions: out[i] = float(sum over r in order of all[r * count + i]),
 * accumulated in double.  Exposed for the tests and the bench. */
void clf__shard_sum_ranks(const float *all, size_t ranks, size_t count,
                          float *out);

#endif
