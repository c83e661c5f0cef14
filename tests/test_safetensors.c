/* The safetensors reader: hand-built files with known values in every
 * readable dtype, and malformed files, each of which must fail with the
 * right status and a message naming the tensor or field. */
#include "testutil.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Room for the largest file built here: 65536 halves plus a header. */
#define FILE_CAP (140 * 1024)

/* 8-byte little-endian length, the JSON, then the data. */
static size_t
build(unsigned char *buf, const char *json, const void *data, size_t dlen)
{
    size_t n = strlen(json);

    ck_assert_uint_le(8 + n + dlen, FILE_CAP);
    tu_put_le(buf, n, 8);
    memcpy(buf + 8, json, n);
    if (dlen > 0)
        memcpy(buf + 8 + n, data, dlen);
    return 8 + n + dlen;
}

static uint32_t
float_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof u);
    return u;
}

static unsigned char *
file_buf(void)
{
    return tu_malloc(FILE_CAP);
}

/* Opens the bytes and asserts the status, a NULL handle and that the
 * message contains each of the (up to two) strings. */
static void
expect_fail2(const unsigned char *bytes, size_t len, int status,
             const char *what, const char *what2)
{
    clf_safetensors *st = (clf_safetensors *)&st; /* poison */
    int rc = clf_safetensors_open_memory(&st, bytes, len);

    ck_assert_msg(rc == status, "expected %s, got %s (%s)",
                  clf_status_name(status), clf_status_name(rc),
                  clf_last_error());
    ck_assert_ptr_null(st);
    ck_assert_msg(strstr(clf_last_error(), what) != NULL,
                  "message \"%s\" does not name \"%s\"", clf_last_error(),
                  what);
    if (what2 != NULL)
        ck_assert_msg(strstr(clf_last_error(), what2) != NULL,
                      "message \"%s\" does not name \"%s\"", clf_last_error(),
                      what2);
}

static void
expect_json_fail(const char *json, size_t dlen, int status, const char *what,
                 const char *what2)
{
    unsigned char *buf = file_buf(), data[64];
    size_t n;

    memset(data, 0, sizeof data);
    ck_assert_uint_le(dlen, sizeof data);
    n = build(buf, json, data, dlen);
    expect_fail2(buf, n, status, what, what2);
    free(buf);
}

static clf_safetensors *
open_ok(const unsigned char *bytes, size_t len)
{
    clf_safetensors *st = NULL;

    ck_assert_msg(clf_safetensors_open_memory(&st, bytes, len) == 0, "%s",
                  clf_last_error());
    ck_assert_ptr_nonnull(st);
    return st;
}

/* Two F32 tensors and metadata, the data area exactly covered: every proper
 * prefix of it is invalid. */
static size_t
build_two(unsigned char *buf, float *w, float *b)
{
    unsigned char data[32];
    size_t i;

    for (i = 0; i < 6; i++) {
        w[i] = 0.5f * (float)i - 1.0f;
        tu_put_le(data + 4 * i, float_bits(w[i]), 4);
    }
    for (i = 0; i < 2; i++) {
        b[i] = 10.0f + (float)i;
        tu_put_le(data + 24 + 4 * i, float_bits(b[i]), 4);
    }
    return build(buf,
                 "{\"__metadata__\":{\"format\":\"pt\"},"
                 "\"layer.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                 "\"data_offsets\":[0,24]},"
                 "\"layer.bias\":{\"dtype\":\"F32\",\"shape\":[2],"
                 "\"data_offsets\":[24,32]}}",
                 data, sizeof data);
}

START_TEST(safetensors_reads_f32)
{
    unsigned char *buf = file_buf();
    float w[6], b[2], got[6];
    clf_tensor_info info;
    clf_safetensors *st;
    size_t n = build_two(buf, w, b);

    st = open_ok(buf, n);
    free(buf); /* the handle keeps its own copy */
    ck_assert_uint_eq(clf_safetensors_count(st), 2);
    ck_assert_int_eq(clf_safetensors_find(st, "layer.weight", &info), 0);
    ck_assert_str_eq(info.name, "layer.weight");
    ck_assert_str_eq(info.dtype, "F32");
    ck_assert_uint_eq(info.ndim, 2);
    ck_assert_uint_eq(info.shape[0], 2);
    ck_assert_uint_eq(info.shape[1], 3);
    ck_assert_uint_eq(info.count, 6);
    memset(got, 0xff, sizeof got); /* poison */
    ck_assert_int_eq(clf_safetensors_read_f32(st, "layer.weight", got, 6), 0);
    ck_assert_mem_eq(got, w, sizeof w);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "layer.bias", got, 2), 0);
    ck_assert_mem_eq(got, b, sizeof b);
    clf_safetensors_close(st);
}
END_TEST

