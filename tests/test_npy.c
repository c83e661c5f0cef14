/* The .npy reader and writer: round trips, hand-built files of every
 * supported version and dtype, and malformed files, each of which must fail
 * with the right status and a message naming what is wrong. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

/* Called outside any test, so it cannot use ck_assert. */
static int
make_dir(void)
{
    const char *base = getenv("TMPDIR");

    snprintf(dir, sizeof dir, "%s/clf-npy-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    return mkdtemp(dir) != NULL ? 0 : -1;
}

/* Removes everything in the directory (a failed test may leave files). */
static void
remove_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];

    if (d != NULL) {
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

static const char *
path_of(const char *name)
{
    static char path[512];

    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static const char *
write_file(const char *name, const void *bytes, size_t len)
{
    const char *path = path_of(name);
    FILE *f = fopen(path, "wb");

    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

static unsigned char *
read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    buf = tu_malloc((size_t)n);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* A .npy file of the given version with header dict text (padded with
 * spaces and a newline to a multiple of 64, as NumPy writes it) and raw
 * data.  Returns the length; buf must be large enough. */
static size_t
build(unsigned char *buf, int major, const char *dict, const void *data,
      size_t dlen)
{
    size_t pre = major == 1 ? 10 : 12, n = strlen(dict), hlen, pad;

    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    pad = (64 - (pre + n + 1) % 64) % 64;
    hlen = n + pad + 1;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    if (major != 1) {
        buf[10] = 0;
        buf[11] = 0;
    }
    memcpy(buf + pre, dict, n);
    memset(buf + pre + n, ' ', pad);
    buf[pre + hlen - 1] = '\n';
    if (dlen > 0)
        memcpy(buf + pre + hlen, data, dlen);
    return pre + hlen + dlen;
}

static float
bits_to_float(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof f);
    return f;
}

static void
assert_empty(const clf_array *a)
{
    ck_assert_ptr_null(a->data);
    ck_assert_ptr_null(a->ids);
    ck_assert_uint_eq(a->ndim, 0);
    ck_assert_uint_eq(a->count, 0);
}

/* Loads the file and asserts the status, that the array was left empty and
 * that the message contains what. */
static void
expect_load_fail(const char *path, int status, const char *what)
{
    clf_array a;
    int rc;

    memset(&a, 0x5a, sizeof a); /* poison: the loader must empty it */
    rc = clf_npy_load(path, &a);
    ck_assert_msg(rc == status, "expected %s, got %s (%s)",
                  clf_status_name(status), clf_status_name(rc),
                  clf_last_error());
    assert_empty(&a);
    ck_assert_msg(strstr(clf_last_error(), what) != NULL,
                  "message \"%s\" does not name \"%s\"", clf_last_error(),
                  what);
}

/* A header dict with the given dtype and shape text, data of dlen bytes. */
static void
expect_dict_fail(const char *dict, size_t dlen, int status, const char *what)
{
    unsigned char buf[1024], data[64];
    size_t n;

    memset(data, 0, sizeof data);
    ck_assert_uint_le(dlen, sizeof data);
    n = build(buf, 1, dict, data, dlen);
    expect_load_fail(write_file("bad.npy", buf, n), status, what);
}

START_TEST(npy_roundtrip_is_bit_exact)
{
    static const size_t shapes[][3] = {{5, 0, 0}, {3, 4, 0}, {2, 3, 4}};
    static const size_t ndims[] = {1, 2, 3};
    size_t s, i;

    for (s = 0; s < 3; s++) {
        size_t count = 1;
        float *x;
        clf_array a;

        for (i = 0; i < ndims[s]; i++)
            count *= shapes[s][i];
        x = tu_malloc(count * sizeof *x);
        tu_fill(x, count, 17 + s, -3.0f, 3.0f);
        /* Values whose bits a careless conversion would change. */
        x[0] = bits_to_float(0x7fc00123u); /* NaN with a payload */
        x[1] = -0.0f;
        x[2] = bits_to_float(0x00000001u); /* smallest subnormal */
        x[3] = -INFINITY;
        ck_assert_int_eq(
            clf_npy_save(path_of("rt.npy"), x, shapes[s], ndims[s]), 0);
        ck_assert_int_eq(clf_npy_load(path_of("rt.npy"), &a), 0);
        ck_assert_ptr_nonnull(a.data);
        ck_assert_ptr_null(a.ids);
        ck_assert_uint_eq(a.ndim, ndims[s]);
        for (i = 0; i < ndims[s]; i++)
            ck_assert_uint_eq(a.shape[i], shapes[s][i]);
        ck_assert_uint_eq(a.count, count);
        ck_assert_mem_eq(a.data, x, count * sizeof *x);
        clf_array_free(&a);
        assert_empty(&a);
        free(x);
    }
    unlink(path_of("rt.npy"));
}
END_TEST

START_TEST(npy_save_writes_aligned_v1_header)
{
    const float x[3] = {1.0f, -2.0f, 0.5f};
    const size_t shape1[1] = {3}, shape2[2] = {1, 3};
    const char *dict =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    unsigned char *b;
    size_t len, hlen;

    ck_assert_int_eq(clf_npy_save(path_of("h.npy"), x, shape1, 1), 0);
    b = read_all(path_of("h.npy"), &len);
    ck_assert_mem_eq(b, "\x93NUMPY\x01\x00", 8);
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    ck_assert_uint_eq((10 + hlen) % 64, 0);
    ck_assert_uint_eq(len, 10 + hlen + 12);
    ck_assert_int_eq(b[10 + hlen - 1], '\n');
    ck_assert_mem_eq(b + 10, dict, strlen(dict));
    /* Spaces pad the dict up to the newline. */
    ck_assert_uint_eq(strspn((char *)b + 10 + strlen(dict), " "),
                      hlen - 1 - strlen(dict));
    /* Little-endian bytes of 1.0f, -2.0f and 0.5f. */
    ck_assert_mem_eq(b + 10 + hlen,
                     "\x00\x00\x80\x3f\x00\x00\x00\xc0\x00\x00\x00\x3f", 12);
    free(b);

    ck_assert_int_eq(clf_npy_save(path_of("h.npy"), x, shape2, 2), 0);
    b = read_all(path_of("h.npy"), &len);
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    ck_assert_uint_eq((10 + hlen) % 64, 0);
    ck_assert_ptr_nonnull(strstr((char *)b + 10, "'shape': (1, 3), }"));
    free(b);
    unlink(path_of("h.npy"));
}
END_TEST

START_TEST(npy_save_replaces_without_temp_files)
{
    const float x[4] = {1, 2, 3, 4}, y[2] = {5, 6};
    const size_t s4[1] = {4}, s2[1] = {2};
    size_t before = tu_dir_entries(dir);
    clf_array a;

    ck_assert_int_eq(clf_npy_save(path_of("r.npy"), x, s4, 1), 0);
    ck_assert_int_eq(clf_npy_save(path_of("r.npy"), y, s2, 1), 0);
    ck_assert_uint_eq(tu_dir_entries(dir), before + 1);
    ck_assert_int_eq(clf_npy_load(path_of("r.npy"), &a), 0);
    ck_assert_uint_eq(a.count, 2);
    ck_assert_mem_eq(a.data, y, sizeof y);
    clf_array_free(&a);
    unlink(path_of("r.npy"));
}
END_TEST

START_TEST(npy_save_rejects_bad_arguments)
{
    const float x[2] = {1, 2};
    const size_t s[9] = {2, 1, 1, 1, 1, 1, 1, 1, 1};
    const size_t big[2] = {SIZE_MAX, 2}, bytes[1] = {SIZE_MAX / 2};
    const size_t empty[1] = {0};
    size_t before = tu_dir_entries(dir);
    clf_array a;
    int rc;

    ck_assert_int_eq(clf_npy_save(NULL, x, s, 1), CLF_ENULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "path"));
    ck_assert_int_eq(clf_npy_save(path_of("a.npy"), NULL, s, 1),
                     CLF_ENULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "data"));
    ck_assert_int_eq(clf_npy_save(path_of("a.npy"), x, NULL, 1),
                     CLF_ENULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "shape"));
    ck_assert_int_eq(clf_npy_save(path_of("a.npy"), x, s, 0), CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "ndim 0"));
    ck_assert_int_eq(clf_npy_save(path_of("a.npy"), x, s, 9), CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "ndim 9"));
    ck_assert_int_eq(clf_npy_save(path_of("a.npy"), x, big, 2),
                     CLF_ESIZE_OVERFLOW);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "shape"));
    ck_assert_int_eq(clf_npy_save(path_of("a.npy"), x, bytes, 1),
                     CLF_ESIZE_OVERFLOW);
    ck_assert_uint_eq(tu_dir_entries(dir), before); /* nothing left behind */

    /* A directory that does not exist: the message gives errno's text. */
    rc = clf_npy_save(path_of("no/such/dir/a.npy"), x, s, 1);
    ck_assert_int_eq(rc, CLF_EIO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "no/such/dir/a.npy"));
    ck_assert_ptr_nonnull(strstr(clf_last_error(), strerror(ENOENT)));

    /* An empty array needs no data, and loads back empty. */
    ck_assert_int_eq(clf_npy_save(path_of("e.npy"), NULL, empty, 1), 0);
    ck_assert_int_eq(clf_npy_load(path_of("e.npy"), &a), 0);
    ck_assert_uint_eq(a.ndim, 1);
    ck_assert_uint_eq(a.shape[0], 0);
    ck_assert_uint_eq(a.count, 0);
    ck_assert_ptr_nonnull(a.data);
    clf_array_free(&a);
    unlink(path_of("e.npy"));
}
END_TEST

