"""integration_gpu_host_clock: NCCL's GPU timer mapped from host evidence alone, checked against
CUPTI on the recorded 2 x H200 run.

tests/data/ref-rank{0,1}.mrdcap (full tier, CUPTI on) replay through the real meridiand twice:
as recorded ("full"), and without CUPTI's kernel records (`--kinds` leaves `kernel` out:
"host-only"), then `meridian finalize` calibrates each database's GPU timers
(aggregator/clock/gpu.c). The host-only database keeps what host times say about each
channel's GPU start: the launch (the CUDA API record CUPTI tied to the launch id, the same
host time the agent now sends in the steady tier as a gpu_clock_sample's lower end) and
NCCL's KernelCh start callback (nccl_channels.host_start_ns). The recorded captures predate
the agent's stop-callback samples: what those add is checked by capture_nccl_plugin and
clock_gpu (synthetic), and on the GPU host (tests/gpu/README.md).

Checked, with expectations computed here from raw rows, not from the fitter:
 1. both databases have a model for each of the 2 GPUs; methods name the evidence
    (kernel+host-bracket-v1 with CUPTI, host-bracket-v1 without);
 2. CUPTI oracle: each NCCL kernel record [start, end] holds the true host times of its
    channels, so the true offset (host - gpu) at that op lies in
    [kernel start - earliest channel start, kernel end - latest channel end]; the host-only
    model's offset must lie within its stated bound of that interval, for every op;
 3. the host-only and the CUPTI-based models agree within the sum of their bounds at every
    channel's GPU start and end;
 4. every mapped channel start lies within the host-only bound of [launch, start callback]
    (true brackets: a true model is within its bound of each), and at least 99% inside it
    exactly (the fit trims at most 1%);
 5. the oracle has teeth: the host-only model moved by three times its bound, either way,
    fails check 2.
"""
import shutil
import sqlite3

import itest

args = itest.parse_args([("--captures", {"nargs": "+", "required": True}),
                         ("--meridian", {"required": True})])
wd = itest.Workdir(args, "gpu_host_clock")
HOST_ONLY_KINDS = "memcpy,memset,sync,api,graph,extcorr,nvtx,nccl_op,nccl_channel,mpi,clock,gpu_clock"


def replay(name, *extra):
    d = itest.Daemon(args.meridiand, wd, run_id="gpu-host-" + name)
    d.db = wd.file(name + ".db")
    d.start()
    report = wd.file(name + ".txt")
    rc, _ = itest.run(itest.replay_cmd(args, d, report, *(list(extra) + args.captures)), 60,
                      name + " replay")
    if rc != 0:
        itest.fail("%s replay failed" % name)
    if d.stop() != 0:
        itest.fail("meridiand did not exit 0 after SIGTERM")
    rc, out = itest.run([args.meridian, "finalize", d.db], 120, "meridian finalize " + name)
    if rc != 0:
        itest.fail("meridian finalize %s: rc %d" % (name, rc))
    return d.db, out


full_db, _ = replay("full")
host_db, host_log = replay("host", "--kinds", HOST_ONLY_KINDS)


def models(path):
    con = sqlite3.connect(path)
    m = {(r, d): (s, i, b, meth) for r, d, s, i, b, meth in con.execute(
        "SELECT rank, device, slope, intercept_ns, error_bound_ns, method FROM gpu_timer_models")}
    con.close()
    return m


def gmap(model, g):
    """SCHEMA.md's evaluation of a GPU timer model: gpu + round((slope - 1) * gpu) + intercept."""
    s, i = model[0], model[1]
    return g + round((s - 1.0) * g) + i


full_m, host_m = models(full_db), models(host_db)
con = sqlite3.connect(full_db)
if con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 0:
    itest.fail("the full database has no kernel records")
hcon = sqlite3.connect(host_db)
if hcon.execute("SELECT count(*) FROM kernels").fetchone()[0] != 0:
    itest.fail("the host-only database has kernel records")
hcon.close()
gpus = sorted({(r, d) for r, d in con.execute(
    "SELECT DISTINCT rank, COALESCE(device, 0) FROM nccl_ops")})
# 1. one model per GPU in each database, named by its evidence
if sorted(full_m) != gpus or sorted(host_m) != gpus or len(gpus) != 2:
    itest.fail("GPU models: full %s, host-only %s, GPUs with NCCL ops %s" % (
        sorted(full_m), sorted(host_m), gpus))
for k in gpus:
    if full_m[k][3] != "kernel+host-bracket-v1" or host_m[k][3] != "host-bracket-v1":
        itest.fail("GPU %s: methods %r (full) and %r (host-only)" % (k, full_m[k][3],
                                                                   host_m[k][3]))
    if "method host," not in host_log:
        itest.fail("finalize's log does not name the host method")