START_TEST(safetensors_lists_tensors_in_file_order)
{
    unsigned char *buf = file_buf(), data[12] = {0};
    static const char *const names[] = {"z", "a", "m"};
    clf_tensor_info info;
    clf_safetensors *st;
    size_t n, i;

    n = build(
        buf,
        "{\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"m\":{\"dtype\":\"F32\",\"shape\":[1],"
        "\"data_offsets\":[4,8]}}",
        data, sizeof data);
    st = open_ok(buf, n);
    ck_assert_uint_eq(clf_safetensors_count(st), 3);
    for (i = 0; i < 3; i++) {
        ck_assert_int_eq(clf_safetensors_info(st, i, &info), 0);
        ck_assert_str_eq(info.name, names[i]);
        ck_assert_int_eq(clf_safetensors_find(st, names[i], NULL), 0);
    }
    ck_assert_int_eq(clf_safetensors_info(st, 3, &info), CLF_EBAD_SIZE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "index 3"));
    clf_safetensors_close(st);
    free(buf);
}
END_TEST

/* Every binary16 value, against the definition evaluated in double. */
START_TEST(safetensors_converts_every_f16_exactly)
{
    unsigned char *buf = file_buf(), *data = tu_malloc(2 * 65536);
    float *got = tu_malloc(65536 * sizeof *got);
    clf_safetensors *st;
    size_t n;
    unsigned h;

    for (h = 0; h < 65536; h++)
        tu_put_le(data + 2 * h, h, 2);
    n = build(buf,
              "{\"h\":{\"dtype\":\"F16\",\"shape\":[256,256],"
              "\"data_offsets\":[0,131072]}}",
              data, 2 * 65536);
    st = open_ok(buf, n);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "h", got, 65536), 0);
    for (h = 0; h < 65536; h++) {
        unsigned e = (h >> 10) & 31, m = h & 1023;
        double sign = (h & 0x8000) ? -1.0 : 1.0, want;
        if (e == 31 && m != 0) {
            ck_assert_msg(isnan(got[h]), "half 0x%04x is not NaN", h);
            /* The payload and sign survive: quiet bit included. */
            ck_assert_uint_eq(float_bits(got[h]),
                              ((uint32_t)(h & 0x8000) << 16) | 0x7f800000u |
                                  ((uint32_t)m << 13));
            continue;
        }
        if (e == 31)
            want = sign * INFINITY;
        else if (e == 0)
            want = sign * ldexp((double)m, -24);
        else
            want = sign * ldexp(1.0 + m / 1024.0, (int)e - 15);
        ck_assert_msg(float_bits(got[h]) == float_bits((float)want),
                      "half 0x%04x gave %a, want %a", h, (double)got[h], want);
    }
    /* Spot values, in case the reference above shared a mistake. */
    ck_assert(got[0x3c00] == 1.0f);
    ck_assert(got[0xc000] == -2.0f);
    ck_assert(got[0x7bff] == 65504.0f);
    ck_assert(got[0x0001] == 0x1p-24f);
    ck_assert(got[0x0400] == 0x1p-14f);
    ck_assert(got[0x3555] == 0x1.554p-2f);
    ck_assert_uint_eq(float_bits(got[0x8000]), 0x80000000u);
    clf_safetensors_close(st);
    free(got);
    free(data);
    free(buf);
}
END_TEST

START_TEST(safetensors_converts_bf16_exactly)
{
    static const uint16_t in[8] = {0x3f80, 0xc000, 0x7f80, 0xff80,
                                   0x0001, 0x7fc1, 0x8000, 0x4049};
    unsigned char *buf = file_buf(), data[16];
    float got[8];
    clf_safetensors *st;
    size_t n, i;

    for (i = 0; i < 8; i++)
        tu_put_le(data + 2 * i, in[i], 2);
    n = build(buf,
              "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2,4],"
              "\"data_offsets\":[0,16]}}",
              data, sizeof data);
    st = open_ok(buf, n);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "b", got, 8), 0);
    for (i = 0; i < 8; i++)
        ck_assert_uint_eq(float_bits(got[i]), (uint32_t)in[i] << 16);
    ck_assert(got[0] == 1.0f);
    ck_assert(got[1] == -2.0f);
    ck_assert(got[4] == 0x1p-133f);
    ck_assert(got[7] == 3.140625f);
    clf_safetensors_close(st);
    free(buf);
}
END_TEST

