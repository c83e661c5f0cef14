/* Bench output (placeholder). */
#ifndef CLF_BENCH_OUTPUT_H
#define CLF_BENCH_OUTPUT_H
#endif
