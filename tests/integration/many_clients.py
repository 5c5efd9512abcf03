"""integration_many_clients: 64 concurrent client processes -> one real meridiand.

64 simulated ranks (one process each, the real protocol, every event kind) send paced
traffic with bursts so all of them are connected at once; afterwards meridiand is stopped with
SIGTERM and the database must hold exactly what each sender reported: count per kind and
checksum per rank, every batch once, every rank's goodbye.
"""
import itest

args = itest.parse_args()
wd = itest.Workdir(args, "many_clients")
d = itest.Daemon(args.meridiand, wd)
d.start()
report = wd.file("report.txt")
ranks = 64
rc, out = itest.run(itest.replay_cmd(
    args, d, report, "--ranks", str(ranks), "--events", "12000", "--batch-events", "1000",
    "--rate", "4000", "--burst-rate", "16000", "--burst-ms", "100", "--burst-period-ms", "500",
    "--seed", "7", "--quiet"), 150, "meridian-replay")
if rc != 0:
    itest.fail("load generator failed (rc %d)" % rc)
rep = itest.read_report(report)
if sorted(rep) != list(range(ranks)):
    itest.fail("report has ranks %s" % sorted(rep))
# every rank ran long enough to overlap all others: at least 2 s each at these rates
short = [r for r, kv in rep.items() if float(kv["seconds"]) < 1.5]
if short:
    itest.fail("ranks %s finished too fast to be concurrent" % short)
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
counters = itest.verify(args, d, report)
total = sum(int(kv["events"]) for kv in rep.values())
itest.log("ok: %d ranks, %d events, counters %s" % (ranks, total, counters))
wd.done(True)