START_TEST(safetensors_reads_metadata)
{
    unsigned char *buf = file_buf(), data[4] = {0};
    clf_safetensors *st;
    size_t n;

    n = build(buf,
              "{\"x\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
              "\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\xc3\xa9\","
              "\"empty\":\"\"}}",
              data, 4);
    st = open_ok(buf, n);
    ck_assert_uint_eq(clf_safetensors_count(st), 1); /* not a tensor */
    ck_assert_str_eq(clf_safetensors_metadata(st, "format"), "pt");
    ck_assert_str_eq(clf_safetensors_metadata(st, "note"), "caf\xc3\xa9");
    ck_assert_str_eq(clf_safetensors_metadata(st, "empty"), "");
    ck_assert_ptr_null(clf_safetensors_metadata(st, "absent"));
    ck_assert_ptr_null(clf_safetensors_metadata(st, NULL));
    ck_assert_ptr_null(clf_safetensors_metadata(NULL, "format"));
    ck_assert_int_eq(clf_safetensors_find(st, "__metadata__", NULL),
                     CLF_ENOT_FOUND);
    clf_safetensors_close(st);
    free(buf);
}
END_TEST

/* A scalar has shape [] and one element; a zero-size tensor has a 0 in its
 * shape, an empty range, and overlaps nothing, even inside another range. */
START_TEST(safetensors_reads_scalar_and_zero_size)
{
    unsigned char *buf = file_buf(), data[12];
    clf_tensor_info info;
    clf_safetensors *st;
    float got[2];
    size_t n;

    tu_put_le(data, float_bits(-7.25f), 4);
    tu_put_le(data + 4, float_bits(1.0f), 4);
    tu_put_le(data + 8, float_bits(2.0f), 4);
    n = build(buf,
              "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
              "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[6,6]},"
              "\"e2\":{\"dtype\":\"F16\",\"shape\":[3,0],"
              "\"data_offsets\":[12,12]},"
              "\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}"
              "}",
              data, sizeof data);
    st = open_ok(buf, n);
    ck_assert_int_eq(clf_safetensors_find(st, "s", &info), 0);
    ck_assert_uint_eq(info.ndim, 0);
    ck_assert_uint_eq(info.count, 1);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "s", got, 1), 0);
    ck_assert(got[0] == -7.25f);
    ck_assert_int_eq(clf_safetensors_find(st, "e", &info), 0);
    ck_assert_uint_eq(info.ndim, 1);
    ck_assert_uint_eq(info.count, 0);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "e", NULL, 0), 0);
    ck_assert_int_eq(clf_safetensors_find(st, "e2", &info), 0);
    ck_assert_uint_eq(info.count, 0);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "v", got, 2), 0);
    ck_assert(got[0] == 1.0f && got[1] == 2.0f);
    clf_safetensors_close(st);

    /* No tensors at all is a valid (if useless) file. */
    n = build(buf, "{}", NULL, 0);
    st = open_ok(buf, n);
    ck_assert_uint_eq(clf_safetensors_count(st), 0);
    clf_safetensors_close(st);
    free(buf);
}
END_TEST

START_TEST(safetensors_lists_but_does_not_read_other_dtypes)
{
    unsigned char *buf = file_buf(), data[24] = {0};
    clf_tensor_info info;
    clf_safetensors *st;
    float got[4];
    size_t n;

    n = build(buf,
              "{\"ids\":{\"dtype\":\"I64\",\"shape\":[2],"
              "\"data_offsets\":[0,16]},"
              "\"odd\":{\"dtype\":\"Q4_K\",\"shape\":[1000],"
              "\"data_offsets\":[16,24]}}",
              data, sizeof data);
    st = open_ok(buf, n);
    ck_assert_int_eq(clf_safetensors_find(st, "odd", &info), 0);
    ck_assert_str_eq(info.dtype, "Q4_K");
    ck_assert_uint_eq(info.count, 1000);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "ids", got, 2), CLF_EDTYPE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'ids'"));
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "I64"));
    ck_assert_int_eq(clf_safetensors_read_f32(st, "odd", got, 4), CLF_EDTYPE);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'odd'"));
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "Q4_K"));
    clf_safetensors_close(st);
    free(buf);
}
END_TEST

