#!/usr/bin/env bash
# Installs what meridian needs to build and test from Debian's packages (run as root).
# Used by the quick start, the test script and CI, so a fresh machine needs nothing else.
# CUDA (CUPTI, NCCL) is not a Debian package here: it is used from /usr/local/cuda when
# present (the agent's capture is built only then). python3-torch is large (about 150 MB to
# download, 640 MB installed): it brings the real torchrun for deploy_slurm.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git
      protobuf-c-compiler libprotobuf-c-dev libsqlite3-dev sqlite3 libzstd-dev libsodium-dev
      libopenmpi-dev openmpi-bin python3 iproute2 util-linux clang libclang-rt-14-dev llvm-14
      # tests/deploy: a real single-node Slurm with munge, Debian's torchrun (python3-torch),
      # systemd-analyze for the unit in deploy/systemd; dpkg-dev (dpkg-shlibdeps) for cpack;
      # python3-yaml to read the Kubernetes manifests in deploy/k8s
      slurm-wlm munge python3-torch systemd dpkg-dev python3-yaml
      # tests/export: zlib for the native trace, Debian's protoc to decode it
      zlib1g-dev protobuf-compiler
      # tests/analysis: the HTML report rendered in headless Chromium (analysis_html);
      # c++filt (binutils) as the demangling oracle of analysis_why
      chromium binutils)
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
