#!/bin/sh
# Half-precision weights through the tools: `clinformer run --precision`
# on the PyTorch fixtures (within 2.5e-3 of PyTorch's float32 output, and
# not equal to it, so the half path really ran), `clinformer bench
# --precision half,float` side by side, and bad values as usage errors
# (exit 2) naming the option.  Output is TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"
fresh_cache

# case, tolerance, expected word (MATCH or DIFFER)
half_run() {
    "$cli" run --precision half --weights "$data/$1.safetensors" \
        --input "$data/$1_x.npy" --output "$tmp/$1.npy" >"$out" 2>"$err" &&
        grep -q 'half-precision weights' "$out" &&
        "$cli" compare "$tmp/$1.npy" "$data/$1_y.npy" --tol "$2" >"$out" \
            2>"$err"
    status=$?
    if [ "$3" = MATCH ]; then
        test $status -eq 0 && grep -q MATCH "$out"
    else
        test $status -eq 3 && grep -q DIFFER "$out"
    fi
}

for case in lucidrains_attention lucidrains_encoder lucidrains_lm; do
    check "half_cli_run_${case}_within_2.5e-3_of_torch" \
        half_run "$case" 2.5e-3 MATCH
    check "half_cli_run_${case}_is_not_float32" half_run "$case" 1e-7 DIFFER
done
check half_cli_run_help_names_precision sh -c \
    "'$cli' run --help | grep -q -- '--precision P'"
check half_cli_run_bad_precision_is_usage_error \
    fails 2 '--precision wants float or half, got "double"' \
    run --precision double --weights "$data/lucidrains_attention.safetensors" \
    --input "$data/lucidrains_attention_x.npy" --output "$tmp/bad.npy"
check half_cli_run_bad_precision_writes_nothing test ! -e "$tmp/bad.npy"
check half_cli_bench_bad_precision_is_usage_error \
    fails 2 'bad --precision "fp8"' bench --precision fp8
check half_cli_bench_empty_precision_is_usage_error \
    fails 2 'bad --precision ","' bench --precision ,
check half_cli_bench_help_names_precision sh -c \
    "'$cli' bench --help | grep -q -- '--precision LIST'"

# A small side-by-side run: every half row has a float twin, its error
# against float32 is a number in (0, 2e-3], and its memory is smaller.
bench_side_by_side() {
    "$cli" bench --n 128 --k 32 --d-model 64 --heads 2 --repeat 1 \
        --modes linformer,full,causal --precision half,float \
        --json "$tmp/b.json" >"$out" 2>"$err" || return 1
    grep -q '^half-precision weights against float32' "$out" || return 1
    awk '/^half-precision weights against float32/ { on = 1; next }
         on && /^time, memory/ { on = 0 }
         on && $1 == 128 {
             rows++
             if (!($9 + 0 > 0 && $9 + 0 <= 2e-3)) bad++
             if (!($8 + 0 > 0 && $8 + 0 < 1)) bad++
         }
         END { exit !(rows == 3 && bad == 0) }' "$out"
}
check half_cli_bench_half_and_float_side_by_side bench_side_by_side
check half_cli_bench_json_has_precision_and_error sh -c \
    "grep -q '\"precision\": \"half\"' '$tmp/b.json' &&
     grep -q '\"fp32_error\": [0-9]' '$tmp/b.json'"

echo "1..$n"
test $failed -eq 0
