#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The quickstart demo: where the aggregation buffer goes, then an osu-style
# sweep of pmpi, fp32, binary, ternary and bf16 on 2 ranks with their traffic.
# Usage: demo.sh BUILDDIR
set -eu
b=${1:-.}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -x "$b/tools/nfcoll_info" ]; then
  echo "== Topology and CXL node (nfcoll_info -t)"
  "$b/tools/nfcoll_info" -t
  echo
fi
echo "== NF_Allreduce on 2 ranks, 4 B to 16 MiB, results validated (-c)"
# configure's launcher (tests/mpi_launcher.sh): Open MPI's or MPICH's hydra,
# which oversubscribes by default.
[ -f "$b/tests/mpi_launcher.sh" ] && . "$b/tests/mpi_launcher.sh"
case ${NF_MPIEXEC_STYLE:-ompi} in
  hydra) set -- ;;
  *) set -- --oversubscribe ;;
esac
"${MPIEXEC:-mpirun}" "$@" ${MPIEXEC_NP:--np} 2 "$b/bench/nfcoll_allreduce" -r all -m 4:16M -i 200 -x 5 -c
