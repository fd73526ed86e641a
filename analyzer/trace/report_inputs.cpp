// What `commtap report` reads from a job's aggregates besides the analysis.
#include "analyzer/trace/report_inputs.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "analyzer/trace/reader_pool.hpp"
#include "analyzer/trace/symbols.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"

namespace commtap::analyzer {

namespace {

// The call sites drawn, and the most windows they are drawn in (COMMTAP_INTERVAL is widened to
// stay below).
constexpr std::size_t kSitesDrawn = 8;
constexpr double kMostWindows = 300;
// Rows past the analysis' "now" (`--at`, or a file's far-future times: any up to 4e18 ns pass
// the plausibility check) would add windows without bound, each a value per drawn site. Far more
// than any real chart needs (a day at 0.1 s is 864,000), and a bounded page.
constexpr std::size_t kMostChartWindows = 1'000'000;

// A text column as the file holds it: the sums are keyed by it, and only what is shown is
// clean_text (two spellings that clean alike stay two call sites, as in one SQL query).
std::string raw_text(sqlite3_stmt* s, int i) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return text ? std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(s, i))) : "";
}

// coalesce(demangle(symbol), '?') as SQL would give it (demangle_sql reads up to a NUL).
std::string caller_of(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) == SQLITE_NULL) return "?";
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return demangle(text ? text : "");
}

// `into` + `value`, as SQL's sum() adds integers: an overflow is an error, not a wrapped total.
bool add_exact(std::int64_t& into, std::int64_t value, std::string& error) {
  if (!__builtin_add_overflow(into, value, &into)) return true;
  error = "integer overflow";
  return false;
}

