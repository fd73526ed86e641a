// Exports for other tools on synthetic jobs written through the monitor's own writer: the
// Perfetto timeline (tracks, slices, flows, clock alignment, sampling bound, time cut), the
// Prometheus exposition, and demangled call-site names.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analyzer/query/job_database.hpp"
#include "analyzer/store/output_files.hpp"
#include "analyzer/trace/symbols.hpp"
#include "render/export_perfetto.hpp"
#include "render/prometheus.hpp"
#include "tests/fixtures/synthetic_job.hpp"
#include "tests/tools/perfetto_checks.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace commtap::analyzer;
using namespace commtap::render;
using nlohmann::json;

namespace {

using commtap::testing::TempDir;

using commtap::fixtures::kStartWall;
constexpr char kMangled[] = "_Z9trainStepRSt6vectorIdSaIdEE";

// 4 ranks on hosts h0 (ranks 0, 1) and h1 (2, 3); rank r's clock reads rank 0's minus r x 7 ms,
// as hosts' clocks disagree. Every 10 ms an all-reduce (the ranks up to 50 us apart), and each
// rank sends its right neighbour one message (Irecv posted, then Isend: the two overlap). Rank 1
// is inside an all-reduce at the heartbeat of second 5.
void write_job(const fs::path& dir, bool record_offsets = true, double seconds = 10,
               bool unfinished = false) {
  commtap::fixtures::SyntheticJob job;
  job.ranks = 4;
  job.hosts = 2;
  job.seconds = seconds;
  job.period_ms = 10;
  job.jitter_us = 0;
  job.late_us = [](int rank, double t) {
    const long step = std::lround(t * 100);
    return static_cast<double>((step * 7 + rank * 13) % 50);
  };
  job.collective_bytes = 8192;
  job.call_us = [](double) { return 50.0; };
  job.message_every = 1;
  job.message_bytes = 4096;
  job.message_tag = 3;
  job.sends_to = [](int from, int to) { return to == (from + 1) % 4; };
  job.clock_skew_us = [](int rank) { return rank * 7000.0; };
  job.clock_uncertainty_us = 20;
  job.record_clock_offsets = record_offsets;
  job.stall_share = [](int, double) { return 0.0; };
  job.job_id = "synthetic-export";
  job.call_site_symbol = kMangled;
  job.in_call_rank = 1;
  job.in_call_window = 4;
  if (unfinished) {
    // Rank 3 posted one more all-reduce that never completed (exit unknown): 0.5 s before the
    // end, on rank 0's clock.
    job.unfinished_rank = 3;
    job.unfinished_at = seconds - 0.5;
  }
  ASSERT_EQ(job.write(dir), "");
}

json export_json(const fs::path& dir, const PerfettoOptions& options, PerfettoStats& stats) {
  const fs::path file = dir / "trace.json";
  std::FILE* out = std::fopen(file.c_str(), "w");
  std::string error;
  EXPECT_TRUE(export_perfetto(dir.string(), options, out, stats, error)) << error;
  std::fclose(out);
  std::ifstream in(file);
  return json::parse(in);
}

}  // namespace

TEST(PerfettoExport, HostsRanksSlicesFlowsOnRankZerosClock) {
  TempDir dir;
  write_job(dir.path());
  PerfettoStats stats;
  const json trace = export_json(dir.path(), {}, stats);
  commtap::test::PerfettoExpectations expect;
  expect.hosts = 2;
  expect.ranks = 4;
  expect.alignment_tolerance_us = 5;
  const auto check = commtap::test::check_perfetto(trace, expect);
  EXPECT_EQ(check.problem, "");
  EXPECT_EQ(check.aligned_instances, 1000u);
  EXPECT_LT(check.worst_misalignment_us, 0);  // every rank entered before any left
  EXPECT_EQ(check.flows, 4000u);
  EXPECT_EQ(check.slices, 4000u + 8000u);
  EXPECT_EQ(stats.keep_one_in, 1u);
  EXPECT_EQ(stats.tracks, 8);  // each rank: its track and one for the overlapping Irecv/Isend
  bool host_named = false, demangled = false, heartbeat = false;
  for (const auto& e : trace["traceEvents"]) {
    host_named |= e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "host h1";
    demangled |=
        e.contains("args") &&
        e["args"].value("caller", "") == "trainStep(std::vector<double, std::allocator<double> >&)";
    heartbeat |= e["ph"] == "i" && e["name"] == "in MPI_Allreduce" && e["tid"] == 2;
  }
  EXPECT_TRUE(host_named);
  EXPECT_TRUE(demangled);
  EXPECT_TRUE(heartbeat);
  // The first all-reduce starts at the timeline's origin, on rank 0's clock.
  EXPECT_EQ(trace["otherData"]["origin_wall_ns"], kStartWall);
}

