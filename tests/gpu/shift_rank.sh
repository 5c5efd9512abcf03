#!/usr/bin/env bash
# shift_rank.sh RANK SECONDS -- CMD...: run CMD; in the rank RANK (from the launcher's
# environment) inside a new time namespace whose CLOCK_MONOTONIC / MONOTONIC_RAW /
# BOOTTIME read SECONDS ahead (unshare --time, root only). The agent cannot know the shift:
# it is injected from outside, and recorded here (on stderr) as the truth for the check.
set -euo pipefail
want=$1 shift_s=$2
shift 2
[ "${1:-}" = "--" ] && shift
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-${RANK:-0}}}}}
if [ "$rank" = "$want" ]; then
    echo "shift_rank: rank $rank runs with CLOCK_MONOTONIC shifted by ${shift_s} s" >&2
    exec unshare --time --monotonic "$shift_s" --boottime "$shift_s" --fork -- "$@"
fi
exec "$@"
