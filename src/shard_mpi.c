/* The MPI transport of the sharded forward: see src/shard_mpi.h. */
#include "shard_mpi.h"

#include "internal.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Floats of one rank's contribution gathered per allreduce step: bounds
 * the gather buffer to 16 MiB whatever the count. */
enum { GATHER_FLOATS = 1 << 22 };

/* Up to this many ranks allreduce_sum gathers and sums in rank order; that
 * moves fewer bytes than a reduce-scatter in double while
 * 4 (size - 1) <= 16 (size - 1) / size. */
enum { GATHER_RANKS = 4 };

static int
mpi_fail(int err, const char *call)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(err, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", err);
    return clf__fail(CLF_EIO, "%s failed: %s", call, text);
}

static int
to_int(size_t v, const char *what, int *out)
{
    if (v > (size_t)INT_MAX)
        return clf__fail(CLF_ETOO_LARGE,
                         "%s of %zu exceeds what one MPI call takes (%d)", what,
                         v, INT_MAX);
    *out = (int)v;
    return 0;
}

void
clf__shard_sum_ranks(const float *all, size_t ranks, size_t count, float *out)
{
    size_t i, r;

    for (i = 0; i < count; i++) {
        double s = 0.0;
        for (r = 0; r < ranks; r++)
            s += (double)all[r * count + i];
        out[i] = (float)s;
    }
}

/* Up to GATHER_RANKS ranks: gather every contribution and sum in rank
 * order, (size - 1) * count floats into each rank. */
static int
gather_sum(float *buf, size_t count, int size)
{
    size_t done, step = GATHER_FLOATS / (size_t)size;
    float *all;
    int rc = 0, err;

    if (step > count)
        step = count;
    all = malloc(step * (size_t)size * sizeof *all);
    if (all == NULL)
        return clf__fail(CLF_ENO_MEMORY,
                         "allreduce: %zu floats of gather buffer",
                         step * (size_t)size);
    for (done = 0; done < count && rc == 0; done += step) {
        size_t now = count - done < step ? count - done : step;
        err = MPI_Allgather(buf + done, (int)now, MPI_FLOAT, all, (int)now,
                            MPI_FLOAT, MPI_COMM_WORLD);
        if (err != MPI_SUCCESS)
            rc = mpi_fail(err, "allreduce: MPI_Allgather");
        else
            clf__shard_sum_ranks(all, (size_t)size, now, buf + done);
    }
    free(all);
    return rc;
}

