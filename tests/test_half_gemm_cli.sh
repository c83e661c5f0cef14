#!/bin/sh
# Native half arithmetic through the tools: `clinformer run --precision
# half --verbose` with CLINFORMER_KERNELS=halfgemm=native names the way
# the half-weight GEMMs took, native where the device offers it, else
# widen with the reason it is not offered, and stays within 2.5e-3 of
# PyTorch's float32 output either way; a bad halfgemm name is an error
# listing the valid ones.  Output is TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"
fresh_cache

native_run() {
    CLINFORMER_KERNELS=halfgemm=native "$cli" run --precision half --verbose \
        --weights "$data/lucidrains_attention.safetensors" \
        --input "$data/lucidrains_attention_x.npy" \
        --output "$tmp/y.npy" >"$out" 2>"$err"
}

reports_way() {
    native_run &&
        grep -Eq 'halfgemm: (native \(forced\)|widen \(native not offered: .+\))' \
            "$out"
}

within_torch() {
    native_run &&
        "$cli" compare "$tmp/y.npy" "$data/lucidrains_attention_y.npy" \
            --tol 2.5e-3 >"$out" 2>"$err" && grep -q MATCH "$out"
}

bad_name() {
    CLINFORMER_KERNELS=halfgemm=fast "$cli" run --precision half \
        --weights "$data/lucidrains_attention.safetensors" \
        --input "$data/lucidrains_attention_x.npy" \
        --output "$tmp/bad.npy" >"$out" 2>"$err"
    test $? -ne 0 && grep -q 'widen or native' "$err" &&
        test ! -e "$tmp/bad.npy"
}

check half_gemm_cli_run_verbose_reports_the_half_gemm_way reports_way
check half_gemm_cli_run_forced_native_within_2.5e-3_of_torch within_torch
check half_gemm_cli_bad_halfgemm_name_lists_valid_ones bad_name

echo "1..$n"
test $failed -eq 0
