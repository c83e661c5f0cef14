#!/bin/sh
# One forward over several devices: `clinformer run --device all` gives the
# single-device output within 1e-5 relative on the lucidrains encoder and
# LM fixtures (n = 10, split 5/5 and, causal, in blocks of 3: 6/4; over 3
# devices 4/3/3 and 3/3/4 (blocks)), with padding, causal and full modes,
# and check-lookahead still PASSes in causal mode and FAILs in plain mode;
# half-precision layers split by batch, never by positions.
# PoCL is asked for two (then three) devices; with fewer, skipped.  TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"
POCL_DEVICES="pthread pthread"
export POCL_DEVICES
ndev=$("$cli" devices 2>/dev/null | grep -c '^\[')
if [ "$ndev" -lt 2 ]; then
    echo "1..0 # SKIP fewer than 2 OpenCL devices (POCL_DEVICES is ignored by the ICD in use)"
    exit 0
fi

# same DEVICES SPLIT ARGS...: the run on one device and on DEVICES agree
# within 1e-5, and the forward was split as SPLIT says.
same() {
    devs=$1
    split=$2
    shift 2
    rm -f "$tmp/one.npy" "$tmp/many.npy"
    "$cli" run "$@" --output "$tmp/one.npy" >"$out" 2>"$err" &&
        "$cli" run "$@" --device "$devs" --output "$tmp/many.npy" \
            >"$out" 2>"$err" &&
        grep -q "; split by $split\$" "$out" &&
        "$cli" compare "$tmp/one.npy" "$tmp/many.npy" --tol 1e-5 \
            >>"$out" 2>>"$err"
}

enc="--weights $data/lucidrains_encoder.safetensors --input $data/lucidrains_encoder_x.npy"
rev="--weights $data/lucidrains_encoder_reversible.safetensors --input $data/lucidrains_encoder_reversible_x.npy"
lm="--weights $data/lucidrains_lm.safetensors --input $data/lucidrains_lm_x.npy"
seq="--shard-by seq"
echo "1..25"
# shellcheck disable=SC2086
{
    check shard_encoder_matches_one_device same all "positions over 2" $enc $seq
    check shard_encoder_matches_torch sh -c "'$cli' compare '$tmp/many.npy' '$data/lucidrains_encoder_y.npy' --tol 1e-5 >'$out' 2>'$err'"
    check shard_reversible_matches_one_device same all "positions over 2" $rev $seq
    check shard_lm_matches_one_device same all "positions over 2" $lm $seq
    check shard_lm_matches_torch sh -c "'$cli' compare '$tmp/many.npy' '$data/lucidrains_lm_y.npy' --tol 1e-5 >'$out' 2>'$err'"
    check shard_encoder_lengths same all "positions over 2" $enc $seq --lengths 3,10
    check shard_lm_lengths same all "positions over 2" $lm $seq --lengths 9,4
    check shard_encoder_causal same all "positions over 2" $enc $seq --causal --block 3
    check shard_lm_causal_lengths same all "positions over 2" $lm $seq --causal --block 3 --lengths 7,10
    check shard_encoder_full same all "positions over 2" $enc $seq --full --lengths 10,6
    check shard_lm_full_causal same all "positions over 2" $lm $seq --full --causal
    check shard_device_list_by_name same pocl:1,pocl:0 "positions over 2" $enc $seq
    check shard_batch_split same all "sequences over 2" $enc --lengths 8,5
    check shard_auto_picks_batch same all "sequences over 2" $lm --causal --block 3
}
check shard_lookahead_causal_passes sh -c "'$cli' check-lookahead --device all --seq-len 70 --max-seq-len 80 --block 10 --k 16 --positions 20 >'$out' 2>'$err' && grep -q '^PASS' '$out' && grep -q 'split by positions over 2' '$out'"
check shard_lookahead_plain_fails sh -c "'$cli' check-lookahead --device all --seq-len 40 --k 8 --block 5 --no-causal >'$out' 2>'$err'; test \$? -eq 3 && grep -q '^FAIL' '$out'"
check shard_bad_device_in_list_named sh -c "'$cli' run $enc --device 0,no-such-dev-xyz --output '$tmp/x.npy' >'$out' 2>'$err'; test \$? -eq 1 && grep -q 'no-such-dev-xyz' '$err' && test ! -e '$tmp/x.npy'"
# Half-precision layers: a split by positions is refused by name (it read
# the binary16 weights as floats and wrote infinities), by batch it runs.
check shard_half_by_positions_refused sh -c "'$cli' run $enc --precision half --device all --shard-by seq --output '$tmp/h.npy' >'$out' 2>'$err'; test \$? -eq 1 && grep -q 'half-precision weights' '$err' && test ! -e '$tmp/h.npy'"
# shellcheck disable=SC2086
check shard_half_by_batch_matches_one_device same all "sequences over 2" $enc --precision half

POCL_DEVICES="pthread pthread pthread"
if [ "$("$cli" devices 2>/dev/null | grep -c '^\[')" -lt 3 ]; then
    for t in 20 21 22 23 24 25; do
        echo "ok $t # SKIP fewer than 3 OpenCL devices"
    done
else
    # shellcheck disable=SC2086
    {
        check shard3_encoder same all "positions over 3" $enc $seq --lengths 10,5
        check shard3_lm_causal same all "positions over 3" $lm $seq --causal --block 3
        check shard3_encoder_full_causal same all "positions over 3" $enc $seq --full --causal
        check shard3_reversible same all "positions over 3" $rev $seq
        # 2 sequences on 3 devices: auto splits half layers by sequences.
        check shard3_half_auto_by_sequences same all "sequences over 2" $enc --precision half
        check shard3_lookahead_causal_passes sh -c "'$cli' check-lookahead --device all --seq-len 70 --max-seq-len 80 --block 10 --k 16 --positions 20 >'$out' 2>'$err' && grep -q '^PASS' '$out' && grep -q 'split by positions over 3' '$out'"
    }
fi
test $failed -eq 0
