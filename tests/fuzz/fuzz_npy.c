/*
 * libFuzzer target for the .npy reader.  clf_npy_load() takes a path, so
 * each input is written to one temporary file (created once, rewritten
 * and truncated per input) and loaded from there; an accepted array is
 * read end to end so that a wrong count shows up under ASan.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <clinformer.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static int fd = -1;

static void
remove_file(void)
{
    if (fd >= 0)
        unlink(path);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/fuzz_npy.XXXXXX",
             dir != NULL && strlen(dir) < 40 ? dir : "/tmp");
    fd = mkstemp(path);
    if (fd < 0) {
        perror("fuzz_npy: mkstemp");
        abort();
    }
    atexit(remove_file);
    return 0;
}

static void
write_input(const uint8_t *data, size_t size)
{
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) {
            perror("fuzz_npy: pwrite");
            abort();
        }
        done += (size_t)w;
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        perror("fuzz_npy: ftruncate");
        abort();
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_input(data, size);
    clf_array a;
    memset(&a, 0xa5, sizeof a); /* the reader must not trust *out */
    if (clf_npy_load(path, &a) == 0) {
        volatile double sum = 0;
        size_t count = 1;
        for (size_t i = 0; i < a.ndim; i++)
            count *= a.shape[i];
        if (count != a.count ||
            (a.count > 0 && (a.data == NULL) == (a.ids == NULL)))
            abort(); /* the documented invariants of clf_array */
        for (size_t i = 0; i < a.count; i++)
            sum += a.data != NULL ? a.data[i] : (double)a.ids[i];
        (void)sum;
    }
    clf_array_free(&a);
    clf_array_free(&a); /* emptied, so a second free is harmless */
    return 0;
}
