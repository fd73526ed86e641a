/* A ring exchange with no collective after MPI_Init: each step every rank posts a receive from
 * its left neighbour (MPI_Irecv), computes (a sleep: the cores stay free), sends to its right
 * neighbour (MPI_Send) and waits for its receive (MPI_Wait); the halves of the ring then swap
 * direction with MPI_Sendrecv every 8th step. The checksum travels through the ring at the end
 * by MPI_Send/MPI_Recv and the last rank prints it (NPB CG and MG have no collective in their
 * timed loops either).
 *
 *   ring_no_collectives [steps] [doubles] [compute per step, us] [stop file]
 *
 * With a stop file, `steps` is the least number of steps: the ring goes on until rank 0 finds the
 * file, so a test can run it until what it waits for has happened, however loaded the machine
 * (no wall-clock guess). Rank 0 then names a last step far enough ahead for the news to reach
 * every rank around the ring (one hop a step, in a word after the data); the number of steps run
 * is printed, and a run of that many steps without a stop file prints the same checksum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "compute_for.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int least_steps = argc > 1 ? atoi(argv[1]) : 100;
  const int count = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 1024;
  const long step_us = argc > 3 ? atol(argv[3]) : 1000;
  const char* stop_file = argc > 4 ? argv[4] : NULL;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  /* The data, then the last step (0 while not known). */
  double* out = malloc(sizeof(double) * (size_t)(count + 1));
  double* in = malloc(sizeof(double) * (size_t)(count + 1));
  for (int i = 0; i < count; ++i) out[i] = rank + 0.001 * (i % 89);
  int last_step = stop_file ? 0 : least_steps;
  double checksum = 0;
  int step = 0;
  for (; last_step == 0 || step < last_step; ++step) {
    if (rank == 0 && last_step == 0 && step >= least_steps && access(stop_file, F_OK) == 0)
      last_step = step + size + 1;
    out[count] = last_step;
    MPI_Request request;
    MPI_Irecv(in, count + 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &request);
    compute_for(step_us);
    MPI_Send(out, count + 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    if (last_step == 0 && in[count] > 0) last_step = (int)in[count];
    if (step % 8 == 7)
      MPI_Sendrecv_replace(in, count, MPI_DOUBLE, left, 2, right, 2, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE);
    for (int i = 0; i < count; ++i) out[i] = 0.5 * (out[i] + in[i]) + 1e-3 * step;
    checksum += out[step % count];
  }
  if (rank > 0) {
    double before = 0;
    MPI_Recv(&before, 1, MPI_DOUBLE, rank - 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    checksum += before;
  }
  if (rank + 1 < size)
    MPI_Send(&checksum, 1, MPI_DOUBLE, rank + 1, 3, MPI_COMM_WORLD);
  else
    printf("ring_no_collectives ranks %d steps %d checksum %.6f\n", size, step, checksum);
  free(out);
  free(in);
  MPI_Finalize();
  return 0;
}
