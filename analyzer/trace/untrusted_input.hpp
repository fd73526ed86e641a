// analyzer/trace/untrusted_input: trace files are written by the jobs' owners, who can still change
// them while root's cron analysis reads them. Everything the analyzer takes from a job directory
// passes through here: which directory entries are read at all, how SQLite opens them, how long
// a job may take, which values are plausible, and what text may reach an output.
// docs/analyzer.md ("Running it as root from cron") says what is trusted and what is not.
#pragma once

#include <sqlite3.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace commtap::analyzer {

// ---- Text -----------------------------------------------------------------------------------
// `text` as it may appear in any output (terminal, cron log, JSON, HTML, Prometheus, the store):
// each invalid UTF-8 sequence becomes U+FFFD, and each control character (C0, DEL, C1) its
// escape \xNN, so that no trace string can forge a line, move the cursor or break a format.
// With `keep_newlines`, '\n' stays (for formats that escape it themselves: Prometheus).
std::string clean_text(std::string_view text, bool keep_newlines = false);

// ---- Which directory entries are read ---------------------------------------------------------
// Symbolic links inside job directories are not followed unless the user allows it
// (`--follow-symlinks`); when allowed and running as root, only a link whose target has the
// link's owner is followed, so a user cannot make root read another user's file.
void set_follow_symlinks(bool follow);
bool follow_symlinks();

// What the analyzer reads for the directory entry `path` (found by listing a job directory or a
// directory of jobs): empty `why_not` and `read_as` set (the path itself, or a symlink's checked
// target); else why the entry is left out. Only regular files (or, with `directory`, only
// directories) are read: FIFOs, sockets and devices never are (a FIFO would block its reader
// forever). `device` and `inode` identify the file, so that one file reached under several names
// (hard links) is read once.
struct InputFile {
  std::string read_as, why_not;
  dev_t device = 0;
  ino_t inode = 0;
};
InputFile check_input_file(const std::string& path, bool directory = false);

// Bytes the job's files occupy on disk (allocated blocks, not their possibly sparse size).
std::uint64_t allocated_bytes(const std::string& path);

// ---- How SQLite reads them ----------------------------------------------------------------------
// Hardens a connection that reads untrusted files: defensive mode, untrusted schemas (no
// functions with side effects in views or indexes), triggers off, views of the file's own schema
// off where `allow_views` is false (commtap's readers query tables only; their own TEMP views
// still work), limits on lengths and expression depth, and a progress handler that stops any
// statement once the calling thread's Deadline has passed. Also makes every file SQLite opens in
// this process refuse symbolic links and non-regular files, without blocking (see the .cpp).
void harden_connection(sqlite3* db, bool allow_views);
// The part of harden_connection that guards every open of the process (before a first open).
void guard_sqlite_opens();

// Empty if the schema `schema` of `db` ("main", or an attached file's name) is what commtap
// writes, else why not: a view or trigger where commtap writes tables (a view can hide an endless
// query), a virtual table.
std::string hostile_schema_problem(sqlite3* db, const std::string& schema);

// Empty if every commtap table of `schema` that the file has carries the current schema's primary
// key (the same columns in order, and its index where commtap's table has one), and the file holds
// no planner statistics (sqlite_stat1..4, which commtap never writes), else why not. Without its
// key every lookup the analysis makes (by rank, communicator and sequence number) scans the table:
// a small file could hold a cron run for minutes. Keys have not changed since the oldest schema
// version commtap reads (4).
std::string missing_keys_problem(sqlite3* db, const std::string& schema);

// Empty if every time column (`*_ns`) of commtap's tables in `schema` holds numbers (or NULL)
// within 0..4e18 (offsets and one-way times within +-4e18), else which table does not. Bounded
// times keep every sum and difference of two inside 64 bits, so no window or offset arithmetic
// can overflow; text or a blob in a time column is refused by the same test.
// `read_checked`: tables left out, whose rows the caller checks as it reads them
// (plausible_time), so that a cron run that reads only their recent rows does not scan them whole.
std::string implausible_values_problem(sqlite3* db, const std::string& schema,
                                       const std::vector<std::string>& read_checked = {});
// Whether column `i` of the statement's row holds a time implausible_values_problem accepts.
bool plausible_time(sqlite3_stmt* stmt, int i, bool may_be_negative = false);
// What implausible_values_problem says of `table`.
std::string implausible_table_problem(const std::string& table);

// A per-thread time limit on reading one job: every hardened connection's statements fail with
// SQLITE_INTERRUPT once it has passed. Scoped; nested deadlines keep the earlier one.
class Deadline {
 public:
  explicit Deadline(double seconds);  // <= 0: none
  // The calling thread's deadline, to give a thread that reads for it the same one.
  struct At {
    std::int64_t steady_ns;
  };
  static At current();
  explicit Deadline(At at);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;
  static bool passed();

 private:
  std::int64_t saved_ns_;
};

// The default time limit for reading a job whose files take `bytes` on disk: 30 s and 2 s per
// MiB (this machine reads about a MiB of trace per second in the slowest analysis measured).
double default_job_seconds(std::uint64_t bytes);
// `configured` where it is > 0, else default_job_seconds of the job's `files` (or of the files
// of the job at `path`, listed by job_files).
double job_time_limit(const std::vector<std::string>& files, double configured);
double job_time_limit(const std::string& path, double configured);

}  // namespace commtap::analyzer
