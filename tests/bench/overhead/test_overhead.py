#!/usr/bin/env python3
"""test_overhead.py: CI test of the overhead harness (overhead.py) without a GPU.

The harness's runner is replaced by a model of the workloads: each variant adds a known
cost to a known base (plus noise that is the same for every variant of a round), printed
in exactly the lines the real workloads print. The test checks what the harness computes
from them against the model: the metric parsing, the commands it would run (injection
variable through mpirun -x, meridian prefix, torch profiler flag), the rotation of the
variant order, the ratios (added(meridian)/added(bare), % over plain, meridian/torch),
the budget stop, failed runs left out, and the kinds comparison.
"""
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overhead  # noqa: E402

BASE = {"storm": 4.0, "ref": 0.5, "ddp_ch": 6.0, "ddp_kd": 20.0}
ADD = {  # cost each variant adds to each metric
    "plain": {"storm": 0, "ref": 0, "ddp_ch": 0, "ddp_kd": 0},
    "bare": {"storm": 2.0, "ref": 0.005, "ddp_ch": 0.06, "ddp_kd": 4.0},
    "meridian": {"storm": 2.1, "ref": 0.01, "ddp_ch": 0.12, "ddp_kd": 4.2},
    "torch": {"ddp_ch": 1.0, "ddp_kd": 10.0},
}
KINDS = "CONCURRENT_KERNEL,MEMCPY,MEMSET,DRIVER"


class Model:
    def __init__(self, fail=None, meridian_kinds=KINDS, inert=False):
        self.inert = inert  # the agent stays inert (sends nothing), as without --single
        self.calls = []
        self.fail = fail or set()
        self.meridian_kinds = meridian_kinds
        self.rng = random.Random(7)
        self.noise = {}

    def variant_of(self, argv, env):
        if "--profiler" in argv:
            return "torch"
        if argv[0].endswith("meridian"):
            return "meridian"
        if env.get("CUDA_INJECTION64_PATH") or any(a.startswith("CUDA_INJECTION64_PATH=")
                                                   for a in argv):
            return "bare"
        return "plain"

    def __call__(self, argv, env, log, timeout_s=None):
        v = self.variant_of(argv, env)
        wl = "storm" if any(a.endswith("kernel_storm") for a in argv) else \
            "ref" if any(a.endswith("ref_workload") for a in argv) else "ddp"
        self.calls.append((wl, v, argv, env))
        n = len([c for c in self.calls if c[0] == wl and c[1] == v]) - 1
        if (wl, v, n) in self.fail:
            return 1, "boom"
        noise = self.noise.setdefault((wl, n), 1 + self.rng.uniform(-0.01, 0.01))
        val = {m: (BASE[m] + ADD[v].get(m, 0)) * noise for m in BASE}
        lines = []
        if v == "bare":
            lines.append(f"bare_consumer: kinds={KINDS}")
        if v == "meridian":
            lines.append(f"meridian: agent rank 0 kinds={self.meridian_kinds}")
            if not self.inert:
                lines.append("meridian: rank 0: sent 1234 events in 2 batches; lost 0")
        if wl == "storm":
            lines.append("kernel_storm: launches=200000 wall_s=1.0 "
                         f"us_per_launch={val['storm']:.4f}")
        elif wl == "ref":
            lines.append(f"ref_workload: world=2 measured_wall_s={val['ref']:.6f} check=ok")
        else:
            for r in (0, 1):
                for mode, m in (("compute-heavy", "ddp_ch"), ("kernel-dense", "ddp_kd")):
                    x = val[m] * (1.0 if r == 1 else 0.99)  # rank 1 is the slower one
                    lines.append(f"ddp_train: rank {r} mode={mode} profiler=none steps=30 "
                                 f"warmup=10 world=2 params=1 batch=64 step_ms median={x:.4f} "
                                 f"mean={x:.4f} p10=1 p90=1 min=1 max=1 loss=1")
        return 0, "\n".join(lines) + "\n"


