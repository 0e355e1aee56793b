! SPDX-License-Identifier: BSD-3-Clause
! The mpif.h half of tests/mpi/test_fortran.f90: MPI_INIT_THREAD,
! MPI_FINALIZE and REAL sums through mpif.h's implicit interfaces. The
! MPI_IN_PLACE call is in test_fortran_mpifh_ip.f90: gfortran rejects calls
! of one external routine with different argument types within a file.
subroutine h_init_thread()
  implicit none
  include 'mpif.h'
  integer :: provided, ierr
  call MPI_INIT_THREAD(MPI_THREAD_FUNNELED, provided, ierr)
  if (ierr /= MPI_SUCCESS .or. provided < MPI_THREAD_FUNNELED) stop 3
end subroutine h_init_thread

subroutine h_finalize()
  implicit none
  include 'mpif.h'
  integer :: ierr
  call MPI_FINALIZE(ierr)
end subroutine h_finalize

subroutine h_sum(x, y, n, ierr)
  implicit none
  include 'mpif.h'
  integer, intent(in) :: n
  real, intent(in) :: x(n)
  real, intent(inout) :: y(n)
  integer, intent(out) :: ierr
  call MPI_ALLREDUCE(x, y, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
end subroutine h_sum
