#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The residual bound (tests/mpi/test_resmax.c): a fresh 1 MiB buffer every
# step stays within NFCOLL_RESIDUAL_MAX with one warning per process (5000
# steps on one rank, 300 on two: a 1 MiB binary call takes milliseconds on
# two shared cores); a call keeps the residuals it uses when the bound
# cannot hold them all; two threads drop each other's residuals.
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nfcoll-resmax.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fresh() { # NP STEPS
  sh "$srcdir/tests/mpi_run.sh" $1 NFCOLL_RESIDUAL_MAX=16M NFCOLL_STATS="$tmp/stats.json" \
    ./tests/mpi/test_resmax fresh "$tmp/stats.json" $2 2> "$tmp/err"
  rc=$?
  cat "$tmp/err" >&2
  [ $rc -eq 77 ] && exit 77
  [ $rc -eq 0 ] || { echo "FAILED (exit $rc): test_resmax fresh on $1"; nf_failed=1; }
  drops=$(grep -c "dropping the least recently used" "$tmp/err")
  if [ "$drops" -ne $1 ]; then
    echo "FAILED: $drops warnings about dropped residuals on $1 ranks, expected one per rank"
    nf_failed=1
  fi
}
fresh 1 5000
fresh 2 300
run 2 NFCOLL_RESIDUAL_MAX=20M NFCOLL_POLICY=$srcdir/tests/policy_shim/ckpt.policy \
  ./tests/mpi/test_resmax call
# Two threads drop each other's residuals (MPI_THREAD_MULTIPLE; skipped
# within this script when the MPI library does not provide it).
sh "$srcdir/tests/mpi_run.sh" 2 NFCOLL_RESIDUAL_MAX=8M ./tests/mpi/test_resmax threads
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 77 ] || { echo "FAILED (exit $rc): test_resmax threads"; nf_failed=1; }
finish
