#!/bin/sh
# tests/test_tune over the tuner's whole search space, through clf_tune()
# itself: every Xgemm candidate a call may try and all five settings of
# CLBlast's direct/indirect switch, and every XgemmDirect set of the grid
# valid for the device in one call, where make check's run of the suite
# searches a narrowed space (see tests/test_tune.c).  About twenty
# minutes on PoCL from empty caches: each setting is a new build of
# CLBlast's GEMM program.  Run by make check-slow.  TAP, from the suite.
suite="${top_builddir:-.}/tests/test_tune"
if [ ! -x "$suite" ]; then
    echo "1..0 # SKIP $suite is not built (configured without Check)"
    exit 0
fi
CLF_TEST_TUNE_SPACE=full exec "$suite"
