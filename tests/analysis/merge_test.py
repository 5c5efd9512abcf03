"""analysis_merge: `meridian merge` of shard databases (one meridiand per group of ranks).

  1. shards: two real meridiand (--shard-id 0 and 1, one run id, one secret) each receive one
     rank of the GPU capture (tests/data/ref-rank%r.mrdcap, `meridian replay --from-env`),
     and a third meridiand receives both ranks (the single-aggregator reference). The merged
     and finalized database must report 2 ranks, 110 complete collectives on both ranks and
     the same collectives counts and per-rank event counts as the reference, clock models
     for both ranks; every table holds the shards' rows summed; global-timebase columns of
     shard 1 are shifted by exactly (ar_0 - am_0) - (ar_1 - am_1); the result does not
     depend on the order the shards are given in.
  2. refusals: another run id, a rank in two shards, another schema version, another
     aggregator boot, an existing output without --overwrite (and the output being a
     shard) each exit 1 with their message and leave no output (nor temporary file).
  3. string remap: a copy of shard 1 whose string ids are all moved (+1000, in strings and in
     every *_id column that is not a known plain id, found with PRAGMA table_info, so a new
     string column is covered without editing this test) merges into the same names per
     rank for every string column as each shard had.
usage: merge_test.py --meridiand D --meridian M --captures-dir DIR [--workdir W]
"""
import argparse
import glob
import json
import os
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import itest  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--meridiand", required=True)
ap.add_argument("--meridian", required=True)
ap.add_argument("--captures-dir", required=True)
ap.add_argument("--workdir", default=None)
ap.add_argument("--keep", action="store_true")
args = ap.parse_args()
M = args.meridian
pattern = os.path.join(args.captures_dir, "ref-rank%r.mrdcap")
RUN = "merge-test-run"
# INTEGER *_id columns that do not reference strings(id); every other one is a string id
PLAIN_IDS = {"run_id", "shard_id", "boot_id", "correlation_id", "graph_id", "external_id",
             "op_id", "launch_id", "local_id"}


def daemon(name, shard):
    wd = itest.Workdir(args, "merge_" + name)
    extra = ["--shard-id", str(shard)] if shard is not None else []
    d = itest.Daemon(args.meridiand, wd, run_id=RUN, extra=extra)
    d.start()
    return wd, d


