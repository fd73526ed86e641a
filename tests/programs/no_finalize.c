/* Leaves main without MPI_Finalize: commtap keeps what it recorded (ended_by = 'exit').
 *
 *   mpiexec -n 1 ./no_finalize */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int value = 2, sum = 0;
  for (int i = 0; i < 3; ++i) MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("sum %d\n", sum);
  return 0;
}
