/* A parameter server on a duplicate of MPI_COMM_WORLD: each step rank 0 (the server) scatters a
 * block of PARAMS doubles to every rank, the workers compute (a sleep: the cores stay free) and
 * the server gathers their updates; every 25 steps the updates are also reduced to the server
 * and the new parameters broadcast. Prints a checksum of the server's parameters. From step
 * `slower from` on (default: never) the compute takes four times as long: the program's pace
 * drops, as a fault's would.
 *
 *   param_server [steps] [params per rank] [compute per step, us] [slower from] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "compute_for.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int steps = argc > 1 ? atoi(argv[1]) : 100;
  const int params = argc > 2 ? atoi(argv[2]) : 512;
  const long step_us = argc > 3 ? atol(argv[3]) : 1000;
  const int slower_from = argc > 4 ? atoi(argv[4]) : steps;
  MPI_Comm ps;
  MPI_Comm_dup(MPI_COMM_WORLD, &ps);
  int rank = 0, size = 1;
  MPI_Comm_rank(ps, &rank);
  MPI_Comm_size(ps, &size);
  double* all = malloc(sizeof(double) * (size_t)params * (size_t)size);
  double* mine = malloc(sizeof(double) * (size_t)params);
  double* sum = malloc(sizeof(double) * (size_t)params);
  for (int i = 0; i < params * size; ++i) all[i] = 0.001 * i;
  for (int step = 0; step < steps; ++step) {
    MPI_Scatter(all, params, MPI_DOUBLE, mine, params, MPI_DOUBLE, 0, ps);
    if (rank != 0) compute_for(step < slower_from ? step_us : 4 * step_us);
    for (int i = 0; i < params; ++i) mine[i] = mine[i] * 0.999 + 0.001 * (rank + step % 7);
    MPI_Gather(mine, params, MPI_DOUBLE, all, params, MPI_DOUBLE, 0, ps);
    if (step % 25 == 24) {
      MPI_Reduce(mine, sum, params, MPI_DOUBLE, MPI_SUM, 0, ps);
      if (rank == 0)
        for (int i = 0; i < params; ++i) all[i] = sum[i] / size;
      MPI_Bcast(all, params, MPI_DOUBLE, 0, ps);
    }
  }
  if (rank == 0) {
    double checksum = 0;
    for (int i = 0; i < params * size; ++i) checksum += all[i];
    printf("param_server ranks %d steps %d checksum %.6f\n", size, steps, checksum);
  }
  free(all);
  free(mine);
  free(sum);
  MPI_Comm_free(&ps);
  MPI_Finalize();
  return 0;
}
