/* The runtime's files (fileio.c), read and written as if hostile.
 * Included by runtime.h. */
#ifndef CLF_RUNTIME_FILEIO_H
#define CLF_RUNTIME_FILEIO_H

#include <stddef.h>
#include <stdio.h>

/* fileio.c: files read and written as if hostile. */
int clf__file_open_read(
    const char *path, const char *what,
    FILE **out); /* regular files only (refuses FIFO, device, directory with an
                    error naming `what` and path, without blocking on a FIFO:
                    open O_RDONLY|O_NONBLOCK|O_NOCTTY, fstat, S_ISREG, then
                    clear O_NONBLOCK, fdopen) */
int
clf__file_read_all(const char *path, const char *what, size_t max, char **data,
                   size_t *len); /* whole regular file, at most max bytes (else
                                    an error), malloc'd, NUL-terminated */
int clf__file_read_cache(
    const char *path, const char *what, size_t max, char **data,
    size_t *len); /* as clf__file_read_all, and a symbolic link at path is
                     refused (O_NOFOLLOW; "... is a symbolic link"): every
                     reader of the cache directory or a tune file uses it */
int clf__file_write_atomic(
    const char *path, const void *data,
    size_t len); /* temp file in path's directory opened with
                    open(O_CREAT|O_EXCL|O_NOFOLLOW|O_WRONLY, 0600), write,
                    fsync, rename over path; an existing path that is not a
                    regular file (symlink included, lstat) is refused */
int clf__dir_private(
    const char *path); /* mkdir -p with mode 0700; an existing directory must be
                          owned by the user and not group/other-writable, else
                          an error naming it */

#endif /* CLF_RUNTIME_FILEIO_H */
