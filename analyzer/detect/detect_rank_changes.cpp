// Slow ranks and hosts by change (docs/analyzer.md, slow_rank by change): a rank whose share of
// time not waiting for the others (computing, or held off the CPU) rose against the other ranks'
// at some moment of the job and stayed up, while the others came to wait for it.
//
// Who arrives last at a collective says who is slow only in a program whose ranks do the same
// work. A pipeline's first stage is last at every all-reduce whoever is slow, a parameter
// server's rank 0 computes the update while the workers wait, a solver's rank 0 writes output:
// each rank's own time between its calls, against the other ranks' at the same moment, is the
// program's design as long as nothing changes, and a change from it is the finding. The rule
// reads the writer's windows (aggregates: time inside MPI; heartbeats: time held off the CPU),
// not the collectives, so it sees ranks whatever communicators and calls the program uses and
// whatever the sampling recorded of them.
#include "analyzer/detect/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/model/job_pace.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {

namespace {

// The bins after a change point, at least: some persistence. Before it, kMinBaselineBins: a
// job's first seconds (start-up, the first steps) differ from its steady state, and a change
// point among them was a clean pipeline's start-up (seed 2 of docs/faults.md sweep 16).
constexpr int kMinSegmentBins = 3, kMinBaselineBins = 5;
// A change is a rise of at least this share of the time (Greyhound's change points shift the
// mean by 10% or more).
constexpr double kMinShift = 0.10;
// In a healthy job a bin reads above the half-way mark at least this often whatever its
// baseline showed (a few baseline bins estimate that chance poorly).
constexpr double kMinChance = 0.10;
// The others must have come to wait for it: the job's pace fell by at least this share. A rank
// that computes more while nobody waits for it costs the job nothing, and on a loaded machine a
// clean job's pace moves by a few percent (a clean CG at load 16 read 3.3% for a moment).
constexpr double kMinCost = 0.05;
// The rank the others came to wait for spends more of its own time not waiting: its own share
// rose by at least this much, or it is a bottleneck that has no more to give (at kBottleneck or
// more since the change: it computed nearly all the time and the others come to wait for it).
// A rank whose own share stayed put while the others came to wait for something else rises
// against their median just as much: a stencil's rank 1 beside a delayed link `ctap2 -> ctap3`,
// own share 0.57-0.63 before and 0.56-0.58 after, 47-56 points above the others' median, was
// named slow_host in 6 of 6 runs of docs/faults.md sweeps 36-37 (2 of 4 further stencils at
// +0.01 and -0.03, host ctap3). Over the right findings of this rule in sweeps 30-37 (13) its own
// share rose by 0.27-0.55, or ended at 0.997-1.0 (a parameter server's root, a halo's saturated
// rank).
//
// And its own rise is a fair part of its rise against the others' median, kOwnPart of it at least:
// a rank that adds d of compute to a step of T it used to wait in rises by about d / T itself,
// and the others, now waiting d more for it, fall by about as much (a part near a half: 0.5 and
// 0.64-0.69 in the right findings of docs/faults.md sweep 40). The others' waiting rising by much
// more than its own work did is their wait for something else: a stencil's rank 5 two hosts from
// a delayed link `ctap0 -> ctap1`, own share 0.51 -> 0.56, 45 points up against the others'
// median (0.11 of it), named slow_rank for 4 analyses of sweep 41.
constexpr double kOwnRise = 0.05;
constexpr double kOwnPart = 0.25;
constexpr double kBottleneck = 0.95;
// A slowed rank stays slowed: at least this share of the bins since the change read above its
// half-way mark. On a loaded machine a rank that the scheduler holds off now and then rises in
// bursts (a clean LULESH at load 19: 11 of 17 bins, +11% against the others' median; the
// throttled rank of the same sweep: 33 of 33); a test that takes the bins for independent
// draws at the baseline's rate would call those bursts a change.
constexpr double kPersistent = 0.75;

// The job's progress per rank and bin, read by every rank's change: the operations each rank
// completed, where it was paced. Shared by the ranks' series, not copied into each (a copy per
// rank made the rule O(ranks^2 x bins) in memory); what depends only on a rank's bins (its
// series' set-up, and the cost at a split) is found once for all ranks with the same bins.
class JobProgress {
 public:
  JobProgress(const RankBins& times, const BinGrid& grid)
      : times_(times), bin_ns_(static_cast<double>(grid.bin_ns)) {}

