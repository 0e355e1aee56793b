#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# nfcoll_replay (tools/nfcoll_replay.c):
#  - a written trace (names with spaces, a fused call) replays as the policy
#    says, route = auto as the profile says;
#  - a missing trace, a bad header, a cut or malformed line: file:line, exit 1;
#  - a FIFO, /dev/zero, a directory, a 100 000-byte line, a rank not below
#    comm_size, counts past INT_MAX: refused at once (file:line, exit 1);
#    200 000 distinct ranks in one file replay in linear time;
#  - against real runs on 2 and 3 ranks, under the policy a trace was
#    recorded with, the replay's "routes" are the run's NFCOLL_STATS "routes"
#    key for key (test_shim: pmpi warm-up, binary for big float sums, double
#    and int calls; test_regions: fused buffers with fp32, binary and
#    ternary segments, a layout mismatch; test_shim again under a layout file
#    with route = auto and a profile, and as a calibration run; Fortran
#    REAL sums when mpifort is there; test_health --record, whose
#    stats' "admission" record the replay's gives again); a run
#    replayed under another policy gives that policy's run's routes, and the
#    counters move the expected way; binary with scale_block (a rule's, and
#    NFCOLL_SCALE_BLOCK) counts its block scales in the run and the replay;
#  - --link: bad rates, latencies, bursts, ranks per node and codec
#    shares are usage errors; --codec-share 2 is reported; a call traced by every rank counts once; the bytes between 2
#    nodes of a 16 MiB call per route as computed by hand, binary the
#    fastest; on 2 and 3 pretend nodes the predicted bytes between nodes
#    are the run's NFCOLL_STATS "internode_bytes".
. "${srcdir:-.}/tests/mpi_common.sh"
replay=./tools/nfcoll_replay
pol=$srcdir/tests/policy_shim
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $*"; }
fail() { echo "FAIL - $*"; nf_failed=1; }

# The top-level "routes" object: one route a line in both files.
routes_block() { sed -n '/"routes": {/,/^  }/{p;/^  }/q;}' "$1"; }
# Its routes, one line each, keys sorted (python3 when there is one).
routes() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys
for k, v in json.load(open(sys.argv[1]))["routes"].items():
    print(k, " ".join("%s=%d" % kv for kv in sorted(v.items())))' "$1"
  else # both files write the keys in the same order
    routes_block "$1" | sed -n 's/^ *\("[a-z0-9]*": {.*}\),*$/\1/p'
  fi
}
field() { # field JSON ROUTE KEY
  routes_block "$1" | sed -n "s/^ *\"$2\": {.*\"$3\": \([0-9]*\).*/\1/p"
}
calls_sum() { # all route calls of a JSON file
  echo $(( $(field "$1" pmpi calls) + $(field "$1" fp32 calls) + $(field "$1" binary calls) + \
           $(field "$1" ternary calls) + $(field "$1" bf16 calls) ))
}
top() { # top JSON KEY: a number at the top level of the replay's JSON
  sed -n "s/^  \"$2\": \([0-9]*\),*$/\1/p" "$1"
}

# ---- a written trace: a communicator name and a policy path with spaces,
# a fused call of two segments, an unnamed communicator, a double sum.
t0=$tmp/written.0
cat > "$t0" <<'EOF'
# libnfcoll trace v3
# rank call comm comm_size datatype op bytes route rule where region offset elements ran health
0 0 MPI COMMUNICATOR 3 DUP 2 float sum 4000 fp32 head /a b/x.policy:5 head.weight 0 1000 fp32 -
0 0 MPI COMMUNICATOR 3 DUP 2 float sum 400 binary gaps /a b/x.policy:18 - 1000 100 binary -
0 1 - 2 double sum 80 pmpi default /a b/x.policy:23 - 0 10 pmpi -
0 0 MPI_COMM_WORLD 2 float sum 8 binary gaps /a b/x.policy:18 - 0 2 fp32 -
EOF
js=$tmp/written.json
if $replay --policy "$pol/regions.policy" --json "$t0" > "$js" && [ "$(top "$js" calls)" = 3 ] &&
   [ "$(top "$js" records)" = 4 ] && [ "$(field "$js" fp32 calls)" = 2 ] &&
   [ "$(field "$js" binary calls)" = 1 ] && [ "$(field "$js" pmpi calls)" = 1 ]; then
  ok "a written trace: names with spaces, 3 calls, 4 records, a NaN fallback kept"
else
  fail "a written trace"; cat "$js"
fi

# The text tables are complete: every route has a column in the rule table,
# and a rule's decisions are the sum of its columns (bf16 included).
printf '[policy]\nversion = 1\n\n[rule half]\ndatatype = float\nroute = bf16\n\n[default]\nroute = pmpi\n' \
  > "$tmp/bf16.policy"
