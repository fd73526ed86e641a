// One rank's trace database as the writer fills it (internal to monitor/): its statements
// (rank_database.cpp), the merge of old windows (window_merge.cpp) and the snapshot copy a
// shared filesystem's readers open.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "monitor/clock.hpp"
#include "monitor/shared_fs.hpp"
#include "monitor/sqlite_db.hpp"
#include "monitor/trace_budget.hpp"
#include "monitor/trace_schema.hpp"
#include "monitor/trace_writer.hpp"

namespace commtap::monitor {

// The statements of one rank's database. Every method returns false once an error happened
// (kept in error()), so a failing disk stops the writing without further noise.
class RankDatabase {
 public:
  // `tighten`: the directory is this job's own (see PrivateDirectory).
  RankDatabase(const std::string& path, const RankFacts& facts, bool tighten = false);
  const std::string& error() const { return db_.error(); }
  sqlite3* handle() const { return db_.handle(); }
  // Checkpoints the WAL into the file, leaves WAL mode and closes it: a finished rank leaves one
  // plain file, which later readers open without creating -wal/-shm files beside it.
  void close();
  void leave_wal() { db_.exec("PRAGMA journal_mode=DELETE"); }
  // A meta row written with every window from now on (the next window's transaction).
  void set_meta(const std::string& key, const std::string& value) { meta_[key] = value; }
  // The fatal MPI error written with an end of "mpi_error".
  void set_error(const RankFacts::Error& error) { facts_.error = error; }

  bool write_start(const std::vector<std::pair<std::string, std::string>>& settings);

  // One window: totals, communicators, a heartbeat, the end time so far. `ended_by` is
  // "running" until the last window.
  bool write_window(const Snapshot& snapshot, const std::string& ended_by);

 private:
  // A stale file (same job id and rank, an earlier attempt) is replaced, with its WAL, in a
  // directory only this user can write (PrivateDirectory); the new file is created, never
  // adopted, and made readable by the user only (traces name hosts, command lines and call
  // patterns); SQLite gives the -wal and -shm files the database file's permissions. Returns the
  // name SQLite opens, or empty with problem_ set.
  std::string prepare(const std::string& name, mode_t mode);

  void write_rank_row(std::uint64_t end_ns, const std::string& ended_by);

  void write_heartbeat(const Snapshot& snapshot, std::uint64_t wall, const std::string& ended_by);

  // The trace budget's second means (trace_budget.hpp): windows older than kFullResolutionNs
  // are merged into kMergedWindowNs windows aligned to the wall clock, once each such window is
  // wholly that old. A merged window's aggregates sum the calls and times of its windows (and
  // keep their extremes) in one row per key at the wall time of its last heartbeat, the only
  // heartbeat it keeps: every analyzer rule that divides an aggregates row's time by the time
  // since the rank's previous heartbeat gets the merged window's span. The rows that carry
  // counters since start or a latest state (comm_progress and tcp_links per key, clock_offsets
  // by their monotonic time) keep their last (clock_offsets: most precise) row per merged
  // window, unchanged. Freed pages are reused by later windows, so the file stops growing with
  // the per-window rows.
  void downsample_old_windows(std::uint64_t wall);

  // Runs `sql` with ?1 the rank and ?2... `values`, calling `row` for each result row.
  template <typename Row = std::nullptr_t>
  void run(const char* sql, std::initializer_list<std::uint64_t> values, Row row) {
    if (!db_.ok()) return;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_.handle(), sql, -1, &stmt, nullptr) != SQLITE_OK) {
      db_.fail(sqlite3_errmsg(db_.handle()));
      return;
    }
    sqlite3_bind_int(stmt, 1, facts_.rank);
    int index = 2;
    for (std::uint64_t value : values) bind_u64(stmt, index++, value);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
      if constexpr (!std::is_same_v<Row, std::nullptr_t>) row(stmt);
    if (rc != SQLITE_DONE) db_.fail(sqlite3_errmsg(db_.handle()));
    sqlite3_finalize(stmt);
  }

  // Merges the windows whose heartbeats fall in (from, until].
  void merge_window(std::uint64_t from, std::uint64_t until);

  PrivateDirectory directory_;  // open as long as the database: SQLite names files through it
  std::string problem_;
  Db db_;
  RankFacts facts_;
  TraceBudgetSettings budget_;
  InstanceThinning thinning_{TraceBudgetSettings{}};
  unsigned sample_level_ = 0;
  std::uint64_t previous_wall_ = 0;          // the last window's wall time (0: none yet)
  std::uint64_t first_wall_ = 0;             // the first window's
  std::uint64_t merged_until_ = 0;           // windows up to this wall time are merged
  std::uint64_t clocks_merged_until_ = 0;    // clock_offsets before this monotonic time too
  std::vector<std::string> gpus_;            // the GPUs seen so far (they only grow)
  std::map<std::string, std::string> meta_;  // set_meta's rows
  std::unordered_map<std::int64_t, CommProgress> progress_written_;
  // Fixed at start, so that one call's entry time reads the same in every window.
  std::uint64_t wall_minus_monotonic_ = wall_ns() - now_ns();
};

// Writes a consistent copy of `source` over `target` (rank_database.cpp). Returns an empty
// string or what went wrong.
std::string publish_snapshot(sqlite3* source, const PrivateDirectory& directory,
                             const std::string& target, mode_t mode);

}  // namespace commtap::monitor
