#!/bin/sh
# Installs, builds and runs the test suites (make check).
set -eu
cd "$(dirname "$0")/.."
sh scripts/build.sh
make -j"$(nproc)" check
