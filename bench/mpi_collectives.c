/* mpi_collectives: latency and bandwidth of the collectives the sharded
 * forward uses, between the ranks of one mpirun (built with
 * ./configure --with-mpi; docs/scaling.md takes its constants from here).
 *
 *   mpirun -np R bench/mpi_collectives [--max-bytes B] [--repeat N]
 *
 * For message sizes from 4 bytes to --max-bytes (default 16 MiB), by
 * factors of 4, it times MPI_Allreduce (float sum), the transport's
 * allreduce_sum (MPI_Allgather, then a rank-order sum in double:
 * src/parallel/shard_mpi.c) and MPI_Allgatherv of that size per rank.  Each
 * timing is one call between barriers, the slowest rank's time; the table gives
 * the median of --repeat (default 21) after 3 warm-ups, and the bandwidth
 * as bytes per rank over the median.  It ends with the constants of
 * docs/scaling.md: latency (the median at 4 bytes) and bandwidth (at the
 * largest size, and the peak over sizes with its size).  Unlike the rest
 * of bench/, it links the library's internal archive, to time the
 * transport itself. */
#include "internal.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WARMUP = 3, MAX_REPEAT = 201 };

enum op { OP_MPI_ALLREDUCE, OP_ALLREDUCE_SUM, OP_ALLGATHERV, OP_COUNT };

static const char *const op_names[OP_COUNT] = {"MPI_Allreduce", "allreduce_sum",
                                               "MPI_Allgatherv"};

struct bench {
    clf__shard_comm comm;
    float *a, *b;
    size_t *counts;
    int repeat;
};

static int
cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void
run_op(struct bench *s, enum op op, size_t count)
{
    int r;

    switch (op) {
    case OP_MPI_ALLREDUCE:
        MPI_Allreduce(MPI_IN_PLACE, s->a, (int)count, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        break;
    case OP_ALLREDUCE_SUM:
        s->comm.allreduce_sum(s->comm.self, s->a, count);
        break;
    default:
        for (r = 0; r < s->comm.size; r++)
            s->counts[r] = count;
        s->comm.allgatherv(s->comm.self, s->a, s->b, s->counts);
    }
}

/* The median over repeats of the slowest rank's time of one call. */
static double
time_op(struct bench *s, enum op op, size_t count)
{
    double t[MAX_REPEAT], t0, mine, slowest;
    int i;

    for (i = -WARMUP; i < s->repeat; i++) {
        memset(s->a, 0, count * sizeof *s->a);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        run_op(s, op, count);
        mine = MPI_Wtime() - t0;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= 0)
            t[i] = slowest;
    }
    qsort(t, (size_t)s->repeat, sizeof t[0], cmp_double);
    return t[s->repeat / 2];
}

static int
parse(int argc, char **argv, size_t *max_bytes, int *repeat)
{
    int i;

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--max-bytes") == 0)
            *max_bytes = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--repeat") == 0)
            *repeat = atoi(argv[i + 1]);
        else
            return -1;
    }
    return i == argc && *max_bytes >= 4 && *repeat >= 1 && *repeat <= MAX_REPEAT
               ? 0
               : -1;
}

static void
table(struct bench *s, size_t max_bytes)
{
    double lat[OP_COUNT] = {0}, bw[OP_COUNT] = {0}, peak[OP_COUNT] = {0};
    size_t bytes, at[OP_COUNT] = {0};
    int op;

    if (s->comm.rank == 0)
        printf("%d ranks; median of %d, the slowest rank's time per call\n"
               "%10s  %-15s %12s %12s\n",
               s->comm.size, s->repeat, "bytes", "collective", "us", "MB/s");
    for (bytes = 4; bytes <= max_bytes; bytes *= 4)
        for (op = 0; op < OP_COUNT; op++) {
            double t = time_op(s, (enum op)op, bytes / sizeof(float));
            if (bytes == 4)
                lat[op] = t;
            bw[op] = (double)bytes / t;
            if (bw[op] > peak[op]) {
                peak[op] = bw[op];
                at[op] = bytes;
            }
            if (s->comm.rank == 0)
                printf("%10zu  %-15s %12.1f %12.1f\n", bytes, op_names[op],
                       t * 1e6, (double)bytes / t / 1e6);
        }
    for (op = 0; op < OP_COUNT && s->comm.rank == 0; op++)
        printf("%s: latency %.1f us (4 bytes); bandwidth %.1f MB/s at "
               "the largest size, peak %.1f MB/s (%zu bytes)\n",
               op_names[op], lat[op] * 1e6, bw[op] / 1e6, peak[op] / 1e6,
               at[op]);
}

int
main(int argc, char **argv)
{
    struct bench s;
    size_t max_bytes = (size_t)16 << 20;
    int rc = 0;

    MPI_Init(&argc, &argv);
    memset(&s, 0, sizeof s);
    s.repeat = 21;
    if (parse(argc, argv, &max_bytes, &s.repeat) != 0 ||
        clf__shard_mpi_comm(&s.comm) != 0) {
        fprintf(stderr, "Usage: mpirun -np R mpi_collectives [--max-bytes "
                        "B (>= 4)] [--repeat N (1..201)]\n");
        MPI_Finalize();
        return 2;
    }
    s.a = malloc(max_bytes);
    s.b = malloc(max_bytes * (size_t)s.comm.size);
    s.counts = malloc((size_t)s.comm.size * sizeof *s.counts);
    if (s.a == NULL || s.b == NULL || s.counts == NULL) {
        fprintf(stderr, "mpi_collectives: out of host memory\n");
        rc = 1;
    } else
        table(&s, max_bytes);
    free(s.a);
    free(s.b);
    free(s.counts);
    MPI_Finalize();
    return rc;
}
