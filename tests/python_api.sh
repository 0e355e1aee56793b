#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The nfcoll package on 2 ranks (tests/python/test_nfcoll.py): every route
# bit-exact against numpy references, torch tensors, errors as exceptions,
# stats; a fused buffer of bound regions under a region policy, each part on
# its route and in the stats JSON; residual files, health and bf16 where the
# library has them (each SKIPs where not); allreduce_async bit for bit the
# blocking calls, and its failures (PMPI stand-ins failing on every rank,
# tests/python/fail_pmpi.c) raised from wait(). Each run with nfcoll
# loading libnfcoll, and preloaded. Then MPI started by mpi4py, not through
# libnfcoll (tests/python/test_first.py): a rank with a progress thread does
# not block at a communicator's first allreduce_async, and no rank blocks at
# a later one, whatever the ranks' thread levels.
. "${srcdir:-.}/tests/mpi_common.sh"
. "$srcdir/tests/python_common.sh"
py_need numpy mpi4py
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
pol=$top/tests/python/regions.policy
for how in loaded preloaded; do
  pre=NFCOLL_VERBOSE=0
  [ $how = preloaded ] && pre=LD_PRELOAD=$lib
  run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib $pre "$py" "$top/tests/python/test_nfcoll.py" api
  run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib $pre NFCOLL_POLICY=$pol NFCOLL_STATS=$tmp/$how.json \
    "$py" "$top/tests/python/test_nfcoll.py" regions
  expect_regions "$tmp/$how.json" "body.weight:binary head.weight:fp32" "$how"
  both=$fail; [ $how = preloaded ] && both=$fail:$lib
  run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib NFCOLL_RANKS_PER_NODE=1 LD_PRELOAD=$both \
    "$py" "$top/tests/python/test_nfcoll.py" fail
done
run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib NFCOLL_POLICY=$top/tests/python/health.policy \
  "$py" "$top/tests/python/test_nfcoll.py" later "$tmp"
for levels in "multiple multiple" "multiple serialized" "serialized multiple" "funneled funneled"; do
  # shellcheck disable=SC2086 # rank 0's level, then the others'
  run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib NFCOLL_POLICY=$top/tests/policy_shim/engine.policy \
    "$py" "$top/tests/python/test_first.py" $levels
done
finish
