#!/bin/sh
# Fused buffers cut by bound regions, each part on its own route, on 2-4
# ranks (tests/mpi/test_regions.c), and the same with pretend nodes; then
# layouts that differ between ranks under a pmpi default, which hung before
# ranks agreed on pmpi (hence the shorter timeout).
. "${srcdir:-.}/tests/mpi_common.sh"
pol=$srcdir/tests/policy_shim/regions.policy
for np in 2 3 4; do
  nf_tier $np || continue
  run $np NFCOLL_POLICY=$pol ./tests/mpi/test_regions
done
nf_tier 4 && run 4 NFCOLL_POLICY=$pol NFCOLL_RANKS_PER_NODE=2 ./tests/mpi/test_regions
nf_tier 3 && run 3 NFCOLL_POLICY=$pol NFCOLL_RANKS_PER_NODE=1 ./tests/mpi/test_regions
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
