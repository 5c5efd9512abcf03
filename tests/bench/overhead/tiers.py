#!/usr/bin/env python3
"""tiers.py: what the steady tier, its windows and the full trace cost, side by side.

Where it sits: the benchmark of the always-on issue (issue 9), run on one H200 by
tests/gpu/run_on_gpu_host.sh (stage `tiers`). Not a test: it prints ratios and appends
every run to a CSV; tests/bench/overhead/RESULTS-tiers.md records what it printed. How
rounds run, resume, fit the device budget and get their intervals is runner.py's (shared
with inproc.py); this file holds the workloads, the variants and the report.

Workloads (each run is one process, world size 1, DDP over NCCL for the Python ones):
  storm  kernel_storm --steps S: S NVTX steps of K empty-kernel launches, each ending in a
         sync; per-step wall times printed by the workload
  py     tests/workloads/ddp_train.py --mode gpt2,kernel-dense --steps S: a GPT-2-small
         class step (bf16 autocast, AdamW; launch-bound) then the kernel-dense DDP step, in
         one process (one start-up); per-step times printed by the workload
Variants:
  plain   no profiler
  steady  meridian profile, MERIDIAN_TRACE=steady, MERIDIAN_WINDOWS=10/200@10 (10 steps
          every 200, the default of `meridian profile`)
  full    meridian profile, MERIDIAN_TRACE=full (every kernel, the default kinds)
  bare    tests/gpu/libbare_consumer.so as the CUDA injection, CONCURRENT_KERNEL only, its
          pre-zeroed pool (the floor a kernel tracer can reach)
  torch   ddp_train.py --profiler torch (CPU and CUDA activities) (py only)
  Diagnostics of the steady tier's cost outside windows (session 22; py only, any subset):
  nowin     steady with MERIDIAN_WINDOWS=none: the steady tier with CUPTI never attached
  late      steady with one window, steps 300-309 (GPT-2's): CUPTI never attached before
            step 300, so each process's steps 20-289 against its steps 330-599
            (early_median_ms, late_median_ms) say whether a window leaves a cost behind;
            early_host_ms and late_host_ms, the same of each step's host part (ddp_train's
            host_ms: until the work was enqueued), whether that cost is on the host
  nosample  steady with MERIDIAN_GPU_SAMPLE_HZ=0 (no NVML sampler thread)
  late2, late_bare, late_domains  `late` with a second window (steps 320-329), with the
            bare consumer's kinds (MERIDIAN_TRACE_KINDS=kernel, MERIDIAN_CUPTI_SELF_RECORDS=0),
            and with the whole-domain close (MERIDIAN_CUPTI_CLOSE=domains): which part of a
            window leaves the cost that run 55 found after it (RESULTS-tiers.md, session 22)
  inert     no `meridian profile`: the workload alone with libmeridian.so as the CUDA,
            NVTX and NCCL-profiler injection and MERIDIAN_DISABLE=1 (loaded, inert)
  load      no profiler: plain with ddp_train --step-load-us LOAD_US (a busy wait at every
            step's start, while the GPU is idle): a known cost of the goal's size (~2% of
            GPT-2's step, ~4% of kernel-dense's), the positive control of a measuring
            method: the report's "load-plain" line should read LOAD_US (session 24)
A round runs every variant of every workload once, in an order rotated each round; with
--concurrent a round's variants of a workload run at once, each pinned (taskset) to its
own share of the physical cores, the shares rotated over rounds, sharing the GPU: the
host's CPU speed, which drifts by 10-40% over seconds on the GPU host (session 23), is then
the same for both sides of each paired ratio (sequential rounds: 0.89-1.21 per-round
ratios of plain against steady on one host). The py processes of a round begin each
mode's measured steps together and keep the GPU busy until both have ended them
(ddp_train --pair-dir; filler_steps in the CSV). Sharing the GPU may hide a part of a
CPU-side cost: pair plain with `load` to measure how much (run 57, GPT-2: a median 456 us of
its 600, interval 291-844), and read "steady-plain scaled by the control". With more than two variants, plain
among them, --concurrent runs plain beside one other a round, the others in turn
(`--py-variants plain,steady,load --rounds 20`: 10 rounds of each pair, interleaved).
--turns K (with --concurrent) runs the py processes of a round in turns instead, K measured
steps each, slot order rotated every round (ddp_train --pair-turns; turn_slot in the CSV):
each has the GPU alone, so nothing of a CPU-side cost hides behind the other's kernels,
while the CPU's drift over seconds stays common to both over a few turns. Take a K that
divides neither the window length nor the period (7 for 10/200): otherwise every window
fills one block exactly and its detach always follows a wait. Run 58 (turns, each process
on its own half of the cores): the control read its full 600 us, but a round's ratio
still varied by +-2-4%, and its early and late steps' ratios were uncorrelated: the noise
is not a constant of each process but lasts seconds, and one thing the two did not share
was their cores. With --same-cores both run on every core (one steps at a time), which
makes the cores common too (a hypothesis for run 59 to test); but then the steady tier's
work off the main thread (flusher, CUPTI's flush, meridiand) can run during plain's turns
on plain's cores, which would pull steady/plain low (RESULTS-tiers.md, "Session 25").

Metrics (per run): the MEAN step time over every measured step (windows' attach, detach
and traced steps included: the cost a whole job pays), and for storm the MEDIAN step time
over the steps outside windows and outside each detach step (the steady tier's floor).
py runs also keep the speed probe (ddp_train --speed-probe: a fixed pure-Python loop
timed after each step; session 23 found the GPU host's CPU speed drifting by 10-40% over
seconds, within and between processes): its median (probe_ms), and in EARLY and LATE.
Report: medians over rounds, and paired ratios (each round's ratio, then their median,
with a 95% bootstrap interval over rounds and the median's distribution-free interval
from two order statistics, which the bootstrap under ~10 rounds is not):
  steady mean / plain mean                     goal <= 1.03 (py: gpt2, kernel-dense)
  (full - plain) / (bare - plain)              goal <= 1.10 (added cost of the full trace)
  (full - plain) / (torch - plain)             goal < 1
  storm: steady outside-window median / plain median   goal within 1%
  steady mean / plain mean, each per its probe median    (py; a diagnostic: meant to divide
                                                  the CPU's speed out, it added noise instead)

Usage: tiers.py --build DIR --meridian CLI --agent-lib LIB [--workloads storm,py]
       [--variants plain,steady,full,bare] [--py-variants plain,steady,full,bare,torch]
       [--rounds 5] [--storm-rounds N] [--no-aslr] [--steps 600]
       [--torch-steps 200] [--budget-s 540] [--csv FILE] [--resume] [--concurrent]
With --resume the rows already in --csv count (a run may continue in a later device call;
every row names its machine's boot id). --report-only --pool A.csv,B.csv,... reports several
runs' CSVs as one (each file's rounds kept apart, an older file's missing columns empty):
the way to pool calls whose CSVs differ in their columns (session 22: run 55's three calls).
"""
import argparse
import math
import os
import random
import re
import statistics
import sys
import tempfile
import threading

