// analyzer/model/collective_clocks: the clocks of ranks that never measured their offset to rank 0
// (an NCCL job without MPI_Init: no ping-pong ran) put on rank 0's clock by their collectives'
// completion times, and their monotonic clocks tied to the wall clock (docs/analyzer.md).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/model/job_model.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {

namespace {

// NCCL releases every rank of a collective whose result depends on all of them (an all-reduce,
// all-gather, reduce-scatter, all-to-all) when the last one has joined: their kernels end within
// about one network latency of each other, however late each enqueued. Rooted collectives and
// point-to-point calls let a sender finish before the others (its data sits in a buffer), so
// only these are used.
bool releases_everyone(std::string function) {
  // The wrappers' names (ncclAllReduce) and the profiler plugin's (AllReduce) alike.
  if (function.rfind("nccl", 0) == 0) function.erase(0, 4);
  for (char& c : function) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return function == "allreduce" || function == "allgather" || function == "reducescatter" ||
         function == "alltoall";
}

// Instances read into memory at most (one in k kept, the same on every rank, beyond it).
constexpr std::uint64_t kMostRows = 4'000'000;
// A rank is aligned from this many instances it shares with an aligned rank, at least; each
// estimate is the median of kPerEstimate of them (more where a rank has more than
// kMostEstimates x kPerEstimate), consecutive in time, so that drift between the clocks is
// followed (Rank::aligned() interpolates between estimates).
constexpr std::size_t kMinShared = 8, kPerEstimate = 16, kMostEstimates = 64;
// Where no unaligned rank has kMinShared (a short job, a communicator used every few seconds, or
// the few instances one in COMMTAP_SAMPLE keeps), one with this many at least is aligned from
// them: a median of 3 that one descheduled completion cannot move beyond the others, its bound
// wider for the fewer differences, where the wall clock would leave it milliseconds off.
constexpr std::size_t kFewestShared = 3;

struct PairHash {
  std::size_t operator()(const std::pair<std::int64_t, std::uint64_t>& k) const {
    return std::hash<std::int64_t>()(k.first) * 31 + std::hash<std::uint64_t>()(k.second);
  }
};

struct Row {
  std::uint32_t instance;
  std::int64_t exit;  // the rank's own monotonic ns
};

// One rank's completion paired with an aligned rank's completion of the same instance.
struct Pair {
  std::int64_t exit;  // the rank's own clock
  double difference;  // the aligned rank's exit on rank 0's clock minus `exit`
  double anchor_error;
  std::uint32_t instance;
};

double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(at));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (at - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

// Where a rank's monotonic clock stands against the wall clock (wall - monotonic), from what
// the files hold: every collective was enqueued after the rank started and before its last
// window; a comm_progress row written at wall time W with `entered` = e says the sampled
// instance at or below e was enqueued before W and the one above e after it. The middle of the
// tightest such range (a sampled collective's spacing wide); none: no collective rows.
struct WallRange {
  std::int64_t low = INT64_MIN, high = INT64_MAX;
  bool known() const { return low != INT64_MIN || high != INT64_MAX; }
  std::int64_t middle() const {
    if (low == INT64_MIN) return high;
    if (high == INT64_MAX) return low;
    return low + (high - low) / 2;
  }
};

// The collectives' times are checked as they are read, not by a scan of the whole file
// (kTablesCheckedAsRead, recent_rows.hpp): so are those read here (a row's `plausible`, refused
// where it is used).
bool wall_ranges(const Job& job, std::map<int, WallRange>& out, std::string& error) {
  auto clip = [&](int rank, std::int64_t low, std::int64_t high) {
    auto r = job.ranks.find(rank);
    if (r == job.ranks.end() || r->second.mpi_clock) return;
    WallRange& range = out[rank];
    range.low = std::max(range.low, low);
    range.high = std::min(range.high, high);
  };
  return each_clock_bound(
      job,
      [&](const CollectiveEntrySpanRow& row) {
        auto r = job.ranks.find(row.rank);
        if (r == job.ranks.end()) return true;
        if (!row.plausible) return false;
        // The last enter against the file's last write, both the whole file's: under --at the
        // rank's end is cut and its last enter is not (sweep 43's NCCL jobs read 40 s apart).
        const std::int64_t last_written =
            row.last_written_ns > 0
                ? row.last_written_ns
                : static_cast<std::int64_t>(std::max(r->second.end_ns, r->second.last.wall_ns));
        clip(r->first, static_cast<std::int64_t>(r->second.start_ns) - row.first_enter_ns,
             last_written - row.last_enter_ns);
        return true;
      },
      [&](const ProgressEntriesRow& row) {
        if (!row.plausible) return false;
        const std::int64_t high = row.entered_at_ns ? row.wall_ns - *row.entered_at_ns : INT64_MAX;
        const std::int64_t low =
            row.next_entered_ns ? row.wall_ns - *row.next_entered_ns : INT64_MIN;
        clip(row.rank, low, high);
        return true;
      },
      error);
}

}  // namespace

