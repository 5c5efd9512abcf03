#!/usr/bin/env bash
# run_on_gpu_host.sh: build meridian on the GPU host and run the GPU stages, in one go.
#
# Where it sits: the only script run on the 2 x H200 host (shared/GPU-HOST.md), through one
# device call from the repository root, after tests/gpu/prepare_deps.sh filled .deps/ here:
#
#   run(command="bash tests/gpu/run_on_gpu_host.sh workloads", carry=[".deps", ...])
#
# Steps: `setup` always runs first: record the host (OS, GPUs, links, CUDA, NCCL, MPI,
# torch), unpack .deps/debs with `dpkg -x` into .deps/root, configure with
# -DMRD_DEPS_PREFIX=.deps/root -DMRD_PREGENERATED_PROTO=.deps/pb, build everything with
# ninja (-k 0: one broken folder does not hide the rest), check which copy of each carried
# library the binaries load, and run the non-GPU unit tests briefly. Then the stages named
# on the command line, in order:
#   workloads   ref_workload under mpirun -np 2 (plain and with a straggler), kernel_storm,
#               ddp_train.py both modes (unprofiled, counting GPU ops a step), and the bare
#               CUPTI consumer on ref_workload, kernel_storm and kernel-dense DDP
#   capture     `meridian profile` on ref_workload and DDP, then tests/gpu/check_capture.py
#               on each database; the reference capture is copied to $OUT for tests/data/
#   overhead    tests/bench/overhead/run_overhead.sh (the alternating benchmark);
#               OVERHEAD_WORKLOADS, BUDGET_S, BUDGET_QUICK_S, PAIRS; OVERHEAD_RESUME=1
#               continues the last run (its rows kept in $STATE, default build-gpu-state/)
#               in a second call on the same warm machine
#   stormdiag   tests/bench/overhead/storm_variants.py: the storm under meridian with one
#               mechanism off at a time (periodic flush, completion pacing), to find its cost;
#               STORMDIAG_VARIANTS=plain_pin,bare_pin,meridian_pin,... picks variants (the
#               _pin ones put the launching thread alone on CPU 0's core);
#               STORMDIAG_ROUNDS, STORMDIAG_BUDGET_S; every run in $OUT/stormdiag/*.csv
#   quickstart  the README's first command on this host, GPU path: deploy/quickstart.sh
#               --skip-build with MRD_BUILD_DIR=$BUILD (no apt-get there: the carried
#               libraries stand in), then the per-step table's slowed steps
#   windows     issue 9: tests/gpu/check_windows.py on kernel_storm --steps under the steady
#               tier (exact kernels per window), and a steady-tier PyTorch run
#   tiers       issue 9's benchmark, tests/bench/overhead/tiers.py (TIERS_ARGS, resumable)
#   inproc      issue 9: tests/bench/overhead/inproc.py, a traced step's cost, meridian's
#               window against the bare consumer attached part-way, each inside one process
#               (INPROC_ARGS, INPROC_TIMEOUT_S; its CSV continues in $ROOT/tiers-state/:
#               before a resume call copy there the CSV the last call returned);
#               INPROC_BEFORE_SRC=DIR builds the agent of another source tree (a snapshot
#               of an earlier commit) for inproc.py's variant `before`
#   sampler     issue 9: tests/workloads/sampler_ab (the NVML sampler's seven calls at 10 Hz
#               and at 100 Hz from a thread of its own, on and off in alternate phases of one
#               process, while the main thread launches empty kernels); SAMPLER_PAIRS,
#               SAMPLER_HZ (default "10 100"), SAMPLER_PHASE_MS (default 500; at 1 Hz give
#               a few seconds, so that an "on" phase holds several readings)
#   extcorr     issue 9: tests/workloads/extcorr_ab (a CUPTI external-correlation push and
#               pop around each launch, as the agent does around NCCL's launches inside
#               windows, against the launch alone, with the EXTERNAL_CORRELATION kind off and
#               on, in alternating phases of one process); EXTCORR_CYCLES (default 30)
#   hostclock   issue 9 item 4 (2 GPUs): ref_workload in the steady tier with one window, then
#               tests/gpu/check_host_clock.py: devices without CUPTI, the agent's host-time
#               samples true against CUPTI inside the window, the host-only refit within
#               bounds, and the start/stop callback lags (which bracket side is tight)
#   clockshift  issue 4: tests/clock/gpu_clockshift.sh (rank 1 in a time namespace, the shift
#               recovered from the clock fit within 5 us, causality counts before/after)
# To add a stage: write a function stage_<name> below; it may use $BUILD, $WORK, $OUT,
# the MPIRUN array, $PY, and the helper `run_logged NAME TIMEOUT_S CMD...`.
#
# Options (before the stages): --src DIR builds the sources in DIR instead of the repository
# root (e.g. a clean `git archive` snapshot carried beside the half-written working tree),
# --no-unit-tests skips the CTest run.
# Environment: OUT, WORK (logs, default /tmp/meridian-gpu), BUILD (default $SRC/build-gpu),
# NINJA_JOBS and CTEST_JOBS (to run it by hand on a small machine).
# Output: $OUT/summary.txt (host facts, every command with exit status and time, and the
# key lines of each log), $OUT/logs.tar.gz (full logs), plus what stages add (at most 8
# files in $OUT: the device tool's limit). Without $OUT (by hand), ./out/ is used.
# Time: setup ~1-2 min, workloads ~2 min; each command is bounded with `timeout`.
# NVLink multicast stays off everywhere (NCCL_NVLS_ENABLE=0, passed through mpirun -x).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$ROOT
UNIT_TESTS=1
while [ $# -gt 0 ]; do
    case "$1" in
    --src) SRC=$(cd "$2" && pwd); shift 2 ;;
    --no-unit-tests) UNIT_TESTS=0; shift ;;
    *) break ;;
    esac
