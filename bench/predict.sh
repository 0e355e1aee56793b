#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# predict: nfcoll_replay --link's predicted times against measured ones, in
# the same run. For each link rate, 2 pretend hosts x 1 rank (bench/netns.sh,
# Open MPI over TCP), nfcoll_allreduce times every route; the same call sizes,
# written as a trace, are replayed with --link; per size and route it prints
# the measured and predicted ms and their ratio.
#
#   bench/predict.sh [-b RATES] [-m SIZES] [-r ROUTES] [-i ITERS] [-R REPEATS]
#                    [-o OSUDIR] [BUILDDIR]
#
#   -b RATES   space-separated TC[=LINK]: TC shapes the veths as tc's rate
#              ("none": unshaped), LINK is --link's RATE[,LATENCY[,BURST]]
#              (default with -o: what osu_bw measures one way at 4 MiB,
#              the rate the library's eager messages get each way with
#              both ways busy here, the latency osu_latency measures and
#              a shaped link's burst; without -o: TC's rate, 20us and the
#              burst. The burst is NF_NET_BURST or 128kb. "none" needs -o
#              or a LINK). Default "1gbit 10gbit none".
#   -m SIZES   MIN:MAX, powers of two, K/M suffixes (default 1M:16M)
#   -r ROUTES  nfcoll_allreduce -r (default pmpi,fp32,binary,ternary)
#   -i ITERS   timed iterations per size, at least (default 5); -R repeats,
#              median (default 3). Each size runs on its own, after a
#              warm-up that moves four bursts (NF_NET_BURST or 128kb) at
#              binary's 1/32 of the call (4 x 32 x burst / size calls, at
#              least 1: 16 MiB / size with 128kb), and times at least as
#              many: a shaped link's bucket is then as drained as in a
#              loop of such calls, which the model assumes (5 calls of
#              128 KiB binary would all pass in the burst)
#   -o OSUDIR  a built OSU Micro-Benchmarks tree (c/mpi/pt2pt/standard/
#              osu_latency, osu_bw, osu_bibw): the link's latency and rates,
#              measured on the same pretend hosts first
# Needs root, iproute2, tc and python3. docs/design.md, "Predicting a call's
# time"; docs/benchmarks.md has the figures.
rates="1gbit 10gbit none" sizes=1M:16M routes=pmpi,fp32,binary,ternary iters=5 reps=3 osu=
while getopts b:m:r:i:R:o: opt; do
  case $opt in
    b) rates=$OPTARG ;; m) sizes=$OPTARG ;; r) routes=$OPTARG ;; i) iters=$OPTARG ;;
    R) reps=$OPTARG ;; o) osu=$OPTARG ;;
    *) sed -n '3,34s/^# \{0,1\}//p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
b=$(cd "${1:-.}" && pwd)
bench=$b/bench/nfcoll_allreduce replay=$b/tools/nfcoll_replay
[ -x "$bench" ] && [ -x "$replay" ] || { echo "predict: no $bench or $replay (give the build directory)"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "predict: network namespaces need root"; exit 2; }
command -v python3 > /dev/null || { echo "predict: needs python3"; exit 2; }
pt=$osu/c/mpi/pt2pt/standard
[ -z "$osu" ] || [ -x "$pt/osu_bw" ] || { echo "predict: no $pt/osu_bw (build OSU with CC=mpicc)"; exit 2; }
. "$(dirname "$0")/netns.sh"
tmp=$(mktemp -d) || exit 1
trap 'nf_hosts_down; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
# MIN:MAX (or MAX, from 4 bytes) as the powers of two between, in bytes
expand() {
  echo "$1" | awk -F: '
    function b(v) { u = toupper(substr(v, length(v))); n = v + 0
      return u == "K" ? n * 1024 : u == "M" ? n * 1048576 : u == "G" ? n * 1073741824 : n }
    { lo = NF > 1 ? b($1) : 4; hi = b($NF)
      if (lo < 4 || hi < lo) exit 1
      for (s = lo; s <= hi; s *= 2) print s }'
}
# tc's size (128kb, 4mb, 100000, 1mbit) in bytes; empty when it is not one
tc_bytes() {
  echo "$1" | awk '{ v = tolower($0); n = v + 0; u = v; sub(/^[0-9.]+/, "", u); f = 0
    if (u == "" || u == "b") f = 1; else if (u == "k" || u == "kb") f = 1024
    else if (u == "m" || u == "mb") f = 1048576; else if (u == "kbit") f = 128
    else if (u == "g" || u == "gb") f = 1073741824; else if (u == "mbit") f = 131072
    else if (u == "gbit") f = 134217728
    if (n * f >= 1) printf "%.0f\n", n * f }'
}
wburst=$(tc_bytes "${NF_NET_BURST:-128kb}")
[ -n "$wburst" ] || { echo "predict: NF_NET_BURST=$NF_NET_BURST: give a size as tc takes it (128kb)"; exit 2; }
case $iters$reps in *[!0-9]*) echo "predict: -i and -R take whole numbers"; exit 2 ;; esac
[ "$iters" -ge 1 ] && [ "$reps" -ge 1 ] || { echo "predict: -i and -R take whole numbers"; exit 2; }
list=$(expand "$sizes") && [ -n "$list" ] || { echo "predict: -m $sizes: give MIN:MAX in bytes (K, M, G)"; exit 2; }
printf '[policy]\nversion = 1\n\n[rule floats]\ndatatype = float\nop = sum\nroute = binary\n' \
  > "$tmp/binary.policy"

