# shellcheck shell=sh disable=SC2034
# The common part of the command-line tests, sourced (after `set -u`) by
# the scripts beside it: where the build and the sources are, a temporary
# directory removed at exit with the files out and err in it, the TAP
# counters n and failed, and check.  Each script prints its own plan
# ("1..N") and ends with `test $failed -eq 0`.
builddir=${top_builddir:-.}
srcdir=${top_srcdir:-.}
cli="$builddir/clinformer"
data="$srcdir/tests/data"
n=0
failed=0
tmp=$(mktemp -d)
out="$tmp/stdout"
err="$tmp/stderr"
trap 'rm -rf "$tmp"' EXIT

# Kernel choices and tuning in a cache of the temporary directory, so that
# a script starts from nothing and leaves nothing behind.
fresh_cache() {
    CLINFORMER_CACHE_DIR="$tmp/cache"
    export CLINFORMER_CACHE_DIR
}

check() { # name, command...; the command's status decides
    name=$1
    shift
    n=$((n + 1))
    if "$@"; then
        echo "ok $n - $name"
    else
        echo "not ok $n - $name"
        sed 's/^/# /' "$out" "$err" 2>/dev/null | head -40
        failed=$((failed + 1))
    fi
}

# expected status, text expected on stderr (or ""), arguments of the tool
fails() {
    want=$1
    text=$2
    shift 2
    "$cli" "$@" >"$out" 2>"$err"
    status=$?
    test $status -eq "$want" || {
        echo "exit status $status, wanted $want" >>"$err"
        return 1
    }
    test -z "$text" || grep -qF -e "$text" "$err"
}
