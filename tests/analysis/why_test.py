#!/usr/bin/env python3
"""analysis_why: what the stragglers cost, why they were late, collective statistics and
top kernels (`meridian report --json`'s "why", the text report's sections), checked
against an oracle written here over the raw rows with Python's sqlite3 (it shares no code
with aggregator/analyze/why.c: its own op intervals, matching, step lookup, propagation,
kernel sweeps, percentiles and bandwidths).

  1. a hand-built run (3 ranks on three clocks, 3 steps): step costs, causes (compute,
     host bound, communication, not evaluated), percentiles, bandwidths, the algorithm /
     protocol flag, the GPU sample beside a compute cause and the demangled top kernels
     equal numbers worked out by hand, and the oracle agrees with them;
  2. random runs (2-5 ranks, several communicators and functions): every number equals
     the oracle's;
  3. tests/data/h200-quickstart.db.gz (rank 1 slowed 2 ms on every 5th step): rank 1 is the
     straggler of each slowed step, cause "compute took longer", cost >= 1.8 ms there and
     < 0.6 ms on every other step;
  4. the same run without kernels (the steady tier outside capture windows): costs from
     NCCL's channel times, causes "not evaluated", shares "n/e";
  5. bad input: a database of another schema version is refused with its message, an
     interrupted run (rank 1 stopped mid-run, no Goodbye) is reported; neither file is
     written (sha256, no -wal/-shm/-journal).

usage: why_test.py MERIDIAN SCHEMA_SQL FIXTURE_GZ WORKDIR [--seeds N]
"""
import functools
import gzip
import hashlib
import json
import math
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import testlib

LATE_NS = 100_000
fails = []


fail, check = testlib.reporter("analysis_why", fails)


# ---------------------------------------------------------------- building databases

US = 1000


class Run:
    """Events in global ns per rank; stored in each rank's local clock (global - offset)."""

    def __init__(self, path, nranks, offsets):
        self.path = path
        self.n = nranks
        self.off = offsets
        self.strings = {}
        self.kernels = []   # rank, start, end, corr, name
        self.ops = []       # dict
        self.ext = []       # rank, corr, ext
        self.nvtx = []      # rank, start, end, name
        self.channels = []  # rank, op_id, gpu_start, gpu_end
        self.samples = []   # rank, host_ns(global), sm, power, temp, throttle
        self.corr = [1000] * nranks
        self.opid = [0] * nranks

    def sid(self, s):
        if s not in self.strings:
            self.strings[s] = len(self.strings) + 1
        return self.strings[s]

    def kernel(self, r, s, e, name):
        self.corr[r] += 1
        self.kernels.append((r, s, e, self.corr[r], name))
        return self.corr[r]

    def coll(self, r, comm, comm_rank, nr, seq, func, nbytes, s, e, algo="RING", proto="SIMPLE",
             traced=True):
        self.opid[r] += 1
        op = self.opid[r]
        ext = 500000 + op
        if traced:
            corr = self.kernel(r, s, e, "ncclDevKernel_%s_Sum_f32_RING_LL" % func)
            self.ext.append((r, corr, ext))
        else:
            self.channels.append((r, op, s - self.off[r], e - self.off[r]))
        self.ops.append(dict(rank=r, op_id=op, start=s - 5 * US, end=s - 4 * US, comm=comm,
                             comm_rank=comm_rank, nranks=nr, seq=seq, func=func,
                             bytes=nbytes, algo=algo, proto=proto,
                             launch=ext if traced else 0))

    def step(self, r, idx, s, e):
        self.nvtx.append((r, s, e, "step %d" % idx))

    def write(self, schema_sql):
        if os.path.exists(self.path):
            os.remove(self.path)
        db = sqlite3.connect(self.path)
        db.executescript(schema_sql)
        db.execute("CREATE TABLE IF NOT EXISTS gpu_samples (rank INTEGER NOT NULL, device "
                   "INTEGER, host_ns INTEGER NOT NULL, sm_clock_mhz INTEGER, mem_clock_mhz "
                   "INTEGER, power_mw INTEGER, temperature_c INTEGER, throttle_reasons "
                   "INTEGER, utilization_pct INTEGER)")
        if not db.execute("SELECT 1 FROM schema_version").fetchone():
            db.execute("INSERT INTO schema_version VALUES (2)")
        db.execute("INSERT INTO runs (run_id, world_size, anchor_realtime_ns, "
                   "anchor_monotonic_ns, created_ns, command) VALUES ('why', ?, 1, 1, 1, "
                   "'why_test')", (self.n,))
        for r in range(self.n):
            db.execute("INSERT INTO ranks (rank, local_rank, world_size, host, pid, goodbye) "
                       "VALUES (?, ?, ?, 'h', ?, 1)", (r, r, self.n, 100 + r))
            db.execute("INSERT INTO clock_models VALUES (?, 0, 0, 9223372036854775807, ?, 0.0, "
                       "100, 10, 'test')", (r, self.off[r]))
            db.execute("INSERT INTO gpu_timer_models VALUES (?, 0, 1.0, 0, 10, 10, 'test')",
                       (r,))
        for r, s, e, c, name in self.kernels:
            db.execute("INSERT INTO kernels (rank, device, stream, start_ns, end_ns, "
                       "correlation_id, name_id, graph_id) VALUES (?, 0, 7, ?, ?, ?, ?, 0)",
                       (r, s - self.off[r], e - self.off[r], c, self.sid(name)))
        for r, c, x in self.ext:
            db.execute("INSERT INTO external_correlations VALUES (?, ?, ?, 2)", (r, c, x))
        for o in self.ops:
            r = o["rank"]
            db.execute(
                "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, comm_rank, "
                "comm_nranks, seq, func_id, count, datatype_id, bytes, root, peer, algo_id, "
                "proto_id, channels, warps, launch_id, is_p2p, device) VALUES (?, ?, ?, ?, ?, "
                "?, ?, ?, ?, ?, ?, ?, -1, -1, ?, ?, 2, 8, ?, 0, 0)",
                (r, o["op_id"], o["start"] - self.off[r], o["end"] - self.off[r], o["comm"],
                 o["comm_rank"], o["nranks"], o["seq"], self.sid(o["func"]), o["bytes"] // 4,
                 self.sid("ncclFloat32"), o["bytes"], self.sid(o["algo"]),
                 self.sid(o["proto"]), o["launch"]))
        for r, op, gs, ge in self.channels:
            db.execute("INSERT INTO nccl_channels VALUES (?, ?, 0, ?, ?, ?)",
                       (r, op, gs, ge, gs))
        for r, s, e, name in self.nvtx:
            db.execute("INSERT INTO nvtx (rank, thread, start_ns, end_ns, kind, name_id, depth, "
                       "color) VALUES (?, 1, ?, ?, 1, ?, 1, 0)",
                       (r, s - self.off[r], e - self.off[r], self.sid(name)))
        for r, t, sm, pw, tc, th in self.samples:
            db.execute("INSERT INTO gpu_samples VALUES (?, 0, ?, ?, 1593, ?, ?, ?, 90)",
                       (r, t - self.off[r], sm, pw, tc, th))
        for s, i in self.strings.items():
            db.execute("INSERT INTO strings (id, value) VALUES (?, ?)", (i, s))
        db.commit()
        db.close()