def config(tmp, **kw):
    build = os.path.join(tmp, "build")
    for rel in ("tests/workloads/kernel_storm", "tests/workloads/ref_workload",
                "tests/gpu/libbare_consumer.so", "bin/meridian", "agent/libmeridian.so"):
        os.makedirs(os.path.dirname(os.path.join(build, rel)), exist_ok=True)
        open(os.path.join(build, rel), "w").close()
    args = ["--build", build, "--out", tmp, "--work", tmp, "--pairs", "10",
            "--meridian", os.path.join(build, "bin/meridian"),
            "--agent-lib", os.path.join(build, "agent/libmeridian.so")]
    for k, v in kw.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    c = overhead.parse_args(args)
    c.ddp = os.path.join(tmp, "ddp_train.py")
    open(c.ddp, "w").close()
    os.makedirs(c.logdir, exist_ok=True)
    return c


FAILS = []


def expect(cond, what):
    if not cond:
        FAILS.append(what)
        print(f"FAIL: {what}")


def near(a, b, tol):
    return abs(a - b) <= tol


def test_full_run(tmp):
    model = Model(fail={("ddp", "torch", 3)})
    h = overhead.Harness(config(tmp), model)
    h.run()
    text = h.write(tmp)
    expect(h.rounds_done == 10, f"10 rounds done, got {h.rounds_done}")
    expect(len(h.rows) == 10 * (3 + 3 + 4), f"100 runs, got {len(h.rows)}")
    # Rotation: each variant of ddp runs first in some round.
    firsts = set()
    for rnd in range(10):
        rows = [r for r in h.rows if r["round"] == rnd and r["workload"] == "ddp"]
        firsts.add(rows[0]["variant"])
    expect(firsts == {"plain", "bare", "meridian", "torch"}, f"rotation firsts {firsts}")
    # Commands: injection through mpirun -x before the program; meridian prefix; torch flag.
    bare_ref = [c for c in model.calls if c[0] == "ref" and c[1] == "bare"][0][2]
    inj = [i for i, a in enumerate(bare_ref) if a.startswith("CUDA_INJECTION64_PATH=")]
    prog = [i for i, a in enumerate(bare_ref) if a.endswith("ref_workload")]
    expect(len(inj) == 1 and bare_ref[inj[0] - 1] == "-x" and inj[0] < prog[0],
           f"bare ref command passes the injection path through mpirun: {bare_ref}")
    mer = [c for c in model.calls if c[1] == "meridian" and c[0] != "storm"][0][2]
    expect(mer[1:3] == ["profile", "-o"] and "--agent-lib" in mer and "--" in mer,
           f"meridian prefix {mer[:8]}")
    mer_ref = [c for c in model.calls if c[0] == "ref" and c[1] == "meridian"][0][2]
    expect("MERIDIAN_PRINT_KINDS=1" in mer_ref, f"meridian ranks are asked for kinds: {mer_ref}")
    storm_bare = [c for c in model.calls if c[0] == "storm" and c[1] == "bare"][0]
    expect(storm_bare[3].get("CUDA_INJECTION64_PATH", "").endswith("libbare_consumer.so"),
           "storm bare variant sets CUDA_INJECTION64_PATH in the environment")
    # Ratios from the model: added ratio = ADD[meridian]/ADD[bare].
    med = {v: overhead.summarize(h.samples("storm", v))["median"]
           for v in ("plain", "bare", "meridian")}
    r = overhead.added_ratio(med["plain"], med["bare"], med["meridian"])
    expect(near(r, 2.1 / 2.0, 0.03), f"storm added ratio {r:.4f} vs 1.05")
    paired = h.paired("ddp_kd", overhead.added_ratio, ["plain", "bare", "meridian"])
    expect(near(paired, 4.2 / 4.0, 1e-3), f"ddp_kd paired added ratio {paired:.5f} vs 1.05")
    pct = h.paired("ref", lambda p, x: (x / p - 1) * 100, ["plain", "meridian"])
    expect(near(pct, 0.01 / 0.5 * 100, 0.01), f"ref paired % {pct:.4f} vs 2.0")
    kd = overhead.summarize(h.samples("ddp_kd", "plain"))["median"]
    expect(near(kd, 20.0, 0.3), f"ddp_kd plain median uses the slowest rank: {kd}")
    expect(len(h.samples("ddp_kd", "torch")) == 9, "the failed torch run is left out")
    expect("ddp/torch#3 rc=1" in text, "the failed run is named in the report")
    expect("activity kinds, bare consumer vs meridian: same" in text, "kinds compared: same")
    for needle in ("added(meridian)/added(bare)", "meridian / torch profiler", "<= 1.10",
                   "meridian over plain, %"):
        expect(needle in text, f"report has {needle!r}")
    csv_lines = open(os.path.join(tmp, "overhead.csv")).read().splitlines()
    expect(len(csv_lines) == 101, f"csv has 100 runs + header, got {len(csv_lines)}")


