#!/bin/sh
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
# Each kernel ISA gives the same bits as the reference.
run 2 NFCOLL_SIMD=scalar ./tests/mpi/test_routes -c 7 -c 513 -c 4099
run 2 NFCOLL_SIMD=avx2 ./tests/mpi/test_routes -c 7 -c 513 -c 4099
finish
