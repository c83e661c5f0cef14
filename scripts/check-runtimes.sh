#!/bin/sh
# Runs the test suite on each OpenCL implementation that scripts/runtimes.sh
# installed into PREFIX (whose PREFIX/vendors/NAME directory exists), one
# after the other, each alone in its ICD vendors directory and selected by
# its stable name (CLINFORMER_DEVICE=NAME:0):
#
#   pocl, intel-cpu  the whole `make check`, then the suites that cover
#                    kernel choices (KERNEL_TESTS) once for every variant
#                    forced in turn (CLINFORMER_KERNELS=softmax=scalar, ...),
#                    these with the kernels the first run built
#                    (TEST_CACHE=keep)
#   rusticl          Mesa's rusticl on llvmpipe, about 150x slower than
#                    PoCL: the small-shape suites of RUSTICL_TESTS; each
#                    suite left out is reported as skipped, with the reason
#
# and ends with a table (implementation, driver version, passed, failed,
# skipped, seconds) and a line "check-runtimes: N passed, N failed,
# N skipped".  Exit 0 when nothing failed and at least one implementation
# ran.  Logs of every run are kept under RUNTIMES_LOGS (default
# runtimes-logs/ in the build directory).
#
# Usage (from a configured and built tree, or `make check-runtimes`):
#   sh scripts/check-runtimes.sh [PREFIX]
#   PREFIX: as for scripts/runtimes.sh ($CLF_RUNTIMES_PREFIX, else
#   $HOME/.local/share/clinformer-runtimes)
# Environment: RUNTIMES (the implementations to try, default
# "pocl intel-cpu rusticl"), RUNTIMES_VARIANTS=no (skip the forced
# variants), RUNTIMES_QUICK=yes (leave out the suites of QUICK_SKIP),
# RUNTIMES_LOGS, RUNTIMES_JOBS (make -j, default nproc), MAKE.
set -u

PREFIX=${1:-${CLF_RUNTIMES_PREFIX:-$HOME/.local/share/clinformer-runtimes}}
RUNTIMES=${RUNTIMES:-pocl intel-cpu rusticl}
LOGS=${RUNTIMES_LOGS:-runtimes-logs}
MAKE=${MAKE:-make}
JOBS=${RUNTIMES_JOBS:-$(nproc 2>/dev/null || echo 1)}
KERNEL_TESTS="tests/test_attention tests/test_masks tests/test_softmax \
tests/test_gemm"
VARIANTS="softmax=scalar softmax=vector softmax=group gemm=clblast \
gemm=blocked gemm=tiled attend=gemm attend=fused attend=flash"
# On llvmpipe, measured one suite at a time on a 2-core machine (seconds,
# with the kernel binary cache warm): softmax 1.5, gemm 66, model 2.7,
# npy 4.7, safetensors 0.2, fileio 0.1, flops 0.5, cache 26, registry 4.4,
# discovery 2.2, attention 107, tiled 185, half 14 (compiled cold, on a loaded
# machine).  They hold the golden example (test_golden, test_attention),
# the PyTorch fixtures (test_model), the reference checks of every sharing
# mode and of the fused kernel, every softmax variant and all three GEMMs
# (the tiled one under every set of sizes the tuner searches), and flash
# (the streaming kernel forced in every mode, with masks and sizes off its
# tiles, at the tiny shapes of CLINFORMER_TEST_SMALL=1, which rusticl runs
# set; its full shapes take hours there).  Left out: errors, masks, nan, choice,
# clblast_host, tune, threads, bench (each past 100 s with most of its
# cases still to run) and the CLI scripts (the demo's D=512 layer alone
# takes minutes).
RUSTICL_TESTS=${RUSTICL_TESTS:-tests/test_softmax tests/test_gemm \
tests/test_model tests/test_npy tests/test_safetensors tests/test_fileio \
tests/test_flops tests/test_cache tests/test_registry tests/test_discovery \
tests/test_golden tests/test_attention tests/test_bench_timing.sh \
tests/test_repro.sh tests/test_tiled tests/test_half tests/test_flash}
# Suites left out on an implementation, where RUNTIMES_QUICK=yes (CI):
# NAME:SUITE pairs.  Intel's compiler builds each of the many GEMM
# parameter sets that test_tune times in seconds, so that suite alone
# takes over ten minutes there; it runs on PoCL.
QUICK_SKIP="intel-cpu:tests/test_tune"

if [ ! -f Makefile ] || [ ! -x clinformer ]; then
    echo "check-runtimes: run it in a configured and built tree" >&2
    exit 2
fi
PREFIX=$(cd "$PREFIX" 2>/dev/null && pwd) || {
    echo "check-runtimes: no $1 (run sh scripts/runtimes.sh first)" >&2
    exit 2
}
export CLF_RUNTIMES_PREFIX="$PREFIX"
mkdir -p "$LOGS"
table="$LOGS/table.txt"
: >"$table"
total_p=0
total_f=0
total_s=0
ran=0

