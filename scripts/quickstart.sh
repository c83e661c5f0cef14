#!/bin/sh
# The main job: installs what is missing, builds, and runs the quick bench
# on the default OpenCL device (clinformer bench --quick: Linformer against
# full attention at n = 256..2048 and an accuracy-vs-k study, under three
# minutes on a 2-core CPU, ending with a summary table).  Arguments go to
# clinformer bench.
set -eu
cd "$(dirname "$0")/.."
sh scripts/build.sh
./clinformer bench --quick "$@"
