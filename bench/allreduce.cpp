// OSU-style all-reduce latency table, every algorithm in the same run: run preloaded with
// commtap; the program switches MPI_Allreduce's algorithm through commtap's API between
// measurements (bench/allreduce.sh, docs/benchmarks.md). With COMMTAP_YIELD=1 native and
// commtap's algorithms alike wait with test-and-yield loops.
//
//   mpiexec -n P -genv LD_PRELOAD libcommtap.so ./allreduce [max bytes] [--no-finalize]
//
// --no-finalize: barrier and exit without MPI_Finalize, which sometimes hangs in UCX across
// emulated hosts (../shared/ENVIRONMENT.md).
#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Switch = int (*)(const char*);

// Mean time of one all-reduce of `count` doubles, the slowest rank's, in microseconds.
double time_allreduce(int count, int iterations, std::vector<double>& in,
                      std::vector<double>& out) {
  MPI_Allreduce(in.data(), out.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);  // warm up
  PMPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i)
    MPI_Allreduce(in.data(), out.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double mine = (MPI_Wtime() - start) / iterations * 1e6;
  double slowest = 0;
  PMPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long max_bytes = argc > 1 ? std::atol(argv[1]) : 16L << 20;
  auto use = reinterpret_cast<Switch>(dlsym(RTLD_DEFAULT, "commtap_allreduce_algorithm"));
  if (use == nullptr) {
    if (rank == 0) std::fprintf(stderr, "run this with libcommtap.so preloaded\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  // The library's twice, first and last: how far two measurements of the same algorithm
  // disagree in this run is the noise any other ratio must be read against.
  const char* algorithms[] = {"native", "hier", "hier-rs",      "hier-pipe", "hier-star", "star",
                              "ring",   "rd",   "rabenseifner", "auto",      "native"};
  if (rank == 0) {
    std::printf(
        "| bytes | native us | hier us | hier-rs us | hier-pipe us | hier-star us | star us | "
        "ring us | rd us | rabenseifner us | auto us | native again us | native/auto | "
        "native/native again |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (long bytes = 8; bytes <= max_bytes; bytes *= 4) {
    const int count = static_cast<int>(bytes / 8);
    std::vector<double> in(static_cast<std::size_t>(count), 1.0 + rank), out(in.size());
    // As many iterations as fit in about 0.1 s with the library's algorithm (the same number
    // on every rank: the slowest rank's time decides), at least 3, at most 200.
    use("native");
    const double probe = time_allreduce(count, 3, in, out);
    const int iterations = static_cast<int>(std::clamp(1e5 / std::max(probe, 1.0), 3.0, 200.0));
    std::vector<double> times;
    for (const char* a : algorithms) {
      use(a);
      // The best of two runs of `iterations`, so that a descheduled rank does not decide.
      double best = 1e30;
      for (int r = 0; r < 2; ++r) best = std::min(best, time_allreduce(count, iterations, in, out));
      times.push_back(best);
    }
    if (rank == 0) {
      std::printf("| %ld |", bytes);
      for (double t : times) std::printf(" %.1f |", t);
      std::printf(" %.2f | %.2f |\n", times[0] / times[9], times[0] / times[10]);
      std::fflush(stdout);
    }
  }
  use("native");
  if (argc > 2 && std::string(argv[2]) == "--no-finalize") {
    PMPI_Barrier(MPI_COMM_WORLD);
    std::fflush(stdout);
    _exit(0);
  }
  MPI_Finalize();
  return 0;
}
