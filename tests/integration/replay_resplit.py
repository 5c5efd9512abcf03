"""integration_replay_resplit: `meridian replay` re-splits recorded batches that are larger
than the frame limit meridiand announces, so that nothing is refused and nothing is lost.

tests/data/ref-rank{0,1}.mrdcap (what the two agents of the reference job sent on the H200
host) each hold a batch frame of about 19 KB (31 KB decompressed). meridiand runs with
`--max-frame 16384` and announces that limit in HelloReply.max_frame_bytes. Both ranks replay
at once, each with --record (the frames exactly as written to the socket), next to a third
rank that sends synthetic batches of 4096 events (~30 KB at the default 4 MiB limit), which
the builder must size for the announced limit. The test checks:
  - the premise: each capture holds a batch frame over 16384 bytes (else this proves nothing);
  - every rank had every batch acknowledged, with no reconnect, saw the peer's limit of
    16384, and each capture rank reports that it re-split at least one frame;
  - no frame written was over the limit: every recorded frame's payload is <= 16384 bytes and
    a compressed one declares a content size <= 8 x 16384 (meridiand's two checks), and
    meridiand counted no rejected frame;
  - every event is stored exactly once: mrd-verify (count per kind, checksum per rank with
    strings resolved, each batch once), and for the capture ranks the database's per-kind row
    counts equal the counts replay decoded and what each agent reported captured in its
    recorded Goodbye.
Without the re-split, replay sends the 19 KB frame, meridiand refuses it and drops the
connection, and replay resends it until --retry-ms runs out: the test fails.
"""
import os
import sqlite3
import struct
import subprocess
import time

import itest

LIMIT = 16384
EXPANSION = 8  # MRD_FRAME_MAX_EXPANSION
BATCH = 5      # MRD_FRAME_BATCH
TABLES = {"kernel": "kernels", "memcpy": "memcpys", "memset": "memsets", "sync": "syncs",
          "api": "api_calls", "graph": "graph_launches", "extcorr": "external_correlations",
          "nvtx": "nvtx", "nccl_op": "nccl_ops", "nccl_channel": "nccl_channels",
          "mpi": "mpi_calls", "clock": "clock_samples", "gpu_clock": "gpu_clock_samples"}


def zstd_content_size(p):
    """Frame_Content_Size of a zstd frame (RFC 8878 3.1.1.1), or None when absent."""
    if len(p) < 6 or p[:4] != b"\x28\xb5\x2f\xfd":
        return None
    fhd = p[4]
    fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    off = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    n = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if n == 0:
        return None
    v = int.from_bytes(p[off:off + n], "little")
    return v + 256 if n == 2 else v


