#!/bin/sh
# tests/test_gpu_fill, the launch fill of the GPU path at the production shape (tests/test_gpu_fill.c; with CLF_GPU_SHAPE_TABLE, a gpu-shape.sh --out table, it spares its own offline compile).
# Minutes on a CPU: run by make check-slow.  TAP, from the suite.
suite="${top_builddir:-.}/tests/test_gpu_fill"
if [ ! -x "$suite" ]; then
    echo "1..0 # SKIP $suite is not built (configured without Check)"
    exit 0
fi
exec "$suite"
