#!/usr/bin/env python3
"""test_ddp_count.py: CI test of ddp_train.py's collective count (no torch, no GPU).

ddp_train.py --count-collectives reads PyTorch's flight recorder back through
torch._C._distributed_c10d._dump_nccl_trace and prints `nccl_collectives=N`, the number
the GPU capture check then expects meridian to have stored per rank. This test hands
count_collectives() a stand-in torch whose dump is a pickled record shaped like the
flight recorder's, and checks the count: each collective once, point-to-point left out,
a coalesced entry counted per tensor, and an empty or full record refused (the count
would be wrong, so the run must fail rather than print it). Also --thread-cpu-at's
reading of /proc (thread_cpu): a thread spinning between two snapshots is charged what its
own CPU clock says (within /proc's clock ticks), the sleeping main thread less, and a
malformed step list is refused.
"""
import os
import pickle
import argparse
import hashlib
import sys
import threading
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_train  # noqa: E402  (imports no torch at module level)


def fake_torch(entries, kwargs_ok=True):
    def dump(*args, **kwargs):
        if kwargs and not kwargs_ok:
            raise TypeError("no keyword arguments")
        return pickle.dumps({"version": "2.x", "entries": entries})
    c10d = types.SimpleNamespace(_dump_nccl_trace=dump)
    return types.SimpleNamespace(_C=types.SimpleNamespace(_distributed_c10d=c10d))


def entry(name, p2p=False, sizes=([4],)):
    return {"profiling_name": "nccl:" + name, "is_p2p": p2p, "input_sizes": list(sizes)}


failures = []


def expect(label, got, want):
    if got != want:
        failures.append(f"{label}: got {got!r}, want {want!r}")


# DDP's own pattern: parameter shapes, the start-up broadcast, bucket all-reduces, barriers
entries = ([entry("_allgather_base"), entry("broadcast")] +
           [entry("all_reduce") for _ in range(50)] +
           [entry("broadcast"), entry("broadcast"), entry("all_reduce_barrier"),
            entry("all_reduce_barrier")])
total, by_op = ddp_train.count_collectives(fake_torch(entries))
expect("ddp pattern total", total, 56)
expect("ddp pattern by op", by_op, {"_allgather_base": 1, "broadcast": 3, "all_reduce": 50,
                                    "all_reduce_barrier": 2})

# point-to-point is not a collective; a coalesced group is one NCCL call per tensor
mixed = [entry("send", p2p=True), entry("recv", p2p=True), entry("all_reduce"),
         entry("coalesced", sizes=([1], [2], [3]))]
expect("p2p and coalesced", ddp_train.count_collectives(fake_torch(mixed))[0], 4)

# an older dump without keyword arguments is still read
expect("positional dump", ddp_train.count_collectives(fake_torch(mixed, kwargs_ok=False))[0], 4)

for label, bad in (("empty record", []),
                   ("full record", [entry("all_reduce")] * ddp_train.FR_ENTRIES)):
    try:
        ddp_train.count_collectives(fake_torch(bad))
        failures.append(f"{label}: counted, should have been refused")
    except RuntimeError as e:
        print(f"ok: {label} refused: {e}")

# thread_cpu: a spinning thread's CPU time between two snapshots, against that thread's own
# CPU clock read around them. The spinner is blocked while the clock and the snapshots are
# read and spins a fixed 50 ms of its own CPU in between, so neither a busy machine (which
# gives it less CPU a second) nor the main thread being descheduled between a clock read
# and a snapshot changes what the two should agree on.
ready, go, done, stop = (threading.Event() for _ in range(4))


def spin():  # hashing a large buffer holds no GIL: the snapshots' reads are not held up
    block = bytes(1 << 20)
    ready.set()
    go.wait()
    c = time.thread_time()
    while time.thread_time() - c < 0.05:
        hashlib.sha256(block).digest()
    done.set()
    stop.wait()  # alive (in /proc) for the second snapshot


t = threading.Thread(target=spin, name="spinner")
t.start()
ready.wait(30)
clock = time.pthread_getcpuclockid(t.ident)
c0 = time.clock_gettime(clock)
before = ddp_train.thread_cpu()
go.set()
done.wait(60)
after = ddp_train.thread_cpu()
c1 = time.clock_gettime(clock)
stop.set()
t.join()
own_ms = (c1 - c0) * 1e3  # the spinner's CPU over an interval that holds both snapshots
main_tid, spin_tid = threading.get_native_id(), t.native_id
if spin_tid not in before or spin_tid not in after or main_tid not in after:
    failures.append(f"thread_cpu: threads {sorted(before)} {sorted(after)}")
else:
    spun = after[spin_tid][1] - before[spin_tid][1]
    slept = after[main_tid][1] - before[main_tid][1]
    tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
    # /proc counts utime and stime in clock ticks: within two ticks of the spinner's own clock
    if not own_ms - 2 * tick_ms <= spun <= own_ms + 2 * tick_ms or slept > spun:
        failures.append(f"thread_cpu: the spinner had {spun} ms by /proc, {own_ms:.1f} ms by "
                        f"its own clock; the sleeper {slept} ms")
    lines = ddp_train.thread_cpu_lines(0, "gpt2", [(20, before), (290, after)], main_tid)
    if len(lines) != 1 or f"/{spin_tid}={spun:.0f}" not in lines[0]:
        failures.append(f"thread_cpu_lines: {lines}")
for bad in ("20,10", "a,b", "-1,5", "5,5"):
    try:
        ddp_train.parse_steps(bad)
        failures.append(f"parse_steps({bad!r}) accepted")
    except argparse.ArgumentTypeError:
        pass
expect("parse_steps", ddp_train.parse_steps("20,290,330,600"), (20, 290, 330, 600))
# the positive control's busy wait: at least what was asked, on this thread's CPU (a sleep
# would not hold the GIL nor show in cpu_ms)
c0 = time.thread_time()
waited = ddp_train.step_load(20000)
spun_ms = (time.thread_time() - c0) * 1e3
if waited < 20000 or spun_ms < 0.5:  # a sleep: ~0.05 ms on the CPU
    failures.append(f"step_load(20000): waited {waited:.0f} us, {spun_ms:.1f} ms on the CPU")
for bad in ("-1", "1e6"):
    try:
        ddp_train.parse_args(["--step-load-us", bad])
        failures.append(f"--step-load-us {bad} accepted")
    except SystemExit:
        pass
probe = ddp_train.speed_probe()
if not 0.01 < probe < 1000:
    failures.append(f"speed_probe: {probe} ms")

if failures:
    print("test_ddp_count: FAILED\n  " + "\n  ".join(failures))
    sys.exit(1)
print("test_ddp_count: ok")
