#!/usr/bin/env bash
# Builds the aggregator image (Containerfile beside this script) with buildah from the
# Debian package of a build folder:
#   deploy/container/build.sh BUILD_DIR [--tag TAG] [--base IMAGE | --debootstrap]
#     --tag TAG       image name (default localhost/meridian:VERSION)
#     --base IMAGE    the Debian 12 base (default docker.io/library/debian:bookworm-slim)
#     --debootstrap   no registry: make the base here with debootstrap (Debian 12 minbase
#                     with the four runtime libraries) and import it as
#                     localhost/debian-bookworm-meridian-base
# Needs buildah (Debian package buildah) and, for --debootstrap, debootstrap; run as root.
# Prints the image name on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
build=$(cd "$1" && pwd)
shift
base=docker.io/library/debian:bookworm-slim tag='' boot=0
while [ $# -gt 0 ]; do
    case "$1" in
    --tag) tag=$2; shift ;;
    --base) base=$2; shift ;;
    --debootstrap) boot=1 ;;
    *) echo "build.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
ctx=$(mktemp -d /tmp/meridian-image-XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$ctx/pkg" >/dev/null
cp "$ctx"/pkg/meridian_*.deb "$ctx/meridian.deb"
version=$(dpkg-deb --field "$ctx/meridian.deb" Version)
tag=${tag:-localhost/meridian:$version}
cp "$here/Containerfile" "$ctx/"
rm -rf "$ctx/pkg"

if [ "$boot" = 1 ]; then
    base=localhost/debian-bookworm-meridian-base
    if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
        debootstrap --variant=minbase \
            --include=libprotobuf-c1,libsqlite3-0,libzstd1,libsodium23 \
            bookworm "$ctx/rootfs" http://deb.debian.org/debian >"$ctx/debootstrap.log" ||
            { tail -20 "$ctx/debootstrap.log" >&2; exit 1; }
        rm -rf "$ctx"/rootfs/var/cache/apt/archives/*.deb "$ctx"/rootfs/var/lib/apt/lists/*
        ctr=$(buildah from scratch)
        mnt=$(buildah mount "$ctr")
        cp -a "$ctx/rootfs/." "$mnt/"
        buildah umount "$ctr" >/dev/null
        buildah commit --rm "$ctr" "$base" >/dev/null
        rm -rf "$ctx/rootfs"
    fi
fi
buildah bud --isolation chroot --build-arg "BASE=$base" -f "$ctx/Containerfile" -t "$tag" "$ctx" >&2
echo "$tag"
