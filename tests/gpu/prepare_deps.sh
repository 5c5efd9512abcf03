#!/usr/bin/env bash
# prepare_deps.sh: gather, on THIS (Debian 12) machine, what the GPU host lacks to build
# meridian, into .deps/ at the repository root (git-ignored; the device call carries it).
#
# Where it sits: step one of a GPU-host run. The host (Ubuntu 24.04, glibc 2.39, no package
# registry) has gcc, cmake, ninja, nvcc, Open MPI and the SQLite runtime, but no protoc-c,
# no libprotobuf-c, no sqlite3.h, maybe no zstd headers (shared/GPU-HOST.md) and no
# libsodium (the handshake's HMAC, proto/auth.h). So:
#   .deps/debs/*.deb     Debian 12 packages fetched with `apt-get download` (the runtime
#                        libraries too, so the -dev symlinks resolve: libprotobuf-c1,
#                        libsqlite3-0, libzstd1, libsodium23), plus the sqlite3 shell for
#                        the checks
#   .deps/pb/            meridian.pb-c.{c,h} generated here by protoc-c from the whole
#                        meridian.proto (proto/kinds_gen.c fills proto/meridian.proto's
#                        per-kind parts in from proto/kinds.table, as the build does), and
#                        copies of those two sources (configure refuses a stale folder)
#                        (configure the host with -DMRD_PREGENERATED_PROTO=.deps/pb)
#   .deps/extra/include  nccl.h and nvtx3/ from this machine's CUDA, used only if the host
#                        has none
#   .deps/MANIFEST       what is there, with versions and sha256
# tests/gpu/run_on_gpu_host.sh unpacks the packages with `dpkg -x` into .deps/root and
# configures with -DMRD_DEPS_PREFIX=.deps/root. Debian 12's libraries need glibc >= 2.36,
# which the host's 2.39 satisfies; the host script checks which copy each binary loads.
#
# Usage: tests/gpu/prepare_deps.sh   (root; needs apt's package lists: apt-get update once)
# Size: about 3 MB. Idempotent: it starts from an empty .deps/ each time.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
deps="$root/.deps"
cuda_root=${MRD_CUDA_ROOT:-/usr/local/cuda}
pkgs=(libprotobuf-c1 libprotobuf-c-dev libsqlite3-0 libsqlite3-dev libzstd1 libzstd-dev
      libsodium23 libsodium-dev sqlite3 libreadline8 zlib1g zlib1g-dev)

command -v protoc-c >/dev/null || { echo "prepare_deps: protoc-c missing (apt-get install protobuf-c-compiler)" >&2; exit 1; }
command -v cc >/dev/null || { echo "prepare_deps: no C compiler (cc) for proto/kinds_gen.c" >&2; exit 1; }
rm -rf "$deps"
mkdir -p "$deps/debs" "$deps/pb" "$deps/extra/include"

download() { (cd "$deps/debs" && apt-get download -q "${pkgs[@]}" >/dev/null); }
if ! download; then
    echo "prepare_deps: apt-get download failed; refreshing package lists once" >&2
    apt-get update -q >/dev/null
    download
fi

gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
cc -std=c11 -O2 -o "$gen/mrd_kinds_gen" "$root/proto/kinds_gen.c"
"$gen/mrd_kinds_gen" "$root/proto/kinds.table" "$root/proto/meridian.proto" \
    "$gen/kinds_table.h" "$gen/meridian.proto" # the header is made again by the host's build
protoc-c --c_out="$deps/pb" -I"$gen" "$gen/meridian.proto"
# proto/CMakeLists.txt refuses a .deps/pb made from other sources than its own
cp "$root/proto/meridian.proto" "$root/proto/kinds.table" "$deps/pb/"
protoc-c --c_out="$deps/pb" -I"$root/aggregator/export/pftrace" \
    "$root/aggregator/export/pftrace/meridian_pftrace.proto" # the native trace export
if [ -f "$cuda_root/include/nccl.h" ]; then
    cp "$cuda_root/include/nccl.h" "$deps/extra/include/"
fi
if [ -d "$cuda_root/include/nvtx3" ]; then # header-only NVTX, in case the host lacks it
    cp -r "$cuda_root/include/nvtx3" "$deps/extra/include/"
fi

{
    echo "# meridian GPU-host dependencies, prepared $(date -u +%FT%TZ) on $(. /etc/os-release; echo "$PRETTY_NAME")"
    echo "# protoc-c: $(protoc-c --version 2>&1 | head -1)"
    (cd "$deps" && find debs pb extra -type f | sort | xargs sha256sum)
} >"$deps/MANIFEST"
echo "prepare_deps: $(ls "$deps/debs" | wc -l) packages, pregenerated proto, $(du -sh "$deps" | cut -f1) in $deps"
