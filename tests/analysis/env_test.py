#!/usr/bin/env python3
"""analysis_env: the environment fingerprint compared across ranks (aggregator/analyze/
fingerprint.c) in `meridian report` (section "Environment") and `meridian report --json`
("environment"), against an oracle written here from the rules in fingerprint.h, over the
raw env_records rows this script inserts:
- 5 ranks, rank 3 with another NCCL_ALGO and rank 2 without cuda_runtime_version: exactly
  those two (rank, key) pairs are flagged, with the majority value and count; hostnames,
  GPU UUIDs and CUDA_VISIBLE_DEVICES that differ per rank are not; GPU keys of different
  ordinals (gpu0 on rank 0, gpu1 on rank 1, ...) compare as one key;
- every rank identical: "all 5 ranks identical (K keys)"; no env rows: no section at all
  (a capture older than the fingerprint) and no "environment" in the JSON;
- 40 random cases (2..9 ranks, values drawn from small pools so that ties, absent keys,
  empty values, multi-GPU ranks and identity keys all occur) against the oracle.

usage: env_test.py --meridian M --schema SCHEMA_FULL_SQL --workdir DIR
"""
import argparse
import collections
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import html_report_test as gen  # noqa: E402
import testlib  # noqa: E402

IDENTITY = {"hostname", "gpu.uuid", "env:CUDA_VISIBLE_DEVICES", "env:NVIDIA_VISIBLE_DEVICES",
            "env:OMPI_MCA_ess_base_vpid", "env:OMPI_MCA_orte_ess_vpid",
            "env:OMPI_MCA_orte_ess_node_rank", "env:OMPI_MCA_orte_local_daemon_uri",
            "env:OMPI_MCA_orte_jobfam_session_dir", "env:OMPI_MCA_orte_top_session_dir"}


fail, check = testlib.reporter("analysis_env")


def compared(key):
    """gpu<N>.<field> -> gpu.<field>; other keys unchanged."""
    if key.startswith("gpu") and "." in key:
        n, rest = key[3:].split(".", 1)
        if n.isdigit():
            return "gpu." + rest
    return key


def oracle(rows):
    """rows: (rank, key, value) -> (nranks, nkeys, {key: (majority, count, {rank: value})})
    where value None = absent."""
    ranks = sorted({r for r, _, _ in rows})
    per = collections.defaultdict(lambda: collections.defaultdict(set))
    for r, k, v in rows:
        ck = compared(k)
        if ck not in IDENTITY:
            per[ck][r].add(v)
    out = {}
    for k, byrank in per.items():
        value = {r: ",".join(sorted(byrank[r], key=lambda s: s.encode())) if r in byrank
                 else None for r in ranks}
        counts = collections.Counter(value.values())
        # most ranks; a tie: a present value before absence, then byte order
        maj = min(counts, key=lambda v: (-counts[v], v is None, (v or "").encode()))
        diffs = {r: v for r, v in value.items() if v != maj}
        if diffs:
            out[k] = (maj, counts[maj], diffs)
    return len(ranks), len(per), out


def fill(db, rows):
    con = sqlite3.connect(db)
    con.execute("DELETE FROM env_records")
    ids = {}
    base = con.execute("SELECT COALESCE(MAX(id), 0) FROM strings").fetchone()[0]
    for s in sorted({k for _, k, _ in rows} | {v for _, _, v in rows if v != ""}):
        ids[s] = base + 1 + len(ids)
        con.execute("INSERT INTO strings (id, value) VALUES (?, ?)", (ids[s], s))
    ids[""] = 0  # the empty string travels as id 0
    con.executemany("INSERT INTO env_records (rank, key_id, value_id) VALUES (?, ?, ?)",
                    [(r, ids[k], ids[v]) for r, k, v in rows])
    con.commit()
    con.close()


