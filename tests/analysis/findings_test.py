#!/usr/bin/env python3
"""analysis_findings: the findings (`meridian report`'s "Findings" section, `--json`'s
"findings"; aggregator/analyze/findings.c) against an oracle written here in Python over the
raw rows with sqlite3. The per-step shares, straggler costs and causes come from
why_test.py's oracle (its own matching and propagation, no code shared with why.c); every
rule's decision, evidence (ranks, steps, numbers) and status is recomputed here from the
definitions in aggregator/SCHEMA.md ("Findings").

  1. "trigger": a 3-rank run built so that every rule but clock_bound fires (GPU idle,
     pageable copies on rank 1, tiny kernels on rank 0, host syncs on ranks 0 and 2,
     exposed communication, rank 1 a straggler by compute, rank 2 on another protocol,
     rank 2 on another NCCL version), and the code agrees with the oracle;
  2. "trigger-clock": the same with rank 1's clock bound widened to 2 ms: clock_bound fires
     for rank 1 (it does not in "trigger"); env_records absent: env_mismatch not evaluated;
     an env_records table of another shape: that rule "not evaluated" with SQLite's message,
     the report still succeeds, the other rules unchanged;
  3. "quiet": a balanced run of the same shape where every rule is evaluated and none fires
     (rank 1 launches 250 tiny kernels per step, but its median kernel is 12 us; clock_bound:
     no late arrivals, not evaluated);
  4. "untraced": no kernels, copies, syncs or env rows (the steady tier outside windows, an
     older capture): those rules say "not evaluated", the straggler rule still fires;
  5. "windowed": the trigger run with windows over steps 1-2 (the steady tier): rates per
     traced step count the window steps only;
  6. tests/data/h200-quickstart.db.gz: equal to the oracle, and the straggler finding names
     rank 1 with cause "compute took longer";
  and in every case the text report lists the fired findings in the JSON's order and the
  rest on one line.

usage: findings_test.py MERIDIAN SCHEMA_SQL FIXTURE_GZ WORKDIR
"""
import re
import gzip
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import why_test  # noqa: E402  (its Run builder and its oracle of why.c)
import testlib  # noqa: E402

# aggregator/SCHEMA.md, "Findings" (written here again, not read from the code)
IDLE_SHARE, EXPOSED_SHARE = 0.20, 0.10
PAGEABLE_BYTES, PAGEABLE_COPIES = 1 << 20, 100
TINY_NS, TINY_PER_STEP = 10_000, 200
SYNC_STEP_SHARE = 0.5
STRAGGLER_SHARE = 0.02
CLOCK_RATIO = 0.5
MAX_STEPS_LISTED = 8
RULES = ["gpu_idle", "pageable_copies", "tiny_kernels", "sync_in_steps", "exposed_comm",
         "straggler", "algo_differ", "env_mismatch", "clock_bound"]
CAUSES = ["not evaluated", "compute took longer", "launched later (host bound)",
          "communication slower", "unexplained"]
NOT_COMPARED = {"hostname", "gpu.uuid", "env:CUDA_VISIBLE_DEVICES", "env:NVIDIA_VISIBLE_DEVICES",
                "env:OMPI_MCA_ess_base_vpid", "env:OMPI_MCA_orte_ess_vpid",
                "env:OMPI_MCA_orte_ess_node_rank", "env:OMPI_MCA_orte_local_daemon_uri",
                "env:OMPI_MCA_orte_jobfam_session_dir", "env:OMPI_MCA_orte_top_session_dir"}

fails = []


fail, check = testlib.reporter("analysis_findings", fails)


US, MS = 1000, 1_000_000
STEP = 10 * MS

# ---------------------------------------------------------------- building databases


