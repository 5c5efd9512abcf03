#!/usr/bin/env python3
"""check_capture.py: does a meridian database hold what a GPU job really did?

Where it sits: run by tests/gpu/run_on_gpu_host.sh (stage capture) on each database that
`meridian profile` wrote for the reference workload and the DDP script; CI runs it on
synthetic databases (test_check_capture.py). It reads the database only (schema v1,
aggregator/store/schema.sql) and checks, per issue 3:

  ranks     kernels from every rank 0..world-1
  colls     per rank, as many NCCL collectives as the workload itself printed
            (--expect-colls "0:220,1:220"; without it: at least one per rank)
  matched   every collective (communicator, sequence number, function) present on every
            rank of its communicator
  linked    every collective tied to a kernel through CUPTI's external correlation
            (nccl_ops.launch_id -> external_correlations -> kernels.correlation_id), and
            that kernel is an NCCL kernel; never by overlapping times
  nvtx      NVTX ranges named --nvtx-prefix on every rank (at least --min-nvtx each)
  drops     zero dropped records (agent_counters category 'dropped') and no kernel whose
            timing was lost (start_ns = end_ns = 0)

Output: one line per check, `check_capture: NAME ok|FAIL detail`, then
`check_capture: N passed, M failed`. Exit 0 when all pass, 1 otherwise, 2 on bad input.
Memory: every query aggregates inside SQLite; nothing is loaded whole.
"""
import argparse
import sqlite3
import sys


def parse_expect(text):
    out = {}
    if not text:
        return out
    for part in text.split(","):
        r, n = part.split(":")
        out[int(r)] = int(n)
    return out


def check_ranks(db, world):
    have = {r for (r,) in db.execute("SELECT DISTINCT rank FROM kernels")}
    missing = sorted(set(range(world)) - have)
    per = dict(db.execute("SELECT rank, COUNT(*) FROM kernels GROUP BY rank"))
    return not missing, f"kernels per rank {per}" + (f", missing ranks {missing}" if missing else "")


def check_colls(db, world, expect):
    per = dict(db.execute("SELECT rank, COUNT(*) FROM nccl_ops WHERE is_p2p = 0 GROUP BY rank"))
    bad = []
    for r in range(world):
        got = per.get(r, 0)
        if (r in expect and got != expect[r]) or (r not in expect and got == 0):
            bad.append(f"rank {r}: {got} stored, {expect.get(r, '>0')} expected")
    return not bad, f"collectives per rank {per}" + (f"; {'; '.join(bad)}" if bad else "")


def check_matched(db, world):
    row = db.execute(
        """SELECT COUNT(*), SUM(CASE WHEN n_ranks < want THEN 1 ELSE 0 END),
                  SUM(CASE WHEN seq IS NULL THEN 1 ELSE 0 END)
           FROM (SELECT comm_hash, seq, func_id, COUNT(DISTINCT rank) AS n_ranks,
                        COALESCE(MAX(comm_nranks), ?) AS want
                 FROM nccl_ops WHERE is_p2p = 0 GROUP BY comm_hash, seq, func_id)""",
        (world,),
    ).fetchone()
    total, partial, noseq = row[0], row[1] or 0, row[2] or 0
    ok = total > 0 and partial == 0 and noseq == 0
    return ok, f"{total} (comm, seq, func) instances, {partial} not on every rank, {noseq} without seq"


def check_linked(db):
    total, unlinked, not_nccl = db.execute(
        """SELECT COUNT(*), SUM(CASE WHEN k_name IS NULL THEN 1 ELSE 0 END),
                  SUM(CASE WHEN k_name IS NOT NULL AND lower(k_name) NOT LIKE '%nccl%'
                           THEN 1 ELSE 0 END)
           FROM (SELECT o.rank, o.op_id,
                        (SELECT COALESCE(s.value, '?')
                         FROM external_correlations ec
                         JOIN kernels k ON k.rank = ec.rank AND k.correlation_id = ec.correlation_id
                         LEFT JOIN strings s ON s.id = k.name_id
                         WHERE ec.rank = o.rank AND ec.external_id = o.launch_id
                         LIMIT 1) AS k_name
                 FROM nccl_ops o WHERE o.is_p2p = 0)"""
    ).fetchone()
    unlinked, not_nccl = unlinked or 0, not_nccl or 0
    ok = total > 0 and unlinked == 0 and not_nccl == 0
    return ok, f"{total} collectives, {unlinked} without a correlated kernel, {not_nccl} tied to a non-NCCL kernel"


def check_nvtx(db, world, prefix, minimum):
    per = dict(
        db.execute(
            """SELECT n.rank, COUNT(*) FROM nvtx n JOIN strings s ON s.id = n.name_id
               WHERE substr(s.value, 1, length(?)) = ? GROUP BY n.rank""",
            (prefix, prefix),
        )
    )
    bad = [r for r in range(world) if per.get(r, 0) < minimum]
    return not bad, f"ranges named '{prefix}*' per rank {per}" + (f", too few on {bad}" if bad else "")


def check_drops(db):
    drops = list(
        db.execute(
            "SELECT rank, name, value FROM agent_counters WHERE category = 'dropped' AND value != 0"
        )
    )
    lost = db.execute("SELECT COUNT(*) FROM kernels WHERE start_ns = 0 AND end_ns = 0").fetchone()[0]
    reported = db.execute("SELECT COUNT(*) FROM agent_counters").fetchone()[0]
    ok = not drops and lost == 0 and reported > 0
    detail = f"dropped counters {drops or 'all zero'}, {lost} kernels without timing"
    if reported == 0:
        detail += ", but no agent counters stored at all"
    return ok, detail


def main(argv):
    ap = argparse.ArgumentParser(description="check a meridian GPU capture")
    ap.add_argument("--db", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--expect-colls", default="", help="per-rank counts, e.g. 0:220,1:220")
    ap.add_argument("--nvtx-prefix", default="step ")
    ap.add_argument("--min-nvtx", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        expect = parse_expect(a.expect_colls)
        db = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
        db.execute("SELECT COUNT(*) FROM schema_version").fetchone()
    except (ValueError, sqlite3.Error) as e:
        print(f"check_capture: cannot check {a.db}: {e}")
        return 2
    checks = [
        ("ranks", lambda: check_ranks(db, a.world)),
        ("colls", lambda: check_colls(db, a.world, expect)),
        ("matched", lambda: check_matched(db, a.world)),
        ("linked", lambda: check_linked(db)),
        ("nvtx", lambda: check_nvtx(db, a.world, a.nvtx_prefix, a.min_nvtx)),
        ("drops", lambda: check_drops(db)),
    ]
    passed = failed = 0
    for name, fn in checks:
        try:
            ok, detail = fn()
        except sqlite3.Error as e:
            ok, detail = False, f"query failed: {e}"
        print(f"check_capture: {name} {'ok' if ok else 'FAIL'} {detail}")
        passed += ok
        failed += not ok
    print(f"check_capture: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
