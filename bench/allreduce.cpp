// OSU-style all-reduce latency table, every algorithm in the same run: run preloaded with
// commtap; the program switches MPI_Allreduce's algorithm through commtap's API between
// measurements (bench/allreduce.sh, docs/benchmarks.md). With COMMTAP_YIELD=1 native and
// commtap's algorithms alike wait with test-and-yield loops.
//
//   mpiexec -n P -genv LD_PRELOAD libcommtap.so ./allreduce [max bytes] [--rounds R]
//       [--no-finalize]
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

#include "collectives/algorithm_list.hpp"

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

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double minimum(const std::vector<double>& values) {
  return *std::min_element(values.begin(), values.end());
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long max_bytes = 16L << 20;
  int rounds = 5;
  bool finalize = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-finalize")
      finalize = false;
    else if (arg == "--rounds" && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else
      max_bytes = std::atol(argv[i]);
  }
  auto use = reinterpret_cast<Switch>(dlsym(RTLD_DEFAULT, "commtap_allreduce_algorithm"));
  if (use == nullptr) {
    if (rank == 0) std::fprintf(stderr, "run this with libcommtap.so preloaded\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  // The library's twice, first and last: how far two measurements of the same algorithm
  // disagree in this run is the noise any other ratio must be read against. Between them every
  // algorithm of collectives/algorithm_list.hpp (commtap's, then auto).
  std::vector<std::string> contenders;
#define COMMTAP_BENCH_CONTENDER(identifier, name, what) contenders.emplace_back(name);
  COMMTAP_ALLREDUCE_ALGORITHMS(COMMTAP_BENCH_CONTENDER)
#undef COMMTAP_BENCH_CONTENDER
  contenders.erase(std::find(contenders.begin(), contenders.end(), "auto"));
  contenders.push_back("auto");
  contenders.push_back("native");
  const std::size_t kAuto = contenders.size() - 2, kNativeAgain = contenders.size() - 1;
  if (rank == 0) {
    std::printf("%d rounds, each contender once per round in turn; cells: median / min us\n\n",
                rounds);
    std::printf("| bytes |");
    for (std::size_t k = 0; k < contenders.size(); ++k)
      std::printf(" %s%s |", contenders[k].c_str(), k == kNativeAgain ? " again" : "");
    std::printf(" native/auto | native/native again |\n|---:|");
    for (std::size_t k = 0; k < contenders.size() + 2; ++k) std::printf("---:|");
    std::printf("\n");
  }
  for (long bytes = 8; bytes <= max_bytes; bytes *= 4) {
    const int count = static_cast<int>(bytes / 8);
    std::vector<double> in(static_cast<std::size_t>(count), 1.0 + rank), out(in.size());
    // As many iterations as fit in about 0.05 s with the library's algorithm (the same number
    // on every rank: the slowest rank's time decides), at least 3, at most 200.
    use("native");
    const double probe = time_allreduce(count, 3, in, out);
    const int iterations = static_cast<int>(std::clamp(5e4 / std::max(probe, 1.0), 3.0, 200.0));
    // Interleaved: a slow spell on the machine hits every contender alike, not one of them.
    std::vector<std::vector<double>> times(contenders.size());
    for (int round = 0; round < rounds; ++round)
      for (std::size_t k = 0; k < contenders.size(); ++k) {
        use(contenders[k].c_str());
        times[k].push_back(time_allreduce(count, iterations, in, out));
      }
    if (rank == 0) {
      std::printf("| %ld |", bytes);
      for (const auto& t : times) std::printf(" %.1f / %.1f |", median(t), minimum(t));
      std::printf(" %.2f | %.2f |\n", median(times[0]) / median(times[kAuto]),
                  median(times[0]) / median(times[kNativeAgain]));
      std::fflush(stdout);
    }
  }
  use("native");
  if (!finalize) {
    PMPI_Barrier(MPI_COMM_WORLD);
    std::fflush(stdout);
    _exit(0);
  }
  MPI_Finalize();
  return 0;
}
