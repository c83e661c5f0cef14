#!/bin/sh
# Installs the Debian packages that clinformer's build, tests and default
# OpenCL device (PoCL, a CPU runtime) need, and those of CI's extra parts:
# clang-14 with its sanitizer and libFuzzer runtimes (make fuzz), cmake
# (scripts/test-install.sh), clang-format (make format-check), python3
# with pip (scripts/runtimes.sh fetches Intel's CPU runtime), venv and
# headers (scripts/python-check.sh builds and tests the Python package),
# Open MPI (./configure --with-mpi: clinformer run --mpi and its tests),
# clang-15 with libclc-15 (make gpu-shape: offline AMD GPU compiles) and
# patchelf (make device-bundle sets the kit's run paths with it).  Only
# packages that are missing are installed.  Run as root, or with sudo
# available.
set -eu

PKGS="build-essential autoconf automake libtool pkg-config \
ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers opencl-c-headers \
pocl-opencl-icd libclblast-dev libjansson-dev check oclgrind clinfo \
clang-14 libclang-rt-14-dev cmake clang-format python3 python3-pip \
python3-venv python3-dev \
libopenmpi-dev openmpi-bin clang-15 libclc-15 patchelf"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all packages present" >&2
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
