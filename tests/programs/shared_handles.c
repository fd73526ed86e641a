/* Many small sends outstanding at once, completed by one MPI_Waitall over an array with null
 * slots: MPICH completes small sends at once and gives them all one shared request handle
 * (tests/mpich_defects/shared_send_handles.c), so every completion must still be recorded.
 * Rank 0 posts 8 MPI_Isend of 3 doubles to rank 1 (which has pre-posted the receives) into
 * slots 0, 3, 6, ... of 26, then one MPI_Waitall(26); <rounds> times. Prints what it sent. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int rounds = argc > 1 ? atoi(argv[1]) : 10;
  enum { kSends = 8, kSlots = 26 };
  double data[kSends][3];
  long received = 0;
  for (int round = 0; round < rounds; ++round) {
    MPI_Request requests[kSlots];
    for (int i = 0; i < kSlots; ++i) requests[i] = MPI_REQUEST_NULL;
    if (rank == 1)
      for (int i = 0; i < kSends; ++i)
        MPI_Irecv(data[i], 3, MPI_DOUBLE, 0, i, MPI_COMM_WORLD, &requests[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
      for (int i = 0; i < kSends; ++i) {
        for (int k = 0; k < 3; ++k) data[i][k] = round * 100 + i * 10 + k;
        MPI_Isend(data[i], 3, MPI_DOUBLE, 1, i, MPI_COMM_WORLD, &requests[3 * i]);
      }
    MPI_Waitall(kSlots, requests, MPI_STATUSES_IGNORE);
    if (rank == 1)
      for (int i = 0; i < kSends; ++i) received += (long)data[i][2];
  }
  if (rank == 1) printf("sends %d, checksum %ld\n", rounds * kSends, received);
  MPI_Finalize();
  return 0;
}
