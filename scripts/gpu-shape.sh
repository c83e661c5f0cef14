#!/bin/sh
# Compiles every OpenCL program of cl/ offline for AMD GPUs (Debian's
# clang-15 with libclc-15's amdgcn bitcode), as the library builds them:
# the registry's files of src/runtime/kernels.h concatenated in order with the -D
# options of src/runtime/kernel_params.h, cl/half_gemm.cl alone, and the
# wide-head build of cl/flash_wg.cl (program flash_wg_wide: its
# CLF_FLASHWG_WIDE_* sizes, as src/stages/flash_wg.c builds it).  Prints, per
# target and kernel, the registers, scratch (spills), local memory and
# occupancy the compiler reports, and whether the kernel fits a GPU: no
# scratch, and on gfx90a at least 4 waves per SIMD.
#
# What this shows: register pressure and spills of each kernel's code as
# a real GPU compiler allocates them.  What it cannot show: time, memory
# coalescing, NVIDIA's or Intel's register allocation, or the occupancy a
# launch's work-group size gives (it reads the compiler's bound).
#
#   sh scripts/gpu-shape.sh [--targets "gfx90a gfx1100"] [--out FILE]
#                           [--from FILE] [--require-fit "kernel ..."]
#
# --out writes the table as tab-separated lines (target, program, kernel,
# vgprs, agprs, scratch bytes, LDS bytes, occupancy, fit); --from reads
# such a table instead of compiling.  --require-fit exits 1 when a named
# kernel does not fit on a target (or was not compiled).  Exit 2 when the
# compiler or libclc is missing, 1 when a program does not compile.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
targets="gfx90a gfx1100"
out=""
from=""
require=""
while [ $# -gt 0 ]; do
    case $1 in
    --targets) targets=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --from) from=$2; shift 2 ;;
    --require-fit) require=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -eu/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "gpu-shape: unknown argument $1" >&2; exit 2 ;;
    esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
: >"$tmp/table"
status=0
clang=${CLANG:-clang-15}
clc=${LIBCLC:-/usr/lib/clc/amdgcn--amdhsa.bc}
if [ -n "$from" ]; then
    cp "$from" "$tmp/table"
    targets=""
elif ! command -v "$clang" >/dev/null 2>&1; then
    echo "gpu-shape: $clang not found (Debian: apt-get install clang-15)" >&2
    exit 2
fi
if [ -z "$from" ] && [ ! -r "$clc" ]; then
    echo "gpu-shape: $clc not found (Debian: apt-get install libclc-15)" >&2
    exit 2
fi

# The program as program.c builds it: the registry's files in order.
files=$(sed -n 's/^ *FILE(\([a-z0-9_]*\)).*/\1/p' "$top/src/runtime/kernels.h")
for f in $files; do
    cat "$top/cl/$f.cl"
done >"$tmp/main.cl"
cp "$top/cl/half_gemm.cl" "$tmp/half_gemm.cl"
cat "$top/cl/common.cl" "$top/cl/flash_wg.cl" >"$tmp/flash_wg_wide.cl"
params() { sed -n 's/.*X(\(CLF_[A-Z0-9_]*\), *\([0-9]*\)).*/\1 \2/p' \
    "$top/src/runtime/kernel_params.h"; }
opts=$(params | awk '{ printf "-D%s=%s ", $1, $2 }')
# The wide build: ROWS, SPLIT, DH and KEYS take the WIDE_ values.
wide_opts=$(params | awk '{ v[$1] = $2; o[NR] = $1 }
    END { for (i = 1; i <= NR; i++) { n = o[i]; x = v[n]
              if (n ~ /^CLF_FLASHWG_(ROWS|SPLIT|DH|KEYS)$/) {
                  w = n; sub("CLF_FLASHWG_", "CLF_FLASHWG_WIDE_", w); x = v[w] }
              printf "-D%s=%s ", n, x } }')

# The compiler's comments after each kernel's label, one line a kernel.
report() { # target program asm
    awk -v t="$1" -v p="$2" '
        /^clf_[a-z0-9_]*:/ { k = $1; sub(":", "", k); v = s = l = o = ""; a = "-" }
        k != "" && /; NumVgprs:/ { v = $3 }
        k != "" && /; TotalNumVgprs:/ { v = $3 }
        k != "" && /; NumAgprs:/ { a = $3 }
        k != "" && /; ScratchSize:/ { s = $3 }
        k != "" && /; LDSByteSize:/ { l = $3 }
        k != "" && /; Occupancy:/ {
            o = $3
            fit = (s == 0 && (t != "gfx90a" || o >= 4)) ? "yes" : "no"
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t, p, k, v, a, s, l, o, fit
            k = ""
        }' "$3"
}

for t in $targets; do
    for p in main half_gemm flash_wg_wide; do
        o=$opts
        [ "$p" = flash_wg_wide ] && o=$wide_opts
        # shellcheck disable=SC2086
        if ! "$clang" -x cl -cl-std=CL1.2 -target amdgcn-amd-amdhsa \
            -mcpu="$t" -nogpulib -Xclang -mlink-bitcode-file -Xclang "$clc" \
            -Wno-linker-warnings $o -O3 -S -o "$tmp/$p-$t.s" \
            "$tmp/$p.cl" 2>"$tmp/err"; then
            echo "gpu-shape: $p.cl does not compile for $t:" >&2
            sed 's/^/  /' "$tmp/err" | head -20 >&2
            status=1
            continue
        fi
        report "$t" "$p" "$tmp/$p-$t.s" >>"$tmp/table"
    done
done

printf '%-8s %-13s %-24s %5s %5s %8s %6s %4s %s\n' target program kernel \
    vgprs agprs scratch lds occ fit
awk -F '\t' '{ printf "%-8s %-13s %-24s %5s %5s %8s %6s %4s %s\n",
    $1, $2, $3, $4, $5, $6, $7, $8, $9 }' "$tmp/table"
total=$(wc -l <"$tmp/table")
unfit=$(awk -F '\t' '$9 == "no"' "$tmp/table" | wc -l)
echo "gpu-shape: $total kernel compiles, $unfit unfit" \
    "(scratch > 0, or under 4 waves per SIMD on gfx90a)"
[ -z "$out" ] || cp "$tmp/table" "$out"

for k in $require; do
    if ! awk -F '\t' -v k="$k" '$3 == k { n++ } END { exit n ? 0 : 1 }' \
        "$tmp/table"; then
        echo "gpu-shape: no kernel $k was compiled" >&2
        status=1
    fi
    bad=$(awk -F '\t' -v k="$k" '$3 == k && $9 == "no" { print $1 }' \
        "$tmp/table" | tr '\n' ' ')
    if [ -n "$bad" ]; then
        echo "gpu-shape: $k does not fit on: $bad" >&2
        status=1
    fi
done
exit $status
