"""integration_gpu_capture: captures recorded on real GPUs replay into the real pipeline.

tests/data/ref-rank{0,1}.mrdcap are what the two agents of the reference MPI+NCCL job sent on
the 2 x H200 host (tests/data/README.md). Replayed through meridian replay -> meridiand ->
SQLite, the database must hold exactly the decoded captures (count per kind, checksum, every
batch once, goodbyes), the counts must equal what each agent itself reported captured in its
Goodbye (now in agent_counters), the agent's own named counters (CUPTI's overhead records,
pool misses; Goodbye.named) must arrive as recorded, and the collectives must match across the two ranks by
(comm_hash, seq, func): 110 per rank, all on both ranks.
"""
import sqlite3

import itest

args = itest.parse_args([("--captures", {"nargs": "+", "required": True})])
wd = itest.Workdir(args, "gpu_capture")
d = itest.Daemon(args.meridiand, wd, run_id="gpu-ref")
d.start()
report = wd.file("report.txt")
rc, _ = itest.run(itest.replay_cmd(args, d, report, *args.captures), 60, "capture replay")
if rc != 0:
    itest.fail("capture replay failed")
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
itest.verify(args, d, report)
rep = itest.read_report(report)
if sorted(rep) != [0, 1]:
    itest.fail("replayed ranks %s" % sorted(rep))

con = sqlite3.connect(d.db)
for r, kv in rep.items():
    got = dict(con.execute("SELECT name, value FROM agent_counters WHERE rank = ? AND "
                           "category = 'captured'", (r,)))
    for key, val in kv.items():
        if key.startswith("n_") and (int(val) or key[2:] in got):
            if got.get(key[2:]) != int(val):
                itest.fail("rank %d %s: replayed %s, agent's goodbye says %s" % (
                    r, key[2:], val, got.get(key[2:])))
    if int(kv["n_kernel"]) == 0 or int(kv["n_nccl_op"]) != 110:
        itest.fail("rank %d: %s kernels, %s NCCL ops (want > 0, 110)" % (
            r, kv["n_kernel"], kv["n_nccl_op"]))
    cupti = dict(con.execute("SELECT name, value FROM agent_counters WHERE rank = ? AND "
                             "category = 'cupti'", (r,)))
    # the recording predates the pace counters (pace_waits, pace_wait_ns): not required
    want = {"overhead_records", "overhead_ns", "unknown_records", "pool_misses"}
    if not want <= set(cupti) or cupti["overhead_records"] == 0 or cupti["pool_misses"] != 0:
        itest.fail("rank %d: CUPTI's counters from the recorded Goodbye: %s (want %s, "
                   "overhead records > 0 as recorded on the H200 host, no pool misses)" % (
                       r, cupti, sorted(want)))
both = con.execute("SELECT count(*) FROM (SELECT comm_hash, seq, func_id FROM nccl_ops "
                   "WHERE is_p2p = 0 GROUP BY 1, 2, 3 HAVING count(DISTINCT rank) = 2)").fetchone()[0]
con.close()
if both != 110:
    itest.fail("%d collectives matched on both ranks, want 110" % both)
itest.log("ok: GPU captures replayed exactly; 110 collectives matched across ranks")
wd.done(True)