def report(meridian, db, *extra):
    p = subprocess.run([meridian, "report", *extra, db], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    check(p.returncode == 0, "meridian report %s exited %d: %s" % (extra, p.returncode,
                                                                  p.stderr))
    return p.stdout


def env_section(out):
    parts = out.split("\n== Environment")
    if len(parts) == 1:
        return None
    return parts[1].split("\n== ")[0]


def quoted(v):
    return "absent" if v is None else '"%s"' % v


def check_case(meridian, base, work, rows, name):
    db = os.path.join(work, name + ".db")
    shutil.copy(base, db)
    fill(db, rows)
    nranks, nkeys, want = oracle(rows)
    text = env_section(report(meridian, db))
    rep = json.loads(report(meridian, db, "--json"))
    if not rows:
        check(text is None, "%s: an Environment section without env rows:%s" % (name, text))
        check("environment" not in rep, "%s: JSON environment without env rows" % name)
        return want
    check(text is not None, "%s: no Environment section" % name)
    env = rep.get("environment")
    check(env is not None, "%s: no JSON environment" % name)
    check((env["ranks"], env["keys"], env["identical"]) == (nranks, nkeys, not want),
          "%s: JSON ranks/keys/identical %r, oracle %r" % (name, env, (nranks, nkeys)))
    got = {d["key"]: (d["majority"], d["majority_ranks"],
                      {x["rank"]: x["value"] for x in d["ranks"]}) for d in env["differences"]}
    check(got == want, "%s: JSON differences\n%r\noracle\n%r" % (name, got, want))
    check([d["key"] for d in env["differences"]] == sorted(want, key=lambda k: k.encode()),
          "%s: JSON keys not in byte order" % name)
    lines = [l for l in text.splitlines()[1:] if l.strip()]
    if not want:
        check(lines == ["  all %d ranks identical (%d keys)" % (nranks, nkeys)],
              "%s: identical ranks shown as %r" % (name, lines))
        return want
    expect = ["  %d of %d keys differ across %d ranks; the ranks that differ from the majority:"
              % (len(want), nkeys, nranks)]
    for k in sorted(want, key=lambda k: k.encode()):
        maj, count, diffs = want[k]
        expect.append("  %s: majority %s on %d of %d ranks" % (k, quoted(maj), count, nranks))
        ranks = sorted(diffs)
        expect += ["    rank %d: %s" % (r, quoted(diffs[r])) for r in ranks[:16]]
        if len(ranks) > 16:
            expect.append("    ... and %d more ranks (meridian report --json lists them)"
                          % (len(ranks) - 16))
    check(lines == expect, "%s: text section\n%s\nexpected\n%s" % (name, "\n".join(lines),
                                                                   "\n".join(expect)))
    return want


def uniform(nranks):
    rows = []
    for r in range(nranks):
        rows += [(r, "hostname", "node%d" % (r // 2)), (r, "driver_version", "13.1"),
                 (r, "cuda_runtime_version", "13.0"), (r, "nccl_version", "2.28.5"),
                 (r, "gpu%d.name" % r, "NVIDIA H200"), (r, "gpu%d.uuid" % r, "GPU-%04d" % r),
                 (r, "gpu%d.memory_mib" % r, "143771"), (r, "env:NCCL_ALGO", "Ring"),
                 (r, "env:CUDA_VISIBLE_DEVICES", str(r)), (r, "env:NCCL_DEBUG", "")]
    return rows


def random_rows(rng):
    nranks = rng.randint(2, 9)
    keys = ["driver_version", "env:NCCL_ALGO", "env:NCCL_PROTO", "gpu0.name", "gpu1.name",
            "gpu3.memory_mib", "hostname", "env:CUDA_VISIBLE_DEVICES", "env:X", "mpi_library",
            "env:OMPI_MCA_orte_ess_node_rank"]
    pools = ["a", "b", "c", "", "a,b", "B"]
    rows = []
    for r in range(nranks):
        for k in rng.sample(keys, rng.randint(0, len(keys))):
            rows.append((r, k, rng.choice(pools[:rng.randint(1, len(pools))])))
        if not any(x[0] == r for x in rows):
            rows.append((r, "hostname", "h%d" % r))  # every rank has a fingerprint
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meridian", required=True)
    ap.add_argument("--schema", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    base = os.path.join(args.workdir, "base.db")
    gen.build(base, args.schema, 9, 2, 1, {}, seed=3)

    check_case(args.meridian, base, args.workdir, [], "none")
    rows = [x for x in uniform(9) if x[0] < 5]
    want = check_case(args.meridian, base, args.workdir, rows, "identical")
    check(want == {}, "identical: oracle flags %r" % want)
    rows = [(r, k, "Tree" if (r, k) == (3, "env:NCCL_ALGO") else v) for r, k, v in rows
            if (r, k) != (2, "cuda_runtime_version")]
    want = check_case(args.meridian, base, args.workdir, rows, "two_differ")
    check(want == {"env:NCCL_ALGO": ("Ring", 4, {3: "Tree"}),
                   "cuda_runtime_version": ("13.0", 4, {2: None})},
          "two_differ: the oracle itself disagrees with the hand-derived answer: %r" % want)
    rng = random.Random(11)
    flagged = 0
    for i in range(40):
        flagged += len(check_case(args.meridian, base, args.workdir, random_rows(rng),
                                  "random%d" % i))
    check(flagged > 40, "random cases flagged only %d keys: the cases are too tame" % flagged)
    print("analysis_env: ok: hand-built, identical, no rows and 40 random cases (%d keys "
          "flagged) agree with the oracle" % flagged)


if __name__ == "__main__":
    main()
