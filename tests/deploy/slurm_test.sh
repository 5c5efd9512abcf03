#!/usr/bin/env bash
# deploy_slurm: `meridian profile` over a real single-node Slurm (Debian's slurm-wlm with
# munge; this test starts munged, slurmctld and slurmd in a temporary folder with their own
# socket, ports and state, and stops them at the end), the ranks being replayed captures
# (`meridian replay --from-env`, which reads its rank as the agent does):
#   1. meridian profile -- srun -n 2 meridian replay --from-env ...: the agent's variables
#      reach both tasks through srun's environment; ranks 0 and 1 stored, 110 of 110
#      collectives matched (the recorded job).
#   2. meridian profile -- srun -n 2 torchrun --nnodes=2 --nproc_per_node=2 ... : two srun
#      tasks play two nodes, each a torchrun (c10d rendezvous on loopback) starting two
#      workers; every worker of a "node" shares that task's SLURM_PROCID and has its own
#      RANK: ranks 0-3 stored, each with the local rank and world size torchrun gave it.
#      With SLURM_PROCID first (the order before), the workers claimed ranks 0, 0, 1, 1.
#   3. meridian doctor --nodes -- srun -n 2: each task finds the agent libraries;
#      meridian doctor -- srun ... torchrun ...: names both launchers and torchrun's RANK.
#   4. deploy/slurm/meridian.sbatch submitted with sbatch --wait -n 2: ranks 0 and 1.
#   5. srun -n 2 meridian run --aggregator ... -- meridian replay ...: the per-rank wrapper
#      for launchers meridian does not rewrite, against a meridiand started by the test.
# torchrun is Debian's python3-torch 1.13 (/usr/bin/torchrun). Under Debian 12's Python
# 3.11 its default "--redirects 0 --tee 0" crashes (Std.from_str returns None for 0), so
# the test gives --redirects 1 --tee 1 (worker stdout to a log file and the console).
# Usage: slurm_test.sh MERIDIAN SRC MERIDIAND.
# Exit 0 pass, 1 fail, 77 skipped (Slurm not installed).
set -euo pipefail
meridian=$(realpath "$1") src=$(cd "$2" && pwd) daemon=$(realpath "$3")
for p in munged slurmctld slurmd srun sinfo sqlite3; do
    command -v "$p" >/dev/null || [ -x "/usr/sbin/$p" ] ||
        { echo "SKIP: $p not installed (deploy/install-deps.sh installs slurm-wlm, munge)"; exit 77; }
