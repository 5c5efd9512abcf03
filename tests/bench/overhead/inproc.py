#!/usr/bin/env python3
"""inproc.py: what a traced step costs, meridian against the bare consumer, each measured
inside one process.

Where it sits: a benchmark of the always-on issue (issue 9), run on one H200 by
tests/gpu/run_on_gpu_host.sh (stage `inproc`). Not a test: it prints ratios and appends every
run to a CSV; tests/bench/overhead/RESULTS-tiers.md records what it printed.

Why: tiers.py compares processes, and on the H200 host the same unprofiled workload moves
by +-12% from one process to the next (runs 15-32), and by as much within one process over
seconds (run 33: a plain run's second half 9% faster or 20% slower than its first), so
"the full trace adds at most 1.10x what a bare consumer adds" cannot be resolved by
comparing processes or halves. Here traced and untraced steps alternate in one process, and
every figure is a ratio of two step medians of that process:
  window  meridian's steady tier with windows WINDOWS (default 20/100@10): the steps inside
          a window run with CUPTI attached and meridian's full capture path (the same kinds
          and code as `--full`); the steps outside run detached.
  bare    no meridian; the workload attaches tests/gpu/libbare_consumer.so itself
          (CONCURRENT_KERNEL only, pre-zeroed pool) in the same windows and detaches it
          after them the way CUPTI documents dynamic detach (--bare-windows).
  plain   no profiler: the same classification of steps, the method's null (its ratio
          must be ~1.00), and the reference for the steady tier's steps outside windows.
  before  optional: `window` with an earlier agent library (--before-lib), to measure a
          change of the agent side by side (the edges, paired per round).
  window_kernel, window_barekinds, window_noflush, window_nopace, window_nosampler,
  window_sampler10 (NVML readings at 10 Hz in windows: the default until session 19),
  window_closedomains (the close enables the two whole callback domains: the default until
  session 21; now the launch callbacks alone)
          optional: `window` with
          one of meridian's mechanisms off (MERIDIAN_VARIANTS below), each reported against
          the bare consumer and against `window`, paired per round: where a traced step's
          excess over the bare consumer is.
  window_recordonly  optional: `window` in the agent's record-only mode (`meridian run
          --record-file`, no meridiand and no socket: the records are encoded and written to
          a file), against `window` per round: what the daemon's ingest beside the job costs
          a traced step. No database: its windows are the specification's.
  window_alt_kinds, window_alt_subscribe, window_alt_flush  optional (session 15):
          `window` with MERIDIAN_CUPTI_ALTERNATE, so that every second meridian window of the
          process changes one mechanism to the bare consumer's way (kernel records alone; no
          CUPTI subscriber held through the window; no periodic flush): the agent says per
          attach which it was, and the report gives added(changed) - added(default) inside
          each process, the two kinds of window sharing one baseline. Between processes
          (the window_* variants above) 12 rounds carry +-2-4 points of a step on a noisy
          host (run 47); this comparison does not pay the process-to-process spread.
  window_alone  optional, with --mixed: `window` without the bare consumer in its process,
          against `window` per round: whether the bare consumer's attaches change what
          meridian's windows cost (the mixed design assumes they do not; runs 34-38 had
          meridian alone adding 3.9% to a GPT-2 step, runs 39-41 with the bare consumer
          beside it ~8.5%, on other days and hosts).
  per run: added = median(window steps, each window's first step left out: it pays the
           attach) / median(steps outside windows, the two steps after each window left
           out: the detach) - 1
  per round: added(meridian) / added(bare)   goal <= 1.10, the issue's full-trace goal,
           measured per traced step.
Also printed, between processes as in tiers.py: the steady tier's steps outside windows
against the plain run's (median/median), for reference only; and, in one process again, what
the edges of meridian's windows add to their steps in ms (the attach step, the two steps
after the window that close and detach), and from them the steady tier's whole-run cost at
the issue's 10/200 windows without the cost outside windows (edges + 9 traced steps).
--pool (with --report-only) pools several runs' CSVs: each --mixed process's
added(meridian's default windows)/added(bare) is one value (a `window` row's every window, a
window_alt_* row's default windows only), per host and over all hosts (session 16: the
kernel-dense figure of every run since 43).
Workloads: storm (kernel_storm --steps, 1,000 empty kernels a step, NVTX step ranges ending
in a sync), gpt2 and kernel-dense (ddp_train.py, one mode per process, world size 1).

  --mixed  (session 11) every meridian process also attaches the bare consumer, in windows
          half a period after meridian's (20/100@60 beside 20/100@10), so each process
          yields both added costs and their ratio against one untraced baseline: the
          process-to-process spread and most of the drift within a process cancel. The
          plain run is classified by both window sets (two nulls). Since session 12 the
          two consumers trade places in even rounds (--fixed-phases: not), because run
          40's GPT-2 nulls found the steps at meridian's places 1.3 points dearer than at
          the bare consumer's, about the size of the excess the runs measured; and the
          report also gives each order's ratio and the ratio of (added - the plain null at
          the same places) of each round, which removes a place-bound cost either way.
  local   every run also records local_added (and bare_local_added): each window's traced
          steps against the untraced steps within --local-radius (8) steps before it and
          after its two detach steps, median over windows. The step time wanders by +-20%
          over seconds even inside one process (run 39), so with short, frequent windows
          (8/32@4) a window's neighbours are its baseline, not the whole run (the plain
          nulls per process: run 39's whole-run medians -5% to +7%; run 40's local
          figures -3.2% to +1.8%).
  close   (session 17) each meridian process's mean window close (the agent's counters
          window/close_ns over window/closes: CUPTI's API callbacks enabled at the end of a
          window's last step, inside the step the workload times) is the CSV's close_ms,
          printed under the edges; --positions sets it beside the last traced position's
          excess over the other traced positions, both per process.
  spread  (session 17) --positions also splits each process's windows into its odd and
          even ones: if half the windows widen the ratios' spread over processes by ~sqrt(2)
          or more, it comes from the windows sampled inside each process and longer
          processes narrow it; if not, only more processes do (report_noise).

  capture (session 19) what each consumer captured in its own windows of one process, as
          raw counts in the CSV: meridian's stored kernels (rank 0) and the bare consumer's
          kernel records with timings (its exit line), with each one's window steps and
          what each lost (meridian's CUPTI host and device drops and full ring; the bare
          consumer's CUPTI drops, read at each detach, and kernels with no timings). The
          workload launches the same kernels every step, so a lower rate of meridian's is
          kernels it missed (run 52's GPT-2 processes lost 5-22 records each,
          kernel-dense's 0-5; whose and where was not recorded). A run with a window cut
          by its end compares nothing.

Usage: inproc.py --build DIR --meridian CLI --agent-lib LIB [--workloads storm,gpt2,kernel-dense]
       [--variants window,bare,plain[,before --before-lib LIB]] [--rounds 5] [--steps 400]
       [--windows 20/100@10] [--mixed [--fixed-phases]]
       [--budget-s 540] [--csv FILE] [--steps-csv FILE] [--resume]
       [--report-only [--positions STEPS_CSV[,STEPS_CSV...]] [--pool CSV[,CSV...]]]
       [--rows-from-steps STEPS_CSV[,...] --csv NEW.csv [--machine BOOT_ID]]
--rows-from-steps (session 19) rebuilds the rows of runs whose every-step times came back
but whose CSV rows did not, from the steps and the windows specification of each round.
"""
import argparse
import csv
import gzip
import os
import re
import sqlite3
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner  # noqa: E402  (options, run loop, intervals)
import tiers  # noqa: E402  (step parser, workload commands)

