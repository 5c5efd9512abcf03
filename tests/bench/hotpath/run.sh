#!/bin/sh
# Old/new pairs of the agent's hot path (bench_hotpath.c), alternating in one run.
#
#   tests/bench/hotpath/run.sh OLD_SRC NEW_SRC BUILD [ALTERNATIONS] [RECORDS] [BUFFERS]
#
# SRC: a source tree (the worktree, or `git archive <rev> | tar -x -C DIR`); BUILD: a build
# folder of either (its proto/libmrd_proto.a and generated proto headers; the wire code is
# not what is compared). bench_hotpath.c (this folder's, the same file for both) is
# compiled against each tree's agent sources (capture, ring, base, core, transport) with
# the same flags; then old and new run one after the other, which goes first alternating,
# ALTERNATIONS times (default 5), each over BUFFERS buffers (default 200) of RECORDS kernel
# records (default 8192), 5 repetitions inside, median. Prints every run, the medians over
# the runs (ns per record / per call) and new/old.
#
# MODE=instructions (environment): each run is one repetition under valgrind's callgrind
# (use BUFFERS of 4-8: ~50x slower), and what is compared is the instructions executed per
# record inside the phases (inclusive, CUPTI's and libc's code included): a count that the
# neighbours on a shared machine do not change, unlike time.
set -eu
mode=${MODE:-time}
old_src=$1 new_src=$2 build=$3 alt=${4:-5} records=${5:-8192} buffers=${6:-200}
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_ROOT:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for side in old new; do
    if [ $side = old ]; then src=$old_src; else src=$new_src; fi
    inc=""
    for d in base core ring transport capture; do inc="$inc -I$src/agent/$d"; done
    # shellcheck disable=SC2086
    cc -std=gnu11 -O2 -g -DNDEBUG -D_GNU_SOURCE -DMRD_VERSION=\"bench\" $inc -I"$src/proto" \
        -I"$build/proto" -I"$cuda/include" "$here/bench_hotpath.c" "$src"/agent/base/*.c \
        "$src"/agent/core/*.c "$src"/agent/ring/*.c "$src"/agent/transport/*.c \
        "$src"/agent/capture/*.c "$build/proto/libmrd_proto.a" -L"$cuda/lib64" \
        -Wl,-rpath,"$cuda/lib64" -lcupti -lprotobuf-c -lzstd -lsodium -lpthread -ldl \
        -o "$tmp/bench_$side"
done
i=1
while [ "$i" -le "$alt" ]; do
    if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
    for side in $order; do
        if [ "$mode" = instructions ]; then
            valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$side.$i" \
                "$tmp/bench_$side" "$records" "$buffers" 1 1000 >/dev/null 2>&1
            line=$(callgrind_annotate --inclusive=yes --threshold=100 "$tmp/cg.$side.$i" | python3 -c '
import re, sys
recs, calls = float(sys.argv[1]), 1000.0
ir = {}
for l in sys.stdin:
    m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\S*:(phase_\w+) ", l)
    if m:
        ir[m.group(2)] = int(m.group(1).replace(",", ""))
per = {"bare": recs, "convert": recs, "complete": recs, "drain": recs,
       "request": calls, "clock": calls}
print(" ".join("%s=%.1f" % (k, ir.get("phase_" + k, 0) / n) for k, n in per.items()))
' "$((records * buffers))")
        else
            line=$("$tmp/bench_$side" "$records" "$buffers" 5 | tail -1)
        fi
        echo "run $i $side: $line"
        echo "$side $line" >> "$tmp/results"
    done
    i=$((i + 1))
done
python3 - "$tmp/results" "$mode" <<'PY'
import statistics, sys
r = {"old": {}, "new": {}}
for line in open(sys.argv[1]):
    side, *kv = line.split()
    for p in kv:
        k, v = p.split("=")
        if k != "sink":
            r[side].setdefault(k, []).append(float(v))
unit = "instructions" if sys.argv[2] == "instructions" else "ns"
print("medians over runs (%s per record; request and clock per call)" % unit)
for k in r["old"]:
    o, n = statistics.median(r["old"][k]), statistics.median(r["new"][k])
    print("  %-9s old %9.1f  new %9.1f  new/old %.3f" % (k, o, n, n / o if o else float("nan")))
PY
