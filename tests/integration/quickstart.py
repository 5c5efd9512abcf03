"""integration_quickstart_replay: the README quick start's job, on a machine without a GPU.

Runs deploy/quickstart.sh itself on the built binaries (--skip-build: no apt-get, no cmake;
--replay: the no-GPU path even where GPUs exist): `meridian profile` with a local meridiand
around `mpirun -np 2 meridian replay --from-env tests/data/ref-rank%r.mrdcap`, i.e. the
reference workload recorded on the 2 x H200 host, one capture per rank. The JSON report of
the database it leaves must show what the recorded job did: 2 ranks, 110 collectives matched
on both ranks, every event each rank replayed stored, nothing dropped, rank 1 (slowed on
every 10th step) ranked first among the stragglers. It is run twice into the same folder:
the second run must replace the first (--overwrite), not add to it. Finally the choice of job
is checked with a stand-in nvidia-smi (--dry-run): GPUs and a built ref_workload give
`mpirun -np <GPUs, at most 8> ... ref_workload` with the README's options.
"""
import json
import os
import re
import stat
import subprocess

import itest

args = itest.parse_args([("--quickstart", {"required": True}),
                         ("--meridian", {"required": True}),
                         ("--build-dir", {"required": True})])
wd = itest.Workdir(args, "quickstart")
out = wd.file("qs")
db = os.path.join(out, "quickstart.db")
env = dict(os.environ, MRD_BUILD_DIR=args.build_dir)
for k in [k for k in env if k.startswith("MERIDIAN_")]:
    del env[k]  # a profiled job's variables must come from meridian profile alone


def quickstart(*extra, env=env, timeout=90):
    cmd = ["bash", args.quickstart, "--skip-build", "--out", out] + list(extra)
    itest.log("run: " + " ".join(cmd))
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        itest.fail("quickstart.sh did not finish within %d s" % timeout)
    return p.returncode, p.stdout


