#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# nfcoll.torch.ddp_hook under PyTorch DDP on 2 ranks (tests/python/test_ddp.py):
# forced fp32 gives the weights DDP's own allreduce gives, bit for bit; under
# a region policy (head.* fp32, the rest binary) all ranks end identical and
# every parameter appears in the stats JSON by its named_parameters() name on
# its route; many buckets, gradients as bucket views and a rebuild into fewer
# buckets leave no stale region bound; the asynchronous hook (the default)
# gives the synchronous hook's weights bit for bit, forced fp32 gloo's, and a
# bucket call failing on every rank (tests/python/fail_pmpi.c) makes
# backward raise, no hang.
. "${srcdir:-.}/tests/mpi_common.sh"
. "$srcdir/tests/python_common.sh"
py_need numpy mpi4py torch
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
pol=$top/tests/python/regions.policy
want="fc1.bias:binary fc1.weight:binary fc2.bias:binary fc2.weight:binary head.bias:fp32 head.weight:fp32"
run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib "$py" "$top/tests/python/test_ddp.py" fp32
for how in loaded preloaded; do
  pre=NFCOLL_VERBOSE=0
  [ $how = preloaded ] && pre=LD_PRELOAD=$lib
  run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib $pre NFCOLL_POLICY=$pol NFCOLL_STATS=$tmp/$how.json \
    "$py" "$top/tests/python/test_ddp.py" policy
  expect_regions "$tmp/$how.json" "$want" "$how"
done
run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib NFCOLL_POLICY=$pol NFCOLL_STATS=$tmp/b.json \
  "$py" "$top/tests/python/test_ddp.py" buckets
expect_regions "$tmp/b.json" "$want" "many buckets"
run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib NFCOLL_POLICY=$pol "$py" "$top/tests/python/test_ddp.py" async
run 2 PYTHONPATH=$pypath NFCOLL_LIBRARY=$lib LD_PRELOAD=$fail "$py" "$top/tests/python/test_ddp.py" fail
finish
