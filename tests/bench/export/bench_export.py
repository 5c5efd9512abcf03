#!/usr/bin/env python3
"""Bytes per event of `meridian export --trace` (native Perfetto, gzipped) against the
Chrome JSON (`--perfetto`), on the recorded runs and on a synthetic database of ~6M
events (the replay generator through a real meridiand, finalized). A benchmark run by
hand, not a CTest test: the 6M-event database takes minutes on a 2-core machine.

  python3 tests/bench/export/bench_export.py --build build [--events 6000000] \
      [--ranks 16] [--out tests/bench/export/RESULTS.md] [--check]

Prints one line per (database, format) and appends a section to --out (the command, the
machine, the numbers). "events" is what the trace holds: slices, instants and counter
samples (the exporter's count, checked against the decoded trace with --check, which
runs tests/export/pfcheck.py on the native traces); "db events" is every row the agents
sent (api_calls, nccl_channels, external correlations and clock samples included).
"""
import argparse
import gzip
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "export"))
import rundb  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--events", type=int, default=6000000, help="synthetic events in all")
ap.add_argument("--ranks", type=int, default=16)
ap.add_argument("--workdir", default="/tmp/meridian-bench-export")
ap.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
ap.add_argument("--check", action="store_true", help="decode and check every native trace")
args = ap.parse_args()
M = os.path.join(args.build, "launcher", "meridian")
D = os.path.join(args.build, "aggregator", "daemon", "meridiand")
os.makedirs(args.workdir, exist_ok=True)
lines = []


def say(s):
    print(s, flush=True)
    lines.append(s)


def db_events(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    return con.execute("SELECT coalesce(sum(events), 0) FROM batches").fetchone()[0]


def export(name, db, fmt, *opts):
    out = os.path.join(args.workdir, name + (".pftrace.gz" if fmt == "trace" else ".json"))
    t = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb=%M", M, "export", db] + list(opts) +
                       ["--" + fmt, out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    secs = time.monotonic() - t
    assert p.returncode == 0, p.stderr
    msg = [x for x in p.stderr.splitlines() if x.startswith("meridian export")][-1]
    rss = int(p.stderr.split("maxrss_kb=")[1].split()[0])
    size = os.path.getsize(out)
    if fmt == "trace":
        events = int(msg.split(": ")[2].split(" events")[0])
    else:
        events = int(msg.split(": ")[2].split(" trace events")[0])
    extra = ""
    if fmt == "perfetto":  # what gzip would make of the JSON, for comparison
        gz = out + ".gz"
        with open(out, "rb") as f, gzip.open(gz, "wb", 6) as g:
            shutil.copyfileobj(f, g)
        extra = "gzip -6 of it: %d bytes, %.1f per event" % (
            os.path.getsize(gz), os.path.getsize(gz) / max(events, 1))
        os.unlink(gz)
    say("| %s | %s%s | %d | %d | %d | **%.1f** | %.1f | %.1f s | %d MB | %s |" % (
        name, fmt, " " + " ".join(opts) if opts else "", db_events(db), events, size,
        size / max(events, 1), size / max(db_events(db), 1), secs, rss // 1024, extra))
    if args.check and fmt == "trace":
        import pfcheck
        t = time.monotonic()
        res = pfcheck.check(out, db, os.path.join(ROOT, "..", "shared", "third_party",
                                                  "perfetto"))
        say("|  | checked: %d rows, %d collective flows, %d op->kernel flows, %d tracks "
            "(protoc decode + pfcheck, %.0f s) | | | | | | | | |" % (
                res["rows"], res["collective_flows"], res["link_flows"], res["tracks"],
                time.monotonic() - t))
    if fmt == "perfetto":
        os.unlink(out)
    return size, events


def main():
    cpu = ""
    try:
        cpu = [x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo")
               if x.startswith("model name")][0]
    except (OSError, IndexError):
        pass
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    say("\n## %s, commit %s\n" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit))
    say("Machine: %s, %d cores (%s), Python %s. Command: `python3 tests/bench/export/"
        "bench_export.py %s`\n" % (platform.platform(), os.cpu_count(), cpu,
                                   platform.python_version(), " ".join(sys.argv[1:])))
    say("| database | format | db events | trace events | bytes | bytes/event | "
        "bytes/db event | time | peak RSS | |")
    say("|---|---|---|---|---|---|---|---|---|---|")
    qs = os.path.join(args.workdir, "quickstart.db")
    with gzip.open(os.path.join(ROOT, "tests", "data", "h200-quickstart.db.gz")) as f, \
            open(qs, "wb") as o:
        shutil.copyfileobj(f, o)
    rec = rundb.make_db(M, D, os.path.join(args.workdir, "recorded"),
                        [os.path.join(ROOT, "tests", "data", "ref-rank%d.mrdcap" % r)
                         for r in (0, 1)])
    for name, db in (("h200-quickstart (2 ranks)", qs), ("ref captures replayed (2 ranks)", rec)):
        export(name, db, "trace")
        export(name, db, "trace", "--api")
        export(name, db, "perfetto")
    t = time.monotonic()
    per_rank = args.events // args.ranks
    syn = rundb.make_db(M, D, os.path.join(args.workdir, "synthetic"),
                        ["--ranks", str(args.ranks), "--events", str(per_rank),
                         "--mix", "training"], timeout=3600)
    name = "synthetic %d ranks x %d (replay generator, training mix)" % (args.ranks, per_rank)
    say("|  | (database made and finalized in %.0f s) | | | | | | | | |" % (
        time.monotonic() - t))
    export(name, syn, "trace")
    export(name, syn, "trace", "--api")
    export(name, syn, "perfetto")
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
