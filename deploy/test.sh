#!/usr/bin/env bash
# The test command of the README: install dependencies, build with warnings as errors,
# run every test with CTest and print its summary.
#   deploy/test.sh                  # all tests (GPU tests skip themselves without a GPU)
#   MRD_BUILD_DIR=build-x deploy/test.sh -R proto_   # extra args go to ctest
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${MRD_BUILD_DIR:-$top/build}
jobs=${MRD_JOBS:-$(nproc)}

"$top/deploy/build.sh" # install-deps.sh, configure, build (shared with quickstart.sh)
ctest --test-dir "$build" --output-on-failure --timeout 600 -j "$jobs" "$@"
