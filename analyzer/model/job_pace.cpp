#include "analyzer/model/job_pace.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <iterator>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {

namespace {

// Spreads `amount` over [from, to) in proportion to the bins it overlaps.
template <class Add>
void spread(const BinGrid& grid, std::int64_t from, std::int64_t to, double amount, Add add) {
  if (to <= from) return;
  const double per_ns = amount / static_cast<double>(to - from);
  for (std::int64_t at = from; at < to;) {
    const std::int64_t bin = (at - grid.first) / grid.bin_ns;
    const std::int64_t bin_end = grid.first + (bin + 1) * grid.bin_ns;
    const std::int64_t until = std::min(to, bin_end);
    if (bin >= 0 && bin < grid.bins)
      add(static_cast<std::size_t>(bin), per_ns * static_cast<double>(until - at),
          static_cast<double>(until - at));
    at = until;
  }
}

}  // namespace

// Per rank and bin, from the writer's rows since `since_wall`.
bool read_bin_times(const Job& job, std::int64_t since_wall, JobTimes& out, std::string& error) {
  BinGrid& grid = out.grid;
  std::map<int, std::map<std::int64_t, double>> writes;     // rank -> write -> MPI ns
  std::map<int, std::map<std::int64_t, double>> completed;  // rank -> write -> operations
  std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> stalls, throttles, measuring;
  if (!each_aggregate_total(
          job,
          [&](const WindowWriteRow& s) {
            if (s.wall_ns > job.until_wall) return;
            writes[s.rank][s.wall_ns] += static_cast<double>(s.mpi_ns);
            completed[s.rank][s.wall_ns] += static_cast<double>(s.calls);
          },
          error) ||
      !each_heartbeat_write(
          job,
          [&](const WindowWriteRow& s) {
            if (s.wall_ns <= job.until_wall && job.ranks.count(s.rank))
              writes[s.rank].try_emplace(s.wall_ns, 0.0);
          },
          error) ||
      !each_stall_row(
          job,
          [&](const StallRow& s) {
            if (s.wall_ns > job.until_wall) return;
            stalls[s.rank].emplace_back(s.wall_ns, s.stalled_ns);
            measuring[s.rank].emplace_back(s.wall_ns, s.measuring_ns);
            if (s.throttled_ns >= 0) throttles[s.rank].emplace_back(s.wall_ns, s.throttled_ns);
          },
          error))
    return false;
  std::int64_t last = INT64_MIN;
  for (const auto& [rank, w] : writes)
    if (!w.empty()) last = std::max(last, w.rbegin()->first);
  if (last == INT64_MIN) return true;
  grid.bin_ns = static_cast<std::int64_t>(std::max(1.0, job.interval_s) * 1e9);
  grid.first = std::max(since_wall, job.start_wall());
  if (last <= grid.first) return true;
  grid.bins = static_cast<int>((last - grid.first) / grid.bin_ns);  // whole bins only
  for (const auto& [rank, w] : writes) {
    auto r = job.ranks.find(rank);
    if (r == job.ranks.end()) continue;
    std::vector<BinTime>& bins = out.ranks[rank];
    bins.assign(static_cast<std::size_t>(grid.bins), {});
    // The first write covers the time since the rank's MPI_Init (mpi_time_shares).
    auto previous = static_cast<std::int64_t>(r->second.start_ns);
    const std::map<std::int64_t, double>& done = completed[rank];
    for (const auto& [wall, ns] : w) {
      spread(grid, previous, wall, std::min(ns, static_cast<double>(wall - previous)),
             [&](std::size_t b, double part, double span) {
               bins[b].mpi += part;
               bins[b].covered += span;
             });
      auto ops = done.find(wall);
      if (previous != static_cast<std::int64_t>(r->second.start_ns))
        spread(grid, previous, wall, ops == done.end() ? 0.0 : ops->second,
               [&](std::size_t b, double part, double span) {
                 bins[b].completed += part;
                 bins[b].counted += span;
               });
      previous = wall;
    }
    // Counters since the rank's start, spread over the time between two rows.
    auto each_difference = [&](std::vector<std::pair<std::int64_t, std::int64_t>>& rows,
                               const std::function<void(std::size_t, double)>& add) {
      std::sort(rows.begin(), rows.end());
      for (std::size_t k = 1; k < rows.size(); ++k)
        spread(grid, rows[k - 1].first, rows[k].first,
               static_cast<double>(std::max<std::int64_t>(0, rows[k].second - rows[k - 1].second)),
               [&](std::size_t b, double part, double) { add(b, part); });
    };
    each_difference(stalls[rank], [&](std::size_t b, double part) { bins[b].held_off += part; });
    each_difference(measuring[rank],
                    [&](std::size_t b, double part) { bins[b].measuring += part; });
    if (auto t = throttles.find(rank); t != throttles.end() && t->second.size() >= 2) {
      for (BinTime& bin : bins) bin.throttled = 0;
      each_difference(t->second, [&](std::size_t b, double part) { bins[b].throttled += part; });
    }
  }
  return true;
}

