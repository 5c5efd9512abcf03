#!/usr/bin/env python3
"""CUPTI-style bursts through the real agent into a real meridiand (CTest agent_burst).

meridian-agent-burst (burst_driver.c) replays what a storm of tiny kernel launches gives
the agent on a GPU host: CUPTI buffers of --burst records (kernel + runtime-API pairs)
completed one after another on one "CUPTI worker" thread at --rate records/s for --seconds,
then the buffer still open at exit (--exit-left records) delivered by the exit flush. Each
run gets a fresh meridiand and database on 127.0.0.1 and is checked:

  - the agent's exit line reports `lost 0` (unless --no-assert);
  - the database holds every launch exactly once: kernels and api_calls each have one row
    per launch, with correlation ids 1..N (count, distinct count and sum);
  - CUPTI's own counters reach agent_counters through the Goodbye (category cupti): one
    OVERHEAD record of 2,500 ns per buffer, exit buffer included;
  - with --check-late only: the worker never fell further behind its schedule than CUPTI's
    pool could absorb (late_max < (pool buffers - 2) buffer intervals; the pool is 16
    buffers by default), i.e. the pacing cannot have moved the loss into CUPTI's own drops.
    A throughput figure of the machine it runs on (a loaded CI machine starves the flusher
    and fails it with correct code), so CTest prints it and tests/agent/RESULTS.md's
    measurements assert it; what CTest asserts does not depend on timing.

With --runs N it repeats and prints one line per run plus a summary (drops, achieved
rate, flusher CPU), which is how tests/agent/RESULTS.md was measured.

Usage: burst_test.py --meridiand PATH --burst-exe PATH [--runs N] [--rate R] [--seconds S]
                     [--burst N] [--exit-left N] [--no-assert] [--check-late] [--env K=V ...]
                     [--keep]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transport_test as tt  # noqa: E402  (Daemon, agent_env, db_query)

POOL_BUFFERS = 16  # MERIDIAN_CUPTI_BUFFERS default (agent/capture/cupti.c)
OVERHEAD_NS = 2500  # the OVERHEAD record in every buffer (burst_driver.c)


def run_once(a, wd, i):
    d = tt.Daemon(a.meridiand, wd)
    d.start()
    extra = dict(kv.split("=", 1) for kv in a.env)
    env = tt.agent_env(d.port, **extra)
    cmd = [a.burst_exe, "--rate", str(a.rate), "--seconds", str(a.seconds), "--burst",
           str(a.burst), "--exit-left", str(a.exit_left)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=150)  # the exit flush may take up to 60 s (agent_env)
    took = time.monotonic() - t0
    d.stop()
    out, err = p.stdout, p.stderr
    if p.returncode != 0:
        tt.fail("run %d: exit code %d\nstdout: %s\nstderr: %s" % (i, p.returncode, out, err))
    m = re.search(r"burst: records=(\d+) launches=(\d+) buffers=(\d+) elapsed_ms=([0-9.]+)"
                  r" rate=(\d+) hold_max_ms=([0-9.]+) hold_sum_ms=([0-9.]+)"
                  r" late_max_ms=([0-9.-]+) flusher_cpu_ms=([0-9.-]+)", out)
    mx = re.search(r"burst-exit: records=(\d+) hold_ms=([0-9.]+)", out)
    ml = re.search(r"meridian: rank \d+: sent (\d+) events in (\d+) batches; lost (\d+)"
                   r"(?: \(([^)]*)\))?", err)
    if not (m and mx and ml):
        tt.fail("run %d: output not understood\nstdout: %s\nstderr: %s" % (i, out, err))
    r = {"records": int(m.group(1)), "launches": int(m.group(2)), "buffers": int(m.group(3)),
         "elapsed_ms": float(m.group(4)), "rate": int(m.group(5)),
         "hold_max_ms": float(m.group(6)), "hold_sum_ms": float(m.group(7)),
         "late_max_ms": float(m.group(8)), "flusher_cpu_ms": float(m.group(9)),
         "exit_records": int(mx.group(1)), "exit_hold_ms": float(mx.group(2)),
         "sent": int(ml.group(1)), "batches": int(ml.group(2)), "lost": int(ml.group(3)),
         "loss": ml.group(4) or "", "wall_s": took}
    launches = r["launches"] + r["exit_records"] // 2
    r["stored_k"], r["distinct_k"], r["sum_k"] = tt.db_query(
        d.db, "SELECT COUNT(*), COUNT(DISTINCT correlation_id), COALESCE(SUM(correlation_id),0)"
              " FROM kernels")[0]
    r["stored_a"], r["distinct_a"], r["sum_a"] = tt.db_query(
        d.db, "SELECT COUNT(*), COUNT(DISTINCT correlation_id), COALESCE(SUM(correlation_id),0)"
              " FROM api_calls")[0]
    r["cupti"] = dict(tt.db_query(d.db, "SELECT name, value FROM agent_counters"
                                        " WHERE category = 'cupti'"))
    r["want"] = launches
    r["want_sum"] = launches * (launches + 1) // 2
    print("run %d: %d+%d records, %d buffers, rate %d/s, lost %d%s; stored %d kernels %d api;"
          " hold max %.1f ms, exit hold %.1f ms, late max %.1f ms, flusher cpu %.0f ms,"
          " %d batches, %.2f s" %
          (i, r["records"], r["exit_records"], r["buffers"], r["rate"], r["lost"],
           " (%s)" % r["loss"] if r["loss"] else "", r["stored_k"], r["stored_a"],
           r["hold_max_ms"], r["exit_hold_ms"], r["late_max_ms"], r["flusher_cpu_ms"],
           r["batches"], took), flush=True)
    return r


def check_run(a, r, i):
    tt.check(r["lost"] == 0, "run %d: lost %d (%s)" % (i, r["lost"], r["loss"]))
    for k in ("k", "a"):
        what = "kernels" if k == "k" else "api_calls"
        tt.check(r["stored_" + k] == r["want"], "run %d: %s stored %d, launched %d"
                 % (i, what, r["stored_" + k], r["want"]))
        tt.check(r["distinct_" + k] == r["want"] and r["sum_" + k] == r["want_sum"],
                 "run %d: %s ids not exactly 1..%d (distinct %d, sum %d)"
                 % (i, what, r["want"], r["distinct_" + k], r["sum_" + k]))
    buffers = r["buffers"] + 1  # the exit buffer too
    want = {"overhead_records": buffers, "overhead_ns": buffers * OVERHEAD_NS,
            "unknown_records": 0, "pool_misses": 0}
    pace = ("pace_waits", "pace_wait_ns")  # how many depends on the machine: checked below
    tt.check({k: v for k, v in r["cupti"].items() if k not in pace} == want
             and set(pace) <= set(r["cupti"]), "run %d: agent_counters cupti %r, expected %r"
             " and the pace counters" % (i, r["cupti"], want))
    waits, wait_ns = r["cupti"].get("pace_waits"), r["cupti"].get("pace_wait_ns")
    tt.check(isinstance(waits, int) and isinstance(wait_ns, int) and (waits == 0) == (wait_ns == 0),
             "run %d: pace counters %r / %r (a wait takes time)" % (i, waits, wait_ns))
    print("run %d: CUPTI's thread waited for ring space %s times, %.1f ms" %
          (i, waits, (wait_ns or 0) / 1e6))
    interval_ms = a.burst / a.rate * 1000.0
    print("run %d: the completion thread fell at most %.1f ms behind its schedule (%.1f buffer"
          " intervals; CUPTI's pool absorbs %d)" % (i, r["late_max_ms"],
                                                    r["late_max_ms"] / interval_ms,
                                                    POOL_BUFFERS - 2))
    if not a.check_late:
        return
    tt.check(r["late_max_ms"] < (POOL_BUFFERS - 2) * interval_ms,
             "run %d: the completion thread fell %.1f ms behind (%.1f buffers): CUPTI's pool"
             " of %d would have run out" % (i, r["late_max_ms"], r["late_max_ms"] / interval_ms,
                                            POOL_BUFFERS))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meridiand", required=True)
    ap.add_argument("--burst-exe", required=True)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--rate", type=int, default=400000)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--burst", type=int, default=30000)
    ap.add_argument("--exit-left", type=int, default=30000)
    ap.add_argument("--env", action="append", default=[], help="extra agent env K=V")
    ap.add_argument("--no-assert", action="store_true", help="measure only")
    ap.add_argument("--check-late", action="store_true",
                    help="also assert the completion thread's lateness (a throughput figure)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    runs, ok = [], False
    wd = tempfile.mkdtemp(prefix="mrd-agent-burst-")
    try:
        for i in range(a.runs):
            rwd = os.path.join(wd, "run%d" % i)
            os.mkdir(rwd)
            r = run_once(a, rwd, i)
            runs.append(r)
            if not a.no_assert:
                check_run(a, r, i)
        lost = [r["lost"] for r in runs]
        print("summary: %d runs at %d records/s for %.1f s (bursts of %d, %d at exit):"
              " runs with loss %d, lost median %d max %d (of ~%d); achieved rate median %d/s;"
              " flusher cpu median %.0f ms; hold max %.1f ms; exit hold max %.1f ms" %
              (len(runs), a.rate, a.seconds, a.burst, a.exit_left,
               sum(1 for x in lost if x), statistics.median(lost), max(lost),
               runs[0]["records"] + runs[0]["exit_records"],
               statistics.median(r["rate"] for r in runs),
               statistics.median(r["flusher_cpu_ms"] for r in runs),
               max(r["hold_max_ms"] for r in runs), max(r["exit_hold_ms"] for r in runs)))
        ok = True
    finally:
        tt.cleanup(wd, ok, a.keep)


if __name__ == "__main__":
    main()
