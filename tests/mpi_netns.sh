#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Real multi-node runs: pretend hosts in network namespaces, joined by a
# bridge, with Open MPI over TCP between them (bench/netns.sh: an rsh agent
# enters each namespace with its own hostname). MPI_COMM_TYPE_SHARED then
# splits the ranks by host, so node leaders exchange counts and sums across
# a real transport; and the progress engine's legal-program cases
# (tests/mpi/test_engine.c) across hosts. Needs root and iproute2; SKIPs,
# saying why, otherwise.
. "${srcdir:-.}/tests/mpi_common.sh"
skip() { echo "SKIP: $*"; exit 77; }
nf_ompi_only "Open MPI's rsh agent and TCP options (bench/netns.sh)"
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null 2>&1 || skip "no ip command (Debian: apt-get install iproute2)"
command -v unshare >/dev/null 2>&1 || skip "no unshare (util-linux)"
. "$srcdir/bench/netns.sh"
trap nf_hosts_down EXIT
msg=$(mktemp) || exit 99
nf_hosts_up 3 > "$msg" 2>&1 || { why=$(cat "$msg"); rm -f "$msg"; skip "$why"; }
rm -f "$msg"
NF_HOSTS_TIMEOUT=300
# The launch itself must work before any result can mean something. Open
# MPI's rsh launcher warns when a daemon it starts has made its own session
# before the launcher set its process group (a race it survives; seen under
# a loaded parallel make check): that line is not a failed launch.
names=$(nf_hosts_mpirun "$(nf_hosts_list 1 1 1)" 3 hostname 2>&1 |
        grep -v 'plm:rsh: Warning: setpgid(' | sort -u | tr '\n' ' ')
[ "$names" = "$(nf_ns 1) $(nf_ns 2) $(nf_ns 3) " ] ||
  skip "mpirun cannot launch across the namespaces here: $names"

prog=$PWD/tests/mpi
check() { # check SLOTS-LIST NP [MPIRUN ARGS]... PROG ARGS
  hl=$(nf_hosts_list $1); np=$2; shift 2
  echo "+ --host $hl -np $np $*"
  nf_hosts_mpirun "$hl" "$np" "$@" > "$nf_tmp/out" 2>&1; rc=$?
  grep -E '^(PASS|FAIL)' "$nf_tmp/out"
  [ $rc = 0 ] || { echo "FAILED (exit $rc): $*"; cat "$nf_tmp/out"; nf_failed=1; }
}
check "2 2" 4 "$prog/test_routes" -c 1 -c 513 -c 300007                 # 2 + 2, ranks by host
check "2 2" 4 --map-by node "$prog/test_routes" -c 7 -c 513 -c 300007    # 0,2 | 1,3
check "2 1" 3 --map-by node -x NFCOLL_EF=off "$prog/test_routes" -c 513 -c 70001
check "2 1" 3 --map-by node "$prog/test_misc"
check "2 1 1" 4 "$prog/test_routes" -c 7 -c 8193 -c 300007              # three hosts, uneven

# The progress engine across hosts (tests/mpi_engine.sh has the cases):
# every float sum binary, nonblocking bit for bit the blocking, every rank
# says ok. Over TCP a large MPI_Isend needs its sender's progress.
pol=$(cd "$srcdir" && pwd)/tests/policy_shim/engine.policy
engine() { # engine SLOTS-LIST NP ARGS
  hl=$(nf_hosts_list $1); np=$2; shift 2
  echo "+ --host $hl -np $np test_engine_linked $*"
  nf_hosts_mpirun "$hl" "$np" -x NFCOLL_POLICY="$pol" "$prog/test_engine_linked" "$@" \
    > "$nf_tmp/out" 2>&1; rc=$?
  n=$(grep -c '^ok rank' "$nf_tmp/out")
  if [ $rc = 0 ] && [ "$n" = "$np" ]; then grep -m1 '^ok rank' "$nf_tmp/out"
  else echo "FAILED (exit $rc, $n of $np ranks ok): test_engine $*"; cat "$nf_tmp/out"; nf_failed=1; fi
}
engine "1 1" 2 mixed
engine "1 1 1" 3 mixed
engine "1 1" 2 orders 8
engine "1 1 1" 3 orders 2
engine "1 1" 2 threads 16 20
engine "1 1" 2 inter
finish