ROOT = tiers.ROOT
FIELDS = ["round", "workload", "variant", "steps", "untraced_ms", "traced_ms", "n_untraced",
          "n_traced", "windows", "wall_s", "rc", "machine", "attach_ms", "detach1_ms",
          "detach2_ms", "bare_traced_ms", "n_bare_traced", "local_added", "bare_local_added",
          "bare_windows", "pace_waits", "pace_wait_ms", "ring_full", "cupti_dropped",
          "alt_default_traced_ms", "alt_changed_traced_ms", "alt_default_local",
          "alt_changed_local", "close_ms", "cupti_device", "kernels", "kernel_steps",
          "bare_kernels", "bare_kernel_steps", "bare_lost"]
# Meridian's variants: the window run with these agent variables added, to find which of
# meridian's mechanisms costs what a traced step costs beyond the bare consumer (each one
# switches one off; agent/ENVIRONMENT.md). `before` is the window run of an earlier agent.
MERIDIAN_VARIANTS = {
    "window": {},
    "before": {},
    "window_kernel": {"MERIDIAN_TRACE_KINDS": "kernel"},   # no GRAPH_TRACE
    "window_barekinds": {"MERIDIAN_TRACE_KINDS": "kernel",  # the bare consumer's kinds alone:
                         "MERIDIAN_CUPTI_SELF_RECORDS": "0"},  # no OVERHEAD, DEVICE either
    "window_noflush": {"MERIDIAN_CUPTI_FLUSH_MS": "0"},    # no periodic CUPTI flush
    "window_nopace": {"MERIDIAN_CUPTI_PACE": "0"},         # the completion thread never waits
    "window_nosampler": {"MERIDIAN_GPU_SAMPLE_HZ": "0"},   # no NVML readings (both rates)
    "window_sampler10": {"MERIDIAN_GPU_SAMPLE_HZ": "10"},  # the default before session 19
    "window_closedomains": {"MERIDIAN_CUPTI_CLOSE": "domains"},  # the close before session 21
    "window_alone": {},  # with --mixed: `window` without the bare consumer in its process
    "window_recordonly": {},  # `meridian run --record-file`: no meridiand beside the job
    # one mechanism changed in every second window of the same process (agent/capture/cupti.c)
    "window_alt_kinds": {"MERIDIAN_CUPTI_ALTERNATE": "kinds"},
    "window_alt_subscribe": {"MERIDIAN_CUPTI_ALTERNATE": "subscribe"},
    "window_alt_flush": {"MERIDIAN_CUPTI_ALTERNATE": "flush"},
}
ALTERNATE = {v for v, env in MERIDIAN_VARIANTS.items() if "MERIDIAN_CUPTI_ALTERNATE" in env}
RECORD_ONLY = {"window_recordonly"}  # run under `meridian run --record-file`: no database
EDGES = (("attach_ms", "the window's first step (meridian attaches in it)", 0),
         ("detach1_ms", "the step after the window (closing: the boundary)", 1),
         ("detach2_ms", "the second step after (flush and cuptiFinalize)", 2))


def parse_windows(spec):
    """'L/P@O' -> (L, P, O); the only form this benchmark uses."""
    m = re.fullmatch(r"(\d+)/(\d+)@(\d+)", spec)
    if not m or int(m.group(1)) >= int(m.group(2)):
        raise SystemExit(f"inproc: --windows {spec}: want LENGTH/PERIOD@OFFSET, LENGTH < PERIOD")
    return tuple(int(x) for x in m.groups())


def stat_line(label, vals, f, goal=""):
    """One report line: the median of vals, its 95% percentile bootstrap interval, the
    median's order-statistic interval (distribution-free, >= 95%; '-' under 6 values), n."""
    ci, ex = runner.bootstrap(vals), runner.median_ci_exact(vals)
    cis = (f + "-" + f) % ci if ci else "-"
    exs = (f + "-" + f) % ex if ex else "-"
    return (f"  {label} {f % statistics.median(vals)}  [{cis}]  exact [{exs}]  n={len(vals)}"
            + (f"  {goal}" if goal else ""))


def window_steps(spec, steps):
    length, period, offset = spec
    return [(s, min(s + length, steps) - 1) for s in range(offset, steps, period)]


