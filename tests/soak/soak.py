#!/usr/bin/env python3
"""Soak: replayed ranks through a delaying, cutting relay into a meridiand that is SIGKILLed
and restarted, for minutes; then exactly-once, memory and database-size checks.

    tests/soak/soak.py --meridiand B/aggregator/daemon/meridiand --meridian B/launcher/meridian \
        --verify B/tests/integration/mrd-verify [--minutes 30 --ranks 64 --rate 5000
        --kill-every-s 180 --cut-every-s 20 --delay-ms 5 --csv samples.csv]

What runs (all real processes on 127.0.0.1, the database in a fresh temporary folder):
  meridiand   --db, --run-id, --secret-file, --port-file on a fixed port below the ephemeral
              range; every --kill-every-s (each kill moved by up to +-10 % of the interval,
              seeded) it is SIGKILLed and, after 0-1.5 s (sometimes the ranks find nothing
              listening), restarted on the same port and database. Kills happen only while
              the ranks generate (so a run of M minutes with kills every K s has
              floor((60 M - 5) / K) of them).
  relay       a user-space TCP relay in this process (asyncio, one thread): the kernel here
              has no netem. Each connection of a rank gets its own connection to meridiand.
              Both directions are cut into whole frames (proto/frame.h: 8-byte header,
              payload length LE at offset 4) and every frame is forwarded --delay-ms after
              it was read, in order. Every --cut-every-s it cuts --cut-fraction of the live
              connections, alternating the two ways a network cuts: at a frame boundary
              (whole frames written so far are delivered, then both sides closed) and in the
              middle of a frame (a random 1..len-1 byte prefix of the next frame in one
              direction, ranks->meridiand three times in four, then both sides closed). A
              frame read on a connection is never left out while the connection lives: the
              only frames not delivered are those still queued when the connection was cut
              or died (meridiand killed); the relay counts them, and counts as
              `silent_drops` any frame missing on a connection that ended normally (must be
              0).
  ranks       `meridian replay --ranks N --rate R --seconds 60 M` (synthetic training mix,
              one process per rank, at-least-once delivery: unacknowledged batches are
              resent after every reconnect) through the relay, --report FILE.
Every --sample-s it samples meridiand's VmRSS, each replay process's VmRSS, the database
size (main file + -wal + -shm) and the events committed so far (the batches table, read
only), into --csv.

At the end the ranks drain and say goodbye, the relay closes, meridiand gets SIGTERM
(commits, exit 0), and these checks print one line each, then `soak: PASS` or `soak: FAIL`
(exit 0 / 1; a harness failure, e.g. meridiand not starting, prints `FAIL: why`, exits 1):
  faults     the kills, cuts (both kinds) and reconnects happened.
  acked      every rank ended with every batch and its goodbye acknowledged (a rank that
             gives up after --retry-ms reports status=error; its unacknowledged events are
             printed and it fails this check).
  exactly-once  mrd-verify against the ranks' report: per rank the count per kind and the
             canonical checksum of the stored rows equal what was sent, the batches table
             holds seqs first..last each once (its key is (rank, seq)), goodbye stored; a rank
             that failed must have at least its acknowledged events stored (--allow-failed).
             So: nothing acknowledged lost, nothing stored twice. Also printed: events sent,
             acknowledged, stored, batches resent, duplicate acks (batches meridiand had
             already committed: acknowledged, not stored again).
  relay      silent_drops == 0 (above).
  load       events sent >= --min-load x ranks x rate x seconds: the load asked for was the
             load applied (the generator falls behind when acks come back too slowly).
  aggregator-memory  "flat after warm-up": the warm-up lasts until --warmup-s after the
             first restart of meridiand (without kills: the first --warmup-s). The samples of
             meridiand's VmRSS after it are split at the middle of their time span; the peak
             of the second half must stay <= --flat-factor x the peak of the first half +
             --flat-slack-mib. Peaks, not medians: meridiand's RSS follows the high-water mark
             of what it holds uncommitted (bounded by the ranks' windows and its documented
             caps, aggregator/ingest/ingest.h) plus SQLite's 64 MiB page cache, and the
             allocator keeps what it once held. In the 30-minute run it rose in steps exactly
             when the backlog rose (the writer 6-11 s behind while other work took the CPU)
             and stayed there, so a rule on medians or on one incarnation flags load, not
             leaks (RESULTS.md, run 1); each half spans several restarts and catch-up bursts,
             so their peaks compare like with like. What this catches: memory that grows
             with time, connections, batches, restarts or the database (each restart opens
             the grown database) beyond what the first half reached. A leak that only grows
             within one incarnation (killed every --kill-every-s) shows in neither half's
             peak unless it passes the backlog's level: printed for reading, not checked,
             per incarnation: its range after --warmup-s of age, the quarters rule (max Q4 /
             median Q2) and the largest backlog (events the ranks were due to have sent,
             ranks x rate x t, minus events committed: an estimate).
  agent-memory  every replay rank process's peak VmRSS <= --agent-bound-mib. `meridian
             replay` documents no bound of its own; its rank holds at most --window (16)
             unacknowledged frames of at most 4 MiB, which is the agent's documented
             unacknowledged-queue cap (agent/ENVIRONMENT.md, "Memory a rank's agent takes":
             MERIDIAN_QUEUE_BYTES = 64 MiB), and the agent measured 18 MB for everything
             else without CUDA: the default bound is 64 + 18 = 82 MiB. The measured peak and
             the ranks' flatness (the sum over ranks, after the first 20 % of the samples: max Q4 <=
             factor x median Q2) are printed, not checked.
  db-size    bytes of the database after the clean stop / events stored <= --db-budget-bpe.
             The default budget is 2 x the bytes/event of a clean run (no kills, no cuts,
             no delay) measured on the development VM (tests/soak/RESULTS.md): kills and
             resends must not leave duplicates or unreclaimed space behind.
Self-test: --test-silent-drop N makes the relay leave out every Nth batch frame of a live
connection (and hide it from its own accounting): meridiand acknowledges the next batch, and
an Ack covers every earlier batch sent on its connection (launcher/replay/client.h), so the
ranks count those batches as acknowledged and the exactly-once check must FAIL (it does:
RESULTS.md). This is why the relay only ever loses frames together with their connection.
Python 3 standard library only (tests/integration/itest.py for meridiand and the report).
"""
import argparse
import asyncio
import csv
import os
import random
import re
import signal
import sqlite3
import statistics
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import itest  # noqa: E402  (Daemon, Workdir, read_report)

