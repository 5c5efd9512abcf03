#!/usr/bin/env python3
"""analysis_report: runs `meridian report` (text, --json, --html) and `meridian export
--perfetto` on the hand-built fixture (analysis_mkdb, see fixture.c / test_match.c for how
every expected number below is derived) and checks the outputs' content.

usage: check_outputs.py MERIDIAN ANALYSIS_MKDB WORKDIR
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import testlib


fail, check = testlib.reporter("analysis_report")


def run(args, expect_rc=0):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=60)
    if p.returncode != expect_rc:
        fail("%s exited %d (expected %d)\nstdout: %s\nstderr: %s"
             % (" ".join(args), p.returncode, expect_rc, p.stdout[-2000:], p.stderr[-2000:]))
    return p


def check_text(meridian, db, nomodel_db):
    out = run([meridian, "report", db]).stdout
    for section in ("== Ranks", "== Events stored per kind", "== Dropped events per rank",
                    "== Clock models", "== Collectives matched across ranks",
                    "== Communication / compute overlap per rank", "== Stragglers",
                    "== Per step", "== Warnings"):
        check(section in out, "text report lacks section %r" % section)
    check("7 instances: 5 complete, 1 missing ranks, 1 untimed" in out, "instance counts")
    check("causality violations after alignment: 1 " in out, "causality count")
    check("worst: AllReduce seq 1 on comm 0000000000001234, last arriver rank 2" in out,
          "worst instance line")
    check("ring_full 5" in out, "drop reason of rank 0")
    check("not fitted" not in out, "every rank has a model in the fixture")
    # offsets relative to the reference rank (the lowest with a model), from the database
    con = sqlite3.connect(db)
    off = dict(con.execute("SELECT rank, offset_ns FROM clock_models WHERE segment = 0"))
    con.close()
    check("offsets relative to rank %d's" % min(off) in out, "reference rank named")
    rel = off[2] - off[min(off)]
    check("  2     %-16s " % ("%.1f us" % (rel / 1e3)) in out,
          "rank 2's offset vs the reference (%d ns) in us" % rel)
    check("causality check of the clock fit: not run" in out, "no clock_causality table")
    # the straggler table: rank 2 (2.6 us caused) first, then 3, 1, 0
    rows = [l.split() for l in out.split("== Stragglers")[1].split("==")[0].splitlines()
            if l.strip()[:1].isdigit()]
    check([r[1] for r in rows] == ["2", "3", "1", "0"], "straggler order %r" % rows)
    out = run([meridian, "report", nomodel_db]).stdout
    check(out.count("not fitted") == 4, "no clock models -> 'not fitted' for 4 ranks")
    check("LOCAL clocks" in out, "local timebase announced")


def check_cost(meridian, db, workdir):
    """The agent's own cost: no section without its counters (the fixture has none), and
    with them the sampled callback time scaled up 64 times, in text and JSON; CUPTI's waits
    for ring space where a rank reported some (rank 0), none said where it reported none
    (rank 1: CUPTI's overhead only); no overhead figure where none was recorded (rank 2,
    MERIDIAN_CUPTI_SELF_RECORDS=0): said, not shown as a zero."""
    out = run([meridian, "report", db]).stdout
    check("The agent's own cost" not in out, "cost section without cost counters")
    check("agent_cost" not in run([meridian, "report", db, "--json"]).stdout, "json cost key")
    path = os.path.join(workdir, "cost.db")
    shutil.copy(db, path)
    con = sqlite3.connect(path)
    con.executemany("INSERT INTO agent_counters (rank, category, name, value) VALUES (?,?,?,?)",
                    [(0, "agent", "callbacks_sampled", 10), (0, "agent", "callback_sampled_ns", 5000),
                     (0, "agent", "callbacks_est", 640), (0, "cupti", "overhead_ns", 2000000),
                     (0, "cupti", "pace_waits", 3), (0, "cupti", "pace_wait_ns", 1500000),
                     (1, "cupti", "overhead_ns", 1000000), (1, "cupti", "pace_waits", 0),
                     (2, "cupti", "pace_waits", 0), (2, "cupti", "unknown_records", 0)])
    con.commit()
    con.close()
    out = run([meridian, "report", path]).stdout
    check("== The agent's own cost per rank (NVTX and NCCL callbacks sampled 1 in 64)" in out,
          "cost section")
    check("rank 0     ~640 callbacks, ~0.320 ms in them (10 timed, mean 500 ns); CUPTI's own "
          "overhead 2.000 ms; waited for ring space 3 times, 1.500 ms\n" in out,
          "rank 0's cost line:\n" + out)
    check("rank 1     ~0 callbacks, ~0.000 ms in them; CUPTI's own overhead 1.000 ms\n" in out,
          "rank 1's cost line (no waits said):\n" + out)
    check("rank 2     ~0 callbacks, ~0.000 ms in them; CUPTI's own overhead not recorded\n"
          in out, "rank 2's cost line (no OVERHEAD records: not a zero):\n" + out)
    check(out.count("callbacks, ~") == 3, "ranks 0, 1 and 2 reported a cost")
    ranks = {r["rank"]: r for r in json.loads(run([meridian, "report", path, "--json"]).stdout)[
        "ranks"]}
    check(ranks[0]["agent_cost"] == {"callbacks_est": 640, "callbacks_timed": 10,
                                     "callback_ns_est": 320000, "cupti_overhead_ns": 2000000,
                                     "cupti_overhead_recorded": True,
                                     "cupti_pace_waits": 3, "cupti_pace_wait_ns": 1500000},
          "json agent_cost %r" % ranks[0].get("agent_cost"))
    check(ranks[1]["agent_cost"]["cupti_pace_waits"] == 0, "rank 1's waits %r"
          % ranks[1].get("agent_cost"))
    check(ranks[2]["agent_cost"]["cupti_overhead_recorded"] is False
          and ranks[2]["agent_cost"]["cupti_overhead_ns"] == 0, "rank 2's overhead %r (want "
          "0, not recorded)" % ranks[2].get("agent_cost"))
    check(all("agent_cost" not in r for k, r in ranks.items() if k > 2), "ranks 3+ no cost")


def check_json(meridian, db):
    doc = json.loads(run([meridian, "report", db, "--json"]).stdout)
    check(doc["schema"] == "meridian-report/1", "schema")
    check(doc["run"]["run_id"] == "fixture-run", "run id")
    check(doc["run"]["timebase"] == "global", "timebase")
    c = doc["collectives"]
    check((c["instances"], c["complete"], c["partial"], c["untimed"]) == (7, 5, 1, 1),
          "collective counts %r" % c)
    check(c["causality_violations"] == 1, "violations")
    check(c["skew_max_ns"] == 900 and c["worst"]["last_rank"] == 2, "worst")
    check(c["wait_cost_ns"] == 4549, "total cost")
    check(doc["straggler_ranking"] == [2, 3, 1, 0], "ranking %r" % doc["straggler_ranking"])
    ranks = {r["rank"]: r for r in doc["ranks"]}
    check(ranks[1]["straggler"] == {"instances": 6, "times_last": 3, "wait_caused_ns": 740,
                                    "wait_suffered_ns": 1203}, "rank 1 straggler numbers")
    check(doc["straggler_scope"] == "steps" and
          doc["outside_steps"] == {"instances": 0, "wait_cost_ns": 0},
          "every timed instance is in a step: %r %r" % (doc["straggler_scope"],
                                                        doc["outside_steps"]))
    check(ranks[1]["straggler_in_steps"] == ranks[1]["straggler"], "in-step numbers")
    check(ranks[0]["overlap"]["comm_ns"] == 4300 and ranks[0]["overlap"]["hidden_ns"] == 800,
          "rank 0 overlap")
    check(ranks[0]["dropped"] == {"ring_full": 5}, "rank 0 drops")
    check(ranks[3]["clock"]["segments"] == 2 and ranks[2]["clock"] is not None, "clocks")
    steps = doc["steps"]
    check([s["worst_rank"] for s in steps] == [2, 1, 3], "worst rank per step")
    check([s["wait_cost_ns"] for s in steps] == [3900, 640, 9], "cost per step")
    # --json=FILE writes the same document next to the text
    path = os.path.join(os.path.dirname(db), "report.json")
    text = run([meridian, "report", db, "--json=" + path]).stdout
    check("== Stragglers" in text, "text still printed with --json=FILE")
    with open(path) as f:
        check(json.load(f)["straggler_ranking"] == [2, 3, 1, 0], "--json=FILE content")


def check_html(meridian, db, workdir):
    """Self-contained: one file, nothing fetched (no src=, no external href, no url(), no
    @import); the data the script draws is embedded (the ranking of the fixture). What the
    page shows once drawn is checked in a browser by analysis_html."""
    path = os.path.join(workdir, "report.html")
    run([meridian, "report", db, "--html", path])
    with open(path, encoding="utf-8") as f:
        html = f.read()
    check(html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>"),
          "HTML document")
    low = html.lower()
    for bad in (" src=", "url(", "@import", "http://", "https://"):
        check(bad not in low.replace("http://www.w3.org/2000/svg", ""),
              "HTML is not self-contained: found %r" % bad)
    check(all(h.startswith('href="#') for h in
              [low[i:i + 7] for i in range(len(low)) if low.startswith("href=", i)]),
          "only links inside the page")
    data = html.split('<script type="application/json" id="mrd-data">')[1].split("</script>")[0]
    doc = json.loads(data)
    check([r[0] for r in doc["ranking"]] == [2, 3, 1, 0], "embedded ranking %r" % doc["ranking"])
    check([s[4] for s in doc["steps"]] == [3900, 640, 9], "embedded step costs")
    check(any("ncclDevKernel_AllReduce_Sum_f32_RING_LL" in n for n in doc["names"]),
          "kernel names in the timeline data")


def check_perfetto(meridian, db, workdir):
    path = os.path.join(workdir, "trace.json")
    p = run([meridian, "export", db, "--perfetto", path])
    check("22 NCCL op -> kernel flows" in p.stderr, "export summary: %s" % p.stderr)
    run([sys.executable, "-m", "json.tool", path, os.devnull])
    with open(path) as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    check(doc["otherData"]["origin_ns"] == 1000, "origin = the run's anchor")
    procs = {e["pid"]: e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "process_name"}
    check(procs == {1: "rank 0 (nodeA)", 2: "rank 1 (nodeA)", 3: "rank 2 (nodeB)",
                    4: "rank 3 (nodeB)"}, "one process per rank: %r" % procs)
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
               if e["ph"] == "M" and e["name"] == "thread_name"}
    check(threads.get((1, 1), "").startswith("GPU 0 stream"), "stream thread %r" % threads)
    check(any(n.startswith("NCCL ops") for n in threads.values()), "NCCL ops thread")
    check(any(n.startswith("NVTX") for n in threads.values()), "NVTX thread")
    kernels = [e for e in ev if e["ph"] == "X" and e["cat"] == "kernel"]
    con = sqlite3.connect(db)
    nk = con.execute("SELECT COUNT(*) FROM kernels").fetchone()[0]
    check(len(kernels) == nk, "every kernel exported (%d vs %d)" % (len(kernels), nk))
    # rank 1's kernel of AllReduce seq 0: global 1200..2000, anchor 1000
    k = [e for e in kernels if e["pid"] == 2 and e["args"].get("nccl_op") == 101]
    check(len(k) == 1 and k[0]["ts"] == 0.2 and k[0]["dur"] == 0.8, "rank 1 I1 kernel %r" % k)
    # rank 3's kernel in its drift segment: global 1500500003 -> 1500499003 ns after anchor
    k = [e for e in kernels if e["pid"] == 4 and e["args"].get("nccl_op") == 603]
    check(len(k) == 1 and abs(k[0]["ts"] - 1500499.003) < 1e-6, "rank 3 drift kernel %r" % k)
    with open(path) as f:
        check('"ts":1500499.003' in f.read(), "ns precision printed exactly")
    flows_s = [e for e in ev if e["ph"] == "s"]
    flows_f = [e for e in ev if e["ph"] == "f"]
    check(len(flows_s) == 22 and sorted(e["id"] for e in flows_s)
          == sorted(e["id"] for e in flows_f), "flows pair up")
    ops = [e for e in ev if e["ph"] == "X" and e["cat"] == "nccl"]
    check(len(ops) == con.execute("SELECT COUNT(*) FROM nccl_ops").fetchone()[0], "all ops")
    check(any(e["name"] == "AllReduce" and e["args"]["seq"] == 3
              and e["args"]["comm"] == "0000000000001234" for e in ops),
          "op names (the function; seq in args) and comm hash")
    marks = [e for e in ev if e["ph"] == "i"]
    check(len(marks) == 1 and marks[0]["name"] == "step 9", "NVTX mark as instant")
    nvtx = [e for e in ev if e["ph"] == "X" and e["cat"] == "nvtx"]
    check(len(nvtx) == 13, "NVTX ranges: %d" % len(nvtx))
    # a window: 0.004 to 0.0055 ms after the anchor = global 5000..6500 ns holds the
    # kernels of AllReduce seq 1 (starts 5000..5900, ends 6000) of all 4 ranks, and the
    # 4 ranks' step 0 ranges (0..10000) that overlap it; nothing of step 2 (1.5 s)
    win = os.path.join(workdir, "window.json")
    run([meridian, "export", db, "--perfetto", win, "--window", "0.004:0.0055"])
    with open(win) as f:
        wev = json.load(f)["traceEvents"]
    wk = [e for e in wev if e["ph"] == "X" and e["cat"] == "kernel"]
    check(sorted(e["args"].get("nccl_op") for e in wk) == [200, 201, 202, 203],
          "window kernels %r" % [(e["pid"], e["ts"], e["args"]) for e in wk])
    check(all(e["ts"] <= 5.5 and e["ts"] + e["dur"] >= 4.0 for e in wev if e["ph"] == "X"),
          "window bounds")
    run([meridian, "export", db, "--perfetto", win, "--window", "5:1"], expect_rc=2)


def check_nesting(meridian, db, workdir):
    """Perfetto drops slices that do not nest on their track: add rows that overlap
    (host syncs of two threads, NVTX start/end ranges, grouped NCCL enqueues) and check
    that every track of the trace nests perfectly."""
    path = os.path.join(workdir, "overlap.db")
    shutil.copy(db, path)
    con = sqlite3.connect(path)
    con.executemany("INSERT INTO syncs (rank, start_ns, end_ns, type, stream) VALUES (0,?,?,1,0)",
                    [(100, 500), (200, 300), (250, 700), (600, 900)])
    nid = con.execute("SELECT id FROM strings WHERE value = 'step 0'").fetchone()[0]
    con.executemany("INSERT INTO nvtx (rank, thread, start_ns, end_ns, kind, domain_id, name_id,"
                    " depth) VALUES (1, 7, ?, ?, 2, 0, ?, 0)",
                    [(100, 400, nid), (300, 600, nid), (500, 800, nid)])
    con.executemany("INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, seq, func_id,"
                    " is_p2p, device) VALUES (2, ?, ?, ?, 99, ?, ?, 0, 0)",
                    [(800 + i, 70000 + 10 * i, 70100 + 10 * i, i, nid) for i in range(3)])
    con.commit()
    con.close()
    trace = os.path.join(workdir, "overlap.json")
    p = run([meridian, "export", path, "--perfetto", trace])
    with open(trace) as f:
        ev = json.load(f)["traceEvents"]
    tracks = {}
    for e in ev:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append(
                (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)))
    for key, sl in tracks.items():
        stack = []
        for s, e in sorted(sl, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            check(not stack or e <= stack[-1], "track %r: slice %r overlaps its parent" % (key, (s, e)))
            stack.append(e)
    names = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    check("CUDA synchronization #2" in names, "a second sync lane: %r" % names)
    check("NVTX start/end (thread 7) #2" in names, "a second NVTX start/end lane")
    check("NCCL ops (GPU 0, host enqueue) #3" in names, "three NCCL lanes on rank 2")


def check_errors(meridian, workdir):
    p = run([meridian, "report", os.path.join(workdir, "missing.db")], expect_rc=1)
    check("cannot read" in p.stderr, "missing database message")
    junk = os.path.join(workdir, "junk.db")
    with open(junk, "w") as f:
        f.write("not a database at all\n" * 100)
    p = run([meridian, "report", junk], expect_rc=1)
    check("not a meridian database" in p.stderr or "cannot open" in p.stderr, p.stderr)
    run([meridian, "report"], expect_rc=2)
    run([meridian, "export", junk], expect_rc=2)


def main():
    meridian, mkdb, workdir = sys.argv[1:4]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    db = os.path.join(workdir, "fixture.db")
    run([mkdb, db])
    nomodel = os.path.join(workdir, "nomodel.db")
    shutil.copy(db, nomodel)
    con = sqlite3.connect(nomodel)
    con.execute("DELETE FROM clock_models")
    con.commit()
    con.close()
    check_text(meridian, db, nomodel)
    check_json(meridian, db)
    check_cost(meridian, db, workdir)
    check_html(meridian, db, workdir)
    check_perfetto(meridian, db, workdir)
    check_nesting(meridian, db, workdir)
    check_errors(meridian, workdir)
    print("analysis_report: ok")


if __name__ == "__main__":
    main()
