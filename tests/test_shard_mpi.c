/* The MPI transport of the sharded forward (src/parallel/shard_mpi.c), run
 * under mpirun by tests/test_mpi.sh.  Every rank can compute every rank's data,
 * so each checks what the collectives gave it against a serial
 * computation: allreduce_sum the same bits on every rank, within 1e-6
 * relative of a sum in long double (the equations), and on up to 4 ranks
 * bit for bit the rank-order double sum;
 * allgatherv with uneven counts (one of them zero); bcast from the last
 * rank.  Rank 0 prints one line per check, "ok" only when it held on every
 * rank.  With the argument "abort", rank size-1 fails and calls abort_all
 * while the others wait in a collective: the job must end, nonzero. */
#include "internal.h"

#include "internal.h"

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

/* A value every rank can compute: rank r's i-th float, of mixed sign and
 * magnitude so that the order of summation matters. */
static float
value(int r, size_t i, unsigned seed)
{
    uint64_t x = (uint64_t)seed * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)r << 40) ^
                 (uint64_t)i;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    return (float)((double)(x % 2000001) / 1000000.0 - 1.0) *
           (float)(1 << (x >> 60));
}

/* Rank 0 prints the result of a check that every rank made. */
static void
report(const char *name, int ok)
{
    int all = 0, rank;

    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all)
        failures++;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("%s - %s\n", all ? "ok" : "not ok", name);
}

/* Whether every rank holds rank 0's bits in buf; want is scratch. */
static int
same_bits_everywhere(const clf__shard_comm *c, const float *buf, float *want,
                     size_t count)
{
    memcpy(want, buf, count * sizeof *buf);
    if (c->bcast(c->self, want, count * sizeof *want, 0) != 0)
        return 0;
    return memcmp(want, buf, count * sizeof *buf) == 0;
}

static int
check_allreduce(const clf__shard_comm *c, size_t count, unsigned seed)
{
    float *buf = malloc((count + 1) * sizeof *buf);
    float *all = malloc(((size_t)c->size * count + 1) * sizeof *all);
    float *want = malloc((count + 1) * sizeof *want);
    size_t i;
    int r, ok = buf != NULL && all != NULL && want != NULL;

    for (i = 0; ok && i < count; i++) {
        buf[i] = value(c->rank, i, seed);
        for (r = 0; r < c->size; r++)
            all[(size_t)r * count + i] = value(r, i, seed);
    }
    if (ok && c->allreduce_sum(c->self, buf, count) != 0) {
        fprintf(stderr, "rank %d: allreduce_sum: %s\n", c->rank,
                clf_last_error());
        ok = 0;
    }
    if (ok)
        clf__shard_sum_ranks(all, (size_t)c->size, count, want);
    if (ok && c->size > 4) /* the reduce-scatter path: rank 0's bits */
        ok = same_bits_everywhere(c, buf, want, count);
    for (i = 0; ok && i < count; i++) {
        long double exact = 0.0L;
        for (r = 0; r < c->size; r++)
            exact += (long double)all[(size_t)r * count + i];
        if (memcmp(&buf[i], &want[i], sizeof buf[i]) != 0 ||
            fabsl((long double)buf[i] - exact) >
                1e-6L * fmaxl(fabsl(exact), 1.0L)) {
            fprintf(stderr, "rank %d: allreduce_sum[%zu] = %.9g, want %.9g\n",
                    c->rank, i, buf[i], want[i]);
            ok = 0;
        }
    }
    free(buf);
    free(all);
    free(want);
    return ok;
}

static int
check_allgatherv(const clf__shard_comm *c)
{
    size_t counts[64], total = 0, off = 0, i;
    float *send, *recv;
    int r, ok = c->size <= 64;

    for (r = 0; ok && r < c->size; r++) {
        counts[r] = r == 1 ? 0 : (size_t)(3 * r + 5);
        total += counts[r];
    }
    send = malloc((counts[c->rank] + 1) * sizeof *send);
    recv = malloc((total + 1) * sizeof *recv);
    ok = ok && send != NULL && recv != NULL;
    for (i = 0; ok && i < counts[c->rank]; i++)
        send[i] = value(c->rank, i, 7);
    if (ok && c->allgatherv(c->self, send, recv, counts) != 0)
        ok = 0;
    for (r = 0; ok && r < c->size; r++)
        for (i = 0; i < counts[r]; i++, off++)
            if (memcmp(&recv[off], &(float){value(r, i, 7)}, sizeof(float)))
                ok = 0;
    free(send);
    free(recv);
    return ok;
}

static int
check_bcast(const clf__shard_comm *c)
{
    unsigned char buf[1001];
    size_t i;
    int root = c->size - 1, ok = 1;

    for (i = 0; i < sizeof buf; i++)
        buf[i] = c->rank == root ? (unsigned char)(i * 7 + 3) : 0;
    if (c->bcast(c->self, buf, sizeof buf, root) != 0)
        return 0;
    for (i = 0; i < sizeof buf; i++)
        ok &= buf[i] == (unsigned char)(i * 7 + 3);
    return ok;
}

/* The last rank fails; the others wait in an allreduce it never joins. */
static void
abort_case(const clf__shard_comm *c)
{
    float x = 1.0f;

    if (c->rank == c->size - 1)
        c->abort_all(c->self, clf__fail(CLF_EIO, "a planted failure"));
    c->allreduce_sum(c->self, &x, 1);
    fprintf(stderr, "rank %d: returned from a collective after abort_all\n",
            c->rank);
}

int
main(int argc, char **argv)
{
    static const size_t counts[] = {1, 7, 1000, 65536, (1 << 22) + 3};
    clf__shard_comm c;
    char name[96];
    size_t i;

    MPI_Init(&argc, &argv);
    if (clf__shard_mpi_comm(&c) != 0) {
        fprintf(stderr, "test_shard_mpi: %s\n", clf_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (argc > 1 && strcmp(argv[1], "abort") == 0) {
        abort_case(&c);
        MPI_Finalize();
        return 0;
    }
    for (i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        snprintf(name, sizeof name,
                 "allreduce_sum of %zu floats on %d ranks: the rank-order sum",
                 counts[i], c.size);
        report(name, check_allreduce(&c, counts[i], (unsigned)i + 1));
    }
    report("allgatherv of uneven counts, one zero, in rank order",
           check_allgatherv(&c));
    report("bcast of 1001 bytes from the last rank", check_bcast(&c));
    MPI_Finalize();
    return failures != 0;
}
