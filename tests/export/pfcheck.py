"""Decodes a meridian native trace with Debian's protoc against Perfetto's own definition of
the format (../shared/third_party/perfetto/perfetto_trace.proto) and checks it against the
database it was exported from.

What it checks (each failure names the row, track or flow):
  - the file is gzip and decodes as perfetto.protos.Trace (protoc --decode, text format);
  - sequences: each opens with SEQ_INCREMENTAL_STATE_CLEARED, a ClockSnapshot defining
    clock 64 as incremental and packet defaults (clock 64, a default track); every event
    packet names its sequence and its track exists (a TrackDescriptor under a process);
  - interning: every name_iid, category iid, argument name iid and interned string value
    was defined earlier on the same sequence; no event carries an inline name except
    capture windows;
  - time: absolute times (incremental deltas summed per sequence) never go back on a
    sequence or on a track; slices BEGIN/END balance and nest on every track;
  - rows: every exported row present exactly once: per (rank, category, name) the counts
    equal the SQL counts (kernel names as binutils' c++filt demangles them), and per (rank, category) the sorted start times equal the rows'
    times mapped with clock_models (within 2 ns) for fitted ranks;
  - flows: one flow per collective instance (comm_hash, seq, func; p2p excluded) going
    through the op of exactly the ranks that have it, each once, args agreeing; one flow
    per NCCL op with a kernel, started on the op and terminated on a kernel of its rank.
Usage as a module: check(trace_gz, db_path, proto_dir) -> dict of counts (raises
AssertionError on the first failure); as a script: pfcheck.py TRACE.gz DB PROTO_DIR.
"""
import bisect
import collections
import gzip
import os
import re
import sqlite3
import subprocess
import sys

MASK = (1 << 64) - 1
COPY_NAMES = ["memcpy", "memcpy HtoD", "memcpy DtoH", "memcpy HtoA", "memcpy AtoH",
              "memcpy AtoA", "memcpy AtoD", "memcpy DtoA", "memcpy DtoD", "memcpy HtoH",
              "memcpy PtoP"]


