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
a resumed call takes its runs' length from the CSV's rows (none fits in 5 s), and the next
runs the rest, never a run already there. Each workload's own length counts (a 3 s storm
run still fits after a 50 s gpt2 one), and a failed run's time does not.

--pool (session 22): an older CSV (11 columns, gpt2 rounds 1-3 with steady/plain 1.01,
1.02, 1.03) and a newer one (13 columns, rounds 1-4 with 1.04, 1.05, 1.06, 1.07, and a
`late` run per round whose steps 330+ are 1.02 x its steps 20-289, with nowin/plain 0.99)
reported as one: 7 paired rounds (the same round numbers of two files never pair), median
1.04, exact interval 1.01-1.07 (the 1st and 7th of 7); nowin/plain 0.9900 over 4; late/early
1.0200 over 4, and of its host parts (20.2 against 20 ms) 1.0100. A missing file is refused
by name. parse() reads rank 0's step lines with and without ddp_train's host_ms. A misspelt
variant is refused before anything runs, no CSV written. step_figures: a run's medians in
and out of windows, before step 290 and from 330 on, of the steps and of their host parts.
The diagnostic variants' environments: `inert` runs the workload without `meridian profile`,
libmeridian.so as the three injections, MERIDIAN_DISABLE=1; `nowin` and `late` run under
`meridian profile` in the steady tier with MERIDIAN_WINDOWS none and 300-309 (late2: and
320-329; late_bare: kernel records alone; late_domains: the whole-domain close).
"""
import argparse
import contextlib
import csv
import io
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner  # noqa: E402  (the round runner tiers.py uses, beside this file)
import tiers  # noqa: E402  (the module under test, beside this file)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "workloads"))
import ddp_train  # noqa: E402  (its thread lines are what thread_figures reads; no torch)
FIELDS = ["round", "workload", "mode", "variant", "steps", "mean_ms", "median_ms",
          "outside_median_ms", "wall_s", "rc", "machine"]


def row(rnd, mode, variant, mean, outside, rc=0):
    return dict(round=rnd, workload="storm" if mode == "storm" else "py", mode=mode,
                variant=variant, steps=600, mean_ms="%.6f" % mean, median_ms="%.6f" % mean,
                outside_median_ms="%.6f" % outside, wall_s=3, rc=rc, machine="m")


def check_budget(tmp):
    """run_resumable's budget on a test clock: which runs start, given how long runs take."""
    now = [0.0]
    ran = []
    took = {"storm": 3.0, "gpt2": 50.0, "py": 10.0}

    def run(rnd, w, v, writer):
        now[0] += 100.0 if v == "bad" else took[w]
        ran.append((rnd, w, v))
        row = dict(round=rnd, workload=w, mode=w, variant=v, steps=1, mean_ms=1, median_ms=1,
                   outside_median_ms=1, wall_s=took[w], rc=0, machine="m")
        if v == "bad":  # a run that failed after its timeout: no row of rc 0
            return []
        writer.writerow(row)
        return [row]

    def call(csv_name, plan, budget, resume):
        del ran[:]
        a = argparse.Namespace(csv=os.path.join(tmp, csv_name), resume=resume,
                               budget_s=budget)
        rows = runner.run_resumable(a, plan, FIELDS, run, "test", clock=lambda: now[0])
        return [(r, w, v) for r, w, v in ran], len(rows)
    problems = []
    py = [(rnd, "py", "plain") for rnd in range(1, 6)]
    want = [
        # 10 s runs, 25 s: the third would end at 30 s (the old rule started it)
        (("b.csv", py, 25, False), (py[:2], 2)),
        # resumed with 5 s: the CSV's 10 s runs say none fits (counting from nothing, one ran)
        (("b.csv", py, 5, True), ([], 2)),
        (("b.csv", py, 25, True), (py[2:4], 4)),
        # storm 3 s, gpt2 50 s, 60 s: storm's second round still fits after gpt2's first,
        # gpt2's second does not (one length for both would stop after gpt2's first)
        (("w.csv", [(1, "storm", "x"), (1, "gpt2", "x"), (2, "storm", "x"), (2, "gpt2", "x")],
          60, False), ([(1, "storm", "x"), (1, "gpt2", "x"), (2, "storm", "x")], 3)),
        # a failed 100 s run does not count: the 10 s runs after it fill the 150 s
        (("f.csv", [(1, "py", "bad")] + py, 150, False), ([(1, "py", "bad")] + py, 5)),
    ]
    for args, expect in want:
        got = call(*args)
        if got != expect:
            problems.append(f"{args[0]} budget {args[2]} resume {args[3]}: ran {got[0]}, rows "
                            f"{got[1]}; want {expect[0]}, {expect[1]}")
    return problems