/* A header length that is not a multiple of 8 and trailing spaces in the
 * header: the data area is unaligned, which must not matter. */
START_TEST(safetensors_reads_padded_unaligned_header)
{
    unsigned char *buf = file_buf(), data[8];
    clf_safetensors *st;
    float got[2];
    size_t n;

    tu_put_le(data, float_bits(3.5f), 4);
    tu_put_le(data + 4, float_bits(-1e-30f), 4);
    n = build(buf,
              "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],"
              "\"extra\":\"ignored\"}}   ",
              data, sizeof data);
    ck_assert_uint_ne((n - 8) % 4, 0);
    st = open_ok(buf, n);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "t", got, 2), 0);
    ck_assert(got[0] == 3.5f && got[1] == -1e-30f);
    clf_safetensors_close(st);
    free(buf);
}
END_TEST

START_TEST(safetensors_opens_files)
{
    char dir[256], path[300];
    const char *base = getenv("TMPDIR");
    unsigned char *buf = file_buf();
    float w[6], b[2], got[6];
    clf_safetensors *st = NULL;
    size_t n = build_two(buf, w, b);
    FILE *f;

    snprintf(dir, sizeof dir, "%s/clf-st-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);

    ck_assert_int_eq(clf_safetensors_open(&st, path), 0);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "layer.weight", got, 6), 0);
    ck_assert_mem_eq(got, w, sizeof w);
    ck_assert_str_eq(clf_safetensors_metadata(st, "format"), "pt");
    clf_safetensors_close(st);

    /* Errors from a file carry its name as well as the detail. */
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n - 1, f), n - 1);
    ck_assert_int_eq(fclose(f), 0);
    st = (clf_safetensors *)&st;
    ck_assert_int_eq(clf_safetensors_open(&st, path), CLF_EFORMAT);
    ck_assert_ptr_null(st);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), path));
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'layer.bias'"));

    ck_assert_int_eq(unlink(path), 0);
    st = (clf_safetensors *)&st;
    ck_assert_int_eq(clf_safetensors_open(&st, path), CLF_EIO);
    ck_assert_ptr_null(st);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), path));
    ck_assert_ptr_nonnull(strstr(clf_last_error(), strerror(ENOENT)));
    /* A directory opens but cannot be read. */
    ck_assert_int_eq(clf_safetensors_open(&st, dir), CLF_EIO);
    ck_assert_ptr_null(st);
    ck_assert_int_eq(rmdir(dir), 0);
    free(buf);
}
END_TEST

/* /dev/zero would be read until memory runs out and a FIFO with no writer
 * would block forever; both are refused at once. */
START_TEST(safetensors_open_refuses_device_and_fifo)
{
    char dir[256], path[300];
    const char *base = getenv("TMPDIR");
    clf_safetensors *st = (clf_safetensors *)&st;

    ck_assert_int_eq(clf_safetensors_open(&st, "/dev/zero"), CLF_EIO);
    ck_assert_ptr_null(st);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "not a regular file"));
    snprintf(dir, sizeof dir, "%s/clf-st-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/fifo.safetensors", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    alarm(10);
    ck_assert_int_eq(clf_safetensors_open(&st, path), CLF_EIO);
    alarm(0);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), path));
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "not a regular file"));
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

START_TEST(safetensors_rejects_every_truncation)
{
    unsigned char *buf = file_buf();
    float w[6], b[2];
    size_t n = build_two(buf, w, b), len, hlen = n - 8 - 32;

    for (len = 0; len < n; len++) {
        if (len < 8)
            expect_fail2(buf, len, CLF_EFORMAT, "too short", NULL);
        else if (len < 8 + hlen)
            expect_fail2(buf, len, CLF_EFORMAT, "header length", NULL);
        else if (len < 8 + hlen + 24)
            expect_fail2(buf, len, CLF_EFORMAT, "'layer.weight'",
                         "past the end of the data area");
        else
            expect_fail2(buf, len, CLF_EFORMAT, "'layer.bias'",
                         "past the end of the data area");
    }
    free(buf);
}
END_TEST

