! SPDX-License-Identifier: BSD-3-Clause
! The `use mpi_f08` part of tests/mpi/test_fortran.f90. Open MPI 4 calls
! these mpi_init_f08_, mpi_finalize_f08_ and mpi_allreduce_f08_; f08_init
! and f08_sum_in_place leave out the optional ierror (NULL in C).
subroutine f08_init()
  use mpi_f08
  implicit none
  call MPI_Init()
end subroutine f08_init

subroutine f08_finalize()
  use mpi_f08
  implicit none
  integer :: ierr
  call MPI_Finalize(ierr)
end subroutine f08_finalize

subroutine f08_sum(x, y, n, ierr)
  use mpi_f08
  implicit none
  integer, intent(in) :: n
  real, intent(in) :: x(n)
  real, intent(inout) :: y(n)
  integer, intent(out) :: ierr
  call MPI_Allreduce(x, y, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
end subroutine f08_sum

subroutine f08_sum_in_place(y, n, ierr)
  use mpi_f08
  implicit none
  integer, intent(in) :: n
  real, intent(inout) :: y(n)
  integer, intent(out) :: ierr
  call MPI_Allreduce(MPI_IN_PLACE, y, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD)
  ierr = MPI_SUCCESS ! without ierror, an error would have aborted
end subroutine f08_sum_in_place
