#!/usr/bin/env bash
# proto_kinds_gen: the kinds table's generator (proto/kinds_gen.c) on its own, against
# outputs written down once and read by a person, not against itself (proto_kinds checks
# the real table's generated macros against the generated protobuf descriptors: both come
# from the generator, so that test alone cannot see a generator that is consistently wrong).
#
#   kinds_gen_test.sh MRD_KINDS_GEN FIXTURE_DIR WORKDIR
#
# - kinds_gen/fixture.table (two kinds: a trailing comment on a kind and on fields, every
#   codec, the GNN and P2PNULL classes, fields listed out of wire order, a kind of protocol
#   version 2) with kinds_gen/fixture.proto (the three markers) must give exactly
#   expected_kinds_table.h and expected.proto: MRD_KINDS and MRD__F_<fn> in table order,
#   Columns fields in wire-number order with the comments aligned, the v2 kind's enum value
#   and Batch field marked as additive;
# - each malformed table or template must fail with exit 1, its `file:line: what` message,
#   and no output file left behind.
set -u
GEN=$1 FIX=$2 WD=$3
rm -rf "$WD" && mkdir -p "$WD" && cd "$WD" || exit 1
fails=0
bad() { echo "proto_kinds_gen: FAIL: $*"; fails=$((fails + 1)); }

"$GEN" "$FIX/fixture.table" "$FIX/fixture.proto" out.h out.proto || bad "the fixture failed"
cmp -s out.h "$FIX/expected_kinds_table.h" || { bad "kinds_table.h differs:"; diff "$FIX/expected_kinds_table.h" out.h; }
cmp -s out.proto "$FIX/expected.proto" || { bad "meridian.proto differs:"; diff "$FIX/expected.proto" out.proto; }

H='fn value struct name batch number message table tag since
    member column class number type wire codec arg pos sep'
K='alpha 1 mrd_alpha alpha alphas 6 AlphaColumns alphas A 1'
F='    device device INT 3 uint32 device PLAIN _ 0 |'
grep -v '@kinds enum' "$FIX/fixture.proto" >nomarker.proto
# expect TABLE_TEXT TEMPLATE MESSAGE
expect() {
    printf '%s\n' "$1" >bad.table
    rm -f o.h o.proto
    "$GEN" bad.table "$2" o.h o.proto 2>err.txt
    local rc=$?
    [ $rc = 1 ] || bad "want exit 1 for '$3', got $rc"
    grep -qxF "$3" err.txt || bad "want '$3', got: $(cat err.txt)"
    if [ -e o.h ] || [ -e o.proto ]; then bad "output left behind after '$3'"; fi
}
P=$FIX/fixture.proto
expect "$H
$K
$F
    start start_ns NN 3 sint64 start DELTA 0 1 |" "$P" "bad.table:5: number '3' is already on line 4"
expect "$H
$K
    device device INT 3 uint32 device ZIP _ 0 |" "$P" "bad.table:4: codec 'ZIP' is none of PLAIN STR DELTA DUR"
expect "$H
$K
    device device BIG 3 uint32 device PLAIN _ 0 |" "$P" "bad.table:4: class 'BIG' is none of INT NN GNN P2PNULL"
expect "$H
$K
    device device INT 3 uint32 device PLAIN _ 0" "$P" "bad.table:4: a field row has 9 cells, not 10"
expect "$H
$F" "$P" "bad.table:3: a field row before any kind row"
expect "$H
$K
    device device INT 3 uint32 device PLAIN _ 1 |" "$P" "bad.table:4: canonical position 1: kind alpha has 1 fields"
expect "$H
alpha 2 mrd_alpha alpha alphas 6 AlphaColumns alphas A 1
$F" "$P" "bad.table:3: kind values run 1, 2, ... in table order: want 1 here"
expect "$H
$K
$F" nomarker.proto "nomarker.proto:13: no // @kinds enum marker"

[ $fails = 0 ] || exit 1
echo "proto_kinds_gen: ok (the fixture's outputs exact; 8 malformed inputs refused with their line)"