def test_budget_and_kinds(tmp):
    model = Model(meridian_kinds=KINDS + ",MARKER")
    t = [0.0]

    def clock():  # every call advances 10 s: a budget of 95 s allows ~9 runs
        t[0] += 10.0
        return t[0]

    h = overhead.Harness(config(tmp, budget_s=95, workloads="storm,ref"), model)
    h.run(clock=clock)
    expect(0 < len(h.rows) < 20, f"budget stops the rounds early ({len(h.rows)} runs)")
    expect(h.rounds_done < 10, f"rounds_done reports the short run ({h.rounds_done})")
    text = h.report()
    expect("DIFFER" in text and "MARKER" in text, "a kinds difference is reported")


def timed_runner(run_s):
    """The model as a runner whose every run takes run_s on a fake clock: (runner, clock)."""
    t = [0.0]

    def runner(argv, env, log, timeout_s=None):
        t[0] += run_s
        return Model()(argv, env, log)
    return runner, lambda: t[0]


def test_budget_counts_the_run_length(tmp):
    # Runs of 30 s against a budget of 100 s: the fourth would start at 90 s and end past
    # the budget (a device call's hard limit would then lose everything), so it never
    # starts; the three that ran are already in the CSV before the report is written.
    runner, clock = timed_runner(30.0)
    h = overhead.Harness(config(tmp, budget_s=100, workloads="storm"), runner)
    h.run(clock=clock)
    expect(len(h.rows) == 3, f"3 runs of 30 s fit a 100 s budget, got {len(h.rows)}")
    lines = open(os.path.join(tmp, "overhead.csv")).read().splitlines()
    expect(len(lines) == 4, f"csv written as runs end: header + 3, got {len(lines)}")
    expect("stalls" in lines[0] and "lost" in lines[0], f"csv columns {lines[0]}")


def test_resume(tmp):
    # A call cut short after 4 rounds, then a second call with --resume on the same
    # machine: it goes on at round 4 (the rotation too), the report counts all 10 rounds,
    # and the CSV holds every run once. A CSV from another machine is refused.
    runner, clock = timed_runner(10.0)
    h = overhead.Harness(config(tmp, budget_s=125, workloads="storm"), runner)
    h.run(clock=clock)
    expect(h.rounds_done == 4, f"the first call does 4 rounds, got {h.rounds_done}")
    path = os.path.join(tmp, "overhead.csv")
    h2 = overhead.Harness(config(tmp, workloads="storm"), Model())
    h2.resume(path)
    expect(h2.first_round == 4 and len(h2.rows) == 12,
           f"resume at round 4 with 12 runs, got {h2.first_round}, {len(h2.rows)}")
    h2.run()
    expect(h2.rounds_done == 10, f"resumed run completes 10 rounds, got {h2.rounds_done}")
    expect("| 10 |" in h2.report(), "the report counts the runs of both calls")
    firsts = [r["variant"] for r in h2.rows if r["round"] == 5][0]
    expect(firsts == overhead.VARIANTS["storm"][5 % 3], f"rotation goes on: round 5 "
           f"starts with {firsts}")
    lines = open(path).read().splitlines()
    expect(len(lines) == 31, f"csv: header + 30 runs, got {len(lines)}")
    with open(path, "a") as f:
        f.write("10,storm,plain,0,1.0,4.0,,,,,,,,deadbeef\n")
    try:
        overhead.Harness(config(tmp, workloads="storm"), Model()).resume(path)
        expect(False, "a row from another machine is refused")
    except ValueError as ex:
        expect("deadbeef" in str(ex), f"the refusal names the machine: {ex}")


