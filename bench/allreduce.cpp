// OSU-style all-reduce latency table, every algorithm in the same run: run preloaded with
// commtap; the program switches MPI_Allreduce's algorithm through commtap's API between
// measurements (bench/allreduce.sh, docs/benchmarks.md). With COMMTAP_YIELD=1 native and
// commtap's algorithms alike wait with test-and-yield loops.
//
//   mpiexec -n P -genv LD_PRELOAD libcommtap.so ./allreduce [max bytes] [--rounds R]
//       [--only NAME,NAME...] [--no-finalize]
//
// Sizes: 8 bytes, then four times more each row, and the maximum itself last (so that a target
// stated up to 4 KiB is measured at 4 KiB). Before each size's rounds, auto's first trials there
// (the first verdict and its confirmation, 80 calls by default) run and are timed apart ("auto's
// trial/native": their calls' mean over the library's median): the rounds measure what auto
// settled on. --only: these of commtap's algorithms (the library's
// twice and auto are always there), for a closer look with more rounds.
// --no-finalize: barrier and exit without MPI_Finalize, which sometimes hangs in UCX across
// emulated hosts (../shared/ENVIRONMENT.md).
#include <dlfcn.h>
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/algorithm_list.hpp"

namespace {

using Switch = int (*)(const char*);

// Waits by testing and yielding: with more ranks than cores a blocking wait spins, and the two
// ranks being timed would wait for the CPU instead of the network.
void wait_yielding(MPI_Request* request) {
  for (int done = 0;;) {
    PMPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    sched_yield();
  }
}

// Mean time of one all-reduce of `count` doubles, the slowest rank's, in microseconds. The barrier
// before the window and the maximum after it wait by testing and yielding: with more ranks than
// cores, ranks spinning in a blocking barrier keep the last one off the CPU for a scheduler
// tick, and that skew (4 ms here) would be charged to the window's calls.
double time_allreduce(int count, int iterations, std::vector<double>& in,
                      std::vector<double>& out) {
  MPI_Allreduce(in.data(), out.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);  // warm up
  MPI_Request request;
  PMPI_Ibarrier(MPI_COMM_WORLD, &request);
  wait_yielding(&request);
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i)
    MPI_Allreduce(in.data(), out.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double mine = (MPI_Wtime() - start) / iterations * 1e6;
  double slowest = 0;
  PMPI_Iallreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &request);
  wait_yielding(&request);
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

// What the network between the hosts allows, between every two hosts (their first ranks):
// - latency: half the fastest of 20 one-byte round trips, and from those the quickest route
//   between every two hosts through any others (a message may be relayed);
// - bandwidth: the fastest of 3 one-way 4 MiB transfers, less a round trip; the bound takes
//   the best pair's, so that it stays a lower bound when one link is slow.
// Measured with the library's point-to-point; all ranks get the results. hosts < 2: nothing to
// measure.
struct Network {
  int hosts = 1;
  double nearest_us = 0, farthest_us = 0;  // the direct one-way latencies' extremes
  double route_us = 0;                     // the slowest of the quickest routes between two hosts
  double slowest_bytes_per_us = 0, bytes_per_us = 0;  // the worst pair's and the best pair's
};

void send_yielding(const void* data, int bytes, int peer, int tag) {
  MPI_Request request;
  PMPI_Isend(data, bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &request);
  wait_yielding(&request);
}

void receive_yielding(void* data, int bytes, int peer, int tag) {
  MPI_Request request;
  PMPI_Irecv(data, bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &request);
  wait_yielding(&request);
}

// Half the fastest of 20 one-byte round trips between this rank and `peer` (us); `first` sends
// first.
double half_round_trip_us(int peer, bool first) {
  char byte = 0;
  double best = 1e30;
  for (int i = 0; i < 20; ++i) {
    const double t0 = MPI_Wtime();
    if (first) {
      send_yielding(&byte, 1, peer, 7);
      receive_yielding(&byte, 1, peer, 7);
    } else {
      receive_yielding(&byte, 1, peer, 7);
      send_yielding(&byte, 1, peer, 7);
    }
    best = std::min(best, MPI_Wtime() - t0);
  }
  return best / 2 * 1e6;
}

// The fastest of 3 one-way transfers of 4 MiB from `sender` to `peer`, less a round trip of
// `latency_us` each way (the go-ahead and the acknowledgement), as bytes per us. Both call it.
double bandwidth(bool sender, int peer, double latency_us) {
  char byte = 0;
  std::vector<char> large(4 << 20);
  double best_transfer = 1e30;
  for (int i = 0; i < 3; ++i) {
    // The receiver posts first and says so, so that the transfer is not held up by it.
    MPI_Request large_receive = MPI_REQUEST_NULL;
    if (!sender) {
      PMPI_Irecv(large.data(), static_cast<int>(large.size()), MPI_CHAR, peer, 8, MPI_COMM_WORLD,
                 &large_receive);
      send_yielding(&byte, 1, peer, 9);
    } else {
      receive_yielding(&byte, 1, peer, 9);
    }
    const double t0 = MPI_Wtime();
    if (sender) {
      send_yielding(large.data(), static_cast<int>(large.size()), peer, 8);
      receive_yielding(&byte, 1, peer, 8);
    } else {
      wait_yielding(&large_receive);
      send_yielding(&byte, 1, peer, 8);
    }
    best_transfer = std::min(best_transfer, MPI_Wtime() - t0 - 2 * latency_us * 1e-6);
  }
  return static_cast<double>(large.size()) / std::max(1e-9, best_transfer * 1e6);
}

Network measure_network(int rank, int size) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  std::vector<char> names(static_cast<std::size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  PMPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME,
                 MPI_CHAR, MPI_COMM_WORLD);
  auto name_of = [&](int r) {
    return std::string(names.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME);
  };
  // Each host's first rank, in rank order.
  std::vector<std::string> seen;
  std::vector<int> first_rank;
  for (int r = 0; r < size; ++r)
    if (std::find(seen.begin(), seen.end(), name_of(r)) == seen.end()) {
      seen.push_back(name_of(r));
      first_rank.push_back(r);
    }
  Network network;
  const int h = network.hosts = static_cast<int>(seen.size());
  if (h < 2) return network;
  // Every pair in one order on all ranks (a before b, pairs in lexicographic order), so that no
  // two ranks wait for each other in a cycle. Latency of a -> b at a * h + b, bandwidth from a
  // to b at h * h + a * h + b.
  std::vector<double> measured(static_cast<std::size_t>(2 * h * h), 0.0);
  for (int a = 0; a < h; ++a)
    for (int b = a + 1; b < h; ++b) {
      const int ra = first_rank[static_cast<std::size_t>(a)];
      const int rb = first_rank[static_cast<std::size_t>(b)];
      if (rank != ra && rank != rb) continue;
      const double latency = half_round_trip_us(rank == ra ? rb : ra, rank == ra);
      measured[static_cast<std::size_t>(a * h + b)] = latency;
      measured[static_cast<std::size_t>(h * h + a * h + b)] =
          bandwidth(rank == ra, rank == ra ? rb : ra, latency);
    }
  std::vector<double> all(measured.size());
  MPI_Request told;
  PMPI_Iallreduce(measured.data(), all.data(), static_cast<int>(all.size()), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD, &told);
  wait_yielding(&told);
  network.slowest_bytes_per_us = 1e30;
  for (int a = 0; a < h; ++a)
    for (int b = a + 1; b < h; ++b) {
      const double bandwidth = all[static_cast<std::size_t>(h * h + a * h + b)];
      network.bytes_per_us = std::max(network.bytes_per_us, bandwidth);
      network.slowest_bytes_per_us = std::min(network.slowest_bytes_per_us, bandwidth);
    }
  // The quickest routes (Floyd-Warshall over the measured latencies, taken as equal both ways:
  // a round trip cannot tell the two directions apart).
  std::vector<double> route(static_cast<std::size_t>(h * h), 0.0);
  network.nearest_us = 1e30;
  for (int a = 0; a < h; ++a)
    for (int b = a + 1; b < h; ++b) {
      const double l = all[static_cast<std::size_t>(a * h + b)];
      route[static_cast<std::size_t>(a * h + b)] = route[static_cast<std::size_t>(b * h + a)] = l;
      network.nearest_us = std::min(network.nearest_us, l);
      network.farthest_us = std::max(network.farthest_us, l);
    }
  for (int via = 0; via < h; ++via)
    for (int a = 0; a < h; ++a)
      for (int b = 0; b < h; ++b) {
        auto& ab = route[static_cast<std::size_t>(a * h + b)];
        ab = std::min(ab, route[static_cast<std::size_t>(a * h + via)] +
                              route[static_cast<std::size_t>(via * h + b)]);
      }
  network.route_us = *std::max_element(route.begin(), route.end());
  return network;
}

