// Cost of one snapshot publication (COMMTAP_SHARED_FS, docs/schema.md "Shared filesystems"): rank
// databases of growing size are made in a local directory and published to TARGET_DIR (a mount of
// the shared filesystem to measure) the way the writer does, five times each; the median time is
// what the writer thread spends per publication, and ten times it the shortest period between
// two publications.
//
//   build/bench/publish TARGET_DIR [records per window]...
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "monitor/monitor.hpp"

using namespace commtap::monitor;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: publish TARGET_DIR [records per window]...\n");
    return 2;
  }
  const std::string target_dir = argv[1];
  std::vector<std::size_t> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes.empty()) sizes = {1000, 10000, 100000, 400000};
  const auto local = std::filesystem::temp_directory_path() /
                     ("commtap-bench-publish-" + std::to_string(::getpid()));
  std::filesystem::create_directories(local);
  std::printf("| records | file MB | publish ms (median of 5) | MB/s | shortest period s |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (const std::size_t records : sizes) {
    // Ten windows of sampled instances, as a long job with COMMTAP_SAMPLE=1 accumulates them.
    std::vector<Snapshot> windows(10);
    std::uint64_t seq = 0;
    for (Snapshot& window : windows) {
      window.function_names = {"MPI_Allreduce"};
      for (std::size_t i = 0; i < records / windows.size(); ++i, ++seq)
        window.instances.push_back({1, seq, 8, seq * 1000, seq * 1000 + 700, 0, -1, 1});
    }
    RankFacts facts;
    facts.ended_by = "finalize";
    const std::string source = (local / "rank-0.db").string();
    if (const std::string error = write_rank_database(source, facts, {}, windows); !error.empty()) {
      std::fprintf(stderr, "publish: %s\n", error.c_str());
      return 1;
    }
    const std::string target = target_dir + "/commtap-bench-publish.db";
    std::vector<double> ms;
    for (int run = 0; run < 5; ++run) {
      const auto began = std::chrono::steady_clock::now();
      if (const std::string error = publish_copy(source, target, false); !error.empty()) {
        std::fprintf(stderr, "publish: %s\n", error.c_str());
        return 1;
      }
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began)
              .count());
    }
    std::sort(ms.begin(), ms.end());
    const double mb = static_cast<double>(std::filesystem::file_size(target)) / 1e6;
    std::printf("| %zu | %.1f | %.1f | %.0f | %.2f |\n", records, mb, ms[2], mb / (ms[2] / 1e3),
                10 * ms[2] / 1e3);
    std::filesystem::remove(target);
  }
  std::filesystem::remove_all(local);
  return 0;
}
