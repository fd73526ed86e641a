// analyzer/trace/recent_rows: cron mode's reads (recent_rows.hpp).
#include "analyzer/trace/recent_rows.hpp"

#include <algorithm>
#include <optional>

#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"

namespace commtap::analyzer {

bool each_row(const JobFiles& job, const char* sql,
              const std::function<void(const ResultRow&)>& row, std::string& error) {
  const std::string statement = sql;
  return read_files_in_order(
      job.files, job.threads,
      [&](TraceReader& reader, RowSink& sink, std::string& e) {
        return reader.each(
            statement, {}, [&](sqlite3_stmt* s) { sink.add(s); }, e);
      },
      row, error, &job.rows_read, job.readers.get());
}

namespace {

// Each value of the key column `column` of `table` in order (of the rank `rank` where given): a
// skip over the primary key, a seek per value.
template <class Each>
bool each_key(TraceReader& reader, const std::string& table, const std::string& column,
              std::optional<std::int64_t> rank, Each each, std::string& error) {
  const std::string sql = "SELECT " + column + " FROM " + table + " WHERE " +
                          (rank ? "rank = ?2 AND " : "") + column + " > ?1 ORDER BY " + column +
                          " LIMIT 1";
  std::int64_t after = INT64_MIN;
  for (;;) {
    bool more = false;
    auto next = [&](sqlite3_stmt* s) {
      after = column_i64(s, 0);
      more = true;
    };
    if (!(rank ? reader.each(sql, {after, *rank}, next, error)
               : reader.each(sql, {after}, next, error)))
      return false;
    if (!more) return true;
    if (!each(after)) return false;
    if (after == INT64_MAX) return true;
  }
}

// Adds the row to `sink` if its time columns are plausible; else sets `error`.
bool add_checked(sqlite3_stmt* s, const std::vector<int>& time_columns, RowSink& sink,
                 const TraceReader& reader, const std::string& table, std::string& error) {
  for (int c : time_columns)
    if (!plausible_time(s, c)) {
      error = reader.path() + ": " + implausible_table_problem(table);
      return false;
    }
  sink.add(s);
  return true;
}

}  // namespace

bool each_collective_row(const JobFiles& job, const std::string& columns,
                         const std::string& condition, const std::vector<int>& time_columns,
                         const std::function<void(const ResultRow&)>& row, std::string& error) {
  return read_files_in_order(job.files, job.threads,
                             collective_rows_work(job, columns, condition, time_columns), row,
                             error, &job.rows_read, job.readers.get());
}

FileWork collective_rows_work(const JobFiles& job, const std::string& columns,
                              const std::string& condition, const std::vector<int>& time_columns) {
  if (job.read_from_wall == INT64_MIN) {
    const std::string statement = "SELECT " + columns + " FROM collectives WHERE " + condition;
    return [statement](TraceReader& reader, RowSink& sink, std::string& e) {
      return reader.each(
          statement, {}, [&](sqlite3_stmt* s) { sink.add(s); }, e);
    };
  }
  const std::string first_sql =
      "SELECT seq FROM collectives WHERE rank = ?1 AND comm_id = ?2 ORDER BY seq LIMIT 1";
  const std::string last_sql =
      "SELECT seq FROM collectives WHERE rank = ?1 AND comm_id = ?2 ORDER BY seq DESC LIMIT 1";
  const std::string enter_sql =
      "SELECT enter_ns FROM collectives WHERE rank = ?1 AND comm_id = ?2 AND seq >= ?3 ORDER BY "
      "seq LIMIT 1";
  const std::string rows_sql = "SELECT " + columns +
                               " FROM collectives WHERE rank = ?1 AND comm_id = ?2 AND seq >= ?3 "
                               "AND (" +
                               condition + ")";
  return [&job, first_sql, last_sql, enter_sql, rows_sql, time_columns](
             TraceReader& reader, RowSink& sink, std::string& e) {
    return each_key(
        reader, "collectives", "rank", std::nullopt,
        [&](std::int64_t rank) {
          auto r = job.read_from_local.find(static_cast<int>(rank));
          if (r == job.read_from_local.end()) return true;  // no facts: its rows are never used
          const std::int64_t from = r->second;
          return each_key(
              reader, "collectives", "comm_id", rank,
              [&](std::int64_t comm) {
                std::int64_t low = 0, high = 0;
                if (!reader.each(
                        first_sql, {rank, comm}, [&](sqlite3_stmt* s) { low = column_i64(s, 0); },
                        e) ||
                    !reader.each(
                        last_sql, {rank, comm}, [&](sqlite3_stmt* s) { high = column_i64(s, 0); },
                        e))
                  return false;
                // The first sequence number entered at or after `from`: past the last
                // (nothing) where none is.
                high = high == INT64_MAX ? high : high + 1;
                while (low < high) {
                  const std::int64_t middle = low + (high - low) / 2;
                  bool after = true;
                  if (!reader.each(
                          enter_sql, {rank, comm, middle},
                          [&](sqlite3_stmt* s) { after = column_i64(s, 0) >= from; }, e))
                    return false;
                  (after ? high : low) = after ? middle : middle + 1;
                }
                bool ok = true;
                return reader.each(
                           rows_sql, {rank, comm, low},
                           [&](sqlite3_stmt* s) {
                             ok =
                                 ok && add_checked(s, time_columns, sink, reader, "collectives", e);
                           },
                           e) &&
                       ok;
              },
              e);
        },
        e);
  };
}

bool each_recent_row(const JobFiles& job, const std::string& table, const std::string& whole_sql,
                     const std::string& sql, const std::vector<int>& time_columns,
                     const std::function<void(const ResultRow&)>& row, std::string& error) {
  if (job.read_from_wall == INT64_MIN) return each_row(job, whole_sql.c_str(), row, error);
  return read_files_in_order(
      job.files, job.threads,
      [&](TraceReader& reader, RowSink& sink, std::string& e) {
        return each_key(
            reader, table, "rank", std::nullopt,
            [&](std::int64_t rank) {
              bool ok = true;
              return reader.each(
                         sql, {rank, job.read_from_wall},
                         [&](sqlite3_stmt* s) {
                           ok = ok && add_checked(s, time_columns, sink, reader, table, e);
                         },
                         e) &&
                     ok;
            },
            e);
      },
      row, error, &job.rows_read, job.readers.get());
}

}  // namespace commtap::analyzer
