#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The inter-node path: NFCOLL_RANKS_PER_NODE splits one machine into
# pretend nodes, so leaders exchange node counts and sums over PMPI.
. "${srcdir:-.}/tests/mpi_common.sh"
run 4 NFCOLL_RANKS_PER_NODE=2 ./tests/mpi/test_routes -c 1 -c 513 -c 300007
run 3 NFCOLL_RANKS_PER_NODE=1 ./tests/mpi/test_routes -c 7 -c 513 -c 300007
run 3 NFCOLL_RANKS_PER_NODE=2 NFCOLL_EF=off ./tests/mpi/test_routes -c 7 -c 1048579
# Uneven nodes (3 + 1 ranks) and four one-rank nodes; fp32 node sums past
# 8 Ki floats and counters past 32 KiB go by reduce-scatter + allgather.
run 4 NFCOLL_RANKS_PER_NODE=3 ./tests/mpi/test_routes -c 2049 -c 8193 -c 300007
run 4 NFCOLL_RANKS_PER_NODE=1 ./tests/mpi/test_routes -c 7 -c 8193 -c 300007
# One rank per node: a call rides with the verdict when its lines, scales
# and floats fit the verdict's area. Three nodes or more: the area follows
# the sizes of the calls before (448 bytes at least, 8 KiB at most: fp32
# 2048 floats, not 2049; ternary 32256 elements, binary 65024, not 65025),
# so each size's first call here takes the exchanges and the others ride.
# Two nodes: each call sends its own area, 8 KiB at most with low-bit
# lines (the same bounds), 128 KiB all fp32 (32768 floats, not 32769;
# past 16240 floats the rest follows in tails, two past 32480).
# Larger calls' scales ride with the counts (one exchange fewer), a scale
# per block of 512 elements too (137 of them at 70001 elements).
run 2 NFCOLL_RANKS_PER_NODE=1 ./tests/mpi/test_routes -c 7 -c 113 -c 2048 -c 2049 -c 32256 \
  -c 16240 -c 16241 -c 16384 -c 16385 -c 32257 -c 32480 -c 32481 -c 32768 -c 32769 -c 65024 \
  -c 65025 -c 300007
run 3 NFCOLL_RANKS_PER_NODE=1 ./tests/mpi/test_routes -c 2048 -c 2049 -c 65024 -c 65025
run 2 NFCOLL_RANKS_PER_NODE=1 NFCOLL_SCALE_BLOCK=512 ./tests/mpi/test_routes -c 513 -c 70001
run 3 NFCOLL_RANKS_PER_NODE=1 NFCOLL_SCALE_BLOCK=512 ./tests/mpi/test_routes -c 513 -c 70001
# Two one-rank nodes' fp32 crosses point-to-point, up to 8 messages of
# 16256 floats in flight (lib/core/xnode.c): past 130048 floats the slots
# are used again, and the last of 1048579 floats' 65 messages is short.
run 2 NFCOLL_RANKS_PER_NODE=1 NFCOLL_EF=off ./tests/mpi/test_routes -c 1048579
# Their counts too, past 512 lines: the scales, then 512 lines a message,
# each finished as it arrives; a block of 3 lines (1536 elements) spans
# two messages, and 300007 elements are 586 lines: a short last message.
run 2 NFCOLL_RANKS_PER_NODE=1 NFCOLL_SCALE_BLOCK=1536 ./tests/mpi/test_routes -c 300007
finish
