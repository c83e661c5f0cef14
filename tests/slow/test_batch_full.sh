#!/bin/sh
# tests/test_batch_full, full mode at B = 8, n = 4096 on every attend and GEMM way against the streaming path (tests/test_batch_full.c).
# Minutes on a CPU: run by make check-slow.  TAP, from the suite.
suite="${top_builddir:-.}/tests/test_batch_full"
if [ ! -x "$suite" ]; then
    echo "1..0 # SKIP $suite is not built (configured without Check)"
    exit 0
fi
exec "$suite"