  // The first index of `bins` (a series' bins) from which every rank is paced at least once
  // before: the baseline counts from the first bin every rank is paced in (its writes after the
  // first), the job's set-up is no baseline (a clean LULESH read a change at 6 s from its first
  // bins).
  std::size_t set_up(const std::vector<int>& bins) const {
    const std::optional<Key> key = key_of(bins, 0);
    if (key)
      if (auto found = set_ups_.find(*key); found != set_ups_.end()) return found->second;
    std::size_t set_up = 0;
    for (const auto& [rank, rank_bins] : times_) {
      std::size_t first = 0;
      while (first < bins.size() && !paced(rank_bins, bins[first])) ++first;
      set_up = std::max(set_up, first);
    }
    if (key) set_ups_.emplace(*key, set_up);
    return set_up;
  }

  // The job's pace after the split `split` of `bins` against before: each rank's own pace after
  // against before (the medians of its paced bins: a job's first seconds, LULESH's 2 s MPI_Init
  // among them, complete fewer), and the median over the ranks, robust to a rank whose writes
  // came late in some bins and to ranks that complete different numbers of operations by design
  // (a pipeline's stages, a server's root). Unknown where fewer than 3 ranks have both.
  std::optional<double> pace_ratio(const std::vector<int>& bins, std::size_t split) const {
    const std::optional<Key> key = key_of(bins, split);
    if (key)
      if (auto found = ratios_.find(*key); found != ratios_.end()) return found->second;
    std::vector<double> paces;
    for (const auto& [rank, rank_bins] : times_) {
      std::vector<double> before, after;
      for (std::size_t j = 0; j < bins.size(); ++j)
        if (paced(rank_bins, bins[j]))
          (j < split ? before : after)
              .push_back(rank_bins[static_cast<std::size_t>(bins[j])].completed);
      if (before.empty() || after.empty()) continue;
      if (const double pace_before = median_of(before); pace_before > 0)
        paces.push_back(median_of(after) / pace_before);
    }
    const std::optional<double> ratio =
        paces.size() >= 3 ? std::optional(median_of(paces)) : std::nullopt;
    if (key) ratios_.emplace(*key, ratio);
    return ratio;
  }

