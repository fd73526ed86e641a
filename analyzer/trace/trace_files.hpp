// analyzer/trace/trace_files: which database files make up a job, and reading one of them. The one
// place that lists a job directory (rank files in rank order, or its merged job.db) and checks
// a file's schema version, for `commtap query`/`merge` and the health analysis alike.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace commtap::analyzer {

// The files of the job at `path`: a database file itself, or a directory's rank-<N>.db files in
// rank order (rank-2.db before rank-10.db); a directory's merged job.db instead when
// `prefer_merged` and it exists. False with `error` naming the path if there are none. A
// directory's entries pass check_input_file (untrusted_input.hpp): symbolic links, FIFOs and
// other non-regular files are left out, each with why in `skipped` (where given), and a file
// reached under several names (hard links) is read once.
bool job_files(const std::string& path, bool prefer_merged, std::vector<std::string>& files,
               std::string& error, std::vector<std::string>* skipped = nullptr);

// Empty if `version` (a file's PRAGMA user_version) is a schema this commtap reads (the current
// one or an older one it can still read), else why not.
std::string schema_version_problem(int version);

// The columns of `table` in the database `schema` ("main", or an attached one's name) of `db`, in
// order; empty if it has no such table.
std::vector<std::string> table_columns(sqlite3* db, const std::string& schema,
                                       const std::string& table);

// The tables of the current schema and their columns, in order.
const std::vector<std::pair<std::string, std::vector<std::string>>>& current_tables();

// The SQLite URI a reader opens `path` with. A file in rollback-journal mode (a finished rank's
// file, a merged job.db, or a snapshot published on a shared filesystem) is opened immutable=1:
// no locks and no change detection, which network filesystems' lock managers cannot spoil. That
// is safe because commtap never changes such a file in place: it replaces it by a rename, and a
// reader that has the old one open keeps reading the old one. A file in WAL mode (a live rank
// writing in place on a local filesystem) is opened mode=ro, through the writer's -shm.
std::string reader_uri(const std::string& path);

// What a reader opens for `path`: reader_uri(path), or, where a rank was killed inside a
// rollback-journal transaction (at MPI_Finalize the writer leaves WAL mode for a rollback
// journal) and left a hot journal beside its file, a private copy. Only a writer may roll a hot
// journal back: read-only, SQLite refuses the file ("attempt to write a readonly database"), and
// immutable=1 would read the half-written pages. So where `path`-journal exists and is not empty,
// the file and its journals are copied into a temporary directory, where the copy (opened
// read-write) is rolled back on first read: readers see the last committed state and the job's
// own files stay as they are. The copy goes with this object. It is made only where the journal
// starts as a rollback journal does, from regular files (no links followed), and where the
// files' allocated blocks (not their possibly sparse size) fit in half the free space there.
//
// (Since the third trust round) the file is opened once, by this class, through its directory's
// descriptor without following a link, and SQLite reads that descriptor (immutable, also a WAL
// file whose -wal is empty) or a private copy (a hot journal, or a -wal with frames): no name
// beside the user's file is ever opened, created or chowned by SQLite, as root or not.
class ReaderFile {
 public:
  explicit ReaderFile(const std::string& path);
  ~ReaderFile();
  ReaderFile(const ReaderFile&) = delete;
  ReaderFile& operator=(const ReaderFile&) = delete;
  const std::string& uri() const { return uri_; }
  // sqlite3_open_v2's flags for uri().
  int open_flags() const;
  // Why the file cannot be read, when it needed a copy and none could be made (then uri() is
  // empty); else empty.
  const std::string& problem() const { return problem_; }
  // Whether SQLite reads a private copy (a hot journal, or a -wal with frames).
  bool copied() const { return !directory_.empty(); }
  // A private copy's bytes (the file and its side file), and the free bytes left where it was
  // made, measured after copying; both 0 without a copy.
  std::uint64_t copy_bytes() const { return copy_bytes_; }
  std::uint64_t free_after_copy() const { return free_after_copy_; }
  // Closes the file's and its directory's descriptors, once SQLite has opened the file through
  // /proc/self/fd/N (its own opening of the same file): nothing reads them after that, and uri()
  // is then empty unless it names a private copy.
  void close_descriptors();

