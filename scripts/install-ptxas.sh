#!/bin/sh
# scripts/install-ptxas.sh [PREFIX]: NVIDIA's ptxas, from the PyPI wheel
# nvidia-cuda-nvcc-cu12 (NVIDIA's own build, downloaded with pip; only
# ptxas is taken out of it), into PREFIX/bin (default
# $HOME/.cache/clinformer-tools), for the NVIDIA targets of
# scripts/gpu-shape.sh, which looks there.  Prints the path of ptxas.
# Does nothing when PREFIX/bin/ptxas already runs.
set -eu
prefix=${1:-${HOME:-/root}/.cache/clinformer-tools}
version=${CLF_PTXAS_WHEEL_VERSION:-12.9.86}
bin=$prefix/bin/ptxas
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
    echo "$bin"
    exit 0
fi
mkdir -p "$prefix/bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
if ! python3 -m pip download -q --no-deps --only-binary=:all: \
    --platform manylinux2010_x86_64 -d "$tmp" \
    "nvidia-cuda-nvcc-cu12==$version" >&2; then
    echo "install-ptxas: pip download nvidia-cuda-nvcc-cu12==$version failed" >&2
    exit 1
fi
python3 - "$tmp" "$bin" <<'PY'
import glob, os, shutil, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "nvidia_cuda_nvcc_cu12-*.whl"))[0]
with zipfile.ZipFile(whl) as z, z.open("nvidia/cuda_nvcc/bin/ptxas") as src, \
        open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(sys.argv[2], 0o755)
PY
"$bin" --version >/dev/null
echo "$bin"
