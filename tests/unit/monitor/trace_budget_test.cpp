// The trace budget (COMMTAP_TRACE_BUDGET, monitor/trace_budget.hpp): a busy hour stays within it
// while every call is still counted, the thinning is nested across ranks, and 0 thins nothing.
#include "monitor/trace_budget.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "monitor/monitor.hpp"
#include "tests/unit/monitor/busy_rank.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace commtap;
using commtap::testing::BusyRank;
using commtap::testing::TempDir;

namespace {

monitor::RankFacts facts_of(const BusyRank& busy) {
  monitor::RankFacts f;
  f.job_id = "budget";
  f.rank = busy.rank;
  f.world_size = busy.world_size;
  f.host = "h0";
  f.start_ns = busy.start_wall_ns;
  f.ended_by = "finalize";
  return f;
}

std::vector<std::pair<std::string, std::string>> settings(const std::string& budget) {
  return {{"COMMTAP_TRACE_BUDGET", budget}, {"COMMTAP_SAMPLE", "16"}, {"COMMTAP_INTERVAL", "1000"}};
}

// Writes `windows` windows of `busy`.
std::string write(const fs::path& path, const BusyRank& busy, std::size_t windows,
                  const std::string& budget) {
  return monitor::write_rank_database(path.string(), facts_of(busy), settings(budget), windows,
                                      [&](std::size_t i) { return busy.window(i); });
}

class Db {
 public:
  explicit Db(const fs::path& path) {
    sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr);
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // The first column of each row of `sql` (NULL: -1).
  std::vector<std::int64_t> column(const std::string& sql) const {
    std::vector<std::int64_t> out;
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_);
    while (sqlite3_step(stmt) == SQLITE_ROW)
      out.push_back(sqlite3_column_type(stmt, 0) == SQLITE_NULL ? -1
                                                                : sqlite3_column_int64(stmt, 0));
    sqlite3_finalize(stmt);
    return out;
  }
  std::int64_t one(const std::string& sql) const {
    const std::vector<std::int64_t> rows = column(sql);
    return rows.empty() ? -2 : rows.front();
  }
  // The first three columns of each row of `sql`.
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> triples(
      const std::string& sql) const {
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> out;
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK);
    while (sqlite3_step(stmt) == SQLITE_ROW)
      out.emplace(sqlite3_column_int64(stmt, 0), sqlite3_column_int64(stmt, 1),
                  sqlite3_column_int64(stmt, 2));
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

// Records that a window of `n` collectives on one communicator holds, sampled at 16.
std::vector<monitor::InstanceRecord> collectives(std::uint64_t first_seq, std::uint64_t n) {
  std::vector<monitor::InstanceRecord> out;
  for (std::uint64_t seq = first_seq; seq < first_seq + n; ++seq)
    if (monitor::is_sampled(1, seq, 16)) out.push_back({1, seq, 8, seq, seq + 1, 0, -1, 1, 0});
  return out;
}

}  // namespace

