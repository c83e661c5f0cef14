#!/bin/sh
# Builds and runs the libFuzzer targets: every tests/fuzz/fuzz_<name>.c is
# linked with libFuzzer, ASan and UBSan against the library's sources and
# run for FUZZ_TIME seconds on tests/fuzz/corpus/<name>/.  A crash, a
# sanitizer report or a leak fails the run; the input that caused it is
# kept as tests/fuzz/crashes/<name>-crash-<sha1> in the build tree.
# Objects, binaries, logs and the grown corpora go to BUILDDIR/fuzz-build/.
#
# Usage: scripts/fuzz.sh SRCDIR BUILDDIR (normally through `make fuzz`,
# which passes the variables below).
#   FUZZ_CC        a clang with libFuzzer (default clang-14)
#   FUZZ_TIME      seconds per target (default 60)
#   FUZZ_TARGETS   names to run (default: every fuzz_*.c present)
#   FUZZ_SOURCES   the library's sources, relative to SRCDIR or BUILDDIR
#   FUZZ_CPPFLAGS, FUZZ_CFLAGS, FUZZ_LIBS   as the library is built
set -eu
srcdir=${1:?usage: fuzz.sh SRCDIR BUILDDIR}
builddir=${2:?usage: fuzz.sh SRCDIR BUILDDIR}
cc=${FUZZ_CC:-clang-14}
time=${FUZZ_TIME:-60}
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
out="$builddir/fuzz-build"
crashes="$builddir/tests/fuzz/crashes"

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz: $cc not found (scripts/install-deps.sh installs clang-14" \
        "and libclang-rt-14-dev)" >&2
    exit 1
fi
mkdir -p "$out/obj" "$crashes"

# The library once, instrumented for coverage but without libFuzzer's main.
objs=""
for f in ${FUZZ_SOURCES:?set by make fuzz}; do
    case $f in *.c) ;; *) continue ;; esac
    if [ -f "$builddir/$f" ]; then
        path="$builddir/$f"
    else
        path="$srcdir/$f"
    fi
    obj="$out/obj/$(echo "$f" | tr / _).o"
    if [ ! -f "$obj" ] || [ "$path" -nt "$obj" ] ||
        [ "$srcdir/src/internal.h" -nt "$obj" ] ||
        [ "$srcdir/include/clinformer.h" -nt "$obj" ]; then
        echo "  FUZZCC   $f"
        # shellcheck disable=SC2086
        "$cc" -g -O1 -fsanitize=fuzzer-no-link $san ${FUZZ_CPPFLAGS:-} \
            ${FUZZ_CFLAGS:-} -c "$path" -o "$obj"
    fi
    objs="$objs $obj"
done

targets=${FUZZ_TARGETS:-}
if [ -z "$targets" ]; then
    for f in "$srcdir"/tests/fuzz/fuzz_*.c; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .c)
        targets="$targets ${name#fuzz_}"
    done
fi
if [ -z "$targets" ]; then
    echo "fuzz: no tests/fuzz/fuzz_*.c" >&2
    exit 1
fi

failed=""
for name in $targets; do
    bin="$out/fuzz_$name"
    echo "  FUZZLD   fuzz_$name"
    # shellcheck disable=SC2086
    "$cc" -g -O1 -fsanitize=fuzzer $san ${FUZZ_CPPFLAGS:-} ${FUZZ_CFLAGS:-} \
        "$srcdir/tests/fuzz/fuzz_$name.c" $objs ${FUZZ_LIBS:-} -o "$bin"
    # New inputs go to a work corpus in the build tree; the seeds in the
    # source tree are only read.
    work="$out/corpus_$name"
    mkdir -p "$work"
    seeds="$srcdir/tests/fuzz/corpus/$name"
    [ -d "$seeds" ] || seeds=""
    echo "fuzz: fuzz_$name for ${time}s"
    # shellcheck disable=SC2086
    if ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
        "$bin" -max_total_time="$time" -timeout=20 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$crashes/$name-" \
        "$work" $seeds >"$out/fuzz_$name.log" 2>&1; then
        grep -E '^(stat::number_of_executed_units|Done)' \
            "$out/fuzz_$name.log" || true
        echo "fuzz: PASS fuzz_$name"
    else
        echo "fuzz: FAIL fuzz_$name"
        echo "fuzz: log $out/fuzz_$name.log:" >&2
        grep -E -A30 '^==[0-9]+==ERROR|runtime error|^SUMMARY' \
            "$out/fuzz_$name.log" | head -60 >&2 || true
        ls "$crashes"/"$name"-* 2>/dev/null | sed 's/^/fuzz: reproducer /' >&2
        failed="$failed $name"
    fi
done

if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed" >&2
    exit 1
fi
echo "fuzz: all targets ran ${time}s without a finding"
