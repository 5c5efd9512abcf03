#!/bin/sh
# Source-level coverage of proto/ reached by a fuzz corpus: builds fuzz_frame_batch's
# replay driver with clang's coverage instrumentation, replays the corpus, and prints
# llvm-cov's per-file report for the proto sources (and, with -v, the per-function one).
# Usage: tests/fuzz/coverage.sh BUILD_DIR [CORPUS_DIR] [-v]
#   BUILD_DIR: any configured meridian build (it holds proto/meridian.pb-c.{c,h}).
# Needs clang, llvm-profdata-14, llvm-cov-14 (Debian: clang, llvm-14).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:?usage: coverage.sh BUILD_DIR [CORPUS_DIR] [-v]}" && pwd)
CORPUS=${2:-$ROOT/tests/fuzz/corpus}
VERBOSE=${3:-}
OUT=$(mktemp -d /tmp/mrd-fuzzcov.XXXXXX)
P=$ROOT/proto
SRCS="$P/error.c $P/frame.c $P/batch.c $P/batch_strings.c $P/batch_read.c"

clang -std=gnu11 -O1 -g -fprofile-instr-generate -fcoverage-mapping -D_GNU_SOURCE \
    -I"$P" -I"$BUILD/proto" $SRCS "$BUILD/proto/meridian.pb-c.c" \
    "$ROOT/tests/fuzz/fuzz_frame_batch.c" "$ROOT/tests/fuzz/replay_main.c" \
    -lprotobuf-c -lzstd -o "$OUT/replay_cov"
LLVM_PROFILE_FILE="$OUT/cov.profraw" "$OUT/replay_cov" "$CORPUS"
llvm-profdata-14 merge -sparse "$OUT/cov.profraw" -o "$OUT/cov.profdata"
llvm-cov-14 report "$OUT/replay_cov" -instr-profile="$OUT/cov.profdata" $SRCS
if [ "$VERBOSE" = "-v" ]; then
    llvm-cov-14 report "$OUT/replay_cov" -instr-profile="$OUT/cov.profdata" \
        -show-functions $SRCS
fi
rm -rf "$OUT"
