#!/usr/bin/env python3
"""test_inproc.py: CI test of inproc.py (the in-process traced-step benchmark) without a GPU.

A stand-in kernel_storm prints per-step times that depend on how it was started: 1000 us a
step plain; with --bare-windows L/P@O, 1200 us inside those windows and 4000 us on each
window's first step (the attach); under the stand-in `meridian profile` (FAKE_MERIDIAN=1)
1010 us outside windows, 1300 us inside, 5000 us on each window's attach step and 3000 and
2500 us on the two detach steps after it. The stand-in meridian records the windows it ran
in a window_records table at its -o path, as the real store does (FAKE_SHIFT moves them one
step later). The benchmark must report exactly the figures those imply: meridian +28.71%,
bare +20.00%, their ratio 1.4356, the plain null 1.0000, steady-outside/plain 1.0100, the
window's edges +3.990 ms (attach), +1.990 and +1.490 ms (the two detach steps); with
shifted windows it must say so and classify by the recorded ones (same figures); the bare
variant must be given the windows. With an earlier agent (`before`, --before-lib: the
stand-in's detach steps 1 ms slower each) the paired difference must be -2.000 ms and the
10/200 whole-run estimates +0.0499 (window) and +0.0598 (before). With
MERIDIAN_CUPTI_FLUSH_MS=0 (the variant window_noflush) the stand-in's traced steps take
1250 us: added(window_noflush)/added(bare) 1.1881 and -0.0495 against window; the agent's
CUPTI pace counters (the stand-in records rank 0's and another rank's) are reported per
variant from rank 0's (window_nopace: none, and its ring drops); window_barekinds sets both
variables it needs (the stand-in's traced steps 1210 us only with both: -0.0891), and
window_recordonly runs under `meridian run --record-file` with no aggregator in its
environment even where the caller has one (1260 us: -0.0396), its windows the
specification's. With --mixed
(the bare consumer's windows half a period after meridian's in the same process, its steps
there 1.2 x the stand-in meridian's 1010 us) the same ratios come from each process alone,
and the plain run gives two nulls of 1.0000; when every step takes twice as long from
step 195 on (FAKE_JUMP), each window against its neighbours (local) still gives 1.4356 and
1.0000, the whole run's medians do not; with 8/32@4 the bare consumer is given 8/32@20 and
the figures are exact again; window_alone (no bare consumer in meridian's process) is
reported against window, -0.0990 where the stand-in makes meridian's windows dearer beside
the bare consumer (FAKE_INTERACT); the two consumers trade places in even rounds, and with
a cost tied to the place in the period (FAKE_PHASE) each order's ratio is reported (1.9356,
0.9571) and the ratio less each round's plain null is exact again (1.4356), with and without
the trade (--fixed-phases). With MERIDIAN_CUPTI_ALTERNATE (window_alt_kinds: the stand-in
prints the agent's attach lines and runs every second window's traced steps at 1210 us) the
changed windows less the default ones inside each process are -0.0891 (run and local), and
against the bare consumer 1.4356 and 0.9901; a run with an attach line missing is not split.
`--positions` reads the every-step CSV back and puts the stand-in's costs at their exact
places in the window (attach +395.05% against the bare consumer's +296.04%, every traced
step +28.71% against +20.00%, the two detach steps against nothing), and a close of 404 us
(FAKE_CLOSE_US, at the end of the last traced step) comes back as the last position's
+0.404 ms over the others, beside the agent's counted close (window/close_ns: 0.404 ms).
Before all that, the step classification, the local figure, the attach lines' split and
the median's order-statistic interval on hand-made lists where a range one step off changes
the result. A bad window specification, an unknown variant, `before` without a library,
`--positions` without `--report-only` and a resume into a CSV of other columns are refused.
Last, `--rows-from-steps` on run 51's recorded files (GPT-2 on the H200): the rows rebuilt
from its every-step times alone must equal, figure for figure, the rows the live run wrote
(the fields only a run knows left empty); an existing --csv, an ALTERNATE run and a step
given twice (two calls' files reusing round numbers) are refused. And what each consumer
captured (kernels with timings a window step, meridian's kernels missed a process, what
each lost) comes out exact with windows of different step totals traded in even rounds,
and is left out where a window is cut by the run's end.
"""
import csv
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STORM = r'''#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
steps = int(args[args.index("--steps") + 1])
bare = args[args.index("--bare-windows") + 1] if "--bare-windows" in args else None
if bare and os.environ.get("FAKE_BARE_LOG"):
    with open(os.environ["FAKE_BARE_LOG"], "a") as f:
        f.write(bare + "\n")


def windows(spec, shift=0):
    length, rest = spec.split("/")
    period, offset = rest.split("@")
    return [(s, s + int(length) - 1) for s in range(int(offset) + shift, steps, int(period))]


wins = []
before = 1000.0 if os.environ.get("FAKE_AGENT", "").endswith("before.so") else 0.0
if os.environ.get("FAKE_MERIDIAN"):
    wins = windows(os.environ["MERIDIAN_WINDOWS"], int(os.environ.get("FAKE_SHIFT", "0")))
if bare and os.environ.get("BARE_CONSUMER_KINDS") != "CONCURRENT_KERNEL":
    sys.exit("bare consumer without kernel-only kinds")
out = []
alt = os.environ.get("MERIDIAN_CUPTI_ALTERNATE") if os.environ.get("FAKE_MERIDIAN") else None
base = 1010.0 if os.environ.get("FAKE_MERIDIAN") else 1000.0
for i in range(steps):
    us = base
    for f, l in windows(bare) if bare else []:
        if i == f:
            us = 4000.0
        elif f < i <= l:
            us = 1.2 * base
    if os.environ.get("FAKE_MERIDIAN"):
        for k, (f, l) in enumerate(wins):
            if i == f:
                us = 5000.0
            elif f < i <= l and alt and k % 2 == 1:
                us = 1210.0  # MERIDIAN_CUPTI_ALTERNATE's changed windows (every second)
            elif f < i <= l:
                us = 1250.0 if os.environ.get("MERIDIAN_CUPTI_FLUSH_MS") == "0" else 1300.0
                if (os.environ.get("MERIDIAN_CUPTI_SELF_RECORDS") == "0"
                        and os.environ.get("MERIDIAN_TRACE_KINDS") == "kernel"):
                    us = 1210.0  # the bare consumer's kinds alone
                if os.environ.get("FAKE_RECORD"):
                    us = 1260.0  # no daemon beside the job
                if i == l:  # the window's close, at the end of its last step
                    us += float(os.environ.get("FAKE_CLOSE_US", "0"))
                if bare and os.environ.get("FAKE_INTERACT"):
                    us = 1400.0  # meridian's windows dearer beside the bare consumer
            elif i == l + 1:
                us = 3000.0 + before
            elif i == l + 2:
                us = 2500.0 + before
    for f, l in windows(os.environ["FAKE_PHASE"]) if os.environ.get("FAKE_PHASE") else []:
        if f < i <= l:
            us += 0.1 * base  # tied to the place in the period, whoever is attached there
    if os.environ.get("FAKE_JUMP") and i >= 195:
        us *= 2  # the host's step time moves part-way through the run
    out.append("%.1f" % us)
print("kernel_storm: launches=%d wall_s=1 us_per_launch=1 steps=%d launches_per_step=1000"
      % (steps * 1000, steps))
print("kernel_storm: step_us=" + ",".join(out))
if bare:  # the bare consumer's exit line: 1000 kernel records a step it ran attached (3 of
    # them with no timings) and 2 records CUPTI dropped
    n = sum(1 for i in range(steps) for f, l in windows(bare) if f <= i <= l)
    print("bare_consumer: exit pid=1 records=%d kernels=%d memcpy=0 memset=0 sync=0 graph=0 "
          "extcorr=0 driver_api=0 runtime_api=0 overhead=0 device=0 zero_ts_kernels=3 "
          "dropped=2 buffers=1 pool_misses=0 attaches=1 detaches=1" % (n * 1000, n * 1000),
          file=sys.stderr)
for k in range(len(wins) - (1 if os.environ.get("FAKE_ALT_SHORT") else 0)) if alt else []:
    print("meridian: attach %d alternate %s %s" % (k + 1, alt, "changed" if k % 2 else
                                                   "default"), file=sys.stderr)
if wins:
    with open(os.environ["FAKE_WINDOWS_OUT"], "w") as f:
        f.write(" ".join("%d-%d" % w for w in wins))
'''
MERIDIAN = r'''#!/usr/bin/env python3
import os, sqlite3, subprocess, sys
args = sys.argv[1:]
if args[0] == "run":  # record-only: no aggregator, no database; traced steps at 1260 us
    rec = args[args.index("--record-file") + 1]
    if not rec.endswith(".mrdcap") or os.environ.get("MERIDIAN_AGGREGATOR"):
        sys.exit("stand-in meridian run: not record-only")
    sys.exit(subprocess.call(args[args.index("--") + 1:], env=dict(
        os.environ, FAKE_MERIDIAN="1", FAKE_RECORD="1", FAKE_WINDOWS_OUT=rec + ".w",
        FAKE_AGENT=args[args.index("--agent-lib") + 1])))
db = args[args.index("-o") + 1]
work = args[args.index("--") + 1:]
env = dict(os.environ, FAKE_MERIDIAN="1", FAKE_WINDOWS_OUT=db + ".w",
           FAKE_AGENT=args[args.index("--agent-lib") + 1])
rc = subprocess.call(work, env=env)
con = sqlite3.connect(db)
con.execute("CREATE TABLE window_records (rank INTEGER, first_step INTEGER, last_step INTEGER)")
for w in open(db + ".w").read().split():
    f, l = w.split("-")
    con.execute("INSERT INTO window_records VALUES (0, ?, ?)", (int(f), int(l)))
# the agent's counters as the store keeps them: CUPTI's waits for ring space, one of 1.5 ms
# per window, none with pacing off (then 40 records a window lost to a full ring instead);
# rank 1's are not the benchmark's
n = len(open(db + ".w").read().split())
paced = os.environ.get("MERIDIAN_CUPTI_PACE") != "0"
con.execute("CREATE TABLE agent_counters (rank INTEGER, category TEXT, name TEXT, value INTEGER)")
con.executemany("INSERT INTO agent_counters VALUES (?, ?, ?, ?)",
                [(0, "cupti", "pace_waits", n if paced else 0),
                 (0, "cupti", "pace_wait_ns", 1500000 * n if paced else 0),
                 (0, "dropped", "ring_full", 0 if paced else 40 * n),
                 (0, "dropped", "cupti_host", 2), (1, "cupti", "pace_waits", 999),
                 (0, "window", "closes", n), (0, "window", "close_ns", 404000 * n)])
# the kernels stored: 1000 a window step on rank 0, less FAKE_KERNELS_LOST a window; rank
# 1's are not the benchmark's
con.execute("CREATE TABLE kernels (rank INTEGER, start_ns INTEGER)")
lost = int(os.environ.get("FAKE_KERNELS_LOST", "0"))
for w in open(db + ".w").read().split():
    f, l = (int(x) for x in w.split("-"))
    con.executemany("INSERT INTO kernels VALUES (0, ?)",
                    [(i,) for i in range((l - f + 1) * 1000 - lost)])
    con.execute("INSERT INTO kernels VALUES (1, 0)")
con.execute("INSERT INTO agent_counters VALUES (0, 'dropped', 'cupti_device', ?)", (lost * n,))
con.commit()
sys.exit(rc)
'''


