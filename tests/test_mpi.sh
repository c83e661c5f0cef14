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
root=
[ "$(id -u)" -eq 0 ] && root=--allow-run-as-root
mpirun() {
    timeout 120 "$MPIRUN" $root --oversubscribe "$@"
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

# Rank 1 alone cannot build its kernels: it prints why and which rank it
# is, and every rank stops (MPI_Abort) while rank 0 waits for it.
one_rank_fails() {
    mpirun -np 2 sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] &&
        export CLINFORMER_KERNEL_DIR=/nonexistent CLINFORMER_CACHE_DIR=off
        exec "$@"' sh "$cli" run --mpi $enc --input "$enc_x" \
        --output "$tmp/y.npy"
    rc=$?
    test $rc -ne 0 && test $rc -ne 124 &&
        grep -q '/nonexistent/common.cl' "$err" &&
        grep -q 'rank 1 of 2 failed; stopping every rank' "$err" &&
        test ! -e "$tmp/y.npy"
}

# With two devices (PoCL as two, through POCL_DEVICES), local rank r takes
# device r where no CLINFORMER_DEVICE names one (scripts/check-runtimes.sh
# sets it); a --device wins.  (Rank 0 prints the devices before the
# forward.)  The devices' stable names, as `clinformer devices` lists them;
# with one device (another implementation, under
# scripts/check-runtimes.sh) the check is skipped.
dev_name() { # index: the stable name of device INDEX with PoCL as two
    POCL_DEVICES="pthread pthread" "$cli" devices 2>/dev/null |
        awk -v i="$1" '$1 == "[" i "]" { print $2; exit }'
}
dev0=$(dev_name 0)
dev1=$(dev_name 1)
devices_by_rank() ( # in a subshell: CLINFORMER_DEVICE unset here alone
    unset CLINFORMER_DEVICE
    POCL_DEVICES="pthread pthread" mpirun -np 2 -x POCL_DEVICES "$cli" run \
        --mpi $enc --input "$enc_x" --output "$tmp/d.npy"
    grep -qx "mpi: 2 ranks on devices 0=$dev0 1=$dev1" "$out" || return 1
    POCL_DEVICES="pthread pthread" mpirun -np 2 -x POCL_DEVICES "$cli" \
        run --mpi --device "$dev1" $enc --input "$enc_x" --output "$tmp/d.npy"
    grep -qx "mpi: 2 ranks on devices 0=$dev1 1=$dev1" "$out"
)

# .npy files for the cases below, cut from the fixtures with dd alone:
# every fixture's header is 128 bytes.
npy_header() { # descr, shape: a version 1 header of 128 bytes
    printf '\223NUMPY\001\000v\000'
    printf "%-117s\n" "{'descr': '$1', 'fortran_order': False, 'shape': $2, }"
}
first_rows() { # file, row bytes, rows kept, rows per sequence: both sequences
    dd if="$1" bs=1 iflag=skip_bytes,count_bytes skip=128 \
        count=$(($2 * $3)) 2>/dev/null
    dd if="$1" bs=1 iflag=skip_bytes,count_bytes skip=$((128 + $2 * $4)) \
        count=$(($2 * $3)) 2>/dev/null
}
make_inputs() {
    { npy_header '<f4' '(2, 9, 16)' &&
        first_rows "$enc_x" 64 9 10; } >"$tmp/enc9.npy" &&
        { npy_header '<i8' '(2, 9)' &&
            first_rows "$data/lucidrains_lm_x.npy" 8 9 10; } >"$tmp/lm9.npy" &&
        { npy_header '<f4' '(2, 9)' &&
            for v in 1 1 0 1 1 1 0 1 1 1 1 1 1 1 1 0 0 0; do
                if [ $v = 1 ]; then printf '\000\000\200\077'; else
                    printf '\000\000\000\000'; fi
            done; } >"$tmp/mask9.npy"
}

# mpirun -np R clinformer run --mpi against clinformer run on one device,
# within 1e-5 relative.
same_as_one_device() { # ranks, case name, run arguments...
    ranks=$1
    case_=$2
    shift 2
    "$cli" run "$@" --output "$tmp/$case_.1.npy" &&
        mpirun -np "$ranks" "$cli" run --mpi "$@" \
            --output "$tmp/$case_.$ranks.npy" &&
        "$cli" compare "$tmp/$case_.$ranks.npy" "$tmp/$case_.1.npy" \
            --tol 1e-5
}

lm="--weights $data/lucidrains_lm.safetensors"
forward_cases() { # ranks
    r=$1
    check "mpi_run_${r}_ranks_encoder_n9" same_as_one_device "$r" enc9 \
        $enc --input "$tmp/enc9.npy"
    check "mpi_run_${r}_ranks_encoder_matches_torch" sh -c "\
        '$MPIRUN' $root --oversubscribe -np $r '$cli' run --mpi $enc \
        --input '$enc_x' --output '$tmp/t$r.npy' && '$cli' compare \
        '$tmp/t$r.npy' '$data/lucidrains_encoder_y.npy' --tol 1e-5"
    check "mpi_run_${r}_ranks_encoder_lengths" same_as_one_device "$r" \
        enclen $enc --input "$enc_x" --lengths 7,10
    check "mpi_run_${r}_ranks_encoder_mask" same_as_one_device "$r" \
        encmask $enc --input "$tmp/enc9.npy" --mask "$tmp/mask9.npy"
    check "mpi_run_${r}_ranks_encoder_causal" same_as_one_device "$r" \
        enccausal $enc --input "$tmp/enc9.npy" --causal --block 3
    check "mpi_run_${r}_ranks_encoder_full" same_as_one_device "$r" encfull \
        $enc --input "$tmp/enc9.npy" --full --lengths 9,5
    check "mpi_run_${r}_ranks_lm_n9" same_as_one_device "$r" lm9 $lm \
        --input "$tmp/lm9.npy"
    check "mpi_run_${r}_ranks_lm_matches_torch" sh -c "\
        '$MPIRUN' $root --oversubscribe -np $r '$cli' run --mpi $lm \
        --input '$data/lucidrains_lm_x.npy' --output '$tmp/l$r.npy' && \
        '$cli' compare '$tmp/l$r.npy' '$data/lucidrains_lm_y.npy' --tol 1e-5"
    check "mpi_run_${r}_ranks_lm_causal_mask" same_as_one_device "$r" \
        lmcausal $lm --input "$tmp/lm9.npy" --causal --block 3 \
        --mask "$tmp/mask9.npy"
}

