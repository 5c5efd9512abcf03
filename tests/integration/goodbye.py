"""integration_goodbye: a Goodbye lost with its connection is sent again and acknowledged.

meridian-replay's ranks reach meridiand through a relay (this script) that passes every
frame except the Goodbyes of each rank's first connection (the first RANKS connections: the
ranks connect once at start and reconnect only after a loss): it drops that Goodbye and
closes both sides of its connection at once, as if meridiand had died right after reading
it.
Every rank must then reconnect, send its Goodbye again and have it acknowledged
(Ack.goodbye, sent after the commit): the load generator succeeds, its report says
goodbye_acked=1 for every rank, the relay counted the lost Goodbyes plus the ones that got
through, and mrd-verify finds every batch once and ranks.goodbye = 1 for every rank.
"""
import socket
import struct
import threading

import itest


class Relay:
    """127.0.0.1 TCP relay; frames from the client side are inspected (8-byte header:
    version, type, flags, length LE); a Goodbye (type 7) on one of the first `lose`
    connections is dropped together with its connection."""

    def __init__(self, target_port, lose):
        self.target, self.lose = target_port, lose
        self.lost = self.passed = self.conns = 0
        self.lock = threading.Lock()
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                a, _ = self.ls.accept()
            except OSError:
                return
            b = socket.create_connection(("127.0.0.1", self.target))
            self.conns += 1
            threading.Thread(target=self.up, args=(a, b, self.conns <= self.lose),
                             daemon=True).start()
            threading.Thread(target=self.down, args=(b, a), daemon=True).start()

    @staticmethod
    def down(src, dst):
        try:
            while True:
                d = src.recv(65536)
                if not d:
                    break
                dst.sendall(d)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def up(self, src, dst, lose):
        buf = b""
        try:
            while True:
                d = src.recv(65536)
                if not d:
                    dst.shutdown(socket.SHUT_WR)
                    return
                buf += d
                while len(buf) >= 8:
                    length = struct.unpack_from("<I", buf, 4)[0]
                    if len(buf) < 8 + length:
                        break
                    frame, buf = buf[:8 + length], buf[8 + length:]
                    if frame[1] == 7:
                        with self.lock:
                            self.lost += lose
                            self.passed += not lose
                        if lose:
                            src.close()
                            dst.close()
                            return
                    dst.sendall(frame)
        except OSError:
            pass


args = itest.parse_args()
wd = itest.Workdir(args, "goodbye")
d = itest.Daemon(args.meridiand, wd)
d.start()
ranks = 4
relay = Relay(d.port, ranks)
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
if relay.lost != ranks or relay.lost + relay.passed != sent:
    itest.fail("relay lost %d and passed %d Goodbyes; the ranks sent %d"
               % (relay.lost, relay.passed, sent))
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")
itest.verify(args, d, report)  # includes ranks.goodbye = 1 for every rank
itest.log("ok: %d Goodbyes lost with their connection, %d sent in all, every one acknowledged"
          % (relay.lost, sent))
wd.done(True)
