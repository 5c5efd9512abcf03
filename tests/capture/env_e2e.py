"""capture_env_e2e: the environment fingerprint (agent/capture/env.c) from the real
libmeridian.so through a real meridiand into env_records, no GPU.

Rank 0 runs env_driver with a stand-in CUDA driver (fake_libcuda.c: device 2, driver
13010) and a stand-in NVML (fake_nvml.c, on LD_LIBRARY_PATH); rank 1 without either. Both
run with a controlled environment: variables the fingerprint must keep, variables whose
names contain TOKEN, KEY, SECRET or PASSWORD (any case) with values marked "hunter2", names
outside the allowlist, and one value longer than the 1024-byte cap. Checks, from the
database's raw rows with sqlite3:
- each rank's keys equal, exactly, the set computed here: the versions the stand-ins
  report, formatted as documented (13010 -> "13.1", NCCL 22805 -> "2.28.5", MPI's first
  line), CUPTI's from the toolkit's cupti_version.h, the host name, rank 0's gpu2.* from
  the stand-in NVML, and env:<NAME> for the variables this script's own allowlist rule
  keeps from the environment it passed; each key once;
- rank 1 has no driver_version and no gpu keys (nothing loaded: nothing recorded);
- no stored string anywhere contains "hunter2", and no secret name appears as a key;
- `meridian report --json` flags rank 1's missing driver and GPU keys and its NCCL_ALGO.
"""
import argparse
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import itest  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--meridiand", required=True)
p.add_argument("--meridian", required=True)
p.add_argument("--driver", required=True)
p.add_argument("--agent", required=True)
p.add_argument("--fake-libcuda", required=True)
p.add_argument("--fake-nvml-dir", required=True)
p.add_argument("--cupti-version-h", required=True)
p.add_argument("--workdir", default=None)
p.add_argument("--keep", action="store_true")
args = p.parse_args()

PREFIXES = ("NCCL_", "CUDA_", "OMPI_MCA_", "UCX_", "TORCH_", "PYTORCH_", "NVIDIA_", "CUBLAS_",
            "CUDNN_", "MERIDIAN_")
EXACT = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "LD_LIBRARY_PATH", "LD_PRELOAD", "XLA_FLAGS"}
FORBIDDEN = ("TOKEN", "KEY", "SECRET", "PASSWORD")
DENIED = {"OMPI_MCA_orte_precondition_transports"}


def kept(name, value):
    """This test's statement of the documented rule (agent/ENVIRONMENT.md)."""
    listed = (name.startswith(PREFIXES) or name in EXACT) and name not in DENIED
    return listed and not any(w in name.upper() for w in FORBIDDEN) and len(value) <= 1024


wd = itest.Workdir(args, "capture_env_e2e")
d = itest.Daemon(args.meridiand, wd, run_id="env-run")
d.start()
cupti = re.search(r"#define CUPTI_API_VERSION (\d+)",
                  open(args.cupti_version_h).read()).group(1)


def controlled_env(rank):
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "HOME") or k.endswith("SAN_OPTIONS")}
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
        **d.agent_env(),
        "LD_LIBRARY_PATH": os.path.abspath(args.fake_nvml_dir),
        # kept
        "NCCL_ALGO": "Ring" if rank == 0 else "Tree", "NCCL_PROTO": "Simple", "NCCL_DEBUG": "",
        "NCCL_IB_HCA": "mlx5_0:1", "CUDA_VISIBLE_DEVICES": "2,3",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1", "OMPI_MCA_btl": "self,tcp", "UCX_TLS": "rc,sm",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility", "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "CUDNN_LOGINFO_DBG": "0", "OMP_NUM_THREADS": "7", "MKL_NUM_THREADS": "3",
        "XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true",
        "NCCL_LONG_BUT_FINE": "v" * 1024,
        # secrets: never stored, whatever the prefix or case
        "SECRET_TOKEN": "hunter2-a", "MY_API_KEY": "hunter2-b",
        "NCCL_SOCKET_PASSWORD": "hunter2-c", "CUDA_token_file": "hunter2-d",
        "UCX_SecretStuff": "hunter2-e", "NCCL_IB_PKEY": "hunter2-f",
        "MERIDIAN_API_KEY": "hunter2-g",
        "OMPI_MCA_orte_precondition_transports": "hunter2-h",
        # not in the allowlist
        "NCCLX_FOO": "1", "OMP_PROC_BIND": "close", "LD_BIND_NOW": "1", "UNRELATED": "x",
        # over the value cap: left out and counted
        "NCCL_TOO_LONG": "x" * 1025,
    })
    return env


