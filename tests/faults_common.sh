# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests/*faults*.sh scripts: verdicts, an MPI run kept in
# $tmp/out, and fields of an NFCOLL_STATS JSON file.
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nfcoll-faults.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $*"; }
bad() { echo "FAIL - $*"; nf_failed=1; }
# mpi NP [VAR=VALUE]... PROG [ARGS]: output (both streams) in $tmp/out, exit in $rc.
mpi() {
  sh "$srcdir/tests/mpi_run.sh" "$@" > "$tmp/out" 2>&1
  rc=$?
  [ $rc = 77 ] && { cat "$tmp/out"; exit 77; }
}
# route_calls JSON ROUTE, fallback_count JSON REASON
route_calls() { tr -d '\n ' < "$1" | sed -n "s/.*\"$2\":{\"calls\":\([0-9]*\).*/\1/p"; }
fallback_count() { tr -d '\n ' < "$1" | sed -n "s/.*\"fallbacks\":{[^}]*\"$2\":\([0-9]*\).*/\1/p"; }
