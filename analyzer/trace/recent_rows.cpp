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
    if (!plausible_time(s, c & ~kMayBeNegative, (c & kMayBeNegative) != 0)) {
      error = reader.path() + ": " + implausible_table_problem(table);
      return false;
    }
  sink.add(s);
  return true;
}

// "a, b, c"
std::string joined(const std::vector<std::string>& columns) {
  std::string text;
  for (const std::string& c : columns) text += (text.empty() ? "" : ", ") + c;
  return text;
}

using KeyValues = std::vector<SqlParameter>;

// Each distinct value of the key's leading columns `prefix` of `table`, in the key's order, a
// seek or a few past the last value each (`sink`, where given, also gets each value's row). SQLite
// seeks a row-value range ((a, b) > (?, ?)) by its first column only and scans the rest, so the
// next value is sought column by column from the last: the same leading values and a greater
// value of the next column, each an index seek.
template <class Each>
bool each_prefix(TraceReader& reader, const std::string& table,
                 const std::vector<std::string>& prefix, Each each, std::string& error,
                 RowSink* sink = nullptr) {
  const std::string columns = joined(prefix);
  const std::string select = "SELECT " + columns + " FROM " + table;
  const std::string order = " ORDER BY " + columns + " LIMIT 1";
  // next_sql[k]: the first row whose columns before k equal the last value's and whose column k
  // is greater.
  std::vector<std::string> next_sql;
  for (std::size_t k = 0; k < prefix.size(); ++k) {
    std::string where;
    for (std::size_t i = 0; i <= k; ++i)
      where +=
          (i ? " AND " : " WHERE ") + prefix[i] + (i < k ? " = ?" : " > ?") + std::to_string(i + 1);
    next_sql.push_back(select + where + order);
  }
  KeyValues after;
  for (bool first = true;; first = false) {
    KeyValues found;
    auto take = [&](sqlite3_stmt* s) {
      for (std::size_t i = 0; i < prefix.size(); ++i)
        found.emplace_back(key_value(s, static_cast<int>(i)));
      if (sink) sink->add(s);
    };
    if (first) {
      if (!reader.each(select + order, {}, take, error)) return false;
    } else {
      for (std::size_t k = prefix.size(); k-- > 0 && found.empty();)
        if (!reader.each(next_sql[k], KeyValues(after.begin(), after.begin() + k + 1), take, error))
          return false;
    }
    if (found.empty()) return true;
    if (!each(found)) return false;
    after = std::move(found);
  }
}