from runner import (add_common_args, boot_id, bootstrap, check_gpu_shareable, cpu_shares,
                    median_ci_exact, read_rows, run_resumable, run_timed)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "workloads"))
from ddp_train import ABANDONED, parse_windows  # noqa: E402  (no torch imported)
WINDOWS = "10/200@10"
FIELDS = ["round", "workload", "mode", "variant", "steps", "mean_ms", "median_ms",
          "outside_median_ms", "wall_s", "rc", "machine", "early_median_ms",
          "late_median_ms", "early_host_ms", "late_host_ms", "early_cpu_ms", "late_cpu_ms",
          "early_others_ms", "late_others_ms", "early_nvcsw", "late_nvcsw", "late_threads",
          "probe_ms", "early_probe_ms", "late_probe_ms", "cpus", "filler_steps",
          "turn_slot"]
VARIANTS = ("plain", "steady", "full", "bare", "torch")
# the steady-tier diagnostics above: what each sets on top of MERIDIAN_TRACE=steady
STEADY_DIAGNOSTICS = {"nowin": {"MERIDIAN_WINDOWS": "none"},
                      "late": {"MERIDIAN_WINDOWS": "300-309"},
                      "late2": {"MERIDIAN_WINDOWS": "300-309,320-329"},
                      "late_bare": {"MERIDIAN_WINDOWS": "300-309",
                                    "MERIDIAN_TRACE_KINDS": "kernel",
                                    "MERIDIAN_CUPTI_SELF_RECORDS": "0"},
                      "late_domains": {"MERIDIAN_WINDOWS": "300-309",
                                       "MERIDIAN_CUPTI_CLOSE": "domains"},
                      "nosample": {"MERIDIAN_WINDOWS": WINDOWS, "MERIDIAN_GPU_SAMPLE_HZ": "0"}}
DIAGNOSTICS = tuple(STEADY_DIAGNOSTICS) + ("inert", "load")  # the last two: no meridian
PY_ONLY = ("torch", "load")  # options of ddp_train's (--profiler torch, --step-load-us)
LOAD_US = 600  # the `load` variant's known cost a step, in microseconds
EARLY, LATE = range(20, 290), range(330, 1 << 30)  # around the `late` variant's window
PHASES = {"early": EARLY, "late": LATE}  # the CSV's early_* and late_* columns


