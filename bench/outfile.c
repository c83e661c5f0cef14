/* Files the bench writes: whole or not at all.  A writer fills a temporary
 * file made in the target's directory (O_CREAT | O_EXCL | O_NOFOLLOW, mode
 * 0600, so no other file or link is ever opened in its place), which is
 * flushed to disk and then renamed over the target: a reader sees the old
 * file or the new one, never half of one.  An existing target that is not
 * a regular file (a directory, a link, a device, a FIFO) is refused. */
#define _POSIX_C_SOURCE 200809L

#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Opens a new temporary file next to path; its name goes to tmp (len
 * bytes).  Returns the descriptor, or -1 with errno set. */
static int
open_temporary(const char *path, char *tmp, size_t len)
{
    static unsigned long counter;
    int attempt, fd;

    for (attempt = 0; attempt < 100; attempt++) {
        unsigned long salt = (unsigned long)time(NULL) ^ (counter++ * 7919UL);
        int w = snprintf(tmp, len, "%s.tmp%ld.%lx", path, (long)getpid(),
                         salt & 0xffffffUL);
        if (w < 0 || (size_t)w >= len) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

/* Refuses a target that exists and is not a regular file. */
static int
check_target(const char *path)
{
    struct stat st;

    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (S_ISREG(st.st_mode))
        return 0;
    errno = EEXIST;
    return -1;
}

/* Runs the writer on the open descriptor and makes the data durable. */
static int
fill(int fd, clf_bench_ctx_writer write, const void *ctx)
{
    FILE *f = fdopen(fd, "w");
    int rc, e;

    if (f == NULL) {
        e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    errno = 0;
    rc = write(f, ctx) != 0 || fflush(f) != 0 || fsync(fileno(f)) != 0;
    e = errno ? errno : EIO;
    if (fclose(f) != 0 && !rc) {
        rc = 1;
        e = errno;
    }
    if (rc)
        errno = e;
    return rc ? -1 : 0;
}

int
clf_bench_write_file_ctx(const char *path, clf_bench_ctx_writer write,
                         const void *ctx)
{
    size_t len;
    char *tmp;
    int fd, e;

    if (path == NULL || *path == '\0') {
        errno = EINVAL;
        return -1;
    }
    if (check_target(path) != 0)
        return -1;
    len = strlen(path) + 32;
    if ((tmp = malloc(len)) == NULL) {
        errno = ENOMEM;
        return -1;
    }
    fd = open_temporary(path, tmp, len);
    if (fd < 0 || fill(fd, write, ctx) != 0 || check_target(path) != 0 ||
        rename(tmp, path) != 0) {
        e = errno;
        if (fd >= 0)
            unlink(tmp);
        free(tmp);
        errno = e;
        return -1;
    }
    free(tmp);
    return 0;
}

/* A report writer behind the context-taking interface. */
struct report_job {
    clf_bench_writer write;
    const clf_bench_report *r;
};

static int
run_report_job(FILE *f, const void *ctx)
{
    const struct report_job *job = ctx;

    return job->write(f, job->r);
}

int
clf_bench_write_file(const char *path, clf_bench_writer write,
                     const clf_bench_report *r)
{
    struct report_job job;

    job.write = write;
    job.r = r;
    return clf_bench_write_file_ctx(path, run_report_job, &job);
}
