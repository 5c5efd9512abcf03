#!/usr/bin/env python3
"""ddp_train.py: a small PyTorch DDP training job for meridian's GPU tests.

Where it sits: a workload meridian profiles on the GPU host (tests/gpu/run_on_gpu_host.sh)
and workloads (c) and (d) of the overhead benchmark (tests/bench/overhead). Not part of
meridian. Run one process per GPU under Open MPI's mpirun with the NCCL backend:

    mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MASTER_ADDR=127.0.0.1 \
        -x MASTER_PORT=29531 python3 tests/workloads/ddp_train.py --mode kernel-dense

Rank, world size and local rank come from OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK (then
RANK/WORLD_SIZE/LOCAL_RANK, then a single process). Every step is an NVTX range
("step N", torch.cuda.nvtx.range_push/pop); warm-up steps are ranges named "warmup N".

Modes:
  compute-heavy  a few large kernels a step: two 8192x8192 bf16 layers, batch 4096
  kernel-dense   hundreds of small kernels a step: 48 blocks of Linear(256)+LayerNorm+GELU
                 with residuals, batch 64, fp32 (measured on the H200 host: ~1020 GPU
                 operations a step, ~20 ms; compute-heavy: 45 operations, ~5.7 ms)
  gpt2           a GPT-2-small-class language model built from its configuration with
                 random weights (12 layers, width 768, 12 heads, vocabulary 50257, context
                 1024; nothing downloaded), batch 8 x 512 tokens, bf16 autocast, AdamW:
                 launch-bound training (measured on one H200: ~37 ms a step)
  both           compute-heavy then kernel-dense in one process (one start-up for the
                 overhead benchmark; each mode prints its own lines)
  A,B,...        several modes in one process, in this order (e.g. gpt2,kernel-dense)
Options: --steps (measured, default 50), --warmup (default 10), --profiler torch (measured
steps under torch.profiler with CPU+CUDA activities; the trace is discarded),
--count-kernels (after measuring, profile one more step and print the GPU operations it
ran; use only when no other CUPTI client is loaded), --count-collectives (the NCCL
collectives this rank issued, counted by PyTorch's own flight recorder:
TORCH_NCCL_TRACE_BUFFER_SIZE is set before the process group starts and the record is read
back before it ends), --print-steps, --bare-windows L/P@O (the bare CUPTI consumer in windows of the measured
steps: the library BARE_CONSUMER_LIB names, tests/gpu/libbare_consumer.so, attached before
step O+kP and detached after step O+kP+L-1 by CUPTI's dynamic detach, completed by a
synchronisation, so traced and untraced steps alternate as in meridian's steady tier:
tests/bench/overhead/inproc.py), --step-load-us N (busy-wait N us at the start of every
step, warm-up included, inside the step's time and while the GPU is idle: a known cost, the
overhead benchmark's positive control), --pair-dir DIR [--pair-n N] (N single-process
jobs side by side on one GPU begin each mode's measured steps together, and one that ends
first runs unmeasured "filler" steps until all have: each sees the same contention
throughout; prints `pair_filler_steps=K`; refused with more than one rank; with
--pair-turns K --pair-slot S they take turns instead, K measured steps each in slot order,
each with the GPU alone, the waits left out of every step and of the measured wall time).

Output (stdout, prefixed "ddp_train:", every line naming its mode): per rank the step
statistics in milliseconds
(median, mean, p10, p90, min, max) and the number of measured steps; on rank 0 the
measured wall time; per rank where the process's time went (`phases_s`: interpreter and
imports, process-group start, each mode, teardown) and, per mode, where the mode's went
(model build, DDP constructor, first step, rest of warm-up, measured steps, profiler exit); with --count-collectives per rank
`nccl_collectives=N` and the count per operation; with --print-steps every measured step
as `step I ms=T host_ms=H cpu_ms=C` (H: the host part, from the step's start until its
work was enqueued, before its torch.cuda.synchronize(); T - H is the wait for the GPU; C:
the main thread's CPU time in H, so H - C is time it was off a CPU; with --speed-probe
also ` probe_ms=P`, a fixed pure-Python loop timed after the step); with --thread-cpu-at
S1,S2,... where the process's CPU time went between those measured steps, a line per pair
(`threads steps S1-S2: main_cpu_ms= main_nvcsw= others_cpu_ms= ... name/tid=ms ...`). Exit 0,
non-zero on any error (a non-finite loss included, or a collective count that cannot be
read).
"""
import argparse
import math
import os
import pickle
import statistics
import sys
import threading
import time

