/* Files read and written as if hostile.
 *
 * Readers open only regular files: a FIFO would block the caller forever
 * and a device such as /dev/zero would be read without bound.  The file is
 * opened non-blocking so that opening a FIFO with no writer returns at once,
 * checked with fstat on the descriptor actually opened (no window between a
 * check and the open), and only then switched back to blocking reads.
 *
 * Writers never write through a name someone else may have planted: the
 * data goes to a fresh temporary file in the target's directory, created
 * with O_CREAT | O_EXCL | O_NOFOLLOW (so an existing file or symlink at that
 * name makes the open fail rather than redirect it), is synced, and is then
 * renamed over the target, so a reader sees the old file or the new one,
 * never half of one.  A target that exists and is not a regular file is
 * refused.
 *
 * Caches (kernel binaries, peaks, kernel choices, tune files) are read
 * through clf__file_read_cache, which also refuses a symbolic link at the
 * file's own name: an entry is only ever written by renaming a regular
 * file into place, so a link there was planted, and following it would
 * load whatever it points to (or silently rebuild on every run).  Links in
 * the directories above are followed, as a cache directory may live
 * elsewhere.
 */
#include "runtime/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* Temporary names tried before giving up (each taken name is skipped). */
#define TEMP_TRIES 16

/* Opens path as clf__file_open_read does; with O_NOFOLLOW in extra, a
 * symbolic link at path is refused with an error that says so. */
static int
open_regular(const char *path, const char *what, int extra, FILE **out)
{
    struct stat st;
    int fd, flags;
    FILE *f;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (path == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "%s path is NULL", what);
    fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | extra);
    if (fd < 0 && errno == ELOOP && (extra & O_NOFOLLOW) != 0)
        return clf__fail(CLF_EIO, "%s %s is a symbolic link", what, path);
    if (fd < 0)
        return clf__fail(CLF_EIO, "cannot open %s %s: %s", what, path,
                         strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return clf__fail(CLF_EIO, "%s %s is not a regular file", what, path);
    }
    flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
        (f = fdopen(fd, "rb")) == NULL) {
        int e = errno;
        close(fd);
        return clf__fail(CLF_EIO, "cannot open %s %s: %s", what, path,
                         strerror(e));
    }
    *out = f;
    return 0;
}

int
clf__file_open_read(const char *path, const char *what, FILE **out)
{
    return open_regular(path, what, 0, out);
}

/* Reads f whole into a malloc'd, NUL-terminated buffer of at most max
 * bytes; closes f. */
static int
read_whole(FILE *f, const char *path, const char *what, size_t max, char **data,
           size_t *len)
{
    char *buf = NULL;
    size_t cap = 4096, n = 0, got;
    int rc;

    if (max > SIZE_MAX / 4)
        max = SIZE_MAX / 4; /* keeps max + 1 and the doubling in range */
    /* Read until end of file rather than trusting st_size, which the file
     * may outgrow; max + 1 bytes are enough to know it is too long. */
    for (;;) {
        if (n == cap || buf == NULL) {
            char *p;
            if (buf != NULL)
                cap = cap > max / 2 ? max + 1 : cap * 2;
            p = realloc(buf, cap + 1);
            if (p == NULL) {
                rc = clf__fail(CLF_ENO_MEMORY, "reading %s %s", what, path);
                goto fail;
            }
            buf = p;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > max) {
            rc = clf__fail(CLF_EIO, "%s %s is larger than %zu bytes", what,
                           path, max);
            goto fail;
        }
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        rc = clf__fail(CLF_EIO, "cannot read %s %s", what, path);
        goto fail;
    }
    fclose(f);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
fail:
    fclose(f);
    free(buf);
    return rc;
}

static int
read_all(const char *path, const char *what, int extra, size_t max, char **data,
         size_t *len)
{
    FILE *f = NULL;
    int rc;

    if (data == NULL || len == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "data or len is NULL");
    *data = NULL;
    *len = 0;
    rc = open_regular(path, what, extra, &f);
    if (rc != 0)
        return rc;
    return read_whole(f, path, what, max, data, len);
}

