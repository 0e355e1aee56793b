#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A run that dies leaves a usable trace (NFCOLL_TRACE): records reach the
# file within 64 KiB or a second, whole lines only.
#  - idle: K calls, 1.5 s without a call, one call, J calls, then rank 0
#    calls MPI_Abort and the other ranks are killed: every rank's trace
#    holds its header and at least the K + 1 calls up to the one after the
#    pause (a trace flushed only when its buffer filled held nothing);
#  - volume: N calls (over 100 KiB of trace per rank), then the abort:
#    each trace lacks at most 64 KiB of the N calls.
# Every line on disk is a whole record, with as many fields as the header
# names (whatever the trace format's version).
. "${srcdir:-.}/tests/faults_common.sh"
np=2 K=50 J=20 N=3000
# lines FILE: records (whole lines, as many fields as the header names), or "bad"
lines() {
  [ -f "$1" ] || { echo missing; return; }
  awk '/^# rank / { f = NF - 1 } /^#/ { next } NF != f { bad = 1 } { n++ }
       END { print bad || !f ? "bad" : n + 0 }' "$1"
}
whole() { [ -z "$(tail -c 1 "$1")" ] || [ ! -s "$1" ]; } # ends with a newline (or is empty)

mpi $np NFCOLL_TRACE="$tmp/i.%r" ./tests/mpi/test_faults abort-idle $K $J
[ $rc != 0 ] || { bad "abort-idle: exit 0, want the abort's"; cat "$tmp/out"; }
for r in $(seq 0 $((np - 1))); do
  n=$(lines "$tmp/i.$r"); h=$(grep -c '^# libnfcoll trace v[0-9]' "$tmp/i.$r" 2>/dev/null)
  if [ "$h" = 1 ] && [ "$n" != bad ] && [ "$n" != missing ] && [ "$n" -ge $((K + 1)) ] && whole "$tmp/i.$r"; then
    ok "abort after a pause: rank $r's trace has $n of $((K + 1 + J)) calls (at least $((K + 1)))"
  else
    bad "abort after a pause: rank $r's trace: header $h, calls '$n', want at least $((K + 1))"
    cat "$tmp/out"
  fi
done

mpi $np NFCOLL_TRACE="$tmp/v.%r" ./tests/mpi/test_faults abort-volume $N
[ $rc != 0 ] || { bad "abort-volume: exit 0, want the abort's"; cat "$tmp/out"; }
for r in $(seq 0 $((np - 1))); do
  f=$tmp/v.$r; n=$(lines "$f")
  if [ "$n" = bad ] || [ "$n" = missing ] || [ "$n" = 0 ] || ! whole "$f"; then
    bad "abort after $N calls: rank $r's trace is $n"; continue
  fi
  # bytes of the calls missing, at the average record length on disk
  rec=$(grep -v '^#' "$f" | wc -c)
  lost=$(( (N - n) * rec / n ))
  if [ $lost -le 65536 ]; then
    ok "abort after $N calls: rank $r's trace has $n calls, about $lost bytes lost (<= 65536)"
  else
    bad "abort after $N calls: rank $r's trace has $n calls, about $lost bytes lost (> 65536)"
  fi
done
finish