std::string ClockMethod::describe() const {
  std::string text;
  if (collective_ranks + host_ranks > 0) {
    char bound[96];
    std::snprintf(bound, sizeof bound, "collective completions (error <= %.1f us)", error_ns / 1e3);
    text = (mpi_ranks > 0 ? "mpi and " : "") + std::string(bound);
    if (host_ranks > 0)
      text += "; " + std::to_string(host_ranks) + " of them on the clock of an aligned rank's host";
  } else {
    text = mpi_ranks > 0 ? "mpi" : "none";
  }
  if (!unaligned.empty() && text != "none") {
    text += "; not aligned (wall clock only): rank";
    text += unaligned.size() > 1 ? "s " : " ";
    for (std::size_t i = 0; i < unaligned.size(); ++i)
      text += (i ? ", " : "") + std::to_string(unaligned[i]);
  }
  return text;
}

namespace {

// Which ranks start aligned (MPI's estimates, or the reference) and which are to be aligned.
struct AlignmentStart {
  std::set<int> aligned, unaligned;
  int reference = -1;  // the lowest rank, where no rank has MPI's estimates
};

AlignmentStart alignment_start(const Job& job, ClockMethod& method) {
  AlignmentStart start;
  for (const auto& [number, r] : job.ranks) {
    if (r.mpi_clock)
      ++method.mpi_ranks;
    else
      start.unaligned.insert(number);
  }
  if (start.unaligned.empty()) return start;
  // Ranks with MPI's estimates are on rank 0's clock already; without any, the lowest rank's
  // clock is the reference (rank 0's when its file is there).
  for (const auto& [number, r] : job.ranks)
    if (r.mpi_clock) start.aligned.insert(number);
  if (start.aligned.empty()) {
    start.reference = job.ranks.begin()->first;
    start.aligned.insert(start.reference);
    start.unaligned.erase(start.reference);
  }
  return start;
}

// The completions of the collectives that release everyone, per rank, each naming its instance
// by an index.
struct Completions {
  std::size_t instances = 0;
  std::map<int, std::vector<Row>> rows;
};

// The completions, one in k instances where there are many (by a hash of the instance, so that
// every rank keeps the same ones). Rows past --at are left out (on the rank's own wall time).
bool read_completions(const Job& job, const std::map<int, WallRange>& walls, Completions& out,
                      std::string& error) {
  std::uint64_t total = 0;
  if (!count_completed_collectives(job, total, error)) return false;
  const std::uint64_t keep_one_in = std::max<std::uint64_t>(1, (total + kMostRows - 1) / kMostRows);
  std::unordered_map<std::pair<std::int64_t, std::uint64_t>, std::uint32_t, PairHash> index;
  const PairHash hash;
  if (!each_completion(
          job,
          [&](const CompletionRow& row) {
            auto r = job.ranks.find(row.rank);
            if (r == job.ranks.end() || !releases_everyone(row.function)) return true;
            if (!row.plausible) return false;
            const std::pair<std::int64_t, std::uint64_t> key{row.comm_id, row.seq};
            if (keep_one_in > 1 && hash(key) % keep_one_in != 0) return true;
            const std::int64_t exit = row.exit_ns;
            if (!r->second.mpi_clock && job.until_wall != INT64_MAX)
              if (auto w = walls.find(row.rank); w != walls.end() && w->second.known() &&
                                                 exit + w->second.middle() > job.until_wall)
                return true;
            auto [it, added] = index.try_emplace(key, static_cast<std::uint32_t>(index.size()));
            out.rows[row.rank].push_back({it->second, exit});
            return true;
          },
          error))
    return false;
  out.instances = index.size();
  return true;
}

// The instances' exits on rank 0's clock by the ranks aligned so far (the first to have one
// keeps it: the shortest chain), and each estimate's instances, to add their exit spread to its
// bound once all are aligned.
class Anchors {
 public:
  explicit Anchors(std::size_t instances) : exit_(instances, kNone), error_(instances, 0) {}