def hand_run(path, schema):
    """3 ranks, 3 steps, one communicator; every number below is worked out by hand."""
    run = Run(path, 3, [0, -1_000_000_000, -2_000_000_000])
    comm, mib = 0x1234, 1 << 20
    seq = [0]

    def coll(arrive, ends, proto_of=lambda r: "LL" if r == 2 else "SIMPLE", traced=True):
        for r in range(3):
            run.coll(r, comm, r, 3, seq[0], "AllReduce", mib, arrive[r], ends[r],
                     proto=proto_of(r), traced=traced)
        seq[0] += 1

    def compute(r, s, dur):
        run.kernel(r, s, s + dur, "_Z7computePf")
        return s + dur

    # step 0 at 0: collective 0, rank 2 computes 4000 us (ref rank 1: 1200 us)
    for r, c in enumerate((1000, 1200, 4000)):
        compute(r, 10 * US, c * US)
    coll([1010 * US, 1210 * US, 4010 * US], [4110 * US] * 3)
    # collective 1: rank 0 launches 500 us after the previous collective (others 10 us)
    for r, h in enumerate((500, 10, 10)):
        compute(r, (4110 + h) * US, 200 * US)
    coll([4810 * US, 4320 * US, 4320 * US], [4910 * US] * 3)
    for r in range(3):
        run.step(r, 0, 0, 4930 * US)
    # step 1 at 5000: collective 2 ends 1500 us later on rank 2; collective 3 then waits
    for r in range(3):
        compute(r, 5010 * US, 1000 * US)
    coll([6010 * US] * 3, [6110 * US, 6110 * US, 7610 * US])
    for r in range(3):
        prev = 7610 if r == 2 else 6110
        compute(r, (prev + 10) * US, 200 * US)
    coll([6320 * US, 6320 * US, 7820 * US], [7920 * US] * 3)
    for r in range(3):
        run.step(r, 1, 5000 * US, 7940 * US)
    # step 2 at 10000, steady tier: no kernels, channel times only; rank 2 800 us late
    coll([11010 * US, 11010 * US, 11810 * US], [11910 * US] * 3, traced=False)
    for r in range(3):
        run.step(r, 2, 10000 * US, 11930 * US)
    # GPU samples: rank 2 throttled before collective 0, rank 1 not; rank 0's one reading
    # 4.99 s before the run: within the 5 s the analysis accepts at its step-0 and step-1
    # arrivals, too old at its step-2 arrival (11 ms into the run)
    run.samples += [(2, 3000 * US, 1200, 650000, 83, 0x4), (2, 4500 * US, 1980, 300000, 60, 0),
                    (1, 500 * US, 1980, 400000, 55, 0), (0, -4990000 * US, 1410, 500000, 70, 0)]
    run.write(schema)


HAND = {
    "measured_ns": (4930 + 2940 + 1930) * US,
    "cost_ns": (3290 + 1500 + 800) * US,
    "steps": [  # measured, counterfactual, cost, straggler, cause
        (4930 * US, 1640 * US, 3290 * US, 2, "compute took longer"),
        (2940 * US, 1440 * US, 1500 * US, 2, "communication slower"),
        (1930 * US, 1130 * US, 800 * US, 2, "not evaluated")],
    "events": {  # (step, seq): rank, ref, late, cause, comm, host, compute
        (0, 0): (2, 1, 2800 * US, "compute took longer", 0, 0, 2800 * US),
        (0, 1): (0, 1, 490 * US, "launched later (host bound)", 0, 490 * US, 0),
        (1, 3): (2, 0, 1500 * US, "communication slower", 1500 * US, 0, 0),
        (2, 4): (2, 0, 800 * US, "not evaluated", 0, 0, 0)},
    # durations 100, 100, 1600, 100, 100 us: nearest rank p50 = 3rd, p90 = p99 = 5th
    "stat": (5, 100 * US, 1600 * US, 1600 * US, (1 << 20) / (100 * US),
             (1 << 20) / (100 * US) * 4 / 3),
}


