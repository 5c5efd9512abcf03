#!/bin/bash
# meridian-nodes.sh: profile a job over several nodes with one meridiand per node, on the
# job's own launcher (mpirun or srun), aligned to one reference aggregator on this host.
#
#   deploy/multinode/meridian-nodes.sh --dir /shared/prof/run1 --nodes 4 \
#       --node-launcher "mpirun --map-by ppr:1:node -np 4 --hostfile hosts" \
#       -- mpirun -np 32 --hostfile hosts -x MERIDIAN_AGGREGATOR -x MERIDIAN_RUN_ID \
#              -x MERIDIAN_SECRET_FILE build/launcher/meridian run -- ./train
#
# (with Slurm: --node-launcher "srun --ntasks-per-node=1 -N 4 --overlap" and the job
#  `srun build/launcher/meridian run -- ./train`; srun passes the environment on.)
#
# What it does, in order:
#  1. a run id and a secret (in DIR, mode 0600: DIR must be on a file system every node
#     sees, or the secret file copied to the same path on every node beforehand);
#  2. the reference meridiand on this host (--listen 0.0.0.0:REF_PORT, DIR/shard-0.db);
#  3. one node meridiand per node as a step of the node launcher: node i (its rank in that
#     step: OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMIX_RANK) runs with --shard-id i+1,
#     --db DIR/shard-(i+1).db, --listen 127.0.0.1:NODE_PORT and --clock-reference
#     THIS_HOST:REF_PORT; it aligns its clock before it listens, and writes
#     DIR/ready-(i+1) once it does. The script waits for all of them.
#  4. the job, with MERIDIAN_AGGREGATOR=127.0.0.1:NODE_PORT (every rank finds its own
#     node's aggregator at the same loopback address), MERIDIAN_RUN_ID and
#     MERIDIAN_SECRET_FILE exported (pass them on with mpirun -x);
#  5. whatever the job's outcome (a trap on exit, signals included): the node step is sent
#     SIGTERM (mpirun and srun pass it to every meridiand: each commits and records its
#     alignment), then the reference is stopped. Should this script die without its trap
#     (SIGKILL), every node meridiand stops by itself once the reference has been silent
#     for --reference-grace-s (30 s);
#  6. meridian-adopt, then meridian merge -o OUT of DIR/shard-*.db (the shards are on the
#     shared DIR already; without a shared file system copy them here first, e.g.
#     `scp node:DIR/shard-K.db DIR/`, and run steps 6 by hand: the commands are printed).
# Exit status: the job's; 1 when the aggregators could not start.
set -u
BIN=${MERIDIAN_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build}
DIR= NODES= LAUNCHER= OUT= REF_PORT=47500 NODE_PORT=47501 HOST=$(hostname)
usage() { sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
    case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --node-launcher) LAUNCHER=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --ref-port) REF_PORT=$2; shift 2 ;;
    --node-port) NODE_PORT=$2; shift 2 ;;
    --host) HOST=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    *) usage ;;
    esac
done
[ -n "$DIR" ] && [ -n "$NODES" ] && [ -n "$LAUNCHER" ] && [ $# -gt 0 ] || usage
OUT=${OUT:-$DIR/run.db}
mkdir -p "$DIR" || exit 1
RUN_ID=nodes-$(date +%s)-$$
SECRET=$DIR/secret
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$SECRET")
REF_PID= NODES_PID=

stop_all() {
    [ -n "$NODES_PID" ] && kill -TERM "$NODES_PID" 2>/dev/null && wait "$NODES_PID"
    [ -n "$REF_PID" ] && kill -TERM "$REF_PID" 2>/dev/null && wait "$REF_PID"
    NODES_PID= REF_PID=
}
trap 'stop_all' EXIT
trap 'exit 143' TERM INT

"$BIN/aggregator/daemon/meridiand" --db "$DIR/shard-0.db" --shard-id 0 --run-id "$RUN_ID" \
    --secret-file "$SECRET" --listen "0.0.0.0:$REF_PORT" --port-file "$DIR/ready-0" \
    --quiet > "$DIR/meridiand-0.log" 2>&1 &
REF_PID=$!
# one node meridiand per node; the node index comes from the launcher's environment
NODE_CMD='i=${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-${PMIX_RANK:-0}}}; k=$((i + 1));
exec "$0" --db "$1/shard-$k.db" --shard-id "$k" --run-id "$2" --secret-file "$1/secret" \
    --listen "127.0.0.1:$3" --clock-reference "$4" --port-file "$1/ready-$k" --quiet \
    > "$1/meridiand-$k.log" 2>&1'
# shellcheck disable=SC2086
$LAUNCHER sh -c "$NODE_CMD" "$BIN/aggregator/daemon/meridiand" "$DIR" "$RUN_ID" "$NODE_PORT" \
    "$HOST:$REF_PORT" &
NODES_PID=$!
for _ in $(seq 600); do
    n=$(ls "$DIR"/ready-* 2>/dev/null | wc -l)
    [ "$n" -ge $((NODES + 1)) ] && break
    kill -0 "$REF_PID" 2>/dev/null && kill -0 "$NODES_PID" 2>/dev/null || break
    sleep 0.1
done
if [ "$(ls "$DIR"/ready-* 2>/dev/null | wc -l)" -lt $((NODES + 1)) ]; then
    echo "meridian-nodes: the aggregators did not all start (logs: $DIR/meridiand-*.log)" >&2
    exit 1
fi
export MERIDIAN_AGGREGATOR=127.0.0.1:$NODE_PORT MERIDIAN_RUN_ID=$RUN_ID MERIDIAN_SECRET_FILE=$SECRET
"$@"
status=$?
stop_all
shards=("$DIR/shard-0.db")
for k in $(seq "$NODES"); do shards+=("$DIR/shard-$k.db"); done
echo "meridian-nodes: job exited $status; merging: $BIN/aggregator/uplink/meridian-adopt ${shards[*]} &&" \
    "$BIN/launcher/meridian merge -o $OUT ${shards[*]}" >&2
"$BIN/aggregator/uplink/meridian-adopt" "${shards[@]}" &&
    "$BIN/launcher/meridian" merge --overwrite -o "$OUT" "${shards[@]}" ||
    echo "meridian-nodes: merge failed; shards kept in $DIR" >&2
exit "$status"