  // Takes the exits of an aligned rank's completions where no rank gave one yet.
  void take(const Job& job, const Completions& completions, int number) {
    const Rank& r = job.ranks.at(number);
    const double error_ns = max_error.count(number) ? max_error[number] : 0.0;
    auto rows = completions.rows.find(number);
    if (rows == completions.rows.end()) return;
    for (const Row& row : rows->second)
      if (exit_[row.instance] == kNone) {
        exit_[row.instance] = r.aligned(static_cast<std::uint64_t>(row.exit));
        error_[row.instance] = error_ns;
      }
  }
  // The rank's completions of anchored instances.
  std::vector<Pair> pairs_of(const Completions& completions, int number) const {
    std::vector<Pair> pairs;
    auto rows = completions.rows.find(number);
    if (rows == completions.rows.end()) return pairs;
    for (const Row& row : rows->second)
      if (exit_[row.instance] != kNone)
        pairs.push_back({row.exit, static_cast<double>(exit_[row.instance] - row.exit),
                         error_[row.instance], row.instance});
    return pairs;
  }

  std::map<int, double> max_error;  // per aligned rank, its largest bound so far
  std::map<int, std::vector<std::vector<std::uint32_t>>> estimate_instances;

 private:
  static constexpr std::int64_t kNone = INT64_MIN;
  std::vector<std::int64_t> exit_;
  std::vector<double> error_;
};

// The rank's estimates from its completions paired with anchored ones (sorted by exit): one per
// group of consecutive instances; returns the largest bound.
double estimate_offsets(const std::vector<Pair>& pairs, Rank& r,
                        std::vector<std::vector<std::uint32_t>>& instances_of) {
  const std::size_t per =
      std::max(kPerEstimate, (pairs.size() + kMostEstimates - 1) / kMostEstimates);
  // Whole groups of `per`, the remainder going to the last (never a group of a few).
  const std::size_t groups = std::max<std::size_t>(1, pairs.size() / per);
  r.clocks.clear();
  instances_of.clear();
  double largest = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t from = g * per, to = g + 1 == groups ? pairs.size() : from + per;
    std::vector<double> differences, exits;
    std::vector<std::uint32_t> instances;
    double anchor = 0;
    for (std::size_t i = from; i < to; ++i) {
      differences.push_back(pairs[i].difference);
      exits.push_back(static_cast<double>(pairs[i].exit));
      instances.push_back(pairs[i].instance);
      anchor = std::max(anchor, pairs[i].anchor_error);
    }
    std::sort(differences.begin(), differences.end());
    const double offset = quantile_of_sorted(differences, 0.5);
    // About three standard errors of the median, however many differences the group holds.
    const double uncertainty =
        (quantile_of_sorted(differences, 0.75) - quantile_of_sorted(differences, 0.25)) / 2 *
        std::sqrt(32.0 / static_cast<double>(differences.size()));
    monitor::ClockEstimate e;
    e.at_ns = static_cast<std::uint64_t>(median_of(exits));
    e.offset.offset_ns = bounded_ns(offset);
    e.offset.error_ns = bounded_ns(uncertainty + anchor);
    largest = std::max(largest, uncertainty + anchor);
    r.clocks.push_back(e);
    instances_of.push_back(std::move(instances));
  }
  return largest;
}