TEST(PerfettoExport, UnfinishedCollectiveDrawnToTheLastHeartbeat) {
  TempDir dir;
  write_job(dir.path(), true, 3, /*unfinished=*/true);
  PerfettoStats stats;
  PerfettoOptions options;
  options.findings = false;
  const json trace = export_json(dir.path(), options, stats);
  int found = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["args"].value("unfinished", false)) {
      ++found;
      EXPECT_EQ(e["tid"], 4);  // rank 3's track
      EXPECT_EQ(e["args"]["seq"], 301);
      EXPECT_NEAR(e["ts"].get<double>(), 2.5e6, 1);
      EXPECT_NEAR(e["dur"].get<double>(), 0.5e6, 1);  // to the last heartbeat, at 3 s
    }
  EXPECT_EQ(found, 1);
}

TEST(PerfettoExport, WithoutOffsetsTheCheckSeesMisalignedClocks) {
  TempDir dir;
  write_job(dir.path(), /*record_offsets=*/false, 3);
  PerfettoStats stats;
  commtap::test::PerfettoExpectations expect;
  expect.hosts = 2;
  expect.ranks = 4;
  const auto check = commtap::test::check_perfetto(export_json(dir.path(), {}, stats), expect);
  EXPECT_NE(check.problem.find("clocks not aligned"), std::string::npos) << check.problem;
  EXPECT_GT(check.worst_misalignment_us, 20000);  // rank 3 is 21 ms off
}

TEST(PerfettoExport, SamplingBoundsTheSizeAndKeepsFlowsWhole) {
  TempDir dir;
  write_job(dir.path());
  PerfettoOptions options;
  options.max_events = 2000;
  PerfettoStats stats;
  const json trace = export_json(dir.path(), options, stats);
  // (4,000 collective rows + 2 x 8,000 message rows + 1 heartbeat) / 2,000, rounded up
  EXPECT_EQ(stats.keep_one_in, 11u);
  EXPECT_EQ(trace["otherData"]["keep_one_in"], 11);
  commtap::test::PerfettoExpectations expect;
  expect.hosts = 2;
  expect.ranks = 4;
  expect.max_events = options.max_events;
  const auto check = commtap::test::check_perfetto(trace, expect);
  EXPECT_EQ(check.problem, "");
  EXPECT_GT(check.flows, 200u);
  EXPECT_LT(check.flows, 600u);
  // Every rank kept the same instances: each kept one is complete.
  EXPECT_GT(check.aligned_instances, 50u);
  EXPECT_EQ(check.slices, check.aligned_instances * 4 + check.flows * 2);
}

TEST(PerfettoExport, SinceUntilCut) {
  TempDir dir;
  write_job(dir.path());
  PerfettoOptions options;
  options.since_s = 2;
  options.until_s = 3;
  options.findings = false;
  PerfettoStats stats;
  const json trace = export_json(dir.path(), options, stats);
  commtap::test::PerfettoExpectations expect;
  expect.hosts = 2;
  expect.ranks = 4;
  expect.since_us = 2e6;
  expect.until_us = 3e6;
  const auto check = commtap::test::check_perfetto(trace, expect);
  EXPECT_EQ(check.problem, "");
  EXPECT_GE(check.aligned_instances, 100u);
  EXPECT_LE(check.aligned_instances, 102u);
  options.since_s = 0;
  options.until_s = 0;
  options.last_s = 1;
  const json last = export_json(dir.path(), options, stats);
  expect.since_us = 9e6;
  expect.until_us = 1e300;
  EXPECT_EQ(commtap::test::check_perfetto(last, expect).problem, "");
}