if $replay --policy "$tmp/bf16.policy" "$t0" > "$tmp/bf16.out" &&
   awk '$1 == "rule" { for (i = 3; i < NF - 1; i++) col[$i] = i; head = 1; next }
        head && $1 == "half" { s = 0; for (k in col) s += $col[k]
                               ok = ("bf16" in col) && $col["bf16"] == 3 && s == $2 }
        END { exit !ok }' "$tmp/bf16.out" &&
   $replay --policy "$tmp/bf16.policy" --json "$t0" > "$tmp/bf16.json" &&
   [ "$(field "$tmp/bf16.json" bf16 calls)" = 3 ] && [ "$(calls_sum "$tmp/bf16.json")" = 4 ]; then
  ok "text tables: a bf16 column, a rule's decisions add up; calls_sum counts bf16"
else
  fail "text tables with bf16"; cat "$tmp/bf16.out" "$tmp/bf16.json"
fi

# route = auto: each segment takes the profile's route (a region by name, a
# whole buffer as buffer:BYTES), fp32 where the profile has none (a gap).
printf '# libnfcoll profile v1\nhead.weight 1000 10 0.9 0.9 0.3 0.3 binary\nbuffer:8 2 10 0.5 0.9 0.5 0.3 ternary\n' \
  > "$tmp/written.profile"
printf '# libnfcoll profile v1\n' > "$tmp/empty.profile"
printf '[policy]\nversion = 1\nprofile = written.profile\n\n[rule model]\ndatatype = float\nop = sum\nroute = auto\n\n[default]\nroute = pmpi\n' \
  > "$tmp/auto.policy"
js=$tmp/auto.json
if $replay --policy "$tmp/auto.policy" --json "$t0" > "$js" 2> "$tmp/auto.err" &&
   [ "$(field "$js" binary calls)" = 1 ] && [ "$(field "$js" ternary calls)" = 1 ] &&
   [ "$(field "$js" fp32 calls)" = 1 ] && [ "$(field "$js" pmpi calls)" = 1 ]; then
  ok "route = auto with the policy's profile: region binary, gap fp32, buffer:8 ternary"
else
  fail "route = auto with the policy's profile"; cat "$js" "$tmp/auto.err"
fi
if $replay --policy "$tmp/auto.policy" --profile "$tmp/empty.profile" --json "$t0" > "$js" \
     2> "$tmp/auto.err" && [ "$(field "$js" fp32 calls)" = 3 ] && [ "$(field "$js" pmpi calls)" = 1 ]; then
  ok "route = auto, --profile with no entries: every float segment fp32"
else
  fail "route = auto, --profile with no entries"; cat "$js" "$tmp/auto.err"
fi

# ---- errors: file:line on stderr, exit 1, no report.
# Every run of a bad trace under a timeout and, unless sanitizers (which
# map terabytes of shadow) are built in, a 4 GiB address space.
guard=
command -v timeout >/dev/null 2>&1 && guard="timeout 60"
limit=4194304
grep -q __asan_init "$replay" 2>/dev/null && limit=unlimited
bad() { # WHAT WANT(regex on stderr) TRACE...
  what=$1 want=$2; shift 2
  (ulimit -v $limit 2>/dev/null; exec $guard $replay --policy "$pol/regions.policy" "$@") \
    > "$tmp/bad.out" 2> "$tmp/bad.err"
  rc=$?
  if [ $rc = 1 ] && [ ! -s "$tmp/bad.out" ] && grep -q "$want" "$tmp/bad.err"; then
    ok "$what: exit 1, '$(grep "$want" "$tmp/bad.err" | head -1)'"
  else
    fail "$what: exit $rc, stderr:"; cat "$tmp/bad.err" "$tmp/bad.out"
  fi
}
bad "a trace that does not exist" "^$tmp/none: cannot open: No such file" "$tmp/none"
sed '1s/v3/v1/' "$t0" > "$tmp/v1"
bad "a v1 header" "^$tmp/v1:1: trace format v1" "$tmp/v1"
printf 'rank call comm\n' > "$tmp/nohdr"
bad "no header" "^$tmp/nohdr:1: not a libnfcoll trace" "$tmp/nohdr"
: > "$tmp/empty"
bad "an empty file" "^$tmp/empty: empty file" "$tmp/empty"
head -4 "$t0" > "$tmp/cut"; sed -n 5p "$t0" | head -c 40 >> "$tmp/cut"
bad "a line cut off (after a good trace)" "^$tmp/cut:5: truncated line" "$t0" "$tmp/cut"
head -4 "$t0" > "$tmp/short"; sed -n 5p "$t0" | cut -d' ' -f1-9 >> "$tmp/short"
bad "a line with 9 fields" "^$tmp/short:5: 9 fields, expected 15" "$tmp/short"
head -4 "$t0" > "$tmp/route"; sed -n 5p "$t0" | sed 's/ [a-z0-9]* -$/ fp16 -/' >> "$tmp/route"
bad "an unknown route" "^$tmp/route:5: bad ran 'fp16'" "$tmp/route"
head -4 "$t0" > "$tmp/bytes"; sed -n 6p "$t0" | sed 's/ 8 binary/ 9 binary/' >> "$tmp/bytes"
bad "float bytes that are not 4 per element" "^$tmp/bytes:5: bytes 9 is not 4 x elements 2" \
  "$tmp/bytes"

