#!/bin/sh
# The commands marked runnable in README.md and docs/*.md, the names they
# mention and the CLI options of docs/cli.md, against this build
# (scripts/check-docs.sh says how).  TAP.
exec sh "${top_srcdir:-.}/scripts/check-docs.sh" "${top_builddir:-.}"
