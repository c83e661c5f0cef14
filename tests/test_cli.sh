#!/bin/sh
# The clinformer command-line tool: help, version, usage errors, devices and
# a small demo whose golden values are checked.  Output is TAP.
set -u
builddir=${top_builddir:-.}
cli="$builddir/clinformer"
n=0
failed=0
out=$(mktemp)
err=$(mktemp)

check() { # name, command...; the command's status decides
    name=$1
    shift
    n=$((n + 1))
    if "$@"; then
        echo "ok $n - $name"
    else
        echo "not ok $n - $name"
        sed 's/^/# /' "$out" "$err" | head -40
        failed=$((failed + 1))
    fi
}

run() { # expected-status, args...
    want=$1
    shift
    "$cli" "$@" >"$out" 2>"$err"
    test $? -eq "$want"
}

echo "1..9"
check cli_help_exits_zero run 0 help
check cli_help_lists_commands grep -q "devices" "$out"
check cli_version_prints_version sh -c "'$cli' version | grep -Eq '^clinformer [0-9]+\.[0-9]+\.[0-9]+$'"
check cli_unknown_command_is_usage_error run 2 frobnicate
check cli_bad_option_value_is_usage_error run 2 demo --seq-len -5
check cli_missing_device_is_named sh -c "'$cli' demo --device no-such-dev-xyz >'$out' 2>'$err'; test \$? -eq 1 && grep -q 'no-such-dev-xyz' '$err'"
check cli_devices_lists_one run 0 devices
check cli_demo_runs run 0 demo --seq-len 96 --repeat 1
check cli_demo_prints_golden_values sh -c "grep -q 'full attention       25.7521' '$out' && grep -q 'compressed attention 27.2636' '$out'"
rm -f "$out" "$err"
test $failed -eq 0
