#!/bin/sh
# Run an MPI test program: mpi_run.sh NP [VAR=VALUE]... PROGRAM [ARGS]...
# Adds what root, oversubscription and a 2-core machine need, exports the
# VAR=VALUE settings to every rank (not to mpirun itself: LD_PRELOAD), and kills a run that takes over
# NF_TEST_TIMEOUT seconds (default 300) so a bug can never hang make check.
np=$1; shift
envs=""
while [ $# -gt 0 ]; do
  case $1 in
    *=*) envs="$envs -x $1"; shift ;;
    *) break ;;
  esac
done
prog=$1; shift
MPIRUN=${MPIRUN:-mpirun}
if ! command -v "$MPIRUN" >/dev/null 2>&1; then
  echo "SKIP: no mpirun on PATH (install openmpi-bin)"; exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "+ mpirun -np $np$envs $prog $*" >&2
# --mca btl self,vader: one machine, shared memory only (no network probing).
# Each run gets its own Open MPI session directory: two mpiruns started at
# once (make -j2 check) race on removing the shared /tmp/ompi.HOST.UID.
session=$(mktemp -d "${TMPDIR:-/tmp}/nfcoll-mpi.XXXXXX") || exit 99
export OMPI_MCA_orte_tmpdir_base="$session"
# Open MPI 4.1 leaks in MPI_Init from components it dlcloses (no symbols to
# suppress), so LeakSanitizer is off for multi-rank runs; ASan and UBSan
# errors still fail the test. The Check unit tests keep leak detection.
timeout -k 10 "${NF_TEST_TIMEOUT:-300}" "$MPIRUN" --oversubscribe --bind-to none \
  --mca btl self,vader -x ASAN_OPTIONS=detect_leaks=0 $NF_MPIRUN_EXTRA -np "$np" $envs "$prog" "$@"
rc=$?
rm -rf "$session"
exit $rc
