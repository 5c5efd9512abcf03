#!/usr/bin/env python3
"""`meridian diff` against numbers computed from the databases directly.

BEFORE is the recorded 2 x H200 run (tests/data/h200-quickstart.db.gz). AFTER is a copy
changed with SQL in ways whose effect an independent computation can state:
  - every spin kernel (`_Z11spin_kernely`) takes half its time: the kernel that moved most
    (named demangled, `spin_kernel(unsigned long long)`, as c++filt demangles it);
  - the whole run 5% slower (every NVTX range and kernel stretched about its start).
The oracle below recomputes, from the raw rows with Python over sqlite3 (local clocks,
as `--local-clocks` asks), the step spans (the step-name rule and the nesting rule of the
analysis, written again here), their median and mean, the kernels' time per name and the
communication time (union of NCCL kernel intervals per rank and device), and checks the
JSON deltas against them. Then the gate (--fail-if-slower), and the refusals: runs of
different world sizes (exit 2, nothing written), a newer schema (exit 1), a file that is
not a database, different commands and an interrupted run (warnings).
"""
import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import testlib

FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL: " + msg, file=sys.stderr)


def step_name(name):
    """The default step rule (proto/steps.c), written again: 'step', 'train step',
    'training_step', ... followed by end, space, digit or one of #:=-[( ; ProfilerStep*."""
    if name.startswith("ProfilerStep"):
        return True
    low = name.lower()
    m = re.match(r"train(ing)?[_ ]?", low)
    if m:
        low = low[m.end():]
    if not low.startswith("step"):
        return False
    rest = low[4:]
    return rest == "" or rest[0] in " #:=-[(" or rest[0].isdigit()


def oracle_steps(db):
    con = sqlite3.connect(db)
    rows = con.execute("SELECT n.rank, n.start_ns, n.end_ns, s.value FROM nvtx n JOIN strings s"
                       " ON s.id = n.name_id WHERE n.kind IN (1, 2)"
                       " ORDER BY n.rank, n.start_ns").fetchall()
    con.close()
    per_rank = {}
    for rank, s, e, name in rows:
        if not step_name(name):
            continue
        l = per_rank.setdefault(rank, [])
        if l and s < l[-1][1]:
            continue  # nested in the previous step
        l.append((s, e))
    n = max((len(v) for v in per_rank.values()), default=0)
    spans = []
    for i in range(n):
        starts = [v[i][0] for v in per_rank.values() if i < len(v)]
        ends = [v[i][1] for v in per_rank.values() if i < len(v)]
        if max(ends) > min(starts):
            spans.append(max(ends) - min(starts))
    return spans


def lower_median(v):
    v = sorted(v)
    return v[(len(v) - 1) // 2]


def oracle_kernels(db):
    """{demangled name: (GPU ns, count)}, names that demangle alike summed."""
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT s.value, SUM(k.end_ns - k.start_ns), COUNT(*) FROM kernels k JOIN strings s"
        " ON s.id = k.name_id WHERE NOT (k.start_ns = 0 AND k.end_ns = 0)"
        " AND k.end_ns >= k.start_ns GROUP BY s.value").fetchall()
    con.close()
    plain = testlib.demangle([r[0] for r in rows])
    out = {}
    for name, ns, n in rows:
        o = out.get(plain[name], (0, 0))
        out[plain[name]] = (o[0] + ns, o[1] + n)
    return out


