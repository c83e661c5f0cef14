#!/bin/sh
# Installs, builds and runs the main job on the default OpenCL device:
# clinformer demo (devices, the golden example, one layer in Linformer and
# full mode).  Arguments go to clinformer demo.
set -eu
cd "$(dirname "$0")/.."
sh scripts/build.sh
./clinformer demo "$@"
