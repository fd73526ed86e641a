// Reading untrusted trace files and writing outputs beside them (analyzer/untrusted_input,
// analyzer/output_files). tests/mpi/hostile.sh runs the same attacks through the command.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "analyzer/store/output_files.hpp"
#include "analyzer/trace/file_rows.hpp"
#include "analyzer/trace/reader_pool.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"
#include "monitor/trace_schema.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace commtap::analyzer;
using commtap::testing::TempDir;

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void exec_or_fail(sqlite3* db, const std::string& sql) {
  char* message = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message), SQLITE_OK)
      << (message ? message : "") << " in " << sql;
}

// A rank file of the current schema with one rank row; `extra` runs after it.
fs::path make_rank_file(const fs::path& dir, const std::string& extra = "") {
  const fs::path path = dir / "rank-0.db";
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  exec_or_fail(db, commtap::monitor::schema_sql());
  exec_or_fail(db, "PRAGMA user_version=" + std::to_string(commtap::monitor::kSchemaVersion));
  exec_or_fail(db,
               "INSERT INTO ranks (rank, world_size, host, pid, mpi_library, command_line, "
               "start_ns, end_ns, ended_by, node, local_rank) VALUES (0, 1, 'h0', 1, 'MPICH', "
               "'./app', 1790000000000000000, 1790000001000000000, 'finalize', 0, 0)");
  if (!extra.empty()) exec_or_fail(db, extra);
  sqlite3_close(db);
  return path;
}

// `count` copies of one rank file in `dir`, each a file of its own.
std::vector<std::string> rank_files(const fs::path& dir, int count) {
  const std::string one = make_rank_file(dir).string();
  std::vector<std::string> files;
  for (int i = 0; i < count; ++i) {
    const std::string copy = (dir / ("rank-" + std::to_string(i + 1) + ".db")).string();
    fs::copy_file(one, copy);
    files.push_back(copy);
  }
  return files;
}

}  // namespace

