# Sourced by the tests/mpi_*.sh tests: run() one MPI program, finish() verdict.
srcdir=${srcdir:-.}
nf_failed=0
run() {
  sh "$srcdir/tests/mpi_run.sh" "$@"
  rc=$?
  if [ $rc -eq 77 ]; then exit 77; fi
  if [ $rc -ne 0 ]; then echo "FAILED (exit $rc): $*"; nf_failed=1; fi
}
finish() { exit $nf_failed; }
