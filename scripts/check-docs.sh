#!/bin/sh
# The documentation's commands, run: every code block of README.md and
# docs/*.md marked runnable is run from a built tree, with an empty kernel
# cache, and the check fails naming the file, line and command that failed.
#
#   sh scripts/check-docs.sh [BUILDDIR]     (default $top_builddir, else .)
#   make check-docs
#
# The mark is an HTML comment (invisible on a rendered page) on the line
# before a code block, blank lines allowed between:
#
#   <!-- runnable -->          every command of the block must exit 0
#   <!-- runnable exit=N -->   every command of the block must exit N
#
# The block is indented (four spaces or more, ending at the first line
# indented less) or fenced (```).  A shell block (indented, or fenced as
# sh, shell, bash or console) holds one command a line, a line ending in
# \ continuing on the next; lines starting with # and blank lines are
# skipped.  A fenced c block is a whole program: compiled against the
# built library and run.  A fenced python block runs with python3 where
# `import clinformer` works there, else it is reported as a skip.
#
# Commands run one after the other in one scratch directory per page
# (a command may read what an earlier one of the same page wrote), where
# tests/, scripts/, cl/ and python/ are links into the source tree and
# bench/ into the build tree, with the build tree first on PATH (so
# `clinformer` is the one just built), CLINFORMER_CACHE_DIR an empty
# directory made for this run (kernels are built and choices timed as on
# a new device; the driver's own cache, ~/.cache/pocl, is left as it is),
# and each command under a time limit (CLF_DOCS_TIMEOUT seconds, default
# 120).  Only cheap commands are marked: the whole check is meant to take
# well under three minutes on PoCL.  The quick-start commands
# (scripts/quickstart.sh, scripts/check.sh) install packages and build,
# so they are not marked: CI's build part runs them.
#
# Besides the commands, every clf_ name and CLINFORMER_ variable the pages
# mention must occur in the code (include/, src/, cl/, cli/, bench/,
# tests/, scripts/, python/), and the options of each command in the table
# of docs/cli.md must be those of `clinformer help COMMAND`, so that a
# renamed function, variable or option cannot stay in the docs.
#
# Without an OpenCL device the commands are reported as skips, unless
# CLINFORMER_REQUIRE_DEVICE=1.  Under make check (tests/test_docs.sh),
# CLF_DOCS_SKIP=1 (set by .ci/run, which runs this check as its own part)
# skips the whole check.  Prints TAP; exits 1 when something failed.
set -u

case ${1:-} in
-h | --help)
    sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
-*)
    echo "check-docs: unknown option $1 (--help)" >&2
    exit 2
    ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-${top_builddir:-.}}
builddir=$(cd "$builddir" && pwd) || exit 2
limit=${CLF_DOCS_TIMEOUT:-120}
if [ ! -x "$builddir/clinformer" ]; then
    echo "check-docs: no built clinformer in $builddir (build first)" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
fail() { # description, log file
    n=$((n + 1))
    failed=$((failed + 1))
    echo "not ok $n - $1"
    [ -n "${2:-}" ] && [ -s "$2" ] && tail -n 15 "$2" | sed 's/^/# /'
    return 0
}

if [ "${CLF_DOCS_SKIP:-0}" = 1 ]; then
    echo "1..0 # SKIP CLF_DOCS_SKIP=1 (the check runs as a part of its own)"
    exit 0
fi