def check_run(n):
    rc, text = quickstart("--replay")
    print("\n".join(text.splitlines()[:8] + ["..."] + text.splitlines()[-8:]), flush=True)
    if rc != 0:
        print(text)
        itest.fail("run %d: quickstart.sh exited %d" % (n, rc))
    replayed = dict((int(m.group(1)), int(m.group(2))) for m in re.finditer(
        r"^meridian replay: rank (\d+): \S+ref-rank\1\.mrdcap: (\d+) events in \d+ batches "
        r"in \S+ s, all acknowledged$", text, re.M))
    if sorted(replayed) != [0, 1]:
        itest.fail("run %d: ranks that replayed their own capture: %s" % (n, sorted(replayed)))
    for section in ("== Collectives matched across ranks", "== Communication / compute overlap",
                    "== Stragglers", "quickstart: top straggler in the steps: rank 1 "):
        if section not in text:
            itest.fail("run %d: the output has no %r" % (n, section))
    p = subprocess.run([args.meridian, "report", db, "--json"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    if p.returncode != 0:
        itest.fail("meridian report --json: rc %d: %s" % (p.returncode, p.stderr))
    rep = json.loads(p.stdout)
    ranks = dict((r["rank"], r) for r in rep["ranks"])
    coll = rep["collectives"]
    problems = []
    if sorted(ranks) != [0, 1] or rep["run"]["world_size"] != 2:
        problems.append("ranks %s, world size %s" % (sorted(ranks), rep["run"]["world_size"]))
    if coll["instances"] != 110 or coll["complete"] != 110 or coll["partial"] != 0:
        problems.append("collectives: %d instances, %d on both ranks, %d partial (want 110, "
                        "110, 0)" % (coll["instances"], coll["complete"], coll["partial"]))
    ranking = rep["straggler_ranking"]
    if not ranking or ranking[0] != 1:
        problems.append("straggler ranking %s: rank 1 is not first" % ranking)
    elif rep["straggler_scope"] != "steps" or \
            ranks[1]["straggler_in_steps"]["wait_caused_ns"] <= \
            ranks[0]["straggler_in_steps"]["wait_caused_ns"]:
        problems.append("scope %s; in steps rank 1 caused %d ns of waiting, rank 0 %d" % (
            rep["straggler_scope"], ranks[1]["straggler_in_steps"]["wait_caused_ns"],
            ranks[0]["straggler_in_steps"]["wait_caused_ns"]))
    for r, info in sorted(ranks.items()):
        stored = sum(info["events"].values())
        if info["dropped_total"] != 0 or info["dropped"]:
            problems.append("rank %d dropped %s" % (r, info["dropped"]))
        if stored != replayed.get(r) or info["events"]["nccl_ops"] != 110:
            problems.append("rank %d: %d events stored (%d NCCL ops), replayed %s" % (
                r, stored, info["events"]["nccl_ops"], replayed.get(r)))
        if not info["goodbye"] or not info.get("clock") or not info.get("overlap"):
            problems.append("rank %d: goodbye %s, clock model %s, overlap %s" % (
                r, info["goodbye"], bool(info.get("clock")), bool(info.get("overlap"))))
    if rep["aggregator"]["rejected"] or rep["aggregator"]["duplicates"]:
        problems.append("aggregator: %s" % rep["aggregator"])
    html = os.path.join(out, "report.html")
    if not os.path.exists(html) or os.path.getsize(html) < 1000:
        problems.append("no HTML report at %s" % html)
    if problems:
        itest.fail("run %d: " % n + "; ".join(problems))
    itest.log("run %d ok: run %s, 110 collectives on both ranks, rank 1 first straggler "
              "(%.2f ms caused), 0 dropped" % (n, rep["run"]["run_id"],
                                               ranks[1]["straggler_in_steps"]["wait_caused_ns"] / 1e6))
    return rep["run"]["run_id"]


first = check_run(1)
second = check_run(2)  # same folder: --overwrite replaces the database, counts stay exact
if first == second:
    itest.fail("the second run left the first run's database (run id %s)" % first)

# the choice of job, with a stand-in nvidia-smi
fake = wd.file("bin")
os.makedirs(fake)
workload = os.path.join(args.build_dir, "tests", "workloads", "ref_workload")
for gpus, want_np in ((3, 3), (10, 8)):
    smi = os.path.join(fake, "nvidia-smi")
    with open(smi, "w") as f:
        f.write("#!/bin/sh\n[ \"$1\" = -L ] || exit 1\n")
        for i in range(gpus):
            f.write("echo 'GPU %d: NVIDIA H200 (UUID: GPU-%08d)'\n" % (i, i))
    os.chmod(smi, stat.S_IRWXU)
    rc, text = quickstart("--dry-run", env=dict(env, PATH=fake + os.pathsep + env["PATH"]))
    print(text.strip(), flush=True)
    if rc != 0:
        itest.fail("--dry-run with %d GPUs: rc %d" % (gpus, rc))
    if os.access(workload, os.X_OK):
        want = ("mpirun.* -np %d -x NCCL_NVLS_ENABLE=0 \\S*ref_workload --steps 50 --warmup 5 "
                "--slow-rank 1 --slow-us 2000 --slow-steps every:5" % want_np)
    else:  # built without nvcc/NCCL: the recorded job, and the reason
        want = "no ref_workload in .*\n.* --oversubscribe -np 2 .*replay --from-env"
    if not re.search(want, text):
        itest.fail("--dry-run with %d GPUs: no match for %r" % (gpus, want))
with open(smi, "w") as f:  # as on a machine without the driver
    f.write("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the "
            "NVIDIA driver.\"\nexit 9\n")
rc, text = quickstart("--dry-run", env=dict(env, PATH=fake + os.pathsep + env["PATH"]))
print(text.strip(), flush=True)
if rc != 0 or "quickstart: no GPU: " not in text or "--oversubscribe -np 2" not in text:
    itest.fail("--dry-run without a GPU: rc %d, %r" % (rc, text))
itest.log("ok: the quick start's job, twice, and its choice of job")
wd.done(True)
