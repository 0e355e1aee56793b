#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Interposition overhead: the plain benchmark with and without
# LD_PRELOAD=libnfcoll.so (no policy), alternated REPEATS times in one run;
# prints the median latency of each and their ratio.
# Usage: bench/preload_overhead.sh BUILDDIR [REPEATS]
set -eu
b=${1:-.}; reps=${2:-7}
lib=$(cd "$b" && pwd)/lib/.libs/libnfcoll.so
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { mpirun -np 2 --bind-to core "$@" "$b/bench/mpi_allreduce_lat" -m 8 -m 1048576 | grep -v '^#'; }
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
i=0
while [ $i -lt "$reps" ]; do
  run | sed 's/^/plain /' >> "$tmp"
  run -x LD_PRELOAD="$lib" | sed 's/^/preload /' >> "$tmp"
  i=$((i + 1))
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for size in 8 1048576; do
  p=$(awk -v s=$size '$1 == "plain" && $2 == s {print $3}' "$tmp" | median)
  q=$(awk -v s=$size '$1 == "preload" && $2 == s {print $3}' "$tmp" | median)
  awk -v s=$size -v p="$p" -v q="$q" -v r="$reps" 'BEGIN {
    printf "%8d B: plain %.2f us, preloaded %.2f us (median of %d), added %+.1f%%\n",
           s, p, q, r, 100 * (q - p) / p }'
done
