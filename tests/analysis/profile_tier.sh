#!/usr/bin/env bash
# analysis_profile_tier: `meridian profile`'s capture tier options (--full, --windows,
# --step-name, --step-collective, --trace; agent/ENVIRONMENT.md, "Tiers and windows") without a GPU or mpirun.
#   A. bad values are refused while the options are read: exit status 2, a message naming
#      the option (or variable) and what is wrong, no database, no secret, no meridiand
#      started (a stand-in daemon would leave a mark), the job not run;
#   B. good runs hand the job the chosen MERIDIAN_* variables: the job is
#      `sh -c 'env > FILE'` (without mpirun the variables are set in meridian's own
#      environment and inherited), with the real meridiand; and through mpirun (-x), when
#      there is one.
# usage: profile_tier.sh MERIDIAN WORKDIR
set -u
M=$1
W=$2
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 1
W=$(pwd)
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# every run starts from an environment without the tier variables (the caller's may have them)
CLEAN=(env -u MERIDIAN_TRACE -u MERIDIAN_WINDOWS -u MERIDIAN_STEP_NAME -u MERIDIAN_TRACE_KINDS
       -u MERIDIAN_STEP_COLLECTIVE)

cat >fake-meridiand <<'EOF'
#!/bin/sh
touch "$(dirname "$0")/daemon-started"
exit 1
EOF
chmod +x fake-meridiand

# --- A: refused before anything starts --------------------------------------------------
refused() { # refused NAME EXPECTED-MESSAGE [VAR=VALUE...] -- PROFILE-OPTION...
    local name=$1 msg=$2 vars=()
    shift 2
    while [ "$1" != "--" ]; do vars+=("$1"); shift; done
    shift
    rm -f daemon-started job-ran
    "${CLEAN[@]}" "${vars[@]}" timeout 30 "$M" profile -o "bad-$name.db" \
        --meridiand "$W/fake-meridiand" "$@" -- touch job-ran >"bad-$name.out" 2>"bad-$name.err"
    local rc=$?
    [ $rc = 2 ] || fail "A $name: exit status $rc, not 2"
    grep -qxF -- "$msg" "bad-$name.err" ||
        fail "A $name: expected the line '$msg', got: $(cat "bad-$name.err")"
    [ ! -e "bad-$name.db" ] || fail "A $name: bad-$name.db was created"
    [ ! -e daemon-started ] || fail "A $name: meridiand was started"
    [ ! -e job-ran ] || fail "A $name: the job ran"
    ! ls -a | grep -q '\.secret$' || fail "A $name: a secret file was made"
}
P="meridian profile:"
KINDS="is not one of kernel, graph, nccl, memcpy, memset, sync, api, all"
NUM="does not start with a step number (0..1000000000000)"
FW="--full and --windows together: --full traces every kernel all the time, --windows only"
FW="$FW inside windows (choose one)"
refused len "$P --windows \"10/5\": term 1 \"10/5\": the length 10 is longer than the period 5" \
    -- --windows 10/5
refused abc "$P --windows \"abc\": term 1 \"abc\" $NUM" -- --windows abc
refused order "$P --windows \"5-3\": term 1 \"5-3\": the last step is before the first" \
    -- --windows 5-3
LP="the length and the period must be at least 1"
refused zero "$P --windows \"0/10\": term 1 \"0/10\": $LP" -- --windows 0/10
refused kind "$P --trace \"kernel,foo\": 'foo' $KINDS" -- --trace kernel,foo
refused fullwin "$P $FW" -- --full --windows 5-9
refused fullwin2 "$P $FW" -- --windows 5-9 --full
refused envwin "$P MERIDIAN_WINDOWS=\"1-2,x\" in the environment: term 2 \"x\" $NUM" \
    MERIDIAN_WINDOWS=1-2,x --
refused envtier "$P MERIDIAN_TRACE=\"everything\" in the environment: not steady or full" \
    MERIDIAN_TRACE=everything --
ENV="in the environment:"
refused envkind "$P MERIDIAN_TRACE_KINDS=\"kernel,,nccl\" $ENV an empty name $KINDS" \
    MERIDIAN_TRACE_KINDS=kernel,,nccl --
refused collzero "$P --step-collective \"AllReduce/0\": N must be a whole number from 1 to \
1000000, not \"0\"" -- --step-collective AllReduce/0
refused collsend "$P MERIDIAN_STEP_COLLECTIVE=\"Send@world\" $ENV \"Send\" is not a collective: \
one of AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Gather, Scatter, or \
'auto' (point-to-point calls have no sequence number)" MERIDIAN_STEP_COLLECTIVE=Send@world --
refused skewone "$P --trigger-skew 1: a factor over 1 (e.g. 1.5), at most 1000" -- --trigger-skew 1
# meridiand's own limits (proto/steps.h), refused before anything starts
refused skewbig "$P --trigger-skew 5000: a factor over 1 (e.g. 1.5), at most 1000" -- \
    --trigger-skew 5000
refused delaytiny "$P --window-delay 0.0001: seconds from 0.001 to 10000000" -- \
    --window-delay 0.0001 --window-duration 1
refused collat "$P --step-collective \"auto@\": nothing after '@': name a communicator, 'world' \
or 0xHASH" -- --step-collective auto@

