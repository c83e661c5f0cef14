#!/usr/bin/env python3
"""Side by side: the device peaks `clinformer bench --peak` measures, and
independent figures for the same CPU from numpy, in alternating rounds.

Each round: numpy's float32 matmul (OpenBLAS SGEMM, 2 m^3 FLOPs, best of
--repeat), numpy's copy of a large float32 array (bytes read plus bytes
written, as the bench's copy kernel counts them, best of --repeat), then
`clinformer bench --peak` on the smallest matrix with --json - (the peaks
measured again, read from its device records).  It prints every round and
the median over the rounds of each figure, so that both sides see the same
machine load.  Only meaningful for a CPU device.

    python3 bench/peaks_vs_numpy.py --clinformer ./clinformer --device 0
"""
import argparse
import json
import statistics
import subprocess
import time

import numpy as np


def best_rate(fn, work, repeat):
    """work / the shortest of repeat timed calls of fn (one call first)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return work / best


def numpy_figures(m, mib, repeat):
    rng = np.random.default_rng(1)
    a = rng.random((m, m), dtype=np.float32)
    b = rng.random((m, m), dtype=np.float32)
    gemm = best_rate(lambda: a @ b, 2.0 * m**3, repeat) * 1e-9
    n = mib * (1 << 20) // 4
    src = np.ones(n, dtype=np.float32)
    dst = np.empty_like(src)
    copy = best_rate(lambda: np.copyto(dst, src), 2.0 * n * 4, repeat) * 1e-9
    return gemm, copy


def clinformer_peaks(exe, device):
    cmd = [exe, "bench", "--peak", "--device", device, "--n", "64",
           "--k", "16", "--d-model", "64", "--heads", "1", "--repeat", "1",
           "--modes", "linformer", "--json", "-"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    dev = json.loads(out.stdout)["devices"][0]
    p = dev["peaks"]
    return dev["stable_name"], p["fma_gflops"], p["copy_gbps"], p["h2d_gbps"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clinformer", default="./clinformer")
    ap.add_argument("--device", default="0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--m", type=int, default=2048, help="SGEMM size")
    ap.add_argument("--mib", type=int, default=128, help="copy size")
    args = ap.parse_args()
    rows = []
    for r in range(args.rounds):
        gemm, copy = numpy_figures(args.m, args.mib, args.repeat)
        name, fma, dcopy, h2d = clinformer_peaks(args.clinformer, args.device)
        rows.append((gemm, copy, fma, dcopy, h2d))
        print(f"round {r + 1}: numpy SGEMM {gemm:.1f} GFLOP/s, copy "
              f"{copy:.1f} GB/s | {name}: FMA {fma:.1f} GFLOP/s, copy "
              f"{dcopy:.1f} GB/s, host to device {h2d:.1f} GB/s", flush=True)
    med = [statistics.median(c) for c in zip(*rows)]
    print(f"median of {args.rounds} rounds: numpy SGEMM {med[0]:.1f} "
          f"GFLOP/s, numpy copy {med[1]:.1f} GB/s; clinformer FMA "
          f"{med[2]:.1f} GFLOP/s ({med[2] / med[0]:.2f}x SGEMM), copy "
          f"{med[3]:.1f} GB/s ({med[3] / med[1]:.2f}x numpy), host to "
          f"device {med[4]:.1f} GB/s")


if __name__ == "__main__":
    main()
