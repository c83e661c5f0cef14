#!/bin/sh
# The clinformer command-line tool on bad input: options of the wrong
# command, missing values, sizes that overflow, output paths that must be
# refused, a mask of the wrong shape and a kernel that does not build.
# Output is TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"
fresh_cache

# path, shape as Python writes it, element count, optionally descr and the
# bytes of one element in printf's octal: a .npy of '<i4' ones, or of the
# element given.
mknpy() {
    hdr="{'descr': '${4:-<i4}', 'fortran_order': False, 'shape': $2, }"
    pad=$(((64 - (10 + ${#hdr} + 1) % 64) % 64))
    hlen=$((${#hdr} + 1 + pad))
    {
        printf '\223NUMPY\001\000'
        printf "\\$(printf %03o $hlen)\\000"
        printf '%s' "$hdr"
        printf "%${pad}s\n" ""
        i=0
        while [ $i -lt "$3" ]; do
            printf "${5:-\\001\\000\\000\\000}"
            i=$((i + 1))
        done
    } >"$1"
}

W="$data/lucidrains_encoder.safetensors"
X="$data/lucidrains_encoder_x.npy" # (2, 10, 16)
Y="$data/lucidrains_encoder_y.npy"
commands="devices demo check-lookahead run stream compare tune help version"

echo "1..82"
# Options.
check cli_unknown_option_names_option_and_command \
    fails 2 "clinformer demo: unknown or ambiguous option --bogus" demo --bogus
check cli_foreign_option_is_refused \
    fails 2 "clinformer demo: --weights is an option of run and stream, not of demo" \
    demo --weights w.safetensors
check cli_foreign_option_of_tune_is_refused \
    fails 2 "clinformer tune: --seed is an option of check-lookahead" \
    tune --seed 3
check cli_foreign_option_of_compare_is_refused \
    fails 2 "clinformer compare: --device is an option of" \
    compare "$Y" "$Y" --device cpu
check cli_missing_value_is_named \
    fails 2 "clinformer check-lookahead: --seq-len needs a value" \
    check-lookahead --seq-len
check cli_invalid_value_is_named \
    fails 2 "clinformer check-lookahead: --k wants a positive integer" \
    check-lookahead --k=sixteen
check cli_value_beyond_size_t_is_named \
    fails 2 "--seq-len wants a positive integer below 2^" \
    check-lookahead --seq-len 99999999999999999999999
check cli_flag_with_value_is_refused \
    fails 2 "clinformer check-lookahead: --full takes no value" \
    check-lookahead --full=yes
check cli_stray_argument_is_refused \
    fails 2 'clinformer devices: unexpected argument "extra"' devices extra
check cli_compare_needs_two_files \
    fails 2 "clinformer compare: needs A.npy B.npy" compare "$Y"
check cli_option_equals_value_is_accepted \
    fails 0 "" check-lookahead --k=16 --seq-len=70 --max-seq-len=80 \
    --block=10 --positions=2
check cli_option_equals_value_is_used \
    grep -q '^layer: D=64 h=4 N=80 k=16 .*n=70$' "$out"

# Help: every command's own, the same through `help CMD`.
helps_ok() {
    for c in $commands; do
        "$cli" "$c" --help >"$out" 2>"$err" || return 1
        head -n 1 "$out" | grep -q "^Usage: clinformer $c" || return 1
        grep -q '^  --help ' "$out" || return 1
        grep -q '^Exit status: 0 on success' "$out" || return 1
        "$cli" help "$c" >"$tmp/help2" 2>>"$err" || return 1
        cmp -s "$out" "$tmp/help2" || return 1
    done
}
check cli_every_command_has_help helps_ok
check cli_help_lists_every_option sh -c "'$cli' run --help >'$out' &&
    for o in weights input output layout heads lengths mask causal block \
        full layerwise repeat device; do
        grep -q \"^  --\$o\" '$out' || exit 1; done"
check cli_top_help_documents_exit_status sh -c "'$cli' --help >'$out' &&
    grep -q '2 on a usage error' '$out' && grep -q 'check-lookahead' '$out'"
check cli_bench_help_is_reached fails 0 "" help bench
check cli_bench_shard_refuses_from fails 2 "--shard takes no --from" \
    bench --shard --device all --n 64 --from "$W"
check cli_bench_shard_refuses_svg fails 2 "--shard takes no --svg" \
    bench --shard --device all --n 64 --svg "$tmp/shard.svg"
check cli_bench_shard_refuses_half fails 2 "--shard takes no --precision half" \
    bench --shard --device all --n 64 --precision half
check cli_bench_shard_refuses_compression fails 2 "--shard takes no --compression" \
    bench --shard --device all --n 64 --compression max
check cli_bench_bad_compression_is_named fails 2 'bad --compression "pool"' \
    bench --n 64 --compression pool

# Streams.
check cli_stream_needs_block fails 2 "needs --block B (or --full)" \
    stream --weights "$W" --input "$X"
check cli_stream_block_excludes_full \
    fails 2 "--block and --full exclude each other" \
    stream --weights "$W" --input "$X" --block 3 --full
check cli_stream_lengths_per_sequence fails 2 "the input has 2 sequences" \
    stream --weights "$W" --input "$X" --block 3 --lengths 5
check cli_stream_block_must_fit_k \
    fails 1 "causal mode needs k a multiple of the 3 blocks" \
    stream --weights "$W" --input "$X" --block 5
stream_equals_causal_run() {
    "$cli" stream --weights "$W" --input "$X" --block 3 --chunk 4 --check \
        --output "$tmp/st.npy" >"$out" 2>"$err" &&
        grep -q ': MATCH (tol 1e-5)$' "$out" &&
        "$cli" run --weights "$W" --input "$X" --causal --block 3 \
            --output "$tmp/cr.npy" >/dev/null 2>>"$err" &&
        "$cli" compare "$tmp/st.npy" "$tmp/cr.npy" --tol 1e-5 >/dev/null
}
check cli_stream_equals_the_causal_run stream_equals_causal_run
check cli_bench_stream_refuses_svg fails 2 "--stream takes no --svg" \
    bench --stream --n 64 --svg "$tmp/stream.svg"
check cli_bench_block_needs_stream \
    fails 2 "--block and --chunk are --stream's" bench --n 64 --block 4
check cli_bench_stream_takes_one_device \
    fails 2 "--stream runs on one device" bench --stream --device all --n 64

# Sizes.
check cli_lookahead_overflow_is_named \
    fails 2 "--seq-len 72057594037927937 times --d-model 64 floats overflows" \
    check-lookahead --max-seq-len 64 --seq-len 72057594037927937
check cli_tune_overflow_is_named \
    fails 2 "--seq-len 72057594037927937 times --d-model 512 floats overflows" \
    tune --seq-len 72057594037927937 --k 16
check cli_tune_score_overflow_is_named \
    fails 2 "--heads 72057594037927937 times --seq-len 4096 times --k 64" \
    tune --heads 72057594037927937 --seq-len 4096 --k 64
check cli_demo_overflow_is_named \
    fails 2 "--seq-len 72057594037927937: the layer's input" \
    demo --seq-len 72057594037927937
check cli_positions_overflow_is_named \
    fails 2 "--positions 2305843009213693952 overflows size_t" \
    check-lookahead --seq-len 2305843009213693952 --d-model 1 \
    --positions 2305843009213693952
check cli_positions_above_seq_len_are_refused \
    fails 2 "--positions 71 exceeds --seq-len 70" \
    check-lookahead --seq-len 70 --positions 71
check cli_tune_k_above_seq_len_is_refused \
    fails 2 "--k 300 exceeds --seq-len 200" tune --seq-len 200 --k 300
check cli_repeat_above_limit_is_refused \
    fails 2 "--repeat wants a positive integer up to 64" demo --repeat 65
check cli_no_causal_ignores_block_size sh -c "'$cli' check-lookahead \
    --no-causal --seq-len 1000 --k 8 --positions 2 >'$out' 2>'$err';
    test \$? -eq 3 && grep -q '^FAIL: changing the inputs after t=0' '$out'"

# Output files.
ln -s "$tmp/target.npy" "$tmp/link.npy"
check cli_output_symlink_is_refused sh -c "'$cli' run --weights '$W' \
    --input '$X' --output '$tmp/link.npy' >'$out' 2>'$err';
    test \$? -eq 2 && grep -q 'is a symbolic link; refusing' '$err' &&
    test ! -e '$tmp/target.npy'"
# The output is checked before anything is read, so a missing input keeps a
# CLI that failed to refuse /dev/null from replacing it.
check cli_output_device_is_refused \
    fails 2 "--output /dev/null exists and is a device" \
    run --weights "$W" --input "$tmp/none.npy" --output /dev/null
check cli_output_device_is_untouched test -c /dev/null
mkfifo "$tmp/fifo"
check cli_output_fifo_is_refused \
    fails 2 "exists and is a FIFO" \
    run --weights "$W" --input "$X" --output "$tmp/fifo"
check cli_output_directory_is_refused \
    fails 2 "exists and is a directory" \
    run --weights "$W" --input "$X" --output "$tmp"
cp "$X" "$tmp/x.npy"
check cli_output_same_as_input_is_refused sh -c "'$cli' run --weights '$W' \
    --input '$tmp/x.npy' --output '$tmp/x.npy' >'$out' 2>'$err';
    test \$? -eq 2 && grep -q 'is the same file as --input' '$err' &&
    cmp -s '$X' '$tmp/x.npy'"
ln "$tmp/x.npy" "$tmp/hard.npy"
check cli_output_same_file_by_other_name_is_refused \
    fails 2 "is the same file as --input" \
    run --weights "$W" --input "$tmp/x.npy" --output "$tmp/../${tmp##*/}/hard.npy"
# A copy, so that a CLI which overwrote its weights cannot harm the fixture.
cp "$W" "$tmp/w.safetensors"
check cli_output_same_as_weights_is_refused sh -c "'$cli' run \
    --weights '$tmp/w.safetensors' --input '$X' \
    --output '$tmp/w.safetensors' >'$out' 2>'$err';
    test \$? -eq 2 && grep -q 'is the same file as --weights' '$err' &&
    cmp -s '$W' '$tmp/w.safetensors'"
echo stale >"$tmp/y.npy"
check cli_output_replaces_regular_file sh -c "'$cli' run --weights '$W' \
    --input '$X' --output '$tmp/y.npy' >'$out' 2>'$err' &&
    '$cli' compare '$tmp/y.npy' '$Y' >>'$out' 2>>'$err' &&
    test -z \"\$(ls '$tmp' | grep '\.tmp\.')\""

# Masks: the shape, not only the element count.
mknpy "$tmp/mask_10x2.npy" "(10, 2)" 20
mknpy "$tmp/mask_2x10.npy" "(2, 10)" 20
check cli_mask_shape_mismatch_is_named \
    fails 1 "shape (10, 2) does not match the input's (B, n) = (2, 10)" \
    run --weights "$W" --input "$X" --output "$tmp/m.npy" \
    --mask "$tmp/mask_10x2.npy"
check cli_mask_of_wrong_shape_writes_nothing test ! -e "$tmp/m.npy"
check cli_mask_of_ones_matches_no_mask sh -c "'$cli' run --weights '$W' \
    --input '$X' --output '$tmp/m.npy' --mask '$tmp/mask_2x10.npy' \
    >'$out' 2>'$err' && '$cli' compare '$tmp/m.npy' '$Y' >>'$out' 2>>'$err'"

# Masks as NumPy writes key-mask bytes and bools: the same output as the
# int64 mask of the same positions (the first sequence padded after 7).
for d in '|u1:\001:\000' '|b1:\001:\000' \
    '<i8:\001\000\000\000\000\000\000\000:\000\000\000\000\000\000\000\000'; do
    descr=${d%%:*}
    rest=${d#*:}
    one=${rest%%:*}
    zero=${rest#*:}
    f="$tmp/mask_$(echo "$descr" | tr -d '|<').npy"
    mknpy "$f" "(2, 10)" 0 "$descr"
    i=0
    while [ $i -lt 20 ]; do
        if [ $i -ge 7 ] && [ $i -lt 10 ]; then printf "$zero"; else printf "$one"; fi
        i=$((i + 1))
    done >>"$f"
done
check cli_mask_bytes_and_bools_match_int64 sh -c "
    for m in u1 b1 i8; do '$cli' run --weights '$W' --input '$X' \
        --output \"$tmp/m_\$m.npy\" --mask \"$tmp/mask_\$m.npy\" || exit 1; done \
        >'$out' 2>'$err' &&
    '$cli' compare '$tmp/m_u1.npy' '$tmp/m_i8.npy' --tol 0 >>'$out' 2>>'$err' &&
    '$cli' compare '$tmp/m_b1.npy' '$tmp/m_i8.npy' --tol 0 >>'$out' 2>>'$err' &&
    ! '$cli' compare '$tmp/m_i8.npy' '$Y' >>'$out' 2>>'$err'"

# A float mask holding NaN says neither real nor padding: refused, naming
# the element, and nothing written.
mknpy "$tmp/mask_nan.npy" "(2, 10)" 0 '<f4'
i=0
while [ $i -lt 20 ]; do
    if [ $i -eq 14 ]; then printf '\000\000\300\177'; else printf '\000\000\200\077'; fi
    i=$((i + 1))
done >>"$tmp/mask_nan.npy"
check cli_mask_nan_is_refused sh -c "! '$cli' run --weights '$W' --input '$X' \
    --output '$tmp/m_nan.npy' --mask '$tmp/mask_nan.npy' >'$out' 2>'$err' &&
    grep -q 'element 14 is NaN' '$err' && test ! -e '$tmp/m_nan.npy'"

# Strict loading: a tensor the layout does not use is an error naming it;
# --non-strict skips it, lists it, and the output is unchanged.
if command -v python3 >/dev/null 2>&1; then
    python3 - "$W" "$tmp/extra.safetensors" <<'PY'
import json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
hlen = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + hlen])
data = raw[8 + hlen:]
header["extra.scale"] = {"dtype": "F32", "shape": [1],
                         "data_offsets": [len(data), len(data) + 4]}
text = json.dumps(header).encode()
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + data +
                      struct.pack("<f", 1.0))
PY
    check cli_run_unexpected_tensor_is_named \
        fails 1 "extra.scale" \
        run --weights "$tmp/extra.safetensors" --input "$X" \
        --output "$tmp/e.npy"
    check cli_run_non_strict_skips_and_lists sh -c "'$cli' run \
        --weights '$tmp/extra.safetensors' --input '$X' --non-strict \
        --output '$tmp/e.npy' >'$out' 2>'$err' &&
        grep -q 'skipped unexpected tensor extra.scale' '$err' &&
        '$cli' compare '$tmp/e.npy' '$Y' >>'$out' 2>>'$err'"
else
    for t in cli_run_unexpected_tensor_is_named \
        cli_run_non_strict_skips_and_lists; do
        n=$((n + 1))
        echo "ok $n - $t # SKIP python3 is not installed"
    done
fi

# Values refused before any work: the report's first line ("loaded ...")
# never appears, and the status is 2.
refused_early() { # text expected on stderr, arguments of the tool
    fails 2 "$@" && ! grep -q '^loaded' "$out"
}
check cli_run_empty_output_is_refused_early \
    refused_early '--output wants a file name, got ""' \
    run --weights "$W" --input "$X" --output ""
check cli_run_empty_weights_is_refused \
    refused_early '--weights wants a file name, got ""' \
    run --weights "" --input "$X" --output "$tmp/o.npy"
check cli_run_empty_device_is_refused \
    refused_early '--device wants a value, got ""' \
    run --weights "$W" --input "$X" --output "$tmp/o.npy" --device=
check cli_compare_empty_file_is_refused \
    fails 2 "clinformer compare: needs A.npy B.npy, got an empty argument" \
    compare "" "$Y"
check cli_bench_empty_file_is_refused \
    fails 2 '--json wants a value, got ""' bench --n 64 --json ""
check cli_tol_with_sign_is_refused \
    fails 2 '--tol wants a non-negative number, got "+1e-3"' \
    compare "$Y" "$Y" --tol +1e-3
check cli_bench_budget_with_space_is_refused \
    fails 2 'bad --budget " 5"' bench --from "$tmp/none.json" --budget " 5"

# --lengths: each entry a positive integer, digits only, one per sequence
# of the input (2 here), each at most n (10).
check cli_lengths_negative_is_named \
    refused_early '"-1" is not a valid length' \
    run --weights "$W" --input "$X" --output "$tmp/l.npy" --lengths -1,2
check cli_lengths_trailing_comma_is_refused \
    refused_early '--lengths "1,2,": entry 3 is empty, not a valid length' \
    run --weights "$W" --input "$X" --output "$tmp/l.npy" --lengths 1,2,
check cli_lengths_with_space_is_refused \
    refused_early '--lengths "1, 2": " 2" is not a valid length' \
    run --weights "$W" --input "$X" --output "$tmp/l.npy" --lengths "1, 2"
check cli_lengths_zero_is_refused_early \
    refused_early '--lengths "0,3": "0" is not a valid length' \
    run --weights "$W" --input "$X" --output "$tmp/l.npy" --lengths 0,3
check cli_lengths_above_n_is_refused_early \
    refused_early '11 is not a valid length for the input'"'"'s sequences of 10' \
    run --weights "$W" --input "$X" --output "$tmp/l.npy" --lengths 11,3
check cli_lengths_count_is_named \
    refused_early '--lengths "1,2,3" gives 3 lengths; the input has 2' \
    run --weights "$W" --input "$X" --output "$tmp/l.npy" --lengths 1,2,3
check cli_lengths_refused_write_nothing test ! -e "$tmp/l.npy"

# Options that cannot go together.
mknpy "$tmp/mask_ok.npy" "(2, 10)" 20
check cli_mask_with_lengths_is_refused_early \
    refused_early "--mask and --lengths exclude each other" \
    run --weights "$W" --input "$X" --output "$tmp/c.npy" \
    --mask "$tmp/mask_ok.npy" --lengths 3,10
check cli_causal_linformer_without_block_is_refused_early \
    refused_early "--causal needs --block B for Linformer" \
    run --weights "$W" --input "$X" --output "$tmp/c.npy" --causal
check cli_block_without_causal_is_refused \
    refused_early "--block 5 needs --causal" \
    run --weights "$W" --input "$X" --output "$tmp/c.npy" --block 5
check cli_block_with_full_is_refused \
    refused_early "--full and --block exclude each other" \
    run --weights "$W" --input "$X" --output "$tmp/c.npy" --causal --full \
    --block 5
check cli_lookahead_seq_len_above_max_is_refused \
    fails 2 "--seq-len 100 exceeds --max-seq-len 50" \
    check-lookahead --seq-len 100 --max-seq-len 50
check cli_lookahead_k_above_max_is_refused \
    fails 2 "--k 128 exceeds --max-seq-len 64" \
    check-lookahead --seq-len 64 --k 128 --full

# --output -: the .npy on stdout, byte for byte the file --output writes,
# the report on stderr, and no file named "-".
dash_is_stdout() {
    (cd "$tmp" && "$abscli" run --weights "$absW" --input "$absX" \
        --output - >"$tmp/dash.npy" 2>"$err") &&
        test ! -e "$tmp/-" && grep -q '^wrote standard output: (2, 10, 16)' \
        "$err" && "$cli" run --weights "$W" --input "$X" \
        --output "$tmp/file.npy" >"$out" 2>>"$err" &&
        cmp "$tmp/dash.npy" "$tmp/file.npy" >>"$err" 2>&1
}
abspath() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
abscli=$(abspath "$cli")
absW=$(abspath "$W")
absX=$(abspath "$X")
check cli_run_output_dash_is_stdout dash_is_stdout

# compare: true statements for all-zero and for empty arrays.
f4_one='\000\000\200\077'
f4_zero='\000\000\000\000'
mknpy "$tmp/zeros.npy" "(2, 3)" 6 "<f4" "$f4_zero"
mknpy "$tmp/ones.npy" "(2, 3)" 6 "<f4" "$f4_one"
mknpy "$tmp/empty.npy" "(0, 3)" 0 "<f4" "$f4_zero"
check cli_compare_zeros_says_max_b_is_zero sh -c "'$cli' compare \
    '$tmp/zeros.npy' '$tmp/zeros.npy' >'$out' 2>'$err' &&
    grep -q 'max |B| = 0 (B is all zeros)' '$out' &&
    ! grep -q 'max |B| = 1' '$out' && grep -q '^MATCH' '$out'"
check cli_compare_against_zeros_is_absolute sh -c "'$cli' compare \
    '$tmp/ones.npy' '$tmp/zeros.npy' >'$out' 2>'$err';
    test \$? -eq 3 && grep -q '^max |A - B| = 1 at element 0; max |B| = 0' \
    '$out' && grep -q 'held absolute' '$out' && grep -q '^DIFFER' '$out'"
check cli_compare_empty_names_no_element sh -c "'$cli' compare \
    '$tmp/empty.npy' '$tmp/empty.npy' >'$out' 2>'$err' &&
    grep -q '^A and B have no elements: shape (0, 3),' '$out' &&
    ! grep -q 'at element' '$out' && grep -q '^MATCH' '$out'"

# A stored tune file with an overlong number: the warning quotes it whole.
# The tuner writes the file (under its device's name) once its reference
# forward is measured: a budget that leaves room for that on a slow
# (sanitized) build, while the estimated kernel build keeps candidates out.
big=123456789012345678901234567890
tune_warning_is_whole() {
    CLINFORMER_CACHE_DIR="$tmp/tcache" "$cli" tune --seq-len 8 --k 4 \
        --d-model 4 --heads 1 --budget 30 >"$out" 2>"$err" || return 1
    f=$(ls "$tmp"/tcache/tune-*.txt) || return 1
    printf 'best Xgemm GEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=8 MDIMC=8 MWG=%s %s\n' \
        "$big" 'NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=1 VWN=1' \
        >"$f"
    CLINFORMER_CACHE_DIR="$tmp/tcache" "$cli" run --weights "$W" \
        --input "$X" --output "$tmp/t.npy" >"$out" 2>"$err" &&
        grep -qF "MWG=$big is not a number up to 1048576" "$err"
}
check cli_tune_file_warning_quotes_whole_value tune_warning_is_whole

# A kernel that does not build: its log is printed.
mkdir "$tmp/cl"
cp "$srcdir"/cl/*.cl "$tmp/cl/"
for f in "$tmp"/cl/*.cl; do
    echo "this is not OpenCL C;" >>"$f"
done
build_log_shown() {
    CLINFORMER_KERNEL_DIR="$tmp/cl" "$cli" "$@" >"$out" 2>"$err"
    test $? -eq 1 &&
        sed -n '/^clinformer: kernel build log:/,$p' "$err" | grep -q "this"
}
check cli_lookahead_prints_build_log build_log_shown check-lookahead \
    --seq-len 32 --k 8 --block 4 --positions 2
check cli_run_prints_build_log build_log_shown run --weights "$W" \
    --input "$X" --output "$tmp/b.npy"
check cli_tune_prints_build_log build_log_shown tune --seq-len 32 --k 8 \
    --d-model 16 --heads 2 --budget 1
test $failed -eq 0