 private:
  std::string directory_, uri_, problem_;
  int dir_fd_ = -1, file_fd_ = -1;
  std::uint64_t copy_bytes_ = 0, free_after_copy_ = 0;
};

// One database file, opened read-only (a live job's writers are never blocked) on a hardened
// connection (untrusted_input.hpp: the file's views and triggers are off).
// A value as a file holds it (sqlite3_value_dup: its type and bytes kept), bound as it was read.
using KeyValue = std::shared_ptr<sqlite3_value>;
KeyValue key_value(sqlite3_stmt* s, int column);
using SqlParameter = std::variant<std::int64_t, KeyValue>;

class TraceReader {
 public:
  static std::unique_ptr<TraceReader> open(const std::string& path, std::string& error);
  // Empty if the file holds what a commtap writer writes (hostile_schema_problem and
  // implausible_values_problem), else why not. A full scan of its times: the analysis does it
  // once per file, not at every open.
  std::string content_problem(const std::vector<std::string>& read_checked = {}) const;
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const std::string& path() const { return path_; }
  // Whether it reads a private copy of the file (ReaderFile::copied).
  bool reads_copy() const { return file_ && file_->copied(); }
  // The private copy this reader reads (ReaderFile), or null.
  const ReaderFile* copy() const { return reads_copy() ? file_.get() : nullptr; }
  // The descriptors it holds at most while kept: SQLite's of the file, and of a copy's -wal and
  // -shm (its own of the file and directory are closed once the file is open).
  std::size_t descriptors() const { return reads_copy() ? 3 : 1; }
  // Runs `sql` with integer parameters, calling `row` for each result row.
  bool each(const std::string& sql, std::initializer_list<std::int64_t> binds,
            const std::function<void(sqlite3_stmt*)>& row, std::string& error);
  // The same with parameters that are integers or values read from the file (a key column's
  // text, kept with its type: KeyValue), to seek past a key made of text columns.
  bool each(const std::string& sql, const std::vector<SqlParameter>& binds,
            const std::function<void(sqlite3_stmt*)>& row, std::string& error);
  // Frees the pages this connection caches (sqlite3_db_release_memory) and the statements it
  // keeps prepared: a reader kept between passes (reader_pool.hpp) keeps its parsed schema, not
  // the pages it read, nor statements that each pass has its own of (a kept file's statements
  // were most of its memory: about 150 KiB a file, docs/benchmarks.md).
  void release_memory();

 private:
  TraceReader() = default;
  // Prepares `sql` or takes its statement prepared before and not in use now: cron mode's seeks
  // run a few statements thousands of times per file.
  sqlite3_stmt* statement(const std::string& sql, std::string& error);
  void put_back(const std::string& sql, sqlite3_stmt* stmt);
  bool run(sqlite3_stmt* stmt, const std::function<void(sqlite3_stmt*)>& row, std::string& error);
  // run(), then the statement put back however `row` leaves it (an exception a callback throws
  // included): a statement left in use keeps the connection from closing.
  bool run_and_put_back(const std::string& sql, sqlite3_stmt* stmt,
                        const std::function<void(sqlite3_stmt*)>& row, std::string& error);

  sqlite3* db_ = nullptr;
  std::string path_;
  std::map<std::string, sqlite3_stmt*> idle_statements_;
  std::unique_ptr<ReaderFile> file_;  // kept open with the database (a copy lives as long)
};

inline std::int64_t column_i64(sqlite3_stmt* s, int i) {
  return sqlite3_column_int64(s, i);
}
// A text column as every output may show it: clean_text (valid UTF-8, no control characters).
std::string column_text(sqlite3_stmt* s, int i);

}  // namespace commtap::analyzer