START_TEST(npy_load_reads_every_version)
{
    const float want[3] = {1.5f, -0.25f, 3.0e-39f};
    unsigned char buf[256], data[12];
    int major;
    size_t i, n;

    for (i = 0; i < 3; i++) {
        uint32_t u;
        memcpy(&u, &want[i], 4);
        tu_put_le(data + 4 * i, u, 4);
    }
    for (major = 1; major <= 3; major++) {
        clf_array a;
        n = build(buf, major,
                  "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                  data, sizeof data);
        ck_assert_int_eq(clf_npy_load(write_file("v.npy", buf, n), &a), 0);
        ck_assert_uint_eq(a.ndim, 1);
        ck_assert_uint_eq(a.shape[0], 3);
        ck_assert_uint_eq(a.count, 3);
        ck_assert_mem_eq(a.data, want, sizeof want);
        clf_array_free(&a);
    }
    unlink(path_of("v.npy"));
}
END_TEST

START_TEST(npy_load_widens_int32)
{
    const long long want[6] = {0,      1, -1, 2147483647LL, -2147483647LL - 1,
                               -123456};
    unsigned char buf[256], data[24];
    clf_array a;
    size_t i, n;

    for (i = 0; i < 6; i++)
        tu_put_le(data + 4 * i, (unsigned long long)want[i] & 0xffffffffu, 4);
    n = build(buf, 1,
              "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }",
              data, sizeof data);
    ck_assert_int_eq(clf_npy_load(write_file("i4.npy", buf, n), &a), 0);
    ck_assert_ptr_null(a.data);
    ck_assert_ptr_nonnull(a.ids);
    ck_assert_uint_eq(a.ndim, 2);
    ck_assert_uint_eq(a.shape[0], 2);
    ck_assert_uint_eq(a.shape[1], 3);
    ck_assert_uint_eq(a.count, 6);
    for (i = 0; i < 6; i++)
        ck_assert_int_eq(a.ids[i], want[i]);
    clf_array_free(&a);
    unlink(path_of("i4.npy"));
}
END_TEST

/* uint8 and bool arrays (key masks as NumPy writes them) widen to ids;
 * bools read as 0 and 1 whatever nonzero byte the file holds. */
START_TEST(npy_load_widens_bytes_and_bools)
{
    const unsigned char data[5] = {0, 1, 2, 255, 7};
    const long long want_u1[5] = {0, 1, 2, 255, 7},
                    want_b1[5] = {0, 1, 1, 1, 1};
    unsigned char buf[256];
    clf_array a;
    size_t i, n;

    n = build(buf, 1,
              "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", data,
              sizeof data);
    ck_assert_int_eq(clf_npy_load(write_file("u1.npy", buf, n), &a), 0);
    ck_assert_ptr_null(a.data);
    ck_assert_ptr_nonnull(a.ids);
    ck_assert_uint_eq(a.count, 5);
    for (i = 0; i < 5; i++)
        ck_assert_int_eq(a.ids[i], want_u1[i]);
    clf_array_free(&a);
    n = build(buf, 1,
              "{'descr': '|b1', 'fortran_order': False, 'shape': (1, 5), }",
              data, sizeof data);
    ck_assert_int_eq(clf_npy_load(write_file("b1.npy", buf, n), &a), 0);
    ck_assert_uint_eq(a.ndim, 2);
    for (i = 0; i < 5; i++)
        ck_assert_int_eq(a.ids[i], want_b1[i]);
    clf_array_free(&a);
    unlink(path_of("u1.npy"));
    unlink(path_of("b1.npy"));
}
END_TEST

START_TEST(npy_load_reads_int64)
{
    const long long want[4] = {LLONG_MIN, -1, LLONG_MAX, 0x0123456789abcdefLL};
    unsigned char buf[256], data[32];
    clf_array a;
    size_t i, n;

    for (i = 0; i < 4; i++)
        tu_put_le(data + 8 * i, (unsigned long long)want[i], 8);
    n = build(buf, 2,
              "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", data,
              sizeof data);
    ck_assert_int_eq(clf_npy_load(write_file("i8.npy", buf, n), &a), 0);
    ck_assert_ptr_null(a.data);
    ck_assert_ptr_nonnull(a.ids);
    ck_assert_uint_eq(a.count, 4);
    for (i = 0; i < 4; i++)
        ck_assert_int_eq(a.ids[i], want[i]);
    clf_array_free(&a);
    unlink(path_of("i8.npy"));
}
END_TEST

START_TEST(npy_load_reads_0d_and_empty)
{
    unsigned char buf[256], data[4] = {0x00, 0x00, 0x20, 0x41}; /* 10.0f */
    clf_array a;
    size_t n;

    n = build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
              data, 4);
    ck_assert_int_eq(clf_npy_load(write_file("s.npy", buf, n), &a), 0);
    ck_assert_uint_eq(a.ndim, 0);
    ck_assert_uint_eq(a.count, 1);
    ck_assert(a.data[0] == 10.0f);
    clf_array_free(&a);

    n = build(buf, 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0), }",
              NULL, 0);
    ck_assert_int_eq(clf_npy_load(write_file("s.npy", buf, n), &a), 0);
    ck_assert_uint_eq(a.ndim, 2);
    ck_assert_uint_eq(a.shape[0], 3);
    ck_assert_uint_eq(a.shape[1], 0);
    ck_assert_uint_eq(a.count, 0);
    ck_assert_ptr_nonnull(a.data); /* exactly one pointer, even when empty */
    clf_array_free(&a);

    n = build(buf, 1,
              "{'descr': '<i8', 'fortran_order': False, 'shape': (0,), }", NULL,
              0);
    ck_assert_int_eq(clf_npy_load(write_file("s.npy", buf, n), &a), 0);
    ck_assert_uint_eq(a.count, 0);
    ck_assert_ptr_null(a.data);
    ck_assert_ptr_nonnull(a.ids);
    clf_array_free(&a);
    unlink(path_of("s.npy"));
}
END_TEST

