/* The bench suite (placeholder). */
#ifndef CLF_BENCH_SUITE_H
#define CLF_BENCH_SUITE_H
int clf_bench_main(int argc, char **argv);
#endif