START_TEST(safetensors_rejects_lying_header_length)
{
    static const unsigned long long lies[] = {
        0, 1, 2, 0xffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull};
    unsigned char *buf = file_buf();
    float w[6], b[2];
    size_t n = build_two(buf, w, b), i, hlen = n - 8 - 32;

    tu_put_le(buf, n - 8 + 1, 8);
    expect_fail2(buf, n, CLF_EFORMAT, "header length", "past the end");
    for (i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        tu_put_le(buf, lies[i], 8);
        expect_fail2(buf, n, CLF_EFORMAT,
                     lies[i] < n ? "header JSON" : "header length", NULL);
    }
    /* The format's limit is checked before the file size, so that it can
     * be tested without a 100 MB file. */
    tu_put_le(buf, 100000001, 8);
    expect_fail2(buf, n, CLF_EFORMAT, "header length 100000001",
                 "exceeds the 100000000-byte limit");
    tu_put_le(buf, 100000000, 8);
    expect_fail2(buf, n, CLF_EFORMAT, "header length 100000000",
                 "past the end");
    /* Shorter than the JSON: the rest of it lands in the data area and
     * the JSON is cut. */
    tu_put_le(buf, hlen - 1, 8);
    expect_fail2(buf, n, CLF_EFORMAT, "header JSON", NULL);
    free(buf);
}
END_TEST

/* Longer than the JSON, over data bytes that parse as trailing spaces: the
 * data area shrinks, and the error names the header length. */
START_TEST(safetensors_rejects_header_length_into_data)
{
    unsigned char *buf = file_buf(), data[32];
    const char *json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                       "\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[6],"
                       "\"data_offsets\":[8,32]}}";
    size_t hlen = strlen(json), n, extra;
    char what[40];

    memset(data, ' ', sizeof data);
    n = build(buf, json, data, sizeof data);
    clf_safetensors_close(open_ok(buf, n));
    for (extra = 1; extra <= 32; extra += 7) {
        tu_put_le(buf, hlen + extra, 8);
        snprintf(what, sizeof what, "header length %zu)", hlen + extra);
        expect_fail2(buf, n, CLF_EFORMAT, what, "data_offsets end");
    }
    free(buf);
}
END_TEST

START_TEST(safetensors_rejects_bad_ranges)
{
    expect_json_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
                     "\"data_offsets\":[0,12]}}",
                     8, CLF_EFORMAT, "'w'", "past the end of the data area");
    expect_json_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
                     "\"data_offsets\":[9223372036854775800,"
                     "9223372036854775807]}}",
                     8, CLF_EFORMAT, "'w'", "data_offsets end");
    expect_json_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],"
                     "\"data_offsets\":[8,4]}}",
                     8, CLF_EFORMAT, "'w'", "begin 8 is after end 4");
    expect_json_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],"
                     "\"data_offsets\":[0,16]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[4],"
                     "\"data_offsets\":[8,24]}}",
                     24, CLF_EFORMAT, "'a' [0, 16) and 'b' [8, 24)",
                     "overlapping");
    /* Same ranges (a copy of one tensor under two names) overlap too, and
     * so does one nested inside a larger one listed later. */
    expect_json_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                     "\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"I32\",\"shape\":[2],"
                     "\"data_offsets\":[0,8]}}",
                     8, CLF_EFORMAT, "overlapping", "'b'");
    expect_json_fail("{\"in\":{\"dtype\":\"U8\",\"shape\":[2],"
                     "\"data_offsets\":[10,12]},"
                     "\"c\":{\"dtype\":\"U8\",\"shape\":[4],"
                     "\"data_offsets\":[16,20]},"
                     "\"out\":{\"dtype\":\"U8\",\"shape\":[16],"
                     "\"data_offsets\":[0,16]}}",
                     20, CLF_EFORMAT, "'out' [0, 16) and 'in' [10, 12)",
                     "overlapping");
    expect_json_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                     "\"data_offsets\":[0,20]}}",
                     24, CLF_EFORMAT, "'w'", "needs 24 bytes");
    expect_json_fail("{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],"
                     "\"data_offsets\":[0,24]}}",
                     24, CLF_EFORMAT, "'w'", "needs 12 bytes");
    expect_json_fail("{\"w\":{\"dtype\":\"F64\",\"shape\":[],"
                     "\"data_offsets\":[0,4]}}",
                     8, CLF_EFORMAT, "'w'", "needs 8 bytes");
}
END_TEST