def random_run(path, schema, rng, nsteps=None):
    n = rng.randint(2, 5)
    offsets = [rng.randint(-10**12, 0) for _ in range(n)]  # local times stay > 0
    run = Run(path, n, offsets)
    comms = [(0x77000 + 1, list(range(n)))]
    if n >= 3:
        comms.append((0x88000 + 2, sorted(rng.sample(range(n), rng.randint(2, n - 1)))))
    funcs = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast"]
    sizes = [4096, 1 << 16, 1 << 20]
    seqs = {}
    t = 1_000_000
    nsteps = nsteps or rng.randint(2, 6)
    for st in range(nsteps):
        cur = [t + rng.randint(0, 50 * US) for _ in range(n)]
        starts = list(cur)
        for _ in range(rng.randint(1, 4)):
            comm, members = rng.choice(comms)
            func, nbytes = rng.choice(funcs), rng.choice(sizes)
            key = (comm, func)
            sq = seqs.get(key, 0)
            seqs[key] = sq + 1
            arrive = {}
            for r in members:
                s = cur[r] + rng.randint(0, 300 * US)
                for _ in range(rng.randint(0, 3)):
                    d = rng.randint(10 * US, 2000 * US)
                    run.kernel(r, s, s + d, rng.choice(["_Z4gemmPfS_", "_Z7computePf",
                                                        "elementwise_add"]))
                    s += d + rng.randint(0, 20 * US)
                arrive[r] = s
            last = max(arrive.values())
            transfer = rng.randint(50 * US, 500 * US)
            algo = rng.choice(["RING", "TREE"])
            odd = rng.choice(members) if rng.random() < 0.3 else -1
            for i, r in enumerate(members):
                e = last + transfer + (rng.randint(0, 400 * US) if rng.random() < 0.3 else 0)
                run.coll(r, comm, i, len(members), sq, func, nbytes, arrive[r], e, algo=algo,
                         proto="LL" if r == odd else "SIMPLE")
                cur[r] = e
        end = max(cur) + 20 * US
        for r in range(n):
            run.step(r, st, starts[r], max(cur[r] + rng.randint(5 * US, 40 * US), end - 30 * US))
        t = end + 100 * US
    run.write(schema)


# ---------------------------------------------------------------- the oracle

@functools.lru_cache(maxsize=None)
def demangle(name):
    """binutils' c++filt (testlib.demangle): a demangler that is not the C++ runtime's."""
    if not name or not name.startswith("_Z") or not shutil.which("c++filt"):
        return name
    return testlib.demangle([name])[name]