int
clf__file_read_all(const char *path, const char *what, size_t max, char **data,
                   size_t *len)
{
    return read_all(path, what, 0, max, data, len);
}

int
clf__file_read_cache(const char *path, const char *what, size_t max,
                     char **data, size_t *len)
{
    return read_all(path, what, O_NOFOLLOW, max, data, len);
}

/* Writes all of data to fd, retrying short writes and interruptions. */
static int
write_all(int fd, const void *data, size_t len)
{
    const char *p = data;

    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Creates a fresh temporary file next to path; its name goes to tmp. */
static int
temp_create(const char *path, char *tmp, size_t cap, int *fd_out)
{
    int i;

    for (i = 0; i < TEMP_TRIES; i++) {
        int n = snprintf(tmp, cap, "%s.tmp-%ld-%d", path, (long)getpid(), i);
        int fd;
        if (n < 0 || (size_t)n >= cap)
            return clf__fail(CLF_EIO, "path %s is too long", path);
        fd = open(tmp, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC,
                  0600);
        if (fd >= 0) {
            *fd_out = fd;
            return 0;
        }
        if (errno != EEXIST)
            return clf__fail(CLF_EIO, "cannot create %s: %s", tmp,
                             strerror(errno));
    }
    return clf__fail(CLF_EIO,
                     "cannot create a temporary file for %s: "
                     "%d names taken",
                     path, TEMP_TRIES);
}

int
clf__file_write_atomic(const char *path, const void *data, size_t len)
{
    struct stat st;
    size_t cap;
    char *tmp;
    int fd = -1, rc;

    if (path == NULL || (data == NULL && len > 0))
        return clf__fail(CLF_ENULL_ARGUMENT, "path or data is NULL");
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return clf__fail(CLF_EIO, "%s exists and is not a regular file", path);
    cap = strlen(path) + 64;
    tmp = malloc(cap);
    if (tmp == NULL)
        return clf__fail(CLF_ENO_MEMORY, "writing %s", path);
    rc = temp_create(path, tmp, cap, &fd);
    if (rc != 0)
        goto done;
    /* Without the fsync the rename can reach the disk before the data, and
     * a crash would leave an empty file under the real name. */
    if (write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        rc = clf__fail(CLF_EIO, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        goto done;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        rc = clf__fail(CLF_EIO, "cannot replace %s: %s", path, strerror(errno));
        unlink(tmp);
    }
done:
    free(tmp);
    return rc;
}

/* An existing directory is private when it is ours and nobody else may
 * write in it (they could plant files that we later read as trusted). */
static int
dir_check(const char *path)
{
    struct stat st;

    if (stat(path, &st) != 0)
        return clf__fail(CLF_EIO, "cannot inspect directory %s: %s", path,
                         strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return clf__fail(CLF_EIO, "%s is not a directory", path);
    if (st.st_uid != geteuid())
        return clf__fail(CLF_EIO, "directory %s is owned by another user",
                         path);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return clf__fail(CLF_EIO,
                         "directory %s is writable by group or others (mode "
                         "%03o)",
                         path, (unsigned)(st.st_mode & 0777));
    return 0;
}

int
clf__dir_private(const char *path)
{
    size_t len, i;
    char *tmp;

    if (path == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "directory path is NULL");
    len = strlen(path);
    if (len == 0)
        return clf__fail(CLF_EINVALID_ARGUMENT, "directory path is empty");
    tmp = malloc(len + 1);
    if (tmp == NULL)
        return clf__fail(CLF_ENO_MEMORY, "creating directory %s", path);
    memcpy(tmp, path, len + 1);
    /* Each missing component is created 0700; existing parents (such as
     * /tmp) are left as they are, only the directory itself is checked. */
    for (i = 1; i <= len; i++) {
        char c = tmp[i];
        if (c != '/' && c != '\0')
            continue;
        tmp[i] = '\0';
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            free(tmp);
            return clf__fail(CLF_EIO, "cannot create directory %s: %s", path,
                             strerror(e));
        }
        tmp[i] = c;
    }
    free(tmp);
    return dir_check(path);
}
