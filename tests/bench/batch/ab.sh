#!/bin/sh
# Old/new comparison of the batch builder and cursors (bench_batch.c), alternating in one run.
#
#   tests/bench/batch/ab.sh OLD_SRC OLD_BUILD NEW_SRC NEW_BUILD [ALTERNATIONS] [EVENTS]
#
# SRC: a source tree (e.g. `git archive <rev> | tar -x -C DIR`), BUILD: its build folder
# (libmrd_proto.a, libmrd_replay.a and the generated meridian.pb-c.h). bench_batch.c is
# compiled against each with the same flags, then old and new run one after the other
# (which goes first alternates), ALTERNATIONS times (default 5), each over EVENTS events
# (default 1,000,000, 5 repetitions inside, median; CPU time). Prints every run, the medians over the
# runs, and new/old ratios.
#
# MODE=instructions (environment): each run is one repetition under valgrind's callgrind,
# and what is compared is the instructions executed inside build() and read_all() per event
# (inclusive, library code included): a count the neighbours on a shared machine do not
# change, unlike CPU time. Use fewer EVENTS there (e.g. 200000; callgrind is ~50x slower).
# Printed as events per million instructions, so that new/old >= 1 still means "new is
# not slower".
set -eu
mode=${MODE:-time}
old_src=$1 old_build=$2 new_src=$3 new_build=$4 alt=${5:-5} events=${6:-1000000}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for side in old new; do
    if [ $side = old ]; then src=$old_src build=$old_build; else src=$new_src build=$new_build; fi
    cc -std=gnu11 -O2 -g -DNDEBUG -D_GNU_SOURCE -I"$src/proto" -I"$build/proto" \
        -I"$src/launcher/replay" "$here/bench_batch.c" "$build/launcher/replay/libmrd_replay.a" \
        "$build/proto/libmrd_proto.a" -lprotobuf-c -lzstd -lsodium -lpthread -o "$tmp/bench_$side"
done
i=1
while [ $i -le "$alt" ]; do
    if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
    for side in $order; do
        if [ "$mode" = instructions ]; then
            valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$side.$i" \
                "$tmp/bench_$side" "$events" 1 >/dev/null 2>&1
            line=$(callgrind_annotate --inclusive=yes "$tmp/cg.$side.$i" | python3 -c '
import re, sys
n = float(sys.argv[1])
ir = {}
for l in sys.stdin:
    m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\S*:(build|read_all)(?:\.\S+)? ", l)
    if m:
        ir[m.group(2)] = int(m.group(1).replace(",", ""))
print("build_events_per_mir=%.1f read_events_per_mir=%.1f" % (n * 1e6 / ir["build"], n * 1e6 / ir["read_all"]))
' "$events")
        else
            line=$("$tmp/bench_$side" "$events" 5 | tail -1)
        fi
        echo "run $i $side: $line"
        echo "$side $line" >> "$tmp/results"
    done
    i=$((i + 1))
done
python3 - "$tmp/results" <<'PY'
import statistics, sys
r = {"old": {}, "new": {}}
for line in open(sys.argv[1]):
    side, *kv = line.split()
    for x in kv:
        k, v = x.split("=")
        r[side].setdefault(k, []).append(float(v))
for k in r["old"]:
    o, n = statistics.median(r["old"][k]), statistics.median(r["new"][k])
    print("median %s: old %.1f new %.1f new/old %.3f" % (k, o, n, n / o))
PY
