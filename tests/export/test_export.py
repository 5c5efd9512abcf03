"""CTest driver of the trace exports (tests/export/CMakeLists.txt).

  native CASE   `meridian export --trace` of a recorded run, decoded with Debian's protoc
                against Perfetto's perfetto_trace.proto and checked row by row against the
                database (pfcheck.py). CASE quickstart: tests/data/h200-quickstart.db.gz
                (2 H200 ranks), with two capture windows added to a copy (table windows),
                exported with and without --api; CASE recorded: the captures
                tests/data/ref-rank{0,1}.mrdcap replayed through meridiand and finalized.
                Also: --window keeps only events meeting the window; bytes per event <= 20;
                no time before the time origin, --steps keeps one step's slices, an empty
                --window or --steps range exits 3 with a warning (check_steps_and_empty);
                a one-rank copy exports and checks the same way (check_one_rank).
  speedscope    `meridian export --perfetto` of the quickstart run loaded by speedscope's
                importer (speedscope_import.js, npm package installed in the build tree):
                every thread with slices becomes a profile, NCCL ops aggregate by function.
Exit 77 (CTest SKIP) only when protoc / node / the speedscope package is not there.
"""
import argparse
import gzip
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pfcheck  # noqa: E402
import rundb  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("case", choices=["quickstart", "recorded", "speedscope"])
ap.add_argument("--meridian", required=True)
ap.add_argument("--meridiand")
ap.add_argument("--data", required=True, help="tests/data")
ap.add_argument("--proto-dir", required=True, help="folder of perfetto_trace.proto")
ap.add_argument("--speedscope", help="the installed speedscope package folder")
ap.add_argument("--workdir", required=True)
args = ap.parse_args()
os.makedirs(args.workdir, exist_ok=True)
MAX_BYTES_PER_EVENT = 20.0


def log(msg):
    print("export_%s: %s" % (args.case, msg), flush=True)


def skip(msg):
    log("SKIP: " + msg)
    sys.exit(77)


