#!/usr/bin/env python3
"""check_host_clock.py: NCCL's GPU timer on the host clock without CUPTI (steady tier).

Where it sits: run on the GPU host (tests/gpu/run_on_gpu_host.sh, stage `hostclock`) on the
database of `meridian profile` over ref_workload (2 ranks, 2 GPUs) with MERIDIAN_TRACE=steady
and one window of steps, so that CUPTI sees the NCCL kernels of the window only. What CI
cannot show (the recorded captures predate these parts of the agent):

  1. devices without CUPTI: every (rank, device) of nccl_ops is in `gpus` with a name and a
     PCI bus id (the agent asks the loaded CUDA driver at NCCL's init), and has NVML
     readings in `gpu_samples` unless --no-nvml;
  2. the agent's host-time brackets: gpu_clock_samples on every GPU, at least one per op
     with channels for --min-sample-share of the ops (start and stop callback samples are
     told apart by their GPU time: a channel's gpu_start or gpu_end);
  3. every GPU has a gpu_timer_models row whose method includes the host evidence;
  4. the brackets are true: inside the window, with the CUPTI-calibrated model of the same
     database (method kernel+host-bracket-v1, bound B), each sample's GPU time maps inside
     [host_ns - uncertainty, host_ns + uncertainty] widened by B;
  5. with --meridian: a copy of the database without CUPTI's kernel records, finalized
     again, maps every window channel time within its own bound plus B of the model with
     CUPTI.

It also prints what decides the host-only bound: the lag of the start and of the stop
callbacks after the GPU time (p1, median) and how long kernels waited after their launch:
the tighter callback says which bracket carries the upper side.

Prints one line per check and `check_host_clock: N/N checks passed`; exit 0 when all pass.
Usage: check_host_clock.py --db DB [--meridian PATH] [--no-nvml] [--min-sample-share 0.9]
"""
import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile


def gmap(model, g):
    """aggregator/SCHEMA.md's evaluation: gpu + round((slope - 1) * gpu) + intercept."""
    return g + round((model[0] - 1.0) * g) + model[1]


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


