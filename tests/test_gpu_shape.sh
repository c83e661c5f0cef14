#!/bin/sh
# The offline GPU check (scripts/gpu-shape.sh) on the project's own
# kernels: every kernel of the registry and of cl/half_gemm.cl compiles
# for gfx90a and gfx1100, and every registry kernel for NVIDIA sm_80 and
# sm_90 (clang-15 to PTX, then ptxas); the kernels that fit a GPU today
# keep fitting on all four; and the check tells a misfit from a fit: the
# CPU-shaped streaming kernel (clf_flash: one work-item a block of query
# rows, its accumulators in registers) spills on every target.  TAP;
# without clang-15 and libclc-15, or without ptxas
# (scripts/install-ptxas.sh), a skip (a failure in CI, which installs
# them).
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"
script="$srcdir/scripts/gpu-shape.sh"
sh "$script" --targets "gfx90a gfx1100 sm_80 sm_90" --out "$tmp/table" \
    >"$out" 2>"$err"
status=$?
if [ $status -eq 2 ]; then
    if [ "${CLINFORMER_REQUIRE_DEVICE:-0}" = 1 ]; then
        echo "1..1"
        echo "not ok 1 - gpu_shape_tools_present # $(head -1 "$err")"
        exit 1
    fi
    echo "1..0 # SKIP $(head -1 "$err")"
    exit 0
fi
# Kernels that fit today, by their GPU shape: element-wise stages, the
# work-group softmaxes (plain and causal), the tiled GEMM and the
# GPU-shaped streaming kernel.  (clf_causal_softmax, a row a work-item
# in sixteen-wide vectors, is CPU-shaped: it spills on gfx1100.)
fit="clf_add_bias clf_rowsum clf_add_rowsum_bias clf_softmax_rows_wg \
clf_mask_rows clf_causal_softmax_wg clf_layernorm clf_act clf_add clf_embed \
clf_kv_transpose clf_transpose clf_gemm_tiled clf_gemm_tiled_reduce \
clf_half_widen clf_half_narrow clf_flash_keys clf_flash_values clf_flash_wg"
echo "1..5"
# Every registered kernel, on both targets: the registry's names, plus the
# three of half_gemm.cl.
want=$( (sed -n 's/^ *KERNEL([A-Z0-9_]*, *\(clf_[a-z0-9_]*\)).*/\1/p' \
    "$srcdir/src/runtime/kernels.h"
    grep -A1 '^__kernel' "$srcdir/cl/half_gemm.cl" |
        sed -n 's/^\(clf_[a-z0-9_]*\)(.*/\1/p') | sort -u)
all=1
for t in gfx90a gfx1100; do
    for k in $want; do
        awk -F '\t' -v t="$t" -v k="$k" '$1 == t && $3 == k { f = 1 }
            END { exit f ? 0 : 1 }' "$tmp/table" 2>/dev/null || {
            echo "# $k not reported for $t" >>"$err"
            all=0
        }
    done
done
check gpu_shape_reports_every_kernel_on_both_targets \
    test "$all" = 1 -a "$(echo "$want" | wc -l)" -ge 30
# NVIDIA: every registry kernel (half_gemm.cl is not built for it: no
# cl_khr_fp16 in NVIDIA's driver), with the work-group size it is
# launched with there.
want_nv=$(sed -n 's/^ *KERNEL([A-Z0-9_]*, *\(clf_[a-z0-9_]*\)).*/\1/p' \
    "$srcdir/src/runtime/kernels.h" | sort -u)
all=1
for t in sm_80 sm_90; do
    for k in $want_nv; do
        awk -F '\t' -v t="$t" -v k="$k" '$1 == t && $3 == k && $10 != "" { f = 1 }
            END { exit f ? 0 : 1 }' "$tmp/table" 2>/dev/null || {
            echo "# $k not reported for $t" >>"$err"
            all=0
        }
    done
done
check gpu_shape_reports_every_registry_kernel_on_nvidia \
    test "$all" = 1 -a "$(echo "$want_nv" | wc -l)" -ge 30
check gpu_shape_fitting_kernels_still_fit sh -c \
    "sh '$script' --from '$tmp/table' --require-fit '$fit' >'$out' 2>'$err'"
check gpu_shape_every_program_compiles test "$status" -eq 0
check gpu_shape_reports_cpu_shaped_flash_unfit sh -c \
    "awk -F '\t' '\$3 == \"clf_flash\" && \$9 == \"no\" { n++ } END { exit n == 4 ? 0 : 1 }' '$tmp/table' &&
     ! sh '$script' --from '$tmp/table' --require-fit clf_flash >'$out' 2>'$err' &&
     grep -q 'clf_flash does not fit on: gfx90a gfx1100 sm_80 sm_90' '$err'"
test $failed -eq 0
