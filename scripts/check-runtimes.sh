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
#   rusticl          Mesa's rusticl on llvmpipe: the suites of
#                    RUSTICL_TESTS (every suite that uses a device, at
#                    its normal shapes, but the documentation's commands);
#                    each suite left out is reported as skipped, with
#                    the reason
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
# On llvmpipe, measured one suite at a time on a shared 2-core machine
# (seconds, kernel binary cache warm): errors 3, masks 42, nan 2, choice 14,
# half_gemm 3, peaks 194, roofline 2, bench_report 1, shard 43, threads 48,
# bench 1, tune 22, flash 22, flash_wg 14, clblast_host 6, cli 23 (51 with
# its kernels not yet built), cli_errors 14, half_cli 19, half_gemm_cli 5,
# bench_figures 3, tune_budget 3, shard_cli 1, mpi 1 (120 built
# --with-mpi); the suites of the earlier subset (softmax, gemm, model, npy,
# safetensors, fileio, flops, cache, registry, discovery, golden,
# attention, tiled, half, the timing and repro scripts) as before.
# llvmpipe ends a work-item's loops after
# 65535 iterations in all (clf__loop_limit); the streaming kernel keeps
# within it, which is what test_flash at its normal shapes checks there.
# rusticl has one device, so the two-device parts of bench_figures,
# shard_cli and mpi skip themselves, each with its reason.  Left out,
# each with its reason in keep_tests: the suites that use no device
# (header, layers, kit_rpath), those that pick other implementations
# (oclgrind, icd_order) and the documentation's commands (docs).
RUSTICL_TESTS=${RUSTICL_TESTS:-tests/test_softmax tests/test_gemm \
tests/test_model tests/test_npy tests/test_safetensors tests/test_fileio \
tests/test_flops tests/test_cache tests/test_registry tests/test_discovery \
tests/test_golden tests/test_attention tests/test_bench_timing.sh \
tests/test_repro.sh tests/test_tiled tests/test_half tests/test_flash \
tests/test_flash_wg tests/test_errors tests/test_masks tests/test_nan \
tests/test_choice tests/test_half_gemm tests/test_peaks tests/test_roofline \
tests/test_bench_report tests/test_shard tests/test_threads tests/test_bench \
tests/test_tune tests/test_clblast_host tests/test_cli.sh \
tests/test_cli_errors.sh tests/test_half_cli.sh tests/test_half_gemm_cli.sh \
tests/test_bench_figures.sh tests/test_tune_budget.sh tests/test_shard_cli.sh \
tests/test_mpi.sh tests/test_stream tests/test_guard tests/test_verify.sh}
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
            tests/test_layers.sh)
                why="it checks the library's layering; no device" ;;
            tests/test_kit_rpath.sh)
                why="it checks the kit's run paths; no device" ;;
            tests/test_icd_order.sh)
                why="it selects PoCL and Intel devices, not this one" ;;
            tests/test_docs.sh)
                why="the documentation's commands name PoCL's devices and are sized for PoCL; CI runs them as its part docs" ;;
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
    [ "$name" = rusticl ] && set -- "$@" RUSTICL_ENABLE=llvmpipe
    version=$(driver_of "$@")
    if [ -z "$version" ]; then
        echo "check-runtimes: $name has no device: skipped" >&2
        return 0
    fi
    p=0 f=0 s=0 t0=$(date +%s)
    if [ "$name" = rusticl ]; then
        keep_tests "$name" "$(rusticl_rest)" \
            "not in RUSTICL_TESTS (see there why); pocl and intel-cpu run it"
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
