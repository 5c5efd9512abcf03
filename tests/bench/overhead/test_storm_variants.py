#!/usr/bin/env python3
"""test_storm_variants.py: CI test of storm_variants.py (the storm diagnostic) without a GPU.

A stand-in kernel_storm prints a per-launch time that depends on how it was started: 4.0 us
plain, 6.0 under the bare consumer (CUDA_INJECTION64_PATH), 5.5 under the stand-in
`meridian profile` (which sets FAKE_MERIDIAN=1), 0.5 less when it was pinned (--pin-cpu 0)
and runs under taskset away from CPU 0. The table must show exactly the ratios those imply
(pinned variants against pinned plain/bare), the agent's options must reach the meridian
variants, a variant whose agent sent nothing must be refused, and unknown variants too.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STORM = r'''#!/bin/sh
us=4.0
[ -n "$CUDA_INJECTION64_PATH" ] && us=6.0
[ -n "$FAKE_MERIDIAN" ] && us=5.5
case " $* " in *" --pin-cpu 0 "*)
    case $(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status) in
    0 | 0-* | 0,*) echo "pinned run may use CPU 0: no taskset around it" >&2; exit 3 ;;
    esac
    us=$(awk -v u="$us" 'BEGIN { printf "%.1f", u - 0.5 }') ;;
esac
[ "$MERIDIAN_CUPTI_PACE" = 0 ] && us=$(awk -v u="$us" 'BEGIN { printf "%.1f", u + 1 }')
echo "kernel_storm: launches=5 wall_s=1 us_per_launch=$us stalls=2 stall_ms=0.300 max_launch_us=60.0"
'''
MERIDIAN = r'''#!/bin/sh
while [ "$1" != "--" ]; do shift; done; shift
FAKE_MERIDIAN=1 "$@"; rc=$?
sent=10; [ -n "$FAKE_SEND_NOTHING" ] && sent=0
lost=0; [ "$MERIDIAN_CUPTI_PACE" = 0 ] && lost=7
echo "meridian: rank 0: sent $sent events in 1 batches; lost $lost" >&2
exit $rc
'''


def main():
    fails = []
    with tempfile.TemporaryDirectory() as d:
        for name, text in (("storm", STORM), ("meridian", MERIDIAN)):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(d, name), 0o755)
        base = [sys.executable, os.path.join(HERE, "storm_variants.py"), "--storm",
                os.path.join(d, "storm"), "--bare", "/nonexistent/libbare.so", "--meridian",
                os.path.join(d, "meridian"), "--agent-lib", "/nonexistent/libmeridian.so",
                "--rounds", "3", "--work", d]
        variants = ["plain", "bare", "meridian", "meridian_nopace"]
        sys.path.insert(0, HERE)
        import storm_variants
        if storm_variants.cpus_off_core0():  # pinning needs a core besides the launcher's
            variants += ["plain_pin", "bare_pin", "meridian_pin"]
        p = subprocess.run(base + ["--variants", ",".join(variants), "--out", d],
                           capture_output=True, text=True, timeout=120)
        rows = {}
        for line in p.stdout.splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells and cells[0] in variants:
                rows[cells[0]] = cells
        want = {"plain": ("4.000", "-", "0"), "bare": ("6.000", "-", "0"),
                "meridian": ("5.500", "0.750", "0"), "meridian_nopace": ("6.500", "1.250", "7"),
                "plain_pin": ("3.500", "-", "0"), "bare_pin": ("5.500", "-", "0"),
                "meridian_pin": ("5.000", "0.750", "0")}
        if p.returncode != 0:
            fails.append(f"exit {p.returncode}: {p.stderr[-800:]}")
        for v, (us, ratio, lost) in ((v, want[v]) for v in variants):
            got = rows.get(v)
            if not got or got[1] != us or got[3] != ratio or got[6] != lost or got[7] != "3" \
                    or got[8] != ratio:  # no noise: the paired median is the same ratio
                fails.append(f"{v}: row {got}, want us {us}, ratio {ratio}, lost {lost}, n 3")
        with open(os.path.join(d, "storm_variants.csv")) as f:
            lines = f.read().splitlines()
        if len(lines) != 1 + 3 * len(variants) or not lines[0].startswith("round,variant"):
            fails.append(f"csv: {len(lines)} lines, want {1 + 3 * len(variants)}")
        # an agent that sent nothing measured nothing: its runs are refused, exit 1
        env = dict(os.environ, FAKE_SEND_NOTHING="1")
        p = subprocess.run(base + ["--variants", "plain,bare,meridian"], capture_output=True,
                           text=True, timeout=60, env=env)
        if p.returncode != 1 or "sent nothing" not in p.stderr:
            fails.append(f"silent agent: exit {p.returncode}, stderr {p.stderr[-300:]!r}")
        p = subprocess.run(base + ["--variants", "plain,bogus"], capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 2 or "unknown variants" not in p.stderr:
            fails.append(f"unknown variant: exit {p.returncode}, stderr {p.stderr[-300:]!r}")
    if fails:
        print("test_storm_variants: FAILED\n  " + "\n  ".join(fails))
        return 1
    print("test_storm_variants: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