TEST(CleanText, KeepsValidTextAndEscapesTheRest) {
  EXPECT_EQ(clean_text("rank 2 (node-a) 3.5 \xC2\xB5s \xE2\x86\x92 ok"),
            "rank 2 (node-a) 3.5 \xC2\xB5s \xE2\x86\x92 ok");
  EXPECT_EQ(clean_text("a\x1B[2Jb"), "a\\x1B[2Jb");
  EXPECT_EQ(clean_text("id\nssh-ed25519 AAAA\r"), "id\\x0Assh-ed25519 AAAA\\x0D");
  EXPECT_EQ(clean_text(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(clean_text("\x7F"), "\\x7F");
  EXPECT_EQ(clean_text("\xC2\x85"), "\\x85");  // C1 NEL
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(clean_text("h\xFFz"), "h" + replacement + "z");
  EXPECT_EQ(clean_text("\xC0\xAF"), replacement + replacement);                    // overlong '/'
  EXPECT_EQ(clean_text("\xED\xA0\x80"), replacement + replacement + replacement);  // surrogate
  EXPECT_EQ(clean_text("\xF4\x90\x80\x80"), replacement + replacement + replacement + replacement);
  EXPECT_EQ(clean_text("\xE2\x86"), replacement + replacement);  // cut short
  EXPECT_EQ(clean_text("a\nb", /*keep_newlines=*/true), "a\nb");
}

TEST(CheckInputFile, OnlyRegularFilesAndLinksWhenAllowed) {
  TempDir dir;
  const fs::path file = dir.path() / "rank-0.db";
  std::ofstream(file) << "x";
  EXPECT_EQ(check_input_file(file.string()).why_not, "");
  ASSERT_EQ(::mkfifo((dir.path() / "fifo").c_str(), 0600), 0);
  EXPECT_NE(check_input_file((dir.path() / "fifo").string()).why_not.find("FIFO"),
            std::string::npos);
  EXPECT_NE(check_input_file(dir.path().string()).why_not.find("directory"), std::string::npos);
  EXPECT_EQ(check_input_file(dir.path().string(), /*directory=*/true).why_not, "");
  fs::create_symlink(file, dir.path() / "link.db");
  const InputFile refused = check_input_file((dir.path() / "link.db").string());
  EXPECT_NE(refused.why_not.find("symbolic link"), std::string::npos);
  set_follow_symlinks(true);
  const InputFile followed = check_input_file((dir.path() / "link.db").string());
  set_follow_symlinks(false);
  EXPECT_EQ(followed.why_not, "");  // same owner: followed, to the target itself
  EXPECT_EQ(fs::path(followed.read_as), fs::canonical(file));
  fs::create_hard_link(file, dir.path() / "rank-1.db");
  const InputFile a = check_input_file(file.string());
  const InputFile b = check_input_file((dir.path() / "rank-1.db").string());
  EXPECT_EQ(a.inode, b.inode);
  EXPECT_EQ(a.device, b.device);
}

TEST(JobFiles, SkipsFifosLinksAndSecondNamesOfOneFile) {
  TempDir dir;
  make_rank_file(dir.path());
  ASSERT_EQ(::mkfifo((dir.path() / "rank-9.db").c_str(), 0600), 0);
  fs::create_symlink(dir.path() / "rank-0.db", dir.path() / "rank-5.db");
  for (int i = 1; i <= 3; ++i)
    fs::create_hard_link(dir.path() / "rank-0.db",
                         dir.path() / ("rank-1" + std::to_string(i) + ".db"));
  std::vector<std::string> files, skipped;
  std::string error;
  ASSERT_TRUE(job_files(dir.path().string(), true, files, error, &skipped)) << error;
  EXPECT_EQ(files.size(), 1u);
  EXPECT_EQ(skipped.size(), 5u);  // the FIFO, the link and three second names
}

TEST(TraceReader, RefusesViewsTriggersAndImplausibleValues) {
  {
    TempDir dir;
    const auto file = make_rank_file(dir.path());
    std::string error;
    auto reader = TraceReader::open(file.string(), error);
    ASSERT_TRUE(reader) << error;
    EXPECT_EQ(reader->content_problem(), "");
  }
  const std::pair<const char*, const char*> cases[] = {
      {"PRAGMA legacy_alter_table=ON; ALTER TABLE heartbeats RENAME TO hb; CREATE VIEW "
       "heartbeats AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x AS "
       "rank FROM r",
       "is a view"},
      {"CREATE TRIGGER t AFTER INSERT ON meta BEGIN SELECT 1; END", "trigger"},
      {"DROP TABLE call_sites; CREATE VIRTUAL TABLE call_sites USING fts4(a)", "virtual table"}};
  for (const auto& [sql, expected] : cases) {
    TempDir dir;
    const auto file = make_rank_file(dir.path(), sql);
    std::string error;
    auto reader = TraceReader::open(file.string(), error);
    ASSERT_TRUE(reader) << error;
    EXPECT_NE(reader->content_problem().find(expected), std::string::npos) << sql;
  }
  const char* values[] = {"UPDATE ranks SET start_ns = -9000000000000000000",
                          "UPDATE ranks SET end_ns = 9000000000000000000",
                          "UPDATE ranks SET start_ns = 'abc'", "UPDATE ranks SET end_ns = X'00'"};
  for (const char* sql : values) {
    TempDir dir;
    const auto file = make_rank_file(dir.path(), sql);
    std::string error;
    auto reader = TraceReader::open(file.string(), error);
    ASSERT_TRUE(reader) << error;
    EXPECT_NE(reader->content_problem().find("table ranks"), std::string::npos) << sql;
  }
}

// The pool opens a pooled file once, lends its reader to one lease at a time, refuses a file in
// every pass with its first error, and opens the files beyond its budget at every lease.
TEST(ReaderPool, OpensAPooledFileOnceAndRefusesItInEveryPass) {
  TempDir dir;
  const std::string good = make_rank_file(dir.path()).string();
  const std::string bad = (dir.path() / "rank-1.db").string();
  std::ofstream(bad) << "not a database, but long enough to be read as one's header......";
  ReaderPool pool({good, bad, good}, /*most_files=*/2);
  std::string error;
  TraceReader* first = nullptr;
  {
    ReaderLease lease = pool.lease(0, good, error);
    ASSERT_TRUE(lease) << error;
    first = &*lease;
    // Held: a second lease of the same file gets a reader of its own.
    ReaderLease beside = pool.lease(0, good, error);
    ASSERT_TRUE(beside) << error;
    EXPECT_NE(&*beside, first);
  }
  EXPECT_EQ(pool.openings(), 2u);
  {
    ReaderLease again = pool.lease(0, good, error);
    ASSERT_TRUE(again) << error;
    EXPECT_EQ(&*again, first);
  }
  EXPECT_EQ(pool.openings(), 2u);
  std::string refused;
  EXPECT_FALSE(pool.lease(1, bad, refused));
  EXPECT_NE(refused, "");
  fs::copy_file(good, bad, fs::copy_options::overwrite_existing);  // fixed after the first pass
  std::string later;
  EXPECT_FALSE(pool.lease(1, bad, later));
  EXPECT_EQ(later, refused);
  EXPECT_EQ(pool.openings(), 3u);
  // Past the files it keeps, and a path other than the pool's: opened at every lease.
  EXPECT_TRUE(pool.lease(2, good, error)) << error;
  EXPECT_TRUE(pool.lease(2, good, error)) << error;
  EXPECT_TRUE(pool.lease(0, bad, error)) << error;
  EXPECT_EQ(pool.openings(), 6u);
}

// Passes on several reading threads lease the pool's readers: the rows are those of unpooled
// reads, and each file is opened once over every pass.
TEST(ReaderPool, ServesEveryPassOnSeveralThreads) {
  TempDir dir;
  const std::vector<std::string> files = rank_files(dir.path(), 7);
  const FileWork work = [](TraceReader& reader, RowSink& sink, std::string& e) {
    return reader.each(
        "SELECT rank, start_ns FROM ranks", {}, [&](sqlite3_stmt* s) { sink.add(s); }, e);
  };
  auto pass = [&](ReaderPool* readers, int threads) {
    std::vector<std::int64_t> seen;
    std::string error;
    EXPECT_TRUE(read_files_in_order(
        files, threads, work,
        [&](const ResultRow& row) {
          seen.push_back(static_cast<std::int64_t>(row.file()));
          seen.push_back(row.i64(1));
        },
        error, nullptr, readers))
        << error;
    return seen;
  };
  const std::vector<std::int64_t> expected = pass(nullptr, 1);
  ASSERT_EQ(expected.size(), 2 * files.size());
  ReaderPool pool(files, /*most_files=*/files.size());
  for (int round = 0; round < 6; ++round) EXPECT_EQ(pass(&pool, 1 + round % 3), expected);
  EXPECT_EQ(pool.openings(), files.size());
}

// A kept reader of an immutable file holds one descriptor, SQLite's (its own of the file and the
// directory closed once SQLite has the file), and the pool keeps files while the most a reader
// may hold (3, a private copy's) still fits in its descriptors.
TEST(ReaderPool, KeepsFilesByTheDescriptorsTheyHold) {
  TempDir dir;
  const std::vector<std::string> files = rank_files(dir.path(), 7);
  auto open_descriptors = [] {
    return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator());
  };
  const auto before = open_descriptors();
  ReaderPool pool(files, /*most_files=*/SIZE_MAX, /*descriptors=*/5);
  auto pass = [&] {
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::string error;
      ReaderLease lease = pool.lease(i, files[i], error);
      ASSERT_TRUE(lease) << error;
    }
  };
  pass();
  EXPECT_EQ(pool.openings(), 7u);
  EXPECT_EQ(open_descriptors() - before, 3)
      << "3 kept: each admitted while the kept ones' descriptors and 3 fit in 5";
  pass();
  EXPECT_EQ(pool.openings(), 11u) << "the 4 files not kept are opened again";
  EXPECT_EQ(open_descriptors() - before, 3);
}

