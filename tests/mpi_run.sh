#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Run an MPI test program: mpi_run.sh NP [VAR=VALUE]... PROGRAM [ARGS]...
# Adds what root, oversubscription and a 2-core machine need, exports the
# VAR=VALUE settings to every rank (not to the launcher itself: LD_PRELOAD), and kills a run that takes over
# NF_TEST_TIMEOUT seconds (default 300) so a bug can never hang make check.
# The launcher is configure's (tests/mpi_launcher.sh in the build
# directory; without one, Open MPI's mpirun from PATH): Open MPI's mpirun
# (-x VAR=VALUE) or MPICH's hydra (-genv VAR VALUE). NF_MPIRUN_EXTRA adds
# launcher options.
. "$(dirname "$0")/mpi_common.sh"
np=$1; shift
# The leading VAR=VALUE arguments become the launcher's, one word each
# (a value may be empty or hold spaces); the program and its arguments follow.
inenv=yes
for a in "$@"; do
  shift
  case $inenv:$a in
    yes:*=*)
      if [ "$NF_MPIEXEC_STYLE" = hydra ]; then set -- "$@" -genv "${a%%=*}" "${a#*=}"
      else set -- "$@" -x "$a"; fi ;;
    *) inenv=no; set -- "$@" "$a" ;;
  esac
done
nf_need_launcher
echo "+ $MPIEXEC $MPIEXEC_NP $np $*" >&2
# Open MPI refuses root without these; hydra ignores them.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI 4.1 leaks in MPI_Init from components it dlcloses (no symbols to
# suppress), so LeakSanitizer is off for multi-rank runs; ASan and UBSan
# errors still fail the test. The Check unit tests keep leak detection.
if [ "$NF_MPIEXEC_STYLE" = hydra ]; then
  # hydra oversubscribes and leaves ranks unbound by default, and each
  # mpiexec keeps its own state: no options needed.
  timeout -k 10 "${NF_TEST_TIMEOUT:-300}" "$MPIEXEC" -genv ASAN_OPTIONS detect_leaks=0 \
    $NF_MPIRUN_EXTRA "$MPIEXEC_NP" "$np" "$@"
  exit
fi
# --mca btl self,vader: one machine, shared memory only (no network probing).
# Each run gets its own Open MPI session directory: two mpiruns started at
# once (make -j2 check) race on removing the shared /tmp/ompi.HOST.UID.
session=$(mktemp -d "${TMPDIR:-/tmp}/nfcoll-mpi.XXXXXX") || exit 99
export OMPI_MCA_orte_tmpdir_base="$session"
timeout -k 10 "${NF_TEST_TIMEOUT:-300}" "$MPIEXEC" --oversubscribe --bind-to none \
  --mca btl self,vader -x ASAN_OPTIONS=detect_leaks=0 $NF_MPIRUN_EXTRA "$MPIEXEC_NP" "$np" "$@"
rc=$?
rm -rf "$session"
exit $rc