START_TEST(safetensors_rejects_bad_entries)
{
    static const struct {
        const char *json;
        const char *what;
    } cases[] = {
        {"{\"w\":[1,2]}", "not a JSON object"},
        {"{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", "dtype is missing"},
        {"{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}",
         "dtype is not a string"},
        {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}",
         "shape is missing"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}",
         "shape is not an array"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
         "shape dimension 0"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1.0],"
         "\"data_offsets\":[0,4]}}",
         "shape dimension 1"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],"
         "\"data_offsets\":[0,4]}}",
         "shape dimension 0"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
         "\"data_offsets\":[0,4]}}",
         "9 dimensions"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}",
         "data_offsets is missing"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}",
         "data_offsets is not an array of two"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[0,4,8]}}",
         "data_offsets is not an array of two"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":{\"0\":4}}}",
         "data_offsets is not an array of two"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[-4,0]}}",
         "data_offsets are not non-negative integers"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[0,4.0]}}",
         "data_offsets are not non-negative integers"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[null,4]}}",
         "data_offsets are not non-negative integers"},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_json_fail(cases[i].json, 4, CLF_EFORMAT, "tensor 'w'",
                         cases[i].what);
}
END_TEST

START_TEST(safetensors_rejects_overflowing_shape)
{
    expect_json_fail("{\"big\":{\"dtype\":\"F32\","
                     "\"shape\":[4294967296,4294967296,16],"
                     "\"data_offsets\":[0,4]}}",
                     4, CLF_ESIZE_OVERFLOW, "'big'", "shape");
    /* The element count fits; the byte count does not. */
    expect_json_fail("{\"big\":{\"dtype\":\"F32\","
                     "\"shape\":[2305843009213693952,4],"
                     "\"data_offsets\":[0,4]}}",
                     4, CLF_ESIZE_OVERFLOW, "'big'", "in bytes");
    /* An unknown dtype's size is unknown, but its count still overflows. */
    expect_json_fail("{\"big\":{\"dtype\":\"X1\","
                     "\"shape\":[4294967296,4294967296],"
                     "\"data_offsets\":[0,4]}}",
                     4, CLF_ESIZE_OVERFLOW, "'big'", "shape");
    /* Beyond 64 bits jansson refuses the number itself. */
    expect_json_fail("{\"big\":{\"dtype\":\"F32\","
                     "\"shape\":[100000000000000000000],"
                     "\"data_offsets\":[0,4]}}",
                     4, CLF_EFORMAT, "header JSON", "too big integer");
}
END_TEST

