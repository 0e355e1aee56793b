#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A rule for every datatype the policy language accepts decides a real call
# of that datatype, relinked and preloaded: the trace names the rule.
. "${srcdir:-.}/tests/mpi_common.sh"
prog=./tests/mpi/test_datatypes
lib=$PWD/lib/.libs/libnfcoll.so
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
san=$(ldd "$lib" 2>/dev/null | awk '/libasan|libubsan/ {printf "%s:", $3}')
$prog --policy "$tmp/dt.policy" || { echo "FAIL - cannot write the policy"; exit 1; }
./tools/nfcoll_policy check "$tmp/dt.policy" > "$tmp/check" 2>&1 ||
  { echo "FAIL - nfcoll_policy check refuses the generated policy"; cat "$tmp/check"; exit 1; }
for way in relink preload; do
  if [ $way = preload ]; then pre="LD_PRELOAD=$san$lib"; p=./tests/mpi/test_datatypes_plain
  else pre=; p=$prog; fi
  rm -f "$tmp"/trace.*
  run 2 NFCOLL_POLICY="$tmp/dt.policy" NFCOLL_TRACE="$tmp/trace.%r" $pre $p --calls "$tmp/want"
  for r in 0 1; do
    awk '!/^#/ {print $2, $9}' "$tmp/trace.$r" > "$tmp/got.$r" 2>/dev/null
    n=$(wc -l < "$tmp/want")
    if [ "$n" -gt 40 ] && cmp -s "$tmp/want" "$tmp/got.$r"; then
      echo "ok - $way, rank $r: $n calls, each decided by its datatype's rule"
    else
      echo "FAIL - $way, rank $r: trace rules differ from the datatypes called"
      diff "$tmp/want" "$tmp/got.$r" | head -20; nf_failed=1
    fi
  done
done

# A freed derived type whose handle MPI gives to one of another size: the
# second call's bytes are its own, not the first's (the decision cache is
# not keyed on a handle that can be reused).
rm -f "$tmp"/trace.*
out "$tmp/reuse.out" 2 NFCOLL_TRACE="$tmp/trace.%r" $prog --reuse
bytes=$(awk '!/^#/ && $5 == "derived" {printf "%s ", $7}' "$tmp/trace.0" 2>/dev/null)
if grep -q '^note:' "$tmp/reuse.out"; then
  echo "SKIP - derived type handle reuse: $(sed -n 's/^note: //p' "$tmp/reuse.out")"
elif [ "$bytes" = "32 128 " ]; then
  echo "ok - a reused derived type handle: bytes 32 then 128, as the types say"
else
  echo "FAIL - a reused derived type handle: trace bytes '$bytes', expected '32 128 '"
  cat "$tmp/reuse.out" "$tmp/trace.0"; nf_failed=1
fi
finish