WIN_LENGTH, WIN_PERIOD, WIN_OFFSET = parse_windows(WINDOWS)


def in_window(step):
    return step >= WIN_OFFSET and (step - WIN_OFFSET) % WIN_PERIOD < WIN_LENGTH


def window_or_detach(step):
    return in_window(step) or in_window(step - 1)


def job_env():
    """The environment every workload run gets: NVLink multicast off, a local DDP master."""
    env = dict(os.environ)
    env.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29600 + random.randint(0, 300)))
    return env


def workload_argv(build, workload, steps, per_step=1000, mode=None):
    """kernel_storm with NVTX steps (workload "storm"), else ddp_train.py in `mode`."""
    if workload == "storm":
        return [os.path.join(build, "tests/workloads/kernel_storm"), "--steps", str(steps),
                "--launches", str(steps * per_step), "--warmup", "2000"]
    return [sys.executable, os.path.join(ROOT, "tests/workloads/ddp_train.py"), "--mode",
            mode or workload, "--steps", str(steps), "--warmup", "10", "--print-steps",
            "--thread-cpu-at", thread_cpu_at(steps), "--speed-probe"]


def thread_cpu_at(steps):
    """ddp_train's --thread-cpu-at for a run of `steps`: the edges of EARLY and LATE that
    fall inside it, and its end (a torch run of 200 steps: 20,200)."""
    return ",".join(map(str, sorted({p for p in (EARLY.start, EARLY.stop, LATE.start)
                                     if p < steps} | {steps})))


def profile_argv(a, db, work):
    """`meridian profile` around the workload, one rank, the database at db."""
    return [a.meridian, "profile", "--single", "-o", db, "--agent-lib", a.agent_lib, "--"] + work


def command(a, workload, variant, db):
    env = job_env()
    steps = a.torch_steps if variant == "torch" else a.steps
    work = workload_argv(a.build, workload, steps, a.storm_per_step, "gpt2,kernel-dense")
    if variant == "torch":
        work += ["--profiler", "torch"]
    if a.no_aslr:
        # one address layout for every process: the launch path's per-process spread
        # (3.2-4.8 us a launch between plain storm processes, run 15) may come from it
        work = ["setarch", os.uname().machine, "-R"] + work
    if variant == "load":
        work += ["--step-load-us", str(LOAD_US)]
    if variant in ("plain", "torch", "load"):
        return work, env
    if variant == "inert":
        for var in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "NCCL_PROFILER_PLUGIN"):
            env[var] = a.agent_lib
        env["MERIDIAN_DISABLE"] = "1"
        return work, env
    if variant in STEADY_DIAGNOSTICS:
        env["MERIDIAN_TRACE"] = "steady"
        env.update(STEADY_DIAGNOSTICS[variant])
        return profile_argv(a, db, work), env
    if variant == "bare":
        env["CUDA_INJECTION64_PATH"] = os.path.join(a.build, "tests/gpu/libbare_consumer.so")
        env["BARE_CONSUMER_KINDS"] = "CONCURRENT_KERNEL"
        return work, env
    env["MERIDIAN_TRACE"] = "steady" if variant == "steady" else "full"
    if variant == "steady":
        env["MERIDIAN_WINDOWS"] = WINDOWS
    else:
        env.pop("MERIDIAN_WINDOWS", None)
    return profile_argv(a, db, work), env


def parse(workload, out, hosts=None, cpus=None, probes=None):
    """{mode: [step ms ...]} from the workload's output; with a dict `hosts`, also fills
    {mode: [host part ms ...]} where the workload prints them (ddp_train's host_ms), with
    a dict `cpus` {mode: [the main thread's CPU ms in the host part ...]} (cpu_ms), with a
    dict `probes` {mode: [the speed probe's ms after each step ...]} (probe_ms)."""
    steps = {}
    if workload == "storm":
        m = re.search(r"kernel_storm: step_us=([0-9.,]+)", out)
        if m:
            steps["storm"] = [float(x) / 1000 for x in m.group(1).split(",")]
        return steps
    for m in re.finditer(r"ddp_train: rank 0 mode=(\S+) step (\d+) ms=([0-9.]+)"
                         r"(?: host_ms=([0-9.]+))?(?: cpu_ms=([0-9.]+))?"
                         r"(?: probe_ms=([0-9.]+))?", out):
        steps.setdefault(m.group(1), []).append(float(m.group(3)))
        for into, value in ((hosts, m.group(4)), (cpus, m.group(5)), (probes, m.group(6))):
            if into is not None and value:
                into.setdefault(m.group(1), []).append(float(value))
    return steps