def models_of(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    m = {(r, d): (s, i, b, meth) for r, d, s, i, b, meth in db.execute(
        "SELECT rank, device, slope, intercept_ns, error_bound_ns, method FROM gpu_timer_models")}
    db.close()
    return m


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--meridian", help="the CLI, to refit without CUPTI's kernels (check 5)")
    ap.add_argument("--no-nvml", action="store_true", help="do not require gpu_samples")
    ap.add_argument("--min-sample-share", type=float, default=0.9)
    a = ap.parse_args(argv)
    db = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    q = db.execute
    results = []

    def check(name, ok, detail):
        results.append(bool(ok))
        print(f"check_host_clock: {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)

    gpus = sorted(set(q("SELECT DISTINCT rank, COALESCE(device, 0) FROM nccl_ops")))
    named = {(r, d): (n, p) for r, d, n, p in q("SELECT rank, device, name, pci_bus_id FROM gpus")}
    missing = [g for g in gpus if not (named.get(g, ("", ""))[0] and named[g][1])]
    check("devices", gpus and not missing, f"GPUs with NCCL ops {gpus}, without a named gpus row"
          f" {missing}")
    if not a.no_nvml:
        nv = set(q("SELECT DISTINCT rank, device FROM gpu_samples"))
        check("NVML readings", all(g in nv for g in gpus), f"gpu_samples cover {sorted(nv)}")

    # 2. samples, told apart by the channel GPU time they carry
    starts, ends = {}, {}
    for r, op, gs, ge in q("SELECT rank, op_id, gpu_start, gpu_end FROM nccl_channels"
                           " WHERE gpu_start > 0"):
        starts.setdefault((r, gs), op)
        ends.setdefault((r, ge), op)
    ops_with_ch = {(r, op) for (r, _), op in starts.items()}
    samples = q("SELECT rank, device, host_ns, gpu_ns, uncertainty_ns FROM gpu_clock_samples"
                ).fetchall()
    sampled_ops = set()
    for r, _, _, g, _ in samples:
        op = starts.get((r, g), ends.get((r, g)))
        if op is not None:
            sampled_ops.add((r, op))
    share = len(sampled_ops) / max(1, len(ops_with_ch))
    per_gpu = {g: sum(1 for s in samples if (s[0], s[1]) == g) for g in gpus}
    check("host-time samples", all(per_gpu.values()) and share >= a.min_sample_share,
          f"{len(samples)} samples {per_gpu}, {len(sampled_ops)} of {len(ops_with_ch)} ops"
          f" with channels ({share:.2f}, want >= {a.min_sample_share})")

    # 3. models
    full = models_of(a.db)
    check("models", all(g in full and "host" in full[g][3] for g in gpus),
          "; ".join(f"{g}: {full.get(g, ('-', '-', '-', 'none'))[3]}, bound "
                    f"{full.get(g, (0, 0, 0))[2]} ns" for g in gpus))

    # 4. the samples are true brackets, against the CUPTI-calibrated model
    calibrated = {g for g in gpus if g in full and full[g][3].startswith("kernel+host")}
    bad, lag_s, lag_e, waits = [], [], [], []
    for r, d, h, g, u in samples:
        if (r, d) not in calibrated:
            continue
        m = full[(r, d)]
        t = gmap(m, g)
        if t < h - u - m[2] or t > h + u + m[2]:
            bad.append((r, d, g, t - h, u))
        lag = h + u - t  # the callback after the GPU time
        (lag_s if (r, g) in starts else lag_e).append(lag)
        waits.append(t - (h - u))  # the GPU time after the launch
    check("samples hold the CUPTI-calibrated time", calibrated and not bad,
          f"{len(bad)} of {len(samples)} outside on GPUs {sorted(calibrated)}"
          + (f", first {bad[0]}" if bad else ""))
    for name, v in (("start callback lag", lag_s), ("stop callback lag", lag_e),
                    ("launch to GPU time", waits)):
        if v:
            print(f"check_host_clock: {name}: p1 {pct(v, 0.01) / 1e3:.1f} us, median "
                  f"{pct(v, 0.5) / 1e3:.1f} us, n {len(v)}", flush=True)

    # 5. the host-only fit of the same run against CUPTI's
    if a.meridian:
        tmp = tempfile.mkdtemp(prefix="check_host_clock.")
        copy = os.path.join(tmp, "host.db")
        try:
            src = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
            dst = sqlite3.connect(copy)
            src.backup(dst)
            src.close()
            dst.execute("DELETE FROM kernels")
            dst.commit()
            dst.close()
            p = subprocess.run([a.meridian, "finalize", copy], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=300)
            host = models_of(copy)
            worst = []
            for r, dev, gs, ge in q("SELECT c.rank, COALESCE(o.device, 0), c.gpu_start,"
                                    " c.gpu_end FROM nccl_channels c"
                               " JOIN nccl_ops o ON o.rank = c.rank AND o.op_id = c.op_id"
                               " JOIN external_correlations x ON x.rank = o.rank"
                               "  AND x.external_id = o.launch_id"
                               " JOIN kernels k ON k.rank = x.rank"
                               "  AND k.correlation_id = x.correlation_id"
                               " WHERE c.gpu_start > 0"):
                hm, fm = host.get((r, dev)), full.get((r, dev))
                if not hm or not fm:
                    worst.append((r, dev, "no model"))
                    break
                for g in (gs, ge):
                    if abs(gmap(hm, g) - gmap(fm, g)) > hm[2] + fm[2]:
                        worst.append((r, dev, g, gmap(hm, g) - gmap(fm, g), hm[2], fm[2]))
            check("host-only fit within bounds of CUPTI's", p.returncode == 0 and not worst and
                  all(g in host and host[g][3].startswith("host") for g in gpus),
                  f"finalize rc {p.returncode}; host-only models "
                  + "; ".join(f"{g}: {host[g][3]} bound {host[g][2] / 1e3:.1f} us"
                              for g in gpus if g in host)
                  + (f"; first miss {worst[0]}" if worst else ""))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"check_host_clock: {sum(results)}/{len(results)} checks passed", flush=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
