#!/bin/sh
# Usage: cl2c.sh NAME INPUT.cl OUTPUT.c
# Turns an OpenCL C source file into a NUL-terminated const char array, so
# the kernels travel inside the library with no string-literal length limit.
set -eu
name=$1
in=$2
out=$3
{
    printf '/* Generated from %s by cl2c.sh; do not edit. */\n' "$(basename "$in")"
    printf 'const char %s[] = {\n' "$name"
    od -An -v -tx1 "$in" | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' -e 's/^/    /'
    printf '    0x00\n};\n'
} > "$out.tmp"
mv "$out.tmp" "$out"