# A clean run (--kill-every-s 0 --cut-every-s 0 --delay-ms 0) on the development VM stored
# CLEAN_BPE bytes per event (tests/soak/RESULTS.md); the default budget is twice that.
CLEAN_BPE = 57.8
MIB = 1 << 20

RUN_ID = "soak-run"
SECRET = "soak-secret-0123456789abcdef"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--meridiand", required=True)
    p.add_argument("--meridian", required=True, help="the meridian CLI (runs `meridian replay`)")
    p.add_argument("--verify", required=True, help="mrd-verify")
    p.add_argument("--minutes", type=float, default=30.0, help="how long the ranks generate")
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--rate", type=float, default=5000.0, help="events/s per rank")
    p.add_argument("--kill-every-s", type=float, default=180.0, help="0 = never")
    p.add_argument("--cut-every-s", type=float, default=20.0, help="0 = never")
    p.add_argument("--cut-fraction", type=float, default=0.25,
                   help="share of the live connections cut each time (at least one)")
    p.add_argument("--delay-ms", type=float, default=5.0, help="relay delay of every frame")
    p.add_argument("--sample-s", type=float, default=5.0)
    p.add_argument("--warmup-s", type=float, default=60.0,
                   help="after each (re)start of meridiand, samples before this age are "
                        "warm-up")
    p.add_argument("--flat-factor", type=float, default=1.2)
    p.add_argument("--flat-slack-mib", type=float, default=0.0,
                   help="allowance added to the flatness limit (a page cache still filling)")
    p.add_argument("--agent-bound-mib", type=float, default=82.0)
    p.add_argument("--db-budget-bpe", type=float, default=2 * CLEAN_BPE)
    p.add_argument("--min-load", type=float, default=0.9)
    p.add_argument("--retry-ms", type=int, default=120000, help="replay's --retry-ms")
    p.add_argument("--drain-timeout-s", type=float, default=300.0,
                   help="after generation ends, how long the ranks may take to finish")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--test-silent-drop", type=int, default=0, metavar="N",
                   help="self-test: the relay silently leaves out every Nth batch frame of a "
                        "live connection (what a network must not do); the soak must FAIL")
    p.add_argument("--csv", default=None, help="write the samples here")
    p.add_argument("--workdir", default=None, help="parent of the temporary folder")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    return p.parse_args()