// Round by round: every unaligned rank that shares enough instances with the anchors is
// aligned, and its completions become anchors. Returns the ranks in the order they were aligned.
std::vector<int> align_in_rounds(Job& job, const Completions& completions, AlignmentStart& start,
                                 Anchors& anchors) {
  std::vector<int> order(start.aligned.begin(), start.aligned.end());
  for (int number : start.aligned) {
    if (job.ranks.at(number).mpi_clock) {
      double largest = 0;
      for (const auto& e : job.ranks.at(number).clocks)
        largest = std::max(largest, static_cast<double>(e.offset.error_ns));
      anchors.max_error[number] = largest;
    }
    anchors.take(job, completions, number);
  }
  auto align_round = [&](std::size_t least_shared) {
    std::vector<int> done;
    for (int number : start.unaligned) {
      std::vector<Pair> pairs = anchors.pairs_of(completions, number);
      if (pairs.size() < least_shared) continue;
      std::sort(pairs.begin(), pairs.end(),
                [](const Pair& a, const Pair& b) { return a.exit < b.exit; });
      anchors.max_error[number] =
          estimate_offsets(pairs, job.ranks.at(number), anchors.estimate_instances[number]);
      done.push_back(number);
    }
    return done;
  };
  while (!start.unaligned.empty()) {
    // Well-supported alignments first, each round: a rank with few shared instances may get
    // more through a rank aligned in this round.
    std::vector<int> done = align_round(kMinShared);
    if (done.empty()) done = align_round(kFewestShared);
    if (done.empty()) break;
    for (int number : done) {
      start.unaligned.erase(number);
      start.aligned.insert(number);
      order.push_back(number);
      anchors.take(job, completions, number);
    }
  }
  return order;
}

// The spread of each instance's exits over its aligned ranks, added to the bounds.
void add_exit_spreads(Job& job, const Completions& completions, const std::set<int>& aligned,
                      const Anchors& anchors) {
  if (anchors.estimate_instances.empty()) return;
  std::vector<std::int64_t> earliest(completions.instances, INT64_MAX),
      latest(completions.instances, INT64_MIN);
  for (int number : aligned) {
    const Rank& r = job.ranks.at(number);
    auto rows = completions.rows.find(number);
    if (rows == completions.rows.end()) continue;
    for (const Row& row : rows->second) {
      const std::int64_t t = r.aligned(static_cast<std::uint64_t>(row.exit));
      earliest[row.instance] = std::min(earliest[row.instance], t);
      latest[row.instance] = std::max(latest[row.instance], t);
    }
  }
  for (const auto& [number, groups] : anchors.estimate_instances) {
    Rank& r = job.ranks.at(number);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      std::vector<double> spreads;
      for (std::uint32_t i : groups[g])
        spreads.push_back(static_cast<double>(latest[i]) - static_cast<double>(earliest[i]));
      r.clocks[g].offset.error_ns =
          bounded_ns(static_cast<double>(r.clocks[g].offset.error_ns) + median_of(spreads));
    }
  }
}

// Two hosts' monotonic clocks drift apart by the difference of their rates: NTP or PTP keeps a
// disciplined clock's rate within about a part per million of true time, and an undisciplined
// crystal's is off by tens of ppm. Linux slews a clock by 500 ppm at most (adjtimex's frequency
// limit): estimates that need more to agree are not all of the offset.
constexpr double kDriftPpm = 10, kMostDriftPpm = 500;
// Estimates within this factor of a rank's tightest bound are its quiet ones (below).
constexpr double kQuiet = 2;

