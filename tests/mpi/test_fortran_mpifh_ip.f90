! SPDX-License-Identifier: BSD-3-Clause
! mpif.h's MPI_IN_PLACE (see test_fortran_mpifh.f90).
subroutine h_sum_in_place(y, n, ierr)
  implicit none
  include 'mpif.h'
  integer, intent(in) :: n
  real, intent(inout) :: y(n)
  integer, intent(out) :: ierr
  call MPI_ALLREDUCE(MPI_IN_PLACE, y, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
end subroutine h_sum_in_place