class Reader {
 public:
  explicit Reader(const ReportSpan& span) {
    // The windows, as wide as the job's interval, widened to keep at most kMostWindows.
    start_ns_ = span.start_ns;
    const double interval_s = std::max(0.01, span.interval_s);
    const double length_s = static_cast<double>(span.now_ns - start_ns_) / 1e9;
    bucket_s_ = interval_s * std::max(1.0, std::ceil(length_s / interval_s / kMostWindows));
    bucket_ns_ = std::llround(bucket_s_ * 1e9);
  }
  ~Reader() {
    sqlite3_finalize(add_sums_);
    sqlite3_close(sums_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  bool open(std::string& error) {
    // One row per (function, caller, source, size class): the keys of the page's table.
    if (sqlite3_open_v2(":memory:", &sums_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
      error = "cannot create an in-memory database";
      return false;
    }
    harden_connection(sums_, /*allow_views=*/false);  // the job's deadline stops its queries too
    const char* schema =
        "CREATE TABLE sums (function, caller, source, size_class, calls, total_ns, max_ns, "
        "UNIQUE (function, caller, source, size_class))";
    const char* add =
        "INSERT INTO sums VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (function, caller, "
        "source, size_class) DO UPDATE SET "
        "calls = calls + excluded.calls, total_ns = total_ns + excluded.total_ns, "
        "max_ns = max(max_ns, excluded.max_ns)";
    if (sqlite3_exec(sums_, schema, nullptr, nullptr, nullptr) != SQLITE_OK ||
        sqlite3_prepare_v2(sums_, add, -1, &add_sums_, nullptr) != SQLITE_OK) {
      error = sqlite3_errmsg(sums_);
      return false;
    }
    return true;
  }

  bool add(TraceReader& file, std::string& error) {
    return add_slowest_sites(file, error) && add_site_series(file, error);
  }

  bool finish(ReportInputs& inputs, std::string& error) {
    return finish_slowest_sites(inputs, error) && finish_site_series(inputs);
  }

 private:
  // The slowest call sites: the file's calls, time and worst time per (rank, site, function,
  // size class), summed before the site's symbol and source are looked up (once per site rather
  // than per row: half the time), then added to the sums by the table's key. Integers add
  // exactly, so the sums are the job's whichever files and rows they came from.
  bool add_slowest_sites(TraceReader& file, std::string& error) {
    bool ok = true;
    if (!file.each(
            "SELECT a.function, s.symbol, coalesce(s.file || ':' || s.line, ''), a.size_class, "
            "a.calls, a.total_ns, a.max_ns FROM (SELECT rank, site, function, size_class, "
            "sum(calls) AS calls, sum(total_ns) AS total_ns, max(max_ns) AS max_ns FROM "
            "aggregates GROUP BY rank, site, function, size_class) a LEFT JOIN call_sites s ON "
            "s.rank = a.rank AND s.site = a.site AND s.frame = 0",
            {},
            [&](sqlite3_stmt* s) {
              if (!ok) return;
              const std::string caller = caller_of(s, 1);
              sqlite3_reset(add_sums_);
              sqlite3_bind_value(add_sums_, 1, sqlite3_column_value(s, 0));
              sqlite3_bind_text(add_sums_, 2, caller.data(), static_cast<int>(caller.size()),
                                SQLITE_TRANSIENT);
              for (int i = 2; i < 7; ++i)
                sqlite3_bind_value(add_sums_, i + 1, sqlite3_column_value(s, i));
              if (sqlite3_step(add_sums_) != SQLITE_DONE) {
                error = sqlite3_errmsg(sums_);
                ok = false;
              }
            },
            error))
      return false;
    return ok;
  }

  // The call sites over time. An aggregates row holds the calls completed since the rank's
  // previous write (a heartbeat row at the same time), which is not always an interval (the
  // first covers the time since MPI_Init, the last part of an interval): a row goes to the
  // window that holds the middle of the time it covers, and a window's share divides by the time
  // its rows cover. The file sums per window, and per (rank, site, function) and window; a
  // rank's rows are all in its own file, so its previous write is found there.
  bool add_site_series(TraceReader& file, std::string& error) {
    bool ok = true;
    if (!file.each(
            "WITH w0 AS (SELECT h.rank, h.wall_ns, coalesce(lag(h.wall_ns) OVER (PARTITION BY "
            "h.rank ORDER BY h.wall_ns), r.start_ns) AS previous FROM heartbeats h JOIN ranks r "
            "USING (rank)), "
            "writes AS (SELECT rank, wall_ns, wall_ns - previous AS covered, max(0, (previous + "
            "(wall_ns - previous) / 2 - ?1) / ?2) AS bucket FROM w0) "
            "SELECT 0, NULL, NULL, bucket, sum(covered), max(wall_ns) FROM writes GROUP BY 4 "
            "UNION ALL "
            "SELECT 1, a.function, s.symbol, a.bucket, a.total_ns, NULL FROM (SELECT a.rank, "
            "a.site, a.function, w.bucket, sum(a.total_ns) AS total_ns FROM aggregates a JOIN "
            "writes w ON w.rank = a.rank AND w.wall_ns = a.wall_ns GROUP BY 1, 2, 3, 4) a "
            "LEFT JOIN call_sites s ON s.rank = a.rank AND s.site = a.site AND s.frame = 0",
            {start_ns_, bucket_ns_},
            [&](sqlite3_stmt* s) {
              // A window of SQL NULL is no window (an ill-formed row): as when one query read
              // the job, it is left out; a NULL sum adds nothing.
              if (!ok || sqlite3_column_type(s, 3) == SQLITE_NULL) return;
              const std::int64_t bucket = column_i64(s, 3);
              if (column_i64(s, 0) == 0) {
                Window& w = windows_[bucket];
                if (sqlite3_column_type(s, 4) != SQLITE_NULL) {
                  if (!w.covered_ns) w.covered_ns = 0;
                  ok = add_exact(*w.covered_ns, column_i64(s, 4), error);
                }
                if (sqlite3_column_type(s, 5) != SQLITE_NULL)
                  w.newest_ns = std::max(w.newest_ns.value_or(INT64_MIN), column_i64(s, 5));
                return;
              }
              if (sqlite3_column_type(s, 4) == SQLITE_NULL) return;
              const std::string label = raw_text(s, 1) + " from " + caller_of(s, 2);
              ok = add_exact(busy_[label][bucket], column_i64(s, 4), error);
            },
            error))
      return false;
    return ok;
  }

  // The 15 slowest, formatted by SQLite (round() and its text of a real) from the job's sums.
  bool finish_slowest_sites(ReportInputs& inputs, std::string& error) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(
            sums_,
            "SELECT function, caller, source, size_class AS bytes_class, sum(calls) AS calls, "
            "round(sum(total_ns) / 1e6, 3) AS total_ms, round(sum(total_ns) / 1e3 / sum(calls), "
            "1) AS mean_us, round(max(max_ns) / 1e3, 1) AS worst_us FROM sums "
            "GROUP BY 1, 2, 3, 4 ORDER BY sum(total_ns) DESC LIMIT 15",
            -1, &stmt, nullptr) != SQLITE_OK) {
      error = sqlite3_errmsg(sums_);
      return false;
    }
    QueryResult& result = inputs.slowest_sites;
    const int columns = sqlite3_column_count(stmt);
    for (int i = 0; i < columns; ++i) result.columns.emplace_back(sqlite3_column_name(stmt, i));
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      auto& row = result.rows.emplace_back();
      for (int i = 0; i < columns; ++i) {
        if (sqlite3_column_type(stmt, i) == SQLITE_NULL)
          row.emplace_back(std::nullopt);
        else
          row.emplace_back(column_text(stmt, i));
      }
    }
    if (rc != SQLITE_DONE) error = sqlite3_errmsg(sums_);
    sqlite3_finalize(stmt);
    return rc == SQLITE_DONE;
  }

