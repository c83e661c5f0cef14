#!/bin/sh
# The device kit's programs find their shared objects by themselves: each
# libexec/ program and each bundled shared object carries an
# $ORIGIN-relative run path, so a program copied elsewhere together with
# the kit's lib/ folder (at the same relative place) runs with no
# LD_LIBRARY_PATH and no bin/ wrapper.  Builds a kit into a temporary
# directory with scripts/device-bundle.sh (a stand-in file for the
# linformer wheel, so no download); skipped where the kit cannot be built
# (no Check, so no test programs).  TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"

kit=$tmp/kit
: >"$tmp/linformer-0-py3-none-any.whl"
# The run paths are checked here, not the size (CI's part kit checks the
# 64 MiB of a default build; sanitized programs are larger).
if ! LINFORMER_DIST="$tmp/linformer-0-py3-none-any.whl" \
    DEVICE_BUNDLE_MAX_MIB=1024 sh "$srcdir/scripts/device-bundle.sh" "$srcdir" "$builddir" "$kit" \
    >"$out" 2>"$err"; then
    if grep -q 'needs Check\|no built .*/tests/' "$err"; then
        echo "1..0 # SKIP the device kit needs the test programs (Check)"
        exit 0
    fi
    echo "1..1"
    echo "not ok 1 - the device kit builds"
    sed 's/^/# /' "$out" "$err" | head -40
    exit 1
fi
echo "1..6"

# runpath FILE: the file's DT_RUNPATH (or DT_RPATH), empty when none
runpath() {
    readelf -d "$1" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]$/\1/p'
}

# every ELF file in DIR... has the run path WANT
all_have() {
    want=$1
    shift
    : >"$err"
    for f in "$@"; do
        [ -f "$f" ] || continue
        got=$(runpath "$f")
        [ "$got" = "$want" ] || {
            echo "$f: run path '$got', wanted '$want'" >>"$err"
            return 1
        }
    done
}
check "libexec programs have the run path \$ORIGIN/../lib" \
    all_have '$ORIGIN/../lib' "$kit"/libexec/*
check "device test programs have the run path \$ORIGIN/../../lib" \
    all_have '$ORIGIN/../../lib' "$kit"/libexec/tests/*
check "bundled shared objects have the run path \$ORIGIN" \
    all_have '$ORIGIN' "$kit"/lib/*.so*

# A program and lib/ copied elsewhere, run from another directory with no
# library path.
moved=$tmp/elsewhere/x
mkdir -p "$moved/apps/tests"
cp "$kit/libexec/clinformer" "$moved/apps/"
cp -R "$kit/lib" "$moved/lib"
t=$(ls "$kit/libexec/tests" | head -1)
cp "$kit/libexec/tests/$t" "$moved/apps/tests/"
rm -rf "$kit"
cd "$tmp" || exit 1

resolves() { # program: ldd finds every shared object, libclinformer in lib/
    env -u LD_LIBRARY_PATH ldd "$1" >"$out" 2>"$err" &&
        ! grep -q 'not found' "$out" &&
        grep -q "libclinformer.so.* => $moved/apps/.*lib/libclinformer" "$out"
}
check "a copied program resolves libclinformer from its lib/" \
    resolves "$moved/apps/clinformer"
check "a copied program runs with no LD_LIBRARY_PATH" \
    sh -c 'env -u LD_LIBRARY_PATH "$1" version >"$2" 2>"$3" &&
        grep -q clinformer "$2"' sh "$moved/apps/clinformer" "$out" "$err"
check "a copied device test program takes the OpenCL loader from lib/" \
    sh -c 'env -u LD_LIBRARY_PATH ldd "$1" >"$2" 2>"$3" &&
        ! grep -q "not found" "$2" &&
        grep -q "libOpenCL.so.1 => $4/apps/tests/../../lib/" "$2"' \
    sh "$moved/apps/tests/$t" "$out" "$err" "$moved"

test $failed -eq 0
