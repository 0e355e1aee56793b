#!/bin/sh
# Routes with error feedback off and a non-default ternary gate.
. "${srcdir:-.}/tests/mpi_common.sh"
run 2 NFCOLL_EF=off ./tests/mpi/test_routes
nf_tier 3 && run 3 NFCOLL_EF=off NFCOLL_TERNARY_GAMMA=0.5 ./tests/mpi/test_routes -c 1 -c 513 -c 70001
finish
