#!/bin/sh
# Installs the OpenCL implementations the test suite is checked on beside
# PoCL: Intel's CPU runtime (from PyPI wheels, unpacked into the prefix,
# nothing installed system-wide) and Mesa's rusticl on llvmpipe (Debian
# packages, which need root or sudo; without them rusticl is skipped with
# a message).  Idempotent: a second run downloads nothing.
#
# Writes one ICD vendors directory per implementation under PREFIX/vendors
# (pocl, intel-cpu, rusticl) plus PREFIX/vendors/cpus holding PoCL's and
# Intel's together, and prints, one line each, how to select it:
#
#   NAME OCL_ICD_VENDORS=DIR [VAR=VALUE ...]
#
# e.g. `env OCL_ICD_VENDORS=PREFIX/vendors/intel-cpu make check`; rusticl
# also needs RUSTICL_ENABLE=llvmpipe (without it its platform has no
# device).  scripts/check-runtimes.sh runs the suite on each of them.
#
# Usage: sh scripts/runtimes.sh [PREFIX]
#   PREFIX defaults to $CLF_RUNTIMES_PREFIX, else
#   $HOME/.local/share/clinformer-runtimes.
set -eu

PREFIX=${1:-${CLF_RUNTIMES_PREFIX:-$HOME/.local/share/clinformer-runtimes}}
INTEL_WHEELS="intel-opencl-rt==2026.2.0 intel-cmplr-lib-rt==2026.2.0 \
intel-cmplr-lic-rt==2026.2.0 tbb==2023.2.0 tcmlib==1.6.0"
RUSTICL_PKGS="mesa-opencl-icd libclc-15 libllvmspirvlib15"
ICD_DIR=/etc/OpenCL/vendors

log() { echo "runtimes: $*" >&2; }

mkdir -p "$PREFIX/vendors"
PREFIX=$(cd "$PREFIX" && pwd) # the .icd files name libraries absolutely

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo "$@"
    else
        return 1
    fi
}

# Copies the libraries of one wheel (<name>.data/data/lib/<file>) into a
# directory.
unpack_wheel() { # wheel, destination
    python3 - "$1" "$2" <<'PY'
import os, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        parts = info.filename.split("/")
        if len(parts) == 4 and parts[0].endswith(".data") \
                and parts[1] == "data" and parts[2] == "lib" and parts[3]:
            with z.open(info) as src, \
                    open(os.path.join(dest, parts[3]), "wb") as out:
                out.write(src.read())
PY
}

install_intel() {
    lib="$PREFIX/intel/lib"
    if [ ! -f "$lib/libintelocl.so" ]; then
        if ! python3 -m pip --version >/dev/null 2>&1; then
            log "intel-cpu skipped: python3 -m pip is not available"
            return 0
        fi
        log "downloading Intel's CPU OpenCL runtime (about 270 MB)"
        tmp=$(mktemp -d)
        # shellcheck disable=SC2086
        if ! python3 -m pip download -q --no-deps --only-binary=:all: \
            -d "$tmp" $INTEL_WHEELS; then
            rm -rf "$tmp"
            log "intel-cpu skipped: pip could not download $INTEL_WHEELS"
            return 0
        fi
        rm -rf "$lib.new"
        mkdir -p "$lib.new"
        for w in "$tmp"/*.whl; do
            unpack_wheel "$w" "$lib.new"
        done
        # The wheel's own ICD loader would shadow the system's.
        rm -f "$lib.new"/libOpenCL.so*
        rm -rf "$tmp" "$lib"
        mv "$lib.new" "$lib" # only a complete unpack counts as installed
    fi
    # libintelocl.so finds its own libraries by its RUNPATH ($ORIGIN).
    mkdir -p "$PREFIX/vendors/intel-cpu"
    echo "$lib/libintelocl.so" >"$PREFIX/vendors/intel-cpu/intel-cpu.icd"
    echo "intel-cpu OCL_ICD_VENDORS=$PREFIX/vendors/intel-cpu"
}

install_rusticl() {
    missing=""
    for p in $RUSTICL_PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
            grep -q 'install ok installed' || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        log "installing$missing"
        # shellcheck disable=SC2086
        if ! as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends $missing \
            >/dev/null; then
            as_root apt-get update -qq || true
            # shellcheck disable=SC2086
            as_root env DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -qq --no-install-recommends $missing \
                >/dev/null || {
                log "rusticl skipped: cannot install$missing" \
                    "(needs root or sudo)"
                return 0
            }
        fi
    fi
    if [ ! -f "$ICD_DIR/rusticl.icd" ]; then
        log "rusticl skipped: $ICD_DIR/rusticl.icd is missing"
        return 0
    fi
    mkdir -p "$PREFIX/vendors/rusticl"
    cp "$ICD_DIR/rusticl.icd" "$PREFIX/vendors/rusticl/"
    echo "rusticl OCL_ICD_VENDORS=$PREFIX/vendors/rusticl" \
        "RUSTICL_ENABLE=llvmpipe"
}

install_pocl() {
    if [ ! -f "$ICD_DIR/pocl.icd" ]; then
        log "pocl skipped: $ICD_DIR/pocl.icd is missing (install pocl-opencl-icd)"
        return 0
    fi
    mkdir -p "$PREFIX/vendors/pocl"
    cp "$ICD_DIR/pocl.icd" "$PREFIX/vendors/pocl/"
    echo "pocl OCL_ICD_VENDORS=$PREFIX/vendors/pocl"
}

# PoCL and Intel side by side, for clinformer bench --device all.
install_cpus() {
    [ -f "$PREFIX/vendors/pocl/pocl.icd" ] &&
        [ -f "$PREFIX/vendors/intel-cpu/intel-cpu.icd" ] || return 0
    mkdir -p "$PREFIX/vendors/cpus"
    cp "$PREFIX/vendors/pocl/pocl.icd" \
        "$PREFIX/vendors/intel-cpu/intel-cpu.icd" "$PREFIX/vendors/cpus/"
    echo "cpus OCL_ICD_VENDORS=$PREFIX/vendors/cpus"
}

install_pocl
install_intel
install_rusticl
install_cpus