 private:
  // A series of consecutive bins is its first and last bin: most ranks are known in the same
  // bins, and share what is found for them. Others are not cached.
  using Key = std::tuple<int, int, std::size_t>;
  static std::optional<Key> key_of(const std::vector<int>& bins, std::size_t split) {
    if (bins.empty() || static_cast<std::size_t>(bins.back() - bins.front()) + 1 != bins.size())
      return std::nullopt;
    return Key{bins.front(), bins.back(), split};
  }
  bool paced(const std::vector<BinTime>& rank_bins, int bin) const {
    return rank_bins[static_cast<std::size_t>(bin)].paced(bin_ns_);
  }
  const RankBins& times_;
  const double bin_ns_;
  mutable std::map<Key, std::size_t> set_ups_;
  mutable std::map<Key, std::optional<double>> ratios_;
};

// A rank's bins where it and at least two others are known: its own share against the others'
// median, and the others' median share of waiting.
struct RankSeries {
  std::vector<int> bin;
  std::vector<double> excess, own, others_own;
  std::vector<double> held;  // its share of the bin held off the CPU (part of `own`)
  // Of that, its cgroup CPU limit's (heartbeats.throttled_ns); -1 where not recorded. And the
  // other ranks' median of theirs (-1: none of theirs recorded).
  std::vector<double> throttled, others_throttled;
  const JobProgress* progress = nullptr;  // every rank's operations completed, per bin
};

// The median (median_of) of the values of the sorted `sorted` less its entry at `skip` (none
// where `skip` is past its end): each rank's others' median from one sort of the bin's values,
// in O(1) per rank. -1 where that leaves nothing.
double median_without(const std::vector<double>& sorted, std::size_t skip) {
  const std::size_t n = skip < sorted.size() ? sorted.size() - 1 : sorted.size();
  if (n == 0) return -1.0;
  auto at = [&](std::size_t k) { return sorted[k < skip ? k : k + 1]; };
  return n % 2 ? at(n / 2) : (at(n / 2 - 1) + at(n / 2)) / 2;
}

// The median of `sorted` less one entry equal to `value` where it `holds` one (a rank's own), or
// of all of it; -1 where that leaves nothing.
double median_of_others(const std::vector<double>& sorted, bool holds, double value) {
  const auto at = holds ? std::lower_bound(sorted.begin(), sorted.end(), value) : sorted.end();
  return median_without(sorted, static_cast<std::size_t>(at - sorted.begin()));
}

std::map<int, RankSeries> series_of(const RankBins& times, const BinGrid& grid,
                                    const JobProgress& progress) {
  std::map<int, RankSeries> out;
  const auto bin_ns = static_cast<double>(grid.bin_ns);
  std::vector<double> owns, throttled_shares;
  for (int b = 0; b < grid.bins; ++b) {
    const auto i = static_cast<std::size_t>(b);
    // The bin's known ranks' shares, sorted once: each rank's others are these less its own.
    owns.clear();
    throttled_shares.clear();
    for (const auto& [rank, bins] : times) {
      if (!bins[i].known(bin_ns)) continue;
      owns.push_back(bins[i].own());
      if (bins[i].throttled >= 0) throttled_shares.push_back(bins[i].throttled_share());
    }
    if (owns.size() < 3) continue;  // a rank and at least two others
    std::sort(owns.begin(), owns.end());
    std::sort(throttled_shares.begin(), throttled_shares.end());
    for (const auto& [rank, bins] : times) {
      if (!bins[i].known(bin_ns)) continue;
      const double own = bins[i].own();
      const double others_own = median_of_others(owns, true, own);
      RankSeries& s = out[rank];
      s.progress = &progress;
      s.others_throttled.push_back(
          median_of_others(throttled_shares, bins[i].throttled >= 0, bins[i].throttled_share()));
      s.bin.push_back(b);
      s.excess.push_back(own - others_own);
      s.own.push_back(own);
      s.held.push_back(std::min(own, bins[i].held_off / std::max(1.0, bins[i].covered)));
      s.throttled.push_back(bins[i].throttled < 0 ? -1.0
                                                  : std::min(1.0, bins[i].throttled_share()));
      s.others_own.push_back(others_own);
    }
  }
  return out;
}

double mean_of(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double sum = 0;
  for (std::size_t k = from; k < to; ++k) sum += v[k];
  return to > from ? sum / static_cast<double>(to - from) : 0.0;
}

// The mean of v[from, to)'s recorded entries (>= 0; -1 marks a bin without the count), or `none`.
double mean_of_recorded(const std::vector<double>& v, std::size_t from, std::size_t to,
                        double none) {
  double sum = 0, bins = 0;
  for (std::size_t j = from; j < to; ++j)
    if (v[j] >= 0) {
      sum += v[j];
      bins += 1;
    }
  return bins > 0 ? sum / bins : none;
}

// The change point of a rank's series: the split whose rise, weighted by how many bins support
// it on each side, is largest (a two-sample statistic), and what it shows.
struct Change {
  std::size_t split = 0;
  double before = 0, after = 0, latest = 0;  // mean excess before, after, over the latest bins
  double own_before = 0, own_after = 0;      // its own share, not against the others'
  double held_before = 0, held_after = 0;    // of its own share, the time held off the CPU
  // Its share throttled by its cgroup CPU limit, over the bins that recorded it (-1: none).
  double throttled_before = -1, throttled_after = -1;
  double cost = 0;
  bool cost_from_progress = false;  // else from the others' time not waiting
  bool by_limit = false;            // found by its cgroup CPU limit's count (limit_change)
  EvidenceTest test;
  bool found() const { return split > 0; }
};

// `on`: the series whose split is sought, s.excess or its throttled share (limit_change).
Change change_of(const RankSeries& s, double subjects, const std::vector<double>& on) {
  Change best;
  const std::size_t n = s.excess.size();
  if (n < kMinBaselineBins + kMinSegmentBins) return best;
  const std::size_t set_up = s.progress->set_up(s.bin);
  double best_score = 0;
  // Prefix sums: every split's two means in O(1), so a day of 1 s bins costs O(n), not O(n^2).
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t k = 0; k < n; ++k) prefix[k + 1] = prefix[k] + on[k];
  for (std::size_t k = set_up + kMinBaselineBins; k + kMinSegmentBins <= n; ++k) {
    const double before = prefix[k] / static_cast<double>(k);
    const double after = (prefix[n] - prefix[k]) / static_cast<double>(n - k);
    const double rise = after - before;
    const double score =
        rise * std::sqrt(static_cast<double>(k * (n - k)) / static_cast<double>(n));
    if (rise >= kMinShift && score > best_score) {
      best_score = score;
      best.split = k;
    }
  }
  if (!best.found()) return best;
  const std::size_t k = best.split;
  best.before = mean_of(s.excess, 0, k);
  best.after = mean_of(s.excess, k, n);
  best.latest = mean_of(s.excess, n - kMinSegmentBins, n);
  best.own_before = mean_of(s.own, 0, k);
  best.own_after = mean_of(s.own, k, n);
  best.held_before = mean_of(s.held, 0, k);
  best.held_after = mean_of(s.held, k, n);
  best.throttled_before = mean_of_recorded(s.throttled, 0, k, -1.0);
  best.throttled_after = mean_of_recorded(s.throttled, k, n, -1.0);
  // The cost: how much the job's progress fell since, the operations its ranks completed per
  // second (a job whose steps take twice as long completes half as many). A rank held off the
  // CPU by another job's load on a shared machine hands its CPU time to its peers and the job
  // keeps its pace (docs/faults.md sweep 20: a clean all-to-all whose rank 3 went from 10% to 35%
  // held off, at the job's pace); a stopped or throttled one slows every rank that waits for it.
  // Without the counts (no aggregates), the share of the others' time not waiting that they
  // lost: a proxy that fails where waiting ranks trade time held off the CPU for time waiting.
  // Each rank's own pace after against before, and the median over the ranks (pace_ratio).
  const std::optional<double> pace = s.progress->pace_ratio(s.bin, k);
  best.cost_from_progress = pace.has_value();
  if (pace) {
    best.cost = std::max(0.0, 1 - *pace);
  } else {
    const double others_before = mean_of(s.others_own, 0, k);
    const double others_after = mean_of(s.others_own, k, n);
    best.cost = std::max(0.0, (others_before - others_after) / std::max(0.05, others_before));
  }
  // The evidence: each bin after the change, above the half-way mark or not, against how often
  // the bins before it were.
  const double mark = best.before + (best.after - best.before) / 2;
  double above_before = 0;
  for (std::size_t j = 0; j < k; ++j) above_before += s.excess[j] >= mark ? 1 : 0;
  EvidenceTest& test = best.test;
  test.observed_what = "time not waiting for the others above its own baseline";
  test.chance = std::max(kMinChance, above_before / static_cast<double>(k));
  for (std::size_t j = k; j < n; ++j) {
    test.observations += 1;
    test.hits += s.excess[j] >= mark ? 1 : 0;
  }
  test.samples = n;
  test.spacing_s = 0;  // set by the caller (the bin)
  // Every rank and host, at every split point.
  test.comparisons = subjects * static_cast<double>(n - kMinBaselineBins - kMinSegmentBins + 1);
  return best;
}

