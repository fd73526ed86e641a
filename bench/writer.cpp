// Cost of the trace writer per recorded collective instance: one TraceWriter window with N
// instance records (what COMMTAP_SAMPLE and the call rate put in a 1 s window), timed, and the
// share of one core that the writer would need at 100,000 recorded instances per second.
//
//   build/bench/writer [instances per window]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "monitor/monitor.hpp"

using namespace commtap::monitor;

int main(int argc, char** argv) {
  const std::size_t per_window = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
  const auto directory = std::filesystem::temp_directory_path() / "commtap-bench-writer";
  std::filesystem::create_directories(directory);
  const std::string path = (directory / "rank-0.db").string();

  std::uint64_t seq = 0;
  auto collect = [&] {
    Snapshot snapshot;
    snapshot.function_names = {"MPI_Allreduce"};
    snapshot.instances.reserve(per_window);
    for (std::size_t i = 0; i < per_window; ++i) {
      ++seq;
      snapshot.instances.push_back({1, seq, 8, seq * 1000, seq * 1000 + 700, 0, -1, 1});
    }
    return snapshot;
  };
  RankFacts facts;
  facts.ended_by = "running";
  std::string error;
  // A long interval: the only windows are the ones stop() writes, timed below.
  auto writer = TraceWriter::start(path, facts, {}, 3'600'000'000'000ull, collect, error);
  if (!writer) {
    std::fprintf(stderr, "writer: %s\n", error.c_str());
    return 1;
  }
  facts.ended_by = "finalize";
  const auto start = std::chrono::steady_clock::now();
  const std::string stop_error = writer->stop(facts);  // one window of `per_window` records
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!stop_error.empty()) std::fprintf(stderr, "writer: %s\n", stop_error.c_str());
  const double per_record_us = seconds * 1e6 / static_cast<double>(per_window);
  std::printf(
      "| instances per window | window time ms | us per instance | core share at 100k instances/s "
      "|\n");
  std::printf("|---:|---:|---:|---:|\n");
  std::printf("| %zu | %.1f | %.3f | %.1f%% |\n", per_window, seconds * 1e3, per_record_us,
              per_record_us * 100000 / 1e6 * 100);
  std::filesystem::remove_all(directory);
  return 0;
}
