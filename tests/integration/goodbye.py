"""integration_goodbye: a Goodbye lost with its connection is sent again and acknowledged.

meridian-replay's ranks reach meridiand through a relay (itest.FrameRelay) that passes every
frame except the Goodbyes of each rank's first connection (the first RANKS connections: the
ranks connect once at start and reconnect only after a loss): it drops that Goodbye and
closes both sides of its connection at once, as if meridiand had died right after reading
it.
Every rank must then reconnect, send its Goodbye again and have it acknowledged
(Ack.goodbye, sent after the commit): the load generator succeeds, its report says
goodbye_acked=1 for every rank, the relay counted the lost Goodbyes plus the ones that got
through, and mrd-verify finds every batch once and ranks.goodbye = 1 for every rank.
"""
import itest


class GoodbyeCounter:
    """The relay's rule: a Goodbye on one of the first `lose` connections is cut off with
    its connection (counted as lost); every other frame passes (Goodbyes counted)."""

    def __init__(self, lose):
        self.lose = lose
        self.lost = self.passed = 0

    def __call__(self, conn, ftype, frame):
        if ftype != itest.FrameRelay.GOODBYE:
            return itest.FrameRelay.PASS
        if conn <= self.lose:
            self.lost += 1
            return itest.FrameRelay.CUT
        self.passed += 1
        return itest.FrameRelay.PASS


args = itest.parse_args()
wd = itest.Workdir(args, "goodbye")
d = itest.Daemon(args.meridiand, wd)
d.start()
ranks = 4
bye = GoodbyeCounter(ranks)
relay = itest.FrameRelay(d.port, bye)
report = wd.file("report.txt")
cmd = [args.replay, "--aggregator", "127.0.0.1:%d" % relay.port, "--run-id", d.run_id,
       "--secret-file", d.secret_file, "--report", report, "--ranks", str(ranks), "--events",
       "8000", "--batch-events", "1000", "--retry-ms", "20000", "--seed", "5"]
rc, out = itest.run(cmd, 60, "meridian-replay")
if rc != 0:
    itest.fail("load generator failed (rc %d)" % rc)
rep = itest.read_report(report)
if sorted(rep) != list(range(ranks)):
    itest.fail("report has ranks %s" % sorted(rep))
for r, kv in sorted(rep.items()):
    if kv.get("goodbye_acked") != "1" or int(kv.get("goodbyes_sent", 0)) < 2:
        itest.fail("rank %d: goodbye_acked=%s goodbyes_sent=%s (its first Goodbye was lost)"
                   % (r, kv.get("goodbye_acked"), kv.get("goodbyes_sent")))
sent = sum(int(kv["goodbyes_sent"]) for kv in rep.values())
if bye.lost != ranks or bye.lost + bye.passed != sent:
    itest.fail("relay lost %d and passed %d Goodbyes; the ranks sent %d"
               % (bye.lost, bye.passed, sent))
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
itest.verify(args, d, report)  # includes ranks.goodbye = 1 for every rank
itest.log("ok: %d Goodbyes lost with their connection, %d sent in all, every one acknowledged"
          % (bye.lost, sent))
wd.done(True)
