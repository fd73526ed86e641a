// The analyzer -> collectives contract (avoid_list/): the one-line form rank 0 broadcasts, and
// the store's table as the analyzer writes it and a later job reads it, on real SQLite files.
#include "avoid_list/avoid_list.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "tests/unit/temp_dir.hpp"

namespace {

using commtap::avoid_list::AvoidList;
using commtap::avoid_list::decode;
using commtap::avoid_list::encode;
using commtap::avoid_list::kFormatVersion;
using commtap::avoid_list::Link;
using commtap::avoid_list::read_recent;
using commtap::avoid_list::replace_job_entries;
using commtap::avoid_list::StoredEntry;

// An open SQLite file, closed at the end of the scope.
class Store {
 public:
  explicit Store(const std::string& path) { sqlite3_open(path.c_str(), &db_); }
  ~Store() { sqlite3_close(db_); }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  sqlite3* db() const { return db_; }
  void exec(const std::string& sql) {
    char* message = nullptr;
    ASSERT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message), SQLITE_OK)
        << (message != nullptr ? message : "") << " in " << sql;
  }

 private:
  sqlite3* db_ = nullptr;
};

StoredEntry entry(const std::string& job, const std::string& kind, const std::string& subject,
                  std::uint64_t last_seen_ns, AvoidList avoid) {
  return {job, kind, subject, last_seen_ns, std::move(avoid)};
}

TEST(AvoidList, EncodeDecodeRoundTrip) {
  const AvoidList empty;
  EXPECT_EQ(encode(empty), "");
  EXPECT_TRUE(decode("").empty());
  const AvoidList list{{"host-a", "host-b"},
                       {{"host-a", "host-c", 2e-3, 0}, {"host-c", "host-a", 1.5e-6, 4.25e-10}}};
  const std::string text = encode(list);
  EXPECT_EQ(text, "host-a,host-b,host-a>host-c>0.002>0,host-c>host-a>1.5e-06>4.25e-10");
  EXPECT_EQ(decode(text), list);
  // Figures travel with nine significant digits.
  const AvoidList precise{{}, {{"x", "y", 1.23456789e-3, 9.87654321e-9}}};
  EXPECT_EQ(decode(encode(precise)), precise);
}

TEST(AvoidList, DecodeSkipsMalformedEntries) {
  // A link needs a source, a destination and two figures; empty entries are no hosts.
  const AvoidList list = decode(",host-a,,>b>1>2,a>>1>2,a>b,a>b>1,a>b>1>2,");
  EXPECT_EQ(list.hosts, std::vector<std::string>{"host-a"});
  EXPECT_EQ(list.links, (std::vector<Link>{{"a", "b", 1, 2}}));
}

TEST(AvoidList, ReplaceThenReadRecent) {
  commtap::testing::TempDir dir;
  const std::string path = (dir.path() / "store.db").string();
  {
    Store store(path);
    std::string error;
    ASSERT_TRUE(replace_job_entries(
        store.db(), "job-1",
        {entry("job-1", "slow_host", "host n1", 1000, {{"n1"}, {}}),
         entry("job-1", "slow_link", "link n2 -> n3", 2000, {{}, {{"n2", "n3", 3e-3, 1e-9}}}),
         entry("job-1", "slow_host", "host n0", 50, {{"n0"}, {}})},
        error))
        << error;
  }
  AvoidList list;
  std::string error;
  ASSERT_TRUE(read_recent(path, 0, list, error)) << error;
  // Ordered by finding kind, then subject.
  EXPECT_EQ(list.hosts, (std::vector<std::string>{"n0", "n1"}));
  EXPECT_EQ(list.links, (std::vector<Link>{{"n2", "n3", 3e-3, 1e-9}}));
  // Only rows seen after `since_ns`.
  ASSERT_TRUE(read_recent(path, 999, list, error)) << error;
  EXPECT_EQ(list.hosts, std::vector<std::string>{"n1"});
  EXPECT_EQ(list.links.size(), 1u);
  ASSERT_TRUE(read_recent(path, 2000, list, error)) << error;
  EXPECT_TRUE(list.empty());
}

TEST(AvoidList, AJobsEntriesAreReplacedNotDuplicated) {
  commtap::testing::TempDir dir;
  const std::string path = (dir.path() / "store.db").string();
  {
    Store store(path);
    std::string error;
    ASSERT_TRUE(replace_job_entries(
        store.db(), "job-1", {entry("job-1", "slow_host", "host n1", 10, {{"n1"}, {}})}, error));
    ASSERT_TRUE(replace_job_entries(
        store.db(), "job-2", {entry("job-2", "slow_host", "host n2", 10, {{"n2"}, {}})}, error));
    // job-1 analyzed again: its rows are the new ones alone; job-2's stay.
    ASSERT_TRUE(replace_job_entries(
        store.db(), "job-1",
        {entry("job-1", "slow_host", "host n1", 20, {{"n1"}, {}}),
         entry("job-1", "slow_link", "link n1 -> n3", 20, {{}, {{"n1", "n3", 0, 0}}})},
        error))
        << error;
    ASSERT_TRUE(replace_job_entries(store.db(), "job-1", {}, error)) << error;
    ASSERT_TRUE(replace_job_entries(
        store.db(), "job-1", {entry("job-1", "slow_host", "host n1", 30, {{"n1"}, {}})}, error));
  }
  AvoidList list;
  std::string error;
  ASSERT_TRUE(read_recent(path, 0, list, error)) << error;
  EXPECT_EQ(list.hosts, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(list.links.empty());
}

TEST(AvoidList, RowsOfANewerFormatAreIgnored) {
  commtap::testing::TempDir dir;
  const std::string path = (dir.path() / "store.db").string();
  {
    Store store(path);
    std::string error;
    ASSERT_TRUE(replace_job_entries(
        store.db(), "job-1", {entry("job-1", "slow_host", "host n1", 10, {{"n1"}, {}})}, error));
    store.exec("INSERT INTO avoid_list VALUES (" + std::to_string(kFormatVersion + 1) +
               ", 'job-9', 'slow_host', 'host future', 'future', NULL, 0, 0, 10)");
  }
  AvoidList list;
  std::string error;
  ASSERT_TRUE(read_recent(path, 0, list, error)) << error;
  EXPECT_EQ(list.hosts, std::vector<std::string>{"n1"});
}

TEST(AvoidList, AStoreWithoutTheTableGivesAnEmptyList) {
  commtap::testing::TempDir dir;
  const std::string path = (dir.path() / "store.db").string();
  {
    Store store(path);
    store.exec("CREATE TABLE findings (kind TEXT)");
  }
  AvoidList list{{"stale"}, {}};
  std::string error;
  ASSERT_TRUE(read_recent(path, 0, list, error)) << error;
  EXPECT_TRUE(list.empty());
  // A file that does not exist cannot be read: an error, not an empty list.
  EXPECT_FALSE(read_recent((dir.path() / "none.db").string(), 0, list, error));
  EXPECT_FALSE(error.empty());
  EXPECT_TRUE(list.empty());
}

}  // namespace
