// Reading a job's files on several threads, and cron mode (--since reads only the recent rows):
// the findings must be exactly those of a serial read of every row, and cron mode's cost, counted
// in rows read, must follow the period it looks at, not the job's age.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/health.hpp"
#include "analyzer/trace/file_rows.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "render/text_json.hpp"
#include "tests/fixtures/synthetic_job.hpp"
#include "tests/unit/analyzer/health_checks.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using commtap::analyzer::analyze_job;
using commtap::analyzer::HealthOptions;
using commtap::analyzer::JobHealth;
using commtap::fixtures::SyntheticJob;
using commtap::testing::describe;
using commtap::testing::TempDir;
using commtap::testing::test_options;

namespace {

JobHealth analyze_dir(const fs::path& dir, const HealthOptions& options) {
  JobHealth health;
  std::string error;
  EXPECT_TRUE(analyze_job(dir.string(), options, health, error)) << error;
  return health;
}

// Everything `commtap analyze --json` prints of the job.
std::string json_of(const JobHealth& health) {
  return commtap::render::health_json({health}, {}).dump();
}

// A job with every kind of row: instances, messages, aggregates, probes and TCP counters, with
// a slow rank, a slow link and a lossy link to find.
SyntheticJob busy_job(double seconds) {
  SyntheticJob job;
  job.ranks = 8;
  job.hosts = 4;
  job.seconds = seconds;
  job.period_ms = 20;
  job.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
  // The others wait for it inside MPI (a rank late by its own computing spends less time there).
  job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 60.0; };
  job.link_us = [](int from, int to, double) { return from == 1 && to == 2 ? 2000.0 : 0.0; };
  job.probe_every_s = 2;
  job.tcp = true;
  job.tcp_lost_share = [](int from, int to, double) { return from == 3 && to == 0 ? 0.05 : 0.0; };
  return job;
}

// json_of, of the job wherever its directory is.
std::string json_of_any_path(JobHealth health) {
  health.path.clear();
  return json_of(health);
}

void exec_in(const fs::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.string().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(db);
}

}  // namespace

TEST(ParallelRead, SameFindingsWhateverTheThreadCount) {
  SyntheticJob hang;
  hang.seconds = 12;
  hang.hang_at = 8;
  hang.hang_culprit = 3;
  std::vector<SyntheticJob> jobs = {busy_job(20), commtap::fixtures::straggler_job(16, 3000, 4),
                                    hang};
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    TempDir dir;
    ASSERT_EQ(jobs[j].write(dir.path()), "");
    for (const double since : {0.0, 8.0}) {
      HealthOptions options = test_options();
      options.since_s = since;
      options.threads = 1;
      const JobHealth serial = analyze_dir(dir.path(), options);
      EXPECT_FALSE(serial.findings.empty() && j != 2) << "job " << j;
      for (const int threads : {2, 3, 8}) {
        options.threads = threads;
        const JobHealth parallel = analyze_dir(dir.path(), options);
        EXPECT_EQ(json_of(parallel), json_of(serial))
            << "job " << j << ", " << threads << " threads, since " << since << ":"
            << describe(parallel) << "\nvs" << describe(serial);
        EXPECT_EQ(parallel.rows_read, serial.rows_read);
      }
    }
  }
}