def write_pool_files(src, a_path, b_path):
    """Two --pool inputs from one --mixed results CSV: a, its rows on host fakehost-a
    (plus a plain row, which --pool must leave out); b, the same rows on fakehost-b with
    every meridian local figure twice the bare consumer's."""
    with open(src) as f:
        rows = list(csv.DictReader(f))
    fields = list(rows[0].keys())
    for path, host in ((a_path, "fakehost-a"), (b_path, "fakehost-b")):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            for r in rows:
                r = dict(r, machine=host)
                if host == "fakehost-b":
                    double = "%.5f" % (2 * float(r["bare_local_added"]))
                    r["alt_default_local" if r["alt_default_local"] else "local_added"] = double
                w.writerow(r)
            if host == "fakehost-a":
                w.writerow(dict(rows[0], variant="plain", machine=host))


def fail(msg, out):
    print(f"test_inproc: FAIL: {msg}\n--- output ---\n{out}")
    sys.exit(1)


def run(tmp, extra_env, *extra):
    env = dict(os.environ, **extra_env)
    p = subprocess.run([sys.executable, os.path.join(HERE, "inproc.py"), "--build", tmp,
                        "--meridian", os.path.join(tmp, "meridian"), "--agent-lib", "x.so",
                        "--workloads", "storm", "--rounds", "3", "--steps", "400",
                        "--csv", os.path.join(tmp, "r.csv")] + list(extra),
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    return p.returncode, p.stdout


def fresh_run(tmp, extra_env, *extra):
    """run() into a new results CSV; fails unless it exits 0. Returns its output."""
    csv_path = os.path.join(tmp, "r.csv")
    if os.path.exists(csv_path):
        os.unlink(csv_path)
    rc, out = run(tmp, extra_env, *extra)
    if rc != 0:
        fail(f"exit {rc} with {' '.join(extra) or 'the defaults'} {extra_env or ''}", out)
    return out


def expect_lines(out, patterns, tag=""):
    """Fails unless every regular expression of patterns is found in out."""
    for w in patterns:
        if not re.search(w, out):
            fail(f"missing {w!r}" + (f" {tag}" if tag else ""), out)


def expect_figures(out):
    want = [r"meridian +\+28\.71%  bare +\+20\.00%  ratio 1\.436  plain null 1\.0000  "
            r"steady-outside/plain 1\.0100",
            r"added\(meridian\)/added\(bare\) +1\.4356 ",
            r"added by meridian's traced step +0\.2871 ",
            r"added by the bare consumer's +0\.2000 ",
            r"plain: window steps / other steps +1\.0000 ",
            r"the window's first step \(meridian attaches in it\) +\+3\.990  \[",
            r"the step after the window \(closing: the boundary\) +\+1\.990  \[",
            r"the second step after \(flush and cuptiFinalize\) +\+1\.490  \[",
            r"storm +window the close in the last window step \(its own time\) +\+0\.404  \["]
    expect_lines(out, want)
    if out.count("storm        round") != 3:
        fail("want 3 rounds reported", out)


RESULTS = os.path.join(HERE, "..", "..", "gpu", "results")
RUN_ONLY = {"wall_s", "pace_waits", "pace_wait_ms", "ring_full", "cupti_dropped", "close_ms"}


def rebuild_checks(tmp):
    """--rows-from-steps on a real run's recorded files (run 51: GPT-2 on the H200, --mixed
    --windows 8/32@4, 10 processes): every figure of the rows the live run wrote must come
    back from its every-step file alone (the run-only fields empty); an existing --csv and
    an ALTERNATE run (its windows split only by the agent's output) are refused."""
    steps = os.path.join(RESULTS, "run51_steps.csv.gz")
    with open(os.path.join(RESULTS, "run51_gpt2_window.csv")) as f:
        live = {(r["round"], r["variant"]): r for r in csv.DictReader(f)}
    out_csv = os.path.join(tmp, "rebuilt.csv")
    p = subprocess.run([sys.executable, os.path.join(HERE, "inproc.py"), "--build", "x",
                        "--meridian", "x", "--agent-lib", "x", "--rows-from-steps", steps,
                        "--windows", "8/32@4", "--mixed", "--machine", "819978dd", "--csv",
                        out_csv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    if p.returncode != 0 or "10 rows rebuilt from 10 runs' steps" not in p.stdout:
        fail(f"--rows-from-steps on run 51: exit {p.returncode}", p.stdout)
    with open(out_csv) as f:
        rebuilt = {(r["round"], r["variant"]): r for r in csv.DictReader(f)}
    if sorted(rebuilt) != sorted(live):
        fail(f"--rows-from-steps: runs {sorted(rebuilt)}, the live CSV has {sorted(live)}",
             p.stdout)
    wrong = [(k, c, live[k][c], rebuilt[k][c]) for k in live for c in live[k]
             if c not in RUN_ONLY and live[k][c] != rebuilt[k][c]]
    empty = [(k, c) for k in rebuilt for c in RUN_ONLY if rebuilt[k][c]]
    if wrong or empty:
        fail(f"--rows-from-steps differs from the live rows: {wrong[:5]}; run-only fields "
             f"filled: {empty[:5]}", p.stdout)
    again = subprocess.run(p.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
    if again.returncode == 0 or "writes a new --csv" not in again.stdout:
        fail("--rows-from-steps overwrote an existing --csv", again.stdout)
    twice = subprocess.run([sys.executable, os.path.join(HERE, "inproc.py"), "--build", "x",
                            "--meridian", "x", "--agent-lib", "x", "--rows-from-steps",
                            steps + "," + steps, "--windows", "8/32@4", "--mixed", "--csv",
                            os.path.join(tmp, "twice.csv")], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
    if twice.returncode == 0 or "is given twice" not in twice.stdout:
        fail("--rows-from-steps joined two files' steps of the same rounds into one run",
             twice.stdout)
    alt = os.path.join(tmp, "alt_steps.csv")
    with open(alt, "w") as f:
        f.write("round,workload,variant,step,ms\n" +
                "".join(f"1,storm,window_alt_kinds,{i},1.0\n" for i in range(100)))
    p = subprocess.run([sys.executable, os.path.join(HERE, "inproc.py"), "--build", "x",
                        "--meridian", "x", "--agent-lib", "x", "--rows-from-steps", alt,
                        "--csv", os.path.join(tmp, "alt.csv")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    if p.returncode == 0 or "need the agent's attach lines" not in p.stdout:
        fail("--rows-from-steps rebuilt an ALTERNATE run without its attach lines", p.stdout)


def unit_checks():
    """The step classification and the local figure on hand-made step lists (3/20@2 and the
    other consumer at 3/20@12: windows 2-4 and 12-14, their detach steps 5-6 and 15-16),
    where a range one step off changes the result."""
    sys.path.insert(0, HERE)
    import inproc
    import runner
    wins = inproc.window_steps((3, 20, 2), 20)
    other = inproc.window_steps(inproc.mixed_spec((3, 20, 2)), 20)
    if wins != [(2, 4)] or other != [(12, 14)]:
        fail(f"window_steps/mixed_spec gave {wins} and {other}, want [(2, 4)], [(12, 14)]", "")
    ms = [float(i) for i in range(20)]  # each step's time is its index
    traced, untraced = inproc.classify_window_run(ms, wins, other)
    if traced != [3.0, 4.0] or untraced != [0.0, 1.0, 7.0, 8.0, 9.0, 10.0, 11.0, 17.0, 18.0,
                                             19.0]:
        fail(f"classify_window_run: traced {traced} untraced {untraced}", "")
    # window 2-4: traced 3, 4 (median 3.5); neighbours radius 4: 0, 1 before; 7-10 after
    # (5, 6 are detach steps); the other's window 12-14 starts past them: median 7.5
    got = inproc.local_added(ms, wins, other, 4)
    if got != "%.5f" % (3.5 / 7.5 - 1):
        fail(f"local_added {got}, want {3.5 / 7.5 - 1:.5f}", "")
    # one process's two ratios over chosen windows: local from the two local figures above,
    # whole run against the untraced median 9.5 (0, 1, 7-11, 17-19)
    loc, whole = inproc.process_ratios(ms, wins, other, wins, other, 4)
    want = float("%.5f" % (3.5 / 7.5 - 1)) / float("%.5f" % (13.5 / 11.0 - 1))
    if abs(loc - want) > 1e-12 or abs(whole - (3.5 / 9.5 - 1) / (13.5 / 9.5 - 1)) > 1e-12:
        fail(f"process_ratios gave {loc}, {whole}; want {want}, -1.5", "")
    # where the spread comes from: processes that differ (each half as its whole: ratio 1),
    # windows sampled inside a process (halves +-0.2 about wholes within +-0.02: ratio 20)
    if inproc.robust_sd([1, 2, 3, 4, 100]) != 1.4826:
        fail(f"robust_sd {inproc.robust_sd([1, 2, 3, 4, 100])}, want 1.4826", "")
    between = [(x, x, x) for x in (1.0, 1.2, 0.8, 1.1, 0.9)]
    got = inproc.noise_split(between)
    if abs(got[0] - 0.14826) > 1e-9 or abs(got[1] - 0.14826) > 1e-9 or abs(got[2] - 1) > 1e-9:
        fail(f"noise_split of differing processes {got}, want (0.14826, 0.14826, 1)", "")
    within = [(x, x + 0.2, x - 0.2) for x in (1.0, 1.02, 0.98, 1.01, 0.99)]
    got = inproc.noise_split(within)
    if abs(got[0] - 0.014826) > 1e-9 or abs(got[1] - 0.29652) > 1e-9 or abs(got[2] - 20) > 1e-6:
        fail(f"noise_split of sampled windows {got}, want (0.014826, 0.29652, 20)", "")
    # --positions with 2-step windows (2/16@2 beside 2/16@10): one traced position, so no
    # "last position less the others" line, and no failure for want of others
    import contextlib
    import io
    row = dict(round="1", workload="storm", variant="window", rc="0", untraced_ms="1.0",
               bare_windows="2/16@10", windows="2-3 18-19 34-35 50-51", close_ms="")
    ms2 = [1.0 + (0.3 if i % 16 in (3, 11) else 0.0) for i in range(64)]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        inproc.report_positions([row], {(1, "storm", "window"): ms2}, 4)
    if "position  1: meridian  +30.00%  bare  +30.00%" not in buf.getvalue() \
            or "less positions" in buf.getvalue():
        fail("--positions on 2-step windows", buf.getvalue())
    # radius 7 reaches 11 (untraced) and not 12-16 (the other's window and detach steps)
    got = inproc.local_added(ms, wins, other, 7)
    if got != "%.5f" % (3.5 / 8.0 - 1):
        fail(f"local_added radius 7 {got}, want {3.5 / 8.0 - 1:.5f}", "")
    # the other consumer's window against its neighbours 8-11 and 17-19 (median 11)
    got = inproc.local_added(ms, other, wins, 4)
    if got != "%.5f" % (13.5 / 11.0 - 1):
        fail(f"local_added of the other window {got}, want {13.5 / 11.0 - 1:.5f}", "")
    # MERIDIAN_CUPTI_ALTERNATE's attach lines: the N-th attach is the N-th window
    four = [(2, 4), (22, 24), (42, 44), (62, 64)]
    text = "".join("x\nmeridian: attach %d alternate kinds %s\n" % (n, how) for n, how in
                   ((1, "default"), (2, "changed"), (3, "default"), (4, "changed")))
    if inproc.split_alternate(text, four) != ([(2, 4), (42, 44)], [(22, 24), (62, 64)]):
        fail(f"split_alternate gave {inproc.split_alternate(text, four)}", text)
    for bad in (text.replace("attach 4", "attach 5"), text.replace("attach 3", "attach 9"),
                text.split("meridian: attach 4")[0]):
        if inproc.split_alternate(bad, four) is not None:
            fail("split_alternate accepted attach lines that do not number the windows", bad)
    # the median's order-statistic interval: none under 6 values; min-max at 7; at 20 the
    # 6th and 15th values (P(Binomial(20, 1/2) <= 5) = 0.021)
    if runner.median_ci_exact([1, 2, 3, 4, 5]) is not None:
        fail("median_ci_exact gave an interval for 5 values", "")
    if runner.median_ci_exact([7, 1, 5, 3, 2, 6, 4]) != (1, 7):
        fail("median_ci_exact of 7 values is not their range", "")
    if runner.median_ci_exact(list(range(20, 0, -1))) != (6, 15):
        fail(f"median_ci_exact of 1..20: {runner.median_ci_exact(list(range(1, 21)))}", "")


def main():
    unit_checks()
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "tests/workloads"))
        for path, text in ((os.path.join(tmp, "tests/workloads/kernel_storm"), STORM),
                           (os.path.join(tmp, "meridian"), MERIDIAN)):
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)
        steps_csv = os.path.join(tmp, "steps.csv")
        rc, out = run(tmp, {}, "--steps-csv", steps_csv)
        if rc != 0:
            fail(f"exit {rc}", out)
        expect_figures(out)
        with open(steps_csv) as f:
            lines = f.read().splitlines()
        if len(lines) != 1 + 3 * 3 * 400 or "1,storm,window,10,5.0000" not in lines:
            fail(f"--steps-csv holds {len(lines)} lines, want 3601 with the attach step's 5 ms",
                 "\n".join(lines[:5]))
        if "differ from" in out:
            fail("windows reported as differing when they did not", out)
        # the windows as recorded, not as specified, classify the steps
        out = fresh_run(tmp, {"FAKE_SHIFT": "1"})
        if "recorded windows [(11, 30)" not in out:
            fail("shifted windows not reported", out)
        expect_figures(out)
        # report-only reads the CSV back to the same figures
        rc, out = run(tmp, {}, "--report-only")
        if rc != 0:
            fail(f"exit {rc} with --report-only", out)
        expect_figures(out)
        # an earlier agent side by side: its detach steps 1 ms slower each, paired per round
        before = os.path.join(tmp, "before.so")
        open(before, "w").close()
        out = fresh_run(tmp, {}, "--variants", "window,bare,plain,before", "--before-lib", before)
        expect_figures(out)
        expect_lines(out, (
            r"storm +before +the step after the window \(closing: the boundary\) +"
            r"\+2\.990  \[",
            r"storm +before +the second step after \(flush and cuptiFinalize\) +"
            r"\+2\.490  \[",
            r"storm +window +added to the mean step +\+0\.0499  \[",
            r"storm +before +added to the mean step +\+0\.0598  \[",
            r"storm +detach steps, window - before \(ms, paired\) +-2\.000  \[.*n=3"))
        # resuming into a CSV an older version wrote (other columns) is refused, not mixed
        with open(os.path.join(tmp, "old.csv"), "w") as f:
            f.write("round,workload,variant,steps,untraced_ms,traced_ms,n_untraced,n_traced,"
                    "windows,wall_s,rc,machine\n1,storm,plain,400,1,1,1,1,,1,0,m\n")
        rc, out = run(tmp, {}, "--csv", os.path.join(tmp, "old.csv"), "--resume")
        if rc == 0 or "resume into a new --csv" not in out:
            fail("a resume into a CSV of other columns was not refused", out)
        # one of meridian's mechanisms off: its variable reaches the job, paired per round
        out = fresh_run(tmp, {}, "--variants", "window,bare,plain,window_noflush")
        expect_figures(out)
        expect_lines(out, (
            r"storm +added\(window_noflush\)/added\(bare\) +1\.1881  \[.*n=3",
            r"storm +added\(window_noflush\) - added\(window\) +-0\.0495  \[.*n=3"))
        # the agent's pace counters (rank 0's) per variant, from each run's database
        out = fresh_run(tmp, {"MERIDIAN_AGGREGATOR": "127.0.0.1:9"}, "--variants",
                        "window,bare,window_nopace,window_barekinds,window_recordonly")
        expect_lines(out, (
            r"storm +window +waits 4 \(max 4\), 6\.000 ms \(max 6\.000\); records lost "
            r"2 \(max 2\), n=3",
            r"storm +window_nopace +waits 0 \(max 0\), 0\.000 ms \(max 0\.000\); records "
            r"lost 162 \(max 162\), n=3",
            r"storm +added\(window_barekinds\) - added\(window\) +-0\.0891  \[.*n=3",
            r"storm +added\(window_recordonly\) - added\(window\) +-0\.0396  \[.*n=3"))
        if "no window_records readable" in out:
            fail("window_recordonly looked for a database it does not have", out)
        # --mixed: the bare consumer's windows in meridian's processes, half a period later
        # (the stand-in's bare steps there take 1.2 x its 1010 us): the same figures from
        # one process each, and two nulls from the plain run
        out = fresh_run(tmp, {}, "--mixed", "--variants", "window,plain,window_noflush")
        expect_lines(out, (
            r"storm +round +1  window +meridian first +meridian's / bare's windows: run  "
            r"\+28\.71% /  "
            r"\+20\.00% ratio 1\.436   local  \+28\.71% /  \+20\.00% ratio 1\.436",
            r"storm +added\(window\)/added\(bare\), one process \(run\) +1\.4356  \[.*n=3",
            r"storm +added\(window\)/added\(bare\), one process \(local\) +1\.4356  \[",
            r"storm +mean added\(window\) / mean added\(bare\) \(local\) +1\.4356  "
            r"\[1\.4356-1\.4356\]  exact \[-\]  n=3",
            r"storm +added\(window_noflush\)/added\(bare\), one process \(run\) +1\.1881",
            r"storm +added\(window_noflush\) - added\(window\), local +"
            r"-0\.0495  \[.*n=3",
            r"storm +plain \(run\): meridian-window steps / others +1\.0000  \[.*n=3",
            r"storm +plain \(local\): bare-window steps / others +1\.0000  \[.*n=3",
            r"bare traced 1\.2120 ms"))
        # what each consumer captured in its own windows: at 8/32@4 over 400 steps meridian
        # has 13 windows (104 steps) and the bare consumer 12 (96), traded in round 2;
        # meridian loses 8 kernels a window (CUPTI's device buffer), the bare consumer 3
        # with no timings and 2 dropped. Rounds 1 and 3: meridian 103,896 of 104,000
        # (999.000 a step), the bare consumer 95,997 in 96 steps (999.969): missed 100.75;
        # round 2: 95,904 in 96 against 103,997 in 104: missed 93.23. Windows that trade
        # places wrongly give other rates and a far larger max.
        out = fresh_run(tmp, {"FAKE_KERNELS_LOST": "8"}, "--mixed", "--windows", "8/32@4",
                        "--variants", "window")
        expect_lines(out, (
            r"storm +window +a step: meridian 999\.000, bare consumer 999\.969; meridian "
            r"missed 100\.8 \(max 100\.8\) a process; lost: meridian 106 \(max 106; device "
            r"buffer 104\), bare consumer 5 \(max 5\), n=3",), "(capture)")
        # a window cut by the run's end (20/100@60 over 370 steps: the bare consumer's last
        # one in rounds 1 and 3, meridian's in round 2) leaves that consumer's counts out
        out = fresh_run(tmp, {"FAKE_KERNELS_LOST": "8"}, "--mixed", "--steps", "370",
                        "--variants", "window")
        if "a step: meridian" in out:
            fail("capture counts compared where a window was cut by the run's end", out)
        # a run whose steps all take twice as long from step 195 on (between the windows'
        # neighbourhoods): the local figures stay exact, the run's medians do not
        out = fresh_run(tmp, {"FAKE_JUMP": "1"}, "--mixed", "--variants", "window,plain")
        expect_lines(out, (
            r"storm +added\(window\)/added\(bare\), one process \(local\) +1\.4356  \[",
            r"storm +plain \(local\): bare-window steps / others +1\.0000  \["))
        if re.search(r"one process \(run\) +1\.4356", out):
            fail("the run's medians were not moved by the jump: the test cannot tell local "
                 "from run", out)
        # the short, frequent windows of runs 40-41 (8/32@4): the bare consumer is given
        # 8/32@20, and every figure is still exact
        log = os.path.join(tmp, "bare.log")
        out = fresh_run(tmp, {"FAKE_BARE_LOG": log}, "--mixed", "--windows", "8/32@4",
                        "--variants", "window,plain")
        with open(log) as f:
            given = set(f.read().split())
        if given != {"8/32@20", "8/32@4"}:
            fail(f"the bare consumer was given {given}, want 8/32@20 and, in round 2 (the "
                 "places traded), 8/32@4", out)
        expect_lines(out, (
            r"storm +added\(window\)/added\(bare\), one process \(local\) +1\.4356  \[",
            r"storm +added\(window\)/added\(bare\), one process \(run\) +1\.4356  \[",
            r"storm +plain \(local\): bare-window steps / others +1\.0000  \["), "(8/32@4)")
        # window_alone: meridian's process without the bare consumer, against window per
        # round; where the bare consumer makes meridian's windows dearer (FAKE_INTERACT:
        # 1400 us instead of 1300) the difference says so: 0.2871 - 0.3861
        os.unlink(log)
        out = fresh_run(tmp, {"FAKE_BARE_LOG": log, "FAKE_INTERACT": "1"}, "--mixed",
                        "--variants", "window,window_alone")
        with open(log) as f:
            given = f.read().split()
        if given != ["20/100@60", "20/100@10", "20/100@60"]:
            fail(f"the bare consumer was given {given}: want it in the 3 window runs only, "
                 "at 10 in round 2", out)
        if not re.search(r"storm +added\(window_alone\) - added\(window\), local +-0\.0990  "
                         r"\[.*n=3", out):
            fail("window_alone's difference to window (local) not -0.0990", out)
        # MERIDIAN_CUPTI_ALTERNATE (window_alt_kinds): the stand-in's changed windows (every
        # second) take 1210 us a traced step, the default ones 1300: inside each process
        # 0.1980 - 0.2871 = -0.0891, and against the bare consumer's 0.2000 1.4356 / 0.9901
        out = fresh_run(tmp, {}, "--mixed", "--variants", "window,window_alt_kinds")
        expect_lines(out, (
            r"storm +window_alt_kinds +added\(changed\) - added\(default\), one process "
            r"\(run\) +-0\.0891  \[.*n=3",
            r"storm +window_alt_kinds +added\(changed\) - added\(default\), one process "
            r"\(local\) +-0\.0891  \[.*n=3",
            r"storm +window_alt_kinds +added\(default\)/added\(bare\), one process \(local\) +"
            r"1\.4356  \[",
            r"storm +window_alt_kinds +added\(changed\)/added\(bare\), one process \(local\) +"
            r"0\.9901  \["), "(window_alt_kinds)")
        # --pool: every process of several CSVs, per host; the window rows count every
        # window (1.4356), the window_alt_kinds rows their default windows only (1.4356, not
        # the changed ones' 0.9901); a second file on another host whose local figures are
        # twice the bare consumer's gives 2.0000 there and the median of the twelve overall
        pool_a, pool_b = os.path.join(tmp, "pool_a.csv"), os.path.join(tmp, "pool_b.csv")
        write_pool_files(os.path.join(tmp, "r.csv"), pool_a, pool_b)
        rc, out = run(tmp, {}, "--report-only", "--pool", pool_a + "," + pool_b)
        if rc != 0:
            fail(f"exit {rc} with --pool", out)
        expect_lines(out, (
            r"storm +host fakehost-a +added\(meridian\)/added\(bare\) \(run  \) +1\.4356  "
            r"\[.*n=6  goal",
            r"storm +host fakehost-a +added\(meridian\)/added\(bare\) \(local\) +1\.4356  "
            r"\[.*n=6  goal",
            r"storm +host fakehost-b +added\(meridian\)/added\(bare\) \(local\) +2\.0000  "
            r"\[.*n=6",
            r"storm +every host \(2\) +added\(meridian\)/added\(bare\) \(local\) +1\.7178  "
            r"\[.*n=12",
            r"storm +every host \(2\) +added\(meridian\)/added\(bare\) \(run  \) +1\.4356  "
            r"\[.*n=12"), "(--pool)")
        rc, out = run(tmp, {}, "--report-only", "--pool", pool_a + ",nosuch.csv")
        if rc == 0 or "nosuch.csv is not a file" not in out:
            fail("--pool with a missing file was accepted", out)
        # --positions: where in the window the cost sits, from the every-step CSV; the
        # stand-in's meridian steps 5000 us at the attach, 1300 traced, 3000 and 2500 on the
        # detach steps; the bare consumer's 4000 and 1212 and nothing after (1010 us)
        sc = os.path.join(tmp, "mixed_steps.csv")
        out = fresh_run(tmp, {"FAKE_CLOSE_US": "404"}, "--mixed", "--variants", "window",
                        "--steps-csv", sc)
        rc, out = run(tmp, {}, "--mixed", "--report-only", "--positions", sc)
        if rc != 0:
            fail(f"exit {rc} with --positions", out)
        expect_lines(out, (
            r"storm +window +position  0: meridian +\+395\.05%  bare +\+296\.04%  "
            r"meridian - bare \+0\.9901  \[.*n=3",
            r"storm +window +position  1: meridian +\+28\.71%  bare +\+20\.00%  "
            r"meridian - bare \+0\.0871  \[",
            r"storm +window +position 18: meridian +\+28\.71%  bare +\+20\.00%",
            r"storm +window +position 19: meridian +\+68\.71%  bare +\+20\.00%  "
            r"meridian - bare \+0\.4871  \[",
            r"storm +window +position 20: meridian +\+197\.03%  bare +\+0\.00%  "
            r"meridian - bare \+1\.9703  \[",
            r"storm +window +position 21: meridian +\+147\.52%",
            r"storm +window +traced positions 1-19, mean of meridian - bare, per process "
            r"\+0\.1082  \[\+0\.1082-\+0\.1082\]",
            r"storm +window +position 19 \(the close at its end\) less positions 1-18, "
            r"meridian - bare, ms \+0\.404  \[.*n=3",
            r"storm +window +the close's own time at position 19's end \(window/close_ns\), "
            r"ms \+0\.404  \[.*n=3",
            # three identical stand-in processes: no spread to split
            r"storm +window +\(local\) robust sd, every window 0\.0000, half the windows "
            r"0\.0000, ratio -  n=3"), "(--positions)")
        if "position 22" in out:
            fail("--positions went past the two detach steps", out)
        rc, out = run(tmp, {}, "--positions", sc)
        if rc == 0 or "give them with --report-only" not in out:
            fail("--positions without --report-only was accepted", out)
        # an attach line missing: the run's split is refused, not guessed
        os.unlink(os.path.join(tmp, "r.csv"))
        rc, out = run(tmp, {"FAKE_ALT_SHORT": "1"}, "--mixed", "--variants", "window_alt_flush",
                      "--rounds", "1")
        if rc != 0 or "3 attach lines for 4 windows" not in out or "added(changed)" in out:
            fail("a run with an attach line missing was split anyway", out)
        # a step time tied to the place in the period (FAKE_PHASE: +10% on the steps at
        # meridian's places of odd rounds, whoever is attached there): meridian's ratio is
        # 1.9356 where it has those places, 0.9571 where the bare consumer has them (even
        # rounds trade places), and each less its round's plain null gives 1.4356 in both
        os.unlink(log)
        out = fresh_run(tmp, {"FAKE_BARE_LOG": log, "FAKE_PHASE": "20/100@10"}, "--mixed",
                        "--variants", "window,plain", "--rounds", "4")
        with open(log) as f:
            given = f.read().split()
        if given != ["20/100@60", "20/100@10"] * 2:
            fail(f"the bare consumer was given {given}: want the places traded in even rounds",
                 out)
        expect_lines(out, (
            r"storm +round +2  window +bare first +meridian's / bare's windows",
            r"storm +round +2  plain null +bare first +meridian's / bare's windows: "
            r"run +\+0\.00% / +\+10\.00%",
            r"storm +added\(window\)/added\(bare\), meridian first \(local\) +1\.935[67]  "
            r"\[.*n=2",
            r"storm +added\(window\)/added\(bare\), bare first \(local\) +0\.9571  \[.*n=2",
            r"storm +added\(window\)/added\(bare\), less plain null \(local\) +1\.435[67]  "
            r"\[.*n=4",
            r"storm +mean \(added - null\), window / bare \(local\) +1\.435[67]  "
            r"\[1\.435[67]-1\.435[67]\]"), "(FAKE_PHASE)")
        # --fixed-phases: the places of runs 39-41 in every round; the phase cost is then
        # all meridian's, and only the null-corrected figure removes it
        os.unlink(os.path.join(tmp, "r.csv"))
        os.unlink(log)
        rc, out = run(tmp, {"FAKE_BARE_LOG": log, "FAKE_PHASE": "20/100@10"}, "--mixed",
                      "--fixed-phases", "--variants", "window,plain", "--rounds", "4")
        with open(log) as f:
            given = f.read().split()
        if rc != 0 or given != ["20/100@60"] * 4:
            fail(f"--fixed-phases: exit {rc}, the bare consumer was given {given}", out)
        expect_lines(out, (
            r"storm +added\(window\)/added\(bare\), one process \(local\) +1\.935[67]  ",
            r"storm +added\(window\)/added\(bare\), less plain null \(local\) +1\.435[67]  "),
            "(--fixed-phases)")
        if "bare first" in out:
            fail("--fixed-phases traded the places", out)
        rc, out = run(tmp, {}, "--mixed", "--windows", "20/40@0")
        if rc == 0 or "must fit in PERIOD / 2 = 20" not in out:
            fail("--mixed with windows that overlap the bare consumer's was accepted", out)
        rc, out = run(tmp, {}, "--variants", "window,before")
        if rc == 0 or "needs --before-lib" not in out:
            fail("the before variant ran without an agent library", out)
        rc, out = run(tmp, {}, "--windows", "100/20@0")
        if rc == 0 or "LENGTH < PERIOD" not in out:
            fail("a window longer than its period was accepted", out)
        rc, out = run(tmp, {}, "--variants", "window,full")
        if rc == 0 or "choose from bare, plain, window, before, window_kernel" not in out:
            fail("an unknown variant was accepted", out)
        rebuild_checks(tmp)
    print("test_inproc: ok")


if __name__ == "__main__":
    main()