def thread_figures(out, mode):
    """From ddp_train's --thread-cpu-at lines of rank 0's `mode`: per step of EARLY and of
    LATE, the other threads' CPU ms and the main thread's involuntary switches, and LATE's
    three busiest other threads (name=ms a step); "" where the workload printed none."""
    got = dict(early_others_ms="", late_others_ms="", early_nvcsw="", late_nvcsw="",
               late_threads="")
    pat = (r"ddp_train: rank 0 mode=" + re.escape(mode) + r" threads steps (\d+)-(\d+): "
           r"main_cpu_ms=\S+ main_nvcsw=(-?\d+) others_cpu_ms=([0-9.]+) started=\d+ "
           r"ended=\d+ ?(.*)")
    for m in re.finditer(pat, out):
        s0, s1 = int(m.group(1)), int(m.group(2))
        phase = "early" if s0 == EARLY.start else "late" if s0 == LATE.start else None
        if phase is None or s1 <= s0:
            continue
        n = s1 - s0
        got[f"{phase}_others_ms"] = "%.4f" % (float(m.group(4)) / n)
        got[f"{phase}_nvcsw"] = "%.3f" % (int(m.group(3)) / n) if int(m.group(3)) >= 0 else ""
        if phase == "late":
            busiest = []
            for item in m.group(5).split()[:3]:
                name, _, ms = item.rpartition("=")
                busiest.append("%s=%.3f" % (name.rpartition("/")[0], float(ms) / n))
            got["late_threads"] = " ".join(busiest)
    return got


def filler_steps(out, mode):
    """How many unmeasured steps rank 0's `mode` ran after its measured ones while the
    process beside it finished (ddp_train --pair-dir); "" where it printed none."""
    m = re.search(r"ddp_train: rank 0 mode=" + re.escape(mode) + r" pair_filler_steps=(\d+)",
                  out)
    return m.group(1) if m else ""


def step_figures(ms, host, cpu=(), probe=()):
    """A run's figures from its step times ms, their host parts host, the main thread's
    CPU time in those cpu and the speed probe after each step probe (each maybe empty): the
    mean and median step, the median outside windows, the probe's median, and the medians
    of the steps (of their host parts, that CPU time, the probe) in EARLY and in LATE; ""
    where no step falls in."""
    def median_where(xs, keep):
        kept = [t for i, t in enumerate(xs) if keep(i)]
        return "%.4f" % statistics.median(kept) if kept else ""
    got = dict(mean_ms="%.4f" % statistics.fmean(ms),
               median_ms=median_where(ms, lambda i: True),
               outside_median_ms=median_where(ms, lambda i: not window_or_detach(i)),
               probe_ms=median_where(probe, lambda i: True))
    for col, xs in (("median_ms", ms), ("host_ms", host), ("cpu_ms", cpu), ("probe_ms", probe)):
        for phase, steps in PHASES.items():
            got[f"{phase}_{col}"] = median_where(xs, steps.__contains__)
    return got