# ---- what the reader takes (issue 18, item 12): regular files only (a
# FIFO blocked the open, /dev/zero grew memory without end: run under a
# timeout and a memory limit, so that a reader that does either fails here
# instead of hanging or exhausting the machine); lines of at most 64 KiB;
# ranks below their comm_size; counts that are MPI counts.
mkfifo "$tmp/fifo"
bad "a FIFO" "^$tmp/fifo: not a regular file (a FIFO)" "$tmp/fifo"
bad "/dev/zero" "^/dev/zero: not a regular file (a character device)" /dev/zero
bad "a directory" "^$tmp: not a regular file (a directory)" "$tmp"
{ head -2 "$t0"; head -c 100000 /dev/zero | tr '\0' x; echo; } > "$tmp/long"
bad "a line of 100000 bytes" "^$tmp/long:3: line longer than 65536 bytes" "$tmp/long"
head -4 "$t0" > "$tmp/rank"; sed -n 6p "$t0" | sed 's/^0 0 MPI_COMM_WORLD 2/2 0 MPI_COMM_WORLD 2/' >> "$tmp/rank"
bad "rank 2 of 2 ranks" "^$tmp/rank:5: rank 2 is not below comm_size 2" "$tmp/rank"
head -4 "$t0" > "$tmp/count"
echo "0 0 MPI_COMM_WORLD 2 float sum 8589934592 binary gaps /a b/x.policy:18 - 0 2147483648 binary -" >> "$tmp/count"
bad "2^31 elements" "^$tmp/count:5: offset 0 + elements 2147483648 is more than an MPI count" \
  "$tmp/count"
head -4 "$t0" > "$tmp/offset"
echo "0 0 MPI_COMM_WORLD 2 float sum 4000 binary gaps /a b/x.policy:18 - 2147483000 1000 binary -" >> "$tmp/offset"
bad "a segment ending past 2^31 - 1" "^$tmp/offset:5: offset 2147483000 + elements 1000 is more" \
  "$tmp/offset"
# Time linear in the distinct ranks of one file: 200 000 ranks took 39 s
# (0.77 s at 40 000 in the report; 1.6 s here), now well under a second.
n=200000
awk -v n=$n 'BEGIN { print "# libnfcoll trace v3"
  for (i = 0; i < n; i++)
    printf "%d 0 MPI_COMM_WORLD %d float sum 8 binary big /p.policy:5 - 0 2 binary -\n", i, n }' \
  > "$tmp/ranks"
t_start=$(date +%s%N)
$guard $replay --policy "$pol/regions.policy" --json "$tmp/ranks" > "$tmp/ranks.json" 2> "$tmp/ranks.err"
rc=$?
ms=$(( ($(date +%s%N) - t_start) / 1000000 ))
if [ $rc = 0 ] && [ "$(top "$tmp/ranks.json" ranks)" = $n ] && [ $ms -lt 10000 ]; then
  ok "$n distinct ranks in one trace: $ms ms"
else
  fail "$n distinct ranks in one trace: exit $rc, $ms ms (want under 10000), ranks '$(top "$tmp/ranks.json" ranks)'"
  cat "$tmp/ranks.err"
fi

if $replay --policy "$tmp/auto.policy" --profile "$tmp/none.profile" "$t0" > "$tmp/bad.out" \
     2> "$tmp/bad.err"; then
  fail "--profile that does not exist: exit 0"
elif grep -q "^$tmp/none.profile: error: " "$tmp/bad.err" && [ ! -s "$tmp/bad.out" ]; then
  ok "--profile that does not exist: exit 1, '$(head -1 "$tmp/bad.err")'"
else
  fail "--profile that does not exist"; cat "$tmp/bad.err"
fi

# ---- --link (issue 28, item 4): predicted times per route under a link.
usage_bad() { # WHAT WANT ARGS...: a usage error, exit 2, nothing on stdout
  what=$1 want=$2; shift 2
  $replay --policy "$pol/regions.policy" "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"
  rc=$?
  if [ $rc = 2 ] && [ ! -s "$tmp/bad.out" ] && grep -q "$want" "$tmp/bad.err"; then
    ok "$what: exit 2, '$(grep "$want" "$tmp/bad.err" | head -1)'"
  else
    fail "$what: exit $rc, stderr:"; cat "$tmp/bad.err" "$tmp/bad.out"
  fi
}
usage_bad "--link 10 (no unit)" "^nfcoll_replay: --link 10: '10': the rate must be a number of at least 1bit" \
  --link 10 "$t0"
usage_bad "--link 0gbit" "^nfcoll_replay: --link 0gbit: '0gbit': the rate must be a number of at least 1bit" \
  --link 0gbit "$t0"
usage_bad "--link 0x10gbit" "^nfcoll_replay: --link 0x10gbit: '0x10gbit': the rate must be" \
  --link 0x10gbit "$t0"
usage_bad "--link 1gbit,5parsecs" "^nfcoll_replay: --link 1gbit,5parsecs: '5parsecs': the latency must be" \
  --link 1gbit,5parsecs "$t0"
