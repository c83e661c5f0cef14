/* libFuzzer target: the program-binary cache entry check, over arbitrary
 * bytes taken as a whole entry for a fixed key.  Whatever the input, the
 * check must return 0 or -1 without reading outside the buffer, and what
 * it accepts must be a payload that fills the rest of the entry exactly
 * and matches its checksum.  The seeds in corpus/cache/ are entries for
 * FUZZ_CACHE_KEY (valid, truncated, wrong length, flipped payload). */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CACHE_KEY 0x0123456789abcdefULL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0, len = 0;
    unsigned char *copy = malloc(size ? size : 1); /* exact size for ASan */

    if (copy == NULL)
        return 0;
    if (size)
        memcpy(copy, data, size);
    if (clf__cache_entry_check(copy, size, FUZZ_CACHE_KEY, &off, &len) == 0) {
        uint64_t sum;
        if (off < 8 + sizeof sum || len == 0 || off + len != size)
            abort();
        memcpy(&sum, copy + off - sizeof sum, sizeof sum);
        if (clf__hash64(copy + off, len, FUZZ_CACHE_KEY) != sum)
            abort();
    }
    free(copy);
    return 0;
}
