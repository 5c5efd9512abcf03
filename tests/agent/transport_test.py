#!/usr/bin/env python3
"""Agent transport against a real meridiand (CTest agent_transport_*).

Each scenario runs meridian-agent-synth (the real agent core, rings and flusher thread,
fed synthetic kernel records with correlation ids 1..N) against a real meridiand on
127.0.0.1, then checks the SQLite database and the agent's one stderr line:

  restart   meridiand SIGKILLed twice mid-stream (each time stopped first, until the
            kernel holds batches it has not read: in flight, unacknowledged, so the agent
            must resend them) and restarted on the same port and database: every
            record the rings accepted is stored exactly once (count, distinct count and
            sum of correlation ids), the exit line's "sent" equals the rows stored, no
            loss, batches were committed after each restart, and some were resent.
  absent    no aggregator at all: the process exits within the flush deadline + 1 s
            and the exit line counts every accepted record as unsent_at_exit.
  silent    an "aggregator" that accepts TCP and never answers: same bound, same report.
  queue     no aggregator and a 1 MiB unacked queue: the newest batches are dropped as
            queue_full, the rest is unsent_at_exit, together exactly what was captured.
  refused   wrong secret: one refusal line, the exit bound holds, the loss is reported.
  tiny      MERIDIAN_RING_RECORDS=16 at full speed: ring drops happen, the exit line's
            ring_full equals the writer's refusals, and so does agent_counters in the
            database; what was accepted is stored.
  fork      a forked child is inert (its writes refused, no exit line of its own).
  record    MERIDIAN_RECORD_FILE: magic, Hello first (without the secret), one frame per
            batch, Goodbye last; record-only mode (no aggregator) exits at once.
  gpu       a GPU registered after the Hello reaches the gpus table (hello again).
  clock     the probe connection: clock_samples rows with t0 <= t3, a connect burst.
  goodbye   through a relay that loses the agent's first Goodbye together with its
            connection (as if meridiand died right after reading it): the agent
            reconnects, sends the Goodbye again, gets it acknowledged; the database has
            ranks.goodbye = 1 and the agent's transport totals, the exit line no loss.
  maxframe  meridiand --max-frame 16384, then 32768, started 1.5 s after the agent: the
            batches built before the HelloReply (sized for the 4 MiB default; ~23 KB
            compressed: over 16 KiB; within 32 KiB but expanding past 8 x 32 KiB, which
            meridiand refuses too) are re-split to fit, the later ones are built to fit;
            every record is stored exactly once, nothing is lost (no ring overflows while
            re-splitting) or rejected as too large, no stored batch is over the limit. The
            premise is checked against a record file (which keeps batches as built, not
            re-split ones): at least one recorded batch is one meridiand refuses, and the
            database holds at least two unrecorded batches per such frame.
  dns       MERIDIAN_AGGREGATOR is a name whose lookup takes 2.5 s (slow_dns.c), at 40,000
            records/s (a ring of 16,384 lasts 0.4 s): the flusher keeps draining while the
            name resolves (no ring drop), everything is stored once, and the name was
            looked up once, also across a meridiand restart on the same address.
  goodbye_unacked  a relay that swallows every Goodbye and keeps the connection open:
            the agent waits for the Ack only until the flush deadline (+ the small goodbye
            grace), says "goodbye not acknowledged", and ranks.goodbye stays 0.
  window    windows the aggregator opens (on demand, a trigger) run on the same steps on
            both ranks (see sc_window).
  profiler_api  the application's cudaProfilerStart/Stop become windows on the same steps
            of both ranks, through the real interposers (see sc_profiler_api).
Usage: transport_test.py SCENARIO --meridiand PATH --synth PATH [--workdir DIR]
"""
import argparse
import os
import re
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import itest  # noqa: E402  (FrameRelay: the relay tests/integration uses too)

SECRET = "agent-test-secret"
PROTOCOL_VERSION = 2  # MRD_PROTOCOL_VERSION (proto/frame.h): the agent records in its own
RUN_ID = "agent-test"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    for s in SYNTHS:  # what the agent said, for the log
        print("agent stderr:\n" + (getattr(s, "err", "") or ""), file=sys.stderr)
    sys.exit(1)


SYNTHS = []


def check(cond, msg):
    if not cond:
        fail(msg)


DAEMONS = []


