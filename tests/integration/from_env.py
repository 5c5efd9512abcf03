"""integration_replay_from_env: `meridian replay --from-env PATTERN` as one rank of a job.

Each process is given only the environment a launched rank has (no connection options): the
launcher's rank variables and the agent's MERIDIAN_AGGREGATOR / MERIDIAN_RUN_ID /
MERIDIAN_SECRET(_FILE). Rank 1 finds its rank in PMIX_RANK (the second of the agent's list)
with WORLD_SIZE and LOCAL_RANK set and the secret in a file; rank 0 has both
OMPI_COMM_WORLD_RANK=0 and RANK=5 (the first of the list must win) and the secret as a string,
no world size or local rank (the capture's then). A third process replays rank 0's capture
(a pattern without %r) as rank 3 of 4 from SLURM_PROCID: the rank is rewritten. The database must hold exactly what each
replayed (mrd-verify), under the rank, world size and local rank from the environment, with
every event the recording agent reported captured. Then every missing or wrong piece must be
refused before anything is sent, with exit status 2 and a message naming it.
"""
import os
import sqlite3
import subprocess

import itest

args = itest.parse_args([("--captures-dir", {"required": True})])
pattern = os.path.join(args.captures_dir, "ref-rank%r.mrdcap")
wd = itest.Workdir(args, "from_env")
d = itest.Daemon(args.meridiand, wd, run_id="from-env-run")
d.start()

RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK",
             "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK",
             "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE")


def rank_env(extra, connection=True):
    env = dict((k, v) for k, v in os.environ.items()
               if k not in RANK_VARS and not k.startswith("MERIDIAN_"))
    if connection:
        env.update({"MERIDIAN_AGGREGATOR": d.addr(), "MERIDIAN_RUN_ID": d.run_id,
                    "MERIDIAN_SECRET_FILE": d.secret_file})
    env.update(extra)
    return env


def replay(env, *extra, timeout=60, pat=pattern):
    cmd = [args.replay, "--from-env", pat] + list(extra)
    itest.log("run: %s  (env: %s)" % (" ".join(cmd), " ".join(
        "%s=%s" % (k, env[k]) for k in sorted(env) if k in RANK_VARS or k.startswith("MERIDIAN_"))))
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        itest.fail("meridian-replay did not finish within %d s" % timeout)
    print((p.stdout + p.stderr).strip(), flush=True)
    return p


rep1, rep0 = wd.file("rank1.txt"), wd.file("rank0.txt")
p = replay(rank_env({"PMIX_RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "7"}), "--report", rep1)
if p.returncode != 0 or "rank 1: " not in p.stdout or "all acknowledged" not in p.stdout:
    itest.fail("rank 1 (PMIX_RANK) replay failed: rc %d" % p.returncode)
with open(d.secret_file) as f:
    secret = f.read()
env0 = rank_env({"OMPI_COMM_WORLD_RANK": "0", "RANK": "5", "MERIDIAN_SECRET": secret})
del env0["MERIDIAN_SECRET_FILE"]
p = replay(env0, "--report", rep0)
if p.returncode != 0 or "rank 0: " not in p.stdout:
    itest.fail("rank 0 (OMPI_COMM_WORLD_RANK over RANK, MERIDIAN_SECRET) replay failed: rc %d"
               % p.returncode)
rep3 = wd.file("rank3.txt")
p = replay(rank_env({"SLURM_PROCID": "3", "SLURM_NTASKS": "4"}), "--report", rep3,
           pat=pattern.replace("%r", "0"))
if p.returncode != 0 or "rank 3: " not in p.stdout:
    itest.fail("rank 3 (SLURM_PROCID, rank 0's capture) replay failed: rc %d" % p.returncode)
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
both = wd.file("report.txt")
with open(both, "w") as f:
    for r in (rep0, rep1, rep3):
        with open(r) as g:
            f.write(g.read())
itest.verify(args, d, both)
rep = itest.read_report(both)
if sorted(rep) != [0, 1, 3]:
    itest.fail("replayed ranks %s, want [0, 1, 3]" % sorted(rep))
if (rep[3]["checksum"], rep[3]["events"]) != (rep[0]["checksum"], rep[0]["events"]):
    itest.fail("rank 3 sent %s/%s, rank 0 (the same capture) %s/%s" % (
        rep[3]["events"], rep[3]["checksum"], rep[0]["events"], rep[0]["checksum"]))

con = sqlite3.connect(d.db)
rows = dict((r[0], r[1:]) for r in con.execute(
    "SELECT rank, world_size, local_rank, goodbye FROM ranks"))
# rank 1: world size and local rank from the environment; rank 0: the capture's (2, 0);
# rank 3: world size from SLURM_NTASKS, local rank rank 0's capture's
want = {0: (2, 0, 1), 1: (2, 7, 1), 3: (4, 0, 1)}
if rows != want:
    itest.fail("ranks table %s, want %s" % (rows, want))
for r, kv in rep.items():
    got = dict(con.execute("SELECT name, value FROM agent_counters WHERE rank = ? AND "
                           "category = 'captured'", (r,)))
    if not got:
        itest.fail("rank %d: no captured counters (the capture's goodbye)" % r)
    for key, val in kv.items():
        if key.startswith("n_") and (int(val) or key[2:] in got) and got.get(key[2:]) != int(val):
            itest.fail("rank %d %s: replayed %s, the recording agent captured %s" % (
                r, key[2:], val, got.get(key[2:])))
    if int(kv["n_nccl_op"]) != 110:
        itest.fail("rank %d: %s NCCL ops, want 110" % (r, kv["n_nccl_op"]))
con.close()

# every missing or wrong piece: exit 2 before sending, and a message that names it
cases = [
    ("no rank variable", {}, (), "none of OMPI_COMM_WORLD_RANK, PMIX_RANK"),
    ("rank not a number", {"SLURM_PROCID": "one"}, (), "SLURM_PROCID='one' is not a rank"),
    ("no aggregator", {"RANK": "0", "MERIDIAN_AGGREGATOR": None}, (),
     "MERIDIAN_AGGREGATOR is not set"),
    ("no run id", {"RANK": "0", "MERIDIAN_RUN_ID": None}, (), "MERIDIAN_RUN_ID is not set"),
    ("no secret", {"RANK": "0", "MERIDIAN_SECRET_FILE": None}, (),
     "neither MERIDIAN_SECRET nor MERIDIAN_SECRET_FILE"),
    ("no capture for the rank", {"RANK": "4"}, (), "ref-rank4.mrdcap"),
    ("rank beyond the world", {"RANK": "2", "OMPI_COMM_WORLD_SIZE": "2"}, (),
     "is not below the world size 2"),
    ("captures listed too", {"RANK": "0"}, (pattern.replace("%r", "0"),), "no CAPTURE files"),
]
for what, extra, more, want in cases:
    env = rank_env({})
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    p = replay(env, *more, timeout=20)
    if p.returncode != 2 or want not in p.stderr:
        itest.fail("%s: rc %d, stderr %r (want rc 2 and %r)" % (what, p.returncode, p.stderr,
                                                                 want))
p = subprocess.run([args.replay, "--from-env", "caps/rank%d.mrdcap"], env=rank_env({"RANK": "0"}),
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=20)
if p.returncode != 2 or "only %r (the rank) and %% may follow a %" not in p.stderr:
    itest.fail("bad pattern: rc %d, stderr %r" % (p.returncode, p.stderr))
itest.log("ok: 3 ranks replayed from their environment exactly; %d wrong setups refused"
          % (len(cases) + 1))
wd.done(True)
