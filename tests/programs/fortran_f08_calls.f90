! A `use mpi_f08` program calling functions whose f08 bindings reach the C library by different
! routes (MPI_Barrier, MPI_Wait and MPI_Waitall by PMPI_, the others by MPI_). Rank 0 prints how
! many times it called each; the test compares that with what the trace recorded.
program fortran_f08_calls
  use mpi_f08
  implicit none
  integer, parameter :: rounds = 3
  integer :: rank, nranks, peer, i, flag_count, index
  logical :: flag
  integer :: out(8), in(8), sums(8)
  type(MPI_Request) :: requests(2), request
  type(MPI_Status) :: status
  type(MPI_Comm) :: dup
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  peer = mod(rank + 1, nranks)
  flag_count = 0
  do i = 1, rounds
    out = rank * 100 + i
    call MPI_Barrier(MPI_COMM_WORLD)
    call MPI_Allreduce(out, sums, 8, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    call MPI_Bcast(sums, 8, MPI_INTEGER, 0, MPI_COMM_WORLD)
    call MPI_Irecv(in, 8, MPI_INTEGER, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, requests(1))
    call MPI_Isend(out, 8, MPI_INTEGER, peer, 5, MPI_COMM_WORLD, requests(2))
    call MPI_Waitall(2, requests, MPI_STATUSES_IGNORE)
    call MPI_Irecv(in, 8, MPI_INTEGER, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, request)
    call MPI_Send(out, 8, MPI_INTEGER, peer, 6, MPI_COMM_WORLD)
    call MPI_Wait(request, status)
    call MPI_Sendrecv(out, 8, MPI_INTEGER, peer, 7, in, 8, MPI_INTEGER, MPI_ANY_SOURCE, 7, &
                      MPI_COMM_WORLD, status)
    call MPI_Ibarrier(MPI_COMM_WORLD, request)
    flag = .false.
    do while (.not. flag)
      call MPI_Test(request, flag, status)
      flag_count = flag_count + 1
    end do
    call MPI_Ibarrier(MPI_COMM_WORLD, request)
    requests(1) = request
    call MPI_Waitany(1, requests(1:1), index, status)
  end do
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call MPI_Barrier(dup)
  call MPI_Comm_free(dup)
  if (rank == 0) then
    print '(a,i0)', 'MPI_Barrier ', rounds + 1
    print '(a,i0)', 'MPI_Allreduce ', rounds
    print '(a,i0)', 'MPI_Bcast ', rounds
    print '(a,i0)', 'MPI_Irecv ', 2 * rounds
    print '(a,i0)', 'MPI_Isend ', rounds
    print '(a,i0)', 'MPI_Send ', rounds
    print '(a,i0)', 'MPI_Waitall ', rounds
    print '(a,i0)', 'MPI_Wait ', rounds
    print '(a,i0)', 'MPI_Sendrecv ', rounds
    print '(a,i0)', 'MPI_Ibarrier ', 2 * rounds
    print '(a,i0)', 'MPI_Test ', flag_count
    print '(a,i0)', 'MPI_Waitany ', rounds
    print '(a,i0)', 'MPI_Comm_dup ', 1
    print '(a,i0)', 'MPI_Comm_free ', 1
  end if
  call MPI_Finalize()
end program fortran_f08_calls