// The rise of a rank's time held off the CPU at its own change point of it (0: none of kMinShift):
// what the machine's sharing did to one rank of this job.
double held_rise(const RankSeries& s, double subjects) {
  const Change c = change_of(s, subjects, s.held);
  if (!c.found()) return 0;
  return mean_of(s.held, c.split, s.held.size()) - mean_of(s.held, 0, c.split);
}

// Whether what changed in the rank itself is mostly time held off the CPU, too little of it, at
// too little cost, or no more than a rank elsewhere was held off by the machine: its own share
// rose (by half a change at least), at least half of that rise is time held off, and that part
// is under kSchedulersHeldRise, or the job's pace fell by under options.error_cost_share, or it
// is under kMinShift / 2 above the largest rise of time held off of any rank on another host
// (`elsewhere`, held_rise). On a machine whose load moves (other jobs, or `commtap analyze` run
// beside the job) the scheduler holds one rank off more for a while, and in a tightly coupled
// program the others wait for it: a clean pipeline of two replicas at 2 busy loops had its rank
// 1 held off 9 points more from 9 s (the other ranks 0-2 points), its own share up 12 points and
// the job's pace down 6%, and was named slow_host; a LULESH at load 8.5 had one rank held off 16
// points more for 12 s (10% -> 27%, the others 8-16%), named slow_rank (docs/faults.md sweep
// 32). On 2 cores shared by 8 ranks, 2 busy loops and the analyzer, one rank or another is held
// off 15-25 points more for seconds at a time: two clean LULESH runs on 4x2 had a rank named
// slow_rank, held off 21 and 23 points more, the job 7% and 10% slower, while a rank of another
// host rose 17 and 24 points at its own time (per second of heartbeats over the whole job,
// docs/faults.md sweep 52). A stopped or throttled host, or another job taking a host's cores,
// is held off more than the machine holds anyone: the 10 stopped ranks of sweeps 49-52 at 2 busy
// loops rose 27-50 points at their change points, 9-49 more than any rank of another host (the
// same measure), and those this rule named had cost the job 13-58% when first named. A rank
// that computes more (its own share up, not held off), and a bottleneck whose share stays while
// the others come to wait for it, are judged as before. What it cannot tell apart from the
// scheduler's sharing: a host that lost under a fifth of its CPU to another job, or more at a cost
// to the job under error_cost_share, or no more than the machine's load took from another host's
// rank meanwhile.
constexpr double kSchedulersHeldRise = 0.20;
bool held_off_by_the_machine(const RankSeries& s, const Change& c, const HealthOptions& options,
                             double elsewhere) {
  const std::size_t n = s.held.size();
  const double own = c.own_after - c.own_before;
  const double held = mean_of(s.held, c.split, n) - mean_of(s.held, 0, c.split);
  return own >= kMinShift / 2 && held >= own / 2 &&
         (held < kSchedulersHeldRise || c.cost < options.error_cost_share ||
          held < elsewhere + kMinShift / 2);
}

