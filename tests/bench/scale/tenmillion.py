#!/usr/bin/env python3
"""Ten million events: finalize, report and diff on one database of 64 replayed ranks.

Issue 11 item 9's goal: on this machine a database of 10,000,000 events (64 ranks of
`meridian replay`'s training mix sent through a real meridiand, finalize included) is
finalized and reported in at most 30 s and 1 GiB.

  tests/bench/scale/tenmillion.py [--build DIR] [--ranks 64] [--events 156250] [--reps 3]

What it does:
  1. Builds the databases once and caches them under BUILD/bench-scale/, keyed by the
     generator's parameters (ranks, events per rank, mix, seed, batch size) and a hash of
     the generator's and the schema's source: a fresh meridiand, `meridian-replay --ranks
     64 --events 156250 --mix training --seed S` as fast as acknowledgements allow,
     SIGTERM, then a row count of every event table (the sum must equal what the senders
     reported). Two runs: A (seed 1) and B (seed 2, for the diff). The cached files are the
     un-finalized databases as meridiand left them.
  2. Measures with /usr/bin/time -v, REPS repetitions each, medians:
       finalize      `meridian finalize` on a fresh copy of A (the copy is not timed);
       report        `meridian report` (text) on the finalized A;
       report --json `meridian report --json` on the finalized A;
       diff          `meridian diff A B` (both finalized).
     Wall time, user+sys CPU time (wall is noisy on a shared 2-core machine) and max RSS.
  3. Prints the verdicts: finalize + report (text) wall, and the same for --json, <= 30 s;
     every command's max RSS <= 1 GiB.

Benchmarks are scripts that measure and print, not tests: record what it printed, the
machine and the command in tests/bench/scale/RESULTS.md. Python 3 standard library only.
"""
import argparse
import hashlib
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--build", default=os.environ.get("MRD_BUILD_DIR", "build"))
ap.add_argument("--ranks", type=int, default=64)
ap.add_argument("--events", type=int, default=156250, help="events per rank")
ap.add_argument("--mix", default="training")
ap.add_argument("--seed", type=int, default=1, help="seed of A; B uses seed + 1")
ap.add_argument("--batch-events", type=int, default=4096)
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--only", default="finalize,report,json,diff",
                help="comma-separated subset of finalize,report,json,diff")
ap.add_argument("--goal-s", type=float, default=30.0)
ap.add_argument("--goal-rss-mib", type=float, default=1024.0)
a = ap.parse_args()

top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
build = a.build if os.path.isabs(a.build) else os.path.join(top, a.build)


def exe(rel):
    p = os.path.join(build, rel)
    if not os.access(p, os.X_OK):
        sys.exit("tenmillion: %s not built (ninja -C %s)" % (p, build))
    return p


MERIDIAND = exe("aggregator/daemon/meridiand")
REPLAY = exe("launcher/replay/meridian-replay")
MERIDIAN = exe("launcher/meridian")
TIME = "/usr/bin/time"
if not os.access(TIME, os.X_OK):
    sys.exit("tenmillion: needs GNU time at /usr/bin/time (apt-get install time)")
cache = os.path.join(build, "bench-scale")
os.makedirs(cache, exist_ok=True)
work = tempfile.mkdtemp(prefix="mrd-tenmillion.", dir=cache)

# the event kinds' tables (proto/kinds.h)
EVENT_TABLES = ("kernels", "memcpys", "memsets", "syncs", "api_calls", "graph_launches",
                "external_correlations", "nvtx", "nccl_ops", "nccl_channels", "mpi_calls",
                "clock_samples", "gpu_clock_samples", "gpu_samples", "window_records",
                "env_records")