usage_bad "--link 1gbit,1ms,big" "^nfcoll_replay: --link 1gbit,1ms,big: 'big': the burst must be a number" \
  --link 1gbit,1ms,big "$t0"
usage_bad "--link 1gbit,1ms,1kb,9" "^nfcoll_replay: --link 1gbit,1ms,1kb,9: '9' after the burst" \
  --link 1gbit,1ms,1kb,9 "$t0"
usage_bad "--link 1gbit," "^nfcoll_replay: --link 1gbit,: nothing after the last comma" \
  --link 1gbit, "$t0"
usage_bad "--ranks-per-node without --link" "^nfcoll_replay: --ranks-per-node applies to --link only" \
  --ranks-per-node 2 "$t0"
usage_bad "--ranks-per-node 0" "^nfcoll_replay: --ranks-per-node 0: want a whole number" \
  --link 1gbit --ranks-per-node 0 "$t0"
usage_bad "--codec-share without --link" "^nfcoll_replay: --codec-share applies to --link only" \
  --codec-share 2 "$t0"
usage_bad "--codec-share 65" "^nfcoll_replay: --codec-share 65: want a whole number from 1 to 64" \
  --link 1gbit --codec-share 65 "$t0"
# Calls of 1 to 16 MiB on 2 ranks, every float sum binary, each traced by
# both ranks (one call each). Between 2 nodes of one rank a 16 MiB call
# sends: binary the 64-byte verdict (a header line; a call too large to
# ride with it sends no area) and 8192 sign lines of 64 bytes, with one
# line more for its scale (it rides with the counts; 524416 bytes), ternary
# twice the sign lines (1048704), fp32 the verdict and
# the floats (16777280), pmpi the ring's 2 (P-1)/P of the call (16777216);
# over 1 Gbit/s binary is the fastest, the time as decided binary's.
{ echo "# libnfcoll trace v3"
  i=0
  for mb in 1 4 16; do
    b=$((mb * 1048576))
    for r in 0 1; do
      echo "$r $i MPI_COMM_WORLD 2 float sum $b binary floats /p.policy:5 - 0 $((b / 4)) binary -"
    done
    i=$((i + 1))
  done; } > "$tmp/sizes.tr"
printf '[policy]\nversion = 1\n\n[rule floats]\ndatatype = float\nop = sum\nroute = binary\n' \
  > "$tmp/binary.policy"
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP - --link's JSON and nfcoll_info -b's: no python3 to read them"
elif $replay --policy "$tmp/binary.policy" --link 1gbit,20us --json "$tmp/sizes.tr" \
     > "$tmp/link.json" 2> "$tmp/link.err" &&
   python3 - "$tmp/link.json" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))["link"]
assert l["bandwidth_bytes_per_s"] == 125e6 and l["latency_s"] == 20e-6, l
assert l["codec_share"] == 1 and l["ranks_per_node"] == 1, l
assert [(c["bytes"], c["calls"], c["records"]) for c in l["calls"]] == \
    [(1 << 20, 1, 2), (1 << 22, 1, 2), (1 << 24, 1, 2)], l["calls"]
for c in l["calls"]:
    assert c["decided_on"] == "binary" and c["seconds"]["decided"] == c["seconds"]["binary"], c
    assert c["internode_bytes"]["decided"] == c["internode_bytes"]["binary"], c
w = l["calls"][-1]["internode_bytes"]
assert (w["binary"], w["ternary"], w["fp32"], w["pmpi"]) == (524416, 1048704, 16777280, 16777216), w
big = l["calls"][-1]["seconds"]
assert big["binary"] < big["ternary"] < big["fp32"] and big["binary"] < big["pmpi"], big
assert 0 < l["beats_from"]["binary"]["fp32"] <= 1 << 20, l["beats_from"]
# fp32 between two one-rank nodes: no copies, its sum streamed with the
# eager messages, so the wire and 9 steps' latency (the verdict and eight
# 2 MiB chunks) plus the last message's share of the sum (copies in and
# out, one after the other, would add milliseconds)
floor = 16777280 / 125e6 + 9 * 20e-6
assert floor <= big["fp32"] < floor + 3e-4, (big["fp32"], floor)
PY
then
  ok "--link 1gbit,20us: one call per size; 16 MiB sends binary 524416, ternary 1048704, fp32 16777280, pmpi 16777216 bytes; binary fastest; fp32 the wire and its latencies"
else
  fail "--link 1gbit,20us on calls of 1-16 MiB"; cat "$tmp/link.err" "$tmp/link.json"
fi
if $replay --policy "$tmp/binary.policy" --link 1gbit,20us,128kb "$tmp/sizes.tr" > "$tmp/link.out" &&
   grep -q "^Predicted time per call (ms) over a link of 1 Gbit/s each way per node, 20 us a step, a token bucket of 128 KiB" "$tmp/link.out" &&
   grep -q "^binary at 2 ranks beats fp32 from " "$tmp/link.out" &&
   [ "$(awk '$1 == 16777216 { print $3, $NF }' "$tmp/link.out")" = "1 binary" ]; then
  ok "--link text: the link, a line per call size, the crossovers"
