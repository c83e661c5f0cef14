#!/bin/sh
# tests/test_tune over the tuner's search space: every Xgemm candidate a
# call may try, all five settings of CLBlast's direct/indirect switch and
# the first four XgemmDirect sets, where make check's run of the suite
# searches a narrowed space (see tests/test_tune.c); each setting is a new
# build of CLBlast's GEMM program.  CLF_TEST_TUNE_DIRECT_GRID=1 adds the
# whole XgemmDirect grid in one call (about twenty more minutes on PoCL
# from empty caches; not in CI).  Run by make check-slow.  TAP, from the
# suite.
suite="${top_builddir:-.}/tests/test_tune"
if [ ! -x "$suite" ]; then
    echo "1..0 # SKIP $suite is not built (configured without Check)"
    exit 0
fi
CLF_TEST_TUNE_SPACE=full exec "$suite"