# Adds the results of the .trs files under tests/ to p, f, s.
count_trs() {
    for trs in tests/*.trs; do
        [ -f "$trs" ] || continue
        p=$((p + $(grep -c '^:test-result: PASS' "$trs")))
        f=$((f + $(grep -Ec '^:test-result: (FAIL|ERROR|XPASS)' "$trs")))
        s=$((s + $(grep -c '^:test-result: SKIP' "$trs")))
    done
}

# One make check run: label, TESTS (empty: all), then VAR=VALUE settings.
# Adds to p, f, s; a run that fails without a failed test counts one.
run_check() {
    label=$1
    tests=$2
    shift 2
    before=$f
    rm -f tests/*.trs tests/*.log
    echo "check-runtimes: $label${tests:+: $tests}" >&2
    # $MAKE may hold options; word splitting is wanted.
    # shellcheck disable=SC2086
    if [ -n "$tests" ]; then
        env "$@" $MAKE -j"$JOBS" check TESTS="$tests" >"$LOGS/$label.out" 2>&1
    else
        env "$@" $MAKE -j"$JOBS" check >"$LOGS/$label.out" 2>&1
    fi
    rc=$?
    count_trs
    mkdir -p "$LOGS/$label"
    cp tests/*.log "$LOGS/$label/" 2>/dev/null
    if [ $rc -ne 0 ] && [ "$f" -eq "$before" ]; then
        f=$((f + 1))
    fi
    grep -E '^(FAIL|ERROR|XPASS)' "$LOGS/$label.out" | sed "s|^|  $label: |" >&2
}

# Every suite of make check, as the Makefile lists them.
all_tests() {
    # shellcheck disable=SC2016,SC2086
    printf 'clf-print-tests:\n\t@echo $(TESTS)\n' |
        $MAKE -s -f Makefile -f - clf-print-tests
}

# The suites of make check without those of $2 (a list), each reported
# as skipped, with reason $3, for implementation $1.
keep_tests() { # implementation, left-out suites, reason
    kept=""
    for t in $(all_tests); do
        case " $2 " in
        *" $t "*)
            case $t in
            tests/oclgrind.sh)
                why="it runs on oclgrind's own OpenCL runtime, not this one" ;;
            tests/test_header.sh) why="it compiles the header; no device" ;;
            tests/test_icd_order.sh)
                why="it selects PoCL and Intel devices, not this one" ;;
            *) why=$3 ;;
            esac
            echo "SKIP: $t on $1: $why" >&2
            s=$((s + 1))
            ;;
        *) kept="$kept $t" ;;
        esac
    done
}

# For rusticl: the suites outside RUSTICL_TESTS, reported as skipped.
rusticl_rest() {
    rest=""
    for t in $(all_tests); do
        case " $RUSTICL_TESTS " in *" $t "*) ;; *) rest="$rest $t" ;; esac
    done
    echo "$rest"
}

driver_of() { # settings...: the first device's driver version
    env "$@" ./clinformer devices 2>/dev/null |
        awk '/ driver /{ sub(/.* driver /, ""); print; exit }'
}

run_impl() { # name
    name=$1
    dir="$PREFIX/vendors/$name"
    if [ ! -d "$dir" ]; then
        echo "check-runtimes: $name not installed ($dir missing): skipped" >&2
        return 0
    fi
    set -- OCL_ICD_VENDORS="$dir" CLINFORMER_DEVICE="$name:0"
    [ "$name" = rusticl ] &&
        set -- "$@" RUSTICL_ENABLE=llvmpipe CLINFORMER_TEST_SMALL=1
    version=$(driver_of "$@")
    if [ -z "$version" ]; then
        echo "check-runtimes: $name has no device: skipped" >&2
        return 0
    fi
    p=0 f=0 s=0 t0=$(date +%s)
    if [ "$name" = rusticl ]; then
        keep_tests "$name" "$(rusticl_rest)" \
            "too slow on llvmpipe (~150x PoCL); pocl and intel-cpu run it"
        run_check "$name" "$kept" "$@"
    else
        left=""
        if [ "${RUNTIMES_QUICK:-no}" = yes ]; then
            for q in $QUICK_SKIP; do
                [ "${q%%:*}" = "$name" ] && left="$left ${q#*:}"
            done
        fi
        keep_tests "$name" "$left" \
            "left out by RUNTIMES_QUICK=yes (minutes here); pocl runs it"
        [ -z "$left" ] && kept=""
        run_check "$name" "$kept" "$@"
        if [ "${RUNTIMES_VARIANTS:-yes}" != no ]; then
            for v in $VARIANTS; do
                run_check "$name-$(echo "$v" | tr '=' '-')" "$KERNEL_TESTS" "$@" \
                    CLINFORMER_KERNELS="$v" TEST_CACHE=keep
            done
        fi
    fi
    secs=$(($(date +%s) - t0))
    printf '%-10s %-26s %7s %7s %8s %7s\n' "$name" "$version" "$p" "$f" \
        "$s" "$secs" >>"$table"
    total_p=$((total_p + p))
    total_f=$((total_f + f))
    total_s=$((total_s + s))
    ran=$((ran + 1))
}

for impl in $RUNTIMES; do
    run_impl "$impl"
done
rm -f tests/*.trs tests/*.log

printf '\n%-10s %-26s %7s %7s %8s %7s\n' implementation version passed \
    failed skipped seconds
cat "$table"
echo "check-runtimes: $total_p passed, $total_f failed, $total_s skipped"
if [ $ran -eq 0 ]; then
    echo "check-runtimes: no implementation ran" >&2
    exit 1
fi
[ $total_f -eq 0 ]
