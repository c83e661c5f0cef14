#!/bin/sh
# Runs every custom kernel under oclgrind, the OpenCL device simulator, and
# fails on any invalid memory access, data race, uninitialised read or API
# error it reports.  Output is TAP.  OCLGRIND_PART picks the kernels (see
# tests/oclgrind_driver.c): quick (the default, make check's: all but the
# work-group streaming kernel, which takes the simulator minutes), all,
# or flash_wg (that one alone, make check-slow's
# tests/slow/oclgrind_flash_wg.sh).
set -u
builddir=${top_builddir:-.}
driver="$builddir/tests/oclgrind_driver"
part=${OCLGRIND_PART:-quick}
name="kernels_clean_under_oclgrind ($part)"

echo "1..1"
if ! command -v oclgrind >/dev/null 2>&1; then
    if [ "${CLINFORMER_REQUIRE_DEVICE:-0}" = 1 ]; then
        echo "not ok 1 - $name # oclgrind not installed"
        exit 1
    fi
    echo "ok 1 - $name # SKIP oclgrind not installed"
    exit 0
fi
log=$(mktemp)
# CLINFORMER_KERNELS skips the timing of the kernel choices, which would
# run thousands of rows through the simulator; the driver runs every
# variant itself.  oclgrind is then the only platform, so a device
# selector meant for the real runtimes must not follow it there.
env -u CLINFORMER_DEVICE -u OCL_ICD_VENDORS CLINFORMER_CACHE_DIR=off \
CLINFORMER_KERNELS=softmax=scalar,gemm=clblast,attend=gemm \
    oclgrind --check-api --data-races --uninitialized "$driver" "$part" >"$log" 2>&1
status=$?
if [ $status -eq 0 ] && ! grep -Eqi \
    'invalid (read|write)|data race|uninitiali[sz]ed|runtime error|error detected' \
    "$log"; then
    echo "ok 1 - $name"
    rc=0
else
    echo "not ok 1 - $name (exit $status)"
    sed 's/^/# /' "$log" | head -60
    rc=1
fi
rm -f "$log"
exit $rc
