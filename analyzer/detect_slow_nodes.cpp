// Slow ranks and hosts, the compute side (docs/analyzer.md).
#include "analyzer/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "analyzer/statistics.hpp"
#include "analyzer/trace_files.hpp"

namespace commtap::analyzer {

using json = nlohmann::json;

namespace {

struct Instance {
  std::int64_t earliest = INT64_MAX;
  std::int64_t latest = INT64_MIN;
  std::int32_t latest_rank = -1;
  std::uint32_t count = 0;
};

struct PairHash {
  std::size_t operator()(const std::pair<std::int64_t, std::uint64_t>& k) const {
    return std::hash<std::int64_t>()(k.first) * 31 + std::hash<std::uint64_t>()(k.second);
  }
};

// Per rank and window: instances, lateness distribution.
struct RankWindow {
  std::uint32_t instances = 0;
  std::uint32_t last = 0;  // instances it was the last to arrive at
  LogHistogram lateness;
};

constexpr int kWindowsKept = 30;  // persistence looks at the latest windows only

}  // namespace

bool detect_slow_nodes(const Job& job, const HealthOptions& options, JobHealth& health,
                       std::string& error) {
  const char* sql =
      "SELECT rank, comm_id, seq, enter_ns FROM collectives WHERE exit_ns IS NOT NULL";
  const std::int64_t since_aligned = since_aligned_ns(job, options);
  const std::int64_t until_aligned = job.until_aligned();
  // Pass 1: earliest and latest arrival of every instance.
  std::unordered_map<std::pair<std::int64_t, std::uint64_t>, Instance, PairHash> instances;
  if (!each_row(
          job, sql,
          [&](sqlite3_stmt* s) {
            const int rank = static_cast<int>(column_i64(s, 0));
            auto r = job.ranks.find(rank);
            if (r == job.ranks.end()) return;
            const std::int64_t t = r->second.aligned(static_cast<std::uint64_t>(column_i64(s, 3)));
            if (t < since_aligned || t > until_aligned) return;
            Instance& i =
                instances[{column_i64(s, 1), static_cast<std::uint64_t>(column_i64(s, 2))}];
            i.earliest = std::min(i.earliest, t);
            if (t > i.latest) {
              i.latest = t;
              i.latest_rank = rank;
            }
            ++i.count;
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
  health.instances = instances.size();
  if (instances.empty()) return true;
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const int windows_total = static_cast<int>((last - first) / window_ns) + 1;
  const int first_kept = std::max(0, windows_total - kWindowsKept);
  const int windows = windows_total - first_kept;

  // Pass 2: each rank's lateness per window, and which host arrived last.
  std::map<int, std::vector<RankWindow>> per_rank;
  std::vector<std::vector<std::uint32_t>> host_last(
      static_cast<std::size_t>(windows), std::vector<std::uint32_t>(job.hosts.size(), 0));
  std::vector<std::uint32_t> window_instances(static_cast<std::size_t>(windows), 0);
  if (!each_row(
          job, sql,
          [&](sqlite3_stmt* s) {
            const int rank = static_cast<int>(column_i64(s, 0));
            auto found =
                instances.find({column_i64(s, 1), static_cast<std::uint64_t>(column_i64(s, 2))});
            if (found == instances.end()) return;
            const Instance& i = found->second;
            const int w = static_cast<int>((i.earliest - first) / window_ns) - first_kept;
            if (w < 0) return;
            const Rank& r = job.ranks.at(rank);
            const std::int64_t t = r.aligned(static_cast<std::uint64_t>(column_i64(s, 3)));
            auto& windows_of_rank = per_rank[rank];
            if (windows_of_rank.empty()) windows_of_rank.resize(static_cast<std::size_t>(windows));
            RankWindow& rw = windows_of_rank[static_cast<std::size_t>(w)];
            ++rw.instances;
            rw.lateness.add(t - i.earliest);
            if (rank == i.latest_rank) {
              ++host_last[static_cast<std::size_t>(w)][static_cast<std::size_t>(r.host)];
              ++window_instances[static_cast<std::size_t>(w)];
              ++rw.last;
            }
          },
          error))
    return false;

  // Per window: which ranks stand out.
  const double min_lateness = options.min_lateness_ms * 1e6;
  std::map<int, int> flagged_windows, eligible_windows;
  std::map<int, std::vector<std::pair<int, bool>>> flags;  // per rank: (window, late), in order
  std::map<int, std::vector<double>> rank_lateness, other_lateness, host_last_fraction;
  // For `commtap report`: every rank's median lateness in every kept window (null where it had
  // too few instances), with the windows' start on the job's clock, so that a chart can put
  // them on a time axis and a heat map has one cell per rank and window.
  json lateness_ms = json::array();
  for (auto& [rank, ws] : per_rank) {
    json row = json::array();
    for (const RankWindow& rw : ws)
      row.push_back(rw.instances < static_cast<std::uint32_t>(options.min_instances)
                        ? json(nullptr)
                        : json(rw.lateness.quantile(0.5) / 1e6));
    lateness_ms.push_back(row);
  }
  for (int w = 0; w < windows; ++w) {
    std::vector<double> medians;
    std::map<int, double> median_of_rank;
    for (auto& [rank, ws] : per_rank) {
      const RankWindow& rw = ws[static_cast<std::size_t>(w)];
      if (rw.instances < static_cast<std::uint32_t>(options.min_instances)) continue;
      const double m = rw.lateness.quantile(0.5);
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
      double fraction = static_cast<double>(rw.last) / rw.instances;
      if (job.hosts.size() > 1 && window_instances[static_cast<std::size_t>(w)] > 0)
        fraction = std::max(
            fraction, static_cast<double>(
                          host_last[static_cast<std::size_t>(w)][static_cast<std::size_t>(host)]) /
                          window_instances[static_cast<std::size_t>(w)]);
      ++eligible_windows[rank];
      rank_lateness[rank].push_back(m);
      other_lateness[rank].push_back(baseline);
      host_last_fraction[rank].push_back(fraction);
      const bool late = m >= min_lateness && m >= options.lateness_factor * baseline &&
                        fraction >= options.last_fraction;
      flags[rank].emplace_back(w, late);
      if (late) ++flagged_windows[rank];
    }
  }
  {
    json ranks = json::array();
    for (const auto& [rank, ws] : per_rank) ranks.push_back(rank);
    // Seconds since the job's start (its earliest MPI_Init) on the wall clock.
    const double first_s =
        static_cast<double>(first + job.wall_minus_aligned - job.start_wall()) / 1e9 +
        first_kept * options.window_s;
    health.details["lateness"] = {
        {"window_s", options.window_s},
        {"first_s", first_s},
        {"last_s", static_cast<double>(last + job.wall_minus_aligned - job.start_wall()) / 1e9},
        {"ranks", ranks},
        {"ms", lateness_ms}};
  }

  // Persistence is judged on the latest windows: late in at least that share of some run of
  // windows that ends with the latest (and in two at least where there are two), so that a
  // machine that became slow late in a long job is named after a few windows, not after most of
  // the job's, and one noisy window at the end names nobody.
  std::set<int> slow;
  int onset_window = windows;  // the earliest window of a slow rank's late run
  for (const auto& [rank, late] : flags) {
    const int needed = std::min<int>(2, static_cast<int>(late.size()));
    int flagged = 0;
    for (std::size_t length = 1; length <= late.size(); ++length) {
      flagged += late[late.size() - length].second ? 1 : 0;
      if (flagged >= needed && flagged >= options.persistence * static_cast<double>(length)) {
        slow.insert(rank);
        onset_window = std::min(onset_window, late[late.size() - length].first);
        break;
      }
    }
  }
  if (slow.empty()) return true;
  // Arriving late is not enough: a rank that waits in a receive for a message that comes late
  // (a slow link or host upstream) arrives late too, and then spends more of its time inside
  // MPI than the others. A rank that computes too slowly spends less (the others wait for it).
  // Each rank's share of time inside blocking MPI calls, from the aggregates.
  // Measured over the late windows only: a machine that became slow late in a job spent the
  // same share as the others before.
  std::map<int, double> mpi_share;
  {
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
    if (!each_row(
            job, "SELECT rank, wall_ns, total_ns FROM aggregates",
            [&](sqlite3_stmt* s) {
              const std::int64_t wall = column_i64(s, 1);
              if (wall > job.until_wall) return;
              rows[static_cast<int>(column_i64(s, 0))][wall] +=
                  static_cast<double>(column_i64(s, 2));
            },
            error) ||
        !each_row(
            job, "SELECT rank, wall_ns FROM heartbeats",
            [&](sqlite3_stmt* s) {
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
  for (const auto& [host, ranks] : slow_by_host) {
    const bool whole_host = ranks.size() == ranks_by_host[host].size();
    std::vector<int> subjects = whole_host ? std::vector<int>{ranks.front()} : ranks;
    for (int subject_rank : subjects) {
      std::vector<double> own, others, fractions;
      std::uint64_t n = 0;
      for (int rank : whole_host ? ranks : std::vector<int>{subject_rank}) {
        own.insert(own.end(), rank_lateness[rank].begin(), rank_lateness[rank].end());
        others.insert(others.end(), other_lateness[rank].begin(), other_lateness[rank].end());
        fractions.insert(fractions.end(), host_last_fraction[rank].begin(),
                         host_last_fraction[rank].end());
        for (const RankWindow& rw : per_rank[rank]) n += rw.instances;
      }
      std::vector<double> own_share, others_share;
      for (const auto& [rank, share] : mpi_share)
        (std::find(ranks.begin(), ranks.end(), rank) != ranks.end() ? own_share : others_share)
            .push_back(share);
      const double own_mpi = own_share.empty() ? 0.0 : median_of(own_share);
      const double others_mpi = others_share.empty() ? 1.0 : median_of(others_share);
      // Clearly less (a fifth): with equal shares nobody is waiting for this rank.
      if (!own_share.empty() && !others_share.empty() && own_mpi > 0.8 * others_mpi) continue;
      // Too little to tell a faulty machine from the program's own imbalance.
      const std::uint64_t compared = n / (whole_host ? ranks.size() : 1);
      if (compared < static_cast<std::uint64_t>(std::max(0, options.min_evidence_instances)))
        continue;
      const int flagged = flagged_windows[subject_rank], eligible = eligible_windows[subject_rank];
      Finding f;
      f.kind = whole_host ? finding_kind::slow_host : finding_kind::slow_rank;
      const std::string host_name = job.hosts[static_cast<std::size_t>(host)];
      f.subject = whole_host ? "host " + host_name : job.rank_name(subject_rank);
      f.severity = flagged >= options.error_windows ? Severity::error : Severity::warning;
      f.first_seen_ns = first_wall;
      f.last_seen_ns = job.now_wall;
      f.summary = f.subject + ": last to arrive in " + percent_text(median_of(fractions)) + " of " +
                  with_commas(compared) + " collectives, median lateness " +
                  ms_text(median_of(own)) + " vs " + ms_text(median_of(others)) +
                  " for the others, in " + std::to_string(flagged) + " of " +
                  std::to_string(eligible) + " windows, inside MPI " + percent_text(own_mpi) +
                  " of the time vs " + percent_text(others_mpi) +
                  " for the others (compute side: it arrives late)";
      f.evidence = {{"host", host_name},
                    {"program", job.program},
                    {"mpi_time_share", own_mpi},
                    {"others_mpi_time_share", others_mpi},
                    {"ranks", whole_host ? ranks : std::vector<int>{subject_rank}},
                    {"last_fraction", median_of(fractions)},
                    {"median_lateness_ns", median_of(own)},
                    {"others_lateness_ns", median_of(others)},
                    {"windows_flagged", flagged},
                    {"windows", eligible}};
      health.findings.push_back(f);
    }
  }
  return true;
}

}  // namespace commtap::analyzer