// (a) An hour at 100,000 collectives and 20,000 messages per second: the file stays under 5 MB,
// and call totals and aggregates count every call though most instances were thinned and the
// old windows merged.
TEST(TraceBudget, BusyHourStaysWithinTheBudgetAndCountsEveryCall) {
  TempDir dir;
  BusyRank busy;
  busy.collectives_per_s = 100000;
  busy.messages_per_s = 20000;
  constexpr std::size_t kWindows = 3600;
  const fs::path path = dir.path() / "rank-0.db";
  ASSERT_EQ(write(path, busy, kWindows, "5"), "");

  EXPECT_LE(fs::file_size(path), 5'000'000u);
  Db db(path);
  const std::int64_t collectives = 100000ll * kWindows, messages = 20000ll * kWindows;
  EXPECT_EQ(db.one("SELECT calls FROM call_totals WHERE function = 'MPI_Allreduce'"), collectives);
  EXPECT_EQ(db.one("SELECT sum(calls) FROM aggregates WHERE function = 'MPI_Allreduce'"),
            collectives);
  EXPECT_EQ(db.one("SELECT sum(calls) FROM aggregates WHERE function = 'MPI_Isend'"), messages);
  // Instances were kept, a small share of those recorded, and none counted as dropped.
  const std::int64_t kept =
      db.one("SELECT count(*) FROM collectives") + db.one("SELECT count(*) FROM transfers");
  const std::int64_t thinned = db.one("SELECT max(instances_thinned) FROM heartbeats");
  EXPECT_GT(kept, 10000);
  EXPECT_GT(thinned, 100 * kept);
  EXPECT_EQ(db.one("SELECT max(instances_dropped) FROM heartbeats"), 0);
  EXPECT_GE(db.one("SELECT min(sample_level) FROM heartbeats WHERE wall_ns > (SELECT "
                   "min(wall_ns) FROM heartbeats) + 60000000000"),
            6);
  // Past the start, every kept collective is one the level in force keeps (its hash / 16 a
  // multiple of 2^level).
  std::size_t not_at_level = 0;
  for (const auto& [comm, seq, unused] :
       db.triples("SELECT comm_id, seq, 0 FROM collectives WHERE enter_ns > 60000000000"))
    not_at_level += !monitor::is_kept_at_level(
        monitor::collective_hash(comm, static_cast<std::uint64_t>(seq)), 16, 6);
  EXPECT_EQ(not_at_level, 0u);
  // The last 10 minutes at the window's resolution, the 50 minutes before in 1-minute windows.
  const std::int64_t end = static_cast<std::int64_t>(busy.wall_at(kWindows - 1));
  EXPECT_EQ(db.one("SELECT count(*) FROM heartbeats WHERE wall_ns > " +
                   std::to_string(end - 590'000'000'000ll)),
            590);
  const std::int64_t heartbeats = db.one("SELECT count(*) FROM heartbeats");
  EXPECT_GE(heartbeats, 600 + 49);
  EXPECT_LE(heartbeats, 600 + 52);
  // Each aggregate key has one row per heartbeat, at its wall time.
  EXPECT_EQ(db.one("SELECT count(*) FROM aggregates a WHERE NOT EXISTS (SELECT 1 FROM "
                   "heartbeats h WHERE h.wall_ns = a.wall_ns)"),
            0);
  EXPECT_EQ(db.one("SELECT count(DISTINCT wall_ns) FROM aggregates"), heartbeats);
  // A merged window keeps its extremes.
  EXPECT_EQ(db.one("SELECT max(max_ns) FROM aggregates WHERE function = 'MPI_Allreduce'"), 9006);
  // Cumulative rows keep one per merged window and key.
  EXPECT_EQ(db.one("SELECT count(*) FROM comm_progress"), 2 * heartbeats);
  EXPECT_EQ(db.one("SELECT max(entered) FROM comm_progress"), 75000ll * kWindows);
}

// (b) Two ranks share the same collectives and messages; rank 1 also records a flood of its
// own, so it thins harder. Whatever it kept of what they share, rank 0 kept too.
TEST(TraceBudget, RanksAtDifferentLevelsShareTheHigherLevelsInstances) {
  TempDir dir;
  BusyRank rank0, rank1, flood;
  rank0.rank = 0;
  rank1.rank = 1;
  flood.rank = 1;
  flood.collectives_per_s = 400000;
  flood.messages_per_s = 0;
  flood.sites = 0;
  constexpr std::size_t kWindows = 300;
  ASSERT_EQ(write(dir.path() / "rank-0.db", rank0, kWindows, "5"), "");
  ASSERT_EQ(monitor::write_rank_database(
                (dir.path() / "rank-1.db").string(), facts_of(rank1), settings("5"), kWindows,
                [&](std::size_t i) {
                  monitor::Snapshot s = rank1.window(i);
                  for (monitor::InstanceRecord r : flood.window(i).instances) {
                    r.comm_id += 0x10000;  // communicators rank 0 is not in
                    s.instances.push_back(r);
                  }
                  return s;
                }),
            "");
  Db db0(dir.path() / "rank-0.db"), db1(dir.path() / "rank-1.db");
  const std::int64_t level0 = db0.one("SELECT max(sample_level) FROM heartbeats");
  const std::int64_t level1 = db1.one(
      "SELECT min(sample_level) FROM heartbeats WHERE wall_ns > "
      "(SELECT min(wall_ns) FROM heartbeats) + 30000000000");
  EXPECT_GT(level1, level0);
  EXPECT_GT(level0, 0);

  const std::string shared = "comm_id IN (4096, 8192)";
  const auto kept0 = db0.triples("SELECT comm_id, seq, 0 FROM collectives WHERE " + shared);
  const auto kept1 = db1.triples("SELECT comm_id, seq, 0 FROM collectives WHERE " + shared);
  ASSERT_GT(kept1.size(), 10u);
  EXPECT_LT(kept1.size(), kept0.size());
  for (const auto& instance : kept1) EXPECT_TRUE(kept0.count(instance));
  // Both ends of a message: rank 1's receives from 0 are among rank 0's sends to 1, and rank 1's
  // sends among rank 0's receives.
  const auto sent0 =
      db0.triples("SELECT comm_id, tag, msg FROM transfers WHERE direction = 'send'");
  const auto received0 =
      db0.triples("SELECT comm_id, tag, msg FROM transfers WHERE direction = 'recv'");
  const auto received1 =
      db1.triples("SELECT comm_id, tag, msg FROM transfers WHERE direction = 'recv'");
  const auto sent1 =
      db1.triples("SELECT comm_id, tag, msg FROM transfers WHERE direction = 'send'");
  ASSERT_GT(received1.size(), 10u);
  ASSERT_GT(sent1.size(), 10u);
  for (const auto& m : received1) EXPECT_TRUE(sent0.count(m));
  for (const auto& m : sent1) EXPECT_TRUE(received0.count(m));
}

// Nesting itself: a key kept at level k is kept at every lower level, and each level keeps about
// half of the one below.
TEST(TraceBudget, LevelsAreNested) {
  std::mt19937_64 random(7);
  std::vector<std::uint64_t> kept_at(8);
  for (int n = 0; n < 100000; ++n) {
    const std::uint64_t key = random() / 16 * 16;  // what COMMTAP_SAMPLE=16 recorded
    for (unsigned level = 0; level < 8; ++level) {
      const bool kept = monitor::is_kept_at_level(key, 16, level);
      if (kept) {
        ++kept_at[level];
        for (unsigned lower = 0; lower < level; ++lower)
          EXPECT_TRUE(monitor::is_kept_at_level(key, 16, lower));
      }
      EXPECT_EQ(kept, monitor::is_multiple_of(key, 16ull << level));
    }
  }
  for (unsigned level = 1; level < 8; ++level)
    EXPECT_NEAR(static_cast<double>(kept_at[level]) / kept_at[level - 1], 0.5, 0.05);
}

// A rate that wobbles by 20% around a level's boundary does not make the level flap.
TEST(TraceBudget, LevelHoldsThroughWobblingRates) {
  monitor::TraceBudgetSettings settings;
  settings.bytes_per_hour = 5'000'000;
  settings.sample = 16;
  monitor::InstanceThinning thinning(settings);
  std::uint64_t seq = 1;
  std::set<unsigned> levels;
  for (int window = 0; window < 200; ++window) {
    const std::uint64_t calls = window % 2 == 0 ? 100000 : 120000;
    const std::vector<monitor::InstanceRecord> records = collectives(seq, calls);
    seq += calls;
    thinning.thin(records, 0, 1.0);
    if (window >= 20) levels.insert(thinning.level());
  }
  EXPECT_EQ(levels.size(), 1u);
}

// A burst far above the smoothed rate is paid from the credit, and a window that would overdraw
// it is thinned harder: the kept rows never run ahead of the start credit plus the share.
TEST(TraceBudget, BurstsAreBoundedByTheCredit) {
  monitor::TraceBudgetSettings settings;
  settings.bytes_per_hour = 5'000'000;
  settings.sample = 16;
  monitor::InstanceThinning thinning(settings);
  const double share = 5e6 * monitor::kSampledShare / 3600 / monitor::kBytesPerSampledRow;
  std::uint64_t seq = 1, kept = 0;
  for (int window = 0; window < 600; ++window) {
    const std::uint64_t calls = window % 60 == 59 ? 5'000'000 : 1000;
    const std::vector<monitor::InstanceRecord> records = collectives(seq, calls);
    seq += calls;
    const monitor::ThinnedWindow w = thinning.thin(records, 0, 1.0);
    kept += w.collectives.size();
    EXPECT_LE(static_cast<double>(kept), share * (window + 1 + monitor::kStartSeconds) + 1);
  }
}

// A short job keeps all that COMMTAP_SAMPLE recorded (9,000 rows here): the start credit pays
// for it.
TEST(TraceBudget, ShortJobsKeepEverythingTheSampleRecorded) {
  TempDir dir;
  BusyRank busy;
  busy.collectives_per_s = 1000;
  busy.messages_per_s = 1000;
  busy.sample = 1;
  constexpr std::size_t kWindows = 3;
  std::size_t records = 0;
  for (std::size_t i = 0; i < kWindows; ++i) records += busy.window(i).instances.size();
  const fs::path path = dir.path() / "rank-0.db";
  ASSERT_EQ(write(path, busy, kWindows, "5"), "");
  Db db(path);
  EXPECT_EQ(db.one("SELECT count(*) FROM collectives") + db.one("SELECT count(*) FROM transfers"),
            static_cast<std::int64_t>(records));
  EXPECT_EQ(db.one("SELECT max(sample_level) FROM heartbeats"), 0);
  EXPECT_EQ(db.one("SELECT max(instances_thinned) FROM heartbeats"), 0);
}

// (c) COMMTAP_TRACE_BUDGET=0: every recorded instance and every window is kept, as before.
TEST(TraceBudget, ZeroKeepsEverything) {
  TempDir dir;
  BusyRank busy;
  busy.collectives_per_s = 2000;
  busy.messages_per_s = 2000;
  constexpr std::size_t kWindows = 900;  // past the 10 minutes the budget keeps unmerged
  std::size_t collectives = 0, transfers = 0, aggregates = 0;
  for (std::size_t i = 0; i < kWindows; ++i) {
    const monitor::Snapshot s = busy.window(i);
    for (const monitor::InstanceRecord& r : s.instances)
      ++(r.kind == monitor::RecordKind::collective ? collectives : transfers);
    aggregates += s.aggregates.size();
  }
  for (const std::string budget : {"0", ""}) {  // "": no COMMTAP_TRACE_BUDGET row at all
    const fs::path path = dir.path() / ("rank-0" + budget + ".db");
    if (budget.empty())
      ASSERT_EQ(monitor::write_rank_database(path.string(), facts_of(busy), {}, kWindows,
                                             [&](std::size_t i) { return busy.window(i); }),
                "");
    else
      ASSERT_EQ(write(path, busy, kWindows, budget), "");
    Db db(path);
    EXPECT_EQ(db.one("SELECT count(*) FROM collectives"), static_cast<std::int64_t>(collectives));
    EXPECT_EQ(db.one("SELECT count(*) FROM transfers"), static_cast<std::int64_t>(transfers));
    EXPECT_EQ(db.one("SELECT count(*) FROM aggregates"), static_cast<std::int64_t>(aggregates));
    EXPECT_EQ(db.one("SELECT count(*) FROM heartbeats"), static_cast<std::int64_t>(kWindows));
    EXPECT_EQ(db.one("SELECT count(*) FROM heartbeats WHERE sample_level IS NOT NULL OR "
                     "instances_thinned IS NOT NULL"),
              0);
  }
}
