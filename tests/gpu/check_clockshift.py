#!/usr/bin/env python3
"""check_clockshift.py: did meridian recover a clock shift injected from outside the agent?

The clock-shift stage runs the reference workload with one rank inside a time namespace
whose monotonic clocks read SHIFT seconds ahead (tests/gpu/shift_rank.sh). Both ranks run
on one host, so apart from that shift their clocks are the same clock: the fitted models
must differ by exactly the shift. For rank r the model maps local -> global as
    global = local + offset_ns + drift_ppm * (local - local_begin_ns) / 1e6
so the offset of rank 1 evaluated at the instant rank 0 reads L reads (L + SHIFT) on rank 1,
and recovered_shift = offset_0(L) - offset_1(L + SHIFT). The check first asserts that the
shift is visible in the raw data (the ranks' clock samples t0 differ by ~SHIFT), then that
the recovered shift is within --tolerance-us of the truth. Exit 0 only when both hold.
"""
import argparse
import sqlite3
import statistics
import sys


def offset_at(models, local):
    seg = None
    for m in models:  # (local_begin, local_end, offset_ns, drift_ppm, bound)
        if m[0] <= local:
            seg = m
    if seg is None:
        seg = models[0]
    return seg[2] + seg[3] * (local - seg[0]) / 1e6, seg[4]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--shift-s", type=float, required=True, help="injected shift (s)")
    ap.add_argument("--shifted-rank", type=int, default=1)
    ap.add_argument("--ref-rank", type=int, default=0)
    ap.add_argument("--tolerance-us", type=float, default=5.0)
    a = ap.parse_args()
    db = sqlite3.connect(a.db)
    shift_ns = int(round(a.shift_s * 1e9))
    ok = True

    t0 = {}
    for r in (a.ref_rank, a.shifted_rank):
        rows = [x[0] for x in db.execute("SELECT t0 FROM clock_samples WHERE rank=? ORDER BY t0", (r,))]
        if not rows:
            print(f"check_clockshift: FAIL rank {r} has no clock samples")
            return 1
        t0[r] = statistics.median(rows)
    raw_gap = t0[a.shifted_rank] - t0[a.ref_rank]
    visible = abs(raw_gap - shift_ns) < 0.1 * abs(shift_ns)
    print(f"check_clockshift: raw data: median probe t0 of rank {a.shifted_rank} - rank {a.ref_rank}"
          f" = {raw_gap / 1e9:.3f} s (injected {a.shift_s:.3f} s): {'visible' if visible else 'NOT visible'}")
    ok &= visible

    models = {}
    for r in (a.ref_rank, a.shifted_rank):
        models[r] = list(db.execute(
            "SELECT local_begin_ns, local_end_ns, offset_ns, drift_ppm, error_bound_ns "
            "FROM clock_models WHERE rank=? ORDER BY segment", (r,)))
        if not models[r]:
            print(f"check_clockshift: FAIL rank {r} has no clock model")
            return 1
    worst = 0.0
    for q in (0.1, 0.5, 0.9):  # along the run, at rank 0's probe times
        rows = [x[0] for x in db.execute("SELECT t0 FROM clock_samples WHERE rank=? ORDER BY t0",
                                         (a.ref_rank,))]
        local0 = rows[int(q * (len(rows) - 1))]
        off0, b0 = offset_at(models[a.ref_rank], local0)
        off1, b1 = offset_at(models[a.shifted_rank], local0 + shift_ns)
        recovered = off0 - off1
        err_us = (recovered - shift_ns) / 1e3
        worst = max(worst, abs(err_us))
        print(f"check_clockshift: at {q:.0%} of the run: recovered shift {recovered / 1e9:.9f} s, "
              f"error {err_us:+.3f} us (stored bounds {b0 / 1e3:.2f} us, {b1 / 1e3:.2f} us)")
    good = worst <= a.tolerance_us
    print(f"check_clockshift: {'ok' if good else 'FAIL'} worst error {worst:.3f} us "
          f"(tolerance {a.tolerance_us} us)")
    ok &= good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
