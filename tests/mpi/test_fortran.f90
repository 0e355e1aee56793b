! SPDX-License-Identifier: BSD-3-Clause
! The Fortran entry points of libnfcoll (lib/api/fortran.c), run by
! tests/mpi_fortran.sh plain, preloaded and relinked:
!
!   test_fortran MODE START
!
! MODE transparency: REAL allreduces (sums of 0 to 1 MiB + 8 bytes, in place
!   and not, MPI_REAL4, MAX), DOUBLE PRECISION and INTEGER sums through
!   `use mpi`, and REAL sums (in place and not) through mpif.h and
!   `use mpi_f08`. Rank 0 prints a digest of every rank's result bits:
!   without a policy, the output must not change under libnfcoll.
! MODE policy: the same three styles under tests/policy_shim/fortran_real.policy
!   (REAL sums of 1 MiB or more binary, without error feedback). Inputs are
!   (rank+1) on odd and 3(rank+1) on even elements, so G-Binary gives every
!   element n(n+1) and the exact sum gives n(n+1)/2 or 3n(n+1)/2: each line
!   says which result every rank got and which one the policy wants.
! START is how MPI starts and stops: mpi (MPI_INIT, `use mpi`), thread
!   (MPI_INIT_THREAD, mpif.h) or f08 (MPI_Init, `use mpi_f08`, no ierror).
!
! Last line: "calls: binary B pmpi P", this rank's allreduces by the route
! they should take (all pmpi without a policy), for the NFCOLL_STATS check.
program test_fortran
  use mpi
  implicit none
  ! 1 MiB + 8 bytes of REAL, even: G-Binary's mean magnitude is exact.
  integer, parameter :: big = 262146
  integer :: rank, np, ierr, ncalls, nbin
  character(len=16) :: mode, start

  call get_command_argument(1, mode)
  call get_command_argument(2, start)
  select case (start)
  case ('mpi')
    call MPI_Init(ierr)
  case ('thread')
    call h_init_thread()
  case ('f08')
    call f08_init()
  case default
    print '(a)', 'usage: test_fortran transparency|policy mpi|thread|f08'
    stop 2
  end select
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  ncalls = 0
  nbin = 0
  if (mode == 'policy') then
    call policy()
  else
    call transparency()
  end if
  if (rank == 0) print '(a,i0,a,i0)', 'calls: binary ', nbin, ' pmpi ', ncalls - nbin
  select case (start)
  case ('mpi')
    call MPI_Finalize(ierr)
  case ('thread')
    call h_finalize()
  case default
    call f08_finalize()
  end select

