#!/usr/bin/env python3
"""runner.py: how the overhead benchmarks run their rounds and read them back.

Where it sits: shared by tiers.py (issue 9's benchmark: the steady tier, its windows and
the full trace against the unprofiled workload) and inproc.py (one mechanism changed inside
one process); not run on its own. Knows nothing of workloads or variants: those are the
benchmarks' own.

Contract:
  run_timed(cmd, env, timeout_s)           one process: (output, exit status, wall seconds)
  run_resumable(a, plan, fields, run, tag) every (round, workload, variant) of plan that the
                                           results CSV does not hold yet, while it fits in
                                           the device budget; returns the rows
  read_rows(path)                          a results CSV, [] when there is none yet
  physical_cores, cpu_shares               the cores cut into disjoint shares for processes
                                           side by side (--concurrent), rotated over turns
  check_gpu_shareable()                    refuses a GPU that admits one process only
  bootstrap, median_ci_exact               the intervals the reports print
  add_common_args(ap, csv_default)         the options both benchmarks take
  boot_id()                                the machine a row was measured on
"""
import csv
import math
import os
import random
import statistics
import subprocess
import time


def boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read()[:8]
    except OSError:
        return "unknown"


def physical_cores(cpus, read=None):
    """The logical CPUs `cpus` grouped by physical core (SMT siblings together), the cores
    in (package, core id) order: [[cpu, sibling...], ...]. read(path) returns a sysfs
    file's text (a test hands its own); a CPU whose topology cannot be read is its own core."""
    def sysfs(path):
        with open(path) as f:
            return f.read()
    read = read or sysfs
    cores = {}
    for c in sorted(cpus):
        base = f"/sys/devices/system/cpu/cpu{c}/topology/"
        try:
            key = (int(read(base + "physical_package_id")), int(read(base + "core_id")))
        except (OSError, ValueError):
            key = (1 << 30, c)
        cores.setdefault(key, []).append(c)
    return [cores[k] for k in sorted(cores)]


def cpu_shares(n, rnd, cpus=None, read=None):
    """n disjoint CPU lists for the n processes of a concurrent round: the physical cores
    cut into n contiguous parts (siblings never split), part (slot + rnd) % n to slot, so
    the process of one slot sits on every part in turn over rounds. Fewer cores than n: a
    SystemExit."""
    cores = physical_cores(cpus if cpus is not None else os.sched_getaffinity(0), read)
    if len(cores) < n:
        raise SystemExit(f"tiers: --concurrent: {n} processes need {n} physical cores, "
                         f"this machine gives {len(cores)}")
    per, extra = divmod(len(cores), n)
    parts, at = [], 0
    for k in range(n):
        take = per + (1 if k < extra else 0)
        parts.append(sorted(c for core in cores[at:at + take] for c in core))
        at += take
    return [parts[(slot + rnd) % n] for slot in range(n)]


def check_gpu_shareable():
    """--concurrent puts two processes on one GPU: refuses (SystemExit) when nvidia-smi says
    a GPU's compute mode admits one process only; without nvidia-smi, nothing to check."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=index,compute_mode",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return
    lone = [line.strip() for line in p.stdout.splitlines() if "exclusive" in line.lower()]
    if p.returncode == 0 and lone:
        raise SystemExit(f"tiers: --concurrent needs two processes on one GPU, but "
                         f"nvidia-smi reports {'; '.join(lone)}: run without --concurrent "
                         f"(the GPU's settings are not ours to change)")


def run_timed(cmd, env, timeout_s):
    """(stdout + stderr, exit status (124 on timeout), wall seconds) of one workload run.
    stderr is read apart: meridian's lines would otherwise split the workload's long lines."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout_s)
        out, rc = p.stdout + "\n" + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = 124
    return out, rc, time.monotonic() - t0