def mixed_spec(spec):
    """--mixed: the bare consumer's windows in meridian's processes, half a period later."""
    length, period, offset = spec
    return (length, period, offset + period // 2)


def spec_text(spec):
    return "%d/%d@%d" % spec


def swapped(a, rnd):
    """--mixed: the two consumers trade places in even rounds (meridian half a period in,
    the bare consumer at the offset), unless --fixed-phases. A step time that depends on the
    step's place in the period (run 40's GPT-2 plain nulls: the steps at meridian's places
    +1.1 points over the bare consumer's, about the size of the excess measured) then
    weighs on both consumers alike."""
    return a.mixed and not a.fixed_phases and rnd % 2 == 0


def consumer_specs(a, rnd, variant):
    """(meridian's windows, the bare consumer's windows or None) of one run, as (L, P, O);
    for `plain` the places the two nulls are taken at, for `bare` its own windows first."""
    spec = parse_windows(a.windows)
    if variant == "bare":
        return spec, None
    if not a.mixed:
        return spec, None
    other = mixed_spec(spec)
    if swapped(a, rnd):
        spec, other = other, spec
    return spec, (None if variant == "window_alone" else other)


def bare_run_spec(a, rnd, variant):
    """The bare consumer's windows (L, P, O) in one run, or None: its own in a `bare` run,
    the --mixed ones beside meridian's, and in `plain` where the bare null is taken."""
    spec, bare_spec = consumer_specs(a, rnd, variant)
    return spec if variant == "bare" else bare_spec


def not_untraced(windows, others):
    """The steps of both consumers' windows and the two detach steps after each."""
    return {i for first, last in list(windows) + list(others) for i in range(first, last + 3)}


def classify_window_run(ms, windows, others=()):
    """(traced, untraced) step times of a window run; windows = [(first, last), ...]; the
    steps of `others` (the other consumer's windows in a --mixed run) and the two steps after
    each are in neither list."""
    traced = [ms[i] for first, last in windows
              for i in range(first + 1, min(last, len(ms) - 1) + 1)]
    skip = not_untraced(windows, others)
    return traced, [t for i, t in enumerate(ms) if i not in skip]


def local_added(ms, windows, others, radius):
    """The median over windows of each window's own added cost: median(its traced steps) /
    median(the untraced steps within `radius` steps before its first step or after its two
    detach steps) - 1. The host's step time wanders by +-20% over seconds (run 39's steps),
    so a window is compared with its neighbours, not with the whole run. "" when no window
    has both."""
    skip = not_untraced(windows, others)
    vals = []
    for first, last in windows:
        traced = ms[first + 1:last + 1]
        near = [ms[i] for i in list(range(first - radius, first)) +
                list(range(last + 3, last + 3 + radius))
                if 0 <= i < len(ms) and i not in skip]
        if traced and near:
            vals.append(statistics.median(traced) / statistics.median(near) - 1)
    return "%.5f" % statistics.median(vals) if vals else ""


def split_alternate(out, windows):
    """MERIDIAN_CUPTI_ALTERNATE: (the default windows, the changed ones) of a run, from the
    agent's stderr lines "meridian: attach N alternate WHAT default|changed", the N-th
    attach being the N-th window in step order; None (said why) when the lines do not
    number 1..len(windows) in order."""
    found = re.findall(r"meridian: attach (\d+) alternate \w+ (default|changed)", out)
    if [int(n) for n, _ in found] != list(range(1, len(windows) + 1)):
        print(f"inproc: {len(found)} attach lines for {len(windows)} windows (or out of "
              f"order): the default and changed windows cannot be told apart in this run",
              flush=True)
        return None
    return ([w for w, (_, how) in zip(windows, found) if how == "default"],
            [w for w, (_, how) in zip(windows, found) if how == "changed"])


def alternate_figures(ms, split, others, radius):
    """The CSV fields of a MERIDIAN_CUPTI_ALTERNATE run: each kind of window's traced median
    and local figure, the other kind's windows (and `others`, the bare consumer's) kept out
    of its neighbours; empty strings when the split is unknown."""
    out = dict(alt_default_traced_ms="", alt_changed_traced_ms="", alt_default_local="",
               alt_changed_local="")
    if not split:
        return out
    for key, mine, theirs in (("default", split[0], split[1]), ("changed", split[1], split[0])):
        traced = classify_window_run(ms, mine, list(theirs) + list(others))[0]
        if traced:
            out[f"alt_{key}_traced_ms"] = "%.4f" % statistics.median(traced)
        out[f"alt_{key}_local"] = local_added(ms, mine, list(theirs) + list(others), radius)
    return out


def edge_costs(ms, windows, untraced_median):
    """What the edges of the windows add, in ms over the run's untraced median (the median
    over windows): {attach_ms: step first, detach1_ms: last + 1, detach2_ms: last + 2}."""
    out = {}
    for key, _, at in EDGES:
        vals = [ms[(first if at == 0 else last + at)] - untraced_median
                for first, last in windows if (first if at == 0 else last + at) < len(ms)]
        out[key] = "%.4f" % statistics.median(vals) if vals else ""
    return out


def bare_env(a, env):
    env["BARE_CONSUMER_LIB"] = os.path.join(a.build, "tests/gpu/libbare_consumer.so")
    env["BARE_CONSUMER_KINDS"] = "CONCURRENT_KERNEL"


def command(a, workload, variant, db, spec, bare_spec):
    env = tiers.job_env()
    work = tiers.workload_argv(a.build, workload, a.steps)
    if variant == "bare":
        bare_env(a, env)
        return work + ["--bare-windows", spec_text(spec)], env
    if variant == "plain":
        return work, env
    if bare_spec:  # --mixed: the bare consumer between meridian's windows
        bare_env(a, env)
        work = work + ["--bare-windows", spec_text(bare_spec)]
    env["MERIDIAN_TRACE"] = "steady"
    env["MERIDIAN_WINDOWS"] = spec_text(spec)
    env.update(MERIDIAN_VARIANTS[variant])
    if variant in RECORD_ONLY:  # the agent's record-only mode: no daemon, no socket
        for k in ("MERIDIAN_AGGREGATOR", "MERIDIAN_SECRET", "MERIDIAN_SECRET_FILE"):
            env.pop(k, None)
        return [a.meridian, "run", "--record-file", db + ".mrdcap", "--agent-lib",
                a.agent_lib, "--"] + work, env
    if variant == "before":  # the same, with the agent of an earlier commit
        return tiers.profile_argv(argparse.Namespace(meridian=a.meridian,
                                                     agent_lib=a.before_lib), db, work), env
    return tiers.profile_argv(a, db, work), env


def recorded_windows(db):
    """The windows the agent recorded [(first, last), ...], or None when unreadable."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = con.execute("SELECT first_step, last_step FROM window_records "
                           "ORDER BY first_step").fetchall()
        con.close()
        return [(int(f), int(l)) for f, l in rows]
    except sqlite3.Error:
        return None


def agent_counts(db):
    """The agent's pace and drop counters of a meridian run (rank 0), as CSV fields: CUPTI's
    completion thread's waits for ring space (count, ms), the records lost to a full ring
    or by CUPTI itself (cupti_dropped: host and device; cupti_device: the device buffer's
    share, kernels with no timestamps), and the mean time of a window's close
    (window/close_ns over window/closes, ms: inside the window's last step); empty strings
    when the database or a counter is missing."""
    out = dict(pace_waits="", pace_wait_ms="", ring_full="", cupti_dropped="", close_ms="",
               cupti_device="")
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        got = {(c, n): int(v) for c, n, v in con.execute(
            "SELECT category, name, value FROM agent_counters WHERE rank = 0")}
        con.close()
    except sqlite3.Error:
        return out
    pick = {"pace_waits": ("cupti", "pace_waits"), "ring_full": ("dropped", "ring_full")}
    for key, cn in pick.items():
        if cn in got:
            out[key] = got[cn]
    if ("cupti", "pace_wait_ns") in got:
        out["pace_wait_ms"] = "%.3f" % (got[("cupti", "pace_wait_ns")] / 1e6)
    host, dev = got.get(("dropped", "cupti_host")), got.get(("dropped", "cupti_device"))
    if host is not None or dev is not None:
        out["cupti_dropped"] = (host or 0) + (dev or 0)
        out["cupti_device"] = dev or 0
    if got.get(("window", "closes")):
        out["close_ms"] = "%.4f" % (got.get(("window", "close_ns"), 0) / 1e6
                                    / got[("window", "closes")])
    return out


def stored_kernels(db):
    """How many kernels rank 0 stored (every one launched in a window step), or None."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        n = con.execute("SELECT COUNT(*) FROM kernels WHERE rank = 0").fetchone()[0]
        con.close()
        return int(n)
    except sqlite3.Error:
        return None


def bare_exit(out):
    """(kernel records with timings, records lost) from the bare consumer's exit line in a
    run's output, or None when the run has no such line. Its `kernels` count includes the
    records CUPTI wrote with no timings (zero_ts_kernels: the device buffer ran out), which
    meridian does not store: they are taken out here and counted as lost, with CUPTI's
    host-side drops (records never written)."""
    found = re.findall(r"bare_consumer: exit pid=\d+ records=\d+ kernels=(\d+) .*?"
                       r"zero_ts_kernels=(\d+) dropped=(\d+)", out)
    if not found:
        return None
    kernels, zero_ts, dropped = (int(x) for x in found[-1])
    return kernels - zero_ts, zero_ts + dropped


def fits(spec, steps):
    """Whether every window of spec (L, P, O) ends inside a run of `steps` steps."""
    length, period, offset = spec
    return all(s + length <= steps for s in range(offset, steps, period))


def window_step_count(windows):
    return sum(last - first + 1 for first, last in windows)


def capture_fields(a, rnd, variant, ms_len, wins, kernels, out):
    """The CSV fields that compare what each consumer captured in its windows of one run,
    as raw counts: meridian's stored kernels and its window steps; the bare consumer's
    kernel records with timings and its window steps (its own windows in a `bare` run, else
    the --mixed ones), with the records it lost. The workload launches the same kernels
    every step, so in one process the two rates differ only by what a consumer missed."""
    ran_bare = bare_run_spec(a, rnd, variant)
    # a window cut by the run's end leaves the bare consumer attached through the job's
    # last calls (kernels counted, steps not): such a run compares nothing
    bare = bare_exit(out) if ran_bare and fits(ran_bare, ms_len) else None
    mine = kernels is not None and variant != "bare" and all(l < ms_len for _, l in wins)
    return dict(kernels=kernels if mine else "",
                kernel_steps=window_step_count(wins) if mine else "",
                bare_kernels=bare[0] if bare else "",
                bare_kernel_steps=window_step_count(window_steps(ran_bare, ms_len))
                if bare else "",
                bare_lost=bare[1] if bare else "")


def ok_rows_by_variant(rows, needed):
    """{(workload, variant): [row, ...]} of the runs that ended well and have every field
    in needed filled."""
    by = {}
    for r in rows:
        if str(r["rc"]) == "0" and all(r.get(k) not in (None, "") for k in needed):
            by.setdefault((r["workload"], r["variant"]), []).append(r)
    return by


def records_lost(r):
    """The records meridian lost in a run: to a full ring, or dropped by CUPTI. An empty
    column is 0: the agent stores no counter that stayed 0 (agent_counts reads what it
    stored), so a run without drops has no `cupti_dropped` row at all."""
    return int(r["ring_full"] or 0) + int(r["cupti_dropped"] or 0)


def report_capture(rows):
    """Per workload and variant: kernels with timings a window step, meridian's (stored) and
    the bare consumer's (its records) in the same processes, medians; meridian's kernels
    missed a process (the bare consumer's rate times meridian's window steps, less what
    meridian stored); and what each consumer lost (meridian: CUPTI's host and device drops,
    the ring; the bare consumer: CUPTI's drops and kernels with no timings)."""
    by = ok_rows_by_variant(rows, ("kernels", "kernel_steps", "bare_kernels",
                                   "bare_kernel_steps"))
    if not by:
        return
    print("\ninproc: what each consumer captured in its own windows of the same process "
          "(kernels with timings a window step; the workload launches the same kernels "
          "every step), medians (max) over processes")
    for (w, v), rs in sorted(by.items()):
        km = [int(r["kernels"]) / int(r["kernel_steps"]) for r in rs]
        kb = [int(r["bare_kernels"]) / int(r["bare_kernel_steps"]) for r in rs]
        missed = [b * int(r["kernel_steps"]) - int(r["kernels"]) for r, b in zip(rs, kb)]
        lost = [records_lost(r) for r in rs]
        dev = [int(r["cupti_device"] or 0) for r in rs]
        blost = [int(r["bare_lost"] or 0) for r in rs]
        print(f"  {w:12s} {v:18s} a step: meridian {statistics.median(km):.3f}, bare consumer "
              f"{statistics.median(kb):.3f}; meridian missed {statistics.median(missed):.1f} "
              f"(max {max(missed):.1f}) a process; lost: meridian {statistics.median(lost):g} "
              f"(max {max(lost)}; device buffer {statistics.median(dev):g}), bare consumer "
              f"{statistics.median(blost):g} (max {max(blost)}), n={len(rs)}")


def report_pace(rows):
    """Per workload and meridian variant: how often CUPTI's completion thread waited for
    ring space (pacing holds CUPTI's buffer meanwhile) and what was lost, medians over the
    processes that recorded the counters."""
    by = ok_rows_by_variant(rows, ("pace_waits",))
    if not by:
        return
    print("\ninproc: CUPTI's completion thread waiting for ring space, per process (medians, "
          "max)")
    for (w, v), rs in sorted(by.items()):
        waits = [int(r["pace_waits"]) for r in rs]
        ms = [float(r["pace_wait_ms"] or 0) for r in rs]
        lost = [records_lost(r) for r in rs]
        print(f"  {w:12s} {v:18s} waits {statistics.median(waits):g} (max {max(waits)}), "
              f"{statistics.median(ms):.3f} ms (max {max(ms):.3f}); records lost "
              f"{statistics.median(lost):g} (max {max(lost)}), n={len(rs)}")


def save_steps(path, rnd, workload, variant, ms):
    """--steps-csv: every step's time, for a look at where in the window period time goes."""
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["round", "workload", "variant", "step", "ms"])
        w.writerows([rnd, workload, variant, i, "%.4f" % t] for i, t in enumerate(ms))


def run_one(a, rnd, workload, variant, writer):
    spec, bare_spec = consumer_specs(a, rnd, variant)
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "run.db")
        cmd, env = command(a, workload, variant, db, spec, bare_spec)
        out, rc, wall = runner.run_timed(cmd, env, a.run_timeout_s)
        stored = variant in MERIDIAN_VARIANTS and variant not in RECORD_ONLY  # a database
        wins = recorded_windows(db) if stored else None
        counts = agent_counts(db) if stored else {}
        kernels = stored_kernels(db) if stored else None
    steps = tiers.parse("storm" if workload == "storm" else "py", out)
    ms = steps.get("storm" if workload == "storm" else workload)
    if rc != 0 or not ms:
        print(f"inproc: round {rnd} {workload}/{variant}: rc={rc}, no steps parsed; last "
              f"output:\n{out[-1500:]}", flush=True)
        return None
    if a.steps_csv:
        save_steps(a.steps_csv, rnd, workload, variant, ms)
    if variant in MERIDIAN_VARIANTS:
        expect = window_steps(spec, len(ms))
        if not stored:
            wins = expect  # no database: the specification's windows (the agent's own rule)
        elif wins is None:
            print(f"inproc: round {rnd} {workload}: no window_records readable; using the "
                  f"specification's windows", flush=True)
            wins = expect
        elif [w[0] for w in wins] != [w[0] for w in expect]:
            print(f"inproc: round {rnd} {workload}: recorded windows {wins} differ from the "
                  f"specification's {expect}: the recorded ones are used", flush=True)
    else:
        wins = window_steps(spec, len(ms))
    split = split_alternate(out, wins) if variant in ALTERNATE else None
    row = step_row(a, rnd, workload, variant, ms, wins, dict(
        wall_s="%.1f" % wall, rc=rc, machine=runner.boot_id(), **counts,
        **capture_fields(a, rnd, variant, len(ms), wins, kernels, out)), split)
    if row:
        writer.writerow(row)
    return row


