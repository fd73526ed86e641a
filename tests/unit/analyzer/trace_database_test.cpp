#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "analyzer/query/job_database.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "monitor/monitor.hpp"
#include "tests/fixtures/synthetic_job.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace commtap;

namespace {

using commtap::testing::TempDir;

monitor::RankFacts facts(int rank) {
  monitor::RankFacts f;
  f.job_id = "job-42";
  f.rank = rank;
  f.world_size = 3;
  f.host = "h" + std::to_string(rank % 2);
  f.pid = 1000 + rank;
  f.mpi_library = "MPICH Version: 4.0.2";
  f.command_line = "./app --flag";
  f.start_ns = 1'000'000'000;
  f.end_ns = 3'500'000'000;
  f.ended_by = "finalize";
  return f;
}

std::vector<monitor::FunctionRow> rows(int rank) {
  monitor::CallTotals allreduce{.calls = 10u + rank, .time_ns = 5000, .bytes = 80};
  monitor::CallTotals isend{
      .calls = 4, .time_ns = 400, .bytes = 32, .completions = 4, .completion_ns = 900};
  return {{"MPI_Allreduce", "collective", allreduce}, {"MPI_Isend", "p2p_start", isend}};
}

std::vector<monitor::CommunicatorRow> communicators(int rank) {
  monitor::CommunicatorRow world{
      .id = 1, .created_by = "MPI_COMM_WORLD", .size = 3, .comm_rank = rank};
  if (rank == 0) world.members = "0,1,2";
  return {world};
}

monitor::Snapshot window(int rank) {
  monitor::Snapshot snapshot;
  snapshot.functions = rows(rank);
  snapshot.communicators = communicators(rank);
  return snapshot;
}

// `ranks` ranks of job-42 on hosts h0 and h1 in turn, a second of all-reduces and messages, and
// the call totals of rows().
void write_job(const fs::path& directory, int ranks) {
  fixtures::SyntheticJob job;
  job.ranks = ranks;
  job.hosts = std::min(ranks, 2);
  job.round_robin = true;
  job.seconds = 1;
  job.job_id = "job-42";
  job.command_line = "./app --flag";
  job.call_totals = rows;
  ASSERT_EQ(job.write(directory), "");
}

std::string cell(const analyzer::QueryResult& result, std::size_t row, std::size_t column) {
  return result.rows.at(row).at(column).value_or("NULL");
}

}  // namespace

TEST(TraceDatabase, RankFilesMergeIntoOneJob) {
  TempDir dir;
  write_job(dir.path(), 3);
  std::string error;
  auto job = analyzer::JobDatabase::open(dir.path().string(), error);
  ASSERT_TRUE(job) << error;
  EXPECT_EQ(job->sources().size(), 3u);

  auto totals = job->query(
      "SELECT function, sum(calls), sum(completions), count(*) FROM call_totals GROUP BY function "
      "ORDER BY function",
      error);
  ASSERT_TRUE(totals) << error;
  ASSERT_EQ(totals->rows.size(), 2u);
  EXPECT_EQ(cell(*totals, 0, 0), "MPI_Allreduce");
  EXPECT_EQ(cell(*totals, 0, 1), "33");  // 10 + 11 + 12
  EXPECT_EQ(cell(*totals, 1, 2), "12");
  EXPECT_EQ(cell(*totals, 1, 3), "3");

  auto meta = job->query("SELECT value FROM meta WHERE key = 'job_id'", error);
  ASSERT_TRUE(meta) << error;
  ASSERT_EQ(meta->rows.size(), 1u);
  EXPECT_EQ(cell(*meta, 0, 0), "job-42");

  auto comms = job->query(
      "SELECT comm_id, count(*), max(members), sum(members IS NULL) FROM communicators "
      "GROUP BY comm_id",
      error);
  ASSERT_TRUE(comms) << error;
  ASSERT_EQ(comms->rows.size(), 1u);
  EXPECT_EQ(cell(*comms, 0, 1), "3");
  EXPECT_EQ(cell(*comms, 0, 2), "0,1,2");
  EXPECT_EQ(cell(*comms, 0, 3), "2") << "members only in rank 0's row";

  auto ranks = job->query("SELECT rank, host, ended_by FROM ranks ORDER BY rank", error);
  ASSERT_TRUE(ranks) << error;
  ASSERT_EQ(ranks->rows.size(), 3u);
  EXPECT_EQ(cell(*ranks, 2, 1), "h0");
}