def check_pool(tmp):
    """--report-only --pool over two CSVs of different columns; the diagnostics' report."""
    old = [r for rnd, k in zip((1, 2, 3), (1.01, 1.02, 1.03))
           for r in (row(rnd, "gpt2", "plain", 30.0, 30.0),
                     row(rnd, "gpt2", "steady", 30.0 * k, 30.0 * k))]
    new = []
    for rnd, k in zip((1, 2, 3, 4), (1.04, 1.05, 1.06, 1.07)):
        # the speed probe slowed as much as steady's steps: per probe, no difference
        for v, m, probe in (("plain", 30.0, "1.0"), ("steady", 30.0 * k, "%.6f" % k),
                            ("nowin", 30.0 * 0.99, "")):
            new.append(dict(row(rnd, "gpt2", v, m, m), early_median_ms="30", late_median_ms="30",
                            probe_ms=probe))
        # the positive control: 0.5, 0.6, 0.7, 0.8 ms over plain in rounds 1-4
        new.append(row(rnd, "gpt2", "load", 30.0 + 0.4 + 0.1 * rnd, 30.5))
        new.append(dict(row(rnd, "gpt2", "late", 31.0, 31.0), early_median_ms="30",
                        late_median_ms="30.6", early_host_ms="20", late_host_ms="20.2",
                        early_probe_ms="1.0", late_probe_ms="1.02"))
    paths = []
    for name, rows, fields in (("old.csv", old, FIELDS), ("new.csv", new, tiers.FIELDS)):
        paths.append(os.path.join(tmp, name))
        with open(paths[-1], "w", newline="") as f:
            w = csv.DictWriter(f, fields)
            w.writeheader()
            w.writerows(rows)

    def report(pool):
        p = subprocess.run([sys.executable, os.path.join(HERE, "tiers.py"), "--build", "x",
                            "--meridian", "x", "--agent-lib", "x", "--report-only", "--pool",
                            ",".join(pool)], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr
    problems = []
    rc, out = report(paths)
    for want in (r"gpt2 +steady/plain \(mean step\) +1\.0400  \[[0-9.]+-[0-9.]+\]  "
                 r"exact \[1\.0100-1\.0700\]  n=7 ",
                 r"gpt2 +nowin/plain \(mean step\) +0\.9900 .* n=4 ",
                 r"gpt2 +late +late/early 1\.0200 .* n=4",
                 r"gpt2 +late +late/early host part 1\.0100 .* n=4",
                 r"gpt2 +steady/plain \(mean step/probe\) +1\.0000 .* n=4 ",
                 r"gpt2 +steady/plain \(probe\) +1\.0550 .* n=4 ",
                 r"gpt2 +late +late/early probe 1\.0200 .* n=4",
                 r"gpt2 +late +late/early step/probe 1\.0000 .* n=4",
                 r"gpt2 +load-plain \(mean step, us\) +650\.0000 .* n=4  goal = 600 \(known\)",
                 # steady-plain 300..900 us (old file) and 1200..2100 (new): median 1200
                 r"gpt2 +steady-plain \(mean step, us\) +1200\.0000 .* n=7 ",
                 r"gpt2 +steady-plain scaled by the control \(us\) +1107\.7  "
                 r"\[[0-9.]+-[0-9.]+\]  exact \[-\]  n=7,4 "):
        if rc != 0 or not re.search(want, out):
            problems.append(f"--pool: missing {want!r} (exit {rc})\n{out}")
    # the scaled figure's conservative interval: the two exact intervals' ends combined
    # (6 rounds each: the extremes), and unbounded where the control's may reach zero
    for steady_us, load_us, want in (
            ([100, 200, 300, 400, 500, 600], [500, 600, 700, 800, 900, 1000],
             r"scaled by the control \(us\) +280\.0  \[[0-9.]+-[0-9.]+\]  "
             r"exact \[60\.0-720\.0\]  n=6,6 "),
            ([100, 200, 300, 400, 500, 600], [-100, -50, 10, 20, 800, 900],
             r"scaled by the control \(us\) +\d+\.\d  \[unbounded\]  exact \[unbounded\]")):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            tiers.load_equivalent("gpt2", steady_us, load_us)
        if not re.search(want, buf.getvalue()):
            problems.append(f"load_equivalent {steady_us} {load_us}: {buf.getvalue()!r}")
    rc, out = report([paths[0], os.path.join(tmp, "absent.csv")])
    if rc == 0 or "absent.csv is not a file" not in out:
        problems.append(f"--pool with a missing file: exit {rc}\n{out}")
    a = argparse.Namespace(build="B", meridian="M", agent_lib="/lib/libmeridian.so",
                           storm_per_step=1000, torch_steps=200, steps=600, no_aslr=False)
    cmd, env = tiers.command(a, "py", "inert", "db")
    if (cmd[0] != sys.executable or env.get("MERIDIAN_DISABLE") != "1" or
            any(env.get(v) != a.agent_lib for v in ("CUDA_INJECTION64_PATH",
                                                    "NVTX_INJECTION64_PATH",
                                                    "NCCL_PROFILER_PLUGIN"))):
        problems.append(f"inert: {cmd[:2]} {env.get('MERIDIAN_DISABLE')}")
    for v, spec in (("nowin", "none"), ("late", "300-309"), ("steady", tiers.WINDOWS),
                    ("late2", "300-309,320-329"), ("late_bare", "300-309"),
                    ("late_domains", "300-309")):
        cmd, env = tiers.command(a, "py", v, "db")
        if cmd[:2] != ["M", "profile"] or env.get("MERIDIAN_WINDOWS") != spec or \
                env.get("MERIDIAN_TRACE") != "steady":
            problems.append(f"{v}: {cmd[:2]} {env.get('MERIDIAN_WINDOWS')}")
        want = {"late_bare": ("MERIDIAN_TRACE_KINDS", "kernel"),
                "late_domains": ("MERIDIAN_CUPTI_CLOSE", "domains")}.get(v)
        if want and env.get(want[0]) != want[1]:
            problems.append(f"{v}: {want[0]}={env.get(want[0])}")
    # the workload's step lines, with and without the host part (older ddp_train output)
    out = ("ddp_train: rank 0 mode=gpt2 step 0 ms=30.500 host_ms=20.250\n"
           "ddp_train: rank 1 mode=gpt2 step 0 ms=99.000 host_ms=99.000\n"
           "ddp_train: rank 0 mode=gpt2 step 1 ms=31.000 host_ms=21.000\n"
           "ddp_train: rank 0 mode=kernel-dense step 0 ms=15.000\n")
    hosts = {}
    steps = tiers.parse("py", out, hosts)
    if steps != {"gpt2": [30.5, 31.0], "kernel-dense": [15.0]} or hosts != {"gpt2": [20.25, 21.0]}:
        problems.append(f"parse: {steps} {hosts}")
    # every py variant's workload command is one ddp_train.py accepts (the torch variant
    # runs --torch-steps: 200 < 290, so its --thread-cpu-at is 20,200)
    for v in tiers.VARIANTS + tiers.DIAGNOSTICS:
        cmd, _ = tiers.command(a, "py", v, "db")
        work = cmd[cmd.index(sys.executable) + 2:]
        try:
            got = ddp_train.parse_args(work)
        except SystemExit:
            problems.append(f"{v}: ddp_train.py refuses {work}")
            continue
        want = (20, 200) if v == "torch" else (20, 290, 330, 600)
        if got.thread_cpu_at != want or not got.speed_probe:
            problems.append(f"{v}: --thread-cpu-at {got.thread_cpu_at}, probe {got.speed_probe}")
        # the positive control, and only it, adds its known cost to every step
        if got.step_load_us != (tiers.LOAD_US if v == "load" else 0):
            problems.append(f"{v}: --step-load-us {got.step_load_us}")
    if tiers.thread_cpu_at(300) != "20,290,300" or tiers.thread_cpu_at(10) != "10":
        problems.append(f"thread_cpu_at: {tiers.thread_cpu_at(300)} {tiers.thread_cpu_at(10)}")
    # a variant given twice is refused (a round keeps one row per variant)
    p = subprocess.run([sys.executable, os.path.join(HERE, "tiers.py"), "--build", "x",
                        "--meridian", "x", "--agent-lib", "x", "--workloads", "py",
                        "--py-variants", "plain,steady,plain", "--csv",
                        os.path.join(tmp, "n.csv")], capture_output=True, text=True, timeout=60)
    if p.returncode == 0 or "plain given twice" not in p.stderr:
        problems.append(f"a variant twice: exit {p.returncode}: {p.stderr}")
    # a misspelt variant is refused before anything runs (it used to run as `full`)
    p = subprocess.run([sys.executable, os.path.join(HERE, "tiers.py"), "--build", "x",
                        "--meridian", "x", "--agent-lib", "x", "--workloads", "py",
                        "--py-variants", "plain,nowind", "--csv", os.path.join(tmp, "n.csv")],
                       capture_output=True, text=True, timeout=60)
    if p.returncode == 0 or "--py-variants: unknown variant(s) nowind" not in p.stderr or \
            os.path.exists(os.path.join(tmp, "n.csv")):
        problems.append(f"misspelt variant: exit {p.returncode}: {p.stderr}")
    # one run's figures: 600 steps of 10 ms, but 12 ms from step 330 on, 20 ms in the first
    # window (10-19) and the step after it; host parts 4 ms, 5 ms from 330 on
    ms = [20.0 if 10 <= i <= 20 else 12.0 if i >= 330 else 10.0 for i in range(600)]
    host = [5.0 if i >= 330 else 4.0 for i in range(600)]
    got = tiers.step_figures(ms, host)
    want = dict(median_ms="10.0000", outside_median_ms="10.0000", early_median_ms="10.0000",
                late_median_ms="12.0000", early_host_ms="4.0000", late_host_ms="5.0000")
    if any(got.get(k) != v for k, v in want.items()) or \
            abs(float(got["mean_ms"]) - (11 * 20 + 270 * 12 + 319 * 10) / 600) > 1e-4:
        problems.append(f"step_figures: {got}")
    if tiers.step_figures([10.0] * 100, [])["late_host_ms"] != "":
        problems.append("step_figures: a run without host parts or late steps")
    cpu = [3.0 if i >= 330 else 2.0 for i in range(600)]
    probe = [1.5 if i >= 330 else 1.0 for i in range(600)]
    got = tiers.step_figures(ms, host, cpu, probe)
    if (got["early_cpu_ms"], got["late_cpu_ms"], got["early_probe_ms"], got["late_probe_ms"],
            got["probe_ms"]) != ("2.0000", "3.0000", "1.0000", "1.5000", "1.0000"):
        problems.append(f"step_figures cpu: {got}")
    # cpu_ms read beside host_ms
    cpus = {}
    probes = {}
    tiers.parse("py", "ddp_train: rank 0 mode=gpt2 step 0 ms=30.5 host_ms=20.2 cpu_ms=19.5 "
                "probe_ms=1.0250\n", {}, cpus, probes)
    if cpus != {"gpt2": [19.5]} or probes != {"gpt2": [1.025]}:
        problems.append(f"parse cpu_ms, probe_ms: {cpus} {probes}")
    # the thread lines as ddp_train prints them, read back: early 20-290 (270 steps), the
    # window 290-330 (ignored), late 330-600 (270 steps); a thread born in the window
    main, other, born = 100, 101, 102
    snaps = [(20, {main: ("python3", 1000.0, 5), other: ("pt_thread", 100.0, 0)}),
             (290, {main: ("python3", 9100.0, 32), other: ("pt_thread", 127.0, 0)}),
             (330, {main: ("python3", 9500.0, 40), other: ("pt_thread", 140.0, 0),
                    born: ("cupti_worker", 0.0, 0)}),
             (600, {main: ("python3", 18000.0, 580), other: ("pt_thread", 194.0, 0),
                    born: ("cupti_worker", 810.0, 0)})]
    out = "\n".join(ddp_train.thread_cpu_lines(0, "gpt2", snaps, main)) + "\n" + \
        "\n".join(ddp_train.thread_cpu_lines(1, "gpt2", snaps[:2], other))
    got = tiers.thread_figures(out, "gpt2")
    want = dict(early_others_ms="%.4f" % (27 / 270), late_others_ms="%.4f" % (864 / 270),
                early_nvcsw="%.3f" % (27 / 270), late_nvcsw="%.3f" % (540 / 270),
                late_threads="cupti_worker=%.3f pt_thread=%.3f" % (810 / 270, 54 / 270))
    if got != want:
        problems.append(f"thread_figures: {got}, want {want}\n{out}")
    if tiers.thread_figures(out, "kernel-dense")["late_threads"] != "":
        problems.append("thread_figures: another mode's lines read")
    return problems


def ddp_args(cmd):
    """What ddp_train.py reads from a tiers command: the arguments after the script."""
    return ddp_train.parse_args(cmd[cmd.index(sys.executable) + 2:])


def disjoint(x, y):
    """Whether two `taskset -c LIST ...` commands have no CPU in common."""
    return not set(x[2].split(",")) & set(y[2].split(","))


def check_concurrent(tmp):
    """--concurrent: the cores cut by physical core, the shares rotated, the round's
    processes started together on disjoint shares with their own ports, a resumed CSV's
    finished rounds skipped."""
    problems = []
    # 4 cores x 2 threads, siblings numbered c and c+4 (as on many x86 hosts)
    topo = {f"/sys/devices/system/cpu/cpu{c}/topology/{k}": str(v) for c in range(8)
            for k, v in (("physical_package_id", 0), ("core_id", c % 4))}
    def shares(n, turn):  # cpu_shares on this stand-in machine
        return runner.cpu_shares(n, turn, range(8), topo.__getitem__)
    got = runner.physical_cores(range(8), topo.__getitem__)
    if got != [[0, 4], [1, 5], [2, 6], [3, 7]]:
        problems.append(f"physical_cores: {got}")
    r1, r2 = (shares(2, rnd) for rnd in (1, 2))
    if r1 != [[2, 3, 6, 7], [0, 1, 4, 5]] or r2 != [[0, 1, 4, 5], [2, 3, 6, 7]]:
        problems.append(f"cpu_shares: {r1} {r2}")
    try:
        runner.cpu_shares(3, 1, [0, 4], topo.__getitem__)
        problems.append("cpu_shares: 3 processes on one core accepted")
    except SystemExit as e:
        if "3 processes need 3 physical cores, this machine gives 1" not in str(e):
            problems.append(f"cpu_shares refusal: {e}")
    # run_concurrent with a stand-in launcher: each "run" waits for the other at a barrier
    # (run one after the other, the first would wait out the barrier's timeout and fail),
    # then prints two steps
    started, lock = [], threading.Lock()
    meet = [None]

    def launch(cmd, env, timeout):
        with lock:
            started.append((time.monotonic(), cmd, env["MASTER_PORT"]))
        try:
            meet[0].wait()
        except threading.BrokenBarrierError:
            return "the other run never started", 1, 0.0
        return ("ddp_train: rank 0 mode=gpt2 step 0 ms=30.0 host_ms=20.0\n"
                "ddp_train: rank 0 mode=gpt2 step 1 ms=31.0 host_ms=21.0\n"
                "ddp_train: rank 1 mode=gpt2 pair_filler_steps=9\n"
                "ddp_train: rank 0 mode=gpt2 pair_filler_steps=7\n", 0, 0.3)
    a = argparse.Namespace(build="B", meridian="M", agent_lib="/lib/libmeridian.so",
                           storm_per_step=1000, torch_steps=200, steps=600, no_aslr=False,
                           run_timeout_s=10, turns=0, same_cores=False)
    plain_cpus = []
    with open(os.path.join(tmp, "conc.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, tiers.FIELDS)
        w.writeheader()
        for rnd, order in ((1, ("plain", "steady")), (2, ("steady", "plain"))):
            del started[:]
            meet[0] = threading.Barrier(2, timeout=5)
            rows = tiers.run_concurrent(a, rnd, "py", order, w, launch, shares)
            if len(started) != 2 or not disjoint(started[0][1], started[1][1]) or \
                    any(c[:2] != ["taskset", "-c"] for _, c, _ in started) or \
                    abs(int(started[0][2]) - int(started[1][2])) != 400:  # never the same
                problems.append(f"run_concurrent round {rnd}: {started}")
            # both ddp_train runs (as ddp_train reads its arguments) meet in one pair
            # directory, as two
            pairs = set()
            for _, c, _ in started:
                try:
                    got = ddp_args(c)
                    pairs.add((got.pair_dir, got.pair_n))
                except (SystemExit, ValueError):
                    pairs.add(("refused", tuple(c)))
            # (said, not left to ddp_train's default of 2)
            if len(pairs) != 1 or not next(iter(pairs))[0] or next(iter(pairs))[1] != 2 or \
                    any("--pair-n" not in c for _, c, _ in started):
                problems.append(f"run_concurrent pair arguments, round {rnd}: {pairs}")
            if [r["variant"] for r in rows] != list(order) or \
                    any(r["mean_ms"] != "30.5000" or not r["cpus"] or str(r["rc"]) != "0"
                        or r["filler_steps"] != "7"
                        for r in rows):
                problems.append(f"run_concurrent rows: {rows}")
            plain_cpus += [r["cpus"] for r in rows if r["variant"] == "plain"]
    if plain_cpus != ["2,3,6,7", "0,1,4,5"]:  # a different share each round
        problems.append(f"plain's shares over rounds 1, 2: {plain_cpus}")
    # --turns: both runs get the turn length and distinct slots (as ddp_train reads them),
    # the CSV keeps each one's slot, and plain goes first in one round and second in the
    # next: as main's plan of two orders them (rotated each round), and as concurrent_plan
    # pairs plain with one of several in turn (the pair's own turn, not the round)
    a.turns = 7

    each_call = []  # (started, rows) of every call first_runs made

    def first_runs(calls):
        """Who ran first in each (round, order, turn) call; checks the arguments on the way."""
        firsts = []
        for rnd, order, turn in calls:
            started.clear()
            meet[0] = threading.Barrier(2, timeout=5)
            with open(os.path.join(tmp, "turns.csv"), "w", newline="") as f:
                rows = tiers.run_concurrent(a, rnd, "py", order, csv.DictWriter(
                    f, tiers.FIELDS), launch, shares, turn=turn)
            got = {}
            for _, c, _ in started:
                args = ddp_args(c)
                who = "load" if args.step_load_us else "steady" if "profile" in c else "plain"
                got[args.pair_slot] = (args.pair_turns, who)
            slots = {int(r["turn_slot"]): r["variant"] for r in rows if r["turn_slot"] != ""}
            if sorted(got) != [0, 1] or {t for t, _ in got.values()} != {7} or \
                    {k: v for k, (_, v) in got.items()} != slots:
                problems.append(f"--turns round {rnd} {order}: {got} {slots}")
            firsts.append(got.get(0, (0, "?"))[1])
            each_call.append((list(started), rows))
        return firsts
    for case, calls in (("two", [(1, ("plain", "steady"), None), (2, ("steady", "plain"), None)]),
                        ("in turn", [(1, ("plain", "load"), 1), (3, ("plain", "load"), 2)])):
        firsts = first_runs(calls)
        if firsts.count("plain") != 1:
            problems.append(f"--turns {case}: the first to run in its two rounds: {firsts}")
    for runs, _ in each_call:
        if len(runs) != 2 or not disjoint(runs[0][1], runs[1][1]):
            problems.append(f"--turns without --same-cores: a core shared: {runs}")
    # --same-cores: both processes that take turns on every core, in the CSV too; storm's
    # runs (never aligned, so never in turns) and runs not in turns keep their own shares
    a.same_cores = True
    first_runs([(1, ("plain", "steady"), None)])
    cpus = [c[2] for _, c, _ in started] + [r["cpus"] for r in each_call[-1][1]]
    if cpus != ["0,1,2,3,4,5,6,7"] * 4:
        problems.append(f"--same-cores: the runs' CPU lists, then the rows': {cpus}")
    # a report that pools these rounds with conc.csv's (separate shares) says it mixes them;
    # conc.csv alone does not
    with open(os.path.join(tmp, "same.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, tiers.FIELDS)
        w.writeheader()
        w.writerows(each_call[-1][1])
    for pool, want in (("conc.csv,same.csv", True), ("conc.csv", False)):
        p = subprocess.run([sys.executable, os.path.join(HERE, "tiers.py"), "--build", "x",
                            "--meridian", "x", "--agent-lib", "x", "--report-only", "--pool",
                            ",".join(os.path.join(tmp, x) for x in pool.split(","))],
                           capture_output=True, text=True, timeout=60)
        said = "1 paired round(s) ran on the same cores (--same-cores) and 2 on separate" \
            in p.stdout
        if p.returncode != 0 or said != want or (not want and "mix" in p.stdout):
            problems.append(f"report of {pool}: exit {p.returncode}, {p.stdout}{p.stderr}")
    a.turns = 0  # not in turns: separate shares whatever --same-cores says
    started.clear()
    meet[0] = threading.Barrier(2, timeout=5)
    with open(os.path.join(tmp, "noturns.csv"), "w", newline="") as f:
        tiers.run_concurrent(a, 1, "py", ("plain", "steady"), csv.DictWriter(f, tiers.FIELDS),
                             launch, shares)
    if len(started) != 2 or not disjoint(started[0][1], started[1][1]):
        problems.append(f"--same-cores without turns: the runs share cores: {started}")
    a.turns = 7
    started.clear()
    with open(os.path.join(tmp, "storm.csv"), "w", newline="") as f:
        tiers.run_concurrent(a, 1, "storm", ("plain", "steady"), csv.DictWriter(
            f, tiers.FIELDS), lambda cmd, env, timeout: (started.append((0, cmd, "0")) or
                                                        ("", 1, 0.0)),
            shares)
    if len(started) != 2 or not disjoint(started[0][1], started[1][1]):
        problems.append(f"--same-cores: storm's runs share cores: {started}")
    a.same_cores = False
    a.turns = 0
    # a run that fails tells its partner, still waiting in the pair directory, to stop (as
    # ddp_train's Pair reads it): the stand-in partner watches for that file
    seen = []

    def launch_fail(cmd, env, timeout):
        args = ddp_args(cmd)
        if "profile" in cmd:
            return "ddp_train: CUDA error", 1, 0.1
        path = os.path.join(args.pair_dir, ddp_train.ABANDONED)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not os.path.exists(path):
            time.sleep(0.01)
        seen.append(os.path.exists(path))
        return "ddp_train: stopped", 1, 0.1
    with open(os.path.join(tmp, "fail.csv"), "w", newline="") as f:
        tiers.run_concurrent(a, 1, "py", ("plain", "steady"), csv.DictWriter(f, tiers.FIELDS),
                             launch_fail, shares)
    if seen != [True]:
        problems.append(f"a failed run's partner never saw {ddp_train.ABANDONED}: {seen}")
    # the shares follow a pair's own turn, not the round: round 3 as turn 1, then as turn 2
    turned = []
    for turn in (1, 2):
        meet[0] = threading.Barrier(2, timeout=5)
        with open(os.path.join(tmp, "conc3.csv"), "w", newline="") as f:
            rows = tiers.run_concurrent(a, 3, "py", ("plain", "load"), csv.DictWriter(
                f, tiers.FIELDS), launch, shares, turn=turn)
        turned += [r["cpus"] for r in rows if r["variant"] == "plain"]
    if turned != ["0,1,4,5", "2,3,6,7"]:  # load sorts first: plain takes the second share
        problems.append(f"run_concurrent plain's shares at turns 1, 2 of round 3: {turned}")
    # more than two variants: plain beside each other in turn, a pair a round, the others in
    # the order given whatever order the plan rotated them into; two: as they are
    given = ("plain", "steady", "load")
    plan = [(rnd, "py", v) for rnd in (1, 2, 3, 4, 5)
            for v in given[(rnd - 1) % 3:] + given[:(rnd - 1) % 3]]
    got = tiers.concurrent_plan(plan, lambda w: list(given))
    want = [(1, "py", ("plain", "steady"), 1), (2, "py", ("plain", "load"), 1),
            (3, "py", ("plain", "steady"), 2), (4, "py", ("plain", "load"), 2),
            (5, "py", ("plain", "steady"), 3)]
    if got != want:
        problems.append(f"concurrent_plan of three: {got}")
    # a lone variant: nobody to meet, so no --pair-dir (ddp_train refuses --pair-n 1)
    started.clear()
    meet[0] = threading.Barrier(1, timeout=5)
    with open(os.path.join(tmp, "conc1.csv"), "w", newline="") as f:
        tiers.run_concurrent(a, 1, "py", ("plain",), csv.DictWriter(f, tiers.FIELDS), launch,
                             shares)
    if len(started) != 1 or "--pair-dir" in started[0][1]:
        problems.append(f"run_concurrent of one variant: {started}")
    two = [(1, "py", "plain"), (1, "py", "inert"), (2, "py", "inert"), (2, "py", "plain")]
    if tiers.concurrent_plan(two, lambda w: ["plain", "inert"]) != \
            [(1, "py", ("plain", "inert"), 1), (2, "py", ("inert", "plain"), 2)]:
        problems.append(f"concurrent_plan of two: {tiers.concurrent_plan(two, lambda w: [])}")
    try:
        tiers.concurrent_plan([(1, "py", v) for v in ("steady", "full", "load")],
                              lambda w: ["steady", "full", "load"])
        problems.append("concurrent_plan: three without plain accepted")
    except SystemExit as e:
        if "add plain to steady,full,load" not in str(e):
            problems.append(f"concurrent_plan refusal: {e}")
    # option combinations that cannot measure what they say are refused before anything runs
    base = ["--build", "x", "--meridian", "x", "--agent-lib", "x", "--workloads", "py",
            "--csv", os.path.join(tmp, "never.csv")]
    for extra, want in ((["--turns", "7"], "--turns K takes K >= 1 and --concurrent"),
                        (["--workloads", "storm,py", "--variants", "plain,torch,load"],
                         "--variants: torch, load: py variants only"),
                        (["--concurrent", "--turns", "0", "--same-cores"],
                         "--same-cores takes --turns"),
                        (["--concurrent", "--same-cores"], "--same-cores takes --turns")):
        try:
            tiers.main(base + extra)
            problems.append(f"tiers {extra} accepted")
        except SystemExit as e:
            if want not in str(e) or os.path.exists(os.path.join(tmp, "never.csv")):
                problems.append(f"tiers {extra}: {e}")
        except OSError as e:  # it went on to start the runs (stand-in paths: none exist)
            problems.append(f"tiers {extra} accepted, then: {e}")
    # a GPU in exclusive-process mode is refused before anything runs (a stand-in nvidia-smi)
    fake = os.path.join(tmp, "bin")
    os.makedirs(fake, exist_ok=True)
    with open(os.path.join(fake, "nvidia-smi"), "w") as f:
        f.write("#!/bin/sh\necho '0, Exclusive_Process'\n")
    os.chmod(os.path.join(fake, "nvidia-smi"), 0o755)
    p = subprocess.run([sys.executable, os.path.join(HERE, "tiers.py"), "--build", "x",
                        "--meridian", "x", "--agent-lib", "x", "--workloads", "py",
                        "--py-variants", "plain,inert", "--concurrent", "--csv",
                        os.path.join(tmp, "x.csv")], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, PATH=fake + ":" + os.environ["PATH"]))
    if p.returncode == 0 or "nvidia-smi reports 0, Exclusive_Process" not in p.stderr or \
            os.path.exists(os.path.join(tmp, "x.csv")):
        problems.append(f"exclusive GPU: exit {p.returncode}: {p.stderr}")
    # a resumed call skips a round whose variants are all in the CSV, runs one that is not
    ran = []
    b = argparse.Namespace(csv=os.path.join(tmp, "conc.csv"), resume=True, budget_s=100)
    runner.run_resumable(b, [(1, "py", ("plain", "steady")), (3, "py", ("plain", "steady"))],
                        tiers.FIELDS, lambda rnd, w, v, writer: ran.append((rnd, v)) or [],
                        "test")
    if ran != [(3, ("plain", "steady"))]:
        problems.append(f"resume of concurrent rounds ran {ran}")
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
        problems = check_budget(tmp) + check_pool(tmp) + check_concurrent(tmp)
    out = p.stdout + p.stderr
    want = (r"storm +steady/plain \(mean step\) +1\.0300  \[1\.0300-1\.0300\]  "
            r"exact \[1\.0300-1\.0300\]  n=8  goal <= 1\.03",
            r"storm +steady/plain \(median outside windows\) +1\.0050  \[[0-9.]+-[0-9.]+\]  "
            r"exact \[0\.9700-1\.0500\]  n=8  goal within 1%",
            r"gpt2 +steady/plain \(mean step\) +1\.0100  \[[0-9.]+-[0-9.]+\]  exact \[-\]  n=5",
            # the issue's 1% outside windows is the storm's goal, not the training steps'
            r"gpt2 +steady/plain \(median outside windows\) +1\.0100 .*  n=5  goal -\n",
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
