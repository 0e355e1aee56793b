# SPDX-License-Identifier: BSD-3-Clause
# NF_MPI_CC: use mpicc as the compiler so every object sees mpi.h. Must run
# before anything expands AC_PROG_CC.
AC_DEFUN([NF_MPI_CC], [
  AC_ARG_WITH([mpicc],
    [AS_HELP_STRING([--with-mpicc=PATH], [MPI C compiler wrapper (default: mpicc)])],
    [], [with_mpicc=mpicc])
  AS_IF([test -z "$CC"], [CC="$with_mpicc"])
])

# NF_CHECK_MPI: the compiler builds and links MPI programs.
AC_DEFUN([NF_CHECK_MPI], [
  AC_REQUIRE([AC_PROG_CC])
  AC_MSG_CHECKING([for a working MPI C compiler])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
      [[int v, s; MPI_Get_version(&v, &s); return PMPI_Allreduce(0, 0, 0, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([$CC cannot build MPI programs. Install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev) or pass CC=/path/to/mpicc.])])
  NF_MPI_FAMILY
  NF_MPI_LAUNCHER
])

# NF_MPI_FAMILY: which family mpi.h belongs to, from its macros: Open MPI
# (OMPI_MAJOR_VERSION) or MPICH and its derivatives (MPICH_VERSION: Intel
# MPI, MVAPICH, Cray MPICH). Sets nf_mpi_family (openmpi, mpich, unknown),
# nf_mpi_version and NF_MPI_FAMILY (substituted). The places in lib/ that
# depend on it are listed in docs/design.md, "MPI families".
AC_DEFUN([NF_MPI_FAMILY], [
  AC_MSG_CHECKING([which MPI family $CC builds for])
  nf_mpi_family=unknown
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef OMPI_MAJOR_VERSION
#error not Open MPI
#endif]], [])], [nf_mpi_family=openmpi],
    [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_VERSION
#error not MPICH-derived
#endif]], [])], [nf_mpi_family=mpich])])
  AS_CASE([$nf_mpi_family],
    [openmpi], [nf_mpi_version=`$CC --showme:version 2>/dev/null | sed 's/^mpicc: //'`],
    [mpich], [AC_COMPUTE_INT([nf_mpich_num], [MPICH_NUMVERSION], [[#include <mpi.h>]], [nf_mpich_num=0])
      nf_mpi_version="MPICH `expr $nf_mpich_num / 10000000`.`expr $nf_mpich_num / 100000 % 100`.`expr $nf_mpich_num / 1000 % 100`"])
  AS_IF([test -z "$nf_mpi_version"], [nf_mpi_version="unknown MPI"])
  AC_MSG_RESULT([$nf_mpi_family ($nf_mpi_version)])
  AS_IF([test $nf_mpi_family = unknown],
    [AC_MSG_WARN([mpi.h is neither Open MPI's nor MPICH's: the tests assume an Open MPI launcher])])
  AC_SUBST([NF_MPI_FAMILY], [$nf_mpi_family])
  AC_DEFINE_UNQUOTED([NF_MPI_VERSION_STRING], ["$nf_mpi_version"], [MPI library used at build time])
  # nfcoll.pc's Requires: the MPI family's own pkg-config package, when it
  # has one here, so that pkg-config --cflags --libs nfcoll finds mpi.h
  AS_CASE([$nf_mpi_family], [openmpi], [nf_pc_mpi=ompi-c], [mpich], [nf_pc_mpi=mpich],
    [nf_pc_mpi=])
  AS_IF([test -n "$nf_pc_mpi" && test -n "$PKG_CONFIG" && $PKG_CONFIG --exists $nf_pc_mpi], [],
    [nf_pc_mpi=])
  AC_SUBST([NF_PC_MPI], [$nf_pc_mpi])
])

# NF_MPI_LAUNCHER: the launcher the tests run MPI programs with
# (tests/mpi_launcher.sh.in). MPIEXEC names it; otherwise the one beside the
# compiler wrapper (mpicc.mpich: mpirun.mpich), then mpirun and mpiexec,
# whichever says it belongs to the family (--version: Open MPI's ORTE/PRRTE
# or MPICH's hydra). Sets MPIEXEC, MPIEXEC_NP (the option before the rank
# count) and NF_MPIEXEC_STYLE: ompi (-x VAR=VALUE, --oversubscribe,
# --bind-to, --mca) or hydra (-genv VAR VALUE).
AC_DEFUN([NF_MPI_LAUNCHER], [
  AC_ARG_VAR([MPIEXEC], [MPI launcher for the tests (default: the one matching the MPI compiler)])
  nf_cc_base=`basename "$CC"`
  AS_CASE([$nf_cc_base], [mpicc?*], [nf_cc_suffix=`echo "$nf_cc_base" | sed "s/^mpicc//"`], [nf_cc_suffix=])
  AC_MSG_CHECKING([for an MPI launcher of the $nf_mpi_family family])
  nf_mpiexec=
  AS_IF([test -n "$MPIEXEC"], [nf_mpiexec=$MPIEXEC; nf_mpiexec_style=`NF_MPIEXEC_STYLE_OF([$MPIEXEC])`],
    [for nf_p in mpirun$nf_cc_suffix mpiexec$nf_cc_suffix mpirun mpiexec; do
       nf_p=`command -v $nf_p 2>/dev/null` || continue
       nf_mpiexec_style=`NF_MPIEXEC_STYLE_OF([$nf_p])`
       AS_CASE([$nf_mpi_family:$nf_mpiexec_style],
         [openmpi:ompi|mpich:hydra|unknown:*], [nf_mpiexec=$nf_p; break])
     done])
  AS_IF([test -z "$nf_mpiexec"],
    [AC_MSG_RESULT([no])
     AC_MSG_WARN([no MPI launcher of the $nf_mpi_family family found (set MPIEXEC): multi-rank tests will SKIP])
     nf_mpiexec=no nf_mpiexec_style=none],
    [AC_MSG_RESULT([$nf_mpiexec ($nf_mpiexec_style)])])
  AS_CASE([$nf_mpiexec_style], [hydra], [MPIEXEC_NP=-n], [MPIEXEC_NP=-np])
  AC_SUBST([MPIEXEC], [$nf_mpiexec])
  AC_SUBST([MPIEXEC_NP])
  AC_SUBST([NF_MPIEXEC_STYLE], [$nf_mpiexec_style])
  AC_CONFIG_FILES([tests/mpi_launcher.sh])
])

# NF_MPIEXEC_STYLE_OF(PATH): ompi, hydra or unknown, from PATH --version.
AC_DEFUN([NF_MPIEXEC_STYLE_OF], [$1 --version 2>&1 </dev/null | sed -n \
    -e '/HYDRA/{s/.*/hydra/p;q;}' -e '/Open MPI\|OpenRTE\|PRRTE/{s/.*/ompi/p;q;}' | grep . || echo unknown])
