"""Helpers shared by the integration tests: a real meridiand, the load generator, the verifier.

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
import subprocess
import sys
import tempfile
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


def stable_port():
    """A free port below the ephemeral range (32768+): a daemon restarted on it after SIGKILL
    cannot find it taken by one of its own clients' outgoing connections (nor can a client
    connect to itself while nothing listens there)."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    fail("no free port in 20000..32000")


class Daemon:
    """One meridiand process on 127.0.0.1; restartable on the same database and port."""

    def __init__(self, exe, wd, run_id="itest-run", secret="itest-secret-0123456789",
                 extra=()):
        self.exe, self.wd, self.run_id = exe, wd, run_id
        self.extra = list(extra)  # more meridiand options, e.g. ["--max-frame", "16384"]
        self.db = wd.file("meridian.db")
        self.secret_file = wd.file("secret")
        with open(self.secret_file, "w") as f:
            f.write(secret)
        os.chmod(self.secret_file, 0o600)
        self.port = 0
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


def run(cmd, timeout, what):
    log("run: " + " ".join(cmd))
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
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
