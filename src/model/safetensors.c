/* safetensors files: an 8-byte little-endian header length N, N bytes of
 * UTF-8 JSON, then the data area.  The JSON maps each tensor name to
 * {"dtype", "shape", "data_offsets": [begin, end]} with offsets relative to
 * the start of the data area, plus an optional "__metadata__" map of
 * strings.
 *
 * The whole file is read into memory and validated once, at open, so that
 * every later call works on trusted offsets: model weights are modest in
 * size, and a file that is wrong anywhere is rejected before any of it is
 * used.  The JSON itself is parsed by jansson, which validates UTF-8 and,
 * with JSON_REJECT_DUPLICATES, rejects repeated names.
 *
 * Validation follows the contract in clinformer.h.  Two choices it leaves
 * open: gaps between tensors are allowed (the reference writer leaves none,
 * but nothing is ambiguous about them), and a zero-size tensor (a 0 in its
 * shape, begin == end) is allowed and never overlaps anything.  Keys other
 * than dtype, shape and data_offsets in a tensor entry are ignored, as the
 * reference reader does. */
#include "model/model.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The reference implementation's limit; beyond it a header length is a
 * corrupt file, not a model. */
#define ST_HEADER_MAX 100000000ull
#define ST_MAX_DIMS 8
#define METADATA_KEY "__metadata__"

struct tensor {
    char *name;
    char *dtype;
    size_t ndim;
    size_t shape[ST_MAX_DIMS];
    size_t count;
    size_t begin, end; /* byte range within the data area */
};

struct meta {
    char *key;
    char *value;
};

struct clf_safetensors {
    unsigned char *bytes; /* the whole file */
    size_t size;
    const unsigned char *data; /* the data area, inside bytes */
    size_t data_size;
    struct tensor *tensors; /* in file order */
    size_t ntensors;
    const struct tensor **by_name; /* sorted by name, for find */
    struct meta *meta;
    size_t nmeta;
};

/* Element sizes of the dtypes the safetensors format defines.  Sizes of
 * dtypes not listed cannot be checked; such tensors are listed only. */