// The rank a key's values start with.
std::int64_t rank_of(const KeyValues& key) {
  return sqlite3_value_int64(std::get<KeyValue>(key.front()).get());
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
    return [statement, time_columns](TraceReader& reader, RowSink& sink, std::string& e) {
      bool ok = true;
      return reader.each(
                 statement, {},
                 [&](sqlite3_stmt* s) {
                   ok = ok && add_checked(s, time_columns, sink, reader, "collectives", e);
                 },
                 e) &&
             ok;
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

bool each_recent_local_row(const JobFiles& job, const std::string& table,
                           const std::string& whole_sql, const std::string& sql,
                           const std::vector<int>& time_columns,
                           const std::function<void(const ResultRow&)>& row, std::string& error) {
  if (job.read_from_wall == INT64_MIN) return each_row(job, whole_sql.c_str(), row, error);
  return read_files_in_order(
      job.files, job.threads,
      [&](TraceReader& reader, RowSink& sink, std::string& e) {
        std::vector<std::int64_t> ranks;
        if (!each_key(
                reader, table, "rank", std::nullopt,
                [&](std::int64_t rank) {
                  ranks.push_back(rank);
                  return true;
                },
                e))
          return false;
        bool ok = true;
        auto add = [&](sqlite3_stmt* s) {
          ok = ok && add_checked(s, time_columns, sink, reader, table, e);
        };
        // Several ranks' rows (a merged job.db) interleave in time: read as a whole read is.
        if (ranks.size() > 1) return reader.each(whole_sql, {}, add, e) && ok;
        for (std::int64_t rank : ranks) {
          auto from = job.read_from_local.find(static_cast<int>(rank));
          if (from == job.read_from_local.end()) continue;  // no facts: its rows are never used
          if (!reader.each(sql, {rank, from->second}, add, e) || !ok) return false;
        }
        return true;
      },
      row, error, &job.rows_read, job.readers.get());
}

bool each_recent_series_row(const JobFiles& job, const std::string& table,
                            const std::vector<std::string>& series, const std::string& columns,
                            const std::vector<int>& time_columns,
                            const std::function<void(const ResultRow&)>& row, std::string& error) {
  const std::string key = joined(series);
  if (job.read_from_wall == INT64_MIN) {
    const std::string sql =
        "SELECT " + columns + " FROM " + table + " ORDER BY " + key + ", wall_ns";
    return each_row(job, sql.c_str(), row, error);
  }
  std::string same;  // the series' columns equal to the key's values ?1 ...
  for (std::size_t i = 0; i < series.size(); ++i)
    same += (i ? " AND " : "") + series[i] + " = ?" + std::to_string(i + 1);
  const std::string horizon = "?" + std::to_string(series.size() + 1);
  const std::string before_sql = "SELECT " + columns + " FROM " + table + " WHERE " + same +
                                 " AND wall_ns < " + horizon + " ORDER BY wall_ns DESC LIMIT 1";
  const std::string recent_sql = "SELECT " + columns + " FROM " + table + " WHERE " + same +
                                 " AND wall_ns >= " + horizon + " ORDER BY wall_ns";
  return read_files_in_order(
      job.files, job.threads,
      [&](TraceReader& reader, RowSink& sink, std::string& e) {
        bool ok = true;
        auto add = [&](sqlite3_stmt* s) {
          ok = ok && add_checked(s, time_columns, sink, reader, table, e);
        };
        return each_prefix(
            reader, table, series,
            [&](KeyValues values) {
              if (!job.read_from_local.count(static_cast<int>(rank_of(values))))
                return true;  // no facts: its rows are never used
              values.emplace_back(job.read_from_wall);
              return reader.each(before_sql, values, add, e) && ok &&
                     reader.each(recent_sql, values, add, e) && ok;
            },
            e);
      },
      row, error, &job.rows_read, job.readers.get());
}

bool each_key_prefix(const JobFiles& job, const std::string& table,
                     const std::vector<std::string>& prefix,
                     const std::function<void(const ResultRow&)>& row, std::string& error) {
  return read_files_in_order(
      job.files, job.threads,
      [&](TraceReader& reader, RowSink& sink, std::string& e) {
        return each_prefix(
            reader, table, prefix, [](const KeyValues&) { return true; }, e, &sink);
      },
      row, error, &job.rows_read, job.readers.get());
}

namespace {

// A transfer series of one file: its key values and its first and last message numbers.
struct TransferSeries {
  KeyValues key;
  std::int64_t first = 0, last = 0;
};

// Bisection costs about this many seeks a series; a file whose rows are fewer than that many per
// series (many tags, a few messages each) is cheaper read whole.
constexpr std::int64_t kSeeksPerSeries = 48;

}  // namespace

bool each_recent_transfer_row(const JobFiles& job, const std::string& direction,
                              const std::string& columns, const std::string& time_column,
                              const std::vector<int>& time_columns,
                              const std::function<void(const ResultRow&)>& row,
                              std::string& error) {
  // The direction is one of the two constants of the callers, never input.
  const std::string whole_sql =
      "SELECT " + columns + " FROM transfers WHERE direction = '" + direction + "'";
  if (job.read_from_wall == INT64_MIN) return each_row(job, whole_sql.c_str(), row, error);
  const std::vector<std::string> series = {"rank", "direction", "comm_id", "peer", "tag"};
  const std::string same =
      "rank = ?1 AND direction = ?2 AND comm_id = ?3 AND peer = ?4 AND tag = ?5";
  const std::string first_sql = "SELECT msg FROM transfers WHERE " + same + " ORDER BY msg LIMIT 1";
  const std::string last_sql =
      "SELECT msg FROM transfers WHERE " + same + " ORDER BY msg DESC LIMIT 1";
  const std::string time_sql = "SELECT " + time_column + " FROM transfers WHERE " + same +
                               " AND msg >= ?6 ORDER BY msg LIMIT 1";
  const std::string rows_sql =
      "SELECT " + columns + " FROM transfers WHERE " + same + " AND msg >= ?6";
  return read_files_in_order(
      job.files, job.threads,
      [&](TraceReader& reader, RowSink& sink, std::string& e) {
        bool ok = true;
        auto add = [&](sqlite3_stmt* s) {
          ok = ok && add_checked(s, time_columns, sink, reader, "transfers", e);
        };
        std::vector<TransferSeries> all;
        std::int64_t rows = 0;
        if (!each_prefix(
                reader, "transfers", series,
                [&](const KeyValues& key) {
                  const auto* text = sqlite3_value_text(std::get<KeyValue>(key[1]).get());
                  if (!text || direction != reinterpret_cast<const char*>(text)) return true;
                  TransferSeries& s = all.emplace_back(TransferSeries{key});
                  auto first = [&](sqlite3_stmt* st) { s.first = column_i64(st, 0); };
                  auto last = [&](sqlite3_stmt* st) { s.last = column_i64(st, 0); };
                  if (!reader.each(first_sql, key, first, e) ||
                      !reader.each(last_sql, key, last, e))
                    return false;
                  // Message numbers run 1, 2, ... per series: their span is its rows.
                  if (s.last >= s.first && s.last - s.first < INT64_MAX / 2)
                    rows += s.last - s.first + 1;
                  return true;
                },
                e))
          return false;
        if (rows < kSeeksPerSeries * static_cast<std::int64_t>(all.size()))
          return reader.each(whole_sql, {}, add, e) && ok;
        for (TransferSeries& s : all) {
          auto from = job.read_from_local.find(static_cast<int>(rank_of(s.key)));
          if (from == job.read_from_local.end()) continue;  // no facts: never used
          // The first message at or after the horizon on the rank's clock (past the last
          // where none is).
          std::int64_t low = s.first, high = s.last == INT64_MAX ? s.last : s.last + 1;
          KeyValues at = s.key;
          at.emplace_back(std::int64_t{0});
          while (low < high) {
            const std::int64_t middle = low + (high - low) / 2;
            at.back() = middle;
            bool after = true;
            if (!reader.each(
                    time_sql, at,
                    [&](sqlite3_stmt* st) { after = column_i64(st, 0) >= from->second; }, e))
              return false;
            (after ? high : low) = after ? middle : middle + 1;
          }
          at.back() = low;
          if (!reader.each(rows_sql, at, add, e) || !ok) return false;
        }
        return true;
      },
      row, error, &job.rows_read, job.readers.get());
}

}  // namespace commtap::analyzer