def run_one(a, rnd, workload, variant, writer):
    """Runs one process; writes and returns its rows (one per mode)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd, env = command(a, workload, variant, os.path.join(tmp, "run.db"))
        out, rc, wall = run_timed(cmd, env, a.run_timeout_s)
    return write_rows(rnd, workload, variant, out, rc, wall, writer)


def concurrent_plan(plan, given):
    """--concurrent's plan: one item a (round, workload), its variants run at once. Two
    variants run side by side every round; more, of which plain is one, run as pairs: round
    r pairs plain with the ((r-1) mod k)-th of the k others (in the order given(workload)),
    so that every figure beside plain comes from the same calls, and more than two
    processes never share the GPU (each one more hides more of a CPU-side cost). Returns
    [(round, workload, variants, turn)]: turn, the pair's count of its own rounds (1, 2,
    ...), rotates its cores. SystemExit when more than two lack plain."""
    grouped = {}
    for rnd, w, v in plan:
        grouped.setdefault((rnd, w), []).append(v)
    out = []
    for (rnd, w), vs in grouped.items():
        if len(vs) <= 2:
            out.append((rnd, w, tuple(vs), rnd))
            continue
        if "plain" not in vs:
            raise SystemExit(f"tiers: --concurrent runs more than two variants as pairs with "
                             f"plain: add plain to {','.join(given(w))}")
        others = [v for v in given(w) if v != "plain"]
        k = len(others)
        out.append((rnd, w, ("plain", others[(rnd - 1) % k]), (rnd - 1) // k + 1))
    return out


def run_concurrent(a, rnd, workload, variants, writer, launch=run_timed, shares_of=cpu_shares,
                   turn=None):
    """Runs the variants of one round at once, each pinned (taskset) to its own share of the
    physical cores (cpu_shares: the shares rotate over rounds), each with its own DDP port:
    the host's CPU speed, which drifts by 10-40% over seconds on the GPU host (session 23),
    is then the same for both sides of a ratio. They share the GPU, whose kernels of the
    two time-slice: that may hide a part of a CPU-side cost (the `load` control measures
    how much), unless a.turns has them take turns on it (ddp_train --pair-turns, the first
    slot rotated as the shares are). py runs get ddp_train's --pair-dir, so they begin each
    mode's measured steps together and one that ends first runs unmeasured steps until the
    other has: without it (run 57) `meridian profile` started its workload a second or so
    after a plain one, and the kernel-dense steps of the one ending later ran partly alone
    on the GPU (its rounds' ratios spread 0.91-1.19); a run that fails leaves ABANDONED
    there, so its partner stops at once. storm runs are not aligned. Writes and returns the rows of
    every variant, in the order given; launch(cmd, env, timeout) runs one, shares_of(n, turn)
    cuts the cores (a test hands its own of both); turn (default rnd) rotates the shares."""
    # the shares go by the variants' sorted order: the plan rotates their order each round
    # too, and the two rotations would cancel (plain on the same share every round)
    t = rnd if turn is None else turn
    by_name = shares_of(len(variants), t)
    shares = [by_name[sorted(variants).index(v)] for v in variants]
    aligned = workload == "py" and len(variants) > 1  # storm's runs cannot meet
    if a.turns and a.same_cores and aligned:  # one runs at a time: both on every core
        shares = [sorted(c for share in by_name for c in share)] * len(variants)
    # --turns: who goes first rotates as the shares do
    slots = [(sorted(variants).index(v) + t) % len(variants) for v in variants]
    results = [None] * len(variants)
    port = 29600 + random.randint(0, 300)  # one base: each command() draws its own
    with tempfile.TemporaryDirectory() as tmp:
        def one(slot):
            cmd, env = command(a, workload, variants[slot], os.path.join(tmp, f"run{slot}.db"))
            env["MASTER_PORT"] = str(port + 400 * slot)
            cmd = ["taskset", "-c", ",".join(map(str, shares[slot]))] + cmd
            if aligned:  # the last arguments are ddp_train's
                cmd += ["--pair-dir", os.path.join(tmp, "pair"), "--pair-n", str(len(variants))]
                if a.turns:
                    cmd += ["--pair-turns", str(a.turns), "--pair-slot", str(slots[slot])]
            results[slot] = launch(cmd, env, a.run_timeout_s)
            if aligned and results[slot][1] != 0:  # the others stop waiting for this one
                os.makedirs(os.path.join(tmp, "pair"), exist_ok=True)
                open(os.path.join(tmp, "pair", ABANDONED), "w").close()
        threads = [threading.Thread(target=one, args=(k,)) for k in range(len(variants))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    rows = []
    for slot, v in enumerate(variants):
        out, rc, wall = results[slot] or ("the launching thread failed", 1, 0.0)
        rows += write_rows(rnd, workload, v, out, rc, wall, writer,
                           cpus=",".join(map(str, shares[slot])),
                           turn_slot=slots[slot] if aligned and a.turns else "")
    return rows


def write_rows(rnd, workload, variant, out, rc, wall, writer, cpus="", turn_slot=""):
    """Parses one run's output into its rows (one per mode), writes and returns them."""
    rows = []
    hosts, cpus_in_host, probes = {}, {}, {}
    steps = parse(workload, out, hosts, cpus_in_host, probes)
    if rc != 0 or not steps:
        print(f"tiers: round {rnd} {workload}/{variant}: rc={rc}, no steps parsed; last "
              f"output:\n{out[-1500:]}", flush=True)
    for mode, ms in steps.items():
        # in one process the kernel-dense steps continue the agent's step count after gpt2
        row = dict(round=rnd, workload=workload, mode=mode, variant=variant, steps=len(ms),
                   wall_s="%.1f" % wall, rc=rc, machine=boot_id(),
                   **step_figures(ms, hosts.get(mode, []), cpus_in_host.get(mode, []),
                                  probes.get(mode, [])),
                   **thread_figures(out, mode), cpus=cpus, filler_steps=filler_steps(out, mode),
                   turn_slot=turn_slot)
        rows.append(row)
        writer.writerow(row)
        print(f"tiers: round {rnd} {mode:12s} {variant:7s} mean {row['mean_ms']} ms median "
              f"{row['median_ms']} outside-windows median {row['outside_median_ms']} "
              f"({len(ms)} steps, {wall:.1f} s, rc {rc})", flush=True)
    return rows


def load_equivalent(mode, steady_us, load_us, n=2000):
    """Prints the steady tier's added time as the positive control would have it: the median
    of steady-plain over that of load-plain, times LOAD_US (a method that shows only a part
    of a CPU-side cost shows the same part of both), with two intervals: a bootstrap that
    resamples the two sets of rounds apart (they may come from different calls; it covers
    less than 95% at a dozen rounds), "unbounded" when over 2.5% of its resamples put the
    control's median at or under zero; and the conservative one, the two medians'
    distribution-free intervals combined (each >= 95%). Nothing when either set is empty or
    the control's median is not above zero (no scale to read)."""
    if not steady_us or not load_us or statistics.median(load_us) <= 0:
        return
    rng = random.Random(1)
    ests, lost = [], 0
    for _ in range(n):
        ld = statistics.median(rng.choices(load_us, k=len(load_us)))
        st = statistics.median(rng.choices(steady_us, k=len(steady_us)))
        if ld > 0:
            ests.append(st / ld * LOAD_US)
        else:
            lost += 1
    ests.sort()
    boot = "unbounded" if lost > 0.025 * n else "%.1f-%.1f" % (
        ests[int(0.025 * n)], ests[int(0.975 * n) - 1])  # the lost ones: above the top
    ex_s, ex_l = median_ci_exact(steady_us), median_ci_exact(load_us)
    if ex_s is None or ex_l is None:
        exact = "-"
    elif ex_l[0] <= 0:
        exact = "unbounded"
    else:  # s / l over s in ex_s, l in ex_l (l > 0): each end at an end of both
        ends = [sv / lv * LOAD_US for sv in ex_s for lv in ex_l]
        exact = "%.1f-%.1f" % (min(ends), max(ends))
    est = statistics.median(steady_us) / statistics.median(load_us) * LOAD_US
    print(f"  {mode:12s} {'steady-plain scaled by the control (us)':42s} {est:.1f}  [{boot}]  "
          f"exact [{exact}]  n={len(steady_us)},{len(load_us)}  "
          f"(steady-plain)/(load-plain) x {LOAD_US}")


def read_pooled(paths):
    """The rows of several results CSVs as one list: file k's rounds become k*1000 + round
    (its own rounds never pair with another file's), a column it lacks reads empty."""
    rows = []
    for k, path in enumerate(paths, 1):
        if not os.path.isfile(path):
            raise SystemExit(f"tiers: --pool: {path} is not a file")
        got = read_rows(path)
        if not got or "round" not in got[0]:
            raise SystemExit(f"tiers: --pool: {path} holds no result rows")
        for r in got:
            r = {f: r.get(f, "") for f in FIELDS}
            r["round"] = str(k * 1000 + int(r["round"]))
            rows.append(r)
    return rows


def per_probe(r):
    """A run's mean step in units of its speed probe's median (nan without a probe): the
    step with the CPU's speed at the time divided out."""
    return float(r["mean_ms"]) / float(r["probe_ms"]) if r.get("probe_ms") else math.nan


def step_per_probe(r, phase):
    """A run's median step over its median probe in `phase` (early or late); 0.0 without."""
    step, probe = r.get(f"{phase}_median_ms"), r.get(f"{phase}_probe_ms")
    return float(step) / float(probe) if step and probe else 0.0


def phase_figure(r, phase, col):
    """A row's figure in `phase`: the column phase_col as a float, or col(r, phase) for a
    derived one; 0.0 where none."""
    got = col(r, phase) if callable(col) else r.get(f"{phase}_{col}")
    return float(got) if got else 0.0


def core_designs(by):
    """How the paired rounds of `by` ({(mode, variant): {round: row}}) placed their
    processes, from the rows' cpus: {"same": n, "split": n} (--same-cores; or disjoint
    shares), counting each (mode, round) whose variants all have a CPU list."""
    counts = {"same": 0, "split": 0}
    rounds = {}
    for (m, _), rs in by.items():
        for rd, r in rs.items():
            rounds.setdefault((m, rd), []).append(r.get("cpus") or "")
    for lists in rounds.values():
        if len(lists) < 2 or not all(lists):
            continue
        counts["same" if len(set(lists)) == 1 else "split"] += 1
    return counts


def report(rows):
    by = {}
    for r in rows:
        if str(r["rc"]) != "0":
            continue
        by.setdefault((r["mode"], r["variant"]), {})[int(r["round"])] = r
    modes = sorted({k[0] for k in by})
    designs = core_designs(by)
    if designs["same"] and designs["split"]:
        print(f"\ntiers: note: {designs['same']} paired round(s) ran on the same cores "
              f"(--same-cores) and {designs['split']} on separate shares: these figures mix "
              f"the two designs (report each CSV alone to keep them apart)")
    print("\ntiers: medians over rounds (ms per step)")
    for m in modes:
        for v in VARIANTS + DIAGNOSTICS:
            rs = by.get((m, v))
            if rs:
                means = [float(r['mean_ms']) for r in rs.values()]
                print(f"  {m:12s} {v:7s} mean {statistics.median(means):9.4f}"
                      f"  median {statistics.median(float(r['median_ms']) for r in rs.values()):9.4f}"
                      f"  rounds {len(rs)}  means' range {min(means):.4f}-{max(means):.4f}")
    print("\ntiers: paired ratios (per round, then the median; 95% bootstrap interval; exact: "
          "the median's distribution-free interval, >= 95%, '-' under 6 rounds)")

    def paired(m, fn, need, label, goal, key="mean_ms"):
        """key: a column, or a function of a row (a figure the CSV does not hold)."""
        get = key if callable(key) else lambda r: float(r.get(key) or "nan")
        rounds = set.intersection(*[set(by.get((m, v), {})) for v in need])
        vals = []
        for rd in sorted(rounds):
            x = [get(by[(m, v)][rd]) for v in need]
            y = fn(*x)
            if y is not None and math.isfinite(y):
                vals.append(y)
        if not vals:
            return vals
        ci, ex = bootstrap(vals), median_ci_exact(vals)
        cis = "%.4f-%.4f" % ci if ci else "-"
        exs = "%.4f-%.4f" % ex if ex else "-"
        print(f"  {m:12s} {label:42s} {statistics.median(vals):.4f}  [{cis}]  exact [{exs}]  "
              f"n={len(vals)}  goal {goal}")
        return vals

    for m in modes:
        paired(m, lambda p, s: s / p, ["plain", "steady"], "steady/plain (mean step)", "<= 1.03")
        paired(m, lambda p, f, b: (f - p) / (b - p) if b > p else None, ["plain", "full", "bare"],
               "added(full)/added(bare) (mean step)", "<= 1.10")
        paired(m, lambda p, f, t: (f - p) / (t - p) if t > p else None,
               ["plain", "full", "torch"], "added(full)/added(torch) (mean step)", "< 1")
        paired(m, lambda p, s: s / p, ["plain", "steady"],  # the 1%: the storm's
               "steady/plain (median outside windows)", "within 1%" if m == "storm" else "-",
               key="outside_median_ms")
        paired(m, lambda p, s: s / p, ["plain", "steady"], "steady/plain (mean step/probe)",
               "-", key=per_probe)  # a diagnostic: the probe added noise (session 23)
        paired(m, lambda p, s: s / p, ["plain", "steady"], "steady/plain (probe)", "-",
               key="probe_ms")
        steady_us = paired(m, lambda p, s: (s - p) * 1e3, ["plain", "steady"],
                           "steady-plain (mean step, us)", "-")
        load_us = paired(m, lambda p, d: (d - p) * 1e3, ["plain", "load"],
                         "load-plain (mean step, us)", f"= {LOAD_US} (known)")
        load_equivalent(m, steady_us, load_us)  # what the method saw, scaled by how it sees
        for v in DIAGNOSTICS:
            paired(m, lambda p, d: d / p, ["plain", v], f"{v}/plain (mean step)", "-")
            paired(m, lambda p, d: d / p, ["plain", v], f"{v}/plain (median step)", "-",
                   key="median_ms")
    print("\ntiers: in one process, the median of steps 330+ over that of steps 20-289 "
          "(`late`: one window at 300-309; the others: the null)")
    for m in modes:
        for v in ("plain", "steady") + DIAGNOSTICS:
            for what, col in (("", "median_ms"), (" host part", "host_ms"),
                              (" host CPU", "cpu_ms"), (" probe", "probe_ms"),
                              (" step/probe", step_per_probe)):
                both = [(phase_figure(r, "late", col), phase_figure(r, "early", col))
                        for r in by.get((m, v), {}).values()]
                vals = [late / early for late, early in both if late and early]
                if vals:
                    print(f"  {m:12s} {v:9s} late/early{what} {statistics.median(vals):.4f}  "
                          f"range {min(vals):.4f}-{max(vals):.4f}  n={len(vals)}")
            for what, key in (("other threads' CPU ms a step", "others_ms"),
                              ("main thread's involuntary switches a step", "nvcsw")):
                pairs = [(float(r["early_" + key]), float(r["late_" + key]))
                         for r in by.get((m, v), {}).values()
                         if r.get("early_" + key) and r.get("late_" + key)]
                if pairs:
                    print(f"  {m:12s} {v:9s} {what}: early "
                          f"{statistics.median(p[0] for p in pairs):.3f}, late "
                          f"{statistics.median(p[1] for p in pairs):.3f}  n={len(pairs)}")
            tops = [r["late_threads"] for r in by.get((m, v), {}).values() if r.get("late_threads")]
            if tops:
                print(f"  {m:12s} {v:9s} busiest other threads late (ms a step): {tops[0]}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(ap, "tiers.csv")
    ap.add_argument("--workloads", default="storm,py")
    ap.add_argument("--variants", default="plain,steady,full,bare",
                    help="variants of storm (not torch nor load: py's only)")
    ap.add_argument("--py-variants", default="plain,steady,full,bare,torch",
                    help=f"variants of py: {', '.join(VARIANTS)}, and the diagnostics "
                         f"{', '.join(DIAGNOSTICS)} (the top of this file)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--storm-rounds", type=int, default=None,
                    help="rounds of storm (default --rounds): its runs take seconds")
    ap.add_argument("--no-aslr", action="store_true",
                    help="run every workload under setarch -R (one address layout)")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--torch-steps", type=int, default=200)
    ap.add_argument("--storm-per-step", type=int, default=1000)
    ap.add_argument("--pool", default="",
                    help="with --report-only: CSV[,CSV...] reported as one (rounds kept "
                         "apart per file)")
    ap.add_argument("--turns", type=int, default=0, metavar="K",
                    help="with --concurrent: the py processes of a round take turns, K "
                         "measured steps each (ddp_train --pair-turns), instead of sharing "
                         "the GPU: each has it alone, and the CPU's drift is common to both")
    ap.add_argument("--same-cores", action="store_true",
                    help="with --turns: the processes of a py round all run on every "
                         "physical core (only one steps at a time; the waiting one polls "
                         "a file every millisecond), so the cores' speed is common to both "
                         "sides too; without it each has its own share, as in run 58")
    ap.add_argument("--concurrent", action="store_true",
                    help="run each round's variants at once, each on its own share of the "
                         "physical cores (taskset), sharing the GPU: both sides of a ratio "
                         "then see the same CPU speed; more than two variants: plain beside "
                         "each other in turn, a pair a round (see the top of this file)")
    a = ap.parse_args(argv)
    if a.turns and (a.turns < 1 or not a.concurrent):
        raise SystemExit("tiers: --turns K takes K >= 1 and --concurrent (the processes that "
                         "take turns are a concurrent round's)")
    if a.same_cores and not a.turns:
        raise SystemExit("tiers: --same-cores takes --turns (processes that step at the same "
                         "time must not share cores)")
    if a.pool and not a.report_only:
        raise SystemExit("tiers: --pool reads finished runs: give it with --report-only")
    if a.report_only:
        report(read_pooled(a.pool.split(",")) if a.pool else read_rows(a.csv))
        return 0
    known = set(VARIANTS + DIAGNOSTICS)
    for opt, given in (("--variants", a.variants), ("--py-variants", a.py_variants)):
        bad = [v for v in given.split(",") if v not in known]
        if bad:
            raise SystemExit(f"tiers: {opt}: unknown variant(s) {', '.join(bad)}; known: "
                             f"{', '.join(sorted(known))}")
        twice = sorted({v for v in given.split(",") if given.split(",").count(v) > 1})
        if twice:  # a round's rows are kept by (mode, variant): one run would hide the other
            raise SystemExit(f"tiers: {opt}: {', '.join(twice)} given twice; a null pair is "
                             f"plain,inert")
    py_only = [v for v in a.variants.split(",") if v in PY_ONLY]
    if py_only and "storm" in a.workloads.split(","):
        raise SystemExit(f"tiers: --variants: {', '.join(py_only)}: py variants only "
                         f"(ddp_train's --profiler torch and --step-load-us; kernel_storm has "
                         f"neither): give them in --py-variants")
    plan = []
    storm_rounds = a.rounds if a.storm_rounds is None else a.storm_rounds
    for rnd in range(1, max(a.rounds, storm_rounds) + 1):
        for w in a.workloads.split(","):
            if rnd > (storm_rounds if w == "storm" else a.rounds):
                continue
            vs = (a.py_variants if w == "py" else a.variants).split(",")
            k = (rnd - 1) % len(vs)
            for v in vs[k:] + vs[:k]:
                plan.append((rnd, w, v))
    if a.concurrent:  # one plan item a round: its variants at once
        items = concurrent_plan(plan, lambda w: (a.py_variants if w == "py" else
                                                 a.variants).split(","))
        check_gpu_shareable()
        turns = {(rnd, w): turn for rnd, w, _, turn in items}
        plan = [(rnd, w, vs) for rnd, w, vs, _ in items]
        run = lambda rnd, w, vs, writer: run_concurrent(  # noqa: E731
            a, rnd, w, vs, writer, turn=turns[(rnd, w)])
    else:
        run = lambda rnd, w, v, writer: run_one(a, rnd, w, v, writer)  # noqa: E731
    rows = run_resumable(a, plan, FIELDS, run, "tiers",
                         f"windows {WINDOWS}" + (", concurrent" if a.concurrent else ""))
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