envs = {}
for rank, cuda in ((0, os.path.abspath(args.fake_libcuda)), (1, "-")):
    envs[rank] = controlled_env(rank)
    try:
        r = subprocess.run([args.driver, os.path.abspath(args.agent), cuda], env=envs[rank],
                           timeout=90, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    except subprocess.TimeoutExpired:
        itest.fail("driver rank %d did not exit within 90 s" % rank)
    print(r.stdout, end="")
    if r.returncode != 0:
        itest.fail("driver rank %d exited %d" % (rank, r.returncode))
    exits = [l for l in r.stdout.splitlines() if l.startswith("meridian:")]
    if len(exits) != 1 or "lost 0" not in exits[0]:
        itest.fail("rank %d: expected one agent exit line reporting no loss, got %r"
                   % (rank, exits))
if d.stop() != 0:
    itest.fail("meridiand did not exit 0")

db = sqlite3.connect(d.db)
rows = db.execute("SELECT e.rank, k.value, v.value FROM env_records e "
                  "LEFT JOIN strings k ON k.id = e.key_id "
                  "LEFT JOIN strings v ON v.id = e.value_id").fetchall()
got = {0: {}, 1: {}}
for rank, k, v in rows:
    if rank not in got or k is None:
        itest.fail("unexpected row %r" % ((rank, k, v),))
    if k in got[rank]:
        itest.fail("rank %d: key %r stored twice" % (rank, k))
    got[rank][k] = v if v is not None else ""

common = {"hostname": socket.gethostname(), "cuda_runtime_version": "13.0",
          "nccl_version": "2.28.5", "cupti_version": cupti,
          "mpi_library": "Open MPI v5.0.99, package: meridian test stand-in"}
for rank in (0, 1):
    want = dict(common)
    dropped = 0
    for name, value in envs[rank].items():
        if kept(name, value):
            want["env:" + name] = value
        elif kept(name, ""):
            dropped += 1  # listed, but over the value cap
    if dropped:
        want["env_dropped"] = str(dropped)
    if rank == 0:
        want.update({"driver_version": "13.1", "gpu2.name": "NVIDIA H200 (fake)",
                     "gpu2.uuid": "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf",
                     "gpu2.memory_mib": "143771", "gpu2.sm_clock_max_mhz": "1980",
                     "gpu2.mem_clock_max_mhz": "3201"})
    if got[rank] != want:
        missing = sorted(set(want) - set(got[rank]))
        extra = sorted(set(got[rank]) - set(want))
        wrong = sorted(k for k in set(want) & set(got[rank]) if want[k] != got[rank][k])
        itest.fail("rank %d: keys missing %r, unexpected %r, values differ %r"
                   % (rank, missing, extra, [(k, got[rank][k], want[k]) for k in wrong]))
    if "env_dropped" not in want or "env:NCCL_LONG_BUT_FINE" not in want:
        itest.fail("the cap cases did not happen as planned")
leaks = db.execute("SELECT value FROM strings WHERE value LIKE '%hunter2%' OR value LIKE "
                   "'%SECRET%' OR value LIKE '%PASSWORD%' OR value LIKE '%API_KEY%' OR "
                   "value LIKE '%PKEY%' OR value LIKE '%token%'").fetchall()
if leaks:
    itest.fail("secret names or values stored: %r" % leaks)

r = subprocess.run([args.meridian, "report", "--json", d.db], timeout=60,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
if r.returncode != 0:
    itest.fail("meridian report exited %d: %s" % (r.returncode, r.stderr))
env = json.loads(r.stdout).get("environment")
flagged = {(x["key"], y["rank"]) for x in env["differences"] for y in x["ranks"]} if env else None
want = {("driver_version", 1), ("env:NCCL_ALGO", 1), ("gpu.name", 1), ("gpu.memory_mib", 1),
        ("gpu.sm_clock_max_mhz", 1), ("gpu.mem_clock_max_mhz", 1)}
if flagged != want:
    itest.fail("report flags %r, want %r (two ranks: a tie keeps the present value)"
               % (flagged, want))
itest.log("ok: both ranks' fingerprints stored exactly as expected, no secret stored, "
          "the report flags rank 1's missing driver and GPU and its NCCL_ALGO")
wd.done(True)
