#!/usr/bin/env python3
"""test_check_capture.py: CI test of check_capture.py on synthetic schema-v1 databases.

Builds a small but complete two-rank capture from the whole schema (schema-full.sql) (kernels,
NCCL ops with the same (comm, seq) on both ranks, external correlations linking each op
to its NCCL kernel, NVTX step ranges, zero drop counters) and checks that the checker
passes it; then breaks one property at a time on a fresh copy and checks that exactly the
matching check fails. Usage: test_check_capture.py SCHEMA_SQL
"""
import contextlib
import io
import os
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_capture  # noqa: E402

WORLD, STEPS, COLLS_PER_STEP = 2, 5, 2
COMM = -0x3A5F00112233  # comm hashes are stored as signed 64-bit


def build(path, schema):
    db = sqlite3.connect(path)
    db.executescript(schema)
    db.execute("INSERT INTO schema_version VALUES (2)")  # MRD_STORE_SCHEMA_VERSION
    names = {"fma_kernel": 1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL": 2, "step ": 3,
             "AllReduce": 4}
    for v, i in names.items():
        db.execute("INSERT INTO strings (id, value) VALUES (?, ?)", (i, v))
    for rank in range(WORLD):
        corr, t = 1000, 1_000_000
        for step in range(STEPS):
            db.execute("INSERT INTO nvtx (rank, thread, start_ns, end_ns, kind, name_id, depth)"
                       " VALUES (?, 1, ?, ?, 1, ?, 0)", (rank, t, t + 900, 3))
            for c in range(COLLS_PER_STEP):
                seq = step * COLLS_PER_STEP + c
                corr += 1
                db.execute("INSERT INTO kernels (rank, device, stream, start_ns, end_ns,"
                           " correlation_id, name_id) VALUES (?, ?, 7, ?, ?, ?, 1)",
                           (rank, rank, t + 10, t + 100, corr))
                corr += 1
                launch = 500 + seq
                db.execute("INSERT INTO kernels (rank, device, stream, start_ns, end_ns,"
                           " correlation_id, name_id) VALUES (?, ?, 8, ?, ?, ?, 2)",
                           (rank, rank, t + 110, t + 300, corr))
                db.execute("INSERT INTO external_correlations VALUES (?, ?, ?, 2)",
                           (rank, corr, launch))
                db.execute("INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash,"
                           " comm_rank, comm_nranks, seq, func_id, count, bytes, launch_id,"
                           " is_p2p, device) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 4, 1024, 4096, ?,"
                           " 0, ?)", (rank, seq, t + 105, t + 108, COMM, rank, WORLD, seq,
                                      launch, rank))
            t += 1000
        for name in ("ring_full", "cupti_dropped"):
            db.execute("INSERT INTO agent_counters VALUES (?, 'dropped', ?, 0)", (rank, name))
        db.execute("INSERT INTO agent_counters VALUES (?, 'captured', 'kernel', ?)",
                   (rank, STEPS * COLLS_PER_STEP * 2))
    db.commit()
    db.close()


def run_check(path, expect):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = check_capture.main(["--db", path, "--world", str(WORLD), "--expect-colls", expect,
                                 "--nvtx-prefix", "step ", "--min-nvtx", str(STEPS)])
    failed = {line.split()[1] for line in buf.getvalue().splitlines() if " FAIL " in line}
    return rc, failed, buf.getvalue()


# (checks that must fail, change). A rank without kernels has no linked collectives either.
BREAKS = [
    ({"ranks", "linked"}, "DELETE FROM kernels WHERE rank = 1"),
    ({"linked"}, "DELETE FROM external_correlations WHERE rank = 1 AND external_id = 504"),
    ({"linked"}, "UPDATE kernels SET name_id = 1 WHERE rank = 0 AND correlation_id = 1002"),
    ({"nvtx"}, "DELETE FROM nvtx WHERE rank = 1 AND start_ns > 1002000"),
    ({"drops"}, "UPDATE agent_counters SET value = 3 WHERE rank = 0 AND name = 'ring_full'"),
    ({"drops"}, "UPDATE kernels SET start_ns = 0, end_ns = 0 WHERE rank = 0 AND name_id = 1 "
                "AND correlation_id = 1001"),
]


def main():
    schema = open(sys.argv[1]).read()
    tmp = tempfile.mkdtemp(prefix="check_capture_")
    failures = 0
    try:
        good = os.path.join(tmp, "good.db")
        build(good, schema)
        expect = ",".join(f"{r}:{STEPS * COLLS_PER_STEP}" for r in range(WORLD))
        rc, failed, out = run_check(good, expect)
        if rc != 0 or failed:
            print(f"FAIL: a complete capture was rejected (rc={rc}):\n{out}")
            failures += 1
        rc, failed, out = run_check(good, f"0:{STEPS * COLLS_PER_STEP + 1},1:10")
        if rc != 1 or failed != {"colls"}:
            print(f"FAIL: a wrong expected count was not caught (rc={rc}, {failed}):\n{out}")
            failures += 1
        # A collective stored on one rank only: both colls and matched must fail.
        path = os.path.join(tmp, "one_rank.db")
        shutil.copy(good, path)
        db = sqlite3.connect(path)
        db.execute("DELETE FROM nccl_ops WHERE rank = 1 AND seq = 7")
        db.commit()
        db.close()
        rc, failed, out = run_check(path, expect)
        if rc != 1 or failed != {"colls", "matched"}:
            print(f"FAIL: one-rank collective not caught as colls+matched ({failed}):\n{out}")
            failures += 1
        for i, (want, sql) in enumerate(BREAKS):
            path = os.path.join(tmp, f"broken{i}.db")
            shutil.copy(good, path)
            db = sqlite3.connect(path)
            changed = db.execute(sql).rowcount
            db.commit()
            db.close()
            rc, failed, out = run_check(path, expect)
            if changed == 0 or rc != 1 or failed != want:
                print(f"FAIL: {sql!r} changed {changed} rows; want only {sorted(want)} to fail, "
                      f"got rc={rc} {sorted(failed)}:\n{out}")
                failures += 1
        rc, _, out = run_check(os.path.join(tmp, "missing.db"), expect)
        if rc != 2:
            print(f"FAIL: a missing database gave rc={rc}, want 2:\n{out}")
            failures += 1
    finally:
        shutil.rmtree(tmp)
    total = 4 + len(BREAKS)
    print(f"test_check_capture: {total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