// Whether its limit held it since the change as a slowed rank is held: throttled at least
// kMinShift more of the time, in kPersistent of the bins since above the half-way mark and over
// the latest kMinSegmentBins, judged on the limit's own count (the evidence `c.test` then is).
bool limit_held_since(const RankSeries& s, Change& c) {
  const std::size_t n = s.throttled.size(), k = c.split;
  if (c.throttled_after - c.throttled_before < kMinShift) return false;
  // Its own limit's, not one every rank shares: a container's limit on all ranks throttles them
  // alike, more in a phase that computes more, and that is the program's phase. The others'
  // median must have risen by under half as much.
  if (mean_of_recorded(s.others_throttled, k, n, 0.0) -
          mean_of_recorded(s.others_throttled, 0, k, 0.0) >=
      (c.throttled_after - c.throttled_before) / 2)
    return false;
  const double mark = c.throttled_before + (c.throttled_after - c.throttled_before) / 2;
  EvidenceTest test;
  test.observed_what = "time throttled by its cgroup CPU limit above its own baseline";
  double above_before = 0, known_before = 0, latest = 0, latest_bins = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (s.throttled[j] < 0) continue;
    const bool above = s.throttled[j] >= mark;
    if (j < k) {
      known_before += 1;
      above_before += above ? 1 : 0;
    } else {
      test.observations += 1;
      test.hits += above ? 1 : 0;
    }
    if (j + kMinSegmentBins >= n) {
      latest += s.throttled[j];
      latest_bins += 1;
    }
  }
  if (known_before == 0 || latest_bins == 0 || latest / latest_bins < mark ||
      test.hits < kPersistent * test.observations)
    return false;
  test.chance = std::max(kMinChance, above_before / known_before);
  test.samples = static_cast<std::uint64_t>(known_before + test.observations);
  test.spacing_s = c.test.spacing_s;
  test.comparisons = c.test.comparisons;
  c.test = test;
  return true;
}