def source_hash():
    h = hashlib.sha256()
    for rel in ("launcher/replay/gen.c", "launcher/replay/gen.h", "aggregator/store/schema.sql"):
        with open(os.path.join(top, rel), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def unlink_db(path):
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass


def count_events(db):
    """Rows of every event table that exists (an oracle independent of the C code)."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return sum(con.execute("SELECT count(*) FROM %s" % t).fetchone()[0]
                   for t in EVENT_TABLES if t in have)
    finally:
        con.close()


def generate(seed, path):
    """One raw database: a fresh meridiand fed by the replay's ranks, then stopped."""
    secret = os.path.join(work, "secret")
    with open(secret, "w") as f:
        f.write("bench-secret-0123456789abcdef")
    os.chmod(secret, 0o600)
    tmp = path + ".part"
    unlink_db(tmp)
    pf = os.path.join(work, "port")
    if os.path.exists(pf):
        os.unlink(pf)  # the last generation's port: wait for this meridiand's own
    d = subprocess.Popen([MERIDIAND, "--db", tmp, "--listen", "127.0.0.1:0", "--run-id", "bench",
                          "--secret-file", secret, "--port-file", pf, "--quiet"],
                         stdout=subprocess.DEVNULL)
    port = None
    deadline = time.monotonic() + 60
    while port is None and time.monotonic() < deadline:
        try:
            with open(pf) as f:
                port = int(f.read().strip())
        except (OSError, ValueError):
            if d.poll() is not None:
                sys.exit("tenmillion: meridiand exited (rc %s)" % d.returncode)
            time.sleep(0.05)
    if port is None:
        d.kill()
        sys.exit("tenmillion: meridiand did not write its port")
    t0 = time.monotonic()
    try:
        out = subprocess.run([REPLAY, "--aggregator", "127.0.0.1:%d" % port, "--run-id", "bench",
                              "--secret-file", secret, "--report", "-", "--quiet",
                              "--ranks", str(a.ranks), "--events", str(a.events), "--mix", a.mix,
                              "--seed", str(seed), "--batch-events", str(a.batch_events)],
                             stdout=subprocess.PIPE, text=True, timeout=3600)
    finally:
        d.send_signal(signal.SIGTERM)
        rc = d.wait(600)
    secs = time.monotonic() - t0
    m = re.search(r"^replay: .*$", out.stdout, re.M)
    if out.returncode != 0 or not m or rc != 0:
        sys.exit("tenmillion: generating %s failed (replay rc %d, meridiand rc %d):\n%s" % (
            path, out.returncode, rc, out.stdout[-2000:]))
    sent = int(dict(kv.split("=", 1) for kv in m.group(0).split()[1:])["events"])
    stored = count_events(tmp)
    if stored != sent:
        sys.exit("tenmillion: %s holds %d events, the senders sent %d" % (tmp, stored, sent))
    os.rename(tmp, path)
    unlink_db(tmp)  # the empty -wal and -shm meridiand left
    print("generated %s: events=%d seconds=%.1f bytes=%d" % (
        os.path.basename(path), stored, secs, os.path.getsize(path)), flush=True)
    return stored


def raw_db(seed):
    key = "r%d-e%d-%s-s%d-b%d-%s" % (a.ranks, a.events, a.mix, seed, a.batch_events,
                                     source_hash())
    path = os.path.join(cache, "raw-%s.db" % key)
    if os.path.exists(path):
        print("cached %s: events=%d bytes=%d" % (os.path.basename(path), count_events(path),
                                                   os.path.getsize(path)), flush=True)
    else:
        generate(seed, path)
    return path


def copy(src, name):
    dst = os.path.join(work, name)
    unlink_db(dst)
    shutil.copyfile(src, dst)
    return dst


def timed(cmd, out_path):
    """Runs cmd under GNU time; returns (wall s, user+sys s, max RSS MiB)."""
    tv = os.path.join(work, "time.txt")
    with open(out_path, "w") as out:
        r = subprocess.run([TIME, "-v", "-o", tv] + cmd, stdout=out, stderr=subprocess.PIPE,
                           text=True)
    if r.returncode != 0:
        sys.exit("tenmillion: %s failed (rc %d):\n%s" % (" ".join(cmd), r.returncode,
                                                        r.stderr[-2000:]))
    with open(tv) as f:
        t = f.read()
    wall = t.split("Elapsed (wall clock) time (h:mm:ss or m:ss):")[1].split("\n")[0].strip()
    secs = 0.0
    for part in wall.split(":"):
        secs = secs * 60 + float(part)
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", t).group(1))
    sys_ = float(re.search(r"System time \(seconds\): ([\d.]+)", t).group(1))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) / 1024.0
    return secs, user + sys_, rss


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


