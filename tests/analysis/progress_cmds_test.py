#!/usr/bin/env python3
"""analysis_progress_cmds: the progress lines (launcher/progress.h) of `meridian export`,
`meridian finalize` and `meridian merge`, on a generated database, with the test-only
MERIDIAN_PROGRESS_AFTER_MS=0 (no two-second wait, a line at every update):
- every progress line has the format "<who>: <what> DONE/TOTAL <unit> (P%), R/s,
  about T s left" (the last one "done in S s"), P is DONE/TOTAL, DONE increases to TOTAL;
- TOTAL is computed here from the raw rows with sqlite3: for export, the COUNT(*) of the
  tables each of its queries reads (export --help); for merge, the rows of every table the
  merge copies from every shard; for finalize, the rows of the tables its four passes read
  (launcher/finalize.c: clock_samples; nccl_channels + gpu_clock_samples; twice the
  collective rows; window_records + NVTX ranges of domain meridian.window);
- export counts within a table, not only between them: at least one line per 4096 rows;
- merge counts within one copied table (one INSERT ... SELECT): at least one line per 4096
  rows of its large tables; finalize within one pass: a line strictly between the ends of
  the clock fit's share and one strictly inside the causality check's (the test adds
  20,000 clock samples per rank to the generated database for it);
- --quiet prints no progress line and the rest of stderr is what the default (stderr not a
  terminal) prints; the default prints no progress line;
- the outputs are byte-identical with and without --progress (trace files; the finalized
  and merged databases' contents);
- `meridian profile --shards 2 --progress` (a real mpirun job replaying the reference
  capture, skipped without mpirun) shows its merge (total from the kept shards), its
  finalize and its report's lines; with --quiet none.

usage: progress_cmds_test.py --meridian M --schema SCHEMA_FULL_SQL --workdir DIR --data DIR
"""
import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import html_report_test as gen  # noqa: E402
import testlib  # noqa: E402

LINE = re.compile(r"^(meridian \w+): (.+?) (\d+)/(\d+) (rows|instances) \((\d+\.\d)%\), (\d+)/s, "
                  r"(about \d+ s left|done in \d+\.\d s)$")
# the tables each export query reads, in the order of aggregator/export's queries
JSON_TABLES = [["kernels"], ["memcpys"], ["memsets"], ["graph_launches"], ["nccl_ops"], ["nvtx"],
               ["nvtx"], ["mpi_calls"], ["syncs"]]
TRACE_TABLES = [["kernels", "memcpys", "memsets"], ["graph_launches"], ["nccl_ops"], ["nvtx"],
                ["nvtx"], ["mpi_calls"], ["syncs"], ["windows"], ["nvtx"], ["gpu_clock_samples"]]
# what the merge does not copy (launcher/merge_check.c: written fresh or by the finalize)
MERGE_NOT_COPIED = {"schema_version", "runs", "clock_models", "gpu_timer_models",
                    "clock_causality", "clock_adjustments", "windows"}


fail, check = testlib.reporter("analysis_progress_cmds")


def run(args):
    env = dict(os.environ)
    env["MERIDIAN_PROGRESS_AFTER_MS"] = "0"
    p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       env=env, timeout=300)
    check(p.returncode == 0, "%s exited %d: %s" % (" ".join(args), p.returncode, p.stderr[-2000:]))
    return p.stderr.splitlines()


def progress_lines(lines, who):
    return [l for l in lines if LINE.match(l) and l.startswith(who + ": ")]


def other_lines(lines, who):
    return [l for l in lines if l not in set(progress_lines(lines, who))]


def check_run(lines, who, what, unit, total):
    check(lines, "%s %s: no progress line" % (who, what))
    parsed = [LINE.match(l) for l in lines]
    check(all(m.group(1) == who and m.group(2) == what and m.group(5) == unit for m in parsed),
          "%s / %s / %s expected: %r" % (who, what, unit, lines[0]))
    check(all(int(m.group(4)) == total for m in parsed),
          "total %d expected (computed from the rows): %r" % (total, lines[0]))
    done = [int(m.group(3)) for m in parsed]
    check(all(b > a for a, b in zip(done[:-2], done[1:-1])), "done increases: %r" % done[:20])
    check(done[-1] == total and parsed[-1].group(8).startswith("done in"),
          "last line: %r" % lines[-1])
    check(all(not m.group(8).startswith("done in") for m in parsed[:-1]),
          "one last line only: %r" % lines)
    for m in parsed:
        check(m.group(6) == "%.1f" % (100.0 * int(m.group(3)) / total), "percentage %r"
              % m.group(0))


