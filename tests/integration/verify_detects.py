"""integration_verify_detects: the end-to-end check can fail.

After a clean run (mrd-verify passes), copies of the database are tampered with in the ways
an aggregator bug would: one event row lost, one field changed (an MPI tag off by one),
one row stored twice, a kernel name mapped to another string, a batch row missing. mrd-verify
must reject every copy (exit 1), so a passing integration test means something.
"""
import shutil
import sqlite3
import subprocess

import itest

args = itest.parse_args()
wd = itest.Workdir(args, "verify_detects")
d = itest.Daemon(args.meridiand, wd)
d.start()
report = wd.file("report.txt")
rc, _ = itest.run(itest.replay_cmd(args, d, report, "--ranks", "2", "--events", "20000",
                                   "--batch-events", "2500", "--seed", "3"), 60, "meridian-replay")
if rc != 0 or d.stop() != 0:
    itest.fail("clean run failed")
itest.verify(args, d, report)

tamper = {
    "lost row": "DELETE FROM kernels WHERE rowid = (SELECT max(rowid) FROM kernels WHERE rank = 1)",
    "changed field": "UPDATE mpi_calls SET tag = tag + 1 WHERE rowid = (SELECT min(rowid) FROM mpi_calls)",
    "stored twice": "INSERT INTO nccl_channels SELECT * FROM nccl_channels WHERE rowid = 1",
    "wrong string": "UPDATE kernels SET name_id = (SELECT id FROM strings WHERE value = 'AllReduce')"
                    " WHERE rowid = 7",
    "batch row lost": "DELETE FROM batches WHERE rank = 0 AND seq = 2",
}
for what, sql in tamper.items():
    db = wd.file("tampered.db")
    con = sqlite3.connect(d.db)
    con.execute("VACUUM INTO ?", (db,))  # a consistent copy (WAL included)
    con.close()
    con = sqlite3.connect(db)
    n = con.execute(sql).rowcount
    con.commit()
    con.close()
    if n != 1:
        itest.fail("%s: tampering changed %d rows" % (what, n))
    p = subprocess.run([args.verify, "--db", db, "--report", report], stdout=subprocess.PIPE,
                       text=True, timeout=60)
    if p.returncode != 1 or "MISMATCH" not in p.stdout:
        itest.fail("%s: mrd-verify exit %d, output:\n%s" % (what, p.returncode, p.stdout))
    itest.log("%s: detected (%s)" % (what, p.stdout.splitlines()[0]))
    shutil.os.unlink(db)
itest.log("ok: every tampering detected")
wd.done(True)