results = {}


def measure(name, cmd, prepare=None):
    runs = []
    for i in range(a.reps):
        if prepare:
            prepare()
        w, c, r = timed(cmd, os.path.join(work, name + ".out"))
        runs.append((w, c, r))
        print("run %d %-13s wall_s=%.2f cpu_s=%.2f max_rss_mib=%.1f load=%s" % (
            i + 1, name, w, c, r, load()), flush=True)
    med = tuple(statistics.median(x[k] for x in runs) for k in range(3))
    results[name] = (med[0], med[1], max(x[2] for x in runs))
    return med


try:
    commit = subprocess.run(["git", "-C", top, "rev-parse", "--short", "HEAD"],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", top, "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, text=True).stdout.strip()
    print("tenmillion: %d ranks x %d events (%s mix, seed %d, batches of %d), %d repetitions, "
          "%d cores, kernel %s, commit %s%s, load %s" % (
              a.ranks, a.events, a.mix, a.seed, a.batch_events, a.reps, os.cpu_count(),
              os.uname().release, commit, "+changes" if dirty else "", load()), flush=True)
    only = set(a.only.split(","))
    raw_a = raw_db(a.seed)
    fin_a = os.path.join(cache, os.path.basename(raw_a).replace("raw-", "fin-"))
    if not os.path.exists(fin_a) or os.path.getmtime(fin_a) < os.path.getmtime(MERIDIAN):
        shutil.copyfile(raw_a, fin_a + ".part")
        timed([MERIDIAN, "finalize", "--quiet", fin_a + ".part"], os.devnull)
        os.rename(fin_a + ".part", fin_a)
    work_db = os.path.join(work, "finalize.db")
    if "finalize" in only:
        measure("finalize", [MERIDIAN, "finalize", "--quiet", work_db],
                prepare=lambda: copy(raw_a, "finalize.db"))
    if "report" in only:
        measure("report", [MERIDIAN, "report", fin_a])
    if "json" in only:
        measure("report-json", [MERIDIAN, "report", "--json", fin_a])
    if "diff" in only:
        raw_b = raw_db(a.seed + 1)
        fin_b = os.path.join(cache, os.path.basename(raw_b).replace("raw-", "fin-"))
        if not os.path.exists(fin_b) or os.path.getmtime(fin_b) < os.path.getmtime(MERIDIAN):
            shutil.copyfile(raw_b, fin_b + ".part")
            timed([MERIDIAN, "finalize", "--quiet", fin_b + ".part"], os.devnull)
            os.rename(fin_b + ".part", fin_b)
        measure("diff", [MERIDIAN, "diff", fin_a, fin_b])

    events = count_events(raw_a)
    print("events=%d" % events)
    for name, (w, c, r) in results.items():
        print("median %-13s wall_s=%.2f cpu_s=%.2f max_rss_mib=%.1f" % (name, w, c, r))
    if "finalize" in results:
        for rep in ("report", "report-json"):
            if rep not in results:
                continue
            w = results["finalize"][0] + results[rep][0]
            c = results["finalize"][1] + results[rep][1]
            rss = max(results["finalize"][2], results[rep][2])
            ok = w <= a.goal_s and rss <= a.goal_rss_mib
            print("goal finalize+%s: wall_s=%.2f cpu_s=%.2f max_rss_mib=%.1f "
                  "(<= %.0f s, <= %.0f MiB): %s" % (rep, w, c, rss, a.goal_s, a.goal_rss_mib,
                                                    "MET" if ok else "NOT MET"))
    if "diff" in results:
        r = results["diff"][2]
        print("goal diff memory: max_rss_mib=%.1f (<= %.0f MiB): %s" % (
            r, a.goal_rss_mib, "MET" if r <= a.goal_rss_mib else "NOT MET"))
finally:
    shutil.rmtree(work, ignore_errors=True)
