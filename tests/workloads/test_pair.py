#!/usr/bin/env python3
"""test_pair.py: CI test of ddp_train.py's --pair-dir (class Pair), with real processes.

Where it sits: tests/workloads, registered with CTest as workloads_pair; needs only python3
(ddp_train imports no torch at module level). The overhead benchmark's concurrent rounds
(tests/bench/overhead/tiers.py --concurrent) run two ddp_train processes side by side on one
GPU; Pair makes them begin each measured phase together and keeps the one that ends first
busy until the other has. Checked here:
  - meet: a process that arrives first leaves only once the later one has arrived (its
    file's time), files in the directory that are no arrival notwithstanding;
  - hold: the process that arrives first runs its filler until the later one arrives, the
    later one runs none;
  - a partner that ends without arriving stops the waiting process at once with a message
    naming it (not after the timeout);
  - a partner that never starts: the timeout's message; the launcher's abandon file stops a
    meeting at once;
  - turns (--pair-turns): blocks alternate in slot order and never overlap, the second slot
    waiting even when it starts first, and each counts every wait; a partner gone during
    the wait stops it at once;
  - the last one that arrives and ends between a waiter's two looks ends the wait (not a
    crash); the check for ended processes runs every check_s, not on every poll.
"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ddp_train  # noqa: E402  (imports no torch at module level)

# one side of a pair: meets at "a", sleeps, then holds at "b" counting its filler steps;
# prints when it left "a" (wall clock, as the arrival files' times) and how many filler
# steps it ran
SIDE = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import ddp_train
pair = ddp_train.Pair(sys.argv[2], 2, timeout_s=float(sys.argv[5]))
time.sleep(float(sys.argv[3]))
pair.meet("a")
left = time.time()
time.sleep(float(sys.argv[4]))
ran = pair.hold("b", lambda: time.sleep(0.01))
print(f"left_a={left:.6f} filler={ran}", flush=True)
"""


# one side taking turns (Pair.take_turns, as ddp_train's measured loop): slot S runs STEPS
# steps of 0.02 s in blocks of K, appending "slot step start end" (wall clock) to DIR/log;
# prints the seconds take_turns says it waited
TURNS = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import ddp_train
d, slot, steps, k = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
pair = ddp_train.Pair(d, 2, timeout_s=30)
def body(i):
    t0 = time.time()
    time.sleep(0.02)
    with open(os.path.join(d, "log"), "a") as f:
        f.write(f"{slot} {i} {t0:.6f} {time.time():.6f}\n")
