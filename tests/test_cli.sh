#!/bin/sh
# The clinformer command-line tool: help, version, usage errors, devices and
# a small demo whose golden values are checked.  Output is TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"

run() { # expected-status, args...
    want=$1
    shift
    "$cli" "$@" >"$out" 2>"$err"
    test $? -eq "$want"
}

echo "1..29"
check cli_help_exits_zero run 0 help
check cli_help_lists_commands grep -q "devices" "$out"
check cli_version_prints_version sh -c "'$cli' version | grep -Eq '^clinformer [0-9]+\.[0-9]+\.[0-9]+$'"
check cli_unknown_command_is_usage_error run 2 frobnicate
check cli_bad_option_value_is_usage_error run 2 demo --seq-len -5
check cli_missing_device_is_named sh -c "'$cli' demo --device no-such-dev-xyz >'$out' 2>'$err'; test \$? -eq 1 && grep -q 'no-such-dev-xyz' '$err'"
check cli_devices_lists_one run 0 devices
check cli_devices_shows_stable_names grep -Eq '^\[0\] [a-z0-9-]+:0  ' "$out"
check cli_devices_kernels_lists_stored_choices sh -c "'$cli' devices --kernels >'$out' 2>'$err' && grep -Eq '^    kernel choices stored: [0-9]+' '$out'"
check cli_demo_runs run 0 demo --seq-len 96 --repeat 1
check cli_demo_prints_golden_values sh -c "grep -q 'full attention       25.7521' '$out' && grep -q 'compressed attention 27.2636' '$out'"
check cli_lookahead_causal_passes run 0 check-lookahead --seq-len 70 --max-seq-len 80 --block 10 --k 16 --positions 70
check cli_lookahead_reports_pass grep -q '^PASS: for each of 70 positions' "$out"
check cli_lookahead_causal_passes_with_flash sh -c "CLINFORMER_KERNELS=attend=flash '$cli' check-lookahead --seq-len 70 --max-seq-len 80 --block 10 --k 16 --positions 10 >'$out' 2>'$err' && grep -q '^PASS' '$out' && CLINFORMER_KERNELS=attend=flash '$cli' check-lookahead --full --seq-len 70 --positions 10 >'$out' 2>'$err' && grep -q '^PASS' '$out'"
check cli_lookahead_plain_fails sh -c "'$cli' check-lookahead --seq-len 40 --k 8 --block 5 --no-causal >'$out' 2>'$err'; test \$? -eq 3 && grep -q '^FAIL: changing the inputs after t=0 moved the output at position 0' '$out'"
check cli_lookahead_bad_k_is_named sh -c "'$cli' check-lookahead --k 60 >'$out' 2>'$err'; test \$? -eq 1 && grep -q 'multiple of the 16 blocks' '$err'"
for case in lucidrains_encoder_reversible lucidrains_lm fairseq_encoder_layer; do
    check "cli_run_${case}_matches_torch" sh -c "'$cli' run --weights '$data/$case.safetensors' --input '$data/${case}_x.npy' --output '$tmp/$case.npy' >'$out' 2>'$err' && '$cli' compare '$tmp/$case.npy' '$data/${case}_y.npy' --tol 1e-5 >>'$out' 2>>'$err'"
