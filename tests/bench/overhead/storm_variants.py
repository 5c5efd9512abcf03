#!/usr/bin/env python3
"""storm_variants.py: which part of meridian costs the kernel storm, variant by variant.

Where it sits: a diagnostic beside overhead.py (same workload (a), same bare consumer),
run on the GPU host by tests/gpu/run_on_gpu_host.sh stage `stormdiag`. overhead.py says
how much meridian adds to a storm of tiny launches; this says where it comes from, by
turning one agent mechanism off at a time:
  plain, bare            as in overhead.py
  meridian               `meridian profile --single` with default settings
  meridian_noflush       MERIDIAN_CUPTI_FLUSH_MS=0: no periodic cuptiActivityFlushAll
  meridian_nopace        MERIDIAN_CUPTI_PACE=0: the completion callback never waits
  meridian_neither       both
  bare_k                 the bare consumer with kernel records only (tiers.py's bare)
  bare_kinds             the bare consumer with the kinds meridian's full trace enables by
                         default: CONCURRENT_KERNEL, GRAPH_TRACE, OVERHEAD, DEVICE
  meridian_kernel        MERIDIAN_TRACE_KINDS=kernel (graph launches and NCCL left out)
  plain_pin, bare_pin, meridian_pin   the same three with the launching thread alone on
                         CPU 0 (kernel_storm --pin-cpu 0) and every other thread of the
                         job, and meridiand, on the CPUs that are neither CPU 0 nor its SMT
                         siblings (taskset): tests whether meridian's busy threads slow the
                         launcher by sharing its core
--variants picks which (comma-separated; default: the first six).
Rounds alternate every variant once, order rotated each round. Per variant: median
us_per_launch (p25-p75), and the storm's own stall counts (launches over 50 us, their
total ms: a launching thread blocked by a callback shows there), and what the agents lost.
The added-ratio columns: from medians, the median of per-round ratios (paired: the round's
own plain and bare), and a 95% interval from resampled rounds (overhead.py's method).
Output: a Markdown table on stdout; with --out DIR also DIR/storm_variants.csv, a row
appended as each run ends (a call cut short keeps what it measured). --budget-s starts no
run that, as long as that variant's longest, would end past it, and stops any run at it.
Usage:
  storm_variants.py --storm BIN --bare LIB --meridian CLI --agent-lib LIB [--rounds 8]
                    [--budget-s S] [--out DIR]
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import added_ratio, bootstrap_ci, machine_id, quantile  # noqa: E402

VARIANTS = {
    "plain": None, "bare": None, "meridian": {},
    "meridian_noflush": {"MERIDIAN_CUPTI_FLUSH_MS": "0"},
    "meridian_nopace": {"MERIDIAN_CUPTI_PACE": "0"},
    "meridian_neither": {"MERIDIAN_CUPTI_FLUSH_MS": "0", "MERIDIAN_CUPTI_PACE": "0"},
    "plain_pin": None, "bare_pin": None, "meridian_pin": {},
    "bare_k": {"BARE_CONSUMER_KINDS": "CONCURRENT_KERNEL"},
    "bare_kinds": {"BARE_CONSUMER_KINDS": "CONCURRENT_KERNEL,GRAPH_TRACE,OVERHEAD,DEVICE"},
    "meridian_kernel": {"MERIDIAN_TRACE_KINDS": "kernel"},
}
DEFAULT = ["plain", "bare", "meridian", "meridian_noflush", "meridian_nopace",
           "meridian_neither"]
STORM = re.compile(r"kernel_storm: .*us_per_launch=([0-9.]+) stalls=(\d+) stall_ms=([0-9.]+)")
LOST = re.compile(r"meridian: rank \d+: sent (\d+) events .*lost (\d+)")


def run(a, variant, db):
    env = dict(os.environ)
    argv = [a.storm, "--launches", str(a.launches)]
    pinned = variant.endswith("_pin")
    if pinned:
        argv += ["--pin-cpu", "0"]
    if variant.startswith("bare"):
        env["CUDA_INJECTION64_PATH"] = a.bare
        env.update(VARIANTS[variant] or {})
    elif not variant.startswith("plain"):
        env.update(VARIANTS[variant])
        argv = [a.meridian, "profile", "--single", "-o", db, "--agent-lib", a.agent_lib,
                "--"] + argv
    if pinned:
        argv = ["taskset", "-c", a.others] + argv
    try:
        p = subprocess.run(argv, env=env, capture_output=True, text=True,
                           timeout=min(120.0, a.deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"storm_variants: {variant}: stopped at the budget or after 120 s\n")
        return None
    text = p.stdout + p.stderr
    for f in (db, db + "-wal", db + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    m = STORM.search(text)
    if p.returncode != 0 or not m:
        sys.stderr.write(f"storm_variants: {variant}: rc={p.returncode}\n{text[-2000:]}\n")
        return None
    row = {"us": float(m.group(1)), "stalls": int(m.group(2)), "stall_ms": float(m.group(3))}
    lost = LOST.findall(text)
    if variant.startswith("meridian"):
        if not lost or int(lost[0][0]) == 0:
            sys.stderr.write(f"storm_variants: {variant}: the agent sent nothing\n")
            return None
        row["lost"] = int(lost[0][1])
    return row


def q(vals, f):
    return quantile(sorted(vals), f)


def cpus_off_core0():
    """The CPUs this process may use that are neither CPU 0 nor its SMT siblings, as a
    taskset list ('' when none are left)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list") as f:
            spec = f.read().strip()
    except OSError:
        spec = "0"
    core0 = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        core0.update(range(int(lo), int(hi or lo) + 1))
    return ",".join(str(n) for n in sorted(os.sched_getaffinity(0) - core0 - {0}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--storm", required=True)
    ap.add_argument("--bare", required=True)
    ap.add_argument("--meridian", required=True)
    ap.add_argument("--agent-lib", required=True)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--launches", type=int, default=200000)
    ap.add_argument("--work", default="/tmp")
    ap.add_argument("--variants", default=",".join(DEFAULT))
    ap.add_argument("--budget-s", type=float, default=float("inf"))
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    names = a.variants.split(",")
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    a.others = cpus_off_core0()
    if any(v.endswith("_pin") for v in names) and not a.others:
        ap.error("pinned variants need a CPU outside CPU 0's core")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    rows = {v: [] for v in names}
    rounds_done, start, longest, machine = 0, time.monotonic(), {}, machine_id()
    a.deadline = start + a.budget_s  # no run goes past it (a hung one is stopped there)
    for r in range(a.rounds):
        k = r % len(names)
        for v in names[k:] + names[:k]:
            t0 = time.monotonic()
            if t0 - start + longest.get(v, 0.0) > a.budget_s:
                break
            got = run(a, v, os.path.join(a.work, f"storm_{v}_{r}.db"))
            longest[v] = max(longest.get(v, 0.0), time.monotonic() - t0)
            if got:
                got["round"] = r
                rows[v].append(got)
            if a.out:
                write_csv_row(os.path.join(a.out, "storm_variants.csv"),
                              dict(got or {}, round=r, variant=v, ok=int(bool(got)),
                                   machine=machine))
        else:
            rounds_done = r + 1
            print(f"storm_variants: round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
            continue
        break
    print(f"storm_variants: rounds completed {rounds_done} of {a.rounds}; launcher pinned to "
          f"CPU 0, the rest on CPUs {a.others or '-'} (_pin variants)")
    print_table(names, rows)
    return 0 if all(rows[v] for v in names) else 1


CSV_KEYS = ["round", "variant", "ok", "us", "stalls", "stall_ms", "lost", "machine"]


def write_csv_row(path, row):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_KEYS)
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, "") for k in CSV_KEYS})


