#!/bin/sh
# clinformer verify: on this device every case it runs within 5 s
# passes, with the count printed and in the JSON; one case reruns alone
# by its number; a planted off-by-one in a kernel (cl/ copied to a
# CLINFORMER_KERNEL_DIR and changed) is found, the out-of-bounds write by
# the guard bands with the kernel named, the wrong value by the reference,
# and the reproducer line it prints fails with the planted kernels and
# passes without them; bad options are usage errors.  TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"
fresh_cache
echo "1..10"

counts() { # the summary line of $out: passed failed refused not-run
    sed -n 's/^verify: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) refused, \([0-9]*\) not run.*/\1 \2 \3 \4/p' "$out"
}

passes() {
    "$cli" verify --budget 5 --json "$tmp/v.json" >"$out" 2>"$err" &&
        set -- $(counts) && test "$1" -gt 0 && test "$2" -eq 0 &&
        grep -q '"schema": "clinformer-verify/1"' "$tmp/v.json" &&
        grep -q "\"passed\": $1," "$tmp/v.json" &&
        grep -q '"failed": 0,' "$tmp/v.json" &&
        grep -q '"guard_bands": true' "$tmp/v.json"
}
check "every case run within 5 s passes; counts in the JSON" passes

one_case() {
    "$cli" verify --case 7 --verbose >"$out" 2>"$err" &&
        grep -q '^pass case 7: ' "$out" &&
        set -- $(counts) && test "$1 $2 $3 $4" = "1 0 0 0"
}
check "--case 7 runs that case alone" one_case

json_stdout() {
    "$cli" verify --case 3 --json - >"$out" 2>"$err" &&
        grep -q '"schema": "clinformer-verify/1"' "$out" &&
        ! grep -q '^verify:' "$out" && grep -q '^verify: 1 passed' "$err"
}
check "--json - keeps standard output for the JSON" json_stdout

# plant FILE OLD NEW: a copy of cl/ in $tmp/planted with OLD replaced by
# NEW in FILE (once; fails when OLD is not there).
plant() {
    rm -rf "$tmp/planted" "$tmp/fail"
    mkdir "$tmp/planted" && cp "$srcdir"/cl/*.cl "$tmp/planted/" &&
        grep -qF -e "$2" "$tmp/planted/$1" &&
        awk -v old="$2" -v new="$3" '
            !done && index($0, old) { i = index($0, old)
                $0 = substr($0, 1, i - 1) new substr($0, i + length(old)); done = 1 }
            { print }' "$srcdir/cl/$1" >"$tmp/planted/$1" &&
        ! cmp -s "$srcdir/cl/$1" "$tmp/planted/$1"
}

# found TEXT: verify with the planted kernels fails (exit 3) naming TEXT
# and prints a reproducer, kept in $tmp/repro.
found() {
    CLINFORMER_KERNEL_DIR="$tmp/planted" "$cli" verify --budget 1 \
        --save "$tmp/fail" >"$out" 2>"$err"
    test $? -eq 3 && grep -q "^fail case" "$out" &&
        grep -qF -e "$1" "$out" &&
        sed -n 's/^  reproduce: //p' "$out" | head -1 >"$tmp/repro" &&
        test -s "$tmp/repro" && grep -q "^  or: .* --case [0-9]*$" "$out"
}

# reproduces: the reproducer fails with the planted kernels, passes
# without them.
reproduces() {
    (PATH="$builddir:$PATH" CLINFORMER_KERNEL_DIR="$tmp/planted" \
        sh "$tmp/repro") >"$out" 2>"$err"
    test $? -ne 0 || return 1
    (PATH="$builddir:$PATH" sh "$tmp/repro") >"$out" 2>"$err" &&
        grep -q '^MATCH' "$out"
}

# The bias kernel's bound off by one: the item past the last element
# adds to the float after the output.
check "plant: clf_add_bias's bound off by one" \
    plant gemm.cl "if (gid >= (size_t)rows * cols)" "if (gid > (size_t)rows * cols)"
check "verify names the kernel writing past a buffer" \
    found "kernel clf_add_bias wrote outside device buffer"
check "its reproducer fails planted, passes as shipped" reproduces
# The scalar softmax's exponentials stop a column short: a wrong value,
# no out-of-bounds write.
check "plant: the softmax's exponential loop stops a column short" \
    plant softmax.cl "for (uint j = 0; j < cols; j++) {" \
    "for (uint j = 0; j + 1 < cols; j++) {"
check "verify finds the wrong value against the reference" \
    found "above the tolerance"
check "its reproducer fails planted, passes as shipped" reproduces

bad_options() {
    fails 2 "--case" verify --case 0 &&
        fails 2 "the cases are 1 to" verify --case 100000 &&
        fails 2 "--budget" verify --budget -1
}
check "bad --case and --budget are usage errors" bad_options
test $failed -eq 0
