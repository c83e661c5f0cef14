#!/bin/sh
# The MPI transport of the sharded forward, under mpirun: its collectives
# against a serial computation on 2 and 3 ranks (tests/test_shard_mpi), and
# a rank that fails stopping every rank with a nonzero exit, in bounded
# time.  Skipped, with the reason, when clinformer was configured without
# --with-mpi.  Output is TAP.
set -u
builddir=${top_builddir:-.}
if [ -z "${MPIRUN:-}" ] || [ ! -x "$builddir/tests/test_shard_mpi" ]; then
    echo "1..0 # SKIP built without MPI (./configure --with-mpi)"
    exit 0
fi
# Open MPI refuses to start as root unless told; more ranks than cores.
mpirun() {
    if [ "$(id -u)" -eq 0 ]; then
        set -- --allow-run-as-root "$@"
    fi
    timeout 120 "$MPIRUN" --oversubscribe "$@"
}
n=0
failed=0
out=$(mktemp)
err=$(mktemp)

check() { # name, command...; the command's status decides
    name=$1
    shift
    n=$((n + 1))
    if "$@" >"$out" 2>"$err"; then
        echo "ok $n - $name"
    else
        echo "not ok $n - $name"
        sed 's/^/# /' "$out" "$err" | head -40
        failed=$((failed + 1))
    fi
}

collectives() { # ranks
    mpirun -np "$1" "$builddir/tests/test_shard_mpi" &&
        ! grep -q '^not ok' "$out" && test "$(grep -c '^ok' "$out")" -eq 7
}

# A rank's failure ends the job: nonzero, the failing rank named, and long
# before the timeout (124) would stop a hang.
aborts() { # ranks
    mpirun -np "$1" "$builddir/tests/test_shard_mpi" abort
    rc=$?
    test $rc -ne 0 && test $rc -ne 124 &&
        grep -q "rank $(($1 - 1)) of $1: .*a planted failure" "$err" &&
        ! grep -q 'returned from a collective' "$err"
}

echo "1..4"
check "mpi_collectives_match_serial_on_2_ranks" collectives 2
check "mpi_collectives_match_serial_on_3_ranks" collectives 3
check "mpi_failing_rank_stops_2_ranks" aborts 2
check "mpi_failing_rank_stops_3_ranks" aborts 3
rm -f "$out" "$err"
test $failed -eq 0