START_TEST(npy_load_accepts_header_variants)
{
    /* Other writers: double quotes, another key order, no trailing comma,
     * Python 2 longs, odd spacing. */
    static const char *const dicts[] = {
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 2)}",
        "{'shape': (2, 2), 'fortran_order': False, 'descr': '<f4'}",
        "{'descr':'<f4','fortran_order':False,'shape':(2,2,),}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 2L), }",
        "  { 'descr' : '<f4' ,\t'fortran_order' : False , 'shape' : ( 2 , 2 "
        ") }  ",
    };
    const float want[4] = {1, 2, 3, 4};
    unsigned char buf[256], data[16];
    size_t i, n;

    for (i = 0; i < 4; i++) {
        uint32_t u;
        memcpy(&u, &want[i], 4);
        tu_put_le(data + 4 * i, u, 4);
    }
    for (i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        clf_array a;
        n = build(buf, 1, dicts[i], data, sizeof data);
        ck_assert_msg(clf_npy_load(write_file("var.npy", buf, n), &a) == 0,
                      "%s: %s", dicts[i], clf_last_error());
        ck_assert_uint_eq(a.ndim, 2);
        ck_assert_uint_eq(a.shape[0], 2);
        ck_assert_uint_eq(a.shape[1], 2);
        ck_assert_mem_eq(a.data, want, sizeof want);
        clf_array_free(&a);
    }
    unlink(path_of("var.npy"));
}
END_TEST