T_START = time.monotonic()


def env_int(names, default):
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            return int(v)
    return default


MODES = ("compute-heavy", "kernel-dense", "gpt2")


def parse_modes(s):
    modes = ["compute-heavy", "kernel-dense"] if s == "both" else s.split(",")
    for m in modes:
        if m not in MODES:
            raise argparse.ArgumentTypeError(
                f"{m!r} is not a mode ({', '.join(MODES)}, both, or a comma list)")
    return modes


def parse_steps(s):
    """'20,290,330,600' -> (20, 290, 330, 600): step indices, increasing."""
    try:
        got = tuple(int(x) for x in s.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not a comma-separated list of steps")
    if list(got) != sorted(set(got)) or got[0] < 0:
        raise argparse.ArgumentTypeError(f"'{s}': steps must increase and be >= 0")
    return got


PROBE_ITERATIONS = 20000  # ~1-2 ms of CPython on the GPU host's CPUs


def speed_probe():
    """Milliseconds a fixed pure-Python loop takes now: it touches neither CUDA nor the
    profiler, so it moves only with the CPU's own speed (its clock, a neighbour on its core
    or cache); a step that slows while this does not is slower for another reason."""
    t0, x = time.perf_counter(), 0
    for i in range(PROBE_ITERATIONS):
        x = (x + i * i) & 0xFFFF
    return (time.perf_counter() - t0) * 1e3


def step_load(us):
    """Busy-waits `us` microseconds of wall time on this thread (holding the GIL, touching
    neither CUDA nor the profiler): --step-load-us, a known cost put on every step's critical
    path, for the overhead benchmark's positive control (tiers.py's `load`). Returns the
    microseconds it waited."""
    t0 = time.perf_counter()
    end = t0 + us / 1e6
    while time.perf_counter() < end:
        pass
    return (time.perf_counter() - t0) * 1e6


ABANDONED = "abandoned"  # in a --pair-dir: a process of the set failed (Pair stops)


class Pair:
    """--pair-dir DIR --pair-n N: N processes run side by side on one GPU (the overhead
    benchmark's concurrent rounds, tests/bench/overhead/tiers.py --concurrent) and each of
    their measured phases should see the same contention from start to end. `meet(name)`
    returns once all N have arrived at name (each arrival is a file DIR/name.PID: DIR
    should be empty at the start, one per set of processes side by side);
    `hold(name, step)` marks this process at name and runs step() (unmeasured work, the same
    kind) until all N have, so a process that ends first keeps the GPU as busy as it was
    while the others finish theirs. Every wait (these, and the turns below) gives up with a
    SystemExit that says what it waited for: after timeout_s, or within check_s when a
    process that arrived anywhere has ended (its PID is gone) while the wait is not over,
    or the launcher left ABANDONED."""

    def __init__(self, directory, n, timeout_s=120.0, poll_s=0.005, check_s=0.05):
        self.dir, self.n, self.timeout_s, self.poll_s = directory, n, timeout_s, poll_s
        self.check_s = check_s  # how often a wait looks for ended processes
        os.makedirs(directory, exist_ok=True)

    @staticmethod
    def _arrival(filename):
        """(point, pid) of an arrival's file name `point.PID`; None for any other file."""
        point, dot, pid = filename.rpartition(".")
        return (point, int(pid)) if dot and point and pid.isdigit() else None

    def _arrivals(self):
        return [x for x in map(self._arrival, os.listdir(self.dir)) if x]

    def _pids(self, name):
        return sorted(pid for point, pid in self._arrivals() if point == name)

    def _arrive(self, name):
        open(os.path.join(self.dir, f"{name}.{os.getpid()}"), "w").close()

    def _all_at(self, name):
        return len(self._pids(name)) >= self.n

    def _stop_if_gone(self, what):
        """SystemExit when DIR holds ABANDONED (the launcher's word that a process of the
        set failed, perhaps before it could arrive anywhere: tiers.py writes it) or when a
        process that arrived anywhere in DIR has ended: while this one waits `what`, no
        process of the set can have left the point it waits at, so one that ended failed."""
        if os.path.exists(os.path.join(self.dir, ABANDONED)):
            raise SystemExit(f"ddp_train: --pair-dir: the launcher says another process of "
                             f"this set failed ({self.dir}/{ABANDONED}); this one stops too")
        for pid in {pid for _, pid in self._arrivals()}:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                raise SystemExit(f"ddp_train: --pair-dir: process {pid} ended while this one "
                                 f"waited {what}; this one stops too")
            except PermissionError:
                pass

    def _wait(self, ready, between, what, state):
        """Runs between() (a sleep, or work) until ready(); returns the seconds it took.
        Gives up with a SystemExit as _stop_if_gone does (looked at every check_s, not on
        every poll: each look lists DIR and signals every PID in it, and a process that
        takes turns polls every millisecond), or after timeout_s, saying what it waited for
        (`what`) and how far the set got (state())."""
        t0 = next_check = time.monotonic()
        while not ready():
            now = time.monotonic()
            if now >= next_check:
                next_check = now + self.check_s
                try:
                    self._stop_if_gone(what)
                except SystemExit:
                    if ready():  # the last one arrived and ended between the two looks
                        break
                    raise
            if now - t0 > self.timeout_s:
                raise SystemExit(f"ddp_train: --pair-dir: waited {what} for "
                                 f"{self.timeout_s:.0f} s ({state()}); is the other process "
                                 f"running?")
            between()
        return time.monotonic() - t0

    def _gather(self, name, between):
        self._arrive(name)
        return self._wait(lambda: self._all_at(name), between, f"for all at {name}",
                          lambda: f"{len(self._pids(name))} of {self.n} there")

    def meet(self, name):
        self._gather(name, lambda: time.sleep(self.poll_s))

    def hold(self, name, step):
        """Returns how many times it ran step()."""
        ran = []
        self._gather(name, lambda: ran.append(step()))
        return len(ran)

    # Turns (--pair-turns): the processes run their measured steps in blocks, one process
    # at a time, slot 0's block 0, slot 1's block 0, ..., slot 0's block 1, ...: each has the
    # GPU alone, and the CPU's drift (seconds) is common to both over a few blocks. The turn
    # count lives in DIR/name.turn, written (atomically, by renaming) only by the holder.

    def _turn(self, name):
        try:
            with open(os.path.join(self.dir, f"{name}.turn")) as f:
                return int(f.read() or 0)
        except FileNotFoundError:
            return 0

    def wait_turn(self, name, block, slot):
        """Returns once turn block*N + slot has come; the seconds it waited."""
        turn = block * self.n + slot
        return self._wait(lambda: self._turn(name) >= turn,
                          lambda: time.sleep(self.poll_s / 5), f"for turn {turn} of {name}",
                          lambda: f"it is {self._turn(name)}")

    def take_turns(self, name, steps, k, slot, body):
        """Runs body(i) for i in 0..steps-1 in blocks of k, each in its turn, passing the
        turn after each block; then, done, passes every turn that comes to this slot (a
        process with fewer steps, e.g. a torch run, must not hold the others up) until all
        have arrived at name-end. Returns the seconds it waited."""
        waited = 0.0
        for i in range(steps):
            if i % k == 0:
                waited += self.wait_turn(name, i // k, slot)
            body(i)
            if (i + 1) % k == 0 or i + 1 == steps:
                self.pass_turn(name)

        def pass_mine():
            if self._turn(name) % self.n == slot:
                self.pass_turn(name)
            time.sleep(self.poll_s / 5)
        return waited + self._gather(f"{name}-end", pass_mine)

    def pass_turn(self, name):
        path = os.path.join(self.dir, f"{name}.turn")
        with open(path + f".{os.getpid()}.tmp", "w") as f:
            f.write(str(self._turn(name) + 1))
        os.replace(path + f".{os.getpid()}.tmp", path)


def thread_cpu():
    """{tid: (name, CPU ms, involuntary context switches)} of this process's threads now,
    from /proc/self/task (threads that end in between are lost, which the reader is told)."""
    tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
    got = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/self/task/{tid}/status") as f:
                nvcsw = next(int(line.split()[1]) for line in f
                             if line.startswith("nonvoluntary_ctxt_switches"))
        except (OSError, StopIteration):
            continue  # the thread ended meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")].replace(" ", "_")
        fields = stat[stat.rindex(")") + 2:].split()  # field 3 (state) is fields[0]
        got[int(tid)] = (name, (int(fields[11]) + int(fields[12])) * tick_ms, nvcsw)
    return got


def thread_cpu_lines(rank, mode, snaps, main_tid):
    """One line per pair of consecutive snapshots [(step, thread_cpu()), ...]: the main
    thread's CPU ms and involuntary switches, then every other thread alive at both ends
    (name/tid=CPU ms), busiest first; threads that started or ended in between are counted."""
    lines = []
    for (s0, a), (s1, b) in zip(snaps, snaps[1:]):
        both = [t for t in b if t in a]
        others = sorted(((b[t][1] - a[t][1], b[t][0], t) for t in both if t != main_tid),
                        reverse=True)
        main = (b[main_tid][1] - a[main_tid][1], b[main_tid][2] - a[main_tid][2]) \
            if main_tid in a and main_tid in b else (float("nan"), -1)
        lines.append(
            f"ddp_train: rank {rank} mode={mode} threads steps {s0}-{s1}: "
            f"main_cpu_ms={main[0]:.0f} main_nvcsw={main[1]} "
            f"others_cpu_ms={sum(o[0] for o in others):.0f} started={len(set(b) - set(a))} "
            f"ended={len(set(a) - set(b))} " +
            " ".join(f"{n}/{t}={c:.0f}" for c, n, t in others if c > 0))
    return lines


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", type=parse_modes,
                    default="kernel-dense")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--profiler", choices=["none", "torch"], default="none")
    ap.add_argument("--count-kernels", action="store_true")
    ap.add_argument("--count-collectives", action="store_true")
    ap.add_argument("--print-steps", action="store_true")
    ap.add_argument("--speed-probe", action="store_true",
                    help="after each measured step, time a fixed pure-Python loop "
                         "(probe_ms): the host CPU's speed at that moment")
    ap.add_argument("--thread-cpu-at", type=parse_steps, default=(),
                    help="S1,S2,...: where the process's CPU time went between these "
                         "measured steps, per thread (S = --steps: the end)")
    ap.add_argument("--step-load-us", type=float, default=0,
                    help="busy-wait this many microseconds at the start of every step, "
                         "inside its time, while the GPU is idle: a known added cost")
    ap.add_argument("--pair-dir", default="",
                    help="with --pair-n N: N single-process jobs side by side begin each "
                         "mode's measured steps together and run unmeasured steps until all "
                         "N have ended theirs (a file each in this directory, which should "
                         "be empty at the start: one directory per set of jobs)")
    ap.add_argument("--pair-n", type=int, default=2,
                    help="how many jobs meet in --pair-dir (default 2)")
    ap.add_argument("--pair-turns", type=int, default=0,
                    help="with --pair-dir: instead of running at once, the jobs take turns, "
                         "K measured steps each, in --pair-slot order (each has the GPU "
                         "alone; the waits are no step's time)")
    ap.add_argument("--pair-slot", type=int, default=0,
                    help="with --pair-turns: this job's place in the turn order, 0..N-1")
    ap.add_argument("--bare-windows", type=parse_windows, default=None,
                    help="L/P@O: the bare CUPTI consumer (BARE_CONSUMER_LIB) traces those steps")
    ap.add_argument("--width", type=int, default=0, help="override the layer width")
    ap.add_argument("--depth", type=int, default=0, help="override the number of layers")
    ap.add_argument("--batch", type=int, default=0, help="override the batch size")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    if a.pair_dir and a.pair_n < 2:
        ap.error("--pair-n must be >= 2")
    if a.pair_turns and (not a.pair_dir or a.pair_turns < 1 or
                         not 0 <= a.pair_slot < a.pair_n):
        ap.error("--pair-turns K needs --pair-dir, K >= 1 and 0 <= --pair-slot < --pair-n")
    if not 0 <= a.step_load_us < 1e6:
        ap.error("--step-load-us must be in [0, 1e6)")
    return a


def build_gpt2(torch, depth, dev):
    """GPT-2 small from its configuration (random init): returns the model."""
    nn, F = torch.nn, torch.nn.functional
    vocab, ctx, d, heads = 50257, 1024, 768, 12
    layers = depth or 12

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d, device=dev)
            self.qkv = nn.Linear(d, 3 * d, device=dev)
            self.proj = nn.Linear(d, d, device=dev)
            self.ln2 = nn.LayerNorm(d, device=dev)
            self.fc = nn.Linear(d, 4 * d, device=dev)
            self.out = nn.Linear(4 * d, d, device=dev)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, d, device=dev)
            self.wpe = nn.Embedding(ctx, d, device=dev)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d, device=dev)
            self.head = nn.Linear(d, vocab, bias=False, device=dev)
            self.head.weight = self.wte.weight  # tied, as GPT-2

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))

    return GPT2(), vocab


