#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Files libnfcoll writes (NFCOLL_TRACE per rank, NFCOLL_STATS=path.json)
# where someone planted symlinks to a victim file: the victims keep their
# content, mode and inode; each path becomes a regular file of mode 0600
# (under umask 022) owned by the runner. An existing regular file at the
# path is replaced by rename (a new inode, the old content not kept), never
# written through; no temp file is left behind.
. "${srcdir:-.}/tests/faults_common.sh"
umask 022
me=$(id -u)
np=2
# inode, mode, owner and content of a file, to compare before and after
state() { echo "$(stat -c '%i %a %u' "$1") $(cksum < "$1")"; }
plant() { # plant PATH: a 0600 victim with content, and a symlink to it at PATH
  printf 'precious %s\n' "$1" > "$1.victim" && chmod 600 "$1.victim" &&
    ln -s "$1.victim" "$1" && state "$1.victim" > "$1.before"
}
paths="$tmp/t.0 $tmp/t.1 $tmp/s.json"
for p in $paths; do plant "$p" || exit 99; done
run_it() {
  mpi $np NFCOLL_TRACE="$tmp/t.%r" NFCOLL_STATS="$tmp/s.json" ./tests/mpi/test_faults calls 20
  [ $rc = 0 ] || { bad "run exit $rc"; cat "$tmp/out"; }
}
check_file() { # check_file PATH: regular, 0600, ours, no temp left
  if [ -L "$1" ] || [ ! -f "$1" ]; then bad "$1 is not a regular file"; ls -l "$1"
  elif [ "$(stat -c '%a %u' "$1")" != "600 $me" ]; then bad "$1: mode/owner $(stat -c '%a %u' "$1"), want 600 $me"
  else ok "$1: a regular file, mode 600, owner $me"; fi
}

run_it
for p in $paths; do
  if [ "$(state "$p.victim")" = "$(cat "$p.before")" ]; then ok "symlink victim of $p unchanged"
  else bad "symlink victim of $p changed: $(state "$p.victim"), was $(cat "$p.before")"; fi
  check_file "$p"
  stat -c %i "$p" > "$p.inode"
done
for r in 0 1; do
  n=$(grep -vc '^#' "$tmp/t.$r")
  [ "$n" = 20 ] && ok "trace of rank $r: 20 calls" || bad "trace of rank $r: $n calls, want 20"
done

run_it # over the files of the first run
for p in $paths; do
  if [ "$(stat -c %i "$p")" != "$(cat "$p.inode")" ]; then ok "$p replaced by rename (new inode)"
  else bad "$p written through (same inode $(cat "$p.inode"))"; fi
  check_file "$p"
done
for r in 0 1; do
  h=$(grep -c '^# libnfcoll trace v[0-9]' "$tmp/t.$r"); n=$(grep -vc '^#' "$tmp/t.$r")
  [ "$h $n" = "1 20" ] && ok "trace of rank $r: one header, 20 calls (not appended)" ||
    bad "trace of rank $r: $h headers, $n calls, want 1 and 20"
done
left=$(ls "$tmp" | grep -c '\.tmp\.')
[ "$left" = 0 ] && ok "no temp file left" || { bad "$left temp files left"; ls -l "$tmp"; }
finish
