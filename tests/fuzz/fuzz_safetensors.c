/*
 * libFuzzer target for the safetensors reader: opens each input from
 * memory and, when it is accepted, lists every tensor, reads each readable
 * one as float32 and asks for metadata.  Any crash, leak of bounds or
 * undefined behaviour is a bug: a file is to be treated as hostile.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <clinformer.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bounded so that a header announcing a huge tensor does not make the
 * fuzzer itself run out of memory; the reader has validated the shape
 * against the file size already. */
#define MAX_READ_ELEMENTS ((size_t)1 << 22)

static void
read_all(const clf_safetensors *st)
{
    size_t n = clf_safetensors_count(st);
    for (size_t i = 0; i < n; i++) {
        clf_tensor_info info;
        if (clf_safetensors_info(st, i, &info) != 0)
            continue;
        clf_tensor_info again;
        (void)clf_safetensors_find(st, info.name, &again);
        if (info.count > MAX_READ_ELEMENTS)
            continue;
        float *dst = malloc((info.count ? info.count : 1) * sizeof(float));
        if (dst == NULL)
            continue;
        (void)clf_safetensors_read_f32(st, info.name, dst, info.count);
        /* A wrong count must be refused, not overrun. */
        if (info.count > 0)
            (void)clf_safetensors_read_f32(st, info.name, dst, info.count - 1);
        free(dst);
    }
    (void)clf_safetensors_info(st, n, &(clf_tensor_info){0});
    (void)clf_safetensors_metadata(st, "format");
    (void)clf_safetensors_metadata(st, "");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_safetensors *st = NULL;
    if (clf_safetensors_open_memory(&st, data, size) == 0)
        read_all(st);
    clf_safetensors_close(st);
    return 0;
}