/* One step of scatter_sum: now elements, from and back into buf. */
static int
scatter_step(float *buf, size_t now, double *d, double *part, int *cnt,
             int size, int rank)
{
    int r, *displ = cnt + size, err;
    size_t i;

    for (r = 0; r < size; r++) {
        cnt[r] = (int)(now / (size_t)size + ((size_t)r < now % (size_t)size));
        displ[r] = r == 0 ? 0 : displ[r - 1] + cnt[r - 1];
    }
    for (i = 0; i < now; i++)
        d[i] = (double)buf[i];
    err = MPI_Reduce_scatter(d, part, cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (err != MPI_SUCCESS)
        return mpi_fail(err, "allreduce: MPI_Reduce_scatter");
    err = MPI_Allgatherv(part, cnt[rank], MPI_DOUBLE, d, cnt, displ, MPI_DOUBLE,
                         MPI_COMM_WORLD);
    if (err != MPI_SUCCESS)
        return mpi_fail(err, "allreduce: MPI_Allgatherv");
    for (i = 0; i < now; i++)
        buf[i] = (float)d[i];
    return 0;
}

/* More ranks: each rank sums one block of the elements in double
 * (MPI_Reduce_scatter), then every rank receives every block
 * (MPI_Allgatherv).  That moves about 2 * 2 (size - 1) / size * count
 * floats' bytes per rank, as a ring allreduce in double does, and each
 * element is summed once, on one rank, so every rank gets its bits. */
static int
scatter_sum(float *buf, size_t count, int size, int rank)
{
    size_t done, step = count < GATHER_FLOATS ? count : GATHER_FLOATS;
    double *d = malloc((step + step / (size_t)size + 1) * sizeof *d);
    int *cnt = malloc(2 * (size_t)size * sizeof *cnt), rc = 0;

    if (d == NULL || cnt == NULL)
        rc = clf__fail(CLF_ENO_MEMORY,
                       "allreduce: %zu doubles of reduce buffer", step);
    for (done = 0; done < count && rc == 0; done += step)
        rc = scatter_step(buf + done, count - done < step ? count - done : step,
                          d, d + step, cnt, size, rank);
    free(d);
    free(cnt);
    return rc;
}

static int
mpi_allreduce_sum(void *self, float *buf, size_t count)
{
    int size, rank;

    (void)self;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (count == 0)
        return 0;
    return size <= GATHER_RANKS ? gather_sum(buf, count, size)
                                : scatter_sum(buf, count, size, rank);
}

static int
mpi_allgatherv(void *self, const float *send, float *recv, const size_t *counts)
{
    int size, rank, r, rc = 0, err, *ic, *displ;
    size_t total = 0;

    (void)self;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ic = malloc(2 * (size_t)size * sizeof *ic);
    if (ic == NULL)
        return clf__fail(CLF_ENO_MEMORY, "allgatherv: counts of %d ranks",
                         size);
    displ = ic + size;
    for (r = 0; r < size && rc == 0; r++) {
        if ((rc = to_int(counts[r], "allgatherv: a rank's count", &ic[r])) == 0)
            rc = to_int(total, "allgatherv: an offset", &displ[r]);
        total += counts[r];
    }
    if (rc == 0) {
        err = MPI_Allgatherv(send, ic[rank], MPI_FLOAT, recv, ic, displ,
                             MPI_FLOAT, MPI_COMM_WORLD);
        if (err != MPI_SUCCESS)
            rc = mpi_fail(err, "allgatherv: MPI_Allgatherv");
    }
    free(ic);
    return rc;
}

static int
mpi_bcast(void *self, void *buf, size_t bytes, int root)
{
    unsigned char *p = buf;
    size_t done, now;
    int err;

    (void)self;
    for (done = 0; done < bytes; done += now) {
        now = bytes - done < (size_t)INT_MAX ? bytes - done : (size_t)INT_MAX;
        err = MPI_Bcast(p + done, (int)now, MPI_BYTE, root, MPI_COMM_WORLD);
        if (err != MPI_SUCCESS)
            return mpi_fail(err, "bcast: MPI_Bcast");
    }
    return 0;
}

static void
mpi_abort_all(void *self, int rc)
{
    int rank = 0, size = 1;

    (void)self;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fprintf(stderr, "clinformer: rank %d of %d: %s (%s): %s\n", rank, size,
            clf_strerror(rc), clf_status_name(rc), clf_error_message(rc));
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int
clf__shard_mpi_comm(clf_shard_comm *comm)
{
    int init = 0;

    if (comm == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "comm is NULL");
    MPI_Initialized(&init);
    if (!init)
        return clf__fail(CLF_EUNSUPPORTED,
                         "the MPI transport needs MPI_Init first");
    memset(comm, 0, sizeof *comm);
    MPI_Comm_rank(MPI_COMM_WORLD, &comm->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &comm->size);
    comm->allreduce_sum = mpi_allreduce_sum;
    comm->allgatherv = mpi_allgatherv;
    comm->bcast = mpi_bcast;
    comm->abort_all = mpi_abort_all;
    return 0;
}

CLF_EXTERN int
clf_mpi_available(void)
{
    return 1;
}

CLF_EXTERN int
clf_model_forward_mpi(clf_model *m, const float *x, const long long *ids,
                      size_t batch, size_t seq_len, float *y,
                      const clf_forward_opts *opts)
{
    (void)m;
    (void)x;
    (void)ids;
    (void)batch;
    (void)seq_len;
    (void)y;
    (void)opts;
    return clf__fail(CLF_EUNSUPPORTED,
                     "the sharded forward is not part of this build");
}
