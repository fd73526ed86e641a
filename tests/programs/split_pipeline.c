/* A pipeline of blocking stages: each step rank 0 (the input stage) sends BYTES of activations
 * to rank 1, every stage receives from the one before, computes (a sleep: the cores stay free)
 * and sends on (MPI_Send/MPI_Recv), and the gradients come back the same way. Every 5 steps the
 * model stages (every rank but the input stage) all-reduce their loss on a communicator split
 * off MPI_COMM_WORLD without rank 0: no collective runs on MPI_COMM_WORLD. Prints a checksum.
 *
 *   split_pipeline [steps] [bytes] [compute per step, us] [stop file]
 *
 * With a stop file, `steps` is the least number of steps: the pipeline goes on until the input
 * stage finds the file, so a test can run it until what it waits for has happened, however
 * loaded the machine. The input stage says which step is the last in a word after the
 * activations, which every stage has before it computes; the number of steps run is printed,
 * and a run of that many steps without a stop file prints the same checksum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "compute_for.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int least_steps = argc > 1 ? atoi(argv[1]) : 100;
  const int bytes = argc > 2 ? atoi(argv[2]) : 16384;
  const long step_us = argc > 3 ? atol(argv[3]) : 1000;
  const char* stop_file = argc > 4 ? argv[4] : NULL;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm model;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, rank, &model);
  const int count = bytes / (int)sizeof(double) > 0 ? bytes / (int)sizeof(double) : 1;
  /* The activations, then (with a stop file only) whether this step is the last. */
  const int sent = stop_file ? count + 1 : count;
  double* activations = malloc(sizeof(double) * (size_t)sent);
  double* gradients = malloc(sizeof(double) * (size_t)count);
  double checksum = 0;
  int step = 0, last = least_steps <= 0 && !stop_file;
  for (; !last; ++step) {
    if (rank == 0) {
      for (int i = 0; i < count; ++i) activations[i] = 0.001 * (i % 97) + step;
      last = step + 1 >= least_steps && (!stop_file || access(stop_file, F_OK) == 0);
      if (stop_file) activations[count] = last;
    } else {
      MPI_Recv(activations, sent, MPI_DOUBLE, rank - 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      last = stop_file ? activations[count] != 0 : step + 1 >= least_steps;
    }
    compute_for(step_us);
    for (int i = 0; i < count; i += 64) activations[i] += rank;
    if (rank + 1 < size) {
      MPI_Send(activations, sent, MPI_DOUBLE, rank + 1, 1, MPI_COMM_WORLD);
      MPI_Recv(gradients, count, MPI_DOUBLE, rank + 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      for (int i = 0; i < count; ++i) gradients[i] = activations[i] * 0.5;
    }
    double loss = 0;
    for (int i = 0; i < count; i += 64) loss += gradients[i];
    if (rank > 0) MPI_Send(gradients, count, MPI_DOUBLE, rank - 1, 2, MPI_COMM_WORLD);
    if (model != MPI_COMM_NULL && step % 5 == 4) {
      double total = 0;
      MPI_Allreduce(&loss, &total, 1, MPI_DOUBLE, MPI_SUM, model);
      checksum += total * 1e-6;
    }
    if (rank == 0) checksum += loss * 1e-6;
  }
  /* The checksum is printed by each model stage's first rank and the input stage, in rank order
   * through the pipeline: no collective on MPI_COMM_WORLD. */
  if (rank > 0) {
    double before = 0;
    MPI_Recv(&before, 1, MPI_DOUBLE, rank - 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    checksum += before;
  }
  if (rank + 1 < size)
    MPI_Send(&checksum, 1, MPI_DOUBLE, rank + 1, 3, MPI_COMM_WORLD);
  else
    printf("split_pipeline ranks %d steps %d checksum %.6f\n", size, step, checksum);
  free(activations);
  free(gradients);
  if (model != MPI_COMM_NULL) MPI_Comm_free(&model);
  MPI_Finalize();
  return 0;
}