def read_rows(path):
    """The rows of a results CSV, [] when there is none yet."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def run_resumable(a, plan, fields, run, tag, about="", clock=time.monotonic):
    """Runs every (round, workload, variant) of plan that a.csv does not hold yet (its rows
    count only with a.resume) while they fit in a.budget_s; run(rnd, workload, variant,
    writer) writes its rows through the CSV writer and returns them. Returns the rows read
    and written, for the report. Shared by tiers.py and inproc.py.
    A run starts only if it would end inside the budget when it takes as long as the
    longest run of its workload that ended well (the rows resumed from a.csv count; a
    workload not run yet: the longest of any), so a device call's limit is its build + the
    budget (session 18's call 3 was killed in a run started just before its budget ran
    out). Failed runs do not count: one that hit its timeout would stop every later one."""
    rows = read_rows(a.csv) if a.resume else []
    if rows and list(rows[0].keys()) != list(fields):
        raise SystemExit(f"{tag}: {a.csv} has the columns {list(rows[0].keys())}, this "
                         f"version writes {list(fields)}: resume into a new --csv (and "
                         f"report the two with --report-only --pool) instead of mixing them")
    done = {(int(r["round"]), r["workload"], r["variant"]) for r in rows}

    def is_done(rnd, w, v):  # v: a variant, or a tuple of them run at once (all must be)
        return all((rnd, w, x) in done for x in (v if isinstance(v, tuple) else (v,)))
    new = not rows
    t_end = clock() + a.budget_s
    longest = {}  # workload -> the longest run that ended well, seconds

    def note(w, took):
        longest[w] = max(longest.get(w, 0.0), took)
    for r in rows:  # a resumed call: the CSV's own wall times
        if str(r.get("rc")) == "0" and r.get("wall_s"):
            note(r["workload"], float(r["wall_s"]))
    print(f"{tag}: {len(plan)} runs planned, {sum(is_done(*p) for p in plan)} of them done; "
          f"machine {boot_id()}; {about}",
          flush=True)
    with open(a.csv, "w" if new else "a", newline="") as f:
        writer = csv.DictWriter(f, fields)
        if new:
            writer.writeheader()
        for rnd, w, v in plan:
            if is_done(rnd, w, v):
                continue
            need = longest.get(w, max(longest.values(), default=0.0))
            if clock() + need > t_end:
                print(f"{tag}: budget reached (the next run could take {need:.0f} s, "
                      f"{max(t_end - clock(), 0):.0f} s are left); resume with --resume",
                      flush=True)
                break
            t0 = clock()
            got = run(rnd, w, v, writer)
            if any(str(r.get("rc")) == "0" for r in got):
                note(w, clock() - t0)
            rows += got
            f.flush()
    return rows


def median_ci_exact(vals, level=0.95):
    """The distribution-free interval of the median from two order statistics (the binomial
    rule): (lo, hi) covering the median with probability >= level, or None when there are
    too few values for any (under 6 at 95%). The percentile bootstrap of a median under ~10
    values returns about the 2nd-smallest and 2nd-largest values and covers less than it
    says; this one does not."""
    n = len(vals)
    xs = sorted(vals)
    k, cdf = 0, 0.0
    for j in range(n + 1):
        cdf += math.comb(n, j) / 2 ** n
        if cdf > (1 - level) / 2:
            break
        k = j + 1
    return (xs[k - 1], xs[n - k]) if k else None


def bootstrap(vals, n=2000, stat=statistics.median):
    """95% percentile interval of stat(vals) over n resamples (a fixed seed: reprints agree),
    None under 3 values. vals may be tuples when stat knows what to do with them."""
    if len(vals) < 3:
        return None
    rng = random.Random(1)
    meds = sorted(stat(rng.choices(vals, k=len(vals))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def add_common_args(ap, csv_default):
    """The options tiers.py and inproc.py share: where the builds are, the device budget,
    the results CSV and how to resume or reprint it."""
    ap.add_argument("--build", required=True)
    ap.add_argument("--meridian", required=True)
    ap.add_argument("--agent-lib", required=True)
    ap.add_argument("--budget-s", type=float, default=540,
                    help="seconds for the runs: a run starts only if, taking as long as the "
                         "longest run of its workload that ended well, it ends inside them")
    ap.add_argument("--run-timeout-s", type=float, default=240)
    ap.add_argument("--csv", default=csv_default)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--report-only", action="store_true")
