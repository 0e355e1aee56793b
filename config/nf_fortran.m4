# SPDX-License-Identifier: BSD-3-Clause
# NF_CHECK_FORTRAN: an MPI Fortran compiler for the Fortran test
# (tests/mpi_fortran.sh). The library is C: its Fortran entry points
# (lib/api/fortran.c) need no Fortran compiler. --with-mpifort=PATH names
# the wrapper (default: mpifort, or $FC); the test needs mpif.h, `use mpi`
# and `use mpi_f08` programs to build and link. When the default does not
# work, configure warns and the test says SKIP with the reason; when a
# wrapper named with --with-mpifort does not work, configure stops.
# Sets HAVE_MPIFORT (automake), NF_FORTRAN_SKIP (the reason, else empty)
# and nf_fortran_summary. Must run before LT_INIT, which sets libtool up for
# the Fortran compiler AC_PROG_FC found.
AC_DEFUN([NF_FC_TRY_MPI], [
  AC_MSG_CHECKING([whether $FC builds $1 programs])
  AC_LINK_IFELSE([AC_LANG_SOURCE([[program t
$2
  implicit none
$3
  integer :: ierr
  real :: x(2)
  x = 1.0
  call MPI_Init(ierr)
  call MPI_Allreduce(MPI_IN_PLACE, x, 2, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program t]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AS_IF([test -z "$NF_FORTRAN_SKIP"],
       [NF_FORTRAN_SKIP="$FC cannot build and link a '$1' program (see config.log)"])])
])

# NF_MPI_FC: FC from --with-mpifort, before AC_PROG_FC looks for one.
AC_DEFUN([NF_MPI_FC], [
  AC_ARG_WITH([mpifort],
    [AS_HELP_STRING([--with-mpifort=PATH],
      [MPI Fortran compiler wrapper for the Fortran test (default: mpifort if it works)])],
    [], [with_mpifort=guess])
  AS_CASE([$with_mpifort],
    [guess|yes], [AS_IF([test -z "$FC"], [FC=mpifort])],
    [no], [],
    [FC=$with_mpifort])
])

AC_DEFUN([NF_CHECK_FORTRAN], [
  AC_REQUIRE([NF_MPI_FC])
  AC_REQUIRE([AC_PROG_FC])
  NF_FORTRAN_SKIP=
  AS_IF([test "x$with_mpifort" = xno],
    [NF_FORTRAN_SKIP="configured --without-mpifort"],
    [AS_IF([$FC --version >/dev/null 2>&1], [],
       [NF_FORTRAN_SKIP="no MPI Fortran compiler: $FC does not run (Debian: apt-get install gfortran)"])])
  AS_IF([test -z "$NF_FORTRAN_SKIP"], [
    AC_LANG_PUSH([Fortran])
    AC_FC_SRCEXT([f90], [],
      [NF_FORTRAN_SKIP="$FC does not compile .f90 sources"])
    AS_IF([test -z "$NF_FORTRAN_SKIP"], [
      NF_FC_TRY_MPI([use mpi], [  use mpi], [])
      NF_FC_TRY_MPI([mpif.h], [], [  include 'mpif.h'])
      NF_FC_TRY_MPI([use mpi_f08], [  use mpi_f08], [])])
    AC_LANG_POP([Fortran])])
  AS_IF([test -n "$NF_FORTRAN_SKIP"],
    [AS_CASE([$with_mpifort],
       [guess|no], [],
       [AC_MSG_ERROR([--with-mpifort=$with_mpifort: $NF_FORTRAN_SKIP])])
     AS_IF([test "x$with_mpifort" != xno],
       [AC_MSG_WARN([the Fortran test will SKIP: $NF_FORTRAN_SKIP])])
     nf_fortran_summary="no ($NF_FORTRAN_SKIP)"],
    [nf_fortran_summary="$FC (mpif.h, use mpi, use mpi_f08)"])
  AC_SUBST([NF_FORTRAN_SKIP])
  AM_CONDITIONAL([HAVE_MPIFORT], [test -z "$NF_FORTRAN_SKIP"])
])
