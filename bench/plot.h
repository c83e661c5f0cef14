/*
 * The bench's figures as SVG, written directly (bench/plot.c), for a file
 * of their own (--svg) and inline in the HTML report (bench/html.c):
 *
 *  - times: one panel per mode and (D, h, B, k) group with every device's
 *    median time against n on log-log axes, the spread as whiskers; all
 *    panels share one x and one y scale and one legend, so that devices
 *    and modes compare by eye;
 *  - roofline: one panel per device, each stage of each measured row a
 *    point at (arithmetic intensity, achieved GFLOP/s) under the roof
 *    min(peak GFLOP/s, intensity x peak GB/s); shared scales and legend.
 *
 * A quantity that was not measured (NaN) is not drawn, and the panel says
 * so.  Text is measured with conservative glyph widths (wider than the
 * common sans-serif fonts) and shortened or wrapped to fit its box, so
 * that nothing is clipped.  Only reads the records of bench/results.h.
 */
#ifndef CLF_BENCH_PLOT_H
#define CLF_BENCH_PLOT_H

#include "results.h"

#include <stdio.h>

/* Width of the figures, in SVG user units (CSS pixels). */
#define CLF_BENCH_FIG_W 820

/* Writes s with &, <, >, " and ' escaped for XML and HTML. */
void clf_bench_xml_text(FILE *f, const char *s);

/* An upper bound of the width of s set in a sans-serif font of size px
 * (bold when bold is nonzero). */
double clf_bench_text_width(const char *s, double size, int bold);

/* Copies s into out (len bytes), shortened with "..." at the end when it
 * is wider than max_w at that size. */
void clf_bench_fit_text(char *out, size_t len, const char *s, double size,
                        int bold, double max_w);

/* The number of panels of each figure (0: nothing to draw) and each
 * figure's height. */
size_t clf_bench_svg_time_panels(const clf_bench_report *r);
size_t clf_bench_svg_roofline_panels(const clf_bench_report *r);
double clf_bench_svg_times_height(const clf_bench_report *r);
double clf_bench_svg_roofline_height(const clf_bench_report *r);

/* Writes one figure as an <svg> element placed at y (for nesting; HTML
 * ignores it).  Returns 0, or -1 on a write error, when out of memory or
 * when there is nothing to draw. */
int clf_bench_svg_times(FILE *f, const clf_bench_report *r, double y);
int clf_bench_svg_roofline(FILE *f, const clf_bench_report *r, double y);

/* A short name of device i for legends: its stable name, or "device i". */
void clf_bench_device_label(const clf_bench_report *r, size_t i, char *out,
                            size_t len);

#endif
