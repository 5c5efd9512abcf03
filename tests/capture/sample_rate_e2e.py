"""capture_sample_rate: MERIDIAN_GPU_SAMPLE_HZ and MERIDIAN_GPU_SAMPLE_STEADY_HZ, the NVML
sampler's rates, from the real libmeridian.so through a real meridiand, no GPU (the
stand-in CUDA driver and NVML of capture_env_e2e: fake_libcuda.c's device 2, fake_nvml.c).

One rank per case, each with its own meridiand and database. The driver has no CUPTI, so
CUPTI never traces in it and MERIDIAN_GPU_SAMPLE_STEADY_HZ is the rate that applies
(MERIDIAN_GPU_SAMPLE_HZ applies while CUPTI traces: capture_sample_tiers, with a fake
CUPTI, tests both rates across a window):
- HZ=0 (STEADY_HZ unset: its default never exceeds HZ): the GPU's identity is still read
  (its gpu2.* fingerprint keys are stored) but no reading is taken (the driver waits 300 ms
  after the identity and fails on any) and the database has no gpu_samples row;
- HZ=abc (not a number) and HZ=101 (over the cap): one line on stderr naming the variable,
  the range and what stays off, and no reading; the identity and the job go on; HZ=abc
  without the stand-in NVML: the same line (a bad value is said whether or not anything
  would sample; on a machine with a real libnvidia-ml.so.1 NVML loads there too, and this
  case passes under either order of the agent's checks: it tells them apart where no NVML
  is installed, as in CI);
- STEADY_HZ=1x, HZ=50: said once the same way, and no reading (HZ=50 does not apply);
- STEADY_HZ=50, HZ=0: the driver waits for 5 readings; at least 5 gpu_samples rows of
  device 2, each with the stand-in's readings (SM 1755 MHz, power 400000 mW, 90%
  utilisation), their median spacing under 50 ms (20 ms at 50 Hz: the sampler sleeps to
  absolute deadlines, so the spacing does not drift with load);
- STEADY_HZ unset (1 Hz), HZ=50: three readings (the first at once) span two periods, so
  one gap is at least 0.8 s whatever the load (the sampler is never early).
"""
import argparse
import os
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import itest  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--meridiand", required=True)
p.add_argument("--driver", required=True)
p.add_argument("--agent", required=True)
p.add_argument("--fake-libcuda", required=True)
p.add_argument("--fake-nvml-dir", required=True)
p.add_argument("--workdir", default=None)
p.add_argument("--keep", action="store_true")
args = p.parse_args()


def run_case(name, hz, want_samples, nvml=True, extra=None):
    """Runs one rank with MERIDIAN_GPU_SAMPLE_HZ=hz (without the stand-in NVML when nvml is
    False; extra: more variables); returns (driver output, db rows)."""
    wd = itest.Workdir(args, "capture_sample_rate_" + name)
    d = itest.Daemon(args.meridiand, wd, run_id="rate-" + name)
    d.start()
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "HOME") or k.endswith("SAN_OPTIONS")}
    env.update(d.agent_env())
    env.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
                "MERIDIAN_GPU_SAMPLE_HZ": hz, "ENV_DRIVER_SAMPLES": str(want_samples)})
    env.update(extra or {})
    if nvml:
        env["LD_LIBRARY_PATH"] = os.path.abspath(args.fake_nvml_dir)
    else:
        env["ENV_DRIVER_NO_NVML"] = "1"
    rc, out = itest.run([args.driver, os.path.abspath(args.agent),
                         os.path.abspath(args.fake_libcuda)], 90, name + ": the driver", env)
    if rc != 0:
        itest.fail("%s: the driver exited %d" % (name, rc))
    if d.stop() != 0:
        itest.fail("%s: meridiand did not exit 0" % name)
    db = sqlite3.connect(d.db)
    samples = db.execute("SELECT device, sm_clock_mhz, power_mw, utilization_pct, host_ns "
                         "FROM gpu_samples ORDER BY host_ns").fetchall()
    keys = {k for (k,) in db.execute("SELECT s.value FROM env_records e "
                                     "JOIN strings s ON s.id = e.key_id")}
    db.close()
    if nvml and "gpu2.name" not in keys:
        itest.fail("%s: the GPU's identity (gpu2.name) was not stored: %r" % (name, keys))
    wd.done(True)
    return out, samples


for name, hz, nvml in (("off", "0", True), ("word", "abc", True), ("over", "101", True),
                       ("word_no_nvml", "abc", False)):
    out, samples = run_case(name, hz, 0, nvml)
    if samples:
        itest.fail("%s: MERIDIAN_GPU_SAMPLE_HZ=%s stored %d gpu_samples rows, want none"
                   % (name, hz, len(samples)))
    said = [l for l in out.splitlines() if "MERIDIAN_GPU_SAMPLE_HZ" in l]
    if hz == "0" and said:
        itest.fail("off: 0 is a valid rate, yet the agent said %r" % said)
    if hz != "0" and (len(said) != 1 or "MERIDIAN_GPU_SAMPLE_HZ=%s" % hz not in said[0]
                      or "0..100" not in said[0] or "stay off" not in said[0]):
        itest.fail("%s: want one line naming MERIDIAN_GPU_SAMPLE_HZ=%s, its range and what "
                   "stays off, got %r" % (name, hz, said))
out, samples = run_case("steady_word", "50", 0, extra={"MERIDIAN_GPU_SAMPLE_STEADY_HZ": "1x"})
said = [l for l in out.splitlines() if "MERIDIAN_GPU_SAMPLE_STEADY_HZ" in l]
if samples or len(said) != 1 or "=1x" not in said[0] or "0..100" not in said[0]:
    itest.fail("steady_word: want no reading and one line naming MERIDIAN_GPU_SAMPLE_STEADY_HZ=1x "
               "and its range, got %d rows, %r" % (len(samples), said))
out, samples = run_case("fifty", "0", 5, extra={"MERIDIAN_GPU_SAMPLE_STEADY_HZ": "50"})
if len(samples) < 5 or any(s[:4] != (2, 1755, 400000, 90) for s in samples):
    itest.fail("fifty: want >= 5 gpu_samples rows (2, 1755, 400000, 90), got %r" % samples[:8])
gaps = sorted(b[4] - a[4] for a, b in zip(samples, samples[1:]))
spacing_ms = gaps[len(gaps) // 2] / 1e6
if not 0 < spacing_ms < 50:
    itest.fail("fifty: readings %.1f ms apart (median), want 20 ms at 50 Hz (< 50)" % spacing_ms)
out, samples = run_case("steady_default", "50", 3)
gaps = [b[4] - a[4] for a, b in zip(samples, samples[1:])]
if len(samples) < 3 or max(gaps) < 800e6:
    itest.fail("steady_default: want >= 3 readings with a gap of ~1 s (1 Hz while CUPTI does "
               "not trace, not HZ=50), got %d, gaps %r ns" % (len(samples), gaps))
itest.log("ok: rates 0 identify without readings; bad rates said once and kept off; "
          "STEADY_HZ=50 stored readings %.1f ms apart; by default 1 Hz without CUPTI (largest "
          "gap %.0f ms)" % (spacing_ms, max(gaps) / 1e6))