// A slow link ends the kernels after it later than the others, for as long as it lasts: a
// release order set by the network. It moves the median of an estimate's differences by up to
// the fault's delay. Its exit spread, which bounds the estimate, shows it only where the delay
// varies from instance to instance (it is measured on the clocks the order moved); on the fake
// NCCL's delayed links it did, by milliseconds (docs/faults.md, sweep 43). The offset itself only
// drifts: an estimate (o_j, e_j) at t_j puts it at t within o_j +- (e_j + D |t - t_j|). Each
// estimate takes the narrowest of these over the rank's estimates (its own among them), not their
// intersection, which an estimate whose bound the fault made wrong would move. D is kDriftPpm,
// or twice the least drift at which the rank's quiet estimates (bounds within kQuiet of its
// tightest) agree, where that is more, so a clock that drifts faster widens it. Where they need
// more than kMostDriftPpm, some of them are a release order's, and which cannot be told: every
// estimate's bound then reaches over all the quiet estimates' ranges.
void take_nearest_tight(std::vector<monitor::ClockEstimate>& clocks) {
  if (clocks.size() < 2) return;
  auto t = [](const monitor::ClockEstimate& e) { return static_cast<double>(e.at_ns); };
  auto o = [](const monitor::ClockEstimate& e) { return static_cast<double>(e.offset.offset_ns); };
  auto b = [](const monitor::ClockEstimate& e) { return static_cast<double>(e.offset.error_ns); };
  double tightest = INFINITY;
  for (const auto& e : clocks) tightest = std::min(tightest, b(e));
  auto quiet = [&](const monitor::ClockEstimate& e) { return b(e) <= kQuiet * tightest; };
  double needed = 0;                        // parts per unit
  double low = INFINITY, high = -INFINITY;  // the quiet estimates' ranges
  for (std::size_t i = 0; i < clocks.size(); ++i) {
    if (!quiet(clocks[i])) continue;
    low = std::min(low, o(clocks[i]) - b(clocks[i]));
    high = std::max(high, o(clocks[i]) + b(clocks[i]));
    for (std::size_t j = i + 1; j < clocks.size(); ++j)
      if (const double apart = std::abs(t(clocks[j]) - t(clocks[i])); apart > 0 && quiet(clocks[j]))
        needed = std::max(
            needed, (std::abs(o(clocks[j]) - o(clocks[i])) - b(clocks[i]) - b(clocks[j])) / apart);
  }
  if (needed > kMostDriftPpm * 1e-6) {
    for (auto& e : clocks)
      e.offset.error_ns = bounded_ns(std::max({b(e), o(e) - low, high - o(e)}));
    return;
  }
  const double drift = std::max(kDriftPpm * 1e-6, 2 * needed);
  std::vector<monitor::ClockEstimate> taken = clocks;
  for (std::size_t i = 0; i < clocks.size(); ++i) {
    const monitor::ClockEstimate* best = &clocks[i];
    double best_bound = b(clocks[i]);
    for (const auto& e : clocks)
      if (const double bound = b(e) + drift * std::abs(t(clocks[i]) - t(e)); bound < best_bound) {
        best = &e;
        best_bound = bound;
      }
    taken[i].offset.offset_ns = best->offset.offset_ns;
    taken[i].offset.error_ns = bounded_ns(best_bound);
  }
  clocks = std::move(taken);
}

// Processes on one machine read one CLOCK_MONOTONIC (now_ns() follows it within tens of
// nanoseconds): a rank on the host of a rank aligned before it has that rank's offset exactly,
// where its own estimates agree within their bounds. They need not: a test skews the clocks
// of one host's ranks (COMMTAP_TEST_CLOCK_SKEW), and two machines may carry one name.
void share_host_clocks(Job& job, const std::vector<int>& order, const Anchors& anchors,
                       ClockMethod& method) {
  for (std::size_t i = 0; i < order.size(); ++i) {
    Rank& r = job.ranks.at(order[i]);
    if (!anchors.estimate_instances.count(order[i])) continue;  // MPI's, or the reference
    const Rank* same = nullptr;
    for (std::size_t j = 0; j < i && same == nullptr; ++j)
      if (job.ranks.at(order[j]).host == r.host) same = &job.ranks.at(order[j]);
    const bool agrees =
        same != nullptr && std::all_of(r.clocks.begin(), r.clocks.end(), [&](const auto& e) {
          const double theirs =
              static_cast<double>(same->aligned(e.at_ns) - static_cast<std::int64_t>(e.at_ns));
          return std::abs(static_cast<double>(e.offset.offset_ns) - theirs) <=
                 static_cast<double>(e.offset.error_ns);
        });
    if (agrees) {
      r.clocks = same->clocks;
      r.init_offset_ns = same->init_offset_ns;
      ++method.host_ranks;
    } else {
      ++method.collective_ranks;
    }
    for (const auto& e : r.clocks)
      method.error_ns = std::max(method.error_ns, static_cast<double>(e.offset.error_ns));
  }
}