def count(con, table):
    if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                       (table,)).fetchone():
        return 0
    return con.execute('SELECT COUNT(*) FROM "%s"' % table).fetchone()[0]


def contents(path):
    con = sqlite3.connect(path)
    dump = "\n".join(con.iterdump())
    con.close()
    return dump


def test_export(m, db, wd):
    con = sqlite3.connect(db)
    json_total = sum(count(con, t) for q in JSON_TABLES for t in q)
    trace_total = sum(count(con, t) for q in TRACE_TABLES for t in q)
    kernels = count(con, "kernels")
    con.close()
    check(kernels > 3 * 4096, "the database has rows enough for counts within a table: %d"
          % kernels)
    out = {}
    for mode in ("--progress", "--quiet", None):
        tr, js = os.path.join(wd, "t%s.gz" % mode), os.path.join(wd, "t%s.json" % mode)
        args = [m, "export", db, "--trace", tr, "--perfetto", js] + ([mode] if mode else [])
        lines = run(args)
        out[mode] = (lines, open(tr, "rb").read(), open(js, "rb").read(), tr, js)
    lines = progress_lines(out["--progress"][0], "meridian export")
    trace = [l for l in lines if "native trace" in l]
    chrome = [l for l in lines if "Chrome JSON" in l]
    check(len(trace) + len(chrome) == len(lines) and lines.index(chrome[0]) > lines.index(trace[-1]),
          "export: the trace's lines, then the JSON's: %r" % lines[:3])
    check_run(trace, "meridian export", "writing the native trace", "rows", trace_total)
    check_run(chrome, "meridian export", "writing the Chrome JSON", "rows", json_total)
    check(len(trace) >= trace_total // 4096 and len(chrome) >= json_total // 4096,
          "a line every 4096 rows at least: %d and %d lines for %d and %d rows"
          % (len(trace), len(chrome), trace_total, json_total))
    for mode in ("--quiet", None):
        check(not progress_lines(out[mode][0], "meridian export"),
              "export %s printed progress: %r" % (mode, out[mode][0][:3]))
        check(out[mode][1] == out["--progress"][1] and out[mode][2] == out["--progress"][2],
              "export outputs differ with --progress and %s" % mode)

    def strip(lines, k):  # the summary lines name the output files
        return [l.replace(out[k][3], "T").replace(out[k][4], "J") for l in lines]
    check(strip(out["--quiet"][0], "--quiet") == strip(out[None][0], None),
          "export --quiet's stderr is the default's: %r vs %r" % (out["--quiet"][0], out[None][0]))
    check(strip(other_lines(out["--progress"][0], "meridian export"), "--progress")
          == strip(out[None][0], None), "--progress adds progress lines only")
    return trace_total, json_total


FINALIZING = "finalizing (clock fit, GPU timers, causality, windows)"


def finalize_shares(path):
    """The rows of the tables each finalize pass reads, in pass order."""
    con = sqlite3.connect(path)

    def q(table, sql):
        return count(con, table) and con.execute(sql).fetchone()[0]
    shares = [count(con, "clock_samples"),
              count(con, "nccl_channels") + count(con, "gpu_clock_samples"),
              2 * q("nccl_ops", "SELECT COUNT(*) FROM nccl_ops WHERE is_p2p = 0 AND seq IS NOT NULL"),
              count(con, "window_records") + q("nvtx", "SELECT COUNT(*) FROM nvtx n JOIN strings s "
                                               "ON s.id = n.domain_id WHERE s.value = "
                                               "'meridian.window'")]
    con.close()
    return shares


