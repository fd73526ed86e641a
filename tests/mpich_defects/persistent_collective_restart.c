/* MPICH 4.0.2 defect: a persistent collective cannot be restarted on 3 or more ranks. With
 * MPI_Scatter_init on 3 ranks, the second MPI_Start + MPI_Wait returns an error on two ranks
 * and never completes on the third (on 2 ranks every round is right). Run with a timeout:
 *   timeout 10 mpiexec -n 3 ./persistent_collective_restart
 * With the defect: errors printed and a hang (timeout's exit status 124); without: exit 0. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int whole[64], part[5];
  for (int i = 0; i < 64; ++i) whole[i] = i;
  MPI_Request request;
  MPI_Scatter_init(whole, 5, MPI_INT, part, 5, MPI_INT, size - 1, MPI_COMM_WORLD, MPI_INFO_NULL,
                   &request);
  int failed = 0;
  for (int round = 0; round < 3; ++round) {
    int rc = MPI_Start(&request);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || part[0] != 5 * rank) {
      printf("rank %d round %d: rc %d, part[0] %d (expected %d): DEFECT PRESENT\n", rank, round, rc,
             part[0], 5 * rank);
      fflush(stdout);
      failed = 1;
    }
  }
  MPI_Request_free(&request);
  MPI_Finalize();
  return failed;
}
