#!/bin/sh
# scripts/device-bundle.sh SRCDIR BUILDDIR OUTDIR: the device kit, a
# relocatable directory for a Linux machine with a GPU and no package
# registry (make device-bundle calls it).  It holds
#   bin/       clinformer, clinformer-bench and bench_layer as small
#              wrappers, and clf-env, which runs any command with the
#              bundled shared objects first on the library path
#   libexec/   the real programs; libexec/tests/ the built test programs
#              that need an OpenCL device.  Each carries a run path
#              relative to itself ($ORIGIN/../lib, $ORIGIN/../../lib), and
#              each object in lib/ $ORIGIN, so that a program copied
#              anywhere with lib/ at the same relative place runs without
#              the wrappers
#   lib/       libclinformer and every shared object the programs need
#              beyond the C library (the ocl-icd loader, CLBlast, jansson,
#              Check's subunit, ...); lib/fallback/ the C++ runtime, used
#              only where the machine has none
#   tests/data, cl/   what the test programs read at run time
#   include/   the public headers
#   python/    the pure-Python linformer package from PyPI (a wheel, or
#              the sdist where no wheel is published) for
#              bench/vs_pytorch.py
#   bench/vs_pytorch.py, scripts/device-check.sh, MANIFEST
# and is refused when it is over DEVICE_BUNDLE_MAX_MIB (64) MiB.
# LINFORMER_DIST=FILE takes that wheel or sdist instead of downloading one.
set -eu

if [ $# -ne 3 ]; then
    echo "usage: $0 SRCDIR BUILDDIR OUTDIR" >&2
    exit 2
fi
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
out=$3
max_mib=${DEVICE_BUNDLE_MAX_MIB:-64}

say() { echo "device-bundle: $*"; }
die() {
    echo "device-bundle: error: $*" >&2
    exit 1
}

command -v patchelf >/dev/null 2>&1 ||
    die "patchelf not found: install the Debian package patchelf (it sets the kit's run paths)"

is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }

# The real program behind a libtool wrapper (DIR/.libs/NAME), or the
# program itself when it is already one.
real_prog() {
    if is_elf "$1"; then
        echo "$1"
    elif [ -f "$(dirname "$1")/.libs/$(basename "$1")" ]; then
        echo "$(dirname "$1")/.libs/$(basename "$1")"
    else
        return 1
    fi
}

# The C library's own objects come from the machine it runs on.
is_libc() {
    case $1 in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libmvec.so.* | \
        libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | \
        libutil.so.* | libanl.so.* | libBrokenLocale.so.*) return 0 ;;
    esac
    return 1
}

# The C++ runtime goes to lib/fallback: a host's own may be newer and
# needed by its drivers.
is_fallback() {
    case $1 in
    libstdc++.so.* | libgcc_s.so.*) return 0 ;;
    esac
    return 1
}

# ---------------------------------------------------------------- programs
[ -e "$build/clinformer" ] ||
    die "no $build/clinformer: build first (make), then make device-bundle"
progs=""
for p in clinformer bench/clinformer-bench bench/bench_layer; do
    r=$(real_prog "$build/$p") || die "no built program $build/$p"
    progs="$progs $r"
done
lib=$(ls "$build"/.libs/libclinformer.so.[0-9]* 2>/dev/null | head -1 || true)
[ -n "$lib" ] || die "no $build/.libs/libclinformer.so.N: configure with shared libraries"
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')

# The test programs that need an OpenCL device: those whose suite runs on
# the suite's device (tu_run(..., 1)), takes tu_context() or makes contexts
# of its own.  Left out: test_gpu_fill, which checks the launch geometry
# at a pretended compute-unit count against the offline gfx90a table that
# only a source tree makes (CI's slow part runs it there); no device's
# behaviour shows in it.
KIT_LEFT_OUT="test_gpu_fill"
tests=""
for c in "$src"/tests/test_*.c; do
    grep -Eq 'tu_run\(.*, *1\)|tu_context\(\)|clf_context_create' "$c" || continue
    t=$(basename "$c" .c)
    case " $KIT_LEFT_OUT " in *" $t "*) continue ;; esac
    [ -e "$build/tests/$t" ] ||
        die "no built $build/tests/$t: run make check TESTS= first (it needs Check)"
    r=$(real_prog "$build/tests/$t") || die "no program behind $build/tests/$t"
    tests="$tests $r"
