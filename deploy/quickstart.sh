#!/usr/bin/env bash
# The quick start of the README: on a fresh Debian 12 / Ubuntu machine, as root,
#   deploy/quickstart.sh
# installs the Debian packages and builds into build/ (deploy/build.sh, as deploy/test.sh
# does), then profiles a multi-rank mpirun job with `meridian profile` (a local meridiand,
# the SQLite store) and prints the report; the database and the HTML report are left in
# quickstart/ (replaced on every run).
#
# The job: with NVIDIA GPUs (nvidia-smi -L) and the reference workload built (nvcc, MPI,
# NCCL), tests/workloads/ref_workload on every GPU (at most 8), rank 1 made 2 ms slower on
# every 5th step (a 500 us delay every 10th step, as in the recording below, is of the size
# of the workload's own arrival jitter on H200s: a second recording ranked rank 0 first).
# Otherwise each of 2 mpirun ranks replays what one rank's agent sent during the recorded
# job (500 us every 10th step) on a 2 x H200 host (tests/data/ref-rank%r.mrdcap, via `meridian replay
# --from-env`) through the same protocol, aggregator, database and analysis: the report
# shows 110 collectives matched across the 2 ranks and rank 1 as the top straggler.
#
# Options (for tests and for trying the other path):
#   --skip-build   use the existing build folder (no apt-get, no cmake)
#   --replay       replay the recorded capture even when GPUs are present
#   --out DIR      where the database and HTML report go (default: quickstart/ at the top
#                  of the repository)
#   --dry-run      print the job's command instead of running it
#   --installed P  run the installed copy under prefix P (cmake --install, or the Debian
#                  package: /usr) instead of the build folder: P/bin/meridian and its
#                  meridiand and agent, the recorded job from P/share/meridian/examples;
#                  implies --skip-build and --replay
# Environment: MRD_BUILD_DIR (default build/), MRD_JOBS (build jobs, default nproc).
# Exit status: meridian profile's (the job's), 1 when the build or a check failed.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${MRD_BUILD_DIR:-$top/build}
out=$top/quickstart
skip_build=0 replay=0 dry_run=0 installed=