else
  fail "--link text"; cat "$tmp/link.out"
fi
# The codec timed with two copies at once: the text says so, and the JSON.
if $replay --policy "$tmp/binary.policy" --link 1gbit --codec-share 2 "$tmp/sizes.tr" \
     > "$tmp/share.out" 2>&1 &&
   grep -q "codec rates measured here, 2 at once, the reduce stage at 2 ranks$" "$tmp/share.out"; then
  ok "--codec-share 2: the text says the codec was timed with 2 copies at once"
else
  fail "--codec-share 2, text"; cat "$tmp/share.out"
fi
if ! command -v python3 >/dev/null 2>&1; then
  : # said above
elif $replay --policy "$tmp/binary.policy" --link 1gbit,20us --codec-share 2 --json "$tmp/sizes.tr" \
     > "$tmp/share.json" 2> "$tmp/share.err" &&
   python3 -c 'import json, sys; l = json.load(open(sys.argv[1]))["link"]; assert l["codec_share"] == 2, l' \
     "$tmp/share.json"; then
  ok "--codec-share 2: JSON codec_share 2"
else
  fail "--codec-share 2, JSON"; cat "$tmp/share.err" "$tmp/share.json"
fi
# By default as many copies as ranks share a node: --ranks-per-node 8 on
# calls of 2 ranks is 2 (at most the CPUs this test may use).
if ! command -v python3 >/dev/null 2>&1; then
  : # said above
elif $replay --policy "$tmp/binary.policy" --link 1gbit --ranks-per-node 8 --json "$tmp/sizes.tr" \
     > "$tmp/share8.json" 2> "$tmp/share8.err" &&
   python3 -c 'import json, os, sys; l = json.load(open(sys.argv[1]))["link"]
assert l["codec_share"] == min(2, len(os.sched_getaffinity(0))), l' "$tmp/share8.json"; then
  ok "--ranks-per-node 8 on 2-rank calls: the codec timed with min(2, CPUs) copies"
else
  fail "--ranks-per-node 8: the default codec share"; cat "$tmp/share8.err" "$tmp/share8.json"
fi

# The codec rates --link uses, as nfcoll_info -b prints them.
if ! command -v python3 >/dev/null 2>&1; then
  : # said above
elif ./tools/nfcoll_info -b > "$tmp/info.txt" && grep -q "^  codec rate " "$tmp/info.txt" &&
   ./tools/nfcoll_info -b --json > "$tmp/info.json" && python3 - "$tmp/info.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["build"]["codec"]
assert c["ranks"] == 2 and c["elements"] == [65536, 524288, 4194304], c
for r in ("fp32", "bf16", "binary", "ternary"):
    for st in ("pack", "reduce", "finish"):
        v = c["ns_per_elem"][r][st]
        assert len(v) == 3 and all(x >= 0 for x in v), (r, st, v)
        assert (r == "bf16" and st == "finish") or all(x > 0 for x in v), (r, st, v)
PY
then
  ok "nfcoll_info -b: the codec rate table, and in JSON per route and stage at 3 sizes"
else
  fail "nfcoll_info -b's codec rates"; grep -A8 "codec rate" "$tmp/info.txt"
fi

# ---- real runs
if [ "$MPIEXEC" = no ] || ! command -v "$MPIEXEC" >/dev/null 2>&1; then
  echo "SKIP - real runs: no MPI launcher ('$MPIEXEC': configure found none for $NF_MPI_FAMILY; set MPIEXEC)"
  [ $nf_failed = 0 ] && exit 77
  finish
fi

# record NAME NP POLICY PROG [ARGS]: a run with a trace per rank and stats.
record() {
  name=$1 np=$2 p=$3; shift 3
  sh "$srcdir/tests/mpi_run.sh" "$np" NFCOLL_POLICY="$p" NFCOLL_TRACE="$tmp/$name.tr.%r" \
    NFCOLL_STATS="$tmp/$name.stats.json" "$@" > "$tmp/$name.out" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { fail "$name: the run failed (exit $rc)"; cat "$tmp/$name.out"; return 1; }
}

same_routes() { # NAME NP POLICY
  name=$1 np=$2
  if ! $replay --policy "$3" --json "$tmp/$name".tr.* > "$tmp/$name.replay.json" \
       2> "$tmp/$name.replay.err"; then
    fail "$name: replay failed"; cat "$tmp/$name.replay.err"; return 1
  fi
  routes "$tmp/$name.stats.json" > "$tmp/$name.want"
  routes "$tmp/$name.replay.json" > "$tmp/$name.got"
  ranks=$(top "$tmp/$name.replay.json" ranks)
  if [ -s "$tmp/$name.want" ] && cmp -s "$tmp/$name.want" "$tmp/$name.got" && [ "$ranks" = "$np" ]; then
    ok "$name: replay under the same policy gives the run's routes ($ranks ranks)"
  else
    fail "$name: replay routes differ from NFCOLL_STATS (ranks '$ranks', want $np)"
    diff "$tmp/$name.want" "$tmp/$name.got"
  fi
}