done
[ -n "$tests" ] || die "no device test program found under $src/tests"

if [ -e "$out" ] && [ ! -f "$out/MANIFEST" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
    die "$out exists and is not a device kit (no MANIFEST): not replacing it"
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/libexec/tests" "$out/lib/fallback" "$out/python" \
    "$out/bench" "$out/scripts" "$out/tests" "$out/include/clinformer"
out=$(cd "$out" && pwd)

for r in $progs; do
    cp "$r" "$out/libexec/$(basename "$r")"
done
for r in $tests; do
    cp "$r" "$out/libexec/tests/$(basename "$r")"
done
cp -L "$lib" "$out/lib/$soname"

# ------------------------------------------------------- shared objects
# Everything ldd resolves beyond the C library, with the build's own
# library directory first so that libclinformer resolves too.
missing=""
for f in "$out"/libexec/* "$out"/libexec/tests/*; do
    [ -f "$f" ] || continue
    ldd_out=$(LD_LIBRARY_PATH="$build/.libs" ldd "$f") || die "ldd $f failed"
    nf=$(echo "$ldd_out" | awk '/not found/ { print $1 }')
    [ -z "$nf" ] || missing="$missing $(basename "$f"): $nf;"
    echo "$ldd_out" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
        while read -r name path; do
            is_libc "$name" && continue
            [ "$name" = "$soname" ] && continue
            dest=$out/lib
            is_fallback "$name" && dest=$out/lib/fallback
            [ -f "$dest/$name" ] || cp -L "$path" "$dest/$name"
        done
done
[ -z "$missing" ] || die "unresolved shared objects:$missing"

# Run paths relative to each file, so that no program needs the wrappers'
# LD_LIBRARY_PATH: the programs look in the kit's lib/, and the objects
# there look beside themselves for what they need in turn (a program's
# DT_RUNPATH serves only its own direct dependencies).  lib/fallback is
# left to clf-env, which uses it only where the machine has no C++
# runtime of its own.
set_runpath() { # run path, files...
    rp=$1
    shift
    for f in "$@"; do
        [ -f "$f" ] && is_elf "$f" || continue
        patchelf --set-rpath "$rp" "$f" || die "patchelf --set-rpath $f failed"
    done
}
set_runpath '$ORIGIN/../lib' "$out"/libexec/*
set_runpath '$ORIGIN/../../lib' "$out"/libexec/tests/*
set_runpath '$ORIGIN' "$out"/lib/*.so*

# ----------------------------------------------------- run-time data
cp -R "$src/tests/data" "$out/tests/data"
cp -R "$src/cl" "$out/cl"
cp "$src/include/clinformer.h" "$out/include/"
cp "$build/include/clinformer/version.h" "$out/include/clinformer/" 2>/dev/null ||
    cp "$src/include/clinformer/version.h" "$out/include/clinformer/" 2>/dev/null || true
cp "$src/bench/vs_pytorch.py" "$out/bench/"
cp "$src/scripts/device-check.sh" "$out/scripts/"
chmod +x "$out/scripts/device-check.sh"

# ------------------------------------------------------------ wrappers
cat >"$out/bin/clf-env" <<'EOF'
#!/bin/sh
# clf-env COMMAND [ARGS...]: runs COMMAND with this kit's shared objects
# first on the library path, and its C++ runtime only where the machine
# has none of its own.
kit=$(cd "$(dirname "$0")/.." && pwd)
libs=$kit/lib
have_lib() {
    for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 \
        /usr/lib64 /lib /usr/lib; do
        [ -e "$d/$1" ] && echo "$d/$1" && return 0
    done
    return 1
}
# the newest GLIBCXX symbol version the kit's C++ objects need
cxx_need=@CXX_NEED@
for f in "$kit"/lib/fallback/*; do
    [ -e "$f" ] || continue
    n=$(basename "$f")
    h=$(have_lib "$n") || h=""
    if [ -z "$h" ] || { [ "$n" = libstdc++.so.6 ] && [ -n "$cxx_need" ] &&
        ! grep -q "$cxx_need" "$h"; }; then
        libs=$libs:$kit/lib/fallback
        break
    fi
done
LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
exec "$@"
EOF
for r in $progs; do
    n=$(basename "$r")
    cat >"$out/bin/$n" <<EOF
#!/bin/sh
# $n from this kit, with its shared objects (see clf-env).
here=\$(cd "\$(dirname "\$0")" && pwd)
exec "\$here/clf-env" "\$here/../libexec/$n" "\$@"
EOF
done
chmod +x "$out"/bin/*

# -------------------------------------------------------------- linformer
cache=$build/device-bundle-cache
dist=${LINFORMER_DIST:-}
kind=wheel
if [ -z "$dist" ]; then
    dist=$(ls "$cache"/linformer-*.whl 2>/dev/null | head -1 || true)
fi
if [ -z "$dist" ]; then
    mkdir -p "$cache"
    say "downloading the linformer wheel (pip download linformer --no-deps)"
    if ! timeout 180 python3 -m pip download -q --no-deps --only-binary=:all: \
        -d "$cache" linformer >&2; then
        say "no linformer wheel; trying the sdist"
        timeout 180 python3 -m pip download -q --no-deps --no-binary=:all: \
            -d "$cache" linformer >&2 ||
            die "pip download linformer failed (no network?); give a wheel or sdist as LINFORMER_DIST=FILE"
    fi
    dist=$(ls "$cache"/linformer-*.whl 2>/dev/null | head -1 || true)
    [ -n "$dist" ] || dist=$(ls "$cache"/linformer-*.tar.gz 2>/dev/null | head -1 || true)
fi
[ -n "$dist" ] && [ -f "$dist" ] || die "no linformer wheel or sdist at '$dist'"
case $dist in
*.whl) kind=wheel ;;
*) kind="sdist (no wheel available)" ;;
esac
cp "$dist" "$out/python/"

# --------------------------------------------------------------- manifest
# newest PREFIX_x.y symbol version FILES... need
newest() {
    pre=$1
    shift
    for f in "$@"; do
        [ -f "$f" ] && objdump -T "$f" 2>/dev/null
    done | grep -o "${pre}_[0-9][0-9.]*" | sed "s/${pre}_//" |
        sort -t. -k1,1n -k2,2n -k3,3n | tail -1
}
# The kit runs on machines with this glibc or newer; its own C++ runtime
# (used only where the machine's is missing or older) may need a newer one.
glibc=$(newest GLIBC "$out"/libexec/* "$out"/libexec/tests/* "$out"/lib/*.so*)
glibc_fb=$(newest GLIBC "$out"/lib/fallback/*)
cxx=$(newest GLIBCXX "$out"/libexec/* "$out"/libexec/tests/* "$out"/lib/*.so*)
sed -i "s/@CXX_NEED@/${cxx:+GLIBCXX_$cxx}/" "$out/bin/clf-env"
bytes=$(du -sb "$out" | cut -f1)
{
    echo "clinformer device kit"
    echo "version: $("$out/bin/clinformer" version 2>/dev/null | head -1 || echo unknown)"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
    echo "glibc: ${glibc:-unknown}"
    echo "glibc for lib/fallback: ${glibc_fb:-none}"
    echo "libstdc++: GLIBCXX_${cxx:-none} (lib/fallback where the machine's is older)"
    echo "linformer: $(basename "$dist") ($kind)"
    echo "programs: $(cd "$out/libexec" && find . -maxdepth 1 -type f | sed 's|^./||' | sort | tr '\n' ' ')"
    echo "device tests: $(cd "$out/libexec/tests" && ls | tr '\n' ' ')"
    echo "libraries: $(cd "$out/lib" && find . -maxdepth 1 -type f | sed 's|^./||' | sort | tr '\n' ' ')"
    echo "fallback: $(cd "$out/lib/fallback" && ls | tr '\n' ' ')"
    echo "size: $bytes bytes"
} >"$out/MANIFEST"

limit=$((max_mib * 1024 * 1024))
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
if [ "$bytes" -gt "$limit" ]; then
    echo "device-bundle: error: $out is $mib MiB, over the $max_mib MiB limit" >&2
    du -sh "$out"/* >&2
    exit 1
fi
say "$out: $mib MiB (limit $max_mib MiB), glibc ${glibc:-?} or newer," \
    "$(echo $tests | wc -w) device tests, linformer $kind"