def add_clock_samples(path, per_rank):
    """NTP-style probes of every rank over the run's time span: 110 us round trips, the
    aggregator's times 40 us after the send (a constant offset), one every 250 us."""
    con = sqlite3.connect(path)
    ranks = [r[0] for r in con.execute("SELECT DISTINCT rank FROM nccl_ops")]
    rows = [(r, t, t + 40_000, t + 45_000, t + 110_000)
            for r in ranks for t in range(1_000_000, 1_000_000 + 250_000 * per_rank, 250_000)]
    con.executemany("INSERT INTO clock_samples (rank, t0, t1, t2, t3) VALUES (?, ?, ?, ?, ?)",
                    rows)
    con.commit()
    con.close()


def test_finalize(m, db, wd):
    base = os.path.join(wd, "fin-base.db")
    shutil.copyfile(db, base)
    add_clock_samples(base, 20_000)
    shares = finalize_shares(base)
    check(shares[0] > 4096 and shares[2] > 4096, "passes long enough to count inside: %r" % shares)
    res = {}
    for mode in ("--progress", "--quiet", None):
        copy = os.path.join(wd, "fin%s.db" % mode)
        shutil.copyfile(base, copy)
        lines = run([m, "finalize", copy] + ([mode] if mode else []))
        res[mode] = (lines, contents(copy))
    check(any("clock models fitted for 4 rank(s)" in l for l in res[None][0]),
          "the added clock samples fit 4 ranks: %r" % res[None][0])
    lines = progress_lines(res["--progress"][0], "meridian finalize")
    check_run(lines, "meridian finalize", FINALIZING, "rows", sum(shares))
    done = [int(LINE.match(l).group(3)) for l in lines[:-1]]
    ends = [sum(shares[:i + 1]) for i in range(4)]
    check(set(ends) <= set(done),
          "a line at the end of every pass %r: %r" % (ends, done))
    check(any(0 < d < ends[0] for d in done), "no line inside the clock fit: %r" % done)
    check(any(ends[1] < d < ends[2] for d in done), "no line inside the causality check: %r"
          % done)
    for mode in ("--quiet", None):
        check(not progress_lines(res[mode][0], "meridian finalize"),
              "finalize %s printed progress: %r" % (mode, res[mode][0]))
        check(res[mode][1] == res["--progress"][1], "finalize %s wrote another database" % mode)
    check(res["--quiet"][0] == res[None][0], "finalize --quiet's stderr is the default's")
    check(other_lines(res["--progress"][0], "meridian finalize") == res[None][0],
          "--progress adds progress lines only: %r" % res["--progress"][0])


