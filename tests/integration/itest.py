"""Helpers shared by the integration tests: a real meridiand, the load generator, the verifier,
and a frame relay that sits between clients and meridiand (also used by tests/agent).

Every test runs real processes over loopback against a real SQLite file in a fresh temporary
folder (under the build tree, removed on success). Times are bounded: every wait has a
deadline and a failed test kills what it started.
"""
import argparse
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time


def parse_args(extra=None):
    p = argparse.ArgumentParser()
    p.add_argument("--meridiand", required=True)
    p.add_argument("--replay", required=True)
    p.add_argument("--verify", required=True)
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    for a in extra or []:
        p.add_argument(a[0], **a[1])
    return p.parse_args()


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def log(msg):
    print("[%7.2f] %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


class Workdir:
    def __init__(self, args, name):
        base = args.workdir or os.getcwd()
        self.path = tempfile.mkdtemp(prefix=name + ".", dir=base)
        self.keep = args.keep

    def file(self, name):
        return os.path.join(self.path, name)

    def done(self, ok):
        if ok and not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            print("work folder kept: " + self.path)


_RESERVED = []  # the sockets that hold reserve_port's ports for the life of this process


def reserve_port(port=0):
    """Reserves a loopback TCP port (0: any free one) for the life of this process and
    returns it, or None where it is taken. The reservation is a socket that never listens,
    bound without SO_REUSEADDR (so the bind fails where any socket holds the port) and given
    SO_REUSEADDR after: no other bind, reserving or not, and no outgoing connection can take
    the port, a connection to it is refused, and meridiand (SO_REUSEADDR too) can still
    listen on it. Binding and closing again, as before, left a window in which another
    test's connection or server could take the port."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    _RESERVED.append(s)
    return s.getsockname()[1]


def stable_port():
    """A port below the ephemeral range (32768+), reserved by reserve_port: a daemon
    restarted on it after SIGKILL cannot find it taken by one of its own clients' outgoing
    connections or by another test (nor can a client connect to itself while nothing
    listens there)."""
    for _ in range(200):
        port = reserve_port(random.randrange(20000, 32000))
        if port is not None:
            return port
    fail("no free port in 20000..32000")


class Daemon:
    """One meridiand process on 127.0.0.1; restartable on the same database and port (a
    port stable_port reserved)."""

    def __init__(self, exe, wd, run_id="itest-run", secret="itest-secret-0123456789",
                 extra=()):
        self.exe, self.wd, self.run_id = exe, wd, run_id
        self.extra = list(extra)  # more meridiand options, e.g. ["--max-frame", "16384"]
        self.db = wd.file("meridian.db")
        self.secret_file = wd.file("secret")
        with open(self.secret_file, "w") as f:
            f.write(secret)
        os.chmod(self.secret_file, 0o600)
        # reserved for the process, below the ephemeral range: a restart on the same port
        # (sigkill, resend, soak) cannot find it taken meanwhile
        self.port = stable_port()
        self.proc = None
        self.starts = 0

    def start(self, timeout=20.0):
        port_file = self.wd.file("port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        deadline = time.monotonic() + timeout
        while True:
            self.starts += 1
            logf = open(self.wd.file("meridiand.%d.log" % self.starts), "w")
            self.proc = subprocess.Popen(
                [self.exe, "--db", self.db, "--listen", "127.0.0.1:%d" % self.port,
                 "--run-id", self.run_id, "--secret-file", self.secret_file,
                 "--port-file", port_file] + self.extra,
                stdout=logf, stderr=subprocess.STDOUT)
            logf.close()
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    with open(port_file) as f:
                        txt = f.read().strip()
                    if txt:
                        self.port = int(txt)
                        return self.port
                except (FileNotFoundError, ValueError):
                    pass
                time.sleep(0.02)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
                fail("meridiand did not report its port within %.0f s" % timeout)
            # exited early (e.g. the port is still held): retry until the deadline
            if time.monotonic() >= deadline:
                fail("meridiand exits at start (rc %s): see %s" % (
                    self.proc.returncode, self.wd.file("meridiand.%d.log" % self.starts)))
            time.sleep(0.2)

    def agent_env(self):
        """The variables an agent needs to send to this daemon."""
        return {"MERIDIAN_AGGREGATOR": self.addr(), "MERIDIAN_RUN_ID": self.run_id,
                "MERIDIAN_SECRET_FILE": self.secret_file}

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout=30.0):
        """SIGTERM: the daemon commits what it received and exits 0."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("meridiand did not exit within %.0f s of SIGTERM" % timeout)

    def addr(self):
        return "127.0.0.1:%d" % self.port


def replay_cmd(args, daemon, report, *extra):
    return [args.replay, "--aggregator", daemon.addr(), "--run-id", daemon.run_id,
            "--secret-file", daemon.secret_file, "--report", report] + list(extra)


def run(cmd, timeout, what, env=None):
    log("run: " + " ".join(cmd))
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        fail("%s did not finish within %d s" % (what, timeout))
    out = p.stdout
    tail = "\n".join(out.splitlines()[-25:])
    print(tail, flush=True)
    return p.returncode, out


def read_report(path):
    ranks = {}
    with open(path) as f:
        for line in f:
            kv = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
            if "rank" in kv:
                ranks[int(kv["rank"])] = kv
    return ranks


def verify(args, daemon, report, *extra):
    rc, out = run([args.verify, "--db", daemon.db, "--report", report] + list(extra), 120,
                  "mrd-verify")
    if rc != 0:
        fail("database does not match the senders' report (mrd-verify rc %d)" % rc)
    counters = dict((m.group(1), int(m.group(2)))
                    for m in re.finditer(r"^aggregator_counter (\S+)=(-?\d+)$", out, re.M))
    return counters


class FrameRelay:
    """A TCP relay on 127.0.0.1 in front of meridiand that can drop or cut frames.

    Each accepted connection gets its own connection to 127.0.0.1:target_port. Bytes from
    meridiand go back to the client as they are. Bytes from the client are cut into frames
    (proto/frame.h: 8-byte header, version, type, flags, then the payload length LE at
    offset 4) and each whole frame is handed to on_frame(conn, ftype, frame), called with
    the relay's lock held (so the callback may count without a lock of its own); conn is
    the connection's number (1 for the first accepted), ftype the frame type. It returns
      FrameRelay.PASS  forward the frame,
      FrameRelay.DROP  leave it out and keep the connection,
      FrameRelay.CUT   leave it out and close both sides at once (as if meridiand died
                       right after reading it).
    forward_eof: when the client closes its side, close the write side towards meridiand
    too (False keeps it open: a peer that never answers). Threads are daemons; close()
    stops accepting and closes every socket."""

    PASS, DROP, CUT = "pass", "drop", "cut"
    GOODBYE = 7  # MRD_FRAME_GOODBYE

    def __init__(self, target_port, on_frame, forward_eof=True, backlog=64):
        self.target, self.on_frame, self.forward_eof = target_port, on_frame, forward_eof
        self.lock = threading.Lock()
        self.conns = 0
        self.socks = []
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(backlog)
        self.port = self.ls.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                a, _ = self.ls.accept()
            except OSError:
                return
            try:
                b = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                a.close()  # meridiand is not there: the client sees a closed connection
                continue
            with self.lock:
                self.conns += 1
                conn = self.conns
                self.socks += [a, b]
            threading.Thread(target=self._up, args=(a, b, conn), daemon=True).start()
            threading.Thread(target=self._down, args=(b, a), daemon=True).start()

    @staticmethod
    def _down(src, dst):  # meridiand -> client: as is
        try:
            while True:
                d = src.recv(65536)
                if not d:
                    break
                dst.sendall(d)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _up(self, src, dst, conn):  # client -> meridiand: frame by frame
        buf = b""
        try:
            while True:
                d = src.recv(65536)
                if not d:
                    if self.forward_eof:
                        dst.shutdown(socket.SHUT_WR)
                    return
                buf += d
                while len(buf) >= 8:
                    length = struct.unpack_from("<I", buf, 4)[0]
                    if len(buf) < 8 + length:
                        break
                    frame, buf = buf[:8 + length], buf[8 + length:]
                    with self.lock:
                        what = self.on_frame(conn, frame[1], frame)
                    if what == self.CUT:
                        src.close()
                        dst.close()
                        return
                    if what == self.PASS:
                        dst.sendall(frame)
        except OSError:
            pass

    def close(self):
        self.ls.close()
        with self.lock:
            socks = list(self.socks)
        for x in socks:
            try:
                x.close()
            except OSError:
                pass
