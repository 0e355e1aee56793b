#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The Fortran entry points (lib/api/fortran.c) with tests/mpi/test_fortran,
# a Fortran program in the three styles (use mpi, mpif.h, use mpi_f08) that
# starts MPI in three ways (MPI_INIT, MPI_INIT_THREAD, mpi_f08's MPI_Init),
# preloaded and relinked, on 2 and 3 ranks:
#  - no policy: output byte-identical to the plain program's; with
#    NFCOLL_STATS too, and every Fortran allreduce is counted (pmpi), so
#    libnfcoll saw them;
#  - tests/policy_shim/fortran_real.policy (REAL sums of 1 MiB or more
#    binary): exactly those calls take binary (NFCOLL_STATS JSON), every rank
#    gets G-Binary's result there and the exact one elsewhere, no warning.
. "${srcdir:-.}/tests/mpi_common.sh"
if [ -n "${NF_FORTRAN_SKIP:-}" ]; then
  echo "SKIP: Fortran test not built: $NF_FORTRAN_SKIP"; exit 77
fi
nf_need_launcher
lib=$PWD/lib/.libs/libnfcoll.so
plain=./tests/mpi/test_fortran_plain
linked=./tests/mpi/test_fortran_linked
pol=$srcdir/tests/policy_shim/fortran_real.policy
[ -f "$lib" ] || { echo "SKIP: no shared library at $lib (--disable-shared?)"; exit 77; }
for p in $plain $linked; do
  [ -x "$p" ] || { echo "FAIL - $p was not built although configure found mpifort"; exit 1; }
done
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
san=$(ldd "$lib" | awk '/libasan|libubsan/ {printf "%s:", $3}')
lib="$san$lib"

# way WAY: the program and settings for plain, preload or relink.
way() {
  case $1 in
    plain) set -- $plain ;;
    preload) set -- LD_PRELOAD=$lib $plain ;;
    relink) set -- $linked ;;
  esac
  echo "$@"
}
# calls FILE KIND: the program's own count of its allreduces by route.
calls() { sed -n "s/^calls: binary \([0-9]*\) pmpi \([0-9]*\)$/\\$2/p" "$1"; }

for np in 2 3; do
  out "$tmp/plain.$np" $np $(way plain) transparency mpi
  n=$(calls "$tmp/plain.$np" 2)
  [ "${n:-0}" -gt 0 ] || { echo "FAIL - plain run, $np ranks: no allreduce counted"; nf_failed=1; }
  for w in preload:thread relink:f08 preload:f08 relink:mpi; do
    js=$tmp/stats.$np.json; stats=
    # The first two without any NFCOLL_* setting, the other two with stats.
    case $w in preload:f08|relink:mpi) stats=NFCOLL_STATS=$js ;; esac
    rm -f "$js"
    out "$tmp/out" $np $stats $(way ${w%:*}) transparency ${w#*:}
    same "$tmp/plain.$np" "$tmp/out" \
      "no policy${stats:+, stats}, ${w%:*}, start ${w#*:}, $np ranks: output identical"
    [ -n "$stats" ] || continue
    p=$(field "$js" pmpi calls)
    if [ "$p" = $((n * np)) ]; then
      echo "ok - no policy, ${w%:*}, $np ranks: libnfcoll saw all $p Fortran calls (pmpi)"
    else
      echo "FAIL - no policy, ${w%:*}, $np ranks: pmpi calls '$p' (want $((n * np)))"
      cat "$js" "$tmp/out.err"; nf_failed=1
    fi
  done
done

for run in preload:mpi:2 preload:thread:3 preload:f08:2 relink:mpi:3 relink:thread:2 relink:f08:3; do
  w=${run%%:*}; start=${run#*:}; start=${start%:*}; np=${run##*:}
  js=$tmp/policy.$w.$start.json
  out "$tmp/pol" $np NFCOLL_POLICY=$pol NFCOLL_STATS=$js $(way $w) policy $start
  what="policy, $w, start $start, $np ranks"
  wb=$(calls "$tmp/pol" 1); wp=$(calls "$tmp/pol" 2)
  b=$(field "$js" binary calls); p=$(field "$js" pmpi calls)
  lines=$(grep -c ': want ' "$tmp/pol"); bad=$(grep ': want ' "$tmp/pol" | grep -cv 'want \(.*\) got \1$')
  warn=$(grep -c warning "$tmp/pol.err")
  if [ "${wb:-0}" -gt 0 ] && [ "${wp:-0}" -gt 0 ] && [ "$lines" = $((wb + wp)) ] && [ "$bad" = 0 ] &&
     [ "$b" = $((wb * np)) ] && [ "$p" = $((wp * np)) ] && [ "$warn" = 0 ]; then
    echo "ok - $what: binary $b calls, pmpi $p, each with the result of its route"
  else
    echo "FAIL - $what: binary '$b' (want $((wb * np))), pmpi '$p' (want $((wp * np))), $bad wrong results, $warn warnings"
    cat "$tmp/pol" "$tmp/pol.err" "$js"; nf_failed=1
  fi
done
finish
