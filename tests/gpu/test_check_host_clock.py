#!/usr/bin/env python3
"""test_check_host_clock.py: CI test of check_host_clock.py on a synthetic steady-tier run.

Builds a two-rank database from the store's full schema as the agent and the finalize step
would leave it after a steady-tier run with one window: each GPU's raw timer is a known
line (offset, drift) of the rank's clock; 60 all-reduces, each with 4 channels; kernels
queued 0.3-2 ms after their launch; the agent's host-time samples (the launch .. the first
start callback at the first channel's GPU start, the launch .. the first stop callback at
a channel's GPU end); CUPTI kernel records only for the window's 15 ops; devices from the
driver (`gpus`), NVML readings, and the CUPTI-calibrated model (the truth, bound 2 us).
The checker must pass it, with --meridian too (the real `meridian finalize` refits the copy
without kernels from the samples alone); then each broken copy must fail exactly its check.
Usage: test_check_host_clock.py SCHEMA_SQL [MERIDIAN]
"""
import contextlib
import io
import os
import random
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_host_clock  # noqa: E402

TRUTH = {0: (1796000000000000000, 1.6), 1: (1796000000250000000, -1.1)}  # gpu at local 0, ppm
L0 = 5_000_000_000_000


def to_gpu(rank, local):
    g0, ppm = TRUTH[rank]
    return g0 + round(local * (1 + ppm * 1e-6))


def model(rank):
    """local = gpu + (slope - 1) * gpu + intercept, the truth in the stored form."""
    g0, ppm = TRUTH[rank]
    slope = 1 / (1 + ppm * 1e-6)
    g = to_gpu(rank, L0)
    return slope, L0 - g - round((slope - 1.0) * g)


def build(path, schema):
    rnd = random.Random(5)
    db = sqlite3.connect(path)
    db.executescript(schema)
    db.execute("INSERT INTO schema_version VALUES (2)")
    for rank in (0, 1):
        db.execute("INSERT INTO gpus VALUES (?, ?, ?, ?, ?)",
                   (rank, rank, "GPU-%d" % rank, "0000:%02X:00.0" % (0x18 + rank), "NVIDIA H200"))
        db.execute("INSERT INTO gpu_samples (rank, device, host_ns) VALUES (?, ?, ?)",
                   (rank, rank, L0))
        slope, icpt = model(rank)
        db.execute("INSERT INTO gpu_timer_models VALUES (?, ?, ?, ?, 2000, 100,"
                   " 'kernel+host-bracket-v1')", (rank, rank, slope, icpt))
        for k in range(60):
            launch = L0 + k * 10_000_000
            t = launch + rnd.randint(300_000, 2_000_000)  # the kernel waited in its stream
            dur = rnd.randint(50_000, 400_000)
            db.execute("INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, seq,"
                       " func_id, launch_id, is_p2p, device) VALUES (?, ?, ?, ?, 7, ?, 4, ?, 0,"
                       " ?)", (rank, k + 1, launch + 6000, launch + 9000, k, 500 + k, rank))
            first_start_cb, first_stop = None, None
            for ch in range(4):
                s, e = t + 300 * ch, t + dur - 200 * ch
                cb_s = s + rnd.randint(1_000, 40_000)
                cb_e = e + rnd.randint(1_000, 40_000)
                db.execute("INSERT INTO nccl_channels VALUES (?, ?, ?, ?, ?, ?)",
                           (rank, k + 1, ch, to_gpu(rank, s), to_gpu(rank, e), cb_s))
                if first_start_cb is None or cb_s < first_start_cb[1]:
                    first_start_cb = (s, cb_s)
                if first_stop is None or cb_e < first_stop[1]:
                    first_stop = (e, cb_e)
            for when, cb in (first_start_cb, first_stop):  # the agent's two samples
                u = (cb - launch + 1) // 2
                db.execute("INSERT INTO gpu_clock_samples VALUES (?, ?, ?, ?, ?)",
                           (rank, rank, launch + (cb - launch) // 2, to_gpu(rank, when), u))
            if 20 <= k < 35:  # the window: CUPTI saw these kernels
                db.execute("INSERT INTO external_correlations VALUES (?, ?, ?, 2)",
                           (rank, 9000 + k, 500 + k))
                db.execute("INSERT INTO kernels (rank, device, start_ns, end_ns, correlation_id)"
                           " VALUES (?, ?, ?, ?, ?)", (rank, rank, t - 1000, t + dur + 1000,
                                                       9000 + k))
    db.commit()
    db.close()


def run(path, extra=()):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = check_host_clock.main(["--db", path] + list(extra))
    return rc, out.getvalue()


def failed(text):
    return sorted(line.split(" FAIL ", 1)[1].split(":")[0] for line in text.splitlines()
                  if " FAIL " in line)


BREAKS = [
    ("devices", "DELETE FROM gpus WHERE rank = 1"),
    ("host-time samples", "DELETE FROM gpu_clock_samples WHERE rank = 0 AND rowid > 40"),
    ("samples hold the CUPTI-calibrated time",
     "UPDATE gpu_clock_samples SET host_ns = host_ns + 3000000 WHERE rowid = 7"),
    ("models", "UPDATE gpu_timer_models SET method = 'kernel-bracket-v1' WHERE rank = 0"),
]


def main():
    schema = open(sys.argv[1]).read()
    meridian = sys.argv[2] if len(sys.argv) > 2 else None
    tmp = tempfile.mkdtemp(prefix="test_check_host_clock.")
    ok = True
    try:
        base = os.path.join(tmp, "run.db")
        build(base, schema)
        extra = ["--meridian", meridian] if meridian else []
        rc, text = run(base, extra)
        print(text, end="")
        if rc != 0 or failed(text) or (meridian and "host-only fit within" not in text):
            print("test_check_host_clock: FAIL: the intact run did not pass")
            ok = False
        for want, sql in BREAKS:
            path = os.path.join(tmp, "broken.db")
            shutil.copy(base, path)
            db = sqlite3.connect(path)
            db.execute(sql)
            db.commit()
            db.close()
            rc, text = run(path)
            if rc == 0 or failed(text) != [want]:
                print(f"test_check_host_clock: FAIL: after `{sql}` the failed checks were "
                      f"{failed(text)}, want [{want!r}]")
                ok = False
            os.remove(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_check_host_clock: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