START_TEST(npy_load_rejects_bad_magic)
{
    unsigned char buf[256];
    size_t n = build(buf, 1,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (), "
                     "}",
                     "\0\0\0\0", 4);

    buf[1] = 'n';
    expect_load_fail(write_file("m.npy", buf, n), CLF_EFORMAT, "magic");
    expect_load_fail(write_file("m.npy", "PK\x03\x04 not npy at all", 20),
                     CLF_EFORMAT, "magic");
    unlink(path_of("m.npy"));
}
END_TEST

START_TEST(npy_load_rejects_unsupported_version)
{
    static const unsigned char versions[][2] = {
        {0, 0}, {1, 1}, {4, 0}, {2, 1}, {255, 0}};
    unsigned char buf[256];
    size_t i, n = build(buf, 1,
                        "{'descr': '<f4', 'fortran_order': False, 'shape': "
                        "(), }",
                        "\0\0\0\0", 4);

    for (i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        buf[6] = versions[i][0];
        buf[7] = versions[i][1];
        expect_load_fail(write_file("ver.npy", buf, n), CLF_EFORMAT, "version");
    }
    unlink(path_of("ver.npy"));
}
END_TEST

/* Every proper prefix of a valid file fails as malformed, never reads
 * garbage and never succeeds. */
START_TEST(npy_load_rejects_every_truncation)
{
    unsigned char buf[256], data[24];
    size_t n, len;
    int major;

    memset(data, 0x3f, sizeof data);
    for (major = 1; major <= 2; major++) {
        n = build(buf, major,
                  "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "
                  "}",
                  data, sizeof data);
        for (len = 0; len < n; len++) {
            const char *what = len < (major == 1 ? 10u : 12u) ? "short"
                               : len < n - sizeof data        ? "header length"
                                                              : "truncated";
            expect_load_fail(write_file("t.npy", buf, len), CLF_EFORMAT, what);
        }
    }
    unlink(path_of("t.npy"));
}
END_TEST

