/* Makes and frees communicators by the hundred thousand, as MPICH's test/mpi/comm/ctxalloc
 * does: `batches` times, 200 duplicates of one communicator, then frees them all. Prints the
 * number of duplicates made and failed on rank 0. Usage: comm_churn batches */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int batches = argc > 1 ? atoi(argv[1]) : 1000, rank, made = 0, failed = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm base, comms[200];
  MPI_Comm_dup(MPI_COMM_WORLD, &base);
  MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN);
  for (int i = 0; i < batches; i++) {
    for (int j = 0; j < 200; j++) {
      if (MPI_Comm_dup(base, &comms[j]) == MPI_SUCCESS)
        made++;
      else
        failed++;
    }
    for (int j = 0; j < 200; j++)
      if (MPI_Comm_free(&comms[j]) != MPI_SUCCESS) failed++;
  }
  MPI_Comm_free(&base);
  if (rank == 0) printf("made %d failed %d\n", made, failed);
  MPI_Finalize();
  return 0;
}