// A live rank's file (a WAL with frames, its writer still open) is read through a private copy.
// The pool keeps that copy for the analysis: made once, not once per pass; every pass reads the
// rows it held, whatever the writer adds meanwhile; removed with the pool.
TEST(ReaderPool, CopiesALiveFileOncePerAnalysis) {
  TempDir dir, copies;
  const char* tmpdir_before = std::getenv("TMPDIR");
  const std::string restore = tmpdir_before ? tmpdir_before : "";
  ::setenv("TMPDIR", copies.path().c_str(), 1);
  const std::string path = make_rank_file(dir.path()).string();
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &writer), SQLITE_OK);
  exec_or_fail(writer, "PRAGMA journal_mode=WAL");
  auto add_rank = [&](int rank) {
    exec_or_fail(writer,
                 "INSERT INTO ranks (rank, world_size, host, pid, mpi_library, command_line, "
                 "start_ns, end_ns, ended_by, node, local_rank) VALUES (" +
                     std::to_string(rank) +
                     ", 3, 'h0', 1, 'MPICH', './app', 1790000000000000000, "
                     "1790000001000000000, 'finalize', 0, 0)");
  };
  add_rank(1);
  ASSERT_GT(fs::file_size(path + "-wal"), 32u) << "the writer's rows are in its WAL";
  auto copies_on_disk = [&] {
    return std::distance(fs::directory_iterator(copies.path()), fs::directory_iterator());
  };
  auto ranks_read = [](ReaderLease& lease) {
    std::int64_t count = 0;
    std::string error;
    EXPECT_TRUE(lease->each(
        "SELECT count(*) FROM ranks", {}, [&](sqlite3_stmt* s) { count = column_i64(s, 0); },
        error))
        << error;
    return count;
  };
  {
    ReaderPool pool({path}, /*most_files=*/1);
    std::string error;
    for (int pass = 0; pass < 4; ++pass) {
      ReaderLease lease = pool.lease(0, path, error);
      ASSERT_TRUE(lease) << error;
      EXPECT_TRUE(lease->reads_copy());
      EXPECT_EQ(ranks_read(lease), 2) << "pass " << pass << " reads the rows of the first";
      EXPECT_EQ(copies_on_disk(), 1);
      if (pass == 1) add_rank(2);  // written while the analysis runs
    }
    EXPECT_EQ(pool.openings(), 1u);
  }
  EXPECT_EQ(copies_on_disk(), 0) << "the copy goes with the pool";
  {
    ReaderPool next({path}, /*most_files=*/1);
    std::string error;
    ReaderLease lease = next.lease(0, path, error);
    ASSERT_TRUE(lease) << error;
    EXPECT_EQ(ranks_read(lease), 3) << "the next analysis copies the file as it is then";
  }
  sqlite3_close(writer);
  if (tmpdir_before)
    ::setenv("TMPDIR", restore.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
}

