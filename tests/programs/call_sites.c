/* Collectives called from named functions, so a test can check that commtap's call sites name
 * the function that made each call. Each call is followed by more work so that the compiler
 * cannot turn it into a tail call (which would make the caller's caller the call site).
 *
 *   mpiexec -n 2 ./call_sites */
#include <mpi.h>
#include <stdio.h>

static volatile int steps_done = 0;

__attribute__((noinline)) static void exchange_gradients(int* value, int* sum) {
  MPI_Allreduce(value, sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  steps_done = steps_done + 1;
}

__attribute__((noinline)) void synchronize_step(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  steps_done = steps_done + 1;
}

__attribute__((noinline)) void overlap_gradients(int* value, int* sum) {
  MPI_Request request;
  MPI_Iallreduce(value, sum, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int step = 0; step < 3; ++step) {
    int value = rank + step;
    exchange_gradients(&value, &sum);
    overlap_gradients(&value, &sum);
    synchronize_step();
  }
  if (rank == 0) printf("sum %d\n", sum);
  MPI_Finalize();
  return 0;
}
