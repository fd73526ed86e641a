// A compute-plus-all-reduce loop (issue 3's "under 1% slower than native"): each step computes
// for about `compute_us` on the CPU (a fixed amount of arithmetic, calibrated once on rank 0 and
// broadcast so every rank does the same work), then all-reduces `bytes` of doubles. Prints the
// median over 7 batches of the time per step, measured 1.5 s after MPI_Init (commtap's steady
// state: its writer switches the clock at its first window).
//
//   mpiexec -n 2 build/bench/loop [compute us] [bytes] [steps per batch]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

volatile double sink = 0;

void compute(long iterations) {
  double x = 1.0;
  for (long i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
  sink = x;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const double compute_us = argc > 1 ? std::atof(argv[1]) : 100.0;
  const int count = (argc > 2 ? std::atoi(argv[2]) : 8192) / 8;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 5000;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  long iterations = 0;
  if (rank == 0) {
    const auto start = std::chrono::steady_clock::now();
    compute(10'000'000);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    iterations = static_cast<long>(10'000'000 * compute_us / us);
  }
  MPI_Bcast(&iterations, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  std::vector<double> in(static_cast<std::size_t>(count), 1.0), out(in.size());
  std::vector<double> per_step;
  for (int batch = 0; batch < 8; ++batch) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int s = 0; s < steps; ++s) {
      compute(iterations);
      MPI_Allreduce(in.data(), out.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    double elapsed = MPI_Wtime() - start, slowest = 0;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (batch > 0) per_step.push_back(slowest / steps * 1e6);  // the first batch warms up
  }
  std::sort(per_step.begin(), per_step.end());
  if (rank == 0) std::printf("step_us %.3f\n", per_step[per_step.size() / 2]);
  MPI_Finalize();
  return 0;
}
