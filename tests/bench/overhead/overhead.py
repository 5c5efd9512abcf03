#!/usr/bin/env python3
"""overhead.py: what meridian costs a GPU job, against CUPTI's own floor, side by side.

Where it sits: the overhead benchmark of issue 3, run on the 2 x H200 host by
run_overhead.sh (stage `overhead` of tests/gpu/run_on_gpu_host.sh). Results go to
tests/gpu/RESULTS.md with the command that produced them.

Workloads, each a short real job (seconds):
  storm   (a) kernel_storm: 200,000 empty kernel launches; metric us_per_launch
  ref     (b) ref_workload under mpirun -np 2; metric measured_wall_s of its timed steps
  ddp     (c)+(d) ddp_train.py --mode both under mpirun -np 2: metric the median step time
          (slowest rank) of compute-heavy (c, ddp_ch) and of kernel-dense (d, ddp_kd)
Variants: plain (unprofiled), bare (tests/gpu/libbare_consumer.so as the CUDA injection
library), meridian (`meridian profile ... --`), and for ddp torch (torch.profiler around
the measured steps, trace discarded). A variant whose tool is missing is skipped.

Placement: with --bind split (the default) each rank of the mpirun workloads (ref, ddp)
runs on its own half of the machine's physical cores (SMT siblings kept together; a
`taskset` per local rank), the same for every variant; meridiand and the storm are not
bound. Run 11 showed the kernel-dense step's per-process median spread 17-27 ms unprofiled
with --bind none (ranks free to share a core): --bind none keeps that method.

Method: rounds; in each round every workload runs every variant once, in an order rotated
by one each round (no variant always first). --pairs rounds (>= 10 for the record), or
fewer if --budget-s runs out (the table says how many). Each metric is the workload's own
measurement of its timed region, so start-up, aggregator start and report are excluded.
Statistics per metric and variant: median, p25-p75, min-max, n. Ratios, from medians and
as the median of per-round ratios (paired):
  added(meridian)/added(bare) = (meridian - plain) / (bare - plain)   goal <= 1.10 on a, d
  meridian over plain, %                                             goal <= 3 % on b, c
  meridian / torch profiler                                          goal < 1 on d
Each ratio from medians comes with a 95% interval from 2,000 resamples of the rounds
(rounds drawn with replacement, a round's variants kept together; seeded): how far the
noise of this run lets the ratio move. It also compares the activity kinds the bare consumer
and meridian print (`kinds=`).

Output: a Markdown table on stdout and in OUT/overhead.md, every run in OUT/overhead.csv
(a row appended as each run ends, so a call cut short keeps what it measured; the storm's
own stall counts, the agents' sent/lost totals, the machine's boot id and a fingerprint of
the configuration ride along), each run's log under WORK/logs/overhead/. No run goes past
--budget-s: none starts that would end past it at its variant's longest so far, and each
is stopped at it (a hung run included). --resume continues the run whose overhead.csv is
in OUT: its rows count, the round the earlier call cut short gets its missing runs first,
then rounds go on (the rotation too) until --pairs complete rounds; the report covers all
of them. It refuses a file measured on another machine (another boot id) or with another
configuration, so one benchmark run may span two device calls on one warm machine, never
two machines. "rounds completed" counts rounds with every variant. Exit 0 when the runs
could be made (whatever the goals say), 1 when a workload had no successful plain run.
"""
import argparse
import csv
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

VARIANTS = {"storm": ["plain", "bare", "meridian"], "ref": ["plain", "bare", "meridian"],
            "ddp": ["plain", "bare", "meridian", "torch"]}
METRICS = {"storm": ["storm"], "ref": ["ref"], "ddp": ["ddp_ch", "ddp_kd"]}
LABELS = {"storm": "(a) kernel storm, us/launch", "ref": "(b) reference workload, s",
          "ddp_ch": "(c) DDP compute-heavy step, ms", "ddp_kd": "(d) DDP kernel-dense step, ms"}
GOALS = {"storm": "added", "ddp_kd": "added", "ref": "pct", "ddp_ch": "pct"}