done
export PATH=$PATH:/usr/sbin
tmp=$(mktemp -d /tmp/meridian-slurm-XXXXXX)
chmod 755 "$tmp" # munged wants its socket's folder searchable by all
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    for f in "$tmp"/log/*.log; do echo "--- $f"; tail -20 "$f"; done >&2
    exit 1
}
free_port() { # three consecutive free TCP ports on loopback, the first printed. Drawn from
    # 12000..19999: below the ephemeral range (no outgoing connection takes them between this
    # check and slurmctld's bind) and below the 20000..31999 of the Python tests' reserved
    # ports (tests/integration/itest.py); free means a bind succeeds, whatever holds it
    python3 - <<'EOF'
import random, socket, sys
for _ in range(200):
    p = random.randrange(12000, 19998)
    socks = []
    try:
        for q in (p, p + 1, p + 2):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", q))
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(p)
    sys.exit(0)
sys.exit(1)
EOF
}

mkdir -p "$tmp"/{munge,state,spool,log,caps}
chmod 700 "$tmp/munge"
head -c 1024 /dev/urandom >"$tmp/munge/munge.key"
chmod 400 "$tmp/munge/munge.key"
sock=$tmp/munge/munge.sock
munged -F -f --socket="$sock" --key-file="$tmp/munge/munge.key" \
    --log-file="$tmp/log/munged.log" --pid-file="$tmp/munge/munged.pid" \
    --seed-file="$tmp/munge/seed" &
pids+=($!)

port=$(free_port) || fail "no free port"
node=$(hostname -s)
export SLURM_CONF=$tmp/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=meridiantest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || fail "munged did not start"
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
state=
for _ in $(seq 150); do
    state=$(sinfo -h -o %t 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.2
done
[ "$state" = idle ] || fail "the Slurm node is '$state', not idle"
echo "slurm_test: slurmctld :$port and slurmd :$((port + 1)) up, node $node idle ($(srun --version))"
cd "$tmp"

ranks() { sqlite3 "$1" "SELECT group_concat(rank || ':' || local_rank || ':' || world_size, ' ')
                        FROM (SELECT * FROM ranks ORDER BY rank)"; }

# 1. srun alone
"$meridian" profile -o "$tmp/srun.db" --no-report -- \
    srun -n 2 "$meridian" replay --from-env "$src/tests/data/ref-rank%r.mrdcap" \
    >"$tmp/log/srun.log" 2>&1 || { cat "$tmp/log/srun.log"; fail "profile -- srun"; }
got=$(ranks "$tmp/srun.db")
[ "$got" = "0:0:2 1:1:2" ] || { cat "$tmp/log/srun.log"; fail "srun: ranks '$got'"; }
matched=$("$meridian" report "$tmp/srun.db" --json |
          python3 -c 'import json,sys; c=json.load(sys.stdin)["collectives"]; print(c["complete"], c["instances"])')
[ "$matched" = "110 110" ] || fail "srun: collectives matched '$matched', not '110 110'"
echo "slurm_test: 1. profile -- srun -n 2: ranks (rank:local:world) $got, 110 of 110 collectives"

# 2. srun ... torchrun ...: 2 tasks ("nodes") x 2 workers
for r in 0 1 2 3; do ln -s "$src/tests/data/ref-rank$((r % 2)).mrdcap" "$tmp/caps/r$r.mrdcap"; done
torch=(torchrun --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d
       --rdzv_endpoint="127.0.0.1:$((port + 2))" --rdzv_id=meridian-test
       --redirects 1 --tee 1 --log_dir "$tmp/torchlogs" --no_python)
if command -v torchrun >/dev/null; then
    "$meridian" profile -o "$tmp/torch.db" --no-report -- \
        srun -n 2 "${torch[@]}" "$meridian" replay --from-env "$tmp/caps/r%r.mrdcap" \
        >"$tmp/log/torch.log" 2>&1 || { cat "$tmp/log/torch.log"; fail "profile -- srun torchrun"; }
    got=$(ranks "$tmp/torch.db")
    [ "$got" = "0:0:4 1:1:4 2:0:4 3:1:4" ] ||
        { cat "$tmp/log/torch.log"; fail "srun torchrun: ranks '$got'"; }
    n=$(sqlite3 "$tmp/torch.db" "SELECT COUNT(DISTINCT rank) FROM kernels")
    [ "$n" = 4 ] || fail "srun torchrun: kernels from $n ranks, not 4"
    grep -c 'meridian replay: rank [0-3]: ' "$tmp/log/torch.log" | grep -qx 4 ||
        { cat "$tmp/log/torch.log"; fail "srun torchrun: not 4 replay lines"; }
    echo "slurm_test: 2. profile -- srun -n 2 torchrun --nproc_per_node=2: ranks $got," \
         "kernels from 4 ranks"
else
    echo "slurm_test: 2. SKIPPED: no torchrun (python3-torch)"
fi

# 3. doctor
"$meridian" doctor --nodes -- srun -n 2 >"$tmp/doctor-nodes.txt" || true
grep -c '^\[ok  \] node .*libmeridian.so present' "$tmp/doctor-nodes.txt" | grep -qx 2 ||
    { cat "$tmp/doctor-nodes.txt"; fail "doctor --nodes: not 2 tasks with the agent"; }
grep -c '^\[ok  \] node .*libmeridian_profapi.so present' "$tmp/doctor-nodes.txt" | grep -qx 2 ||
    { cat "$tmp/doctor-nodes.txt"; fail "doctor --nodes: not 2 tasks with the profiler API interposers"; }
"$meridian" doctor -- srun -n 2 "${torch[@]}" ./train >"$tmp/doctor-cmd.txt" || true
for want in "launcher srun: .*srun's environment" "launcher torchrun: " "rank: torchrun's RANK"; do
    grep -q "^\[ok  \] $want" "$tmp/doctor-cmd.txt" ||
        { cat "$tmp/doctor-cmd.txt"; fail "doctor -- srun torchrun: no '$want'"; }
done
echo "slurm_test: 3. doctor --nodes -- srun -n 2: agent and profapi present on 2 tasks; doctor names srun and torchrun"

# 4. the sbatch example of deploy/slurm, as a batch job of 2 tasks (loopback only here)
MRD_MERIDIAN=$meridian MRD_OUT=$tmp/sbatch.db MRD_LISTEN=127.0.0.1:0 MRD_ADVERTISE=127.0.0.1 \
    MRD_PROFILE=--no-report sbatch --wait -n 2 -o "$tmp/log/sbatch.log" \
    "$src/deploy/slurm/meridian.sbatch" "$meridian" replay --from-env \
    "$src/tests/data/ref-rank%r.mrdcap" >/dev/null || { cat "$tmp/log/sbatch.log"; fail "sbatch"; }
got=$(ranks "$tmp/sbatch.db")
[ "$got" = "0:0:2 1:1:2" ] || { cat "$tmp/log/sbatch.log"; fail "sbatch: ranks '$got'"; }
echo "slurm_test: 4. sbatch deploy/slurm/meridian.sbatch -n 2: ranks $got"
# 5. meridian run, the per-rank wrapper, under srun against a meridiand started by hand
head -c 24 /dev/urandom | base64 >"$tmp/run.secret"
chmod 600 "$tmp/run.secret"
"$daemon" --db "$tmp/run.db" --listen 127.0.0.1:0 --run-id byhand --secret-file "$tmp/run.secret" \
    --port-file "$tmp/run.port" --quiet >"$tmp/log/meridiand.log" 2>&1 &
dpid=$!
pids+=("$dpid")
for _ in $(seq 100); do [ -s "$tmp/run.port" ] && break; sleep 0.1; done
[ -s "$tmp/run.port" ] || fail "meridiand for meridian run did not listen"
srun -n 2 "$meridian" run --aggregator "127.0.0.1:$(cat "$tmp/run.port")" --run-id byhand \
    --secret-file "$tmp/run.secret" -- "$meridian" replay --from-env \
    "$src/tests/data/ref-rank%r.mrdcap" >"$tmp/log/run.log" 2>&1 ||
    { cat "$tmp/log/run.log"; fail "srun meridian run"; }
kill -TERM "$dpid"
wait "$dpid" || fail "meridiand (meridian run case) did not stop cleanly"
got=$(ranks "$tmp/run.db")
[ "$got" = "0:0:2 1:1:2" ] || { cat "$tmp/log/run.log"; fail "meridian run: ranks '$got'"; }
echo "slurm_test: 5. srun -n 2 meridian run -- ... (meridiand started by hand): ranks $got"
echo "slurm_test: PASS"