def oracle_comm(db):
    """Union of NCCL kernel intervals per (rank, device), summed."""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT k.rank, k.device, k.start_ns, k.end_ns FROM kernels k JOIN strings s"
                       " ON s.id = k.name_id WHERE s.value LIKE '%nccl%'"
                       " ORDER BY k.rank, k.device, k.start_ns").fetchall()
    con.close()
    total, key, cur_s, cur_e = 0, None, None, None
    for rank, dev, s, e in rows:
        if key != (rank, dev) or s > cur_e:
            if cur_s is not None:
                total += cur_e - cur_s
            key, cur_s, cur_e = (rank, dev), s, e
        else:
            cur_e = max(cur_e, e)
    if cur_s is not None:
        total += cur_e - cur_s
    return total


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(meridian, *args):
    return subprocess.run([meridian, "diff"] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meridian", required=True)
    ap.add_argument("--fixture", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="mrd-diff-")
    before = os.path.join(work, "before.db")
    after = os.path.join(work, "after.db")
    with gzip.open(a.fixture, "rb") as src, open(before, "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(before, after)
    con = sqlite3.connect(after)
    con.execute("UPDATE kernels SET end_ns = start_ns + (end_ns - start_ns) / 2 WHERE name_id ="
                " (SELECT id FROM strings WHERE value = '_Z11spin_kernely')")
    # the whole run 5% slower: every NVTX range and kernel of both ranks stretched about
    # the run's first NVTX time (the step ranges stay back to back and keep their order)
    t0 = con.execute("SELECT MIN(start_ns) FROM nvtx").fetchone()[0]
    changed = 0
    for table in ("nvtx", "kernels"):
        changed += con.execute("UPDATE %s SET start_ns = ?1 + (start_ns - ?1) * 105 / 100,"
                               " end_ns = ?1 + (end_ns - ?1) * 105 / 100"
                               " WHERE start_ns > 0" % table, (t0,)).rowcount
    con.commit()
    con.close()
    check(changed > 0, "nothing stretched")
    hashes = {p: sha(p) for p in (before, after)}

    # 1. the deltas against the oracle
    p = run(a.meridian, before, after, "--json", "--local-clocks")
    check(p.returncode == 0, "diff exit %d: %s" % (p.returncode, p.stderr))
    d = json.loads(p.stdout)
    for side, db in (("before", before), ("after", after)):
        spans = oracle_steps(db)
        check(d["steps_compared"][side] == len(spans), "%s: %d steps compared, oracle %d"
              % (side, d["steps_compared"][side], len(spans)))
        check(d["step_median_ns"][side] == lower_median(spans), "%s: median step %d, oracle %d"
              % (side, d["step_median_ns"][side], lower_median(spans)))
        check(d["step_mean_ns"][side] == sum(spans) // len(spans), "%s: mean step %d, oracle %d"
              % (side, d["step_mean_ns"][side], sum(spans) // len(spans)))
        check(d["comm_ns"][side] == oracle_comm(db), "%s: communication %d, oracle %d"
              % (side, d["comm_ns"][side], oracle_comm(db)))
    sb, sa = oracle_steps(before), oracle_steps(after)
    check(d["step_mean_ns"]["after"] > d["step_mean_ns"]["before"],
          "lengthened steps did not raise the mean step time")
    check(d["step_median_ns"]["change"] == lower_median(sa) - lower_median(sb),
          "median change %d, oracle %d" % (d["step_median_ns"]["change"],
                                           lower_median(sa) - lower_median(sb)))
    kb, ka = oracle_kernels(before), oracle_kernels(after)
    moved = sorted(set(kb) | set(ka), key=lambda n: (-abs(ka.get(n, (0, 0))[0]
                                                        - kb.get(n, (0, 0))[0]), n))
    check(d["kernels_moved"][0]["name"] == moved[0],
          "kernel that moved most: diff %r, oracle %r" % (d["kernels_moved"][0]["name"], moved[0]))
    spin = testlib.demangle(["_Z11spin_kernely"])["_Z11spin_kernely"]
    check(spin == "spin_kernel(unsigned long long)", "c++filt demangles the spin kernel: %r"
          % spin)
    top = [k for k in d["kernels_moved"] if k["name"] == spin]
    check(len(top) == 1, "the halved spin kernel is not among the kernels that moved")
    top = top[0] if top else {"before_ns": 0, "after_ns": 0, "before_count": 0, "after_count": 0}
    check((top["before_ns"], top["after_ns"]) == (kb[spin][0], ka[spin][0]),
          "spin kernel totals %r, oracle %r" % ((top["before_ns"], top["after_ns"]),
                                                (kb[spin][0], ka[spin][0])))
    check(ka[spin][0] < kb[spin][0] * 0.6, "the spin kernel was not halved")
    check(top["before_count"] == top["after_count"] == kb[spin][1], "spin kernel counts")
    names = [k["name"] for k in d["kernels_moved"]]
    check(names == moved[:len(names)], "kernel order %r, oracle %r" % (names, moved[:len(names)]))
    check(d["stragglers"]["before"] and d["stragglers"]["before"][0]["rank"] == 1,
          "rank 1 (slowed by the workload) is not the top straggler before: %r"
          % d["stragglers"]["before"])

    # text output: the same figures, in ms
    p = run(a.meridian, before, after, "--local-clocks")
    check(p.returncode == 0 and spin in p.stdout and "_Z11spin_kernely" not in p.stdout
          and "median step time" in p.stdout,
          "text diff: %r" % p.stdout[:400])

    # 2. the gate
    pct = 100.0 * (lower_median(sa) - lower_median(sb)) / lower_median(sb)
    check(pct > 1, "the change should slow the median step (%.2f%%)" % pct)
    p = run(a.meridian, before, after, "--local-clocks", "--fail-if-slower", "%.3f" % (pct / 2))
    check(p.returncode == 3 and "slower" in p.stderr,
          "gate at %.2f%% with a %.2f%% slowdown: exit %d %r" % (pct / 2, pct, p.returncode, p.stderr))
    p = run(a.meridian, before, after, "--local-clocks", "--fail-if-slower", "%.3f" % (pct * 2))
    check(p.returncode == 0, "gate at %.2f%% tripped by %.2f%%: %r" % (pct * 2, pct, p.stderr))
    p = run(a.meridian, before, after, "--fail-if-slower", "fast")
    check(p.returncode == 2 and "percentage" in p.stderr, "bad gate: %r" % p.stderr)

    # 3. refusals and warnings; inputs never written
    other = os.path.join(work, "world4.db")
    shutil.copy(after, other)
    con = sqlite3.connect(other)
    con.execute("UPDATE runs SET world_size = 4")
    con.commit()
    con.close()
    h = sha(other)
    p = run(a.meridian, before, other)
    check(p.returncode == 2 and "different world sizes" in p.stderr and p.stdout == "",
          "world sizes: exit %d %r" % (p.returncode, p.stderr))
    check(sha(other) == h, "world4.db was written")

    cmd = os.path.join(work, "cmd.db")
    shutil.copy(after, cmd)
    con = sqlite3.connect(cmd)
    con.execute("UPDATE runs SET command = 'mpirun -np 2 ./other'")
    con.execute("UPDATE ranks SET goodbye = 0 WHERE rank = 1")
    con.commit()
    con.close()
    p = run(a.meridian, before, cmd)
    check(p.returncode == 0 and "different commands" in p.stderr and "sent no goodbye" in p.stderr,
          "warnings: exit %d %r" % (p.returncode, p.stderr))

    newer = os.path.join(work, "newer.db")
    shutil.copy(after, newer)
    con = sqlite3.connect(newer)
    con.execute("UPDATE schema_version SET version = 99")
    con.commit()
    con.close()
    p = run(a.meridian, before, newer)
    check(p.returncode == 1 and "newer than this meridian supports" in p.stderr,
          "newer schema: exit %d %r" % (p.returncode, p.stderr))

    junk = os.path.join(work, "junk.db")
    with open(junk, "w") as f:
        f.write("not a database\n" * 100)
    p = run(a.meridian, junk, after)
    check(p.returncode == 1 and "junk.db" in p.stderr, "junk: exit %d %r" % (p.returncode, p.stderr))
    p = run(a.meridian, before)
    check(p.returncode == 2 and "two databases" in p.stderr, "one argument: %r" % p.stderr)

    check(all(sha(x) == hashes[x] for x in hashes), "an input database was written")
    for x in (before, after):
        check(not os.path.exists(x + "-wal") and not os.path.exists(x + "-journal"),
              "a journal was left beside %s" % x)
    if FAILS:
        print("work directory kept: " + work, file=sys.stderr)
        sys.exit(1)
    shutil.rmtree(work)
    print("diff: median step %+.2f%%, spin kernel %d -> %d ns; gate, refusals and warnings ok"
          % (pct, kb[spin][0], ka[spin][0]))


if __name__ == "__main__":
    main()