pages="$top/README.md"
for p in "$top"/docs/*.md; do
    [ -f "$p" ] && pages="$pages $p"
done

# ---------------------------------------------------------------- names
# Each clf_ name (public API, kernel or internal) and CLINFORMER_ variable.
for page in $pages; do
    rel=${page#"$top"/}
    grep -noE '\bclf_[a-z0-9_]*[a-z0-9]\b' "$page" >"$tmp/names" || true
    grep -noE '\bCLINFORMER_[A-Z0-9_]*[A-Z0-9]\b' "$page" >>"$tmp/names" || true
    bad=
    while IFS=: read -r line name; do
        case $name in clf__*) continue ;; esac
        if ! grep -rqw -- "$name" "$top/include" "$top/src" "$top/cl" \
            "$top/cli" "$top/bench" "$top/tests" "$top/scripts" \
            "$top/python" --exclude-dir=data 2>/dev/null; then
            bad="$bad $rel:$line:$name"
        fi
    done <"$tmp/names"
    if [ -z "$bad" ]; then
        ok "$rel: every clf_ name and CLINFORMER_ variable exists in the code"
    else
        echo "$bad" | tr ' ' '\n' | sed '/^$/d; s/^/not in the code: /' \
            >"$tmp/bad"
        fail "$rel: names not in the code" "$tmp/bad"
    fi
done

# ------------------------------------------------------ the CLI's options
# shellcheck disable=SC2016 # the backquotes are Markdown, not expansions
# Each row of docs/cli.md's table names a command and its options: they
# must be the options of `clinformer help COMMAND`, no more, no fewer.
if [ -f "$top/docs/cli.md" ]; then
    grep -n '^| `[a-z-]*` ' "$top/docs/cli.md" >"$tmp/rows" || true
    while IFS= read -r row; do
        line=${row%%:*}
        row=${row#*:}
        cmd=$(echo "$row" | sed 's/^| `\([a-z-]*\)`.*/\1/')
        case $cmd in devices | demo | check-lookahead | run | compare | tune) ;;
        *) continue ;;
        esac
        echo "$row" | sed 's/^| `[a-z-]*`[^|]*|//' |
            grep -oE -- '--[a-z][a-z-]*' | sort -u >"$tmp/doc"
        "$builddir/clinformer" help "$cmd" 2>&1 | grep -oE -- '^ +--[a-z][a-z-]*' |
            tr -d ' ' | grep -v -- '^--help$' | sort -u >"$tmp/help"
        {
            comm -23 "$tmp/doc" "$tmp/help" | sed 's/^/# not in --help: /'
            comm -13 "$tmp/doc" "$tmp/help" | sed 's/^/# not in the table: /'
        } >"$tmp/diff"
        if [ -s "$tmp/diff" ]; then
            fail "docs/cli.md:$line: the options of $cmd differ from clinformer help $cmd" "$tmp/diff"
        else
            ok "docs/cli.md:$line: the options of $cmd are those of clinformer help $cmd"
        fi
    done <"$tmp/rows"
fi

# ------------------------------------------------------------- commands
have_device=1
if ! "$builddir/clinformer" devices >"$tmp/devices" 2>&1 ||
    ! grep -q '^\[0\]' "$tmp/devices"; then
    have_device=0
fi

