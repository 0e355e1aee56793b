#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# PMPI interposition, relinked and preloaded:
#  - no policy: an ordinary MPI program prints exactly what it prints
#    without libnfcoll (float, double, int, in place, derived + user op);
#  - a policy routing float sums >= 1 MiB to binary after 5 warm-up calls
#    takes exactly those calls low-bit (NFCOLL_STATS JSON proves it);
#  - different policy files on two ranks disable low-bit with one warning
#    and the run completes.
. "${srcdir:-.}/tests/mpi_common.sh"
lib=$PWD/lib/.libs/libnfcoll.so
plain=./tests/mpi/test_shim_plain
linked=./tests/mpi/test_shim_linked
pol=$srcdir/tests/policy_shim
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
[ -f "$lib" ] || { echo "SKIP: no shared library at $lib (--disable-shared?)"; exit 77; }
# A sanitizer build must have its runtimes preloaded ahead of the library.
san=$(ldd "$lib" | awk '/libasan|libubsan/ {printf "%s:", $3}')
lib="$san$lib"

for np in 1 2 3; do
  nf_tier $np || continue
  out "$tmp/plain.$np" $np $plain transparency
  out "$tmp/pre.$np" $np LD_PRELOAD=$lib $plain transparency
  out "$tmp/link.$np" $np $linked transparency
  same "$tmp/plain.$np" "$tmp/pre.$np" "no policy, preloaded, $np ranks: output identical"
  same "$tmp/plain.$np" "$tmp/link.$np" "no policy, relinked, $np ranks: output identical"
done

for way in preload relink; do
  for np in 2 3; do
    nf_tier $np || continue
    js=$tmp/stats.$way.$np.json
    if [ $way = preload ]; then set -- LD_PRELOAD=$lib $plain; else set -- $linked; fi
    out "$tmp/pol" $np NFCOLL_POLICY=$pol/big_binary.policy NFCOLL_STATS=$js "$@" policy
    b=$(field "$js" binary calls); p=$(field "$js" pmpi calls)
    pl=$(tr -d '\n ' < "$js" | sed -n 's/.*"placement":{"node":[^,]*,"reason":"[^"]*","buffer_bytes":\([0-9]*\),"buffer_resident_bytes":\([0-9]*\).*/\1=\2/p')
    if [ "$b" = $((5 * np)) ] && [ "$p" = $((14 * np)) ] && [ -n "$pl" ] && [ "${pl%=*}" = "${pl#*=}" ]; then
      echo "ok - policy, $way, $np ranks: binary $b calls, pmpi $p, buffer bytes placed=verified $pl"
    else
      echo "FAIL - policy, $way, $np ranks: binary '$b' (want $((5 * np))), pmpi '$p' (want $((14 * np)))"
      cat "$js" "$tmp/pol.err"; nf_failed=1
    fi
  done
done

# NFCOLL_TRACE: one line per call and rank, with the rule that decided it.
out "$tmp/tr" 2 NFCOLL_POLICY=$pol/big_binary.policy NFCOLL_TRACE=$tmp/trace.%r $linked policy
for r in 0 1; do
  calls=$(grep -vc '^#' "$tmp/trace.$r"); bin=$(grep -c ' binary big [^ ]*big_binary.policy:9 - 0 ' "$tmp/trace.$r")
  if [ "$calls" = 19 ] && [ "$bin" = 5 ]; then
    echo "ok - trace of rank $r: $calls calls, $bin binary by rule big (file:9)"
  else
    echo "FAIL - trace of rank $r: $calls calls (want 19), $bin binary (want 5)"; cat "$tmp/trace.$r"; nf_failed=1
  fi
done

# Local DRAM on a machine without a CXL node is the normal case: silent by
# default, one warning when placement was asked for and cannot be honoured.
if [ "$(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l)" = 1 ]; then
  out "$tmp/q" 2 NFCOLL_POLICY=$pol/big_binary.policy $linked policy
  out "$tmp/a" 2 NFCOLL_POLICY=$pol/big_binary.policy NFCOLL_CXL=prefer $linked policy
  q=$(grep -c 'warning' "$tmp/q.err"); a=$(grep -c 'warning.*local DRAM' "$tmp/a.err")
  if [ "$q" = 0 ] && [ "$a" = 1 ]; then
    echo "ok - one NUMA node: no warning by default, one when NFCOLL_CXL=prefer is set"
  else
    echo "FAIL - one NUMA node: $q warnings by default (want 0), $a with NFCOLL_CXL=prefer (want 1)"
    cat "$tmp/q.err" "$tmp/a.err"; nf_failed=1
  fi
else
  echo "SKIP - placement messages: this machine has several NUMA nodes"
fi

# Rank-specific policy files through a tiny wrapper: rank 0 routes float
# sums >= 1 MiB to binary, rank 1 to ternary, to fp32, or has a file that
# does not exist. Whatever differs, every call takes pmpi, one warning, no
# hang; rank 0's 5 low-bit calls (and rank 1's, when it asked) are counted.
for other in big_ternary:10 big_fp32:10 no_such_file:5; do
  name=${other%%:*}; want=${other##*:}
  for way in preload relink; do
    js=$tmp/mismatch.$way.$name.json
    if [ $way = preload ]; then pre="LD_PRELOAD=$lib"; prog=$plain; else pre=; prog=$linked; fi
    out "$tmp/mm" 2 NFCOLL_STATS=$js $pre sh -c \
      "if [ \${OMPI_COMM_WORLD_RANK:-\$PMI_RANK} = 0 ]; then p=big_binary; else p=$name; fi; NFCOLL_POLICY=$pol/\$p.policy exec $prog policy"
    w=$(grep -c "different admission policies" "$tmp/mm.err")
    lb=0
    for r in binary ternary fp32; do lb=$((lb + $(field "$js" $r calls))); done
    f=$(fallback "$js" policy-mismatch)
    if [ "$w" = 1 ] && [ "$lb" = 0 ] && [ "$f" = "$want" ]; then
      echo "ok - rank 1 with $name, $way: one warning, no call off pmpi, $f fallbacks"
    else
      echo "FAIL - rank 1 with $name, $way: warnings $w, calls off pmpi $lb, fallbacks '$f' (want $want)"
      cat "$tmp/mm.err" "$js"; nf_failed=1
    fi
  done
done
finish
