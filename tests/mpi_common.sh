# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests/mpi_*.sh tests: run() one MPI program, finish() verdict,
# out()/same() to run one and compare outputs, field()/fallback() for stats,
# nf_tier() to leave a case to make check-full.
srcdir=${srcdir:-.}
# The launcher configure chose (tests/mpi_launcher.sh.in); without it (a
# driver run from elsewhere than the build directory), Open MPI's mpirun.
[ -f ./tests/mpi_launcher.sh ] && . ./tests/mpi_launcher.sh
MPIEXEC=${MPIEXEC:-${MPIRUN:-mpirun}} MPIEXEC_NP=${MPIEXEC_NP:--np}
NF_MPIEXEC_STYLE=${NF_MPIEXEC_STYLE:-ompi} NF_MPI_FAMILY=${NF_MPI_FAMILY:-openmpi}
# nf_need_launcher: SKIP (exit 77) when the launcher does not run here.
nf_need_launcher() {
  [ "$MPIEXEC" != no ] && command -v "$MPIEXEC" >/dev/null 2>&1 && return 0
  echo "SKIP: no MPI launcher ('$MPIEXEC': configure found none for $NF_MPI_FAMILY; set MPIEXEC)"
  exit 77
}
# nf_ompi_only WHAT: SKIP (exit 77), saying why, unless the launcher is
# Open MPI's: WHAT names the Open MPI-only feature the test needs.
nf_ompi_only() {
  [ "$NF_MPIEXEC_STYLE" = ompi ] && return 0
  echo "SKIP: needs $1, which only Open MPI has; this build is $NF_MPI_FAMILY (launcher $MPIEXEC)"
  exit 77
}
nf_failed=0
nf_left=0
# nf_tier NP: whether this tier runs a case on NP ranks. make check sets
# NF_TIER=fast: only the 2-rank cases run; make check-full (NF_TIER=full)
# and a driver run by hand (NF_TIER unset) run every case. finish() counts
# the cases left out. In loops: nf_tier $np || continue; else
# nf_tier 3 && run 3 ...
nf_tier() {
  if [ "${NF_TIER:-full}" != fast ] || [ "$1" = 2 ]; then return 0; fi
  nf_left=$((nf_left + 1))
  return 1
}
run() {
  sh "$srcdir/tests/mpi_run.sh" "$@"
  rc=$?
  if [ $rc -eq 77 ]; then exit 77; fi
  if [ $rc -ne 0 ]; then echo "FAILED (exit $rc): $*"; nf_failed=1; fi
}
finish() {
  [ $nf_left = 0 ] ||
    echo "note: NF_TIER=fast: left $nf_left cases on other rank counts than 2 to make check-full"
  exit $nf_failed
}
out() { # out FILE NP [VAR=VAL]... PROG ARGS: run, stdout to FILE, stderr to FILE.err
  f=$1; shift
  sh "$srcdir/tests/mpi_run.sh" "$@" > "$f" 2> "$f.err"
  rc=$?
  if [ $rc -eq 77 ]; then cat "$f"; exit 77; fi
  [ $rc -eq 0 ] || { echo "FAILED (exit $rc): $*"; cat "$f" "$f.err"; nf_failed=1; }
}
same() { # same FILE1 FILE2 WHAT: ok if byte-identical
  if cmp -s "$1" "$2"; then echo "ok - $3"; else echo "FAIL - $3"; diff "$1" "$2"; nf_failed=1; fi
}
# From an NFCOLL_STATS JSON file: field JSON ROUTE KEY, fallback JSON REASON.
field() {
  tr -d '\n ' < "$1" | sed -n "s/.*\"$2\":{[^}]*\"$3\":\([0-9]*\).*/\1/p"
}
fallback() { tr -d '\n ' < "$1" | sed -n "s/.*\"fallbacks\":{[^}]*\"$2\":\([0-9]*\).*/\1/p"; }