# One record per command: FILE|LINE|KIND|EXIT|TEXT, TEXT the command (a
# shell line) or the path of the block's source (c, python).
extract() { # page, relative name, block prefix
    awk -v rel="$2" -v pre="$3" '
    function flush() { if (cmd != "") print rel "|" cline "|sh|" want "|" cmd; cmd = "" }
    function emit_file() { close(src); print rel "|" bline "|" kind "|" want "|" src }
    /^<!-- runnable( exit=[0-9]+)? -->[ \t]*$/ {
        want = 0
        if (match($0, /exit=[0-9]+/)) want = substr($0, RSTART + 5, RLENGTH - 5)
        armed = 1; next
    }
    state == "fence" {
        if ($0 ~ /^[ \t]*```/) {
            if (kind == "sh") flush(); else emit_file()
            state = ""; next
        }
        if (kind != "sh") { print $0 > src; next }
        shline($0); next
    }
    state == "indent" {
        if ($0 ~ /^[ \t]*$/) { flush(); next }
        if (match($0, /^ */) && RLENGTH >= ind) { shline(substr($0, ind + 1)); next }
        flush(); state = ""
    }
    armed && /^[ \t]*$/ { next }
    armed && /^[ \t]*```/ {
        armed = 0; state = "fence"; bline = NR + 1
        lang = $0; sub(/^[ \t]*```/, "", lang); sub(/[ \t].*$/, "", lang)
        if (lang == "c" || lang == "python") {
            kind = lang; blocks++
            src = pre blocks (lang == "c" ? ".c" : ".py")
            printf "" > src
        } else kind = "sh"
        next
    }
    armed && /^    / {
        armed = 0; state = "indent"; kind = "sh"
        match($0, /^ */); ind = RLENGTH
        shline(substr($0, ind + 1)); next
    }
    armed { armed = 0; print rel "|" NR "|orphan|0|" > "/dev/stderr" }
    function shline(s) {
        if (cmd == "") {
            if (s ~ /^[ \t]*(#.*)?$/) return
            cline = NR
        }
        if (s ~ /\\$/) { cmd = cmd substr(s, 1, length(s) - 1) " "; return }
        cmd = cmd s; flush()
    }
    END { flush() }' "$1"
}

run_one() { # kind, text, log; in the page's scratch directory
    case $1 in
    sh) timeout "$limit" sh -c "$2" >"$3" 2>&1 ;;
    c)
        ${CC:-cc} -std=c99 -DCL_TARGET_OPENCL_VERSION=120 \
            -I"$top/include" -I"$builddir/include" -o "$2.bin" "$2" \
            -L"$builddir/.libs" -lclinformer -lOpenCL -lm >"$3" 2>&1 &&
            LD_LIBRARY_PATH="$builddir/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                timeout "$limit" "$2.bin" >>"$3" 2>&1
        ;;
    python) timeout "$limit" python3 "$2" >"$3" 2>&1 ;;
    esac
}

has_python=0
python3 -c 'import clinformer' >/dev/null 2>&1 && has_python=1
mkdir -p "$tmp/cache"
CLINFORMER_CACHE_DIR="$tmp/cache"
PATH="$builddir:$PATH"
export CLINFORMER_CACHE_DIR PATH
p=0
for page in $pages; do
    p=$((p + 1))
    rel=${page#"$top"/}
    work="$tmp/work$p"
    mkdir -p "$work"
    for d in tests scripts cl python; do ln -s "$top/$d" "$work/$d"; done
    ln -s "$builddir/bench" "$work/bench"
    extract "$page" "$rel" "$work/block" >"$tmp/cmds" 2>"$tmp/orphans"
    while IFS='|' read -r file line _ _; do
        fail "$file:$line: a runnable mark with no code block after it"
    done <"$tmp/orphans"
    while IFS='|' read -r file line kind want text; do
        what="$file:$line: $(if [ "$kind" = sh ]; then echo "$text"; else echo "the $kind block"; fi)"
        if [ $have_device -eq 0 ] && [ "${CLINFORMER_REQUIRE_DEVICE:-0}" != 1 ]; then
            skip "$what" "no OpenCL device"
            continue
        fi
        if [ "$kind" = python ] && [ $has_python -eq 0 ]; then
            skip "$what" "python3 cannot import clinformer (pip install ./python)"
            continue
        fi
        t0=$(date +%s)
        rc=0
        (cd "$work" && run_one "$kind" "$text" "$tmp/log") </dev/null || rc=$?
        secs=$(($(date +%s) - t0))
        if [ "$rc" -eq "$want" ]; then
            ok "$what ($secs s)"
        elif [ "$rc" -eq 124 ]; then
            fail "$what: over the ${limit} s limit" "$tmp/log"
        else
            fail "$what: exit $rc, expected $want" "$tmp/log"
        fi
    done <"$tmp/cmds"
done

echo "1..$n"
[ $failed -eq 0 ] || echo "check-docs: $failed of $n failed" >&2
[ $failed -eq 0 ]
