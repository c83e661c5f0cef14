#include "suite.h"

int
main(int argc, char **argv)
{
    return clf_bench_main(argc, argv);
}
