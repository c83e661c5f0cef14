/* clinformer command-line tool: files it writes.  A path that exists and is
 * not a regular file, or that is one of the command's inputs, is refused;
 * the file is written under a new temporary name in its directory and
 * renamed into place, so a reader never sees it half written. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *
kind_of(mode_t mode)
{
    if (S_ISLNK(mode))
        return "a symbolic link";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

int
cli_output_check(const char *cmd, const char *option, const char *path,
                 const struct cli_file *inputs, size_t count)
{
    struct stat out, in;
    size_t i;

    if (lstat(path, &out) != 0)
        return 0; /* a new file; where it cannot be made, writing says so */
    if (!S_ISREG(out.st_mode)) {
        cli_error(cmd, "%s %s exists and is %s; refusing to replace it", option,
                  path, kind_of(out.st_mode));
        return CLI_USAGE;
    }
    for (i = 0; i < count; i++) {
        if (inputs[i].path == NULL || stat(inputs[i].path, &in) != 0)
            continue;
        if (in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
            cli_error(cmd, "%s %s is the same file as %s %s", option, path,
                      inputs[i].option, inputs[i].path);
            return CLI_USAGE;
        }
    }
    return 0;
}

static int
write_all(int fd, const void *buf, size_t len)
{
    const unsigned char *p = buf;

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

/* The .npy version 1 preamble and header; the data starts at a multiple of
 * 64 bytes, as NumPy writes it.  Returns the length, or 0 if too long. */
static size_t
npy_header(char *buf, size_t cap, const size_t *shape, size_t ndim)
{
    size_t used = 10, hlen, i;
    int n = snprintf(buf + used, cap - used,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (");

    for (i = 0; i < ndim && n > 0 && (size_t)n < cap - used; i++) {
        used += (size_t)n;
        n = snprintf(buf + used, cap - used, i ? ", %zu" : "%zu", shape[i]);
    }
    if (n > 0 && (size_t)n < cap - used) {
        used += (size_t)n;
        n = snprintf(buf + used, cap - used, "%s, }", ndim == 1 ? ",)" : ")");
    }
    if (n < 0 || (size_t)n >= cap - used || used + n + 64 > cap)
        return 0;
    used += (size_t)n;
    while ((used + 1) % 64 != 0)
        buf[used++] = ' ';
    buf[used++] = '\n';
    hlen = used - 10;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    return used;
}

static int
write_floats(int fd, const float *data, size_t count)
{
    unsigned char chunk[4096];
    size_t i, n = 0;

    for (i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &data[i], sizeof u);
        chunk[n++] = (unsigned char)(u & 0xff);
        chunk[n++] = (unsigned char)((u >> 8) & 0xff);
        chunk[n++] = (unsigned char)((u >> 16) & 0xff);
        chunk[n++] = (unsigned char)(u >> 24);
        if (n == sizeof chunk) {
            if (write_all(fd, chunk, n) != 0)
                return -1;
            n = 0;
        }
    }
    return write_all(fd, chunk, n);
}

/* Creates a new temporary file next to `path`; its name goes to tmp. */
static int
create_temp(const char *path, char *tmp, size_t cap)
{
    unsigned attempt;
    int fd = -1;

    for (attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), attempt);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        if (fd >= 0 || errno != EEXIST)
            break;
    }
    return fd;
}

/* The temporary file was made 0600 so that nobody reads it half written;
 * the output gets the usual permissions (0666 less the umask). */
static int
finish(int fd)
{
    mode_t mask = umask(0);

    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || fsync(fd) != 0)
        return -1;
    return 0;
}

/* Makes the rename durable; the directory is that of `path`. */
static void
sync_directory(const char *path)
{
    char *dir = malloc(strlen(path) + 2);
    char *slash;
    int fd;

    if (dir == NULL)
        return;
    strcpy(dir, path);
    slash = strrchr(dir, '/');
    if (slash == NULL)
        strcpy(dir, ".");
    else
        slash[slash == dir ? 1 : 0] = '\0';
    fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

int
cli_npy_write(const char *path, const float *data, const size_t *shape,
              size_t ndim)
{
    char header[1024], *tmp;
    size_t count, hlen = npy_header(header, sizeof header, shape, ndim);
    int fd, err = 0;

    if (hlen == 0 || cli_bytes(shape, ndim, sizeof(float), &count) != 0) {
        fprintf(stderr, "clinformer: %s: the output shape is too large\n",
                path);
        return CLI_ERROR;
    }
    count /= sizeof(float);
    tmp = malloc(strlen(path) + 64);
    if (tmp == NULL) {
        fprintf(stderr, "clinformer: %s: out of host memory\n", path);
        return CLI_ERROR;
    }
    fd = create_temp(path, tmp, strlen(path) + 64);
    if (fd < 0) {
        fprintf(stderr, "clinformer: %s: cannot create a temporary file: %s\n",
                path, strerror(errno));
        free(tmp);
        return CLI_ERROR;
    }
    errno = 0;
    if (write_all(fd, header, hlen) != 0 ||
        write_floats(fd, data, count) != 0 || finish(fd) != 0)
        err = errno != 0 ? errno : EIO;
    if (close(fd) != 0 && err == 0)
        err = errno;
    if (err == 0 && rename(tmp, path) != 0)
        err = errno;
    if (err != 0) {
        unlink(tmp);
        fprintf(stderr, "clinformer: %s: write failed: %s\n", path,
                strerror(err));
    } else
        sync_directory(path);
    free(tmp);
    return err != 0 ? CLI_ERROR : 0;
}
