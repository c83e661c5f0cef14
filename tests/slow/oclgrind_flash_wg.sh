#!/bin/sh
# The work-group streaming kernel (clf__flash_wg) under oclgrind, which
# make check's tests/oclgrind.sh leaves out: its GPU-sized work-groups
# take the simulator about 150 s, with data-race checks on every access.
# Run by make check-slow.  TAP, from tests/oclgrind.sh.
OCLGRIND_PART=flash_wg exec sh "${top_srcdir:-.}/tests/oclgrind.sh"