def replay(d, rank):
    env = dict((k, v) for k, v in os.environ.items()
               if not k.startswith("MERIDIAN_") and not k.startswith("OMPI_")
               and k not in ("RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "WORLD_SIZE"))
    env.update({"MERIDIAN_AGGREGATOR": d.addr(), "MERIDIAN_RUN_ID": RUN,
                "MERIDIAN_SECRET_FILE": d.secret_file, "OMPI_COMM_WORLD_RANK": str(rank),
                "OMPI_COMM_WORLD_SIZE": "2"})
    try:
        p = subprocess.run([M, "replay", "--from-env", pattern, "--quiet"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        itest.fail("replay of rank %d did not finish within 60 s" % rank)
    if p.returncode != 0:
        print(p.stdout)
        itest.fail("replay of rank %d into %s: rc %d" % (rank, d.db, p.returncode))


def run(cmd, timeout=90):
    itest.log("run: " + " ".join(cmd))
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        itest.fail("%s did not finish within %d s" % (" ".join(cmd), timeout))


def report(db):
    p = run([M, "report", db, "--json"])
    if p.returncode != 0:
        print(p.stderr)
        itest.fail("report of %s: rc %d" % (db, p.returncode))
    return json.loads(p.stdout)


def tables(con):
    return [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]


def columns(con, t):
    return [(r[1], r[2]) for r in con.execute("PRAGMA table_info(%s)" % t)]


def string_cols(con):
    return [(t, c) for t in tables(con) if t not in ("strings", "runs")
            for c, ty in columns(con, t) if c.endswith("_id") and ty == "INTEGER"
            and c not in PLAIN_IDS]


def names(con, t, c, rank):
    """Per rank, in insertion order: the text each row's string column refers to."""
    order = "rowid" if con.execute("SELECT count(*) FROM pragma_table_info(?) WHERE pk > 0",
                                   (t,)).fetchone()[0] == 0 else ", ".join(
        r[1] for r in sorted((r for r in con.execute("PRAGMA table_info(%s)" % t) if r[5]),
                             key=lambda r: r[5]))
    return [r[0] for r in con.execute(
        "SELECT s.value FROM %s x LEFT JOIN strings s ON s.id = x.%s WHERE x.rank = ? "
        "ORDER BY %s" % (t, c, order.replace("rowid", "x.rowid")), (rank,))]


def copy_db(src, dst):
    for f in glob.glob(dst + "*"):
        os.unlink(f)
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    a.backup(b)
    a.close()
    return b


# ---- 1. two shards vs one aggregator -------------------------------------------------
wd0, s0 = daemon("shard0", 0)
wd1, s1 = daemon("shard1", 1)
wdr, ref = daemon("single", None)
replay(s0, 0)
replay(s1, 1)
replay(ref, 0)
replay(ref, 1)
for d in (s0, s1, ref):
    if d.stop() != 0:
        itest.fail("meridiand %s did not exit 0" % d.db)
work = itest.Workdir(args, "merge_out")
shard0, shard1 = work.file("shard0.db"), work.file("shard1.db")
copy_db(s0.db, shard0).close()
copy_db(s1.db, shard1).close()
p = run([M, "finalize", ref.db])
if p.returncode != 0:
    itest.fail("finalize of the single-aggregator database: %s" % p.stderr)
merged = work.file("merged.db")
p = run([M, "merge", "-o", merged, shard0, shard1])
print(p.stderr.strip())
if p.returncode != 0:
    itest.fail("merge: rc %d" % p.returncode)
want, got = report(ref.db), report(merged)
granks = {r["rank"]: r for r in got["ranks"]}
wranks = {r["rank"]: r for r in want["ranks"]}
if sorted(granks) != [0, 1]:
    itest.fail("merged report has ranks %s" % sorted(granks))
if got["collectives"]["complete"] != 110 or any(
        r["overlap"]["comm_kernels"] != 110 for r in granks.values()):
    itest.fail("merged: %s complete collectives, comm kernels %s (want 110 on both ranks)" % (
        got["collectives"]["complete"], [r["overlap"]["comm_kernels"] for r in granks.values()]))
# the counts of the collectives section (skew times depend on each run's live clock probes)
COUNTS = ["instances", "complete", "partial", "untimed", "causality_violations"]
for k in COUNTS:
    if got["collectives"].get(k) != want["collectives"][k]:
        itest.fail("collectives.%s: merged %s, single aggregator %s" % (
            k, got["collectives"].get(k), want["collectives"][k]))
FN = ("comm", "func", "instances", "complete", "timed")
bf = [[tuple(f.get(k) for k in FN) for f in doc["collectives"]["by_function"]]
      for doc in (got, want)]
if bf[0] != bf[1] or not bf[1]:
    itest.fail("collectives.by_function: merged %s, single aggregator %s" % tuple(bf))
for r in (0, 1):
    if granks[r]["events"] != wranks[r]["events"]:
        itest.fail("rank %d events: merged %s, single aggregator %s" % (
            r, granks[r]["events"], wranks[r]["events"]))
    if granks[r]["clock"] is None:
        itest.fail("rank %d: no clock model in the merged database" % r)
itest.log("merged report: 2 ranks, collectives %s equal to the single aggregator's, events "
          "equal per rank, clock models for both" % {k: got["collectives"][k] for k in COUNTS})

mc = sqlite3.connect(merged)
c0, c1 = sqlite3.connect(shard0), sqlite3.connect(shard1)
for t in tables(c0):
    if t in ("runs", "strings", "schema_version", "aggregator_counters") or t.startswith("clock_") \
            or t == "gpu_timer_models":
        continue
    n = [c.execute("SELECT count(*) FROM %s" % t).fetchone()[0] for c in (c0, c1, mc)]
    if n[2] != n[0] + n[1]:
        itest.fail("table %s: shards %d + %d rows, merged %d" % (t, n[0], n[1], n[2]))
a = [c.execute("SELECT anchor_realtime_ns, anchor_monotonic_ns, boot_id FROM runs").fetchone()
     for c in (c0, c1)]
if a[0][2] != a[1][2]:
    itest.fail("the two shards' boot ids differ on one host: %s" % (a,))
delta = (a[0][0] - a[0][1]) - (a[1][0] - a[1][1])
if mc.execute("SELECT anchor_realtime_ns, anchor_monotonic_ns, run_id FROM runs").fetchone() != \
        (a[0][0], a[0][1], RUN):
    itest.fail("merged runs row is not shard 0's anchors")
for t, c, kind in (("ranks", "first_seen_ns", "g"), ("ranks", "last_seen_ns", "g"),
                   ("batches", "received_ns", "g"), ("clock_samples", "t1", "g"),
                   ("clock_samples", "t2", "g"), ("clock_samples", "t0", "l"),
                   ("kernels", "start_ns", "l")):
    order = "rowid" if t != "batches" else "seq"
    src = [r[0] for r in c1.execute("SELECT %s FROM %s WHERE rank = 1 ORDER BY %s" % (c, t, order))]
    dst = [r[0] for r in mc.execute("SELECT %s FROM %s WHERE rank = 1 ORDER BY %s" % (c, t, order))]
    exp = [v + delta if kind == "g" and v is not None else v for v in src]
    if not src or dst != exp:
        itest.fail("%s.%s of rank 1 (%d rows): not shard 1's %s (delta %d)" % (
            t, c, len(src), "shifted" if kind == "g" else "unchanged", delta))
    src0 = [r[0] for r in c0.execute("SELECT %s FROM %s WHERE rank = 0 ORDER BY %s" % (c, t, order))]
    dst0 = [r[0] for r in mc.execute("SELECT %s FROM %s WHERE rank = 0 ORDER BY %s" % (c, t, order))]
    if src0 != dst0:
        itest.fail("%s.%s of rank 0 (shard 0) changed in the merge" % (t, c))
if mc.execute("SELECT count(*) FROM clock_models WHERE rank IN (0, 1) GROUP BY rank").fetchall() \
        == [] or mc.execute("SELECT value FROM aggregator_counters WHERE name = "
                            "'merged_shards'").fetchone() != (2,):
    itest.fail("merged database: clock models or the merged_shards mark missing")
itest.log("rows summed per table; global columns of shard 1 shifted by %d ns, local ones kept"
          % delta)
# the order of the arguments does not matter: shard id 0 is the base
rev = work.file("reversed.db")
p = run([M, "merge", "--no-finalize", "-o", rev, shard1, shard0])
if p.returncode != 0:
    itest.fail("merge in reverse order: rc %d %s" % (p.returncode, p.stderr))
rc_ = sqlite3.connect(rev)
for t in ("runs", "ranks", "batches", "clock_samples", "kernels", "nccl_ops", "strings"):
    q = "SELECT * FROM %s" % t
    if sorted(rc_.execute(q).fetchall()) != sorted(mc.execute(q).fetchall()):
        itest.fail("merge in reverse order: table %s differs" % t)
if rc_.execute("SELECT count(*) FROM clock_models").fetchone()[0] != 0:
    itest.fail("--no-finalize: clock models were written")
rc_.close()

# ---- 2. refusals: exit 1, the message, nothing left ----------------------------------
def variant(name, sql, base=shard1):
    path = work.file(name + ".db")
    con = copy_db(base, path)
    con.executescript(sql)
    con.commit()
    con.close()
    return path


cases = [
    ("another run id", [shard0, variant("otherrun", "UPDATE runs SET run_id = 'other'")],
     "merge only the shards of one run"),
    ("a rank in two shards", [shard0, variant("dup", "UPDATE runs SET shard_id = 7", shard0)],
     "rank 0 is in"),
    ("a rank of an event table in two shards",
     [shard0, variant("dupev", "UPDATE nccl_ops SET rank = 0 WHERE rowid = 1")],
     "rank 0 is in"),
    ("another schema version", [shard0, variant("v3", "UPDATE schema_version SET version = 3")],
     "has schema version 3, newer than this meridian supports (2)"),
    ("another boot", [shard0, variant("boot", "UPDATE runs SET boot_id = 'another-boot'")],
     "cross-host shard merging needs aggregator clock alignment, which is not built"),
    ("the same shard id twice", [shard0, variant("sid", "UPDATE runs SET shard_id = 0")],
     "both have shard id 0"),
    ("not a database", [shard0, work.file("shard0.db-nonexistent")], "cannot read"),
]
for what, shards, msg in cases:
    out = work.file("refused.db")
    p = run([M, "merge", "-o", out] + shards)
    left = glob.glob(out + "*")
    if p.returncode != 1 or msg not in p.stderr or left:
        itest.fail("%s: rc %d, stderr %r, left %s (want rc 1, %r, nothing)" % (
            what, p.returncode, p.stderr, left, msg))
exists = work.file("exists.db")
with open(exists, "w") as f:
    f.write("keep me")
p = run([M, "merge", "-o", exists, shard0, shard1])
if p.returncode != 1 or "give --overwrite" not in p.stderr or open(exists).read() != "keep me" \
        or glob.glob(exists + ".merge-*"):
    itest.fail("existing output: rc %d, %r" % (p.returncode, p.stderr))
p = run([M, "merge", "-o", shard0, "--overwrite", shard0, shard1])
if p.returncode != 1 or "is the shard" not in p.stderr or glob.glob(shard0 + ".merge-*"):
    itest.fail("output = a shard: rc %d, %r" % (p.returncode, p.stderr))
p = run([M, "merge", "--no-finalize", "--overwrite", "-o", exists, shard0, shard1])
if p.returncode != 0 or sqlite3.connect(exists).execute(
        "SELECT count(*) FROM ranks").fetchone()[0] != 2:
    itest.fail("--overwrite: rc %d, %r" % (p.returncode, p.stderr))
p = run([M, "merge", shard0])
if p.returncode != 2:
    itest.fail("no -o: rc %d, want 2" % p.returncode)
itest.log("refused %d bad shard sets and an existing output, nothing left behind"
          % len(cases))

# ---- 3. string ids remapped ----------------------------------------------------------
moved = work.file("moved.db")
con = copy_db(shard1, moved)
sc = string_cols(con)
con.execute("UPDATE strings SET id = id + 1000")
for t, c in sc:
    con.execute("UPDATE %s SET %s = %s + 1000 WHERE %s IS NOT NULL" % (t, c, c, c))
con.commit()
con.close()
out3 = work.file("remapped.db")
p = run([M, "merge", "--no-finalize", "-o", out3, shard0, moved])
if p.returncode != 0:
    itest.fail("merge with moved string ids: rc %d %s" % (p.returncode, p.stderr))
m3 = sqlite3.connect(out3)
checked = 0
for t, c in sc:
    for rank, src in ((0, c0), (1, c1)):
        a_, b_ = names(src, t, c, rank), names(m3, t, c, rank)
        if a_ != b_:
            itest.fail("%s.%s of rank %d: names differ after the merge (%d vs %d rows)" % (
                t, c, rank, len(a_), len(b_)))
        checked += sum(1 for v in a_ if v is not None)
kn = [names(c1, "kernels", "name_id", 1), names(m3, "kernels", "name_id", 1)]
if not kn[0] or kn[0] != kn[1] or checked == 0:
    itest.fail("kernel names of rank 1 not kept (%d names)" % len(kn[0]))
itest.log("string columns %s: %d names per rank equal to the shards' after remapping"
          % (["%s.%s" % x for x in sc], checked))
for w in (wd0, wd1, wdr, work):
    w.done(True)
print("ok")
