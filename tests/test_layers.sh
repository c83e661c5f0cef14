#!/bin/sh
# The library's layering holds (scripts/check-layers.sh over the built
# objects and the sources), and the check fails where it must: on an
# object of the runtime floor that calls a GEMM function (a planted upward
# call), on two files that call each other, and on a file outside the
# floors.  TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"
layers="$srcdir/scripts/check-layers.sh"
echo "1..4"

check "the library's calls and includes keep to the floors" \
    sh -c 'sh "$0" --objects "$1" >"$2" 2>"$3"' "$layers" "$builddir" "$out" "$err"

# A runtime file calling up into the GEMM floor.
cat >"$tmp/planted.c" <<'SRC'
int clf__gemm_resolve(void *ctx, unsigned long m, unsigned long n,
                      unsigned long k, int *variant);
int clf__planted(int *v) { return clf__gemm_resolve(0, 1, 1, 1, v); }
SRC
${CC:-cc} -c -o "$tmp/planted.o" "$tmp/planted.c"
planted() {
    ! sh "$layers" --objects "$builddir" --plant "runtime:$tmp/planted.o" \
        >"$out" 2>"$err" &&
        grep -q "upward call: runtime/planted calls gemm/gemm (clf__gemm_resolve)" "$out"
}
check "a planted upward call fails the check, named" planted

cycle() {
    printf 'layer/plan layer/weights\nlayer/weights layer/flops\nlayer/flops layer/plan\n' \
        >"$tmp/edges"
    ! sh "$layers" --edges "$tmp/edges" >"$out" 2>"$err" &&
        grep -q "around a cycle: .*layer/plan" "$out"
}
check "files calling each other around a cycle fail the check" cycle

upward_edge() {
    printf 'stages/flash model/model\n' >"$tmp/edges"
    ! sh "$layers" --edges "$tmp/edges" >"$out" 2>"$err" &&
        grep -q "upward call: stages/flash calls model/model" "$out"
}
check "an upward edge fails the check" upward_edge

test $failed -eq 0
