#!/bin/sh
# The library's layering, checked from the code (docs/design.md section 4).
#
#   sh scripts/check-layers.sh [--objects BUILDDIR] [--plant FLOOR:OBJECT]...
#   sh scripts/check-layers.sh --edges FILE
#
# The floors, lowest first: runtime gemm stages layer model parallel tune.
# A library file (src/<floor>/<name>.c) may call functions of its own floor
# and of the floors below, never above, and no two files may call each
# other, directly or around a cycle.  The calls are read from the built
# objects of libclfcore (nm: the symbols each object defines and those it
# leaves undefined), so a call through a macro or a header's prototype
# counts the same as a written one.  The includes are read from the
# sources: a library file includes its own floor's header and no other
# project header but its own folder's (a header private to the folder,
# such as src/model/model_impl.h), a floor's header includes the header
# of the floor below it and its own folder's, and no library file includes src/internal.h (the
# tests' header).
#
# --plant FLOOR:OBJECT adds an object as if it were a file of FLOOR (the
# test of this script plants an upward call).  --edges FILE checks a list
# of "floor/file floor/file" caller-callee lines instead of the objects.
# Prints each fault and exits 1 when there is one, else prints a summary
# and exits 0.
set -eu

floors="runtime gemm stages layer model parallel tune"
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=.
edges=
plants=
while [ $# -gt 0 ]; do
    case $1 in
    --objects) builddir=$2; shift 2 ;;
    --edges) edges=$2; shift 2 ;;
    --plant) plants="$plants $2"; shift 2 ;;
    *) echo "check-layers: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rank() { # the floor's position, lowest 0
    i=0
    for f in $floors; do
        [ "$f" = "$1" ] && { echo $i; return; }
        i=$((i + 1))
    done
    echo "check-layers: unknown floor '$1'" >&2
    exit 2
}

# One line per symbol: D|U floor/file symbol.
symbols() { # floor/file object
    nm "$2" | awk -v f="$1" '
        $2 ~ /^[TDBRC]$/ { print "D", f, $3 }
        $1 == "U" { print "U", f, $2 }'
}

if [ -z "$edges" ]; then
    found=0
    for floor in $floors; do
        for o in "$builddir"/src/"$floor"/libclfcore_la-*.o; do
            [ -f "$o" ] || continue
            name=${o##*/libclfcore_la-}
            symbols "$floor/${name%.o}" "$o"
            found=$((found + 1))
        done
    done >"$tmp/symbols"
    if [ "$found" -eq 0 ]; then
        echo "check-layers: no objects under $builddir/src/<floor>/ (build first)" >&2
        exit 2
    fi
    for p in $plants; do
        symbols "${p%%:*}/planted" "${p#*:}" >>"$tmp/symbols"
    done
    awk '$1 == "D" { def[$3] = $2 }
         $1 == "U" { use[NR] = $2 " " $3 }
         END { for (i in use) { split(use[i], a, " ")
                   if ((a[2] in def) && def[a[2]] != a[1])
                       print a[1], def[a[2]], a[2] } }' \
        "$tmp/symbols" | sort -u >"$tmp/calls"
    awk '{ print $1, $2 }' "$tmp/calls" | sort -u >"$tmp/edges"
else
    sort -u "$edges" >"$tmp/edges"
    awk '{ print $1, $2, "?" }' "$tmp/edges" >"$tmp/calls"
fi

faults=0
# Upward calls.
while read -r from to sym; do
    rf=$(rank "${from%%/*}")
    rt=$(rank "${to%%/*}")
    if [ "$rt" -gt "$rf" ]; then
        echo "check-layers: upward call: $from calls $to ($sym), a higher floor"
        faults=$((faults + 1))
    fi
done <"$tmp/calls"

# Cycles between files (tsort names the files of one).
if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/tsort"; then
    cycle=$(sed -n 's/^tsort: \([a-z_]*\/[a-z_0-9]*\)$/\1/p' "$tmp/tsort" |
        tr '\n' ' ')
    echo "check-layers: files call each other around a cycle: $cycle"
    faults=$((faults + 1))
fi

# Includes, from the sources (not with --edges).
if [ -z "$edges" ]; then
    for floor in $floors; do
        below=
        for f in $floors; do
            [ "$f" = "$floor" ] && break
            below=$f
        done
        for c in "$top"/src/"$floor"/*.c "$top"/src/"$floor"/*.h; do
            [ -f "$c" ] || continue
            rel=${c#"$top"/}
            case $c in
            */"$floor".h) want=${below:+$below/$below.h}; own=$floor/ ;;
            *) want=$floor/$floor.h; own=$floor/ ;;
            esac
            for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$c"); do
                case $inc in
                "$want" | clinformer.h | runtime/kernels.h | \
                    runtime/kernel_params.h) continue ;;
                esac
                # a header private to the folder (not its floor's header)
                if [ -n "$own" ] && [ "${inc%/*}/" = "$own" ] &&
                    [ "$inc" != "$floor/$floor.h" ]; then
                    continue
                fi
                echo "check-layers: $rel includes \"$inc\"; a file of $floor includes ${want:-no project header}${own:+ and headers of $own} only"
                faults=$((faults + 1))
            done
        done
    done
    for c in "$top"/src/*.c "$top"/src/*/*.c; do
        [ -f "$c" ] || continue
        case ${c#"$top"/src/} in
        */*) f=${c#"$top"/src/}; f=${f%%/*}
            case " $floors " in *" $f "*) continue ;; esac ;;
        esac
        echo "check-layers: ${c#"$top"/} is in no floor ($floors)"
        faults=$((faults + 1))
    done
fi

if [ "$faults" -ne 0 ]; then
    echo "check-layers: $faults fault(s)"
    exit 1
fi
echo "check-layers: $(wc -l <"$tmp/edges") calls between files, none upward, no cycle"