done
check cli_run_prints_what_it_loaded grep -q 'layout fairseq-encoder-layer, 1 layer, d_model 16, heads 2' "$out"
check cli_compare_detects_difference sh -c "'$cli' compare '$data/lucidrains_encoder_x.npy' '$data/lucidrains_encoder_y.npy' >'$out' 2>'$err'; test \$? -eq 3 && grep -q DIFFER '$out'"
check cli_run_lengths_and_bad_input sh -c "'$cli' run --weights '$data/lucidrains_encoder.safetensors' --input '$data/lucidrains_encoder_x.npy' --output '$tmp/p.npy' --lengths 3,10 >'$out' 2>'$err' && ! '$cli' run --weights '$data/lucidrains_encoder.safetensors' --input '$data/lucidrains_lm_x.npy' --output '$tmp/q.npy' >'$out' 2>'$err' && grep -q 'expected float32' '$err' && test ! -e '$tmp/q.npy'"
# run --launches lists the forward's kernels with their geometry: the
# streaming kernel (forced), and the encoder's Q projection (B*n = 20 rows,
# D = 16) through CLBlast by its sizes.
launches_run() {
    CLINFORMER_KERNELS=attend=flash,gemm=clblast "$cli" run --launches \
        --weights "$data/lucidrains_encoder.safetensors" \
        --input "$data/lucidrains_encoder_x.npy" --output "$tmp/l.npy" \
        >"$out" 2>"$err" &&
        grep -q '^launches ([0-9]* kernels and geometries):' "$out" &&
        grep -Eq '^  clf_flash +[0-9x]+ +[0-9x]+ +[1-9][0-9]* +[1-9]' "$out" &&
        grep -q '^  CLBlast  *m 20, n 16, k 16, batch 1' "$out"
}
check cli_run_launches_lists_kernels_and_geometry launches_run
# run --verbose lists each stored or timed kernel choice with where it came
# from: timed in a fresh cache directory, then read back from the store.
verbose_run() { # source expected on every listed choice, then absent one
    CLINFORMER_CACHE_DIR="$tmp/vcache" "$cli" run --verbose \
        --weights "$data/lucidrains_encoder.safetensors" \
        --input "$data/lucidrains_encoder_x.npy" --output "$tmp/v.npy" \
        >"$out" 2>"$err" &&
        grep -q '^stored or timed on this device' "$out" &&
        grep -Eq "^  (softmax|gemm|attend) .*\\($1\\)\$" "$out" &&
        ! grep -q "($2)" "$out"
}
check cli_run_verbose_says_choices_were_timed verbose_run timed stored
check cli_run_verbose_says_choices_were_stored verbose_run stored timed
# Each GEMM role of the encoder's forward has a line of its own, in --verbose
# and in the device's stored choices.
roles_run() {
    CLINFORMER_CACHE_DIR="$tmp/vcache" "$cli" run --verbose \
        --weights "$data/lucidrains_encoder.safetensors" \
        --input "$data/lucidrains_encoder_x.npy" --output "$tmp/v.npy" \
        >"$out" 2>"$err" || return 1
    for role in proj comp score weigh ffn; do
        grep -Eq "^  gemm\[$role\] = (clblast|blocked|tiled|split) \(stored " "$out" ||
            return 1
    done
}
check cli_run_verbose_lists_each_gemm_role roles_run
check cli_devices_kernels_names_gemm_roles sh -c "CLINFORMER_CACHE_DIR='$tmp/vcache' '$cli' devices --kernels >'$out' 2>'$err' && grep -Eq '^      gemm\[ffn\] +ffn\.m' '$out' && grep -Eq '^      gemm\[proj\] +m[0-9]' '$out'"
# Processes started together on an empty cache take the store's lock in
# turn: each shape is timed by one of them and read by the others, so all
# run the same kernels and agree bit for bit.
concurrent_runs() {
    for i in 1 2 3 4; do
        CLINFORMER_CACHE_DIR="$tmp/ccache" "$cli" run --verbose \
            --weights "$data/lucidrains_encoder.safetensors" \
            --input "$data/lucidrains_encoder_x.npy" --output "$tmp/c$i.npy" \
            >"$tmp/c$i.out" 2>"$tmp/c$i.err" &
    done
    wait
    for i in 1 2 3 4; do
        grep -q '^wrote ' "$tmp/c$i.out" && cmp "$tmp/c1.npy" "$tmp/c$i.npy" ||
            return 1
    done
    # every choice listed in each run, timed in exactly one of them
    listed=$(grep -Ec '^  [a-z]+(\[[a-z]+\])? +[a-z0-9.]+ +[a-z]+ +\((timed|stored)\)$' \
        "$tmp/c1.out")
    timed=$(cat "$tmp"/c[1-4].out | grep -Ec '^  .*\(timed\)$')
    echo "# $listed choices, timed $timed times in 4 runs" >"$out"
    test "$listed" -ge 5 -a "$timed" -eq "$listed"
}
check cli_concurrent_first_runs_time_each_choice_once concurrent_runs
check cli_run_missing_weights_named sh -c "'$cli' run --weights '$tmp/none.safetensors' --input '$data/lucidrains_encoder_x.npy' --output '$tmp/r.npy' >'$out' 2>'$err'; test \$? -eq 1 && grep -q 'none.safetensors' '$err'"
test $failed -eq 0