static const struct {
    const char *name;
    size_t size;
} dtype_sizes[] = {
    {"F64", 8},  {"F32", 4},     {"F16", 2},     {"BF16", 2},
    {"I64", 8},  {"I32", 4},     {"I16", 2},     {"I8", 1},
    {"U64", 8},  {"U32", 4},     {"U16", 2},     {"U8", 1},
    {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
};

static size_t
dtype_size(const char *dtype)
{
    size_t i;

    for (i = 0; i < sizeof dtype_sizes / sizeof dtype_sizes[0]; i++)
        if (strcmp(dtype, dtype_sizes[i].name) == 0)
            return dtype_sizes[i].size;
    return 0;
}

static char *
dup_string(const char *s, size_t len)
{
    char *d = malloc(len + 1);

    if (d != NULL) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

static unsigned long long
load_le(const unsigned char *b, size_t n)
{
    unsigned long long v = 0;

    while (n-- > 0)
        v = (v << 8) | b[n];
    return v;
}

/* A JSON integer as a size: 0, -1 when it is not a non-negative integer,
 * -2 when it does not fit a size_t. */
static int
json_size(const json_t *v, size_t *out)
{
    json_int_t i;

    if (!json_is_integer(v))
        return -1;
    i = json_integer_value(v);
    if (i < 0)
        return -1;
    if ((unsigned long long)i > SIZE_MAX)
        return -2;
    *out = (size_t)i;
    return 0;
}

/* Names are quoted at most this long in messages, so that what follows
 * them still fits clf_last_error()'s buffer. */
#define NAME_FMT "'%.200s'"

/* The entry's shape, its element count and its text for messages. */
static int
parse_shape(const char *name, json_t *entry, struct tensor *t, char *shape_text,
            size_t cap)
{
    json_t *shape = json_object_get(entry, "shape"), *v;
    size_t i;
    int rc;

    if (!json_is_array(shape))
        return clf__fail(CLF_EFORMAT, "tensor " NAME_FMT ": shape is %s", name,
                         shape == NULL ? "missing" : "not an array");
    if (json_array_size(shape) > ST_MAX_DIMS)
        return clf__fail(CLF_EFORMAT,
                         "tensor " NAME_FMT ": shape has %zu dimensions; at "
                         "most %d are supported",
                         name, json_array_size(shape), ST_MAX_DIMS);
    t->ndim = json_array_size(shape);
    json_array_foreach(shape, i, v)
    {
        rc = json_size(v, &t->shape[i]);
        if (rc == -2)
            return clf__fail(CLF_ESIZE_OVERFLOW,
                             "tensor " NAME_FMT ": shape dimension %zu "
                             "overflows size_t",
                             name, i);
        if (rc != 0)
            return clf__fail(CLF_EFORMAT,
                             "tensor " NAME_FMT ": shape dimension %zu is not "
                             "a non-negative integer",
                             name, i);
    }
    clf__format_shape(shape_text, cap, t->shape, t->ndim, 0);
    t->count = 1;
    for (i = 0; i < t->ndim; i++)
        if (clf__mul(t->count, t->shape[i], &t->count) != 0)
            return clf__fail(CLF_ESIZE_OVERFLOW,
                             "tensor " NAME_FMT ": shape %s overflows size_t",
                             name, shape_text);
    return 0;
}

/* data_offsets: begin <= end <= the data area's size. */
static int
parse_offsets(const clf_safetensors *st, const char *name, json_t *entry,
              struct tensor *t)
{
    json_t *offsets = json_object_get(entry, "data_offsets"), *b, *e;
    int rb, re;

    if (!json_is_array(offsets) || json_array_size(offsets) != 2)
        return clf__fail(
            CLF_EFORMAT, "tensor " NAME_FMT ": data_offsets is %s", name,
            offsets == NULL ? "missing" : "not an array of two integers");
    b = json_array_get(offsets, 0);
    e = json_array_get(offsets, 1);
    rb = json_size(b, &t->begin);
    re = json_size(e, &t->end);
    if (rb == -1 || re == -1)
        return clf__fail(CLF_EFORMAT,
                         "tensor " NAME_FMT ": data_offsets are not "
                         "non-negative integers",
                         name);
    /* Both are non-negative json_int_t here; one beyond size_t (-2) is
     * beyond the data area too. */
    if (json_integer_value(b) > json_integer_value(e))
        return clf__fail(CLF_EFORMAT,
                         "tensor " NAME_FMT ": data_offsets begin %lld is "
                         "after end %lld",
                         name, (long long)json_integer_value(b),
                         (long long)json_integer_value(e));
    /* A header length that reaches into the data (JSON may end in padding
     * spaces, so data bytes that look like spaces parse) shrinks the data
     * area: name the length, which may be what is wrong. */
    if (re == -2 || t->end > st->data_size)
        return clf__fail(CLF_EFORMAT,
                         "tensor " NAME_FMT ": data_offsets end %lld is past "
                         "the end of the data area (%zu bytes after header "
                         "length %zu)",
                         name, (long long)json_integer_value(e), st->data_size,
                         (size_t)(st->data - st->bytes) - 8);
    return 0;
}

static int
parse_tensor(clf_safetensors *st, const char *name, json_t *entry,
             struct tensor *t)
{
    json_t *dtype;
    size_t esize, nbytes, span;
    char shape_text[200];

    if (!json_is_object(entry))
        return clf__fail(CLF_EFORMAT,
                         "tensor " NAME_FMT ": entry is not a JSON object",
                         name);
    t->name = dup_string(name, strlen(name));
    if (t->name == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");

    dtype = json_object_get(entry, "dtype");
    if (!json_is_string(dtype))
        return clf__fail(CLF_EFORMAT, "tensor " NAME_FMT ": dtype is %s", name,
                         dtype == NULL ? "missing" : "not a string");
    t->dtype = dup_string(json_string_value(dtype), json_string_length(dtype));
    if (t->dtype == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    CLF_TRY(parse_shape(name, entry, t, shape_text, sizeof shape_text));
    CLF_TRY(parse_offsets(st, name, entry, t));
    esize = dtype_size(t->dtype);
    if (esize == 0)
        return 0;
    span = t->end - t->begin;
    if (clf__mul(t->count, esize, &nbytes) != 0)
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "tensor " NAME_FMT ": shape %s of %s overflows "
                         "size_t in bytes",
                         name, shape_text, t->dtype);
    if (nbytes != span)
        return clf__fail(CLF_EFORMAT,
                         "tensor " NAME_FMT ": shape %s of %s needs %zu "
                         "bytes but data_offsets span %zu",
                         name, shape_text, t->dtype, nbytes, span);
    return 0;
}

static int
parse_metadata(clf_safetensors *st, json_t *obj)
{
    const char *key;
    json_t *v;
    size_t n;

    if (!json_is_object(obj))
        return clf__fail(CLF_EFORMAT, METADATA_KEY " is not a JSON object");
    n = json_object_size(obj);
    st->meta = calloc(n > 0 ? n : 1, sizeof *st->meta);
    if (st->meta == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    json_object_foreach(obj, key, v)
    {
        struct meta *m = &st->meta[st->nmeta];

        if (!json_is_string(v))
            return clf__fail(CLF_EFORMAT,
                             METADATA_KEY " entry " NAME_FMT " is not a string",
                             key);
        m->key = dup_string(key, strlen(key));
        m->value = dup_string(json_string_value(v), json_string_length(v));
        st->nmeta++;
        if (m->key == NULL || m->value == NULL)
            return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    return 0;
}

struct range {
    size_t begin, end;
    const struct tensor *t;
};

static int
range_cmp(const void *a, const void *b)
{
    const struct range *x = a, *y = b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* Sorted by begin, a range overlaps an earlier one exactly when it starts
 * before the furthest end seen so far.  Empty ranges hold no bytes and are
 * skipped. */
static int
check_overlaps(const clf_safetensors *st)
{
    struct range *r;
    const struct range *far = NULL;
    size_t i, n = 0;
    int rc = 0;

    r = malloc((st->ntensors > 0 ? st->ntensors : 1) * sizeof *r);
    if (r == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    for (i = 0; i < st->ntensors; i++) {
        if (st->tensors[i].begin == st->tensors[i].end)
            continue;
        r[n].begin = st->tensors[i].begin;
        r[n].end = st->tensors[i].end;
        r[n].t = &st->tensors[i];
        n++;
    }
    qsort(r, n, sizeof *r, range_cmp);
    for (i = 0; i < n; i++) {
        if (far != NULL && r[i].begin < far->end) {
            rc = clf__fail(CLF_EFORMAT,
                           "tensors " NAME_FMT " [%zu, %zu) and " NAME_FMT
                           " [%zu, %zu) have overlapping data_offsets",
                           far->t->name, far->begin, far->end, r[i].t->name,
                           r[i].begin, r[i].end);
            break;
        }
        if (far == NULL || r[i].end > far->end)
            far = &r[i];
    }
    free(r);
    return rc;
}

static int
name_cmp(const void *a, const void *b)
{
    const struct tensor *const *x = a, *const *y = b;

    return strcmp((*x)->name, (*y)->name);
}

/* Validates st->bytes and fills in the rest of st. */
static int
parse(clf_safetensors *st)
{
    json_t *root = NULL, *v;
    json_error_t err;
    const char *key;
    unsigned long long hlen;
    size_t n, i;
    int rc;

    if (st->size < 8)
        return clf__fail(CLF_EFORMAT,
                         "file of %zu bytes is too short for the 8-byte "
                         "header length",
                         st->size);
    hlen = load_le(st->bytes, 8);
    if (hlen > ST_HEADER_MAX)
        return clf__fail(CLF_EFORMAT,
                         "header length %llu exceeds the %llu-byte limit", hlen,
                         ST_HEADER_MAX);
    if (hlen > st->size - 8)
        return clf__fail(CLF_EFORMAT,
                         "header length %llu runs past the end of the file "
                         "(%zu bytes)",
                         hlen, st->size);
    st->data = st->bytes + 8 + hlen;
    st->data_size = st->size - 8 - (size_t)hlen;

    root = json_loadb((const char *)st->bytes + 8, (size_t)hlen,
                      JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        return clf__fail(CLF_EFORMAT,
                         "header JSON is malformed at byte %d (line %d, "
                         "column %d): %s",
                         err.position, err.line, err.column, err.text);
    if (!json_is_object(root)) {
        rc = clf__fail(CLF_EFORMAT, "header JSON is not an object");
        goto fail;
    }

    n = json_object_size(root);
    st->tensors = calloc(n > 0 ? n : 1, sizeof *st->tensors);
    st->by_name = calloc(n > 0 ? n : 1, sizeof *st->by_name);
    if (st->tensors == NULL || st->by_name == NULL) {
        rc = clf__fail(CLF_ENO_MEMORY, "out of host memory");
        goto fail;
    }
    /* jansson keeps an object's keys in the order they were read. */
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, METADATA_KEY) == 0) {
            rc = parse_metadata(st, v);
        } else {
            /* Counted before parsing, so that close frees what a failed
             * entry already allocated. */
            struct tensor *t = &st->tensors[st->ntensors++];
            rc = parse_tensor(st, key, v, t);
        }
        if (rc != 0)
            goto fail;
    }
    rc = check_overlaps(st);
    if (rc != 0)
        goto fail;
    for (i = 0; i < st->ntensors; i++)
        st->by_name[i] = &st->tensors[i];
    qsort(st->by_name, st->ntensors, sizeof *st->by_name, name_cmp);
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    return rc;
}

/* Takes ownership of bytes (malloc'd) whatever the outcome. */
static int
open_bytes(clf_safetensors **out, unsigned char *bytes, size_t size)
{
    clf_safetensors *st;
    int rc;

    st = calloc(1, sizeof *st);
    if (st == NULL) {
        free(bytes);
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    }
    st->bytes = bytes;
    st->size = size;
    rc = parse(st);
    if (rc != 0) {
        clf_safetensors_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

static int
read_whole(const char *path, unsigned char **bytes, size_t *size)
{
    FILE *f;
    struct stat sb;
    unsigned char *buf = NULL, *grown;
    size_t cap = 1 << 16, len = 0, got;
    int rc;

    rc = clf__file_open_read(path, "weights", &f);
    if (rc != 0)
        return rc;
    /* One byte beyond the size, so that the read that finds EOF does not
     * need to grow the buffer. */
    if (fstat(fileno(f), &sb) == 0 && (unsigned long long)sb.st_size < SIZE_MAX)
        cap = (size_t)sb.st_size + 1;
    for (;;) {
        if (buf == NULL || len == cap) {
            if (buf != NULL && clf__mul(cap, 2, &cap) != 0) {
                rc = clf__fail(CLF_ENO_MEMORY, "%s: file too large", path);
                goto fail;
            }
            grown = realloc(buf, cap);
            if (grown == NULL) {
                rc = clf__fail(CLF_ENO_MEMORY,
                               "%s: out of host memory for %zu bytes", path,
                               cap);
                goto fail;
            }
            buf = grown;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0 || len < cap) {
            if (ferror(f)) {
                rc = clf__fail(CLF_EIO, "%s: read failed: %s", path,
                               strerror(errno));
                goto fail;
            }
            if (feof(f))
                break;
        }
    }
    fclose(f);
    *bytes = buf;
    *size = len;
    return 0;
fail:
    fclose(f);
    free(buf);
    return rc;
}

CLF_EXTERN int
clf_safetensors_open(clf_safetensors **out, const char *path)
{
    unsigned char *bytes = NULL;
    size_t size = 0;
    int rc;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (path == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "path is NULL");
    rc = read_whole(path, &bytes, &size);
    if (rc != 0)
        return rc;
    rc = open_bytes(out, bytes, size);
    if (rc != 0) {
        /* Prefix the file name without losing the detail. */
        char detail[900];
        snprintf(detail, sizeof detail, "%s", clf_last_error());
        return clf__fail(rc, "%s: %s", path, detail);
    }
    return 0;
}

CLF_EXTERN int
clf_safetensors_open_memory(clf_safetensors **out, const void *bytes,
                            size_t size)
{
    unsigned char *copy;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    *out = NULL;
    if (bytes == NULL && size > 0)
        return clf__fail(CLF_ENULL_ARGUMENT, "bytes is NULL");
    copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory for %zu bytes",
                         size);
    if (size > 0)
        memcpy(copy, bytes, size);
    return open_bytes(out, copy, size);
}

CLF_EXTERN void
clf_safetensors_close(clf_safetensors *st)
{
    size_t i;

    if (st == NULL)
        return;
    if (st->tensors != NULL) {
        for (i = 0; i < st->ntensors; i++) {
            free(st->tensors[i].name);
            free(st->tensors[i].dtype);
        }
        free(st->tensors);
    }
    if (st->meta != NULL) {
        for (i = 0; i < st->nmeta; i++) {
            free(st->meta[i].key);
            free(st->meta[i].value);
        }
        free(st->meta);
    }
    free(st->by_name);
    free(st->bytes);
    free(st);
}

CLF_EXTERN size_t
clf_safetensors_count(const clf_safetensors *st)
{
    return st == NULL ? 0 : st->ntensors;
}

static void
fill_info(const struct tensor *t, clf_tensor_info *out)
{
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memcpy(out->shape, t->shape, sizeof t->shape);
    out->count = t->count;
}

CLF_EXTERN int
clf_safetensors_info(const clf_safetensors *st, size_t index,
                     clf_tensor_info *out)
{
    if (st == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "st is NULL");
    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    if (index >= st->ntensors)
        return clf__fail(CLF_EBAD_SIZE,
                         "index %zu is out of range (%zu tensors)", index,
                         st->ntensors);
    fill_info(&st->tensors[index], out);
    return 0;
}

/* bsearch passes the key (a name) first and an element second. */
static int
key_cmp(const void *key, const void *elem)
{
    const struct tensor *const *t = elem;

    return strcmp(key, (*t)->name);
}

static const struct tensor *
lookup(const clf_safetensors *st, const char *name)
{
    const struct tensor *const *hit;

    hit =
        bsearch(name, st->by_name, st->ntensors, sizeof *st->by_name, key_cmp);
    return hit == NULL ? NULL : *hit;
}

/* out may be NULL, to ask only whether the tensor exists. */
CLF_EXTERN int
clf_safetensors_find(const clf_safetensors *st, const char *name,
                     clf_tensor_info *out)
{
    const struct tensor *t;

    if (st == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "st is NULL");
    if (name == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "name is NULL");
    t = lookup(st, name);
    if (t == NULL)
        return clf__fail(CLF_ENOT_FOUND, "no tensor named " NAME_FMT, name);
    if (out != NULL)
        fill_info(t, out);
    return 0;
}

/* IEEE 754 binary16 to binary32, exactly: every half value, subnormals,
 * infinities and NaN payloads included, is a float. */
static float
half_to_float(unsigned h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    float f;

    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13); /* rebias 15->127 */
    } else if (mant == 0) {
        bits = sign;
    } else {
        /* A subnormal half is a normal float: shift the leading one into
         * the implicit bit, lowering the exponent by one each step. */
        exp = 113;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            exp--;
        }
        bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

CLF_EXTERN int
clf_safetensors_read_f32(const clf_safetensors *st, const char *name,
                         float *dst, size_t count)
{
    const struct tensor *t;
    const unsigned char *src;
    size_t i;

    if (st == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "st is NULL");
    if (name == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "name is NULL");
    t = lookup(st, name);
    if (t == NULL)
        return clf__fail(CLF_ENOT_FOUND, "no tensor named " NAME_FMT, name);
    if (strcmp(t->dtype, "F32") != 0 && strcmp(t->dtype, "F16") != 0 &&
        strcmp(t->dtype, "BF16") != 0)
        return clf__fail(CLF_EDTYPE,
                         "tensor " NAME_FMT " has dtype '%.40s'; only F32, "
                         "F16 and BF16 convert to float32",
                         name, t->dtype);
    if (count != t->count)
        return clf__fail(CLF_ESHAPE_MISMATCH,
                         "tensor " NAME_FMT " has %zu elements but count is "
                         "%zu",
                         name, t->count, count);
    if (dst == NULL && count > 0)
        return clf__fail(CLF_ENULL_ARGUMENT, "dst is NULL");
    /* Byte by byte: the data area need not be aligned, and the file is
     * little-endian whatever the host is. */
    src = st->data + t->begin;
    if (strcmp(t->dtype, "F32") == 0) {
        for (i = 0; i < count; i++) {
            uint32_t u = (uint32_t)load_le(src + 4 * i, 4);
            memcpy(&dst[i], &u, sizeof u);
        }
    } else if (strcmp(t->dtype, "F16") == 0) {
        for (i = 0; i < count; i++)
            dst[i] = half_to_float((unsigned)load_le(src + 2 * i, 2));
    } else {
        for (i = 0; i < count; i++) {
            uint32_t u = (uint32_t)load_le(src + 2 * i, 2) << 16;
            memcpy(&dst[i], &u, sizeof u);
        }
    }
    return 0;
}

CLF_EXTERN const char *
clf_safetensors_metadata(const clf_safetensors *st, const char *key)
{
    size_t i;

    if (st == NULL || key == NULL)
        return NULL;
    for (i = 0; i < st->nmeta; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}
