#!/bin/sh
# Whether two builds give the same bits: runs `clinformer run` of each
# build on every peer fixture of tests/data and on the bench's quick
# matrix shapes (a lucidrains layer, D 512, 8 heads, k 256, n 256..2048,
# random weights made here), in several modes (Linformer, full, causal
# full, causal Linformer, half precision, split by positions over two
# queues), under every forced kernel choice of CLINFORMER_KERNELS (the
# GEMM path with each GEMM way and softmax, each other attention way with
# each GEMM way), both builds sharing one kernel-choice cache (builds whose
# cl/ sources differ store their choices apart: every choice that could
# differ is forced), and compares the outputs with cmp.
#
#     sh scripts/same-bits.sh OLD/clinformer NEW/clinformer [WORKDIR]
#
# Prints a line per difference and the totals; exits 1 when any output
# differs or only one build refuses a run.  SAME_BITS_QUICK=yes runs the
# first GEMM way only (a third of the runs).
set -u

old=${1:?usage: same-bits.sh OLD NEW [WORKDIR]}
new=${2:?usage: same-bits.sh OLD NEW [WORKDIR]}
work=${3:-$(mktemp -d)}
here=$(cd "$(dirname "$0")/.." && pwd)
data=$here/tests/data
mkdir -p "$work/quick"
CLINFORMER_CACHE_DIR=$work/cache
export CLINFORMER_CACHE_DIR

# The quick matrix's layer and inputs, from the standard library only.
python3 - "$work/quick" <<'EOF'
import json, random, struct, sys
out = sys.argv[1]
rng = random.Random(20261207)
D, h, k, N = 512, 8, 256, 2048
def tensor(shape, bound):
    n = 1
    for s in shape:
        n *= s
    return shape, struct.pack("<%df" % n, *(rng.uniform(-bound, bound) for _ in range(n)))
ts = {"to_q.weight": tensor([D, D], D ** -0.5),
      "to_k.weight": tensor([D, D], D ** -0.5),
      "to_v.weight": tensor([D, D], D ** -0.5),
      "to_out.weight": tensor([D, D], D ** -0.5),
      "to_out.bias": tensor([D], D ** -0.5),
      "proj_k": tensor([N, k], k ** -0.5),
      "proj_v": tensor([N, k], k ** -0.5)}
meta = {"dim": str(D), "dim_head": str(D // h), "heads": str(h), "k": str(k),
        "layout": "lucidrains_attention", "one_kv_head": "false",
        "seq_len": str(N), "share_kv": "false"}
header, off, blobs = {"__metadata__": meta}, 0, []
for name, (shape, blob) in ts.items():
    header[name] = {"dtype": "F32", "shape": shape,
                    "data_offsets": [off, off + len(blob)]}
    off += len(blob)
    blobs.append(blob)
hj = json.dumps(header).encode()
hj += b" " * (-len(hj) % 8)
with open(out + "/quick.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
for n in (256, 512, 1024, 2048):
    d = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, %d, %d), }" % (n, D)
    d += " " * (-(len(d) + 11) % 64) + "\n"
    with open(out + "/quick_n%d_x.npy" % n, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode())
        f.write(struct.pack("<%df" % (n * D), *(rng.uniform(-1, 1) for _ in range(n * D))))
EOF

cases=
for w in "$data"/*.safetensors; do
    cases="$cases $w:${w%.safetensors}_x.npy"
done
for n in 256 512 1024 2048; do
    cases="$cases $work/quick/quick.safetensors:$work/quick/quick_n${n}_x.npy"
done

gemms="clblast blocked tiled"
[ "${SAME_BITS_QUICK:-no}" = yes ] && gemms=clblast
settings=
for g in $gemms; do
    for s in scalar vector group; do
        settings="$settings attend=gemm,gemm=$g,softmax=$s"
    done
    # The softmax too: a forced way that does not apply runs the GEMM
    # path, and builds whose cl/ sources differ keep separate stores.
    for a in fused flash flashwg; do
        settings="$settings attend=$a,gemm=$g,softmax=vector"
    done
done
two=pocl:0,pocl:0
modes="plain|--full|--full_--causal|--causal_--block_4|--precision_half|--device_${two}_--shard-by_seq|--full_--causal_--device_${two}_--shard-by_seq"

same=0 refused=0 differ=0 runs=0
IFS_SAVE=$IFS
for c in $cases; do
    w=${c%%:*} x=${c#*:}
    for k in $settings; do
        IFS='|'
        for m in $modes; do
            IFS=$IFS_SAVE
            opts=$(echo "$m" | sed 's/^plain$//; s/_/ /g')
            runs=$((runs + 1))
            rm -f "$work/a.npy" "$work/b.npy"
            # shellcheck disable=SC2086
            CLINFORMER_KERNELS=$k "$old" run --weights "$w" --input "$x" \
                --output "$work/a.npy" $opts >/dev/null 2>&1
            ra=$?
            # shellcheck disable=SC2086
            CLINFORMER_KERNELS=$k "$new" run --weights "$w" --input "$x" \
                --output "$work/b.npy" $opts >/dev/null 2>&1
            rb=$?
            if [ $ra -ne 0 ] && [ $rb -ne 0 ]; then
                refused=$((refused + 1))
            elif [ $ra -eq 0 ] && [ $rb -eq 0 ] &&
                cmp -s "$work/a.npy" "$work/b.npy"; then
                same=$((same + 1))
            else
                differ=$((differ + 1))
                echo "differ: $(basename "$w") $(basename "$x") $k $opts" \
                    "(exit $ra, $rb)"
            fi
            IFS='|'
        done
        IFS=$IFS_SAVE
    done
done
echo "runs $runs: bit-identical $same, both refused alike $refused," \
    "different $differ"
[ "$differ" -eq 0 ]