def decode(trace_gz, proto_dir, text_out=None):
    """protoc's text format of the trace (raises on a decode error)."""
    raw = gzip.open(trace_gz, "rb").read()
    p = subprocess.run(["protoc", "--decode=perfetto.protos.Trace", "-I", proto_dir,
                        os.path.join(proto_dir, "perfetto_trace.proto")],
                       input=raw, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.returncode == 0, "protoc --decode failed: %s" % p.stderr.decode()[-2000:]
    if text_out:
        with open(text_out, "wb") as f:
            f.write(p.stdout)
    return p.stdout.decode("utf-8", "surrogateescape"), len(raw)


_ESC = re.compile(rb"\\([0-7]{1,3}|x[0-9a-fA-F]{1,2}|.)", re.S)


def _unescape(s):
    def rep(m):
        e = m.group(1)
        if e[:1].isdigit():
            return bytes([int(e, 8)])
        if e[:1] == b"x":
            return bytes([int(e[1:], 16)])
        return {b"n": b"\n", b"t": b"\t", b"r": b"\r"}.get(e, e)
    return _ESC.sub(rep, s.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")


def parse(text):
    """Text format -> list of packets, each a dict field -> list of values (dicts for
    messages, int / float / str / enum name for scalars)."""
    root = {}
    stack = [root]
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            continue
        if line.endswith("{"):
            m = {}
            stack[-1].setdefault(line[:-1].strip(), []).append(m)
            stack.append(m)
            continue
        k, _, v = line.partition(": ")
        if v.startswith('"'):
            val = _unescape(v[1:-1])
        elif re.fullmatch(r"-?\d+", v):
            val = int(v)
        else:
            try:
                val = float(v)
            except ValueError:
                val = v  # enum name, true/false
        stack[-1].setdefault(k, []).append(val)
    assert len(stack) == 1, "unbalanced text format"
    return root.get("packet", [])


def one(m, k, d=None):
    v = m.get(k)
    return v[0] if v else d


class Timebase:
    """clock_models as aggregator/analyze/timebase.c applies them."""

    def __init__(self, db):
        self.seg = collections.defaultdict(list)
        have = db.execute("SELECT 1 FROM sqlite_master WHERE name='clock_models'").fetchone()
        if have:
            for r in db.execute("SELECT rank, local_begin_ns, local_end_ns, offset_ns, "
                                "drift_ppm FROM clock_models ORDER BY rank, local_begin_ns"):
                self.seg[r[0]].append(r[1:])
        self.anchor = (db.execute("SELECT anchor_realtime_ns FROM runs").fetchone() or [0])[0]

    def fitted(self, rank):
        return rank in self.seg

    def map(self, rank, local):
        s = self.seg.get(rank)
        if not s:
            return local
        i = bisect.bisect_right([x[0] for x in s], local) - 1
        b, _, off, drift = s[max(0, min(i, len(s) - 1))]
        return local + off + int(round(drift * (local - b) / 1e6))


def demangler(db):
    """{kernel name: as shown}: mangled C++ names demangled by binutils' c++filt, an
    independent demangler (the export uses the C++ runtime's __cxa_demangle)."""
    names = [r[0] for r in db.execute(
        "SELECT DISTINCT s.value FROM kernels k JOIN strings s ON s.id = k.name_id")
        if r[0].startswith("_Z")]
    if not names:
        return {}
    p = subprocess.run(["c++filt"], input="\n".join(names) + "\n", stdout=subprocess.PIPE,
                       text=True, check=True)
    return dict(zip(names, p.stdout.split("\n")))


def expected(db, api=False):
    """{(rank, category): [(local start, name), ...]} of every row the export writes
    (api_calls too when it was exported with --api); kernels by demangled name."""
    rows = collections.defaultdict(list)
    plain = demangler(db)

    def add(cat, sql, name=lambda r: r[2]):
        for r in db.execute(sql):
            rows[(r[0], cat)].append((r[1], name(r)))

    def has(t):
        return db.execute("SELECT 1 FROM sqlite_master WHERE name=?", (t,)).fetchone()

    add("kernel", "SELECT k.rank, k.start_ns, coalesce(s.value, 'kernel') FROM kernels k "
        "LEFT JOIN strings s ON s.id = k.name_id WHERE NOT (k.start_ns = 0 AND k.end_ns = 0)",
        lambda r: plain.get(r[2], r[2]))
    add("memcpy", "SELECT rank, start_ns, copy_kind FROM memcpys WHERE NOT (start_ns = 0 AND "
        "end_ns = 0)", lambda r: COPY_NAMES[r[2] if 0 < r[2] <= 10 else 0])
    add("memset", "SELECT rank, start_ns, 'memset' FROM memsets WHERE NOT (start_ns = 0 AND "
        "end_ns = 0)")
    add("graph", "SELECT rank, start_ns, 'CUDA graph' FROM graph_launches")
    add("nccl", "SELECT n.rank, n.start_ns, coalesce(f.value, 'collective') FROM nccl_ops n "
        "LEFT JOIN strings f ON f.id = n.func_id")
    add("nvtx", "SELECT n.rank, n.start_ns, coalesce(s.value, '(unnamed)') FROM nvtx n "
        "LEFT JOIN strings s ON s.id = n.name_id")
    add("mpi", "SELECT m.rank, m.start_ns, coalesce(s.value, 'MPI') FROM mpi_calls m "
        "LEFT JOIN strings s ON s.id = m.call_id")
    add("sync", "SELECT rank, start_ns, 'CUDA synchronize' FROM syncs")
    if api:
        add("api", "SELECT c.rank, c.start_ns, coalesce(s.value, 'CUDA API') FROM api_calls c "
            "LEFT JOIN strings s ON s.id = c.name_id")
    if has("windows"):
        add("window", "SELECT rank, start_ns, 'window ' || first_step || '-' || last_step || "
            "' ' || reason FROM windows")
    return rows


def check(trace_gz, db_path, proto_dir, text_out=None):
    text, raw_len = decode(trace_gz, proto_dir, text_out)
    packets = parse(text)
    db = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
    tb = Timebase(db)

    procs = {}   # process uuid -> rank
    tracks = {}  # uuid -> (rank, name, is counter)
    seqs = {}    # id -> state
    events = []  # (rank, category, name, abs time, type, track, args, flows, terms)
    track_last = {}
    stacks = collections.defaultdict(list)
    inline_names = 0
    for i, pk in enumerate(packets):
        td = one(pk, "track_descriptor")
        if td:
            uuid = one(td, "uuid")
            assert uuid not in tracks and uuid not in procs, "track %d described twice" % uuid
            if one(td, "process"):
                procs[uuid] = one(one(td, "process"), "pid") - 1
            else:
                parent = one(td, "parent_uuid")
                assert parent in procs, "track %s before its process" % one(td, "name")
                tracks[uuid] = (procs[parent], one(td, "name"), "counter" in td)
            continue
        sid = one(pk, "trusted_packet_sequence_id")
        assert sid is not None, "packet %d without a sequence" % i
        if one(pk, "sequence_flags", 0) & 1:
            assert sid not in seqs, "sequence %d cleared twice" % sid
            cs = one(pk, "clock_snapshot")
            clocks = {one(c, "clock_id"): c for c in cs["clocks"]}
            assert 64 in clocks and one(clocks[64], "is_incremental") == "true", \
                "sequence %d: clock 64 not incremental" % sid
            d = one(pk, "trace_packet_defaults")
            assert one(d, "timestamp_clock_id") == 64
            seqs[sid] = {"t": one(clocks[64], "timestamp"),
                         "track": one(one(d, "track_event_defaults"), "track_uuid"),
                         "names": {}, "cats": {}, "anames": {}, "strs": {}}
            continue
        st = seqs.get(sid)
        assert st is not None, "packet %d on sequence %d before its first packet" % (i, sid)
        idata = one(pk, "interned_data")
        if idata:
            for k, f in (("event_names", "names"), ("event_categories", "cats"),
                         ("debug_annotation_names", "anames")):
                for e in idata.get(k, []):
                    st[f][one(e, "iid")] = one(e, "name")
            for e in idata.get("debug_annotation_string_values", []):
                st["strs"][one(e, "iid")] = one(e, "str")
        te = one(pk, "track_event")
        assert te, "packet %d: no track event" % i
        st["t"] += one(pk, "timestamp")
        t = st["t"]
        track = one(te, "track_uuid", st["track"])
        assert track in tracks, "sequence %d: event on an undescribed track %s" % (sid, track)
        assert t >= track_last.get(track, 0), "time goes back on track %s" % tracks[track][1]
        track_last[track] = t
        typ = one(te, "type")
        if typ == "TYPE_SLICE_END":
            assert stacks[track], "END without BEGIN on %s" % tracks[track][1]
            stacks[track].pop()
            continue
        if typ == "TYPE_COUNTER":
            events.append((tracks[track][0], "counter", tracks[track][1], t, typ, track, {},
                           [], []))
            continue
        cats = [st["cats"][c] for c in te.get("category_iids", [])]
        assert len(cats) == 1, "event without its category on %s" % tracks[track][1]
        if "name_iid" in te:
            assert one(te, "name_iid") in st["names"], "name iid not interned on seq %d" % sid
            name = st["names"][one(te, "name_iid")]
        else:
            name = one(te, "name")
            assert cats[0] == "window", "inline name %r outside capture windows" % name
            inline_names += 1
        args = {}
        for a in te.get("debug_annotations", []):
            an = one(a, "name_iid")
            assert an in st["anames"], "argument name iid %d not interned" % an
            if "string_value_iid" in a:
                v = one(a, "string_value_iid")
                assert v in st["strs"], "string value iid %d not interned" % v
                v = st["strs"][v]
            else:
                v = one(a, "int_value", one(a, "uint_value", one(a, "string_value")))
            args[st["anames"][an]] = v
        if typ == "TYPE_SLICE_BEGIN":
            stacks[track].append(t)
        else:
            assert typ == "TYPE_INSTANT", "unexpected event type %s" % typ
        events.append((tracks[track][0], cats[0], name, t, typ, track, args,
                       te.get("flow_ids", []), te.get("terminating_flow_ids", [])))
    for tr, s in stacks.items():
        assert not s, "%d slice(s) never ended on %s" % (len(s), tracks[tr][1])

    # every row once: counts per (rank, category, name), then times per (rank, category)
    exp = expected(db, api=any(e[1] == "api" for e in events))
    got = collections.defaultdict(list)
    for e in events:
        if e[1] != "counter":
            got[(e[0], e[1])].append((e[3], e[2]))
    origin = tb.anchor if tb.seg else None
    for key in sorted(set(exp) | set(got)):
        ec = collections.Counter(n for _, n in exp.get(key, []))
        gc = collections.Counter(n for _, n in got.get(key, []))
        if ec != gc:
            diff = [(n, ec[n], gc[n]) for n in set(ec) | set(gc) if ec[n] != gc[n]]
            raise AssertionError("rank %d %s: (name, rows, events) differ: %s" %
                                 (key[0], key[1], diff[:5]))
        if origin is not None and tb.fitted(key[0]) and key[1] != "window":
            want = sorted(tb.map(key[0], s) for s, _ in exp.get(key, []))
            have = sorted(t for t, _ in got.get(key, []))
            bad = [(w, h) for w, h in zip(want, have) if abs(w - h) > 2]
            assert not bad, "rank %d %s: %d start times differ from the mapped rows, " \
                "first %s" % (key[0], key[1], len(bad), bad[0])

    # flows
    inst = collections.defaultdict(set)
    for r in db.execute("SELECT n.rank, n.comm_hash, n.seq, f.value FROM nccl_ops n LEFT JOIN "
                        "strings f ON f.id = n.func_id WHERE n.is_p2p = 0 AND n.seq IS NOT NULL"):
        inst[(r[1] & MASK, r[2], r[3])].add(r[0])
    linked = db.execute(
        "SELECT count(*) FROM (SELECT DISTINCT n.rank, n.op_id FROM nccl_ops n JOIN "
        "external_correlations ec ON ec.rank = n.rank AND ec.external_id = n.launch_id JOIN "
        "kernels k ON k.rank = ec.rank AND k.correlation_id = ec.correlation_id WHERE "
        "n.launch_id IS NOT NULL AND NOT (k.start_ns = 0 AND k.end_ns = 0))").fetchone()[0]
    coll = collections.defaultdict(list)
    starts, ends = collections.defaultdict(list), collections.defaultdict(list)
    for e in events:
        for f in e[7]:
            if f >> 63:
                assert e[1] == "nccl", "collective flow on a %s event" % e[1]
                coll[f].append(e)
            else:
                starts[f].append(e)
        for f in e[8]:
            ends[f].append(e)
    assert len(coll) == len(inst), "%d collective flows for %d instances" % (len(coll), len(inst))
    for f, evs in coll.items():
        keys = {(e[6]["comm"] & MASK, e[6]["seq"], e[2]) for e in evs}
        assert len(keys) == 1, "flow %x joins different collectives %s" % (f, keys)
        ranks = [e[0] for e in evs]
        want = inst.get(keys.pop())
        assert want is not None, "flow %x: no such collective in the database" % f
        assert sorted(ranks) == sorted(want), "flow %x: ranks %s, database %s" % (
            f, sorted(ranks), sorted(want))
    assert len(starts) == linked, "%d op -> kernel flows, %d ops with a kernel" % (
        len(starts), linked)
    for f, evs in starts.items():
        assert len(evs) == 1 and evs[0][1] == "nccl", "link flow %x started %d times" % (
            f, len(evs))
        e = ends.get(f, [])
        assert len(e) == 1 and e[0][1] == "kernel" and e[0][0] == evs[0][0], \
            "link flow %x: ends on %s" % (f, [(x[0], x[1]) for x in e])
    rows = sum(1 for e in events)
    return {"packets": len(packets), "rows": rows, "slices_instants": rows - sum(
        1 for e in events if e[1] == "counter"), "counters": sum(
        1 for e in events if e[1] == "counter"), "tracks": len(tracks), "processes": len(procs),
        "sequences": len(seqs), "collective_flows": len(coll), "link_flows": len(starts),
        "raw_bytes": raw_len, "inline_names": inline_names}


if __name__ == "__main__":
    print(check(sys.argv[1], sys.argv[2], sys.argv[3]))
