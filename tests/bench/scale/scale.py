#!/usr/bin/env python3
"""Scaling of aggregation across nodes: ingest, merge, finalize and analysis against ranks
and events, over 4 simulated hosts (tests/multinode's cluster: network + time namespaces,
one meridiand per host aligned to the reference with --clock-reference).

For each configuration (ranks R over the 4 hosts, E events per rank from meridian replay's
deterministic generator, sent as fast as the acknowledgements allow):
  ingest     wall time from the first rank's start to the last rank's last acknowledgement
             (all 4 node aggregators busy at once), events/s in all and per aggregator;
  adopt      meridian-adopt of the 3 node shards;
  merge      meridian merge --no-finalize (copy of every shard into one file);
  finalize   meridian finalize (clock fit of every rank, GPU timer calibration, causality);
  analysis   meridian report --json (matching, overlap, stragglers, steps);
plus the merged database's size. Then each cost is fitted as c x N^k over the rank
series (N = ranks at fixed E) and over the event series (E at fixed ranks), and
extrapolated to 4,096 ranks.

Caveat written into the output: the 4 "hosts" share this machine's cores, so the ingest
rate is the machine's, not 4 x one node's; per-node ingest at 4,096 ranks is a per-node
load (ranks per node), which is what tests/bench/RESULTS.md's single-aggregator numbers
already bound.

Usage: scale.py --build build [--ranks 16,64,256] [--events 3000] [--event-series 1000,4000]
                [--event-ranks 64] [--out FILE]
Needs root (namespaces). Prints a Markdown table and the prediction; --out appends it.
"""
import argparse
import math
import os
import platform
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "multinode"))
import multinode  # noqa: E402
from multinode import Cluster, HOSTS  # noqa: E402


def timed(cmd):
    t = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (" ".join(cmd), r.stdout[-2000:]))
    return time.monotonic() - t


class Args:
    keep = False


def one(exe, ranks, events):
    per_host = ranks // HOSTS
    c = Cluster(Args(), exe, "s")
    try:
        c.setup()
        c.start_all()
        t = time.monotonic()
        procs = [c.replay(k, ["--events", str(events), "--rate", "0"], per_host=per_host)
                 for k in range(HOSTS)]
        for k, p in enumerate(procs):
            if p.wait(timeout=1800) != 0:
                raise RuntimeError("replay on host %d failed:\n%s" % (k, c.output("replay%d.log" % k)))
        ingest = time.monotonic() - t
        for k in range(HOSTS - 1, -1, -1):
            c.stop(k)
        shard_bytes = sum(os.path.getsize(c.db(k)) for k in range(HOSTS))
        adopt = timed([exe["adopt"], c.db(0)] + [c.db(k) for k in range(1, HOSTS)])
        merged = os.path.join(c.dir, "merged.db")
        merge = timed([exe["meridian"], "merge", "--no-finalize", "-o", merged] +
                      [c.db(k) for k in range(HOSTS)])
        for k in range(HOSTS):
            os.unlink(c.db(k))
        fin = timed([exe["meridian"], "finalize", merged])
        analysis = timed([exe["meridian"], "report", "--json=" + os.path.join(c.dir, "r.json"),
                          merged])
        size = os.path.getsize(merged)
    finally:
        c.cleanup()
    total = ranks * events
    return dict(ranks=ranks, events=events, total=total, ingest=ingest, adopt=adopt, merge=merge,
                finalize=fin, analysis=analysis, size=size, shard_bytes=shard_bytes,
                rate=total / ingest)


def fit(xs, ys):
    """c, k of y = c x^k by least squares in logs."""
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-6)) for y in ys]
    n = len(xs)
    mx, my = sum(lx) / n, sum(ly) / n
    sxx = sum((a - mx) ** 2 for a in lx)
    k = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sxx if sxx > 0 else 1.0
    return math.exp(my - k * mx), k


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--ranks", default="16,64,256")
    ap.add_argument("--events", type=int, default=3000, help="events per rank (rank series)")
    ap.add_argument("--event-series", default="1000,4000",
                    help="events per rank for the event series, besides --events")
    ap.add_argument("--event-ranks", type=int, default=64)
    ap.add_argument("--predict-ranks", type=int, default=4096)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    why = multinode.preflight(min(multinode.SHIFT_S))
    if why:
        print("scale: SKIP: " + why)
        return 77
    exe = {k: os.path.join(a.build, v) for k, v in {
        "meridiand": "aggregator/daemon/meridiand", "adopt": "aggregator/uplink/meridian-adopt",
        "meridian": "launcher/meridian", "replay": "launcher/replay/meridian-replay"}.items()}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows = []
    for r in [int(x) for x in a.ranks.split(",")]:
        rows.append(one(exe, r, a.events))
        print("scale: %s" % rows[-1], flush=True)
    ev = []
    for e in [int(x) for x in a.event_series.split(",")]:
        ev.append(one(exe, a.event_ranks, e))
        print("scale: %s" % ev[-1], flush=True)
    ev += [x for x in rows if x["ranks"] == a.event_ranks]
    ev.sort(key=lambda x: x["events"])

    out = []
    p = out.append
    p("### Run of %s UTC on %s (%d cores), build %s" % (
        time.strftime("%Y-%m-%d %H:%M", time.gmtime()), platform.node(), os.cpu_count(), a.build))
    p("")
    p("Command: `tests/bench/scale/scale.py --build %s --ranks %s --events %d --event-series %s "
      "--event-ranks %d`" % (a.build, a.ranks, a.events, a.event_series, a.event_ranks))
    p("")
    p("| ranks | events/rank | events | ingest s | events/s (all 4) | adopt s | merge s | "
      "finalize s | analysis s | merged MB | bytes/event |")
    p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for x in sorted(rows + [y for y in ev if y not in rows], key=lambda x: (x["ranks"], x["events"])):
        p("| %d | %d | %d | %.2f | %.0f | %.3f | %.2f | %.2f | %.2f | %.1f | %.1f |" % (
            x["ranks"], x["events"], x["total"], x["ingest"], x["rate"], x["adopt"], x["merge"],
            x["finalize"], x["analysis"], x["size"] / 1e6, x["size"] / x["total"]))
    p("")
    N = a.predict_ranks
    xs = [x["ranks"] for x in rows]
    p("Growth: k is the local exponent of cost ~ N^k between the two largest points of each "
      "series (fixed start-up costs flatten it at the small end); the prediction extends the "
      "largest measured point with it: cost(%d) = cost(%d) x (%d / %d)^k. Rank series: %s ranks, "
      "%d events each; event series: %d ranks, %s events each." % (
          N, xs[-1], N, xs[-1], a.ranks, a.events, a.event_ranks,
          ",".join(str(x["events"]) for x in ev)))
    p("")
    p("| cost | k over ranks | k over events/rank | at %d ranks x %d events (predicted) |" % (N, a.events))
    p("|---|---:|---:|---:|")
    for key, name in (("ingest", "ingest (this machine, all hosts on its cores)"), ("merge", "merge"),
                      ("finalize", "finalize"), ("analysis", "analysis"), ("size", "merged bytes")):
        _, k = fit(xs[-2:], [x[key] for x in rows][-2:])
        _, ke = fit([x["events"] for x in ev][-2:], [x[key] for x in ev][-2:])
        pred = rows[-1][key] * (N / xs[-1]) ** k
        unit = "%.0f MB" % (pred / 1e6) if key == "size" else "%.0f s" % pred
        p("| %s | %.2f | %.2f | %s |" % (name, k, ke, unit))
    p("")
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
