#!/usr/bin/env bash
# deploy_install / deploy_deb: meridian run from where it was installed, not from the build.
#   install_test.sh install BUILD SRC   cmake --install BUILD into a temporary prefix
#   install_test.sh deb BUILD SRC       cpack -G DEB, then dpkg -x into a temporary root
# Then, from that copy: the layout (cmake/install.cmake), libmeridian_mpi.so's RUNPATH
# ($ORIGIN), `meridian doctor` finding meridiand and both agent libraries inside the copy
# (not in BUILD), the systemd unit through `systemd-analyze verify`, and the README's quick
# start (deploy/quickstart.sh --installed PREFIX: 2 mpirun ranks replaying the recorded job
# through the installed meridiand and launcher) ending with all 110 collectives matched and
# rank 1 the top straggler. For the package
# also its control fields: name, version and the Debian libraries it depends on.
# Exit: 0 pass, 1 fail, 77 skipped (no mpirun).
set -euo pipefail
mode=$1 build=$(cd "$2" && pwd) src=$(cd "$3" && pwd)
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (openmpi-bin)"; exit 77; }
tmp=$(mktemp -d /tmp/meridian-deploy-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

case "$mode" in
install)
    cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
    prefix=$tmp/prefix
    ;;
deb)
    cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
        { cat "$tmp/cpack.log"; fail "cpack -G DEB"; }
    deb=$(ls "$tmp"/pkg/meridian_*.deb)
    info=$(dpkg-deb --field "$deb" Package Version Depends)
    echo "$info"
    grep -q '^Package: meridian$' <<<"$info" || fail "package name"
    for lib in libc6 libprotobuf-c1 libsqlite3-0 libzstd1 libsodium23; do
        grep -q "^Depends:.*\b$lib\b" <<<"$info" || fail "Depends lacks $lib"
    done
    dpkg -x "$deb" "$tmp/root"
    prefix=$tmp/root/usr
    ;;
*) fail "mode install or deb, not $mode" ;;
esac

for f in bin/meridian bin/meridiand lib/meridian/libmeridian.so share/meridian/SCHEMA.md \
    share/doc/meridian/README.md share/doc/meridian/ENVIRONMENT.md \
    share/meridian/examples/ref-rank0.mrdcap share/meridian/examples/ref-rank1.mrdcap; do
    [ -e "$prefix/$f" ] || fail "$f not installed"
done
mpi=$prefix/lib/meridian/libmeridian_mpi.so
if [ -e "$build/agent/mpi/libmeridian_mpi.so" ]; then
    [ -e "$mpi" ] || fail "libmeridian_mpi.so not installed"
    runpath=$(readelf -d "$mpi" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    # shellcheck disable=SC2016 # the literal $ORIGIN
    [ "$runpath" = '$ORIGIN' ] || fail "libmeridian_mpi.so RUNPATH is '$runpath', not \$ORIGIN"
fi
echo "install_test: $mode: layout under $prefix ok"

# the systemd unit: systemd-analyze verify prints nothing for a clean unit (unknown keys and
# bad values are only warnings, exit status 0), so any output fails; ExecStart is pointed
# at this copy's meridiand, which verify requires to exist
unit=$prefix/lib/systemd/system/meridiand@.service
[ -e "$unit" ] || fail "meridiand@.service not installed"
if command -v systemd-analyze >/dev/null; then
    sed "s#/usr/bin/meridiand#$prefix/bin/meridiand#" "$unit" >"$tmp/meridiand@run1.service"
    if ! out=$(systemd-analyze verify "$tmp/meridiand@run1.service" 2>&1) || [ -n "$out" ]; then
        fail "systemd-analyze verify meridiand@.service: $out"
    fi
    echo "install_test: $mode: systemd-analyze verify meridiand@run1.service: clean"
else
    echo "install_test: $mode: no systemd-analyze (package systemd): unit not verified"
fi

# the launcher finds its parts relative to itself; the build tree stays out of PATH and of
# the MERIDIAN_* overrides
clean_env=(env -u MERIDIAN_DAEMON -u MERIDIAN_AGENT_LIB -u MERIDIAN_MPI_LIB
           PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
real=$(realpath "$prefix")
"${clean_env[@]}" "$prefix/bin/meridian" doctor >"$tmp/doctor.txt" || true
cat "$tmp/doctor.txt"
grep -q "^\[ok  \] meridiand: $real/bin/meridiand$" "$tmp/doctor.txt" || fail "doctor: meridiand"
grep -q "^\[ok  \] libmeridian.so: $real/lib/meridian/libmeridian.so$" "$tmp/doctor.txt" ||
    fail "doctor: libmeridian.so not the installed one"
if [ -e "$mpi" ]; then
    grep -q "^\[ok  \] MPI wrappers: $real/lib/meridian/libmeridian_mpi.so$" "$tmp/doctor.txt" ||
        fail "doctor: libmeridian_mpi.so not the installed one"
fi

# the quick start from the installed copy
cd "$tmp"
"${clean_env[@]}" bash "$src/deploy/quickstart.sh" --installed "$prefix" --out "$tmp/qs" \
    >"$tmp/qs.log" 2>&1 || { cat "$tmp/qs.log"; fail "quickstart --installed"; }
grep '^quickstart:' "$tmp/qs.log"
grep -q "^meridian profile: run .*database $tmp/qs/quickstart.db" "$tmp/qs.log" ||
    fail "quickstart: no run line"
grep -q "^quickstart: 2 ranks; 110 of 110 collective instances matched" "$tmp/qs.log" ||
    fail "quickstart: not 110 of 110 collectives matched"
grep -q "^quickstart: top straggler.*: rank 1 " "$tmp/qs.log" || fail "quickstart: rank 1 not first"
"$prefix/bin/meridian" report "$tmp/qs/quickstart.db" --json >/dev/null ||
    fail "installed meridian report"
echo "install_test: $mode: PASS"
