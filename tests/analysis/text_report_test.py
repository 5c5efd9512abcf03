#!/usr/bin/env python3
"""analysis_text: the text report's numbers that a reader compares, against a Python oracle
over the raw rows of a generated database (the generator and matching oracle of
html_report_test.py):
- clock offsets are shown relative to the reference rank (the lowest with a model), in
  readable units, not epoch-sized;
- the arrival skew percentiles are nearest-rank percentiles of the instances' skews (the
  value at rank ceil(p/100 * n)), not log2 bin edges;
- the straggler table's columns: last arrivals, the rank's collectives, last % (of its own
  collectives), wait caused and caused % (of all wait caused, summing to 100%);
- no header a reader cannot decode (`agent-count`, `c/comp`).

usage: text_report_test.py --meridian M --schema SCHEMA_FULL_SQL --workdir DIR
"""
import argparse
import math
import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import html_report_test as gen  # noqa: E402
import testlib  # noqa: E402


fail, check = testlib.reporter("analysis_text")


def fmt_ns(v):
    """The report's duration format (mrd_export_fmt_ns)."""
    a = abs(v)
    if a < 1e3:
        return "%d ns" % v
    if a < 1e6:
        return "%.1f us" % (v / 1e3)
    if a < 1e9:
        return "%.2f ms" % (v / 1e6)
    return "%.3f s" % (v / 1e9)


def section(out, title):
    return out.split("== " + title)[1].split("\n== ")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meridian", required=True)
    ap.add_argument("--schema", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    db = os.path.join(args.workdir, "text.db")
    # 9 ranks: rank offsets -1000 * (rank % 7) ns; 37 steps x 3 collectives = 111 instances
    late = {(r, s): ((r * 31 + s * 17) % 11) * 37_000 for r in range(9) for s in range(37)
            if (r + s) % 4 == 0}
    gen.build(db, args.schema, 9, 37, 2, late, seed=5)
    p = subprocess.run([args.meridian, "report", db], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    check(p.returncode == 0, "meridian report exited %d: %s" % (p.returncode, p.stderr))
    out = p.stdout
    check("agent-count" not in out and "c/comp" not in out, "old cryptic headers remain")

    con = sqlite3.connect(db)
    offs = dict(con.execute("SELECT rank, offset_ns FROM clock_models WHERE segment = 0"))
    ref = min(offs)
    clock = section(out, "Clock models")
    check("offsets relative to rank %d's" % ref in clock, "reference rank named:\n" + clock)
    rows = {int(l.split()[0]): l for l in clock.splitlines() if l.strip()[:1].isdigit()}
    for r, o in offs.items():
        rel = o - offs[ref]
        want = ("+" if rel > 0 else "") + fmt_ns(rel)
        got = rows[r][7:].split("  ")[0].strip()
        check(got == want, "rank %d offset vs ref: report %r, database %r" % (r, got, want))

    # skews: per instance, the latest start minus the earliest (global = local + offset)
    starts = {}
    for r, comm, seq, fn, ks in con.execute(
            "SELECT o.rank, o.comm_hash, o.seq, o.func_id, k.start_ns FROM nccl_ops o"
            " JOIN external_correlations x ON x.rank = o.rank AND x.external_id = o.launch_id"
            " JOIN kernels k ON k.rank = x.rank AND k.correlation_id = x.correlation_id"):
        starts.setdefault((comm, seq, fn), []).append(ks + offs[r])
    skews = sorted(max(v) - min(v) for v in starts.values())
    n = len(skews)
    pct = {p: skews[max(1, math.ceil(p / 100 * n)) - 1] for p in (50, 90, 99)}
    line = "arrival skew over %d timed instances: mean %s, p50 %s, p90 %s, p99 %s " \
           "(nearest-rank percentiles), max %s" % (n, fmt_ns(sum(skews) // n), fmt_ns(pct[50]),
                                                   fmt_ns(pct[90]), fmt_ns(pct[99]),
                                                   fmt_ns(skews[-1]))
    check(line in out, "skew line: expected\n  %s\nin\n%s" % (line, section(out, "Collectives")))

    want = gen.oracle(db)
    strag = section(out, "Stragglers")
    rows = [l.split() for l in strag.splitlines() if l.strip()[:1].isdigit()]
    check([int(r[1]) for r in rows] == want["ranking"], "ranking %r vs %r"
          % ([r[1] for r in rows], want["ranking"]))
    total = sum(want["caused"].values())
    for r in rows:
        rank, last, colls = int(r[1]), int(r[2]), int(r[3])
        check(colls == 37 * 3, "rank %d took part in every collective: %d" % (rank, colls))
        check(r[4] == "%.1f%%" % (100.0 * last / colls), "rank %d last %%: %s" % (rank, r[4]))
        caused = want["caused"].get(rank, 0)
        check(" ".join(r[5:7]) == fmt_ns(caused), "rank %d wait caused %s vs %s"
              % (rank, " ".join(r[5:7]), fmt_ns(caused)))
        check(r[7] == "%.1f%%" % (100.0 * caused / total), "rank %d caused %% %s" % (rank, r[7]))
    print("analysis_text: OK (%d instances, p50 %s p90 %s p99 %s)"
          % (n, fmt_ns(pct[50]), fmt_ns(pct[90]), fmt_ns(pct[99])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
