#!/bin/sh
# Every route on 1-4 ranks (4 is oversubscribed on 2 cores), error feedback on.
. "${srcdir:-.}/tests/mpi_common.sh"
for np in 1 2 3 4; do
  run $np ./tests/mpi/test_routes
done
# Each kernel ISA gives the same bits as the reference.
run 2 NFCOLL_SIMD=scalar ./tests/mpi/test_routes -c 7 -c 513 -c 4099
run 2 NFCOLL_SIMD=avx2 ./tests/mpi/test_routes -c 7 -c 513 -c 4099
finish
