#!/bin/sh
# Source-level coverage reached by a fuzz corpus: builds a fuzz target's replay driver with
# clang's coverage instrumentation, replays the corpus, and prints llvm-cov's per-file
# report (and, with -v, the per-function one).
# Usage: tests/fuzz/coverage.sh BUILD_DIR [CORPUS_DIR] [-v]
#   BUILD_DIR: any configured meridian build (it holds proto/meridian.pb-c.{c,h}).
#   MRD_FUZZ_TARGET=frame (default): fuzz_frame_batch over tests/fuzz/corpus, report on
#     proto/; MRD_FUZZ_TARGET=agent: fuzz_agent_input over tests/fuzz/corpus_agent, report
#     on the agent's transport files it drives and agent/core/stepctl.c.
# Needs clang, llvm-profdata-14, llvm-cov-14 (Debian: clang, llvm-14), and for the agent
# target libsodium (libsodium-dev).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:?usage: coverage.sh BUILD_DIR [CORPUS_DIR] [-v]}" && pwd)
TARGET=${MRD_FUZZ_TARGET:-frame}
OUT=$(mktemp -d /tmp/mrd-fuzzcov.XXXXXX)
P=$ROOT/proto
A=$ROOT/agent
PROTO_SRCS="$P/error.c $P/frame.c $P/batch.c $P/batch_strings.c $P/batch_read.c"

case $TARGET in
frame)
    CORPUS=${2:-$ROOT/tests/fuzz/corpus}
    SRCS=$PROTO_SRCS
    BUILD_SRCS="$PROTO_SRCS $ROOT/tests/fuzz/fuzz_frame_batch.c"
    INCS=""
    LIBS=""
    ;;
agent)
    CORPUS=${2:-$ROOT/tests/fuzz/corpus_agent}
    T=$A/transport
    SRCS="$T/conn.c $T/datalink.c $T/clocklink.c $T/txqueue.c $T/resplit.c $A/core/stepctl.c"
    # stepctl.c is compiled as part of the target (fuzz_agent_input.c includes it)
    AGENT_SRCS=$(ls "$A"/core/*.c "$A"/ring/*.c "$T"/*.c | grep -v '/stepctl\.c$')
    BUILD_SRCS="$(ls "$P"/*.c) $AGENT_SRCS $ROOT/tests/fuzz/fuzz_agent_input.c"
    INCS="-I$A/core -I$A/ring -I$T"
    LIBS="-lsodium" # proto/auth.c: the handshake's Proof
    ;;
*)
    echo "coverage.sh: MRD_FUZZ_TARGET is frame or agent" >&2
    exit 2
    ;;
esac
VERBOSE=${3:-}

clang -std=gnu11 -O1 -g -fprofile-instr-generate -fcoverage-mapping -D_GNU_SOURCE \
    -I"$P" -I"$BUILD/proto" $INCS $BUILD_SRCS "$BUILD/proto/meridian.pb-c.c" \
    "$ROOT/tests/fuzz/replay_main.c" -lprotobuf-c -lzstd $LIBS -lpthread -o "$OUT/replay_cov"
LLVM_PROFILE_FILE="$OUT/cov.profraw" "$OUT/replay_cov" "$CORPUS"
llvm-profdata-14 merge -sparse "$OUT/cov.profraw" -o "$OUT/cov.profdata"
llvm-cov-14 report "$OUT/replay_cov" -instr-profile="$OUT/cov.profdata" $SRCS
if [ "$VERBOSE" = "-v" ]; then
    llvm-cov-14 report "$OUT/replay_cov" -instr-profile="$OUT/cov.profdata" \
        -show-functions $SRCS
fi
rm -rf "$OUT"