// The per-file observations: each file's rows observed on a reading thread, the partials merged
// in file order on the calling thread at any thread count, and what an observation throws thrown
// on the calling thread at that file's turn, after the files before it were merged.
TEST(ParallelRead, ObservationsAreMergedInFileOrder) {
  TempDir dir;
  SyntheticJob job;
  job.ranks = 12;
  job.hosts = 4;
  job.seconds = 3;
  ASSERT_EQ(job.write(dir.path()), "");
  std::vector<std::string> files;
  std::string error;
  ASSERT_TRUE(commtap::analyzer::job_files(dir.path().string(), true, files, error)) << error;
  ASSERT_EQ(files.size(), 12u);
  using commtap::analyzer::ResultRow;
  using commtap::analyzer::RowSink;
  using commtap::analyzer::TraceReader;
  const commtap::analyzer::FileWork work = [](TraceReader& reader, RowSink& sink, std::string& e) {
    return reader.each(
        "SELECT rank, seq FROM collectives ORDER BY seq", {}, [&](sqlite3_stmt* s) { sink.add(s); },
        e);
  };
  struct Partial {
    std::vector<std::int64_t> rows;  // rank * 1e6 + seq
  };
  auto observe_all = [&](int threads, int throw_at, std::vector<std::int64_t>& merged) {
    std::string e;
    std::uint64_t rows = 0;
    const bool ok = commtap::analyzer::observe_files_in_order<Partial>(
        files, threads, work,
        [&](Partial& p, const ResultRow& r) {
          if (r.i64(0) == throw_at)
            throw std::runtime_error("observed rank " + std::to_string(throw_at));
          p.rows.push_back(r.i64(0) * 1'000'000 + r.i64(1));
        },
        [&](Partial&& p) { merged.insert(merged.end(), p.rows.begin(), p.rows.end()); }, e, &rows);
    EXPECT_TRUE(ok) << e;
    EXPECT_EQ(rows, merged.size());
  };
  std::vector<std::int64_t> serial;
  observe_all(1, -1, serial);
  ASSERT_FALSE(serial.empty());
  for (const int threads : {2, 3, 8}) {
    std::vector<std::int64_t> parallel;
    observe_all(threads, -1, parallel);
    EXPECT_EQ(parallel, serial) << threads << " threads";
  }
  for (const int threads : {1, 3}) {
    std::vector<std::int64_t> merged;
    EXPECT_THROW(observe_all(threads, 5, merged), std::runtime_error) << threads << " threads";
    // Every file before rank 5's, in order, and nothing of it or after it.
    const auto first_of_5 = std::find_if(serial.begin(), serial.end(),
                                         [](std::int64_t row) { return row / 1'000'000 == 5; });
    EXPECT_EQ(merged, std::vector<std::int64_t>(serial.begin(), first_of_5)) << threads;
  }
}

namespace {
// Cron mode over the last 30 s, and the same analysis reading every row (what it must equal).
std::pair<HealthOptions, HealthOptions> cron_and_read_all() {
  HealthOptions cron = test_options();
  cron.since_s = 30;
  HealthOptions everything = cron;
  everything.read_all = true;
  return {cron, everything};
}
}  // namespace

TEST(CronMode, SameFindingsAsReadingEverythingAndCostFollowsThePeriodNotTheAge) {
  // The same job seen after 60 s and after 240 s; rank 6 turns slow 40 s before the end.
  auto job_of_age = [](double seconds) {
    SyntheticJob job = busy_job(seconds);
    job.late_us = [seconds](int rank, double t) {
      return rank == 6 && t >= seconds - 40 ? 3000.0 : 0.0;
    };
    job.receive_wait_ms = [](int rank) { return rank == 6 ? 0.0 : 60.0; };
    job.link_us = [](int, int, double) { return 0.0; };
    job.sends_to = [](int from, int to) { return to == (from + 2) % 8; };
    job.message_every = 50;
    job.tcp = false;
    job.probe_every_s = 10;
    return job;
  };
  const auto [cron, everything] = cron_and_read_all();
  std::uint64_t young_rows = 0;
  for (const double age : {60.0, 240.0}) {
    TempDir dir;
    ASSERT_EQ(job_of_age(age).write(dir.path()), "");
    const JobHealth recent = analyze_dir(dir.path(), cron);
    const JobHealth whole = analyze_dir(dir.path(), everything);
    EXPECT_EQ(json_of(recent), json_of(whole)) << describe(recent) << "\nvs" << describe(whole);
    ASSERT_FALSE(recent.findings.empty()) << age;
    EXPECT_EQ(recent.findings.front().kind, "slow_rank") << describe(recent);
    EXPECT_EQ(recent.findings.front().subject, "rank 6 (h3)") << describe(recent);
    // Cron mode reads the period it looks at (and a margin); the whole read, the whole job.
    EXPECT_LT(recent.rows_read * 3, whole.rows_read * 2) << age;
    if (age == 60) {
      young_rows = recent.rows_read;
      continue;
    }
    EXPECT_LT(recent.rows_read * 4, whole.rows_read) << age;
    // Four times the age, about the same rows.
    const std::uint64_t grown = recent.rows_read - young_rows;
    EXPECT_LT(grown * 4, young_rows) << recent.rows_read << " vs " << young_rows;
  }
}

