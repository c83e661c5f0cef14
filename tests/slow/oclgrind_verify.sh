#!/bin/sh
# clinformer verify under oclgrind, the OpenCL device simulator, for 20 s
# (the first few cases of its strided order, each a minute at most), with
# its API and data-race checks: every case must pass and the
# simulator report no invalid access, race or API error.  Its
# uninitialised-value check stays off here: CLBlast's XgemmDirect kernels,
# which small GEMMs use, trip it by design (tests/oclgrind.sh runs every
# custom kernel with it on).  Run by make check-slow.  TAP.
set -u
builddir=${top_builddir:-.}
name="verify_clean_under_oclgrind"

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
save=$(mktemp -d)
trap 'rm -rf "$log" "$save"' EXIT
# oclgrind is the only platform under it: a device selector meant for the
# real runtimes must not follow it there.
env -u CLINFORMER_DEVICE -u OCL_ICD_VENDORS -u CLINFORMER_KERNELS \
    CLINFORMER_CACHE_DIR=off \
    oclgrind --check-api --data-races "$builddir/clinformer" verify \
    --budget 20 --save "$save" >"$log" 2>&1
status=$?
if [ $status -eq 0 ] && grep -q '^verify: [1-9][0-9]* passed, 0 failed' "$log" &&
    ! grep -Eqi 'invalid (read|write)|data race|runtime error|error detected' \
        "$log"; then
    echo "ok 1 - $name ($(sed -n 's/^verify: \([0-9]* passed.*\)/\1/p' "$log"))"
    exit 0
fi
echo "not ok 1 - $name (exit $status)"
sed 's/^/# /' "$log" | head -60
exit 1
