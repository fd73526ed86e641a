/* Two coupled models, as a climate code couples its ocean and its atmosphere: MPI_COMM_WORLD is
 * split into two halves (ranks below size/2 and the rest), and an intercommunicator joins them
 * (MPI_Intercomm_create over a duplicate of MPI_COMM_WORLD). Each step every rank computes (a
 * sleep: the cores stay free), exchanges a halo of ELEMENTS doubles with its ring neighbours in
 * its own model (MPI_Sendrecv on the model's communicator), and exchanges its boundary with the
 * rank of the same index in the other model (MPI_Isend/MPI_Irecv/MPI_Waitall on the
 * intercommunicator). Every 4 steps each model all-reduces its residual on its own
 * communicator, and every 10 steps the two models exchange their totals by an all-reduce on the
 * intercommunicator (each side gets the other side's sum). No collective runs on
 * MPI_COMM_WORLD. Prints a checksum of every value it received, for comparison with a native
 * run. Needs an even number of ranks, at least 2.
 *
 *   coupled_models [steps] [elements] [compute per step, us] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "compute_for.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int steps = argc > 1 ? atoi(argv[1]) : 100;
  const int elements = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 256;
  const long step_us = argc > 3 ? atol(argv[3]) : 1000;
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_size < 2 || world_size % 2 != 0) {
    if (world_rank == 0) fprintf(stderr, "coupled_models: needs an even number of ranks >= 2\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int half = world_size / 2;
  const int model_index = world_rank < half ? 0 : 1;
  MPI_Comm model, bridge, coupling;
  MPI_Comm_split(MPI_COMM_WORLD, model_index, world_rank, &model);
  MPI_Comm_dup(MPI_COMM_WORLD, &bridge);
  /* Local leader: each model's rank 0; remote leader: the other model's first world rank. */
  MPI_Intercomm_create(model, 0, bridge, model_index == 0 ? half : 0, 7, &coupling);
  int rank = 0, size = 1;
  MPI_Comm_rank(model, &rank);
  MPI_Comm_size(model, &size);
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;

  double* field = malloc(sizeof(double) * (size_t)elements);
  double* halo = malloc(sizeof(double) * (size_t)elements);
  double* boundary_out = malloc(sizeof(double) * (size_t)elements);
  double* boundary_in = malloc(sizeof(double) * (size_t)elements);
  for (int i = 0; i < elements; ++i) field[i] = world_rank + 0.001 * i;
  double checksum = 0;
  for (int step = 0; step < steps; ++step) {
    compute_for(step_us);
    MPI_Sendrecv(field, elements, MPI_DOUBLE, right, 1, halo, elements, MPI_DOUBLE, left, 1, model,
                 MPI_STATUS_IGNORE);
    for (int i = 0; i < elements; ++i) boundary_out[i] = field[i] * 0.5 + halo[i] * 0.25;
    MPI_Request requests[2];
    MPI_Status statuses[2];
    /* Intercommunicator ranks name the other group: rank r talks to the other model's rank r. */
    MPI_Irecv(boundary_in, elements, MPI_DOUBLE, rank, 2, coupling, &requests[0]);
    MPI_Isend(boundary_out, elements, MPI_DOUBLE, rank, 2, coupling, &requests[1]);
    MPI_Waitall(2, requests, statuses);
    double residual = 0;
    for (int i = 0; i < elements; ++i) {
      field[i] = 0.5 * field[i] + 0.25 * halo[i] + 0.25 * boundary_in[i];
      residual += boundary_in[i] * 1e-6 + halo[i] * 1e-7;
    }
    checksum += residual;
    if (step % 4 == 3) {
      double total = 0;
      MPI_Allreduce(&residual, &total, 1, MPI_DOUBLE, MPI_SUM, model);
      checksum += total * 1e-3;
    }
    if (step % 10 == 9) {
      double other_model = 0;
      MPI_Allreduce(&residual, &other_model, 1, MPI_DOUBLE, MPI_SUM, coupling);
      checksum += other_model * 1e-3;
    }
  }
  /* Each model's checksum is passed along its ring to its last rank; model 1's last rank sends
   * its own across the intercommunicator to model 0's, which prints both, in model order (one
   * process prints: the output compares with a native run's line for line). */
  if (rank > 0) {
    double before = 0;
    MPI_Recv(&before, 1, MPI_DOUBLE, rank - 1, 3, model, MPI_STATUS_IGNORE);
    checksum += before;
  }
  if (rank + 1 < size) {
    MPI_Send(&checksum, 1, MPI_DOUBLE, rank + 1, 3, model);
  } else if (model_index == 1) {
    MPI_Send(&checksum, 1, MPI_DOUBLE, rank, 4, coupling);
  } else {
    double other = 0;
    MPI_Recv(&other, 1, MPI_DOUBLE, rank, 4, coupling, MPI_STATUS_IGNORE);
    printf("coupled_models model 0 ranks %d steps %d checksum %.9e\n", size, steps, checksum);
    printf("coupled_models model 1 ranks %d steps %d checksum %.9e\n", size, steps, other);
  }
  free(field);
  free(halo);
  free(boundary_out);
  free(boundary_in);
  MPI_Comm_free(&coupling);
  MPI_Comm_free(&bridge);
  MPI_Comm_free(&model);
  MPI_Finalize();
  return 0;
}