START_TEST(npy_load_rejects_header_length_past_eof)
{
    unsigned char buf[256];
    size_t n = build(buf, 1,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (), "
                     "}",
                     "\0\0\0\0", 4);

    tu_put_le(buf + 8, 0xffff, 2);
    expect_load_fail(write_file("hl.npy", buf, n), CLF_EFORMAT,
                     "header length 65535");
    n = build(buf, 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
              "\0\0\0\0", 4);
    tu_put_le(buf + 8, 0xffffffffu, 4);
    expect_load_fail(write_file("hl.npy", buf, n), CLF_EFORMAT,
                     "header length 4294967295");
    unlink(path_of("hl.npy"));
}
END_TEST

/* A header length that takes in part of the data: whatever the data bytes
 * are (spaces and newlines included), the error names the length. */
START_TEST(npy_load_rejects_header_length_into_data)
{
    static const unsigned char fills[] = {0x3f, ' ', '\n', '}'};
    unsigned char buf[256], data[16];
    size_t n, hlen, f, extra;
    int major;

    for (major = 1; major <= 3; major += 2)
        for (f = 0; f < sizeof fills; f++)
            for (extra = 1; extra <= sizeof data; extra += 5) {
                char what[40];
                memset(data, fills[f], sizeof data);
                n = build(buf, major,
                          "{'descr': '<f4', 'fortran_order': False, "
                          "'shape': (4,), }",
                          data, sizeof data);
                hlen = n - sizeof data - (major == 1 ? 10 : 12) + extra;
                tu_put_le(buf + 8, hlen, major == 1 ? 2 : 4);
                snprintf(what, sizeof what, "header length %zu reaches", hlen);
                expect_load_fail(write_file("hd.npy", buf, n), CLF_EFORMAT,
                                 what);
            }
    unlink(path_of("hd.npy"));
}
END_TEST

START_TEST(npy_load_rejects_other_dtypes)
{
    expect_dict_fail("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), "
                     "}",
                     4, CLF_EDTYPE, "'>f4'");
    expect_dict_fail("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), "
                     "}",
                     8, CLF_EDTYPE, "'<f8'");
    expect_dict_fail("{'descr': '|i1', 'fortran_order': False, 'shape': (1,), "
                     "}",
                     1, CLF_EDTYPE, "'|i1'");
    expect_dict_fail("{'descr': '<f2', 'fortran_order': False, 'shape': (1,), "
                     "}",
                     2, CLF_EDTYPE, "'<f2'");
    expect_dict_fail("{'descr': [('a', '<f4')], 'fortran_order': False, "
                     "'shape': (1,), }",
                     4, CLF_EDTYPE, "structured");
    expect_dict_fail("{'descr': '<f4', 'fortran_order': True, 'shape': (2, "
                     "2), }",
                     16, CLF_EDTYPE, "fortran_order");
    unlink(path_of("bad.npy"));
}
END_TEST