def step_row(a, rnd, workload, variant, ms, wins, run_fields, split=None):
    """One CSV row from a run's every-step times ms and meridian's windows wins (for `bare`
    and `plain` the specification's), the bare consumer's windows following from the round
    (consumer_specs); run_fields: what only the run itself knows (wall_s, rc, machine and
    the agent's counters). None, said why, when the run has no traced or no untraced step."""
    bare_spec = consumer_specs(a, rnd, variant)[1]
    bare_wins = window_steps(bare_spec, len(ms)) if bare_spec else []
    ran_bare = bare_run_spec(a, rnd, variant)
    traced, untraced = classify_window_run(ms, wins, bare_wins)
    bare_traced = classify_window_run(ms, bare_wins, wins)[0] if bare_wins else []
    if not traced or not untraced:
        print(f"inproc: round {rnd} {workload}/{variant}: {len(traced)} traced and "
              f"{len(untraced)} untraced steps: the run is left out", flush=True)
        return None
    row = dict(round=rnd, workload=workload, variant=variant, steps=len(ms),
               untraced_ms="%.4f" % statistics.median(untraced),
               traced_ms="%.4f" % statistics.median(traced), n_untraced=len(untraced),
               n_traced=len(traced),
               windows=" ".join(f"{f}-{l}" for f, l in wins) if wins else "",
               bare_traced_ms="%.4f" % statistics.median(bare_traced) if bare_traced else "",
               n_bare_traced=len(bare_traced),
               bare_windows=spec_text(ran_bare) if ran_bare else "",
               local_added=local_added(ms, wins, bare_wins, a.local_radius),
               bare_local_added=(local_added(ms, bare_wins, wins, a.local_radius)
                                 if bare_wins else ""),
               **edge_costs(ms, wins, statistics.median(untraced)), **run_fields,
               **alternate_figures(ms, split, bare_wins, a.local_radius))
    wall = f", {float(row['wall_s']):.1f} s" if row.get("wall_s") else ""
    also = f" bare traced {row['bare_traced_ms']} ms" if bare_traced else ""
    print(f"inproc: round {rnd} {workload:12s} {variant:6s} untraced {row['untraced_ms']} ms "
          f"traced {row['traced_ms']} ms{also} ({len(untraced)}/{len(traced)} steps{wall})",
          flush=True)
    return row