def frames(path):
    """(type, flags, payload) of every frame of a .mrdcap."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"MRDCAP1\n":
        itest.fail("%s is not a capture" % path)
    off, out = 8, []
    while off < len(data):
        if off + 8 > len(data):
            itest.fail("%s: truncated frame header at %d" % (path, off))
        _, typ, flags, length = struct.unpack_from("<BBHI", data, off)
        out.append((typ, flags, data[off + 8:off + 8 + length]))
        off += 8 + length
    return out


def over_limit(typ, flags, payload):
    if len(payload) > LIMIT:
        return "payload of %d bytes" % len(payload)
    if flags & 1:
        cs = zstd_content_size(payload)
        if cs is None or cs > EXPANSION * LIMIT:
            return "decompresses to %s bytes" % cs
    return None


args = itest.parse_args()
data_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
captures = [os.path.join(data_dir, "ref-rank%d.mrdcap" % r) for r in (0, 1)]
for cap in captures:
    big = [len(p) for t, fl, p in frames(cap) if t == BATCH and over_limit(t, fl, p)]
    if not big:
        itest.fail("premise: %s has no batch frame over %d bytes" % (cap, LIMIT))
    itest.log("%s: batch frames over the limit: %s bytes" % (os.path.basename(cap), big))

wd = itest.Workdir(args, "replay_resplit")
d = itest.Daemon(args.meridiand, wd, run_id="resplit-ref", extra=["--max-frame", str(LIMIT)])
d.start()

# ranks 0 and 1 replay the captures; rank 2 sends synthetic batches of 4096 events (~30 KB
# encoded), which the builder must size for the announced limit instead
sources = [[cap] for cap in captures] + [["--rank-base", "2", "--world-size", "3", "--events",
                                          "20000", "--batch-events", "4096"]]
procs, reports, records = [], [], []
for i, src in enumerate(sources):
    rep, rec = wd.file("report%d.txt" % i), wd.file("sent%d.mrdcap" % i)
    cmd = itest.replay_cmd(args, d, rep, "--record", rec, "--retry-ms", "8000", *src)
    itest.log("run: " + " ".join(cmd))
    log = open(wd.file("replay%d.log" % i), "w")
    procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
    log.close()
    reports.append(rep)
    records.append(rec)
deadline = time.monotonic() + 60
rcs = []
for i, p in enumerate(procs):
    try:
        rcs.append(p.wait(max(1.0, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        rcs.append(None)
for p in procs:  # any still running after the deadline
    if p.poll() is None:
        p.kill()
        p.wait()
for i, rc in enumerate(rcs):
    with open(wd.file("replay%d.log" % i)) as f:
        print(f.read()[-3000:], flush=True)
for i, rc in enumerate(rcs):
    if rc != 0:
        d.stop()
        itest.fail("replay of %s %s" % (sources[i], "did not finish within 60 s" if rc is None
                                        else "failed (rc %d)" % rc))
if d.stop() != 0:
    itest.fail("meridiand did not exit 0 after SIGTERM")

# one report for mrd-verify: every rank's line
report = wd.file("report.txt")
with open(report, "w") as out:
    for rep in reports:
        with open(rep) as f:
            out.write(f.read())
counters = itest.verify(args, d, report)
rejected = dict((k, v) for k, v in counters.items() if k.startswith("rejected") and v)
if rejected:
    itest.fail("meridiand rejected frames: %s" % rejected)
rep = itest.read_report(report)
if sorted(rep) != [0, 1, 2]:
    itest.fail("replayed ranks %s" % sorted(rep))

# nothing over the limit went out
for i, rec in enumerate(records):
    sent = frames(rec)
    nb = 0
    for typ, flags, payload in sent:
        why = over_limit(typ, flags, payload)
        if why:
            itest.fail("rank %d sent a frame (type %d) over the limit of %d: %s" % (
                i, typ, LIMIT, why))
        nb += typ == BATCH
    kv = rep[i]
    if nb != int(kv["batches"]):
        itest.fail("rank %d: %d batch frames written, report says %s batches" % (
            i, nb, kv["batches"]))
    itest.log("rank %d: %d frames written, all within %d bytes" % (i, len(sent), LIMIT))

con = sqlite3.connect(d.db)
for r, kv in sorted(rep.items()):
    if kv.get("peer_max_frame") != str(LIMIT) or int(kv["reconnects"]) != 0:
        itest.fail("rank %d: peer_max_frame=%s reconnects=%s (want %d, 0)" % (
            r, kv.get("peer_max_frame"), kv["reconnects"], LIMIT))
    if r == 2:  # synthetic: verified above (mrd-verify) and within the limit
        if int(kv["events"]) != 20000 or int(kv["batches"]) < 8:
            itest.fail("synthetic rank: %s events in %s batches (want 20000 in >= 8: "
                       "batches of 4096 events do not fit 16 KB)" % (kv["events"], kv["batches"]))
        continue
    if int(kv.get("resplit", "0")) < 1:
        itest.fail("rank %d: resplit=%s (want >= 1)" % (r, kv.get("resplit")))
    goodbye = dict(con.execute("SELECT name, value FROM agent_counters WHERE rank = ? AND "
                               "category = 'captured'", (r,)))
    if not goodbye:
        itest.fail("rank %d: no captured counters from the recorded Goodbye" % r)
    total = 0
    for kind, table in TABLES.items():
        decoded = int(kv["n_" + kind])
        stored = con.execute("SELECT count(*) FROM %s WHERE rank = ?" % table, (r,)).fetchone()[0]
        captured = goodbye.get(kind, 0)
        if not (decoded == stored == captured):
            itest.fail("rank %d %s: replay decoded %d, database holds %d, agent captured %d" % (
                r, kind, decoded, stored, captured))
        total += stored
    if total != int(kv["events"]) or int(kv["n_nccl_op"]) != 110:
        itest.fail("rank %d: %d rows stored, %s events sent, %s NCCL ops (want 110)" % (
            r, total, kv["events"], kv["n_nccl_op"]))
    itest.log("rank %d: %d events stored once each, %s batches (%s frames re-split)" % (
        r, total, kv["batches"], kv["resplit"]))
con.close()
itest.log("ok: recorded batches over the %d-byte limit re-split; nothing refused or lost" % LIMIT)
wd.done(True)
