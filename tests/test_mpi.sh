#!/bin/sh
# The MPI transport of the sharded forward, under mpirun: its collectives
# against a serial computation on 2, 3 and 5 ranks (tests/test_shard_mpi), a
# rank that fails stopping every rank with a nonzero exit in bounded time,
# and clinformer run --mpi.  Built without --with-mpi, only the check that
# run --mpi is then a usage error runs, and the rest is skipped with the
# reason.  Output is TAP.
set -u
builddir=${top_builddir:-.}
cli="$builddir/clinformer"
data="${top_srcdir:-.}/tests/data"
n=0
failed=0
out=$(mktemp)
err=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$tmp"' EXIT

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

enc="--weights $data/lucidrains_encoder.safetensors"
enc_x="$data/lucidrains_encoder_x.npy"

without_mpi() {
    "$cli" run --mpi $enc --input "$enc_x" --output "$tmp/y.npy"
    test $? -eq 2 && grep -q 'built without MPI; configure with --with-mpi' \
        "$err" && test ! -e "$tmp/y.npy"
}

if [ -z "${MPIRUN:-}" ] || [ ! -x "$builddir/tests/test_shard_mpi" ]; then
    echo "1..2"
    check mpi_run_without_mpi_is_a_usage_error without_mpi
    echo "ok 2 # SKIP built without MPI: configure with --with-mpi (Open MPI)"
    test $failed -eq 0
    exit
fi

# Open MPI refuses to start as root unless told; more ranks than cores.
mpirun() {
    if [ "$(id -u)" -eq 0 ]; then
        set -- --allow-run-as-root "$@"
    fi
    timeout 120 "$MPIRUN" --oversubscribe "$@"
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

# The last of 3 ranks reads a weights file that differs in one byte.
weights_differ() {
    cp "$data/lucidrains_encoder.safetensors" "$tmp/w.safetensors" &&
        printf '\001' | dd of="$tmp/w.safetensors" bs=1 seek=2000 \
            conv=notrunc 2>/dev/null || return 1
    mpirun -np 3 sh -c 'w=$1; [ "$OMPI_COMM_WORLD_RANK" = 2 ] && w=$2
        exec "$3" run --mpi --weights "$w" --input "$4" --output "$5"' \
        sh "$data/lucidrains_encoder.safetensors" "$tmp/w.safetensors" \
        "$cli" "$enc_x" "$tmp/y.npy"
    rc=$?
    test $rc -ne 0 && test $rc -ne 124 &&
        grep -q 'differs on rank 2 (checksum' "$err" && test ! -e "$tmp/y.npy"
}

# Rank 0 cannot read the input: every rank stops, the file named.
input_missing() {
    mpirun -np 2 "$cli" run --mpi $enc --input "$tmp/none.npy" \
        --output "$tmp/y.npy"
    rc=$?
    test $rc -ne 0 && test $rc -ne 124 && grep -q 'none.npy' "$err" &&
        test ! -e "$tmp/y.npy"
}

# With PoCL as two devices, local rank r takes device r; a --device wins.
# (Rank 0 prints the devices before the forward.)
devices_by_rank() {
    POCL_DEVICES="pthread pthread" mpirun -np 2 -x POCL_DEVICES "$cli" run \
        --mpi $enc --input "$enc_x" --output "$tmp/d.npy"
    grep -q '^mpi: 2 ranks on devices 0=pocl:0 1=pocl:1$' "$out" || return 1
    POCL_DEVICES="pthread pthread" mpirun -np 2 -x POCL_DEVICES "$cli" \
        run --mpi --device pocl:1 $enc --input "$enc_x" --output "$tmp/d.npy"
    grep -q '^mpi: 2 ranks on devices 0=pocl:1 1=pocl:1$' "$out"
}

echo "1..8"
check mpi_collectives_match_serial_on_2_ranks collectives 2
check mpi_collectives_match_serial_on_3_ranks collectives 3
check mpi_collectives_match_serial_on_5_ranks collectives 5
check mpi_failing_rank_stops_2_ranks aborts 2
check mpi_failing_rank_stops_3_ranks aborts 3
check mpi_run_weights_differing_on_a_rank_is_named weights_differ
check mpi_run_unreadable_input_stops_every_rank input_missing
check mpi_run_devices_by_local_rank devices_by_rank
test $failed -eq 0