def test_resume_inside_a_round(tmp):
    # The first call is cut inside round 3 (11 runs of 10 s in a 115 s budget): the resumed
    # call first runs what round 3 lacks, then rounds 4-9; round 3 is not counted complete
    # before that, every (round, variant) runs exactly once. Another configuration (here
    # the storm's launch count) is refused.
    runner, clock = timed_runner(10.0)
    h = overhead.Harness(config(tmp, budget_s=115, workloads="storm"), runner)
    h.run(clock=clock)
    expect(len(h.rows) == 11 and h.rounds_done == 3,
           f"11 runs, 3 complete rounds, got {len(h.rows)}, {h.rounds_done}")
    expect("rounds completed: 3 of 10" in h.report(), "the cut round is not counted")
    path = os.path.join(tmp, "overhead.csv")
    h2 = overhead.Harness(config(tmp, workloads="storm"), Model())
    h2.resume(path)
    expect(h2.first_round == 3, f"resume at the cut round 3, got {h2.first_round}")
    h2.run()
    keys = [(r["round"], r["variant"]) for r in h2.rows]
    expect(len(keys) == 30 and len(set(keys)) == 30,
           f"30 runs, each (round, variant) once: {len(keys)} runs, {len(set(keys))} distinct")
    expect(h2.rounds_done == 10, f"10 complete rounds, got {h2.rounds_done}")
    try:
        overhead.Harness(config(tmp, workloads="storm", storm_launches=5), Model()).resume(path)
        expect(False, "rows of another configuration are refused")
    except ValueError as ex:
        expect("configuration" in str(ex), f"the refusal says why: {ex}")


def test_run_stops_at_the_budget(tmp):
    # Every run is handed the time left in the budget as its timeout.
    got = []

    def runner(argv, env, log, timeout_s=None):
        got.append(timeout_s)
        return Model()(argv, env, log)
    t = [0.0]

    def clock():
        t[0] += 7.0
        return t[0]
    c = config(tmp, budget_s=50, workloads="storm", run_timeout_s=30)
    overhead.Harness(c, runner).run(clock=clock)
    expect(got and got[0] == 30 and all(x <= 50 for x in got) and min(got) < 30,
           f"timeouts are min(run timeout, budget left): {got}")


def test_placement(tmp):
    # 4 cores with 2 SMT threads each (siblings n and n+4): each half holds whole cores.
    sib = {n: f"{n % 4},{n % 4 + 4}" for n in range(8)}
    got = overhead.cpu_halves(range(8), sib.get)
    expect(got == ("0,4,1,5", "2,6,3,7"), f"halves keep SMT siblings together: {got}")
    expect(overhead.cpu_halves([0, 1], lambda n: "0-1") is None, "one core: no split")
    c = config(tmp)
    c.halves = ("0,4", "2,6")
    h = overhead.Harness(c, None)
    argv, _ = h.command("ddp", "bare", "x.db")
    i = argv.index("sh")
    xs = [j for j, a in enumerate(argv) if a == "-x"]
    inj = [j for j, a in enumerate(argv) if a.startswith("CUDA_INJECTION64_PATH=")]
    expect(argv[i + 4:i + 6] == ["0,4", "2,6"] and xs and max(xs) < i and inj and inj[0] < i,
           f"ddp ranks bound through the wrapper, every -x (the injection's too) before it: "
           f"{argv}")
    argv, _ = h.command("storm", "plain", "x.db")
    expect("sh" not in argv, f"the storm is not bound: {argv}")
    # The wrapper itself: local rank 1 gets the second list, and the program runs.
    fake = os.path.join(tmp, "taskset")
    with open(fake, "w") as f:
        f.write('#!/bin/sh\necho "taskset $*"\n')
    os.chmod(fake, 0o755)
    import subprocess
    for rank, want in (("0", "taskset -c 0,4 prog arg"), ("1", "taskset -c 2,6 prog arg")):
        out = subprocess.run(["sh", "-c", overhead.BIND_SH, "bind", "0,4", "2,6", "prog", "arg"],
                             env={"PATH": tmp + ":/usr/bin:/bin",
                                  "OMPI_COMM_WORLD_LOCAL_RANK": rank},
                             capture_output=True, text=True).stdout.strip()
        expect(out == want, f"wrapper for local rank {rank}: {out!r}")


