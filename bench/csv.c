/* The report as CSV (bench/csv.h): the matrix rows and the accuracy rows,
 * each file a header line and a line per row, text quoted as RFC 4180
 * asks. */
#define _POSIX_C_SOURCE 200809L

#include "csv.h"

#include <math.h>
#include <string.h>

static const char csv_header[] =
    "platform,device,driver,mode,n,k,k_requested,d_model,heads,batch,"
    "causal_block,status,runs,first_call_s,median_s,min_s,max_s,"
    "device_median_s,projection_s,compression_s,scores_s,softmax_s,"
    "weighted_sum_s,fused_s,output_s,flops,gflops,device_bytes,io_bytes,"
    "precision,fp32_error,rel_error,compression,"
    "note";

static const char csv_accuracy_header[] =
    "platform,device,driver,n,k,d_model,heads,batch,status,"
    "linformer_median_s,linformer_min_s,linformer_max_s,full_median_s,"
    "rel_error_lucidrains,rel_error_fairseq,full_weight,trials,"
    "lucidrains_mean,lucidrains_mean_abs,lucidrains_max_abs,fairseq_mean,"
    "fairseq_mean_abs,fairseq_max_abs,host_max_diff,note";

const char *
clf_bench_csv_header(void)
{
    return csv_header;
}

const char *
clf_bench_csv_accuracy_header(void)
{
    return csv_accuracy_header;
}

/* A text field, quoted when it holds a comma, quote or line break. */
static void
csv_text(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\r\n") != NULL) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

/* A number; empty when not measured. */
static void
csv_num(FILE *f, double v)
{
    if (!isnan(v))
        fprintf(f, "%.9g", v);
    fputc(',', f);
}

int
clf_bench_csv_write(FILE *f, const clf_bench_report *r)
{
    size_t i;
    int s;

    fprintf(f, "%s\n", csv_header);
    for (i = 0; i < r->nresults; i++) {
        const clf_bench_result *x = &r->results[i];
        const clf_bench_device *d = &r->devices[x->device];
        csv_text(f, d->platform, 0);
        csv_text(f, d->name, 0);
        csv_text(f, d->driver, 0);
        fprintf(f, "%s,%zu,%zu,%zu,%zu,%zu,%zu,%zu,%s,%zu,",
                clf_bench_mode_name(x->mode), x->n, x->k, x->k_requested,
                x->d_model, x->heads, x->batch, x->causal_block,
                clf_bench_status_name(x->status), x->wall.runs);
        csv_num(f, x->first_call_s);
        csv_num(f, x->wall.median);
        csv_num(f, x->wall.min);
        csv_num(f, x->wall.max);
        csv_num(f, x->device_s.median);
        for (s = 0; s < CLF_STAGE_COUNT; s++)
            csv_num(f, x->stage[s].median);
        csv_num(f, x->flops);
        csv_num(f, x->gflops);
        csv_num(f, x->device_bytes);
        csv_num(f, x->io_bytes);
        fprintf(f, "%s,", clf_precision_name(x->precision));
        csv_num(f, x->fp32_error);
        csv_num(f, x->rel_error);
        fprintf(f, "%s,", clf_compression_name(x->compression));
        csv_text(f, x->note, 1);
    }
    return ferror(f) ? -1 : 0;
}

int
clf_bench_csv_accuracy_write(FILE *f, const clf_bench_report *r)
{
    size_t i;
    int w;

    fprintf(f, "%s\n", csv_accuracy_header);
    for (i = 0; i < r->naccuracy; i++) {
        const clf_bench_accuracy *a = &r->accuracy[i];
        const clf_bench_device *d = &r->devices[a->device];
        csv_text(f, d->platform, 0);
        csv_text(f, d->name, 0);
        csv_text(f, d->driver, 0);
        fprintf(f, "%zu,%zu,%zu,%zu,%zu,%s,", a->n, a->k, a->d_model, a->heads,
                a->batch, clf_bench_status_name(a->status));
        csv_num(f, a->linformer.median);
        csv_num(f, a->linformer.min);
        csv_num(f, a->linformer.max);
        csv_num(f, a->full.median);
        csv_num(f, a->rel_error[CLF_BENCH_INIT_LUCIDRAINS]);
        csv_num(f, a->rel_error[CLF_BENCH_INIT_FAIRSEQ]);
        csv_num(f, a->full_weight);
        fprintf(f, "%zu,", a->trials);
        for (w = 0; w < CLF_BENCH_INIT_COUNT; w++) {
            csv_num(f, a->weight[w].mean);
            csv_num(f, a->weight[w].mean_abs);
            csv_num(f, a->weight[w].max_abs);
        }
        csv_num(f, a->host_max_diff);
        csv_text(f, a->note, 1);
    }
    return ferror(f) ? -1 : 0;
}