# raw rows: per op its kernel interval, its launch host time, its channels
ops = {}
for r, op, dev, ks, ke in con.execute(
        "SELECT o.rank, o.op_id, COALESCE(o.device, 0), MIN(k.start_ns), MAX(k.end_ns)"
        " FROM nccl_ops o JOIN external_correlations x ON x.rank = o.rank"
        "   AND x.external_id = o.launch_id"
        " JOIN kernels k ON k.rank = x.rank AND k.correlation_id = x.correlation_id"
        " WHERE NOT (k.start_ns = 0 AND k.end_ns = 0) GROUP BY o.rank, o.op_id"):
    ops[(r, op)] = {"gpu": (r, dev), "k": (ks, ke), "ch": []}
for r, op, launch in con.execute(
        "SELECT o.rank, o.op_id, MIN(a.start_ns) FROM nccl_ops o"
        " JOIN external_correlations x ON x.rank = o.rank AND x.external_id = o.launch_id"
        " JOIN api_calls a ON a.rank = x.rank AND a.correlation_id = x.correlation_id"
        " GROUP BY o.rank, o.op_id"):
    if (r, op) in ops:
        ops[(r, op)]["launch"] = launch
for r, op, gs, ge, hs in con.execute(
        "SELECT rank, op_id, gpu_start, gpu_end, host_start_ns FROM nccl_channels"
        " WHERE gpu_start > 0"):
    if (r, op) in ops:
        ops[(r, op)]["ch"].append((gs, ge, hs))
con.close()
ops = {k: v for k, v in ops.items() if v["ch"] and "launch" in v}
if len(ops) < 200:
    itest.fail("only %d ops with kernel, launch and channels (the run has 220)" % len(ops))


def oracle_misses(model_of):
    """Ops where a model's offset is further than its bound from CUPTI's interval."""
    bad = []
    for key, o in ops.items():
        m = model_of(o["gpu"])
        gmin = min(c[0] for c in o["ch"])
        gmax = max(c[1] for c in o["ch"])
        lo, hi = o["k"][0] - gmin, o["k"][1] - gmax
        off = gmap(m, gmin) - gmin
        if off < lo - m[2] or off > hi + m[2]:
            bad.append((key, off, lo, hi, m[2]))
    return bad


# 2. CUPTI oracle
bad = oracle_misses(lambda g: host_m[g])
if bad:
    itest.fail("%d ops: host-only offset outside CUPTI's interval +- bound, first %s" % (
        len(bad), bad[0]))
# 3. agreement with the CUPTI-based fit
worst = 0
for o in ops.values():
    hm, fm = host_m[o["gpu"]], full_m[o["gpu"]]
    for gs, ge, _ in o["ch"]:
        for g in (gs, ge):
            d = abs(gmap(hm, g) - gmap(fm, g))
            worst = max(worst, d - hm[2] - fm[2])
            if d > hm[2] + fm[2]:
                itest.fail("GPU %s, gpu time %d: host-only and CUPTI maps %d ns apart, bounds"
                           " %d + %d" % (o["gpu"], g, d, hm[2], fm[2]))
# 4. mapped channel starts inside [launch, start callback]
inside = total = 0
for o in ops.values():
    hm = host_m[o["gpu"]]
    for gs, _, hs in o["ch"]:
        t = gmap(hm, gs)
        total += 1
        inside += o["launch"] <= t <= hs
        if t < o["launch"] - hm[2] or t > hs + hm[2]:
            itest.fail("GPU %s: channel start maps to %d, outside [%d, %d] by more than the"
                       " bound %d" % (o["gpu"], t, o["launch"], hs, hm[2]))
if inside < 0.99 * total:
    itest.fail("only %d of %d mapped channel starts inside [launch, callback]" % (inside, total))
# 5. teeth: a model moved by three times its bound, either way, fails the oracle (the host-only
# line sat ~464 us below CUPTI's with a ~495 us bound: the start callbacks came 1.1 us after
# the GPU start, the launches >= 916 us before it, so a move of +2 bounds can still pass)
for k in gpus:
    s, i, b, meth = host_m[k]
    for shift in (-3 * b, 3 * b):
        moved = dict(host_m)
        moved[k] = (s, i + shift, b, meth)
        if not oracle_misses(lambda g: moved[g]):
            itest.fail("GPU %s: the oracle accepts a model moved by %d ns" % (k, shift))
bounds = ", ".join("%s: host %.1f us, CUPTI %.2f us" % (k, host_m[k][2] / 1e3, full_m[k][2] / 1e3)
                   for k in gpus)
itest.log("ok: %d ops, %d channels; host-only maps within bound of CUPTI (%s)" % (
    len(ops), total, bounds))
wd.done(True)