printf '[policy]\nversion = 1\n\n[default]\nroute = fp32\n' > "$tmp/all_fp32.policy"
printf '[policy]\nversion = 1\n\n[default]\nroute = binary\nsegment = buffer\n' \
  > "$tmp/whole_binary.policy"

# Everything fp32: float sums leave pmpi and the low-bit routes for fp32;
# double and int sums cannot take fp32 (pmpi); as many are counted.
all_fp32() { # NAME
  js=$tmp/$1.fp32.json rec=$tmp/$1.stats.json
  $replay --policy "$tmp/all_fp32.policy" --json "$tmp/$1".tr.* > "$js" || { fail "$1: fp32 replay"; return; }
  f0=$(field "$rec" fp32 calls) f1=$(field "$js" fp32 calls)
  lb=$(( $(field "$js" binary calls) + $(field "$js" ternary calls) ))
  if [ "$f1" -gt "$f0" ] && [ "$lb" = 0 ] && [ "$(calls_sum "$rec")" = "$(calls_sum "$js")" ] &&
     [ "$(field "$js" fp32 total_bytes)" -gt "$(field "$rec" fp32 total_bytes)" ]; then
    ok "$1: all fp32: fp32 calls $f0 -> $f1, no low-bit call, as many counted"
  else
    fail "$1: all fp32: fp32 calls $f0 -> '$f1', low-bit '$lb'"; cat "$js"
  fi
}

# segment = buffer: fused calls run whole, one count per call; every float
# sum is binary.
whole_binary() { # NAME
  js=$tmp/$1.whole.json
  $replay --policy "$tmp/whole_binary.policy" --json "$tmp/$1".tr.* > "$js" || { fail "$1: whole replay"; return; }
  calls=$(top "$js" calls)
  if [ "$(calls_sum "$js")" = "$calls" ] && [ "$(field "$js" fp32 calls)" = 0 ] &&
     [ "$(calls_sum "$js")" -lt "$(calls_sum "$tmp/$1.stats.json")" ]; then
    ok "$1: segment = buffer: $calls calls counted once each, none fp32"
  else
    fail "$1: segment = buffer: route calls $(calls_sum "$js"), calls '$calls'"; cat "$js"
  fi
}

# A layout (regions =) cuts test_shim's 1 MiB and 1 KiB float sums, whose
# parts route = auto sends where a profile says (a region by name, a gap as
# buffer:BYTES, fp32 where it has none). Paths are relative to the policy.
printf '1M a 0 100000\n1M b 150000 100000\n1K c 0 100\n' > "$tmp/shim.layout"
printf '# libnfcoll profile v1\na 100000 10 0.9 0.9 0.3 0.3 binary
buffer:200000 50000 10 0.5 0.9 0.5 0.3 ternary\nbuffer:1024 256 10 0.5 0.9 0.5 0.3 binary
c 100 10 0.5 0.9 0.5 0.3 ternary\n' > "$tmp/shim.profile"
printf '[policy]\nversion = 1\nregions = shim.layout\nprofile = shim.profile\n\n[rule warm]
calls = 0-2\nroute = pmpi\n\n[rule model]\ndatatype = float\nop = sum\nroute = auto\n
[default]\nroute = pmpi\n' > "$tmp/layout.policy"
# A calibration run: every float sum fp32, whatever the rules say.
printf '[policy]\nversion = 1\ncalibrate = calibrated.profile\n\n[rule big]\ndatatype = float
op = sum\nbytes = 1M-\nroute = binary\n\n[default]\nroute = pmpi\n' > "$tmp/calibrate.policy"

# The replay of a run under another policy gives that policy's run's routes
# (the calls are the same; nothing here falls back at run time).
what_if() { # NAME_RECORDED NAME_OTHER POLICY_OTHER
  js=$tmp/$1.as.$2.json
  $replay --policy "$3" --json "$tmp/$1".tr.* > "$js" || { fail "$1 as $2: replay failed"; return; }
  routes "$tmp/$2.stats.json" > "$tmp/$2.want"
  routes "$js" > "$tmp/$1.as.$2.got"
  if [ -s "$tmp/$2.want" ] && cmp -s "$tmp/$2.want" "$tmp/$1.as.$2.got"; then
    ok "$1 replayed under $(basename "$3") gives the routes of $2, a run under it"
  else
    fail "$1 replayed under $(basename "$3") differs from $2"; diff "$tmp/$2.want" "$tmp/$1.as.$2.got"
  fi
}

for np in 2 3; do
  nf_tier $np || continue
  record shim.$np $np "$pol/big_binary.policy" ./tests/mpi/test_shim_linked policy &&
    same_routes shim.$np $np "$pol/big_binary.policy" && all_fp32 shim.$np
  record layout.$np $np "$tmp/layout.policy" ./tests/mpi/test_shim_linked policy &&
    same_routes layout.$np $np "$tmp/layout.policy" &&
    what_if shim.$np layout.$np "$tmp/layout.policy"
  record regions.$np $np "$pol/regions.policy" ./tests/mpi/test_regions &&
    same_routes regions.$np $np "$pol/regions.policy" && all_fp32 regions.$np &&
    whole_binary regions.$np
