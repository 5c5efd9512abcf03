#!/usr/bin/env bash
# analysis_profile_shards: `meridian profile --shards N` end to end without a GPU: N real
# meridiand (one database each), a real Open MPI launch whose ranks (`meridian replay
# --from-env`, replaying the H200 reference capture rank by rank) pick their shard from
# the MERIDIAN_AGGREGATOR list (rank % N), the merge into the requested database, the
# finalize and the report.
#   S1. --shards 1 and --shards 2 on the same job: the sharded database's report equals
#       the single aggregator's (ranks, per-rank event counts, 110 of 110 collectives
#       complete, both clock models fitted); the shard files are gone after success;
#   S2. --shards 3 --keep-shards with 2 ranks: each kept shard holds exactly its ranks
#       (rank % 3) under its shard id, shard 2 none, and the merge still succeeds;
#   S3. --shards 0 / 257, and a --listen port range past 65535: usage errors (exit 2),
#       nothing created;
#   S4. shard 1's port is taken: exit 125, the job never ran, the message names shard 1;
#   S5. the merge refuses (the job created the output itself): the job's exit status is
#       kept, the shard files are kept and listed, the output is untouched.
# usage: profile_shards.sh MERIDIAN WORKDIR   (exit 77 = skipped)
set -u
M=$1
W=$2
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3 (CLI)"; exit 77; }
DATA=$(cd "$(dirname "$0")/../data" 2>/dev/null && pwd)
ITEST_DIR=$(cd "$(dirname "$0")/../integration" && pwd) # itest.reserve_port (S4)
[ -n "$DATA" ] && [ -f "$DATA/ref-rank0.mrdcap" ] && [ -f "$DATA/ref-rank1.mrdcap" ] ||
    { echo "SKIP: tests/data/ref-rank*.mrdcap not found"; exit 77; }
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
JOB=(mpirun -np 2 --allow-run-as-root --oversubscribe --mca btl self,tcp
     "$M" replay --from-env "$DATA/ref-rank%r.mrdcap" --quiet)

profile() { # profile NAME [OPTIONS...]: runs the job under meridian profile -o NAME.db
    local name=$1
    shift
    timeout 150 "$M" profile -o "$name.db" --no-mpi-wrappers --json "$name.json" "$@" \
        -- "${JOB[@]}" >"$name.out" 2>"$name.err"
}

# --- S1: one shard and two shards, the same job ------------------------------------------
profile one --shards 1
rc=$?
[ $rc = 0 ] || { fail "S1: --shards 1 exit $rc"; tail -20 one.err; }
MERIDIAN_SHARD_ID=1 profile two --shards 2 # a list sets each rank's shard id: not passed on
rc=$?
[ $rc = 0 ] || { fail "S1: --shards 2 exit $rc"; tail -20 two.err; }
grep -q "MERIDIAN_SHARD_ID=1 is not passed on" two.err || fail "S1: MERIDIAN_SHARD_ID kept"
list=$(sed -n 's/.*aggregators (one per shard) \([^ ]*\), database .*/\1/p' two.err)
[ "$(echo "$list" | tr ',' '\n' | grep -c ':[0-9][0-9]*$')" = 2 ] &&
    [ "$(echo "$list" | tr ',' '\n' | sort -u | wc -l)" = 2 ] ||
    fail "S1: the ranks were not handed two distinct aggregator addresses: '$list'"
ls -a | grep -q '^two\.db\.shard-' && fail "S1: shard files left after success: $(ls -a)"
ls -a | grep -q '\.secret$' && fail "S1: secret file left behind"
python3 - one.json two.json <<'EOF' || fail "S1: reports differ or are incomplete"
import json, sys
def load(p):
    doc = json.load(open(p))
    return doc, {r["rank"]: r for r in doc["ranks"]}
one, r1 = load(sys.argv[1])
two, r2 = load(sys.argv[2])
ok = True
def check(what, cond):
    global ok
    if not cond:
        print("  check failed:", what)
        ok = False
for name, doc, ranks in (("shards=1", one, r1), ("shards=2", two, r2)):
    c = doc["collectives"]
    check(name + ": ranks 0 and 1", sorted(ranks) == [0, 1])
    check(name + ": 110 of 110 collective instances complete",
          c["complete"] == 110 and c["instances"] == 110)
    check(name + ": clock model fitted on both ranks",
          all(r["clock"] is not None for r in ranks.values()))
    check(name + ": global timebase", doc["run"]["timebase"] == "global")
    check(name + ": nothing dropped", all(r["dropped_total"] == 0 for r in ranks.values()))
for k in (0, 1):
    check("rank %d: same events per kind" % k, r1[k]["events"] == r2[k]["events"])
    check("rank %d: some events" % k, sum(r1[k]["events"].values()) > 0)
c1 = {k: v for k, v in one["collectives"].items() if k != "skew_histogram_us_log2"}
c2 = {k: v for k, v in two["collectives"].items() if k != "skew_histogram_us_log2"}
for key in ("instances", "complete", "partial", "untimed", "causality_violations"):
    check("collectives." + key + " equal", c1[key] == c2[key])
