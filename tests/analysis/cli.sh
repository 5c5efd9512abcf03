#!/usr/bin/env bash
# analysis_cli: the `meridian` command's contract without MPI: every subcommand's --help,
# usage errors, `profile`'s exit status (the job's, 128+signal, 125/127 for its own
# failures), its bounded waits on a daemon that fails or never listens, the environment a
# rank receives (secret file mode 0600, removed afterwards), `run`, `finalize` and `doctor`.
# usage: cli.sh MERIDIAN WORKDIR        (exit 77 = skipped: meridiand not built)
set -u
M=$1
W=$2
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

expect_rc() { # expect_rc WANT DESCRIPTION CMD...
    local want=$1 what=$2
    shift 2
    "$@" >out.txt 2>err.txt
    local rc=$?
    [ "$rc" = "$want" ] || { fail "$what: exit $rc, expected $want"; sed 's/^/  | /' err.txt | tail -5; }
}

for c in profile run report export finalize replay doctor; do
    expect_rc 0 "$c --help" "$M" "$c" --help
    grep -qi "usage" out.txt || fail "$c --help prints no usage"
done
expect_rc 0 "help report" "$M" help report
grep -q -- "--step-name" out.txt || fail "help report does not show report's options"
expect_rc 2 "no command" "$M"
expect_rc 2 "unknown command" "$M" frobnicate
expect_rc 0 "--version" "$M" --version
grep -q "^meridian [0-9]" out.txt || fail "--version output"
expect_rc 2 "profile without a command" "$M" profile -o x.db

# the daemon must exist from here on (it is part of this build)
if ! "$M" doctor >doctor.txt 2>&1 && grep -q "meridiand not found" doctor.txt; then
    echo "SKIP: meridiand not built"
    exit 77
fi
grep -q "loopback port bindable" doctor.txt || fail "doctor: loopback check missing"
grep -Eq "^\[(ok  |warn|FAIL)\] " doctor.txt || fail "doctor: line format"
tail -1 doctor.txt | grep -Eq "^[0-9]+ check\(s\) failed, [0-9]+ warning\(s\)$" || fail "doctor summary"
# the profiler API interposers: the library found, and each of the four exports reported as
# binutils' nm sees the file (defined dynamic symbols); a library without them (the agent),
# and a file that is no library: warnings, not failures
doctor_profapi() { # doctor_profapi LIB: doctor's export lines against nm's for LIB
    local lib=$1 out=$2
    for s in cudaProfilerStart cudaProfilerStop cuProfilerStart cuProfilerStop; do
        if nm -D --defined-only "$lib" 2>/dev/null | grep -Eq " $s$"; then
            grep -q "^\[ok  \]   exports $s$" "$out" || fail "doctor: $lib exports $s, not said"
        else
            grep -q "^\[warn\]   does not export $s:" "$out" || fail "doctor: $lib lacks $s, not said"
        fi
    done
}
pa=$(sed -n 's/^\[ok  \] profiler API interposers: //p' doctor.txt)
if [ -z "$pa" ]; then
    fail "doctor: libmeridian_profapi.so not found in the build: $(grep -i profapi doctor.txt)"
elif command -v nm >/dev/null; then
    nm -D --defined-only "$pa" | grep -q " cudaProfilerStart$" || fail "nm: $pa lacks cudaProfilerStart"
    doctor_profapi "$pa" doctor.txt
    ag=$(sed -n 's/^\[ok  \] libmeridian.so: //p' doctor.txt)
    MERIDIAN_PROFAPI_LIB=$ag "$M" doctor >doctor2.txt 2>&1
    grep -q "^\[ok  \] profiler API interposers: $ag$" doctor2.txt || fail "doctor: MERIDIAN_PROFAPI_LIB"
    doctor_profapi "$ag" doctor2.txt
    grep -c "^\[FAIL\]" doctor.txt >f1.txt; grep -c "^\[FAIL\]" doctor2.txt >f2.txt
    cmp -s f1.txt f2.txt || fail "doctor: missing interposer exports made a check FAIL"
fi
echo "not a library" >notalib.so
MERIDIAN_PROFAPI_LIB=$W/notalib.so "$M" doctor >doctor3.txt 2>&1
grep -q "^\[warn\] libmeridian_profapi.so at $W/notalib.so does not load: " doctor3.txt ||
    fail "doctor: a profapi file that does not load: $(grep -i profapi doctor3.txt)"
MERIDIAN_PROFAPI_LIB=$W/absent.so "$M" doctor >doctor4.txt 2>&1
grep -q "^\[warn\] libmeridian_profapi.so not found (set MERIDIAN_PROFAPI_LIB)" doctor4.txt ||
    fail "doctor: a missing profapi library: $(grep -i profapi doctor4.txt)"

# exit status: the job's own, 128+signal, 127 when the command does not exist
expect_rc 3 "job exit status" "$M" profile -o e3.db --no-report -- sh -c 'exit 3'
expect_rc 143 "job killed by SIGTERM" "$M" profile -o e143.db --no-report -- sh -c 'kill -TERM $$'
expect_rc 127 "job not found" "$M" profile -o e127.db --no-report -- /nonexistent/program
grep -q "cannot run /nonexistent/program" err.txt || fail "no message for a missing command"
[ -e e3.db ] || fail "profile made no database"
expect_rc 125 "database exists" "$M" profile -o e3.db -- true
grep -q "exists" err.txt || fail "no message for an existing database"
expect_rc 0 "--overwrite" "$M" profile -o e3.db --overwrite --no-report -- true

