#!/bin/sh
# The split GEMM way through the tools, on a layer whose compression E X
# runs over more than one slice of K (n = 1100 positions: slices of 512,
# 512 and 76): forced with CLINFORMER_KERNELS=gemm=split, `clinformer run
# --verbose` names it for the compression, the launches show the blocked
# kernel's slices entry over the three slices and the sum, and the output is
# within 1e-5 of a double-precision reference computed here from the
# equations (lucidrains' Linformer attention, standard library only); with
# split stored as the compression's choice, two processes read it and give
# the same bytes.  Output is TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"
fresh_cache

# The layer (D 32, 2 heads of 16, k 8, seq_len 1100), its input (1, 1100,
# 32) and the reference output, all float32 .npy / safetensors.
python3 - "$tmp" <<'EOF'
import json, math, random, struct, sys
out = sys.argv[1]
rng = random.Random(35)
D, h, k, N = 32, 2, 8, 1100
dh = D // h
def mat(r, c, bound):
    return [[rng.uniform(-bound, bound) for _ in range(c)] for _ in range(r)]
def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]
def rounded(m):
    return [[f32(v) for v in row] for row in m]
wq, wk, wv, wo = (rounded(mat(D, D, D ** -0.5)) for _ in range(4))
bo = [f32(rng.uniform(-D ** -0.5, D ** -0.5)) for _ in range(D)]
pk, pv = rounded(mat(N, k, k ** -0.5)), rounded(mat(N, k, k ** -0.5))
x = rounded(mat(N, D, 1.0))
def flat(m):
    return [v for row in m for v in row]
ts = {"to_q.weight": ([D, D], flat(wq)), "to_k.weight": ([D, D], flat(wk)),
      "to_v.weight": ([D, D], flat(wv)), "to_out.weight": ([D, D], flat(wo)),
      "to_out.bias": ([D], bo), "proj_k": ([N, k], flat(pk)),
      "proj_v": ([N, k], flat(pv))}
meta = {"dim": str(D), "dim_head": str(dh), "heads": str(h), "k": str(k),
        "layout": "lucidrains_attention", "one_kv_head": "false",
        "seq_len": str(N), "share_kv": "false"}
header, off, blobs = {"__metadata__": meta}, 0, []
for name, (shape, vals) in ts.items():
    blob = struct.pack("<%df" % len(vals), *vals)
    header[name] = {"dtype": "F32", "shape": shape,
                    "data_offsets": [off, off + len(blob)]}
    off += len(blob)
    blobs.append(blob)
hj = json.dumps(header).encode()
hj += b" " * (-len(hj) % 8)
with open(out + "/split.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
def npy(path, rows, cols, vals):
    d = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, %d, %d), }" % (rows, cols)
    d += " " * (-(len(d) + 11) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode())
        f.write(struct.pack("<%df" % len(vals), *vals))
npy(out + "/split_x.npy", N, D, flat(x))
# The reference, in double: q, k, v = x W^T; kbar = proj_k^T k, vbar =
# proj_v^T v; per head softmax(q kbar^T / sqrt(dh)) vbar; then W_out, b_out.
def linear(a, w):
    wt = list(zip(*w))
    return [[sum(p * q for p, q in zip(row, col)) for col in wt] for row in a]
q = linear(x, [list(c) for c in zip(*wq)])
kk = linear(x, [list(c) for c in zip(*wk)])
vv = linear(x, [list(c) for c in zip(*wv)])
def compress(p, m):  # p^T m: k x D
    return [[sum(p[i][j] * m[i][c] for i in range(N)) for c in range(D)]
            for j in range(k)]
kb, vb = compress(pk, kk), compress(pv, vv)
o = [[0.0] * D for _ in range(N)]
for hh in range(h):
    c0 = hh * dh
    for i in range(N):
        s = [sum(q[i][c0 + c] * kb[j][c0 + c] for c in range(dh)) / math.sqrt(dh)
             for j in range(k)]
        mx = max(s)
        e = [math.exp(v - mx) for v in s]
        z = sum(e)
        for c in range(dh):
            o[i][c0 + c] = sum(e[j] * vb[j][c0 + c] for j in range(k)) / z
y = linear(o, [list(c) for c in zip(*wo)])
y = [[v + bo[c] for c, v in enumerate(row)] for row in y]
npy(out + "/split_ref.npy", N, D, flat(y))
EOF

run_split() { # output file; extra options
    o=$1
    shift
    "$cli" run --weights "$tmp/split.safetensors" --input "$tmp/split_x.npy" \
        --output "$o" "$@" >"$out" 2>"$err"
}

forced_names_split() {
    CLINFORMER_KERNELS=gemm=split run_split "$tmp/forced.npy" --verbose &&
        grep -q '^  gemm\[comp\] = split (forced)' "$out"
}

# The launches: the blocked kernel over the three slices at once (the
# third dimension of its global size), then the sum of the slices.
forced_launches_the_slices() {
    CLINFORMER_KERNELS=gemm=split run_split "$tmp/forced.npy" --launches &&
        grep -Eq '^  clf_gemm_nn_slices +[0-9]+x[0-9]+x3 ' "$out" &&
        grep -Eq '^  clf_gemm_tiled_reduce ' "$out"
}

within_reference() {
    "$cli" compare "$tmp/forced.npy" "$tmp/split_ref.npy" --tol 1e-5 \
        >"$out" 2>"$err" && grep -q MATCH "$out"
}

# The store written by a timed run, its compression entries rewritten to
# split; two processes then read split from it, and give the same bytes.
stored_split_same_bytes() {
    run_split "$tmp/timed.npy" &&
        for f in "$tmp/cache"/choices-*.txt; do
            awk '$1 == "gemm" && $2 ~ /^comp\./ { print $1, $2, "split"; next }
                 { print }' "$f" >"$f.new" && mv "$f.new" "$f" || return 1
        done &&
        run_split "$tmp/s1.npy" --verbose &&
        grep -q '^  gemm\[comp\] = split (stored' "$out" &&
        run_split "$tmp/s2.npy" --verbose &&
        grep -q '^  gemm\[comp\] = split (stored' "$out" &&
        cmp "$tmp/s1.npy" "$tmp/s2.npy" &&
        "$cli" compare "$tmp/s1.npy" "$tmp/split_ref.npy" --tol 1e-5 \
            >"$out" 2>"$err" && grep -q MATCH "$out"
}

check split_cli_forced_run_names_split_for_the_compression forced_names_split
check split_cli_forced_run_launches_the_slices_and_their_sum \
    forced_launches_the_slices
check split_cli_forced_output_within_1e-5_of_the_double_reference \
    within_reference
check split_cli_stored_split_gives_the_same_bytes_in_two_processes \
    stored_split_same_bytes

echo "1..$n"
test "$failed" -eq 0