// The export reads every collective instance, finished or not, and checks their times as it
// reads them (the file's content check leaves that table to its readers).
TEST(PerfettoExport, RefusesAnImplausibleCollectiveTime) {
  TempDir dir;
  write_job(dir.path());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() / "rank-1.db").string().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE collectives SET exit_ns = 9000000000000000000 WHERE seq = (SELECT "
                         "seq FROM collectives ORDER BY seq LIMIT 1 OFFSET 100)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  PerfettoOptions options;
  options.findings = false;
  PerfettoStats stats;
  std::FILE* out = std::fopen((dir.path() / "trace.json").c_str(), "w");
  std::string error;
  EXPECT_FALSE(export_perfetto(dir.path().string(), options, out, stats, error));
  std::fclose(out);
  EXPECT_NE(error.find("rank-1.db: table collectives holds a time no commtap writer writes"),
            std::string::npos)
      << error;
}

TEST(Prometheus, FindingsAsLabelledGaugesEscaped) {
  AnalysisRun run;
  JobHealth job;
  job.job_id = "42";
  job.path = "/scratch/traces/42";
  job.ranks = 8;
  job.hosts = 2;
  job.running = true;
  job.now_ns = 1'790'000'000'500'000'000ull;
  Finding f;
  f.kind = "slow_rank";
  f.subject = "rank 2 (node\"a\\b\nc)";
  f.severity = Severity::error;
  f.first_seen_ns = 1'790'000'000'000'000'000ull;
  job.findings = {f};
  run.jobs = {job};
  run.analysis_seconds = {0.25};
  run.seconds = 0.5;
  run.finished_unix_s = 1790000001;
  const std::string text = prometheus_text(run);
  EXPECT_NE(
      text.find("commtap_finding{job_id=\"42\",path=\"/scratch/traces/42\",kind=\"slow_rank\","
                "subject=\"rank 2 (node\\\"a\\\\b\\nc)\",severity=\"error\"} 1\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("commtap_job_findings{job_id=\"42\",path=\"/scratch/traces/42\","
                      "severity=\"error\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("commtap_job_analysis_seconds{job_id=\"42\",path=\"/scratch/traces/42\"} "
                      "0.25\n"),
            std::string::npos);
  EXPECT_NE(text.find("commtap_job_running{job_id=\"42\",path=\"/scratch/traces/42\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE commtap_analyze_jobs gauge\ncommtap_analyze_jobs 1\n"),
            std::string::npos);
  // Every sample follows its family's HELP and TYPE lines.
  std::string family;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("# TYPE ", 0) == 0) family = line.substr(7, line.find(' ', 7) - 7);
    if (line[0] == '#') continue;
    EXPECT_EQ(line.substr(0, family.size()), family) << line;
  }

  TempDir dir;
  const std::string path = (dir.path() / "commtap.prom").string();
  std::string error;
  ASSERT_TRUE(write_file_atomically(path, text, kPrometheusFileMode, error)) << error;
  std::ifstream in(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), text);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
  EXPECT_FALSE(write_file_atomically((dir.path() / "missing" / "x.prom").string(), text,
                                     kPrometheusFileMode, error));
}

TEST(Symbols, DemangleCppOnly) {
  EXPECT_EQ(demangle("_Z8CommRecvR6Domainiiiiibb"),
            "CommRecv(Domain&, int, int, int, int, int, bool, bool)");
  EXPECT_EQ(demangle("main"), "main");
  EXPECT_EQ(demangle("i"), "i");  // a C function named like a mangled type stays itself
  EXPECT_EQ(demangle("MAIN__"), "MAIN__");
  EXPECT_EQ(demangle("_Znot a name"), "_Znot a name");
  EXPECT_EQ(demangle(""), "");
}

TEST(Symbols, SitesQueryShowsDemangledCallers) {
  TempDir dir;
  write_job(dir.path(), true, 2);
  std::string error;
  auto job = JobDatabase::open(dir.path().string(), error);
  ASSERT_TRUE(job) << error;
  auto sites = job->query(canned_query("sites"), error);
  ASSERT_TRUE(sites) << error;
  ASSERT_FALSE(sites->rows.empty());
  EXPECT_EQ(sites->columns[1], "caller");
  EXPECT_EQ(sites->rows[0][1].value_or(""),
            "trainStep(std::vector<double, std::allocator<double> >&)");
}