  // The kSitesDrawn sites with the most MPI time, each with its share per window. The sums are
  // added up in the order one query over the job returned them (by label, then window), so the
  // doubles, and the order of sites of equal time, come out the same.
  bool finish_site_series(ReportInputs& inputs) {
    inputs.bucket_s = bucket_s_;
    std::map<std::size_t, double> covered;  // bucket -> ns of all ranks' time
    std::map<std::string, std::map<std::size_t, double>> busy;
    std::map<std::string, double> totals;
    std::size_t buckets = 0;
    for (const auto& [bucket, w] : windows_) {
      if (!w.covered_ns || !w.newest_ns) continue;
      const auto b = static_cast<std::size_t>(bucket);
      if (b >= kMostChartWindows) continue;
      buckets = std::max(buckets, b + 1);
      covered[b] += static_cast<double>(*w.covered_ns);
      inputs.end_s = std::max(inputs.end_s, static_cast<double>(*w.newest_ns - start_ns_) / 1e9);
    }
    for (const auto& [raw_label, per_bucket] : busy_) {
      const std::string label = clean_text(raw_label);
      for (const auto& [bucket, ns] : per_bucket) {
        const auto b = static_cast<std::size_t>(bucket);
        if (b >= kMostChartWindows) continue;
        buckets = std::max(buckets, b + 1);
        busy[label][b] += static_cast<double>(ns);
        totals[label] += static_cast<double>(ns);
      }
    }
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [label, total] : totals) order.emplace_back(-total, label);
    std::sort(order.begin(), order.end());
    for (std::size_t i = 0; i < order.size() && i < kSitesDrawn; ++i) {
      CallSiteSeries series{order[i].second, {}};
      for (std::size_t b = 0; b < buckets; ++b) {
        const double time = covered.count(b) ? covered[b] : 0.0;
        series.share.push_back(time > 0 ? busy[order[i].second][b] / time : -1.0);
      }
      inputs.sites.push_back(std::move(series));
    }
    return true;
  }

  std::int64_t start_ns_ = 0, bucket_ns_ = 0;
  double bucket_s_ = 1.0;
  sqlite3* sums_ = nullptr;
  sqlite3_stmt* add_sums_ = nullptr;
  // Per window: the ranks' time its rows cover and the newest write in it (nullopt: SQL NULL).
  struct Window {
    std::optional<std::int64_t> covered_ns, newest_ns;
  };
  std::map<std::int64_t, Window> windows_;
  // Per label ("function from caller" as the files spell it) and window: the MPI time.
  std::map<std::string, std::map<std::int64_t, std::int64_t>> busy_;
};

}  // namespace

void read_report_inputs(const std::vector<std::string>& files, const ReportSpan& span,
                        ReportInputs& inputs, ReaderPool* readers) {
  inputs = ReportInputs{};
  inputs.files = files;
  std::string error;
  try {
    Reader reader(span);
    bool ok = reader.open(error);
    for (std::size_t i = 0; ok && i < files.size(); ++i) {
      ReaderLease file = lease_reader(readers, i, files[i], error);
      ok = file && reader.add(*file, error);
    }
    if (ok && reader.finish(inputs, error)) return;
  } catch (const std::exception& e) {  // the charts go; the findings stay
    error = e.what();
  }
  inputs = ReportInputs{};
  inputs.files = files;
  inputs.error = error.empty() ? "cannot be read" : error;
}

}  // namespace commtap::analyzer
