/* The bench's reports without a device: the comparison with an earlier
 * run (--compare), perhaps from another machine (devices paired by stable
 * name, then by identity, then by position; every compared row labelled
 * with both devices and its ratio; rows on one side only listed); the
 * text measure that keeps figure text inside its box; the HTML report's
 * escaping. */
#define _POSIX_C_SOURCE 200809L

#include "html.h"
#include "output.h"
#include "plot.h"
#include "roofline.h"
#include "testutil.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
device(clf_bench_report *r, const char *stable, const char *name)
{
    clf_bench_device *d = clf_bench_report_add_device(r);

    ck_assert_ptr_nonnull(d);
    snprintf(d->platform, sizeof d->platform, "Portable Computing Language");
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->driver, sizeof d->driver, "6.0");
    snprintf(d->stable_name, sizeof d->stable_name, "%s", stable);
}

static void
row(clf_bench_report *r, size_t dev, size_t n, double median)
{
    clf_bench_result *x = clf_bench_report_add_result(r);

    ck_assert_ptr_nonnull(x);
    x->device = dev;
    x->mode = CLF_BENCH_LINFORMER;
    x->n = n;
    x->k = x->k_requested = 64;
    x->d_model = 128;
    x->heads = 4;
    x->batch = 1;
    x->wall.median = x->wall.min = x->wall.max = median;
    x->wall.runs = 3;
}

static char *
slurp_file(FILE *f)
{
    long len;
    char *text;

    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    rewind(f);
    text = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(fread(text, 1, (size_t)len, f), (size_t)len);
    text[len] = '\0';
    return text;
}