// Each rank's monotonic clock on the wall clock: the reference's, moved by its offset (the
// hosts' wall clocks agree to NTP's milliseconds, the estimates to microseconds).
// (Job::wall_minus_aligned is the first rank's, as load_facts sets it.)
void set_wall_clocks(Job& job, const AlignmentStart& start, const std::map<int, WallRange>& walls) {
  const std::int64_t reference_wall = job.ranks.begin()->second.wall_minus_monotonic;
  for (auto& [number, r] : job.ranks) {
    if (r.mpi_clock || number == start.reference) continue;
    if (start.aligned.count(number)) {
      r.wall_minus_monotonic =
          bounded_ns(static_cast<double>(reference_wall) +
                     static_cast<double>(r.clocks.empty() ? r.init_offset_ns
                                                          : r.clocks.front().offset.offset_ns));
      continue;
    }
    // Not aligned (no collective it shares completed): its own wall clock against the
    // reference's puts it within its range's width, not within microseconds.
    if (auto w = walls.find(number); w != walls.end() && w->second.known()) {
      r.wall_minus_monotonic = w->second.middle();
      r.init_offset_ns =
          bounded_ns(static_cast<double>(w->second.middle()) - static_cast<double>(reference_wall));
    }
  }
}

}  // namespace

// How a rank's offset to rank 0 is estimated from completions (docs/analyzer.md):
//
// For each collective instance that completed on the rank and on a rank already aligned (rank 0
// to begin with, then, round by round, ranks aligned through a chain of shared communicators),
// the difference d = (the aligned rank's exit, on rank 0's clock) - (this rank's exit, on its
// own clock) is the offset plus how much later the aligned rank's kernel ended. That second part
// is small (NCCL releases all ranks together, within about one network latency) and takes
// either sign from instance to instance, so the median of d over consecutive instances is the
// offset; one estimate per kPerEstimate instances follows drift, and finds where a fault
// began within a few seconds of a training loop's collectives (take_nearest_tight).
//
// The error bound of an estimate is the sum of:
// - half the interquartile range of its differences times sqrt(32 / n): the uncertainty of
//   their median (for normally scattered differences its standard error is 1.25 sigma / sqrt(n)
//   = 0.93 IQR / sqrt(n), so this is about three standard errors at any n);
// - the median spread of its instances' exit times over all their ranks once aligned (latest
//   minus earliest exit): how far apart completions of one collective typically are, which a
//   constant order of release between two ranks (one always released a hop after the other) is
//   not larger than, and which the differences alone cannot show (it moves their median);
// - the error of the aligned rank it was compared with (errors add along a chain).
// Not covered: a systematic release order larger than the typical spread, which would need a
// collective whose ranks are released one after another; NCCL's are not, but a slow link sets
// one while it lasts (take_nearest_tight).
bool align_clocks_by_collectives(Job& job, std::string& error) {
  ClockMethod& method = job.clock_method;
  method = ClockMethod{};
  AlignmentStart start = alignment_start(job, method);
  if (start.unaligned.empty()) return true;
  std::map<int, WallRange> walls;
  if (!wall_ranges(job, walls, error)) return false;
  // The reference's monotonic clock on the wall clock: what the job's windows, --since and --at
  // and the report's time axes are reckoned in.
  if (start.reference >= 0)
    if (auto w = walls.find(start.reference); w != walls.end() && w->second.known())
      job.ranks.at(start.reference).wall_minus_monotonic = w->second.middle();
  Completions completions;
  if (!read_completions(job, walls, completions, error)) return false;
  Anchors anchors(completions.instances);
  const std::vector<int> order = align_in_rounds(job, completions, start, anchors);
  add_exit_spreads(job, completions, start.aligned, anchors);
  for (const auto& [number, groups] : anchors.estimate_instances)
    take_nearest_tight(job.ranks.at(number).clocks);
  share_host_clocks(job, order, anchors, method);
  set_wall_clocks(job, start, walls);
  method.unaligned.assign(start.unaligned.begin(), start.unaligned.end());
  return true;
}

}  // namespace commtap::analyzer