// A rank its cgroup CPU limit came to throttle (heartbeats.throttled_ns): the change point of its
// throttled share, held since (limit_held_since), and the job's pace down by kMinCost; nothing
// where the limit was not recorded. The kernel's count is no estimate and no scheduler's sharing
// of a busy machine, so neither the own-rise test nor the scheduler's-hold test applies: a
// throttled rank that polls inside MPI is held there too, and its share outside MPI rises little
// (NPB CG with one rank at 20 ms of CPU per 100 ms: its own share up 4-10 points, held off 13-18
// points more, the job's pace down 38-41%); its excess over the others is noisier than the count,
// their time held off moving with the machine's load (NPB SP's rank, throttled about 40% of every
// bin since, read above its excess's half-way mark in 14 of 21 bins); and the split is the
// limit's (a CG rank on 4x2 throttled from 10 s read its largest excess rise at 30 s,
// docs/faults.md sweep 47).
std::optional<Change> limit_change(const RankSeries& s, double subjects, double spacing_s,
                                   const HealthOptions& options) {
  if (std::none_of(s.throttled.begin(), s.throttled.end(), [](double t) { return t >= 0; }))
    return std::nullopt;
  std::vector<double> throttled = s.throttled;
  for (double& t : throttled) t = std::max(0.0, t);
  Change c = change_of(s, subjects, throttled);
  if (!c.found()) return std::nullopt;
  c.test.spacing_s = spacing_s;
  c.by_limit = true;
  if (!limit_held_since(s, c) || c.cost < kMinCost ||
      c.test.false_alarm() > options.false_alarm_rate)
    return std::nullopt;
  return c;
}

std::string share_text(double share) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%+.0f%%", 100 * share);
  return buffer;
}

Finding change_finding(const Job& job, const HealthOptions& options, int rank, bool whole_host,
                       const Change& c, const BinGrid& grid, const RankSeries& s) {
  const int host = job.ranks.at(rank).host;
  const std::string host_name = job.hosts[static_cast<std::size_t>(host)];
  Finding f;
  f.kind = whole_host ? finding_kind::slow_host : finding_kind::slow_rank;
  f.subject = whole_host ? "host " + host_name : job.rank_name(rank);
  const bool error_evidence = severity_by_evidence(c.test, options) == Severity::error;
  f.severity =
      error_evidence && c.cost >= options.error_cost_share ? Severity::error : Severity::warning;
  f.confidence = c.test.confidence();
  const std::int64_t changed_at = grid.first + s.bin[c.split] * grid.bin_ns;
  f.first_seen_ns = static_cast<std::uint64_t>(changed_at);
  f.last_seen_ns = job.now_wall;
  const double since_start_s = static_cast<double>(changed_at - job.start_wall()) / 1e9;
  char at[32];
  std::snprintf(at, sizeof at, "%.0f s", since_start_s);
  f.summary =
      f.subject + ": from " + at +
      " into the job it spends more of its time not waiting for the others (computing, "
      "or held off the CPU) than before, against the other ranks: " +
      share_text(c.before) + " of the time vs their median before, " + share_text(c.after) +
      " since, while " +
      (c.cost_from_progress
           ? "the job's progress (operations completed per second) fell by " + percent_text(c.cost)
           : "the others lost " + percent_text(c.cost) +
                 " of their time not waiting (about that share of the job's time lost)") +
      "; " + c.test.text() +
      (c.throttled_after >= 0 && c.throttled_before >= 0 &&
               c.throttled_after - c.throttled_before >= kMinShift / 2
           ? "; its cgroup's CPU limit held it throttled " + percent_text(c.throttled_after) +
                 " of the time since, " + percent_text(c.throttled_before) + " before"
           : "") +
      "; judged against its own earlier behaviour, so a rank slow from the job's start "
      "looks like the program's design";
  std::vector<int> ranks;
  if (whole_host) {
    for (const auto& [number, r] : job.ranks)
      if (r.host == host) ranks.push_back(number);
    f.avoid = avoid_host(host_name);
  } else {
    ranks.push_back(rank);
  }
  f.evidence.rule = RankChangeEvidence{
      .who = {.host = host_name, .program = job.program, .ranks = ranks},
      .changed_at_s = since_start_s,
      .excess_before = c.before,
      .excess_after = c.after,
      .excess_latest = c.latest,
      .own_share_before = c.own_before,
      .own_share_after = c.own_after,
      .held_share_before = c.held_before,
      .held_share_after = c.held_after,
      .throttled_share_before =
          c.throttled_before >= 0 ? std::optional(c.throttled_before) : std::nullopt,
      .throttled_share_after =
          c.throttled_after >= 0 ? std::optional(c.throttled_after) : std::nullopt,
      .cost_share = c.cost,
      .cost_from_progress = c.cost_from_progress,
      .test = c.test};
  f.host = host_name;
  f.strength = c.after - c.before;
  return f;
}

}  // namespace

