#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# protocol: the single-node figures of the protocol on 2 ranks, repeated,
# with medians of same-run ratios (README, "Benchmarks").
#
#   bench/protocol.sh [-n RUNS] [-s] [-l] [-a ALGS] [BUILDDIR]
#
#   -n RUNS  rounds (default 5); each round runs every measurement once,
#            alternating, so all see the same machine
#   -s       small calls only; -l large calls only (default both)
#   -a ALGS  also pmpi with --mca coll_tuned_allreduce_algorithm N, large
#            calls (default "2 3 4 5 6": nonoverlapping, recursive doubling,
#            ring, segmented ring, rabenseifner)
# Each round:
#   small: nfcoll_allreduce -r pmpi,fp32,binary,ternary -m 64:4K -i 20000 -x 200 -R 3
#   large: nfcoll_allreduce -r pmpi,fp32,binary,ternary -m 16M:64M -i 10 -x 2 -R 3,
#          with NFCOLL_EF=on and again with NFCOLL_EF=off (binary, ternary)
# and prints, per size and route, the median over rounds of the time and of
# the time ratios route/pmpi and route/fp32 taken within one run (< 1: the
# route is faster). A round with load average > 2 at its start is marked.
set -u
runs=5 small=1 large=1 algs="2 3 4 5 6"
while getopts n:sla:h o; do
  case $o in
    n) runs=$OPTARG ;; s) large=0 ;; l) small=0 ;; a) algs=$OPTARG ;;
    *) sed -n '3,/^# route is faster/p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
b=$(cd "${1:-.}" && pwd)
bench=$b/bench/nfcoll_allreduce
[ -x "$bench" ] || { echo "protocol: no $bench (give the build directory)"; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tsv=$(mktemp)
trap 'rm -f "$tsv"' EXIT
mpi() { mpirun -np 2 --bind-to none --mca btl self,vader "$@" 2>/dev/null; }

# one TAG COMMAND...: run, append "TAG size route ms pmpi/route fp32/route".
one() {
  tag=$1; shift
  "$@" | awk -v tsv=1 -f "$here/ratios.awk" | sed "s/^/$tag\t/" >> "$tsv"
}

i=1
while [ $i -le "$runs" ]; do
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "round $i of $runs (load $load)" >&2
  if [ $small = 1 ]; then
    one small mpi "$bench" -r pmpi,fp32,binary,ternary -m 64:4K -i 20000 -x 200 -R 3
  fi
  if [ $large = 1 ]; then
    one ef-on mpi -x NFCOLL_EF=on "$bench" -r pmpi,fp32,binary,ternary -m 16M:64M -i 10 -x 2 -R 3
    one ef-off mpi -x NFCOLL_EF=off "$bench" -r fp32,binary,ternary -m 16M:64M -i 10 -x 2 -R 3
    for a in $algs; do
      one "pmpi-alg$a" mpi --mca coll_tuned_use_dynamic_rules 1 \
        --mca coll_tuned_allreduce_algorithm "$a" "$bench" -r pmpi,fp32 -m 16M:64M -i 10 -x 2 -R 3
    done
  fi
  i=$((i + 1))
done

echo "medians over $runs rounds; ratios are time(route)/time(pmpi or fp32) within one run"
printf "%-10s %10s %-8s %12s %12s %12s\n" set size route us route/pmpi route/fp32
sort -k1,1 -k2,2n -k3,3 "$tsv" | awk -F'\t' '
  function med(list,   n, v, i, j, x) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] + 0 > x + 0; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return n == 0 ? "" : (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2)
  }
  { k = $1 FS $2 FS $3; if (!(k in ms)) keys[++nk] = k
    ms[k] = ms[k] " " $4
    if ($5 != "") rp[k] = rp[k] " " 1 / $5
    if ($6 != "") rf[k] = rf[k] " " 1 / $6 }
  END { for (i = 1; i <= nk; i++) { split(keys[i], f, FS)
          printf "%-10s %10s %-8s %12.2f %12s %12s\n", f[1], f[2], f[3], 1000 * med(ms[keys[i]]),
                 rp[keys[i]] == "" ? "-" : sprintf("%.3f", med(rp[keys[i]])),
                 rf[keys[i]] == "" ? "-" : sprintf("%.3f", med(rf[keys[i]])) } }'
