// Slow ranks and hosts, the compute side (docs/analyzer.md).
#include "analyzer/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "analyzer/recent_rows.hpp"
#include "analyzer/statistics.hpp"
#include "analyzer/trace_files.hpp"

namespace commtap::analyzer {

using json = nlohmann::json;

namespace {

struct Instance {
  std::int64_t earliest = INT64_MAX;
  std::int64_t latest = INT64_MIN;
  std::int32_t latest_rank = -1;
  std::int32_t latest_host = -1;  // the latest rank's
  // The latest arrival of any other rank, and of any rank on another host: what the others
  // would have waited had the latest rank (or its host) been on time.
  std::int64_t second_latest = INT64_MIN;
  std::int64_t latest_other_host = INT64_MIN;
  std::uint32_t count = 0;

  void arrive(std::int64_t t, int rank, int host) {
    earliest = std::min(earliest, t);
    if (t > latest) {
      second_latest = latest;
      if (host != latest_host) latest_other_host = latest;
      latest = t;
      latest_rank = rank;
      latest_host = host;
    } else {
      second_latest = std::max(second_latest, t);
      if (host != latest_host) latest_other_host = std::max(latest_other_host, t);
    }
    ++count;
  }
  // When the others began to wait for the latest rank, or for its host, at this instance.
  std::int64_t rank_wait_from() const {
    return second_latest == INT64_MIN ? latest : second_latest;
  }
  std::int64_t host_wait_from() const {
    return latest_other_host == INT64_MIN ? latest : latest_other_host;
  }
};

struct PairHash {
  std::size_t operator()(const std::pair<std::int64_t, std::uint64_t>& k) const {
    return std::hash<std::int64_t>()(k.first) * 31 + std::hash<std::uint64_t>()(k.second);
  }
};

// An interval of the job's (aligned) time during which the others waited for one rank or host.
struct WaitInterval {
  std::int64_t from = 0, to = 0;
};

// The share of `span_ns` the others spent waiting, from the wait intervals of the recorded
// instances, each recorded with probability `sampled` (the trace's sampling). Intervals that
// overlap are one wait: an NCCL rank enqueues a step's collectives together, so a late rank is
// late at each of them at once, and the job loses the time once, not once per collective. A
// sample of such a cluster of k collectives shows it with probability 1 - (1 - p)^k, and shows
// on average k p / (1 - (1 - p)^k) of its members: k is solved from the mean seen, and the
// clusters seen are scaled up by that probability.
double wait_share(std::vector<WaitInterval> waits, double sampled, std::int64_t span_ns) {
  if (waits.empty() || span_ns <= 0 || sampled <= 0) return 0.0;
  std::sort(waits.begin(), waits.end(),
            [](const WaitInterval& a, const WaitInterval& b) { return a.from < b.from; });
  double covered_ns = 0;
  std::size_t clusters = 0;
  std::int64_t from = waits.front().from, to = waits.front().to;
  auto close_cluster = [&] {
    covered_ns += static_cast<double>(std::max<std::int64_t>(0, to - from));
    ++clusters;
  };
  for (std::size_t k = 1; k < waits.size(); ++k) {
    if (waits[k].from >= to) {
      close_cluster();
      from = waits[k].from;
      to = waits[k].to;
    } else {
      to = std::max(to, waits[k].to);
    }
  }
  close_cluster();
  double seen_probability = 1.0;
  if (sampled < 1.0) {
    const double mean_seen = static_cast<double>(waits.size()) / static_cast<double>(clusters);
    auto expected_seen = [&](double k) { return k * sampled / (1 - std::pow(1 - sampled, k)); };
    double low = 1.0, high = 1.0;
    while (expected_seen(high) < mean_seen && high < 1e6) high *= 2;
    for (int step = 0; step < 60; ++step) {
      const double mid = (low + high) / 2;
      (expected_seen(mid) < mean_seen ? low : high) = mid;
    }
    seen_probability = 1 - std::pow(1 - sampled, high);
  }
  return std::min(1.0, covered_ns / seen_probability / static_cast<double>(span_ns));
}

// Per rank and window: instances, lateness distribution.
struct RankWindow {
  std::uint32_t instances = 0;
  LogHistogram lateness;  // for the report
  // The same over the instances that kept someone waiting (arrivals spread by at least the
  // least lateness that counts), which the verdict is made from. A collective called right after
  // another (an all-reduce after an all-to-all, a training step's all-reduces one per bucket)
  // finds everyone arriving together, whoever was slow before it: counted in, such instances
  // halve a slow rank's median lateness and make it last only by chance in them.
  std::uint32_t waited_instances = 0, waited_last = 0;  // waited_last: it arrived last
  // When the others waited for it (or its host): per instance it arrived last at, from the next
  // latest rank's (other host's) arrival to its own.
  std::vector<WaitInterval> waits, host_waits;
  LogHistogram waited_lateness;
  // NCCL: how long its part of those instances took, enqueue to completion on the GPU (the
  // rank's own clock): the time it waited for the others, as time inside MPI is for MPI.
  LogHistogram waited_in_flight;
  // The evidence (evidence.hpp): of the waited instances, one per kIndependentNs at most, how
  // many it (or its host) arrived last at, and the chance of that in a healthy job (sums of
  // 1/members, and of its host's share of the members).
  double observations = 0, last_hits = 0, host_last_hits = 0, chance = 0, host_chance = 0;
  // What the program calls where it is late: per (communicator, call site), waited instances
  // and those it (or its host) arrived last at.
  struct SiteCount {
    std::uint32_t waited = 0, last = 0, host_last = 0;
  };
  std::map<std::pair<std::int64_t, std::int64_t>, SiteCount> sites;
  // Per communicator, the sequence numbers seen (every call counts one, sampled or not: what a
  // lateness costs is per call), and the span of the instances' times.
  std::map<std::int64_t, std::pair<std::uint64_t, std::uint64_t>> seq_range;
  std::int64_t earliest = INT64_MAX, latest = INT64_MIN;
};

constexpr int kWindowsKept = 30;  // persistence looks at the latest windows only

// A host is stalled in a window when its ranks' writer ticks were held off the CPU (heartbeats'
// stalled_ns) at least this share of the time, and that many times the other hosts' median plus
// the margin: on a busy machine every rank waits its turn now and then, and only a host that
// waits clearly more has lost CPU.
constexpr double kStalledShare = 0.05, kStalledFactor = 3.0, kStalledMargin = 0.02;

// Each rank's cumulative stalled_ns by wall time, to take shares of time spans.
class StallCounters {
 public:
  bool load(const Job& job, std::string& error) {
    // Each rank's rows in time order (a whole read sorts the file's; cron mode reads rank by
    // rank in the key's order): the same rows per rank either way.
    if (!each_recent_row(
            job, "heartbeats",
            "SELECT rank, wall_ns, stalled_ns FROM heartbeats WHERE stalled_ns IS NOT NULL "
            "ORDER BY wall_ns",
            "SELECT rank, wall_ns, stalled_ns FROM heartbeats WHERE rank = ?1 AND wall_ns >= ?2 "
            "AND stalled_ns IS NOT NULL ORDER BY wall_ns",
            {1, 2},
            [&](const ResultRow& s) {
              const std::int64_t wall = column_i64(s, 1);
              if (wall <= job.until_wall)
                rows_[static_cast<int>(column_i64(s, 0))].emplace_back(wall, column_i64(s, 2));
            },
            error))
      return false;
    return true;
  }
  // The rank's stalled share of wall time between its rows nearest `from` and `to` (-1: unknown,
  // or under half a second of rows).
  double share(int rank, std::int64_t from, std::int64_t to) const {
    auto found = rows_.find(rank);
    if (found == rows_.end() || found->second.empty()) return -1;
    const auto& rows = found->second;
    auto at = [&](std::int64_t wall) {  // the last row at or before `wall`, else the first
      auto it = std::upper_bound(rows.begin(), rows.end(), std::make_pair(wall, INT64_MAX));
      return it == rows.begin() ? rows.front() : *(it - 1);
    };
    const auto [wall0, stalled0] = at(from);
    const auto [wall1, stalled1] = at(to);
    if (wall1 - wall0 < 500'000'000) return -1;
    return static_cast<double>(stalled1 - stalled0) / static_cast<double>(wall1 - wall0);
  }
  bool empty() const { return rows_.empty(); }