print(f"waited={pair.take_turns('m', steps, k, slot, body):.3f}", flush=True)
"""


def side(d, delay_s, work_s, timeout_s=30):
    return subprocess.Popen([sys.executable, "-c", SIDE, HERE, d, str(delay_s), str(work_s),
                             str(timeout_s)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def turns_side(d, slot, steps, k):
    return subprocess.Popen([sys.executable, "-c", TURNS, HERE, d, str(slot), str(steps),
                             str(k)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def arrival(d, name, pid):
    return os.stat(os.path.join(d, f"{name}.{pid}")).st_mtime


def main():
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        # 1. early arrives and works 0.1 s; late starts 0.5 s after early's arrival and
        # works 1 s; files that are no arrival lie in the directory too
        d = os.path.join(tmp, "p1")
        os.makedirs(d)
        for stray in ("README", "notes.txt", "a.", ".5"):
            open(os.path.join(d, stray), "w").close()
        early = side(d, 0, 0.1)
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(d, f"a.{early.pid}")) and \
                time.monotonic() < deadline and early.poll() is None:
            time.sleep(0.01)
        time.sleep(0.5)
        late = side(d, 0, 1.0)
        outs = [p.communicate(timeout=60) for p in (early, late)]
        if early.returncode or late.returncode:
            problems.append(f"meet/hold: exit {early.returncode} {late.returncode}: {outs}")
        else:
            got = [dict(kv.split("=") for kv in o[0].split()) for o in outs]
            # early left "a" only once late had arrived there (both wall clock)
            waited = float(got[0]["left_a"]) - arrival(d, "a", late.pid)
            if waited < -0.01:
                problems.append(f"meet: early left 'a' {-waited:.3f} s before late arrived")
            # early holds at "b" for late's extra 0.9 s of work in 0.01 s fillers; late
            # arrives last and runs none
            if not int(got[0]["filler"]) >= 5 or got[1]["filler"] != "0":
                problems.append(f"hold: filler steps early {got[0]['filler']}, "
                                f"late {got[1]['filler']}")
        # 2. the partner arrives at "a" then dies before "b": the other stops at once
        d = os.path.join(tmp, "p2")
        waiting = side(d, 0, 0.0, timeout_s=60)
        t0 = time.monotonic()
        crasher = subprocess.Popen([sys.executable, "-c",
                                    f"import sys; sys.path.insert(0, {HERE!r}); import "
                                    f"ddp_train; ddp_train.Pair({d!r}, 2).meet('a')"])
        crasher.wait(timeout=60)
        out, err = waiting.communicate(timeout=60)
        took = time.monotonic() - t0
        if waiting.returncode == 0 or f"process {crasher.pid} ended while this one waited " \
                "for all at b" not in err or took > 20:
            problems.append(f"a partner gone: exit {waiting.returncode} after {took:.1f} s: "
                            f"{err.strip()[-300:]}")
        # 2b. the launcher's abandon file (a partner failed before it could arrive): stops
        # a meeting at once
        d = os.path.join(tmp, "p2b")
        os.makedirs(d)
        waiting = side(d, 0, 0.0, timeout_s=60)
        time.sleep(0.3)
        open(os.path.join(d, ddp_train.ABANDONED), "w").close()
        t0 = time.monotonic()
        _, err = waiting.communicate(timeout=60)
        if waiting.returncode == 0 or "another process of this set failed" not in err or \
                time.monotonic() - t0 > 20:
            problems.append(f"abandoned: exit {waiting.returncode}: {err.strip()[-300:]}")
        # 3. nobody else ever comes: the timeout's message
        d = os.path.join(tmp, "p3")
        lone = ddp_train.Pair(d, 2, timeout_s=0.3)
        try:
            lone.meet("a")
            problems.append("a lone process passed meet")
        except SystemExit as e:
            if "waited for all at a for 0 s (1 of 2 there)" not in str(e) or \
                    "is the other process running" not in str(e):
                problems.append(f"lone timeout message: {e}")
        # 4. turns: slot 1 starts first and still waits for slot 0's block; blocks
        # alternate and never overlap, a last block shorter than K included (7 steps, K=3);
        # a run with fewer steps (6 against 2, K=1: a torch run's 200 against 600) keeps
        # passing its turns instead of holding the other up
        for name, (steps1, steps0, k), want in (
                ("p4", (7, 7, 3), [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3),
                                   (0, 4), (0, 5), (1, 3), (1, 4), (1, 5), (0, 6), (1, 6)]),
                ("p4b", (6, 2, 1), [(0, 0), (1, 0), (0, 1), (1, 1), (1, 2), (1, 3), (1, 4),
                                    (1, 5)])):
            d = os.path.join(tmp, name)
            os.makedirs(d)
            second = turns_side(d, 1, steps1, k)
            time.sleep(0.3)
            first = turns_side(d, 0, steps0, k)
            outs = [p.communicate(timeout=60) for p in (second, first)]
            try:
                with open(os.path.join(d, "log")) as f:
                    log = [line.split() for line in f]
            except OSError:
                log = []
            order = [(int(x[0]), int(x[1])) for x in log]
            spans = sorted((float(x[2]), float(x[3])) for x in log)
            waited = [float(o[0].strip().rpartition("=")[2] or 0) for o in outs]
            # each counts every wait: at least the other's steps that ran before its own
            # last step began (slot 1's 0.3 s head start is on top; slot 0 has none, so a
            # take_turns that kept only its last wait falls short there)
            need = []
            for slot in (1, 0):
                last = max((float(x[2]) for x in log if x[0] == str(slot)), default=0.0)
                need.append(sum(float(x[3]) - float(x[2]) for x in log
                                if x[0] != str(slot) and float(x[3]) <= last))
            if second.returncode or first.returncode or order != want or \
                    any(b[0] < a[1] for a, b in zip(spans, spans[1:])) or \
                    any(w < 0.9 * n for w, n in zip(waited, need)):
                problems.append(f"turns {steps1}/{steps0} K={k}: exit {second.returncode} "
                                f"{first.returncode}, order {order}, waited {waited} (at least "
                                f"{need}), spans "
                                f"{spans}: {outs}")
        # 5. a partner gone while this one waits for its turn: stops at once, naming it
        d = os.path.join(tmp, "p5")
        os.makedirs(d)
        gone = subprocess.Popen([sys.executable, "-c",
                                 f"import sys; sys.path.insert(0, {HERE!r}); import ddp_train; "
                                 f"ddp_train.Pair({d!r}, 2).meet('m-start')"])
        waiter = subprocess.Popen([sys.executable, "-c",
                                   f"import sys; sys.path.insert(0, {HERE!r}); import "
                                   f"ddp_train; p = ddp_train.Pair({d!r}, 2, timeout_s=60); "
                                   f"p.meet('m-start'); p.wait_turn('m', 0, 1)"],
                                  stderr=subprocess.PIPE, text=True)
        gone.wait(timeout=60)
        t0 = time.monotonic()
        _, err = waiter.communicate(timeout=90)
        if waiter.returncode == 0 or f"process {gone.pid} ended while this one waited for " \
                "turn 1 of m" not in err or time.monotonic() - t0 > 20:
            problems.append(f"turns, a partner gone: exit {waiter.returncode}: {err[-300:]}")
        # 6. the last one arrives and ends between the waiter's two looks (ready, then the
        # check for ended processes): the wait is over, not a crash. A stand-in ready()
        # says "not yet" once, then "all here"; an ended process's arrival lies in DIR
        d = os.path.join(tmp, "p6")
        os.makedirs(d)
        ended = subprocess.Popen([sys.executable, "-c", "pass"])
        ended.wait(timeout=60)
        open(os.path.join(d, f"x.{ended.pid}"), "w").close()
        looks = []
        try:
            ddp_train.Pair(d, 2, timeout_s=5)._wait(lambda: looks.append(1) or len(looks) > 1,
                                                     lambda: None, "for all at x", lambda: "")
        except SystemExit as e:
            problems.append(f"arrived, then ended: {e}")
        # 7. the check for ended processes runs every check_s, not on every poll (each
        # lists DIR and signals every PID): at most 0.3 / 0.05 + 1 in 0.3 s of 1 ms polls
        checks = []

        class Counted(ddp_train.Pair):
            def _stop_if_gone(self, what):
                checks.append(what)
        try:
            Counted(d, 2, timeout_s=0.3, poll_s=0.001)._wait(
                lambda: False, lambda: time.sleep(0.001), "for y", lambda: "")
        except SystemExit:
            pass
        if not 1 <= len(checks) <= 8:
            problems.append(f"{len(checks)} checks for ended processes in 0.3 s")
    # 8. the option: --pair-n below 2 is refused
    for bad in (["--pair-dir", "/tmp/x", "--pair-n", "1"], ["--pair-turns", "5"],
                ["--pair-dir", "/tmp/x", "--pair-turns", "5", "--pair-slot", "2"]):
        try:
            ddp_train.parse_args(bad)
            problems.append(f"{' '.join(bad)} accepted")
        except SystemExit:
            pass
    if problems:
        print("test_pair: FAILED\n  " + "\n  ".join(problems))
        return 1
    print("test_pair: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