def parse_metrics(workload, text):
    """Metric values a run printed: {metric: float}; missing metrics are absent."""
    out = {}
    if workload == "storm":
        m = re.search(r"kernel_storm: .*us_per_launch=([0-9.]+)", text)
        if m:
            out["storm"] = float(m.group(1))
    elif workload == "ref":
        m = re.search(r"ref_workload: world=\d+ measured_wall_s=([0-9.]+) check=ok", text)
        if m:
            out["ref"] = float(m.group(1))
    else:
        for mode, key in (("compute-heavy", "ddp_ch"), ("kernel-dense", "ddp_kd")):
            vals = [float(v) for v in re.findall(
                r"ddp_train: rank \d+ mode=" + mode + r" .*?step_ms median=([0-9.]+)", text)]
            if vals:
                out[key] = max(vals)  # the slowest rank sets the step
    return out


def side_counts(text):
    """What else a run printed that the results quote: the storm's stalls (launches over
    50 us and their total ms) and, under meridian, the events its agents sent and lost
    (summed over ranks)."""
    out = {}
    m = re.search(r"kernel_storm: .*stalls=(\d+) stall_ms=([0-9.]+)", text)
    if m:
        out["stalls"], out["stall_ms"] = int(m.group(1)), float(m.group(2))
    sent = re.findall(r"meridian: rank \d+: sent (\d+) events .*?lost (\d+)", text)
    if sent:
        out["sent"] = sum(int(a) for a, _ in sent)
        out["lost"] = sum(int(b) for _, b in sent)
    return out


def captured_something(text):
    """True when every agent of a meridian run reported sending events (its exit line
    `meridian: rank N: sent E events ...` with E > 0)."""
    sent = [int(v) for v in re.findall(r"meridian: rank \d+: sent (\d+) events", text)]
    return bool(sent) and min(sent) > 0


def parse_kinds(text, who):
    """The set of kinds a tool printed (`<who>...: kinds=A,B,C`), or None."""
    m = re.search(who + r"[a-z_]*: .*?kinds=([A-Z0-9_,]+)", text)
    return set(m.group(1).split(",")) if m else None


BIND_SH = 'c=$1; [ "${OMPI_COMM_WORLD_LOCAL_RANK:-0}" = 0 ] || c=$2; shift 2; ' \
    'exec taskset -c "$c" "$@"'


def cpu_halves(cpus=None, siblings_of=None):
    """The CPUs this process may use, split into two halves of whole physical cores (a
    core's SMT siblings stay in one half): (first, second) as taskset lists, or None with
    fewer than two cores."""
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))

    def siblings(n):
        try:
            with open(f"/sys/devices/system/cpu/cpu{n}/topology/thread_siblings_list") as f:
                return f.read().strip()
        except OSError:
            return str(n)
    siblings_of = siblings_of or siblings
    cores = {}
    for n in cpus:
        cores.setdefault(siblings_of(n), []).append(n)
    groups = sorted(cores.values(), key=min)
    if len(groups) < 2:
        return None
    half = len(groups) // 2
    return tuple(",".join(str(n) for g in part for n in g)
                 for part in (groups[:half], groups[half:]))


def bootstrap_ci(rounds, fn, n=2000, seed=1):
    """95% interval of fn(resampled rounds) over n resamples of the rounds with
    replacement; rounds is a list of per-round values fn understands. Returns (lo, hi),
    or (nan, nan) when fewer than 2 rounds or over 5% of the resamples give NaN (an
    interval of the defined ones only would be too narrow)."""
    import random
    rng = random.Random(seed)
    vals = []
    for _ in range(n if len(rounds) > 1 else 0):
        x = fn([rounds[rng.randrange(len(rounds))] for _ in rounds])
        if x == x:
            vals.append(x)
    if len(vals) < 0.95 * n:  # over 5% undefined (e.g. bare no dearer than plain): no interval
        return float("nan"), float("nan")
    vals.sort()
    return quantile(vals, 0.025), quantile(vals, 0.975)


def config_id(c):
    """What makes runs comparable besides the machine (placement, counts, commands), as 8
    hex digits: rows of one run must share it."""
    import hashlib
    key = repr((c.workloads, c.halves, c.mpirun, c.python, c.storm_launches, c.ref_steps,
                c.ddp_steps, sorted(c.bare_env.items()), c.meridian_cmd))
    return hashlib.sha1(key.encode()).hexdigest()[:8]


