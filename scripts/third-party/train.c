/* Data-parallel training loop: compute, then MPI_Allreduce of gradients of a few sizes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double work(double* x, int n, int reps) {
  double s = 0;
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < n; i++) {
      x[i] = x[i] * 0.999 + 0.001 * i;
      s += x[i];
    }
  return s;
}
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int steps = argc > 1 ? atoi(argv[1]) : 400;
  const int sizes[4] = {1 << 16, 1 << 12, 1 << 18, 16}; /* layers' gradients, and a loss scalar */
  double *g = malloc(sizeof(double) * (1 << 18)), *r = malloc(sizeof(double) * (1 << 18));
  double* x = malloc(sizeof(double) * 200000);
  for (int i = 0; i < 200000; i++) x[i] = i % 7;
  double check = 0;
  for (int s = 0; s < steps; s++) {
    double v = work(x, 200000, 5);
    for (int l = 0; l < 4; l++) {
      for (int i = 0; i < sizes[l]; i++) g[i] = (double)((rank + 1) * (i % 13) + s % 5);
      MPI_Allreduce(g, r, sizes[l], MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      check += r[sizes[l] - 1];
    }
    (void)v;
  }
  if (rank == 0) printf("train: %d steps, checksum %.17g\n", steps, check);
  MPI_Finalize();
  return 0;
}
