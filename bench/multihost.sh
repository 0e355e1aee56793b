#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# multihost: nfcoll_allreduce across pretend hosts on one machine. N network
# namespaces x R ranks, Open MPI over TCP between them, every link shaped
# with tc to a given rate; then the inter-node bytes per element as the
# number of (pretend) nodes grows, against the protocol's formulas.
#
#   bench/multihost.sh [-H HOSTS] [-p RANKS] [-b RATES] [-m SIZES] [-r ROUTES]
#                      [-i ITERS] [-R REPEATS] [-a ALGS] [-s NODES] [BUILDDIR]
#
#   -H HOSTS   pretend hosts (default 2)
#   -p RANKS   ranks per host (default 2)
#   -b RATES   link rates, tc syntax, space-separated; "none" for unshaped
#              veths (default "1gbit 10gbit")
#   -m SIZES   nfcoll_allreduce -m (default 16M:16M)
#   -r ROUTES  nfcoll_allreduce -r (default all)
#   -i ITERS   iterations per size (default 5); -R repeats, median (default 3)
#   -a ALGS    also time pmpi with Open MPI's coll_tuned allreduce algorithm
#              N for each N listed (e.g. "1 2 3 4 5 6"; default none)
#   -s NODES   the scaling table: 1, 2, 3, 4, ... NODES pretend nodes of one
#              rank each on this host (NFCOLL_RANKS_PER_NODE=1), 4 MiB calls,
#              internode_bytes per element from NFCOLL_STATS (default 16;
#              0 skips it)
# Needs root, iproute2 and tc. Prints nfcoll_allreduce's tables, then per size
# each route's time over pmpi's and over the fp32 route's.
set -u
hosts=2 rpn=2 rates="1gbit 10gbit" sizes=16M:16M routes=all iters=5 reps=3 algs="" nodes=16
while getopts H:p:b:m:r:i:R:a:s:h o; do
  case $o in
    H) hosts=$OPTARG ;; p) rpn=$OPTARG ;; b) rates=$OPTARG ;; m) sizes=$OPTARG ;;
    r) routes=$OPTARG ;; i) iters=$OPTARG ;; R) reps=$OPTARG ;; a) algs=$OPTARG ;;
    s) nodes=$OPTARG ;;
    *) sed -n '3,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
b=$(cd "${1:-.}" && pwd)
bench=$b/bench/nfcoll_allreduce
[ -x "$bench" ] || { echo "multihost: no $bench (give the build directory)"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "multihost: network namespaces need root"; exit 2; }
. "$(dirname "$0")/netns.sh"
trap nf_hosts_down EXIT INT TERM
np=$((hosts * rpn))
slots=""; h=0
while [ $h -lt "$hosts" ]; do slots="$slots $rpn"; h=$((h + 1)); done

ratios() { awk -f "$(dirname "$0")/ratios.awk"; }

for rate in $rates; do
  shape=$rate; [ "$rate" = none ] && shape=""
  nf_hosts_up "$hosts" $shape || { echo "multihost: cannot set up the hosts"; exit 1; }
  hl=$(nf_hosts_list $slots)
  echo "== $hosts hosts x $rpn ranks, links ${rate}, $bench -r $routes -m $sizes -i $iters -x 1 -R $reps"
  out=$(mktemp)
  nf_hosts_mpirun "$hl" "$np" "$bench" -r "$routes" -m "$sizes" -i "$iters" -x 1 -R "$reps" \
    2>&1 | tee "$out"
  for a in $algs; do
    echo "== pmpi with --mca coll_tuned_allreduce_algorithm $a"
    nf_hosts_mpirun "$hl" "$np" --mca coll_tuned_use_dynamic_rules 1 \
      --mca coll_tuned_allreduce_algorithm "$a" "$bench" -r pmpi -m "$sizes" -i "$iters" -x 1 \
      -R "$reps" 2>&1 | sed "s/^# Route: pmpi/# Route: pmpi algorithm $a/" | tee -a "$out"
  done
  echo "== Same-run ratios (pmpi/ROUTE > 1: the route is faster than pmpi)"
  ratios < "$out"
  rm -f "$out"
  nf_hosts_down
  echo
done

[ "$nodes" -gt 0 ] || exit 0
echo "== internode_bytes per element per rank, p pretend nodes of 1 rank (NFCOLL_RANKS_PER_NODE=1), 4 MiB calls"
echo "   formulas: fp32 2(p-1)/p x 4 B (two nodes: whole, 4 B); binary min((p-1) kn, (p-1)/p (kn + k))"
echo "   bits, k = ceil(log2(p+1)), kn = 1 (bound 2 ceil(log2(n+1)) bits); ternary twice binary"
printf "%6s %12s %12s %12s %12s %12s %12s\n" p fp32 formula binary formula ternary formula
p=1
while [ $p -le "$nodes" ]; do
  js=$(mktemp)
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 600 mpirun --oversubscribe \
    --bind-to none --mca btl self,vader --mca mpi_yield_when_idle 1 -np $p \
    -x NFCOLL_RANKS_PER_NODE=1 -x NFCOLL_STATS="$js" "$bench" -r fp32,binary,ternary -m 4M:4M \
    -i 2 -x 0 > /dev/null 2>&1
  per() { # route -> internode bytes per element per rank
    /usr/bin/python3 -c "import json, sys; d = json.load(open(sys.argv[1]))
b, i = d['routes'][sys.argv[2]]['bytes'], d['internode_bytes'][sys.argv[2]]
print('%.4f' % (i / (b / 4)) if b > 0 else 'n/a', end='')" "$js" "$1"
  }
  awk -v p=$p -v f="$(per fp32)" -v bi="$(per binary)" -v te="$(per ternary)" 'BEGIN {
        k = 0; while (2 ^ k < p + 1) k++
        kn = 1; fb = (p - 1) / p * (kn + k) / 8; if ((p - 1) * kn / 8 < fb) fb = (p - 1) * kn / 8
        printf "%6d %12s %12.4f %12s %12.4f %12s %12.4f\n", p, f, 2 * (p - 1) / p * 4, bi, fb, te, 2 * fb }'
  rm -f "$js"
  case $p in 1) p=2 ;; 2) p=3 ;; 3) p=4 ;; *) p=$((p * 2)) ;; esac
done
