/* Rank 0 waits (outside MPI) until a byte arrives on the FIFO named by argv[1]; the other ranks
 * wait for it in MPI_Barrier. Lets a test look at the heartbeats of a job that is "hung" for as
 * long as it likes, then release it.
 *
 *   mpiexec -n 2 ./hold_in_barrier <fifo> */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    int fd = open(argv[1], O_RDONLY);
    char byte;
    if (fd < 0 || read(fd, &byte, 1) != 1) perror("hold_in_barrier: fifo");
    if (fd >= 0) close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("released\n");
  MPI_Finalize();
  return 0;
}
