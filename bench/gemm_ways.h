/* bench_layer --gemm: the GEMM stages of a Linformer forward with each
 * named GEMM kernel forced in turn, side by side (gemm_ways.c). */
#ifndef CLF_BENCH_GEMM_WAYS_H
#define CLF_BENCH_GEMM_WAYS_H

#include "clinformer.h"

struct gemm_ways_run {
    const char *const *ways; /* kernel names of the `gemm` choice */
    size_t nways, repeat, batch, n;
    cl_mem x, y; /* input and output, batch x n x D floats */
    int print_header;
};

/* Splits a comma list (modified in place) into at most 4 names; 0, or 2
 * after a message. */
int gemm_ways_parse(char *list, const char **ways, size_t *count);

/* Rounds of forwards, one per kernel in turn, on a profiling context;
 * prints per-stage medians (ms and GFLOP/s).  0 or a clinformer status. */
int gemm_ways_measure(clf_context *ctx, clf_attention *att,
                      const clf_attention_desc *d,
                      const struct gemm_ways_run *r);

#endif