HostLimits::HostLimits(const Job& job, const JobTimes& times) : grid_(times.grid) {
  const auto bin_ns = static_cast<double>(grid_.bin_ns);
  std::vector<double> shares;
  for (int b = 0; b < grid_.bins; ++b) {
    const auto i = static_cast<std::size_t>(b);
    shares.clear();
    for (const auto& [rank, bins] : times.ranks)
      if (bins[i].known(bin_ns) && bins[i].throttled >= 0)
        shares.push_back(bins[i].throttled_share());
    if (shares.empty()) continue;
    const double median = median_of(shares);
    for (const auto& [rank, bins] : times.ranks) {
      if (!bins[i].known(bin_ns) || bins[i].throttled < 0) continue;
      auto at = job.ranks.find(rank);
      if (at == job.ranks.end()) continue;
      const double share = bins[i].throttled_share();
      if (share >= kOwnLimitShare && share - median >= kOwnLimitShare)
        held_[job.hosts[static_cast<std::size_t>(at->second.host)]].insert(b);
    }
  }
}

bool HostLimits::held(const std::string& host, std::int64_t wall_ns) const {
  auto at = held_.find(host);
  if (at == held_.end() || wall_ns < grid_.first) return false;
  const auto bin = static_cast<int>((wall_ns - grid_.first) / grid_.bin_ns);
  return at->second.count(bin) > 0 || at->second.count(bin + 1) > 0;
}

std::set<std::string> HostLimits::held_through(std::int64_t from_wall, std::int64_t to_wall) const {
  std::set<std::string> hosts;
  auto bin_of = [&](std::int64_t wall) {
    const std::int64_t bin = wall < grid_.first ? 0 : (wall - grid_.first) / grid_.bin_ns;
    return static_cast<int>(std::min<std::int64_t>(bin, grid_.bins));
  };
  const int first = bin_of(from_wall), end = bin_of(to_wall);
  if (end <= first) return hosts;
  for (const auto& [host, bins] : held_) {
    const auto in_range = std::distance(bins.lower_bound(first), bins.lower_bound(end));
    if (2 * in_range >= end - first) hosts.insert(host);
  }
  return hosts;
}

namespace {

// The first bin every rank is paced in (its writes after the first).
std::size_t first_paced_bin(const RankBins& times, double bin_ns) {
  std::size_t set_up = 0;
  for (const auto& [rank, bins] : times) {
    std::size_t first = 0;
    while (first < bins.size() && !bins[first].paced(bin_ns)) ++first;
    set_up = std::max(set_up, first);
  }
  return set_up;
}

}  // namespace

