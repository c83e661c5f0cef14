/* clinformer run --mpi: one rank per process of an mpirun, each on its own
 * device, sharing one forward.  Compiled with MPI only under
 * ./configure --with-mpi; without it --mpi is a usage error.
 *
 * Every rank parses the same command line.  Each picks its device by its
 * local rank (OMPI_COMM_WORLD_LOCAL_RANK, else its rank among the ranks of
 * its machine), modulo the GPUs, else all devices, unless --device or
 * CLINFORMER_DEVICE names one; checks that its --weights file has the same
 * checksum as rank 0's; receives the input (and --mask) that rank 0 reads.
 * Only rank 0 writes the output and prints to stdout.  A failure every rank
 * sees (a checksum mismatch, an unreadable input) ends every rank with
 * exit 1; a failure of one rank prints its error, then MPI_Abort ends all. */
#include "cli.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CLF_HAVE_MPI
#include <limits.h>
#include <mpi.h>

static int mpi_on, mpi_rank, mpi_size;
/* Set when every rank knows of the failure: finalize, no abort. */
static int failed_together;
static char device_sel[32];

static int
local_rank(void)
{
    const char *env = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    MPI_Comm node;
    int r = 0;

    if (env != NULL && *env != '\0')
        return atoi(env);
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                            MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &r);
        MPI_Comm_free(&node);
    }
    return r;
}

/* The device of this local rank: the GPUs in turn, else all devices. */
static void
pick_device(const char **device)
{
    clf_device_info *infos;
    size_t count = 0, gpus = 0, i, want;
    int local = local_rank();

    if ((*device != NULL && **device != '\0') ||
        (getenv("CLINFORMER_DEVICE") != NULL &&
         *getenv("CLINFORMER_DEVICE") != '\0') ||
        clf_devices_list(NULL, 0, &count) != 0 || count == 0)
        return;
    infos = calloc(count, sizeof *infos);
    if (infos == NULL || clf_devices_list(infos, count, &count) != 0) {
        free(infos);
        return;
    }
    for (i = 0; i < count; i++)
        gpus += infos[i].is_gpu != 0;
    want = (size_t)local % (gpus ? gpus : count);
    for (i = 0; i < count; i++)
        if ((gpus == 0 || infos[i].is_gpu) && want-- == 0)
            break;
    snprintf(device_sel, sizeof device_sel, "%u", infos[i].index);
    *device = device_sel;
    free(infos);
}

int
cli_mpi_begin(const char **device)
{
    int init = 0;

    MPI_Initialized(&init);
    if (!init && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        cli_error("run", "--mpi: MPI_Init failed");
        return CLI_ERROR;
    }
    mpi_on = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    /* Rank 0 speaks for all; errors still reach stderr from every rank. */
    if (mpi_rank != 0 && freopen("/dev/null", "w", stdout) == NULL)
        return CLI_ERROR;
    pick_device(device);
    return 0;
}

int
cli_mpi_rank(void)
{
    return mpi_on ? mpi_rank : 0;
}