def build_model(torch, mode, width, depth, dev):
    nn = torch.nn
    if mode == "compute-heavy":
        width = width or 8192
        depth = depth or 2
        layers = []
        for i in range(depth):
            # built on the GPU: initialising 134 M parameters on the CPU took seconds a run
            layers.append(nn.Linear(width, width, bias=False, device=dev, dtype=torch.bfloat16))
            if i + 1 < depth:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers), width, torch.bfloat16

    width = width or 256
    depth = depth or 48

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(width, width, device=dev)
            self.norm = nn.LayerNorm(width, device=dev)
            self.act = nn.GELU()

        def forward(self, x):
            return x + self.act(self.norm(self.fc(x)))

    return nn.Sequential(*[Block() for _ in range(depth)]), width, torch.float32


def stats_ms(times):
    s = sorted(times)
    n = len(s)
    return {
        "median": statistics.median(s),
        "mean": statistics.fmean(s),
        "p10": s[n // 10],
        "p90": s[min(n - 1, (n * 9) // 10)],
        "min": s[0],
        "max": s[-1],
    }


def parse_windows(s):
    """'L/P@O' -> (L, P, O)."""
    import re

    m = re.fullmatch(r"(\d+)/(\d+)@(\d+)", s)
    if not m or not 0 < int(m.group(1)) < int(m.group(2)):
        raise argparse.ArgumentTypeError(f"{s}: want LENGTH/PERIOD@OFFSET, 0 < LENGTH < PERIOD")
    return tuple(int(x) for x in m.groups())


class BareWindows:
    """--bare-windows: attaches and detaches the bare consumer around its window steps."""

    def __init__(self, torch, spec):
        import ctypes

        path = os.environ.get("BARE_CONSUMER_LIB", "")
        if not path:
            raise SystemExit("ddp_train: --bare-windows needs BARE_CONSUMER_LIB "
                             "(the path of tests/gpu/libbare_consumer.so)")
        self.torch, self.lib, self.spec = torch, ctypes.CDLL(path), spec

    def edge(self, i):
        length, period, offset = self.spec
        k = (i - offset) % period if i >= offset else -1
        return k == 0, k == length - 1

    def before(self, i):
        if self.edge(i)[0]:
            self.torch.cuda.synchronize()
            if self.lib.bare_consumer_attach() != 0:
                raise SystemExit(f"ddp_train: bare_consumer_attach before step {i} failed")

    def after(self, i):
        if self.edge(i)[1]:
            if self.lib.bare_consumer_detach() != 0:
                raise SystemExit(f"ddp_train: bare_consumer_detach after step {i} refused "
                                 "(not attached, a detach in progress, or cuptiSubscribe "
                                 "failed)")
            # The detach completes inside the next API exit on ANY thread: ours below, or
            # ProcessGroupNCCL's watchdog polling its events, which then spends ~3 ms in
            # the forced flush and cuptiFinalize while this thread already checks (session
            # 13: two of twelve GPT-2 processes stopped here). So wait for it, bounded.
            deadline = time.monotonic() + 5.0
            while True:
                self.torch.cuda.synchronize()  # an API exit, in case no other thread has one
                if not self.lib.bare_consumer_attached():
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"ddp_train: bare_consumer_detach after step {i} did "
                                     "not complete within 5 s")
                time.sleep(0.0005)


def run_mode(ctx, mode, a, place=0):
    """Builds the mode's model, runs warm-up and measured steps, prints; returns the loss.
    place: the mode's index in --mode (where --pair-dir meets)."""
    torch, dist, F, DDP, dev, rank, world = ctx
    marks = [("start", time.monotonic())]  # where this mode's time goes, printed at the end

    def mark(name):
        torch.cuda.synchronize()
        marks.append((name, time.monotonic()))

    if mode == "gpt2":
        model, vocab = build_gpt2(torch, a.depth, dev)
        batch = a.batch or 8
        x = torch.randint(0, vocab, (batch, 512), device=dev)
        y = torch.randint(0, vocab, (batch, 512), device=dev)
    else:
        model, width, dtype = build_model(torch, mode, a.width, a.depth, dev)
        batch = a.batch or (4096 if mode == "compute-heavy" else 64)
        x = torch.randn(batch, width, device=dev, dtype=dtype)
        y = torch.randn(batch, width, device=dev, dtype=dtype)
    nparams = sum(p.numel() for p in model.parameters())
    mark("build")
    ddp = DDP(model, device_ids=[dev.index])
    mark("ddp")
    if mode == "gpt2":
        opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4, weight_decay=0.1)
    else:
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-4, momentum=0.9)
    loss_box = [None]

    def forward_loss():
        if mode != "gpt2":
            return F.mse_loss(ddp(x), y)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = ddp(x)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))

    def step(i, label):
        """One step; returns the host clock and the thread's CPU clock when its work was
        enqueued (before the sync)."""
        torch.cuda.nvtx.range_push(f"{label} {i}")
        if a.step_load_us:  # the GPU is idle here (the last step ended in a sync)
            step_load(a.step_load_us)
        opt.zero_grad(set_to_none=True)
        loss = forward_loss()
        loss.backward()
        opt.step()
        enqueued = time.perf_counter(), time.thread_time()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        loss_box[0] = loss
        return enqueued

    for i in range(a.warmup):
        step(i, "warmup")
        if i == 0:
            mark("first_step")
    dist.barrier(device_ids=[dev.index])
    torch.cuda.synchronize()
    mark("warmup")
    pair = Pair(a.pair_dir, a.pair_n) if a.pair_dir else None
    point = f"{place}-{mode}"  # a mode given twice meets twice
    if pair:  # the processes side by side begin this mode's measured steps together
        pair.meet(f"{point}-start")
        mark("pair_meet")

    times, hosts, cpus, probes = [], [], [], []  # each step's ms, its host part (until the
    # sync), the main thread's CPU time in that host part and the speed probe after it, in ms
    snaps, snap_at = [], set(a.thread_cpu_at)
    main_tid = threading.get_native_id()
    prof = None
    if a.profiler == "torch":
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        prof.__enter__()
    t0 = time.perf_counter()
    bare = BareWindows(torch, a.bare_windows) if a.bare_windows else None
    aside = [0.0]  # seconds of the loop spent in snapshots and probes: not the job's

    def snapshot(i):
        if i in snap_at:
            t_aside = time.perf_counter()
            snaps.append((i, thread_cpu()))
            aside[0] += time.perf_counter() - t_aside

    def measured_step(i):
        snapshot(i)
        if bare:
            bare.before(i)
        ts, cs = time.perf_counter(), time.thread_time()
        enqueued, enqueued_cpu = step(i, "step")
        times.append((time.perf_counter() - ts) * 1e3)
        cpus.append((enqueued_cpu - cs) * 1e3)
        hosts.append((enqueued - ts) * 1e3)
        if a.speed_probe:
            probes.append(speed_probe())
            aside[0] += probes[-1] / 1e3
        if bare:
            bare.after(i)

    turns = pair and a.pair_turns
    if turns:  # blocks in turn (each ends in a sync: the GPU is idle at a pass), then the
        # others' last blocks: every wait is set aside
        aside[0] += pair.take_turns(point, a.steps, a.pair_turns, a.pair_slot, measured_step)
    else:
        for i in range(a.steps):
            measured_step(i)
    snapshot(a.steps)
    dist.barrier(device_ids=[dev.index])
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0 - aside[0]
    mark("measured")
    if pair and not turns:  # unmeasured steps until every process side by side has ended its measured ones
        # (under --profiler torch too: the other process's steps keep their contention)
        filler = pair.hold(f"{point}-end", lambda: step(a.steps, "filler"))
        print(f"ddp_train: rank {rank} mode={mode} pair_filler_steps={filler}", flush=True)
        mark("pair_filler")
    if prof is not None:
        prof.__exit__(None, None, None)  # trace processed by the profiler, then discarded
        prof = None
        mark("profiler_exit")

    loss = float(loss_box[0].float().item())
    if a.print_steps:
        for i, (t, h, c) in enumerate(zip(times, hosts, cpus)):
            probe = f" probe_ms={probes[i]:.4f}" if probes else ""
            print(f"ddp_train: rank {rank} mode={mode} step {i} ms={t:.3f} host_ms={h:.3f} "
                  f"cpu_ms={c:.3f}{probe}")
    for line in thread_cpu_lines(rank, mode, snaps, main_tid):
        print(line, flush=True)
    s = stats_ms(times)
    print(
        f"ddp_train: rank {rank} mode={mode} profiler={a.profiler} steps={a.steps} "
        f"warmup={a.warmup} world={world} params={nparams} batch={batch} "
        f"step_ms median={s['median']:.3f} mean={s['mean']:.3f} p10={s['p10']:.3f} "
        f"p90={s['p90']:.3f} min={s['min']:.3f} max={s['max']:.3f} loss={loss:.6g}",
        flush=True,
    )
    if rank == 0:
        print(f"ddp_train: world={world} mode={mode} measured_wall_s={wall:.6f}", flush=True)
    print(f"ddp_train: rank {rank} mode={mode} phases_s " + " ".join(
        f"{n}={t - marks[i][1]:.2f}" for i, (n, t) in enumerate(marks[1:])), flush=True)

    if a.count_kernels:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as p:
            step(a.steps, "counted")
        evs = [e for e in p.events() if e.device_type == DeviceType.CUDA]
        nccl = sum(1 for e in evs if "nccl" in e.name.lower())
        print(f"ddp_train: rank {rank} mode={mode} gpu_ops_per_step={len(evs)} "
              f"nccl_kernels_per_step={nccl}", flush=True)
    return loss