std::optional<double> pace_fall_between(const RankBins& times, const BinGrid& grid,
                                        std::int64_t onset_wall, std::int64_t since_wall,
                                        int min_before, int min_after) {
  if (grid.bins <= 0 || onset_wall < grid.first || since_wall < onset_wall) return std::nullopt;
  const auto bin_ns = static_cast<double>(grid.bin_ns);
  const std::size_t set_up = first_paced_bin(times, bin_ns);
  // The onset's own bin is partly before and partly since: neither side's.
  const auto onset = static_cast<std::size_t>((onset_wall - grid.first) / grid.bin_ns);
  const auto since_bin = static_cast<std::size_t>((since_wall - grid.first) / grid.bin_ns);
  std::vector<double> paces;
  for (const auto& [rank, bins] : times) {
    std::vector<double> before, since;
    for (std::size_t b = set_up; b < bins.size(); ++b) {
      if (!bins[b].paced(bin_ns)) continue;
      if (b < onset) before.push_back(bins[b].completed);
      if (b > onset && b >= since_bin) since.push_back(bins[b].completed);
    }
    if (static_cast<int>(before.size()) < min_before || static_cast<int>(since.size()) < min_after)
      continue;
    if (const double pace_before = median_of(before); pace_before > 0)
      paces.push_back(median_of(since) / pace_before);
  }
  if (paces.size() < 3) return std::nullopt;
  return std::max(0.0, 1 - median_of(paces));
}

std::optional<PaceFall> largest_pace_fall(const RankBins& times, const BinGrid& grid,
                                          int min_before, int min_after) {
  if (grid.bins <= 0 || times.size() < 3) return std::nullopt;
  const auto bin_ns = static_cast<double>(grid.bin_ns);
  // The job's operations per bin, over the bins every rank is paced in.
  std::vector<std::size_t> bin;
  std::vector<double> total;
  for (auto b = first_paced_bin(times, bin_ns); b < static_cast<std::size_t>(grid.bins); ++b) {
    double sum = 0;
    bool all = true;
    for (const auto& [rank, bins] : times) {
      all = all && b < bins.size() && bins[b].paced(bin_ns);
      if (all) sum += bins[b].completed;
    }
    if (!all) continue;
    bin.push_back(b);
    total.push_back(sum);
  }
  const std::size_t n = total.size();
  if (min_before < 1 || min_after < 1 || n < static_cast<std::size_t>(min_before + min_after))
    return std::nullopt;
  // Prefix sums: every split's two means in O(1).
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t k = 0; k < n; ++k) prefix[k + 1] = prefix[k] + total[k];
  std::size_t best = 0;
  double best_score = 0;
  for (auto k = static_cast<std::size_t>(min_before); k + static_cast<std::size_t>(min_after) <= n;
       ++k) {
    const double before = prefix[k] / static_cast<double>(k);
    const double after = (prefix[n] - prefix[k]) / static_cast<double>(n - k);
    if (before <= 0) continue;
    const double fall = (before - after) / before;
    const double score =
        fall * std::sqrt(static_cast<double>(k * (n - k)) / static_cast<double>(n));
    if (fall > 0 && score > best_score) {
      best_score = score;
      best = k;
    }
  }
  if (best == 0) return std::nullopt;
  const std::int64_t onset = grid.first + static_cast<std::int64_t>(bin[best]) * grid.bin_ns;
  const std::optional<double> fall =
      pace_fall_between(times, grid, onset, onset, min_before, min_after);
  // The latest min_after bins against the same baseline: a fall the job has recovered from is
  // not what a fault that still holds costs it now.
  const std::int64_t latest =
      grid.first +
      static_cast<std::int64_t>(bin[n - static_cast<std::size_t>(min_after)]) * grid.bin_ns;
  const std::optional<double> latest_fall =
      pace_fall_between(times, grid, onset, std::max(onset, latest), min_before, 1);
  if (!fall || !latest_fall) return std::nullopt;
  return PaceFall{.onset_wall = onset, .fall = *fall, .latest_fall = *latest_fall};
}

}  // namespace commtap::analyzer
