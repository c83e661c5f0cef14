/* Writes the bench's figures and HTML report for a made-up run of two
 * devices, for tests/test_bench_figures.sh to parse and render:
 *
 *   bench_figures DIR   writes DIR/figures.svg, DIR/report.html and
 *                       DIR/run.json
 *
 * The first device has measured peaks and counted stage intensities, the
 * second has neither (NaN: nothing may be drawn for them) and a name far
 * too long for any title.  Times follow a power law in n, so that the
 * expected picture is known. */
#define _POSIX_C_SOURCE 200809L

#include "html.h"
#include "output.h"
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void
add_dev(clf_bench_report *r, const char *stable, const char *name, double peak,
        double gbps)
{
    clf_bench_device *d = clf_bench_report_add_device(r);

    d->index = (unsigned)r->ndevices - 1;
    snprintf(d->platform, sizeof d->platform, "Portable Computing Language");
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->driver, sizeof d->driver, "6.0 <&\"'>");
    snprintf(d->version, sizeof d->version, "OpenCL 3.0 PoCL");
    snprintf(d->stable_name, sizeof d->stable_name, "%s", stable);
    d->compute_units = 2;
    d->global_mem = 1ULL << 32;
    d->peak_gflops = peak;
    d->peak_gbps = gbps;
    d->build_s = 0.5;
}

static void
add_row(clf_bench_report *r, size_t dev, clf_bench_mode m, size_t n,
        double scale)
{
    clf_bench_result *x = clf_bench_report_add_result(r);
    double t =
        scale * 1e-3 * pow((double)n / 256.0, m == CLF_BENCH_FULL ? 2 : 1);
    int s;

    x->device = dev;
    x->mode = m;
    x->n = n;
    x->k = m == CLF_BENCH_FULL ? 0 : 64;
    x->k_requested = 64;
    x->d_model = 128;
    x->heads = 4;
    x->batch = 1;
    if (n > 2048) {
        x->status = CLF_BENCH_TOO_LARGE;
        snprintf(x->note, sizeof x->note, "a buffer exceeds <max_alloc>");
        return;
    }
    x->wall.median = t;
    x->wall.min = 0.9 * t;
    x->wall.max = 1.3 * t;
    x->wall.runs = 5;
    x->noisy = 1;
    x->flops = 1e9 * t;
    x->gflops = 1.0;
    for (s = 0; s < CLF_STAGE_COUNT; s++) {
        x->stage[s].median = t / CLF_STAGE_COUNT;
        x->stage[s].runs = 5;
        x->stage_flops[s] = 1e9 * t * (s + 1) / 28.0;
        if (dev == 0) {
            x->stage_intensity[s] = 0.5 * (s + 1) * (double)n / 256.0;
            x->stage_roofline_pct[s] = 10.0 * (s + 1);
        }
    }
    if (dev == 0)
        x->roofline_pct = 12.5;
}

static void
fill(clf_bench_report *r)
{
    static const size_t ns[] = {256, 512, 1024, 2048, 4096};
    size_t i, d;
    clf_bench_accuracy *a;

    clf_bench_report_init(r);
    snprintf(r->version, sizeof r->version, "0.1.0");
    snprintf(r->started, sizeof r->started, "2026-01-02T03:04:05Z");
    snprintf(r->host, sizeof r->host, "host <one>");
    snprintf(r->command, sizeof r->command,
             "clinformer bench --quick --device all --html r.html");
    r->repeat = 5;
    r->budget_s = 150;
    r->wall_s = 42;
    r->load_start[0] = r->load_start[1] = r->load_start[2] = 0.5;
    add_dev(r, "pocl:0", "cpu-haswell-AMD EPYC 7B13 64-Core Processor", 80, 12);
    add_dev(r, "",
            "A device whose name is far too long for any title of any panel "
            "WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW",
            NAN, NAN);
    for (d = 0; d < 2; d++)
        for (i = 0; i < 5; i++) {
            add_row(r, d, CLF_BENCH_LINFORMER, ns[i], 1.0 + 2.0 * (double)d);
            add_row(r, d, CLF_BENCH_FULL, ns[i], 0.5 + 2.0 * (double)d);
        }
    a = clf_bench_report_add_accuracy(r);
    a->n = 1024;
    a->k = 64;
    a->d_model = 128;
    a->heads = 4;
    a->batch = 1;
    a->linformer.median = 0.002;
    a->full.median = 0.004;
    a->rel_error[0] = 0.9;
    a->rel_error[1] = 0.5;
}

static int
write(const char *dir, const char *name, clf_bench_writer w,
      const clf_bench_report *r)
{
    char path[4096];

    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (clf_bench_write_file(path, w, r) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    clf_bench_report r;
    int bad;

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    fill(&r);
    bad = write(argv[1], "figures.svg", clf_bench_svg_write, &r) |
          write(argv[1], "report.html", clf_bench_html_write, &r) |
          write(argv[1], "run.json", clf_bench_json_fwrite, &r);
    clf_bench_report_free(&r);
    return bad;
}
