#!/bin/sh
# Installs clinformer into a temporary prefix and builds small programs
# against the installed tree only, as an embedder would: with
# `pkg-config --static` against libclinformer.a, with plain pkg-config
# against the shared library, and with CMake's find_package(clinformer)
# (shared and static).  Each program prints the library version and
# creates a context when an OpenCL device exists (CLINFORMER_REQUIRE_DEVICE=1
# makes a missing device a failure).  Output is TAP; the exit status is 0
# only when every step passed.
#
# Usage: scripts/test-install.sh [SRCDIR]   (default: this script's tree)
# A source tree configured in place is first packed with `make dist`, since
# configure cannot build out of a tree that is already configured.
# KEEP=1 leaves the temporary directory for inspection.
set -u
srcdir=$(cd "${1:-$(dirname "$0")/..}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clf-install.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
jobs=$(nproc 2>/dev/null || echo 2)
n=0
failed=0
log="$tmp/log"

step() { # name, command...
    name=$1
    shift
    n=$((n + 1))
    if "$@" >"$log" 2>&1; then
        echo "ok $n - $name"
    else
        echo "not ok $n - $name"
        tail -40 "$log" | sed 's/^/# /'
        failed=$((failed + 1))
    fi
}

source_tree() { # where to run configure from
    if [ -f "$srcdir/config.status" ]; then
        make -C "$srcdir" distdir distdir="$tmp/dist" \
            top_distdir="$tmp/dist" >&2 && echo "$tmp/dist"
    else
        echo "$srcdir"
    fi
}

install_tree() {
    src=$(source_tree) || return 1
    mkdir -p "$tmp/build" && cd "$tmp/build" &&
        "$src/configure" --prefix="$prefix" --disable-dependency-tracking \
            -q && make -j"$jobs" >/dev/null && make install >/dev/null
    status=$?
    cd "$tmp" || return 1
    return $status
}

cat >"$tmp/consumer.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clinformer.h>

int
main(void)
{
    clf_context *ctx = NULL;
    const char *need = getenv("CLINFORMER_REQUIRE_DEVICE");
    printf("clinformer %s (header %s)\n", clf_version(), CLF_VERSION_STRING);
    if (strcmp(clf_version(), CLF_VERSION_STRING) != 0)
        return 1;
    if (clf_context_create(&ctx, NULL) != 0) {
        printf("no context: %s\n", clf_last_error());
        return need != NULL && strcmp(need, "1") == 0 ? 1 : 0;
    }
    printf("context created\n");
    clf_context_destroy(ctx);
    return 0;
}
EOF

static_pkgconfig() {
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    flags=$(pkg-config --static --cflags --libs clinformer) || return 1
    echo "pkg-config --static: $flags"
    # -l:libclinformer.a, so that the linker cannot take the shared one.
    flags=$(echo "$flags" | sed 's/-lclinformer\b/-l:libclinformer.a/')
    # shellcheck disable=SC2086
    ${CC:-cc} -std=c99 -Wall -Wextra -Werror consumer.c $flags \
        -o consumer_static &&
        ! readelf -d consumer_static | grep -q 'libclinformer' &&
        ./consumer_static
}

shared_pkgconfig() {
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    # shellcheck disable=SC2046
    ${CC:-cc} -std=c99 -Wall -Wextra -Werror consumer.c \
        $(pkg-config --cflags --libs clinformer) -o consumer_shared &&
        readelf -d consumer_shared | grep -q 'libclinformer' &&
        LD_LIBRARY_PATH="$prefix/lib" ./consumer_shared
}

cmake_consumer() { # static ON|OFF
    dir="$tmp/cmake-$1"
    mkdir -p "$dir" && cp consumer.c "$dir/" || return 1
    cat >"$dir/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.13)
project(consumer C)
find_package(clinformer 0.1 REQUIRED)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE clinformer::clinformer)
EOF
    cmake -S "$dir" -B "$dir/build" -DCMAKE_PREFIX_PATH="$prefix" \
        -Dclinformer_USE_STATIC_LIBS="$1" &&
        cmake --build "$dir/build" &&
        "$dir/build/consumer"
}

cmake_version_refused() { # a newer major version must not be found
    dir="$tmp/cmake-version"
    mkdir -p "$dir" || return 1
    cat >"$dir/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.13)
project(consumer C)
find_package(clinformer 99 REQUIRED)
EOF
    ! cmake -S "$dir" -B "$dir/build" -DCMAKE_PREFIX_PATH="$prefix"
}

cd "$tmp" || exit 1
echo "1..7"
step install_into_temporary_prefix install_tree
step install_has_license_pc_and_cmake_files test -f "$prefix/share/doc/clinformer/LICENSE" -a \
    -f "$prefix/lib/pkgconfig/clinformer.pc" -a \
    -f "$prefix/lib/cmake/clinformer/clinformerConfig.cmake" -a \
    -f "$prefix/lib/libclinformer.a"
step static_consumer_with_pkg_config_static static_pkgconfig
step shared_consumer_with_pkg_config shared_pkgconfig
step cmake_consumer_shared cmake_consumer OFF
step cmake_consumer_static cmake_consumer ON
step cmake_refuses_newer_major_version cmake_version_refused
test $failed -eq 0
