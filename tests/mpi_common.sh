# Sourced by the tests/mpi_*.sh tests: run() one MPI program, finish() verdict,
# out()/same() to run one and compare outputs, field()/fallback() for stats.
srcdir=${srcdir:-.}
nf_failed=0
run() {
  sh "$srcdir/tests/mpi_run.sh" "$@"
  rc=$?
  if [ $rc -eq 77 ]; then exit 77; fi
  if [ $rc -ne 0 ]; then echo "FAILED (exit $rc): $*"; nf_failed=1; fi
}
finish() { exit $nf_failed; }
out() { # out FILE NP [VAR=VAL]... PROG ARGS: run, stdout to FILE, stderr to FILE.err
  f=$1; shift
  sh "$srcdir/tests/mpi_run.sh" "$@" > "$f" 2> "$f.err"
  rc=$?
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
