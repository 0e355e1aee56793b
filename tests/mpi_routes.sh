#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every route on 1-4 ranks (4 is oversubscribed on 2 cores), error feedback on.
. "${srcdir:-.}/tests/mpi_common.sh"
for np in 1 2 3 4; do
  nf_tier $np || continue
  run $np ./tests/mpi/test_routes
done
# The protocol's edges on one node: small calls (one barrier, 8 KiB of data
# per rank: fp32 2048 floats, binary 65024, ternary 32256) and fp32 chunks
# of 128 Ki floats (one barrier each, pipelined).
nf_tier 3 && run 3 ./tests/mpi/test_routes -c 2048 -c 2049 -c 32256 -c 32257 -c 65024 -c 65025 -c 131073 -c 262145
# Binary with one scale per block (NFCOLL_SCALE_BLOCK; docs/design.md,
# "Routes"): counts below, at and past a block, several blocks with a short
# last one, 2-4 ranks, error feedback off, decayed, route switches (the
# blocked Y form into ternary and back, run_calls' sequence), pretend nodes
# (the scale allgather), each ISA; and the policy's scale_block rules
# against the setting (test_routes -p: a rule's 0 wins over the setting).
run 2 NFCOLL_SCALE_BLOCK=512 ./tests/mpi/test_routes -c 7 -c 512 -c 513 -c 1025 -c 70001
nf_tier 3 && run 3 NFCOLL_SCALE_BLOCK=1024 NFCOLL_EF_DECAY=0.5 ./tests/mpi/test_routes -c 1023 -c 4097 -c 65025 -c 1048579
nf_tier 4 && run 4 NFCOLL_SCALE_BLOCK=512 NFCOLL_EF=off ./tests/mpi/test_routes -c 513 -c 2049
run 2 NFCOLL_RANKS_PER_NODE=1 NFCOLL_SCALE_BLOCK=512 ./tests/mpi/test_routes -c 4099 -c 70001
run 2 NFCOLL_SCALE_BLOCK=512 NFCOLL_SIMD=scalar ./tests/mpi/test_routes -c 7 -c 4099
run 2 NFCOLL_SCALE_BLOCK=512 NFCOLL_SIMD=avx2 ./tests/mpi/test_routes -c 7 -c 4099
pol=$srcdir/tests/policy_shim/ef_decay.policy
run 2 NFCOLL_POLICY=$pol ./tests/mpi/test_routes -p
nf_tier 3 && run 3 NFCOLL_POLICY=$pol NFCOLL_SCALE_BLOCK=2048 ./tests/mpi/test_routes -p -c 513 -c 4097
# The integer routes' blocks (32, 1024, 4096) across two one-rank nodes,
# where the finish streams as the counts arrive, in whole blocks.
run 2 NFCOLL_RANKS_PER_NODE=1 NFCOLL_POLICY=$pol ./tests/mpi/test_routes -p -c 1048579 -c 300001
# Each kernel ISA gives the same bits as the reference.
run 2 NFCOLL_SIMD=scalar ./tests/mpi/test_routes -c 7 -c 513 -c 4099
run 2 NFCOLL_SIMD=avx2 ./tests/mpi/test_routes -c 7 -c 513 -c 4099
finish