START_TEST(npy_load_rejects_wrong_data_size)
{
    expect_dict_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
                     "3), }",
                     20, CLF_EFORMAT, "truncated");
    expect_dict_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
                     "3), }",
                     28, CLF_EFORMAT, "trailing bytes");
    expect_dict_fail("{'descr': '<i8', 'fortran_order': False, 'shape': (), "
                     "}",
                     4, CLF_EFORMAT, "truncated");
    expect_dict_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (0,), "
                     "}",
                     1, CLF_EFORMAT, "trailing bytes");
    /* A shape that fits size_t but not the file must not be allocated. */
    expect_dict_fail("{'descr': '<f4', 'fortran_order': False, 'shape': "
                     "(1000000000000,), }",
                     8, CLF_EFORMAT, "truncated");
    unlink(path_of("bad.npy"));
}
END_TEST

START_TEST(npy_load_rejects_overflowing_shape)
{
    expect_dict_fail("{'descr': '<f4', 'fortran_order': False, 'shape': "
                     "(4294967296, 4294967296, 16), }",
                     0, CLF_ESIZE_OVERFLOW, "shape");
    expect_dict_fail("{'descr': '<f4', 'fortran_order': False, 'shape': "
                     "(99999999999999999999999,), }",
                     0, CLF_ESIZE_OVERFLOW, "dimension 0");
    /* The element count fits; the byte count does not. */
    expect_dict_fail("{'descr': '<f4', 'fortran_order': False, 'shape': "
                     "(4611686018427387904,), }",
                     0, CLF_ESIZE_OVERFLOW, "bytes");
    /* int32 data fits, but not once widened to long long. */
    expect_dict_fail("{'descr': '<i4', 'fortran_order': False, 'shape': "
                     "(3458764513820540928,), }",
                     0, CLF_ESIZE_OVERFLOW, "bytes");
    unlink(path_of("bad.npy"));
}
END_TEST

START_TEST(npy_load_rejects_too_many_dims)
{
    unsigned char data[4] = {0};
    unsigned char buf[256];
    clf_array a;
    size_t n;

    expect_dict_fail("{'descr': '<f4', 'fortran_order': False, 'shape': (1, "
                     "1, 1, 1, 1, 1, 1, 1, 1), }",
                     4, CLF_EFORMAT, "more than 8 dimensions");
    n = build(buf, 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, "
              "1, 1, 1, 1, 1), }",
              data, 4);
    ck_assert_int_eq(clf_npy_load(write_file("d8.npy", buf, n), &a), 0);
    ck_assert_uint_eq(a.ndim, 8);
    clf_array_free(&a);
    unlink(path_of("bad.npy"));
    unlink(path_of("d8.npy"));
}
END_TEST

START_TEST(npy_load_rejects_malformed_dict)
{
    static const struct {
        const char *dict;
        const char *what;
    } cases[] = {
        {"", "not a Python dict"},
        {"['descr', '<f4']", "not a Python dict"},
        {"{'descr': '<f4', 'fortran_order': False}", "lacks 'shape'"},
        {"{'fortran_order': False, 'shape': (1,)}", "lacks 'descr'"},
        {"{'descr': '<f4', 'shape': (1,)}", "lacks 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}",
         "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 1}", "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, -1)}",
         "dimension 1"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 1)}",
         "comma after dimension 0"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,,)}",
         "dimension 1"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,}",
         "dimension 1"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
         "'fortran_order' is neither"},
        {"{'descr': <f4, 'fortran_order': False, 'shape': (1,)}",
         "'descr' is not a string"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}",
         "after 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
         "unknown key 'x'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
         "'shape': (1,)}",
         "repeats the key 'descr'"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}",
         "':' after the key 'descr'"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}",
         "',' or '}' after 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x",
         "after the dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
         "',' or '}' after 'shape'"},
        {"{descr: '<f4', 'fortran_order': False, 'shape': (1,)}",
         "key is not a string"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}}",
         "after the dict"},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_dict_fail(cases[i].dict, 4, CLF_EFORMAT, cases[i].what);
    unlink(path_of("bad.npy"));
}
END_TEST

