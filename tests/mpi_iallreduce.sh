#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Nonblocking calls (NF_Iallreduce, MPI_Iallreduce) and the progress thread
# (docs/design.md, "The progress engine"):
#  - test_iallreduce same ROUTE: binary, ternary, int4, fp32 and admission with
#    bound regions, each call nonblocking bit for bit the blocking one on
#    1-4 ranks, completed by Waitall, Test polling, Waitany, Waitsome,
#    Testall, interleaved with blocking calls, or freed (MPI_Request_free;
#    not admission on one rank, whose calls are MPI's own PMPI_Iallreduce);
#    the stats show the progress thread ran them (no no-progress fallback)
#    and count every call on its route;
#  - one rank per node (binary, int4, fp32): the leaders' exchanges on the
#    thread, bit for bit;
#  - NFCOLL_PROGRESS=off: the same results, each nonblocking call counted
#    once under the no-progress fallback;
#  - NFCOLL_PROGRESS_CPU pins the thread, or warns once when it cannot;
#  - MPI_Wait and MPI_Waitall on the thread's calls sleep (the waiting
#    thread's CPU time under a tenth of a 300 ms wait);
#  - MPI_Comm_free and MPI_Finalize with requests outstanding; a PMPI failure
#    (stand-ins, every rank) completes the requests with its code;
#  - test_ishim, an ordinary program calling MPI_Iallreduce: plain, preloaded
#    and relinked, its results bit for bit its MPI_Allreduce's; under a
#    policy the float sums take binary on the thread;
#  - the Fortran MPI_IALLREDUCE (use mpi, mpif.h, use mpi_f08), preloaded
#    (SKIP with configure's reason when there is no working mpifort).
. "${srcdir:-.}/tests/mpi_common.sh"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok - $*"; }
bad() { echo "FAIL - $*"; nf_failed=1; }
prog=./tests/mpi/test_iallreduce

for np in 1 2 3 4; do
  nf_tier $np || continue
  for r in binary ternary int4 fp32 policy; do
    pol=; [ $r = policy ] && pol=NFCOLL_POLICY=$srcdir/tests/policy_shim/regions.policy
    js=$tmp/s.$r.$np.json; rm -f "$js"
    out "$tmp/o" $np $pol NFCOLL_STATS=$js $prog same $r
    nb=$(sed -n 's/^nonblocking calls: //p' "$tmp/o" | head -1)
    np_=$(fallback "$js" no-progress); f=$(field "$js" fp32 calls)
    # per rank: 64 calls on X and Y, and 16 fp32 fences; admission: binary and ternary used
    case $r in
      binary|ternary|int4) got=$(field "$js" $r calls); want=$((64 * np)) ;;
      fp32) got=$f; want=$((80 * np)) ;;
      policy) b=$(field "$js" binary calls); t=$(field "$js" ternary calls)
              got=$([ "${b:-0}" -gt 0 ] && [ "${t:-0}" -gt 0 ] && echo used); want=used
              [ $np = 1 ] && want=$got ;; # one rank: admission sends every call to pmpi
    esac
    if [ "$nb" = 30 ] && [ "$np_" = 0 ] && [ "$got" = "$want" ] && ! grep -q FAIL "$tmp/o"; then
      ok "$r, $np ranks: 30 nonblocking calls per rank bit for bit the blocking ones, on the thread"
    else
      bad "$r, $np ranks: nonblocking '$nb', no-progress '$np_', $r calls '$got' (want $want)"
      cat "$tmp/o" "$tmp/o.err"
    fi
  done
  js=$tmp/off.$np.json
  out "$tmp/o" $np NFCOLL_PROGRESS=off NFCOLL_STATS=$js $prog same binary
  np_=$(fallback "$js" no-progress)
  if [ "$np_" = $((30 * np)) ] && ! grep -q FAIL "$tmp/o"; then
    ok "NFCOLL_PROGRESS=off, $np ranks: same results, $np_ calls counted as no-progress"
  else
    bad "NFCOLL_PROGRESS=off, $np ranks: no-progress '$np_' (want $((30 * np)))"; cat "$tmp/o"
  fi