START_TEST(safetensors_rejects_bad_json)
{
    static const struct {
        const char *json;
        const char *what;
    } cases[] = {
        {"", "header JSON"},
        {"{", "header JSON"},
        {"[]", "not an object"},
        {"null", "header JSON"},
        {"\"w\"", "header JSON"},
        {"{\"w\":}", "header JSON"},
        {"{} x", "header JSON"},
        {"{\"w\":{\"dtype\":\"F32\",}}", "header JSON"},
        {"{'w':{}}", "header JSON"},
        /* Not UTF-8: a stray byte, an overlong '/', an encoded surrogate,
         * a truncated sequence. */
        {"{\"w\xff\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[0,4]}}",
         "header JSON"},
        {"{\"\xc0\xaf\":{}}", "header JSON"},
        {"{\"\xed\xa0\x80\":{}}", "header JSON"},
        {"{\"w\":{\"dtype\":\"F\xe2\x82\"}}", "header JSON"},
        {"{\"__metadata__\":{\"k\":\"\xfe\"}}", "header JSON"},
        /* JSON escapes for NUL cannot hide in names or values. */
        {"{\"a\\u0000b\":{}}", "header JSON"},
        {"{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", "header JSON"},
        {"{\"dup.weight\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[0,4]},"
         "\"dup.weight\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[0,4]}}",
         "duplicate object key near '\"dup.weight\"'"},
        {"{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}",
         "duplicate object key near '\"k\"'"},
        {"{\"__metadata__\":[]}", "__metadata__ is not a JSON object"},
        {"{\"__metadata__\":{\"ok\":\"v\",\"version\":3}}",
         "__metadata__ entry 'version' is not a string"},
        {"{\"__metadata__\":{\"n\":null}}",
         "__metadata__ entry 'n' is not a string"},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_json_fail(cases[i].json, 4, CLF_EFORMAT, cases[i].what, NULL);
}
END_TEST

START_TEST(safetensors_find_names_missing_tensor)
{
    unsigned char *buf = file_buf();
    float w[6], b[2], got[8];
    clf_tensor_info info;
    clf_safetensors *st;
    size_t n = build_two(buf, w, b);

    st = open_ok(buf, n);
    ck_assert_int_eq(clf_safetensors_find(st, "layer.gamma", &info),
                     CLF_ENOT_FOUND);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'layer.gamma'"));
    ck_assert_int_eq(clf_safetensors_read_f32(st, "layer.beta", got, 6),
                     CLF_ENOT_FOUND);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'layer.beta'"));
    ck_assert_int_eq(clf_safetensors_find(st, "", NULL), CLF_ENOT_FOUND);
    clf_safetensors_close(st);
    free(buf);
}
END_TEST

START_TEST(safetensors_read_rejects_wrong_count)
{
    unsigned char *buf = file_buf();
    float w[6], b[2], got[8];
    clf_safetensors *st;
    size_t n = build_two(buf, w, b);

    st = open_ok(buf, n);
    memset(got, 0, sizeof got);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "layer.weight", got, 5),
                     CLF_ESHAPE_MISMATCH);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'layer.weight'"));
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "6 elements"));
    ck_assert_int_eq(clf_safetensors_read_f32(st, "layer.weight", got, 7),
                     CLF_ESHAPE_MISMATCH);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "layer.bias", got, 0),
                     CLF_ESHAPE_MISMATCH);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "'layer.bias'"));
    /* Nothing was written on failure. */
    ck_assert_float_eq(got[0], 0.0f);
    clf_safetensors_close(st);
    free(buf);
}
END_TEST

START_TEST(safetensors_rejects_null_arguments)
{
    unsigned char *buf = file_buf();
    float w[6], b[2], got[6];
    clf_tensor_info info;
    clf_safetensors *st = (clf_safetensors *)&st;
    size_t n = build_two(buf, w, b);

    ck_assert_int_eq(clf_safetensors_open(NULL, "x"), CLF_ENULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "out"));
    ck_assert_int_eq(clf_safetensors_open(&st, NULL), CLF_ENULL_ARGUMENT);
    ck_assert_ptr_null(st);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "path"));
    ck_assert_int_eq(clf_safetensors_open_memory(NULL, buf, n),
                     CLF_ENULL_ARGUMENT);
    st = (clf_safetensors *)&st;
    ck_assert_int_eq(clf_safetensors_open_memory(&st, NULL, 8),
                     CLF_ENULL_ARGUMENT);
    ck_assert_ptr_null(st);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "bytes"));
    ck_assert_int_eq(clf_safetensors_open_memory(&st, NULL, 0), CLF_EFORMAT);

    clf_safetensors_close(NULL);
    ck_assert_uint_eq(clf_safetensors_count(NULL), 0);
    ck_assert_int_eq(clf_safetensors_info(NULL, 0, &info), CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf_safetensors_find(NULL, "a", &info),
                     CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf_safetensors_read_f32(NULL, "a", got, 6),
                     CLF_ENULL_ARGUMENT);

    st = open_ok(buf, n);
    ck_assert_int_eq(clf_safetensors_info(st, 0, NULL), CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf_safetensors_find(st, NULL, &info), CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf_safetensors_read_f32(st, NULL, got, 6),
                     CLF_ENULL_ARGUMENT);
    ck_assert_int_eq(clf_safetensors_read_f32(st, "layer.weight", NULL, 6),
                     CLF_ENULL_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "dst"));
    clf_safetensors_close(st);
    free(buf);
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

/* Random changes to a valid file must give 0 or a negative status, never a
 * crash, and a NULL handle on failure; whatever opens must read back within
 * its bounds.  Under valgrind or the sanitizers this checks every access. */
