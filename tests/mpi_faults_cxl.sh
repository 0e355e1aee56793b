#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# NFCOLL_CXL=require with a full CXL node: node 0 is named the CXL node and
# tests/libnf_node_free (preloaded) says it has 2 MiB free, so placing a
# residual buffer of 4 MiB is refused. Each of 20 steps reduces 1 Ki
# floats (its residual fits) and 1 Mi floats (it does not) on the binary
# route, under NFCOLL_RESIDUAL_MAX=8M: making room for the big residual
# means dropping the small one.
#  - every big call returns MPI_ERR_NO_MEM (it ran without error feedback),
#    every small call succeeds;
#  - the refusal is remembered per residual: one error about the node per
#    rank, not one per call, and at most one residual dropped per rank
#    (before the first refusal), not one per step;
#  - a checkpoint saved then holds the small residual only.
. "${srcdir:-.}/tests/faults_common.sh"
lib=$PWD/tests/.libs/libnf_node_free.so
if [ ! -f "$lib" ] || [ ! -f "$PWD/lib/.libs/libnfcoll.so" ]; then
  echo "SKIP: no shared libraries (--disable-shared?): libnf_node_free cannot interpose"; exit 77
fi
san=$(ldd "$PWD/lib/.libs/libnfcoll.so" | awk '/libasan|libubsan/ {printf "%s:", $3}')
steps=20
mpi 2 NFCOLL_CXL=require NFCOLL_CXL_NODE=0 NFCOLL_RESIDUAL_MAX=8M NF_NODE_FREE=2097152 \
  NFCOLL_STATS="$tmp/s.json" LD_PRELOAD="$san$lib" ./tests/mpi/test_faults cxl-full $steps 1048576 "$tmp/ck"
good=$(grep -c "small ok $steps/$steps, big refused $steps/$steps, big other 0, save 0" "$tmp/out")
full=$(grep -c "error: CXL memory node 0 has 2097152 bytes free, 4194304 are needed" "$tmp/out")
drops=$(tr -d '\n ' < "$tmp/s.json" 2>/dev/null | sed -n 's/.*"residuals_dropped":\([0-9]*\).*/\1/p')
if [ $rc = 0 ] && [ "$good" = 2 ]; then
  ok "every small call succeeded, every big one returned MPI_ERR_NO_MEM, the save succeeded"
else
  bad "exit $rc, $good of 2 ranks with the expected results"; cat "$tmp/out"
fi
if [ "$full" = 2 ]; then
  ok "the refusal is remembered: one error about the full node per rank over $steps steps"
else
  bad "$full errors about the full node over $steps steps on 2 ranks (want 2: one per rank)"
fi
if [ -n "$drops" ] && [ "$drops" -le 2 ]; then
  ok "$drops residuals dropped for room over $steps steps on 2 ranks (at most one per rank)"
else
  bad "'$drops' residuals dropped for room over $steps steps on 2 ranks (want at most 2)"
fi
if ./tools/nfcoll_info --checkpoint "$tmp/ck.1" > "$tmp/ck.txt" 2>&1 &&
   grep -q "residuals: 1," "$tmp/ck.txt" && grep -q "1024 floats" "$tmp/ck.txt"; then
  ok "the checkpoint holds the small residual only"
else
  bad "the checkpoint:"; cat "$tmp/ck.txt"
fi
finish
