#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Fused buffers cut by bound regions, each part on its own route, on 2-4
# ranks (tests/mpi/test_regions.c), and the same with pretend nodes; the
# registry's and a fused call's cost at scale (test_regions --scale); more
# buffers and sizes than admission's cache holds (--many); then
# layouts that differ between ranks under a pmpi default, which hung before
# ranks agreed on pmpi (hence the shorter timeout).
. "${srcdir:-.}/tests/mpi_common.sh"
pol=$srcdir/tests/policy_shim/regions.policy
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
out "$tmp/o" 2 NFCOLL_POLICY=$pol ./tests/mpi/test_regions
cat "$tmp/o"
# A name bound at a second address is refused, naming the first one.
if grep -q "region 'dup' is already bound at 0x[0-9a-f]*: unbind it first" "$tmp/o.err"; then
  echo "ok - the refused second binding of 'dup' names the address it is bound at"
else
  echo "FAIL - no error naming where 'dup' is bound"; cat "$tmp/o.err"; nf_failed=1
fi
for np in 3 4; do
  nf_tier $np || continue
  run $np NFCOLL_POLICY=$pol ./tests/mpi/test_regions
done
nf_tier 4 && run 4 NFCOLL_POLICY=$pol NFCOLL_RANKS_PER_NODE=2 ./tests/mpi/test_regions
nf_tier 3 && run 3 NFCOLL_POLICY=$pol NFCOLL_RANKS_PER_NODE=1 ./tests/mpi/test_regions
# Bounds (issue 18 item 11): 20 000 tiny regions in one call, 100 000 binds
# in descending order and unbinds in ascending order (a sorted array's worst
# cases), each well within a generous time.
run 2 NFCOLL_POLICY=$pol ./tests/mpi/test_regions --scale
run 2 ./tests/mpi/test_regions --forced
# More fused buffers and call sizes than admission keeps decisions for.
run 2 NFCOLL_POLICY=$pol ./tests/mpi/test_regions --many
export NF_TEST_TIMEOUT=${NF_TEST_TIMEOUT:-120}
for np in 2 3; do
  nf_tier $np || continue
  run $np NFCOLL_POLICY=$srcdir/tests/policy_shim/regions_pmpi.policy ./tests/mpi/test_regions \
    --pmpi-default
  run $np NFCOLL_POLICY=$srcdir/tests/policy_shim/regions_bytes.policy ./tests/mpi/test_regions \
    --bytes-only
done
nf_tier 4 && run 4 NFCOLL_POLICY=$srcdir/tests/policy_shim/regions_pmpi.policy \
  NFCOLL_RANKS_PER_NODE=2 ./tests/mpi/test_regions --pmpi-default
finish