done

# One rank per node (NFCOLL_RANKS_PER_NODE=1): every call crosses nodes, the
# leaders' exchanges on the thread, bit for bit the blocking calls.
for np in 2 3; do
  nf_tier $np || continue
  for r in binary int4 fp32; do
    out "$tmp/o" $np NFCOLL_RANKS_PER_NODE=1 $prog same $r
    nb=$(sed -n 's/^nonblocking calls: //p' "$tmp/o" | head -1)
    if [ "$nb" = 30 ] && ! grep -q FAIL "$tmp/o"; then
      ok "$r, $np ranks on $np nodes: nonblocking calls bit for bit the blocking ones"
    else
      bad "$r, $np ranks on $np nodes: nonblocking '$nb'"; cat "$tmp/o" "$tmp/o.err"
    fi
  done
done

# NFCOLL_PROGRESS_CPU: pinned to CPU 0, silently; to a CPU this machine
# lacks, one warning per rank and the calls still run on the thread.
for cpu in 0 4000; do
  js=$tmp/cpu.json
  out "$tmp/o" 2 NFCOLL_PROGRESS_CPU=$cpu NFCOLL_STATS=$js $prog same fp32
  w=$(grep -c "NFCOLL_PROGRESS_CPU=$cpu: cannot pin" "$tmp/o.err"); want=0
  [ $cpu = 0 ] || want=2
  if [ "$w" = $want ] && [ "$(fallback "$js" no-progress)" = 0 ] && ! grep -q FAIL "$tmp/o"; then
    ok "NFCOLL_PROGRESS_CPU=$cpu: $w warnings, calls on the thread"
  else
    bad "NFCOLL_PROGRESS_CPU=$cpu: $w warnings (want $want)"; cat "$tmp/o" "$tmp/o.err"
  fi
done

# A malformed NFCOLL_PROGRESS: one warning (rank 0), the default (thread).
out "$tmp/o" 2 NFCOLL_PROGRESS=bogus NFCOLL_STATS=$tmp/b.json $prog same fp32
w=$(grep -c "NFCOLL_PROGRESS='bogus' is not valid" "$tmp/o.err")
if [ "$w" = 1 ] && [ "$(fallback "$tmp/b.json" no-progress)" = 0 ]; then
  ok "NFCOLL_PROGRESS=bogus: one warning, calls on the thread"
else
  bad "NFCOLL_PROGRESS=bogus: $w warnings (want 1)"; cat "$tmp/o.err"
fi

out "$tmp/o" 2 NFCOLL_STATS=$tmp/l.json $prog lifetime
[ "$(grep -c '^ok rank' "$tmp/o")" = 2 ] && ok "MPI_Comm_free and MPI_Finalize with requests outstanding" ||
  { bad "lifetime"; cat "$tmp/o"; }
out "$tmp/o" 2 NFCOLL_STATS=$tmp/sw.json $prog sleepwait
if [ "$(grep -c '^ok rank' "$tmp/o")" = 2 ] && [ "$(fallback "$tmp/sw.json" no-progress)" = 0 ]; then
  ok "MPI_Wait, MPI_Waitall on the thread's calls sleep: $(grep -m1 waited "$tmp/o")"
else
  bad "sleepwait (no-progress '$(fallback "$tmp/sw.json" no-progress)')"; cat "$tmp/o"
fi
out "$tmp/o" 2 NFCOLL_STATS=$tmp/ck.json $prog ckpt "$tmp/ck"
if [ "$(grep -c '^ok rank' "$tmp/o")" = 2 ] && [ "$(fallback "$tmp/ck.json" no-progress)" = 0 ]; then
  ok "NF_Residuals_save with a nonblocking call in flight on the thread waits for it"
else
  bad "ckpt (no-progress '$(fallback "$tmp/ck.json" no-progress)')"; cat "$tmp/o"
fi
out "$tmp/o" 2 NFCOLL_STATS=$tmp/e.json NFCOLL_RANKS_PER_NODE=1 $prog error
[ "$(grep -c '^ok rank' "$tmp/o")" = 2 ] && ok "PMPI failures complete every rank's request with the code" ||
  { bad "error"; cat "$tmp/o"; }
