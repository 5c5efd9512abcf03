"""integration_rejected: a sender with a wrong secret or run id is refused at once and
stores nothing, while a good sender on the same daemon is stored exactly.

The load generator must treat a rejected Hello as final (exit 1 within seconds, status=error in
its report) instead of retrying for --retry-ms; the daemon must store no batch of it.
"""
import time

import itest

args = itest.parse_args()
wd = itest.Workdir(args, "rejected")
d = itest.Daemon(args.meridiand, wd)
d.start()
bad_secret = wd.file("wrong")
with open(bad_secret, "w") as f:
    f.write("not-the-secret")
cases = [("wrong secret", ["--secret-file", bad_secret], d.run_id),
         ("wrong run id", ["--secret-file", d.secret_file], "another-run")]
for what, sec, run_id in cases:
    rep = wd.file("bad.txt")
    t = time.monotonic()
    rc, out = itest.run([args.replay, "--aggregator", d.addr(), "--run-id", run_id, "--report", rep,
                         "--ranks", "2", "--rank-base", "5", "--world-size", "8", "--events",
                         "5000", "--retry-ms", "30000"] + sec, 60, "rejected sender")
    took = time.monotonic() - t
    if rc != 1 or took > 10:
        itest.fail("%s: exit %d after %.1f s (want 1, fast)" % (what, rc, took))
    for r, kv in itest.read_report(rep).items():
        if not kv["status"].startswith("error") or kv["acked_batches"] != "0":
            itest.fail("%s: rank %d report %s" % (what, r, kv))
good = wd.file("good.txt")
rc, _ = itest.run(itest.replay_cmd(args, d, good, "--ranks", "2", "--world-size", "8",
                                   "--events", "8000"), 60, "good sender")
if rc != 0:
    itest.fail("good sender failed")
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
itest.verify(args, d, good)  # also fails on any row of ranks 5 and 6 ("not in the report")
itest.log("ok: rejected senders refused and stored nothing")
wd.done(True)
