// analyzer/trace/recent_rows: cron mode. With --since S the analysis uses only the last S seconds
// of data, so the large tables (collective instances, heartbeats, aggregates) are read from a
// little before that on, found through their primary keys (rank, then time or sequence number) in
// O(log n) per rank, instead of scanned whole: a run costs what the last S seconds wrote, not the
// job's age. The detectors still filter every row by --since as before, so the findings are those
// of a whole read with the same --since. Those tables' times are checked as their rows are read
// (plausible_time), not by the whole-file scan (TraceReader::content_problem).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analyzer/trace/file_rows.hpp"
#include "analyzer/trace/job_files.hpp"

namespace commtap::analyzer {

inline const std::vector<std::string> kTablesReadRecent = {
    "collectives", "heartbeats", "aggregates", "transfers", "probes", "tcp_links"};
// The tables whose times are checked as they are read in every mode, whole reads too, so that the
// whole-file scan leaves them out: the collective instances, a job's largest table, which an
// analysis reads twice anyway (the scan was a third full read of it, docs/benchmarks.md). Every
// reader of its times checks them: each_collective_row and observe_collective_rows here (and
// each_collective_instance through each_collective_row), and the clocks' bounds and completions
// (trace_rows.hpp, each row's `plausible`).
inline const std::vector<std::string> kTablesCheckedAsRead = {"collectives"};

// In a list of time columns checked as they are read: this column's time may be negative (a
// one-way time between two clocks).
constexpr int kMayBeNegative = 1 << 16;

// The model sets the horizon (set_read_horizon, model/job_model.hpp): job.read_from_wall, and
// job.read_from_local per rank.

// The collectives rows of `columns` (a select list starting with `rank`) where `condition` holds,
// each file rank by rank and communicator by communicator in sequence order (the primary key's
// order, as a scan returns them); in cron mode only those from the horizon on: per (rank,
// communicator) the first sequence number entered at or after it is found by bisection over
// the key (sequence numbers are entered in order). The times of `time_columns` (indices into
// `columns`) are checked as the rows are read (kTablesCheckedAsRead): a row that fails ends the
// read with implausible_table_problem.
bool each_collective_row(const JobFiles& job, const std::string& columns,
                         const std::string& condition, const std::vector<int>& time_columns,
                         const std::function<void(const ResultRow&)>& row, std::string& error);
// What each_collective_row runs on one file (on its reading thread).
FileWork collective_rows_work(const JobFiles& job, const std::string& columns,
                              const std::string& condition, const std::vector<int>& time_columns);
// The same rows observed on the reading threads, one Partial per file, merged in file order
// (observe_files_in_order): `observe(Partial&, const ResultRow&)`, `merge(Partial&&)`.
template <class Partial, class Observe, class Merge>
bool observe_collective_rows(const JobFiles& job, const std::string& columns,
                             const std::string& condition, const std::vector<int>& time_columns,
                             const Observe& observe, const Merge& merge, std::string& error) {
  return observe_files_in_order<Partial>(
      job.files, job.threads, collective_rows_work(job, columns, condition, time_columns), observe,
      merge, error, &job.rows_read, job.readers.get());
}

// Runs `sql` on every file of the job, the files read on job.threads threads (file_rows.hpp):
// `row` is called on this thread, in the order of a serial read.
bool each_row(const JobFiles& job, const char* sql,
              const std::function<void(const ResultRow&)>& row, std::string& error);

// `sql` on every file. In cron mode `sql` must restrict `rank = ?1 AND <wall column> >= ?2` of a
// table keyed (rank, wall time, ...) (heartbeats, aggregates): it runs once per rank of each file
// with the horizon bound; `whole_sql`, without them, otherwise. `time_columns`: result columns
// that are times of `table`, checked as they are read in cron mode.
bool each_recent_row(const JobFiles& job, const std::string& table, const std::string& whole_sql,
                     const std::string& sql, const std::vector<int>& time_columns,
                     const std::function<void(const ResultRow&)>& row, std::string& error);

// `sql` on every file. In cron mode `sql` must restrict `rank = ?1 AND <local time column> >= ?2`
// of a table keyed (rank, its own monotonic time, ...) (probes): it runs once per rank with that
// rank's horizon on its own clock (job.read_from_local), and its rows must come in the order of
// `whole_sql`, which a file of several ranks (a merged job.db) is read with.
bool each_recent_local_row(const JobFiles& job, const std::string& table,
                           const std::string& whole_sql, const std::string& sql,
                           const std::vector<int>& time_columns,
                           const std::function<void(const ResultRow&)>& row, std::string& error);

// A table keyed (rank, series columns..., wall_ns) whose rows are running totals per series
// (tcp_links: a connection's counters): `columns` (starting with rank) of each series' rows in
// the key's order; in cron mode only those from the horizon (job.read_from_wall) on and, per
// series, the one row before (what the first recent row's difference is taken against). The
// series are found by a seek each over the key.
bool each_recent_series_row(const JobFiles& job, const std::string& table,
                            const std::vector<std::string>& series, const std::string& columns,
                            const std::vector<int>& time_columns,
                            const std::function<void(const ResultRow&)>& row, std::string& error);

// The distinct values of a key's leading columns `prefix` (starting with rank) on every file, in
// the key's order: a seek per value, not a scan.
bool each_key_prefix(const JobFiles& job, const std::string& table,
                     const std::vector<std::string>& prefix,
                     const std::function<void(const ResultRow&)>& row, std::string& error);

// The transfers of `direction` ('send', 'recv'): `columns` of the rows in the key's order. In
// cron mode per message series (rank, direction, communicator, peer, tag), numbered by msg in
// the order they were made, from the first whose `time_column` (start_ns of a send, end_ns of a
// receive: the rank's own clock) is at or after the rank's horizon, found by bisection; a file
// whose series are so many and short that the seeks would cost more than its rows is read whole.
bool each_recent_transfer_row(const JobFiles& job, const std::string& direction,
                              const std::string& columns, const std::string& time_column,
                              const std::vector<int>& time_columns,
                              const std::function<void(const ResultRow&)>& row, std::string& error);

}  // namespace commtap::analyzer