TEST(Deadline, StopsAnEndlessStatement) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  harden_connection(db, /*allow_views=*/true);
  int rc;
  {
    const Deadline deadline(0.2);
    rc = sqlite3_exec(db,
                      "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT "
                      "count(*) FROM r",
                      nullptr, nullptr, nullptr);
    EXPECT_TRUE(Deadline::passed());
  }
  EXPECT_EQ(rc, SQLITE_INTERRUPT);
  EXPECT_FALSE(Deadline::passed());  // the scope restored "none"
  sqlite3_close(db);
}

TEST(GuardedOpen, SqliteNeverBlocksOnAFifoNorFollowsALink) {
  sqlite3* probe = nullptr;
  sqlite3_open(":memory:", &probe);
  harden_connection(probe, true);  // installs the guard for every later open
  sqlite3_close(probe);
  TempDir dir;
  const fs::path fifo = dir.path() / "rank-0.db";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  sqlite3* db = nullptr;
  // Blocking here (no writer on the FIFO) would hang until the test's time limit.
  EXPECT_NE(sqlite3_open_v2(fifo.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_close(db);
  std::ofstream(dir.path() / "secret") << "root's";
  // SQLite resolves a link at the database's own name (commtap opens with SQLITE_OPEN_NOFOLLOW
  // against that); the guard covers the names it derives: a journal planted as a link.
  fs::create_symlink(dir.path() / "secret", dir.path() / "store.db");
  db = nullptr;
  EXPECT_NE(sqlite3_open_v2((dir.path() / "store.db").c_str(), &db,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const fs::path real = dir.path() / "real.db";
  db = nullptr;
  ASSERT_EQ(sqlite3_open(real.c_str(), &db), SQLITE_OK);
  exec_or_fail(db, "CREATE TABLE t (x)");
  fs::create_symlink(dir.path() / "secret", dir.path() / "real.db-journal");
  EXPECT_NE(sqlite3_exec(db, "INSERT INTO t VALUES (1)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(read_all(dir.path() / "secret"), "root's");
}

TEST(OutputFile, ReplacesAPlantedLinkAndSetsTheMode) {
  TempDir dir;
  const fs::path victim = dir.path() / "authorized_keys";
  std::ofstream(victim) << "root's";
  const fs::path report = dir.path() / "report.html";
  fs::create_symlink(victim, report);
  const mode_t old_umask = ::umask(022);
  std::string error;
  ASSERT_TRUE(write_file_atomically(report.string(), "<html>", 0600, error)) << error;
  ::umask(old_umask);
  EXPECT_EQ(read_all(victim), "root's");
  EXPECT_FALSE(fs::is_symlink(report));
  EXPECT_EQ(read_all(report), "<html>");
  struct stat info {};
  ASSERT_EQ(::stat(report.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_TRUE(write_file_atomically((dir.path() / "m.prom").string(), "x 1\n", 0644, error));
  ASSERT_EQ(::stat((dir.path() / "m.prom").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
  {
    auto abandoned = OutputFile::create((dir.path() / "never").string(), 0600, error);
    ASSERT_TRUE(abandoned);
    abandoned->write("half", 4);
  }  // not committed: nothing stays
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 3);
  EXPECT_FALSE(write_file_atomically((dir.path() / "missing" / "x").string(), "x", 0600, error));
  EXPECT_NE(error.find("missing"), std::string::npos);
}

TEST(OutputFile, ModeIsTheNarrowestOfTheInputs) {
  TempDir dir;
  const fs::path a = dir.path() / "a", b = dir.path() / "b";
  std::ofstream(a) << "a";
  std::ofstream(b) << "b";
  fs::permissions(a, fs::perms(0640));
  fs::permissions(b, fs::perms(0604));
  EXPECT_EQ(mode_for_outputs_of({a.string(), b.string()}), 0600u);
  EXPECT_EQ(mode_for_outputs_of({a.string()}), 0640u);
  EXPECT_EQ(mode_for_outputs_of({}), 0600u);
  EXPECT_EQ(mode_for_outputs_of({(dir.path() / "gone").string()}), 0600u);
}