done
STAGES=("$@")
OUT=${OUT:-$ROOT/out}
WORK=${WORK:-/tmp/meridian-gpu}
BUILD=${BUILD:-$SRC/build-gpu}
DEPS=$ROOT/.deps
STATE=${STATE:-$ROOT/build-gpu-state}  # survives between calls on one warm machine
mkdir -p "$OUT" "$WORK/logs"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH
PY=$(command -v python3 || echo python3)
MPIRUN=(mpirun --allow-run-as-root -np 2 --bind-to none
        --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none
        -x NCCL_NVLS_ENABLE=0 -x TORCH_SYMM_MEM_DISABLE_MULTICAST=1 -x NVSHMEM_DISABLE_NVLS=1
        -x PATH)
[ -n "${LD_LIBRARY_PATH:-}" ] && MPIRUN+=(-x LD_LIBRARY_PATH)
FAILED=()
CONFIGURE_EXTRA=() # setup fills it: what configure_tree adds for this host

say() { echo "[$(date +%T)] $*" | tee -a "$SUMMARY"; }

# run_logged NAME TIMEOUT_S CMD...: run CMD bounded by TIMEOUT_S into $WORK/logs/NAME.log;
# record status and time, and copy the log's key lines (our tools' prefixed lines, errors)
# to the summary. Returns CMD's status.
run_logged() {
    local name=$1 limit=$2 t0 rc
    shift 2
    t0=$(date +%s%N)
    timeout --kill-after=10 "$limit" "$@" >"$WORK/logs/$name.log" 2>&1
    rc=$?
    say "$name: rc=$rc wall_ms=$((($(date +%s%N) - t0) / 1000000)) cmd: $*"
    grep -E '(ref_workload|kernel_storm|ddp_train|bare_consumer|meridian|check_capture|overhead)[a-z_]*: ' \
        "$WORK/logs/$name.log" | grep -v ' step [0-9]* ms=' | sed 's/^/    /' | head -60 >>"$SUMMARY"
    if [ $rc -ne 0 ]; then
        FAILED+=("$name")
        grep -iE 'error|fatal|fail|abort|what\(\)|Traceback' "$WORK/logs/$name.log" | head -15 |
            sed 's/^/    ! /' >>"$SUMMARY"
    fi
    return $rc
}

host_facts() {
    {
        echo "== host"
        uname -a
        grep PRETTY_NAME /etc/os-release
        ldd --version | head -1
        nproc
        echo "boot id $(cut -c1-8 /proc/sys/kernel/random/boot_id) (overhead.py's machine column)"
        lscpu | grep -E '^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\))' || true
        nvidia-smi -L
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
        nvidia-smi topo -m
        nvcc --version | tail -2
        cmake --version | head -1
        ninja --version
        mpirun --version | head -1
        ldconfig -p | grep -E 'libnccl|libcupti|libsqlite3|libprotobuf-c|libzstd|libsodium' || true
        ls /usr/include/nccl.h /usr/local/cuda/include/nccl.h 2>&1
        command -v protoc-c sqlite3 || true
        "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())'
    } >"$WORK/logs/host.log" 2>&1
    sed 's/^/    /' "$WORK/logs/host.log" >>"$SUMMARY"
}