def log(msg):
    print("[%8.1f] %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


# ---------------------------------------------------------------- relay

FRAME, PARTIAL, EOF = 0, 1, 2
MAX_PAYLOAD = 64 * MIB + 1  # meridiand's largest --max-frame; more is not a meridian stream


class Conn:
    """One relayed connection: the rank's side (c) and meridiand's side (u)."""

    def __init__(self, relay, cid, cr, cw, ur, uw):
        self.relay, self.id = relay, cid
        self.r = {"up": cr, "down": ur}
        self.w = {"up": uw, "down": cw}
        self.q = {d: asyncio.Queue(maxsize=1024) for d in ("up", "down")}
        self.read = {"up": 0, "down": 0}
        self.written = {"up": 0, "down": 0}
        self.eof_sent = {"up": False, "down": False}
        self.cut_plan = None  # ("mid", direction) while a mid-frame cut waits for a frame
        self.ended = None     # why: "cut", "died" or "normal"
        self.tasks = []

    def start(self):
        loop = asyncio.get_running_loop()
        for d in ("up", "down"):
            self.tasks.append(loop.create_task(self._reader(d)))
            self.tasks.append(loop.create_task(self._writer(d)))

    async def _reader(self, d):
        r, q = self.r[d], self.q[d]
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    hdr = await r.readexactly(8)
                except asyncio.IncompleteReadError as e:
                    if e.partial:
                        await q.put((loop.time(), e.partial, PARTIAL))
                    await q.put((loop.time(), None, EOF))
                    return
                n = struct.unpack_from("<I", hdr, 4)[0]
                if n > MAX_PAYLOAD:
                    self.end("died")  # not a meridian stream: give up on the connection
                    return
                try:
                    payload = await r.readexactly(n)
                except asyncio.IncompleteReadError as e:
                    await q.put((loop.time(), hdr + e.partial, PARTIAL))
                    await q.put((loop.time(), None, EOF))
                    return
                self.read[d] += 1
                await q.put((loop.time(), hdr + payload, FRAME))
        except (ConnectionError, OSError):
            self.end("died")

    async def _writer(self, d):
        w, q, relay = self.w[d], self.q[d], self.relay
        loop = asyncio.get_running_loop()
        try:
            while True:
                t, data, kind = await q.get()
                if kind == EOF:
                    self.eof_sent[d] = True
                    if w.can_write_eof():
                        w.write_eof()
                    if self.eof_sent["up"] and self.eof_sent["down"]:
                        self.end("normal")
                    return
                wait = t + relay.delay - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if kind == FRAME and self.cut_plan == ("mid", d) and len(data) > 1:
                    k = relay.rng.randrange(1, len(data))
                    w.write(data[:k])
                    relay.stats["cuts_mid_" + d] += 1
                    relay.stats["mid_cut_bytes"] += k
                    self.end("cut")
                    return
                if kind == FRAME and d == "up" and data[1] == 5 and relay.drop_every:
                    relay.batches_seen += 1  # --test-silent-drop: the fault this relay avoids
                    if relay.batches_seen % relay.drop_every == 0:
                        relay.stats["test_dropped"] += 1
                        self.written[d] += 1  # hidden from its own accounting on purpose
                        continue
                w.write(data)
                await w.drain()
                if kind == FRAME:
                    self.written[d] += 1
                    relay.stats["frames_" + d] += 1
        except (ConnectionError, OSError):
            self.end("died")

    def end(self, why):
        """Closes both sides once (close() delivers what was written whole, then FIN)."""
        if self.ended:
            return
        self.ended = why
        me = asyncio.current_task()
        for t in self.tasks:
            if t is not me:
                t.cancel()
        for w in (self.w["up"], self.w["down"]):
            try:
                w.close()
            except Exception:  # noqa: BLE001 (already closed by the peer)
                pass
        st = self.relay.stats
        for d in ("up", "down"):
            missing = self.read[d] - self.written[d]
            if why == "normal":
                st["silent_drops"] += missing  # every frame read must have been written
            else:
                st["frames_lost_with_%s_connection" % why] += missing
        st["conns_ended_" + why] += 1
        self.relay.conns.pop(self.id, None)


class Relay:
    """The frame relay, on its own thread and event loop; cut() is called from others."""

    def __init__(self, target_port, delay_s, seed, drop_every=0):
        self.target, self.delay = target_port, delay_s
        self.drop_every, self.batches_seen = drop_every, 0
        self.rng = random.Random(seed)
        self.stats = {k: 0 for k in (
            "conns", "conns_refused", "frames_up", "frames_down", "cuts_boundary",
            "cuts_mid_up", "cuts_mid_down", "cut_fallbacks", "mid_cut_bytes", "silent_drops",
            "frames_lost_with_cut_connection", "frames_lost_with_died_connection",
            "frames_lost_with_normal_connection", "conns_ended_cut", "conns_ended_died",
            "conns_ended_normal", "test_dropped")}
        self.conns = {}
        self.next_id = 0
        self.cut_count = 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        if not ready.wait(10):
            raise RuntimeError("relay did not start")

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)

        async def main():
            self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=512)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()

        self.loop.run_until_complete(main())
        self.loop.run_forever()

    async def _handle(self, cr, cw):
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            self.stats["conns_refused"] += 1  # meridiand is down: the rank sees a close
            cw.close()
            return
        self.next_id += 1
        self.stats["conns"] += 1
        c = Conn(self, self.next_id, cr, cw, ur, uw)
        self.conns[c.id] = c
        c.start()

    async def _cut(self, fraction):
        live = [c for c in self.conns.values() if not c.ended and not c.cut_plan]
        if not live:
            return 0
        n = max(1, int(round(fraction * len(live))))
        for c in self.rng.sample(live, min(n, len(live))):
            self.cut_count += 1
            if self.cut_count % 2:  # odd cuts at a frame boundary, even ones mid-frame
                self.stats["cuts_boundary"] += 1
                c.end("cut")
            else:
                c.cut_plan = ("mid", "up" if self.rng.random() < 0.75 else "down")
                self.loop.call_later(2.0, self._fallback, c)
        return n

    def _fallback(self, c):
        if not c.ended:  # no frame came in that direction within 2 s: cut at a boundary
            self.stats["cut_fallbacks"] += 1
            self.stats["cuts_boundary"] += 1
            c.end("cut")

    def cut(self, fraction):
        return asyncio.run_coroutine_threadsafe(self._cut(fraction), self.loop).result(10)

    def snapshot(self):
        async def snap():
            return dict(self.stats), len(self.conns)
        return asyncio.run_coroutine_threadsafe(snap(), self.loop).result(10)

    def close(self):
        async def shut():
            self.server.close()
            for c in list(self.conns.values()):
                c.end("died")
        try:
            asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


