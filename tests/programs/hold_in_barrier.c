/* Rank 0 waits (outside MPI) until a byte arrives on the FIFO named by argv[1]; the other ranks
 * wait for it in MPI_Barrier (or, with "probe", in MPI_Probe for a message rank 0 sends each of
 * them once released). Lets a test look at the heartbeats of a job that is "hung" for as long as
 * it likes, then release it.
 *
 *   mpiexec -n 2 ./hold_in_barrier <fifo> [probe] */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int in_probe = argc > 2 && strcmp(argv[2], "probe") == 0;
  if (rank == 0) {
    int fd = open(argv[1], O_RDONLY);
    char byte;
    if (fd < 0 || read(fd, &byte, 1) != 1) perror("hold_in_barrier: fifo");
    if (fd >= 0) close(fd);
    for (int r = 1; in_probe && r < size; ++r) MPI_Send(&rank, 1, MPI_INT, r, 9, MPI_COMM_WORLD);
  } else if (in_probe) {
    MPI_Status status;
    int value = -1;
    MPI_Probe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &status);
    MPI_Recv(&value, 1, MPI_INT, status.MPI_SOURCE, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("released\n");
  MPI_Finalize();
  return 0;
}
