! The `use mpi_f08` binding: its MPI_Init and MPI_Finalize call PMPI_Init/PMPI_Finalize
! directly, so commtap catches them by their Fortran symbols (interpose/fortran_f08.cpp).
program fortran_use_mpi_f08
  use mpi_f08
  implicit none
  integer :: rank, size, i, provided
  integer :: values(4), sums(4)
  if (command_argument_count() > 0) then
    call MPI_Init_thread(MPI_THREAD_FUNNELED, provided)
  else
    call MPI_Init()
  end if
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  do i = 1, 5
    values = (/ rank + i, rank * i, i, 7 /)
    call MPI_Allreduce(values, sums, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    if (rank == 0) print '(a,i2,a,4i6)', 'mpi_f08 step ', i, ' sums', sums
  end do
  call MPI_Bcast(sums, 4, MPI_INTEGER, 0, MPI_COMM_WORLD)
  call MPI_Finalize()
end program fortran_use_mpi_f08
