"""Makes databases to export: a real meridiand fed by `meridian replay` (the recorded
captures of tests/data, or the synthetic generator), then `meridian finalize`, as
`meridian profile` would leave them. Shared by test_export.py and the bench
(tests/bench/export/bench_export.py)."""
import os
import signal
import subprocess
import time

RUN = "export-test-run"
SECRET = "export-test-secret-0123456789"


def make_db(meridian, meridiand, workdir, replay_args, timeout=600):
    """Returns the finalized database path after replaying `replay_args` (capture files, or
    synthetic options) into a fresh meridiand in workdir."""
    os.makedirs(workdir, exist_ok=True)
    db = os.path.join(workdir, "run.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    secret = os.path.join(workdir, "secret")
    with open(secret, "w") as f:
        f.write(SECRET)
    os.chmod(secret, 0o600)
    port_file = os.path.join(workdir, "port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    log = open(os.path.join(workdir, "meridiand.log"), "w")
    d = subprocess.Popen([meridiand, "--db", db, "--listen", "127.0.0.1:0", "--run-id", RUN,
                          "--secret-file", secret, "--port-file", port_file],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        port = None
        while time.monotonic() < deadline and port is None:
            assert d.poll() is None, "meridiand exited at start: see %s" % log.name
            try:
                with open(port_file) as f:
                    port = int(f.read().strip() or "x")
            except (FileNotFoundError, ValueError):
                time.sleep(0.05)
        assert port, "meridiand did not report its port"
        env = dict((k, v) for k, v in os.environ.items() if not k.startswith("MERIDIAN_"))
        p = subprocess.run([meridian, "replay", "--aggregator", "127.0.0.1:%d" % port,
                            "--run-id", RUN, "--secret-file", secret, "--quiet"] + replay_args,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        assert p.returncode == 0, "replay failed (rc %d): %s" % (p.returncode, p.stdout[-2000:])
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(timeout=120)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
        log.close()
    p = subprocess.run([meridian, "finalize", db], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    assert p.returncode == 0, "finalize failed: %s" % p.stdout[-2000:]
    return db
