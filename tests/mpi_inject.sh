#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Issue 55: libnfcoll starts no collective on a program's communicator
# outside a blocking call every rank is in (docs/design.md, "Communicator
# setup"), so a legal program's own collectives that follow its first
# MPI_Iallreduce on a communicator never cross-match with libnfcoll's.
# tests/mpi/test_inject, under a policy sending float sums of 1 MiB or more
# binary, relinked and preloaded, on communicators made by MPI_Comm_dup,
# MPI_Comm_split, MPI_Comm_create_group (set up in the constructor: the
# nonblocking float sums run binary on the thread) and MPI_Comm_idup (not
# seen made: MPI's own PMPI_Iallreduce until its first blocking call,
# counted as fallback 'setup'): each case's first MPI_Iallreduce followed
# by MPI_Comm_dup, MPI_Comm_idup, MPI_Ibarrier, an int MPI_Iallreduce,
# MPI_Ibcast, MPI_Comm_split, MPI_Comm_split_type; 10 rounds of mixed
# nonblocking collectives and a ring under MPI_Waitsome (also with a late
# rank, and under a 1 ms SIGALRM timer whose handler never runs on a
# libnfcoll worker); 12 mixed calls with an Ibarrier outstanding; two
# threads at once.
# Every result exact. Then NFCOLL_STALL_WARN reports a first job that waits.
# Fast tier: 2 ranks; full tier: 3 ranks too, and 3 rounds of every case
# with two CPU-bound processes beside the run.
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d) || exit 99
hogs=
trap 'for p in $hogs; do kill $p 2>/dev/null; done; rm -rf "$tmp"' EXIT
ok() { echo "ok - $*"; }
bad() { echo "FAIL - $*"; nf_failed=1; }
pol=$srcdir/tests/policy_shim/iallreduce.policy
lib=$PWD/lib/.libs/libnfcoll.so
san=$(ldd "$lib" 2>/dev/null | awk '/libasan|libubsan/ {printf "%s:", $3}')
export NF_TEST_TIMEOUT=${NF_TEST_TIMEOUT:-120}

# inject NP WAY MAKE ROUNDS LABEL
inject() {
  np=$1 way=$2 mk=$3 rounds=$4 label=$5
  js=$tmp/s.$np.$way.$mk.json; rm -f "$js"
  case $way in
    relink) prog=./tests/mpi/test_inject_linked; pre= ;;
    preload) prog=./tests/mpi/test_inject; pre=LD_PRELOAD=$san$lib ;;
  esac
  out "$tmp/o" "$np" $pre NFCOLL_POLICY="$pol" NFCOLL_STATS="$js" "$prog" all "$mk" "$rounds"
  n=$(grep -c '^ok rank' "$tmp/o")
  b=$(field "$js" binary calls); s=$(fallback "$js" setup); p=$(fallback "$js" no-progress)
  # set up in the constructor: binary nonblocking calls and no 'setup'
  # fallback; made by MPI_Comm_idup: some 'setup' fallbacks, and binary
  # after each communicator's first blocking call
  case $mk in
    idup) routes=$([ "${s:-0}" -gt 0 ] && [ "${b:-0}" -gt 0 ] && echo yes) ;;
    *) routes=$([ "${s:-1}" = 0 ] && [ "${b:-0}" -gt 0 ] && echo yes) ;;
  esac
  if [ "$n" = "$np" ] && [ "$routes" = yes ] && [ "${p:-1}" = 0 ]; then
    ok "$label: every case, $np ranks, $way, C by $mk, $rounds round(s): $(sed -n 's/^ok rank 0: //p' "$tmp/o"), binary calls $b, setup fallbacks $s"
  else
    bad "$label: $np ranks, $way, C by $mk: $n of $np ranks ok, binary '$b', setup '$s', no-progress '$p'"
    grep -v '^ok' "$tmp/o" | head -20; tail -20 "$tmp/o.err"
  fi
}

for np in 2 3; do
  nf_tier $np || continue
  for mk in dup split create_group idup; do
    inject $np relink $mk 1 "first MPI_Iallreduce, then another collective"
  done
  inject $np preload dup 1 "first MPI_Iallreduce, then another collective"
done

# The stall warning for a process's first job (Open MPI's first MPI_Wtime
# reads 0.0: the engine's own clock is monotonic).
out "$tmp/o" 2 NFCOLL_POLICY="$pol" NFCOLL_STALL_WARN=0.5 ./tests/mpi/test_inject_linked stall dup
if grep -q "nonblocking call 1 on .* has waited" "$tmp/o.err" && [ "$(grep -c '^ok rank' "$tmp/o")" = 2 ]; then
  ok "NFCOLL_STALL_WARN=0.5 reports the first job, which waits 2 s for rank 1"
else
  bad "no stall warning for a first job"; cat "$tmp/o" "$tmp/o.err"
fi

# Full tier: under load. Two CPU-bound processes beside every case, 3
# rounds each, started and ended by pid.
if [ "${NF_TIER:-full}" = full ]; then
  for i in 1 2; do (while :; do :; done) & hogs="$hogs $!"; done
  for np in 2 3; do
    for mk in dup idup; do
      inject $np relink $mk 3 "under two CPU hogs"
    done
  done
  for p in $hogs; do kill $p 2>/dev/null; done; hogs=
fi
finish