def oracle(path):
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    q = db.execute
    strings = dict(q("SELECT id, value FROM strings"))
    segs = {}
    for r, begin, o, drift in q("SELECT rank, local_begin_ns, offset_ns, drift_ppm FROM "
                                "clock_models ORDER BY rank, local_begin_ns"):
        segs.setdefault(r, []).append((begin, o, drift))

    def g(r, t):  # aggregator/SCHEMA.md: the segment of the last begin <= t, else the first
        seg = segs[r][0]
        for sg in segs[r]:
            if sg[0] <= t:
                seg = sg
        v = seg[2] * (t - seg[0]) / 1e6
        return t + seg[1] + int(math.copysign(math.floor(abs(v) + 0.5), v))

    ranks = [r for (r,) in q("SELECT rank FROM ranks ORDER BY rank")]
    kern = {r: [] for r in ranks}
    for r, s, e, c, nid in q("SELECT rank, start_ns, end_ns, correlation_id, name_id FROM "
                             "kernels ORDER BY rank, start_ns"):
        if (s == 0 and e == 0) or e < s:
            continue
        kern[r].append((g(r, s), g(r, e), c, strings.get(nid)))
    ext = {}
    for r, c, x in q("SELECT rank, correlation_id, external_id FROM external_correlations"):
        ext.setdefault((r, x), set()).add(c)
    linked = set()
    opspan = {}
    for r, op, launch in q("SELECT rank, op_id, launch_id FROM nccl_ops"):
        cs = ext.get((r, launch), set()) if launch else set()
        ks = [k for k in kern[r] if k[2] in cs]
        for c in cs:
            linked.add((r, c))
        if ks:
            opspan[(r, op)] = (min(k[0] for k in ks), max(k[1] for k in ks))
    tm = {(r, d): (sl, ic) for r, d, sl, ic in q("SELECT rank, device, slope, intercept_ns "
                                                 "FROM gpu_timer_models")}
    dev = {(r, op): d for r, op, d in q("SELECT rank, op_id, COALESCE(device, 0) FROM nccl_ops")}
    for r, op, gs, ge in q("SELECT rank, op_id, MIN(gpu_start), MAX(gpu_end) FROM "
                           "nccl_channels WHERE gpu_start > 0 AND gpu_end >= gpu_start "
                           "GROUP BY rank, op_id"):
        if (r, op) not in opspan and (r, dev.get((r, op))) in tm:
            sl, ic = tm[(r, dev[(r, op)])]
            opspan[(r, op)] = (g(r, int(gs * sl) + ic), g(r, int(ge * sl) + ic))
    steps = {r: [] for r in ranks}
    step_re = re.compile(r"^(ProfilerStep|(train(ing)?[_ ]?)?step([ #:=\-\[(0-9]|$))", re.I)
    for r, s, e, nid in q("SELECT rank, start_ns, end_ns, name_id FROM nvtx WHERE kind IN "
                          "(1, 2) ORDER BY rank, start_ns"):
        if step_re.match(strings.get(nid) or "") and r in steps:
            if steps[r] and g(r, s) < steps[r][-1][1]:
                continue
            steps[r].append((g(r, s), g(r, e)))
    nsteps = max(len(v) for v in steps.values())

    def step_of(r, t):
        for i, (s, e) in enumerate(steps[r]):
            if s <= t < e:
                return i
        return -1

    # instances, in key order (comm_hash, seq, func_id)
    groups = {}
    for r, op, comm, seq, fid, nr, nbytes, algo, proto in q(
            "SELECT rank, op_id, comm_hash, seq, func_id, comm_nranks, bytes, algo_id, "
            "proto_id FROM nccl_ops WHERE is_p2p = 0 AND seq IS NOT NULL"):
        groups.setdefault((comm, seq, fid), []).append((r, op, nr, nbytes, algo, proto))
    insts = []
    for ordinal, key in enumerate(sorted(groups)):
        rows = sorted(groups[key])
        timed = [(r, opspan[(r, op)]) for r, op, *_ in rows if (r, op) in opspan]
        if len(timed) < 2:
            continue
        last = max(timed, key=lambda x: (x[1][0], -x[0]))
        step = step_of(last[0], last[1][0])
        if step < 0:
            for r, sp in timed:
                step = step_of(r, sp[0])
                if step >= 0:
                    break
        insts.append(dict(key=key, ordinal=ordinal, func=strings[key[2]], rows=timed,
                          last=last[1][0], max_end=max(sp[1] for _, sp in timed),
                          bytes=max(x[3] for x in rows),
                          nranks=max(x[2] for x in rows), step=step))

    def gap(r, lo, hi):
        first, busy, nk, ck, segs, per_name = None, 0, 0, 0, [], {}
        for s, e, c, nm in kern[r]:
            if s > hi or e < lo or (e == lo and s < lo):
                continue
            nk += 1
            s2 = max(s, lo)
            first = s2 if first is None else min(first, s2)
            comm_k = (r, c) in linked or (nm or "").startswith("nccl") or \
                ((nm or "").startswith("_Z") and "nccl" in (nm or "")[:12])
            if comm_k:
                continue
            e2 = min(e, hi)
            if e2 > s2:
                ck += 1
                segs.append((s2, e2))
                if nm in per_name or len(per_name) < 16:
                    per_name[nm] = per_name.get(nm, 0) + (e2 - s2)
        cs, ce = None, None
        for s, e in sorted(segs):
            if ce is None or s > ce:
                if ce is not None:
                    busy += ce - cs
                cs, ce = s, e
            else:
                ce = max(ce, e)
        if ce is not None:
            busy += ce - cs
        return first, busy, nk, ck, per_name

    samples = {}
    has_samples = q("SELECT 1 FROM sqlite_master WHERE name = 'gpu_samples'").fetchone()
    for r, t, sm, pw, tc, th in [] if not has_samples else q("SELECT rank, host_ns, sm_clock_mhz, power_mw, temperature_c, "
                                  "throttle_reasons FROM gpu_samples ORDER BY host_ns"):
        samples.setdefault(r, []).append((g(r, t), dict(sm_clock_mhz=sm, power_mw=pw,
                                                        temperature_c=tc,
                                                        throttle_reasons=th)))

    def sample(r, t):
        """The rank's latest reading at or before t, with its age, if at most 5 s old."""
        best = None
        for ts, v in samples.get(r, []):
            if ts <= t:
                best = dict(v, age_ns=t - ts)
        return best if best is not None and best["age_ns"] <= 5 * 10**9 else None

    def shares(r, lo, hi):
        """exposed comm and idle in [lo, hi] by elementary segments (not by merging)."""
        ks = []
        for s, e, c, nm in kern[r]:
            s2, e2 = max(s, lo), min(e, hi)
            if e2 > s2:
                comm_k = (r, c) in linked or (nm or "").startswith("nccl") or \
                    ((nm or "").startswith("_Z") and "nccl" in (nm or "")[:12])
                ks.append((s2, e2, comm_k))
        if not ks:
            return None
        pts = sorted({lo, hi} | {k[0] for k in ks} | {k[1] for k in ks})
        exposed = idle = 0
        for a, b in zip(pts, pts[1:]):
            cov = [k[2] for k in ks if k[0] <= a and k[1] >= b]
            if not cov:
                idle += b - a
            elif all(cov):
                exposed += b - a
        return exposed, idle, hi - lo

    out = dict(steps=[], events={}, measured=0, cost=0)
    for st in range(nsteps):
        mine = sorted([x for x in insts if x["step"] == st],
                      key=lambda x: (x["last"], x["ordinal"]))
        shift = {r: 0 for r in ranks}
        prev = {r: None for r in ranks}
        late_sum = {r: 0 for r in ranks}
        best = {r: (0, None) for r in ranks}
        for x in mine:
            sh = sorted(((sp[0] - shift[r], -r, r, sp) for r, sp in x["rows"]), reverse=True)
            (lv, _, lr, lsp), (rv, _, rr, rsp) = sh[0], sh[1]
            late_sum[lr] += lv - rv
            if lv - rv >= LATE_NS:
                late = lsp[0] - rsp[0]
                have_prev = prev[lr] is not None and prev[rr] is not None
                b = {}
                for r in (lr, rr):
                    b[r] = prev[r] if prev[r] is not None else (
                        steps[r][st][0] if st < len(steps[r]) else dict(x["rows"])[r][0])
                comm_ns = b[lr] - b[rr] if have_prev else 0
                gl = gap(lr, b[lr], lsp[0])
                gr = gap(rr, b[rr], rsp[0])
                evaluated = gl[2] > 0 and gr[2] > 0
                host = compute = kdiff = 0
                kname = ""
                if evaluated:
                    host = (gl[0] - gr[0]) - comm_ns
                    compute = gl[1] - gr[1]
                    for nm, ns in gl[4].items():
                        if ns - gr[4].get(nm, 0) > kdiff:
                            kdiff, kname = ns - gr[4].get(nm, 0), nm
                cands = [(comm_ns, "communication slower")]
                if evaluated:
                    cands += [(host, "launched later (host bound)"),
                              (compute, "compute took longer")]
                bv, cause = cands[0]
                for v, c in cands[1:]:
                    if v > bv:
                        bv, cause = v, c
                if 2 * bv < late:
                    cause = "unexplained" if evaluated else "not evaluated"
                out["events"][(st, x["key"][0], x["key"][1], x["func"])] = dict(
                    rank=lr, ref_rank=rr, late_ns=late, cause=cause, comm_ns=comm_ns,
                    host_ns=host, compute_ns=compute, busy_ns=[gl[1], gr[1]],
                    compute_kernels=[gl[3], gr[3]], kernel=demangle(kname),
                    kernel_diff_ns=kdiff,
                    gpu=[sample(lr, lsp[0]), sample(rr, rsp[0])])
                if late > best[lr][0]:
                    best[lr] = (late, cause)
            new = x["last"] - rv
            for r, sp in x["rows"]:
                shift[r] = new
                prev[r] = sp[1]
        measured = cf = -1
        strag, strag_late = -1, 0
        for r in ranks:
            if st >= len(steps[r]):
                continue
            ln = steps[r][st][1] - steps[r][st][0]
            measured = max(measured, ln)
            cf = max(cf, ln - shift[r])
            if late_sum[r] >= LATE_NS and late_sum[r] > strag_late:
                strag, strag_late = r, late_sum[r]
        cost = measured - cf
        ex = idle = span = kr = 0
        for r in ranks:
            if st < len(steps[r]):
                v = shares(r, *steps[r][st])
                if v is not None:
                    ex, idle, span, kr = ex + v[0], idle + v[1], span + v[2], kr + 1
        out["steps"].append(dict(measured_ns=measured, counterfactual_ns=cf, cost_ns=cost,
                                 straggler=strag, straggler_late_ns=strag_late,
                                 cause=best[strag][1] if strag >= 0 else None,
                                 exposed_ns=ex, idle_ns=idle, kernel_span_ns=span,
                                 kernel_ranks=kr))
        out["measured"] += measured
        out["cost"] += cost
    # collective statistics
    stats = {}
    for x in insts:
        k = (x["key"][0], x["func"], x["bytes"])
        s = stats.setdefault(k, dict(d=[], nranks=0))
        s["d"].append(x["max_end"] - x["last"])
        s["nranks"] = max(s["nranks"], x["nranks"])
    for k, s in stats.items():
        d = sorted(s["d"])
        pct = {p: d[max(1, math.ceil(p * len(d) / 100)) - 1] for p in (50, 90, 99)}
        n = s["nranks"]
        size, factor = k[2], 1.0
        if k[1] == "AllReduce":
            factor = 2 * (n - 1) / n
        elif k[1] in ("AllGather", "ReduceScatter", "AlltoAll"):
            size, factor = k[2] * n, (n - 1) / n
        algbw = size / pct[50]
        s.update(count=len(d), p50=pct[50], p90=pct[90], p99=pct[99], algbw=algbw,
                 busbw=algbw * factor)
    mixed = set()
    for (comm, seq, fid), rows in groups.items():
        if len({(x[4], x[5]) for x in rows}) > 1:
            mixed.add((comm, strings[fid], max(x[3] for x in rows)))
    for k, s in stats.items():
        s["differ"] = k in mixed
    out["stats"] = stats
    # kernel totals per rank
    tops = {}
    for r in ranks:
        tot = {}
        for s, e, nid in q("SELECT start_ns, end_ns, name_id FROM kernels WHERE rank = ?", (r,)):
            if (s == 0 and e == 0) or e < s:
                continue
            t = tot.setdefault(strings.get(nid), [0, 0])
            t[0] += 1
            t[1] += e - s  # the kernel's own (local clock) duration
        allt = sum(v[1] for v in tot.values())
        tops[r] = sorted(((v[1], v[0], nm, v[1] / allt) for nm, v in tot.items()),
                         key=lambda x: (-x[0], x[2]))[:10]
    out["tops"] = tops
    db.close()
    return out


