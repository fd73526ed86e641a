// The merge of a rank's old windows into coarser ones, beside the trace budget's thinning of
// its instances (trace_budget.hpp): what keeps a long job's file from growing with its age.
#include "monitor/rank_database.hpp"

namespace commtap::monitor {

void RankDatabase::downsample_old_windows(std::uint64_t wall) {
  if (wall < kFullResolutionNs) return;
  const std::uint64_t cutoff = wall - kFullResolutionNs;
  // The merged windows begin at the first whole minute that holds a window of this rank.
  if (merged_until_ == 0) merged_until_ = (first_wall_ - 1) / kMergedWindowNs * kMergedWindowNs;
  if (merged_until_ + kMergedWindowNs > cutoff) return;  // once a minute, not every window
  while (merged_until_ + kMergedWindowNs <= cutoff) {
    const std::uint64_t from = merged_until_;
    merged_until_ += kMergedWindowNs;
    merge_window(from, merged_until_);
  }
  // clock_offsets are on the monotonic clock: the same age, from the newest estimate.
  std::uint64_t newest = 0;
  run("SELECT max(at_ns) FROM clock_offsets WHERE rank = ?1", {}, [&](sqlite3_stmt* stmt) {
    newest = static_cast<std::uint64_t>(sqlite3_column_int64(stmt, 0));
  });
  if (newest < kFullResolutionNs) return;
  const std::uint64_t clock_cutoff =
      (newest - kFullResolutionNs) / kMergedWindowNs * kMergedWindowNs;
  if (clock_cutoff <= clocks_merged_until_) return;
  run("DELETE FROM clock_offsets WHERE rank = ?1 AND at_ns >= ?2 AND at_ns < ?3 AND EXISTS "
      "(SELECT 1 FROM clock_offsets q WHERE q.rank = ?1 AND q.at_ns >= clock_offsets.at_ns / ?4 "
      "* ?4 AND q.at_ns < clock_offsets.at_ns / ?4 * ?4 + ?4 AND (q.error_ns < "
      "clock_offsets.error_ns OR (q.error_ns = clock_offsets.error_ns AND q.at_ns > "
      "clock_offsets.at_ns)))",
      {clocks_merged_until_, clock_cutoff, kMergedWindowNs}, nullptr);
  clocks_merged_until_ = clock_cutoff;
}

void RankDatabase::merge_window(std::uint64_t from, std::uint64_t until) {
  std::uint64_t last = 0;
  run("SELECT max(wall_ns) FROM heartbeats WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns <= ?3",
      {from, until}, [&](sqlite3_stmt* stmt) {
        last = static_cast<std::uint64_t>(sqlite3_column_int64(stmt, 0));
      });
  if (last == 0) return;
  // The SELECT is read whole before rows are replaced (SQLite materializes a SELECT from the
  // table it inserts into); the sums include the last window's own rows, which they replace.
  static constexpr const char* kStatements[] = {
      "INSERT OR REPLACE INTO aggregates(rank, wall_ns, comm_id, function, site, size_class, "
      "calls, total_ns, min_ns, max_ns) SELECT rank, ?3, comm_id, function, site, size_class, "
      "sum(calls), sum(total_ns), min(min_ns), max(max_ns) FROM aggregates WHERE rank = ?1 AND "
      "wall_ns > ?2 AND wall_ns <= ?3 GROUP BY comm_id, function, site, size_class",
      "DELETE FROM aggregates WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns < ?3",
      "UPDATE heartbeats SET sample_level = (SELECT max(sample_level) FROM heartbeats WHERE "
      "rank = ?1 AND wall_ns > ?2 AND wall_ns <= ?3) WHERE rank = ?1 AND wall_ns = ?3",
      "DELETE FROM heartbeats WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns < ?3",
      "DELETE FROM comm_progress WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns < (SELECT "
      "max(q.wall_ns) FROM comm_progress q WHERE q.rank = ?1 AND q.comm_id = "
      "comm_progress.comm_id AND q.wall_ns > ?2 AND q.wall_ns <= ?3)",
      "DELETE FROM tcp_links WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns < (SELECT "
      "max(q.wall_ns) FROM tcp_links q WHERE q.rank = ?1 AND q.local_address = "
      "tcp_links.local_address AND q.peer_address = tcp_links.peer_address AND q.wall_ns > ?2 "
      "AND q.wall_ns <= ?3)",
  };
  for (const char* sql : kStatements) run(sql, {from, last}, nullptr);
}

}  // namespace commtap::monitor