TEST(TraceDatabase, SchemaVersionIsStoredInTheFile) {
  TempDir dir;
  write_job(dir.path(), 1);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() / "rank-0.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), monitor::kSchemaVersion);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(TraceDatabase, RewritingAFileReplacesItWhole) {
  TempDir dir;
  write_job(dir.path(), 1);
  write_job(dir.path(), 1);
  std::string error;
  auto job = analyzer::JobDatabase::open(dir.path().string(), error);
  ASSERT_TRUE(job) << error;
  auto count = job->query("SELECT count(*) FROM call_totals", error);
  ASSERT_TRUE(count) << error;
  EXPECT_EQ(cell(*count, 0, 0), "2");
  EXPECT_FALSE(fs::exists(dir.path() / "rank-0.db.tmp"));
}

// Collective instances and transfers go in 32-row statements and the rest one by one: random
// counts of each, interleaved, with every optional field both present and absent, come back
// field for field.
TEST(TraceDatabase, EveryRecordComesBackFieldForField) {
  std::mt19937 random(2026);
  for (int round = 0; round < 4; ++round) {
    TempDir dir;
    monitor::Snapshot snapshot = window(0);
    snapshot.function_names = {"MPI_Allreduce", "MPI_Isend", "MPI_Irecv"};
    snapshot.algorithm_names = {"native", "auto", "hier"};
    const int records = std::uniform_int_distribution<int>(0, 150)(random);
    std::uint64_t seq = 0, msg = 0;
    for (int i = 0; i < records; ++i) {
      monitor::InstanceRecord r;
      r.comm_id = 1;
      r.enter_ns = 1000 + random() % 1000;
      r.exit_ns = random() % 3 == 0 ? 0 : r.enter_ns + random() % 500;
      r.bytes = random() % 100000;
      r.site = random() % 2 == 0 ? 0 : 1 + random() % 7;
      if (random() % 3 == 0) {
        r.kind = random() % 2 == 0 ? monitor::RecordKind::send : monitor::RecordKind::recv;
        r.function = r.kind == monitor::RecordKind::send ? 1 : 2;
        r.seq = ++msg;
        r.root = static_cast<std::int32_t>(random() % 3);
        r.tag = static_cast<std::int32_t>(random() % 5);
        r.exit_ns = r.enter_ns + 1;
      } else {
        r.seq = ++seq;
        r.root = random() % 2 == 0 ? -1 : static_cast<std::int32_t>(random() % 3);
        r.algorithm = random() % 2 == 0 ? 0 : 2;
      }
      snapshot.instances.push_back(r);
    }
    const std::string file = (dir.path() / "rank-0.db").string();
    ASSERT_EQ(monitor::write_rank_database(file, facts(0), {}, {snapshot}), "");
    std::string error;
    auto job = analyzer::JobDatabase::open(file, error);
    ASSERT_TRUE(job) << error;
    auto collectives = job->query(
        "SELECT seq, comm_id, function, bytes, root, site, enter_ns, exit_ns, algorithm "
        "FROM collectives ORDER BY seq",
        error);
    auto transfers = job->query(
        "SELECT msg, direction, function, peer, tag, bytes, site, start_ns, end_ns "
        "FROM transfers ORDER BY msg",
        error);
    ASSERT_TRUE(collectives && transfers) << error;
    ASSERT_EQ(collectives->rows.size(), seq) << "round " << round;
    ASSERT_EQ(transfers->rows.size(), msg) << "round " << round;
    auto text = [](std::uint64_t value, bool present = true) {
      return present ? std::to_string(value) : std::string("NULL");
    };
    std::size_t c = 0, t = 0;
    for (const monitor::InstanceRecord& r : snapshot.instances) {
      if (r.kind == monitor::RecordKind::collective) {
        const std::vector<std::string> expected = {text(r.seq),
                                                   "1",
                                                   "MPI_Allreduce",
                                                   text(r.bytes),
                                                   r.root >= 0 ? std::to_string(r.root) : "NULL",
                                                   text(r.site, r.site != 0),
                                                   text(r.enter_ns),
                                                   text(r.exit_ns, r.exit_ns != 0),
                                                   r.algorithm == 0 ? "native" : "hier"};
        for (std::size_t k = 0; k < expected.size(); ++k)
          EXPECT_EQ(cell(*collectives, c, k), expected[k]) << "collective " << c << " field " << k;
        ++c;
      } else {
        const bool send = r.kind == monitor::RecordKind::send;
        const std::vector<std::string> expected = {text(r.seq),
                                                   send ? "send" : "recv",
                                                   send ? "MPI_Isend" : "MPI_Irecv",
                                                   std::to_string(r.root),
                                                   std::to_string(r.tag),
                                                   text(r.bytes),
                                                   text(r.site, r.site != 0),
                                                   text(r.enter_ns),
                                                   text(r.exit_ns)};
        for (std::size_t k = 0; k < expected.size(); ++k)
          EXPECT_EQ(cell(*transfers, t, k), expected[k]) << "transfer " << t << " field " << k;
        ++t;
      }
    }
  }
}

