/* A job for link probes: blocking all-reduces on MPI_COMM_WORLD (where probes start) with a
 * ring receive posted before each and matched after it, so that nonblocking operations are in
 * flight whenever a probe runs, and some compute between steps. Prints a checksum of everything
 * it received: the output must not change when commtap probes.
 *
 *   probe_workload STEPS WORK_US */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double busy(long us, double x) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000000L + (now.tv_nsec - start.tv_nsec) / 1000 < us);
  return x;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int steps = argc > 1 ? atoi(argv[1]) : 100;
  const long work_us = argc > 2 ? atol(argv[2]) : 1000;
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  double checksum = 0, x = 1;
  for (int step = 0; step < steps; ++step) {
    double in = 0, out = rank * 1000.0 + step, sum = 0, mine = step + rank * 0.5;
    MPI_Request request;
    MPI_Irecv(&in, 1, MPI_DOUBLE, left, step, MPI_COMM_WORLD, &request);
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Send(&out, 1, MPI_DOUBLE, right, step, MPI_COMM_WORLD);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    checksum += in + sum;
    x = busy(work_us, x);
  }
  double total = 0;
  MPI_Reduce(&checksum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("steps %d checksum %.6f\n", steps, total);
  MPI_Finalize();
  return x < 0;
}
