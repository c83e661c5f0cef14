/* NumPy .npy files: a reader for float32 and integer arrays, a writer for
 * float32.
 *
 * A .npy file is a 6-byte magic, a two-byte version, a little-endian header
 * length (2 bytes in version 1, 4 in versions 2 and 3), a header that is the
 * repr() of a Python dict with the keys 'descr', 'fortran_order' and
 * 'shape', then the raw array.  The header is parsed by hand: it is a tiny
 * fixed grammar, and anything outside it (structured dtypes, Fortran order,
 * big-endian data) is refused rather than guessed at.
 *
 * Data is little-endian on disk.  It is converted by assembling bytes, not
 * by copying words, so the code is correct whatever the host's byte order.
 */
#include "model/model.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_DIMS 8

/* NumPy itself refuses headers above 10000 bytes unless told otherwise; a
 * plain array's header is under 300.  The limit keeps a lying length from
 * making us allocate gigabytes before the file size can be checked (for
 * files that are not regular, whose size is unknown). */
#define NPY_HEADER_MAX (1u << 20)

/* Writers align the start of the data to this many bytes. */
#define NPY_ALIGN 64

#define TRY CLF_TRY

enum npy_kind { NPY_F4, NPY_I4, NPY_I8, NPY_U1, NPY_B1 };

struct npy_header {
    enum npy_kind kind;
    size_t itemsize;
    size_t ndim;
    size_t shape[NPY_MAX_DIMS];
    int fortran;
    int have_descr, have_fortran, have_shape;
    char descr[40]; /* the descr as written, truncated, for messages */
};

/* A cursor over the header text, which is not NUL-terminated (and may hold
 * NUL bytes in a hostile file). */
struct cursor {
    const char *p;
    const char *end;
};

