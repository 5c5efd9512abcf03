#!/usr/bin/env python3
"""analysis_gpu_quickstart: the straggler question on a real database from the H200 host.

tests/data/h200-quickstart.db.gz is what the README's first command (deploy/quickstart.sh,
GPU path) stored on the 2 x H200 host (tests/gpu/RESULTS.md, run 17): the reference
workload, 50 steps + 5 warm-up, rank 1 slowed by 2 ms on every 5th step. Its first
all-reduce (warm-up, outside the NVTX step ranges) waited ~31.6 ms for rank 0's start-up,
which outweighs all the injected slowness together. The report must rank the steps only:
rank 1 first, caused by far the most in-step wait, the worst rank of every slowed step,
with the warm-up reported as left out (and, counted over every instance, rank 0 ahead:
the property of the data that makes the scope matter).

usage: check_gpu_quickstart.py MERIDIAN FIXTURE_GZ WORKDIR
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

import testlib

fail, _ = testlib.reporter("analysis_gpu_quickstart")


def main(meridian, fixture, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    db = os.path.join(work, "quickstart.db")
    with gzip.open(fixture) as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    p = subprocess.run([meridian, "report", db, "--json=" + os.path.join(work, "r.json")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if p.returncode != 0:
        fail("meridian report exited %d: %s" % (p.returncode, p.stderr[-1000:]))
    with open(os.path.join(work, "r.json")) as f:
        d = json.load(f)
    ranks = {r["rank"]: r for r in d["ranks"]}
    ins = {r: ranks[r]["straggler_in_steps"] for r in ranks}
    alls = {r: ranks[r]["straggler"] for r in ranks}
    if d["straggler_scope"] != "steps" or d["straggler_ranking"] != [1, 0]:
        fail("scope %s, ranking %s: want steps, [1, 0]" % (d["straggler_scope"],
                                                           d["straggler_ranking"]))
    if ins[1]["wait_caused_ns"] < 5 * ins[0]["wait_caused_ns"] or \
            ins[1]["wait_caused_ns"] < 10 * 2_000_000:
        fail("in steps rank 1 caused %d ns, rank 0 %d: want rank 1 >= 5x and >= 10 x 2 ms"
             % (ins[1]["wait_caused_ns"], ins[0]["wait_caused_ns"]))
    if alls[0]["wait_caused_ns"] <= alls[1]["wait_caused_ns"]:
        fail("over every instance rank 0 caused %d ns, rank 1 %d: the fixture no longer shows "
             "the warm-up outweighing the steps" % (alls[0]["wait_caused_ns"],
                                                    alls[1]["wait_caused_ns"]))
    out = d["outside_steps"]
    if out["instances"] != 10 or out["wait_cost_ns"] < 30_000_000:
        fail("outside steps %s: want the 10 warm-up instances costing >= 30 ms" % out)
    slowed = [s for s in d["steps"] if s["index"] % 5 == 0]
    bad = [s["index"] for s in slowed if s["worst_rank"] != 1]
    if len(slowed) != 10 or bad:
        fail("slowed steps %d, worst rank not 1 in %s" % (len(slowed), bad))
    if "not ranked: 10 instance(s) outside the steps" not in p.stdout or \
            "within the NVTX steps" not in p.stdout:
        fail("the text report does not say what it ranked:\n" + p.stdout[-3000:])
    print("analysis_gpu_quickstart: ok: rank 1 first (%.2f ms in steps, rank 0 %.2f ms); "
          "warm-up left out: %d instances, %.2f ms" % (ins[1]["wait_caused_ns"] / 1e6,
                                                       ins[0]["wait_caused_ns"] / 1e6,
                                                       out["instances"], out["wait_cost_ns"] / 1e6))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    main(*sys.argv[1:])
