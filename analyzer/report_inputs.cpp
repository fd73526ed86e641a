// What `commtap report` reads from a job's aggregates besides the analysis.
#include "analyzer/report_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace commtap::analyzer {

namespace {

// The slowest call sites over the whole job, from the aggregates.
void read_slowest_sites(const JobDatabase& job, ReportInputs& inputs, std::string& error) {
  auto result = job.query(
      "SELECT a.function, coalesce(demangle(s.symbol), '?') AS caller, "
      "coalesce(s.file || ':' || s.line, '') AS source, a.size_class AS bytes_class, "
      "sum(a.calls) AS calls, round(sum(a.total_ns) / 1e6, 3) AS total_ms, "
      "round(sum(a.total_ns) / 1e3 / sum(a.calls), 1) AS mean_us, "
      "round(max(a.max_ns) / 1e3, 1) AS worst_us FROM aggregates a LEFT JOIN call_sites s "
      "ON s.rank = a.rank AND s.site = a.site AND s.frame = 0 "
      "GROUP BY 1, 2, 3, 4 ORDER BY sum(a.total_ns) DESC LIMIT 15",
      error);
  if (result) inputs.slowest_sites = std::move(*result);
}

// The call sites (function and calling function) with the most MPI time, and their share of
// the ranks' time per window of the job's clock (COMMTAP_INTERVAL, wider in long jobs: at most
// kMostWindows). An aggregates row holds the calls completed since the rank's previous write (a
// heartbeat row at the same time), which is not always an interval (the first covers the time
// since MPI_Init, the last part of an interval): a row goes to the window that holds the middle
// of the time it covers, and a window's share divides by the time its rows cover.
constexpr std::size_t kSitesDrawn = 8;
constexpr double kMostWindows = 300;

void read_site_series(const JobDatabase& job, const JobHealth& health, ReportInputs& inputs,
                      std::string& error) {
  const std::int64_t start_ns = health.evidence.start_ns;
  const double interval_s = std::max(0.01, health.evidence.interval_s);
  const double length_s = static_cast<double>(health.now_ns - start_ns) / 1e9;
  inputs.bucket_s = interval_s * std::max(1.0, std::ceil(length_s / interval_s / kMostWindows));
  const std::string start = std::to_string(start_ns);
  const std::string bucket = std::to_string(std::llround(inputs.bucket_s * 1e9));
  auto result = job.query(
      "WITH w0 AS (SELECT h.rank, h.wall_ns, coalesce(lag(h.wall_ns) OVER (PARTITION BY h.rank "
      "ORDER BY h.wall_ns), r.start_ns) AS previous FROM heartbeats h JOIN ranks r USING (rank)), "
      "writes AS (SELECT rank, wall_ns, wall_ns - previous AS covered, max(0, (previous + "
      "(wall_ns - previous) / 2 - " +
          start + ") / " + bucket +
          ") AS bucket FROM w0) "
          "SELECT NULL, bucket, sum(covered), max(wall_ns) FROM writes GROUP BY 2 UNION ALL "
          "SELECT a.function || ' from ' || coalesce(demangle(s.symbol), '?'), w.bucket, "
          "sum(a.total_ns), 0 FROM aggregates a JOIN writes w ON w.rank = a.rank AND w.wall_ns = "
          "a.wall_ns LEFT JOIN call_sites s ON s.rank = a.rank AND s.site = a.site AND s.frame = 0 "
          "GROUP BY 1, 2",
      error);
  if (!result) return;
  std::map<std::size_t, double> covered;  // bucket -> ns of all ranks' time
  std::map<std::string, std::map<std::size_t, double>> busy;
  std::map<std::string, double> totals;
  std::size_t buckets = 0;
  for (const auto& row : result->rows) {
    if (!row[1] || !row[2] || !row[3]) continue;
    const auto b = static_cast<std::size_t>(std::stoll(*row[1]));
    const double ns = std::stod(*row[2]);
    buckets = std::max(buckets, b + 1);
    if (!row[0]) {
      covered[b] += ns;
      inputs.end_s =
          std::max(inputs.end_s, static_cast<double>(std::stoll(*row[3]) - start_ns) / 1e9);
      continue;
    }
    busy[*row[0]][b] += ns;
    totals[*row[0]] += ns;
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
}

}  // namespace

void read_report_inputs(const JobDatabase& job, const JobHealth& health, ReportInputs& inputs,
                        std::string& error) {
  read_slowest_sites(job, inputs, error);
  read_site_series(job, health, inputs, error);
}

}  // namespace commtap::analyzer