 private:
  std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> rows_;
};

// Per host: its largest rank share (hosts without a known share are absent).
std::map<int, double> host_stall_shares(const Job& job, const StallCounters& stalls,
                                        std::int64_t from, std::int64_t to) {
  std::map<int, double> shares;
  for (const auto& [number, r] : job.ranks) {
    const double share = stalls.share(number, from, to);
    if (share < 0) continue;
    auto [it, added] = shares.try_emplace(r.host, share);
    if (!added) it->second = std::max(it->second, share);
  }
  return shares;
}

// The hosts of `shares` that stand out as stalled, against the others' median.
std::set<int> stalled_hosts_of(const std::map<int, double>& shares) {
  std::set<int> stalled;
  if (shares.size() < 2) return stalled;
  for (const auto& [host, share] : shares) {
    std::vector<double> others;
    for (const auto& [other, s] : shares)
      if (other != host) others.push_back(s);
    if (share >= kStalledShare && share >= kStalledFactor * median_of(others) + kStalledMargin)
      stalled.insert(host);
  }
  return stalled;
}

}  // namespace

bool find_stalled_hosts(const Job& job, const HealthOptions& options, HostStalls& out,
                        std::string& error) {
  StallCounters stalls;
  if (!stalls.load(job, error)) return false;
  if (stalls.empty()) return true;
  // The latest window (the job's end, or now): a stall that ended before explains nothing now.
  const auto end = static_cast<std::int64_t>(
      std::min<std::uint64_t>(job.now_wall, static_cast<std::uint64_t>(job.until_wall)));
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const std::map<int, double> shares = host_stall_shares(job, stalls, end - window_ns, end);
  for (const auto& [host, share] : shares)
    out.shares[job.hosts[static_cast<std::size_t>(host)]] = share;
  for (int host : stalled_hosts_of(shares))
    out.stalled[job.hosts[static_cast<std::size_t>(host)]] = shares.at(host);
  return true;
}

bool detect_slow_nodes(const Job& job, const HealthOptions& options, std::vector<Finding>& out,
                       std::uint64_t& instances_compared, std::optional<LatenessTable>& lateness,
                       std::vector<UnprovenSubject>& unproven, std::string& error) {
  const std::string columns = "rank, comm_id, seq, enter_ns, exit_ns, site",
                    condition = "exit_ns IS NOT NULL";
  const std::vector<int> times = {3, 4};
  // A job without MPI (NCCL's collectives only): its ranks wait for a late one on the GPU, after
  // their NCCL calls returned, so the time inside calls says nothing; the collectives' own
  // enqueue-to-completion times say who waited.
  const bool without_mpi = std::all_of(job.ranks.begin(), job.ranks.end(), [](const auto& r) {
    return r.second.mpi_library == "none";
  });
  const std::int64_t since_aligned = since_aligned_ns(job, options);
  const std::int64_t until_aligned = job.until_aligned();
  // Pass 1: earliest and latest arrival of every instance.
  std::unordered_map<std::pair<std::int64_t, std::uint64_t>, Instance, PairHash> instances;
  if (!each_collective_row(
          job, columns, condition, times,
          [&, cached_rank = -1, r = job.ranks.end()](const ResultRow& s) mutable {
            // A file's rows come rank by rank (the primary key's order): one lookup per rank.
            const int rank = static_cast<int>(column_i64(s, 0));
            if (rank != cached_rank || r == job.ranks.end()) {
              cached_rank = rank;
              r = job.ranks.find(rank);
            }
            if (r == job.ranks.end()) return;
            const std::int64_t t = r->second.aligned(static_cast<std::uint64_t>(column_i64(s, 3)));
            if (t < since_aligned || t > until_aligned) return;
            instances[{column_i64(s, 1), static_cast<std::uint64_t>(column_i64(s, 2))}].arrive(
                t, rank, r->second.host);
          },
          error))
    return false;
  // Only instances every member recorded (and communicators of two or more) are compared.
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  for (auto it = instances.begin(); it != instances.end();) {
    auto comm = job.comms.find(it->first.first);
    const bool complete = comm != job.comms.end() && comm->second.size >= 2 &&
                          it->second.count == static_cast<std::uint32_t>(comm->second.size);
    if (!complete) {
      it = instances.erase(it);
      continue;
    }
    first = std::min(first, it->second.earliest);
    last = std::max(last, it->second.earliest);
    ++it;
  }
  instances_compared = instances.size();
  if (instances.empty()) return true;
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const int windows_total = static_cast<int>((last - first) / window_ns) + 1;
  const int first_kept = std::max(0, windows_total - kWindowsKept);
  const int windows = windows_total - first_kept;

  // Pass 2: each rank's lateness per window, which host arrived last, and the evidence.
  std::map<int, std::vector<RankWindow>> per_rank;
  std::vector<std::vector<std::uint32_t>> host_last(
      static_cast<std::size_t>(windows), std::vector<std::uint32_t>(job.hosts.size(), 0));
  std::vector<std::uint32_t> window_instances(static_cast<std::size_t>(windows), 0);
  const double min_lateness = options.min_lateness_ms * 1e6;
  // Independent observations: per rank, the first waited instance of each span of
  // kIndependentNs (longer where windows are so long that a rank's spans would take much
  // memory), whichever communicator it was on; which one is first does not depend on who
  // arrived last, so the observations stay a fair sample.
  const std::int64_t span_ns = std::max<std::int64_t>(kIndependentNs, window_ns / 100);
  const std::int64_t kept_from = first + static_cast<std::int64_t>(first_kept) * window_ns;
  const auto spans = static_cast<std::size_t>((last - kept_from) / span_ns + 1);
  std::map<int, std::vector<bool>> observed_span;
  // Per communicator, each host's share of its members: the chance that host arrives last.
  std::map<std::int64_t, std::map<int, double>> host_share;
  // Where some members are not known, a host counts as likely as all its ranks would be.
  std::vector<int> ranks_on_host(job.hosts.size(), 0);
  for (const auto& [number, r] : job.ranks) ++ranks_on_host[static_cast<std::size_t>(r.host)];
  for (const auto& [id, comm] : job.comms) {
    std::map<int, double> shares;
    int known = 0;
    for (int member : comm.members) {
      auto r = job.ranks.find(member);
      if (r == job.ranks.end()) continue;
      shares[r->second.host] += 1.0 / std::max(1, comm.size);
      ++known;
    }
    if (known == comm.size) host_share[id] = std::move(shares);
  }
  if (!each_collective_row(
          job, columns, condition, times,
          [&, cached_rank = -1, r_ptr = static_cast<const Rank*>(nullptr),
           windows_ptr = static_cast<std::vector<RankWindow>*>(nullptr),
           seen_ptr = static_cast<std::vector<bool>*>(nullptr)](const ResultRow& s) mutable {
            const int rank = static_cast<int>(column_i64(s, 0));
            const std::int64_t comm_id = column_i64(s, 1);
            const auto seq = static_cast<std::uint64_t>(column_i64(s, 2));
            auto found = instances.find({comm_id, seq});
            if (found == instances.end()) return;
            const Instance& i = found->second;
            const int w = static_cast<int>((i.earliest - first) / window_ns) - first_kept;
            if (w < 0) return;
            // A file's rows come rank by rank (the primary key's order): one lookup per rank.
            if (rank != cached_rank || r_ptr == nullptr) {
              cached_rank = rank;
              r_ptr = &job.ranks.at(rank);
              windows_ptr = &per_rank[rank];
              if (windows_ptr->empty()) windows_ptr->resize(static_cast<std::size_t>(windows));
              seen_ptr = &observed_span[rank];
              if (seen_ptr->empty()) seen_ptr->resize(spans);
            }
            const Rank& r = *r_ptr;
            const std::int64_t t = r.aligned(static_cast<std::uint64_t>(column_i64(s, 3)));
            auto& windows_of_rank = *windows_ptr;
            RankWindow& rw = windows_of_rank[static_cast<std::size_t>(w)];
            ++rw.instances;
            rw.lateness.add(t - i.earliest);
            if (rank == i.latest_rank) {
              rw.waits.push_back({i.rank_wait_from(), i.latest});
              rw.host_waits.push_back({i.host_wait_from(), i.latest});
            }
            auto [range, added] = rw.seq_range.try_emplace(comm_id, seq, seq);
            range->second.first = std::min(range->second.first, seq);
            range->second.second = std::max(range->second.second, seq);
            rw.earliest = std::min(rw.earliest, i.earliest);
            rw.latest = std::max(rw.latest, i.earliest);
            if (static_cast<double>(i.latest - i.earliest) < min_lateness) return;
            ++rw.waited_instances;
            rw.waited_lateness.add(t - i.earliest);
            if (without_mpi) rw.waited_in_flight.add(column_i64(s, 4) - column_i64(s, 3));
            const bool arrived_last = rank == i.latest_rank;
            const bool host_last_here = i.latest_host == r.host;
            if (arrived_last) {
              ++host_last[static_cast<std::size_t>(w)][static_cast<std::size_t>(r.host)];
              ++window_instances[static_cast<std::size_t>(w)];
              ++rw.waited_last;
            }
            const std::int64_t site = column_is_null(s, 5) ? -1 : column_i64(s, 5);
            RankWindow::SiteCount& at_site = rw.sites[{comm_id, site}];
            ++at_site.waited;
            at_site.last += arrived_last;
            at_site.host_last += host_last_here;
            std::vector<bool>& seen = *seen_ptr;
            const auto span = static_cast<std::size_t>((i.earliest - kept_from) / span_ns);
            if (span >= seen.size() || seen[span]) return;
            seen[span] = true;
            const int members = job.comms.at(comm_id).size;
            double chance_of_host =
                std::min(1.0, static_cast<double>(ranks_on_host[static_cast<std::size_t>(r.host)]) /
                                  members);
            if (auto shares = host_share.find(comm_id); shares != host_share.end())
              if (auto share = shares->second.find(r.host); share != shares->second.end())
                chance_of_host = share->second;
            rw.observations += 1;
            rw.last_hits += arrived_last;
            rw.host_last_hits += host_last_here;
            rw.chance += 1.0 / members;
            rw.host_chance += chance_of_host;
          },
          error))
    return false;

  // Per window: which hosts were held off the CPU (the stall counters, where the files have them).
  StallCounters stalls;
  if (!stalls.load(job, error)) return false;
  std::vector<std::set<int>> stalled_in(static_cast<std::size_t>(windows));
  std::vector<std::map<int, double>> stall_in(static_cast<std::size_t>(windows));
  if (!stalls.empty()) {
    for (int w = 0; w < windows; ++w) {
      const std::int64_t from =
          first + job.wall_minus_aligned + static_cast<std::int64_t>(first_kept + w) * window_ns;
      stall_in[static_cast<std::size_t>(w)] =
          host_stall_shares(job, stalls, from, from + window_ns);
      stalled_in[static_cast<std::size_t>(w)] =
          stalled_hosts_of(stall_in[static_cast<std::size_t>(w)]);
    }
  }

  // Per window: which ranks stand out.
  std::map<int, int> flagged_windows, eligible_windows, stalled_windows;
  std::map<int, std::vector<std::pair<int, bool>>> flags;  // per rank: (window, late), in order
  std::map<int, std::vector<double>> rank_lateness, other_lateness, host_last_fraction;
  // For `commtap report`: every rank's median lateness in every kept window (null where it had
  // too few instances), with the windows' start on the job's clock, so that a chart can put
  // them on a time axis and a heat map has one cell per rank and window.
  std::vector<std::vector<std::optional<double>>> lateness_ms;
  for (auto& [rank, ws] : per_rank) {
    std::vector<std::optional<double>> row;
    for (const RankWindow& rw : ws)
      row.push_back(rw.instances < static_cast<std::uint32_t>(options.min_instances)
                        ? std::nullopt
                        : std::optional<double>(rw.lateness.quantile(0.5) / 1e6));
    lateness_ms.push_back(std::move(row));
  }
  for (int w = 0; w < windows; ++w) {
    std::vector<double> medians;
    std::map<int, double> median_of_rank;
    for (auto& [rank, ws] : per_rank) {
      const RankWindow& rw = ws[static_cast<std::size_t>(w)];
      if (rw.waited_instances < static_cast<std::uint32_t>(options.min_instances)) continue;
      const double m = rw.waited_lateness.quantile(0.5);
      medians.push_back(m);
      median_of_rank[rank] = m;
    }
    if (medians.size() < 2) continue;
    const double baseline = lower_quartile_of(medians);
    for (const auto& [rank, m] : median_of_rank) {
      // How often the rank, or its host, was the last to arrive: the host's share counts when
      // the job spans several hosts (two slow ranks of one host take turns being last).
      const int host = job.ranks.at(rank).host;
      const RankWindow& rw = per_rank[rank][static_cast<std::size_t>(w)];
      double fraction = static_cast<double>(rw.waited_last) / rw.waited_instances;
      if (job.hosts.size() > 1 && window_instances[static_cast<std::size_t>(w)] > 0)
        fraction = std::max(
            fraction, static_cast<double>(
                          host_last[static_cast<std::size_t>(w)][static_cast<std::size_t>(host)]) /
                          window_instances[static_cast<std::size_t>(w)]);
      ++eligible_windows[rank];
      rank_lateness[rank].push_back(m);
      other_lateness[rank].push_back(baseline);
      host_last_fraction[rank].push_back(fraction);
      // Late and last to arrive often; or late and its host held off the CPU: in a pipeline the
      // stage that waits for a stalled one arrives as late as it does and takes turns being
      // last, and only the stall tells them apart.
      const bool stalled = stalled_in[static_cast<std::size_t>(w)].count(host) > 0;
      const bool late = m >= min_lateness && m >= options.lateness_factor * baseline &&
                        (fraction >= options.last_fraction || stalled);
      if (late && stalled) ++stalled_windows[rank];
      flags[rank].emplace_back(w, late);
      if (late) ++flagged_windows[rank];
    }
  }
  {
    LatenessTable& table = lateness.emplace();
    for (const auto& [rank, ws] : per_rank) table.ranks.push_back(rank);
    // Seconds since the job's start (its earliest MPI_Init) on the wall clock.
    table.first_s = static_cast<double>(first + job.wall_minus_aligned - job.start_wall()) / 1e9 +
                    first_kept * options.window_s;
    table.window_s = options.window_s;
    table.last_s = static_cast<double>(last + job.wall_minus_aligned - job.start_wall()) / 1e9;
    table.ms = std::move(lateness_ms);
  }

  // Persistence is judged on the latest windows: late in at least that share of some run of
  // windows that ends with the latest (and in two at least where there are two), so that a
  // machine that became slow late in a long job is named after a few windows, not after most of
  // the job's, and one noisy window at the end names nobody.
  std::set<int> slow;
  int onset_window = windows;    // the earliest window of a slow rank's late run
  std::map<int, int> run_start;  // per slow rank, the first window of its late run
  for (const auto& [rank, late] : flags) {
    const int needed = std::min<int>(2, static_cast<int>(late.size()));
    int flagged = 0;
    // The longest such run: its windows are the evidence (How sure a finding is).
    for (std::size_t length = 1; length <= late.size(); ++length) {
      flagged += late[late.size() - length].second ? 1 : 0;
      if (flagged >= needed && flagged >= options.persistence * static_cast<double>(length)) {
        slow.insert(rank);
        run_start[rank] = late[late.size() - length].first;
      }
    }
    if (slow.count(rank)) onset_window = std::min(onset_window, run_start[rank]);
  }
  if (slow.empty()) return true;
  // Arriving late is not enough: a rank that waits in a receive for a message that comes late
  // (a slow link or host upstream) arrives late too, and then spends more of its time inside
  // MPI than the others. A rank that computes too slowly spends less (the others wait for it).
  // Each rank's share of time inside blocking MPI calls, from the aggregates.
  // Measured over the late windows only: a machine that became slow late in a job spent the
  // same share as the others before.
  // Without MPI, the median time its late windows' collectives took from enqueue to completion
  // stands for it (ns; the comparisons below are ratios): the others wait on the GPU.
  std::map<int, double> mpi_share;
  if (without_mpi) {
    for (const auto& [rank, ws] : per_rank) {
      LogHistogram in_flight;
      for (int w = onset_window; w < windows; ++w)
        for (int b = 0; b < LogHistogram::kBuckets; ++b) {
          const auto count =
              ws[static_cast<std::size_t>(w)].waited_in_flight.counts[static_cast<std::size_t>(b)];
          in_flight.counts[static_cast<std::size_t>(b)] += count;
          in_flight.total += count;
        }
      if (in_flight.total > 0) mpi_share[rank] = in_flight.quantile(0.5);
    }
  } else {
    const std::int64_t since_wall =
        std::max(since_wall_ns(job, options),
                 first + job.wall_minus_aligned +
                     static_cast<std::int64_t>(first_kept + onset_window) * window_ns);
    // Per rank: MPI time in the aggregates rows since `since_wall`, divided by the time those
    // rows cover. A row holds the calls completed since the rank's previous write (every write
    // has a heartbeat row at the same wall time), and that is not always an interval: the first
    // row covers the time since MPI_Init (1.5 s for a 1 s interval, seen), the row written at
    // MPI_Finalize part of an interval, a writer delayed on a busy node more than one (dividing
    // by a whole interval per row gave shares over 100%), and a window without calls has no
    // aggregates row but counts as time outside MPI. A row's MPI time can exceed the time it
    // covers: nonblocking operations count from their post to their completion, and a halo
    // exchange's receive and send overlap. So each row counts at most the time it covers.
    std::map<int, std::map<std::int64_t, double>> rows;  // rank -> write -> MPI ns
    if (!each_recent_row(
            job, "aggregates", "SELECT rank, wall_ns, total_ns FROM aggregates",
            "SELECT rank, wall_ns, total_ns FROM aggregates WHERE rank = ?1 AND wall_ns >= ?2",
            {1, 2},
            [&](const ResultRow& s) {
              const std::int64_t wall = column_i64(s, 1);
              if (wall > job.until_wall) return;
              rows[static_cast<int>(column_i64(s, 0))][wall] +=
                  static_cast<double>(column_i64(s, 2));
            },
            error) ||
        !each_recent_row(
            job, "heartbeats", "SELECT rank, wall_ns FROM heartbeats",
            "SELECT rank, wall_ns FROM heartbeats WHERE rank = ?1 AND wall_ns >= ?2", {1},
            [&](const ResultRow& s) {
              const std::int64_t wall = column_i64(s, 1);
              const int rank = static_cast<int>(column_i64(s, 0));
              if (wall <= job.until_wall && job.ranks.count(rank))
                rows[rank].try_emplace(wall, 0.0);
            },
            error))
      return false;
    for (const auto& [rank, writes] : rows) {
      auto r = job.ranks.find(rank);
      if (r == job.ranks.end()) continue;
      // The first window begins at the rank's MPI_Init.
      auto previous = static_cast<std::int64_t>(r->second.start_ns);
      double busy_ns = 0, covered_ns = 0;
      for (const auto& [wall, ns] : writes) {
        const auto covered = static_cast<double>(std::max<std::int64_t>(0, wall - previous));
        previous = wall;
        if (wall < since_wall) continue;
        busy_ns += std::min(ns, covered);
        covered_ns += covered;
      }
      if (covered_ns > 0) mpi_share[rank] = busy_ns / covered_ns;
    }
  }
  // A host whose ranks are all slow is a slow host; otherwise the slow ranks are named.
  std::map<int, std::vector<int>> slow_by_host, ranks_by_host;
  for (const auto& [number, r] : job.ranks) ranks_by_host[r.host].push_back(number);
  for (int rank : slow) slow_by_host[job.ranks.at(rank).host].push_back(rank);
  const std::uint64_t first_wall = static_cast<std::uint64_t>(
      first + job.wall_minus_aligned + static_cast<std::int64_t>(first_kept) * window_ns);
  // A late rank whose host was held off the CPU in most of its late windows: stalled.
  auto stalled_rank = [&](int rank) { return stalled_windows[rank] * 2 > flagged_windows[rank]; };
  // The largest time share inside MPI of the stalled late ranks: a late rank that is not stalled
  // and spends more time inside MPI than they do is waiting for them (the other stage of a
  // pipeline), not slow itself.
  double stalled_mpi = -1;
  for (int rank : slow)
    if (stalled_rank(rank) && mpi_share.count(rank))
      stalled_mpi = std::max(stalled_mpi, mpi_share.at(rank));
  for (const auto& [host, ranks] : slow_by_host) {
    const bool whole_host = ranks.size() == ranks_by_host[host].size();
    std::vector<int> subjects = whole_host ? std::vector<int>{ranks.front()} : ranks;
    for (int subject_rank : subjects) {
      std::vector<double> own, others, fractions;
      for (int rank : whole_host ? ranks : std::vector<int>{subject_rank}) {
        own.insert(own.end(), rank_lateness[rank].begin(), rank_lateness[rank].end());
        others.insert(others.end(), other_lateness[rank].begin(), other_lateness[rank].end());
        fractions.insert(fractions.end(), host_last_fraction[rank].begin(),
                         host_last_fraction[rank].end());
      }
      std::vector<double> own_share, others_share;
      for (const auto& [rank, share] : mpi_share)
        (std::find(ranks.begin(), ranks.end(), rank) != ranks.end() ? own_share : others_share)
            .push_back(share);
      const double own_mpi = own_share.empty() ? 0.0 : median_of(own_share);
      const double others_mpi = others_share.empty() ? 1.0 : median_of(others_share);
      // Clearly less (a fifth): with equal shares nobody is waiting for this rank. A rank whose
      // host was held off the CPU in most of its late windows needs no such sign.
      const bool stalled = stalled_rank(subject_rank);
      if (!stalled && !own_share.empty() && !others_share.empty() && own_mpi > 0.8 * others_mpi)
        continue;
      if (!stalled && stalled_mpi >= 0 && !own_share.empty() && own_mpi > stalled_mpi) continue;
      // How sure: over the late run's independent observations, how often this rank (or, for
      // a host, one of its ranks) arrived last, against the chance of that in a healthy job
      // (evidence.hpp). The run's windows are the subject's own; of a host's ranks, the one
      // observed most stands for it (they meet the same collectives).
      const std::vector<int> members = whole_host ? ranks : std::vector<int>{subject_rank};
      int from_window = windows;
      for (int rank : members) from_window = std::min(from_window, run_start[rank]);
      int witness = members.front();
      auto observed_in_run = [&](int rank) {
        double seen = 0;
        for (int w = from_window; w < windows; ++w)
          seen += per_rank[rank][static_cast<std::size_t>(w)].observations;
        return seen;
      };
      for (int rank : members)
        if (observed_in_run(rank) > observed_in_run(witness)) witness = rank;
      EvidenceTest test;
      test.observed_what =
          whole_host && ranks.size() > 1 ? "one of its ranks last to arrive" : "last to arrive";
      RankWindow::SiteCount total;
      std::map<std::pair<std::int64_t, std::int64_t>, RankWindow::SiteCount> sites;
      std::map<std::int64_t, std::pair<std::uint64_t, std::uint64_t>> seq_range;
      std::int64_t run_earliest = INT64_MAX, run_latest = INT64_MIN;
      std::uint64_t run_instances = 0, run_waited = 0;
      for (int w = from_window; w < windows; ++w) {
        const RankWindow& rw = per_rank[witness][static_cast<std::size_t>(w)];
        test.observations += rw.observations;
        test.hits += whole_host ? rw.host_last_hits : rw.last_hits;
        test.chance += whole_host ? rw.host_chance : rw.chance;
        test.samples += rw.waited_instances;
        run_instances += rw.instances;
        run_waited += rw.waited_instances;
        run_earliest = std::min(run_earliest, rw.earliest);
        run_latest = std::max(run_latest, rw.latest);
        for (const auto& [site, count] : rw.sites) {
          auto& into = sites[site];
          into.waited += count.waited;
          into.last += count.last;
          into.host_last += count.host_last;
        }
        for (const auto& [comm, range] : rw.seq_range) {
          auto [it, added] = seq_range.try_emplace(comm, range);
          it->second.first = std::min(it->second.first, range.first);
          it->second.second = std::max(it->second.second, range.second);
        }
      }
      if (test.observations > 0) test.chance /= test.observations;
      // Every rank and host could have been named, from a run of windows of any length.
      test.comparisons = static_cast<double>(job.ranks.size() + job.hosts.size()) *
                         (1 + std::floor(std::log2(std::max(1, eligible_windows[subject_rank]))));
      // A host held off the CPU has evidence of its own: in a pipeline the stage waiting for it
      // takes turns being last, so arriving last says little, while its stall counters stand
      // out interval after interval. Per writer interval of the late run, whether the host
      // stood out as stalled (as a window is judged), against a 5% chance; the better of the two
      // tests counts, the multiplicity doubled.
      if (stalled && !stalls.empty()) {
        EvidenceTest held;
        held.observed_what = "held off the CPU";
        held.comparisons = 2 * test.comparisons;
        held.chance = 0.05;
        held.spacing_s = std::max(0.5, job.interval_s);
        const auto step = static_cast<std::int64_t>(held.spacing_s * 1e9);
        const std::int64_t to = run_latest + job.wall_minus_aligned;
        for (std::int64_t at = run_earliest + job.wall_minus_aligned; at + step <= to; at += step) {
          const std::map<int, double> shares = host_stall_shares(job, stalls, at, at + step);
          if (!shares.count(host) || shares.size() < 2) continue;
          held.observations += 1;
          held.hits += stalled_hosts_of(shares).count(host) ? 1 : 0;
          ++held.samples;
        }
        test.comparisons *= 2;
        if (held.p_value() < test.p_value()) test = held;
      }
      if (test.false_alarm() > options.false_alarm_rate) {
        unproven.push_back({whole_host ? finding_kind::slow_host : finding_kind::slow_rank,
                            whole_host ? "host " + job.hosts[static_cast<std::size_t>(host)]
                                       : job.rank_name(subject_rank),
                            test.false_alarm(), test.text()});
        continue;
      }
      // What it costs the job: the time the others spent waiting for it (its host), from the
      // intervals of the late run's instances it arrived last at (wait_share).
      std::vector<WaitInterval> waits;
      for (int rank : members)
        for (int w = from_window; w < windows; ++w) {
          const RankWindow& rw = per_rank[rank][static_cast<std::size_t>(w)];
          const auto& of_window = whole_host ? rw.host_waits : rw.waits;
          waits.insert(waits.end(), of_window.begin(), of_window.end());
        }
      std::uint64_t calls = 0;
      for (const auto& [comm, range] : seq_range) calls += range.second - range.first + 1;
      const double cost = run_instances == 0
                              ? 0.0
                              : wait_share(std::move(waits),
                                           static_cast<double>(run_instances) /
                                               static_cast<double>(std::max(calls, run_instances)),
                                           run_latest - run_earliest);
      // The program's own imbalance looks the same as a slow machine within one job. Where the
      // trace can tell: late only where the program calls some of its collectives, on time where
      // others kept it waiting at the rest (rank 0 reading input before a broadcast, writing a
      // checkpoint before a barrier), a slow machine being late everywhere. And rank 0, alone,
      // is the rank programs give extra work (input, output, printing) whatever the machine.
      std::vector<std::string> late_sites;
      std::uint32_t on_time_waited = 0;
      for (const auto& [site, count] : sites) {
        total.waited += count.waited;
        if (count.waited < 4) continue;
        const double share =
            static_cast<double>(whole_host ? count.host_last : count.last) / count.waited;
        if (share >= (1 + test.chance) / 2)
          late_sites.push_back("comm " + std::to_string(site.first) + " site " +
                               std::to_string(site.second));
        else if (share <= test.chance + (1 - test.chance) / 4)
          on_time_waited += count.waited;
      }
      const bool at_some_sites =
          !late_sites.empty() && on_time_waited > 0 && on_time_waited * 5 >= total.waited;
      const bool rank_zero = members == std::vector<int>{0} && job.ranks.size() > 1;
      // Held off the CPU is the machine's (or another job's) doing, not the program's work.
      const bool program_suspected = (at_some_sites || rank_zero) && !stalled;
      const bool would_be_error = severity_by_evidence(test, options) == Severity::error &&
                                  cost >= options.error_cost_share;
      Finding f;
      f.kind = whole_host ? finding_kind::slow_host : finding_kind::slow_rank;
      const std::string host_name = job.hosts[static_cast<std::size_t>(host)];
      f.subject = whole_host ? "host " + host_name : job.rank_name(subject_rank);
      f.severity = would_be_error && !program_suspected ? Severity::error : Severity::warning;
      f.confidence = test.confidence();
      f.first_seen_ns = first_wall;
      f.last_seen_ns = job.now_wall;
      const std::uint64_t compared = run_waited;
      const int flagged = flagged_windows[subject_rank], eligible = eligible_windows[subject_rank];
      f.summary = f.subject + ": last to arrive in " + percent_text(median_of(fractions)) + " of " +
                  with_commas(compared) +
                  " collectives that kept the others waiting, median "
                  "lateness " +
                  ms_text(median_of(own)) + " vs " + ms_text(median_of(others)) +
                  " for the others, " +
                  (without_mpi ? "its collectives take " + ms_text(own_mpi) +
                                     " from enqueue to completion vs " + ms_text(others_mpi)
                               : "inside MPI " + percent_text(own_mpi) + " of the time vs " +
                                     percent_text(others_mpi)) +
                  " for the others (compute side: it arrives late); about " + percent_text(cost) +
                  " of the job's time lost; " + test.text();
      if (at_some_sites && program_suspected)
        f.summary += "; late only at " + std::to_string(late_sites.size()) +
                     " of the call sites where ranks waited (" + late_sites.front() +
                     (late_sites.size() > 1 ? ", ..." : "") +
                     "), on time at the others: the program's own work before those calls, or a "
                     "fault that strikes only there; one job cannot tell them apart";
      else if (rank_zero && program_suspected)
        f.summary +=
            "; rank 0 is where programs do extra work (input, output, printing): one job "
            "cannot tell that from a slow machine (earlier runs in --store can)";
      f.evidence = {{"host", host_name},
                    {"program", job.program},
                    {"ranks", whole_host ? ranks : std::vector<int>{subject_rank}},
                    {"last_fraction", median_of(fractions)},
                    {"median_lateness_ns", median_of(own)},
                    {"others_lateness_ns", median_of(others)},
                    {"windows_flagged", flagged},
                    {"windows", eligible},
                    {"cost_share", cost},
                    {"test", test.to_json()}};
      if (program_suspected) {
        f.evidence["program_structure_suspected"] = at_some_sites ? "call sites" : "rank 0";
        // What it would be were it the machine (findings_store.cpp: earlier runs can say).
        f.evidence["severity_if_the_machine"] =
            severity_name(would_be_error ? Severity::error : Severity::warning);
        if (at_some_sites) f.evidence["late_sites"] = late_sites;
      }
      if (without_mpi) {
        f.evidence["collective_ns"] = own_mpi;
        f.evidence["others_collective_ns"] = others_mpi;
      } else {
        f.evidence["mpi_time_share"] = own_mpi;
        f.evidence["others_mpi_time_share"] = others_mpi;
      }
      // The stall share over the late windows, against the other hosts'.
      std::vector<double> own_stall, others_stall;
      for (int w = onset_window; w < windows; ++w)
        for (const auto& [h, share] : stall_in[static_cast<std::size_t>(w)])
          (h == host ? own_stall : others_stall).push_back(share);
      if (!own_stall.empty() && !others_stall.empty()) {
        f.evidence["stall_share"] = median_of(own_stall);
        f.evidence["others_stall_share"] = median_of(others_stall);
        if (stalled)
          f.summary += "; its process was held off the CPU " + percent_text(median_of(own_stall)) +
                       " of the time vs " + percent_text(median_of(others_stall)) +
                       " for the other hosts";
      }
      f.host = host_name;
      if (whole_host) f.avoid = avoid_host(host_name);
      out.push_back(f);
    }
  }
  return true;
}

}  // namespace commtap::analyzer
