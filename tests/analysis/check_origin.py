#!/usr/bin/env python3
"""The time origin (aggregator/SCHEMA.md, "The time origin") on recorded data: no output
time is negative, for a live run and for a replayed capture; a --window or --steps range
that selects nothing says so (exit 3, a warning on stderr, a valid trace of metadata).

usage: check_origin.py MERIDIAN DATA_DIR WORKDIR

A. tests/data/h200-quickstart.db.gz, stored live on the GPU host: the origin is the run's
   anchor (its probes were answered after it), every trace time >= 0, the report's steps
   start after it; --steps exports one step's events; a far window and a step range past
   the run select nothing.
B. tests/data/ref-rank0/1.mrdcap replayed through `meridian profile` (2 ranks, no mpirun):
   the recorded probes carry the recording aggregator's global times, 1-2 days before this
   run's anchor: with the anchor as the origin every timestamp would sit near -1.36e11 us
   (-37.7 h) and a --window would select nothing. Every time is >= 0, the trace starts at
   0, and an empty window or step range says so.
"""
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys

fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL: " + what)


def run(cmd, expect_rc=0, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, **kw)
    if p.returncode != expect_rc:
        print("FAIL: %s exited %d (expected %d)\nstdout: %s\nstderr: %s"
              % (" ".join(cmd), p.returncode, expect_rc, p.stdout[-2000:], p.stderr[-2000:]))
        sys.exit(1)
    return p


def trace_times(path):
    with open(path) as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    return doc, [e["ts"] for e in ev if "ts" in e], [e for e in ev if e["ph"] in "Xsfi"]


def check_outputs(meridian, db, workdir, tag):
    """Every output's times on the origin: the trace, the JSON report's steps."""
    con = sqlite3.connect(db)
    anchor = con.execute("SELECT anchor_realtime_ns FROM runs").fetchone()[0]
    t1 = con.execute("SELECT MIN(t1) FROM clock_samples").fetchone()[0]
    con.close()
    trace = os.path.join(workdir, tag + ".json")
    run([meridian, "export", db, "--perfetto", trace])
    doc, ts, events = trace_times(trace)
    origin = doc["otherData"]["origin_ns"]
    check(len(events) > 1000, "%s: events exported: %d" % (tag, len(events)))
    check(min(ts) >= 0, "%s: earliest trace time %r us is negative" % (tag, min(ts)))
    check(max(ts) < 3600e6, "%s: latest trace time %r us is over an hour" % (tag, max(ts)))
    rep = json.loads(run([meridian, "report", db, "--json"]).stdout)
    check(rep["run"]["time_origin_ns"] == origin,
          "%s: report and trace share the origin (%r vs %r)"
          % (tag, rep["run"]["time_origin_ns"], origin))
    check(rep["steps"] and all(0 <= s["at_ns"] < 3600e9 for s in rep["steps"]),
          "%s: steps start after the origin: %r" % (tag, [s["at_ns"] for s in rep["steps"][:3]]))
    return anchor, t1, origin, rep, max(ts)


def check_selection(meridian, db, workdir, rep, last_us):
    # one step by number: its events only, inside the step's interval
    st = rep["steps"][10]
    out = os.path.join(workdir, "step10.json")
    run([meridian, "export", db, "--perfetto", out, "--steps", "10"])
    _, _, ev = trace_times(out)
    lo, hi = st["at_ns"] / 1e3, (st["at_ns"] + st["end_ns"] - st["start_ns"]) / 1e3
    check(ev and all(e["ts"] <= hi + 1e-3 and e["ts"] + e.get("dur", 0) >= lo - 1e-3 for e in ev),
          "--steps 10: %d events, all meeting [%r, %r] us" % (len(ev), lo, hi))
    # a window after the run, a step range past the last step: nothing, and it says so
    far = "%d:%d" % (last_us / 1e3 + 1000, last_us / 1e3 + 2000)
    p = run([meridian, "export", db, "--perfetto", out, "--window", far], expect_rc=3)
    check("selects no event" in p.stderr and "ms after the time origin" in p.stderr,
          "empty window warning: %r" % p.stderr)
    _, _, ev = trace_times(out)
    check(ev == [], "empty window: metadata only")
    p = run([meridian, "export", db, "--perfetto", out, "--steps", "900-999"], expect_rc=3)
    check("selects no event" in p.stderr and "steps 0 to %d" % (len(rep["steps"]) - 1) in p.stderr,
          "empty step range warning: %r" % p.stderr)
    run([meridian, "export", db, "--perfetto", out, "--steps", "3-1"], expect_rc=2)


def main():
    meridian, data, workdir = (os.path.abspath(a) for a in sys.argv[1:4])
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)

    # A: the live GPU run
    db = os.path.join(workdir, "h200.db")
    with gzip.open(os.path.join(data, "h200-quickstart.db.gz")) as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    anchor, t1, origin, rep, last_us = check_outputs(meridian, db, workdir, "live")
    check(t1 >= anchor and origin == anchor, "live: origin %r = anchor %r" % (origin, anchor))
    check_selection(meridian, db, workdir, rep, last_us)

    # B: the recorded capture replayed as 2 ranks (rank and world size from RANK/WORLD_SIZE)
    db = os.path.join(workdir, "replay.db")
    job = ("RANK=0 WORLD_SIZE=2 '{m}' replay --from-env '{d}/ref-rank%r.mrdcap' --quiet & "
           "RANK=1 WORLD_SIZE=2 '{m}' replay --from-env '{d}/ref-rank%r.mrdcap' --quiet; "
           "wait $!; r=$?; wait; exit $r").format(m=meridian, d=data)
    run([meridian, "profile", "-o", db, "--no-mpi-wrappers", "--", "bash", "-c", job],
        cwd=workdir)
    anchor, t1, origin, rep, last_us = check_outputs(meridian, db, workdir, "replay")
    check(t1 < anchor - 3600e9, "replay: the recorded probes predate this run's anchor")
    check(origin < anchor - 3600e9, "replay: origin %r is on the probes' timebase" % origin)
    _, ts, _ = trace_times(os.path.join(workdir, "replay.json"))
    check(min(ts) == 0, "replay: the trace starts at the origin: %r" % min(ts))
    check_selection(meridian, db, workdir, rep, last_us)

    if fails:
        print("analysis_origin: %d check(s) failed" % fails)
        return 1
    print("analysis_origin: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