stage_setup() {
    say "setup: src=$SRC build=$BUILD"
    host_facts
    rm -rf "$DEPS/root"
    mkdir -p "$DEPS/root"
    for deb in "$DEPS"/debs/*.deb; do
        dpkg -x "$deb" "$DEPS/root" || say "setup: dpkg -x $deb failed"
    done
    if [ ! -f /usr/local/cuda/include/nccl.h ] && [ ! -f /usr/include/nccl.h ] &&
        [ -f "$DEPS/extra/include/nccl.h" ]; then
        cp "$DEPS/extra/include/nccl.h" "$DEPS/root/usr/include/"
        say "setup: host has no nccl.h: using the carried one"
    fi
    if [ ! -d /usr/local/cuda/include/nvtx3 ] && [ -d "$DEPS/extra/include/nvtx3" ]; then
        cp -r "$DEPS/extra/include/nvtx3" "$DEPS/root/usr/include/"
        say "setup: host has no nvtx3 headers: using the carried ones"
    fi
    local extra=()
    if ! ldconfig -p | grep -q 'libnccl.so.2 '; then # no system NCCL: take PyTorch's
        local nccl_dir
        nccl_dir=$("$PY" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
        [ -f "$nccl_dir/libnccl.so.2" ] && extra+=(-DMRD_NCCL_LIB="$nccl_dir/libnccl.so.2")
        say "setup: no system libnccl.so.2; using ${nccl_dir:-none}"
    fi
    CONFIGURE_EXTRA=("${extra[@]}")
    configure_tree configure "$SRC" "$BUILD" || return 1
    run_logged build 300 ninja -C "$BUILD" -k 0 ${NINJA_JOBS:+-j "$NINJA_JOBS"}
    # What did not build, by target (others' folders may be half-written).
    grep -E '^FAILED: ' "$WORK/logs/build.log" | head -20 | sed 's/^/    /' >>"$SUMMARY"
    {
        echo "== built executables and shared libraries"
        find "$BUILD" -type f \( -perm -u+x -o -name '*.so' \) ! -path '*/CMakeFiles/*' | sort
        echo "== carried libraries actually loaded (want .deps/root for protobuf-c/sqlite3/zstd)"
        for b in $(find "$BUILD" -type f -perm -u+x ! -path '*/CMakeFiles/*' | head -40); do
            ldd "$b" 2>/dev/null | grep -E 'protobuf-c|sqlite3|zstd|sodium|not found' | sed "s|^|$(basename "$b"): |"
        done | sort -u
        echo "== carried sqlite3 shell"
        LD_LIBRARY_PATH="$DEPS/root/usr/lib/x86_64-linux-gnu:$DEPS/root/lib/x86_64-linux-gnu" \
            "$DEPS/root/usr/bin/sqlite3" --version
    } >"$WORK/logs/libs.log" 2>&1
    sed 's/^/    /' "$WORK/logs/libs.log" >>"$SUMMARY"
    if [ $UNIT_TESTS = 1 ]; then
        run_logged unit_tests 90 ctest --test-dir "$BUILD" -j "${CTEST_JOBS:-16}" --timeout 40 -LE '^gpu$'
        grep -E 'tests passed|Failed|Not Run|Timeout' "$WORK/logs/unit_tests.log" | head -30 |
            sed 's/^/    /' >>"$SUMMARY"
    fi
    return 0
}

# configure_tree NAME SRC BUILD: cmake for this host (the carried libraries, the
# pregenerated protocol code, NCCL as setup found it).
configure_tree() {
    run_logged "$1" 180 cmake -S "$2" -B "$3" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DMRD_DEPS_PREFIX="$DEPS/root" -DMRD_PREGENERATED_PROTO="$DEPS/pb" \
        -DMRD_CUDA_ROOT=/usr/local/cuda -DCMAKE_CUDA_ARCHITECTURES=90 "${CONFIGURE_EXTRA[@]}"
}

stage_workloads() {
    local ref=$BUILD/tests/workloads/ref_workload storm=$BUILD/tests/workloads/kernel_storm
    local bare=$BUILD/tests/gpu/libbare_consumer.so ddp=$ROOT/tests/workloads/ddp_train.py
    local torchenv=(-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29531 -x PYTHONUNBUFFERED=1)
    say "workloads: ref=$ref bare=$bare"
    if [ -x "$ref" ]; then
        run_logged ref_plain 120 "${MPIRUN[@]}" "$ref" --steps 100 --warmup 10
        run_logged ref_straggler 120 "${MPIRUN[@]}" "$ref" --steps 50 --warmup 5 \
            --slow-rank 1 --slow-us 1000 --slow-steps every:10
        [ -f "$bare" ] && run_logged ref_bare 120 "${MPIRUN[@]}" \
            -x CUDA_INJECTION64_PATH="$bare" "$ref" --steps 100 --warmup 10
    else
        say "workloads: ref_workload not built"; FAILED+=(ref_workload_missing)
    fi
    if [ -x "$storm" ]; then
        run_logged storm_plain 60 "$storm" --launches 200000
        [ -f "$bare" ] && run_logged storm_bare 60 env CUDA_INJECTION64_PATH="$bare" \
            "$storm" --launches 200000
    else
        say "workloads: kernel_storm not built"; FAILED+=(kernel_storm_missing)
    fi
    run_logged ddp_compute_heavy 150 "${MPIRUN[@]}" "${torchenv[@]}" "$PY" "$ddp" \
        --mode compute-heavy --steps 30 --warmup 5 --count-kernels
    run_logged ddp_kernel_dense 150 "${MPIRUN[@]}" "${torchenv[@]}" "$PY" "$ddp" \
        --mode kernel-dense --steps 50 --warmup 10 --count-kernels
    [ -f "$bare" ] && run_logged ddp_kernel_dense_bare 150 "${MPIRUN[@]}" "${torchenv[@]}" \
        -x CUDA_INJECTION64_PATH="$bare" "$PY" "$ddp" --mode kernel-dense --steps 50 --warmup 10
    return 0
}

# Finds the built meridian CLI and agent library (their folders are others' to choose).
find_meridian() {
    MERIDIAN=$(find "$BUILD" -type f -name meridian -perm -u+x ! -path '*/CMakeFiles/*' | head -1)
    AGENT_LIB=$(find "$BUILD" -type f -name 'libmeridian.so' ! -path '*/CMakeFiles/*' | head -1)
    [ -n "$MERIDIAN" ] && [ -n "$AGENT_LIB" ]
}

# Expected NCCL collectives per rank, from the workload's own lines
# ("ref_workload: rank 0 nccl_collectives=110", ddp_train.py's the same): "0:110,1:110".
expected_colls() {
    grep -oE '(ref_workload|ddp_train): rank [0-9]+ nccl_collectives=[0-9]+' "$1" |
        awk '{split($4,a,"="); printf "%s%s:%s", (n++?",":""), $3, a[2]}'
}

# expect_colls_from LOGNAME: sets EXPECT_COLLS from $WORK/logs/LOGNAME.log; a workload that
# printed no count is a failure of its own (the check would otherwise fall back to "more
# than 0"). Called directly, not in $(...), so that FAILED keeps the failure.
expect_colls_from() {
    EXPECT_COLLS=$(expected_colls "$WORK/logs/$1.log")
    [ -n "$EXPECT_COLLS" ] ||
        { say "$1: the workload printed no nccl_collectives count"; FAILED+=("$1_count"); }
}

stage_capture() {
    local ref=$BUILD/tests/workloads/ref_workload ddp=$ROOT/tests/workloads/ddp_train.py db
    if ! find_meridian; then
        say "capture: SKIPPED: meridian CLI or libmeridian.so not built"
        FAILED+=(capture_skipped)
        return 0
    fi
    say "capture: meridian=$MERIDIAN agent=$AGENT_LIB"
    db=$WORK/ref.db
    rm -f "$db"*
    rm -f "$WORK"/ref-rank*.mrdcap
    run_logged capture_ref 180 env MERIDIAN_RECORD_FILE="$WORK/ref-rank%r.mrdcap" \
        "$MERIDIAN" profile -o "$db" --agent-lib "$AGENT_LIB" -- \
        "${MPIRUN[@]}" "$ref" --steps 50 --warmup 5 --slow-rank 1 --slow-us 500 \
        --slow-steps every:10
    expect_colls_from capture_ref
    run_logged check_ref 60 "$PY" "$ROOT/tests/gpu/check_capture.py" --db "$db" --world 2 \
        --expect-colls "$EXPECT_COLLS" --nvtx-prefix "step "
    [ -f "$db" ] && gzip -c "$db" >"$OUT/ref_capture.db.gz"
    # the agents' own record of what they sent: the fixture CI replays (tests/data/)
    for f in "$WORK"/ref-rank*.mrdcap; do [ -f "$f" ] && cp "$f" "$OUT/"; done
    db=$WORK/ddp.db
    rm -f "$db"*
    run_logged capture_ddp 240 "$MERIDIAN" profile -o "$db" --agent-lib "$AGENT_LIB" -- \
        "${MPIRUN[@]}" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29532 "$PY" "$ddp" \
        --mode kernel-dense --steps 20 --warmup 5 --count-collectives
    expect_colls_from capture_ddp
    run_logged check_ddp 60 "$PY" "$ROOT/tests/gpu/check_capture.py" --db "$db" --world 2 \
        --expect-colls "$EXPECT_COLLS" --nvtx-prefix "step "
    [ -f "$db" ] && gzip -c "$db" >"$OUT/ddp_capture.db.gz"
    return 0
}

# Diagnostics for a Python rank that produced no data: what the agent sees inside torch.
stage_diag() {
    find_meridian || { say "diag: meridian not built"; return 0; }
    local py1='import torch; x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize(); print("diag: torch ok", float(x.sum()))'
    run_logged diag_single 120 env LD_DEBUG=files LD_DEBUG_OUTPUT="$WORK/logs/lddebug" \
        "$MERIDIAN" profile --single -o "$WORK/diag1.db" --agent-lib "$AGENT_LIB" -- "$PY" -c "$py1"
    grep -h -E 'meridian|cupti' "$WORK"/logs/lddebug* 2>/dev/null | grep -E 'calling init|file=' |
        head -20 | sed 's/^/    /' >>"$SUMMARY"
    run_logged diag_env 60 "$MERIDIAN" profile -o "$WORK/diag2.db" --agent-lib "$AGENT_LIB" -- \
        "${MPIRUN[@]}" sh -c 'env | grep -E "^(CUDA_INJ|NCCL_PROF|NVTX_INJ|MERIDIAN_AGG|MERIDIAN_RUN|LD_PRELOAD|OMPI_COMM_WORLD_RANK)" | sort'
    run_logged diag_ddp_nompi 180 "$MERIDIAN" profile --no-mpi-wrappers -o "$WORK/diag3.db" \
        --agent-lib "$AGENT_LIB" -- "${MPIRUN[@]}" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29533 \
        "$PY" "$ROOT/tests/workloads/ddp_train.py" --mode kernel-dense --steps 5 --warmup 2
    return 0
}

stage_overhead() {
    local h=$ROOT/tests/bench/overhead/run_overhead.sh
    if [ ! -f "$h" ]; then
        say "overhead: SKIPPED: $h missing"
        return 0
    fi
    find_meridian || say "overhead: meridian not built: its variants are skipped"
    # Two alternating runs in one call: the quick workloads (storm, ref: ~14 s a round) get
    # their 10 rounds first, then the DDP workloads (50-62 s a round: process start-up
    # dominates) get the rest of the budget. OVERHEAD_WORKLOADS picks one group only.
    # Each run keeps its rows in $STATE/<group> (outside $OUT, which each device call
    # empties, and outside the carried snapshot): OVERHEAD_RESUME=1 continues that run on
    # the same warm machine in a second call (overhead.py refuses another machine's rows);
    # otherwise a run starts afresh. The results are copied to $OUT/<group>.
    local group budget state resume=()
    [ "${OVERHEAD_RESUME:-0}" = 1 ] && resume=(--resume)
    for group in ${OVERHEAD_WORKLOADS:-storm,ref ddp}; do
        budget=${BUDGET_S:-400}
        [ "$group" = "storm,ref" ] && budget=${BUDGET_QUICK_S:-150}
        state=$STATE/${group/,/_}
        [ ${#resume[@]} -eq 0 ] && rm -rf "$state"
        mkdir -p "$state" "$OUT/${group/,/_}"
        # overhead.py stops every run at its budget: 60 s is for the report and teardown
        run_logged "overhead_${group/,/_}" $((budget + 60)) env BUILD="$BUILD" WORK="$WORK" \
            OUT="$state" MERIDIAN="${MERIDIAN:-}" AGENT_LIB="${AGENT_LIB:-}" PAIRS="${PAIRS:-10}" \
            BUDGET_S="$budget" OVERHEAD_ARGS="--src $ROOT --python $PY --workloads $group ${resume[*]}" \
            bash "$h"
        cp "$state"/overhead.* "$OUT/${group/,/_}/" 2>/dev/null
        [ -f "$state/overhead.md" ] && sed 's/^/    /' "$state/overhead.md" >>"$SUMMARY"
    done
    return 0
}

# Diagnostic for workload (a): which agent mechanism costs the storm (storm_variants.py).
stage_stormdiag() {
    find_meridian || { say "stormdiag: SKIPPED: meridian not built"; FAILED+=(stormdiag_skipped); return 0; }
    local budget=${STORMDIAG_BUDGET_S:-$((${STORMDIAG_ROUNDS:-8} * 30))}
    run_logged stormdiag "$((budget + 60))" "$PY" \
        "$ROOT/tests/bench/overhead/storm_variants.py" --storm "$BUILD/tests/workloads/kernel_storm" \
        --bare "$BUILD/tests/gpu/libbare_consumer.so" --meridian "$MERIDIAN" \
        --agent-lib "$AGENT_LIB" --rounds "${STORMDIAG_ROUNDS:-8}" --work "$WORK" \
        --budget-s "$budget" --out "$OUT/stormdiag" \
        ${STORMDIAG_VARIANTS:+--variants "$STORMDIAG_VARIANTS"}
    grep -E '^(\||storm_variants: rounds)' "$WORK/logs/stormdiag.log" | sed 's/^/    /' >>"$SUMMARY"
    return 0
}

stage_quickstart() {
    run_logged quickstart 180 env MRD_BUILD_DIR="$BUILD" bash "$SRC/deploy/quickstart.sh" \
        --skip-build --out "$WORK/quickstart"
    # on this host it must take the GPU path, not fall back to the recorded replay
    grep -q 'GPU(s): profiling the reference workload' "$WORK/logs/quickstart.log" ||
        { say "quickstart: did not take the GPU path"; FAILED+=(quickstart_gpu_path); }
    grep -E '^(quickstart|meridian):|straggler|rank' "$WORK/logs/quickstart.log" | head -60 |
        sed 's/^/    /' >>"$SUMMARY"
    [ -f "$WORK/quickstart/quickstart.db" ] &&
        gzip -c "$WORK/quickstart/quickstart.db" >"$OUT/quickstart.db.gz"
    return 0
}

stage_clockshift() {
    # issue 4 on real GPUs: tests/clock/gpu_clockshift.sh runs the reference workload with
    # rank 1 in a time namespace; the shift must come back out of the clock fit within 5 us,
    # and causality violations must be zero after tightening.
    find_meridian || { say "clockshift: SKIPPED: meridian not built"; FAILED+=(clockshift_skipped); return 0; }
    local fin
    fin=$(find "$BUILD" -type f -perm -u+x -name clock_finalize | head -1)
    run_logged clockshift 240 env MERIDIAN="$MERIDIAN" AGENT_LIB="$AGENT_LIB" \
        REF="$BUILD/tests/workloads/ref_workload" FINALIZE="$fin" WORK="$WORK" PY="$PY" \
        SHIFT_S="${SHIFT_S:-5000}" bash "$ROOT/tests/clock/gpu_clockshift.sh" -- "${MPIRUN[@]}"
    [ -f "$WORK/clockshift.db" ] && gzip -c "$WORK/clockshift.db" >"$OUT/clockshift.db.gz"
    return 0
}

stage_windows() {
    # issue 9 on one GPU: the steady tier's windows capture exactly their steps' kernels
    # (kernel_storm --steps: K launches a step, each step an NVTX range ending in a sync),
    # CUPTI re-attaches after a detach, and a steady-tier PyTorch run (gpt2 + kernel-dense,
    # two windows each) completes with its window records.
    find_meridian || { say "windows: SKIPPED: meridian not built"; FAILED+=(windows_skipped); return 0; }
    local db=$WORK/windows.db storm=$BUILD/tests/workloads/kernel_storm
    rm -f "$db"*
    run_logged windows_storm 120 env MERIDIAN_TRACE=steady MERIDIAN_WINDOWS=5-9,20-24,40 \
        MERIDIAN_PRINT_KINDS=1 "$MERIDIAN" profile --single -o "$db" --agent-lib "$AGENT_LIB" \
        -- "$storm" --steps 50 --launches 50000 --warmup 1000
    run_logged check_windows 60 "$PY" "$ROOT/tests/gpu/check_windows.py" --db "$db" \
        --windows 5-9,20-24,40-40 --per-step 1000
    [ -f "$db" ] && gzip -c "$db" >"$OUT/windows_storm.db.gz"
    db=$WORK/windows_py.db
    rm -f "$db"*
    run_logged windows_py 240 env MERIDIAN_TRACE=steady MERIDIAN_WINDOWS=10/40@5 \
        "$MERIDIAN" profile --single -o "$db" --agent-lib "$AGENT_LIB" -- "$PY" \
        "$ROOT/tests/workloads/ddp_train.py" --mode gpt2,kernel-dense --steps 60 --warmup 5
    [ -f "$db" ] && "$PY" - "$db" <<'PYEOF' | tee -a "$SUMMARY"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
# the agent's typed window records (kind `window`); agents before that kind wrote NVTX rows
w = []
if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'window_records'").fetchone():
    w = db.execute("SELECT w.first_step || '-' || w.last_step || ' ' || s.value || ' a=' || "
                   "(w.attach_ns / 1000) || ' d=' || (w.detach_ns / 1000) FROM window_records w "
                   "JOIN strings s ON s.id = w.reason_id ORDER BY w.start_ns").fetchall()
w += db.execute("SELECT s.value FROM nvtx n JOIN strings d ON d.id = n.domain_id JOIN strings s "
                "ON s.id = n.name_id WHERE d.value = 'meridian.window' ORDER BY n.start_ns").fetchall()
print("    windows_py: window records", [x[0] for x in w])
print("    windows_py: kernels", db.execute("SELECT COUNT(*) FROM kernels").fetchone()[0])
print("    windows_py: counters", db.execute("SELECT category, name, value FROM agent_counters "
      "WHERE category IN ('window', 'cupti')").fetchall())
if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'gpu_samples'").fetchone():
    print("    windows_py: gpu_samples (NVML)", db.execute(
        "SELECT COUNT(*), MIN(sm_clock_mhz), MAX(sm_clock_mhz), MAX(power_mw), MAX(temperature_c)"
        " FROM gpu_samples").fetchone())
PYEOF
    return 0
}

# A resumable benchmark's results CSV: the carried tiers-state/NAME is copied into $OUT and
# the benchmark appends there (it flushes every row), so a call that the device's limit
# kills still returns its finished rows (session 18's call 3 lost five processes' rows when
# the CSV reached $OUT only after the benchmark ended). Says how many rows it carried: the
# device starts bare, so a resume continues from what this call carried, not from what the
# last call returned (copy that into tiers-state/ first; session 16's third call re-ran
# the second's rounds on a stale copy). Prints the path to give as --csv.
resume_csv() {
    local name=$1 rows=0
    if [ -f "$ROOT/tiers-state/$name" ]; then
        cp "$ROOT/tiers-state/$name" "$OUT/$name"
        rows=$(($(wc -l <"$OUT/$name") - 1))
    fi
    say "$name: $rows result row(s) carried in tiers-state/; resuming after them" >&2
    printf '%s\n' "$OUT/$name"
}

stage_tiers() {
    # the always-on benchmark (tests/bench/overhead/tiers.py); TIERS_ARGS adds options
    # (e.g. --workloads py --variants plain,steady); its CSV continues in $ROOT/tiers-state/
    # when carried back (--resume).
    find_meridian || { say "tiers: SKIPPED: meridian not built"; FAILED+=(tiers_skipped); return 0; }
    local csv
    csv=$(resume_csv "${TIERS_CSV:-tiers.csv}")
    # shellcheck disable=SC2086 # TIERS_ARGS is a list of options
    run_logged tiers "${TIERS_TIMEOUT_S:-560}" env PYTHONUNBUFFERED=1 "$PY" \
        "$ROOT/tests/bench/overhead/tiers.py" --build "$BUILD" --meridian "$MERIDIAN" \
        --agent-lib "$AGENT_LIB" --csv "$csv" --resume ${TIERS_ARGS:-}
    grep -E '^(tiers:|  )' "$WORK/logs/tiers.log" | tail -40 >>"$SUMMARY"
    cp "$WORK/logs/tiers.log" "$OUT/" 2>/dev/null
    return 0
}

stage_inproc() {
    find_meridian || { say "inproc: SKIPPED: meridian not built"; FAILED+=(inproc_skipped); return 0; }
    local before=()
    if [ -n "${INPROC_BEFORE_SRC:-}" ]; then # an earlier agent, for the variant `before`
        local bb=$WORK/build-before lib=""
        rm -rf "$bb" # never a library left from an earlier call's tree
        if configure_tree configure_before "$INPROC_BEFORE_SRC" "$bb" &&
            run_logged build_before 240 ninja -C "$bb" meridian_agent; then
            lib=$(find "$bb" -type f -name 'libmeridian.so' ! -path '*/CMakeFiles/*' | head -1)
        fi
        if [ -n "$lib" ]; then before=(--before-lib "$lib"); else
            say "inproc: the earlier agent ($INPROC_BEFORE_SRC) did not build"
            FAILED+=(inproc_before_build)
        fi
    fi
    local csv
    csv=$(resume_csv "${INPROC_CSV:-inproc.csv}")
    # shellcheck disable=SC2086 # INPROC_ARGS is a list of options
    run_logged inproc "${INPROC_TIMEOUT_S:-560}" env PYTHONUNBUFFERED=1 "$PY" \
        "$ROOT/tests/bench/overhead/inproc.py" --build "$BUILD" --meridian "$MERIDIAN" \
        --agent-lib "$AGENT_LIB" --csv "$csv" --resume \
        --steps-csv "$OUT/inproc_steps.csv" "${before[@]}" ${INPROC_ARGS:-}
    grep -E '^(inproc:|  )' "$WORK/logs/inproc.log" | tail -90 >>"$SUMMARY"
    cp "$WORK/logs/inproc.log" "$OUT/" 2>/dev/null
    return 0
}

stage_sampler() {
    local ab=$BUILD/tests/workloads/sampler_ab
    [ -x "$ab" ] || { say "sampler: SKIPPED: sampler_ab not built"; FAILED+=(sampler_skipped); return 0; }
    for hz in ${SAMPLER_HZ:-10 100}; do
        # twice the pairs' two phases, and 30 s to start
        run_logged "sampler_${hz}hz" \
            $((${SAMPLER_PAIRS:-40} * 4 * ${SAMPLER_PHASE_MS:-500} / 1000 + 30)) \
            "$ab" --hz "$hz" --pairs "${SAMPLER_PAIRS:-40}" --phase-ms "${SAMPLER_PHASE_MS:-500}"
        grep -E '^sampler_ab:' "$WORK/logs/sampler_${hz}hz.log" | sed 's/^/    /' >>"$SUMMARY"
    done
    return 0
}

stage_extcorr() {
    local ab=$BUILD/tests/workloads/extcorr_ab
    [ -x "$ab" ] || { say "extcorr: SKIPPED: extcorr_ab not built"; FAILED+=(extcorr_skipped); return 0; }
    run_logged extcorr 240 "$ab" --cycles "${EXTCORR_CYCLES:-30}" --launches 20000
    grep -E '^extcorr_ab:' "$WORK/logs/extcorr.log" | sed 's/^/    /' >>"$SUMMARY"
    cp "$WORK/logs/extcorr.log" "$OUT/" 2>/dev/null
    return 0
}

stage_hostclock() {
    find_meridian || { say "hostclock: SKIPPED: meridian not built"; FAILED+=(hostclock_skipped); return 0; }
    local db=$WORK/hostclock.db ref=$BUILD/tests/workloads/ref_workload
    rm -f "$db"*
    run_logged hostclock_ref 180 env MERIDIAN_TRACE=steady MERIDIAN_WINDOWS=20-24 \
        "$MERIDIAN" profile -o "$db" --agent-lib "$AGENT_LIB" -- \
        "${MPIRUN[@]}" -x MERIDIAN_TRACE -x MERIDIAN_WINDOWS "$ref" --steps 50 --warmup 5
    run_logged check_hostclock 360 "$PY" "$ROOT/tests/gpu/check_host_clock.py" --db "$db" \
        --meridian "$MERIDIAN"
    grep -E '^check_host_clock:' "$WORK/logs/check_hostclock.log" >>"$SUMMARY" 2>/dev/null
    [ -f "$db" ] && gzip -c "$db" >"$OUT/hostclock.db.gz"
    return 0
}

say "run_on_gpu_host: stages: setup ${STAGES[*]}"
if stage_setup; then
    for s in "${STAGES[@]}"; do
        if declare -F "stage_$s" >/dev/null; then
            "stage_$s"
        else
            say "unknown stage $s"; FAILED+=("stage_$s")
        fi
    done
else
    say "setup failed: no stage run"
fi
say "run_on_gpu_host: done; failed: ${FAILED[*]:-none}"
tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs 2>/dev/null
[ ${#FAILED[@]} -eq 0 ]
