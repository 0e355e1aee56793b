#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Bad input, NaN/Inf fallback, residual reset, capacity fallback, memory,
# MPI error codes.
. "${srcdir:-.}/tests/mpi_common.sh"
for np in 1 2 3; do
  nf_tier $np || continue
  run $np ./tests/mpi/test_misc
done
nf_tier 3 && run 3 NFCOLL_COUNT_BITS=1 ./tests/mpi/test_misc --capacity
run 2 NFCOLL_EF=maybe ./tests/mpi/test_misc --bad-env
# MPI error codes of any size come back unchanged, the handler runs once.
run 2 NFCOLL_RANKS_PER_NODE=1 ./tests/mpi/test_errcode
# The verdict across pretend nodes (counts that differ on one node only),
# and point-to-point between two one-rank nodes, each with its own area.
nf_tier 4 && run 4 NFCOLL_RANKS_PER_NODE=2 ./tests/mpi/test_misc
run 2 NFCOLL_RANKS_PER_NODE=1 ./tests/mpi/test_misc
# Their messages: calls that fit the verdict's area cross in it alone.
run 2 NFCOLL_RANKS_PER_NODE=1 ./tests/mpi/test_wire
finish
