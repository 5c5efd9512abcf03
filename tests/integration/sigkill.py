"""integration_sigkill: meridiand killed with SIGKILL at random moments under load loses no
acknowledged batch and stores nothing twice.

16 simulated ranks send paced traffic with bursts. While they run, meridiand is killed with
SIGKILL at random moments (several times, bounded) and restarted on the same database and
port; the senders reconnect with backoff and resend every batch not yet acknowledged (the
HelloReply's committed_seq lets them skip what was committed). At the end every rank must
have had all its batches acknowledged, and the database must hold exactly what each sender
reported: count per kind, checksum, every batch once, and every rank's goodbye: the
aggregator acknowledges a Goodbye once it is committed (Ack.goodbye), and a rank whose
Goodbye was lost with a killed daemon sends it again after reconnecting.
"""
import os
import random
import subprocess
import time

import itest

args = itest.parse_args([("--kills", {"type": int, "default": 6}),
                         ("--seed", {"type": int, "default": None})])
seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
rng = random.Random(seed)
itest.log("kill timing seed %d (rerun with --seed %d)" % (seed, seed))
wd = itest.Workdir(args, "sigkill")
d = itest.Daemon(args.meridiand, wd)
d.start()
report = wd.file("report.txt")
ranks = 16
cmd = itest.replay_cmd(
    args, d, report, "--ranks", str(ranks), "--events", "200000", "--batch-events", "1500",
    "--rate", "12000", "--burst-rate", "48000", "--burst-ms", "150", "--burst-period-ms", "700",
    "--window", "8", "--retry-ms", "40000", "--seed", "23", "--quiet")
itest.log("run: " + " ".join(cmd))
out = open(wd.file("replay.log"), "w")
replay = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
kills = 0
try:
    time.sleep(rng.uniform(0.3, 0.8))
    while kills < args.kills and replay.poll() is None:
        d.kill9()
        kills += 1
        itest.log("SIGKILL #%d" % kills)
        time.sleep(rng.uniform(0.0, 0.3))  # sometimes the clients find nothing listening
        d.start()
        time.sleep(rng.uniform(0.3, 1.2))
    replay.wait(timeout=100)
except subprocess.TimeoutExpired:
    replay.kill()
    itest.fail("load generator did not finish within the deadline")
finally:
    out.close()
with open(wd.file("replay.log")) as f:
    print(f.read()[-3000:])
if replay.returncode != 0:
    itest.fail("load generator failed (rc %d)" % replay.returncode)
if kills < 3:
    itest.fail("only %d kills happened under load (need >= 3)" % kills)
rep = itest.read_report(report)
if sorted(rep) != list(range(ranks)):
    itest.fail("report has ranks %s" % sorted(rep))
reconnects = sum(int(kv["reconnects"]) for kv in rep.values())
resent = sum(int(kv["resent"]) for kv in rep.values())
skipped = sum(int(kv["committed_on_hello"]) for kv in rep.values())
if reconnects < ranks:
    itest.fail("only %d reconnects for %d kills of %d connected ranks" % (reconnects, kills, ranks))
unacked = [r for r, kv in rep.items() if kv.get("goodbye_acked") != "1"]
if unacked:
    itest.fail("ranks %s: goodbye not acknowledged" % unacked)
goodbyes = sum(int(kv["goodbyes_sent"]) for kv in rep.values())
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
# every rank's goodbye is required (mrd-verify checks ranks.goodbye = 1 for each)
counters = itest.verify(args, d, report)
itest.log("ok: %d kills, %d reconnects, %d batches resent, %d skipped as committed, "
          "%d goodbyes for %d ranks, counters %s"
          % (kills, reconnects, resent, skipped, goodbyes, ranks, counters))
wd.done(True)