# ---------------------------------------------------------------- sampling

def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def children(ppid):
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                st = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'
        fields = st[st.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == ppid:
            out.append(int(name))
    return out


def db_bytes(path):
    return sum(os.path.getsize(path + s) for s in ("", "-wal", "-shm") if os.path.exists(path + s))


class Committed:
    """Events committed so far (the batches table, read-only): per rank, the batches above
    the highest seq seen at the last sample (a key range: cheap however large the table).
    A progress gauge, not a check (mrd-verify counts at the end)."""

    def __init__(self, path, ranks):
        self.path, self.last, self.events = path, [0] * ranks, 0

    def sample(self):
        try:
            db = sqlite3.connect("file:%s?mode=ro" % self.path, uri=True, timeout=2)
            try:
                for r in range(len(self.last)):
                    n, top = db.execute("SELECT sum(events), max(seq) FROM batches "
                                        "WHERE rank = ? AND seq > ?", (r, self.last[r])).fetchone()
                    if top:
                        self.events += n
                        self.last[r] = top
            finally:
                db.close()
        except sqlite3.Error:
            pass  # not created yet, or locked for longer than 2 s: next time
        return self.events


def flat(values, factor, slack=0.0):
    """(ok, q2_median, q4_max): max of the last quarter <= factor x median of the second +
    slack; ok is None with fewer than 8 values."""
    n = len(values)
    if n < 8:
        return None, 0, 0
    q2 = values[n // 4:n // 2]
    q4 = values[3 * n // 4:]
    med, top = statistics.median(q2), max(q4)
    return top <= factor * med + slack, med, top


# ---------------------------------------------------------------- the run

def main():
    a = parse_args()
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    gen_s = a.minutes * 60.0
    log("soak: %d ranks x %g events/s for %.0f s, kill every %g s, cut every %g s (%g%%), "
        "delay %g ms, seed %d (rerun with --seed %d)"
        % (a.ranks, a.rate, gen_s, a.kill_every_s, a.cut_every_s, 100 * a.cut_fraction,
           a.delay_ms, seed, seed))
    a.workdir = a.workdir or os.getcwd()
    wd = itest.Workdir(a, "soak")
    log("work folder " + wd.path)
    d = itest.Daemon(a.meridiand, wd, run_id=RUN_ID, secret=SECRET)
    replay = relay = None
    rows = []
    csvf = writer = None
    ok = False
    try:
        d.start()
        relay = Relay(d.port, a.delay_ms / 1000.0, rng.randrange(1 << 30), a.test_silent_drop)
        report = wd.file("report.txt")
        cmd = [a.meridian, "replay", "--aggregator", "127.0.0.1:%d" % relay.port,
               "--run-id", RUN_ID, "--secret-file", d.secret_file, "--report", report,
               "--ranks", str(a.ranks), "--rate", "%g" % a.rate, "--seconds", "%g" % gen_s,
               "--retry-ms", str(a.retry_ms), "--seed", str(rng.randrange(1 << 30)), "--quiet"]
        log("run: " + " ".join(cmd))
        rlog = open(wd.file("replay.log"), "w")
        replay = subprocess.Popen(cmd, stdout=rlog, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        rlog.close()
        t_start = time.monotonic()

        # the schedule: kills while generating (each +-10 % of the interval, seeded), cuts until
        # the ranks finish
        kill_at = []
        if a.kill_every_s > 0:
            k = 1
            while k * a.kill_every_s <= gen_s - 5:
                kill_at.append(min(gen_s - 5, (k + rng.uniform(-0.1, 0.1)) * a.kill_every_s))
                k += 1
        next_cut = a.cut_every_s if a.cut_every_s > 0 else float("inf")
        next_sample = 0.0
        daemon_started = time.monotonic()
        kills = cuts = 0
        first_restart = None
        if a.csv:
            csvf = open(a.csv, "w", newline="")
            writer = csv.writer(csvf)
            writer.writerow(["t_s", "phase", "incarnation", "meridiand_pid", "meridiand_age_s",
                             "meridiand_rss_kb", "replay_parent_rss_kb", "ranks_alive",
                             "ranks_rss_sum_kb", "ranks_rss_max_kb", "db_bytes", "wal_bytes",
                             "events_committed", "relay_conns_open", "relay_frames_up",
                             "relay_frames_down", "kills", "cut_connections",
                             "backlog_events_est"])
        rank_peak = {}
        committed = Committed(d.db, a.ranks)
        deadline = gen_s + a.drain_timeout_s
        while replay.poll() is None:
            now = time.monotonic() - t_start
            if now > deadline:
                log("ranks not finished %.0f s after generation ended: killing them" %
                    a.drain_timeout_s)
                os.killpg(replay.pid, signal.SIGKILL)
                replay.wait()
                break
            if kill_at and now >= kill_at[0]:
                kill_at.pop(0)
                d.kill9()
                kills += 1
                gap = rng.uniform(0.0, 1.5)
                log("SIGKILL #%d of meridiand; restart in %.2f s" % (kills, gap))
                time.sleep(gap)
                d.start()
                daemon_started = time.monotonic()
                if first_restart is None:
                    first_restart = daemon_started - t_start
            if now >= next_cut:
                n = relay.cut(a.cut_fraction)
                cuts += n
                next_cut += a.cut_every_s
            if now >= next_sample:
                next_sample += a.sample_s
                kids = children(replay.pid)
                krss = [rss_kb(p) for p in kids]
                for p, v in zip(kids, krss):
                    rank_peak[p] = max(rank_peak.get(p, 0), v)
                st, nconn = relay.snapshot()
                wal = wd.file("meridian.db-wal")
                row = ["%.1f" % now, "gen" if now < gen_s else "drain", d.starts,
                       d.proc.pid, "%.1f" % (time.monotonic() - daemon_started),
                       rss_kb(d.proc.pid), rss_kb(replay.pid), len(kids), sum(krss),
                       max(krss) if krss else 0, db_bytes(d.db),
                       os.path.getsize(wal) if os.path.exists(wal) else 0,
                       committed.sample(), nconn, st["frames_up"],
                       st["frames_down"], kills, cuts, 0]
                row[18] = max(0, int(a.ranks * a.rate * min(now, gen_s)) - row[12])
                rows.append(row)
                if writer:
                    writer.writerow(row)
                    csvf.flush()
                if len(rows) % max(1, int(60 / a.sample_s)) == 1:
                    log("t=%s meridiand rss %.1f MiB, ranks %d rss sum %.1f MiB max %.1f MiB, "
                        "db %.1f MiB, events committed %d, relay conns %d, kills %d, cut %d"
                        % (row[0], row[5] / 1024, row[7], row[8] / 1024, row[9] / 1024,
                           row[10] / MIB, row[12], nconn, kills, cuts))
            time.sleep(0.2)
        replay.wait()
        wall = time.monotonic() - t_start
        log("ranks finished (rc %d) after %.1f s" % (replay.returncode, wall))
        with open(wd.file("replay.log")) as f:
            tail = f.read().splitlines()[-10:]
        for line in tail:
            print("  replay: " + line)
        rstats, _ = relay.snapshot()
        relay.close()
        relay = None
        rc = d.stop()
        final_db = db_bytes(d.db)
        ok = check(a, d, wd, report, rows, rstats, kills, cuts, rank_peak, final_db, gen_s,
                   replay.returncode, rc, seed, first_restart)
    finally:
        if csvf:
            csvf.close()
        if replay and replay.poll() is None:
            os.killpg(replay.pid, signal.SIGKILL)
            replay.wait()
        if relay:
            relay.close()
        if d.proc and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        wd.done(ok)
    print("soak: " + ("PASS" if ok else "FAIL"), flush=True)
    return 0 if ok else 1


def aggregator_memory(rows, first_restart, warmup_s, factor, slack_mib, events_per_s):
    """The aggregator-memory check on the samples (CSV rows as lists): (ok, text)."""
    start = (first_restart or 0.0) + warmup_s
    post = [(float(r[0]), int(r[5])) for r in rows if float(r[0]) >= start and int(r[5]) > 0]
    if len(post) < 8:
        return False, "%d samples after the warm-up (ends %.0f s into the run): too few" % (
            len(post), start)
    mid = (post[0][0] + post[-1][0]) / 2
    p1 = max(v for t, v in post if t < mid)
    t2, p2 = max(((t, v) for t, v in post if t >= mid), key=lambda x: x[1])
    limit = factor * p1 + slack_mib * 1024
    per = {}
    for r in rows:
        if float(r[4]) >= warmup_s and int(r[5]) > 0:
            per.setdefault(int(r[2]), []).append((int(r[5]), int(r[18])))
    info = []
    for inc in sorted(per):
        v = [x for x, _ in per[inc]]
        fo, fm, ft = flat(v, factor)
        info.append("#%d %.0f..%.0f%s, backlog <= %.1f s" % (
            inc, min(v) / 1024, max(v) / 1024,
            "" if fo is None else " (Q4/Q2 %.2f)" % (ft / fm),
            max(b for _, b in per[inc]) / events_per_s))
    return p2 <= limit, (
        "after the warm-up (first restart + %g s = %.0f s): peak %.1f MiB in %.0f..%.0f s, "
        "peak %.1f MiB in %.0f..%.0f s (at %.0f s), limit %.2f x %.1f + %.0f = %.1f MiB; for "
        "reading, per incarnation after %g s of age (MiB): %s"
        % (warmup_s, start, p1 / 1024, post[0][0], mid, p2 / 1024, mid, post[-1][0], t2,
           factor, p1 / 1024, slack_mib, limit / 1024, warmup_s, "; ".join(info)))


def check(a, d, wd, report, rows, rstats, kills, cuts, rank_peak, final_db, gen_s, replay_rc,
          daemon_rc, seed, first_restart):
    results = []

    def line(name, good, text):
        results.append(good)
        print("check %-18s %s  %s" % (name, "ok  " if good else "FAIL", text), flush=True)

    rep = itest.read_report(report)
    n_ok = sum(1 for kv in rep.values() if kv.get("status") == "ok")
    sent = sum(int(kv["events"]) for kv in rep.values())
    acked = sum(int(kv["acked_events"]) for kv in rep.values())
    batches = sum(int(kv["batches"]) for kv in rep.values())
    resent = sum(int(kv["resent"]) for kv in rep.values())
    reconnects = sum(int(kv["reconnects"]) for kv in rep.values())
    dup_acks = sum(int(kv["dup_acks"]) for kv in rep.values())
    on_hello = sum(int(kv["committed_on_hello"]) for kv in rep.values())
    bye_acked = sum(1 for kv in rep.values() if kv.get("goodbye_acked") == "1")

    # faults: what the run was meant to inject did happen
    want_kills = int((gen_s - 5) // a.kill_every_s) if a.kill_every_s > 0 else 0
    want_cut_rounds = int(gen_s // a.cut_every_s) if a.cut_every_s > 0 else 0
    mid = rstats["cuts_mid_up"] + rstats["cuts_mid_down"]
    good = kills >= want_kills and (want_cut_rounds == 0 or (
        rstats["cuts_boundary"] > 0 and mid > 0)) and (
        want_kills + want_cut_rounds == 0 or reconnects >= a.ranks * min(1, want_kills))
    line("faults", good,
         "%d kills (scheduled %d), %d connections cut: %d at a frame boundary (%d after no "
         "frame came within 2 s), %d mid-frame (%d towards meridiand, %d towards the ranks); "
         "%d reconnects, %d meridiand starts, %d connections refused while it was down"
         % (kills, want_kills, cuts, rstats["cuts_boundary"], rstats["cut_fallbacks"], mid,
            rstats["cuts_mid_up"], rstats["cuts_mid_down"], reconnects, d.starts,
            rstats["conns_refused"]))

    unacked = {r: int(kv["events"]) - int(kv["acked_events"]) for r, kv in rep.items()
               if kv.get("status") != "ok"}
    good = replay_rc == 0 and n_ok == a.ranks == len(rep) and bye_acked == a.ranks
    line("acked", good,
         "%d of %d ranks reported, %d with every batch acknowledged, %d goodbyes acknowledged; "
         "replay exit %d%s" % (len(rep), a.ranks, n_ok, bye_acked, replay_rc,
                               "; unacknowledged at exit: %s" % unacked if unacked else ""))

    vcmd = [a.verify, "--db", d.db, "--report", report]
    if unacked:
        vcmd.append("--allow-failed")
    t = time.monotonic()
    p = subprocess.run(vcmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout
    m = re.search(r"^verify: ranks=(\d+) mismatched=(\d+) db_events=(\d+)", out, re.M)
    stored = int(m.group(3)) if m else -1
    # meridiand's own count, from the incarnations that were stopped (a killed one says nothing)
    dropped = 0
    for i in range(1, d.starts + 1):
        try:
            with open(wd.file("meridiand.%d.log" % i)) as f:
                mm = re.search(r"stopped: .* (\d+) duplicates dropped", f.read())
            dropped += int(mm.group(1)) if mm else 0
        except OSError:
            pass
    for mm in re.findall(r"^.*MISMATCH.*$", out, re.M)[:20]:
        print("  mrd-verify: " + mm)
    good = p.returncode == 0 and m is not None and daemon_rc == 0
    line("exactly-once", good,
         "mrd-verify rc %d (%.0f s): sent %d events in %d batches, acknowledged %d, stored %d, "
         "unacknowledged at exit %d; %d batches resent, %d acknowledged as duplicates "
         "(already committed: not stored again; the last meridiand counted %d), %d skipped "
         "as committed on Hello; meridiand exit %s after SIGTERM"
         % (p.returncode, time.monotonic() - t, sent, batches, acked, stored,
            sum(unacked.values()), resent, dup_acks, dropped,
            on_hello, daemon_rc))

    line("relay", rstats["silent_drops"] == 0,
         "%d connections, frames forwarded %d to meridiand / %d to the ranks, silent drops %d; "
         "lost with their connection: %d on cut ones, %d on ones that died (meridiand killed), "
         "%d mid-frame prefix bytes written"
         % (rstats["conns"], rstats["frames_up"], rstats["frames_down"], rstats["silent_drops"],
            rstats["frames_lost_with_cut_connection"], rstats["frames_lost_with_died_connection"],
            rstats["mid_cut_bytes"]) + (
             "; %d batch frames left out on purpose (--test-silent-drop)" % rstats["test_dropped"]
             if rstats["test_dropped"] else ""))

    asked = a.ranks * a.rate * gen_s
    line("load", sent >= a.min_load * asked,
         "%d events sent of %d asked (%.3f; needs >= %.2f): %.0f events/s over %.0f s"
         % (sent, asked, sent / asked if asked else 0, a.min_load, sent / gen_s, gen_s))

    good, text = aggregator_memory(rows, first_restart, a.warmup_s, a.flat_factor,
                                   a.flat_slack_mib, a.ranks * a.rate)
    line("aggregator-memory", good, text)

    peak = max(rank_peak.values()) if rank_peak else 0
    sums = [int(r[8]) for r in rows if int(r[7]) == a.ranks]
    rf, rmed, rtop = flat(sums[len(sums) // 5:], a.flat_factor)
    line("agent-memory", 0 < peak <= a.agent_bound_mib * 1024,
         "peak rank process RSS %.1f MiB (bound %.0f MiB); all %d ranks together: median "
         "of Q2 %.1f MiB, max of Q4 %.1f MiB after the first 20%% (%s, not checked)"
         % (peak / 1024, a.agent_bound_mib, a.ranks, rmed / 1024, rtop / 1024,
            "flat" if rf else "not flat" if rf is not None else "too few samples"))

    wal_peak = max((int(r[11]) for r in rows), default=0)
    bpe = final_db / stored if stored > 0 else float("inf")
    line("db-size", bpe <= a.db_budget_bpe,
         "%.1f MiB after the stop for %d events = %.1f bytes/event (budget %.1f); peak during "
         "the run %.1f MiB with a WAL of up to %.1f MiB"
         % (final_db / MIB, stored, bpe, a.db_budget_bpe,
            max((int(r[10]) for r in rows), default=0) / MIB, wal_peak / MIB))
    if not all(results):
        print("reproduce with: --seed %d (the kill and cut schedule and the workload; the "
              "timing of the faults against the traffic differs run to run)" % seed)
    return all(results)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(1)
