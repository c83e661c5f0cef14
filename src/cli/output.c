/* clinformer command-line tool: files it writes.  A path that exists and is
 * not a regular file, or that is one of the command's inputs, is refused;
 * the file is written under a new temporary name in its directory and
 * renamed into place, so a reader never sees it half written. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

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

int
cli_npy_write(const char *path, const float *data, const size_t *shape,
              size_t ndim)
{
    int rc = clf_npy_save(path, data, shape, ndim);

    if (rc != 0) {
        fprintf(stderr, "clinformer: %s\n", clf_error_message(rc));
        return CLI_ERROR;
    }
    return 0;
}