def rows_from_steps(a):
    """--rows-from-steps: the CSV rows of runs whose every-step times came back but whose
    rows did not (session 18's call 3, killed before the host script returned its CSV).
    Each run's windows are the specification's for its round (--windows, --mixed and the
    round's parity, as run_one sets them); what only the run knew is left empty (wall_s,
    the agent's counters) or given (--machine); rc is 0, since the steps were saved only
    for runs that ended well. Written to --csv, which must not exist yet."""
    if os.path.exists(a.csv):
        raise SystemExit(f"inproc: --rows-from-steps writes a new --csv; {a.csv} exists")
    runs = read_steps(a.rows_from_steps.split(","), "--rows-from-steps")
    alt = sorted({v for _, _, v in runs} & ALTERNATE)
    if alt:
        raise SystemExit(f"inproc: --rows-from-steps: {', '.join(alt)} runs need the agent's "
                         f"attach lines to split their windows; only their output has them")
    rows = []
    with open(a.csv, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for (rnd, w, v), ms in sorted(runs.items()):
            spec = consumer_specs(a, rnd, v)[0]
            row = step_row(a, rnd, w, v, ms, window_steps(spec, len(ms)),
                           dict(rc=0, machine=a.machine))
            if row:
                writer.writerow(row)
                rows.append(row)
    print(f"inproc: {len(rows)} rows rebuilt from {len(runs)} runs' steps into {a.csv}",
          flush=True)
    return rows


def by_round(rows):
    """{workload: {round: {variant: row}}} of the runs that ended well (rc 0)."""
    by = {}
    for r in rows:
        if str(r["rc"]) == "0":
            by.setdefault(r["workload"], {}).setdefault(int(r["round"]), {})[r["variant"]] = r
    return by


def per_round(rows):
    """{workload: [(round, added_meridian, added_bare, ratio, plain_null, outside/plain)]}
    (None where the round lacks the variant)"""
    by = by_round(rows)
    out = {}
    for w, rounds in by.items():
        for rnd, v in sorted(rounds.items()):
            f = {k: (float(r["untraced_ms"]), float(r["traced_ms"])) for k, r in v.items()}
            added = {k: t / u - 1 for k, (u, t) in f.items()}
            am, ab = added.get("window"), added.get("bare")
            ratio = am / ab if am is not None and ab is not None and ab > 0 else None
            null = added["plain"] + 1 if "plain" in added else None
            so = f["window"][0] / f["plain"][0] if "window" in f and "plain" in f else None
            out.setdefault(w, []).append((rnd, am, ab, ratio, null, so))
    return out


def report(rows):
    print("\ninproc: per round (added = window step median / other step median - 1, in one "
          "process)")
    res = per_round(rows)

    def fmt(x, f, scale=1):
        return f % (x * scale) if x is not None else "-"
    for w, rs in res.items():
        for rnd, am, ab, ratio, null, so in rs:
            print(f"  {w:12s} round {rnd:3d}  meridian {fmt(am, '%+7.2f%%', 100)}  "
                  f"bare {fmt(ab, '%+7.2f%%', 100)}  ratio {fmt(ratio, '%.3f')}  "
                  f"plain null {fmt(null, '%.4f')}  steady-outside/plain {fmt(so, '%.4f')}")
    print("\ninproc: medians over rounds [95% percentile bootstrap]  exact [the median's "
          "order-statistic interval, >= 95%; '-' under 6 rounds]")
    for w, rs in res.items():
        for label, idx, goal in (("added by meridian's traced step", 1, ""),
                                 ("added by the bare consumer's", 2, ""),
                                 ("added(meridian)/added(bare)", 3, "goal <= 1.10"),
                                 ("plain: window steps / other steps", 4, "null, ~1"),
                                 ("steady outside windows / plain (2 processes)", 5,
                                  "reference")):
            vals = [r[idx] for r in rs if r[idx] is not None]
            if vals:
                print(stat_line(f"{w:12s} {label:46s}", vals, "%.4f", goal))
    report_variants(rows)
    report_alternate(rows)
    report_mixed(rows)
    report_pace(rows)
    report_capture(rows)
    report_edges(rows)


def report_variants(rows):
    """Each meridian variant other than `window` against the bare consumer of its round, and
    against `window` (paired per round): which mechanism a traced step's excess is in."""
    by = by_round(rows)
    lines = []
    for w, rounds in by.items():
        names = sorted({v for vs in rounds.values() for v in vs
                        if v in MERIDIAN_VARIANTS and v != "window"})
        for v in names:
            vs_bare, vs_window, vs_window_local = [], [], []
            for vr in rounds.values():
                if v not in vr:
                    continue
                added = {k: float(r["traced_ms"]) / float(r["untraced_ms"]) - 1
                         for k, r in vr.items()}
                if "bare" in added and added["bare"] > 0:
                    vs_bare.append(added[v] / added["bare"])
                if "window" in added:
                    vs_window.append(added[v] - added["window"])
                    if vr[v].get("local_added") and vr["window"].get("local_added"):
                        vs_window_local.append(float(vr[v]["local_added"]) -
                                               float(vr["window"]["local_added"]))
            for label, vals, f in (("added(%s)/added(bare)" % v, vs_bare, "%.4f"),
                                   ("added(%s) - added(window)" % v, vs_window, "%+.4f"),
                                   ("added(%s) - added(window), local" % v, vs_window_local,
                                    "%+.4f")):
                if vals:
                    lines.append(stat_line(f"{w:12s} {label:46s}", vals, f))
    if lines:
        print("\ninproc: meridian's variants (one mechanism off each), per traced step, paired "
              "per round")
        print("\n".join(lines))


def report_alternate(rows):
    """MERIDIAN_CUPTI_ALTERNATE runs: inside each process, the changed windows' added cost
    less the default windows' (run: traced medians over the run's untraced median; local:
    each window against its neighbours), and each kind against the bare consumer's windows
    of the same process (--mixed)."""
    by = {}
    for r in rows:
        if str(r["rc"]) == "0" and r.get("alt_default_traced_ms") and r.get(
                "alt_changed_traced_ms"):
            by.setdefault((r["workload"], r["variant"]), []).append(r)
    if not by:
        return
    print("\ninproc: one mechanism changed in every second meridian window of each process "
          "(MERIDIAN_CUPTI_ALTERNATE), paired inside the process")
    for (w, v), rs in sorted(by.items()):
        run_d, local_d, vs_bare = [], [], {"default": [], "changed": []}
        for r in rs:
            u = float(r["untraced_ms"])
            run_d.append((float(r["alt_changed_traced_ms"]) - float(r["alt_default_traced_ms"]))
                         / u)
            if r.get("alt_default_local") and r.get("alt_changed_local"):
                local_d.append(float(r["alt_changed_local"]) - float(r["alt_default_local"]))
            bare = float(r["bare_local_added"]) if r.get("bare_local_added") else 0.0
            for how in vs_bare:
                if bare > 0 and r.get(f"alt_{how}_local"):
                    vs_bare[how].append(float(r[f"alt_{how}_local"]) / bare)
        for label, vals, f in (("added(changed) - added(default), one process (run)", run_d,
                                "%+.4f"),
                               ("added(changed) - added(default), one process (local)",
                                local_d, "%+.4f"),
                               ("added(default)/added(bare), one process (local)",
                                vs_bare["default"], "%.4f"),
                               ("added(changed)/added(bare), one process (local)",
                                vs_bare["changed"], "%.4f")):
            if vals:
                print(stat_line(f"{w:12s} {v:20s} {label:52s}", vals, f))


def ratio_of_means(pairs):
    """sum of the first over sum of the second of (meridian's added, bare's added) pairs;
    inf when the bare consumer's sum is not positive (a resample of noise only)."""
    den = sum(b for _, b in pairs)
    return sum(a for a, _ in pairs) / den if den > 0 else float("inf")


def row_windows(r):
    """The windows a results row recorded ("F-L F-L ..." in its windows column) as
    [(first, last), ...]; [] when the column is empty."""
    return [tuple(int(x) for x in w.split("-")) for w in (r.get("windows") or "").split()]


def meridian_first(r):
    """Whether meridian's windows came first in the period in this --mixed row (always in
    rows of runs 39-41, which have no bare_windows column)."""
    if not r.get("bare_windows") or not r.get("windows"):
        return True
    return row_windows(r)[0][0] < parse_windows(r["bare_windows"])[2]


def null_corrected(rows, w, v):
    """[(meridian's added - the plain null at its places, bare's added - the plain null at
    its places)] of the rounds where workload w has both a `v` row and a plain row with local
    figures: a step time that depends on the place in the period is in both and cancels
    (the plain run of a round classifies the same places as that round's other runs)."""
    by = {}
    for r in rows:
        if (str(r["rc"]) == "0" and r["workload"] == w and r.get("local_added")
                and r.get("bare_local_added")):
            by.setdefault(int(r["round"]), {})[r["variant"]] = r
    out = []
    for rnd, vs in sorted(by.items()):
        if v in vs and "plain" in vs:
            m, p = vs[v], vs["plain"]
            out.append((float(m["local_added"]) - float(p["local_added"]),
                        float(m["bare_local_added"]) - float(p["bare_local_added"])))
    return out


def added_pairs(r, traced="traced_ms", local="local_added"):
    """{'run': (meridian's added, bare's added), 'local': (...)} of one --mixed row, from its
    columns `traced` and `local` (MERIDIAN_CUPTI_ALTERNATE rows: a kind of window's own)."""
    u, t, tb = (float(r[k]) for k in ("untraced_ms", traced, "bare_traced_ms"))
    out = {"run": (t / u - 1, tb / u - 1)}
    if r.get(local) and r.get("bare_local_added"):
        out["local"] = (float(r[local]), float(r["bare_local_added"]))
    return out


def added_ratio(am, ab):
    """added(meridian) / added(bare), or None when the bare consumer added nothing or less
    (no ratio to take: every report and --pool leave such a process out)."""
    return am / ab if ab > 0 else None


def report_mixed(rows):
    """--mixed rows: each process's own ratio, meridian's traced steps against the bare
    consumer's in the same process (plain: both window sets' nulls), from the run's medians
    and from each window against its neighbours (local_added); then medians over the runs.
    Each variant against `window` of its round is report_variants' (every row is there)."""
    by = {}
    for r in rows:
        if str(r["rc"]) == "0" and r.get("bare_traced_ms"):
            by.setdefault((r["workload"], r["variant"]), []).append(r)
    if not by:
        return
    print("\ninproc: meridian and the bare consumer in one process (--mixed: the bare "
          "consumer's windows half a period after meridian's); added = window step median / "
          "other step median - 1 (run: over the whole run; local: each window against the "
          "untraced steps near it, median over windows)")
    lines = []

    def stat(label, vals, f, goal=""):
        lines.append(stat_line(label, vals, f, goal))

    def mean_line(w, label, pairs):
        ci = runner.bootstrap(pairs, stat=ratio_of_means)
        cis = "%.4f-%.4f" % ci if ci else "-"
        lines.append(f"  {w:12s} {label:56s} {ratio_of_means(pairs):.4f}  [{cis}]  exact [-]  "
                     f"n={len(pairs)}  goal <= 1.10")
    for (w, v), rs in sorted(by.items()):
        got = {}
        for r in sorted(rs, key=lambda r: int(r["round"])):
            figs = added_pairs(r)
            text = []
            for how, (am, ab) in figs.items():
                got.setdefault(how, []).append((am, ab))
                q = added_ratio(am, ab)
                text.append(f"{how} {am * 100:+7.2f}% / {ab * 100:+7.2f}% ratio "
                            + ("%.3f" % q if q is not None else "-"))
            who = "plain null" if v == "plain" else v
            first = "meridian first" if meridian_first(r) else "bare first"
            print(f"  {w:12s} round {int(r['round']):3d}  {who:16s}  {first:14s}  meridian's / "
                  "bare's windows: " + "   ".join(text))
        for how, pairs in got.items():
            am, ab = [p[0] for p in pairs], [p[1] for p in pairs]
            if v == "plain":
                stat(f"{w:12s} {'plain (%s): meridian-window steps / others' % how:56s}",
                     [x + 1 for x in am], "%.4f", "null, ~1")
                stat(f"{w:12s} {'plain (%s): bare-window steps / others' % how:56s}",
                     [x + 1 for x in ab], "%.4f", "null, ~1")
                continue
            stat(f"{w:12s} {'added by %s (%s)' % (v, how):56s}", am, "%.4f")
            stat(f"{w:12s} {'added by the bare consumer, same processes (%s)' % how:56s}", ab,
                 "%.4f")
            qs = [q for q in (added_ratio(*p) for p in pairs) if q is not None]
            if qs:
                out = len(pairs) - len(qs)
                stat(f"{w:12s} {'added(%s)/added(bare), one process (%s)' % (v, how):56s}",
                     qs, "%.4f", "goal <= 1.10" + (f"; {out} run(s) left out: the bare "
                                                   f"consumer's added <= 0" if out else ""))
            if sum(ab) > 0:  # steadier than a median of few ratios whose denominators vary
                mean_line(w, f"mean added({v}) / mean added(bare) ({how})", pairs)
        if v == "plain" or "local" not in got:
            continue
        orders = {}
        for r in rs:
            q = added_ratio(*added_pairs(r).get("local", (0.0, 0.0)))
            if q is not None:
                orders.setdefault(meridian_first(r), []).append(q)
        if len(orders) == 2:  # both orders ran: does the place in the period matter?
            for first, qs in sorted(orders.items(), reverse=True):
                order = "meridian first" if first else "bare first"
                stat(f"{w:12s} {'added(%s)/added(bare), %s (local)' % (v, order):56s}", qs,
                     "%.4f")
        fixed = null_corrected(rows, w, v)
        qs = [q for q in (added_ratio(*p) for p in fixed) if q is not None]
        if qs:
            stat(f"{w:12s} {'added(%s)/added(bare), less plain null (local)' % v:56s}", qs,
                 "%.4f", "goal <= 1.10")
        if fixed and sum(b for _, b in fixed) > 0:
            mean_line(w, f"mean (added - null), {v} / bare (local)", fixed)
    print("\ninproc: medians over runs [95% percentile bootstrap]  exact [the order-statistic "
          "interval of the median, >= 95%, distribution-free; '-' under 6 runs]; the ratio "
          "of means: bootstrap over runs only (few runs: it covers less than 95%)")
    print("\n".join(lines))


def pooled_ratios(r):
    """{'run': ratio, 'local': ratio} of one --mixed row for --pool: added(meridian's default
    windows) / added(bare) in its process. A `window` row counts every window; a
    MERIDIAN_CUPTI_ALTERNATE row only its default ones (alt_default_*: the mechanism of
    `window`); any other variant, a failed run or a bare consumer that added nothing: {}."""
    if r["variant"] == "window":
        traced, local = "traced_ms", "local_added"
    elif r["variant"] in ALTERNATE:
        traced, local = "alt_default_traced_ms", "alt_default_local"
    else:
        return {}
    if str(r["rc"]) != "0" or not r.get(traced) or not r.get("bare_traced_ms"):
        return {}
    out = {how: added_ratio(am, ab) for how, (am, ab) in added_pairs(r, traced, local).items()}
    return {how: q for how, q in out.items() if q is not None}


def report_pooled(paths):
    """--pool (with --report-only): meridian's default windows against the bare consumer's
    in the same process, every process of several runs' CSVs pooled, per host (the row's
    machine) and over all hosts: one process is one value, so runs of any length and
    variant mix pool without renumbering rounds."""
    by = {}
    for path in paths:
        if not os.path.isfile(path):
            raise SystemExit(f"inproc: --pool: {path} is not a file")
        for r in runner.read_rows(path):
            for how, q in pooled_ratios(r).items():
                host = r.get("machine") or "?"
                for key in ((r["workload"], host), (r["workload"], "")):
                    by.setdefault(key, {}).setdefault(how, []).append(q)
    if not by:
        raise SystemExit("inproc: --pool: no --mixed `window` or window_alt_* row in "
                         + ", ".join(paths))
    print(f"\ninproc: meridian's default windows against the bare consumer in the same "
          f"process, every process of {len(paths)} file(s) pooled (`window` rows: every "
          f"window; window_alt_* rows: their default windows only)")
    for (w, host), figs in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] == "",
                                                              kv[0][1])):
        hosts = len({h for (x, h) in by if x == w and h})
        who = f"host {host}" if host else f"every host ({hosts})"
        for how in ("run", "local"):
            if figs.get(how):
                print(stat_line(f"{w:12s} {who:22s} added(meridian)/added(bare) ({how:5s})",
                                figs[how], "%.4f", "goal <= 1.10"))