def make_shards(db, wd, ranks):
    """Two shards of db's run: ranks below ranks/2, and the others (one aggregator host)."""
    paths = []
    for k in range(2):
        path = os.path.join(wd, "shard%d.db" % k)
        shutil.copyfile(db, path)
        con = sqlite3.connect(path)
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            cols = [r[1] for r in con.execute('PRAGMA table_info("%s")' % t)]
            if "rank" in cols:
                con.execute('DELETE FROM "%s" WHERE (rank < ?) = ?' % t, (ranks // 2, k))
        con.execute("UPDATE runs SET boot_id = 'one-host', shard_id = ?", (k,))
        con.commit()
        con.close()
        paths.append(path)
    return paths


def test_merge(m, db, wd, ranks):
    shards = make_shards(db, wd, ranks)
    total = shard_rows(shards)
    res = {}
    for mode in ("--progress", "--quiet", None):
        out = os.path.join(wd, "merged.db")
        lines = run([m, "merge", "-o", out, "--overwrite"] + shards + ([mode] if mode else []))
        res[mode] = (lines, contents(out))
    lines = progress_lines(res["--progress"][0], "meridian merge")
    merging = [l for l in lines if " merging shards " in l]
    finalizing = [l for l in lines if " finalizing " in l]
    check(len(merging) + len(finalizing) == len(lines), "merge lines: %r" % lines[:3])
    check_run(merging, "meridian merge", "merging shards", "rows", total)
    inner = sum((count_in(s, t) - 1) // 4096 for s in shards
                for t in ("kernels", "nccl_ops", "external_correlations", "nvtx")
                if count_in(s, t) > 1)
    check(inner > 0 and len(merging) - 1 >= inner,
          "merge counts inside a table: %d lines for %d rows (%d inner ticks expected)"
          % (len(merging), total, inner))
    check_run(finalizing, "meridian merge", FINALIZING, "rows",
              sum(finalize_shares(os.path.join(wd, "merged.db"))))
    for mode in ("--quiet", None):
        check(not progress_lines(res[mode][0], "meridian merge"),
              "merge %s printed progress: %r" % (mode, res[mode][0][:3]))
        check(res[mode][1] == res["--progress"][1], "merge %s wrote another database" % mode)
    check(res["--quiet"][0] == res[None][0], "merge --quiet's stderr is the default's")
    check(other_lines(res["--progress"][0], "meridian merge") == res[None][0],
          "--progress adds progress lines only")
    return total


def count_in(path, table):
    con = sqlite3.connect(path)
    n = count(con, table)
    con.close()
    return n


def shard_rows(paths):
    total = 0
    for path in paths:
        con = sqlite3.connect(path)
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name "
                                "NOT LIKE 'sqlite_%'").fetchall():
            if t not in MERGE_NOT_COPIED:
                total += count(con, t)
        con.close()
    return total


def test_profile(m, wd, data):
    caps = [os.path.join(data, "ref-rank%d.mrdcap" % r) for r in range(2)]
    if not shutil.which("mpirun") or not all(os.path.exists(c) for c in caps):
        print("analysis_progress_cmds: profile part skipped (no mpirun or no reference capture)")
        return
    job = ["mpirun", "-np", "2", "--allow-run-as-root", "--oversubscribe", "--mca", "btl",
           "self,tcp", m, "replay", "--from-env", os.path.join(data, "ref-rank%r.mrdcap"),
           "--quiet"]
    for mode in ("--progress", "--quiet"):
        d = os.path.join(wd, "profile%s" % mode)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        db = os.path.join(d, "p.db")
        lines = run([m, "profile", "-o", db, "--shards", "2", "--keep-shards",
                     "--no-mpi-wrappers", mode, "--"] + job)
        shards = sorted(os.path.join(d, f) for f in os.listdir(d) if ".db.shard-" in f
                        and not f.endswith(("-wal", "-shm")))
        check(len(shards) == 2, "profile --keep-shards kept %r" % shards)
        prog = progress_lines(lines, "meridian profile")
        if mode == "--quiet":
            check(not prog, "profile --quiet printed progress: %r" % prog[:3])
            continue
        con = sqlite3.connect(db)
        instances = len(set(con.execute(
            "SELECT comm_hash, seq, func_id FROM nccl_ops WHERE is_p2p = 0")))
        con.close()
        check(instances == 110, "the reference capture has 110 collectives: %d" % instances)
        merging = [l for l in prog if " merging shards " in l]
        finalizing = [l for l in prog if " finalizing " in l]
        analysing = [l for l in prog if " analysing collectives " in l]
        check(len(merging) + len(finalizing) + len(analysing) == len(prog),
              "profile lines: %r" % prog[:3])
        check_run(merging, "meridian profile", "merging shards", "rows", shard_rows(shards))
        check_run(finalizing, "meridian profile", FINALIZING, "rows", sum(finalize_shares(db)))
        check_run(analysing, "meridian profile", "analysing collectives", "instances", instances)
        check(prog.index(merging[-1]) < prog.index(finalizing[0]) and
              prog.index(finalizing[-1]) < prog.index(analysing[0]),
              "profile: merge, then finalize, then report")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meridian", required=True)
    ap.add_argument("--schema", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--data", required=True, help="tests/data (the reference capture)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    db = os.path.join(args.workdir, "progress_cmds.db")
    ranks = 4
    gen.build(db, args.schema, ranks, 500, 4, {(1, 3): 50_000}, seed=11)
    trace_total, json_total = test_export(args.meridian, db, args.workdir)
    test_finalize(args.meridian, db, args.workdir)
    merged = test_merge(args.meridian, db, args.workdir, ranks)
    test_profile(args.meridian, args.workdir, args.data)
    print("analysis_progress_cmds: OK (export %d / %d rows, merge %d rows)"
          % (trace_total, json_total, merged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
