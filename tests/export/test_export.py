"""CTest driver of the trace exports (tests/export/CMakeLists.txt).

  native CASE   `meridian export --trace` of a recorded run, decoded with Debian's protoc
                against Perfetto's perfetto_trace.proto and checked row by row against the
                database (pfcheck.py). CASE quickstart: tests/data/h200-quickstart.db.gz
                (2 H200 ranks), with two capture windows added to a copy (table windows),
                exported with and without --api; CASE recorded: the captures
                tests/data/ref-rank{0,1}.mrdcap replayed through meridiand and finalized.
                Also: --window keeps only events meeting the window; bytes per event <= 20.
  speedscope    `meridian export --perfetto` of the quickstart run loaded by speedscope's
                importer (speedscope_import.js, npm package installed in the build tree):
                every thread with slices becomes a profile, NCCL ops aggregate by function.
Exit 77 (CTest SKIP) only when protoc / node / the speedscope package is not there.
"""
import argparse
import gzip
import json
import os
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


def export(db, out, *opts):
    p = subprocess.run([args.meridian, "export", db] + list(opts) + [out], text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, "export failed: %s" % p.stderr
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
        typ = pfcheck.one(te, "type")
        if typ == "TYPE_SLICE_BEGIN":
            stacks.setdefault(sid, []).append(t)
            n += 1
        elif typ == "TYPE_SLICE_END":
            s = stacks[sid].pop()
            assert t - anchor >= a_ms * 1e6 - 1 and s - anchor <= b_ms * 1e6 + 1, \
                "slice [%d, %d] outside the window" % (s - anchor, t - anchor)
    assert 0 < n < full["slices_instants"], "window: %d slices of %d" % (
        n, full["slices_instants"])
    log("--window %.3f:%.3f ms: %d of %d slices, all meeting it" % (
        a_ms, b_ms, n, full["slices_instants"]))


def main():
    if shutil.which("protoc") is None and args.case != "speedscope":
        skip("protoc not installed (Debian package protobuf-compiler; deploy/install-deps.sh)")
    if args.case == "quickstart":
        db = quickstart_db()
        add_windows(db)
        full = native(db)
        check_window(db, full)
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
        "distinct (name, args) of its thread, mangled kernel names included" % len(got))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        log("FAILED: %s" % e)
        sys.exit(1)