START_TEST(npy_load_rejects_nul_in_header)
{
    unsigned char buf[256];
    size_t n = build(buf, 1,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), "
                     "}",
                     "\0\0\0\0", 4);

    buf[10 + 11] = '\0'; /* inside '<f4' */
    expect_load_fail(write_file("nul.npy", buf, n), CLF_EDTYPE, "descr");
    buf[10 + 11] = '<';
    buf[10 + 1] = '\0'; /* where the key's quote was */
    expect_load_fail(write_file("nul.npy", buf, n), CLF_EFORMAT, "key");
    unlink(path_of("nul.npy"));
}
END_TEST

START_TEST(npy_load_rejects_missing_file_and_null)
{
    clf_array a;

    expect_load_fail(path_of("absent.npy"), CLF_EIO, "absent.npy");
    ck_assert_ptr_nonnull(strstr(clf_last_error(), strerror(ENOENT)));
    expect_load_fail(dir, CLF_EIO, dir); /* a directory is unreadable */
    memset(&a, 0x5a, sizeof a);
    ck_assert_int_eq(clf_npy_load(NULL, &a), CLF_ENULL_ARGUMENT);
    assert_empty(&a);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "path"));
    ck_assert_int_eq(clf_npy_load(path_of("absent.npy"), NULL),
                     CLF_ENULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "out"));
}
END_TEST

/* /dev/zero would be read without bound and a FIFO with no writer would
 * block forever; both are refused at once (the alarm turns a hang into a
 * failure). */
START_TEST(npy_load_refuses_device_and_fifo)
{
    const char *fifo = path_of("fifo.npy");

    expect_load_fail("/dev/zero", CLF_EIO, "not a regular file");
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(10);
    expect_load_fail(fifo, CLF_EIO, "fifo.npy");
    alarm(0);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "not a regular file"));
    unlink(fifo);
}
END_TEST

/* Saving never replaces or writes through what is not a regular file: a
 * symlink (its target keeps its bytes), a FIFO, a directory. */