TEST(CronMode, TransfersProbesAndTcpCountersAreReadByTheirKeys) {
  // A job seen after 60 s and after 240 s (the same job grown: the same seed, every row of the
  // younger one written again), with messages, probes and TCP counters; its link from host 1 to
  // host 2 turns slower and its link from host 3 to host 0 lossy 20 s before the end.
  auto job_of_age = [](double seconds) {
    SyntheticJob job = busy_job(seconds);
    job.late_us = [](int, double) { return 0.0; };
    job.receive_wait_ms = [](int) { return 0.0; };
    job.link_us = [seconds](int from, int to, double t) {
      return from == 1 && to == 2 && t >= seconds - 20 ? 2000.0 : 0.0;
    };
    job.tcp_lost_share = [seconds](int from, int to, double t) {
      return from == 3 && to == 0 && t >= seconds - 20 ? 0.05 : 0.0;
    };
    return job;
  };
  const auto [cron, everything] = cron_and_read_all();
  std::uint64_t young_rows = 0;
  for (const double age : {60.0, 240.0}) {
    TempDir dir;
    ASSERT_EQ(job_of_age(age).write(dir.path()), "");
    const JobHealth recent = analyze_dir(dir.path(), cron);
    const JobHealth whole = analyze_dir(dir.path(), everything);
    EXPECT_EQ(json_of(recent), json_of(whole)) << describe(recent) << "\nvs" << describe(whole);
    // The lossy link is named (by its TCP counters), and the messages are joined.
    EXPECT_TRUE(std::any_of(recent.findings.begin(), recent.findings.end(), [](const auto& f) {
      return f.subject == "link h3 -> h0";
    })) << describe(recent);
    EXPECT_GT(recent.messages, 100u) << age;
    if (age == 60) {
      young_rows = recent.rows_read;
      continue;
    }
    // Four times the age, about the same rows: every table is read from its horizon on.
    EXPECT_LT(recent.rows_read * 5, whole.rows_read) << age;
    const std::uint64_t grown = recent.rows_read - std::min(recent.rows_read, young_rows);
    EXPECT_LT(grown * 10, young_rows) << recent.rows_read << " vs " << young_rows;
  }
}

TEST(CronMode, ARankFileReplacedBetweenRunsIsReadAsItIsNow) {
  TempDir dir, shorter;
  SyntheticJob job = busy_job(60);
  ASSERT_EQ(job.write(dir.path()), "");
  HealthOptions cron = test_options();
  cron.since_s = 20;
  const JobHealth first = analyze_dir(dir.path(), cron);
  ASSERT_FALSE(first.findings.empty());
  // Rank 5's file replaced by one of a job that ran a third as long (a restart): a new inode,
  // fewer rows, other times. Nothing is remembered between runs, so nothing can go stale.
  SyntheticJob restarted = busy_job(20);
  restarted.seed = 9;
  ASSERT_EQ(restarted.write(shorter.path()), "");
  fs::remove(dir.path() / "rank-5.db");
  fs::copy_file(shorter.path() / "rank-5.db", dir.path() / "rank-5.db");
  HealthOptions everything = cron;
  everything.read_all = true;
  const JobHealth again = analyze_dir(dir.path(), cron);
  const JobHealth whole = analyze_dir(dir.path(), everything);
  EXPECT_EQ(json_of(again), json_of(whole)) << describe(again) << "\nvs" << describe(whole);
  EXPECT_NE(json_of(again), json_of(first));
}

TEST(CronMode, RefusesImplausibleTimesInTheTransfersProbesAndTcpCountersItReads) {
  for (const auto& [table, update] : std::vector<std::pair<std::string, std::string>>{
           {"transfers",
            "UPDATE transfers SET end_ns = -5 WHERE direction = 'recv' AND start_ns = (SELECT "
            "max(start_ns) FROM transfers WHERE direction = 'recv')"},
           {"probes",
            "UPDATE probes SET received_ns = 'x' WHERE at_ns = (SELECT max(at_ns) FROM "
            "probes)"},
           {"tcp_links",
            "UPDATE tcp_links SET wall_ns = wall_ns + 5000000000000000000 WHERE wall_ns = (SELECT "
            "max(wall_ns) FROM tcp_links)"}}) {
    TempDir dir;
    ASSERT_EQ(busy_job(30).write(dir.path()), "");
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir.path() / "rank-0.db").string().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, update.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << table;
    ASSERT_GT(sqlite3_changes(db), 0) << table;
    sqlite3_close(db);
    HealthOptions cron = test_options();
    cron.since_s = 10;
    JobHealth health;
    std::string error;
    EXPECT_FALSE(analyze_job(dir.path().string(), cron, health, error)) << table;
    EXPECT_NE(error.find("table " + table + " holds a time no commtap writer writes"),
              std::string::npos)
        << error;
  }
}

