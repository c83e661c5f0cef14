#!/bin/sh
# A device selected by its stable name is the same device whatever order
# the ICD loader lists the platforms in: two vendors directories hold the
# same PoCL and Intel CPU .icd files under swapped file names (the loader
# lists them in opposite orders, which the test checks), and selecting
# intel-cpu:0 and pocl:0 by name must give the same device both ways.
# Needs PoCL and Intel's CPU runtime as scripts/runtimes.sh installs it
# (prefix $CLF_RUNTIMES_PREFIX, else $HOME/.local/share/clinformer-runtimes);
# without them it skips, saying why.  Output is TAP.
set -u
builddir=${top_builddir:-.}
sel="$builddir/tests/select_device"
prefix=${CLF_RUNTIMES_PREFIX:-${HOME:-/nonexistent}/.local/share/clinformer-runtimes}
intel_icd="$prefix/vendors/intel-cpu/intel-cpu.icd"
pocl_icd=""
for f in "$prefix/vendors/pocl/pocl.icd" /etc/OpenCL/vendors/pocl.icd; do
    if [ -f "$f" ]; then
        pocl_icd=$f
        break
    fi
done
if [ ! -f "$intel_icd" ]; then
    echo "1..0 # SKIP Intel's CPU OpenCL runtime is not installed" \
        "($intel_icd missing; sh scripts/runtimes.sh installs it)"
    exit 0
fi
if [ -z "$pocl_icd" ]; then
    echo "1..0 # SKIP PoCL is not installed (no pocl.icd)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/a" "$tmp/b"
cp "$intel_icd" "$tmp/a/1.icd"
cp "$pocl_icd" "$tmp/a/2.icd"
cp "$pocl_icd" "$tmp/b/1.icd"
cp "$intel_icd" "$tmp/b/2.icd"
unset CLINFORMER_DEVICE RUSTICL_ENABLE

pick() { # vendors dir, selector: "<index> <stable> <platform> / <name>"
    OCL_ICD_VENDORS=$1 "$sel" "$2" 2>"$tmp/err" || cat "$tmp/err" >&2
}

n=0
failed=0
report() { # ok (0 or 1), name, detail
    n=$((n + 1))
    if [ "$1" -eq 1 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        echo "$3" | sed 's/^/# /'
        failed=$((failed + 1))
    fi
}

echo "1..3"
ia=$(pick "$tmp/a" intel-cpu:0)
ib=$(pick "$tmp/b" intel-cpu:0)
pa=$(pick "$tmp/a" pocl:0)
pb=$(pick "$tmp/b" pocl:0)
# The flat index of intel-cpu:0 differs between the two orders, or the
# loader ignored the order and the test would prove nothing.
ok=0
[ -n "$ia" ] && [ -n "$ib" ] && [ "${ia%% *}" != "${ib%% *}" ] && ok=1
report $ok icd_order_two_dirs_list_platforms_in_opposite_orders \
    "a: $ia; b: $ib"
ok=0
[ -n "$ia" ] && [ "${ia#* }" = "${ib#* }" ] &&
    case $ia in *" intel-cpu:0 Intel"*) ok=1 ;; esac
report $ok icd_order_intel_cpu_by_name_is_the_same_device "a: $ia; b: $ib"
ok=0
[ -n "$pa" ] && [ "${pa#* }" = "${pb#* }" ] &&
    case $pa in *" pocl:0 Portable"*) ok=1 ;; esac
report $ok icd_order_pocl_by_name_is_the_same_device "a: $pa; b: $pb"
test "$failed" -eq 0