START_TEST(npy_save_refuses_non_regular_targets)
{
    const float v[2] = {1.0f, 2.0f};
    const size_t shape[1] = {2};
    char target[PATH_MAX], link_path[PATH_MAX], fifo[PATH_MAX];
    char sub_dir[PATH_MAX], buf[8] = {0};
    struct stat st;
    FILE *f;

    snprintf(target, sizeof target, "%s", path_of("target.txt"));
    snprintf(link_path, sizeof link_path, "%s", path_of("link.npy"));
    snprintf(fifo, sizeof fifo, "%s", path_of("out_fifo.npy"));
    snprintf(sub_dir, sizeof sub_dir, "%s", path_of("sub.npy"));
    f = fopen(target, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("keep", f);
    fclose(f);
    ck_assert_int_eq(symlink(target, link_path), 0);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(mkdir(sub_dir, 0700), 0);

    ck_assert_int_eq(clf_npy_save(link_path, v, shape, 1), CLF_EIO);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "not a regular file"));
    ck_assert_int_eq(lstat(link_path, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    f = fopen(target, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(buf, 1, sizeof buf, f), 4);
    fclose(f);
    ck_assert_str_eq(buf, "keep");
    ck_assert_int_eq(clf_npy_save(fifo, v, shape, 1), CLF_EIO);
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    ck_assert_int_eq(clf_npy_save(sub_dir, v, shape, 1), CLF_EIO);
    unlink(link_path);
    unlink(target);
    unlink(fifo);
    rmdir(sub_dir);
}
END_TEST

START_TEST(npy_array_free_is_null_safe)
{
    clf_array a;

    clf_array_free(NULL);
    memset(&a, 0, sizeof a);
    clf_array_free(&a);
    assert_empty(&a);
    clf_array_free(&a);
}
END_TEST

static unsigned long long
rng_next(unsigned long long *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random byte changes to valid files must give 0 or a negative status,
 * never a crash, and leave the array empty on failure.  valgrind and the
 * sanitizers make this loop a check of every read too. */
START_TEST(npy_load_survives_mutations)
{
    unsigned char good[3][256], buf[300], data[24];
    size_t len[3], it, k;
    unsigned long long seed = 0x9e3779b97f4a7c15ULL;
    int ok = 0, failed = 0;

    for (k = 0; k < sizeof data; k++)
        data[k] = (unsigned char)(k * 37);
    len[0] = build(good[0], 1,
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
                   "3), }",
                   data, 24);
    len[1] = build(good[1], 2,
                   "{'descr': '<i4', 'fortran_order': False, 'shape': (6,), "
                   "}",
                   data, 24);
    len[2] = build(good[2], 3,
                   "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), "
                   "}",
                   data, 24);
    for (it = 0; it < 2000; it++) {
        size_t which = it % 3, n = len[which], flips, f;
        clf_array a;
        int rc;

        memset(buf, 0, sizeof buf); /* a longer length reads zeros */
        memcpy(buf, good[which], n);
        flips = 1 + rng_next(&seed) % 4;
        for (f = 0; f < flips; f++) {
            /* Mostly in the preamble and header, where parsing happens. */
            static const char syntax[] = "{}()[],:' 0123456789<>fiL-TrueFals";
            size_t span = rng_next(&seed) % 4 == 0 ? n : 80;
            size_t pos = rng_next(&seed) % span;
            if (rng_next(&seed) % 2)
                buf[pos] = (unsigned char)rng_next(&seed);
            else
                buf[pos] = (unsigned char)
                    syntax[rng_next(&seed) % (sizeof syntax - 1)];
        }
        if (rng_next(&seed) % 8 == 0) /* and sometimes a new length */
            n = rng_next(&seed) % (sizeof buf);
        memset(&a, 0x5a, sizeof a);
        rc = clf_npy_load(write_file("fuzz.npy", buf, n), &a);
        ck_assert_int_le(rc, 0);
        if (rc == 0) {
            ck_assert((a.data == NULL) != (a.ids == NULL));
            ck_assert_uint_le(a.ndim, 8);
            ok++;
        } else {
            assert_empty(&a);
            ck_assert_str_ne(clf_last_error(), "");
            failed++;
        }
        clf_array_free(&a);
    }
    /* The loop exercises both outcomes, or it tests little. */
    ck_assert_int_gt(ok, 0);
    ck_assert_int_gt(failed, 0);
    unlink(path_of("fuzz.npy"));
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    int rc;

    if (make_dir() != 0) {
        printf("Bail out! cannot create a directory under %s\n", dir);
        return 1;
    }
    tcase_add_test(tc, npy_roundtrip_is_bit_exact);
    tcase_add_test(tc, npy_save_writes_aligned_v1_header);
    tcase_add_test(tc, npy_save_replaces_without_temp_files);
    tcase_add_test(tc, npy_save_rejects_bad_arguments);
    tcase_add_test(tc, npy_load_reads_every_version);
    tcase_add_test(tc, npy_load_widens_int32);
    tcase_add_test(tc, npy_load_reads_int64);
    tcase_add_test(tc, npy_load_widens_bytes_and_bools);
    tcase_add_test(tc, npy_load_reads_0d_and_empty);
    tcase_add_test(tc, npy_load_accepts_header_variants);
    tcase_add_test(tc, npy_load_rejects_bad_magic);
    tcase_add_test(tc, npy_load_rejects_unsupported_version);
    tcase_add_test(tc, npy_load_rejects_every_truncation);
    tcase_add_test(tc, npy_load_rejects_header_length_past_eof);
    tcase_add_test(tc, npy_load_rejects_header_length_into_data);
    tcase_add_test(tc, npy_load_rejects_other_dtypes);
    tcase_add_test(tc, npy_load_rejects_wrong_data_size);
    tcase_add_test(tc, npy_load_rejects_overflowing_shape);
    tcase_add_test(tc, npy_load_rejects_too_many_dims);
    tcase_add_test(tc, npy_load_rejects_malformed_dict);
    tcase_add_test(tc, npy_load_rejects_nul_in_header);
    tcase_add_test(tc, npy_load_rejects_missing_file_and_null);
    tcase_add_test(tc, npy_load_refuses_device_and_fifo);
    tcase_add_test(tc, npy_save_refuses_non_regular_targets);
    tcase_add_test(tc, npy_array_free_is_null_safe);
    tcase_add_test(tc, npy_load_survives_mutations);
    suite_add_tcase(s, tc);
    rc = tu_run(s, 0);
    remove_dir();
    return rc;
}
