// Cost of the trace writer per recorded collective instance: one TraceWriter window with N
// instance records (what COMMTAP_SAMPLE and the call rate put in a 1 s window), timed, and the
// share of one core that the writer would need at 100,000 recorded instances per second.
//
//   build/bench/writer [instances per window] [COMMTAP_TRACE_BUDGET in MB]
//
// Without a budget the window writes every record (the writer's cost per row); with one, the
// records are thinned first (their cost per record when few rows are left to write).
//
// With --hour: the bytes a busy rank's trace takes per table after `hours` hours of 1 s windows
// (tests/unit/monitor/busy_rank.hpp: all-reduces on two communicators, messages to and from its
// neighbours, COMMTAP_SAMPLE=16) under COMMTAP_TRACE_BUDGET=`budget` MB (0: unbounded), and the
// writer's CPU time for it.
//
//   build/bench/writer --hour [collectives/s] [messages/s] [budget MB] [hours]
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>

#include "monitor/monitor.hpp"
#include "tests/unit/monitor/busy_rank.hpp"

using namespace commtap::monitor;

namespace {

double thread_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

int hour(int argc, char** argv) {
  commtap::testing::BusyRank busy;
  busy.collectives_per_s = argc > 2 ? std::atof(argv[2]) : 24000;
  busy.messages_per_s = argc > 3 ? std::atof(argv[3]) : 24000;
  const std::string budget = argc > 4 ? argv[4] : "5";
  const double hours = argc > 5 ? std::atof(argv[5]) : 1.0;
  const auto windows = static_cast<std::size_t>(hours * 3600);
  const auto directory = std::filesystem::temp_directory_path() / "commtap-bench-writer-hour";
  std::filesystem::create_directories(directory);
  const std::string path = (directory / "rank-0.db").string();
  RankFacts facts;
  facts.start_ns = busy.start_wall_ns;
  facts.ended_by = "finalize";
  double cpu_s = 0;
  const std::string error = write_rank_database(
      path, facts,
      {{"COMMTAP_TRACE_BUDGET", budget}, {"COMMTAP_SAMPLE", "16"}, {"COMMTAP_INTERVAL", "1000"}},
      windows, [&](std::size_t i) {
        // Only the writer's work is timed (from each window's making to the next's).
        if (i > 0) cpu_s += thread_cpu_s();
        Snapshot window = busy.window(i);
        cpu_s -= thread_cpu_s();
        return window;
      });
  cpu_s += thread_cpu_s();
  if (!error.empty()) {
    std::fprintf(stderr, "writer: %s\n", error.c_str());
    return 1;
  }
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  std::printf("%.0f collectives/s, %.0f messages/s, COMMTAP_TRACE_BUDGET=%s, %.2f h\n\n",
              busy.collectives_per_s, busy.messages_per_s, budget.c_str(), hours);
  std::printf(
      "| table (with its indexes) | rows | KB | KB per rank-hour |\n|---|---:|---:|---:|\n");
  // dbstat's pages by b-tree; an index's pages are counted with its table.
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat d LEFT JOIN "
                     "sqlite_schema m ON m.name = d.name GROUP BY 1 ORDER BY 2 DESC",
                     -1, &stmt, nullptr);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const std::string table = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    const double kb = static_cast<double>(sqlite3_column_int64(stmt, 1)) / 1e3;
    long long rows = -1;
    sqlite3_stmt* count = nullptr;
    if (sqlite3_prepare_v2(db, ("SELECT count(*) FROM \"" + table + "\"").c_str(), -1, &count,
                           nullptr) == SQLITE_OK &&
        sqlite3_step(count) == SQLITE_ROW)
      rows = sqlite3_column_int64(count, 0);
    sqlite3_finalize(count);
    std::printf("| %s | %lld | %.1f | %.1f |\n", table.c_str(), rows, kb, kb / hours);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  const double file_mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  std::printf("\nfile: %.3f MB, %.3f MB per rank-hour; writer CPU %.2f s (%.2f ms per window)\n",
              file_mb, file_mb / hours, cpu_s, cpu_s * 1e3 / static_cast<double>(windows));
  std::filesystem::remove_all(directory);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--hour") return hour(argc, argv);
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
  std::vector<std::pair<std::string, std::string>> settings;
  if (argc > 2) settings = {{"COMMTAP_TRACE_BUDGET", argv[2]}, {"COMMTAP_SAMPLE", "1"}};
  auto writer = TraceWriter::start(path, facts, settings, 3'600'000'000'000ull, collect, error);
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