def export(db, out, *opts, rc=0):
    p = subprocess.run([args.meridian, "export", db] + list(opts) + [out], text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == rc, "export exited %d, not %d: %s" % (p.returncode, rc, p.stderr)
    log(p.stderr.strip())
    return p.stderr


def quickstart_db():
    db = os.path.join(args.workdir, "quickstart.db")
    with gzip.open(os.path.join(args.data, "h200-quickstart.db.gz")) as f, open(db, "wb") as o:
        shutil.copyfileobj(f, o)
    return db


def add_windows(db):
    """Two capture windows (the finalize's table windows, global times) on rank 0 and 1."""
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE IF NOT EXISTS windows (rank INTEGER NOT NULL, first_step "
                "INTEGER NOT NULL, last_step INTEGER NOT NULL, detach_step INTEGER NOT NULL, "
                "reason TEXT NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, "
                "attach_ns INTEGER NOT NULL, detach_ns INTEGER, flush_ns INTEGER NOT NULL, "
                "kernels INTEGER NOT NULL)")
    lo, hi = con.execute("SELECT min(start_ns), max(end_ns) FROM kernels WHERE rank = 0"
                         " AND start_ns > 0").fetchone()
    off = con.execute("SELECT offset_ns FROM clock_models WHERE rank = 0").fetchone()[0]
    for rank, reason, detach in ((0, "periodic", 3201000), (1, "range", None)):
        con.execute("INSERT INTO windows VALUES (?, 10, 19, 20, ?, ?, ?, 11873000, ?, "
                    "1540000, 42)", (rank, reason, lo + off + (hi - lo) // 4,
                                     lo + off + (hi - lo) // 2, detach))
    con.commit()
    con.close()


def bytes_per_event(stderr):
    # "meridian export: F: N events, B bytes (X per event), ..."
    x = float(stderr.split(" per event")[0].rsplit("(", 1)[1])
    assert x <= MAX_BYTES_PER_EVENT, "%.1f bytes per event > %.0f" % (x, MAX_BYTES_PER_EVENT)
    return x


def native(db):
    trace = os.path.join(args.workdir, args.case + ".pftrace.gz")
    bpe = bytes_per_event(export(db, trace, "--trace"))
    res = pfcheck.check(trace, db, args.proto_dir, os.path.join(args.workdir, "trace.txt"))
    log("decoded and checked: %s; %.1f bytes per event" % (res, bpe))
    assert res["slices_instants"] > 2000, "too few events: %s" % res
    assert res["collective_flows"] > 0 and res["link_flows"] > 0
    return res


def check_window(db, full):
    """--window A:B: fewer events, each meeting [A, B] after the origin (the anchor)."""
    trace = os.path.join(args.workdir, args.case + ".window.pftrace.gz")
    con = sqlite3.connect(db)
    anchor = con.execute("SELECT anchor_realtime_ns FROM runs").fetchone()[0]
    lo, hi = con.execute("SELECT min(start_ns + m.offset_ns), max(end_ns + m.offset_ns) FROM "
                         "kernels k JOIN clock_models m ON m.rank = k.rank WHERE "
                         "k.start_ns > 0").fetchone()
    a_ms = (lo - anchor + (hi - lo) * 0.4) / 1e6
    b_ms = (lo - anchor + (hi - lo) * 0.5) / 1e6
    export(db, trace, "--window", "%.3f:%.3f" % (a_ms, b_ms), "--trace")
    n = slices_within(trace, anchor + a_ms * 1e6, anchor + b_ms * 1e6)
    assert 0 < n < full["slices_instants"], "window: %d slices of %d" % (
        n, full["slices_instants"])
    log("--window %.3f:%.3f ms: %d of %d slices, all meeting it" % (
        a_ms, b_ms, n, full["slices_instants"]))


SPAN = {}


def slices_within(trace, lo, hi, inside=False):
    """Decodes trace (protoc) and returns its number of slices, each asserted to meet the
    absolute [lo, hi] ns (inside: to lie in it; times summed from the incremental deltas
    of each sequence). SPAN[trace] gets the earliest and latest time of any event."""
    text, _ = pfcheck.decode(trace, args.proto_dir)
    packets = pfcheck.parse(text)
    seq_t, stacks, n = {}, {}, 0
    for pk in packets:
        sid = pfcheck.one(pk, "trusted_packet_sequence_id")
        if pfcheck.one(pk, "sequence_flags", 0) & 1:
            cs = pfcheck.one(pk, "clock_snapshot")
            seq_t[sid] = [pfcheck.one(c, "timestamp") for c in cs["clocks"]][0]
            continue
        te = pfcheck.one(pk, "track_event")
        if not te:
            continue
        seq_t[sid] += pfcheck.one(pk, "timestamp")
        t = seq_t[sid]
        span = SPAN.get(trace, (t, t))
        SPAN[trace] = (min(span[0], t), max(span[1], t))
        typ = pfcheck.one(te, "type")
        if typ == "TYPE_SLICE_BEGIN":
            stacks.setdefault(sid, []).append(t)
            n += 1
        elif typ == "TYPE_SLICE_END":
            s = stacks[sid].pop()
            assert t >= lo - 1 and s <= hi + 1 and (not inside or (s >= lo - 1 and t <= hi + 1)), \
                "slice [%d, %d] outside [%d, %d]" % (s, t, lo, hi)
    return n


def check_one_rank(db):
    """A one-rank run (a copy without rank 1's rows, as a one-GPU machine makes it): the
    native trace still decodes and matches its rows (pfcheck), one process."""
    one = os.path.join(args.workdir, "one-rank.db")
    shutil.copyfile(db, one)
    con = sqlite3.connect(one)
    for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        if "rank" in [r[1] for r in con.execute('PRAGMA table_info("%s")' % t)]:
            con.execute('DELETE FROM "%s" WHERE rank = 1' % t)
    con.commit()
    con.close()
    trace = os.path.join(args.workdir, "one-rank.pftrace.gz")
    export(one, trace, "--trace")
    res = pfcheck.check(trace, one, args.proto_dir)
    assert res["processes"] == 1 and res["slices_instants"] > 1000, "one rank: %s" % res
    log("one rank: %d slices, one process, checked against its rows" % res["slices_instants"])


def check_steps_and_empty(db, full):
    """The time origin and the selections on the native trace (issue 12 item 1):
    - no time before the run's time origin (no negative trace time): every slice of the
      full export starts at or after the origin the JSON report states;
    - --steps 10: some but not all slices, each meeting step 10's interval as the report
      gives it (its at_ns after the origin and its length);
    - a --window after the run and a --steps range past the last step select nothing:
      exit 3, a warning that says so (the window's with where the run's events lie: the
      first and last event time of the full trace; the step range's with the run's step
      count), and a trace that still decodes, without any slice."""
    rep = json.loads(subprocess.run([args.meridian, "report", db, "--json"], check=True,
                                    stdout=subprocess.PIPE, text=True).stdout)
    origin = rep["run"]["time_origin_ns"]
    trace = os.path.join(args.workdir, args.case + ".all.pftrace.gz")
    export(db, trace, "--trace")
    n = slices_within(trace, origin, 1 << 62, inside=True)
    assert 0 < n <= full["slices_instants"], "full export: %d slices" % n
    st = rep["steps"][10]
    lo = origin + st["at_ns"]
    hi = lo + st["end_ns"] - st["start_ns"]
    trace = os.path.join(args.workdir, args.case + ".step10.pftrace.gz")
    export(db, trace, "--steps", "10", "--trace")
    n10 = slices_within(trace, lo, hi)
    assert 0 < n10 < n, "--steps 10: %d slices of %d" % (n10, n)
    last_ms = (max(s["at_ns"] + s["end_ns"] - s["start_ns"] for s in rep["steps"])) / 1e6
    trace = os.path.join(args.workdir, args.case + ".empty.pftrace.gz")
    err = export(db, trace, "--window", "%d:%d" % (last_ms + 60000, last_ms + 120000), "--trace",
                 rc=3)
    first, last = ((t - origin) / 1e6 for t in SPAN[os.path.join(args.workdir, args.case +
                                                                  ".all.pftrace.gz")])
    said = re.search(r"--window [-\d.:]+ selects no event for .*: the run's events lie between "
                     r"([-\d.]+) and ([-\d.]+) ms after the time origin", err)
    assert said and abs(float(said.group(1)) - first) < 0.002 and \
        abs(float(said.group(2)) - last) < 0.002, \
        "empty window: %r; the full trace's events lie in [%.3f, %.3f] ms" % (err, first, last)
    assert slices_within(trace, 0, 0) == 0, "empty window: slices in the trace"
    err = export(db, trace, "--steps", "900-999", "--trace", rc=3)
    assert "--steps 900-999 selects no event" in err and \
        "the run has %d steps" % len(rep["steps"]) in err, "empty step range: %r" % err
    assert slices_within(trace, 0, 0) == 0, "empty step range: slices in the trace"
    log("no slice before the time origin (%d slices); --steps 10: %d slices, all in the step;"
        " an empty --window and --steps range exit 3 and say so" % (n, n10))


def main():
    if shutil.which("protoc") is None and args.case != "speedscope":
        skip("protoc not installed (Debian package protobuf-compiler; deploy/install-deps.sh)")
    if args.case == "quickstart":
        db = quickstart_db()
        add_windows(db)
        full = native(db)
        check_window(db, full)
        check_steps_and_empty(db, full)
        check_one_rank(db)
        trace = os.path.join(args.workdir, "api.pftrace.gz")
        export(db, trace, "--api", "--trace")
        res = pfcheck.check(trace, db, args.proto_dir)
        napi = sqlite3.connect(db).execute("SELECT count(*) FROM api_calls").fetchone()[0]
        assert napi > 0 and res["rows"] == full["rows"] + napi, \
            "--api adds exactly the %d API calls: %s" % (napi, res)
        log("--api: %d more slices, one per api_calls row, checked the same way" % napi)
    elif args.case == "recorded":
        if not args.meridiand:
            skip("meridiand not built")
        db = rundb.make_db(args.meridian, args.meridiand, os.path.join(args.workdir, "rec"),
                           [os.path.join(args.data, "ref-rank0.mrdcap"),
                            os.path.join(args.data, "ref-rank1.mrdcap")])
        native(db)
    else:
        speedscope()
    log("passed")


def speedscope():
    if shutil.which("node") is None:
        skip("node not installed (Debian package nodejs; deploy/install-deps.sh)")
    if not args.speedscope or not os.path.isdir(args.speedscope):
        skip("the speedscope npm package is not in the build tree (npm install failed at "
             "configure: see tests/export/CMakeLists.txt)")
    db = quickstart_db()
    out = os.path.join(args.workdir, "quickstart.json")
    export(db, out, "--perfetto")
    js = os.path.join(os.path.dirname(os.path.abspath(__file__)), "speedscope_import.js")
    p = subprocess.run(["node", js, args.speedscope, out], text=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    log("speedscope: %s" % (p.stdout.strip()[:400] or p.stderr.strip()[:400]))
    assert p.returncode == 0, "speedscope's importer failed on the export: %s %s" % (
        p.stdout[-2000:], p.stderr[-2000:])
    res = json.loads(p.stdout)
    ev = json.load(open(out))["traceEvents"]
    threads = {}
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in ev:  # speedscope's frame: the name, then the args as JSON when there are any
        if e["ph"] == "X":
            a = e.get("args")
            threads.setdefault((e["pid"], e["tid"]), set()).add(
                e["name"] + (" " + json.dumps(a, separators=(",", ":"), ensure_ascii=False)
                             if a else ""))
    got = {p["name"]: p for p in res["profiles"]}
    assert len(got) == len(threads), "%d profiles for %d threads with slices" % (
        len(got), len(threads))
    for key, fnames in threads.items():
        prof = [p for n, p in got.items() if n.endswith("(pid %d), %s (tid %d)" % (key[0], names[key], key[1]))]
        assert len(prof) == 1, "%d profiles for thread %s" % (len(prof), names[key])
        assert set(prof[0]["names"]) == fnames, "%s: frames %s, slices %s" % (
            names[key], sorted(set(prof[0]["names"]) ^ fnames)[:3], len(fnames))
        if names[key].startswith("NCCL ops"):
            funcs = {n.split(" {")[0] for n in fnames}
            assert len(funcs) <= 16, "NCCL ops named by function: %s" % sorted(funcs)[:5]
    log("speedscope imported %d profiles (one per thread with slices), each frame one "
        "distinct (name, args) of its thread, demangled kernel names included" % len(got))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        log("FAILED: %s" % e)
        sys.exit(1)