# a daemon that dies, and one that never listens: bounded, clear, 125
start=$(date +%s)
expect_rc 125 "daemon exits" "$M" profile -o d1.db --meridiand /bin/false -- true
grep -q "meridiand exited" err.txt || fail "no message for a daemon that exits"
printf '#!/bin/sh\necho $$ >silent.pid\nexec sleep 60\n' >silent-daemon && chmod +x silent-daemon
expect_rc 125 "daemon silent" "$M" profile -o d2.db --daemon-timeout 2 --meridiand ./silent-daemon -- true
grep -q "did not start listening within 2 s" err.txt || fail "no message for a silent daemon"
[ $(( $(date +%s) - start )) -le 10 ] || fail "daemon failures took too long"
kill -0 "$(cat silent.pid)" 2>/dev/null && fail "silent daemon left running"

# meridian killed outright: its meridiand must not linger (it gets SIGTERM and exits)
"$M" profile -o killed.db --no-report -- sh -c 'echo $$ >job.pid; exec sleep 30' >/dev/null 2>&1 &
mpid=$!
disown "$mpid" # no "Killed" notice from bash
for _ in $(seq 100); do [ -s job.pid ] && break; sleep 0.1; done
dpid=$(pgrep -f "meridiand --db $W/killed.db" | head -1)
[ -n "$dpid" ] || fail "no meridiand found for the run"
kill -9 "$mpid"
for _ in $(seq 50); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
[ -n "$dpid" ] && kill -0 "$dpid" 2>/dev/null && { fail "meridiand outlived meridian"; kill "$dpid"; }
[ -s job.pid ] && kill "$(cat job.pid)" 2>/dev/null

# what a rank receives
expect_rc 0 "environment" "$M" profile -o env.db --single --run-id cli-run-1 --no-report -- \
    sh -c 'echo "AGG=$MERIDIAN_AGGREGATOR RUN=$MERIDIAN_RUN_ID FORCE=$MERIDIAN_FORCE"
           echo "MODE=$(stat -c %a "$MERIDIAN_SECRET_FILE") LEN=$(head -1 "$MERIDIAN_SECRET_FILE" | wc -c)"
           echo "SECRETFILE=$MERIDIAN_SECRET_FILE NVLS=$NCCL_NVLS_ENABLE Q=$MERIDIAN_QUEUE_BYTES"'
grep -Eq "^AGG=127\.0\.0\.1:[0-9]+ RUN=cli-run-1 FORCE=1$" out.txt || fail "aggregator/run/force: $(cat out.txt)"
grep -q "^MODE=600 LEN=65$" out.txt || fail "secret file mode/length: $(cat out.txt)"
secret=$(sed -n 's/^SECRETFILE=\([^ ]*\).*/\1/p' out.txt)
[ -n "$secret" ] && [ ! -e "$secret" ] || fail "secret file $secret not removed after the run"
NCCL_NVLS_ENABLE=0 MERIDIAN_QUEUE_BYTES=8m expect_rc 0 "pass-through" "$M" profile -o env2.db \
    --no-report -- sh -c 'echo "NVLS=$NCCL_NVLS_ENABLE Q=$MERIDIAN_QUEUE_BYTES"'
grep -q "^NVLS=0 Q=8m$" out.txt || fail "NCCL_NVLS_ENABLE / MERIDIAN_* not passed: $(cat out.txt)"
expect_rc 0 "report of an empty run" "$M" report env.db
grep -q "run cli-run-1" out.txt || fail "report names the run"
grep -q "command: sh -c" out.txt || fail "report shows the profiled command"
expect_rc 0 "finalize twice" "$M" finalize env.db
expect_rc 0 "finalize again" "$M" finalize env.db

# run: execs in place (exit status kept), FORCE only without a rank variable
echo s3cret >secret.txt
expect_rc 7 "run exit status" env -u OMPI_COMM_WORLD_RANK -u RANK -u PMIX_RANK "$M" run \
    --aggregator 127.0.0.1:1 --run-id R --secret-file secret.txt -- sh -c 'echo "F=$MERIDIAN_FORCE S=$MERIDIAN_SECRET_FILE"; exit 7'
if grep -q "libmeridian.so not found" err.txt; then
    echo "note: agent library not built: run's environment checks skipped"
else
    grep -q "^F=1 S=/.*/secret.txt$" out.txt || fail "run environment: $(cat out.txt)"
    expect_rc 0 "run as a rank" env RANK=3 "$M" run --aggregator 127.0.0.1:1 --run-id R \
        --secret-file secret.txt -- sh -c 'echo "F=$MERIDIAN_FORCE C=$CUDA_INJECTION64_PATH"'
    grep -q "^F= C=/.*libmeridian.so$" out.txt || fail "run as rank: $(cat out.txt)"
fi
expect_rc 125 "run without aggregator" env -u MERIDIAN_AGGREGATOR "$M" run -- true

[ "$fails" = 0 ] && echo "analysis_cli: ok" && exit 0
echo "analysis_cli: $fails failure(s)"
exit 1