# ---------------------------------------------------------------- comparing


def report(meridian, db, work, tag):
    jpath = os.path.join(work, tag + ".json")
    p = subprocess.run([meridian, "report", db, "--json=" + jpath], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    if not check(p.returncode == 0, "%s: report exited %d: %s" % (tag, p.returncode,
                                                                 p.stderr[-800:])):
        return None, None
    with open(jpath) as f:
        return json.load(f), p.stdout


def compare(tag, why, orc, tol_ns=0):
    """tol_ns: allowed difference of the kernel-time parts of late events, where clock models
    have a drift: why.c clips kernels in each rank's local clock, the oracle in global time,
    and each mapped boundary may round 1 ns apart."""
    ok = True
    near = ("compute_ns", "host_ns", "busy_ns", "kernel_diff_ns")
    sc = why["step_costs"]
    if not check(len(sc) == len(orc["steps"]), "%s: %d step costs, oracle %d" %
                 (tag, len(sc), len(orc["steps"]))):
        return False
    for i, (a, b) in enumerate(zip(sc, orc["steps"])):
        for k in ("measured_ns", "counterfactual_ns", "cost_ns", "straggler",
                  "straggler_late_ns", "cause", "kernel_ranks"):
            ok &= check(a[k] == b[k], "%s: step %d %s = %s, oracle %s" % (tag, i, k, a[k], b[k]))
        for k in ("exposed_ns", "idle_ns", "kernel_span_ns"):  # clipped in local vs global
            ok &= check(abs(a[k] - b[k]) <= tol_ns * max(1, b["kernel_ranks"]),
                        "%s: step %d %s = %s, oracle %s" % (tag, i, k, a[k], b[k]))
    ok &= check(why["measured_ns"] == orc["measured"] and why["cost_ns"] == orc["cost"],
                "%s: run measured/cost %d/%d, oracle %d/%d" % (
                    tag, why["measured_ns"], why["cost_ns"], orc["measured"], orc["cost"]))
    got = {}
    for e in why["late_events"]:
        got[(e["step"], int(e["comm_hash"], 16), e["seq"], e["func"])] = e
    ok &= check(why["late_events_total"] == len(orc["events"]) and set(got) == set(orc["events"]),
                "%s: late events %s, oracle %s" % (tag, sorted(got), sorted(orc["events"])))
    for k, b in orc["events"].items():
        a = got.get(k)
        if a is None:
            continue
        for f in b:
            if f in near:
                va = a[f] if isinstance(a[f], list) else [a[f]]
                vb = b[f] if isinstance(b[f], list) else [b[f]]
                same = all(abs(x - y) <= tol_ns for x, y in zip(va, vb))
            elif f == "kernel" and not shutil.which("c++filt"):
                same = True  # no independent demangler on this host
            else:
                same = a[f] == b[f]
            ok &= check(same, "%s: event %s %s = %s, oracle %s" % (tag, k, f, a[f], b[f]))
    st = {(int(s["comm_hash"], 16), s["func"], s["bytes"]): s for s in why["collective_stats"]}
    ok &= check(set(st) == set(orc["stats"]), "%s: stat groups %s, oracle %s" %
                (tag, sorted(st), sorted(orc["stats"])))
    for k, b in orc["stats"].items():
        a = st.get(k)
        if a is None:
            continue
        for fa, fb in (("count", "count"), ("p50_ns", "p50"), ("p90_ns", "p90"),
                       ("p99_ns", "p99"), ("nranks", "nranks"), ("ranks_differ", "differ")):
            ok &= check(a[fa] == b[fb], "%s: stat %s %s = %s, oracle %s" % (tag, k, fa, a[fa],
                                                                          b[fb]))
        for fa, fb in (("algbw_gbs", "algbw"), ("busbw_gbs", "busbw")):
            ok &= check(abs(a[fa] - b[fb]) <= 1e-6 * max(1.0, b[fb]),
                        "%s: stat %s %s = %s, oracle %s" % (tag, k, fa, a[fa], b[fb]))
    tk = {}
    for k in why["top_kernels"]:
        tk.setdefault(k["rank"], []).append(k)
    for r, lst in orc["tops"].items():
        a = tk.get(r, [])
        ok &= check([(x["total_ns"], x["count"]) for x in a] == [(t, c) for t, c, _, _ in lst],
                    "%s: rank %d top kernels %s, oracle %s" % (
                        tag, r, [(x["total_ns"], x["count"]) for x in a],
                        [(t, c) for t, c, _, _ in lst]))
        for x, (_, _, _, share) in zip(a, lst):
            ok &= check(abs(x["share"] - share) < 1e-6, "%s: rank %d share %s, oracle %s" %
                        (tag, r, x["share"], share))
    return ok


def hand_case(meridian, schema, work):
    path = os.path.join(work, "hand.db")
    hand_run(path, schema)
    orc = oracle(path)
    # the oracle against the hand-worked numbers
    check(orc["measured"] == HAND["measured_ns"] and orc["cost"] == HAND["cost_ns"],
          "hand: oracle run %d/%d" % (orc["measured"], orc["cost"]))
    for i, (m, cf, cost, strag, cause) in enumerate(HAND["steps"]):
        s = orc["steps"][i]
        check((s["measured_ns"], s["counterfactual_ns"], s["cost_ns"], s["straggler"],
               s["cause"]) == (m, cf, cost, strag, cause), "hand: oracle step %d %s" % (i, s))
    for (st, seq), (r, ref, late, cause, comm_ns, host, comp) in HAND["events"].items():
        e = [v for k, v in orc["events"].items() if k[0] == st and k[2] == seq]
        check(len(e) == 1 and (e[0]["rank"], e[0]["ref_rank"], e[0]["late_ns"], e[0]["cause"],
                               e[0]["comm_ns"], e[0]["host_ns"], e[0]["compute_ns"]) ==
              (r, ref, late, cause, comm_ns, host, comp), "hand: oracle event %s %s" % ((st, seq), e))
    d, text = report(meridian, path, work, "hand")
    if d is None:
        return
    why = d["why"]
    compare("hand", why, orc)
    for i, (m, cf, cost, strag, cause) in enumerate(HAND["steps"]):
        s = why["step_costs"][i]
        check((s["measured_ns"], s["counterfactual_ns"], s["cost_ns"], s["straggler"],
               s["cause"]) == (m, cf, cost, strag, cause), "hand: step %d %s" % (i, s))
    ev = {(e["step"], e["seq"]): e for e in why["late_events"]}
    for k, (r, ref, late, cause, comm_ns, host, comp) in HAND["events"].items():
        e = ev.get(k)
        check(e is not None and (e["rank"], e["ref_rank"], e["late_ns"], e["cause"], e["comm_ns"],
                                 e["host_ns"], e["compute_ns"]) ==
              (r, ref, late, cause, comm_ns, host, comp), "hand: event %s = %s" % (k, e))
    # step 0 [0, 4930) us: rank 0 computes [10, 1010), [4610, 4810), NCCL [1010, 4110),
    # [4810, 4910): exposed 3100 + 100, idle 10 + 500 + 20; rank 1 computes [10, 1210),
    # [4120, 4320), NCCL [1210, 4110), [4320, 4910): exposed 2900 + 590, idle 10 + 10 + 20;
    # rank 2 computes [10, 4010), [4120, 4320), NCCL [4010, 4110), [4320, 4910): exposed
    # 100 + 590, idle 40. Step 2 ran no kernels (steady tier): not evaluated
    s0 = why["step_costs"][0]
    check((s0["exposed_ns"], s0["idle_ns"], s0["kernel_span_ns"], s0["kernel_ranks"]) ==
          ((3200 + 3490 + 690) * US, (530 + 40 + 40) * US, 3 * 4930 * US, 3),
          "hand: step 0 exposed/idle %s" % s0)
    s2 = why["step_costs"][2]
    check(s2["kernel_ranks"] == 0 and s2["kernel_span_ns"] == 0, "hand: step 2 %s" % s2)
    e0 = ev.get((0, 0), {})
    check(e0.get("kernel") == "compute(float*)" and e0.get("kernel_diff_ns") == 2800 * US,
          "hand: the kernel that grew: %s" % e0)
    g = ev.get((0, 0), {}).get("gpu")
    # rank 2 arrives at 4010 us (its reading at 3000 us), rank 1 at 1210 us (its at 500 us)
    check(g == [dict(sm_clock_mhz=1200, power_mw=650000, temperature_c=83, throttle_reasons=4,
                     age_ns=1010 * US),
                dict(sm_clock_mhz=1980, power_mw=400000, temperature_c=55, throttle_reasons=0,
                     age_ns=710 * US)],
          "hand: GPU samples beside the compute cause: %s" % g)
    g01, g24 = ev.get((0, 1), {}).get("gpu"), ev.get((2, 4), {}).get("gpu")
    check(g01 and g01[0] and g01[0]["sm_clock_mhz"] == 1410 and
          4990000 * US < g01[0]["age_ns"] <= 5000000 * US,
          "hand: rank 0's reading 4.99 s before, at step 0: %s" % g01)
    check(g24 and g24[1] is None, "hand: rank 0's reading over 5 s old at step 2: %s" % g24)
    (st,) = why["collective_stats"] or [None]
    cnt, p50, p90, p99, alg, bus = HAND["stat"]
    check(st is not None and (st["count"], st["p50_ns"], st["p90_ns"], st["p99_ns"]) ==
          (cnt, p50, p90, p99) and abs(st["algbw_gbs"] - alg) < 1e-6 and
          abs(st["busbw_gbs"] - bus) < 1e-6 and st["ranks_differ"] and
          st["algo_proto"] == "RING/SIMPLE; rank 2: RING/LL", "hand: statistics %s" % st)
    names = {k["name"] for k in why["top_kernels"]}
    check("compute(float*)" in names and why["demangled"], "hand: demangled names %s" % names)
    # the Perfetto export names kernels the same way (demangled once in the analysis layer)
    trace = os.path.join(work, "hand-trace.json")
    p = subprocess.run([meridian, "export", path, "--perfetto", trace], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    if check(p.returncode == 0, "hand: export exited %d: %s" % (p.returncode, p.stderr)):
        with open(trace) as f:
            ev = json.load(f)
        ev = ev["traceEvents"] if isinstance(ev, dict) else ev
        kn = {e["name"] for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"}
        check(kn == names, "hand: Perfetto kernel names %s, report %s" % (kn, names))
    for words in ("== Straggler cost",
                  "rank 2: 3 late event(s)", "== Why ranks were late", "== Collective statistics",
                  "== Top kernels per rank", "not evaluated", "SM 1200 MHz, 650.0 W, 83 C, "
                  "throttle 0x4, 1.01 ms before", "[ranks differ] RING/SIMPLE; rank 2: RING/LL"):
        check(words in text, "hand: the text report lacks %r" % words)


def random_cases(meridian, schema, work, seeds):
    for seed in range(seeds):
        rng = random.Random(seed)
        path = os.path.join(work, "rand%d.db" % seed)
        random_run(path, schema, rng)
        d, _ = report(meridian, path, work, "rand%d" % seed)
        if d is not None and not compare("seed %d" % seed, d["why"], oracle(path)):
            print("analysis_why: seed %d differs (database kept: %s)" % (seed, path))
    # more steps than the text lists: the 64 costliest, in step order
    path = os.path.join(work, "many.db")
    random_run(path, schema, random.Random(1000), nsteps=80)
    d, text = report(meridian, path, work, "many")
    if d is not None and compare("80 steps", d["why"], oracle(path)):
        part = text[text.index("== Straggler cost"):text.index("== Why ranks")]
        listed = [int(ln.split()[0]) for ln in part.splitlines()
                  if re.match(r"^  [0-9]+ ", ln)]
        floor = sorted((s["cost_ns"] for s in d["why"]["step_costs"]), reverse=True)[63]
        want = [s["index"] for s in d["why"]["step_costs"] if s["cost_ns"] >= floor][:64]
        check(listed == want and "the 64 costliest of 80 steps" in part,
              "80 steps: the text lists %s, want %s" % (listed, want))


def quickstart(meridian, fixture, work):
    db = os.path.join(work, "quickstart.db")
    with gzip.open(fixture) as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    d, text = report(meridian, db, work, "quickstart")
    if d is None:
        return
    why = d["why"]
    sc = why["step_costs"]
    check(len(sc) == 50, "quickstart: %d steps, want 50" % len(sc))
    for s in sc:
        if s["index"] % 5 == 0:
            check(s["straggler"] == 1 and s["cause"] == "compute took longer" and
                  s["cost_ns"] >= 1_800_000,
                  "quickstart: slowed step %d: straggler %s, cause %s, cost %d ns (want rank 1, "
                  "compute took longer, >= 1.8 ms)" % (s["index"], s["straggler"], s["cause"],
                                                      s["cost_ns"]))
        else:
            check(s["cost_ns"] < 600_000, "quickstart: step %d cost %d ns, want < 0.6 ms" %
                  (s["index"], s["cost_ns"]))
    top = {}
    for e in why["late_events"]:
        if e["step"] % 5 == 0 and e["late_ns"] > top.get(e["step"], {}).get("late_ns", -1):
            top[e["step"]] = e
    check(len(top) == 10 and all(e["kernel"] == "spin_kernel(unsigned long long)" and
                                 e["kernel_diff_ns"] >= 1_900_000 for e in top.values()),
          "quickstart: the slowed steps' largest late events do not name the spin kernel: %s" %
          [(e["step"], e["kernel"], e["kernel_diff_ns"]) for e in top.values()])
    check("rank 1 is repeatedly late because compute took longer" in text,
          "quickstart: the report does not name rank 1 repeatedly late for compute")
    # and the oracle agrees on every number of the real run
    compare("quickstart", why, oracle(db), tol_ns=4)


def steady_tier(meridian, work):
    """The H200 run as the steady tier stores it outside windows: no kernels, collectives
    timed by NCCL's channel times: the cost is still measured, the causes not evaluated."""
    db = os.path.join(work, "steady.db")
    shutil.copy(os.path.join(work, "quickstart.db"), db)
    con = sqlite3.connect(db)
    con.executescript("DROP TABLE kernels; DROP TABLE external_correlations;")
    con.close()
    d, text = report(meridian, db, work, "steady")
    if d is None:
        return
    for s in d["why"]["step_costs"]:
        check(s["kernel_ranks"] == 0, "steady: step %d has kernel shares" % s["index"])
        if s["index"] % 5 == 0:
            check(s["straggler"] == 1 and s["cause"] == "not evaluated" and
                  s["cost_ns"] >= 1_800_000, "steady: slowed step %s" % s)
    check(d["why"]["late_events_total"] > 0 and
          all(e["cause"] in ("not evaluated", "communication slower")
              for e in d["why"]["late_events"]), "steady: causes evaluated without kernels")
    check("not evaluated" in text and "n/e" in text and "no kernels traced" in text,
          "steady: the text does not say what was not evaluated")


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def side_files(path):
    return [path + s for s in ("-wal", "-shm", "-journal") if os.path.exists(path + s)]


def bad_input(meridian, fixture, work):
    src = os.path.join(work, "quickstart.db")
    newer = os.path.join(work, "v99.db")
    shutil.copy(src, newer)
    db = sqlite3.connect(newer)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    before = sha(newer)
    p = subprocess.run([meridian, "report", newer], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode != 0 and "schema version 99" in p.stderr,
          "schema 99: exit %d, stderr %r" % (p.returncode, p.stderr[-300:]))
    check(sha(newer) == before and not side_files(newer), "schema 99: the input was written")
    # an interrupted run: rank 1 stopped after step 30 (no Goodbye, nothing later stored)
    cut = os.path.join(work, "interrupted.db")
    shutil.copy(src, cut)
    db = sqlite3.connect(cut)
    (t,) = db.execute("SELECT n.start_ns FROM nvtx n JOIN strings s ON s.id = n.name_id "
                      "WHERE n.rank = 1 AND s.value = 'step 30'").fetchone()
    for table in ("kernels", "nccl_ops", "nvtx", "api_calls", "memcpys", "memsets", "syncs"):
        db.execute("DELETE FROM %s WHERE rank = 1 AND start_ns >= ?" % table, (t,))
    db.execute("UPDATE ranks SET goodbye = 0 WHERE rank = 1")
    db.commit()
    db.close()
    before = sha(cut)
    d, text = report(meridian, cut, work, "interrupted")
    check(sha(cut) == before and not side_files(cut), "interrupted: the input was written")
    if d is not None:
        sc = d["why"]["step_costs"]
        check(len(sc) == 50, "interrupted: %d steps" % len(sc))
        bad = [s["index"] for s in sc[:30] if s["index"] % 5 == 0 and s["straggler"] != 1]
        check(not bad, "interrupted: slowed steps before the cut without rank 1: %s" % bad)
        check(all(s["straggler"] == -1 and s["cost_ns"] == 0 for s in sc[30:]),
              "interrupted: steps after the cut (rank 0 alone) have a cost: %s" % sc[30:32])
        compare("interrupted", d["why"], oracle(cut), tol_ns=4)


def main():
    args = sys.argv[1:]
    seeds = 25
    if "--seeds" in args:
        i = args.index("--seeds")
        seeds = int(args[i + 1])
        del args[i:i + 2]
    meridian, schema_path, fixture, work = args
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(schema_path) as f:
        schema = f.read()
    hand_case(meridian, schema, work)
    random_cases(meridian, schema, work, seeds)
    quickstart(meridian, fixture, work)
    steady_tier(meridian, work)
    bad_input(meridian, fixture, work)
    if fails:
        print("analysis_why: %d failure(s)" % len(fails))
        sys.exit(1)
    print("analysis_why: ok (hand-built run, %d random runs, the H200 run, bad input)" % seeds)


if __name__ == "__main__":
    main()