# Three one-rank nodes: the verdict is a PMPI_Allgather, not a Sendrecv.
if nf_tier 3; then
  out "$tmp/o" 3 NFCOLL_STATS=$tmp/e3.json NFCOLL_RANKS_PER_NODE=1 $prog error
  [ "$(grep -c '^ok rank' "$tmp/o")" = 3 ] &&
    ok "3 nodes: PMPI failures of the allgather verdict complete every rank's request with the code" ||
    { bad "error on 3 nodes"; cat "$tmp/o"; }
fi

# The shim: an ordinary program, plain, preloaded and relinked.
lib=$PWD/lib/.libs/libnfcoll.so
san=$(ldd "$lib" 2>/dev/null | awk '/libasan|libubsan/ {printf "%s:", $3}')
pol=$srcdir/tests/policy_shim/iallreduce.policy
for w in plain preload relink; do
  case $w in
    plain) set -- ./tests/mpi/test_ishim ;;
    preload) set -- LD_PRELOAD=$san$lib ./tests/mpi/test_ishim ;;
    relink) set -- ./tests/mpi/test_ishim_linked ;;
  esac
  js=$tmp/shim.$w.json; rm -f "$js"
  [ $w = plain ] || set -- NFCOLL_POLICY=$pol NFCOLL_STATS=$js "$@"
  out "$tmp/o" 2 "$@"
  n=$(sed -n 's/^float iallreduces: //p' "$tmp/o" | head -1)
  if grep -q FAIL "$tmp/o" || [ -z "$n" ]; then bad "MPI_Iallreduce, $w"; cat "$tmp/o"; continue; fi
  [ $w = plain ] && { ok "MPI_Iallreduce, plain: results as MPI_Allreduce's"; continue; }
  b=$(field "$js" binary calls); p=$(fallback "$js" no-progress)
  if [ "$b" = $((2 * 2 * n)) ] && [ "$p" = 0 ]; then
    ok "MPI_Iallreduce, $w: $b binary calls (half nonblocking, on the thread), bit for bit"
  else
    bad "MPI_Iallreduce, $w: binary '$b' (want $((4 * n))), no-progress '$p'"; cat "$tmp/o" "$js"
  fi
done

# Fortran, preloaded: every REAL sum of the three styles binary, half of
# them nonblocking on the thread, bit for bit.
fprog=./tests/mpi/test_fortran_iallreduce # not f: out() sets f
if [ -n "${NF_FORTRAN_SKIP:-}" ]; then
  echo "SKIP: the Fortran case: $NF_FORTRAN_SKIP"
elif [ ! -x $fprog ]; then
  bad "$fprog was not built although configure found mpifort"
else
  # MPI_INIT_THREAD(MPI_THREAD_MULTIPLE), then plain MPI_INIT: libnfcoll's
  # Fortran MPI_INIT asks for the thread level as C's does (no no-progress)
  for init in thread plain; do
    js=$tmp/f.$init.json
    pl=; [ $init = plain ] && pl=NF_TEST_PLAIN_INIT=1
    out "$tmp/o" 2 LD_PRELOAD=$san$lib NFCOLL_POLICY=$srcdir/tests/policy_shim/fortran_real.policy \
      NFCOLL_STATS=$js $pl $fprog
    n=$(sed -n 's/^ *fortran iallreduces: //p' "$tmp/o" | head -1)
    b=$(field "$js" binary calls); p=$(fallback "$js" no-progress)
    if [ "$(grep -c '^ *PASS rank' "$tmp/o")" = 2 ] && [ -n "$n" ] && [ "$b" = $((4 * n)) ] && [ "$p" = 0 ]; then
      ok "Fortran MPI_IALLREDUCE (use mpi, mpif.h, mpi_f08), MPI_INIT $init, preloaded: $b binary calls, bit for bit"
    else
      bad "Fortran MPI_IALLREDUCE, MPI_INIT $init: binary '$b' (want 4 x '$n'), no-progress '$p'"; cat "$tmp/o" "$js"
    fi
  done
fi
finish
