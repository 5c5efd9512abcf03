"""integration_resend: a resent batch is not stored twice.

Each rank sends its batches, waits until all are acknowledged, reconnects and sends its first
three batches again (the same bytes). meridiand must acknowledge each as a duplicate, store
nothing more (the database still matches the senders' report exactly) and count the
duplicates in aggregator_counters. A second pass sends the same seeds as new ranks' batches
again through the normal path to show the rows of the first ranks did not change.
"""
import itest

args = itest.parse_args()
wd = itest.Workdir(args, "resend")
d = itest.Daemon(args.meridiand, wd)
d.start()
report = wd.file("report.txt")
ranks, resend = 4, 3
rc, out = itest.run(itest.replay_cmd(
    args, d, report, "--ranks", str(ranks), "--events", "20000", "--batch-events", "2000",
    "--resend-acked", str(resend), "--seed", "11"), 90, "meridian-replay")
if rc != 0:
    itest.fail("load generator failed (rc %d)" % rc)
rep = itest.read_report(report)
for r, kv in sorted(rep.items()):
    if int(kv["dup_acks"]) != resend:
        itest.fail("rank %d: %s duplicate acks, expected %d" % (r, kv["dup_acks"], resend))
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
counters = itest.verify(args, d, report)
dups = sum(v for k, v in counters.items() if "dup" in k)
if dups < ranks * resend:
    itest.fail("aggregator_counters shows %d duplicates, expected >= %d: %s"
               % (dups, ranks * resend, counters))

# restart on the same database: duplicates are still recognised across a restart
d.start()
report2 = wd.file("report2.txt")
rc, out = itest.run(itest.replay_cmd(
    args, d, report2, "--ranks", "1", "--rank-base", "0", "--world-size", str(ranks),
    "--events", "2000", "--batch-events", "2000", "--seed", "11"), 60, "meridian-replay")
rep2 = itest.read_report(report2)
kv = rep2.get(0, {})
# rank 0's batch 1 was committed before: the HelloReply's committed_seq makes the sender drop
# it without resending, or the daemon acks it as a duplicate; either way nothing is stored
if rc != 0 or int(kv.get("acked_batches", 0)) != 1:
    itest.fail("second pass: rc %d, report %s" % (rc, kv))
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
itest.verify(args, d, report)  # the first report still matches exactly: no row added
itest.log("ok: %d ranks x %d duplicate acks, counters %s" % (ranks, resend, counters))
wd.done(True)
