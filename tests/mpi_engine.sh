#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The progress engine (docs/design.md, "The progress engine"): legal MPI
# programs that mix MPI_Iallreduce with other requests, communicators and
# threads never hang, and each nonblocking result is bit for bit the
# blocking call's (tests/mpi/test_engine.c), plain (the program alone
# finishes), relinked and preloaded under a binary policy:
#  - mixed: MPI_Iallreduce with 8 MiB MPI_Isend/Irecv both ways in one
#    Waitall/Waitany/Waitsome/Testall/Wait while the peer receives first,
#    over shared memory without single-copy (Open MPI's
#    btl_vader_single_copy_mechanism=none: every fragment needs the
#    sender's progress);
#  - orders: 2 and 8 communicators issued in another order on every rank;
#  - threads: 16 threads on 16 communicators (fast tier: 4 x 20 calls;
#    full: 16 x 200);
#  - inter: MPI_Iallreduce on an intercommunicator does not block (the
#    peer waits for a message sent after it); counted as pmpi;
#  - query: MPI_Query_thread and MPI_Is_thread_main say what
#    MPI_Init_thread told the program, though libnfcoll asked for more;
#  - NFCOLL_STALL_WARN: a call whose peer is late says so once, naming the
#    communicator, the call index and the late rank.
# Each case at 2 ranks in make check, at 3 in make check-full.
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $*"; }
bad() { echo "FAIL - $*"; nf_failed=1; }
lib=$PWD/lib/.libs/libnfcoll.so
san=$(ldd "$lib" 2>/dev/null | awk '/libasan|libubsan/ {printf "%s:", $3}')
pol=NFCOLL_POLICY=$srcdir/tests/policy_shim/engine.policy
nocma=OMPI_MCA_btl_vader_single_copy_mechanism=none

# case NP HOW WHAT ARGS...: one run of test_engine; every rank says ok.
case_() {
  np=$1 how=$2 what=$3; shift 3
  js=$tmp/s.json; rm -f "$js"
  case $how in
    plain) set -- $nocma ./tests/mpi/test_engine "$@" ;;
    relink) set -- $nocma $pol NFCOLL_STATS=$js ./tests/mpi/test_engine_linked "$@" ;;
    preload) set -- $nocma $pol NFCOLL_STATS=$js LD_PRELOAD=$san$lib ./tests/mpi/test_engine "$@" ;;
  esac
  sh "$srcdir/tests/mpi_run.sh" $np "$@" > "$tmp/o" 2> "$tmp/o.err"
  rc=$?
  [ $rc = 77 ] && { echo "SKIP - $what, $how, $np ranks: $(cat "$tmp/o")"; return 1; }
  if [ $rc = 0 ] && [ "$(grep -c '^ok rank' "$tmp/o")" = $np ] && ! grep -q FAIL "$tmp/o"; then
    b=; [ $how = plain ] || b=", $(field "$js" binary calls) binary calls"
    ok "$what, $how, $np ranks$b: $(grep -m1 '^ok rank' "$tmp/o" | cut -d: -f2-)"
    return 0
  fi
  bad "$what, $how, $np ranks: exit $rc"; cat "$tmp/o" "$tmp/o.err"
  return 1
}

for np in 2 3; do
  nf_tier $np || continue
  for how in plain relink preload; do
    case_ $np $how mixed mixed
  done
  if case_ $np relink orders orders 2 && [ "$(fallback "$js" no-progress)" != 0 ]; then
    bad "orders: calls counted as no-progress"
  fi
  case_ $np relink orders orders 8
  if [ "${NF_TIER:-full}" = fast ]; then case_ $np relink threads threads 4 20
  else case_ $np relink threads threads 16 200; fi
  case_ $np relink inter inter
  case_ $np preload query query single
  case_ $np preload query query funneled
  case_ $np relink query query serialized
done

# A late peer: rank 1 sleeps 3 s before its call; with NFCOLL_STALL_WARN=1
# rank 0 says once which call waits for which rank.
out "$tmp/o" 2 $pol NFCOLL_STALL_WARN=1 NF_TEST_LATE=3 ./tests/mpi/test_engine_linked orders 2
w=$(grep -c "has waited .* for its peers" "$tmp/o.err")
if [ "$(grep -c '^ok rank' "$tmp/o")" = 2 ] && [ "$w" -ge 1 ] &&
   grep -q "nonblocking call 2 on an unnamed communicator of 2 ranks .*ranks 1$" "$tmp/o.err"; then
  ok "NFCOLL_STALL_WARN=1: a 3 s late rank reported: $(grep -m1 'has waited' "$tmp/o.err")"
else
  bad "NFCOLL_STALL_WARN: $w reports"; cat "$tmp/o" "$tmp/o.err"
fi
finish
