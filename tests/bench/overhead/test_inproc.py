#!/usr/bin/env python3
"""test_inproc.py: CI test of inproc.py (the in-process traced-step benchmark) without a GPU.

A stand-in kernel_storm prints per-step times that depend on how it was started: 1000 us a
step, 1% more from step steps/2 on (the drift every run has); with --bare-at S, 1200 us
(plus the drift) from step S on; under the stand-in `meridian profile` (FAKE_MERIDIAN=1) 1010
us outside windows, 1300 us inside, 5000 us on each window's attach step and 3000 us on the
two detach steps after it. The stand-in meridian records the windows it ran in a
window_records table at its -o path, as the real store does (FAKE_SHIFT moves them one step
later). The benchmark must report exactly the figures those imply: meridian +28.71%, bare
+20.00% (the drift taken out), their ratio 1.4356, steady-outside/plain 1.0100; with shifted
windows it must say so and classify by the recorded ones (same figures); a bad window
specification is refused.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STORM = r'''#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
steps = int(args[args.index("--steps") + 1])
bare_at = int(args[args.index("--bare-at") + 1]) if "--bare-at" in args else -1
wins = []
if os.environ.get("FAKE_MERIDIAN"):
    length, rest = os.environ["MERIDIAN_WINDOWS"].split("/")
    period, offset = rest.split("@")
    shift = int(os.environ.get("FAKE_SHIFT", "0"))
    wins = [(s, s + int(length) - 1) for s in range(int(offset) + shift, steps, int(period))]
out = []
for i in range(steps):
    us = 1000.0
    if bare_at >= 0 and i >= bare_at:
        us = 1200.0
    if os.environ.get("FAKE_MERIDIAN"):
        us = 1010.0
        for f, l in wins:
            if i == f:
                us = 5000.0
            elif f < i <= l:
                us = 1300.0
            elif l < i <= l + 2:
                us = 3000.0
    if not os.environ.get("FAKE_MERIDIAN") and i >= steps // 2:
        us *= 1.01
    out.append("%.1f" % us)
print("kernel_storm: launches=%d wall_s=1 us_per_launch=1 steps=%d launches_per_step=1000"
      % (steps * 1000, steps))
print("kernel_storm: step_us=" + ",".join(out))
if wins:
    with open(os.environ["FAKE_WINDOWS_OUT"], "w") as f:
        f.write(" ".join("%d-%d" % w for w in wins))
'''
MERIDIAN = r'''#!/usr/bin/env python3
import os, sqlite3, subprocess, sys
args = sys.argv[1:]
db = args[args.index("-o") + 1]
work = args[args.index("--") + 1:]
env = dict(os.environ, FAKE_MERIDIAN="1", FAKE_WINDOWS_OUT=db + ".w")
rc = subprocess.call(work, env=env)
con = sqlite3.connect(db)
con.execute("CREATE TABLE window_records (rank INTEGER, first_step INTEGER, last_step INTEGER)")
for w in open(db + ".w").read().split():
    f, l = w.split("-")
    con.execute("INSERT INTO window_records VALUES (0, ?, ?)", (int(f), int(l)))
con.commit()
sys.exit(rc)
'''


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


def expect_figures(out):
    want = ["meridian + 28.71%  bare + 20.00%  ratio 1.436  steady-outside/plain 1.0100",
            "added(meridian)/added(bare)                    1.4356",
            "added by meridian's traced step                0.2871",
            "added by the bare consumer's                   0.2000"]
    for w in want:
        if w.replace("+ ", "+") not in out.replace("+ ", "+"):
            fail(f"missing {w!r}", out)
    if out.count("storm        round") != 3:
        fail("want 3 rounds reported", out)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "tests/workloads"))
        for path, text in ((os.path.join(tmp, "tests/workloads/kernel_storm"), STORM),
                           (os.path.join(tmp, "meridian"), MERIDIAN)):
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)
        rc, out = run(tmp, {})
        if rc != 0:
            fail(f"exit {rc}", out)
        expect_figures(out)
        if "differ from" in out:
            fail("windows reported as differing when they did not", out)
        # the windows as recorded, not as specified, classify the steps
        os.unlink(os.path.join(tmp, "r.csv"))
        rc, out = run(tmp, {"FAKE_SHIFT": "1"})
        if rc != 0:
            fail(f"exit {rc} with shifted windows", out)
        if "recorded windows [(11, 30)" not in out:
            fail("shifted windows not reported", out)
        expect_figures(out)
        # report-only reads the CSV back to the same figures
        rc, out = run(tmp, {}, "--report-only")
        if rc != 0:
            fail(f"exit {rc} with --report-only", out)
        expect_figures(out)
        rc, out = run(tmp, {}, "--windows", "100/20@0")
        if rc == 0 or "LENGTH < PERIOD" not in out:
            fail("a window longer than its period was accepted", out)
    print("test_inproc: ok")


if __name__ == "__main__":
    main()