def machine_id():
    """This boot of this machine (the kernel's boot id, 8 hex digits): rows of one run must
    share it."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip().replace("-", "")[:8]
    except OSError:
        return "unknown"


def quantile(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    i = q * (len(sorted_vals) - 1)
    lo = int(i)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (i - lo)


def summarize(samples):
    s = sorted(samples)
    return {"n": len(s), "median": statistics.median(s) if s else float("nan"),
            "p25": quantile(s, 0.25), "p75": quantile(s, 0.75),
            "min": s[0] if s else float("nan"), "max": s[-1] if s else float("nan")}


def added_ratio(plain, bare, mer):
    d = bare - plain
    return (mer - plain) / d if d > 0 else float("nan")


class Harness:
    """Runs the rounds. runner(argv, env, log_path) -> (rc, text) is injectable (tests)."""

    def __init__(self, cfg, runner):
        self.cfg = cfg
        self.runner = runner
        self.rows = []  # dicts: round, workload, variant, rc, seconds, metrics
        self.longest = {}  # (workload, variant) -> longest run so far, seconds (budget)
        self.kinds = {}  # who -> set
        self.machine = machine_id()
        self.config_id = config_id(cfg)
        self.first_round = 0

    def resume(self, path):
        """Takes over the rows of an earlier, cut-short run of this benchmark (its
        overhead.csv); raises ValueError when they were measured on another machine or
        for other workloads."""
        with open(path, newline="") as f:
            old = list(csv.DictReader(f))
        for r in old:
            if r.get("machine") != self.machine:
                raise ValueError(f"{path} was measured on machine {r.get('machine') or '?'}, "
                                 f"this is {self.machine}: a run cannot span two machines; "
                                 f"move the file away to start afresh")
            if r["workload"] not in self.cfg.workloads:
                raise ValueError(f"{path} holds workload {r['workload']}, not in --workloads")
            if r.get("config") != self.config_id:
                raise ValueError(f"{path} was measured with another configuration "
                                 f"({r.get('config') or '?'}, this is {self.config_id}: "
                                 f"placement, step or launch counts, mpirun or python differ); "
                                 f"move the file away to start afresh")
            row = {k: v for k, v in r.items() if v != ""}
            for k in ("round", "rc", "stalls", "sent", "lost"):
                if k in row:
                    row[k] = int(row[k])
            for k in ("seconds", "storm", "ref", "ddp_ch", "ddp_kd", "stall_ms"):
                if k in row:
                    row[k] = float(row[k])
            self.rows.append(row)
            key = (row["workload"], row["variant"])
            self.longest[key] = max(self.longest.get(key, 0.0), row["seconds"])
        done = {(r["round"], r["workload"], r["variant"]) for r in self.rows}
        rounds = sorted({r["round"] for r in self.rows})
        cut = [n for n in rounds if not all((n, wl, v) in done for wl, v in self.planned())]
        # the first round the earlier call did not finish: its missing runs come first
        self.first_round = cut[0] if cut else (rounds[-1] + 1 if rounds else 0)

    def planned(self):
        """(workload, variant) pairs a round runs: every available variant of each."""
        return [(wl, v) for wl in self.cfg.workloads for v in VARIANTS[wl]
                if self.available(wl, v)]

    def complete_rounds(self):
        """Rounds that have a run of every planned (workload, variant)."""
        done = {(r["round"], r["workload"], r["variant"]) for r in self.rows}
        plan = self.planned()
        return sum(1 for n in {r["round"] for r in self.rows}
                   if all((n, wl, v) in done for wl, v in plan))

    def command(self, workload, variant, db):
        c = self.cfg
        mpirun = shlex.split(c.mpirun)
        if c.halves and workload != "storm":  # each rank on its own half of the cores
            mpirun = mpirun + ["sh", "-c", BIND_SH, "bind", c.halves[0], c.halves[1]]
        if workload == "storm":
            base = [c.storm, "--launches", str(c.storm_launches)]
        elif workload == "ref":
            base = mpirun + [c.ref, "--steps", str(c.ref_steps), "--warmup", "10"]
        else:
            base = mpirun + [c.python, c.ddp, "--mode", "both", "--steps", str(c.ddp_steps),
                             "--warmup", "10"]
            if variant == "torch":
                base += ["--profiler", "torch"]
        env = {}
        if variant == "bare":
            env["CUDA_INJECTION64_PATH"] = c.bare
            env.update(c.bare_env)
        if variant == "meridian":
            env["MERIDIAN_PRINT_KINDS"] = "1"  # the agent's `meridian: kinds=` line
        if env and workload != "storm":  # pass it through mpirun to the ranks
            n = len(shlex.split(c.mpirun))
            base = base[:n] + [a for k, v in sorted(env.items()) for a in ("-x", f"{k}={v}")] \
                + base[n:]
        if variant == "meridian":
            cmd = shlex.split(c.meridian_cmd.format(meridian=c.meridian, agent_lib=c.agent_lib,
                                                    db=db))
            if workload == "storm" and "profile" in cmd and "--single" not in cmd:
                # one process without a launcher: without --single it is no rank and the
                # agent stays inert (the first run measured an idle agent this way)
                cmd.insert(cmd.index("profile") + 1, "--single")
            base = cmd + base
        return base, env

    def available(self, workload, variant):
        c = self.cfg
        if variant == "bare":
            return bool(c.bare) and os.path.exists(c.bare)
        if variant == "meridian":
            return bool(c.meridian) and os.path.exists(c.meridian)
        exe = {"storm": c.storm, "ref": c.ref, "ddp": c.ddp}[workload]
        return bool(exe) and os.path.exists(exe)

    def run_one(self, rnd, workload, variant, timeout_s=None):
        c = self.cfg
        db = os.path.join(c.work, f"overhead_{workload}_{rnd}.db")
        argv, env = self.command(workload, variant, db)
        log = os.path.join(c.logdir, f"{workload}_{variant}_{rnd:02d}.log")
        t0 = time.monotonic()
        rc, text = self.runner(argv, env, log, timeout_s)
        secs = time.monotonic() - t0
        metrics = parse_metrics(workload, text) if rc == 0 else {}
        if variant == "meridian" and not captured_something(text):
            metrics = {}  # an inert agent measures nothing: the run does not count
            rc = rc or 99
        for who in ("bare_consumer", "meridian"):
            k = parse_kinds(text, who)
            if k is not None and who not in self.kinds:
                self.kinds[who] = k
        row = {"round": rnd, "workload": workload, "variant": variant, "rc": rc,
               "seconds": round(secs, 3), **metrics, **side_counts(text),
               "machine": self.machine, "config": self.config_id}
        self.rows.append(row)
        self.append_csv(row)
        for f in (db, db + "-wal", db + "-shm"):
            if os.path.exists(f):
                os.remove(f)

    def schedule(self):
        """(round, workload, variant) in run order from first_round to --pairs: every
        available variant of each workload once per round, the order rotated each round."""
        for rnd in range(self.first_round, self.cfg.pairs):
            for wl in self.cfg.workloads:
                vs = [v for v in VARIANTS[wl] if self.available(wl, v)]
                k = rnd % len(vs) if vs else 0
                for v in vs[k:] + vs[:k]:
                    yield rnd, wl, v

    def run(self, clock=time.monotonic):
        c = self.cfg
        start = clock()
        done = {(r["round"], r["workload"], r["variant"]) for r in self.rows}
        for rnd, wl, v in self.schedule():
            if (rnd, wl, v) in done:
                continue  # ran in the call this one resumes
            # start no run that, as long as its longest, ends past the budget, and stop
            # any run at the budget (a hung one included)
            t0 = clock()
            left = c.budget_s - (t0 - start)
            if self.longest.get((wl, v), 0.0) > left or left <= 0:
                return
            self.run_one(rnd, wl, v, min(c.run_timeout_s, left))
            self.longest[(wl, v)] = max(self.longest.get((wl, v), 0.0), clock() - t0)

    @property
    def rounds_done(self):
        """Rounds with a run of every planned variant (a cut round does not count)."""
        return self.complete_rounds()

    def samples(self, metric, variant):
        return [r[metric] for r in self.rows if r["variant"] == variant and metric in r]

    def paired(self, metric, fn, variants):
        """Median over rounds of fn(values of variants in that round)."""
        vals = []
        for rnd in sorted({r["round"] for r in self.rows}):
            got = {}
            for r in self.rows:
                if r["round"] == rnd and metric in r:
                    got[r["variant"]] = r[metric]
            if all(v in got for v in variants):
                x = fn(*[got[v] for v in variants])
                if x == x:  # not NaN
                    vals.append(x)
        return statistics.median(vals) if vals else float("nan")

    def round_values(self, metric, variants):
        """Per round that has them all: the metric's value for each variant (a list)."""
        out = []
        for rnd in sorted({r["round"] for r in self.rows}):
            got = {r["variant"]: r[metric] for r in self.rows
                   if r["round"] == rnd and metric in r}
            if all(v in got for v in variants):
                out.append([got[v] for v in variants])
        return out

    def ci(self, metric, fn, variants):
        """95% interval (text) of fn(medians of variants) over resampled rounds."""
        def of_medians(rounds):
            return fn(*[statistics.median(r[i] for r in rounds) for i in range(len(variants))])
        lo, hi = bootstrap_ci(self.round_values(metric, variants), of_medians)
        return "-" if lo != lo else f"{lo:.3g}-{hi:.3g}"

    def report(self):
        lines = ["| metric | variant | median | p25-p75 | min-max | n |",
                 "|---|---|---|---|---|---|"]
        ratios = ["", "| metric | ratio | from medians | 95% interval | paired median | goal |",
                  "|---|---|---|---|---|---|"]

        def pct(p, x):
            return (x / p - 1) * 100

        def row(m, name, fn, variants, goal):
            med = [summarize(self.samples(m, v))["median"] for v in variants]
            ratios.append(f"| {LABELS[m]} | {name} | {fn(*med):.3f} | "
                          f"{self.ci(m, fn, variants)} | "
                          f"{self.paired(m, fn, variants):.3f} | {goal} |")
        for wl in self.cfg.workloads:
            for m in METRICS[wl]:
                st = {v: summarize(self.samples(m, v)) for v in VARIANTS[wl]}
                for v, s in st.items():
                    if s["n"]:
                        lines.append(f"| {LABELS[m]} | {v} | {s['median']:.4g} | "
                                     f"{s['p25']:.4g}-{s['p75']:.4g} | "
                                     f"{s['min']:.4g}-{s['max']:.4g} | {s['n']} |")
                med = {v: s["median"] for v, s in st.items() if s["n"]}
                if "plain" in med and "bare" in med:
                    row(m, "bare over plain, %", pct, ["plain", "bare"], "-")
                if "meridian" not in med or "plain" not in med:
                    continue
                if GOALS[m] == "added" and "bare" in med:
                    row(m, "added(meridian)/added(bare)", added_ratio,
                        ["plain", "bare", "meridian"], "<= 1.10")
                row(m, "meridian over plain, %", pct, ["plain", "meridian"],
                    "<= 3" if GOALS[m] == "pct" else "-")
                if m == "ddp_kd" and "torch" in med:
                    row(m, "meridian / torch profiler", lambda x, t: x / t,
                        ["meridian", "torch"], "< 1")
        failed = [f"{r['workload']}/{r['variant']}#{r['round']} rc={r['rc']}"
                  for r in self.rows if r["rc"] != 0]
        kb, km = self.kinds.get("bare_consumer"), self.kinds.get("meridian")
        if kb is not None and km is not None:
            kinds = "same" if kb == km else \
                f"DIFFER: bare only {sorted(kb - km)}, meridian only {sorted(km - kb)}"
        else:
            kinds = f"not compared (bare: {sorted(kb) if kb else 'none'}, " \
                    f"meridian: {sorted(km) if km else 'none'})"
        head = [f"rounds completed: {self.complete_rounds()} of {self.cfg.pairs} "
                f"(variants alternate, order rotated each round); runs: {len(self.rows)}; "
                f"failed runs: {', '.join(failed) or 'none'}",
                f"activity kinds, bare consumer vs meridian: {kinds}",
                "placement: " + (f"rank 0 on CPUs {self.cfg.halves[0]}, rank 1 on CPUs "
                                 f"{self.cfg.halves[1]} (mpirun workloads)"
                                 if self.cfg.halves else "ranks not bound"), ""]
        return "\n".join(head + lines + ratios) + "\n"

    CSV_KEYS = ["round", "workload", "variant", "rc", "seconds", "storm", "ref", "ddp_ch",
                "ddp_kd", "stalls", "stall_ms", "sent", "lost", "machine", "config"]

    def append_csv(self, row):
        """Appends one run to OUT/overhead.csv (header first), flushed at once."""
        path = os.path.join(self.cfg.out, "overhead.csv")
        new = not self.rows[:-1] or not os.path.exists(path)
        with open(path, "w" if new else "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.CSV_KEYS)
            if new:
                w.writeheader()
            w.writerow({k: row.get(k, "") for k in self.CSV_KEYS})

    def write(self, out_dir):
        text = self.report()
        with open(os.path.join(out_dir, "overhead.md"), "w") as f:
            f.write(text)
        return text


def subprocess_runner():
    def run(argv, env, log, timeout_s):
        e = dict(os.environ)
        e.update(env)
        try:
            p = subprocess.run(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=timeout_s, text=True, errors="replace")
            rc, text = p.returncode, p.stdout
        except subprocess.TimeoutExpired as ex:
            rc, text = 124, (ex.stdout or "") if isinstance(ex.stdout, str) else ""
        except OSError as ex:
            rc, text = 127, str(ex)
        with open(log, "w") as f:
            f.write(" ".join(shlex.quote(a) for a in argv) + "\n" + text)
        return rc, text
    return run


def parse_args(argv):
    ap = argparse.ArgumentParser(description="meridian overhead benchmark (GPU host)")
    ap.add_argument("--build", required=True, help="CMake build folder")
    ap.add_argument("--src", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))))))
    ap.add_argument("--out", default=".")
    ap.add_argument("--work", default="/tmp/meridian-gpu")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--resume", action="store_true",
                    help="continue the run whose overhead.csv is in --out (same machine)")
    ap.add_argument("--budget-s", type=float, default=480)
    ap.add_argument("--run-timeout-s", type=float, default=120)
    ap.add_argument("--workloads", default="storm,ref,ddp")
    ap.add_argument("--meridian", default="")
    ap.add_argument("--agent-lib", default="")
    ap.add_argument("--meridian-cmd",
                    default="{meridian} profile -o {db} --agent-lib {agent_lib} --",
                    help="prefix for the meridian variant ({meridian}, {agent_lib}, {db})")
    ap.add_argument("--mpirun", default="mpirun --allow-run-as-root -np 2 --bind-to none "
                    "--mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none "
                    "-x NCCL_NVLS_ENABLE=0 -x TORCH_SYMM_MEM_DISABLE_MULTICAST=1 "
                    "-x NVSHMEM_DISABLE_NVLS=1 -x PATH -x MASTER_ADDR=127.0.0.1 "
                    "-x MASTER_PORT=29541")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--bind", choices=["split", "none"], default="split",
                    help="split: each rank of ref/ddp on its own half of the physical cores")
    ap.add_argument("--storm-launches", type=int, default=200000)
    ap.add_argument("--ref-steps", type=int, default=200)
    ap.add_argument("--ddp-steps", type=int, default=30)
    ap.add_argument("--bare-env", default="",
                    help="extra VAR=VALUE;... for the bare consumer (e.g. its kinds; values "
                         "may hold commas)")
    c = ap.parse_args(argv)
    c.workloads = [w for w in c.workloads.split(",") if w]
    for w in c.workloads:
        if w not in VARIANTS:
            ap.error(f"unknown workload {w}")
    c.storm = os.path.join(c.build, "tests/workloads/kernel_storm")
    c.ref = os.path.join(c.build, "tests/workloads/ref_workload")
    c.bare = os.path.join(c.build, "tests/gpu/libbare_consumer.so")
    c.ddp = os.path.join(c.src, "tests/workloads/ddp_train.py")
    c.bare_env = dict(kv.split("=", 1) for kv in c.bare_env.split(";") if "=" in kv)
    c.logdir = os.path.join(c.work, "logs", "overhead")
    c.halves = cpu_halves() if c.bind == "split" else None
    return c


def main(argv):
    c = parse_args(argv)
    os.makedirs(c.logdir, exist_ok=True)
    os.makedirs(c.out, exist_ok=True)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    h = Harness(c, subprocess_runner())
    csv_path = os.path.join(c.out, "overhead.csv")
    if c.resume and os.path.exists(csv_path):
        try:
            h.resume(csv_path)
        except (ValueError, KeyError, OSError) as ex:
            print(f"overhead: cannot resume: {ex}", file=sys.stderr)
            return 2
        print(f"overhead: resuming at round {h.first_round} with {len(h.rows)} runs from "
              f"{csv_path}", flush=True)
    h.run()
    print(h.write(c.out), end="")
    missing = [w for w in c.workloads
               if not any(r["rc"] == 0 and r["workload"] == w and r["variant"] == "plain"
                          for r in h.rows)]
    if missing:
        print(f"overhead: no successful plain run of {missing}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
