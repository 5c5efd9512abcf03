#!/usr/bin/env python3
"""Sharded aggregation end to end (CTest agent_shards): the agent's pick of its shard.

Two real meridiand (--shard-id 0 and 1, each its own database) on 127.0.0.1 and four
meridian-agent-synth ranks (RANK=0..3) with the SAME environment, as `meridian profile
--shards 2` gives every rank through mpirun -x: MERIDIAN_AGGREGATOR lists both daemons.
Checked:
  - rank r is stored in shard r % 2's database only: ranks table {0, 2} and {1, 3},
    kernels of those ranks only, each rank's accepted records stored exactly once
    (count and sum of correlation ids per rank);
  - runs.shard_id is the daemon's --shard-id;
  - the Hello each rank sent carries shard_id r % 2 (read from its MERIDIAN_RECORD_FILE:
    the recorded Hello is the one sent, field 12 decoded from the protobuf);
  - a rank whose explicit MERIDIAN_SHARD_ID disagrees with its entry stays inert, says why
    on stderr, and reaches neither database.
Usage: shard_test.py --meridiand PATH --synth PATH
"""
import argparse
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

SECRET = "shard-test-secret"
PROTOCOL_VERSION = 2  # MRD_PROTOCOL_VERSION (proto/frame.h): the agent records in its own
RUN_ID = "shard-test"
EVENTS = 3000


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def start_daemon(exe, wd, shard):
    d = os.path.join(wd, "shard%d" % shard)
    os.mkdir(d)
    port_file = os.path.join(d, "port")
    log = open(os.path.join(d, "meridiand.log"), "w")
    p = subprocess.Popen([exe, "--db", os.path.join(d, "run.db"), "--listen", "127.0.0.1:0",
                          "--run-id", RUN_ID, "--port-file", port_file, "--commit-ms", "20",
                          "--shard-id", str(shard)],
                         env=dict(os.environ, MERIDIAN_SECRET=SECRET), stdout=log, stderr=log)
    deadline = time.time() + 10
    while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
        check(p.poll() is None, "meridiand %d exited at start (%s)" % (shard, d))
        check(time.time() < deadline, "meridiand %d did not start listening" % shard)
        time.sleep(0.02)
    with open(port_file) as f:
        return p, os.path.join(d, "run.db"), int(f.read().strip())


def agent_env(agg, rank, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MERIDIAN_") and k not in (
               "RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")}
    env.update(RANK=str(rank), WORLD_SIZE="4", MERIDIAN_RUN_ID=RUN_ID, MERIDIAN_SECRET=SECRET,
               MERIDIAN_AGGREGATOR=agg)
    env.update(extra)
    return env


def run_synth(exe, env):
    p = subprocess.run([exe, "--events", str(EVENTS), "--rate", "20000"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    line = [l for l in p.stdout.splitlines() if l.startswith("synth:")]
    check(p.returncode == 0 and line, "synth rc %d stdout %r stderr %r" %
          (p.returncode, p.stdout, p.stderr))
    f = dict(kv.split("=") for kv in line[0].split()[1:])
    return int(f["active"]), int(f["written"]), int(f["idsum"]), p.stderr


def varint(b, o):
    v, s = 0, 0
    while True:
        c = b[o]
        o += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, o


def hello_shard(path):
    """shard_id (field 12) of the Hello, the first frame of a record file; 0 when absent
    (proto3 leaves a zero out)."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"MRDCAP1\n", "%s: bad magic" % path)
    ver, typ, flags, length = struct.unpack_from("<BBHI", data, 8)
    check(ver == PROTOCOL_VERSION and typ == 1 and flags == 0,
          "%s: first frame is not a plain Hello of version %d" % (path, PROTOCOL_VERSION))
    msg, o, shard = data[16:16 + length], 0, 0
    while o < len(msg):
        key, o = varint(msg, o)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, o = varint(msg, o)
            if field == 12:
                shard = v
        elif wire == 2:
            n, o = varint(msg, o)
            o += n
        elif wire == 1:
            o += 8
        elif wire == 5:
            o += 4
        else:
            fail("%s: wire type %d in the Hello" % (path, wire))
    return shard


def query(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meridiand", required=True)
    ap.add_argument("--synth", required=True)
    a = ap.parse_args()
    wd = tempfile.mkdtemp(prefix="mrd_shards_")
    daemons = []
    ok = False
    try:
        for shard in (0, 1):
            daemons.append(start_daemon(a.meridiand, wd, shard))
        # the same list for every rank, with blanks as a hand-written list may have
        agg = "127.0.0.1:%d, 127.0.0.1:%d" % (daemons[0][2], daemons[1][2])
        per_rank = {}
        for rank in range(4):
            cap = os.path.join(wd, "rank%d.mrdcap" % rank)
            active, written, idsum, err = run_synth(
                a.synth, agent_env(agg, rank, MERIDIAN_RECORD_FILE=cap))
            check(active == 1 and written == EVENTS, "rank %d: active %d written %d; %s" %
                  (rank, active, written, err))
            check(hello_shard(cap) == rank % 2, "rank %d: Hello shard_id %d" %
                  (rank, hello_shard(cap)))
            per_rank[rank] = (written, idsum)
        # an explicit shard id that disagrees with the list: inert, with the reason
        active, written, _, err = run_synth(a.synth, agent_env(agg, 5, MERIDIAN_SHARD_ID="0"))
        check(active == 0 and written == 0, "rank 5 with MERIDIAN_SHARD_ID=0 is active")
        check("MERIDIAN_SHARD_ID=0 but rank 5 connects to MERIDIAN_AGGREGATOR entry 1 of 2"
              in err, "rank 5's reason: %r" % err)
        for p, _, _ in daemons:
            p.terminate()
            p.wait(timeout=20)
        for shard, (_, db, _) in enumerate(daemons):
            check(query(db, "SELECT run_id, shard_id FROM runs") == [(RUN_ID, shard)],
                  "shard %d: runs %r" % (shard, query(db, "SELECT * FROM runs")))
            ranks = [r for (r,) in query(db, "SELECT rank FROM ranks ORDER BY rank")]
            check(ranks == [shard, shard + 2], "shard %d holds ranks %r" % (shard, ranks))
            rows = query(db, "SELECT rank, COUNT(*), COUNT(DISTINCT correlation_id),"
                             " SUM(correlation_id) FROM kernels GROUP BY rank ORDER BY rank")
            want = [(r, per_rank[r][0], per_rank[r][0], per_rank[r][1])
                    for r in (shard, shard + 2)]
            check(rows == want, "shard %d kernels per rank %r, want %r" % (shard, rows, want))
            print("shard %d: ranks %r, kernels per rank %r" % (shard, ranks,
                                                               [r[1] for r in rows]))
        ok = True
    finally:
        for p, _, _ in daemons:
            if p.poll() is None:
                p.kill()
                p.wait()
        if ok:
            shutil.rmtree(wd, ignore_errors=True)
        else:
            print("kept " + wd, file=sys.stderr)
    print("PASS")


if __name__ == "__main__":
    main()