class Daemon:
    def __init__(self, exe, workdir, port=None, commit_ms=20, extra=()):
        """port None: one reserved below the ephemeral range (itest.stable_port), so that a
        restart on it (restart scenario) cannot find it taken meanwhile by an outgoing
        connection, the agent's own reconnects included (a connection to a port nobody
        listens on can connect to itself)."""
        DAEMONS.append(self)
        self.commit_ms = commit_ms
        self.extra = list(extra)
        self.exe, self.workdir = exe, workdir
        self.db = os.path.join(workdir, "run.db")
        self.port = itest.stable_port() if port is None else port
        self.proc = None
        self.log = open(os.path.join(workdir, "meridiand.log"), "a")

    def start(self):
        port_file = os.path.join(self.workdir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        env = dict(os.environ, MERIDIAN_SECRET=SECRET)
        self.proc = subprocess.Popen(
            [self.exe, "--db", self.db, "--listen", "127.0.0.1:%d" % self.port,
             "--run-id", RUN_ID, "--port-file", port_file, "--commit-ms", str(self.commit_ms)]
            + self.extra,
            env=env, stdout=self.log, stderr=self.log)
        deadline = time.time() + 10
        while not os.path.exists(port_file):
            check(self.proc.poll() is None, "meridiand exited at start (see meridiand.log)")
            check(time.time() < deadline, "meridiand did not start listening")
            time.sleep(0.02)
        with open(port_file) as f:
            self.port = int(f.read().strip())

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                fail("meridiand did not stop on SIGTERM")


def agent_env(port, **extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("MERIDIAN_") or k in ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                               "PMI_RANK", "SLURM_PROCID"):
            del env[k]
    env.update(RANK="3", WORLD_SIZE="8", MERIDIAN_RUN_ID=RUN_ID, MERIDIAN_SECRET=SECRET)
    # Scenarios that assert nothing was lost give the exit flush a minute (a sanitizer
    # build on a loaded machine took longer than the default 5 s to be acknowledged);
    # those that test the deadline pass their own.
    env["MERIDIAN_FLUSH_DEADLINE_MS"] = "60000"
    if port is not None:
        env["MERIDIAN_AGGREGATOR"] = "127.0.0.1:%d" % port
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Synth:
    """Runs the synthetic rank; parses its stdout line and the agent's exit line."""

    def __init__(self, exe, env, args):
        SYNTHS.append(self)
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen([exe] + args, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.t_done = None  # when the workload finished (its stdout line appeared)

    def wait(self, timeout=120):
        # stdout's "synth:" line is printed when the workload is over, before exit
        before = ""
        line = self.proc.stdout.readline()
        while line and not line.startswith("synth:"):  # e.g. the fork child's line
            before += line
            line = self.proc.stdout.readline()
        self.t_done = time.monotonic()
        rest, err = self.proc.communicate(timeout=timeout)
        self.t_exit = time.monotonic()
        self.out = before + line + rest
        self.err = err
        m = re.search(r"synth: active=(\d) written=(\d+) refused=(\d+) idsum=(\d+)", line)
        check(m is not None, "no synth line; stdout=%r stderr=%r" % (self.out, err))
        self.active, self.written, self.refused, self.idsum = map(int, m.groups())
        m = re.search(r"mixed_written=(\d+) mixed_refused=(\d+)", line)
        self.mixed_written, self.mixed_refused = map(int, m.groups()) if m else (0, 0)
        m = re.search(r"dns_lookups=(\d+)", line)
        self.dns_lookups = int(m.group(1)) if m else 0
        lines = [l for l in err.splitlines() if l.startswith("meridian: rank")]
        self.exit_lines = lines
        self.sent = self.batches = self.lost = None
        self.loss = {}
        if lines:
            m = re.match(r"meridian: rank (\d+): (sent|recorded) (\d+) events in (\d+) batches;"
                         r" lost (\d+)(?: \(([^)]*)\))?", lines[-1])
            check(m is not None, "exit line not understood: %r" % lines[-1])
            self.sent, self.batches, self.lost = int(m.group(3)), int(m.group(4)), int(m.group(5))
            for part in (m.group(6) or "").split(", "):
                if part:
                    k, v = part.rsplit(" ", 1)
                    self.loss[k] = int(v)
        return self.proc.returncode


def db_query(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def check_exactly_once(db, s):
    n, distinct, total = db_query(db, "SELECT COUNT(*), COUNT(DISTINCT correlation_id),"
                                      " COALESCE(SUM(correlation_id), 0) FROM kernels")[0]
    check(n == s.written, "kernels stored %d, accepted by the rings %d" % (n, s.written))
    check(distinct == n, "%d kernel rows but %d distinct ids: stored twice" % (n, distinct))
    check(total == s.idsum, "sum of stored ids %d != sum of accepted ids %d" % (total, s.idsum))


def free_port():
    """A port nobody listens on, reserved for the scenario (itest.reserve_port)."""
    return itest.reserve_port(0)


def exit_bound(s, deadline_ms):
    took = s.t_exit - s.t_done
    check(took <= deadline_ms / 1000.0 + 1.0,
          "exit took %.2f s after the workload; deadline %d ms + 1 s" % (took, deadline_ms))
    return took


# ---- scenarios -------------------------------------------------------------------------

def wait_for_batches(db, must_exceed, synth, timeout):
    """Until the database holds more than must_exceed committed batches (meridiand is up)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            n = db_query(db, "SELECT COUNT(*) FROM batches")[0][0]
        except sqlite3.OperationalError:  # not created yet, or a write lock held right now
            n = 0
        if n > must_exceed:
            return n
        check(synth.proc.poll() is None, "the workload ended before batch %d was committed"
              % (must_exceed + 1))
        check(time.monotonic() < deadline, "no batch past %d committed in %d s"
              % (must_exceed, timeout))
        time.sleep(0.05)


UNREAD_BATCH_BYTES = 4096  # far over the clock probes (~60 bytes, one a round) a stopped
                           # meridiand leaves unread: data connection bytes, i.e. batches


def unread_bytes(port):
    """Bytes the kernel holds unread on the established connections that 127.0.0.1:port
    accepted (/proc/net/tcp's rx_queue of the listener's side)."""
    total = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if state == "01" and int(local.split(":")[1], 16) == port:
                total += int(queues.split(":")[1], 16)
    return total


def wait_for_unread(port, want, synth, timeout):
    """Until meridiand (stopped) has at least `want` bytes unread from the agents."""
    deadline = time.monotonic() + timeout
    while unread_bytes(port) < want:
        check(synth.proc.poll() is None, "the workload ended before it sent a batch to the "
              "stopped meridiand")
        check(time.monotonic() < deadline, "the agent sent no %d bytes to the stopped meridiand "
              "in %d s" % (want, timeout))
        time.sleep(0.02)


def sc_restart(a, wd):
    # Each step waits for what it needs on the database, and the workload runs until the
    # test has seen a commit after the second restart (--until-file): a fixed schedule
    # failed on a loaded machine under the sanitizers both ways (nothing committed in the
    # 2 s after a restart; everything committed before the second kill).
    d = Daemon(a.meridiand, wd, commit_ms=800)
    d.start()
    stop_file = os.path.join(wd, "stop-writing")
    s = Synth(a.synth, agent_env(d.port),
              ["--events", "3000000", "--rate", "20000", "--mixed", "--until-file", stop_file])
    batches_before = []
    for _ in range(2):
        wait_for_batches(d.db, batches_before[-1] if batches_before else 0, s, timeout=60)
        # batches in flight, unacknowledged, at the kill: meridiand stopped, so it reads,
        # commits and acknowledges nothing, until the kernel holds bytes the agent sent it
        d.proc.send_signal(signal.SIGSTOP)
        wait_for_unread(d.port, UNREAD_BATCH_BYTES, s, timeout=60)
        d.kill9()
        batches_before.append(db_query(d.db, "SELECT COUNT(*) FROM batches")[0][0])
        time.sleep(0.7)  # the agent keeps producing, queueing, reconnecting meanwhile
        d.start()
    wait_for_batches(d.db, batches_before[-1], s, timeout=60)
    open(stop_file, "w").close()
    rc = s.wait()
    d.stop()
    check(rc == 0, "synth exit code %d" % rc)
    check(s.active == 1 and s.refused == 0, "active=%d refused=%d" % (s.active, s.refused))
    check(len(s.exit_lines) == 1, "expected one exit line, got %r" % s.exit_lines)
    check_exactly_once(d.db, s)
    rows = db_query(d.db, "SELECT (SELECT COUNT(*) FROM kernels) + (SELECT COUNT(*) FROM nvtx)"
                          " + (SELECT COUNT(*) FROM nccl_ops)"
                          " + (SELECT COUNT(*) FROM clock_samples)")[0][0]
    check(s.sent == rows, "exit line says sent %d, the database holds %d" % (s.sent, rows))
    check(s.lost == 0, "lost %d: %r" % (s.lost, s.loss))
    total_batches = db_query(d.db, "SELECT COUNT(*) FROM batches")[0][0]
    check(batches_before[0] < batches_before[1] < total_batches,
          "batches after each restart: %r then %d" % (batches_before, total_batches))
    check(s.batches == total_batches, "exit line %d batches, db %d" % (s.batches, total_batches))
    transport = dict(db_query(d.db, "SELECT name, value FROM agent_counters"
                                    " WHERE rank = 3 AND category = 'transport'"))
    check(transport.get("batches_resent", 0) > 0, "no batch was resent: %r" % transport)
    print("restart: %d records, %d batches (%r at the kills), sent %d; %s" %
          (s.written, total_batches, batches_before, s.sent,
           db_query(d.db, "SELECT name, value FROM agent_counters WHERE category='transport'")))


def sc_absent(a, wd, deadline_ms=3000):
    port = free_port()
    s = Synth(a.synth, agent_env(port, MERIDIAN_FLUSH_DEADLINE_MS=deadline_ms),
              ["--events", "30000", "--rate", "30000"])
    rc = s.wait()
    check(rc == 0, "exit code %d" % rc)
    took = exit_bound(s, deadline_ms)
    check(s.sent == 0, "sent %r with no aggregator" % s.sent)
    check(s.lost == s.written and s.loss.get("unsent_at_exit") == s.written,
          "lost %r (%r), written %d" % (s.lost, s.loss, s.written))
    check("refused" in s.exit_lines[-1], "no reason in %r" % s.exit_lines[-1])
    print("absent: exit %.2f s after the workload (deadline %d ms); %s" %
          (took, deadline_ms, s.exit_lines[-1]))


def sc_queue(a, wd, deadline_ms=1000):
    # Premise: the 1 MiB queue must fill. With --incompressible every kernel record keeps
    # >= 7 random bytes after compression, so 1,000,000 of them are >= 6.7 MiB whatever the
    # timing jitter (plain records compressed to 0.5-2 MiB: the queue filled or not by luck).
    port = free_port()
    s = Synth(a.synth, agent_env(port, MERIDIAN_FLUSH_DEADLINE_MS=deadline_ms,
                                 MERIDIAN_QUEUE_BYTES="1m"),
              ["--events", "1000000", "--rate", "250000", "--mixed", "--incompressible"])
    rc = s.wait()
    check(rc == 0, "exit code %d" % rc)
    exit_bound(s, deadline_ms)
    qf, un = s.loss.get("queue_full", 0), s.loss.get("unsent_at_exit", 0)
    check(qf > 0, "the 1 MiB queue never filled: %r" % s.loss)
    check(un > 0, "nothing left queued at exit: %r" % s.loss)
    # every record the rings accepted is lost to exactly one of the two; what they refused
    # (only when this machine starves the flusher) is ring_full
    accepted = s.written + s.mixed_written
    refused = s.refused + s.mixed_refused
    check(qf + un == accepted and s.loss.get("ring_full", 0) == refused and
          s.lost == accepted + refused,
          "loss %r, accepted %d, refused %d" % (s.loss, accepted, refused))
    print("queue: %s" % s.exit_lines[-1])


def sc_silent(a, wd, deadline_ms=2000):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    port = ls.getsockname()[1]
    s = Synth(a.synth, agent_env(port, MERIDIAN_FLUSH_DEADLINE_MS=deadline_ms),
              ["--events", "20000", "--rate", "20000"])
    rc = s.wait()
    ls.close()
    check(rc == 0, "exit code %d" % rc)
    took = exit_bound(s, deadline_ms)
    check(s.sent == 0 and s.loss.get("unsent_at_exit") == s.written,
          "sent %r loss %r written %d" % (s.sent, s.loss, s.written))
    print("silent: exit %.2f s after the workload; %s" % (took, s.exit_lines[-1]))


def sc_refused(a, wd, deadline_ms=2000):
    d = Daemon(a.meridiand, wd)
    d.start()
    env = agent_env(d.port, MERIDIAN_FLUSH_DEADLINE_MS=deadline_ms, MERIDIAN_SECRET="wrong")
    s = Synth(a.synth, env, ["--events", "5000", "--rate", "10000"])
    rc = s.wait()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    exit_bound(s, deadline_ms)
    refusals = [l for l in s.err.splitlines() if "refused the connection" in l]
    check(len(refusals) == 1, "expected one refusal line: %r" % s.err)
    check(s.sent == 0 and s.lost == s.written, "sent %r lost %r" % (s.sent, s.lost))
    check(db_query(d.db, "SELECT COUNT(*) FROM kernels")[0][0] == 0, "data stored anyway")
    print("refused: %s | %s" % (refusals[0], s.exit_lines[-1]))


def sc_tiny(a, wd):
    d = Daemon(a.meridiand, wd)
    d.start()
    s = Synth(a.synth, agent_env(d.port, MERIDIAN_RING_RECORDS=16),
              ["--events", "300000", "--rate", "0"])
    rc = s.wait()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    check(s.refused > 0, "no ring drops with 16-record rings")
    check(s.loss.get("ring_full") == s.refused,
          "exit line ring_full %r, writer refusals %d" % (s.loss.get("ring_full"), s.refused))
    rows = dict(db_query(d.db, "SELECT name, value FROM agent_counters"
                               " WHERE rank = 3 AND category = 'dropped'"))
    check(rows.get("ring_full") == s.refused,
          "agent_counters ring_full %r, refusals %d" % (rows.get("ring_full"), s.refused))
    check_exactly_once(d.db, s)
    print("tiny: written %d, refused %d; %s" % (s.written, s.refused, s.exit_lines[-1]))


def sc_fork(a, wd):
    d = Daemon(a.meridiand, wd)
    d.start()
    s = Synth(a.synth, agent_env(d.port), ["--events", "5000", "--rate", "20000", "--fork",
                                           "--shutdown"])
    rc = s.wait()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    m = re.search(r"synth-child: active=(\d+) refused=(\d+)", s.out)
    check(m is not None, "no child line in %r" % s.out)
    check(m.group(1) == "0" and m.group(2) == "100", "child not inert: %s" % m.group(0))
    check(len(s.exit_lines) == 1, "exit lines: %r" % s.exit_lines)
    check_exactly_once(d.db, s)
    print("fork: child %s; parent %s" % (m.group(0), s.exit_lines[0]))


def read_capture(path, with_flags=False):
    """The frames of a record file: (type, payload), or (type, payload, flags)."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"MRDCAP1\n", "bad magic %r" % data[:8])
    frames, off = [], 8
    while off < len(data):
        check(len(data) - off >= 8, "truncated frame header at %d" % off)
        ver, typ, flags, length = struct.unpack_from("<BBHI", data, off)
        check(ver == PROTOCOL_VERSION, "version %d at %d" % (ver, off))
        check(typ not in (9, 10), "a Challenge or Proof (type %d) recorded at %d" % (typ, off))
        payload = data[off + 8:off + 8 + length]
        frames.append((typ, payload, flags) if with_flags else (typ, payload))
        off += 8 + length
    check(off == len(data), "trailing bytes in the capture")
    return frames


FLAG_ZSTD, MAX_EXPANSION = 0x0001, 8  # proto/frame.h


def zstd_content_size(p):
    """Frame_Content_Size from a zstd frame header (RFC 8878, 3.1.1.1), or None. meridian's
    compressed payloads always declare it (proto/frame.h)."""
    if len(p) < 6 or p[:4] != b"\x28\xb5\x2f\xfd":
        return None
    fhd = p[4]
    single = (fhd >> 5) & 1
    n = (single, 2, 4, 8)[fhd >> 6]
    off = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    if n == 0 or len(p) < off + n:
        return None
    v = int.from_bytes(p[off:off + n], "little")
    return v + 256 if n == 2 else v


def refused_by(limit, payload, flags):
    """meridiand's own check of a frame against --max-frame: the payload within the limit
    and, compressed, declaring a content size within MAX_EXPANSION times it."""
    if len(payload) > limit:
        return True
    if flags & FLAG_ZSTD:
        size = zstd_content_size(payload)
        return size is None or size > MAX_EXPANSION * limit
    return False


def sc_record(a, wd):
    d = Daemon(a.meridiand, wd)
    d.start()
    cap = os.path.join(wd, "rank%r.mrdcap")
    s = Synth(a.synth, agent_env(d.port, MERIDIAN_RECORD_FILE=cap),
              ["--events", "40000", "--rate", "40000", "--mixed"])
    rc = s.wait()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    frames = read_capture(os.path.join(wd, "rank3.mrdcap"))
    types = [t for t, _ in frames]
    check(types[0] == 1 and types[-1] == 7, "first/last frame types %r" % (types[:1] + types[-1:],))
    check(set(types[1:-1]) == {5}, "middle frames are not all batches: %r" % set(types))
    check(len(types) - 2 == s.batches, "%d batch frames, exit line %d" % (len(types) - 2,
                                                                          s.batches))
    check(SECRET.encode() not in frames[0][1], "the secret is in the recorded Hello")
    # record-only: no aggregator, the agent only writes the file and exits without waiting
    cap2 = os.path.join(wd, "only.mrdcap")
    env = agent_env(None, MERIDIAN_RECORD_FILE=cap2)
    s2 = Synth(a.synth, env, ["--events", "20000", "--rate", "40000"])
    frames2 = check_record_only(s2, cap2, "record-only")
    print("record: %d frames (%d batches); record-only %d frames, %s" %
          (len(frames), s.batches, len(frames2), s2.exit_lines[-1]))


def check_record_only(s, path, what):
    """A record-only rank s (no aggregator) that wrote path: it exited 0 at once (nothing to
    wait for), its exit line says every event was recorded and none lost, and the file holds
    the Hello, its batches (as many as the exit line says) and the Goodbye. The frames."""
    check(s.wait() == 0, "%s: exit code; stderr %r" % (what, s.err))
    check(s.t_exit - s.t_done < 1.0, "%s: exit took %.2f s" % (what, s.t_exit - s.t_done))
    check(s.sent == s.written and s.lost == 0 and "recorded" in s.exit_lines[-1],
          "%s: exit line %r" % (what, s.exit_lines))
    frames = read_capture(path)
    types = [t for t, _ in frames]
    check(types[0] == 1 and types[-1] == 7 and set(types[1:-1]) <= {5}
          and len(types) - 2 == s.batches, "%s: frames %r, exit line's batches %d"
          % (what, types, s.batches))
    return frames


def sc_record_run(a, wd):
    """`meridian run --record-file` without an aggregator: the launcher sets record-only
    mode (no secret, no daemon; a stale secret file in the environment is not passed on) and
    the run id (`recorded` when none is given), the rank writes the whole capture and exits
    without waiting; without a record file or an aggregator `meridian run` refuses."""
    env = agent_env(None)
    del env["MERIDIAN_SECRET"], env["MERIDIAN_RUN_ID"]
    cap = os.path.join(wd, "r%r.mrdcap")
    env["MERIDIAN_SECRET_FILE"] = os.path.join(wd, "missing-secret")  # stale: not passed on
    s = Synth(a.meridian, env, ["run", "--record-file", cap, "--run-id", "rec-run-7", "--",
                                a.synth, "--events", "20000", "--rate", "40000"])
    frames = check_record_only(s, os.path.join(wd, "r3.mrdcap"), "run")  # %r: RANK=3
    check("recording only" in s.err, "no word of record-only mode: %r" % s.err)
    check(b"rec-run-7" in frames[0][1], "the run id is not in the recorded Hello")
    # no run id given (an empty one counts as none): `recorded`
    env["MERIDIAN_RUN_ID"] = ""
    s2 = Synth(a.meridian, env, ["run", "--record-file", os.path.join(wd, "d.mrdcap"), "--",
                                 a.synth, "--events", "2000", "--rate", "40000"])
    frames2 = check_record_only(s2, os.path.join(wd, "d.mrdcap"), "default run id")
    check(b"recorded" in frames2[0][1], "the default run id is not in the recorded Hello")
    del env["MERIDIAN_RUN_ID"]
    p = subprocess.run([a.meridian, "run", "--", a.synth], env=env, capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 125 and "--record-file alone" in p.stderr,
          "no aggregator and no record file: exit %d, %r" % (p.returncode, p.stderr))
    print("record_run: %d frames (%d batches); %s" % (len(frames), s.batches,
                                                     s.exit_lines[-1]))


def sc_gpu(a, wd):
    d = Daemon(a.meridiand, wd)
    d.start()
    s = Synth(a.synth, agent_env(d.port), ["--events", "60000", "--rate", "20000",
                                           "--gpu-after-ms", "300"])
    rc = s.wait()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    gpus = db_query(d.db, "SELECT rank, device, uuid, pci_bus_id, name FROM gpus")
    check(gpus == [(3, 0, "GPU-00000000-1111-2222-3333-444444444444", "0000:19:00.0",
                    "Synthetic GPU")], "gpus table %r" % gpus)
    check_exactly_once(d.db, s)
    check(s.lost == 0, "lost %r" % s.loss)
    # a GPU registered just before exit reaches the database through the exit flush
    os.mkdir(os.path.join(wd, "late"))
    d2 = Daemon(a.meridiand, os.path.join(wd, "late"))
    d2.start()
    s2 = Synth(a.synth, agent_env(d2.port), ["--events", "2000", "--rate", "10000",
                                             "--gpu-after-ms", "150"])
    check(s2.wait() == 0, "late-gpu exit code")
    d2.stop()
    gpus2 = db_query(d2.db, "SELECT rank, device FROM gpus")
    check(gpus2 == [(3, 0)], "late gpu: gpus table %r" % gpus2)
    check_exactly_once(d2.db, s2)
    print("gpu: %r; registered 150 ms before exit: %r" % (gpus, gpus2))


def sc_clock(a, wd):
    d = Daemon(a.meridiand, wd)
    d.start()
    s = Synth(a.synth, agent_env(d.port, MERIDIAN_PROBE_INTERVAL_MS=100),
              ["--events", "20000", "--rate", "10000"])
    rc = s.wait()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    rows = db_query(d.db, "SELECT t0, t1, t2, t3 FROM clock_samples WHERE rank = 3 ORDER BY t0")
    check(len(rows) >= 16 + 2 * 8, "only %d clock samples" % len(rows))
    for t0, t1, t2, t3 in rows:
        check(t0 <= t3 and t1 <= t2, "bad sample %r" % ((t0, t1, t2, t3),))
    rtts = sorted((t3 - t0) - (t2 - t1) for t0, t1, t2, t3 in rows)
    check(rtts[0] >= 0, "negative round trip %d" % rtts[0])
    print("clock: %d samples, round trip min %d ns median %d ns" %
          (len(rows), rtts[0], rtts[len(rtts) // 2]))


class GoodbyeRelay(itest.FrameRelay):
    """itest.FrameRelay in front of meridiand that does something to the agent's Goodbyes
    and passes every other frame: mode "lose1" drops the first Goodbye and closes both
    sides at once (an aggregator dying after reading it); mode "swallow" drops every one
    and keeps both sides open (one that never answers). Counts the Goodbyes it saw."""

    def __init__(self, port, mode):
        self.mode, self.goodbyes = mode, 0
        super().__init__(port, self._goodbye, forward_eof=mode != "swallow", backlog=16)

    def _goodbye(self, conn, ftype, frame):
        if ftype != self.GOODBYE:
            return self.PASS
        self.goodbyes += 1
        if self.mode == "swallow":
            return self.DROP
        if self.mode == "lose1" and self.goodbyes == 1:
            return self.CUT
        return self.PASS


def sc_goodbye(a, wd):
    d = Daemon(a.meridiand, wd)
    d.start()
    relay = GoodbyeRelay(d.port, "lose1")
    s = Synth(a.synth, agent_env(relay.port), ["--events", "20000", "--rate", "20000"])
    rc = s.wait()
    relay.close()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    check(relay.goodbyes == 2, "the relay saw %d Goodbyes, expected the lost one and its "
                               "resend" % relay.goodbyes)
    check(s.lost == 0 and "not acknowledged" not in s.exit_lines[-1],
          "exit line %r" % s.exit_lines[-1])
    check(db_query(d.db, "SELECT goodbye FROM ranks WHERE rank = 3") == [(1,)],
          "ranks.goodbye %r" % db_query(d.db, "SELECT goodbye FROM ranks"))
    transport = dict(db_query(d.db, "SELECT name, value FROM agent_counters"
                                    " WHERE rank = 3 AND category = 'transport'"))
    check(transport.get("last_seq", 0) > 0 and transport.get("batches_sent") == s.batches,
          "transport totals %r, exit line %d batches" % (transport, s.batches))
    check_exactly_once(d.db, s)
    print("goodbye: lost with its connection, sent again: %d Goodbyes through the relay; %s"
          % (relay.goodbyes, s.exit_lines[-1]))


def sc_goodbye_unacked(a, wd, deadline_ms=1500):
    d = Daemon(a.meridiand, wd)
    d.start()
    relay = GoodbyeRelay(d.port, "swallow")
    s = Synth(a.synth, agent_env(relay.port, MERIDIAN_FLUSH_DEADLINE_MS=deadline_ms),
              ["--events", "5000", "--rate", "20000"])
    rc = s.wait()
    relay.close()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    took = exit_bound(s, deadline_ms)
    # it waited for the Ack (it does not give up at once) but not past the bound
    check(took >= deadline_ms / 1000.0 * 0.5, "exit after %.2f s: did not wait for the Ack"
          % took)
    check(relay.goodbyes >= 1, "no Goodbye reached the relay")
    check(s.lost == 0 and "goodbye not acknowledged" in s.exit_lines[-1],
          "exit line %r" % s.exit_lines[-1])
    check(db_query(d.db, "SELECT goodbye FROM ranks WHERE rank = 3") == [(0,)],
          "ranks.goodbye %r" % db_query(d.db, "SELECT goodbye FROM ranks"))
    check_exactly_once(d.db, s)
    print("goodbye_unacked: exit %.2f s after the workload (deadline %d ms); %s"
          % (took, deadline_ms, s.exit_lines[-1]))


def sc_maxframe(a, wd):
    # 16384: the early batches (~23 KB compressed) are over the limit; 32768: they fit it
    # compressed but expand past 8 x 32 KiB, which the aggregator refuses as well
    for limit in (16384, 32768):
        sub = os.path.join(wd, str(limit))
        os.mkdir(sub)
        maxframe_once(a, sub, limit)


def maxframe_once(a, wd, limit):
    port = free_port()
    # full batches while no aggregator is there (16,384 events: ~23 KB compressed, over
    # the limit); each is re-split in a pass of its own while the rings keep draining.
    # The record file keeps every batch as built, but not the ones a re-split makes.
    cap = os.path.join(wd, "maxframe.mrdcap")
    # rings that hold the whole workload: a starved flusher (sanitizers, a loaded machine)
    # must not turn into ring_full refusals, which are not what this scenario tests
    s = Synth(a.synth, agent_env(port, MERIDIAN_BATCH_MS=4000, MERIDIAN_RECORD_FILE=cap,
                                 MERIDIAN_RING_RECORDS=262144, MERIDIAN_RING_THREADS=4),
              ["--events", "200000", "--rate", "40000", "--mixed"])
    time.sleep(1.5)
    d = Daemon(a.meridiand, wd, port=port, extra=["--max-frame", str(limit)])
    d.start()
    rc = s.wait()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    check(s.active == 1 and s.refused == 0 and s.mixed_refused == 0,
          "active=%d refused=%d/%d" % (s.active, s.refused, s.mixed_refused))
    check(s.lost == 0, "lost %d: %r" % (s.lost, s.loss))
    check_exactly_once(d.db, s)
    nvtx = db_query(d.db, "SELECT COUNT(*) FROM nvtx")[0][0]
    ops = db_query(d.db, "SELECT COUNT(*) FROM nccl_ops")[0][0]
    check(nvtx + ops == s.mixed_written, "nvtx %d + nccl_ops %d stored, %d written"
          % (nvtx, ops, s.mixed_written))
    unnamed = db_query(d.db, "SELECT COUNT(*) FROM nvtx WHERE name_id IS NULL")[0][0]
    check(unnamed == 0, "%d nvtx rows lost their name" % unnamed)
    n, biggest = db_query(d.db, "SELECT COUNT(*), MAX(wire_bytes) FROM batches")[0]
    check(biggest <= limit + 8, "a stored batch of %d bytes over the %d limit" % (biggest, limit))
    rejected = dict(db_query(d.db, "SELECT name, value FROM aggregator_counters"))
    check(rejected.get("rejected_too_large", 0) == 0, "rejected as too large: %r" % rejected)
    # The premise: batches were built that this meridiand refuses, and they were re-split.
    # Nothing was lost, so every recorded batch it takes is stored once; the stored batches
    # beyond those are the re-split ones (never recorded), at least two per refused frame
    # (its events do not fit one batch within the limit).
    check("recording stopped" not in s.err, "the record file is incomplete")
    built = [(p, fl) for t, p, fl in read_capture(cap, with_flags=True) if t == 5]
    over = sum(refused_by(limit, p, fl) for p, fl in built)
    check(over >= 1, "no batch built before the HelloReply is over the %d limit: nothing "
                     "to re-split (%d batches recorded)" % (limit, len(built)))
    resplit = n - (len(built) - over)
    check(resplit >= 2 * over, "%d of %d recorded batches are over the limit, but only %d "
                               "stored batches were not recorded: no re-split"
          % (over, len(built), resplit))
    print("maxframe %d: %d records in %d batches of at most %d bytes (%d built over the limit"
          " -> %d re-split batches); %s" % (limit, s.written + s.mixed_written, n, biggest,
                                           over, resplit, s.exit_lines[-1]))


def sc_dns(a, wd, delay_ms=2500):
    d = Daemon(a.meridiand, wd)
    d.start()
    # default rings (16384 records: 0.4 s at this rate, so a loaded machine's scheduling
    # does not overflow them; a flusher stuck in the 2.5 s lookup would)
    env = agent_env(None, MERIDIAN_AGGREGATOR="agg.meridian-test:%d" % d.port,
                    MRD_TEST_DNS_DELAY_MS=delay_ms)
    s = Synth(a.synth, env, ["--events", "160000", "--rate", "40000", "--mixed"])
    wait_for_batches(d.db, 0, s, timeout=60)
    d.kill9()  # connected (a batch committed); a restart on the same address needs no new lookup
    time.sleep(0.5)
    d.start()
    rc = s.wait()
    d.stop()
    check(rc == 0, "exit code %d" % rc)
    check(s.active == 1, "inactive")
    check(s.refused == 0 and s.mixed_refused == 0,
          "the rings overflowed (%d + %d refused): the flusher stopped draining"
          % (s.refused, s.mixed_refused))
    check(s.lost == 0, "lost %d: %r" % (s.lost, s.loss))
    check_exactly_once(d.db, s)
    check(s.dns_lookups == 1, "the name was looked up %d times" % s.dns_lookups)
    print("dns: %d records through a %d ms lookup, %d lookup(s); %s"
          % (s.written + s.mixed_written, delay_ms, s.dns_lookups, s.exit_lines[-1]))


def window_steps(s):
    """The steps of a Synth run with --steps that belonged to an aggregator's window."""
    m = re.search(r"synth-steps: steps=\d+ window_steps=(\S+)", s.out)
    check(m is not None, "no synth-steps line: %r" % s.out)
    return m.group(1)


def ask_window(a, db, length):
    """`meridian window DB --length N`; returns (first, last, what it said)."""
    p = subprocess.run([a.meridian, "window", db, "--length", str(length)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    check(p.returncode == 0, "meridian window: rc %d, %r" % (p.returncode, p.stdout))
    m = re.search(r"steps=(\d+)-(\d+)", p.stdout)
    check(m is not None, "meridian window said %r" % p.stdout)
    return int(m.group(1)), int(m.group(2)), p.stdout.strip()


def wait_for_hold(synths, prefixes, step, deadline_s=60):
    """Until every rank has reached its hold at `step` (its --hold-file PREFIX.STEP exists);
    returns each rank's agent-clock time when the hold began."""
    deadline = time.monotonic() + deadline_s
    held = []
    for s, prefix in zip(synths, prefixes):
        path = "%s.%d" % (prefix, step)
        while not os.path.exists(path):
            check(s.proc.poll() is None, "a rank exited before its hold at step %d" % step)
            check(time.monotonic() < deadline, "no rank held at step %d in %d s"
                  % (step, deadline_s))
            time.sleep(0.02)
        with open(path) as f:
            held.append(int(f.read()))
    return held


def wait_for_step_reports(db, held_since, reports, deadline_s=60):
    """Until each rank r has `reports` clock samples with t0 > held_since[r] in the database.
    A sample is a probe meridiand answered, and it feeds the probe's step counter to window
    control before it answers: a probe stamped after the hold began (and the one after it,
    whose counter was read after that stamp) told meridiand the held rank's steps and a step
    time. So this is the state in which meridiand knows every rank's steps (the window's
    choice rests on all of them) and holds enough step times for the trigger."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            con = sqlite3.connect(db)
            try:
                got = [con.execute("SELECT COUNT(*) FROM clock_samples WHERE rank = ? AND t0 > ?",
                                   (r, t)).fetchone()[0] for r, t in enumerate(held_since)]
            finally:
                con.close()
        except sqlite3.OperationalError:  # a write lock held right now
            got = [0] * len(held_since)
        if all(n >= reports for n in got):
            return got
        check(time.monotonic() < deadline, "clock samples since the holds: %r in %d s, want %d "
              "each" % (got, deadline_s, reports))
        time.sleep(0.05)


WINDOW_OPEN = re.compile(r"window (\d+) \((\w+)\): steps (\d+)-(\d+) \((\d+) steps\) = highest "
                         r"step counter (\d+) \(of (\d+) ranks?\) \+ margin (\d+)")


def sc_window(a, wd):
    """Windows the aggregator opens reach every rank on the same steps: two ranks (the real
    agent core and transport, 400 steps of 10 ms counted by agent/base/stepctl, probes every
    100 ms), an on-demand window through `meridian window` and the control socket, and a
    trigger when rank 1's step 250 takes 200 ms (factor 3, length 4, cooldown 50 steps).

    Paced by state, not by time. Each rank reports its steps' nominal lengths
    (--nominal-step-times): 10 ms, and 200 ms for rank 1's step 250, however long a loaded
    machine makes them, so the median is exactly 10 ms, the margin exactly
    ceil(2 x 100 ms / 10 ms) = 20 steps, and the only step over 3 x the median is step 250
    (no earlier trigger, whose cooldown could hold the one of step 250 back). Both ranks
    hold at step 50 until the test has seen meridiand answer ten probes of each stamped
    during the hold (so it knows both ranks' steps and over MRD_WINCTL_TRIGGER_MIN step
    times), then the test asks for a 5-step window, and each rank holds until its agent has
    accepted that request (--hold 50:1). Both ranks hold at step 255 again until their agent
    has accepted the trigger's request too (--hold 255:2): however late a reply comes, no
    rank begins a window's first step without it.

    Expected (winctl.h's rule): exactly two windows announced; the on-demand one at
    steps 71-75 (highest 51 + margin 20, of 2 ranks); one trigger window of 4 steps whose
    first is its highest step counter (rank 1 had ended step 250, so at least 251; no rank
    past its hold at 255, so at most 256) + margin 20. Each rank's own record of its window
    steps is exactly the union of the two."""
    check(a.meridian is not None, "--meridian is required for this scenario")
    hold_ask, slow, hold_trigger, steps = 50, 250, 255, 400
    d = Daemon(a.meridiand, wd, extra=["--control", os.path.join(wd, "run.db.ctl"),
                                        "--probe-interval-ms", "100",
                                        "--trigger-step-factor", "3",
                                        "--trigger-length", "4",
                                        "--trigger-cooldown-steps", "50"])
    d.start()
    check(os.path.exists(os.path.join(wd, "run.db.ctl")), "no control socket")
    synths, prefixes = [], []
    for r in range(2):
        env = agent_env(d.port, RANK=str(r), WORLD_SIZE="2", MERIDIAN_PROBE_INTERVAL_MS=100)
        prefixes.append(os.path.join(wd, "hold-rank%d" % r))
        args = ["--events", "1000", "--rate", "1000", "--steps", str(steps), "--step-ms", "10",
                "--nominal-step-times", "--hold", "%d:1" % hold_ask,
                "--hold", "%d:2" % hold_trigger, "--hold-file", prefixes[-1]]
        if r == 1:
            args += ["--slow-step", str(slow), "--slow-ms", "200"]
        synths.append(Synth(a.synth, env, args))
    held_since = wait_for_hold(synths, prefixes, hold_ask)
    wait_for_step_reports(d.db, held_since, 10)
    first, last, said = ask_window(a, d.db, 5)
    margin = 20  # ceil(2 x 100 ms probe interval / 10 ms median step), over the least 2
    check(re.search(r"\bmargin=%d\b" % margin, said) and "ranks=2" in said,
          "want margin=%d of ranks=2: %s" % (margin, said))
    check((first, last) == (hold_ask + 1 + margin, hold_ask + 1 + margin + 4),
          "want steps %d-%d (highest %d + margin %d, 5 steps): %s"
          % (hold_ask + 1 + margin, hold_ask + 5 + margin, hold_ask + 1, margin, said))
    for s in synths:
        check(s.wait() == 0, "a rank failed: %r" % s.err)
        m = re.search(r"synth-steps: .* hold_timeouts=(\d+)", s.out)
        check(m is not None and m.group(1) == "0", "a hold timed out: %r" % s.out)
    d.stop()
    log = open(os.path.join(wd, "meridiand.log")).read()
    announced = [(why, int(f), int(l), int(n), int(high), int(ranks), int(mg))
                 for _, why, f, l, n, high, ranks, mg in WINDOW_OPEN.findall(log)]
    check(len(announced) == 2 and announced[0] == ("on_demand", first, last, 5, hold_ask + 1,
                                                   2, margin),
          "want the on-demand window, then one trigger window; announced %r; log:\n%s"
          % (announced, log[-3000:]))
    why, tf, tl, tn, high, ranks, mg = announced[1]
    check(why == "trigger" and tn == 4 and tl == tf + 3 and mg == margin and tf == high + mg
          and slow + 1 <= high <= hold_trigger + 1 and ranks == 2,
          "want a 4-step trigger window at highest (%d..%d) + margin %d: %r"
          % (slow + 1, hold_trigger + 1, margin, announced[1]))
    want = "%d-%d,%d-%d" % (first, last, tf, tl)
    for r, s in enumerate(synths):
        got = window_steps(s)
        check(got == want, "rank %d ran window steps %s, the aggregator announced %s"
              % (r, got, want))
    print("window: on demand %s; trigger %d-%d; both ranks ran exactly %s" % (said, tf, tl, want))


PROFILER_OPEN = re.compile(
    r"window (\d+) \(profiler_api\): steps (\d+)-(\d+) \((\d+) steps\) = highest step "
    r"counter (\d+) \(of \d+ ranks?\) \+ margin (\d+)")
PROFILER_NARROW = re.compile(
    r"window (\d+) \(profiler_api\) narrowed: steps (\d+)-(\d+) \(\d+ steps\); last = the "
    r"larger of its first step \d+ and highest step counter (\d+) \+ margin (\d+)")


def sc_profiler_api(a, wd):
    """The application's cudaProfilerStart/Stop open windows on the same steps of every rank:
    two ranks (the real agent core and transport, 10 ms steps, probes every 100 ms, window
    records written as capture writes them); rank 0 calls cudaProfilerStart in step 40 and
    cudaProfilerStop in step 120, then again in steps 260 and 300; rank 1 calls
    cuProfilerStart/cuProfilerStop in steps 260 and 300 only (the driver's form, and a pair
    some other rank opened already). Every call goes through libmeridian_profapi.so's
    exported interposer to a stub that counts it and returns a value the synth checks.
    Expected, from meridiand's log lines and the rule of aggregator/ingest/winctl.h: exactly
    two profiler_api windows; each opened at first = highest + margin after its start
    (first > start step + margin) and narrowed to last = max(first, highest + margin)
    after its stop (last > stop step + margin); both ranks ran exactly those steps; after
    `meridian finalize`, each rank's windows rows are those two with reason profiler_api;
    agent_counters say 2 starts and 2 stops for rank 0, 1 and 1 for rank 1. With --profapi:
    the library exports exactly the four functions, unversioned (so that they bind in place
    of libcudart.so.13's and libcuda.so.1's versioned ones). With --agent-lib: rank 2 is
    meridian-profapi-local, which loads libmeridian.so as CUDA does (by path, RTLD_LOCAL),
    once the synths are done, and calls the pair: the interposers find the agent through
    CUDA_INJECTION64_PATH, and its Goodbye counts 1 start and 1 stop (no window: that pair
    is not past the two the aggregator has seen)."""
    check(a.meridian is not None, "--meridian is required for this scenario")
    if a.profapi:
        out = subprocess.run(["objdump", "-T", a.profapi], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
        syms = {l.split()[-1]: l.split()[-2] for l in out.splitlines()
                if " DF .text" in l or " DO .data" in l or " DO .bss" in l}
        want = {n: "Base" for n in ("cudaProfilerStart", "cudaProfilerStop", "cuProfilerStart",
                                    "cuProfilerStop")}
        check(syms == want, "libmeridian_profapi.so exports %r, want %r" % (syms, want))
    d = Daemon(a.meridiand, wd, extra=["--probe-interval-ms", "100"])
    d.start()
    pairs = {0: [(40, 120), (260, 300)], 1: [(260, 300)]}
    nsteps = 420
    synths = []
    for r in range(2):
        env = agent_env(d.port, RANK=str(r), WORLD_SIZE="2", MERIDIAN_PROBE_INTERVAL_MS=100)
        args = ["--events", "400", "--rate", "400", "--steps", str(nsteps), "--step-ms", "10",
                "--window-records"]
        for p0, p1 in pairs[r]:
            args += ["--profiler", "%d-%d" % (p0, p1)]
        if r == 1:
            args.append("--profiler-driver")
        synths.append(Synth(a.synth, env, args))
    for s in synths:
        check(s.wait() == 0, "a rank failed: %r" % s.err)
    if a.agent_lib:
        pairs[2] = [(0, 0)]
        exe = os.path.join(os.path.dirname(os.path.abspath(a.synth)), "meridian-profapi-local")
        env = agent_env(d.port, RANK="2", WORLD_SIZE="3", CUDA_INJECTION64_PATH=a.agent_lib)
        p = subprocess.run([exe], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=120)
        check(p.returncode == 0 and "started=1 rc_start=1001 rc_stop=1001 forwarded=2" in p.stdout,
              "meridian-profapi-local: rc %d, %r %r" % (p.returncode, p.stdout, p.stderr))
    d.stop()
    for r, s in enumerate(synths):
        m = re.search(r"synth-profiler: calls=(\d+) forwarded=(\d+) bad_rc=(\d+)", s.out)
        check(m is not None, "rank %d: no synth-profiler line: %r" % (r, s.out))
        calls, fwd, bad = map(int, m.groups())
        check(calls == 2 * len(pairs[r]) and fwd == calls and bad == 0,
              "rank %d: %d calls, %d reached the stub, %d return values changed"
              % (r, calls, fwd, bad))
    log = open(os.path.join(wd, "meridiand.log")).read()
    opened = {int(m[0]): tuple(map(int, m[1:])) for m in PROFILER_OPEN.findall(log)}
    narrowed = {int(m[0]): tuple(map(int, m[1:])) for m in PROFILER_NARROW.findall(log)}
    check(len(opened) == 2 and sorted(opened) == sorted(narrowed),
          "want two profiler_api windows, each opened and narrowed once; log:\n%s" % log[-3000:])
    windows = []
    for k, (wid, (first, last_open, length, high, margin)) in enumerate(sorted(opened.items())):
        start, stop = pairs[0][k]
        check(first == high + margin and length == 100000 and last_open == first + 99999,
              "window %d opened as %r" % (wid, opened[wid]))
        check(first > start + margin, "window %d starts at %d, not after rank 0's start in "
              "step %d + margin %d" % (wid, first, start, margin))
        n_first, last, high2, margin2 = narrowed[wid]
        check(n_first == first and last == max(first, high2 + margin2),
              "window %d narrowed to %r: want last = max(%d, %d + %d)"
              % (wid, narrowed[wid], first, high2, margin2))
        check(last > stop + margin2, "window %d ends at %d, not after the stop in step %d"
              % (wid, last, stop))
        windows.append((first, last))
    want = ",".join("%d-%d" % w for w in windows)
    for r, s in enumerate(synths):
        got = window_steps(s)
        check(got == want, "rank %d ran window steps %s, the aggregator announced %s"
              % (r, got, want))
    p = subprocess.run([a.meridian, "finalize", d.db], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    check(p.returncode == 0, "meridian finalize: %s" % p.stdout)
    con = sqlite3.connect(d.db)
    for r in sorted(pairs):
        rows = con.execute("SELECT first_step, last_step, reason FROM windows WHERE rank = ? "
                           "ORDER BY first_step", (r,)).fetchall()
        check(rows == ([(f, l, "profiler_api") for f, l in windows] if r < 2 else []),
              "rank %d's windows rows %r, want %r" % (r, rows, windows))
        cnt = dict(con.execute("SELECT name, value FROM agent_counters WHERE rank = ? AND "
                               "category = 'window' AND name LIKE 'profiler_%'", (r,)))
        n = len(pairs[r])
        check(cnt == {"profiler_starts": n, "profiler_stops": n},
              "rank %d's profiler counters %r, want %d each" % (r, cnt, n))
    con.close()
    print("profiler_api: windows %s on both ranks, reason profiler_api; calls forwarded with "
          "their return values" % want)


SCENARIOS = {"restart": sc_restart, "absent": sc_absent, "silent": sc_silent, "queue": sc_queue,
             "refused": sc_refused, "tiny": sc_tiny, "fork": sc_fork, "record": sc_record,
             "gpu": sc_gpu, "clock": sc_clock, "goodbye": sc_goodbye,
             "goodbye_unacked": sc_goodbye_unacked, "maxframe": sc_maxframe, "dns": sc_dns,
             "window": sc_window, "profiler_api": sc_profiler_api, "record_run": sc_record_run}


def cleanup(wd, ok, keep):
    """Kills every daemon still running; removes wd after a pass unless keep (burst_test.py
    shares it)."""
    for d in DAEMONS:
        if d.proc and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
    if ok and not keep:
        shutil.rmtree(wd, ignore_errors=True)
    else:
        print("work directory kept: %s" % wd, file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--meridiand", required=True)
    ap.add_argument("--synth", required=True)
    ap.add_argument("--meridian", help="the meridian CLI (scenarios window, profiler_api, "
                    "record_run)")
    ap.add_argument("--profapi", help="libmeridian_profapi.so (scenario profiler_api)")
    ap.add_argument("--agent-lib", help="libmeridian.so (scenario profiler_api)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    wd = tempfile.mkdtemp(prefix="mrd-agent-%s-" % a.scenario)
    ok = False
    try:
        SCENARIOS[a.scenario](a, wd)
        ok = True
    finally:
        cleanup(wd, ok, a.keep)


if __name__ == "__main__":
    main()