fn = lambda c: sorted((f["func"], f["instances"], f["complete"], f["timed"]) for f in c["by_function"])
check("same collectives per function", fn(c1) == fn(c2))
check("same straggler ranking", one["straggler_ranking"] == two["straggler_ranking"])
check("same step count", len(one["steps"]) == len(two["steps"]))
if not ok:
    print("  shards=1:", {k: v["events"] for k, v in r1.items()}, c1)
    print("  shards=2:", {k: v["events"] for k, v in r2.items()}, c2)
sys.exit(0 if ok else 1)
EOF

# --- S2: three shards for two ranks, kept: each shard holds exactly its ranks -------------
profile three --shards 3 --keep-shards --no-finalize
rc=$?
[ $rc = 0 ] || { fail "S2: --shards 3 exit $rc"; tail -20 three.err; }
for k in 0 1 2; do
    got=$(sqlite3 "three.db.shard-$k" "SELECT shard_id FROM runs; SELECT group_concat(rank) FROM
          (SELECT DISTINCT rank FROM kernels ORDER BY rank);" 2>&1 | tr '\n' ' ')
    want="$k $([ $k -lt 2 ] && echo $k) "
    [ "$got" = "$want" ] || fail "S2: shard $k holds '$got', expected '$want'"
done
got=$(sqlite3 three.db "SELECT group_concat(rank) FROM (SELECT DISTINCT rank FROM kernels
      ORDER BY rank)" 2>&1)
[ "$got" = "0,1" ] || fail "S2: merged database has ranks '$got'"
grep -q "three.db.shard-2" three.err || fail "S2: kept shards not listed"

# --- S3: usage errors --------------------------------------------------------------------
for n in 0 257; do
    timeout 30 "$M" profile -o bad$n.db --shards $n -- true >bad$n.out 2>bad$n.err
    rc=$?
    [ $rc = 2 ] && grep -q -- "--shards $n: must be 1 to 256" bad$n.err &&
        [ -z "$(ls -a | grep "^bad$n\.db\|\.secret$")" ] ||
        fail "S3: --shards $n: exit $rc, $(cat bad$n.err), files: $(ls -a | grep bad$n)"
done
timeout 30 "$M" profile -o badport.db --shards 3 --listen 127.0.0.1:65534 -- true \
    >badport.out 2>badport.err
rc=$?
[ $rc = 2 ] && grep -q "ports 65534..65536 do not fit" badport.err ||
    fail "S3: --listen :65534 --shards 3: exit $rc, $(cat badport.err)"

# --- S4: shard 1 cannot listen: setup failure, the job never runs -----------------------
# hold P+1 listening (shard 1 cannot bind it) and reserve P (itest.reserve_port: bound,
# never listening, SO_REUSEADDR given after the bind): shard 0's meridiand can still listen
# on P, while no other bind and no outgoing connection can take it meanwhile. Holding only
# P+1 and hoping P stayed free failed in CI: another test's connection took P.
ITEST_DIR=$ITEST_DIR python3 - <<'EOF' &
import os, socket, sys, time
sys.path.insert(0, os.environ["ITEST_DIR"])
import itest
for _ in range(200):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    p = itest.reserve_port(taken.getsockname()[1] - 1)
    if p:
        break
    taken.close()
else:
    raise SystemExit("S4: no pair of free consecutive ports in 200 tries")
open("held.port.tmp", "w").write(str(p))
os.rename("held.port.tmp", "held.port")
time.sleep(60)
EOF
holder=$!
for _ in $(seq 100); do [ -s held.port ] && break; sleep 0.1; done
[ -s held.port ] || fail "S4: the port holder did not start"
P=$(cat held.port)
timeout 60 "$M" profile -o taken.db --shards 2 --listen 127.0.0.1:$P --no-mpi-wrappers \
    -- touch ran.flag >taken.out 2>taken.err
rc=$?
kill $holder 2>/dev/null
wait $holder 2>/dev/null
[ $rc = 125 ] && [ ! -e ran.flag ] && grep -q "meridiand (shard 1) exited" taken.err &&
    ! grep -q "cannot listen on 127.0.0.1:$P:" taken.err ||
    fail "S4: port of shard 1 taken: exit $rc, job ran: $([ -e ran.flag ] && echo yes || echo no), $(cat taken.err)"

# --- S5: the merge refuses: the job's status, the shards kept and listed -----------------
timeout 60 "$M" profile -o race.db --shards 2 --no-mpi-wrappers \
    -- sh -c 'echo mine >race.db; exit 3' >race.out 2>race.err
rc=$?
[ $rc = 3 ] || fail "S5: exit $rc, expected the job's 3"
[ "$(cat race.db 2>/dev/null)" = mine ] || fail "S5: the existing output was changed"
[ -e race.db.shard-0 ] && [ -e race.db.shard-1 ] || fail "S5: shard files not kept: $(ls)"
grep -q "race.db.shard-0 .*race.db.shard-1" race.err || fail "S5: kept shards not listed"

[ "$fails" = 0 ] && echo "analysis_profile_shards: ok" && exit 0
echo "analysis_profile_shards: $fails failure(s)"
exit 1
