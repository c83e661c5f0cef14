/* The MPI transport of the sharded forward: see src/parallel/parallel.h. */
#include "parallel/parallel.h"

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
clf__shard_mpi_comm(clf__shard_comm *comm)
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

/* clf_model_forward_mpi: rank 0 scatters the rows, every rank runs the
 * sharded forward on its rows, rank 0 gathers the output. */

/* How rank 0 moves rows between the whole batch and the ranks: each rank's
 * rows of every sequence, packed rank after rank. */
struct mpi_rows {
    const size_t *bounds;
    size_t batch, seq_len;
    int *counts, *displs; /* per rank, in rows */
};

static int
rows_layout(struct mpi_rows *l, int size)
{
    size_t r, total = 0;

    l->counts = malloc(2 * (size_t)size * sizeof *l->counts);
    if (l->counts == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    l->displs = l->counts + size;
    for (r = 0; r < (size_t)size; r++) {
        size_t rows = l->batch * (l->bounds[r + 1] - l->bounds[r]);
        int rc = to_int(rows, "a rank's rows", &l->counts[r]);
        if (rc == 0)
            rc = to_int(total, "the rows before a rank", &l->displs[r]);
        if (rc != 0)
            return rc;
        total += rows;
    }
    return 0;
}

/* Copies between the whole batch (rows of `row` bytes, sequence by
 * sequence) and the packed ranks' rows; to_packed chooses the direction. */
static void
rows_pack(const struct mpi_rows *l, int size, unsigned char *whole,
          unsigned char *packed, size_t row, int to_packed)
{
    size_t r, b, off = 0;

    for (r = 0; r < (size_t)size; r++) {
        size_t lo = l->bounds[r], len = (l->bounds[r + 1] - lo) * row;
        for (b = 0; b < l->batch; b++, off += len) {
            unsigned char *w = whole + (b * l->seq_len + lo) * row;
            if (to_packed)
                memcpy(packed + off, w, len);
            else
                memcpy(w, packed + off, len);
        }
    }
}

/* Rank 0's rows (whole) to every rank (mine), or back when gather. */
static int
rows_move(const struct mpi_rows *l, const clf__shard_comm *c, void *whole,
          void *mine, size_t row, int gather)
{
    unsigned char *packed = NULL;
    MPI_Datatype type;
    int rc, err, irow = 0;

    if ((rc = to_int(row, "a row's bytes", &irow)) != 0)
        return rc;
    if (c->rank == 0) {
        packed = malloc(l->batch * l->seq_len * row + 1);
        if (packed == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
        if (!gather)
            rows_pack(l, c->size, whole, packed, row, 1);
    }
    MPI_Type_contiguous(irow, MPI_BYTE, &type);
    MPI_Type_commit(&type);
    err = gather ? MPI_Gatherv(mine, l->counts[c->rank], type, packed,
                               l->counts, l->displs, type, 0, MPI_COMM_WORLD)
                 : MPI_Scatterv(packed, l->counts, l->displs, type, mine,
                                l->counts[c->rank], type, 0, MPI_COMM_WORLD);
    MPI_Type_free(&type);
    if (err != MPI_SUCCESS)
        rc = mpi_fail(err, gather ? "MPI_Gatherv" : "MPI_Scatterv");
    else if (gather && c->rank == 0)
        rows_pack(l, c->size, whole, packed, row, 0);
    free(packed);
    return rc;
}

/* The sharded forward of this rank's rows, between the scatter and the
 * gather. */
static int
forward_rows(clf_model *m, const clf__shard_comm *c, const struct mpi_rows *l,
             const void *whole_in, float *whole_out,
             const clf_forward_opts *opts, const clf_model_info *info)
{
    size_t in_row =
        info->vocab ? sizeof(long long) : info->d_model * sizeof(float);
    size_t out_row =
        (info->vocab ? info->vocab : info->d_model) * sizeof(float);
    size_t rows = (size_t)l->counts[c->rank];
    void *in = malloc(rows * in_row + 1);
    float *out = malloc(rows * out_row + 1);
    int rc;

    if (in == NULL || out == NULL)
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
    else if ((rc = rows_move(l, c, (void *)whole_in, in, in_row, 0)) == 0)
        rc = info->vocab
                 ? clf__shard_model_forward_tokens(m, c, l->batch, l->seq_len,
                                                   l->bounds, in, out, opts)
                 : clf__shard_model_forward(m, c, l->batch, l->seq_len,
                                            l->bounds, in, out, opts);
    if (rc == 0)
        rc = rows_move(l, c, whole_out, out, out_row, 1);
    free(in);
    free(out);
    return rc;
}

static int
forward_args(const clf__shard_comm *c, clf_model *m, const float *x,
             const long long *ids, float *y, clf_model_info *info)
{
    if (m == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "m is NULL");
    clf_model_info_get(m, info);
    if (c->rank != 0)
        return 0;
    if (y == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "y is NULL on rank 0");
    if (info->vocab ? ids == NULL : x == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s is NULL on rank 0",
                         info->vocab ? "ids (an LM)" : "x");
    return 0;
}

CLF_EXTERN int
clf_model_forward_mpi(clf_model *m, const float *x, const long long *ids,
                      size_t batch, size_t seq_len, float *y,
                      const clf_forward_opts *opts)
{
    clf__shard_comm c;
    clf_model_info info;
    struct mpi_rows l;
    size_t *bounds = NULL;
    int rc;

    if ((rc = clf__shard_mpi_comm(&c)) != 0)
        return rc;
    memset(&l, 0, sizeof l);
    if ((rc = forward_args(&c, m, x, ids, y, &info)) != 0) {
        c.abort_all(c.self, rc);
        return rc;
    }
    /* Before the first collective (the scatter), and before the split,
     * which must come out the same on every rank: a rank that would call
     * other collectives, or the same with other counts, stops here. */
    if ((rc = clf__shard_agree(&c, m, NULL, batch, seq_len, NULL, opts)) != 0) {
        c.abort_all(c.self, rc);
        return rc;
    }
    bounds = malloc(((size_t)c.size + 1) * sizeof *bounds);
    if (bounds == NULL) {
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        c.abort_all(c.self, rc);
    }
    /* The same split on every rank: a failure here is every rank's. */
    else if ((rc = clf__shard_split(seq_len, c.size, NULL,
                                    clf__shard_unit(m, opts && opts->causal),
                                    bounds)) == 0) {
        l.bounds = bounds;
        l.batch = batch;
        l.seq_len = seq_len;
        if ((rc = rows_layout(&l, c.size)) == 0)
            rc = forward_rows(m, &c, &l,
                              info.vocab ? (const void *)ids : (const void *)x,
                              y, opts, &info);
        if (rc != 0)
            c.abort_all(c.self, rc);
    }
    free(l.counts);
    free(bounds);
    return rc;
}