# Rank 1 runs another forward than rank 0 (the option given on rank 1
# alone): before any collective every rank stops, the option and the rank
# named, instead of waiting in different collectives until the timeout
# (124).  One mpirun of two programs, as a user would mistype it.
options_differ() { # options of rank 1... (rank 0's extra ones in $r0)
    # shellcheck disable=SC2086
    timeout 60 "$MPIRUN" $root --oversubscribe -np 1 "$cli" run --mpi $enc \
        ${r0:-} --input "$enc_x" --output "$tmp/o.npy" : -np 1 "$cli" run --mpi \
        "$@" $enc --input "$enc_x" --output "$tmp/o.npy"
    rc=$?
    test $rc -ne 0 && test $rc -ne 124 &&
        grep -q -- "--$(echo "$1" | sed 's/^--//') differs on rank 1" "$err" &&
        test ! -e "$tmp/o.npy"
}

# Rank 1 cannot read its own weights file: the error names that file and
# why, not rank 0's file.
weights_unreadable() {
    timeout 60 "$MPIRUN" $root --oversubscribe -np 1 "$cli" run --mpi $enc \
        --input "$enc_x" --output "$tmp/o.npy" : -np 1 "$cli" run --mpi \
        --weights "$tmp/absent.safetensors" --input "$enc_x" \
        --output "$tmp/o.npy"
    rc=$?
    test $rc -ne 0 && test $rc -ne 124 &&
        grep -q "absent.safetensors: rank 1 cannot read it: No such file" \
            "$err" && ! grep -q "lucidrains_encoder.safetensors: rank 1" "$err"
}

# After a forward over the ranks, the kernel choices say how the attention
# ran, not that it was never chosen.
choices_after_forward() {
    mpirun -np 2 "$cli" run --mpi $enc --input "$enc_x" \
        --output "$tmp/c.npy" &&
        grep -q '^kernel choices: .*attend: gemm (the only way of a forward split by positions)' \
            "$out" && ! grep -q 'not chosen yet' "$out"
}

# A rank takes one device: a list is refused before MPI starts.
device_list() {
    "$cli" run --mpi --device 0,0 $enc --input "$enc_x" --output "$tmp/y.npy"
    test $? -eq 2 && grep -q 'each rank takes one device' "$err"
}

# Both transports sum in rank order in double: 2 ranks give the bits of 2
# devices (here device 0 twice) in one process, split the same way.
same_bits() {
    "$cli" run --device 0,0 --shard-by seq $enc --input "$tmp/enc9.npy" \
        --output "$tmp/g.npy" &&
        mpirun -np 2 "$cli" run --mpi $enc --input "$tmp/enc9.npy" \
            --output "$tmp/m.npy" && cmp "$tmp/g.npy" "$tmp/m.npy"
}

echo "1..37"
check mpi_collectives_match_serial_on_2_ranks collectives 2
check mpi_collectives_match_serial_on_3_ranks collectives 3
check mpi_collectives_match_serial_on_5_ranks collectives 5
check mpi_failing_rank_stops_2_ranks aborts 2
check mpi_failing_rank_stops_3_ranks aborts 3
check mpi_run_weights_differing_on_a_rank_is_named weights_differ
check mpi_run_unreadable_input_stops_every_rank input_missing
check mpi_run_one_rank_failing_stops_every_rank one_rank_fails
if [ -n "$dev1" ]; then
    check mpi_run_devices_by_local_rank devices_by_rank
else
    n=$((n + 1))
    echo "ok $n - mpi_run_devices_by_local_rank # SKIP fewer than 2 OpenCL devices (POCL_DEVICES is ignored by the ICD in use)"
fi
check mpi_run_with_a_device_list_is_a_usage_error device_list
check mpi_run_full_on_one_rank_is_named options_differ --full
check mpi_run_causal_on_one_rank_is_named options_differ --causal --block 3
# --block goes with --causal: both ranks causal, in blocks of 6 and 3.
r0="--causal --block 6"
check mpi_run_block_on_one_rank_is_named options_differ --block 3 --causal
r0=
check mpi_run_lengths_on_one_rank_is_named options_differ --lengths 7,10
check mpi_run_repeat_on_one_rank_is_named options_differ --repeat 2
check mpi_run_rank_1_weights_unreadable_names_its_file weights_unreadable
check mpi_run_choices_after_forward_say_what_ran choices_after_forward
check mpi_run_inputs_cut_from_the_fixtures make_inputs
check mpi_run_2_ranks_same_bits_as_2_devices_in_one_process same_bits
forward_cases 2
forward_cases 3
test $failed -eq 0
