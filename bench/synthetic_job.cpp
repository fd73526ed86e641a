// Writes a synthetic job for the analyzer benchmark through the monitor's own writer: `ranks`
// rank files on `hosts` hosts, each with `instances` all-reduce instances on MPI_COMM_WORLD
// (arrival jitter of a few microseconds; rank 7 arrives 2 ms late, so the analysis has a
// finding to make), heartbeats and communicator progress.
//
//   synthetic_job <directory> <ranks> <instances> [hosts]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "monitor/monitor.hpp"

namespace monitor = commtap::monitor;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <directory> <ranks> <instances> [hosts]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path directory = argv[1];
  const int ranks = std::atoi(argv[2]);
  const int instances = std::atoi(argv[3]);
  const int hosts = argc > 4 ? std::atoi(argv[4]) : std::max(1, ranks / 8);
  std::filesystem::create_directories(directory);
  constexpr std::uint64_t kWall = 1'790'000'000'000'000'000ull, kMono = 1'000'000'000ull;
  constexpr int kPerWindow = 1000;  // instances per writer window
  std::string members;
  for (int r = 0; r < ranks; ++r) members += (r ? "," : "") + std::to_string(r);
  for (int r = 0; r < ranks; ++r) {
    std::mt19937_64 random(static_cast<std::uint64_t>(r) + 1);
    std::exponential_distribution<double> jitter(1.0 / 5000.0);  // ns
    monitor::RankFacts facts;
    facts.job_id = "bench";
    facts.rank = r;
    facts.world_size = ranks;
    facts.host = "node" + std::to_string(r * hosts / ranks);
    facts.start_ns = kWall;
    facts.ended_by = "finalize";
    std::vector<monitor::Snapshot> windows((instances + kPerWindow - 1) / kPerWindow);
    for (std::size_t w = 0; w < windows.size(); ++w) {
      monitor::Snapshot& s = windows[w];
      s.function_names = {"MPI_Allreduce"};
      s.wall_ns = kWall + (w + 1) * 1'000'000'000ull;
      if (w == 0) {
        s.clock_estimates = {{kMono, {0, 0}}};
        monitor::CommunicatorRow world;
        world.id = 1;
        world.created_by = "MPI_COMM_WORLD";
        world.size = ranks;
        world.comm_rank = r;
        if (r == 0) world.members = members;
        s.communicators = {world};
      }
      const int first = static_cast<int>(w) * kPerWindow;
      const int last = std::min(instances, first + kPerWindow);
      for (int i = first; i < last; ++i) {
        const double t = i * 1e6 + jitter(random) + (r == 7 ? 2e6 : 0.0);  // 1 ms period
        monitor::InstanceRecord record;
        record.comm_id = 1;
        record.seq = static_cast<std::uint64_t>(i) + 1;
        record.bytes = 4096;
        record.enter_ns = kMono + static_cast<std::uint64_t>(t);
        record.exit_ns = kMono + static_cast<std::uint64_t>(i * 1e6 + 2.1e6);
        s.instances.push_back(record);
      }
      s.progress = {{1, static_cast<std::uint64_t>(last), static_cast<std::uint64_t>(last)}};
    }
    const std::string error = monitor::write_rank_database(
        (directory / ("rank-" + std::to_string(r) + ".db")).string(), facts, {}, windows);
    if (!error.empty()) {
      std::fprintf(stderr, "rank %d: %s\n", r, error.c_str());
      return 1;
    }
  }
  return 0;
}
