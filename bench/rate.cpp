// A job that calls MPI_Allreduce (8 bytes) at a fixed rate, for the writer thread's CPU share at
// that rate (bench/writer_cpu.sh reads it from the trace database's heartbeats). Calls are paced
// against the clock, not slept between: the rate holds whatever the call costs.
//
//   mpiexec -n 1 build/bench/rate [calls per second] [seconds]
#include <mpi.h>

#include <chrono>
#include <cstdlib>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const double rate = argc > 1 ? std::atof(argv[1]) : 100000.0;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 10.0;
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration<double>(1.0 / rate);
  const auto start = Clock::now();
  const long calls = static_cast<long>(rate * seconds);
  double in = 1.0, out = 0.0;
  for (long i = 0; i < calls; ++i) {
    const auto due = start + std::chrono::duration_cast<Clock::duration>(period * i);
    while (Clock::now() < due) {
    }
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
