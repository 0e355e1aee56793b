#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# MPI_THREAD_MULTIPLE: two threads on two communicators, fp32 and binary
# at the same time through the shim, checked bit for bit; stats must count
# exactly the calls each thread made on its route.
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
for np in 2 3; do
  nf_tier $np || continue
  sh "$srcdir/tests/mpi_run.sh" $np NFCOLL_POLICY=$srcdir/tests/policy_shim/threads.policy \
    NFCOLL_STATS=$tmp/s.json ./tests/mpi/test_threads > "$tmp/out" 2>&1
  rc=$?
  cat "$tmp/out"
  [ $rc = 77 ] && exit 77
  f=$(tr -d '\n ' < "$tmp/s.json" | sed -n 's/.*"fp32":{"calls":\([0-9]*\).*/\1/p')
  b=$(tr -d '\n ' < "$tmp/s.json" | sed -n 's/.*"binary":{"calls":\([0-9]*\).*/\1/p')
  if [ $rc = 0 ] && [ "$f" = $((30 * np)) ] && [ "$b" = $((30 * np)) ]; then
    echo "ok - $np ranks x 2 threads: fp32 $f calls, binary $b calls"
  else
    echo "FAIL - $np ranks x 2 threads: exit $rc, fp32 '$f', binary '$b' (want $((30 * np)) each)"
    nf_failed=1
  fi
done
finish
