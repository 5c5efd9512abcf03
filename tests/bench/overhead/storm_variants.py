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
  plain_pin, bare_pin, meridian_pin   the same three with the launching thread alone on
                         CPU 0 (kernel_storm --pin-cpu 0) and every other thread of the
                         job, and meridiand, on CPUs 1..n-1 (taskset): tests whether
                         meridian's busy threads slow the launcher by sharing its CPU
--variants picks which (comma-separated; default: the first six).
Rounds alternate every variant once, order rotated each round. Per variant: median
us_per_launch (p25-p75), and the storm's own stall counts (launches over 50 us, their
total ms: a launching thread blocked by a callback shows there), and what the agents lost.
Output: a Markdown table on stdout. Usage:
  storm_variants.py --storm BIN --bare LIB --meridian CLI --agent-lib LIB [--rounds 8]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

VARIANTS = {
    "plain": None, "bare": None, "meridian": {},
    "meridian_noflush": {"MERIDIAN_CUPTI_FLUSH_MS": "0"},
    "meridian_nopace": {"MERIDIAN_CUPTI_PACE": "0"},
    "meridian_neither": {"MERIDIAN_CUPTI_FLUSH_MS": "0", "MERIDIAN_CUPTI_PACE": "0"},
    "plain_pin": None, "bare_pin": None, "meridian_pin": {},
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
    elif not variant.startswith("plain"):
        env.update(VARIANTS[variant])
        argv = [a.meridian, "profile", "--single", "-o", db, "--agent-lib", a.agent_lib,
                "--"] + argv
    if pinned:
        argv = ["taskset", "-c", f"1-{os.cpu_count() - 1}"] + argv
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
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
    s = sorted(vals)
    i = f * (len(s) - 1)
    lo = int(i)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (i - lo)


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
    a = ap.parse_args()
    names = a.variants.split(",")
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    if any(v.endswith("_pin") for v in names) and (os.cpu_count() or 1) < 2:
        ap.error("pinned variants need at least 2 CPUs")
    rows = {v: [] for v in names}
    for r in range(a.rounds):
        k = r % len(names)
        for v in names[k:] + names[:k]:
            got = run(a, v, os.path.join(a.work, f"storm_{v}_{r}.db"))
            if got:
                rows[v].append(got)
        print(f"storm_variants: round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)

    def median_of(v):
        return statistics.median(x["us"] for x in rows[v]) if rows.get(v) else None

    print("| variant | us/launch median | p25-p75 | added / bare's added | stalls median | "
          "stall ms median | lost (max) | n |")
    print("|---|---|---|---|---|---|---|---|")
    for v in names:
        xs = rows[v]
        if not xs:
            print(f"| {v} | - | - | - | - | - | - | 0 |")
            continue
        us = [x["us"] for x in xs]
        med = statistics.median(us)
        ratio = "-"
        sfx = "_pin" if v.endswith("_pin") else ""  # pinned variants against pinned ones
        base, bare = median_of("plain" + sfx), median_of("bare" + sfx)
        if base is not None and bare is not None and bare > base and \
                not v.startswith(("plain", "bare")):
            ratio = f"{(statistics.median(us) - base) / (bare - base):.3f}"
        lost = max((x.get("lost", 0) for x in xs), default=0)
        print(f"| {v} | {med:.3f} | {q(us, .25):.3f}-{q(us, .75):.3f} | {ratio} | "
              f"{statistics.median(x['stalls'] for x in xs):.0f} | "
              f"{statistics.median(x['stall_ms'] for x in xs):.2f} | {lost} | {len(xs)} |")
    return 0 if all(rows[v] for v in names) else 1


if __name__ == "__main__":
    sys.exit(main())