def build(path, schema, quiet=False, traced=True, nsteps=4):
    """3 ranks on three clocks. trigger: rank 1's compute is 1 ms longer, short kernels
    leave the GPU idle most of the step and communication exposed, rank 0 launches 250
    tiny kernels per step, rank 2 runs LL. quiet: 8 ms of compute on every rank, arrivals
    together, 0.5 ms of communication."""
    run = why_test.Run(path, 3, [0, -1_000_000_000, 500_000_000])
    extra = dict(memcpys=[], syncs=[])
    for st in range(nsteps):
        t0 = 2_000_000_000 + st * 2 * STEP
        if quiet:
            comp = [8 * MS] * 3
        else:
            comp = [2 * MS, 3 * MS, 2 * MS]
        arrive = [t0 + 100 * US + c + 10 * US for c in comp]
        end = max(arrive) + (500 * US if quiet else 1 * MS)
        length = 9 * MS if quiet else STEP + st * MS  # idle grows with the step
        for r in range(3):
            run.step(r, st, t0, t0 + length)
            if traced:
                run.kernel(r, t0 + 100 * US, t0 + 100 * US + comp[r], "_Z4gemmPfS_")
            proto = "LL" if (r == 2 and not quiet) else "SIMPLE"
            run.coll(r, 0x77, r, 3, st, "AllReduce", 4 << 20, arrive[r], end, proto=proto,
                     traced=traced)
            if traced and r == 0 and not quiet:
                for k in range(250):
                    s = t0 + 5 * MS + k * 4 * US
                    run.kernel(r, s, s + 2 * US, "_Z11elementwisePf")
            if traced and r == 1 and quiet:  # > 200 tiny per step, but the median is 12 us
                for k in range(250):
                    s = t0 + 200 * US + k * 4 * US
                    run.kernel(r, s, s + 2 * US, "_Z11elementwisePf")
                for k in range(260):
                    s = t0 + 1200 * US + k * 20 * US
                    run.kernel(r, s, s + 12 * US, "_Z6medianPf")
        if not traced:
            continue
        # syncs (global times): rank 0 a stream sync in every step, rank 2 a context sync in
        # steps 0-2, rank 1 stream waits (not host-blocking) and one stream sync in step 0
        if not quiet:
            extra["syncs"].append((0, t0 + 6100 * US, t0 + 6150 * US, 3))
            if st < 3:
                extra["syncs"].append((2, t0 + 7 * MS, t0 + 7 * MS + 20 * US * (st + 1), 4))
            extra["syncs"].append((1, t0 + 6 * MS, t0 + 6 * MS + 5 * US, 2))
        if st == 0:
            extra["syncs"].append((1, t0 + 8400 * US, t0 + 8420 * US, 3))
        extra["syncs"].append((0, t0 + 9500 * US, t0 + 9600 * US, 3))  # after quiet's steps
        # copies: rank 1 pageable (120 per run), rank 2 three tiny pageable, rank 0 pinned
        for k in range(30 if not quiet else 0):
            s = t0 + 7 * MS + k * 10 * US
            extra["memcpys"].append((1, s, s + 3 * US, 256, 1, 1, 3))
        if st == 0 and not quiet:
            for k in range(3):
                extra["memcpys"].append((2, t0 + 8 * MS + k * US, t0 + 8 * MS + k * US + 500,
                                         4, 2, 3, 1))
        for k in range(12):
            s = t0 + 7500 * US + k * 10 * US
            extra["memcpys"].append((0, s, s + 4 * US, 4096, 1, 2, 3))
    run.write(schema)
    db = sqlite3.connect(path)
    off = run.off
    for r, s, e, b, ck, sk, dk in extra["memcpys"]:
        db.execute("INSERT INTO memcpys (rank, device, stream, start_ns, end_ns, correlation_id, "
                   "bytes, copy_kind, src_kind, dst_kind, peer_device) VALUES (?, 0, 7, ?, ?, 0, "
                   "?, ?, ?, ?, 0)", (r, s - off[r], e - off[r], b, ck, sk, dk))
    for r, s, e, t in extra["syncs"]:
        db.execute("INSERT INTO syncs (rank, context, stream, start_ns, end_ns, correlation_id, "
                   "type) VALUES (?, 1, 7, ?, ?, 0, ?)", (r, s - off[r], e - off[r], t))
    db.commit()
    db.close()