START_TEST(safetensors_survives_mutations)
{
    static const char syntax[] = "{}[],:\" 0123456789-.eEFBI16U8_";
    unsigned char *good = file_buf(), *buf = file_buf(), data[40];
    unsigned long long seed = 0x2545f4914f6cdd1dULL;
    size_t n, i, it;
    int ok = 0, failed = 0;

    for (i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 29 + 3);
    n = build(good,
              "{\"__metadata__\":{\"format\":\"pt\"},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],"
              "\"data_offsets\":[0,16]},"
              "\"b\":{\"dtype\":\"F16\",\"shape\":[4],"
              "\"data_offsets\":[16,24]},"
              "\"c\":{\"dtype\":\"BF16\",\"shape\":[2,2,2],"
              "\"data_offsets\":[24,40]}}",
              data, sizeof data);
    for (it = 0; it < 2000; it++) {
        clf_safetensors *st = (clf_safetensors *)&st;
        size_t len = n, flips = 1 + rng_next(&seed) % 4, f;
        int rc;

        memset(buf + n, 0, 16); /* a longer length reads zeros */
        memcpy(buf, good, n);
        for (f = 0; f < flips; f++) {
            /* Mostly in the length and the JSON, where parsing happens. */
            size_t span = rng_next(&seed) % 8 == 0 ? n : n - sizeof data;
            size_t pos = rng_next(&seed) % span;
            if (rng_next(&seed) % 2)
                buf[pos] = (unsigned char)rng_next(&seed);
            else
                buf[pos] = (unsigned char)
                    syntax[rng_next(&seed) % (sizeof syntax - 1)];
        }
        if (rng_next(&seed) % 8 == 0) /* and sometimes a new length */
            len = rng_next(&seed) % (n + 16);
        rc = clf_safetensors_open_memory(&st, buf, len);
        ck_assert_int_le(rc, 0);
        if (rc != 0) {
            ck_assert_ptr_null(st);
            ck_assert_str_ne(clf_last_error(), "");
            failed++;
            continue;
        }
        ok++;
        for (i = 0; i < clf_safetensors_count(st); i++) {
            clf_tensor_info info;
            float *out;
            ck_assert_int_eq(clf_safetensors_info(st, i, &info), 0);
            ck_assert_int_eq(clf_safetensors_find(st, info.name, NULL), 0);
            /* Only readable dtypes have a count bounded by the file. */
            if (strcmp(info.dtype, "F32") != 0 &&
                strcmp(info.dtype, "F16") != 0 &&
                strcmp(info.dtype, "BF16") != 0) {
                ck_assert_int_eq(
                    clf_safetensors_read_f32(st, info.name, NULL, 0),
                    CLF_EDTYPE);
                continue;
            }
            ck_assert_uint_le(info.count, len);
            out = tu_malloc(info.count * sizeof *out);
            ck_assert_int_eq(
                clf_safetensors_read_f32(st, info.name, out, info.count), 0);
            free(out);
        }
        clf_safetensors_close(st);
    }
    ck_assert_int_gt(ok, 0);
    ck_assert_int_gt(failed, 0);
    free(buf);
    free(good);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");

    tcase_add_test(tc, safetensors_reads_f32);
    tcase_add_test(tc, safetensors_lists_tensors_in_file_order);
    tcase_add_test(tc, safetensors_converts_every_f16_exactly);
    tcase_add_test(tc, safetensors_converts_bf16_exactly);
    tcase_add_test(tc, safetensors_reads_metadata);
    tcase_add_test(tc, safetensors_reads_scalar_and_zero_size);
    tcase_add_test(tc, safetensors_lists_but_does_not_read_other_dtypes);
    tcase_add_test(tc, safetensors_reads_padded_unaligned_header);
    tcase_add_test(tc, safetensors_opens_files);
    tcase_add_test(tc, safetensors_open_refuses_device_and_fifo);
    tcase_add_test(tc, safetensors_rejects_every_truncation);
    tcase_add_test(tc, safetensors_rejects_lying_header_length);
    tcase_add_test(tc, safetensors_rejects_header_length_into_data);
    tcase_add_test(tc, safetensors_rejects_bad_ranges);
    tcase_add_test(tc, safetensors_rejects_bad_entries);
    tcase_add_test(tc, safetensors_rejects_overflowing_shape);
    tcase_add_test(tc, safetensors_rejects_bad_json);
    tcase_add_test(tc, safetensors_find_names_missing_tensor);
    tcase_add_test(tc, safetensors_read_rejects_wrong_count);
    tcase_add_test(tc, safetensors_rejects_null_arguments);
    tcase_add_test(tc, safetensors_survives_mutations);
    suite_add_tcase(s, tc);
    return tu_run(s, 0);
}