contains

  ! After every allreduce: count it, stop on an error.
  subroutine check(rc)
    integer, intent(in) :: rc
    ncalls = ncalls + 1
    if (rc /= MPI_SUCCESS) then
      print '(a,i0)', 'an allreduce returned ', rc
      call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
    end if
  end subroutine check

  ! Every bit of b, in order, as a number below 2**31 - 1.
  integer(kind=8) function hash(b, n)
    integer, intent(in) :: n, b(n)
    integer :: i
    hash = 0
    do i = 1, n
      hash = modulo(hash * 31_8 + int(b(i), 8), 2147483647_8)
    end do
  end function hash

  ! Rank 0 prints what every rank holds (MPI_Gather: no allreduce).
  subroutine digest(what, b, n)
    character(len=*), intent(in) :: what
    integer, intent(in) :: n, b(n)
    integer(kind=8) :: h, all(np)
    h = hash(b, n)
    call MPI_Gather(h, 1, MPI_INTEGER8, all, 1, MPI_INTEGER8, 0, MPI_COMM_WORLD, ierr)
    if (rank == 0) print '(a,*(1x,z8.8))', what, all
  end subroutine digest

  subroutine fill(x, n, salt)
    integer, intent(in) :: n, salt
    real, intent(out) :: x(n)
    integer :: i
    do i = 1, n
      x(i) = sin(0.37 * real(i) + real(rank + salt)) * 1000.0
    end do
  end subroutine fill

  subroutine transparency()
    integer, parameter :: sizes(5) = [0, 1, 7, 1000, big]
    real, allocatable :: x(:), y(:)
    double precision :: dx(1000), dy(1000)
    integer :: ix(1000), iy(1000), k, n
    character(len=40) :: what

    allocate (x(big), y(big))
    do k = 1, size(sizes)
      n = sizes(k)
      call fill(x, n, k)
      y = -1.0
      call MPI_Allreduce(x, y, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
      call check(ierr)
      write (what, '(a,i0)') 'mpi real sum ', n
      call digest(trim(what), transfer(y(1:n), 0, n), n)
    end do
    do k = 4, 5
      n = sizes(k)
      call fill(y, n, 7)
      call MPI_Allreduce(MPI_IN_PLACE, y, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
      call check(ierr)
      write (what, '(a,i0)') 'mpi real sum in place ', n
      call digest(trim(what), transfer(y(1:n), 0, n), n)
    end do
    call fill(x, big, 8)
    call MPI_Allreduce(x, y, big, MPI_REAL4, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check(ierr)
    call digest('mpi real4 sum', transfer(y, 0, big), big)
    call MPI_Allreduce(x, y, 1000, MPI_REAL, MPI_MAX, MPI_COMM_WORLD, ierr)
    call check(ierr)
    call digest('mpi real max 1000', transfer(y(1:1000), 0, 1000), 1000)
    dx = dble(x(1:1000)) * 1.0000001d0
    call MPI_Allreduce(dx, dy, 1000, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check(ierr)
    call digest('mpi double precision sum 1000', transfer(dy, 0, 2000), 2000)
    ix = int(x(1:1000))
    call MPI_Allreduce(ix, iy, 1000, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check(ierr)
    call digest('mpi integer sum 1000', iy, 1000)

    do k = 4, 5
      n = sizes(k)
      call fill(x, n, 10)
      call h_sum(x, y, n, ierr)
      call check(ierr)
      write (what, '(a,i0)') 'mpif.h real sum ', n
      call digest(trim(what), transfer(y(1:n), 0, n), n)
      call f08_sum(x, y, n, ierr)
      call check(ierr)
      write (what, '(a,i0)') 'mpi_f08 real sum ', n
      call digest(trim(what), transfer(y(1:n), 0, n), n)
    end do
    call fill(y, big, 11)
    call h_sum_in_place(y, big, ierr)
    call check(ierr)
    call digest('mpif.h real sum in place', transfer(y, 0, big), big)
    call fill(y, big, 12)
    call f08_sum_in_place(y, big, ierr)
    call check(ierr)
    call digest('mpi_f08 real sum in place', transfer(y, 0, big), big)
  end subroutine transparency

  ! x(i) = (rank+1) on odd i, 3(rank+1) on even i.
  subroutine pattern(x, n)
    integer, intent(in) :: n
    real, intent(out) :: x(n)
    integer :: i
    do i = 1, n
      x(i) = real((rank + 1) * merge(1, 3, mod(i, 2) == 1))
    end do
  end subroutine pattern

  ! After an allreduce that returned rc: which result every rank got: exact
  ! (the sum, or the max with is_max), binary (n(n+1) everywhere), other, or
  ! mixed (ranks differ).
  subroutine verdict(rc, what, want, y, n, is_max)
    integer, intent(in) :: rc, n
    character(len=*), intent(in) :: what, want
    real, intent(in) :: y(n)
    logical, intent(in) :: is_max
    character(len=*), parameter :: names(0:3) = [character(len=6) :: 'exact', 'binary', &
                                                 'other', 'mixed']
    integer :: i, got, lo, hi
    real :: e
    logical :: exact
    call check(rc)
    exact = .true.
    do i = 1, n
      e = real(np * (np + 1) / 2 * merge(1, 3, mod(i, 2) == 1))
      if (is_max) e = real(np * merge(1, 3, mod(i, 2) == 1))
      exact = exact .and. y(i) == e
    end do
    got = 2
    if (all(y == real(np * (np + 1)))) got = 1
    if (exact) got = 0
    call MPI_Reduce(got, lo, 1, MPI_INTEGER, MPI_MIN, 0, MPI_COMM_WORLD, ierr)
    call MPI_Reduce(got, hi, 1, MPI_INTEGER, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
    if (lo /= hi) lo = 3
    if (rank == 0) print '(a,1x,i0,a,a,a,a)', what, n, ': want ', want, ' got ', trim(names(lo))
    if (want == 'binary') nbin = nbin + 1
  end subroutine verdict

  subroutine policy()
    real, allocatable :: x(:), y(:)
    double precision, allocatable :: dx(:), dy(:)
    integer :: ix(1000), iy(1000)

    allocate (x(big), y(big), dx(big), dy(big))
    call pattern(x, big)
    call MPI_Allreduce(x, y, big, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    call verdict(ierr, 'mpi real sum', 'binary', y, big, .false.)
    call pattern(y, big)
    call MPI_Allreduce(MPI_IN_PLACE, y, big, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    call verdict(ierr, 'mpi real sum in place', 'binary', y, big, .false.)
    call MPI_Allreduce(x, y, big, MPI_REAL4, MPI_SUM, MPI_COMM_WORLD, ierr)
    call verdict(ierr, 'mpi real4 sum', 'binary', y, big, .false.)
    call MPI_Allreduce(x, y, 1000, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    call verdict(ierr, 'mpi real sum (small)', 'exact', y, 1000, .false.)
    call MPI_Allreduce(x, y, big, MPI_REAL, MPI_MAX, MPI_COMM_WORLD, ierr)
    call verdict(ierr, 'mpi real max', 'exact', y, big, .true.)
    dx = dble(x)
    call MPI_Allreduce(dx, dy, big, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    call verdict(ierr, 'mpi double precision sum', 'exact', real(dy), big, .false.)
    ix = int(x(1:1000))
    call MPI_Allreduce(ix, iy, 1000, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call verdict(ierr, 'mpi integer sum', 'exact', real(iy), 1000, .false.)

    call h_sum(x, y, big, ierr)
    call verdict(ierr, 'mpif.h real sum', 'binary', y, big, .false.)
    call pattern(y, big)
    call h_sum_in_place(y, big, ierr)
    call verdict(ierr, 'mpif.h real sum in place', 'binary', y, big, .false.)
    call f08_sum(x, y, big, ierr)
    call verdict(ierr, 'mpi_f08 real sum', 'binary', y, big, .false.)
    call pattern(y, big)
    call f08_sum_in_place(y, big, ierr)
    call verdict(ierr, 'mpi_f08 real sum in place', 'binary', y, big, .false.)
  end subroutine policy

end program test_fortran
