#!/usr/bin/env python3
"""Side by side: the same Linformer layer through clinformer and through the
lucidrains `linformer` package on PyTorch (CPU, or --torch-device cuda in
fp32 with TF32 off), in one run.

For each n it builds linformer.LinformerSelfAttention(dim, seq_len=n, k,
heads) with a fixed seed, saves its state_dict with safetensors and a random
input as .npy, then alternates rounds: PyTorch forwards (median of --repeat),
then `clinformer run --repeat` on the same weights and input (median of its
warm forwards, timed inside the process, so loading and kernel compilation
are excluded on both sides).  It prints both medians per round, the ratio
clinformer / PyTorch of the medians over all rounds, and the largest output
difference relative to the PyTorch output's scale.

Needs torch, numpy, safetensors and linformer (pip install --no-deps
linformer); on Debian: apt-get install python3-torch, then pip for the rest.

    python3 bench/vs_pytorch.py --clinformer ./clinformer --n 1024,4096

--json FILE writes the summary rows as JSON, rewritten after each n, so
that a run stopped by a time limit still leaves the lengths it finished.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clinformer", default="./clinformer",
                    help="path of the clinformer tool (default ./clinformer)")
    ap.add_argument("--n", default="1024,2048,4096",
                    help="comma-separated sequence lengths")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5,
                    help="timed forwards per side per round")
    ap.add_argument("--rounds", type=int, default=2,
                    help="alternating rounds (PyTorch, clinformer, ...)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="PyTorch intra-op threads")
    ap.add_argument("--device", default=None,
                    help="clinformer device selector")
    ap.add_argument("--torch-device", default="cpu",
                    help="PyTorch device: cpu (default) or cuda (fp32, "
                    "TF32 off)")
    ap.add_argument("--json", default=None,
                    help="write the summary rows to this file as JSON")
    return ap.parse_args()


def torch_median(torch, model, x, repeat, sync):
    """The median of `repeat` timed forwards after a warm-up, in ms."""
    times = []
    with torch.no_grad():
        model(x)  # warm-up
        sync()
        for _ in range(repeat):
            t0 = time.perf_counter()
            model(x)
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def clinformer_median(args, wpath, xpath, ypath):
    """`clinformer run --repeat`'s median of its warm forwards, in ms."""
    cmd = [args.clinformer, "run", "--weights", wpath, "--input", xpath,
           "--output", ypath, "--repeat", str(args.repeat)]
    if args.device:
        cmd += ["--device", args.device]
    out = subprocess.run(cmd, check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"warm forward: median ([0-9.]+) ms", out)
    if m is None:
        sys.exit("clinformer printed no warm-forward median:\n" + out)
    return float(m.group(1))


def measure(args, torch, dev, sync, n, tmp):
    """One length: the layer saved for clinformer, then alternating rounds;
    (n, PyTorch median, clinformer median, largest difference / scale)."""
    import numpy as np
    from linformer import LinformerSelfAttention
    from safetensors.torch import save_file

    torch.manual_seed(n)
    model = LinformerSelfAttention(dim=args.dim, seq_len=n, k=args.k,
                                   heads=args.heads).eval()
    x = torch.randn(args.batch, n, args.dim)
    wpath = os.path.join(tmp, "w.safetensors")
    xpath = os.path.join(tmp, "x.npy")
    ypath = os.path.join(tmp, "y.npy")
    save_file(model.state_dict(), wpath, metadata={"heads": str(args.heads)})
    np.save(xpath, x.numpy())
    model, x = model.to(dev), x.to(dev)
    with torch.no_grad():
        y_ref = model(x).cpu().numpy()
    torch_ms, clf_ms = [], []
    for r in range(args.rounds):
        torch_ms.append(torch_median(torch, model, x, args.repeat, sync))
        clf_ms.append(clinformer_median(args, wpath, xpath, ypath))
        print(f"{n:>6}  {r + 1:>5}  {torch_ms[-1]:>10.1f}  "
              f"{clf_ms[-1]:>13.1f}", flush=True)
    y = np.load(ypath)
    err = float(np.abs(y - y_ref).max() / np.abs(y_ref).max())
    return n, statistics.median(torch_ms), statistics.median(clf_ms), err


def main():
    args = parse_args()
    import torch

    torch.set_num_threads(args.threads)
    dev = torch.device(args.torch_device)
    if dev.type == "cuda":
        # plain fp32, as clinformer computes: no TF32 tensor-core rounding
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        print(f"PyTorch on {torch.cuda.get_device_name(dev)}, fp32, TF32 off")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"layer dim={args.dim} heads={args.heads} k={args.k} "
          f"batch={args.batch}; {args.rounds} rounds x {args.repeat} runs")
    print(f"{'n':>6}  {'round':>5}  {'pytorch ms':>10}  {'clinformer ms':>13}")
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(v) for v in args.n.split(",")]:
            summary.append(measure(args, torch, dev, sync, n, tmp))
            if args.json:
                write_json(args, torch.__version__, summary)
    print()
    print(f"{'n':>6}  {'pytorch ms':>10}  {'clinformer ms':>13}  "
          f"{'clinformer/pytorch':>18}  {'max |diff| / scale':>18}")
    for n, t, c, err in summary:
        print(f"{n:>6}  {t:>10.1f}  {c:>13.1f}  {c / t:>18.2f}  {err:>18.2e}")


def write_json(args, torch_version, summary):
    """The summary rows so far, written whole (temporary file, rename)."""
    doc = {"torch": torch_version, "torch_device": args.torch_device,
           "dim": args.dim, "heads": args.heads, "k": args.k,
           "batch": args.batch, "repeat": args.repeat, "rounds": args.rounds,
           "rows": [{"n": n, "pytorch_ms": t, "clinformer_ms": c,
                     "ratio": c / t, "rel_diff": err}
                    for n, t, c, err in summary]}
    tmp = args.json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
