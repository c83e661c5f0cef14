#!/bin/sh
# Compiles every OpenCL program of cl/ offline for AMD and NVIDIA GPUs, as
# the library builds them: the registry's files of src/runtime/kernels.h
# concatenated in order with the -D options of src/runtime/kernel_params.h,
# cl/half_gemm.cl alone, and the wide-head build of cl/flash_wg.cl (program
# flash_wg_wide: its CLF_FLASHWG_WIDE_* sizes, as src/stages/flash_wg.c
# builds it).  Prints, per target and kernel, the registers, scratch
# (spills, and on NVIDIA the stack frame), local memory and occupancy, and
# whether the kernel fits a GPU.
#
# AMD (gfx90a, gfx1100): Debian's clang-15 with libclc-15's amdgcn
# bitcode; the occupancy is the compiler's bound in waves per SIMD; a
# kernel fits with no scratch and, on gfx90a, at least 4 waves.
# NVIDIA (sm_80, sm_90): clang-15 to PTX (nvptx64-nvidia-nvcl, libclc-15's
# nvidiacl bitcode), then NVIDIA's ptxas -v (scripts/install-ptxas.sh
# fetches it); the occupancy is computed from the registers, the local
# memory and the work-group size the library launches the kernel with on
# NVIDIA (warps of 32: column wg; "*" where the driver chooses and 256 is
# assumed), with 64 K registers allocated 256 a warp, 2048 items and 32
# groups per multiprocessor; a kernel fits with no spill and no stack, at
# most 48 KiB of local memory a group (NVIDIA's OpenCL limit) and at least
# 25% occupancy.  half_gemm.cl is not built for NVIDIA: its driver has no
# cl_khr_fp16, and the library builds the program only where a device
# reports it (reported as such).
#
# What this shows: register pressure, spills and local memory of each
# kernel's code as a real GPU back end allocates them.  What it cannot
# show: time, memory coalescing, Intel's register allocation, or what
# NVIDIA's own OpenCL front end makes of the source (its back end is the
# ptxas run here).
#
#   sh scripts/gpu-shape.sh [--targets "gfx90a gfx1100 sm_80 sm_90"]
#                           [--out FILE] [--from FILE]
#                           [--require-fit "kernel ..."]
#
# --out writes the table as tab-separated lines (target, program, kernel,
# registers, agprs, scratch bytes, local bytes, occupancy (waves per SIMD
# on AMD, percent on NVIDIA), fit, work-group size); --from reads such a
# table instead of compiling.  --require-fit exits 1 when a named kernel
# does not fit on a target (or was not compiled).  Exit 2 when clang-15
# or libclc-15 is missing, or ptxas for an NVIDIA target named in
# --targets (without --targets the NVIDIA targets are left out, said so,
# where ptxas is missing); 1 when a program does not compile.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
targets=""
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
clc_nv=${LIBCLC_NVPTX:-/usr/lib/clc/nvptx64--nvidiacl.bc}
# ptxas: $PTXAS, the PATH, CUDA's default place, scripts/install-ptxas.sh's
find_ptxas() {
    for p in "${PTXAS:-}" "$(command -v ptxas 2>/dev/null || true)" \
        /usr/local/cuda/bin/ptxas "${HOME:-/root}/.cache/clinformer-tools/bin/ptxas"; do
        [ -n "$p" ] && [ -x "$p" ] && "$p" --version >/dev/null 2>&1 &&
            echo "$p" && return 0
    done
    return 1
}
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
ptxas=""
if [ -z "$from" ]; then
    ptxas=$(find_ptxas) || ptxas=""
    if [ -z "$targets" ]; then
        targets="gfx90a gfx1100"
        if [ -n "$ptxas" ]; then
            targets="$targets sm_80 sm_90"
        else
            echo "gpu-shape: no ptxas (sh scripts/install-ptxas.sh, or PTXAS=FILE): NVIDIA targets left out" >&2
        fi
    fi
    case " $targets " in
    *" sm_"*)
        if [ -z "$ptxas" ]; then
            echo "gpu-shape: ptxas not found for the NVIDIA targets (sh scripts/install-ptxas.sh, or PTXAS=FILE)" >&2
            exit 2
        fi
        if [ ! -r "$clc_nv" ]; then
            echo "gpu-shape: $clc_nv not found (Debian: apt-get install libclc-15)" >&2
            exit 2
        fi
        ;;
    esac
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
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\n", t, p, k, v, a, s, l, o, fit
            k = ""
        }' "$3"
}

