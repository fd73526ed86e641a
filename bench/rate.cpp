// A job that calls MPI_Allreduce (8 bytes) at a fixed rate, for the writer thread's CPU share at
// that rate and the trace's size (bench/writer_cpu.sh reads both from the trace database). Calls
// are paced against the clock, not slept between: the rate holds
// whatever the call costs. With `messages` > 0, each all-reduce is followed by that many 8-byte
// messages to the next rank and from the previous one (MPI_Sendrecv), as in the loop of
// small all-reduces and messages.
//
//   mpiexec -n 1 build/bench/rate [calls per second] [seconds] [messages per call]
#include <mpi.h>

#include <chrono>
#include <cstdlib>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const double rate = argc > 1 ? std::atof(argv[1]) : 100000.0;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 10.0;
  const int messages = argc > 3 ? std::atoi(argv[3]) : 0;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration<double>(1.0 / rate);
  const auto start = Clock::now();
  const long calls = static_cast<long>(rate * seconds);
  double in = 1.0, out = 0.0, sent = 2.0, received = 0.0;
  for (long i = 0; i < calls; ++i) {
    const auto due = start + std::chrono::duration_cast<Clock::duration>(period * i);
    while (Clock::now() < due) {
    }
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int m = 0; m < messages; ++m)
      MPI_Sendrecv(&sent, 1, MPI_DOUBLE, next, 0, &received, 1, MPI_DOUBLE, previous, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