for spec in $rates; do # an unshaped link's rate comes from OSU or the spec
  [ "$spec" != none ] || [ -n "$osu" ] || { echo "predict: an unshaped link needs -o or none=RATE"; exit 2; }
done
for spec in $rates; do
  tc=${spec%%=*} link=
  [ "$tc" != "$spec" ] && link=${spec#*=}
  shape=$tc; [ "$tc" = none ] && shape=""
  nf_hosts_up 2 $shape || { echo "predict: cannot set up the hosts"; exit 1; }
  hl=$(nf_hosts_list 1 1)
  echo "== 2 hosts x 1 rank, links $tc"
  lat=20us bw=
  if [ -n "$osu" ]; then
    l=$(nf_hosts_mpirun "$hl" 2 "$pt/osu_latency" -m 8:8 -i 2000 2>&1 | awk '$1 == 8 { print $2 }')
    w=$(nf_hosts_mpirun "$hl" 2 "$pt/osu_bw" -m 4194304:4194304 2>&1 | awk '$1 == 4194304 { print $2 }')
    bi=$(nf_hosts_mpirun "$hl" 2 "$pt/osu_bibw" -m 4194304:4194304 2>&1 | awk '$1 == 4194304 { print $2 }')
    echo "osu_latency 8 B: $l us; osu_bw 4 MiB: $w MB/s; osu_bibw 4 MiB: $bi MB/s (both ways)"
    [ -n "$l" ] && lat=${l}us
    [ -n "$w" ] && bw=$(awk -v w="$w" 'BEGIN { printf "%.0fmbps", w }')
  fi
  if [ -z "$link" ]; then
    if [ -n "$bw" ]; then # OSU's 4 MiB rate is the bucket's sustained one;
      link=$bw,$lat           # what the bucket lets through at once comes on top
      [ "$tc" = none ] || link=$link,$wburst
    elif [ "$tc" = none ]; then
      echo "predict: osu_bw printed no rate for the unshaped link"; exit 1
    else
      link=$tc,$lat,$wburst
    fi
  fi
  : > "$tmp/run"
  for sz in $list; do # nfcoll_allreduce times ITERS/10 iterations above 64 KiB
    x=$(( (128 * wburst + sz - 1) / sz )); n=$(( x > iters ? x : iters ))
    [ "$sz" -le 65536 ] || n=$((10 * n))
    nf_hosts_mpirun "$hl" 2 "$bench" -r "$routes" -m "$sz:$sz" -i "$n" -x "$x" -R "$reps" \
      >> "$tmp/run" 2>&1 || { cat "$tmp/run"; echo "predict: nfcoll_allreduce failed"; exit 1; }
  done
  nf_hosts_down
  awk -v tsv=1 -f "$(dirname "$0")/ratios.awk" < "$tmp/run" > "$tmp/measured"
  # The same calls as a trace: one float sum per size on 2 ranks.
  awk 'BEGIN { print "# libnfcoll trace v3" }
       !($1 in seen) { seen[$1] = 1
         for (r = 0; r < 2; r++)
           printf "%d %d MPI_COMM_WORLD 2 float sum %d binary floats p:5 - 0 %d binary -\n",
                  r, n, $1, $1 / 4
         n++ }' "$tmp/measured" > "$tmp/trace"
  # Both pretend hosts are this machine: their codecs share its memory.
  "$replay" --policy "$tmp/binary.policy" --link "$link" --codec-share 2 --json "$tmp/trace" \
    > "$tmp/link.json" ||
    { echo "predict: nfcoll_replay --link $link failed"; exit 1; }
  echo "nfcoll_replay --link $link --codec-share 2; nfcoll_allreduce -r $routes -m SIZE:SIZE, one run per size of $sizes, -x $((128 * wburst))/SIZE (four bursts of $wburst B at 1/32; at least 1), -i that or $iters (the larger) -R $reps (median)"
  python3 - "$tmp/measured" "$tmp/link.json" <<'PY'
import json, sys
pred = {c["bytes"]: c["seconds"] for c in json.load(open(sys.argv[2]))["link"]["calls"]}
print("%10s %8s %12s %12s %10s" % ("bytes", "route", "measured ms", "predicted", "pred/meas"))
worst = {}
for line in open(sys.argv[1]):
    size, route, sec = line.split("\t")[:3]
    size, sec = int(size), float(sec) / 1e3  # ratios.awk: ms
    p = pred.get(size, {}).get(route.split("/")[0])
    if p is None:
        continue
    r = p / sec
    print("%10d %8s %12.4g %12.4g %10.2f" % (size, route, 1e3 * sec, 1e3 * p, r))
    worst[route] = max(worst.get(route, 0.0), abs(r - 1.0))
print("largest error per route: " +
      ", ".join("%s %.0f %%" % (k, 100 * v) for k, v in worst.items()))
PY
  echo
done
