#!/bin/sh
# Checks that a release tarball (make dist) carries every file of the git
# checkout it was made from, but the repository's own: the CI driver
# (.ci/), .gitignore files and m4/.keep (which only keeps the empty
# directory in git).  A file missing from EXTRA_DIST passes every test run
# in the checkout and is lost to whoever builds from the tarball; this
# finds it by name, without running the suites a second time.
#
# Usage: sh scripts/check-dist.sh TARBALL [CHECKOUT]
#   CHECKOUT: the git work tree (default: the directory above this script)
# TAP on standard output; exit 0 when nothing is missing, 1 when a file
# is, 2 on a usage error or where CHECKOUT is not a git work tree.
set -u

tarball=${1:-}
top=${2:-$(cd "$(dirname "$0")/.." && pwd)}
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
    echo "usage: sh scripts/check-dist.sh TARBALL [CHECKOUT]" \
        "(TARBALL: the file make dist wrote)" >&2
    exit 2
fi
if ! git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "check-dist: $top is not a git work tree: nothing to compare with" >&2
    exit 2
fi

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

# The tarball's entries without their top directory (clinformer-VERSION/).
if ! tar tzf "$tarball" >"$tmp/raw" 2>"$tmp/err"; then
    echo "check-dist: cannot list $tarball: $(cat "$tmp/err")" >&2
    exit 2
fi
sed -n 's|^[^/]*/||p' "$tmp/raw" | grep -v '/$' | grep -v '^$' |
    sort -u >"$tmp/dist"
git -C "$top" ls-files | grep -Ev '^\.ci/|(^|/)\.gitignore$|^m4/\.keep$' |
    sort -u >"$tmp/git"
comm -23 "$tmp/git" "$tmp/dist" >"$tmp/missing"

n=$(wc -l <"$tmp/git")
echo "1..1"
if [ -s "$tmp/missing" ]; then
    echo "not ok 1 - $(wc -l <"$tmp/missing") of the checkout's $n files" \
        "are not in $(basename "$tarball") (add them to EXTRA_DIST):"
    sed 's/^/#   /' "$tmp/missing"
    exit 1
fi
echo "ok 1 - all $n files of the checkout are in $(basename "$tarball")"
