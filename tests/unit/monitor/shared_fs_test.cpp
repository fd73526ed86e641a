// The snapshot layout for trace directories on shared filesystems: what statfs is taken to mean,
// what the writer publishes, and how readers open published files (immutable, never a -shm).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "analyzer/query/job_database.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "monitor/monitor.hpp"
#include "monitor/shared_fs.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace commtap;
using commtap::testing::TempDir;

namespace {

monitor::RankFacts facts() {
  monitor::RankFacts f;
  f.job_id = "job-7";
  f.host = "h0";
  f.pid = 1234;
  f.start_ns = 1'000'000'000;
  f.ended_by = "finalize";
  return f;
}

monitor::Snapshot window() {
  monitor::Snapshot snapshot;
  snapshot.functions = {{"MPI_Allreduce", "collective", monitor::CallTotals{.calls = 3}}};
  return snapshot;
}

// The two version bytes of the SQLite header: 1 rollback journal, 2 WAL.
std::pair<int, int> journal_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char header[20] = {};
  in.read(header, sizeof header);
  return {header[18], header[19]};
}

std::int64_t heartbeats(const std::string& directory, std::string& error) {
  auto job = analyzer::JobDatabase::open(directory, error);
  if (!job) return -1;
  auto rows = job->query("SELECT count(*) FROM heartbeats", error);
  return rows ? std::stoll(rows->rows.at(0).at(0).value_or("-1")) : -1;
}

}  // namespace

TEST(SharedFs, FilesystemsAreNamedFromStatfs) {
  EXPECT_EQ(monitor::filesystem_of("/proc").name, "local");
  EXPECT_FALSE(monitor::filesystem_of("/proc").shared);
  EXPECT_FALSE(monitor::filesystem_of(fs::temp_directory_path().string()).name.empty());
  const monitor::Filesystem missing = monitor::filesystem_of("/commtap-no-such-directory");
  EXPECT_EQ(missing.name, "unknown");
  EXPECT_FALSE(missing.shared);
}

TEST(SharedFs, SettingValues) {
  monitor::SnapshotLayout layout{};
  ASSERT_TRUE(monitor::parse_snapshot_layout("auto", layout));
  EXPECT_EQ(layout, monitor::SnapshotLayout::automatic);
  for (const char* on : {"on", "1", "yes", "true"}) {
    ASSERT_TRUE(monitor::parse_snapshot_layout(on, layout)) << on;
    EXPECT_EQ(layout, monitor::SnapshotLayout::on) << on;
  }
  for (const char* off : {"off", "0", "no", "false"}) {
    ASSERT_TRUE(monitor::parse_snapshot_layout(off, layout)) << off;
    EXPECT_EQ(layout, monitor::SnapshotLayout::off) << off;
  }
  EXPECT_FALSE(monitor::parse_snapshot_layout("nfs", layout));
  EXPECT_EQ(monitor::local_directory("/scratch/me"), "/scratch/me");
  // A new private directory (mkdtemp) per working copy: no name another user could plant.
  TempDir local;
  const std::string copy = monitor::local_copy_path(local.path().string(), "a/b", 3, 99);
  const fs::path directory = fs::path(copy).parent_path();
  EXPECT_EQ(fs::path(copy).filename(), "rank-3.db");
  EXPECT_EQ(directory.filename().string().rfind("commtap-a_b-rank-3.99.", 0), 0u) << copy;
  EXPECT_EQ(fs::status(directory).permissions(), fs::perms::owner_all) << copy;
}