while [ $# -gt 0 ]; do
    case "$1" in
    --skip-build) skip_build=1 ;;
    --replay) replay=1 ;;
    --dry-run) dry_run=1 ;;
    --installed)
        [ $# -ge 2 ] || { echo "quickstart: --installed needs a prefix" >&2; exit 2; }
        installed=$(cd "$2" && pwd) || exit 2
        skip_build=1 replay=1
        shift
        ;;
    --out)
        [ $# -ge 2 ] || { echo "quickstart: --out needs a folder" >&2; exit 2; }
        out=$2
        shift
        ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "quickstart: unknown option $1 (see --help)" >&2
        exit 2
        ;;
    esac
    shift
done

if [ "$skip_build" = 0 ]; then
    MRD_BUILD_DIR=$build "$top/deploy/build.sh"
fi
if [ -n "$installed" ]; then
    # everything from the installed tree: meridian finds meridiand and the agent beside it
    meridian=$installed/bin/meridian daemon=$installed/bin/meridiand
    capture=$installed/share/meridian/examples/ref-rank%r.mrdcap workload=
else
    build=$(cd "$build" && pwd)
    meridian=$build/launcher/meridian daemon=$build/aggregator/daemon/meridiand
    capture=tests/data/ref-rank%r.mrdcap workload=$build/tests/workloads/ref_workload
fi
for f in "$meridian" "$daemon"; do
    [ -x "$f" ] || { echo "quickstart: $f is missing: the build did not finish" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "quickstart: mpirun not found (openmpi-bin)" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
show=${out#"$top"/} # for messages: relative to the top when inside it
# the job runs at the top of the repository: each rank expands the capture pattern in its
# own working folder, which mpirun makes this one
cd "$top"
as_root=()
[ "$(id -u)" -ne 0 ] || as_root=(--allow-run-as-root)

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
# --full: the reference workload is 50 short steps, where tracing every kernel costs little
# and the per-step overlap table wants kernels in every step; the steady tier (the default
# of `meridian profile`) is for long jobs. README, "Quick start", says the same.
profile=("$meridian" profile -o "$out/quickstart.db" --overwrite --full --html "$out/report.html" --)
if [ "$replay" = 0 ] && [ "$gpus" -gt 0 ] && [ -n "$workload" ] && [ -x "$workload" ]; then
    np=$((gpus > 8 ? 8 : gpus))
    echo "quickstart: $gpus GPU(s): profiling the reference workload on $np rank(s)"
    job=(mpirun "${as_root[@]}" -np "$np" -x NCCL_NVLS_ENABLE=0 "$workload"
         --steps 50 --warmup 5 --slow-rank 1 --slow-us 2000 --slow-steps every:5)
else
    if [ -n "$installed" ]; then
        why="the installed copy in $installed"
    elif [ "$replay" = 1 ]; then
        why="--replay"
    elif [ "$gpus" -gt 0 ]; then
        why="$gpus GPU(s) but no ref_workload in $build (it needs nvcc, MPI and NCCL)"
    else
        why="no GPU"
    fi
    echo "quickstart: $why: replaying the reference workload recorded on a 2 x H200 host" \
         "(${capture#"$top"/}, %r = 0, 1) as 2 mpirun ranks"
    # --oversubscribe: 2 ranks even on a 1-core machine (they only send what was recorded)
    job=(mpirun "${as_root[@]}" --oversubscribe -np 2
         "${meridian#"$top"/}" replay --from-env "$capture")
fi

if [ "$dry_run" = 1 ]; then
    printf '%q ' "${profile[@]}" "${job[@]}"
    echo
    exit 0
fi
rc=0
"${profile[@]}" "${job[@]}" || rc=$?
echo
if [ "$rc" -ne 0 ]; then
    echo "quickstart: meridian profile exited with status $rc (its messages are above)" >&2
    exit "$rc"
fi
# the answers of the report in four lines (the JSON report: schema meridian-report/1)
"$meridian" report "$out/quickstart.db" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
c, ranks = d["collectives"], d["ranks"]
ms = lambda ns: "%.2f ms" % (ns / 1e6)
print("quickstart: %d ranks; %d of %d collective instances matched on every rank; "
      "%d events dropped" % (len(ranks), c["complete"], c["instances"],
                             sum(r["dropped_total"] for r in ranks)))
ov = [r for r in ranks if r.get("overlap")]
if any(r["overlap"].get("comm_ns", 1) > 0 for r in ov):
    print("quickstart: communication hidden behind compute: " + ", ".join(
        "rank %d %.0f%% (%s exposed)" % (r["rank"], 100 * r["overlap"]["ratio"],
                                         ms(r["overlap"]["exposed_ns"]))
        for r in ov))
else:
    # one rank: NCCL launches no kernel for a communicator of one, so there is nothing to hide
    print("quickstart: communication hidden behind compute: no NCCL kernels ran (NCCL launches "
          "none for a one-rank communicator); compute: " + ", ".join(
              "rank %d %s" % (r["rank"], ms(r["overlap"].get("compute_ns", 0))) for r in ov))
by = dict((r["rank"], r) for r in ranks)
top = d["straggler_ranking"][:1]
scope = "straggler_in_steps" if d.get("straggler_scope") == "steps" else "straggler"
if len(ranks) < 2:
    print("quickstart: one rank: which rank holds the others back needs two or more ranks "
          "(a one-GPU machine runs one; the report shows what one rank can: its steps, kernels, "
          "overlap)")
elif top and by[top[0]].get(scope) and by[top[0]][scope]["times_last"] > 0:
    s = by[top[0]][scope]
    print("quickstart: top straggler%s: rank %d (last to arrive %d times, made the others "
          "wait %s)" % (" in the steps" if scope != "straggler" else "", top[0],
                        s["times_last"], ms(s["wait_caused_ns"])))
' || echo "quickstart: (no summary: python3 or the JSON report failed)"
echo "quickstart: database $show/quickstart.db, HTML report $show/report.html"
echo "quickstart: again: ${meridian#"$top"/} report $show/quickstart.db   (--json for scripts)"
