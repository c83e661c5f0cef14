/* clinformer-bench: the bench suite as a program of its own; the same suite
 * runs as `clinformer bench`.  See bench/suite.h and --help. */
#include "suite.h"

int
main(int argc, char **argv)
{
    return clf_bench_main(argc, argv);
}