def window_positions(ms, windows, others, radius, n):
    """[position 0..n-1 from a window's first step (0: the attach step; after LENGTH - 1
    traced steps come the two detach steps): the median over windows of that step / the
    median of the window's untraced neighbours (as local_added's) - 1], or None where no
    window has neighbours and all n steps."""
    skip = not_untraced(windows, others)
    per = [[] for _ in range(n)]
    for first, last in windows:
        near = [ms[i] for i in list(range(first - radius, first)) +
                list(range(last + 3, last + 3 + radius))
                if 0 <= i < len(ms) and i not in skip]
        if not near or first + n > len(ms):
            continue
        base = statistics.median(near)
        for p in range(n):
            per[p].append(ms[first + p] / base - 1)
    return [statistics.median(x) for x in per] if per[0] else None


def read_steps(paths, option="--positions"):
    """{(round, workload, variant): [ms of step 0, 1, ...]} from --steps-csv files (also
    gzip-compressed, as tests/gpu/results keeps them). A step given twice (two calls' files
    that both start at round 1) is refused: joining two processes' steps would make one
    run of neither."""
    out = {}
    for path in paths:
        if not os.path.isfile(path):
            raise SystemExit(f"inproc: {option}: {path} is not a file")
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            for r in csv.DictReader(f):
                out.setdefault((int(r["round"]), r["workload"], r["variant"]), {})
                steps = out[(int(r["round"]), r["workload"], r["variant"])]
                if int(r["step"]) in steps:
                    raise SystemExit(
                        f"inproc: {option}: round {r['round']} {r['workload']}/{r['variant']} "
                        f"step {r['step']} is given twice (in {path}): files of different "
                        f"calls that reuse round numbers go one at a time")
                steps[int(r["step"])] = float(r["ms"])
    return {k: [t for _, t in sorted(v.items())] for k, v in out.items()}