TEST(SharedFs, ReadersOpenRollbackFilesImmutableAndLiveWalFilesThroughTheirShm) {
  TempDir dir;
  const fs::path finished = dir.path() / "what?#%.db";
  ASSERT_EQ(monitor::write_rank_database(finished.string(), facts(), {}, {window()}), "");
  EXPECT_EQ(journal_bytes(finished), std::make_pair(1, 1));
  const std::string uri = analyzer::reader_uri(finished.string());
  // On a shared filesystem the reader waits for a stale size to catch up (the patient VFS);
  // locally a size short of the header is damage, read at once.
  const bool shared = monitor::filesystem_of(dir.path().string()).shared;
  EXPECT_EQ(uri, "file:" + dir.path().string() + "/what%3F%23%25.db?immutable=1" +
                     (shared ? "&vfs=commtap-patient" : ""));
  std::string error;
  EXPECT_TRUE(analyzer::TraceReader::open(finished.string(), error)) << error;

  // A writer in place (WAL) is read through its -shm: not immutable, or new windows would be
  // missed and a checkpoint could tear what is read.
  const std::string live = (dir.path() / "rank-0.db").string();
  auto writer = monitor::TraceWriter::start(
      live, facts(), {}, 1'000'000'000, [] { return window(); }, error);
  ASSERT_TRUE(writer) << error;
  EXPECT_EQ(journal_bytes(live), std::make_pair(2, 2));
  EXPECT_EQ(analyzer::reader_uri(live), "file:" + live + "?mode=ro");
  EXPECT_EQ(writer->stop(facts()), "");
}

TEST(SharedFs, TemporaryFilesAreNotPartOfTheJob) {
  TempDir dir;
  ASSERT_EQ(monitor::write_rank_database((dir.path() / "rank-0.db").string(), facts(), {}, {}), "");
  std::ofstream(dir.path() / "rank-1.db.tmp") << "half a copy";
  std::vector<std::string> files;
  std::string error;
  ASSERT_TRUE(analyzer::job_files(dir.path().string(), false, files, error)) << error;
  EXPECT_EQ(files, std::vector<std::string>{(dir.path() / "rank-0.db").string()});
}

// The layout end to end on one machine: the published file is there from the start, is always a
// whole rollback-journal database with no -wal or -shm beside it, never loses a window that a
// reader saw, and after stop holds every window while the working copy is gone.
TEST(SharedFs, SnapshotsArePublishedWholeAndTheWorkingCopyRemoved) {
  TempDir shared, local;
  const std::string published = (shared.path() / "rank-0.db").string();
  const std::string working = monitor::local_copy_path(local.path().string(), "job-7", 0, 1234);
  // Left by an earlier attempt that wrote in place: not part of any published file.
  std::ofstream(published + "-wal") << "stale";
  std::ofstream(published + "-shm") << "stale";
  std::atomic<int> collected{0};
  std::string error;
  auto writer = monitor::TraceWriter::start(
      published, facts(), {}, 2'000'000,
      [&] {
        ++collected;
        return window();
      },
      error, working);
  ASSERT_TRUE(writer) << error;
  EXPECT_TRUE(fs::exists(published)) << "published at start";
  EXPECT_TRUE(fs::exists(working));

  // Read while the writer publishes every 2 ms: every read succeeds and the window count never
  // goes back.
  std::int64_t seen = 0;
  int grew = 0;
  for (int read = 0; read < 200 && grew < 5; ++read) {
    const std::int64_t now = heartbeats(shared.path().string(), error);
    ASSERT_GE(now, 0) << "read " << read << ": " << error;
    EXPECT_GE(now, seen) << "read " << read;
    if (now > seen) ++grew;
    seen = std::max(seen, now);
    EXPECT_FALSE(fs::exists(published + "-wal"));
    EXPECT_FALSE(fs::exists(published + "-shm"));
    EXPECT_EQ(journal_bytes(published), std::make_pair(1, 1));
  }
  EXPECT_GE(grew, 2) << "reads saw the windows come";

  EXPECT_EQ(writer->stop(facts()), "");
  {
    // Readers rely on the header's page count being valid (change counter at 24 equal to the
    // version-valid-for number at 92) to tell a whole file from one a stale cache cuts short.
    std::ifstream in(published, std::ios::binary);
    unsigned char header[100] = {};
    in.read(reinterpret_cast<char*>(header), sizeof header);
    auto be32 = [&](int at) {
      return (std::uint32_t{header[at]} << 24) | (std::uint32_t{header[at + 1]} << 16) |
             (std::uint32_t{header[at + 2]} << 8) | std::uint32_t{header[at + 3]};
    };
    EXPECT_EQ(be32(24), be32(92));
    const std::uint32_t page_size = (std::uint32_t{header[16]} << 8) | header[17];
    EXPECT_EQ(std::uint64_t{be32(28)} * page_size, fs::file_size(published));
  }
  EXPECT_FALSE(fs::exists(working));
  EXPECT_FALSE(fs::exists(working + "-wal"));
  EXPECT_FALSE(fs::exists(published + ".tmp"));
  EXPECT_EQ(fs::status(published).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(heartbeats(shared.path().string(), error), collected.load()) << error;
  auto job = analyzer::JobDatabase::open(shared.path().string(), error);
  ASSERT_TRUE(job) << error;
  auto meta = job->query(
      "SELECT (SELECT value FROM meta WHERE key = 'layout'), "
      "(SELECT value > 0 FROM meta WHERE key = 'publish_ns'), "
      "(SELECT ended_by FROM ranks)",
      error);
  ASSERT_TRUE(meta) << error;
  EXPECT_EQ(meta->rows.at(0).at(0).value_or("NULL"), "snapshot");
  EXPECT_EQ(meta->rows.at(0).at(1).value_or("NULL"), "1");
  EXPECT_EQ(meta->rows.at(0).at(2).value_or("NULL"), "finalize");
}

// A trace directory that cannot be written (a vanished mount): one message, the writer goes on
// locally, and at the end the working copy is kept and named instead of being removed.
TEST(SharedFs, UnpublishableSnapshotsKeepTheWorkingCopy) {
  TempDir shared, local;
  const fs::path gone = shared.path() / "gone";
  const std::string working = (local.path() / "rank-0.work.db").string();
  std::string error;
  // The shared directory is there when the job starts (the writer holds it open) and is removed
  // while the job runs: no snapshot can be published into it.
  fs::create_directory(gone);
  ::testing::internal::CaptureStderr();
  auto writer = monitor::TraceWriter::start((gone / "rank-0.db").string(), facts(), {}, 1'000'000,
                                            [] { return window(); }, error, working);
  ASSERT_TRUE(writer) << error;
  fs::remove_all(gone);
  EXPECT_EQ(writer->stop(facts()), "");
  const std::string said = ::testing::internal::GetCapturedStderr();
  // One message, whichever publication failed first (a snapshot, or the last window at stop).
  const std::size_t first = said.find(" publish its ");
  EXPECT_NE(first, std::string::npos) << said;
  EXPECT_EQ(said.find(" publish its ", first + 1), std::string::npos) << "said once: " << said;
  EXPECT_NE(said.find("its trace stays in " + working), std::string::npos) << said;
  EXPECT_TRUE(fs::exists(working));
  auto job = analyzer::JobDatabase::open(working, error);
  ASSERT_TRUE(job) << error;
}

TEST(SharedFs, UnwritableWorkingCopyIsAnErrorAndLeavesNothing) {
  TempDir shared;
  std::string error;
  auto writer = monitor::TraceWriter::start((shared.path() / "rank-0.db").string(), facts(), {},
                                            1'000'000, [] { return window(); }, error,
                                            "/proc/commtap-nowhere/rank-0.db");
  EXPECT_EQ(writer, nullptr);
  EXPECT_NE(error, "");
  EXPECT_FALSE(fs::exists(shared.path() / "rank-0.db"));
}
