#!/bin/sh
# clinformer tune --budget bounds the wall time, kernel builds included,
# from a fresh cache.  Both caches start empty (CLINFORMER_CACHE_DIR and
# PoCL's own, POCL_CACHE_DIR), so that every kernel build is a real
# compile: a first call with a 1 s budget builds the layer's kernels and
# CLBlast's defaults (the part every call needs) and measures nothing;
# the second, with 8 s, finds those built, and each candidate's Xgemm
# kernel would be a new compile (tens of seconds on a CPU device).  The
# second call must end within its budget (plus a few seconds for the
# context and the process) and say how many candidates it tried and how
# many it skipped for the budget.  TAP.
set -u
# shellcheck source=tests/tap.sh
. "$(dirname "$0")/tap.sh"
fresh_cache
POCL_CACHE_DIR="$tmp/pocl"
export POCL_CACHE_DIR
mkdir -p "$POCL_CACHE_DIR"
echo "1..3"

# One head: with the tuner's batch of one, every GEMM is a single one, so
# CLBlast builds one program (its GEMM routine), not also the strided
# batched one.
layer="--d-model 64 --heads 1 --k 16 --seq-len 64"
# shellcheck disable=SC2086
"$cli" tune $layer --budget 1 >"$out" 2>"$err"
check tune_first_call_builds_and_stops grep -q 'GEMM tuning in use' "$out"

t0=$(date +%s)
# shellcheck disable=SC2086
"$cli" tune $layer --budget 8 >"$out" 2>"$err"
status=$?
t1=$(date +%s)
within() {
    test "$status" -eq 0 && test $((t1 - t0)) -le 12 || {
        echo "exit status $status, $((t1 - t0)) s for a budget of 8 s" >>"$err"
        return 1
    }
}
check tune_budget_bounds_wall_time_with_compiles within
check tune_budget_says_what_it_skipped \
    grep -Eq 'candidates: [0-9]+ of [0-9]+ tried, [1-9][0-9]* skipped for the budget' "$out" "$err"

test $failed -eq 0