def count_collectives(torch):
    """(total, {operation: count}) of the NCCL collectives this process issued, from
    PyTorch's flight recorder (entries of every process group; point-to-point left out;
    a coalesced entry counts each of its tensors, one NCCL call each). Raises when the
    record is unavailable or may have wrapped."""
    c10d = torch._C._distributed_c10d
    try:
        raw = c10d._dump_nccl_trace(includeCollectives=True, includeStackTraces=False,
                                    onlyActive=False)
    except TypeError:
        raw = c10d._dump_nccl_trace()
    doc = pickle.loads(raw)
    entries = doc.get("entries", []) if isinstance(doc, dict) else []
    if not entries:
        raise RuntimeError("flight recorder holds no entries (TORCH_NCCL_TRACE_BUFFER_SIZE unset?)")
    if len(entries) >= FR_ENTRIES:
        raise RuntimeError(f"flight recorder full ({len(entries)} entries): count unreliable")
    by_op = {}
    for e in entries:
        if e.get("is_p2p"):
            continue
        name = str(e.get("profiling_name", "?")).replace("nccl:", "")
        n = len(e.get("input_sizes") or [None]) if "coalesced" in name else 1
        by_op[name] = by_op.get(name, 0) + n
    return sum(by_op.values()), by_op


FR_ENTRIES = 20000  # flight recorder ring size when counting: far above any run here