# --- B: the job receives the variables ---------------------------------------------------
good() { # good NAME [VAR=VALUE...] -- PROFILE-OPTION...   (the job's env in NAME.env)
    local name=$1 vars=()
    shift
    while [ "$1" != "--" ]; do vars+=("$1"); shift; done
    shift
    "${CLEAN[@]}" "${vars[@]}" timeout 60 "$M" profile -o "$name.db" --single --no-report \
        --no-finalize "$@" -- sh -c "env > $name.env" >"$name.out" 2>"$name.err"
    local rc=$?
    [ $rc = 0 ] || { fail "B $name: exit status $rc"; tail -5 "$name.err"; }
    [ -e "$name.db" ] || fail "B $name: no database"
}
has() { # has NAME VAR=VALUE: the job of run NAME had exactly this variable
    grep -qxF -- "$2" "$1.env" ||
        fail "B $1: $2 not in the job's environment: $(grep '^MERIDIAN_' "$1.env" | tr '\n' ' ')"
}
lacks() { # lacks NAME VAR
    ! grep -q "^$2=" "$1.env" || fail "B $1: $2 should not reach the job: $(grep "^$2=" "$1.env")"
}
said() { # said NAME TEXT: the tier line on stderr
    grep -qF -- "$2" "$1.err" || fail "B $1: stderr lacks '$2': $(grep tier "$1.err")"
}

good default --
has default MERIDIAN_TRACE=steady
has default MERIDIAN_WINDOWS=10/200@10
lacks default MERIDIAN_TRACE_KINDS
said default "$P steady tier, windows 10/200@10 (CUPTI attached only inside them; --full traces \
every kernel)"

good full MERIDIAN_WINDOWS=5-9 -- --full # the option overrides the environment's windows
has full MERIDIAN_TRACE=full
lacks full MERIDIAN_WINDOWS
said full "$P full tier (CUPTI attached for the whole run"

good windows MERIDIAN_TRACE=full -- --windows "5-9, 100/1000@50" --step-name iter \
    --trace kernel,memcpy
has windows MERIDIAN_TRACE=steady
has windows MERIDIAN_WINDOWS=5-9,100/1000@50
has windows MERIDIAN_STEP_NAME=iter
has windows MERIDIAN_TRACE_KINDS=kernel,memcpy
said windows "$P steady tier, windows 5-9,100/1000@50 (CUPTI"

good coll -- --step-collective Broadcast/2@ddp --trigger-skew 3 # meridiand takes the factor
has coll MERIDIAN_STEP_COLLECTIVE=Broadcast/2@ddp
good envcoll MERIDIAN_STEP_COLLECTIVE=auto -- # the user's rule is kept
has envcoll MERIDIAN_STEP_COLLECTIVE=auto

good none -- --windows none
has none MERIDIAN_TRACE=steady
has none MERIDIAN_WINDOWS=none
said none "$P steady tier, no windows (CUPTI never attached"

good envwin MERIDIAN_WINDOWS=3-4 -- # the user's windows are kept, in the steady tier
has envwin MERIDIAN_TRACE=steady
has envwin MERIDIAN_WINDOWS=3-4
said envwin "$P steady tier, windows 3-4 (MERIDIAN_WINDOWS)"

good envfull MERIDIAN_TRACE=full -- # the user's tier is kept
has envfull MERIDIAN_TRACE=full
lacks envfull MERIDIAN_WINDOWS
said envfull "$P full tier (MERIDIAN_TRACE)"

good envsteady MERIDIAN_TRACE=steady MERIDIAN_STEP_NAME=iter -- # steady alone: default windows
has envsteady MERIDIAN_TRACE=steady
has envsteady MERIDIAN_WINDOWS=10/200@10
has envsteady MERIDIAN_STEP_NAME=iter

# through mpirun: every rank gets them (-x NAME=VALUE, and the environment mpirun inherits)
if command -v mpirun >/dev/null; then
    "${CLEAN[@]}" timeout 60 "$M" profile -o mpi.db --no-report --no-finalize --no-mpi-wrappers \
        --windows 7 --trace all -- mpirun -np 2 --allow-run-as-root --oversubscribe \
        sh -c 'env > mpi-$OMPI_COMM_WORLD_RANK.env' >mpi.out 2>mpi.err
    rc=$?
    [ $rc = 0 ] || { fail "B mpi: exit status $rc"; tail -5 mpi.err; }
    for r in 0 1; do
        [ -e mpi-$r.env ] || { fail "B mpi: rank $r wrote nothing"; continue; }
        has mpi-$r MERIDIAN_TRACE=steady
        has mpi-$r MERIDIAN_WINDOWS=7
        has mpi-$r MERIDIAN_TRACE_KINDS=all
    done
else
    echo "note: no mpirun: the -x path is not checked here (analysis_profile_e2e covers it)"
fi

"$M" profile --help >help.out 2>&1 || fail "--help exit status $?"
for w in "--full" "--windows SPEC" "--step-name PREFIX" "--trace KINDS" "10/200@10" \
    "--step-collective SPEC" "--trigger-skew F"; do
    grep -qF -- "$w" help.out || fail "--help lacks '$w'"
done

[ "$fails" = 0 ] && echo "analysis_profile_tier: ok" && exit 0
echo "analysis_profile_tier: $fails failure(s)"
exit 1
