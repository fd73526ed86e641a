// Degradation of a call site over time (docs/analyzer.md).
#include "analyzer/detect/detectors.hpp"
#include "analyzer/trace/trace_rows.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/trace/symbols.hpp"

namespace commtap::analyzer {

namespace {

using CallMix = std::map<std::pair<std::string, std::int64_t>, double>;  // (function, class)

// How different two mixes of calls are: the total variation distance of their shares (0: the
// same mix, 1: nothing in common).
double mix_distance(const CallMix& a, const CallMix& b) {
  double total_a = 0, total_b = 0;
  for (const auto& [key, calls] : a) total_a += calls;
  for (const auto& [key, calls] : b) total_b += calls;
  if (total_a <= 0 || total_b <= 0) return 1;
  double distance = 0;
  for (const auto& [key, calls] : a) {
    auto other = b.find(key);
    distance += std::abs(calls / total_a - (other == b.end() ? 0 : other->second / total_b));
  }
  for (const auto& [key, calls] : b)
    if (!a.count(key)) distance += calls / total_b;
  return distance / 2;
}

// A job whose mix of calls changed did not degrade: it moved to another phase (osu_bw's size
// ramp makes its 4-byte acknowledgement wait for ever larger messages). Above this distance
// between the baseline's mix and the recent one, a slower call site is not reported.
constexpr double kMaxMixChange = 0.25;

}  // namespace

bool detect_degradation(const Job& job, const HealthOptions& options,
                        std::vector<Finding>& findings, std::string& error) {
  using Key = std::tuple<std::string, std::string, std::int64_t>;  // function, symbol, class
  std::map<Key, std::map<std::int64_t, std::pair<double, double>>> series;  // window -> calls, ns
  std::map<std::int64_t, CallMix> mix;  // window -> the job's calls in it
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const std::int64_t since_wall = since_wall_ns(job, options);
  if (!each_aggregate(
          job,
          [&](const AggregateRow& a) {
            const std::int64_t wall = a.wall_ns;
            if (wall < since_wall || wall > job.until_wall) return;
            auto& cell = series[{a.function, a.symbol, a.size_class}][wall / window_ns];
            cell.first += static_cast<double>(a.calls);
            cell.second += static_cast<double>(a.total_ns);
            mix[wall / window_ns][{a.function, a.size_class}] += static_cast<double>(a.calls);
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
    CallMix base_mix, recent_mix;
    std::size_t index = 0;
    for (const auto& [w, cell] : windows) {
      CallMix& into = index < base_count ? base_mix : recent_mix;
      if (index < base_count || index >= means.size() - static_cast<std::size_t>(recent))
        for (const auto& [call, count] : mix[w]) into[call] += count;
      ++index;
    }
    const double mix_change = mix_distance(base_mix, recent_mix);
    if (mix_change > kMaxMixChange) continue;
    const auto& [function, symbol, bytes] = key;
    const double now_mean = median_of(std::vector<double>(means.end() - recent, means.end()));
    Finding f;
    f.kind = finding_kind::degradation;
    f.subject = function + " from " + demangle(symbol) + " (" + std::to_string(bytes) + " B class)";
    f.severity = Severity::warning;
    f.first_seen_ns =
        static_cast<std::uint64_t>((windows.rbegin()->first - recent + 1) * window_ns);
    f.last_seen_ns = job.now_wall;
    f.summary = f.subject + ": " + ms_text(now_mean) + " per call in the last " +
                std::to_string(recent) + " windows vs " + ms_text(base) +
                " in the job's first windows (" +
                std::to_string(static_cast<int>(std::lround(now_mean / std::max(1.0, base)))) +
                "x, all ranks together)";
    f.evidence.rule = DegradationEvidence{.function = function,
                                          .symbol = symbol,
                                          .size_class = bytes,
                                          .baseline_ns = base,
                                          .recent_ns = now_mean,
                                          .windows = windows.size(),
                                          .calls = calls,
                                          .mix_change = mix_change};
    findings.push_back(f);
  }
  return true;
}

}  // namespace commtap::analyzer
