"""capture_e2e: capture -> rings -> flusher -> wire -> meridiand -> SQLite, with the real
libmeridian.so and a real meridiand (no GPU: NCCL, NVTX and MPI are driven by e2e_driver).

Checks in the database: the all-reduce and the send with every NCCL field (communicator
hash, rank, size, sequence number, function, datatype, bytes, algorithm, protocol,
channels, launch id), the two KernelCh records under the all-reduce's op id with their
GPU timers, NVTX ranges and marks from both NVTX clients (names and nesting), the MPI
call; the agent's one exit line reports no loss.
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import itest  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--meridiand", required=True)
p.add_argument("--driver", required=True)
p.add_argument("--agent", required=True)
p.add_argument("--mpi", nargs=3, metavar=("MPIEXEC", "PRELOAD", "PROGRAM"),
               help="instead: run PROGRAM as 2 MPI ranks with PRELOAD (libmeridian_mpi.so)")
p.add_argument("--collsteps", metavar="MERIDIAN",
               help="instead: two ranks of a DDP-like job counting steps from collectives; "
               "MERIDIAN (the CLI) reports on the database")
p.add_argument("--workdir", default=None)
p.add_argument("--keep", action="store_true")
args = p.parse_args()

wd = itest.Workdir(args, "capture_e2e")
d = itest.Daemon(args.meridiand, wd, run_id="e2e-run")
d.start()
env = dict(os.environ)
for k in list(env):
    if k.startswith(("MERIDIAN_", "OMPI_", "PMIX_", "PMI_", "SLURM_")) or k in ("RANK",):
        del env[k]
env.update({"MERIDIAN_FORCE": "1", "MERIDIAN_AGGREGATOR": d.addr(),
            "MERIDIAN_RUN_ID": d.run_id, "MERIDIAN_SECRET_FILE": d.secret_file,
            "NVTX_INJECTION64_PATH": os.path.abspath(args.agent)})


def check_mpi():
    """Two ranks under mpirun, the wrappers preloaded: every rank's calls are stored."""
    mpiexec, preload, prog = args.mpi
    del env["MERIDIAN_FORCE"]  # mpirun's OMPI_COMM_WORLD_RANK makes each process a rank
    cmd = [mpiexec, "--allow-run-as-root", "--oversubscribe", "-np", "2",
           "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]
    for k in ("MERIDIAN_AGGREGATOR", "MERIDIAN_RUN_ID", "MERIDIAN_SECRET_FILE"):
        cmd += ["-x", k]
    cmd += ["-x", "LD_PRELOAD=" + os.path.abspath(preload), prog]
    env["OMPI_MCA_plm_rsh_agent"] = "false"
    try:
        r = subprocess.run(cmd, env=env, timeout=90, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    except subprocess.TimeoutExpired:
        itest.fail("mpirun did not exit within 90 s")
    print(r.stdout, end="")
    if r.returncode != 0:
        itest.fail("mpirun exited %d" % r.returncode)
    lines = [l for l in r.stdout.splitlines() if "meridian: rank" in l]
    if len(lines) != 2 or not all("lost 0" in l for l in lines):
        itest.fail("expected one exit line per rank reporting no loss, got %r" % lines)
    if d.stop() != 0:
        itest.fail("meridiand did not exit 0")
    db = sqlite3.connect(d.db)
    rows = db.execute("SELECT m.rank, s.value, m.bytes, m.peer, m.tag, m.comm_size "
                      "FROM mpi_calls m JOIN strings s ON s.id = m.call_id "
                      "ORDER BY m.rank, m.start_ns").fetchall()
    for rank in (0, 1):
        got = [r[1:] for r in rows if r[0] == rank]
        p2p = ("MPI_Send", 4, 1, 5, 2) if rank == 0 else ("MPI_Recv", 4, 0, 5, 2)
        want = [("MPI_Init", 0, -1, -1, 2)] + [("MPI_Allreduce", 2048, -1, -1, 2)] * 3 + [
            p2p, ("MPI_Barrier", 0, -1, -1, 2), ("MPI_Finalize", 0, -1, -1, 2)]
        if got != want:
            itest.fail("rank %d mpi_calls %r, want %r" % (rank, got, want))
    itest.log("ok: both ranks' MPI calls stored, flushed before MPI_Finalize")
    wd.done(True)
    sys.exit(0)


def check_collsteps():
    """Two ranks (RANK/LOCAL_RANK/WORLD_SIZE, as torchrun sets them) with
    MERIDIAN_STEP_COLLECTIVE=auto and no NVTX step: each counts the steps of the DDP rule.
    The expectation, derived by hand from the driver's pattern (proto/collstep.h): the 4
    bucket sizes repeat from iteration 1; three repetitions (12 AllReduces) find the period
    4 at iteration 3's last bucket; a step begins at each later iteration's first bucket:
    iterations 4..11, 8 steps, on both ranks. Stored from each rank's Goodbye."""
    del env["MERIDIAN_FORCE"]
    env["MERIDIAN_STEP_COLLECTIVE"] = "auto"
    for rank in (0, 1):
        env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2"})
        try:
            r = subprocess.run([args.driver, os.path.abspath(args.agent), "ddp", str(rank)],
                               env=env, timeout=60, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        except subprocess.TimeoutExpired:
            itest.fail("driver rank %d did not exit within 60 s" % rank)
        print(r.stdout, end="")
        if r.returncode != 0:
            itest.fail("driver rank %d exited %d" % (rank, r.returncode))
    if d.stop() != 0:
        itest.fail("meridiand did not exit 0")
    db = sqlite3.connect(d.db)
    got = db.execute("SELECT rank, category, name, value FROM agent_counters WHERE "
                     "category = 'collstep' OR (category = 'window' AND name = 'steps') "
                     "ORDER BY rank, category, name").fetchall()
    want = []
    for rank in (0, 1):
        want += [(rank, "collstep", "boundaries", 8), (rank, "collstep", "concurrent", 0),
                 (rank, "collstep", "period", 4), (rank, "window", "steps", 8)]
    if got != want:
        itest.fail("step counters %r, want %r" % (got, want))
    ops = db.execute("SELECT rank, count(*) FROM nccl_ops GROUP BY rank ORDER BY rank").fetchall()
    if ops != [(0, 12 + 47 + 12), (1, 12 + 47 + 12)]:
        itest.fail("nccl_ops per rank %r" % (ops,))
    # every step but the last (running at exit) recorded as "step N" in meridian.step, which
    # the report's step rule finds: its ranks have 7 steps each
    steps = db.execute("SELECT n.rank, s.value FROM nvtx n JOIN strings s ON s.id = n.name_id "
                       "JOIN strings d ON d.id = n.domain_id WHERE d.value = 'meridian.step' "
                       "ORDER BY n.rank, n.start_ns").fetchall()
    want = [(rank, "step %d" % j) for rank in (0, 1) for j in range(7)]
    if steps != want:
        itest.fail("step records %r, want %r" % (steps, want))
    r = subprocess.run([args.collsteps, "report", "--json", d.db], timeout=60,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        itest.fail("meridian report exited %d: %s" % (r.returncode, r.stderr))
    rep = json.loads(r.stdout)
    per_rank = sorted((x["rank"], x["steps"]) for x in rep["ranks"])
    if per_rank != [(0, 7), (1, 7)]:
        itest.fail("the report's steps per rank %r, want 7 each" % (per_rank,))
    itest.log("ok: both ranks counted 8 steps from the world communicator's AllReduces; "
              "the report finds 7 ended steps on each")
    wd.done(True)
    sys.exit(0)


if args.mpi:
    check_mpi()
if args.collsteps:
    check_collsteps()
try:
    r = subprocess.run([args.driver, os.path.abspath(args.agent)], env=env, timeout=60,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
except subprocess.TimeoutExpired:
    itest.fail("driver did not exit within 60 s")
print(r.stdout, end="")
if r.returncode != 0:
    itest.fail("driver exited %d" % r.returncode)
exit_lines = [l for l in r.stdout.splitlines() if l.startswith("meridian:")]
if len(exit_lines) != 1 or "lost 0" not in exit_lines[0]:
    itest.fail("expected one agent exit line reporting no loss, got %r" % exit_lines)
if d.stop() != 0:
    itest.fail("meridiand did not exit 0")

db = sqlite3.connect(d.db)


def s(sid):
    row = db.execute("SELECT value FROM strings WHERE id = ?", (sid,)).fetchone()
    return row[0] if row else None


ops = db.execute("SELECT op_id, comm_hash, comm_rank, comm_nranks, seq, func_id, count, "
                 "datatype_id, bytes, root, peer, algo_id, proto_id, channels, warps, "
                 "launch_id, is_p2p, start_ns, end_ns FROM nccl_ops ORDER BY op_id").fetchall()
if len(ops) != 2:
    itest.fail("nccl_ops has %d rows, want 2" % len(ops))
ar, snd = ops
if (ar[1] & (2**64 - 1)) != 0x1122334455667788 or ar[2:5] != (0, 2, 41):
    itest.fail("all-reduce identity %r" % (ar[1:5],))
if (s(ar[5]), ar[6], s(ar[7]), ar[8], s(ar[11]), s(ar[12]), ar[13], ar[14]) != (
        "AllReduce", 2097152, "ncclFloat32", 8388608, "RING", "SIMPLE", 2, 16):
    itest.fail("all-reduce fields %r" % (ar,))
if not ar[15] or ar[16] != 0 or ar[17] > ar[18]:
    itest.fail("all-reduce launch id / kind / times %r" % (ar,))
if (s(snd[5]), snd[6], snd[8], snd[10], snd[16]) != ("Send", 1000, 1000, 1, 1):
    itest.fail("send fields %r" % (snd,))
chans = db.execute("SELECT op_id, channel, gpu_start, gpu_end FROM nccl_channels "
                   "ORDER BY channel").fetchall()
want = [(ar[0], c, 5000000000 + 1000 * c, 5000000000 + 1000 * c + 700) for c in range(2)]
if chans != want:
    itest.fail("nccl_channels %r, want %r" % (chans, want))
nvtx = db.execute("SELECT kind, domain_id, name_id, depth, start_ns, end_ns FROM nvtx "
                  "ORDER BY start_ns, kind").fetchall()
names = sorted((s(n[2]), n[0], n[3]) for n in nvtx)
want = sorted([("ncclCommInitRank", 1, 0), ("step 0", 1, 0), ("checkpoint", 3, 0)])
if names != want:
    itest.fail("nvtx rows %r, want %r" % (names, want))
mpi = db.execute("SELECT call_id, bytes, comm_size, end_ns - start_ns FROM mpi_calls").fetchall()
if [(s(m[0]), m[1], m[2], m[3]) for m in mpi] != [("MPI_Allreduce", 8000, 2, 1500)]:
    itest.fail("mpi_calls %r" % (mpi,))
itest.log("ok: NCCL ops, channels, NVTX from two clients and MPI stored as captured")
wd.done(True)