static void
skip_space(struct cursor *c)
{
    while (c->p < c->end &&
           (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Consumes ch after optional whitespace; returns 1 if it was there. */
static int
take(struct cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A Python string literal in single or double quotes, without escapes
 * (repr() writes none for the keys and dtypes accepted here; a string that
 * needs one is something this reader does not support anyway). */
static int
parse_string(struct cursor *c, const char **s, size_t *len)
{
    char q;
    const char *start;

    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return -1;
    q = *c->p++;
    start = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n')
            return -1;
        c->p++;
    }
    if (c->p >= c->end)
        return -1;
    *s = start;
    *len = (size_t)(c->p - start);
    c->p++;
    return 0;
}

static int
word_is(const char *s, size_t len, const char *word)
{
    return len == strlen(word) && memcmp(s, word, len) == 0;
}

/* A non-negative decimal integer, with the 'L' suffix Python 2 wrote for
 * longs.  Returns 0, -1 on a syntax error, -2 when it exceeds size_t. */
static int
parse_dim(struct cursor *c, size_t *out)
{
    size_t v = 0;
    int digits = 0, overflow = 0;

    skip_space(c);
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        size_t d = (size_t)(*c->p - '0');
        if (v > (SIZE_MAX - d) / 10)
            overflow = 1;
        else
            v = v * 10 + d;
        digits++;
        c->p++;
    }
    if (digits == 0)
        return -1;
    if (c->p < c->end && *c->p == 'L')
        c->p++;
    if (overflow)
        return -2;
    *out = v;
    return 0;
}

/* A Python tuple of dimensions: "()", "(5,)", "(3, 4)", "(3, 4,)". */
static int
parse_shape(struct cursor *c, const char *path, struct npy_header *h)
{
    size_t n = 0;
    int comma_after_last = 0, rc;

    if (!take(c, '('))
        return clf__fail(CLF_EFORMAT, "%s: header 'shape' is not a tuple",
                         path);
    for (;;) {
        size_t dim;

        if (take(c, ')'))
            break;
        if (n > 0 && !comma_after_last)
            return clf__fail(CLF_EFORMAT,
                             "%s: header 'shape' lacks a comma after "
                             "dimension %zu",
                             path, n - 1);
        rc = parse_dim(c, &dim);
        if (rc == -2)
            return clf__fail(CLF_ESIZE_OVERFLOW,
                             "%s: header 'shape' dimension %zu overflows "
                             "size_t",
                             path, n);
        if (rc != 0)
            return clf__fail(CLF_EFORMAT,
                             "%s: header 'shape' dimension %zu is not a "
                             "non-negative integer",
                             path, n);
        if (n == NPY_MAX_DIMS)
            return clf__fail(CLF_EFORMAT,
                             "%s: header 'shape' has more than %d "
                             "dimensions",
                             path, NPY_MAX_DIMS);
        h->shape[n++] = dim;
        comma_after_last = take(c, ',');
    }
    /* (5) is the integer 5 in Python, not a tuple. */
    if (n == 1 && !comma_after_last)
        return clf__fail(CLF_EFORMAT,
                         "%s: header 'shape' (%zu) is not a tuple (a "
                         "one-element tuple is written (%zu,))",
                         path, h->shape[0], h->shape[0]);
    h->ndim = n;
    return 0;
}

static int
parse_value(struct cursor *c, const char *path, const char *key, size_t klen,
            struct npy_header *h)
{
    const char *s;
    size_t len;

    if (word_is(key, klen, "descr")) {
        if (h->have_descr)
            goto repeated;
        h->have_descr = 1;
        skip_space(c);
        if (c->p < c->end && (*c->p == '[' || *c->p == '{'))
            return clf__fail(
                CLF_EDTYPE,
                "%s: header 'descr' is a structured dtype; "
                "only '<f4', '<i4', '<i8', '|u1' and '|b1' are supported",
                path);
        if (parse_string(c, &s, &len) != 0)
            return clf__fail(CLF_EFORMAT, "%s: header 'descr' is not a string",
                             path);
        snprintf(h->descr, sizeof h->descr, "%.*s", (int)len, s);
        if (word_is(s, len, "<f4")) {
            h->kind = NPY_F4;
            h->itemsize = 4;
        } else if (word_is(s, len, "<i4")) {
            h->kind = NPY_I4;
            h->itemsize = 4;
        } else if (word_is(s, len, "<i8")) {
            h->kind = NPY_I8;
            h->itemsize = 8;
        } else if (word_is(s, len, "|u1")) {
            h->kind = NPY_U1;
            h->itemsize = 1;
        } else if (word_is(s, len, "|b1")) {
            h->kind = NPY_B1;
            h->itemsize = 1;
        } else {
            h->itemsize = 0; /* reported once the whole header parses */
        }
        return 0;
    }
    if (word_is(key, klen, "fortran_order")) {
        if (h->have_fortran)
            goto repeated;
        h->have_fortran = 1;
        skip_space(c);
        if ((size_t)(c->end - c->p) >= 4 && memcmp(c->p, "True", 4) == 0) {
            h->fortran = 1;
            c->p += 4;
        } else if ((size_t)(c->end - c->p) >= 5 &&
                   memcmp(c->p, "False", 5) == 0) {
            h->fortran = 0;
            c->p += 5;
        } else {
            return clf__fail(CLF_EFORMAT,
                             "%s: header 'fortran_order' is neither True "
                             "nor False",
                             path);
        }
        return 0;
    }
    if (word_is(key, klen, "shape")) {
        if (h->have_shape)
            goto repeated;
        h->have_shape = 1;
        return parse_shape(c, path, h);
    }
    return clf__fail(CLF_EFORMAT, "%s: header has an unknown key '%.*s'", path,
                     (int)(klen > 40 ? 40 : klen), key);
repeated:
    return clf__fail(CLF_EFORMAT, "%s: header repeats the key '%.*s'", path,
                     (int)klen, key);
}

/* The keys every header needs, with values this reader supports. */
static int
header_complete(const struct npy_header *h, const char *path)
{
    if (!h->have_descr)
        return clf__fail(CLF_EFORMAT, "%s: header lacks 'descr'", path);
    if (!h->have_fortran)
        return clf__fail(CLF_EFORMAT, "%s: header lacks 'fortran_order'", path);
    if (!h->have_shape)
        return clf__fail(CLF_EFORMAT, "%s: header lacks 'shape'", path);
    if (h->itemsize == 0)
        return clf__fail(CLF_EDTYPE,
                         "%s: header 'descr' '%s' is not supported; only "
                         "'<f4', '<i4', '<i8', '|u1' and '|b1' are",
                         path, h->descr);
    if (h->fortran)
        return clf__fail(CLF_EDTYPE,
                         "%s: header 'fortran_order' is True; only C order "
                         "is supported",
                         path);
    return 0;
}

/* What follows the dict: padding, then the newline that ends the header.
 * Bytes after that newline mean the declared length reaches into the data
 * (the data would be read from the wrong place). */
static int
header_tail(struct cursor *c, const char *path, size_t hlen, const char *text)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r'))
        c->p++;
    if (c->p < c->end && *c->p == '\n' && c->p + 1 < c->end)
        return clf__fail(CLF_EFORMAT,
                         "%s: header length %zu reaches into the data (the "
                         "header ends with its newline after %zu bytes)",
                         path, hlen, (size_t)(c->p + 1 - text));
    skip_space(c);
    if (c->p != c->end)
        return clf__fail(CLF_EFORMAT,
                         "%s: header has characters after the dict", path);
    return 0;
}

/* The header dict, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * followed by spaces and a newline. */
static int
parse_header(const char *text, size_t len, const char *path,
             struct npy_header *h)
{
    struct cursor c = {text, text + len};
    int rc;

    memset(h, 0, sizeof *h);
    if (!take(&c, '{'))
        return clf__fail(CLF_EFORMAT, "%s: header is not a Python dict", path);
    for (;;) {
        const char *key;
        size_t klen;

        if (take(&c, '}'))
            break;
        if (parse_string(&c, &key, &klen) != 0)
            return clf__fail(CLF_EFORMAT, "%s: header dict key is not a string",
                             path);
        if (!take(&c, ':'))
            return clf__fail(CLF_EFORMAT,
                             "%s: header lacks ':' after the key '%.*s'", path,
                             (int)(klen > 40 ? 40 : klen), key);
        rc = parse_value(&c, path, key, klen, h);
        if (rc != 0)
            return rc;
        /* A comma may trail the last entry. */
        if (!take(&c, ',')) {
            if (!take(&c, '}'))
                return clf__fail(CLF_EFORMAT,
                                 "%s: header dict lacks ',' or '}' after "
                                 "'%.*s'",
                                 path, (int)(klen > 40 ? 40 : klen), key);
            break;
        }
    }
    rc = header_tail(&c, path, len, text);
    return rc != 0 ? rc : header_complete(h, path);
}

static int
read_error(const char *path)
{
    return clf__fail(CLF_EIO, "%s: read failed: %s", path, strerror(errno));
}

static unsigned long long
load_le(const unsigned char *b, size_t n)
{
    unsigned long long v = 0;

    while (n-- > 0)
        v = (v << 8) | b[n];
    return v;
}

/* Converts count raw little-endian items at buf in place into host floats or
 * long longs.  Widening int32 runs backwards so that each output element
 * overwrites only input elements that were already converted. */
static void
convert(void *buf, size_t count, enum npy_kind kind)
{
    unsigned char *raw = buf;
    size_t i;

    if (kind == NPY_F4) {
        float *dst = buf;
        for (i = 0; i < count; i++) {
            uint32_t u = (uint32_t)load_le(raw + 4 * i, 4);
            memcpy(&dst[i], &u, sizeof u);
        }
    } else if (kind == NPY_I8) {
        long long *dst = buf;
        for (i = 0; i < count; i++) {
            unsigned long long u = load_le(raw + 8 * i, 8);
            long long v;
            /* Two's complement without relying on an implementation-
             * defined unsigned-to-signed conversion. */
            if (u > (unsigned long long)LLONG_MAX)
                v = -(long long)(~u) - 1;
            else
                v = (long long)u;
            dst[i] = v;
        }
    } else if (kind == NPY_U1 || kind == NPY_B1) {
        long long *dst = buf; /* backwards, as below */
        for (i = count; i-- > 0;)
            dst[i] = kind == NPY_B1 ? raw[i] != 0 : (long long)raw[i];
    } else {
        long long *dst = buf;
        for (i = count; i-- > 0;) {
            uint32_t u = (uint32_t)load_le(raw + 4 * i, 4);
            long long v =
                u > 0x7fffffffu ? (long long)u - 0x100000000LL : (long long)u;
            dst[i] = v;
        }
    }
}

/* Reads EOF-or-error after a short read as the right status. */
static int
short_read(FILE *f, const char *path, int status, const char *what, size_t n)
{
    if (ferror(f))
        return read_error(path);
    return clf__fail(status, "%s: %s (%zu bytes)", path, what, n);
}

/* The magic, the version and the header length; start is where the
 * header begins. */
static int
read_preamble(FILE *f, const char *path, size_t *start, size_t *hlen)
{
    unsigned char pre[12];
    size_t got = fread(pre, 1, 10, f);

    if (got < 10)
        return short_read(f, path, CLF_EFORMAT,
                          "file too short for the .npy magic and header "
                          "length",
                          got);
    if (memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return clf__fail(CLF_EFORMAT, "%s: bad magic, not a .npy file", path);
    if (pre[6] == 1 && pre[7] == 0) {
        *start = 10;
        *hlen = (size_t)load_le(pre + 8, 2);
        return 0;
    }
    if ((pre[6] != 2 && pre[6] != 3) || pre[7] != 0)
        return clf__fail(CLF_EFORMAT,
                         "%s: unsupported .npy version %u.%u (1.0, 2.0 and "
                         "3.0 are read)",
                         path, pre[6], pre[7]);
    got = fread(pre + 10, 1, 2, f);
    if (got != 2)
        return short_read(f, path, CLF_EFORMAT,
                          "file too short for the version 2/3 header length",
                          10 + got);
    *start = 12;
    *hlen = (size_t)load_le(pre + 8, 4);
    return 0;
}

/* Reads and parses the header of hlen bytes, which must fit in the file
 * of file_size bytes with start bytes before it. */
static int
read_header(FILE *f, const char *path, size_t start, size_t hlen,
            size_t file_size, struct npy_header *h)
{
    char *text;
    int rc;

    if (hlen > file_size - start)
        return clf__fail(CLF_EFORMAT,
                         "%s: header length %zu runs past the end of the file "
                         "(%zu bytes)",
                         path, hlen, file_size);
    if (hlen > NPY_HEADER_MAX)
        return clf__fail(CLF_EFORMAT,
                         "%s: header length %zu exceeds the %u-byte limit",
                         path, hlen, NPY_HEADER_MAX);
    text = malloc(hlen + 1);
    if (text == NULL)
        return clf__fail(CLF_ENO_MEMORY, "%s: out of host memory", path);
    if (fread(text, 1, hlen, f) != hlen)
        rc = short_read(f, path, CLF_EFORMAT,
                        "header runs past the end of the file; header length",
                        hlen);
    else
        rc = parse_header(text, hlen, path, h);
    free(text);
    return rc;
}

/* The element count and the bytes on disk (nbytes) and in memory
 * (outbytes), checked against the avail bytes after the header. */
static int
data_size(const struct npy_header *h, const char *path, size_t avail,
          size_t *count, size_t *nbytes, size_t *outbytes)
{
    size_t out_item = h->kind == NPY_F4 ? sizeof(float) : sizeof(long long);
    char shape_text[200];
    size_t i;

    clf__format_shape(shape_text, sizeof shape_text, h->shape, h->ndim, 1);
    *count = 1;
    for (i = 0; i < h->ndim; i++)
        if (clf__mul(*count, h->shape[i], count) != 0)
            return clf__fail(CLF_ESIZE_OVERFLOW,
                             "%s: header 'shape' %s overflows size_t", path,
                             shape_text);
    if (clf__mul(*count, h->itemsize, nbytes) != 0 ||
        clf__mul(*count, out_item, outbytes) != 0)
        return clf__fail(CLF_ESIZE_OVERFLOW,
                         "%s: header 'shape' %s of '%s' overflows size_t in "
                         "bytes",
                         path, shape_text, h->descr);
    /* Checking the size first keeps a lying shape from allocating more
     * than the file holds. */
    if (avail < *nbytes)
        return clf__fail(CLF_EFORMAT,
                         "%s: data truncated: shape %s of '%s' needs %zu "
                         "bytes, the file holds %zu",
                         path, shape_text, h->descr, *nbytes, avail);
    if (avail > *nbytes)
        return clf__fail(CLF_EFORMAT,
                         "%s: %zu trailing bytes after the data of shape %s",
                         path, avail - *nbytes, shape_text);
    return 0;
}

/* Reads nbytes of data into a fresh buffer of outbytes (one at least, so
 * that a zero-size array still has a non-NULL pointer) and converts it. */
static int
read_data(FILE *f, const char *path, const struct npy_header *h, size_t count,
          size_t nbytes, size_t outbytes, void **out)
{
    void *buf = malloc(outbytes > 0 ? outbytes : 1);
    size_t got;

    if (buf == NULL)
        return clf__fail(CLF_ENO_MEMORY,
                         "%s: out of host memory for %zu bytes of data", path,
                         outbytes);
    /* Read into the start of the output buffer and widen in place.  The
     * file may have changed since its size was taken. */
    got = fread(buf, 1, nbytes, f);
    if (got != nbytes || fgetc(f) != EOF || ferror(f)) {
        int rc = got != nbytes || ferror(f)
                     ? short_read(f, path, CLF_EFORMAT,
                                  "data truncated; it holds", got)
                     : clf__fail(CLF_EFORMAT,
                                 "%s: trailing bytes after the data", path);
        free(buf);
        return rc;
    }
    convert(buf, count, h->kind);
    *out = buf;
    return 0;
}

static int
load_file(FILE *f, const char *path, clf_array *out)
{
    struct npy_header h;
    struct stat sb;
    size_t start = 0, hlen = 0, size, count = 0, nbytes = 0, outbytes = 0;
    void *buf = NULL;

    if (fstat(fileno(f), &sb) != 0)
        return clf__fail(CLF_EIO, "%s: cannot inspect: %s", path,
                         strerror(errno));
    size = (size_t)sb.st_size;
    if ((unsigned long long)sb.st_size != (unsigned long long)size)
        return clf__fail(CLF_ESIZE_OVERFLOW, "%s: file too large", path);
    TRY(read_preamble(f, path, &start, &hlen));
    TRY(read_header(f, path, start, hlen, size, &h));
    TRY(data_size(&h, path, size - start - hlen, &count, &nbytes, &outbytes));
    TRY(read_data(f, path, &h, count, nbytes, outbytes, &buf));
    if (h.kind == NPY_F4)
        out->data = buf;
    else
        out->ids = buf;
    out->ndim = h.ndim;
    memcpy(out->shape, h.shape, sizeof h.shape);
    out->count = count;
    return 0;
}

CLF_EXTERN int
clf_npy_load(const char *path, clf_array *out)
{
    FILE *f = NULL;
    int rc;

    if (out == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "out is NULL");
    memset(out, 0, sizeof *out);
    if (path == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "path is NULL");
    rc = clf__file_open_read(path, "array", &f);
    if (rc != 0)
        return rc;
    rc = load_file(f, path, out);
    fclose(f);
    return rc;
}

/* Writes all of buf or fails with errno set. */
static int
write_all(FILE *f, const void *buf, size_t len)
{
    if (len > 0 && fwrite(buf, 1, len, f) != len) {
        if (errno == 0)
            errno = EIO;
        return -1;
    }
    return 0;
}

static int
write_npy(FILE *f, const char *header, size_t hlen, const float *data,
          size_t count)
{
    unsigned char chunk[4096];
    unsigned char pre[10];
    size_t i, n;

    memcpy(pre, NPY_MAGIC, NPY_MAGIC_LEN);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);
    if (write_all(f, pre, sizeof pre) != 0 || write_all(f, header, hlen) != 0)
        return -1;
    n = 0;
    for (i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &data[i], sizeof u);
        chunk[n++] = (unsigned char)(u & 0xff);
        chunk[n++] = (unsigned char)((u >> 8) & 0xff);
        chunk[n++] = (unsigned char)((u >> 16) & 0xff);
        chunk[n++] = (unsigned char)(u >> 24);
        if (n == sizeof chunk) {
            if (write_all(f, chunk, n) != 0)
                return -1;
            n = 0;
        }
    }
    if (write_all(f, chunk, n) != 0 || fflush(f) != 0)
        return -1;
    /* Without this the rename can reach the disk before the data, and a
     * crash would leave an empty file where the old one was. */
    if (fsync(fileno(f)) != 0 && errno != EINVAL)
        return -1;
    return 0;
}

