/* A 2-D stencil on a periodic Cartesian communicator (MPI_Cart_create over MPI_Dims_create's
 * grid): each step every rank exchanges a halo of ELEMENTS doubles with its 4 neighbours
 * (MPI_Isend/MPI_Irecv/MPI_Waitall), computes (a sleep: the cores stay free), and the residual
 * is all-reduced on the Cartesian communicator. No collective runs on MPI_COMM_WORLD: every
 * collective the job calls is the Cartesian communicator's. Prints a checksum of every value
 * it received, for comparison with a native run.
 *
 * With "neighbor" the halos move by MPI_Neighbor_alltoall instead (the same values: block i
 * goes to and comes from the i-th neighbour of MPI_Cart_shift's order), and the residual is
 * all-reduced every 50th step only: a program whose communication is almost all neighbourhood
 * collectives, which MPICH moves without calling MPI's point-to-point functions.
 *
 *   stencil_cart [steps] [halo elements] [compute per step, us] [p2p|neighbor] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compute_for.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int steps = argc > 1 ? atoi(argv[1]) : 100;
  const int elements = argc > 2 ? atoi(argv[2]) : 256;
  const long step_us = argc > 3 ? atol(argv[3]) : 1000;
  const int by_neighbor_collective = argc > 4 && strcmp(argv[4], "neighbor") == 0;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int dims[2] = {0, 0}, periods[2] = {1, 1};
  MPI_Dims_create(size, 2, dims);
  MPI_Comm grid;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &grid);
  int rank = 0;
  MPI_Comm_rank(grid, &rank);
  int neighbour[4]; /* -x, +x, -y, +y */
  MPI_Cart_shift(grid, 0, 1, &neighbour[0], &neighbour[1]);
  MPI_Cart_shift(grid, 1, 1, &neighbour[2], &neighbour[3]);
  double* out = malloc(sizeof(double) * (size_t)elements * 4);
  double* in = malloc(sizeof(double) * (size_t)elements * 4);
  double checksum = 0, field = rank + 1.0;
  for (int step = 0; step < steps; ++step) {
    for (int side = 0; side < 4; ++side)
      for (int i = 0; i < elements; ++i)
        out[side * elements + i] = field + 0.001 * i + 0.1 * side + step;
    if (by_neighbor_collective) {
      MPI_Neighbor_alltoall(out, elements, MPI_DOUBLE, in, elements, MPI_DOUBLE, grid);
    } else {
      MPI_Request requests[8];
      MPI_Status statuses[8];
      for (int side = 0; side < 4; ++side) {
        /* What goes towards -x arrives at that neighbour from its +x side: tag by direction. */
        MPI_Irecv(&in[side * elements], elements, MPI_DOUBLE, neighbour[side], side ^ 1, grid,
                  &requests[side]);
        MPI_Isend(&out[side * elements], elements, MPI_DOUBLE, neighbour[side], side, grid,
                  &requests[4 + side]);
      }
      MPI_Waitall(8, requests, statuses);
    }
    double local = 0;
    for (int i = 0; i < 4 * elements; ++i) local += in[i];
    field = 0.5 * field + local / (4.0 * elements) * 0.5;
    compute_for(step_us);
    double residual = local;
    if (!by_neighbor_collective || step % 50 == 49)
      MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, grid);
    checksum += residual * 1e-6;
  }
  double total = 0;
  MPI_Reduce(&checksum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, grid);
  if (rank == 0) printf("stencil %dx%d steps %d checksum %.6f\n", dims[0], dims[1], steps, total);
  free(out);
  free(in);
  MPI_Comm_free(&grid);
  MPI_Finalize();
  return 0;
}
