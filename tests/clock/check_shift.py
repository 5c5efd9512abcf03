#!/usr/bin/env python3
"""check_shift.py: was a known clock shift of one rank recovered? (issue 4, GPU host)

Two ranks on one host share its CLOCK_MONOTONIC_RAW; one of them ran in a time namespace
shifted by S seconds, so at every instant its local clock reads exactly S s more than the
other's. The fitted models must say so: for local times L0 of the reference rank, the
shifted rank's local time of the same global instant is L1 = map1^-1(map0(L0)), and
L1 - L0 - S must be within --max-error-us. Also prints the causality counts of the pair
(clock_causality) and requires zero violations after tightening.
  check_shift.py --db DB --rank 1 --ref-rank 0 --shift-s S [--max-error-us 5] [--judge after]
Lines start with "meridian_clockshift:" (the GPU host script collects them). Exit 0 when
both hold, 1 otherwise.
"""
import argparse
import bisect
import sqlite3
import sys


def load(db, rank, undo):
    rows = db.execute("SELECT local_begin_ns, local_end_ns, offset_ns, drift_ppm, error_bound_ns"
                      " FROM clock_models WHERE rank = ? ORDER BY segment", (rank,)).fetchall()
    if undo:
        try:
            s = db.execute("SELECT shift_ns FROM clock_adjustments WHERE rank = ?",
                           (rank,)).fetchone()
        except sqlite3.OperationalError:
            s = None
        if s:
            rows = [(b, e, o - s[0], d, eb) for b, e, o, d, eb in rows]
    return rows


def fwd(m, L):
    j = max(0, bisect.bisect_right([r[0] for r in m], L) - 1)
    b, _, o, d, _ = m[j]
    return L + o + round(d * (L - b) / 1e6)


def inv(m, g):
    L = g - m[0][2]
    for _ in range(6):
        L -= fwd(m, L) - g
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--ref-rank", type=int, default=0)
    ap.add_argument("--shift-s", type=float, required=True)
    ap.add_argument("--max-error-us", type=float, default=5)
    ap.add_argument("--judge", choices=("fit", "after"), default="fit",
                    help="which models must recover the shift: as fitted (default) or after"
                         " the causality pass (for a deliberately perturbed fit)")
    a = ap.parse_args()
    db = sqlite3.connect(a.db)
    ok = True
    for label, undo in (("fit", True), ("after tightening", False)):
        m0, m1 = load(db, a.ref_rank, undo), load(db, a.rank, undo)
        if not m0 or not m1:
            print("meridian_clockshift: no clock model for rank %d or %d" % (a.ref_rank, a.rank))
            return 1
        b, e = m0[0][0], m0[-1][1]
        errs = []
        for i in range(101):
            L0 = b + (e - b) * i // 100
            errs.append(inv(m1, fwd(m0, L0)) - L0 - round(a.shift_s * 1e9))
        errs.sort()
        worst = max(abs(errs[0]), abs(errs[-1]))
        bound = max(r[4] for r in m0) + max(r[4] for r in m1)
        good = worst <= a.max_error_us * 1000
        if (label == "fit") == (a.judge == "fit"):
            ok &= good
        print("meridian_clockshift: %s: shift %+.3f s recovered with error median %+.3f us,"
              " worst %.3f us (goal %.1f us, bounds sum %.3f us)%s"
              % (label, a.shift_s, errs[50] / 1e3, worst / 1e3, a.max_error_us, bound / 1e3,
                 "" if good or (label == "fit") != (a.judge == "fit") else "  <-- MISSED"))
    try:
        r = db.execute("SELECT instances, violations_before, violations_after,"
                       " max_violation_before_ns FROM clock_causality WHERE rank_a = ? AND"
                       " rank_b = ?", (min(a.rank, a.ref_rank), max(a.rank, a.ref_rank))).fetchone()
    except sqlite3.OperationalError:
        r = None
    if not r:
        print("meridian_clockshift: causality: no matched collective instances of the pair")
        return 1
    print("meridian_clockshift: causality: %d instances, %d violations before tightening (max"
          " %.2f us), %d after" % (r[0], r[1], r[3] / 1e3, r[2]))
    ok &= r[2] == 0 and r[0] > 0
    print("meridian_clockshift: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