/* The header of a float32 array of that shape, padded so the data starts
 * at a multiple of 64 bytes; *count its elements.  Checks the arguments. */
static int
npy_header(const size_t *shape, size_t ndim, char *header, size_t cap,
           size_t *hlen, size_t *count)
{
    char shape_text[200];
    size_t nbytes, i, pad;
    int n;

    if (shape == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "shape is NULL");
    if (ndim == 0 || ndim > NPY_MAX_DIMS)
        return clf__fail(CLF_EBAD_SIZE, "ndim %zu is not in 1..%d", ndim,
                         NPY_MAX_DIMS);
    *count = 1;
    for (i = 0; i < ndim; i++)
        if (clf__mul(*count, shape[i], count) != 0)
            break;
    clf__format_shape(shape_text, sizeof shape_text, shape, ndim, 1);
    if (i < ndim || clf__mul(*count, sizeof(float), &nbytes) != 0)
        return clf__fail(CLF_ESIZE_OVERFLOW, "shape %s overflows size_t",
                         shape_text);
    n = snprintf(header, cap,
                 "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }",
                 shape_text);
    if (n < 0 || (size_t)n >= cap - NPY_ALIGN - 1)
        return clf__fail(CLF_EBAD_SIZE, "shape %s is too long to write",
                         shape_text);
    /* Pad with spaces and end with a newline so that the data starts at a
     * multiple of 64 bytes, as NumPy does for memory-mapped reads. */
    *hlen = (size_t)n + 1;
    pad = (NPY_ALIGN - (10 + *hlen) % NPY_ALIGN) % NPY_ALIGN;
    memset(header + n, ' ', pad);
    *hlen += pad;
    header[*hlen - 1] = '\n';
    return 0;
}