# NVIDIA: the work-group size each kernel is launched with there (warps of
# 32), by how the library launches it: clf__launch_1d doubles the preferred
# multiple up to 256; clf__enqueue3 with grouping takes twice the multiple
# (64), without it leaves the size to the driver (256 assumed, marked *);
# the rest set their own (src/stages/softmax.c, causal.c, flash_wg.c,
# src/gemm/gemm_tiled.c).
nv_wg_table() {
    p=$top/src/runtime/kernel_params.h
    val() { sed -n "s/.*X($1, *\([0-9]*\)).*/\1/p" "$p"; }
    sed -n 's/^ *KERNEL(\([A-Z0-9_]*\), *\(clf_[a-z0-9_]*\)).*/\1 \2/p' \
        "$top/src/runtime/kernels.h" | while read -r id name; do
        wg="256*"
        if grep -rqE "clf__launch_1d\(ctx, CLF_K_$id\b" "$top/src"; then
            wg=256
        elif grep -rqE "clf__enqueue3\(ctx, CLF_K_$id, *[a-z]+, *1" "$top/src"; then
            wg=64
        fi
        case $name in
        clf_softmax_rows | clf_softmax_rows_vec) wg=256 ;; # launch_1d by variant
        clf_softmax_rows_wg) wg=$(val CLF_SOFTMAX_WG) ;;
        clf_flash_wg) wg=$(($(val CLF_FLASHWG_ROWS) * $(val CLF_FLASHWG_SPLIT))) ;;
        clf_gemm_tiled) wg=$(($(val CLF_TILED_MDIM) * $(val CLF_TILED_NDIM))) ;;
        esac
        echo "main $name $wg"
    done
    echo "flash_wg_wide clf_flash_wg $(($(val CLF_FLASHWG_WIDE_ROWS) * $(val CLF_FLASHWG_WIDE_SPLIT)))"
}

# ptxas -v's report, one line a kernel, with the occupancy at its
# work-group size (the wg table first on the input).
nv_report() { # target program wg-table ptxas-log
    awk -v t="$1" -v p="$2" '
        FILENAME == ARGV[1] { if ($1 == p) wg[$2] = $3; next }
        /Compiling entry function/ { k = $0; sub(/.*function \047/, "", k)
            sub(/\047.*/, "", k); props = 0; stack = spill = 0; next }
        /Function properties for/ { props = (k != "" && index($0, "for " k) > 0); next }
        props && /bytes stack frame/ { stack = $1 + 0; spill = $5 + 0; props = 0; next }
        k != "" && /Used [0-9]+ registers/ {
            r = $0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r)
            sm = 0
            if (match($0, /[0-9]+ bytes smem/)) { sm = substr($0, RSTART); sub(/ .*/, "", sm); sm += 0 }
            w = (k in wg) ? wg[k] : "256*"
            items = w; sub(/\*/, "", items)
            warps = int((items + 31) / 32)
            rpt = int((r + 7) / 8) * 8 # registers a thread, as allocated
            rpw = int((rpt * 32 + 255) / 256) * 256
            per_part = rpw > 0 ? int(16384 / rpw) : 64 # warps a quarter SM
            by_regs = int(per_part * 4 / warps)
            by_items = int(64 / warps)
            smem_sm = (t == "sm_80") ? 167936 : 233472
            by_smem = sm > 0 ? int(smem_sm / (sm + 1024)) : 32
            b = by_regs; if (by_items < b) b = by_items
            if (by_smem < b) b = by_smem; if (b > 32) b = 32
            occ = int(b * warps * 100 / 64)
            fit = (spill == 0 && stack == 0 && sm <= 49152 && occ >= 25) ? "yes" : "no"
            printf "%s\t%s\t%s\t%s\t-\t%s\t%s\t%s%%\t%s\t%s\n", t, p, k, r, stack + spill, sm, occ, fit, w
            k = ""
        }' "$3" "$4"
}

nv_compile() { # target program options
    # shellcheck disable=SC2086
    "$clang" -x cl -cl-std=CL1.2 -target nvptx64-nvidia-nvcl -nogpulib \
        -Xclang -mlink-bitcode-file -Xclang "$clc_nv" -Wno-linker-warnings \
        $3 -O3 -S -o "$tmp/$2-nv.ptx" "$tmp/$2.cl" 2>"$tmp/err" &&
        "$ptxas" -arch="$1" -v -o /dev/null "$tmp/$2-nv.ptx" 2>"$tmp/$2-$1.log" ||
        { cat "$tmp/$2-$1.log" >>"$tmp/err" 2>/dev/null; return 1; }
}

for t in $targets; do
    case $t in
    sm_*)
        nv_wg_table >"$tmp/wg"
        for p in main flash_wg_wide; do
            o=$opts
            [ "$p" = flash_wg_wide ] && o=$wide_opts
            if ! nv_compile "$t" "$p" "$o"; then
                echo "gpu-shape: $p.cl does not compile for $t:" >&2
                sed 's/^/  /' "$tmp/err" | head -20 >&2
                status=1
                continue
            fi
            nv_report "$t" "$p" "$tmp/wg" "$tmp/$p-$t.log" >>"$tmp/table"
        done
        echo "gpu-shape: half_gemm.cl not built for $t: NVIDIA's OpenCL driver has no cl_khr_fp16, and the library builds it only where a device reports it" >&2
        continue
        ;;
    esac
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

printf '%-8s %-13s %-24s %5s %5s %8s %6s %4s %-3s %s\n' target program kernel \
    regs agprs scratch local occ fit wg
awk -F '\t' '{ printf "%-8s %-13s %-24s %5s %5s %8s %6s %4s %-3s %s\n",
    $1, $2, $3, $4, $5, $6, $7, $8, $9, ($10 == "" ? "-" : $10) }' "$tmp/table"
total=$(wc -l <"$tmp/table")
unfit=$(awk -F '\t' '$9 == "no"' "$tmp/table" | wc -l)
echo "gpu-shape: $total kernel compiles, $unfit unfit" \
    "(AMD: scratch > 0, or under 4 waves per SIMD on gfx90a;" \
    "NVIDIA: a spill or stack, over 48 KiB local, or under 25% occupancy)"
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