def add_env(path, rows):
    """The table h2's `env` kind writes (env_records(rank, key_id, value_id), strings ids),
    created here with exactly that shape; rows: (rank, key, value)."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE IF NOT EXISTS env_records (rank INTEGER NOT NULL, key_id INTEGER "
               "NOT NULL, value_id INTEGER)")
    nxt = db.execute("SELECT coalesce(max(id), 0) + 1 FROM strings").fetchone()[0]
    ids = dict((v, i) for i, v in db.execute("SELECT id, value FROM strings"))
    for r, k, v in rows:
        for s in (k, v):
            if s not in ids:
                ids[s] = nxt
                db.execute("INSERT INTO strings (id, value) VALUES (?, ?)", (nxt, s))
                nxt += 1
        db.execute("INSERT INTO env_records VALUES (?, ?, ?)", (r, ids[k], ids[v]))
    db.commit()
    db.close()


def env_rows(mismatch):
    rows = []
    for r in range(3):
        rows.append((r, "nccl_version", "2.27.7" if (mismatch and r == 2) else "2.28.3"))
        rows.append((r, "gpu%d.uuid" % r, "GPU-%04d" % r))  # names the GPU: not compared
        rows.append((r, "gpu%d.name" % r, "NVIDIA H200"))  # ordinals differ, model the same
        rows.append((r, "env:NCCL_ALGO", "Ring"))
        rows.append((r, "env:OMPI_MCA_ess_base_vpid", str(r)))  # per rank: not compared
        if r or not mismatch:  # absent on rank 0: absence differs from the majority
            rows.append((r, "env:NCCL_PROTO", "Simple"))
    return rows


# ---------------------------------------------------------------- the oracle


def union(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def measure(u):
    return sum(e - s for s, e in u)


def minus(u, v):
    """|u \\ v| for two unions."""
    inter = 0
    for s, e in u:
        for a, b in v:
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                inter += hi - lo
    return measure(u) - inter


def step_ranges(q, strings, ranks):
    """each rank's step ranges (local clock), the report's default names, nested skipped."""
    out = {r: [] for r in ranks}
    for r, s, e, nid in q("SELECT rank, start_ns, end_ns, name_id FROM nvtx WHERE kind IN "
                          "(1, 2) ORDER BY rank, start_ns"):
        name = strings.get(nid) or ""
        if r not in out or not (name.startswith("step") or name.startswith("ProfilerStep") or
                                (name.startswith("train") and "step" in name)):
            continue
        if out[r] and s < out[r][-1][1]:
            continue
        out[r].append((s, e))
    return out


def has_table(q, name):
    return q("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def expected(path):
    """{rule: (status, [finding dicts: ranks, steps, numbers, severity, extra])}"""
    w = why_test.oracle(path)
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    q = db.execute
    strings = dict(q("SELECT id, value FROM strings"))
    ranks = [r for (r,) in q("SELECT rank FROM ranks ORDER BY rank")]
    steps = step_ranges(q, strings, ranks)
    # steps whose kernels were traced: in a run with windows, the rank's window steps
    windowed = has_table(q, "windows") and q("SELECT count(*) FROM windows").fetchone()[0] > 0
    traced = {r: len(steps[r]) for r in ranks}
    if windowed:
        for r in ranks:
            n = q("SELECT coalesce(sum(last_step - first_step + 1), 0) FROM windows WHERE "
                  "rank = ?", (r,)).fetchone()[0]
            traced[r] = min(n, len(steps[r]))
    kern = {r: [] for r in ranks}
    linked = set()
    for r, c in q("SELECT e.rank, e.correlation_id FROM external_correlations e JOIN nccl_ops n "
                  "ON n.rank = e.rank AND n.launch_id = e.external_id AND n.launch_id != 0"):
        linked.add((r, c))
    for r, dev, s, e, c, nid in q("SELECT rank, device, start_ns, end_ns, correlation_id, "
                                  "name_id FROM kernels"):
        if (s == 0 and e == 0) or e < s or r not in kern:
            continue
        nm = strings.get(nid) or ""
        comm = (r, c) in linked or nm.startswith("nccl") or (nm.startswith("_Z") and
                                                             "nccl" in nm[:12])
        kern[r].append((dev, s, e, comm))
    out = {}

    # rules 1 and 5 from the per-step shares
    wsteps = w["steps"]
    for rule, key, thr in (("gpu_idle", "idle_ns", IDLE_SHARE),
                           ("exposed_comm", "exposed_ns", EXPOSED_SHARE)):
        if not wsteps:
            out[rule] = ("not evaluated", [])
            continue
        ev = [(i, st[key] / st["kernel_span_ns"]) for i, st in enumerate(wsteps)
              if st["kernel_ranks"] > 0 and st["kernel_span_ns"] > 0]
        if not ev:
            out[rule] = ("not evaluated", [])
            continue
        over = [x for x in ev if x[1] > thr]
        if 2 * len(over) <= len(ev):
            out[rule] = ("not fired", [])
            continue
        tot = sum(wsteps[i][key] for i, _ in ev) / sum(wsteps[i]["kernel_span_ns"] for i, _ in ev)
        worst = sorted(over, key=lambda x: (-x[1], x[0]))
        fr = []
        for r in ranks:
            span = busy = exposed = 0
            for dev in sorted({k[0] for k in kern[r]}):
                ks = [k for k in kern[r] if k[0] == dev]
                span += max(k[2] for k in ks) - min(k[1] for k in ks)
                busy += measure(union([(k[1], k[2]) for k in ks]))
                exposed += minus(union([(k[1], k[2]) for k in ks if k[3]]),
                                 union([(k[1], k[2]) for k in ks if not k[3]]))
            if span > 0 and ((span - busy) if rule == "gpu_idle" else exposed) / span > thr:
                fr.append(r)
        out[rule] = ("fired", [dict(ranks=fr, steps=[i for i, _ in worst[:MAX_STEPS_LISTED]],
                                    severity="high" if tot >= 2 * thr else "medium",
                                    numbers=dict(share=tot, worst_share=worst[0][1],
                                                 steps_over=len(over),
                                                 steps_evaluated=len(ev)))])

    # rule 2: pageable copies
    if q("SELECT count(*) FROM memcpys").fetchone()[0] == 0:
        out["pageable_copies"] = ("not evaluated", [])
    else:
        fr, n, b, t = [], 0, 0, 0
        for r, cn, cb, ct in q("SELECT rank, count(*), sum(bytes), sum(end_ns - start_ns) FROM "
                               "memcpys WHERE src_kind = 1 OR dst_kind = 1 GROUP BY rank "
                               "ORDER BY rank"):
            if cb >= PAGEABLE_BYTES or cn >= PAGEABLE_COPIES:
                fr.append(r)
                n, b, t = n + cn, b + cb, t + ct
        out["pageable_copies"] = ("fired", [dict(
            ranks=fr, steps=[], severity="high" if b >= 64 * PAGEABLE_BYTES else "medium",
            numbers=dict(copies=n, bytes=b, time_ns=t))]) if fr else ("not fired", [])

    # rule 3: tiny kernels per traced step
    if not any(kern[r] for r in ranks):
        out["tiny_kernels"] = ("not evaluated", [])
    else:
        fr, tiny_sum, all_sum, worst, evaluated = [], 0, 0, 0.0, 0
        for r in ranks:
            if not kern[r] or not traced[r]:
                continue
            evaluated += 1
            tiny = sum(1 for k in kern[r] if k[2] - k[1] < TINY_NS)
            rate = tiny / traced[r]
            if 2 * tiny > len(kern[r]) and rate > TINY_PER_STEP:
                fr.append(r)
                tiny_sum, all_sum, worst = tiny_sum + tiny, all_sum + len(kern[r]), max(worst, rate)
        if evaluated == 0:
            out["tiny_kernels"] = ("not evaluated", [])
        else:
            out["tiny_kernels"] = ("fired", [dict(
                ranks=fr, steps=[], severity="high" if worst > 4 * TINY_PER_STEP else "medium",
                numbers=dict(tiny_kernels=tiny_sum, kernels=all_sum,
                             tiny_per_step=worst))]) if fr else ("not fired", [])

    # rule 4: host syncs (event 1, stream 3, context 4) starting inside the rank's steps
    if q("SELECT count(*) FROM syncs").fetchone()[0] == 0 or not any(steps.values()):
        out["sync_in_steps"] = ("not evaluated", [])
    else:
        per = {r: [0, set(), 0] for r in ranks}
        blocked = {}
        for r, s, e in q("SELECT rank, start_ns, end_ns FROM syncs WHERE type IN (1, 3, 4)"):
            for k, (a, b) in enumerate(steps.get(r, [])):
                if a <= s < b:
                    per[r][0] += 1
                    per[r][1].add(k)
                    per[r][2] += e - s
                    blocked[k] = blocked.get(k, 0) + e - s
        fr, n, wth, ev, bl = [], 0, 0, 0, 0
        for r in ranks:
            if not traced[r]:
                continue
            if len(per[r][1]) > SYNC_STEP_SHARE * traced[r]:
                fr.append(r)
                n, wth, ev, bl = (n + per[r][0], wth + len(per[r][1]), ev + traced[r],
                                  bl + per[r][2])
        worst = sorted((k for k in blocked if blocked[k] > 0), key=lambda k: (-blocked[k], k))
        out["sync_in_steps"] = ("fired", [dict(
            ranks=fr, steps=worst[:MAX_STEPS_LISTED], severity="medium",
            numbers=dict(syncs=n, blocked_ns=bl, steps_with_sync=wth,
                         steps_evaluated=ev))]) if fr else ("not fired", [])

    # rule 6: stragglers from the per-step straggler, cost and cause
    if not wsteps:
        out["straggler"] = ("not evaluated", [])
    else:
        measured = sum(st["measured_ns"] for st in wsteps if st["measured_ns"] >= 0)
        fs = []
        for r in ranks:
            mine = [i for i, st in enumerate(wsteps) if st["straggler"] == r]
            cost = sum(wsteps[i]["cost_ns"] for i in mine)
            if not mine or cost / measured < STRAGGLER_SHARE:
                continue
            counts = [sum(1 for i in mine if wsteps[i]["cause"] == c) for c in CAUSES]
            cause = CAUSES[counts.index(max(counts))]
            fs.append(dict(ranks=[r], severity="high" if cost / measured >= 0.10 else "medium",
                           steps=sorted(mine, key=lambda i: (-wsteps[i]["cost_ns"], i))
                           [:MAX_STEPS_LISTED], cause=cause,
                           numbers=dict(straggler_steps=len(mine), cost_ns=cost,
                                        cost_share=cost / measured,
                                        late_ns=sum(wsteps[i]["straggler_late_ns"]
                                                    for i in mine))))
        out["straggler"] = ("fired", fs) if fs else ("not fired", [])

    # rule 7: algorithm / protocol per (communicator, function, size)
    groups = {}
    for r, comm, seq, fid, nb, al, pr in q("SELECT rank, comm_hash, seq, func_id, bytes, "
                                           "algo_id, proto_id FROM nccl_ops WHERE is_p2p = 0"):
        groups.setdefault((comm, seq, fid), []).append((r, nb, strings.get(al) or "?",
                                                        strings.get(pr) or "?"))
    if not groups:
        out["algo_differ"] = ("not evaluated", [])
    else:
        stat = {}
        for (comm, seq, fid), rows in groups.items():
            if len(rows) < 2:
                continue
            key = (comm & 0xffffffffffffffff, strings[fid], max(x[1] for x in rows))
            g = stat.setdefault(key, dict(differ=False, choice={}, n=0))
            g["n"] += 1
            if len({(x[2], x[3]) for x in rows}) > 1:
                g["differ"] = True
            for r, _, al, pr in rows:
                c = g["choice"].setdefault(r, {})
                c[al + "/" + pr] = c.get(al + "/" + pr, 0) + 1
        fs = []
        for key in sorted(stat):
            g = stat[key]
            if not g["differ"]:
                continue
            best = {r: sorted(c.items(), key=lambda x: (-x[1], x[0]))[0][0]
                    for r, c in g["choice"].items()}
            low = min(best)
            fs.append(dict(ranks=sorted(r for r in best if best[r] != best[low]), steps=[],
                           severity="medium", numbers=dict(bytes=key[2], instances=g["n"])))
        out["algo_differ"] = ("fired", fs) if fs else ("not fired", [])

    # rule 8: environment, the rules of aggregator/analyze/fingerprint.h: ranks with any row
    # are compared; gpu<N>.<field> as gpu.<field>; keys that name a rank or node are not
    # compared; absence is a value; the majority is the most common value, a tie going to a
    # present value, then the first in byte order
    if not has_table(q, "env_records") or \
            q("SELECT count(*) FROM env_records").fetchone()[0] == 0:
        out["env_mismatch"] = ("not evaluated", [])
    else:
        keys, ranks = {}, set()
        for r, k, v in q("SELECT rank, key_id, value_id FROM env_records"):
            ranks.add(r)
            name = re.sub(r"^gpu[0-9]+\.", "gpu.", strings[k])
            keys.setdefault(name, {}).setdefault(r, set()).add(strings.get(v, "") or "")
        fs = []
        for k in sorted(keys, key=lambda x: x.encode()):
            if k in NOT_COMPARED:
                continue
            vals = {r: ",".join(sorted(keys[k][r], key=lambda x: x.encode()))
                    if r in keys[k] else None for r in ranks}
            count = {}
            for v in vals.values():
                count[v] = count.get(v, 0) + 1
            maj = sorted(count.items(), key=lambda x: (-x[1], x[0] is None,
                                                       (x[0] or "").encode()))[0]
            if maj[1] == len(vals):
                continue
            fs.append(dict(ranks=sorted(r for r, v in vals.items() if v != maj[0]), steps=[],
                           severity="medium", key=k,
                           numbers=dict(ranks_majority=maj[1], ranks_differ=len(vals) - maj[1])))
        out["env_mismatch"] = ("fired", fs) if fs else ("not fired", [])

    # rule 9: clock bound vs the median lateness of each late rank
    bound = {r: 0 for r in ranks}
    for r, b in q("SELECT rank, max(error_bound_ns) FROM clock_models GROUP BY rank"):
        bound[r] = b
    has_kern = {r: bool(kern[r]) for r in ranks}
    for r, b in q("SELECT rank, max(error_bound_ns) FROM gpu_timer_models GROUP BY rank"):
        if not has_kern.get(r, True) or windowed:
            bound[r] += b
    events = list(w["events"].values())
    if not events:
        out["clock_bound"] = ("not evaluated", [])
    else:
        fs = []
        for r in ranks:
            mine = [e for e in events if e["rank"] == r]
            if not mine:
                continue
            pair = max(bound[r] + bound[e["ref_rank"]] for e in mine)
            lates = sorted(e["late_ns"] for e in mine)
            med = lates[(len(lates) - 1) // 2]
            if pair > CLOCK_RATIO * med:
                fs.append(dict(ranks=[r], steps=[], severity="high" if pair >= med else "medium",
                               numbers=dict(bound_ns=pair, median_late_ns=med,
                                            late_events=len(mine))))
        out["clock_bound"] = ("fired", fs) if fs else ("not fired", [])
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
        return json.load(f)["findings"], p.stdout


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def compare(tag, got, want, text):
    """got: the JSON array; want: expected(); text: the text report."""
    rules = [x["rule"] for x in got]
    check(sorted(set(rules)) == sorted(RULES), "%s: rules in the JSON %r" % (tag, rules))
    sev = {"high": 3, "medium": 2, "low": 1}
    fired = [x for x in got if x["status"] == "fired"]
    check(got[:len(fired)] == fired, "%s: fired findings come first" % tag)
    order = [sev[x["severity"]] for x in fired]
    check(order == sorted(order, reverse=True), "%s: fired not by severity: %r" % (tag, order))
    for rule in RULES:
        mine = [x for x in got if x["rule"] == rule]
        status, wf = want[rule]
        if not check(all(x["status"] == status for x in mine) and mine,
                     "%s: %s status %r, oracle %r (%s)" % (tag, rule, [x["status"] for x in mine],
                                                          status, mine and mine[0]["note"])):
            continue
        if status != "fired":
            check(len(mine) == 1 and mine[0]["evidence"] is None,
                  "%s: %s: one entry without evidence when %s" % (tag, rule, status))
            continue
        check(len(mine) == len(wf), "%s: %s: %d findings, oracle %d" % (tag, rule, len(mine),
                                                                          len(wf)))
        mine = sorted(mine, key=lambda x: x["evidence"]["ranks"])
        wf = sorted(wf, key=lambda x: x["ranks"])
        for g, e in zip(mine, wf):
            ev = g["evidence"]
            check(ev["ranks"] == e["ranks"], "%s: %s ranks %r, oracle %r" % (tag, rule, ev["ranks"],
                                                                            e["ranks"]))
            check(ev["steps"] == e["steps"], "%s: %s ranks %r steps %r, oracle %r"
                  % (tag, rule, e["ranks"], ev["steps"], e["steps"]))
            check(g["severity"] == e["severity"], "%s: %s severity %r, oracle %r"
                  % (tag, rule, g["severity"], e["severity"]))
            check(set(ev["numbers"]) == set(e["numbers"]) and
                  all(close(ev["numbers"][k], e["numbers"][k]) for k in e["numbers"]),
                  "%s: %s ranks %r numbers %r, oracle %r" % (tag, rule, e["ranks"],
                                                             ev["numbers"], e["numbers"]))
            if "cause" in e:
                check(g["title"].endswith("; cause: " + e["cause"]), "%s: %s title %r, cause %r"
                      % (tag, rule, g["title"], e["cause"]))
            if "key" in e:
                check(g["title"].startswith(e["key"] + " "), "%s: env title %r, key %r"
                      % (tag, g["title"], e["key"]))
            check(g["advice"] != "" and ev["detail"] != "", "%s: %s advice/detail" % (tag, rule))
    # the text section: fired in the JSON's order, then one line of the rest
    sec = text.split("\n== Findings\n", 1)[1].split("\n== ", 1)[0].splitlines()
    heads = [l for l in sec if l.startswith("  [")]
    check(heads == ["  [%s] %s: %s" % (x["severity"], x["rule"], x["title"]) for x in fired],
          "%s: text findings %r" % (tag, heads))
    rest = [l for l in sec if l.startswith("  not ")]
    nf = [x["rule"] for x in got if x["status"] == "not fired"]
    ne = [x["rule"] for x in got if x["status"] == "not evaluated"]
    if nf or ne:
        ok = len(rest) == 1 and all(" %s" % r in rest[0] for r in nf + ne)
        if nf:
            ok = ok and rest[0].startswith("  not fired: " + nf[0])
        check(ok, "%s: text rest line %r (not fired %r, not evaluated %r)" % (tag, rest, nf, ne))
    return {x["rule"]: x["status"] for x in got}


def case(meridian, work, tag, path):
    got, text = report(meridian, path, work, tag)
    if got is None:
        return {}, []
    return compare(tag, got, expected(path), text), got


def main():
    meridian, schema_path, fixture, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(schema_path) as f:
        schema = f.read()

    trig = os.path.join(work, "trigger.db")
    build(trig, schema)
    add_env(trig, env_rows(True))
    st, _ = case(meridian, work, "trigger", trig)
    for rule in RULES:
        want = "not fired" if rule == "clock_bound" else "fired"
        check(st.get(rule) == want, "trigger: %s is %r, built to be %s" % (rule, st.get(rule),
                                                                          want))

    trig2 = os.path.join(work, "trigger-clock.db")
    build(trig2, schema)
    db = sqlite3.connect(trig2)
    db.execute("DROP TABLE IF EXISTS env_records")  # a run recorded before the env kind
    db.execute("UPDATE clock_models SET error_bound_ns = 2000000 WHERE rank = 1")
    db.commit()
    db.close()
    st, got = case(meridian, work, "trigger-clock", trig2)
    check(st.get("clock_bound") == "fired", "trigger-clock: clock_bound %r" % st.get("clock_bound"))
    check(st.get("env_mismatch") == "not evaluated", "trigger-clock: env_mismatch %r without "
          "env_records" % st.get("env_mismatch"))
    ne = [x["note"] for x in got if x["rule"] == "env_mismatch"]
    check(ne and "env" in ne[0] and "not traced" in ne[0], "trigger-clock: env note %r" % ne)

    # an env_records of another shape (text columns): that rule alone is not evaluated, with
    # SQLite's message; the report still succeeds and the other rules are unchanged
    odd = os.path.join(work, "odd-env.db")
    shutil.copyfile(trig2, odd)
    db = sqlite3.connect(odd)
    db.execute("CREATE TABLE env_records (rank INTEGER, key TEXT, value TEXT)")
    db.execute("INSERT INTO env_records VALUES (0, 'nccl_version', '2.28.3')")
    db.commit()
    db.close()
    got2, _ = report(meridian, odd, work, "odd-env")
    if got2 is not None:
        st2 = {x["rule"]: x["status"] for x in got2}
        note = [x["note"] for x in got2 if x["rule"] == "env_mismatch"]
        check(st2.get("env_mismatch") == "not evaluated" and note and
              note[0].startswith("query failed: "), "odd-env: env_mismatch %r %r"
              % (st2.get("env_mismatch"), note))
        check({k: v for k, v in st2.items() if k != "env_mismatch"} ==
              {k: v for k, v in st.items() if k != "env_mismatch"},
              "odd-env: the other rules changed: %r vs %r" % (st2, st))

    quiet = os.path.join(work, "quiet.db")
    build(quiet, schema, quiet=True)
    add_env(quiet, env_rows(False))
    st, _ = case(meridian, work, "quiet", quiet)
    for rule in RULES:
        want = "not evaluated" if rule == "clock_bound" else "not fired"
        check(st.get(rule) == want, "quiet: %s is %r, built to be %s" % (rule, st.get(rule), want))

    bare = os.path.join(work, "untraced.db")
    build(bare, schema, traced=False)
    add_env(bare, [])
    st, got = case(meridian, work, "untraced", bare)
    for rule in ("gpu_idle", "pageable_copies", "tiny_kernels", "sync_in_steps", "exposed_comm",
                 "env_mismatch"):
        check(st.get(rule) == "not evaluated", "untraced: %s is %r" % (rule, st.get(rule)))
    notes = {x["rule"]: x["note"] for x in got}
    for rule, kind in (("pageable_copies", "memcpy"), ("sync_in_steps", "sync"),
                       ("tiny_kernels", "kernel"), ("gpu_idle", "kernel"),
                       ("env_mismatch", "env")):
        check("%s was not traced" % kind in notes.get(rule, ""),
              "untraced: %s note %r names %s" % (rule, notes.get(rule), kind))
    check(st.get("straggler") == "fired" and st.get("algo_differ") == "fired",
          "untraced: straggler %r, algo_differ %r (NCCL's own times still tell)"
          % (st.get("straggler"), st.get("algo_differ")))

    # the steady tier: windows over steps 1-2 of each rank (table windows as the finalize
    # writes it): per-step rates count those 2 steps, GPU timer bounds join the clock's
    win = os.path.join(work, "windowed.db")
    build(win, schema)
    db = sqlite3.connect(win)
    db.execute("CREATE TABLE windows (rank INTEGER NOT NULL, first_step INTEGER NOT NULL, "
               "last_step INTEGER NOT NULL, detach_step INTEGER NOT NULL, reason TEXT NOT NULL, "
               "start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, attach_ns INTEGER NOT NULL, "
               "detach_ns INTEGER, flush_ns INTEGER NOT NULL, kernels INTEGER NOT NULL)")
    for r in range(3):
        db.execute("INSERT INTO windows VALUES (?, 1, 2, 3, 'range', 0, 1, 1000, 1000, 0, 0)",
                   (r,))
    db.commit()
    db.close()
    st, got = case(meridian, work, "windowed", win)
    tiny = [x for x in got if x["rule"] == "tiny_kernels" and x["status"] == "fired"]
    check(tiny and close(tiny[0]["evidence"]["numbers"]["tiny_per_step"], 500),
          "windowed: 1000 tiny kernels over 2 window steps: %r" % tiny)

    qs = os.path.join(work, "h200.db")
    with gzip.open(fixture, "rb") as src, open(qs, "wb") as dst:
        shutil.copyfileobj(src, dst)
    st, got = case(meridian, work, "h200", qs)
    strag = [x for x in got if x["rule"] == "straggler" and x["status"] == "fired"]
    check(strag and strag[0]["evidence"]["ranks"] == [1] and
          strag[0]["title"].endswith("; cause: compute took longer"),
          "h200: the first straggler finding %r" % (strag[:1],))

    if fails:
        print("analysis_findings: %d failure(s)" % len(fails))
        sys.exit(1)
    print("analysis_findings: ok (trigger, trigger-clock, quiet, untraced, windowed, the H200 "
          "run)")


if __name__ == "__main__":
    main()