/* A temporary file beside path, created exclusively without following a
 * link: its descriptor, and its malloc'd name in *tmp. */
static int
npy_temp(const char *path, char **tmp, int *fd)
{
    unsigned attempt;
    int rc;

    *tmp = malloc(strlen(path) + 64);
    if (*tmp == NULL)
        return clf__fail(CLF_ENO_MEMORY, "out of host memory");
    /* O_EXCL | O_NOFOLLOW rather than mkstemp, so that a planted link is
     * never written through and the file gets the usual permissions (0666
     * less the umask) instead of 0600. */
    for (attempt = 0; attempt < 100; attempt++) {
        sprintf(*tmp, "%s.tmp.%ld.%u", path, (long)getpid(), attempt);
        *fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);
        if (*fd >= 0 || errno != EEXIST)
            break;
    }
    if (*fd >= 0)
        return 0;
    rc = clf__fail(CLF_EIO, "%s: cannot create a temporary file: %s", path,
                   strerror(errno));
    free(*tmp);
    *tmp = NULL;
    return rc;
}

CLF_EXTERN int
clf_npy_save(const char *path, const float *data, const size_t *shape,
             size_t ndim)
{
    char header[512];
    char *tmp = NULL;
    FILE *f = NULL;
    struct stat st;
    size_t count = 0, hlen = 0;
    int fd = -1, err;

    if (path == NULL)
        return clf__fail(CLF_ENULL_ARGUMENT, "path is NULL");
    CLF_TRY(npy_header(shape, ndim, header, sizeof header, &hlen, &count));
    /* An empty array may come without storage. */
    if (data == NULL && count > 0)
        return clf__fail(CLF_ENULL_ARGUMENT, "data is NULL");
    /* rename() would replace a device node, FIFO or symlink at path, not
     * write into it; refuse them rather than surprise the caller. */
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return clf__fail(CLF_EIO,
                         "%s exists and is not a regular file; refusing to "
                         "replace it",
                         path);
    CLF_TRY(npy_temp(path, &tmp, &fd));
    f = fdopen(fd, "wb");
    if (f == NULL) {
        err = errno;
        close(fd);
        goto fail;
    }
    errno = 0;
    if (write_npy(f, header, hlen, data, count) != 0) {
        err = errno;
        fclose(f);
        goto fail;
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        err = errno;
        goto fail;
    }
    free(tmp);
    return 0;
fail:
    remove(tmp);
    free(tmp);
    return clf__fail(CLF_EIO, "%s: write failed: %s", path,
                     strerror(err != 0 ? err : EIO));
}

CLF_EXTERN void
clf_array_free(clf_array *a)
{
    if (a == NULL)
        return;
    free(a->data);
    free(a->ids);
    memset(a, 0, sizeof *a);
}