def print_table(names, rows):
    def median_of(v):
        return statistics.median(x["us"] for x in rows[v]) if rows.get(v) else None

    def by_round(v):
        return {x["round"]: x["us"] for x in rows.get(v, [])}

    print("| variant | us/launch median | p25-p75 | added / bare's added | stalls median | "
          "stall ms median | lost (max) | n | added ratio, paired median | 95% interval |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for v in names:
        xs = rows[v]
        if not xs:
            print(f"| {v} | - | - | - | - | - | - | 0 | - | - |")
            continue
        us = [x["us"] for x in xs]
        med = statistics.median(us)
        ratio = paired = interval = "-"
        sfx = "_pin" if v.endswith("_pin") else ""  # pinned variants against pinned ones
        base, bare = median_of("plain" + sfx), median_of("bare" + sfx)
        if base is not None and bare is not None and bare > base and \
                not v.startswith(("plain", "bare")):
            ratio = f"{added_ratio(base, bare, med):.3f}"
            p, b, m = by_round("plain" + sfx), by_round("bare" + sfx), by_round(v)
            trip = [[p[r], b[r], m[r]] for r in sorted(m) if r in p and r in b]
            per = [x for x in (added_ratio(*t) for t in trip) if x == x]
            if per:
                paired = f"{statistics.median(per):.3f}"
            lo, hi = bootstrap_ci(trip, lambda rs: added_ratio(
                *[statistics.median(t[i] for t in rs) for i in range(3)]))
            if lo == lo:
                interval = f"{lo:.3f}-{hi:.3f}"
        lost = max((x.get("lost", 0) for x in xs), default=0)
        print(f"| {v} | {med:.3f} | {q(us, .25):.3f}-{q(us, .75):.3f} | {ratio} | "
              f"{statistics.median(x['stalls'] for x in xs):.0f} | "
              f"{statistics.median(x['stall_ms'] for x in xs):.2f} | {lost} | {len(xs)} | "
              f"{paired} | {interval} |")


if __name__ == "__main__":
    sys.exit(main())