void detect_rank_changes(const Job& job, const HealthOptions& options, const JobTimes& times,
                         const std::set<std::string>& named_hosts, std::vector<Finding>& out) {
  if (job.ranks.size() < 3) return;
  const BinGrid& grid = times.grid;
  const JobProgress progress(times.ranks, grid);
  const std::map<int, RankSeries> series = series_of(times.ranks, grid, progress);
  const double subjects = static_cast<double>(job.ranks.size() + job.hosts.size());
  std::map<int, std::pair<int, Change>> changed;  // rank -> (host, change)
  const double spacing_s = static_cast<double>(grid.bin_ns) / 1e9;
  // The largest rise of time held off of a rank on another host than `rank`'s; the ranks' rises
  // found once, when a candidate first asks.
  std::map<int, double> held_rises;
  auto held_rise_elsewhere = [&](int rank) {
    if (held_rises.empty())
      for (const auto& [number, s] : series) held_rises[number] = held_rise(s, subjects);
    double largest = 0;
    for (const auto& [other, rise] : held_rises)
      if (job.ranks.at(other).host != job.ranks.at(rank).host) largest = std::max(largest, rise);
    return largest;
  };
  for (const auto& [rank, s] : series) {
    if (std::optional<Change> limited = limit_change(s, subjects, spacing_s, options)) {
      changed.emplace(rank, std::make_pair(job.ranks.at(rank).host, *limited));
      continue;
    }
    Change c = change_of(s, subjects, s.excess);
    if (!c.found()) continue;
    c.test.spacing_s = spacing_s;
    // Still changed at the end (a rank that recovered is let go), the others waiting for it, and
    // the evidence. And it is the one they wait for: it waits less itself (kOwnRise, kOwnPart), and
    // since the change it spends at least kMinShift more of its time not waiting than the others'
    // median. A parameter server's root, which waits for its workers by design, rises against them
    // when a worker's slow network makes the other workers wait longer too, and stays below them; a
    // clean job's drift (another job's load coming and going) moves a rank by a few points.
    if (c.latest < c.before + (c.after - c.before) / 2 || c.cost < kMinCost ||
        (c.own_after < c.own_before + std::max(kOwnRise, kOwnPart * (c.after - c.before)) &&
         c.own_after < kBottleneck) ||
        c.after < kMinShift || c.test.hits < kPersistent * c.test.observations ||
        c.test.false_alarm() > options.false_alarm_rate ||
        held_off_by_the_machine(s, c, options, held_rise_elsewhere(rank)))
      continue;
    changed.emplace(rank, std::make_pair(job.ranks.at(rank).host, c));
  }
  // When one rank slows, the others wait and fall against it, but not all alike: one that
  // waits less than the rest (a worker the root serves first) rises against their median too, by
  // less. A rise under half the largest one is taken for that echo (two faults of very different
  // strength at once are named one at a time).
  double largest = 0;
  for (const auto& [rank, hc] : changed)
    largest = std::max(largest, hc.second.after - hc.second.before);
  std::erase_if(changed, [&](const auto& entry) {
    const Change& c = entry.second.second;
    return !c.by_limit && c.after - c.before < largest / 2;
  });
  // A host whose ranks all changed is a slow host, named by its rank that changed most.
  std::map<int, std::vector<int>> changed_by_host, ranks_by_host;
  for (const auto& [number, r] : job.ranks) ranks_by_host[r.host].push_back(number);
  for (const auto& [rank, hc] : changed) changed_by_host[hc.first].push_back(rank);
  for (const auto& [host, ranks] : changed_by_host) {
    if (named_hosts.count(job.hosts[static_cast<std::size_t>(host)])) continue;
    const bool whole_host = ranks.size() == ranks_by_host[host].size();
    if (whole_host) {
      int strongest = ranks.front();
      for (int rank : ranks)
        if (changed.at(rank).second.test.p_value() < changed.at(strongest).second.test.p_value())
          strongest = rank;
      out.push_back(change_finding(job, options, strongest, true, changed.at(strongest).second,
                                   grid, series.at(strongest)));
      continue;
    }
    for (int rank : ranks)
      out.push_back(change_finding(job, options, rank, false, changed.at(rank).second, grid,
                                   series.at(rank)));
  }
}

}  // namespace commtap::analyzer
