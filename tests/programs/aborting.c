/* Rank 0 calls MPI_Abort after some work while the others wait in a barrier: the aborting rank's
 * record is written before the library tears the job down (ended_by = 'abort'). With "segv",
 * rank 1 dereferences a null pointer instead (a crash: SIGSEGV), with "abort" it calls abort()
 * (SIGABRT), while the others wait.
 *
 *   mpiexec -n 2 ./aborting [segv | abort] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, value = 1, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int segv = argc > 1 && strcmp(argv[1], "segv") == 0;
  const int crash_abort = argc > 1 && strcmp(argv[1], "abort") == 0;
  for (int i = 0; i < 2; ++i) MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (segv && rank == 1) {
    volatile int* nowhere = NULL;
    *nowhere = sum;
  }
  if (crash_abort && rank == 1) abort();
  if (!segv && !crash_abort && rank == 0) MPI_Abort(MPI_COMM_WORLD, 3);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
