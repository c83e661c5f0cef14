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
echo "1..31"
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

# bench --shard writes the comparison as the matrix writes its own: JSON
# with schema and version, its devices and each row keyed by platform,
# device and driver; CSV; HTML.  json_fields FILE checks the fields.
bench="$builddir/bench/clinformer-bench"
shard="--device all --shard --n 32 --k 8 --d-model 16 --heads 2 --repeat 1 --no-peak"
json_fields() {
    python3 -m json.tool "$1" >/dev/null && python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "clinformer-bench-shard/1", d["schema"]
for key in ("clinformer_version", "started", "host", "command", "wall_s"):
    assert key in d, key
assert d["settings"]["repeat"] == 1 and d["settings"]["seed"] == 1
assert d["split_by"] == "positions"
devs = d["devices"]
assert len(devs) == 2, devs
for i, dev in enumerate(devs):
    for key in ("index", "platform", "device", "driver", "stable_name"):
        assert key in dev, key
rows = d["results"]
assert sorted(r["config"]["mode"] for r in rows) == ["full", "linformer"]
for r in rows:
    c = r["config"]
    assert (c["n"], c["d_model"], c["heads"], c["batch"]) == (32, 16, 2, 1), c
    assert c["k"] == (8 if c["mode"] == "linformer" else 0), c
    assert c["k_requested"] == 8, c
    assert r["status"] == "ok", r
    assert len(r["alone"]) == 2
    for i, a in enumerate(r["alone"]):
        assert a["device_index"] == i
        for key in ("platform", "device", "driver", "stable_name"):
            assert a[key] == devs[i][key], key
        assert a["wall_s"] > 0, a
    for split in ("even", "weighted"):
        s = r[split]
        assert s["wall_s"] > 0 and s["devices"] == 2, s
        assert len(s["shares"]) == 2 and abs(sum(s["shares"]) - 1) < 1e-9, s
    assert r["received_bytes"] > 0 and r["speedup"] > 0, r
PY
}
check bench_shard_json_written sh -c "'$bench' $shard --json '$tmp/shard.json' >'$out' 2>'$err' && grep -q 'weighted' '$out'"
check bench_shard_json_fields json_fields "$tmp/shard.json"
check bench_shard_json_stdout sh -c "'$bench' $shard --json - >'$tmp/stdout.json' 2>'$err' && grep -q 'weighted' '$err'"
check bench_shard_json_stdout_fields json_fields "$tmp/stdout.json"
check bench_shard_csv_html sh -c "'$bench' $shard --csv '$tmp/shard.csv' --html '$tmp/shard.html' >'$out' 2>'$err' &&
    head -1 '$tmp/shard.csv' | grep -q '^mode,n,k,k_requested,d_model,heads,batch,run,device_index,platform,device,driver,stable_name,wall_s,share,' &&
    test \$(grep -c '^linformer,32,8,8,16,2,1,' '$tmp/shard.csv') -eq 6 &&
    test \$(grep -c '^full,32,0,8,16,2,1,weighted,' '$tmp/shard.csv') -eq 2 &&
    grep -q 'clinformer-bench-shard/1' '$tmp/shard.html' &&
    python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' '$tmp/shard.html'"
check bench_shard_refuses_svg sh -c "'$bench' $shard --svg '$tmp/s.svg' >'$out' 2>'$err'; test \$? -eq 2 && grep -q -- '--shard takes no --svg' '$err'"

POCL_DEVICES="pthread pthread pthread"
if [ "$("$cli" devices 2>/dev/null | grep -c '^\[')" -lt 3 ]; then
    for t in 26 27 28 29 30 31; do
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
