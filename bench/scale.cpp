// What commtap adds at each of its per-job steps, for bench/scale.sh: MPI_Init (until the first
// barrier is through, so that every rank's start is in it), a loop of 8-byte all-reduces on
// MPI_COMM_WORLD (the clock re-estimations commtap makes every COMMTAP_CLOCK_SYNC-th world
// collective show as the loop's slowest iterations), and MPI_Finalize.
//
//   mpiexec -n P ./scale [iterations] [re-estimations to look for]
//
// Every rank prints "rank R init_s I" and, after MPI_Finalize, "rank R finalize_s F"; rank 0 also
// prints "allreduce_us M slowest_us S", the median iteration and the mean of the
// `re-estimations` slowest ones (the slowest rank's time of each iteration).
#include <mpi.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace {

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const double before_init = now_s();
  MPI_Init(&argc, &argv);
  MPI_Barrier(MPI_COMM_WORLD);
  const double init_s = now_s() - before_init;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int slowest = argc > 2 ? std::atoi(argv[2]) : 0;

  std::vector<double> took(static_cast<std::size_t>(std::max(iterations, 1))), longest(took.size());
  double in = 1, out = 0;
  for (int i = 0; i < iterations; ++i) {
    const double began = now_s();
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    took[static_cast<std::size_t>(i)] = now_s() - began;
  }
  MPI_Reduce(took.data(), longest.data(), iterations, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  // Printed before MPI_Finalize, which can hang across hosts (UCX, scripts/cluster).
  std::printf("rank %d init_s %.6f\n", rank, init_s);
  if (rank == 0 && iterations > 0) {
    longest.resize(static_cast<std::size_t>(iterations));
    std::sort(longest.begin(), longest.end());
    const double median = longest[longest.size() / 2];
    const int n = std::min(slowest, iterations);
    const double slow = n > 0 ? std::accumulate(longest.end() - n, longest.end(), 0.0) / n : median;
    std::printf("allreduce_us %.3f slowest_us %.3f\n", median * 1e6, slow * 1e6);
  }
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  const double before_finalize = now_s();
  MPI_Finalize();
  std::printf("rank %d finalize_s %.6f\n", rank, now_s() - before_finalize);
  return 0;
}