done
# Binary with one scale per block (scale_block, policy version 3): each
# block's scale is counted upstream, and the replay counts them as the run
# did, from the rule's key or, unset, from NFCOLL_SCALE_BLOCK (the replay's
# environment, as the run's).
sed -e 's/^version = 1$/version = 3/' -e 's/^route = binary$/route = binary\nscale_block = 512/' \
  "$pol/big_binary.policy" > "$tmp/block.policy"
if nf_tier 2; then
  record block.2 2 "$tmp/block.policy" ./tests/mpi/test_shim_linked policy &&
    same_routes block.2 2 "$tmp/block.policy" && what_if shim.2 block.2 "$tmp/block.policy"
  b0=$(field "$tmp/shim.2.stats.json" binary upstream_bytes)
  b1=$(field "$tmp/block.2.stats.json" binary upstream_bytes)
  c0=$(field "$tmp/shim.2.stats.json" binary calls)
  c1=$(field "$tmp/block.2.stats.json" binary calls)
  # test_shim's binary calls are 1 MiB: 512 scales of 8 bytes instead of one
  if [ "$c0" = "$c1" ] && [ "$c0" -gt 0 ] && [ "$b1" -eq $((b0 + c0 * 511 * 8)) ]; then
    ok "scale_block = 512: binary upstream $b0 -> $b1 bytes over $c0 calls of 1 MiB (511 more scales each)"
  else
    fail "scale_block = 512: binary upstream $b0 -> '$b1' over $c0/'$c1' calls"
  fi
  record envblock.2 2 "$pol/regions.policy" NFCOLL_SCALE_BLOCK=512 ./tests/mpi/test_regions &&
    NFCOLL_SCALE_BLOCK=512 same_routes envblock.2 2 "$pol/regions.policy"
  if [ -f "$tmp/regions.2.stats.json" ] && [ -f "$tmp/envblock.2.out" ] &&
     grep -q "^PASS" "$tmp/envblock.2.out" &&
     [ "$(field "$tmp/envblock.2.stats.json" binary upstream_bytes)" -gt \
       "$(field "$tmp/regions.2.stats.json" binary upstream_bytes)" ]; then
    ok "NFCOLL_SCALE_BLOCK=512: more binary upstream than one scale per segment"
  else
    fail "NFCOLL_SCALE_BLOCK=512 did not add upstream bytes"
  fi
fi
# The integer routes (policy version 4): int4 with blocks of 64. The run
# counts, per 1 MiB call, 4 bit lines per 512 elements, a 4-byte max per
# block and one double upstream; the replay of the binary run's trace under
# the same policy counts what the run did.
sed -e 's/^version = 1$/version = 4/' -e 's/^route = binary$/route = int4\nblock = 64/' \
  "$pol/big_binary.policy" > "$tmp/int4.policy"
if nf_tier 2; then
  record int4.2 2 "$tmp/int4.policy" ./tests/mpi/test_shim_linked policy &&
    same_routes int4.2 2 "$tmp/int4.policy" && what_if shim.2 int4.2 "$tmp/int4.policy"
  u=$(field "$tmp/int4.2.stats.json" int4 upstream_bytes)
  c=$(field "$tmp/int4.2.stats.json" int4 calls)
  if [ -n "$c" ] && [ "$c" -gt 0 ] && [ "$u" -eq $((c * (4 * 512 * 64 + 4096 * 4 + 8))) ]; then
    ok "int4, block = 64: upstream $u bytes over $c calls of 1 MiB (4.5 bits per element)"
  else
    fail "int4, block = 64: upstream '$u' over '$c' calls"
  fi
fi
# Fortran REAL sums (when configure built the Fortran program).
if [ -x ./tests/mpi/test_fortran_linked ]; then
  record fortran.2 2 "$pol/fortran_real.policy" ./tests/mpi/test_fortran_linked policy mpi &&
    same_routes fortran.2 2 "$pol/fortran_real.policy"
else
  echo "SKIP - Fortran REAL sums: tests/mpi/test_fortran_linked not built (no mpifort)"
fi
record calibrate.2 2 "$tmp/calibrate.policy" ./tests/mpi/test_shim_linked policy &&
  same_routes calibrate.2 2 "$tmp/calibrate.policy" &&
  what_if shim.2 calibrate.2 "$tmp/calibrate.policy"
