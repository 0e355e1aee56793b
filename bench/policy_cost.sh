#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Cost of an engaged policy on a small call: MPI_Allreduce of 8 B (one
# double, so no rule routes it off pmpi) plain, preloaded without a policy,
# and preloaded with a policy engaged.
#  - instructions per call: one rank under callgrind, the whole program at
#    two call counts, the difference divided by the extra calls; repeatable
#    whatever else the machine does.
#  - ns per call: 2 ranks, median of REPEATS alternated runs.
# Usage: bench/policy_cost.sh BUILDDIR [REPEATS]
set -eu
b=$(cd "${1:-.}" && pwd); reps=${2:-5}
lib=$b/lib/.libs/libnfcoll.so
lat=$b/bench/mpi_allreduce_lat
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/p.policy" <<'P'
[policy]
version = 1
[rule warmup]
calls = 0-4
route = pmpi
[rule big]
datatype = float
op = sum
bytes = 1M-
route = binary
P
ir() { # label, extra mpirun args...: total instructions at two call counts,
        # so start-up cancels out and the difference is per call
  l=$1; shift
  for n in 10000 30000; do
    mpirun -np 1 "$@" valgrind -q --tool=callgrind --callgrind-out-file="$tmp/cg.$l.$n" \
      "$lat" -m 8 -i $n -x 0 > /dev/null 2>&1
  done
  a=$(awk '/^summary:/ {print $2}' "$tmp/cg.$l.10000")
  z=$(awk '/^summary:/ {print $2}' "$tmp/cg.$l.30000")
  awk -v l="$l" -v a="$a" -v z="$z" \
    'BEGIN {printf "%-16s %8.1f instructions per call (callgrind, 1 rank, 30000 - 10000 calls)\n", l, (z - a) / 20000}'
}
ir plain
ir preload -x LD_PRELOAD="$lib"
ir policy -x LD_PRELOAD="$lib" -x NFCOLL_POLICY="$tmp/p.policy"
run() { mpirun -np 2 --bind-to core "$@" "$lat" -m 8 -i 200000 | awk '!/^#/ {print $2}'; }
i=0
while [ $i -lt "$reps" ]; do
  echo "plain $(run)" >> "$tmp/t"
  echo "preload $(run -x LD_PRELOAD="$lib")" >> "$tmp/t"
  echo "policy $(run -x LD_PRELOAD="$lib" -x NFCOLL_POLICY="$tmp/p.policy")" >> "$tmp/t"
  i=$((i + 1))
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
p=$(awk '$1 == "plain" {print $2}' "$tmp/t" | median)
for l in plain preload policy; do
  m=$(awk -v l=$l '$1 == l {print $2}' "$tmp/t" | median)
  awk -v l=$l -v m="$m" -v p="$p" -v r="$reps" 'BEGIN {
    printf "%-16s %8.1f ns per call (2 ranks, median of %d), %.2fx plain\n", l, m * 1000, r, m / p }'
done
