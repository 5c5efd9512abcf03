#!/usr/bin/env python3
"""check_windows.py: did the steady tier's windows capture exactly their steps' kernels?

Where it sits: run on the GPU host (tests/gpu/run_on_gpu_host.sh, stage `windows`) on the
database of `meridian profile` over `kernel_storm --steps N` with MERIDIAN_TRACE=steady and
range windows (MERIDIAN_WINDOWS=A-B,C-D,...). kernel_storm launches K kernels a step, each
step an NVTX range "step I" ending in a stream sync, so the truth is known:

  1. one window record (a window event; from older agents an NVTX range in domain
     "meridian.window") per window, naming the
     window's first and last step;
  2. every kernel of a window step was stored: per window, the kernels launched inside its
     steps' ranges number exactly (B-A+1)*K;
  3. no kernel of any other step (the detach step included) and none of the warm-up: the
     database holds exactly sum((B-A+1)*K) kernels in all.

Prints one line per check and `check_windows: N/N checks passed`; exit 0 when all pass.
Usage: check_windows.py --db DB --windows 5-9,20-24 --per-step K [--rank 0]
"""
import argparse
import re
import sqlite3
import sys


def parse_windows(spec):
    out = []
    for term in spec.split(","):
        a, _, b = term.strip().partition("-")
        out.append((int(a), int(b or a)))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--windows", required=True, help="A-B,C-D (ranges only)")
    ap.add_argument("--per-step", type=int, required=True)
    ap.add_argument("--rank", type=int, default=0)
    a = ap.parse_args(argv)
    wins = parse_windows(a.windows)
    db = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    q = db.execute
    results = []

    def check(name, ok, detail):
        results.append(ok)
        print(f"check_windows: {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)

    # the window events (window_records), written as the message older agents sent as an
    # NVTX range in domain meridian.window (read too)
    recs = []
    if q("SELECT 1 FROM sqlite_master WHERE name = 'window_records'").fetchone():
        recs = q("SELECT w.start_ns, w.end_ns, w.first_step || '-' || w.last_step || ' ' || "
                 "s.value || ' a=' || (w.attach_ns / 1000) || ' d=' || (CASE WHEN "
                 "w.detach_ns < 0 THEN -1 ELSE w.detach_ns / 1000 END) || ' f=' || "
                 "(w.flush_ns / 1000) FROM window_records w LEFT JOIN strings s ON s.id = "
                 "w.reason_id WHERE w.rank = ?", (a.rank,)).fetchall()
    recs += q("SELECT n.start_ns, n.end_ns, s.value FROM nvtx n JOIN strings d ON d.id = "
              "n.domain_id LEFT JOIN strings s ON s.id = n.name_id WHERE n.rank = ? AND "
              "d.value = 'meridian.window'", (a.rank,)).fetchall()
    recs.sort()
    got = []
    for _, _, msg in recs:
        m = re.match(r"(\d+)-(\d+) (\w+) a=(-?\d+) d=(-?\d+) f=(-?\d+)", msg or "")
        if m:
            got.append((int(m.group(1)), int(m.group(2))))
        print(f"check_windows: window record {msg!r}", flush=True)
    check("window records", got == wins, f"expected {wins}, found {got}")

    steps = q("SELECT n.start_ns, n.end_ns, s.value FROM nvtx n LEFT JOIN strings s ON "
              "s.id = n.name_id LEFT JOIN strings d ON d.id = n.domain_id WHERE n.rank = ? "
              "AND n.kind = 1 AND s.value LIKE 'step %' AND d.value IS NULL ORDER BY "
              "n.start_ns", (a.rank,)).fetchall()
    by_step = {}
    for s0, s1, name in steps:
        by_step[int(name.split()[1])] = (s0, s1)
    kernels = [r[0] for r in q("SELECT start_ns FROM kernels WHERE rank = ?", (a.rank,))]
    total_expected = sum((b - w + 1) * a.per_step for w, b in wins)
    check("kernels in all", len(kernels) == total_expected,
          f"{len(kernels)} stored, {total_expected} launched in window steps")
    inside_any = 0
    for w, b in wins:
        if w not in by_step or b not in by_step:
            check(f"window {w}-{b}", False, "its step ranges are missing")
            continue
        lo, hi = by_step[w][0], by_step[b][1]
        n = sum(1 for k in kernels if lo <= k <= hi)
        inside_any += n
        check(f"window {w}-{b}", n == (b - w + 1) * a.per_step,
              f"{n} kernels inside steps {w}-{b}, {(b - w + 1) * a.per_step} launched there")
    check("no kernel outside the window steps", len(kernels) - inside_any == 0,
          f"{len(kernels) - inside_any} outside")
    counters = q("SELECT name, SUM(value) FROM agent_counters WHERE category = 'window' "
                 "GROUP BY name").fetchall() if q(
        "SELECT 1 FROM sqlite_master WHERE name = 'agent_counters'").fetchone() else []
    print("check_windows: counters " + " ".join(f"{k}={v}" for k, v in counters), flush=True)
    print(f"check_windows: {sum(results)}/{len(results)} checks passed", flush=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
