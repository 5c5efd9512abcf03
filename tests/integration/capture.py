"""integration_capture_replay: a recorded .mrdcap replays faithfully as more ranks.

One rank's traffic is recorded with `meridian replay --record` (the same frames an agent
would write with MERIDIAN_RECORD_FILE), then the capture is replayed into a fresh database as
4 copies at ranks 10..13 (--rank-offset 10 --copies 4; world size 1 -> ranks 10 + copy).
Each copy's checksum, computed from the decoded capture, must equal the checksum of the
recording run, and the database must match the replay report exactly.
"""
import itest

args = itest.parse_args()
wd = itest.Workdir(args, "capture")
d = itest.Daemon(args.meridiand, wd)
d.start()
cap = wd.file("rank0.mrdcap")
rep1 = wd.file("record.txt")
rc, _ = itest.run(itest.replay_cmd(args, d, rep1, "--events", "30000", "--batch-events", "3000",
                                   "--seed", "5", "--record", cap), 60, "recording")
if rc != 0:
    itest.fail("recording run failed")
with open(cap, "rb") as f:
    head = f.read(8)
    body = f.read()
if head != b"MRDCAP1\n" or len(body) < 1000:
    itest.fail("capture file malformed (%r, %d bytes)" % (head, len(body)))
if b"itest-secret" in body:
    itest.fail("the capture contains the run secret")
d.stop()

d2 = itest.Daemon(args.meridiand, wd, run_id="itest-replayed")
d2.db = wd.file("replayed.db")
d2.start()
rep2 = wd.file("replay.txt")
rc, _ = itest.run(itest.replay_cmd(args, d2, rep2, "--rank-offset", "10", "--copies", "4", cap),
                  60, "capture replay")
if rc != 0:
    itest.fail("capture replay failed")
orig = itest.read_report(rep1)[0]
got = itest.read_report(rep2)
if sorted(got) != [10, 11, 12, 13]:
    itest.fail("replayed ranks %s" % sorted(got))
for r, kv in got.items():
    if kv["events"] != orig["events"] or kv["checksum"] != orig["checksum"]:
        itest.fail("rank %d: %s events checksum %s, recorded %s / %s" % (
            r, kv["events"], kv["checksum"], orig["events"], orig["checksum"]))
if d2.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
itest.verify(args, d2, rep2)
itest.log("ok: capture of %s events replayed as 4 ranks" % orig["events"])
wd.done(True)