int
cli_mpi_end(int rc)
{
    if (!mpi_on)
        return rc;
    if (rc != 0 && !failed_together) {
        fprintf(stderr,
                "clinformer run: rank %d of %d failed; stopping every "
                "rank\n",
                mpi_rank, mpi_size);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
    fflush(stdout);
    MPI_Finalize();
    mpi_on = 0;
    return rc;
}

/* Every rank's status; nonzero when any rank's is.  Then every rank knows
 * of the failure. */
static int
agree(int mine)
{
    int worst = 0;

    MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (worst != 0)
        failed_together = 1;
    return worst;
}

/* 64-bit FNV-1a of a file's bytes; the errno when it cannot be read. */
static int
file_checksum(const char *path, uint64_t *sum)
{
    unsigned char buf[65536];
    size_t got, i;
    FILE *f = fopen(path, "rb");
    uint64_t h = 0xcbf29ce484222325ULL;
    int err;

    if (f == NULL)
        return errno ? errno : EIO;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        for (i = 0; i < got; i++)
            h = (h ^ buf[i]) * 0x100000001b3ULL;
    err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    *sum = h;
    return err;
}

static int
bcast_bytes(void *buf, size_t bytes)
{
    unsigned char *p = buf;
    size_t now;

    for (; bytes > 0; bytes -= now, p += now) {
        now = bytes < (size_t)INT_MAX ? bytes : (size_t)INT_MAX;
        if (MPI_Bcast(p, (int)now, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
            return -1;
    }
    return 0;
}

/* The values end to end, each ended by its NUL: what rank 0 broadcasts. */
static char *
join_values(const char *const *values, size_t count, size_t *bytes)
{
    size_t i, len = 0;
    char *all, *p;

    for (i = 0; i < count; i++)
        len += strlen(values[i]) + 1;
    all = malloc(len + 1);
    if (all == NULL)
        return NULL;
    for (p = all, i = 0; i < count; i++)
        p += strlen(strcpy(p, values[i])) + 1;
    *bytes = len;
    return all;
}

int
cli_mpi_same_options(const char *const *names, const char *const *values,
                     size_t count)
{
    unsigned long long bytes = 0;
    size_t mine = 0, i;
    char *first = NULL, *p;
    int bad = 0;

    if (!mpi_on)
        return 0;
    if (mpi_rank == 0 && (first = join_values(values, count, &mine)) == NULL)
        mine = (size_t)-1;
    bytes = mine;
    if (agree(bcast_bytes(&bytes, sizeof bytes) != 0 ||
              bytes == (unsigned long long)-1))
        return CLI_ERROR;
    if (mpi_rank != 0)
        first = malloc((size_t)bytes + 1);
    if (agree(first == NULL) || agree(bcast_bytes(first, (size_t)bytes))) {
        free(first);
        return CLI_ERROR;
    }
    first[bytes] = '\0';
    for (p = first, i = 0; !bad && i < count; p += strlen(p) + 1, i++) {
        if (p >= first + bytes) {
            bad = 1; /* another clinformer on rank 0 */
            break;
        }
        if (strcmp(p, values[i]) == 0)
            continue;
        cli_error("run",
                  "--%s differs on rank %d (%s) from rank 0 (%s); every "
                  "rank of --mpi must run the same forward",
                  names[i], mpi_rank, *values[i] ? values[i] : "not given",
                  *p ? p : "not given");
        bad = 1;
    }
    free(first);
    return agree(bad ? CLI_ERROR : 0);
}

int
cli_mpi_same_file(const char *option, const char *path)
{
    unsigned long long mine[2], *all;
    int r, err, bad = 0;

    if (!mpi_on)
        return 0;
    errno = 0;
    err = file_checksum(path, (uint64_t *)&mine[1]);
    mine[0] = err != 0;
    /* Only this rank knows which file it tried and why it failed. */
    if (err != 0)
        cli_error("run", "%s %s: rank %d cannot read it: %s", option, path,
                  mpi_rank, strerror(err));
    all = malloc(2 * (size_t)mpi_size * sizeof *all);
    if (all == NULL)
        return agree(CLI_ERROR);
    MPI_Allgather(mine, 2, MPI_UNSIGNED_LONG_LONG, all, 2,
                  MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    for (r = 0; r < mpi_size; r++) {
        if (all[2 * r] != 0 || all[2 * r + 1] != all[1])
            bad = 1;
        if (mpi_rank != 0)
            continue;
        if (all[2 * r] == 0 && all[2 * r + 1] != all[1] && all[0] == 0)
            cli_error("run",
                      "%s %s differs on rank %d (checksum %016llx, rank 0 "
                      "has %016llx)",
                      option, path, r, all[2 * r + 1], all[1]);
    }
    free(all);
    return agree(bad ? CLI_ERROR : 0);
}

void
cli_mpi_devices(clf_context *ctx)
{
    clf_device_info info;
    char *all;
    int r;

    if (!mpi_on)
        return;
    memset(&info, 0, sizeof info);
    clf_context_device_info(ctx, &info);
    all = malloc((size_t)mpi_size * sizeof info.stable_name);
    if (all == NULL)
        return;
    MPI_Gather(info.stable_name, (int)sizeof info.stable_name, MPI_CHAR, all,
               (int)sizeof info.stable_name, MPI_CHAR, 0, MPI_COMM_WORLD);
    printf("mpi: %d ranks on devices", mpi_size);
    for (r = 0; r < mpi_size; r++)
        printf(" %d=%.63s", r, all + (size_t)r * sizeof info.stable_name);
    printf("\n");
    free(all);
}

int
cli_mpi_load_npy(const char *path, clf_array *a, int whole)
{
    unsigned long long head[11] = {0};
    size_t i, elem;
    void *data;
    int rc = 0;

    if (!mpi_on)
        return (rc = clf_npy_load(path, a)) != 0 ? cli_fail(NULL, path, rc) : 0;
    if (mpi_rank == 0 && (rc = clf_npy_load(path, a)) != 0)
        cli_fail(NULL, path, rc);
    head[0] = rc != 0;
    head[1] = a->ids != NULL;
    head[2] = a->ndim;
    for (i = 0; i < 8; i++)
        head[3 + i] = a->shape[i];
    if (agree(bcast_bytes(head, sizeof head) != 0 || head[0] != 0))
        return CLI_ERROR;
    if (mpi_rank != 0) {
        a->ndim = (size_t)head[2];
        a->count = 1;
        for (i = 0; i < 8; i++) {
            a->shape[i] = (size_t)head[3 + i];
            a->count *= i < a->ndim ? a->shape[i] : 1;
        }
    }
    elem = head[1] ? sizeof *a->ids : sizeof *a->data;
    if (mpi_rank != 0) {
        data = calloc(whole && a->count ? a->count : 1, elem);
        if (head[1])
            a->ids = data;
        else
            a->data = data;
    } else
        data = head[1] ? (void *)a->ids : (void *)a->data;
    rc = data == NULL;
    if (agree(rc) || (whole && bcast_bytes(data, a->count * elem) != 0))
        return CLI_ERROR;
    return 0;
}

#else /* built without MPI */

int
cli_mpi_begin(const char **device)
{
    (void)device;
    cli_error("run", "--mpi: this clinformer was built without MPI; "
                     "configure with --with-mpi (needs Open MPI)");
    return CLI_USAGE;
}

int
cli_mpi_rank(void)
{
    return 0;
}

int
cli_mpi_end(int rc)
{
    return rc;
}

int
cli_mpi_same_file(const char *option, const char *path)
{
    (void)option;
    (void)path;
    return 0;
}

void
cli_mpi_devices(clf_context *ctx)
{
    (void)ctx;
}

int
cli_mpi_same_options(const char *const *names, const char *const *values,
                     size_t count)
{
    (void)names;
    (void)values;
    (void)count;
    return 0;
}

int
cli_mpi_load_npy(const char *path, clf_array *a, int whole)
{
    int rc = clf_npy_load(path, a);

    (void)whole;

    return rc != 0 ? cli_fail(NULL, path, rc) : 0;
}

#endif
