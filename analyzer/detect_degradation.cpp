// Degradation of a call site over time (docs/analyzer.md).
#include "analyzer/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "analyzer/statistics.hpp"
#include "analyzer/trace_files.hpp"

namespace commtap::analyzer {

using json = nlohmann::json;

bool detect_degradation(const Job& job, const HealthOptions& options, JobHealth& health,
                        std::string& error) {
  using Key = std::tuple<std::string, std::string, std::int64_t>;  // function, symbol, class
  std::map<Key, std::map<std::int64_t, std::pair<double, double>>> series;  // window -> calls, ns
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const std::int64_t since_wall = since_wall_ns(job, options);
  if (!each_row(
          job,
          "SELECT a.wall_ns, a.function, coalesce(s.symbol, '?'), a.size_class, a.calls, "
          "a.total_ns FROM aggregates a LEFT JOIN call_sites s ON s.rank = a.rank AND "
          "s.site = a.site AND s.frame = 0",
          [&](sqlite3_stmt* s) {
            const std::int64_t wall = column_i64(s, 0);
            if (wall < since_wall || wall > job.until_wall) return;
            auto& cell =
                series[{column_text(s, 1), column_text(s, 2), column_i64(s, 3)}][wall / window_ns];
            cell.first += static_cast<double>(column_i64(s, 4));
            cell.second += static_cast<double>(column_i64(s, 5));
          },
          error))
    return false;
  const int recent = std::max(1, options.degradation_windows);
  for (const auto& [key, windows] : series) {
    if (static_cast<int>(windows.size()) < recent + 3) continue;
    std::vector<double> means;
    double calls = 0;
    for (const auto& [w, cell] : windows) {
      means.push_back(cell.first > 0 ? cell.second / cell.first : 0);
      calls += cell.first;
    }
    // Baseline: the first half of the job's windows (before the recent ones).
    const std::size_t base_count =
        std::min(means.size() - static_cast<std::size_t>(recent), (means.size() + 1) / 2);
    const double base = median_of(
        std::vector<double>(means.begin(), means.begin() + static_cast<long>(base_count)));
    bool degraded = true;
    double worst = 0;
    for (std::size_t i = means.size() - static_cast<std::size_t>(recent); i < means.size(); ++i) {
      degraded = degraded && means[i] >= options.degradation_factor * base &&
                 means[i] - base >= options.min_degradation_us * 1e3;
      worst = std::max(worst, means[i]);
    }
    if (!degraded) continue;
    const auto& [function, symbol, bytes] = key;
    const double now_mean = median_of(std::vector<double>(means.end() - recent, means.end()));
    Finding f;
    f.kind = finding_kind::degradation;
    f.subject = function + " from " + symbol + " (" + std::to_string(bytes) + " B class)";
    f.severity = Severity::warning;
    f.first_seen_ns =
        static_cast<std::uint64_t>((windows.rbegin()->first - recent + 1) * window_ns);
    f.last_seen_ns = job.now_wall;
    f.summary = f.subject + ": " + ms_text(now_mean) + " per call in the last " +
                std::to_string(recent) + " windows vs " + ms_text(base) +
                " in the job's first windows (" +
                std::to_string(static_cast<int>(std::lround(now_mean / std::max(1.0, base)))) +
                "x, all ranks together)";
    f.evidence = {{"function", function}, {"symbol", symbol},      {"size_class", bytes},
                  {"baseline_ns", base},  {"recent_ns", now_mean}, {"windows", windows.size()},
                  {"calls", calls}};
    health.findings.push_back(f);
  }
  return true;
}

}  // namespace commtap::analyzer
