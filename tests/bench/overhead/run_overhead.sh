#!/usr/bin/env bash
# run_overhead.sh: the overhead benchmark on the GPU host (issue 3), one command.
#
# Where it sits: called by tests/gpu/run_on_gpu_host.sh (stage `overhead`) after the
# build; it can also be run by hand there from the repository root. It runs overhead.py
# beside it (see its header for the method, the workloads and the variants) and leaves
# overhead.md (the table) and overhead.csv (every run) in $OUT.
# Environment: BUILD (CMake build folder, required), OUT (default ./out), WORK (logs,
# default /tmp/meridian-gpu), MERIDIAN and AGENT_LIB (the meridian variant is skipped
# without them), PAIRS (default 10), BUDGET_S (default 480: rounds stop there),
# BARE_ENV (VAR=VALUE;... for the bare consumer, e.g. the kinds meridian printed),
# OVERHEAD_ARGS (more overhead.py options).
# Reproduce: BUILD=build-gpu MERIDIAN=... AGENT_LIB=... bash tests/bench/overhead/run_overhead.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${BUILD:?BUILD must name the CMake build folder}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# shellcheck disable=SC2086
exec python3 "$here/overhead.py" --build "$BUILD" --out "${OUT:-out}" \
    --work "${WORK:-/tmp/meridian-gpu}" --pairs "${PAIRS:-10}" --budget-s "${BUDGET_S:-480}" \
    --meridian "${MERIDIAN:-}" --agent-lib "${AGENT_LIB:-}" --bare-env "${BARE_ENV:-}" \
    ${OVERHEAD_ARGS:-}
