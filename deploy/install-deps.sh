#!/usr/bin/env bash
# Installs what meridian needs to build and test from Debian's packages (run as root).
# Used by the quick start, the test script and CI, so a fresh machine needs nothing else.
# CUDA (CUPTI, NCCL) is not a Debian package here: it is used from /usr/local/cuda when
# present (the agent's capture is built only then).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git
      protobuf-c-compiler libprotobuf-c-dev libsqlite3-dev sqlite3 libzstd-dev libsodium-dev
      libopenmpi-dev openmpi-bin python3 iproute2 util-linux clang libclang-rt-14-dev llvm-14
      zlib1g-dev protobuf-compiler)
# tests/export: node + npm install the pinned speedscope package into the build tree; a
# node that brings its own npm (another distribution's package) is kept as it is
command -v node >/dev/null || pkgs+=(nodejs)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#pkgs[@]} packages present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run as root, or: sudo apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
