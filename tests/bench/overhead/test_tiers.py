#!/usr/bin/env python3
"""test_tiers.py: CI test of tiers.py's report (the between-process always-on benchmark)
without a GPU: `--report-only` on a hand-made CSV whose figures are known.

Storm, 8 paired rounds: plain's mean step 4.2 ms and median outside windows 4.0 ms in every
round; steady's mean 1.03 x plain's, its outside-window medians 0.97, 0.98, 0.99, 1.00, 1.01,
1.02, 1.03 and 1.05 x plain's (in a shuffled round order). A ninth round has plain only, a
tenth a failed steady run (rc 1): neither is paired. The report must give steady/plain
1.0300 with the exact interval 1.0300-1.0300 for the mean step, and 1.0050 with the median's
distribution-free interval 0.9700-1.0500 (the 1st and 8th of 8: the 2nd and 7th would cover
only 93%) outside windows; gpt2 with 5 rounds has too few for that interval ("exact [-]").

Also the budget of run_resumable (shared with inproc.py), on a clock the test drives: runs
of 10 s under a 25 s budget. The third run would start at 20 s and end at 30 s, after the
budget, so exactly 2 run (a rule that only stops starting runs after the budget runs 3);
with --resume the next call runs the rest, and rows already in the CSV are not run again.
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tiers  # noqa: E402  (the module under test, beside this file)
FIELDS = ["round", "workload", "mode", "variant", "steps", "mean_ms", "median_ms",
          "outside_median_ms", "wall_s", "rc", "machine"]


def row(rnd, mode, variant, mean, outside, rc=0):
    return dict(round=rnd, workload="storm" if mode == "storm" else "py", mode=mode,
                variant=variant, steps=600, mean_ms="%.6f" % mean, median_ms="%.6f" % mean,
                outside_median_ms="%.6f" % outside, wall_s=3, rc=rc, machine="m")


def check_budget(tmp):
    """run_resumable: what runs under a 25 s budget when every run takes 10 s; then a resume."""
    now = [0.0]
    ran = []

    def run(rnd, w, v, writer):
        now[0] += 10.0
        ran.append(rnd)
        row = dict(round=rnd, workload=w, mode=w, variant=v, steps=1, mean_ms=1, median_ms=1,
                   outside_median_ms=1, wall_s=10, rc=0, machine="m")
        writer.writerow(row)
        return [row]
    plan = [(rnd, "storm", "plain") for rnd in range(1, 6)]
    a = argparse.Namespace(csv=os.path.join(tmp, "b.csv"), resume=False, budget_s=25)
    first = tiers.run_resumable(a, plan, FIELDS, run, "test", clock=lambda: now[0])
    a.resume = True
    second = tiers.run_resumable(a, plan, FIELDS, run, "test", clock=lambda: now[0])
    problems = []
    if ran[:2] != [1, 2] or len(first) != 2:
        problems.append(f"first call ran rounds {ran[:len(first)]}, want [1, 2] (25 s budget, "
                        f"10 s runs)")
    if ran != [1, 2, 3, 4] or len(second) != 4:
        problems.append(f"the resumed call ran {ran[2:]} (rows {len(second)}), want [3, 4] "
                        f"and 4 rows")
    return problems


def main():
    rows = []
    for rnd, k in zip(range(1, 9), (1.02, 0.97, 1.05, 1.00, 0.99, 1.03, 0.98, 1.01)):
        rows += [row(rnd, "storm", "plain", 4.2, 4.0), row(rnd, "storm", "steady", 4.2 * 1.03,
                                                             4.0 * k)]
    rows += [row(9, "storm", "plain", 4.2, 4.0), row(10, "storm", "plain", 4.2, 4.0),
             row(10, "storm", "steady", 9.0, 9.0, rc=1)]
    for rnd, k in zip(range(1, 6), (1.01, 1.02, 1.00, 1.04, 0.99)):
        rows += [row(rnd, "gpt2", "plain", 30.0, 30.0), row(rnd, "gpt2", "steady", 30.0 * k,
                                                            30.0 * k)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, FIELDS)
            w.writeheader()
            w.writerows(rows)
        p = subprocess.run([sys.executable, os.path.join(HERE, "tiers.py"), "--build", "x",
                            "--meridian", "x", "--agent-lib", "x", "--report-only", "--csv",
                            path], capture_output=True, text=True, timeout=60)
        problems = check_budget(tmp)
    out = p.stdout + p.stderr
    want = (r"storm +steady/plain \(mean step\) +1\.0300  \[1\.0300-1\.0300\]  "
            r"exact \[1\.0300-1\.0300\]  n=8  goal <= 1\.03",
            r"storm +steady/plain \(median outside windows\) +1\.0050  \[[0-9.]+-[0-9.]+\]  "
            r"exact \[0\.9700-1\.0500\]  n=8  goal within 1%",
            r"gpt2 +steady/plain \(mean step\) +1\.0100  \[[0-9.]+-[0-9.]+\]  exact \[-\]  n=5",
            r"storm +plain +mean +4\.2000 .* rounds 10 ")
    missing = [w for w in want if not re.search(w, out)]
    if p.returncode != 0 or missing or problems:
        print(f"test_tiers: FAIL: exit {p.returncode}, missing {missing}, budget {problems}"
              f"\n{out}")
        return 1
    print("test_tiers: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
