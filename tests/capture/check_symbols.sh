#!/bin/sh
# capture_symbols: libmeridian.so exports exactly its entry points and the MPI and profiler
# API bridges, and references no MPI symbol (NCCL dlopens it with RTLD_NOW in processes
# without MPI);
# libmeridian_mpi.so defines the wrappers and needs libmeridian.so.
# Usage: check_symbols.sh /path/libmeridian.so /path/libmeridian_mpi.so
set -eu
lib=$1
mpi=$2
fail() { echo "capture_symbols: $*" >&2; exit 1; }

defined=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
want="InitializeInjection InitializeInjectionNvtx2 meridian_mpi_active
meridian_mpi_bridge_version meridian_mpi_now meridian_mpi_record meridian_mpi_shutdown
meridian_mpi_start meridian_profapi_call ncclProfiler_v4 ncclProfiler_v5 ncclProfiler_v6"
want=$(echo $want | tr ' ' '\n' | sort)
[ "$defined" = "$want" ] || fail "libmeridian.so exports
$defined
but should export exactly
$want"

if nm -D --undefined-only "$lib" | grep -E ' P?MPI_|ompi_' ; then
    fail "libmeridian.so references MPI symbols"
fi
# Loads with RTLD_NOW in a process without MPI (what NCCL does).
python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1], mode=2)" "$lib" ||
    fail "libmeridian.so does not load with RTLD_NOW"

for f in MPI_Init MPI_Init_thread MPI_Finalize MPI_Allreduce MPI_Reduce MPI_Bcast \
         MPI_Allgather MPI_Alltoall MPI_Reduce_scatter MPI_Gather MPI_Scatter MPI_Barrier \
         MPI_Send MPI_Recv MPI_Isend MPI_Irecv MPI_Sendrecv MPI_Wait MPI_Waitall MPI_Test; do
    nm -D --defined-only "$mpi" | awk '{print $3}' | grep -qx "$f" ||
        fail "libmeridian_mpi.so does not define $f"
done
readelf -d "$mpi" | grep -q 'NEEDED.*libmeridian\.so' || fail "libmeridian_mpi.so does not need libmeridian.so"
echo "capture_symbols: ok"
