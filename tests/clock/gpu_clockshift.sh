#!/usr/bin/env bash
# gpu_clockshift.sh: issue 4 on the 2 x H200 host. The reference workload under
# `meridian profile` with rank 1 in a time namespace (CLOCK_MONOTONIC_RAW shifted by
# SHIFT_S seconds, default 7); then tests/clock/check_shift.py: the shift recovered within
# 5 us, causality violations counted before and after tightening, zero after. Then the same
# database again with rank 1's fitted offset pushed PERTURB_US (200) off (clock_finalize
# --perturb), to watch the check find real NCCL kernels out of order and move the offset
# back. The reference workload's kernels allow about +-71 us between the two ranks (the
# shortest NCCL kernel overlap): a smaller push (50 us was tried) is no violation at all
# and, rightly, moves nothing.
#
#   env MERIDIAN=... AGENT_LIB=... REF=.../ref_workload [FINALIZE=.../clock_finalize]
#       [WORK=/tmp/meridian-gpu] [PY=python3] [SHIFT_S=7] [PERTURB_US=200] \
#     bash tests/clock/gpu_clockshift.sh -- mpirun --allow-run-as-root -np 2 ...
#
# Meant to be called by tests/gpu/run_on_gpu_host.sh's stage `clockshift` (its MPIRUN
# array after the --). Lines start with "meridian_clockshift:". Exit 0 when all held.
# Tried without a GPU with REF = a script running tests/clock/clock_agent (synthetic
# collectives) under mpirun -np 2: shift +7 s and -5 s recovered to 0.16 us / 0.06 us,
# 0 violations; perturbed by 50 us: 80 violations before, 0 after, 0.08 us after.
set -uo pipefail
: "${MERIDIAN:?set MERIDIAN}" "${AGENT_LIB:?set AGENT_LIB}" "${REF:?set REF}"
WORK=${WORK:-/tmp/meridian-gpu}
PY=${PY:-python3}
SHIFT_S=${SHIFT_S:-7}
PERTURB_US=${PERTURB_US:-200}
HERE=$(cd "$(dirname "$0")" && pwd)
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "usage: ... gpu_clockshift.sh -- MPIRUN ARGS" >&2; exit 2; }
mkdir -p "$WORK"
if ! unshare --time --monotonic 1 --boottime 1 --fork true; then
    echo "meridian_clockshift: SKIPPED: unshare --time does not work here"
    exit 0
fi
DB=$WORK/clockshift.db
rm -f "$DB" "$DB"-*
echo "meridian_clockshift: rank 1 under unshare --time --monotonic $SHIFT_S"
# shellcheck disable=SC2016
"$MERIDIAN" profile -o "$DB" --agent-lib "$AGENT_LIB" -- "$@" sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
         exec unshare --time --monotonic "$0" --boottime "$0" --fork "$@"
     fi
     exec "$@"' "$SHIFT_S" "$REF" --steps 100 --warmup 10
echo "meridian_clockshift: profile rc=$?"
"$PY" "$HERE/check_shift.py" --db "$DB" --rank 1 --ref-rank 0 --shift-s "$SHIFT_S" \
    --max-error-us 5
rc=$?
if [ -n "${FINALIZE:-}" ] && [ -x "$FINALIZE" ]; then
    cp "$DB" "$WORK/clockshift-perturbed.db"
    "$FINALIZE" "$WORK/clockshift-perturbed.db" --perturb "1:$((PERTURB_US * 1000))" |
        grep -E 'causality|perturbed' | sed 's/^/meridian_clockshift: perturbed: /'
    "$PY" "$HERE/check_shift.py" --db "$WORK/clockshift-perturbed.db" --rank 1 --ref-rank 0 \
        --shift-s "$SHIFT_S" --max-error-us 5 --judge after |
        sed "s/^meridian_clockshift: /&perturbed $PERTURB_US us: /"
fi
exit $rc