def mixed_runs(rows, steps, alternate=True):
    """The successful --mixed meridian runs among rows that have their every-step times in
    steps (read_steps): (row, step times, meridian's windows, the bare consumer's windows,
    the window length) each; alternate=False leaves the MERIDIAN_CUPTI_ALTERNATE rows out."""
    for r in rows:
        ms = steps.get((int(r["round"]), r["workload"], r["variant"]))
        if str(r["rc"]) != "0" or not ms or not r.get("bare_windows") or not r.get("windows") \
                or r["variant"] not in MERIDIAN_VARIANTS \
                or (not alternate and r["variant"] in ALTERNATE):
            continue
        spec = parse_windows(r["bare_windows"])
        yield r, ms, row_windows(r), window_steps(spec, len(ms)), spec[0]


def report_positions(rows, steps, radius):
    """--positions (with --report-only): where in the window a --mixed run's traced-step
    cost sits, from the runs' every-step times: per position, meridian's window step and the
    bare consumer's against their own neighbours, and the difference paired per process;
    then each process's mean difference over the traced positions (1..LENGTH-1). An excess
    spread over every traced step is a per-launch cost; one at the first positions, the
    attach's aftermath."""
    by, closes, lasts = {}, {}, {}
    for r, ms, wins, bare, length in mixed_runs(rows, steps):
        mine = window_positions(ms, wins, bare, radius, length + 2)
        theirs = window_positions(ms, bare, wins, radius, length + 2)
        if mine and theirs:
            by.setdefault((r["workload"], r["variant"], length), []).append((mine, theirs))
            u = float(r.get("untraced_ms") or 0)
            if u > 0 and length > 2:  # the last traced position's excess over the others', ms
                last = (mine[length - 1] - theirs[length - 1]
                        - statistics.mean(mine[p] - theirs[p] for p in range(1, length - 1)))
                lasts.setdefault((r["workload"], r["variant"], length), []).append(last * u)
            if r.get("close_ms"):
                closes.setdefault((r["workload"], r["variant"], length), []).append(
                    float(r["close_ms"]))
    if not by:
        print("\ninproc: --positions: no --mixed run with its steps in the given files")
        return
    print("\ninproc: where in the window the cost sits (--positions): step / its window's "
          "untraced neighbours - 1, median over windows, then over processes; position 0 "
          "attaches, the last two detach; the difference paired per process")
    for (w, v, length), pairs in sorted(by.items()):
        for p in range(length + 2):
            m = statistics.median(a[p] for a, _ in pairs)
            b = statistics.median(b[p] for _, b in pairs)
            print(stat_line(f"{w:12s} {v:18s} position {p:2d}: meridian {m * 100:+7.2f}%  "
                            f"bare {b * 100:+7.2f}%  meridian - bare",
                            [a[p] - b[p] for a, b in pairs], "%+.4f"))
        means = [statistics.mean(a[p] - b[p] for p in range(1, length)) for a, b in pairs]
        print(stat_line(f"{w:12s} {v:18s} traced positions 1-{length - 1}, mean of meridian - "
                        f"bare, per process", means, "%+.4f"))
        if lasts.get((w, v, length)):
            print(stat_line(f"{w:12s} {v:18s} position {length - 1} (the close at its end) less "
                            f"positions 1-{length - 2}, meridian - bare, ms",
                            lasts[(w, v, length)], "%+.3f"))
        if closes.get((w, v, length)):  # the close runs at the end of position LENGTH-1
            print(stat_line(f"{w:12s} {v:18s} the close's own time at position {length - 1}'s "
                            f"end (window/close_ns), ms", closes[(w, v, length)], "%+.3f"))


def process_ratios(ms, wins, bare, sub, bare_sub, radius):
    """One --mixed process's added(meridian)/added(bare), (local, whole run), from the
    windows sub (of meridian's wins) and bare_sub (of the bare consumer's bare): traced
    steps from those, untraced ones as in the row (away from every window of both); None
    where the bare consumer's added cost is missing or not above zero (added_ratio)."""
    every = list(wins) + list(bare)
    untraced = classify_window_run(ms, wins, bare)[1]
    lm, lb = local_added(ms, sub, every, radius), local_added(ms, bare_sub, every, radius)
    tm = classify_window_run(ms, sub, every)[0]
    tb = classify_window_run(ms, bare_sub, every)[0]
    local = added_ratio(float(lm), float(lb)) if lm and lb else None
    if not (tm and tb and untraced):
        return local, None
    u = statistics.median(untraced)
    return local, added_ratio(statistics.median(tm) / u - 1, statistics.median(tb) / u - 1)


def robust_sd(vals):
    """1.4826 x the median absolute deviation: the sd of normal data, not moved by the few
    processes whose bare consumer's added cost came out near zero (a ratio's long tail)."""
    m = statistics.median(vals)
    return 1.4826 * statistics.median(abs(v - m) for v in vals)


def noise_split(ratios):
    """From [(whole, odd-windows half, even-windows half), ...] per process: (robust sd of
    the wholes over processes, robust sd of the halves, their ratio or None when the wholes
    do not spread). Halving the windows leaves a spread that comes from the processes
    themselves as it is (ratio ~1) and widens one that comes from the windows sampled inside
    a process by sqrt(2) or more (a ratio of medians widens faster than its windows shrink:
    fewer windows also make the bare consumer's added cost, the denominator, noisier, and a
    small one amplifies)."""
    whole = robust_sd([w for w, _, _ in ratios])
    half = robust_sd([h for _, a, b in ratios for h in (a, b)])
    return whole, half, (half / whole if whole > 0 else None)


