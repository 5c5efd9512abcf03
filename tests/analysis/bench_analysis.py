#!/usr/bin/env python3
"""Analysis at scale: builds a synthetic database (ranks x steps x kernels, NCCL ops
linked to their kernels, NVTX steps, clock models), then times `meridian report --json`,
`meridian report --html` and `meridian export --perfetto` on it and records each one's
peak resident memory, to show that the analysis streams (memory does not grow with the
database). Not a CTest: a benchmark script. Results go in tests/analysis/RESULTS.md.

usage: bench_analysis.py MERIDIAN WORKDIR [--ranks R] [--steps S] [--kernels-per-step K]
"""
import argparse
import os
import random
import resource
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# the whole schema a new database gets (the event tables come from proto/kinds.h): the
# build writes it; MRD_SCHEMA_SQL names another build's copy
SCHEMA = os.environ.get("MRD_SCHEMA_SQL", os.path.join(HERE, "..", "..", "build", "aggregator",
                                                       "store", "schema-full.sql"))


def build(path, ranks, steps, kps):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    con = sqlite3.connect(path)
    con.executescript(open(SCHEMA).read())
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("INSERT INTO runs (run_id, world_size, anchor_realtime_ns, anchor_monotonic_ns,"
                " created_ns) VALUES ('bench', ?, 0, 0, 0)", (ranks,))
    names = ["sgemm_%d" % i for i in range(30)] + ["ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                                   "AllReduce", "step"]
    con.executemany("INSERT INTO strings (id, value) VALUES (?, ?)",
                    list(enumerate(names, start=1)))
    nccl_name, func, step_name = 31, 32, 33
    rng = random.Random(1)
    step_ns = 10_000_000
    colls = 4
    for r in range(ranks):
        con.execute("INSERT INTO ranks (rank, host, pid, goodbye) VALUES (?, 'bench', ?, 1)",
                    (r, 1000 + r))
        con.execute("INSERT INTO clock_models VALUES (?, 0, 0, ?, ?, 0.5, 2000, 100, 'bench')",
                    (r, steps * step_ns * 2, -1000 * r))
        kern, ext, ops, nvtx = [], [], [], []
        corr = 0
        for s in range(steps):
            t0 = s * step_ns + 1000 * r
            nvtx.append((r, 1, t0, t0 + step_ns - 1000, 1, 0, step_name, 0, 0))
            t = t0
            for k in range(kps):  # compute on stream 1, back to back
                d = 30_000 + rng.randrange(20_000)
                corr += 1
                kern.append((r, 0, 1, 0, t, t + d, corr, 1 + k % 30))
                t += d
                if t > t0 + step_ns - 2_000_000:
                    t = t0
            for c in range(colls):  # all-reduce on stream 2, skewed on rank 0
                seq = s * colls + c
                ks = t0 + c * 2_000_000 + (300_000 if r == 0 and s % 3 == 0 else 0) \
                    + rng.randrange(10_000)
                corr += 1
                op = seq
                kern.append((r, 0, 2, 0, ks, ks + 500_000, corr, nccl_name))
                ext.append((r, corr, 10_000_000 + op, 6))
                ops.append((r, op, ks - 5_000, ks - 1_000, 77, r, ranks, seq, func,
                            10_000_000 + op, 0, 0))
        con.executemany("INSERT INTO kernels (rank, device, stream, context, start_ns, end_ns,"
                        " correlation_id, name_id) VALUES (?,?,?,?,?,?,?,?)", kern)
        con.executemany("INSERT INTO external_correlations VALUES (?,?,?,?)", ext)
        con.executemany("INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash,"
                        " comm_rank, comm_nranks, seq, func_id, launch_id, is_p2p, device)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", ops)
        con.executemany("INSERT INTO nvtx (rank, thread, start_ns, end_ns, kind, domain_id,"
                        " name_id, depth, color) VALUES (?,?,?,?,?,?,?,?,?)", nvtx)
        con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def measure(args):
    code = ("import resource,subprocess,sys,time;t=time.monotonic();"
            "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);"
            "print(time.monotonic()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
            " r.returncode)")
    out = subprocess.run([sys.executable, "-c", code] + args, stdout=subprocess.PIPE,
                         text=True, check=True).stdout.split()
    if out[2] != "0":
        sys.exit("%s failed" % " ".join(args))
    return float(out[0]), int(out[1]) / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("meridian")
    ap.add_argument("workdir")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--kernels-per-step", type=int, default=200)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    db = os.path.join(a.workdir, "bench.db")
    t = time.monotonic()
    build(db, a.ranks, a.steps, a.kernels_per_step)
    con = sqlite3.connect(db)
    nk = con.execute("SELECT COUNT(*) FROM kernels").fetchone()[0]
    no = con.execute("SELECT COUNT(*) FROM nccl_ops").fetchone()[0]
    con.close()
    size = os.path.getsize(db) / 2**20
    print("database: %d ranks, %d kernels, %d NCCL ops, %.0f MiB (built in %.1f s)"
          % (a.ranks, nk, no, size, time.monotonic() - t))
    runs = [
        ("report --json", [a.meridian, "report", db, "--json"]),
        ("report --html", [a.meridian, "report", db, "--html", os.path.join(a.workdir, "r.html")]),
        ("export --perfetto", [a.meridian, "export", db, "--perfetto",
                               os.path.join(a.workdir, "t.json")]),
    ]
    for name, args in runs:
        dt, rss = measure(args)
        print("%-18s %6.2f s  %8.0f kernels/s  peak RSS %6.1f MiB" % (name, dt, nk / dt, rss))
    print("kernels=%d db_mib=%.0f" % (nk, size))


if __name__ == "__main__":
    main()