TEST(CronMode, RefusesImplausibleTimesInTheRowsItReads) {
  TempDir dir;
  ASSERT_EQ(busy_job(30).write(dir.path()), "");
  exec_in(dir.path() / "rank-2.db",
          "UPDATE collectives SET enter_ns = 'x' WHERE seq = (SELECT max(seq) FROM collectives)");
  HealthOptions cron = test_options();
  cron.since_s = 10;
  JobHealth health;
  std::string error;
  EXPECT_FALSE(analyze_job(dir.path().string(), cron, health, error));
  EXPECT_NE(error.find("table collectives holds a time no commtap writer writes"),
            std::string::npos)
      << error;
}

// A whole read checks the collectives' times as it reads them too (kTablesCheckedAsRead: the
// file's content check leaves that table out). An exit in the middle of the table is read by no
// bound of the clocks, only by the passes over the instances.
TEST(WholeRead, RefusesImplausibleCollectiveTimesAsItReadsThem) {
  for (const char* value : {"'x'", "X'00'", "9000000000000000000", "-1", "4.5e18"}) {
    TempDir dir;
    ASSERT_EQ(busy_job(30).write(dir.path()), "");
    exec_in(dir.path() / "rank-2.db",
            std::string("UPDATE collectives SET exit_ns = ") + value +
                " WHERE seq = (SELECT seq FROM collectives ORDER BY seq LIMIT 1 OFFSET (SELECT "
                "count(*) / 2 FROM collectives))");
    JobHealth health;
    std::string error;
    EXPECT_FALSE(analyze_job(dir.path().string(), test_options(), health, error)) << value;
    EXPECT_NE(error.find("rank-2.db: table collectives holds a time no commtap writer writes"),
              std::string::npos)
        << value << ": " << error;
  }
}

// A rank whose file begins later than the next one's (its first instances lost, as a trace
// budget or a crash loses them) has the next file add instances before the ones already read:
// the analysis is what it is with those instances gone from every file, whatever order the
// files add them in.
TEST(WholeRead, InstancesAFileAddsBeforeTheOnesReadAreLookedUpAlike) {
  TempDir lost_by_one, lost_by_all;
  for (const fs::path& dir : {lost_by_one.path(), lost_by_all.path()})
    ASSERT_EQ(busy_job(20).write(dir), "");
  const std::string first_half =
      "DELETE FROM collectives WHERE seq < (SELECT (min(seq) + max(seq)) / 2 FROM collectives)";
  exec_in(lost_by_one.path() / "rank-0.db", first_half);
  for (int rank = 0; rank < 8; ++rank)
    exec_in(lost_by_all.path() / ("rank-" + std::to_string(rank) + ".db"), first_half);
  const JobHealth one = analyze_dir(lost_by_one.path(), test_options());
  const JobHealth all = analyze_dir(lost_by_all.path(), test_options());
  EXPECT_GT(one.instances, 100u);
  EXPECT_EQ(one.instances, all.instances);
  EXPECT_EQ(json_of_any_path(one), json_of_any_path(all))
      << describe(one) << "\nvs" << describe(all);
}

// A file may hold rows of a rank that has no ranks row (not a rank of the job): where the job's
// ranks completed that instance, the row is not compared, as its arrival was not.
TEST(WholeRead, ARowOfNoRankOfTheJobIsLeftOut) {
  TempDir clean, extra;
  for (const fs::path& dir : {clean.path(), extra.path()}) ASSERT_EQ(busy_job(20).write(dir), "");
  exec_in(extra.path() / "rank-2.db",
          "CREATE TEMP TABLE t AS SELECT * FROM collectives WHERE rank = 2 AND seq = (SELECT "
          "max(seq) / 2 FROM collectives WHERE rank = 2 AND exit_ns IS NOT NULL); UPDATE t SET "
          "rank = 99; INSERT INTO collectives SELECT * FROM t");
  const JobHealth expected = analyze_dir(clean.path(), test_options());
  JobHealth health;
  std::string error;
  EXPECT_TRUE(analyze_job(extra.path().string(), test_options(), health, error)) << error;
  EXPECT_EQ(json_of_any_path(health), json_of_any_path(expected));
}