def report_noise(rows, steps, radius):
    """--positions also says where the spread of the per-process ratios comes from: the
    windows sampled inside each process (more windows a process narrow it) or the processes
    themselves (only more processes do), from each process's odd and even windows apart
    (session 17; noise_split)."""
    by = {}
    for r, ms, wins, bare, _ in mixed_runs(rows, steps, alternate=False):
        if len(wins) < 4 or len(bare) < 4:
            continue
        whole = process_ratios(ms, wins, bare, wins, bare, radius)
        odd = process_ratios(ms, wins, bare, wins[0::2], bare[0::2], radius)
        even = process_ratios(ms, wins, bare, wins[1::2], bare[1::2], radius)
        for k, name in enumerate(("local", "run")):
            if None not in (whole[k], odd[k], even[k]):
                by.setdefault((r["workload"], r["variant"], name), []).append(
                    (whole[k], odd[k], even[k]))
    if not by:
        return
    print("\ninproc: where the spread of added(meridian)/added(bare) over processes comes "
          "from: its robust sd from every window of each process, and from each process's odd "
          "and even windows apart (ratio ~1: the processes differ; >= 1.41: the windows "
          "sampled inside each process, so longer processes narrow it)")
    for (w, v, name), ratios in sorted(by.items()):
        if len(ratios) < 3:
            continue
        whole, half, ratio = noise_split(ratios)
        print(f"  {w:12s} {v:18s} ({name:5s}) robust sd, every window {whole:.4f}, half the "
              f"windows {half:.4f}, ratio {'-' if ratio is None else '%.2f' % ratio}  "
              f"n={len(ratios)}")


def steady_estimate(r, length, period):
    """The steady tier's cost over a whole run with windows LENGTH/PERIOD, from one window
    run's in-process figures: (attach + both detach steps + (LENGTH - 1) traced steps' added
    time) / (PERIOD untraced steps). What runs outside windows all the time is not in it
    (no in-process design can remove the agent: tiers.py's between-process ratio is)."""
    u, t = float(r["untraced_ms"]), float(r["traced_ms"])
    edges = sum(float(r[k]) for k, _, _ in EDGES)
    return (edges + (length - 1) * (t - u)) / (period * u)


def report_edges(rows):
    """The steady tier's edges in ms and the whole-run estimate (window and before runs;
    rows of older CSVs have no edges, and a run whose windows all end within two steps of
    its last step lacks the detach steps: both are left out)."""
    by = {wv: rs for wv, rs in ok_rows_by_variant(rows, [k for k, _, _ in EDGES]).items()
          if wv[1] in MERIDIAN_VARIANTS}  # edges missing: older CSVs, or too short a run
    if not by:
        return
    print("\ninproc: what a window's edges add to their step, ms over the run's untraced "
          "median (median over windows, then over rounds; [95% percentile bootstrap], exact "
          "[the median's order-statistic interval])")
    for (w, v), rs in sorted(by.items()):
        for key, label, _ in EDGES:
            vals = [float(r[key]) for r in rs if r.get(key)]
            if vals:
                print(stat_line(f"{w:12s} {v:6s} {label:52s}", vals, "%+.3f"))
        vals = [float(r["close_ms"]) for r in rs if r.get("close_ms")]
        if vals:  # the agent's own clock, not a step's excess: part of the last window step
            print(stat_line(f"{w:12s} {v:6s} {'the close in the last window step (its own time)':52s}",
                            vals, "%+.3f"))
    print("\ninproc: the steady tier at the issue's 10/200 windows, estimated from these "
          "in-process figures (edges + 9 traced steps' added time, over 200 untraced steps; "
          "the cost outside windows is not in it)")
    for (w, v), rs in sorted(by.items()):
        vals = [steady_estimate(r, 10, 200) for r in rs]
        print(stat_line(f"{w:12s} {v:6s} {'added to the mean step':52s}", vals, "%+.4f"))
    pairs = {}
    for (w, v), rs in by.items():
        for r in rs:
            d = sum(float(r[k]) for k in ("detach1_ms", "detach2_ms"))
            pairs.setdefault(w, {}).setdefault(int(r["round"]), {})[v] = d
    for w, rounds in sorted(pairs.items()):
        diffs = [p["window"] - p["before"] for p in rounds.values()
                 if "window" in p and "before" in p]
        if diffs:
            print(stat_line(f"{w:12s} {'detach steps, window - before (ms, paired)':59s}",
                              diffs, "%+.3f"))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    runner.add_common_args(ap, "inproc.csv")
    ap.add_argument("--workloads", default="storm,gpt2,kernel-dense")
    ap.add_argument("--variants", default="window,bare,plain")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--windows", default="20/100@10")
    ap.add_argument("--steps-csv", default="", help="also append every step's time here")
    ap.add_argument("--positions", default="",
                    help="with --report-only: FILE[,FILE...], the runs' --steps-csv files; "
                         "adds where in the window the traced-step cost sits (--mixed runs)")
    ap.add_argument("--pool", default="",
                    help="with --report-only: FILE[,FILE...], several runs' results CSVs; "
                         "instead of --csv's report, meridian's default windows against the "
                         "bare consumer (--mixed), every process pooled, per host and over "
                         "all hosts")
    ap.add_argument("--rows-from-steps", default="",
                    help="FILE[,FILE...] of --steps-csv: rebuild the results rows of runs whose "
                         "rows were lost (give the runs' --windows and --mixed), into a new "
                         "--csv; wall time and the agent's counters stay empty")
    ap.add_argument("--machine", default="",
                    help="with --rows-from-steps: the boot id of the machine the runs ran on")
    ap.add_argument("--before-lib", default="",
                    help="an earlier agent library for the variant `before` (the window "
                         "variant with that agent: a change measured side by side)")
    ap.add_argument("--local-radius", type=int, default=8,
                    help="a window's neighbours: the untraced steps this many steps before "
                         "it and after its detach steps (the local figures)")
    ap.add_argument("--mixed", action="store_true",
                    help="meridian's processes also carry the bare consumer's windows, half a "
                         "period after meridian's (before it in even rounds): both "
                         "traced-step costs from one process")
    ap.add_argument("--fixed-phases", action="store_true",
                    help="with --mixed, meridian's windows at the offset in every round (as "
                         "in runs 39-41) instead of trading places with the bare consumer's "
                         "in even rounds")
    a = ap.parse_args(argv)
    length, period, _ = parse_windows(a.windows)
    if a.mixed and length + 3 > period // 2:
        raise SystemExit(f"inproc: --mixed --windows {a.windows}: the bare consumer's windows "
                         f"start half a period later, so LENGTH + 3 (a window and its two "
                         f"detach steps) must fit in PERIOD / 2 = {period // 2}")
    if (a.positions or a.pool) and not a.report_only:
        raise SystemExit("inproc: --positions and --pool read finished runs: give them with "
                         "--report-only")
    if a.rows_from_steps:
        report(rows_from_steps(a))
        return 0
    if a.report_only and a.pool:
        report_pooled(a.pool.split(","))
        return 0
    if a.report_only:
        rows = runner.read_rows(a.csv)
        report(rows)
        if a.positions:
            steps = read_steps(a.positions.split(","))  # read once for both
            report_positions(rows, steps, a.local_radius)
            report_noise(rows, steps, a.local_radius)
        return 0
    vs = a.variants.split(",")
    known = ["bare", "plain"] + list(MERIDIAN_VARIANTS)
    if not vs or set(vs) - set(known):
        raise SystemExit(f"inproc: --variants {a.variants}: choose from {', '.join(known)}")
    if "before" in vs and not os.path.isfile(a.before_lib):
        raise SystemExit(f"inproc: the variant `before` needs --before-lib, an agent library "
                         f"file (got {a.before_lib!r})")
    k = len(vs)
    plan = [(rnd, w, v) for rnd in range(1, a.rounds + 1) for w in a.workloads.split(",")
            for v in vs[(rnd - 1) % k:] + vs[:(rnd - 1) % k]]

    def run(rnd, w, v, writer):
        row = run_one(a, rnd, w, v, writer)
        return [row] if row else []
    rows = runner.run_resumable(a, plan, FIELDS, run, "inproc", f"windows {a.windows}")
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
