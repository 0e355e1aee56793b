#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shared segments in /dev/shm (lib/core/shm.c), with hostile neighbours:
#  - kill: a rank killed (SIGKILL) while local rank 0 fills a large segment
#    (the first binary call, 64 Mi floats: a 65 MiB segment) leaves no
#    nfcoll object behind: the name is gone before the fill. The victim
#    writes the names rank 0 has mapped before it dies; none may exist.
#    Once as rank 0 itself, once as rank 1.
#  - others: nfcoll.* objects someone else holds survive a run, which
#    neither collides with them nor deletes them, and runs fp32.
# As root, the script runs itself again in private mount and PID
# namespaces with a /dev/shm of its own, as a job in a container would:
# there the whole /dev/shm listing must be the same after each run, PIDs
# are small and predictable, so "others" also holds every name of the old
# scheme (nfcoll.PID.SEQ) a run could draw, and three more cases run:
#  - taken: the first name libnfcoll draws (made predictable by
#    tests/libnf_fixed_random preloaded) is held by another user: another
#    name is drawn, the run takes fp32, the other object stays;
#  - all taken: every name drawn is held: one error naming the object and
#    the real errno (File exists), a warning that is not "out of memory",
#    every call on pmpi, the other object stays;
#  - read-only /dev/shm: one error with the real errno.
# NF_FAULTS_NS=no runs it in the shared /dev/shm even as root.
if [ -z "$NF_FAULTS_NS" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
   unshare --mount --pid --fork --mount-proc true 2>/dev/null; then
  NF_FAULTS_NS=inside exec unshare --mount --pid --fork --mount-proc sh "$0" "$@"
fi
. "${srcdir:-.}/tests/faults_common.sh"
private=0
if [ "$NF_FAULTS_NS" = inside ] && [ $$ = 1 ]; then # never over the host's /dev/shm
  mount -t tmpfs -o size=1g,mode=1777 nfcoll-test /dev/shm && private=1 ||
    echo "note: cannot mount a private /dev/shm: running with the shared one"
fi
[ $private = 1 ] && echo "private mount and PID namespaces, /dev/shm of our own" ||
  echo "note: the shared /dev/shm (not root, or no namespaces): the taken, all-taken and read-only cases are skipped"
listing() { ls -a /dev/shm | grep '^nfcoll\.' | sort; }
same_listing() { # same_listing WHAT: in private, /dev/shm's nfcoll.* unchanged
  [ $private = 1 ] || return 0
  listing > "$tmp/after"
  if cmp -s "$tmp/before" "$tmp/after"; then ok "$1: /dev/shm holds the same nfcoll objects as before"
  else bad "$1: /dev/shm changed:"; diff "$tmp/before" "$tmp/after" | head; fi
}
nobody=65534

# ---- kill during the fill
M=67108864
for victim in 0 1; do
  listing > "$tmp/before"
  rm -f "$tmp/names"
  mpi 2 NFCOLL_EF=off ./tests/mpi/test_faults kill-fill $victim $M "$tmp/names"
  what="rank $victim killed during the fill"
  if [ ! -s "$tmp/names" ] || grep -q "no kill during the fill" "$tmp/out"; then
    bad "$what: the kill did not happen (exit $rc)"; cat "$tmp/out" "$tmp/names" 2>/dev/null; continue
  fi
  grown=$(sed -n 's/^# killed when .* grown by \([0-9]*\) KiB/\1/p' "$tmp/names")
  left=0
  for n in $(grep -o '/dev/shm/nfcoll\.[^ ]*' "$tmp/names"); do
    [ -e "$n" ] && { left=$((left + 1)); echo "left behind: $n"; }
  done
  if [ $left = 0 ]; then
    ok "$what ($grown KiB into a 65 MiB fill): none of its $(grep -c '^/dev' "$tmp/names") objects left"
  else
    bad "$what ($grown KiB into the fill): $left objects left in /dev/shm"
  fi
  same_listing "$what"
done

# ---- objects others hold
mkobj() { # mkobj NAME...: objects of another user (nobody, when we are root)
  (cd /dev/shm && touch "$@" && chmod 600 "$@" && { [ "$(id -u)" != 0 ] || chown $nobody "$@"; })
}
held="nfcoll.$(od -An -N8 -tx8 /dev/urandom | tr -d ' ') nfcoll.$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
if [ $private = 1 ]; then
  for pid in $(seq 1 300); do for seq in 0 1 2 3; do held="$held nfcoll.$pid.$seq"; done; done
fi
trap 'for h in $held; do rm -f "/dev/shm/$h"; done; rm -rf "$tmp"' EXIT
mkobj $held || exit 99
survive() { # survive WHAT: every held object is still there, unchanged
  gone=0
  for h in $held; do [ -f "/dev/shm/$h" ] || gone=$((gone + 1)); done
  [ $gone = 0 ] && ok "$1: all $(echo $held | wc -w) objects held by others survive" ||
    bad "$1: $gone of the objects held by others were deleted"
}
fp32_run() { # fp32_run [VAR=VALUE]...: 2 ranks, 5 fp32 calls each, stats in $tmp/s.json
  rm -f "$tmp/s.json"
  listing > "$tmp/before"
  mpi 2 NFCOLL_STATS="$tmp/s.json" "$@" ./tests/mpi/test_faults fp32 5 300007
  fp32=$(route_calls "$tmp/s.json" fp32); res=$(fallback_count "$tmp/s.json" resource)
  errors=$(grep -c 'error:' "$tmp/out")
}
fp32_ok() { # fp32_ok WHAT [VAR=VALUE]...: the run takes fp32, cleanly, and harms nobody
  what=$1; shift
  fp32_run "$@"
  if [ $rc = 0 ] && [ "$fp32" = 10 ] && [ "$res" = 0 ] && [ "$errors" = 0 ]; then
    ok "$what: 10 fp32 calls, no fallback, no error"
  else
    bad "$what: exit $rc, fp32 '$fp32' calls (want 10), resource '$res', $errors errors"
    cat "$tmp/out"
  fi
  survive "$what"
  same_listing "$what"
}
fp32_ok "next to $(echo $held | wc -w) objects held by others"

# ---- collisions and errors, in the private /dev/shm only
lib=$PWD/tests/.libs/libnf_fixed_random.so
if [ $private = 1 ] && [ -f "$lib" ] && [ -f "$PWD/lib/.libs/libnfcoll.so" ]; then
  san=$(ldd "$PWD/lib/.libs/libnfcoll.so" | awk '/libasan|libubsan/ {printf "%s:", $3}')
  held="$held nfcoll.0000000000000000"
  mkobj nfcoll.0000000000000000 || exit 99

  fp32_ok "first name taken, another drawn" LD_PRELOAD="$san$lib" NF_FIXED_RANDOM=1
  z=$(grep -c '^fixed_random: zero bytes' "$tmp/out")
  [ "$z" = 1 ] && ok "first name taken: the preloaded getrandom gave the taken name once" ||
    bad "first name taken: the preloaded getrandom gave the taken name $z times, want 1"

  fp32_run LD_PRELOAD="$san$lib" NF_FIXED_RANDOM=all
  e=$(grep -c 'error: .*/nfcoll\.0000000000000000: File exists' "$tmp/out")
  w=$(grep -c 'cannot set up the shared aggregation buffer (I/O' "$tmp/out")
  oom=$(grep -ci 'out of memory' "$tmp/out")
  z=$(grep -c '^fixed_random: zero bytes' "$tmp/out")
  if [ $rc = 0 ] && [ "$e" = 1 ] && [ "$errors" = 1 ] && [ "$w" -ge 1 ] && [ "$oom" = 0 ] &&
     [ "$fp32" = 0 ] && [ "$res" -ge 1 ] && [ "$z" = 8 ]; then
    ok "every name taken (8 tries): one error naming the object and 'File exists', no 'out of memory', all pmpi"
  else
    bad "every name taken: exit $rc, $e/$errors errors with File exists, $w warnings," \
      "$oom 'out of memory', fp32 '$fp32', resource '$res', $z names drawn (want 8)"
    cat "$tmp/out"
  fi
  survive "every name taken"
  same_listing "every name taken"

  # Open MPI's shared memory transport moves to /tmp; libnfcoll's cannot.
  # MPICH's cannot either, so it would not start.
  if [ "$NF_MPIEXEC_STYLE" != ompi ]; then
    echo "SKIP - read-only /dev/shm: needs Open MPI's btl_vader_backing_directory ($NF_MPI_FAMILY keeps its own shared memory in /dev/shm)"
  elif mount -o remount,ro /dev/shm; then
    fp32_run OMPI_MCA_btl_vader_backing_directory="$tmp"
    e=$(grep -c 'error: cannot create shared memory object /nfcoll\.[0-9a-f]*: Read-only file system' "$tmp/out")
    if [ $rc = 0 ] && [ "$e" = 1 ] && [ "$errors" = 1 ] && [ "$fp32" = 0 ] && [ "$res" -ge 1 ]; then
      ok "read-only /dev/shm: one error with the real errno (Read-only file system), all pmpi"
    else
      bad "read-only /dev/shm: exit $rc, $e/$errors errors with the errno, fp32 '$fp32', resource '$res'"
      cat "$tmp/out"
    fi
    mount -o remount,rw /dev/shm
  else
    echo "note: cannot remount /dev/shm read-only: that case is skipped"
  fi
elif [ $private = 1 ]; then
  echo "note: no shared libraries (--disable-shared?): the taken and all-taken cases are skipped"
fi
finish
