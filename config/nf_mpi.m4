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
  nf_mpi_version=`$CC --showme:version 2>/dev/null | sed 's/^mpicc: //'`
  AS_IF([test -z "$nf_mpi_version"], [nf_mpi_version="unknown MPI"])
  AC_PATH_PROGS([MPIRUN], [mpirun mpiexec], [no])
  AS_IF([test "x$MPIRUN" = xno],
    [AC_MSG_WARN([no mpirun found: multi-rank tests will SKIP])])
  AC_DEFINE_UNQUOTED([NF_MPI_VERSION_STRING], ["$nf_mpi_version"], [MPI library used at build time])
])
