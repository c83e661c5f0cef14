/* clinformer command-line tool: files it writes.  A path that exists and is
 * not a regular file, or that is one of the command's inputs, is refused;
 * the file is written under a new temporary name in its directory and
 * renamed into place, so a reader never sees it half written. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where data for "-" goes once cli_stdout_for_data() moved the text off
 * standard output; -1 before. */
static int data_fd = -1;

int
cli_is_stdout(const char *path)
{
    return path != NULL && strcmp(path, "-") == 0;
}

int
cli_stdout_for_data(const char *cmd)
{
    fflush(stdout);
    data_fd = dup(STDOUT_FILENO);
    if (data_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        cli_error(cmd, "cannot keep standard output for the data: %s",
                  strerror(errno));
        return CLI_ERROR;
    }
    return 0;
}

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

    if (cli_is_stdout(path))
        return 0; /* whatever standard output is, the user chose it */
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
    const char *p = buf;

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

int
cli_data_write(const void *data, size_t len)
{
    return data_fd >= 0 && write_all(data_fd, data, len) == 0 ? 0 : -1;
}

/* The header clf_npy_save writes (version 1, '<f4', C order, padded with
 * spaces so the data starts at a multiple of 64 bytes); its length, or 0
 * when the shape does not fit. */
static size_t
npy_header(char *buf, size_t cap, const size_t *shape, size_t ndim)
{
    size_t len = 10, i, pad;
    int w = snprintf(buf + len, cap - len,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (");

    for (i = 0; w > 0 && len + (size_t)w < cap && i < ndim; i++) {
        len += (size_t)w;
        w = snprintf(buf + len, cap - len, "%s%zu", i ? ", " : "", shape[i]);
    }
    if (w > 0 && len + (size_t)w < cap) {
        len += (size_t)w;
        w = snprintf(buf + len, cap - len, "%s), }", ndim == 1 ? "," : "");
    }
    if (w <= 0 || len + (size_t)w + 64 >= cap)
        return 0;
    len += (size_t)w + 1;
    pad = (64 - len % 64) % 64;
    memset(buf + len - 1, ' ', pad);
    len += pad;
    buf[len - 1] = '\n';
    memcpy(buf, "\223NUMPY\001\000", 8);
    buf[8] = (char)((len - 10) & 0xff);
    buf[9] = (char)((len - 10) >> 8);
    return len;
}

/* The .npy of cli_npy_write on the data stream: little-endian floats,
 * converted in blocks whatever the host's byte order. */
static int
npy_to_stream(const float *data, const size_t *shape, size_t ndim)
{
    unsigned char block[4096];
    char header[512];
    size_t count = 1, i, j,
           hlen = npy_header(header, sizeof header, shape, ndim);

    for (i = 0; i < ndim; i++)
        count *= shape[i]; /* the caller's buffer holds this many */
    if (hlen == 0 || write_all(data_fd, header, hlen) != 0)
        return -1;
    for (i = 0; i < count; i += j) {
        for (j = 0; j < sizeof block / 4 && i + j < count; j++) {
            uint32_t u;
            memcpy(&u, &data[i + j], 4);
            block[4 * j] = (unsigned char)u;
            block[4 * j + 1] = (unsigned char)(u >> 8);
            block[4 * j + 2] = (unsigned char)(u >> 16);
            block[4 * j + 3] = (unsigned char)(u >> 24);
        }
        if (write_all(data_fd, block, 4 * j) != 0)
            return -1;
    }
    return 0;
}

int
cli_npy_write(const char *path, const float *data, const size_t *shape,
              size_t ndim)
{
    int rc;

    if (cli_is_stdout(path)) {
        errno = 0;
        if (data_fd >= 0 && npy_to_stream(data, shape, ndim) == 0)
            return 0;
        fprintf(stderr, "clinformer: standard output: write failed: %s\n",
                strerror(errno != 0 ? errno : EIO));
        return CLI_ERROR;
    }
    rc = clf_npy_save(path, data, shape, ndim);

    if (rc != 0) {
        fprintf(stderr, "clinformer: %s\n", clf_error_message(rc));
        return CLI_ERROR;
    }
    return 0;
}
