#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Shared memory per communicator (tests/mpi/test_shm.c): 200 communicators
# (split and dup) each making 16 KiB and 64 B fp32 and binary calls keep at
# most L * 64 KiB + 64 KiB of segment each (L local ranks); a 1 Mi-float
# fp32 and binary call then grows the first and last one, exact and
# identical on every rank, and small calls after it stay exact; freeing the
# communicators unmaps every segment. On 2 and 3 ranks, and across two
# pretend nodes (NFCOLL_RANKS_PER_NODE).
# As root, with namespaces, once more in a /dev/shm of 512 KiB: no segment
# can grow, the large calls run exact anyway (fp32 in the chunks the
# segment has, binary as fp32) and count capacity fallbacks.
if [ -z "$NF_SHM_NS" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
   unshare --mount --fork true 2>/dev/null; then
  NF_SHM_NS=inside exec unshare --mount --fork sh "$0" "$@"
fi
. "${srcdir:-.}/tests/mpi_common.sh"
for np in 2 3; do
  run $np ./tests/mpi/test_shm -n 200
done
run 3 NFCOLL_RANKS_PER_NODE=2 ./tests/mpi/test_shm -n 20
run 4 NFCOLL_RANKS_PER_NODE=2 ./tests/mpi/test_shm -n 20
if [ "$NF_SHM_NS" = inside ] && [ "$NF_MPIEXEC_STYLE" != ompi ]; then
  echo "SKIP - the no-room case: needs Open MPI's btl_vader_backing_directory ($NF_MPI_FAMILY keeps its own shared memory in /dev/shm)"
elif [ "$NF_SHM_NS" = inside ]; then
  # Open MPI's shared memory transport keeps its files out of the small
  # /dev/shm; the mount is private to this script's namespace.
  vader=$(mktemp -d "${TMPDIR:-/tmp}/nfcoll-vader.XXXXXX") || exit 99
  if mount -t tmpfs -o size=512k,mode=1777 nfcoll-test /dev/shm; then
    for np in 2 3; do
      NF_MPIRUN_EXTRA="--mca btl_vader_backing_directory $vader" \
        run $np ./tests/mpi/test_shm -n 2 -tight
    done
    umount /dev/shm
  else
    echo "note: cannot mount a small /dev/shm: the no-room case is skipped"
  fi
  rm -rf "$vader"
else
  echo "note: not root or no mount namespace: the no-room case is skipped"
fi
finish
