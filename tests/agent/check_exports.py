#!/usr/bin/env python3
"""agent_exports: libmeridian.so exports exactly the global symbols of
agent/libmeridian.map, needs no MPI symbol, is never unloaded (NODELETE), and loads with RTLD_NOW in a process without
MPI (as NCCL loads its profiler plugin) without becoming active.
Usage: check_exports.py LIBMERIDIAN_SO LIBMERIDIAN_MAP [--without-capture]
--without-capture: a build without CUPTI, whose library has none of capture's entry points
(CUDA and NVTX injection, the NCCL plugin): only the MPI and profiler API bridges of the map
are exported."""
import ctypes
import fnmatch
import os
import re
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


lib, mapfile = sys.argv[1], sys.argv[2]
text = re.sub(r"/\*.*?\*/", "", open(mapfile).read(), flags=re.S)
glob = re.search(r"global:(.*?)local:", text, re.S)
if not glob:
    fail("no global: ... local: section in " + mapfile)
want = {w.strip() for w in glob.group(1).split(";") if w.strip()}
if "--without-capture" in sys.argv[3:]:
    want = {w for w in want if w.startswith(("meridian_mpi_", "meridian_profapi_"))}

out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                     check=True).stdout
have = {l.split()[-1] for l in out.splitlines() if l.split() and l.split()[-2] not in ("A",)}
extra = [h for h in have if not any(fnmatch.fnmatchcase(h, w) for w in want)]
missing = [w for w in want if not any(fnmatch.fnmatchcase(h, w) for h in have)]
if extra or missing:
    fail("exported but not in the map: %s; in the map but not exported: %s" % (extra, missing))

out = subprocess.run(["nm", "-D", "--undefined-only", lib], capture_output=True, text=True,
                     check=True).stdout
mpi = [l.split()[-1] for l in out.splitlines()
       if re.match(r"(P?MPI_|ompi_|MPIR_)", l.split()[-1])]
if mpi:
    fail("unresolved MPI symbols: %s" % mpi)

# NCCL dlcloses its plugin: the agent must never be unloaded under its own thread.
dyn = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
if not re.search(r"FLAGS_1\).*NODELETE", dyn):
    fail("libmeridian.so is not linked with -z nodelete")

# Loading must work with RTLD_NOW and leave a non-rank process alone.
for k in list(os.environ):
    if k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_", "MERIDIAN_")) or k == "RANK":
        del os.environ[k]
handle = ctypes.CDLL(os.path.abspath(lib), mode=os.RTLD_NOW | os.RTLD_LOCAL)
for name in have:
    if not hasattr(handle, name):
        fail("dlsym(%s) failed" % name)
print("exports: %s; no MPI symbols; dlopen(RTLD_NOW) ok" % sorted(have))