def main(argv):
    a = parse_args(argv)
    if a.count_collectives:  # read when the process group starts
        os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] = str(FR_ENTRIES)
        os.environ["TORCH_FR_BUFFER_SIZE"] = str(FR_ENTRIES)
    rank = env_int(["OMPI_COMM_WORLD_RANK", "RANK"], 0)
    world = env_int(["OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"], 1)
    if a.pair_dir and world > 1:  # each rank would meet apart and its collectives diverge
        print(f"ddp_train: --pair-dir pairs single-process jobs; this one has {world} "
              f"ranks: run it without --pair-dir", file=sys.stderr)
        return 2
    local = env_int(["OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"], 0)
    # NVLink multicast stays off on shared hosts, whatever the launcher passed.
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    phases = [("start_import", time.monotonic() - T_START)]
    t = time.monotonic()
    dev = torch.device("cuda", local % max(1, torch.cuda.device_count()))
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    torch.manual_seed(1234 + rank)
    phases.append(("pg_init", time.monotonic() - t))
    ctx = (torch, dist, F, DDP, dev, rank, world)
    modes = a.mode
    losses = []
    for k, m in enumerate(modes):
        t = time.monotonic()
        losses.append(run_mode(ctx, m, a, k))
        phases.append((m, time.monotonic() - t))
    colls = None
    if a.count_collectives:
        torch.cuda.synchronize()
        try:
            colls = count_collectives(torch)
        except Exception as e:  # noqa: BLE001 - any failure: say what, fail the run
            print(f"ddp_train: rank {rank} cannot count collectives: {e}", file=sys.stderr)
    t = time.monotonic()
    dist.destroy_process_group()
    phases.append(("pg_destroy", time.monotonic() - t))
    print(f"ddp_train: rank {rank} phases_s " + " ".join(f"{k}={v:.2f}" for k, v in phases),
          flush=True)
    if a.count_collectives:
        if colls is None:
            return 3
        total, by_op = colls
        print(f"ddp_train: rank {rank} nccl_collectives={total} by_op="
              + ",".join(f"{k}:{v}" for k, v in sorted(by_op.items())), flush=True)
    bad = [x for x in losses if not math.isfinite(x)]
    if bad:
        print(f"ddp_train: rank {rank} non-finite loss {bad}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