def test_interval(tmp):
    # The model's noise is common to a round's variants (1%): the interval of the added
    # ratio must hold the model's 1.05 and be narrow; with a noisy meridian it widens.
    h = overhead.Harness(config(tmp, workloads="storm"), Model())
    h.run()
    lo, hi = (float(x) for x in h.ci("storm", overhead.added_ratio,
                                      ["plain", "bare", "meridian"]).split("-"))
    expect(lo <= 1.05 <= hi and hi - lo < 0.1, f"interval {lo}-{hi} holds 1.05, narrow")
    rng = random.Random(3)
    for r in h.rows:
        if r["variant"] == "meridian":
            r["storm"] += rng.uniform(-1.0, 1.0)
    lo2, hi2 = (float(x) for x in h.ci("storm", overhead.added_ratio,
                                        ["plain", "bare", "meridian"]).split("-"))
    expect(hi2 - lo2 > 3 * (hi - lo), f"noise widens the interval: {lo2}-{hi2}")
    expect("95% interval" in h.report(), "the report has the interval column")


def test_bare_env(tmp):
    c = config(tmp, bare_env="BARE_CONSUMER_KINDS=A,B,C;BARE_CONSUMER_POOL=32")
    expect(c.bare_env == {"BARE_CONSUMER_KINDS": "A,B,C", "BARE_CONSUMER_POOL": "32"},
           f"bare env parse {c.bare_env}")
    argv, env = overhead.Harness(c, None).command("ref", "bare", "x.db")
    expect("BARE_CONSUMER_KINDS=A,B,C" in argv and "CUDA_INJECTION64_PATH" in env,
           f"bare env reaches the ranks: {argv}")


def test_inert_agent_does_not_count(tmp):
    # The storm is one process: meridian must be asked to make it a rank (--single), and a
    # meridian run whose agents sent nothing must not give a sample.
    argv, _ = overhead.Harness(config(tmp), None).command("storm", "meridian", "x.db")
    expect(argv[argv.index("profile") + 1] == "--single", f"storm under --single: {argv[:6]}")
    argv, _ = overhead.Harness(config(tmp), None).command("ref", "meridian", "x.db")
    expect("--single" not in argv, f"mpirun jobs are not --single: {argv[:6]}")
    h = overhead.Harness(config(tmp, workloads="storm"), Model(inert=True))
    h.run()
    expect(h.samples("storm", "meridian") == [], "an inert agent's runs give no sample")
    expect(len(h.samples("storm", "plain")) == 10, "plain runs still count")


def test_parse():
    expect(overhead.parse_metrics("ref", "ref_workload: world=2 measured_wall_s=1.5 "
                                  "check=FAILED") == {},
           "a failed result check gives no metric")
    got = overhead.parse_metrics("storm", "kernel_storm: launches=5 wall_s=1 us_per_launch=4.25\n")
    expect(got == {"storm": 4.25}, f"storm parse {got}")
    got = overhead.side_counts("kernel_storm: launches=5 wall_s=1 us_per_launch=4.25 stalls=7 "
                               "stall_ms=1.500 max_launch_us=60.0\n"
                               "meridian: rank 0: sent 10 events in 1 batches; lost 2\n"
                               "meridian: rank 1: sent 5 events in 1 batches; lost 0\n")
    expect(got == {"stalls": 7, "stall_ms": 1.5, "sent": 15, "lost": 2}, f"side counts {got}")
    expect(overhead.parse_kinds("[1,0]<stderr>:bare_consumer: kinds=A,B failed=C", "bare_consumer")
           == {"A", "B"}, "kinds parse stops at the failed list")


def main():
    for test in (test_full_run, test_budget_and_kinds, test_budget_counts_the_run_length,
                 test_resume, test_resume_inside_a_round, test_run_stops_at_the_budget,
                 test_placement, test_interval, test_bare_env,
                 test_inert_agent_does_not_count):
        with tempfile.TemporaryDirectory() as tmp:
            test(tmp)
    test_parse()
    print(f"test_overhead: {'all checks passed' if not FAILS else f'{len(FAILS)} checks failed'}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
