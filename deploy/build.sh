#!/usr/bin/env bash
# Installs the Debian packages (install-deps.sh), configures the build folder (Ninja,
# warnings as errors) and builds everything: the common first half of deploy/quickstart.sh
# and deploy/test.sh, so both always build the same way into the same folder.
#   MRD_BUILD_DIR   build folder (default: build/ at the top of the repository)
#   MRD_JOBS        parallel build jobs (default: nproc)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${MRD_BUILD_DIR:-$top/build}
jobs=${MRD_JOBS:-$(nproc)}

"$top/deploy/install-deps.sh"
cmake -S "$top" -B "$build" -G Ninja -DMRD_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs"
