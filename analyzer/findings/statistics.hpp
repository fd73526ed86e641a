// analyzer/findings/statistics: the small statistics and number formatting the detectors share.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace commtap::analyzer {

// Lateness histogram: < 1 us in bucket 0, then 4 buckets per power of two of microseconds.
struct LogHistogram {
  static constexpr int kBuckets = 72;
  std::array<std::uint32_t, kBuckets> counts{};
  std::uint32_t total = 0;
  static int bucket_of(std::int64_t ns) {
    if (ns < 1000) return 0;
    const int b = 1 + static_cast<int>(std::log2(static_cast<double>(ns) / 1000.0) * 4.0);
    return std::min(b, kBuckets - 1);
  }
  static double value_of(int bucket) {  // the bucket's geometric middle, in ns
    if (bucket == 0) return 500.0;
    return 1000.0 * std::exp2((bucket - 0.5) / 4.0);
  }
  void add(std::int64_t ns) {
    ++counts[static_cast<std::size_t>(bucket_of(ns))];
    ++total;
  }
  void merge(const LogHistogram& other) {
    for (int b = 0; b < kBuckets; ++b)
      counts[static_cast<std::size_t>(b)] += other.counts[static_cast<std::size_t>(b)];
    total += other.total;
  }
  double quantile(double q) const {
    if (total == 0) return 0;
    const double target = q * total;
    double seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts[static_cast<std::size_t>(b)];
      if (seen >= target && counts[static_cast<std::size_t>(b)] > 0) return value_of(b);
    }
    return value_of(kBuckets - 1);
  }
};

inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
inline double lower_quartile_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 4];
}

// How many separate moments `times` (ns) hold: a time at least `gap_ns` after the start of the
// moment before begins a new one (one event seen by several ranks or messages counts once).
inline int separate_moments(std::vector<std::int64_t> times, std::int64_t gap_ns) {
  std::sort(times.begin(), times.end());
  int moments = 0;
  std::int64_t start = INT64_MIN;
  for (std::int64_t t : times)
    if (start == INT64_MIN || t - start >= gap_ns) {
      ++moments;
      start = t;
    }
  return moments;
}

inline std::string ms_text(double ns) {
  char buffer[64];
  if (ns >= 1e9)
    std::snprintf(buffer, sizeof buffer, "%.2f s", ns / 1e9);
  else if (ns >= 1e6)
    std::snprintf(buffer, sizeof buffer, "%.1f ms", ns / 1e6);
  else
    std::snprintf(buffer, sizeof buffer, "%.0f us", ns / 1e3);
  return buffer;
}
inline std::string mb_text(double mb_per_s) {
  char text[32];
  std::snprintf(text, sizeof text, mb_per_s >= 100 ? "%.0f MB/s" : "%.1f MB/s", mb_per_s);
  return text;
}
inline std::string percent_text(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.0f%%", 100.0 * fraction);
  return buffer;
}
inline std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "1 rank", "4 ranks": a count and its noun, singular or plural (nouns that take an s).
inline std::string count_text(std::uint64_t n, const std::string& noun) {
  return with_commas(n) + " " + noun + (n == 1 ? "" : "s");
}

// Which way a link is slow, where both ways read slow: a fault one way slows the reverse too
// (TCP's acknowledgements cross the slow way), but by far less. The other way counts as its echo
// where it reads under kEchoShare of the slow way (detect_slow_links, detect_probed_links).
inline constexpr double kEchoShare = 0.25;
// Whether a one-way time's excess `excess` is the slow way alone: at least `needed`, and the other
// way's excess within kEchoShare of it either way (a clock error adds to one what it takes from
// the other, so a small negative excess is the other way's error, not speed).
inline bool slow_way_alone(double excess, double other_excess, double needed) {
  return excess >= needed && std::abs(other_excess) <= kEchoShare * excess;
}

// Message size class of `bytes`: powers of four.
inline int size_class(std::int64_t bytes) {  // powers of four
  int c = 0;
  while (bytes >= 4 && c < 20) {
    bytes /= 4;
    ++c;
  }
  return c;
}

}  // namespace commtap::analyzer
