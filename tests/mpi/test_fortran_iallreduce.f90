! SPDX-License-Identifier: BSD-3-Clause
! MPI_IALLREDUCE from Fortran (tests/mpi_iallreduce.sh): the same REAL sums
! on two duplicates of MPI_COMM_WORLD, X with MPI_ALLREDUCE and Y with
! MPI_IALLREDUCE, in the three styles (use mpi with MPI_WAIT, mpif.h in
! place with MPI_WAITALL, use mpi_f08 with MPI_Wait); Y's results must be
! X's bit for bit. Starts with MPI_INIT_THREAD(MPI_THREAD_MULTIPLE), or with
! MPI_INIT when NF_TEST_PLAIN_INIT is set (libnfcoll's MPI_INIT asks for the
! level its progress thread needs either way; MPI_QUERY_THREAD answers the
! level the program was told). Prints "PASS" or "FAIL ..." per rank
! and "fortran iallreduces: N".
subroutine f08_isum(x, y, n, comm_f, ierr)
  use mpi_f08
  implicit none
  integer, intent(in) :: n, comm_f
  real, intent(in) :: x(n)
  real, intent(inout) :: y(n)
  integer, intent(out) :: ierr
  type(MPI_Comm) :: comm
  type(MPI_Request) :: req
  comm%MPI_VAL = comm_f
  call MPI_Iallreduce(x, y, n, MPI_REAL, MPI_SUM, comm, req, ierr)
  if (ierr == MPI_SUCCESS) call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
end subroutine f08_isum

subroutine fh_isum_in_place(y, n, comm, ierr)
  implicit none
  include 'mpif.h'
  integer, intent(in) :: n, comm
  real, intent(inout) :: y(n)
  integer, intent(out) :: ierr
  integer :: req(1)
  call MPI_IALLREDUCE(MPI_IN_PLACE, y, n, MPI_REAL, MPI_SUM, comm, req(1), ierr)
  if (ierr == MPI_SUCCESS) call MPI_WAITALL(1, req, MPI_STATUSES_IGNORE, ierr)
end subroutine fh_isum_in_place

program test_fortran_iallreduce
  use mpi
  implicit none
  integer, parameter :: n = 300000, steps = 4
  real, allocatable :: x(:), a(:), b(:)
  integer :: ierr, rank, xc, yc, provided, s, j, req, bad, calls, plain, level
  allocate(x(n), a(n), b(n))
  call get_environment_variable('NF_TEST_PLAIN_INIT', status=plain)
  if (plain == 0) then
    call MPI_INIT(ierr)
  else
    call MPI_INIT_THREAD(MPI_THREAD_MULTIPLE, provided, ierr)
  end if
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, xc, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, yc, ierr)
  bad = 0
  calls = 0
  ! MPI_QUERY_THREAD says what MPI_INIT(_THREAD) told the program, not the
  ! level libnfcoll asked MPI for
  if (plain == 0) provided = MPI_THREAD_SINGLE
  call MPI_QUERY_THREAD(level, ierr)
  if (level /= provided) then
    print '(a,i0,a,i0,a,i0)', 'FAIL rank ', rank, ': MPI_QUERY_THREAD ', level, ', told ', provided
    bad = 1
  end if
  do s = 1, steps
    do j = 1, n
      x(j) = real(mod(j * 7 + s * 13 + rank * 11, 101) - 50) / real(1 + mod(j, 9))
    end do
    ! use mpi
    call MPI_ALLREDUCE(x, a, n, MPI_REAL, MPI_SUM, xc, ierr)
    call MPI_IALLREDUCE(x, b, n, MPI_REAL, MPI_SUM, yc, req, ierr)
    call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
    call check('use mpi')
    ! mpif.h, in place
    a = x
    b = x
    call MPI_ALLREDUCE(MPI_IN_PLACE, a, n, MPI_REAL, MPI_SUM, xc, ierr)
    call fh_isum_in_place(b, n, yc, ierr)
    call check('mpif.h')
    ! use mpi_f08
    call MPI_ALLREDUCE(x, a, n, MPI_REAL, MPI_SUM, xc, ierr)
    call f08_isum(x, b, n, yc, ierr)
    call check('mpi_f08')
  end do
  if (bad == 0) print '(a,i0)', 'PASS rank ', rank
  print '(a,i0)', 'fortran iallreduces: ', calls
  call MPI_COMM_FREE(xc, ierr)
  call MPI_COMM_FREE(yc, ierr)
  call MPI_FINALIZE(ierr)
  if (bad /= 0) stop 1
contains
  subroutine check(style)
    character(*), intent(in) :: style
    calls = calls + 1
    if (ierr /= MPI_SUCCESS .or. any(transfer(a, 1, n) /= transfer(b, 1, n))) then
      print '(a,i0,a,a,a,i0)', 'FAIL rank ', rank, ': ', style, ': nonblocking result differs, step ', s
      bad = 1
    end if
  end subroutine check
end program test_fortran_iallreduce