# The record of why (issue 15 item 4): under the policy and profile a run
# was recorded with (test_health --record: a rule, a profile entry, no
# entry, a stale one; a NaN and a cool-down), the replay's "admission"
# gives each region the run's route, reason, rule, profile entry and
# figures, and its routes are the run's.
same_why() { # NAME
  python3 - "$tmp/$1.stats.json" "$tmp/$1.replay.json" <<'PY'
import json, sys
run, rep = (json.load(open(f))["admission"] for f in sys.argv[1:])
keys = ("route", "by", "rule", "where", "entry", "entry_elements", "cos_binary",
        "cos_ternary", "cos_int4", "admit_cosine", "warmup", "lag_cosine", "ef_decay", "ef_decay_by",
        "scale_block", "scale_block_by")
bad = ["%s %s: run %s, replay %s" % (r, k, run[r].get(k), rep.get(r, {}).get(k))
       for r in run for k in keys if run[r].get(k) != rep.get(r, {}).get(k)]
if bad or set(run) != set(rep) or len(run) != 4:
    sys.exit("; ".join(bad) or "regions %s vs %s" % (sorted(run), sorted(rep)))
PY
}
# --link's bytes between nodes are the run's (issue 28, item 4): 2 and 3
# pretend nodes of one rank (NFCOLL_RANKS_PER_NODE=1), every call that is
# not pmpi (fused fp32, binary and ternary segments; binary whole calls):
# what one node sends for the calls as decided, summed and times the
# nodes, is NFCOLL_STATS's "internode_bytes" (summed over the ranks).
# "sizes" (2 nodes): 1 MiB fp32 calls, then 1 KiB ones, each of whose
# verdicts carries its own call (two nodes exchange it point-to-point,
# each its own area), so all five take one exchange; then 128 KiB calls,
# the most a verdict carries, and 128 KiB + 4 B ones, which it does not.
# same_wire makes it the run's: the library sent these bytes.
# Not modelled (nf_traffic.h): a call whose ranks' layouts differ runs
# fp32 after its verdict, and two one-rank nodes' verdicts each carry the
# rank's own area, which the model, seeing the fp32 call it became, does
# not count: at most a header line and 8 KiB per such call and rank (the
# regions test's mismatched calls have low-bit lines), else exact.
same_wire() { # NAME NODES
  python3 - "$tmp/$1.stats.json" "$tmp/$1.link.json" "$2" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
run = sum(stats["internode_bytes"].values())
calls = json.load(open(sys.argv[2]))["link"]["calls"]
nodes = int(sys.argv[3])
rep = nodes * sum(c["calls"] * c["internode_bytes"]["decided"] for c in calls
                  if c["decided_on"] != "pmpi")
most = stats["fallbacks"]["layout-mismatch"] * (64 + 8192) if nodes == 2 else 0
print(run, rep, "(layout fallbacks: %d, up to %d more)" % (stats["fallbacks"]["layout-mismatch"], most))
sys.exit(run == 0 or not rep <= run <= rep + most)
PY
}
for np in 2 3; do
  nf_tier $np || continue
  for w in "regions $pol/regions.policy ./tests/mpi/test_regions" \
           "shim $pol/big_binary.policy ./tests/mpi/test_shim_linked policy" \
           "sizes $pol/sums_fp32.policy ./tests/mpi/test_shim_linked policy wire"; do
    set -- $w
    kind=$1 name=wire.$1.$np p=$2
    shift 2
    # sizes' 1 MiB fp32 calls split unevenly over 3 nodes (87381 floats,
    # 87381, 87382), which the model, a node's bytes times the nodes,
    # cannot say to the byte
    [ $kind = sizes ] && [ $np = 3 ] && continue
    record $name $np "$p" NFCOLL_RANKS_PER_NODE=1 "$@" || continue
    got=
    if $replay --policy "$p" --link 1gbit -r 1 --json "$tmp/$name".tr.* > "$tmp/$name.link.json" &&
       got=$(same_wire $name $np); then
      ok "$name: --link's bytes between nodes are the run's ($got)"
    else
      fail "$name: --link's bytes between nodes differ from the run's (run, replay: $got)"
    fi
    [ $kind = sizes ] || continue
    if got=$(python3 - "$tmp/$name.link.json" <<'PY'
import json, sys
calls = json.load(open(sys.argv[1]))["link"]["calls"]
got = {c["bytes"]: (c["calls"], c["verdict_area_bytes"], c["internode_bytes"]["decided"])
       for c in calls if c["bytes"] in (1024, 131072, 131076)}
print(sorted(got.items()))
# one line per size (two nodes key by the call's own area): 1 KiB and
# 128 KiB whole with their verdicts, a float more not (a header line, then
# the floats by themselves)
ok = (len([c for c in calls if c["bytes"] in got]) == 3 and
      got.get(1024) == (5, 1024, 64 + 1024) and got.get(131072) == (3, 131072, 64 + 131072) and
      got.get(131076) == (2, 0, 64 + 131076))
sys.exit(not ok)
PY
    ); then
      ok "$name: 5 calls of 1 KiB and 3 of 128 KiB whole with their verdicts, 2 of 128 KiB + 4 B not ($got)"
    else
      fail "$name: want 5 calls of 1 KiB and 3 of 128 KiB whole with their verdicts (a header line and the floats each), 2 of 128 KiB + 4 B after a header line, one line per size (got $got)"
    fi
  done
done
record record.2 2 "$pol/record.policy" ./tests/mpi/test_health --record &&
  same_routes record.2 2 "$pol/record.policy" &&
  if same_why record.2; then
    ok "record.2: the replay's admission record is the run's (4 regions)"
  else
    fail "record.2: the replay's admission record differs from the run's"
  fi
finish
