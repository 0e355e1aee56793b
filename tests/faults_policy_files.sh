#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A policy path that names a FIFO, a directory or a device is refused at
# once, with one error naming the file and what it is: by nfcoll_policy
# check (exit 1), and at MPI_Init, where opening a FIFO used to block every
# rank forever. The MPI run completes with every call on pmpi.
. "${srcdir:-.}/tests/faults_common.sh"
mkfifo "$tmp/fifo" || { echo "SKIP: mkfifo failed here"; exit 77; }
mkdir "$tmp/dir" || exit 99

for f in "$tmp/fifo:a FIFO" "$tmp/dir:a directory" "/dev/zero:a character device"; do
  path=${f%%:*}; kind=${f#*:}
  timeout 20 ./tools/nfcoll_policy check "$path" > "$tmp/check" 2>&1; rc=$?
  sed 's/^/  /' "$tmp/check"
  if [ $rc = 1 ] && grep -qF "$path: error: not a regular file ($kind)" "$tmp/check"; then
    ok "nfcoll_policy check $path: exit 1, refused as $kind"
  else
    bad "nfcoll_policy check $path: exit $rc (124: it hung), want 1 and 'not a regular file ($kind)'"
  fi
done

# Within 120 s (it used to hang until killed); one error line, from rank 0.
for np in 1 3; do
  NF_TEST_TIMEOUT=120 mpi $np NFCOLL_POLICY="$tmp/fifo" NFCOLL_STATS="$tmp/s.json" \
    ./tests/mpi/test_faults calls 20
  errors=$(grep -c 'error:' "$tmp/out")
  named=$(grep -cF "libnfcoll[0]: error: $tmp/fifo:0: not a regular file (a FIFO)" "$tmp/out")
  pmpi=$(route_calls "$tmp/s.json" pmpi)
  others=0
  for r in fp32 binary ternary; do others=$((others + $(route_calls "$tmp/s.json" $r))); done
  if [ $rc = 0 ] && [ "$errors" = 1 ] && [ "$named" = 1 ] && [ "$pmpi" -ge $((20 * np)) ] &&
     [ "$others" = 0 ]; then
    ok "$np ranks, NFCOLL_POLICY=fifo: completes, one error naming it, $pmpi calls all pmpi"
  else
    bad "$np ranks, NFCOLL_POLICY=fifo: exit $rc, $errors error lines ($named naming the FIFO)," \
      "pmpi '$pmpi' calls, $others not pmpi"
    cat "$tmp/out"
  fi
  rm -f "$tmp/s.json"
done
finish