TEST(TraceDatabase, UnwritableDirectoryIsAnErrorNotACrash) {
  const std::string error = monitor::write_rank_database("/proc/commtap-no-such-dir/rank-0.db",
                                                         facts(0), {}, {window(0)});
  EXPECT_NE(error, "");
}

TEST(TraceWriter, WritesWindowsAndALastOneWithHowTheRankEnded) {
  TempDir dir;
  const std::string path = (dir.path() / "rank-0.db").string();
  std::atomic<int> collected{0};
  auto collect = [&] {
    ++collected;
    monitor::Snapshot snapshot;
    snapshot.functions = rows(0);
    snapshot.communicators = communicators(0);
    snapshot.function_names = {"MPI_Barrier"};
    snapshot.busy.push_back({1, 0, 0, 0, 1000});  // inside MPI_Barrier since monotonic 1000
    return snapshot;
  };
  std::string error;
  auto writer = monitor::TraceWriter::start(path, facts(0), {{"COMMTAP_INTERVAL", "1"}}, 1'000'000,
                                            collect, error);
  ASSERT_TRUE(writer) << error;
  // Readable while the writer runs.
  auto live = analyzer::JobDatabase::open(dir.path().string(), error);
  ASSERT_TRUE(live) << error;
  auto running = live->query("SELECT ended_by FROM ranks", error);
  ASSERT_TRUE(running) << error;
  EXPECT_EQ(cell(*running, 0, 0), "running");

  monitor::RankFacts end = facts(0);
  end.ended_by = "finalize";
  EXPECT_EQ(writer->stop(end), "");
  EXPECT_EQ(writer->stop(end), "") << "stop is idempotent";
  EXPECT_GE(collected.load(), 1);
  EXPECT_FALSE(fs::exists(path + "-wal")) << "a finished file is a plain SQLite file";
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);

  auto job = analyzer::JobDatabase::open(dir.path().string(), error);
  ASSERT_TRUE(job) << error;
  auto last = job->query(
      "SELECT state, (SELECT count(*) FROM heartbeats), (SELECT ended_by FROM ranks) FROM "
      "heartbeats ORDER BY wall_ns DESC LIMIT 1",
      error);
  ASSERT_TRUE(last) << error;
  EXPECT_EQ(cell(*last, 0, 0), "finalize");
  EXPECT_EQ(std::stoi(cell(*last, 0, 1)), collected.load());
  EXPECT_EQ(cell(*last, 0, 2), "finalize");
  auto in_call = job->query(
      "SELECT function, comm_id IS NULL FROM heartbeats WHERE state = 'in_call' LIMIT 1", error);
  ASSERT_TRUE(in_call) << error;
  if (collected.load() > 1) {  // at least one window before the last
    EXPECT_EQ(cell(*in_call, 0, 0), "MPI_Barrier");
    EXPECT_EQ(cell(*in_call, 0, 1), "1");
  }
}

TEST(TraceWriter, UnwritablePathIsAnErrorAndNoThread) {
  std::string error;
  auto writer = monitor::TraceWriter::start(
      "/proc/commtap-nowhere/rank-0.db", facts(0), {}, 1'000'000,
      [] { return monitor::Snapshot{}; }, error);
  EXPECT_EQ(writer, nullptr);
  EXPECT_NE(error, "");
}

TEST(JobDatabase, CorruptFileIsNamedInTheError) {
  TempDir dir;
  write_job(dir.path(), 2);
  std::ofstream(dir.path() / "rank-1.db", std::ios::binary | std::ios::trunc)
      << std::string(4096, 'x');
  std::string error;
  EXPECT_FALSE(analyzer::JobDatabase::open(dir.path().string(), error));
  EXPECT_NE(error.find("rank-1.db"), std::string::npos) << error;
}