/* The line of text that starts with prefix and holds `has`. */
static int
has_line(const char *text, const char *prefix, const char *has)
{
    const char *p = text;

    while (p != NULL && *p) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        if (strncmp(line, prefix, strlen(prefix)) == 0 && strstr(line, has))
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

START_TEST(devices_pair_by_stable_name_then_identity_then_position)
{
    clf_bench_report now, base;
    long pair[4];

    clf_bench_report_init(&now);
    clf_bench_report_init(&base);
    device(&now, "pocl:1", "cpu-a");
    device(&now, "", "cpu-b");
    device(&now, "pocl:0", "cpu-a");
    device(&now, "", "lonely");
    device(&base, "pocl:0", "cpu-x");
    device(&base, "pocl:1", "cpu-y");
    device(&base, "", "other");
    device(&base, "", "cpu-b");
    ck_assert_int_eq(clf_bench_compare_devices(&now, &base, pair), 0);
    ck_assert_int_eq(pair[0], 1); /* stable names */
    ck_assert_int_eq(pair[2], 0);
    ck_assert_int_eq(pair[1], 3); /* platform, name and driver */
    ck_assert_int_eq(pair[3], 2); /* what is left, by position */
    clf_bench_report_free(&base);
    clf_bench_report_init(&base);
    device(&base, "x", "only");
    ck_assert_int_eq(clf_bench_compare_devices(&now, &base, pair), 0);
    ck_assert_int_eq(pair[0], 0);
    ck_assert_int_eq(pair[1], -1);
    clf_bench_report_free(&now);
    clf_bench_report_free(&base);
}
END_TEST

/* Two identical devices on each side (PoCL as two devices): the second
 * device's row is compared with the baseline's second device, not with the
 * first device that has the same platform, name and driver. */
START_TEST(rows_of_a_multi_device_run_match_their_own_device)
{
    clf_bench_report now, base;
    int other = -1;

    clf_bench_report_init(&now);
    clf_bench_report_init(&base);
    device(&now, "pocl:0", "cpu");
    device(&now, "pocl:1", "cpu");
    device(&base, "pocl:0", "cpu");
    device(&base, "pocl:1", "cpu");
    row(&now, 0, 512, 0.3);
    row(&now, 1, 512, 0.4);
    row(&base, 0, 512, 0.2);
    row(&base, 1, 512, 0.1);
    ck_assert_int_eq(clf_bench_compare_match(&now, 0, &base, &other), 0);
    ck_assert_int_eq(clf_bench_compare_match(&now, 1, &base, &other), 1);
    ck_assert_int_eq(other, 0);
    clf_bench_report_free(&now);
    clf_bench_report_free(&base);
}
END_TEST

START_TEST(print_labels_both_devices_and_lists_unmatched_rows)
{
    clf_bench_report now, base;
    FILE *f = tmpfile();
    char *text;

    ck_assert_ptr_nonnull(f);
    clf_bench_report_init(&now);
    clf_bench_report_init(&base);
    device(&now, "pocl:0", "cpu-haswell-Xeon");
    device(&now, "pocl:1", "cpu-haswell-Xeon");
    device(&base, "pocl:1", "cpu-znver3-EPYC"); /* another machine */
    device(&base, "pocl:0", "cpu-znver3-EPYC");
    row(&now, 0, 512, 0.3);
    row(&now, 1, 512, 0.4);
    row(&now, 1, 1024, 0.8);  /* only now */
    row(&base, 1, 512, 0.2);  /* pocl:0 */
    row(&base, 0, 512, 0.1);  /* pocl:1 */
    row(&base, 0, 4096, 0.9); /* only in the baseline */
    ck_assert_uint_eq(clf_bench_print_compare(f, &now, &base), 2);
    text = slurp_file(f);
    fclose(f);
    ck_assert_msg(has_line(text, "pocl:0       pocl:0", "1.500"), "%s", text);
    ck_assert_msg(has_line(text, "pocl:1       pocl:1", "4.000"), "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "cpu-haswell-Xeon"));
    ck_assert_ptr_nonnull(strstr(text, "cpu-znver3-EPYC"));
    ck_assert_ptr_nonnull(strstr(text, "only in this run"));
    ck_assert_msg(has_line(text, "pocl:1", "1024"), "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "only in the baseline"));
    ck_assert_msg(has_line(text, "pocl:1", "4096"), "%s", text);
    free(text);
    clf_bench_report_free(&now);
    clf_bench_report_free(&base);
}
END_TEST

/* ---------------------------------------------------------------- text */

/* Advances in ems of DejaVu Sans, the widest common default sans-serif
 * (read from DejaVuSans.ttf and DejaVuSans-Bold.ttf 2.37): regular, bold. */
static const struct {
    char c;
    double regular, bold;
} dejavu[] = {
    {'W', 0.9888, 1.103},  {'m', 0.9741, 1.042},  {'M', 0.8628, 0.9951},
    {'%', 0.9502, 1.002},  {'@', 1.0, 1.0},       {'a', 0.6128, 0.6748},
    {'0', 0.6362, 0.6958}, {' ', 0.3179, 0.3481}, {'{', 0.6362, 0.7119},
    {'`', 0.5, 0.5},       {':', 0.3369, 0.3999}, {'i', 0.2778, 0.3428}};

START_TEST(text_width_is_above_dejavu_sans)
{
    size_t i;

    for (i = 0; i < sizeof dejavu / sizeof dejavu[0]; i++) {
        char s[2] = {dejavu[i].c, '\0'};
        ck_assert_msg(clf_bench_text_width(s, 100, 0) >=
                          100 * dejavu[i].regular,
                      "'%s' regular", s);
        ck_assert_msg(clf_bench_text_width(s, 100, 1) >= 100 * dejavu[i].bold,
                      "'%s' bold", s);
    }
    /* widths add up, and scale with the size */
    ck_assert(clf_bench_text_width("ab", 10, 0) ==
              clf_bench_text_width("a", 10, 0) +
                  clf_bench_text_width("b", 10, 0));
    ck_assert(clf_bench_text_width("ab", 20, 0) ==
              2 * clf_bench_text_width("ab", 10, 0));
}
END_TEST

START_TEST(fit_text_shortens_to_the_width_and_keeps_utf8_whole)
{
    char out[128];
    const char *accents = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
    size_t len;

    clf_bench_fit_text(out, sizeof out, "short", 12, 0, 200);
    ck_assert_str_eq(out, "short");
    clf_bench_fit_text(out, sizeof out,
                       "a device name much too long for its box", 12, 1, 100);
    len = strlen(out);
    ck_assert_uint_gt(len, 3);
    ck_assert_str_eq(out + len - 3, "...");
    ck_assert(strncmp(out, "a device", len - 3 < 8 ? len - 3 : 8) == 0);
    ck_assert(clf_bench_text_width(out, 12, 1) <= 100);
    /* two-byte characters are cut between characters, never inside */
    clf_bench_fit_text(out, sizeof out, accents, 10, 0, 35);
    len = strlen(out);
    ck_assert_str_eq(out + len - 3, "...");
    ck_assert_uint_eq((len - 3) % 2, 0);
    ck_assert(clf_bench_text_width(out, 10, 0) <= 35);
    /* nothing fits: empty, not overflowing */
    clf_bench_fit_text(out, sizeof out, "WWWW", 10, 0, 1);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(html_escapes_every_text_of_the_run)
{
    clf_bench_report r;
    FILE *f = tmpfile();
    char *text;

    ck_assert_ptr_nonnull(f);
    clf_bench_report_init(&r);
    snprintf(r.command, sizeof r.command, "bench --html '<a>'");
    snprintf(r.host, sizeof r.host, "<script>alert(1)</script>");
    device(&r, "pocl:0", "cpu & <b>\"gpu\"</b>");
    row(&r, 0, 512, 0.2);
    snprintf(r.results[0].note, sizeof r.results[0].note, "<img src=x>");
    ck_assert_int_eq(clf_bench_html_write(f, &r), 0);
    text = slurp_file(f);
    fclose(f);
    ck_assert_ptr_null(strstr(text, "<script"));
    ck_assert_ptr_null(strstr(text, "<img"));
    ck_assert_ptr_null(strstr(text, "<b>"));
    ck_assert_ptr_nonnull(
        strstr(text, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    ck_assert_ptr_nonnull(strstr(text, "cpu &amp; &lt;b&gt;&quot;gpu&quot;"));
    ck_assert_ptr_nonnull(strstr(text, "bench --html &#39;&lt;a&gt;&#39;"));
    ck_assert_ptr_nonnull(
        strstr(text, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    free(text);
    clf_bench_report_free(&r);
}
END_TEST

/* Whether text holds "nan" or "inf" as a word (a printed non-finite
 * number), not inside one such as "Linformer". */
static int
has_nonfinite(const char *text)
{
    const char *w[] = {"nan", "inf"};
    int i;

    for (i = 0; i < 2; i++) {
        const char *p = text;
        while ((p = strstr(p, w[i])) != NULL) {
            if ((p == text || !isalpha((unsigned char)p[-1])) &&
                !isalpha((unsigned char)p[3]))
                return 1;
            p++;
        }
    }
    return 0;
}

/* Every number an SVG figure writes is finite, whatever the rows hold:
 * n of 0, times of 0 or below or past DBL_MAX in ms, NaN peaks, a single
 * point. */
static void
assert_svg_finite(const clf_bench_report *r)
{
    FILE *f = tmpfile();
    char *text;

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(clf_bench_svg_times(f, r, 0), 0);
    ck_assert_int_eq(clf_bench_svg_roofline(f, r, 0), 0);
    text = slurp_file(f);
    fclose(f);
    ck_assert_msg(!has_nonfinite(text), "a non-finite number in the SVG");
    free(text);
}

START_TEST(figures_stay_finite_on_hostile_values)
{
    clf_bench_report r;

    clf_bench_report_init(&r);
    device(&r, "pocl:0", "cpu");
    r.devices[0].peak_gflops = NAN;
    r.devices[0].peak_gbps = 10;
    row(&r, 0, 0, 0.2);
    assert_svg_finite(&r);
    row(&r, 0, 512, -1);
    row(&r, 0, 1024, 0);
    assert_svg_finite(&r);
    clf_bench_report_free(&r);
    clf_bench_report_init(&r);
    device(&r, "pocl:0", "cpu");
    row(&r, 0, 512, 0.2);
    r.results[0].wall.min = -1;
    assert_svg_finite(&r);
    /* a time whose milliseconds overflow: once an endless grid loop */
    r.results[0].wall.median = r.results[0].wall.max = 1e308;
    assert_svg_finite(&r);
    clf_bench_report_free(&r);
}
END_TEST

/* A huge time from a hostile file prints whole in %.3g, not cut into
 * another number (nor past its cell, with the noisy mark). */
START_TEST(tables_print_huge_values_whole)
{
    clf_bench_report r;
    FILE *f = tmpfile();
    char *text, ms[16];

    ck_assert_ptr_nonnull(f);
    clf_bench_report_init(&r);
    device(&r, "pocl:0", "cpu");
    device(&r, "pocl:1", "cpu");
    row(&r, 0, 512, 1e30);
    row(&r, 1, 512, 1e30);
    r.results[0].noisy = r.results[1].noisy = 1;
    r.results[0].gflops = r.results[1].gflops = 1e20;
    clf_bench_print_comparison(f, &r);
    text = slurp_file(f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "1e+33*"));
    ck_assert_ptr_nonnull(strstr(text, "1e+20"));
    clf_bench_fmt_ms(ms, sizeof ms, 1e30);
    ck_assert_str_eq(ms, "1e+33");
    free(text);
    clf_bench_report_free(&r);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("bench_report");
    TCase *tc = tcase_create("compare");
    TCase *text = tcase_create("text");

    tcase_add_test(tc, devices_pair_by_stable_name_then_identity_then_position);
    tcase_add_test(tc, rows_of_a_multi_device_run_match_their_own_device);
    tcase_add_test(tc, print_labels_both_devices_and_lists_unmatched_rows);
    tcase_add_test(text, text_width_is_above_dejavu_sans);
    tcase_add_test(text, fit_text_shortens_to_the_width_and_keeps_utf8_whole);
    tcase_add_test(text, html_escapes_every_text_of_the_run);
    tcase_add_test(text, figures_stay_finite_on_hostile_values);
    tcase_add_test(text, tables_print_huge_values_whole);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, text);
    return tu_run(s, 0);
}
