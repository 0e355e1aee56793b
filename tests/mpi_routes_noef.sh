#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Routes with error feedback off, a non-default ternary gate, and error
# feedback decayed (ef_decay: NFCOLL_EF_DECAY, and the policy's rules).
. "${srcdir:-.}/tests/mpi_common.sh"
run 2 NFCOLL_EF=off ./tests/mpi/test_routes
nf_tier 3 && run 3 NFCOLL_EF=off NFCOLL_EF_DECAY=0.5 NFCOLL_TERNARY_GAMMA=0.5 \
  ./tests/mpi/test_routes -c 1 -c 513 -c 70001
# The whole residual scaled on reuse, route switches (E form) included.
run 2 NFCOLL_EF_DECAY=0.5 ./tests/mpi/test_routes -c 7 -c 513 -c 70001
nf_tier 3 && run 3 NFCOLL_EF_DECAY=0 NFCOLL_TERNARY_GAMMA=0.5 ./tests/mpi/test_routes -c 1 -c 4099
# ef_decay rules: 1 gives the bits of no key, 0.5 and others the reference's;
# a rule wins over the setting.
pol=$srcdir/tests/policy_shim/ef_decay.policy
run 2 NFCOLL_POLICY=$pol ./tests/mpi/test_routes -p
run 2 NFCOLL_POLICY=$pol NFCOLL_EF_DECAY=0.5 ./tests/mpi/test_routes -p
# A bad setting is named and the default kept.
for v in 1.5 -0.5 half; do
  if ! NFCOLL_EF_DECAY=$v ./tools/nfcoll_info -c 2>&1 >/dev/null |
       grep -q "NFCOLL_EF_DECAY='$v' is not valid (expected number in \[0, 1\]); using the default '1'"; then
    echo "FAILED: NFCOLL_EF_DECAY=$v was not reported"; nf_failed=1
  fi
done
finish