// A rank killed inside a rollback-journal transaction leaves a hot journal, which a read-only
// reader may not roll back and immutable=1 would ignore (reading the half-written pages): the
// reader and `commtap query` read a privately rolled-back copy, and leave the files alone.
TEST(JobDatabase, AHotJournalOfAKilledRankIsRolledBackInACopy) {
  TempDir dir;
  write_job(dir.path(), 2);
  const fs::path file = dir.path() / "rank-1.db";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the writer, killed in the middle of a transaction larger than its cache
    sqlite3* db = nullptr;
    sqlite3_open(file.c_str(), &db);
    sqlite3_exec(db,
                 "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 2; BEGIN;"
                 "CREATE TABLE uncommitted(x);"
                 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)"
                 "INSERT INTO uncommitted SELECT randomblob(1000) FROM n;"
                 "UPDATE ranks SET host = 'torn';",
                 nullptr, nullptr, nullptr);
    _exit(0);  // no COMMIT, no close
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_GT(fs::file_size(file.string() + "-journal"), 0u);
  const auto size = fs::file_size(file);

  std::string error;
  auto reader = analyzer::TraceReader::open(file.string(), error);
  ASSERT_TRUE(reader) << error;
  std::string hosts;
  int tables = -1;
  ASSERT_TRUE(reader->each(
      "SELECT group_concat(host) FROM ranks", {},
      [&](sqlite3_stmt* s) { hosts = analyzer::column_text(s, 0); }, error))
      << error;
  ASSERT_TRUE(reader->each(
      "SELECT count(*) FROM sqlite_master WHERE name = 'uncommitted'", {},
      [&](sqlite3_stmt* s) { tables = sqlite3_column_int(s, 0); }, error))
      << error;
  EXPECT_EQ(hosts, "h1");
  EXPECT_EQ(tables, 0);
  reader.reset();

  auto job = analyzer::JobDatabase::open(dir.path().string(), error);
  ASSERT_TRUE(job) << error;
  auto result = job->query("SELECT rank, host FROM ranks ORDER BY rank", error);
  ASSERT_TRUE(result) << error;
  ASSERT_EQ(result->rows.size(), 2u);
  EXPECT_EQ(cell(*result, 1, 1), "h1");
  // The job's own files as they were: the rank may still be running.
  EXPECT_GT(fs::file_size(file.string() + "-journal"), 0u);
  EXPECT_EQ(fs::file_size(file), size);
}

TEST(JobDatabase, ForeignSchemaVersionIsRefused) {
  TempDir dir;
  const fs::path file = dir.path() / "rank-0.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE t(x); PRAGMA user_version = 99;", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  std::string error;
  EXPECT_FALSE(analyzer::JobDatabase::open(dir.path().string(), error));
  EXPECT_NE(error.find("schema version 99"), std::string::npos) << error;
}

TEST(JobDatabase, MissingAndEmptyPathsAreErrors) {
  TempDir dir;
  std::string error;
  EXPECT_FALSE(analyzer::JobDatabase::open(dir.path().string(), error));
  EXPECT_NE(error.find("no rank-<N>.db"), std::string::npos);
  EXPECT_FALSE(analyzer::JobDatabase::open((dir.path() / "nothing").string(), error));
  EXPECT_NE(error.find("no such file"), std::string::npos);
}

TEST(JobDatabase, QueriesAreReadOnlyAndSingle) {
  TempDir dir;
  write_job(dir.path(), 1);
  std::string error;
  auto job = analyzer::JobDatabase::open(dir.path().string(), error);
  ASSERT_TRUE(job);
  EXPECT_FALSE(job->query("DELETE FROM ranks", error));
  EXPECT_NE(error.find("read-only"), std::string::npos);
  EXPECT_FALSE(job->query("SELECT 1; SELECT 2", error));
  EXPECT_NE(error.find("one statement"), std::string::npos);
  EXPECT_FALSE(job->query("SELECT nonsense FROM nowhere", error));
}

TEST(JobDatabase, EveryCannedQueryRuns) {
  TempDir dir;
  write_job(dir.path(), 2);
  std::string error;
  auto job = analyzer::JobDatabase::open(dir.path().string(), error);
  ASSERT_TRUE(job);
  for (const std::string& name : analyzer::canned_query_names()) {
    auto result = job->query(analyzer::canned_query(name), error);
    ASSERT_TRUE(result) << name << ": " << error;
    // The synthetic job has collective instances and aggregates: every query has rows.
    EXPECT_FALSE(result->rows.empty()) << name;
  }
  EXPECT_EQ(analyzer::canned_query("no-such-query"), nullptr);
}

TEST(Formatting, TableAlignsColumnsAndJsonKeepsNulls) {
  analyzer::QueryResult result{{"name", "n"}, {{"alpha", "1"}, {"b", std::nullopt}}};
  EXPECT_EQ(analyzer::format_table(result),
            "name   n\n"
            "-----  ----\n"
            "alpha  1\n"
            "b      NULL\n");
  const auto json = nlohmann::json::parse(analyzer::format_json(result));
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["name"], "alpha");
  EXPECT_TRUE(json[1]["n"].is_null());
  EXPECT_EQ(analyzer::format_raw(result), "alpha|1\nb|\n");
}
