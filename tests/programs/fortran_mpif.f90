! The mpif.h binding: reaches commtap through the C MPI_* symbols.
program fortran_mpif
  implicit none
  include 'mpif.h'
  integer :: ierror, rank, size, i
  integer :: values(4), sums(4)
  call MPI_Init(ierror)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierror)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierror)
  do i = 1, 5
    values = (/ rank + i, rank * i, i, 7 /)
    call MPI_Allreduce(values, sums, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierror)
    if (rank == 0) print '(a,i2,a,4i6)', 'mpif step ', i, ' sums', sums
  end do
  call MPI_Bcast(sums, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierror)
  call MPI_Finalize(ierror)
end program fortran_mpif