// The lower bound no all-reduce across hosts can beat: every host must hear from every other
// (the slowest of the quickest routes), and each host link must carry 2(h-1)/h of the buffer
// (reduce-scatter plus all-gather volume), here at the best pair's bandwidth.
double lower_bound_us(const Network& network, double bytes) {
  if (network.hosts < 2 || network.bytes_per_us <= 0) return 0;
  const double h = network.hosts;
  return std::max(network.route_us, 2 * (h - 1) / h * bytes / network.bytes_per_us);
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
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-finalize")
      finalize = false;
    else if (arg == "--rounds" && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--only" && i + 1 < argc)
      only = "," + std::string(argv[++i]) + ",";
    else
      max_bytes = std::atol(argv[i]);
  }
  const char* trials_setting = std::getenv("COMMTAP_ALLREDUCE_TRIALS");
  const int trial_rounds =
      trials_setting != nullptr && *trials_setting != '\0' ? std::atoi(trials_setting) : 3;
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
  if (!only.empty())
    std::erase_if(contenders, [&](const std::string& name) {
      return name != "native" && only.find("," + name + ",") == std::string::npos;
    });
  contenders.push_back("auto");
  contenders.push_back("native");
  const std::size_t kAuto = contenders.size() - 2, kNativeAgain = contenders.size() - 1;
  use("native");
  const Network network = measure_network(rank, size);
  if (rank == 0) {
    std::printf("%d rounds, each contender once per round in turn; cells: median / min us\n",
                rounds);
    if (network.hosts > 1)
      std::printf(
          "%d hosts; between two of them one way %.1f-%.1f us, %.0f-%.0f MB/s; the quickest "
          "route between the farthest two %.1f us; bound: the larger of that route and "
          "2(h-1)/h x bytes / the best bandwidth\n",
          network.hosts, network.nearest_us, network.farthest_us, network.slowest_bytes_per_us,
          network.bytes_per_us, network.route_us);
    std::printf("\n| bytes |");
    for (std::size_t k = 0; k < contenders.size(); ++k)
      std::printf(" %s%s |", contenders[k].c_str(), k == kNativeAgain ? " again" : "");
    std::printf(
        " bound | native/auto | native/native again | auto's trial/native | auto/bound |\n|---:|");
    for (std::size_t k = 0; k < contenders.size() + 5; ++k) std::printf("---:|");
    std::printf("\n");
  }
  for (long bytes = 8; bytes <= max_bytes;
       bytes = bytes < max_bytes && bytes * 4 > max_bytes ? max_bytes : bytes * 4) {
    const int count = static_cast<int>(bytes / 8);
    std::vector<double> in(static_cast<std::size_t>(count), 1.0 + rank), out(in.size());
    // As many iterations as fit in about 0.05 s with the library's algorithm (the same number
    // on every rank: the slowest rank's time decides), at least 3, at most 1000.
    use("native");
    const double probe = time_allreduce(count, 5, in, out);
    const int iterations = static_cast<int>(std::clamp(5e4 / std::max(probe, 1.0), 3.0, 1000.0));
    // auto's first trial at this size and the one that confirms it 32 calls later (two calls
    // per contender and round: at most 4 contenders and COMMTAP_ALLREDUCE_TRIALS rounds each),
    // timed apart: the rounds measure the choice it settles on, as a job's later calls run it,
    // and the table says what settling cost.
    use("auto");
    const int trial_calls = trial_rounds > 0 ? 2 * (2 * 4 * trial_rounds) + 32 : 0;
    const double trial_us = trial_calls > 0 ? time_allreduce(count, trial_calls, in, out) : 0;
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
      const double bound = lower_bound_us(network, static_cast<double>(bytes));
      if (bound > 0)
        std::printf(" %.1f |", bound);
      else
        std::printf(" - |");
      std::printf(" %.2f | %.2f |", median(times[0]) / median(times[kAuto]),
                  median(times[0]) / median(times[kNativeAgain]));
      std::printf(" %.2f |", trial_us / median(times[0]));
      if (bound > 0)
        std::printf(" %.2f |\n", median(times[kAuto]) / bound);
      else
        std::printf(" - |\n");
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
