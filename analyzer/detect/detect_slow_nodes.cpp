// Slow ranks and hosts, the compute side (docs/analyzer.md).
#include "analyzer/detect/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {

namespace {

// One collective instance (communicator, sequence number): its earliest and latest arrival.
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

// An interval of the job's (aligned) time during which the others waited for one rank or host.
struct WaitInterval {
  std::int64_t from = 0, to = 0;
};

// The instances of each communicator, in sequence order. A file's rows come rank by rank and,
// per rank, communicator by communicator in sequence order (the primary key's order), and every
// rank records the same sampled instances: a lookup goes on from where the one before it in the
// same run ended, a step or two, where a hash table costs a hash and a probe of a table too large
// for the cache at each of the two lookups per record (13.8% of analyzing 1,000 ranks x 10,000
// instances on one thread, docs/benchmarks.md).
class InstanceTable {
 public:
  struct Comm {
    std::vector<std::uint64_t> seqs;  // ascending
    std::vector<Instance> instances;  // instances[i] is seqs[i]'s
    // Instances that came after others of higher sequence numbers (a file whose rows begin
    // before the table's last), kept here until they are as many as half the sorted ones, then
    // merged in: a file adding instances out of order costs a hash insertion each, never a copy
    // of every instance, however its instances interleave with the others'.
    std::unordered_map<std::uint64_t, Instance> unsorted;
  };
  // Where the last lookup of a run ended.
  struct Cursor {
    std::int64_t comm_id = 0;
    const Comm* comm = nullptr;
    std::size_t at = 0;
  };

  // The instance (comm_id, seq), or none.
  const Instance* find(Cursor& cursor, std::int64_t comm_id, std::uint64_t seq) const {
    if (cursor.comm == nullptr || cursor.comm_id != comm_id) {
      auto it = comms_.find(comm_id);
      if (it == comms_.end()) return nullptr;
      cursor = {comm_id, &it->second, 0};
    }
    const std::vector<std::uint64_t>& seqs = cursor.comm->seqs;
    std::size_t at = cursor.at;
    if (at < seqs.size() && seqs[at] <= seq) {
      // Forward, a few steps; past them (instances this rank has not got) by bisection.
      for (int step = 0; at < seqs.size() && seqs[at] < seq; ++at)
        if (++step == kSteps) {
          at = static_cast<std::size_t>(
              std::lower_bound(seqs.begin() + static_cast<std::ptrdiff_t>(at), seqs.end(), seq) -
              seqs.begin());
          break;
        }
    } else {
      // Back (another rank's run begins) or past the end.
      at = static_cast<std::size_t>(std::lower_bound(seqs.begin(), seqs.end(), seq) - seqs.begin());
    }
    cursor.at = at;
    if (at < seqs.size() && seqs[at] == seq) return &cursor.comm->instances[at];
    if (cursor.comm->unsorted.empty()) return nullptr;
    auto unsorted = cursor.comm->unsorted.find(seq);
    return unsorted == cursor.comm->unsorted.end() ? nullptr : &unsorted->second;
  }
  Instance* find(Cursor& cursor, std::int64_t comm_id, std::uint64_t seq) {
    return const_cast<Instance*>(std::as_const(*this).find(cursor, comm_id, seq));
  }

  // Folds one file's arrivals in: first the instances the table lacks (a file adds a few at most
  // once the first has been read), then each arrival.
  template <class Arrivals>
  void add(const Arrivals& arrivals) {
    std::map<std::int64_t, std::vector<std::uint64_t>> missing;
    Cursor cursor;
    for (const auto& a : arrivals)
      if (find(cursor, a.comm_id, a.seq) == nullptr) missing[a.comm_id].push_back(a.seq);
    for (auto& [comm_id, seqs] : missing) insert(comms_[comm_id], seqs);
    cursor = {};
    for (const auto& a : arrivals) find(cursor, a.comm_id, a.seq)->arrive(a.t, a.rank, a.host);
  }

  // Keeps the instances `keep` holds for.
  template <class Keep>
  void keep_if(const Keep& keep) {
    for (auto it = comms_.begin(); it != comms_.end();) {
      Comm& c = it->second;
      merge_unsorted(c);
      std::size_t kept = 0;
      for (std::size_t i = 0; i < c.seqs.size(); ++i)
        if (keep(it->first, c.instances[i])) {
          c.seqs[kept] = c.seqs[i];
          c.instances[kept++] = c.instances[i];
        }
      c.seqs.resize(kept);
      c.instances.resize(kept);
      it = kept == 0 ? comms_.erase(it) : std::next(it);
    }
  }
  // Each instance, once keep_if has run.
  template <class Each>
  void each(const Each& each_instance) const {
    for (const auto& [comm_id, c] : comms_)
      for (const Instance& i : c.instances) each_instance(comm_id, i);
  }
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& [comm_id, c] : comms_) n += c.seqs.size() + c.unsorted.size();
    return n;
  }
  bool empty() const { return comms_.empty(); }

 private:
  static constexpr int kSteps = 8;
  // Adds the sequence numbers `seqs` (new to `c`, possibly repeated): appended where they all
  // come after its last (a file's rows in order), else kept unsorted.
  static void insert(Comm& c, std::vector<std::uint64_t>& seqs) {
    std::sort(seqs.begin(), seqs.end());
    seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
    if (c.seqs.empty() || seqs.front() > c.seqs.back()) {
      c.seqs.insert(c.seqs.end(), seqs.begin(), seqs.end());
      c.instances.resize(c.seqs.size());
      return;
    }
    for (std::uint64_t seq : seqs) c.unsorted.try_emplace(seq);
    if (c.unsorted.size() > c.seqs.size() / 2) merge_unsorted(c);
  }
  static void merge_unsorted(Comm& c) {
    if (c.unsorted.empty()) return;
    std::vector<std::pair<std::uint64_t, Instance>> added(c.unsorted.begin(), c.unsorted.end());
    c.unsorted.clear();
    std::sort(added.begin(), added.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    Comm merged;
    merged.seqs.reserve(c.seqs.size() + added.size());
    merged.instances.reserve(c.seqs.size() + added.size());
    std::size_t old = 0;
    for (auto& [seq, instance] : added) {
      for (; old < c.seqs.size() && c.seqs[old] < seq; ++old) {
        merged.seqs.push_back(c.seqs[old]);
        merged.instances.push_back(c.instances[old]);
      }
      merged.seqs.push_back(seq);
      merged.instances.push_back(instance);
    }
    for (; old < c.seqs.size(); ++old) {
      merged.seqs.push_back(c.seqs[old]);
      merged.instances.push_back(c.instances[old]);
    }
    c = std::move(merged);
  }
  std::unordered_map<std::int64_t, Comm> comms_;
};
using Instances = InstanceTable;

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
  // When the others waited for it (or its host): per instance it arrived last at, from the next
  // latest rank's (other host's) arrival to its own.
  std::vector<WaitInterval> waits, host_waits;

  // Adds what another file's rows of the same rank and window counted (not the observations,
  // which the merge adds in order: LatenessObserver::merge).
  void merge(const RankWindow& other) {
    instances += other.instances;
    lateness.merge(other.lateness);
    waited_instances += other.waited_instances;
    waited_last += other.waited_last;
    waited_lateness.merge(other.waited_lateness);
    waited_in_flight.merge(other.waited_in_flight);
    for (const auto& [site, count] : other.sites) {
      SiteCount& into = sites[site];
      into.waited += count.waited;
      into.last += count.last;
      into.host_last += count.host_last;
    }
    for (const auto& [comm, range] : other.seq_range) {
      auto [it, added] = seq_range.try_emplace(comm, range);
      it->second.first = std::min(it->second.first, range.first);
      it->second.second = std::max(it->second.second, range.second);
    }
    earliest = std::min(earliest, other.earliest);
    latest = std::max(latest, other.latest);
    waits.insert(waits.end(), other.waits.begin(), other.waits.end());
    host_waits.insert(host_waits.end(), other.host_waits.begin(), other.host_waits.end());
  }
};

constexpr int kWindowsKept = 30;  // persistence looks at the latest windows only

// A host is stalled in a window when its ranks' writer ticks were held off the CPU (heartbeats'
// stalled_ns) at least this share of the time, and that many times the other hosts' median plus
// the margin: on a busy machine every rank waits its turn now and then, and only a host that
// waits clearly more has lost CPU.
constexpr double kStalledShare = 0.05, kStalledFactor = 3.0, kStalledMargin = 0.02;

// Each rank's cumulative stalled_ns and throttled_ns by wall time, to take shares of time spans.
class StallCounters {
 public:
  bool load(const Job& job, std::string& error) {
    // Each rank's rows in time order.
    return each_stall_row(
        job,
        [&](const StallRow& s) {
          if (s.wall_ns <= job.until_wall)
            rows_[s.rank].push_back({s.wall_ns, s.stalled_ns, s.throttled_ns});
        },
        error);
  }
  // The rank's share of wall time held off the CPU between its rows nearest `from` and `to` (-1:
  // unknown, or under half a second of rows): the writer's ticks' estimate, or the time its
  // cgroup CPU limit throttled it where the kernel counted more (the ticks miss part of a
  // throttled period: NPB SP's throttled rank, 14.9 s throttled against 13.5 s stalled in all,
  // docs/faults.md sweep 47).
  double share(int rank, std::int64_t from, std::int64_t to) const {
    auto found = rows_.find(rank);
    if (found == rows_.end() || found->second.empty()) return -1;
    const auto& rows = found->second;
    auto at = [&](std::int64_t wall) {  // the last row at or before `wall`, else the first
      auto it = std::upper_bound(rows.begin(), rows.end(), wall,
                                 [](std::int64_t w, const Row& row) { return w < row.wall_ns; });
      return it == rows.begin() ? rows.front() : *(it - 1);
    };
    const Row first = at(from), last = at(to);
    if (last.wall_ns - first.wall_ns < 500'000'000) return -1;
    std::int64_t held = last.stalled_ns - first.stalled_ns;
    if (first.throttled_ns >= 0 && last.throttled_ns >= first.throttled_ns)
      held = std::max(held, last.throttled_ns - first.throttled_ns);
    return static_cast<double>(held) / static_cast<double>(last.wall_ns - first.wall_ns);
  }
  bool empty() const { return rows_.empty(); }

 private:
  struct Row {
    std::int64_t wall_ns, stalled_ns, throttled_ns;  // throttled_ns -1: not recorded
  };
  std::map<int, std::vector<Row>> rows_;
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

// Or by change: a host whose stalled share rose against its own earlier seconds and stands
// above the other hosts' since. A machine whose load gives every host a 10-25% stalled share
// puts a process stopped half the time under the factor above (docs/faults.md sweep 18: 58% vs
// thresholds of 48-58%); against its own history the stop is a step of 30 points or more. A load
// that lifts every host lifts the others' too, and a host that is stalled from the job's start
// has no step (the factor above is then the test).
constexpr double kStallRise = 0.15;        // the step, and its lead over the others since
constexpr int kStallBaselineBins = 3;      // 1 s bins before the step, at least
constexpr int kStallRecentBins = 2;        // and after it, the latest ones still up
constexpr int kStallHistoryBins = 30;      // the history looked at
constexpr double kStallPersistent = 0.75;  // of the bins since the step, above its half-way mark

double mean_over(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double sum = 0;
  for (std::size_t k = from; k < to; ++k) sum += v[k];
  return to > from ? sum / static_cast<double>(to - from) : 0.0;
}

// The host's step in its series of bins (`others`: the other hosts' median, per bin): true when
// the best split rose by kStallRise, the latest bins are still up, and since the step it leads
// the others by kStallRise.
bool stall_step(const std::vector<double>& own, const std::vector<double>& others) {
  const std::size_t n = own.size();
  if (n < static_cast<std::size_t>(kStallBaselineBins + kStallRecentBins)) return false;
  std::size_t best = 0;
  double best_score = 0;
  for (std::size_t k = kStallBaselineBins; k + kStallRecentBins <= n; ++k) {
    const double rise = mean_over(own, k, n) - mean_over(own, 0, k);
    const double score =
        rise * std::sqrt(static_cast<double>(k * (n - k)) / static_cast<double>(n));
    if (rise >= kStallRise && score > best_score) {
      best_score = score;
      best = k;
    }
  }
  if (best == 0) return false;
  const double before = mean_over(own, 0, best), after = mean_over(own, best, n);
  const double mark = before + (after - before) / 2;
  std::size_t above = 0;
  for (std::size_t k = best; k < n; ++k) above += own[k] >= mark ? 1 : 0;
  return mean_over(own, n - kStallRecentBins, n) >= mark &&
         static_cast<double>(above) >= kStallPersistent * static_cast<double>(n - best) &&
         after >= mean_over(others, best, n) + kStallRise;
}

// The hosts stalled by change over the bins that end at `end`.
std::set<int> hosts_stalled_by_change(const Job& job, const StallCounters& stalls,
                                      std::int64_t from, std::int64_t end) {
  constexpr std::int64_t kBinNs = 1'000'000'000;
  const auto bins =
      static_cast<int>(std::min<std::int64_t>(kStallHistoryBins, (end - from) / kBinNs));
  std::map<int, std::vector<double>> own, others;  // host -> per known bin
  for (int b = 0; b < bins; ++b) {
    const std::int64_t to = end - static_cast<std::int64_t>(bins - 1 - b) * kBinNs;
    const std::map<int, double> shares = host_stall_shares(job, stalls, to - kBinNs, to);
    if (shares.size() < 2) continue;
    for (const auto& [host, share] : shares) {
      std::vector<double> rest;
      for (const auto& [other, s] : shares)
        if (other != host) rest.push_back(s);
      own[host].push_back(share);
      others[host].push_back(median_of(rest));
    }
  }
  std::set<int> stalled;
  for (const auto& [host, series] : own)
    if (stall_step(series, others.at(host))) stalled.insert(host);
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
  std::set<int> stalled = stalled_hosts_of(shares);
  stalled.merge(hosts_stalled_by_change(job, stalls, job.start_wall(), end));
  for (int host : stalled)
    if (shares.count(host))
      out.stalled[job.hosts[static_cast<std::size_t>(host)]] = shares.at(host);
  return true;
}

namespace {

// A job without MPI (NCCL's collectives only): its ranks wait for a late one on the GPU, after
// their NCCL calls returned, so the time inside calls says nothing; the collectives' own
// enqueue-to-completion times say who waited.
bool without_mpi(const Job& job) {
  return std::all_of(job.ranks.begin(), job.ranks.end(),
                     [](const auto& r) { return r.second.mpi_library == "none"; });
}

// A file's rows come rank by rank (the primary key's order): one lookup per rank.
struct RankCache {
  int number = -1;
  const Rank* rank = nullptr;
  const Rank* find(const Job& job, int wanted) {
    if (wanted != number || rank == nullptr) {
      number = wanted;
      auto found = job.ranks.find(wanted);
      rank = found == job.ranks.end() ? nullptr : &found->second;
    }
    return rank;
  }
};

// ---- Pass 1: the earliest and latest arrival of every instance ----------------------------------

// One file's arrivals, in the order read: the merge folds them into the instances as a serial
// read would, row by row (a per-file table of instances would cost a table per file and as
// many lookups again, a file holding one rank's row of each instance).
struct Arrival {
  std::int64_t comm_id;
  std::uint64_t seq;
  std::int64_t t;  // on rank 0's clock
  std::int32_t rank, host;
};
struct FileArrivals {
  std::vector<Arrival> arrivals;
  RankCache cache;
};

bool read_arrivals(const Job& job, const HealthOptions& options, Instances& instances,
                   std::string& error) {
  const std::int64_t since = since_aligned_ns(job, options), until = job.until_aligned();
  // A rank nothing aligned yet (a job without MPI in its first seconds) is on rank 0's clock by
  // its wall clock, within its range's width (collective_clocks.cpp): tens of milliseconds, which
  // reads as lateness. Its instances go incomplete and are not compared (the fake NCCL's rank 3
  // read 25 ms late at each of its first 8 all-reduces, on one machine's clock, and was named
  // slow_host 4 s into a clean run, docs/faults.md sweep 44).
  const std::set<int> unaligned(job.clock_method.unaligned.begin(),
                                job.clock_method.unaligned.end());
  return observe_completed_collectives<FileArrivals>(
      job,
      [&](FileArrivals& file, const CollectiveRow& s) {
        if (unaligned.count(s.rank)) return;
        const Rank* r = file.cache.find(job, s.rank);
        if (r == nullptr) return;
        const std::int64_t t = r->aligned(static_cast<std::uint64_t>(s.enter_ns));
        if (t < since || t > until) return;
        file.arrivals.push_back({s.comm_id, s.seq, t, s.rank, r->host});
      },
      [&](FileArrivals&& file) { instances.add(file.arrivals); }, error, /*arrivals_only=*/true);
}

// The windows the verdicts are made in: the latest kWindowsKept of the span of the compared
// instances, and the spans of independent observations (evidence.hpp) in them.
struct WindowGrid {
  std::int64_t first = INT64_MAX, last = INT64_MIN;  // the earliest arrivals' span
  std::int64_t window_ns = 0;
  int first_kept = 0, windows = 0;
  // Per rank, the first waited instance of each span of span_ns counts as an observation
  // (longer than kIndependentNs where windows are so long that a rank's spans would take much
  // memory), whichever communicator it was on; which one is first does not depend on who
  // arrived last, so the observations stay a fair sample.
  std::int64_t span_ns = 0, kept_from = 0;
  std::size_t spans = 0;
  // The window of an instance that began at `earliest` (< 0: before the kept ones).
  int window_of(std::int64_t earliest) const {
    return static_cast<int>((earliest - first) / window_ns) - first_kept;
  }
  // Where window `w` begins, on the wall clock.
  std::int64_t wall_of(const Job& job, int w) const {
    return first + job.wall_minus_aligned + static_cast<std::int64_t>(first_kept + w) * window_ns;
  }
};

// Keeps the instances every member recorded (on communicators of two or more) and lays the
// windows over them (windows == 0: none is left).
WindowGrid keep_complete_instances(const Job& job, const HealthOptions& options,
                                   Instances& instances) {
  WindowGrid grid;
  instances.keep_if([&](std::int64_t comm_id, const Instance& i) {
    auto comm = job.comms.find(comm_id);
    return comm != job.comms.end() && comm->second.size >= 2 &&
           i.count == static_cast<std::uint32_t>(comm->second.size);
  });
  instances.each([&](std::int64_t, const Instance& i) {
    grid.first = std::min(grid.first, i.earliest);
    grid.last = std::max(grid.last, i.earliest);
  });
  if (instances.empty()) return grid;
  grid.window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const int windows_total = static_cast<int>((grid.last - grid.first) / grid.window_ns) + 1;
  grid.first_kept = std::max(0, windows_total - kWindowsKept);
  grid.windows = windows_total - grid.first_kept;
  grid.span_ns = std::max<std::int64_t>(kIndependentNs, grid.window_ns / 100);
  grid.kept_from = grid.first + static_cast<std::int64_t>(grid.first_kept) * grid.window_ns;
  grid.spans = static_cast<std::size_t>((grid.last - grid.kept_from) / grid.span_ns + 1);
  return grid;
}

// ---- Pass 2: each rank's lateness per window, who arrived last, the evidence ------------------

// A rank's first waited instance of a span in one file: an observation, unless an earlier file
// held one of that span (the merge decides, in file order).
struct SpanHit {
  std::size_t span;
  int window;
  bool last, host_last;
  int members;
  double host_chance;
};

struct Lateness {
  std::map<int, std::vector<RankWindow>> per_rank;
  std::vector<std::vector<std::uint32_t>> host_last;  // [window][host]: instances it was last at
  std::vector<std::uint32_t> window_instances;        // [window]: waited instances
  std::map<int, std::vector<bool>> observed_span;     // per rank: spans observed
};

struct FileLateness {
  Lateness lateness;  // observed_span: this file's own; host_last and window_instances unused
  // Waited instances a host's rank arrived last at, by (window, host); and per window.
  std::map<std::pair<int, int>, std::uint32_t> host_last;
  std::map<int, std::uint32_t> window_instances;
  std::map<int, std::vector<SpanHit>> hits;  // per rank, in row order
  RankCache cache;
  InstanceTable::Cursor instance_cursor;
  std::vector<RankWindow>* windows = nullptr;
  std::vector<bool>* seen = nullptr;
  std::vector<SpanHit>* rank_hits = nullptr;
};

// What pass 2 reads besides the rows (read-only: shared by the reading threads).
class LatenessObserver {
 public:
  LatenessObserver(const Job& job, const HealthOptions& options, const Instances& instances,
                   const WindowGrid& grid)
      : job_(job),
        instances_(instances),
        grid_(grid),
        without_mpi_(without_mpi(job)),
        min_lateness_(options.min_lateness_ms * 1e6),
        ranks_on_host_(job.hosts.size(), 0) {
    // Where some members are not known, a host counts as likely as all its ranks would be.
    for (const auto& [number, r] : job.ranks) ++ranks_on_host_[static_cast<std::size_t>(r.host)];
    // Per communicator, each host's share of its members: the chance that host arrives last.
    for (const auto& [id, comm] : job.comms) {
      std::map<int, double> shares;
      int known = 0;
      for (int member : comm.members) {
        auto r = job.ranks.find(member);
        if (r == job.ranks.end()) continue;
        shares[r->second.host] += 1.0 / std::max(1, comm.size);
        ++known;
      }
      if (known == comm.size) host_share_[id] = std::move(shares);
    }
  }

  void observe(FileLateness& file, const CollectiveRow& s) const {
    const int rank = s.rank;
    const std::int64_t comm_id = s.comm_id;
    const std::uint64_t seq = s.seq;
    const Instance* found = instances_.find(file.instance_cursor, comm_id, seq);
    if (found == nullptr) return;
    const Instance& i = *found;
    const int w = grid_.window_of(i.earliest);
    if (w < 0) return;
    Lateness& l = file.lateness;
    if (rank != file.cache.number || file.cache.rank == nullptr) {
      // A row of a rank with no ranks row (not a rank of the job, load_facts) whose instance the
      // others completed: not compared, as its arrivals were not.
      auto known = job_.ranks.find(rank);
      if (known == job_.ranks.end()) return;
      file.cache.number = rank;
      file.cache.rank = &known->second;
      file.windows = &l.per_rank[rank];
      if (file.windows->empty()) file.windows->resize(static_cast<std::size_t>(grid_.windows));
      file.seen = &l.observed_span[rank];
      if (file.seen->empty()) file.seen->resize(grid_.spans);
      file.rank_hits = &file.hits[rank];
    }
    const Rank& r = *file.cache.rank;
    const std::int64_t t = r.aligned(static_cast<std::uint64_t>(s.enter_ns));
    RankWindow& rw = (*file.windows)[static_cast<std::size_t>(w)];
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
    if (static_cast<double>(i.latest - i.earliest) < min_lateness_) return;
    ++rw.waited_instances;
    rw.waited_lateness.add(t - i.earliest);
    if (without_mpi_) rw.waited_in_flight.add(s.exit_ns - s.enter_ns);
    const bool arrived_last = rank == i.latest_rank;
    const bool host_last_here = i.latest_host == r.host;
    if (arrived_last) {
      ++file.host_last[{w, r.host}];
      ++file.window_instances[w];
      ++rw.waited_last;
    }
    RankWindow::SiteCount& at_site = rw.sites[{comm_id, s.site}];
    ++at_site.waited;
    at_site.last += arrived_last;
    at_site.host_last += host_last_here;
    std::vector<bool>& seen = *file.seen;
    const auto span = static_cast<std::size_t>((i.earliest - grid_.kept_from) / grid_.span_ns);
    if (span >= seen.size() || seen[span]) return;
    seen[span] = true;
    const int members = job_.comms.at(comm_id).size;
    double chance_of_host = std::min(
        1.0, static_cast<double>(ranks_on_host_[static_cast<std::size_t>(r.host)]) / members);
    if (auto shares = host_share_.find(comm_id); shares != host_share_.end())
      if (auto share = shares->second.find(r.host); share != shares->second.end())
        chance_of_host = share->second;
    file.rank_hits->push_back({span, w, arrived_last, host_last_here, members, chance_of_host});
  }

  // Adds one file's partial to `into`, in file order.
  static void merge(Lateness& into, FileLateness&& file) {
    Lateness& l = file.lateness;
    for (const auto& [at, count] : file.host_last)
      into.host_last[static_cast<std::size_t>(at.first)][static_cast<std::size_t>(at.second)] +=
          count;
    for (const auto& [w, count] : file.window_instances)
      into.window_instances[static_cast<std::size_t>(w)] += count;
    for (auto& [rank, windows] : l.per_rank) {
      auto [it, added] = into.per_rank.try_emplace(rank, std::move(windows));
      if (!added)
        for (std::size_t w = 0; w < windows.size(); ++w) it->second[w].merge(windows[w]);
      std::vector<bool>& seen = into.observed_span[rank];
      if (seen.empty()) seen.resize(l.observed_span[rank].size());
      // The observations, in the order a serial read makes them.
      for (const SpanHit& hit : file.hits[rank]) {
        if (seen[hit.span]) continue;
        seen[hit.span] = true;
        RankWindow& rw = it->second[static_cast<std::size_t>(hit.window)];
        rw.observations += 1;
        rw.last_hits += hit.last;
        rw.host_last_hits += hit.host_last;
        rw.chance += 1.0 / hit.members;
        rw.host_chance += hit.host_chance;
      }
    }
  }

 private:
  const Job& job_;
  const Instances& instances_;
  const WindowGrid& grid_;
  const bool without_mpi_;
  const double min_lateness_;
  std::vector<int> ranks_on_host_;
  std::map<std::int64_t, std::map<int, double>> host_share_;
};

bool read_lateness(const Job& job, const HealthOptions& options, const Instances& instances,
                   const WindowGrid& grid, Lateness& lateness, std::string& error) {
  const LatenessObserver observer(job, options, instances, grid);
  lateness.host_last.assign(static_cast<std::size_t>(grid.windows),
                            std::vector<std::uint32_t>(job.hosts.size(), 0));
  lateness.window_instances.assign(static_cast<std::size_t>(grid.windows), 0);
  return observe_completed_collectives<FileLateness>(
      job, [&](FileLateness& file, const CollectiveRow& s) { observer.observe(file, s); },
      [&](FileLateness&& file) { LatenessObserver::merge(lateness, std::move(file)); }, error);
}

// ---- Per window: which hosts were held off the CPU, which ranks stand out ---------------------

struct StallWindows {
  StallCounters counters;
  std::vector<std::map<int, double>> shares;  // [window]: per host (stall counters' files only)
  std::vector<std::set<int>> stalled;         // [window]: the hosts that stand out
};

bool read_stall_windows(const Job& job, const WindowGrid& grid, StallWindows& out,
                        std::string& error) {
  if (!out.counters.load(job, error)) return false;
  out.stalled.resize(static_cast<std::size_t>(grid.windows));
  out.shares.resize(static_cast<std::size_t>(grid.windows));
  if (out.counters.empty()) return true;
  for (int w = 0; w < grid.windows; ++w) {
    const std::int64_t from = grid.wall_of(job, w);
    const auto i = static_cast<std::size_t>(w);
    out.shares[i] = host_stall_shares(job, out.counters, from, from + grid.window_ns);
    out.stalled[i] = stalled_hosts_of(out.shares[i]);
  }
  return true;
}

// The windows' verdicts, per rank.
struct WindowVerdicts {
  std::map<int, int> flagged, eligible, stalled;          // windows: late, judged, late and stalled
  std::map<int, std::vector<std::pair<int, bool>>> late;  // (window, late), in order
  // Per judged window: its median lateness, the others' baseline, its (or its host's) share of
  // last arrivals.
  std::map<int, std::vector<double>> lateness, others, last_fraction;
};

WindowVerdicts judge_windows(const Job& job, const HealthOptions& options, Lateness& l,
                             const WindowGrid& grid, const StallWindows& stalls) {
  WindowVerdicts v;
  const double min_lateness = options.min_lateness_ms * 1e6;
  for (int w = 0; w < grid.windows; ++w) {
    const auto wi = static_cast<std::size_t>(w);
    std::vector<double> medians;
    std::map<int, double> median_of_rank;
    for (auto& [rank, ws] : l.per_rank) {
      const RankWindow& rw = ws[wi];
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
      const RankWindow& rw = l.per_rank[rank][wi];
      double fraction = static_cast<double>(rw.waited_last) / rw.waited_instances;
      if (job.hosts.size() > 1 && l.window_instances[wi] > 0)
        fraction = std::max(fraction,
                            static_cast<double>(l.host_last[wi][static_cast<std::size_t>(host)]) /
                                l.window_instances[wi]);
      ++v.eligible[rank];
      v.lateness[rank].push_back(m);
      v.others[rank].push_back(baseline);
      v.last_fraction[rank].push_back(fraction);
      // Late and last to arrive often; or late and its host held off the CPU: in a pipeline the
      // stage that waits for a stalled one arrives as late as it does and takes turns being
      // last, and only the stall tells them apart.
      const bool stalled = stalls.stalled[wi].count(host) > 0;
      const bool late = m >= min_lateness && m >= options.lateness_factor * baseline &&
                        (fraction >= options.last_fraction || stalled);
      if (late && stalled) ++v.stalled[rank];
      v.late[rank].emplace_back(w, late);
      if (late) ++v.flagged[rank];
    }
  }
  return v;
}

// For `commtap report`: every rank's median lateness in every kept window (null where it had
// too few instances), with the windows' start on the job's clock, so that a chart can put them
// on a time axis and a heat map has one cell per rank and window.
LatenessTable lateness_table(const Job& job, const HealthOptions& options, const Lateness& l,
                             const WindowGrid& grid) {
  LatenessTable table;
  for (const auto& [rank, ws] : l.per_rank) {
    table.ranks.push_back(rank);
    std::vector<std::optional<double>> row;
    for (const RankWindow& rw : ws)
      row.push_back(rw.instances < static_cast<std::uint32_t>(options.min_instances)
                        ? std::nullopt
                        : std::optional<double>(rw.lateness.quantile(0.5) / 1e6));
    table.ms.push_back(std::move(row));
  }
  // Seconds since the job's start (its earliest MPI_Init) on the wall clock.
  table.first_s =
      static_cast<double>(grid.first + job.wall_minus_aligned - job.start_wall()) / 1e9 +
      grid.first_kept * options.window_s;
  table.window_s = options.window_s;
  table.last_s = static_cast<double>(grid.last + job.wall_minus_aligned - job.start_wall()) / 1e9;
  return table;
}

// Persistence is judged on the latest windows: late in at least that share of some run of
// windows that ends with the latest (and in two at least where there are two), so that a
// machine that became slow late in a long job is named after a few windows, not after most of
// the job's, and one noisy window at the end names nobody.
struct LateRuns {
  std::set<int> slow;
  int onset_window = 0;          // the earliest window of a slow rank's late run
  std::map<int, int> run_start;  // per slow rank, the first window of its late run
};

LateRuns persistent_ranks(const HealthOptions& options, const WindowVerdicts& v, int windows) {
  LateRuns runs;
  runs.onset_window = windows;
  for (const auto& [rank, late] : v.late) {
    const int needed = std::min<int>(2, static_cast<int>(late.size()));
    int flagged = 0;
    // The longest such run: its windows are the evidence (How sure a finding is).
    for (std::size_t length = 1; length <= late.size(); ++length) {
      flagged += late[late.size() - length].second ? 1 : 0;
      if (flagged >= needed && flagged >= options.persistence * static_cast<double>(length)) {
        runs.slow.insert(rank);
        runs.run_start[rank] = late[late.size() - length].first;
      }
    }
    if (runs.slow.count(rank))
      runs.onset_window = std::min(runs.onset_window, runs.run_start[rank]);
  }
  return runs;
}

// Arriving late is not enough: a rank that waits in a receive for a message that comes late
// (a slow link or host upstream) arrives late too, and then spends more of its time inside
// MPI than the others. A rank that computes too slowly spends less (the others wait for it).
// Each rank's share of time inside blocking MPI calls, from the aggregates, measured over the
// late windows only: a machine that became slow late in a job spent the same share as the
// others before. Without MPI, the median time its late windows' collectives took from enqueue
// to completion stands for it (ns; the comparisons are ratios): the others wait on the GPU.
std::map<int, double> in_flight_medians(const Lateness& l, int onset_window, int windows) {
  std::map<int, double> share;
  for (const auto& [rank, ws] : l.per_rank) {
    LogHistogram in_flight;
    for (int w = onset_window; w < windows; ++w)
      for (int b = 0; b < LogHistogram::kBuckets; ++b) {
        const auto count =
            ws[static_cast<std::size_t>(w)].waited_in_flight.counts[static_cast<std::size_t>(b)];
        in_flight.counts[static_cast<std::size_t>(b)] += count;
        in_flight.total += count;
      }
    if (in_flight.total > 0) share[rank] = in_flight.quantile(0.5);
  }
  return share;
}

// Per rank: MPI time in the aggregates rows since `since_wall`, divided by the time those rows
// cover. A row holds the calls completed since the rank's previous write (every write has a
// heartbeat row at the same wall time), and that is not always an interval: the first row
// covers the time since MPI_Init (1.5 s for a 1 s interval, seen), the row written at
// MPI_Finalize part of an interval, a writer delayed on a busy node more than one (dividing by a
// whole interval per row gave shares over 100%), and a window without calls has no aggregates
// row but counts as time outside MPI. A row's MPI time can exceed the time it covers:
// nonblocking operations count from their post to their completion, and a halo exchange's
// receive and send overlap. So each row counts at most the time it covers.
bool mpi_time_shares(const Job& job, std::int64_t since_wall, std::map<int, double>& share,
                     std::string& error) {
  std::map<int, std::map<std::int64_t, double>> rows;  // rank -> write -> MPI ns
  if (!each_aggregate_total(
          job,
          [&](const WindowWriteRow& s) {
            if (s.wall_ns > job.until_wall) return;
            rows[s.rank][s.wall_ns] += static_cast<double>(s.mpi_ns);
          },
          error) ||
      !each_heartbeat_write(
          job,
          [&](const WindowWriteRow& s) {
            if (s.wall_ns <= job.until_wall && job.ranks.count(s.rank))
              rows[s.rank].try_emplace(s.wall_ns, 0.0);
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
    if (covered_ns > 0) share[rank] = busy_ns / covered_ns;
  }
  return true;
}

// ---- The verdict on each slow rank or host ------------------------------------------------------

template <class Map>
typename Map::mapped_type count_of(const Map& map, int key) {
  auto found = map.find(key);
  return found == map.end() ? typename Map::mapped_type{} : found->second;
}

// What the subjects are judged from.
struct SlowNodeFacts {
  const Job& job;
  const HealthOptions& options;
  const Lateness& lateness;
  const WindowGrid& grid;
  const StallWindows& stalls;
  const WindowVerdicts& verdicts;
  const LateRuns& runs;
  const std::map<int, double>& mpi_share;
  bool without_mpi = false;
  // A late rank whose host was held off the CPU in most of its late windows: stalled.
  bool stalled_rank(int rank) const {
    return count_of(verdicts.stalled, rank) * 2 > count_of(verdicts.flagged, rank);
  }
};

// A host whose ranks are all slow (named by its first), or one slow rank of a host.
struct Subject {
  int host = 0;
  bool whole_host = false;
  int rank = 0;
  std::vector<int> slow_ranks;  // the host's slow ranks
  std::vector<int> members() const { return whole_host ? slow_ranks : std::vector<int>{rank}; }
};

// The subject's lateness against the others', and its time inside MPI (or its collectives'
// time in flight, without MPI) against theirs.
struct Comparison {
  std::vector<double> own, others, fractions;
  bool own_known = false, others_known = false;  // MPI time shares
  double own_mpi = 0, others_mpi = 1;
};

Comparison compare(const SlowNodeFacts& facts, const Subject& subject) {
  Comparison c;
  for (int rank : subject.members()) {
    const auto& v = facts.verdicts;
    c.own.insert(c.own.end(), v.lateness.at(rank).begin(), v.lateness.at(rank).end());
    c.others.insert(c.others.end(), v.others.at(rank).begin(), v.others.at(rank).end());
    c.fractions.insert(c.fractions.end(), v.last_fraction.at(rank).begin(),
                       v.last_fraction.at(rank).end());
  }
  std::vector<double> own_share, others_share;
  for (const auto& [rank, share] : facts.mpi_share)
    (std::find(subject.slow_ranks.begin(), subject.slow_ranks.end(), rank) !=
             subject.slow_ranks.end()
         ? own_share
         : others_share)
        .push_back(share);
  c.own_known = !own_share.empty();
  c.others_known = !others_share.empty();
  c.own_mpi = own_share.empty() ? 0.0 : median_of(own_share);
  c.others_mpi = others_share.empty() ? 1.0 : median_of(others_share);
  return c;
}

// The late run's windows of the subject, summed: how sure (evidence.hpp), where it was late,
// and how many calls and how much time the run spans.
struct RunEvidence {
  EvidenceTest test;
  std::map<std::pair<std::int64_t, std::int64_t>, RankWindow::SiteCount> sites;
  std::map<std::int64_t, std::pair<std::uint64_t, std::uint64_t>> seq_range;
  std::int64_t earliest = INT64_MAX, latest = INT64_MIN;
  std::uint64_t instances = 0, waited = 0;
  std::vector<WaitInterval> waits;  // the members' (wait_share)
};

// How sure: over the late run's independent observations, how often this rank (or, for a host,
// one of its ranks) arrived last, against the chance of that in a healthy job (evidence.hpp).
// The run's windows are the subject's own; of a host's ranks, the one observed most stands for
// it (they meet the same collectives).
RunEvidence evidence_of_run(const SlowNodeFacts& facts, const Subject& subject) {
  const std::vector<int> members = subject.members();
  const int windows = facts.grid.windows;
  int from_window = windows;
  for (int rank : members) from_window = std::min(from_window, facts.runs.run_start.at(rank));
  int witness = members.front();
  auto observed_in_run = [&](int rank) {
    double seen = 0;
    for (int w = from_window; w < windows; ++w)
      seen += facts.lateness.per_rank.at(rank)[static_cast<std::size_t>(w)].observations;
    return seen;
  };
  for (int rank : members)
    if (observed_in_run(rank) > observed_in_run(witness)) witness = rank;
  RunEvidence run;
  EvidenceTest& test = run.test;
  test.observed_what = subject.whole_host && subject.slow_ranks.size() > 1
                           ? "one of its ranks last to arrive"
                           : "last to arrive";
  for (int w = from_window; w < windows; ++w) {
    const RankWindow& rw = facts.lateness.per_rank.at(witness)[static_cast<std::size_t>(w)];
    test.observations += rw.observations;
    test.hits += subject.whole_host ? rw.host_last_hits : rw.last_hits;
    test.chance += subject.whole_host ? rw.host_chance : rw.chance;
    test.samples += rw.waited_instances;
    run.instances += rw.instances;
    run.waited += rw.waited_instances;
    run.earliest = std::min(run.earliest, rw.earliest);
    run.latest = std::max(run.latest, rw.latest);
    for (const auto& [site, count] : rw.sites) {
      auto& into = run.sites[site];
      into.waited += count.waited;
      into.last += count.last;
      into.host_last += count.host_last;
    }
    for (const auto& [comm, range] : rw.seq_range) {
      auto [it, added] = run.seq_range.try_emplace(comm, range);
      it->second.first = std::min(it->second.first, range.first);
      it->second.second = std::max(it->second.second, range.second);
    }
  }
  for (int rank : members)
    for (int w = from_window; w < windows; ++w) {
      const RankWindow& rw = facts.lateness.per_rank.at(rank)[static_cast<std::size_t>(w)];
      const auto& waits = subject.whole_host ? rw.host_waits : rw.waits;
      run.waits.insert(run.waits.end(), waits.begin(), waits.end());
    }
  if (test.observations > 0) test.chance /= test.observations;
  // Every rank and host could have been named, from a run of windows of any length.
  test.comparisons =
      static_cast<double>(facts.job.ranks.size() + facts.job.hosts.size()) *
      (1 + std::floor(std::log2(std::max(1, count_of(facts.verdicts.eligible, subject.rank)))));
  return run;
}

// A host held off the CPU has evidence of its own: in a pipeline the stage waiting for it takes
// turns being last, so arriving last says little, while its stall counters stand out interval
// after interval. Per writer interval of the late run, whether the host stood out as stalled (as
// a window is judged), against a 5% chance; the better of the two tests counts, the
// multiplicity doubled.
void test_held_off(const SlowNodeFacts& facts, int host, RunEvidence& run) {
  EvidenceTest held;
  held.observed_what = "held off the CPU";
  held.comparisons = 2 * run.test.comparisons;
  held.chance = 0.05;
  held.spacing_s = std::max(0.5, facts.job.interval_s);
  const auto step = static_cast<std::int64_t>(held.spacing_s * 1e9);
  const std::int64_t to = run.latest + facts.job.wall_minus_aligned;
  for (std::int64_t at = run.earliest + facts.job.wall_minus_aligned; at + step <= to; at += step) {
    const std::map<int, double> shares =
        host_stall_shares(facts.job, facts.stalls.counters, at, at + step);
    if (!shares.count(host) || shares.size() < 2) continue;
    held.observations += 1;
    held.hits += stalled_hosts_of(shares).count(host) ? 1 : 0;
    ++held.samples;
  }
  run.test.comparisons *= 2;
  if (held.p_value() < run.test.p_value()) run.test = held;
}

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

// What it costs the job: the time the others spent waiting for it (its host) over the late run,
// from the instances it arrived last at (wait_share), the sequence numbers counting every call,
// sampled or not. A collective right after another, where everyone arrives together, adds
// nothing: a training step's later buckets are not counted again.
double cost_share(const RunEvidence& run) {
  if (run.instances == 0) return 0.0;
  std::uint64_t calls = 0;
  for (const auto& [comm, range] : run.seq_range) calls += range.second - range.first + 1;
  return wait_share(
      run.waits,
      static_cast<double>(run.instances) / static_cast<double>(std::max(calls, run.instances)),
      run.latest - run.earliest);
}

// The program's own imbalance looks the same as a slow machine within one job. Where the trace
// can tell: late only where the program calls some of its collectives, on time where others
// kept it waiting at the rest (rank 0 reading input before a broadcast, writing a checkpoint
// before a barrier), a slow machine being late everywhere. And rank 0, alone, is the rank
// programs give extra work (input, output, printing) whatever the machine.
struct ProgramSigns {
  std::vector<std::string> late_sites;
  bool at_some_sites = false, rank_zero = false;
  bool suspected = false;  // and not held off the CPU (the machine's, or another job's, doing)
};

ProgramSigns program_signs(const Job& job, const Subject& subject, const RunEvidence& run,
                           bool stalled) {
  ProgramSigns signs;
  RankWindow::SiteCount total;
  std::uint32_t on_time_waited = 0;
  const double chance = run.test.chance;
  for (const auto& [site, count] : run.sites) {
    total.waited += count.waited;
    if (count.waited < 4) continue;
    const double share =
        static_cast<double>(subject.whole_host ? count.host_last : count.last) / count.waited;
    if (share >= (1 + chance) / 2)
      signs.late_sites.push_back("comm " + std::to_string(site.first) + " site " +
                                 std::to_string(site.second));
    else if (share <= chance + (1 - chance) / 4)
      on_time_waited += count.waited;
  }
  signs.at_some_sites =
      !signs.late_sites.empty() && on_time_waited > 0 && on_time_waited * 5 >= total.waited;
  signs.rank_zero = subject.members() == std::vector<int>{0} && job.ranks.size() > 1;
  signs.suspected = (signs.at_some_sites || signs.rank_zero) && !stalled;
  return signs;
}

Finding slow_node_finding(const SlowNodeFacts& facts, const Subject& subject, const Comparison& c,
                          const RunEvidence& run, bool stalled) {
  const Job& job = facts.job;
  const HealthOptions& options = facts.options;
  const EvidenceTest& test = run.test;
  const double cost = cost_share(run);
  const ProgramSigns signs = program_signs(job, subject, run, stalled);
  const bool would_be_error =
      severity_by_evidence(test, options) == Severity::error && cost >= options.error_cost_share;
  Finding f;
  f.kind = subject.whole_host ? finding_kind::slow_host : finding_kind::slow_rank;
  const std::string host_name = job.hosts[static_cast<std::size_t>(subject.host)];
  f.subject = subject.whole_host ? "host " + host_name : job.rank_name(subject.rank);
  f.severity = would_be_error && !signs.suspected ? Severity::error : Severity::warning;
  f.confidence = test.confidence();
  f.first_seen_ns = static_cast<std::uint64_t>(facts.grid.wall_of(job, 0));
  f.last_seen_ns = job.now_wall;
  const int flagged = count_of(facts.verdicts.flagged, subject.rank),
            eligible = count_of(facts.verdicts.eligible, subject.rank);
  f.summary = f.subject + ": last to arrive in " + percent_text(median_of(c.fractions)) + " of " +
              with_commas(run.waited) +
              " collectives that kept the others waiting, median "
              "lateness " +
              ms_text(median_of(c.own)) + " vs " + ms_text(median_of(c.others)) +
              " for the others, " +
              (facts.without_mpi ? "its collectives take " + ms_text(c.own_mpi) +
                                       " from enqueue to completion vs " + ms_text(c.others_mpi)
                                 : "inside MPI " + percent_text(c.own_mpi) + " of the time vs " +
                                       percent_text(c.others_mpi)) +
              " for the others (compute side: it arrives late); about " + percent_text(cost) +
              " of the job's time lost; " + test.text();
  if (signs.at_some_sites && signs.suspected)
    f.summary += "; late only at " + std::to_string(signs.late_sites.size()) +
                 " of the call sites where ranks waited (" + signs.late_sites.front() +
                 (signs.late_sites.size() > 1 ? ", ..." : "") +
                 "), on time at the others: the program's own work before those calls, or a "
                 "fault that strikes only there; one job cannot tell them apart";
  else if (signs.rank_zero && signs.suspected)
    f.summary +=
        "; rank 0 is where programs do extra work (input, output, printing): one job "
        "cannot tell that from a slow machine (earlier runs in --store can)";
  LatenessEvidence evidence;
  evidence.who = {.host = host_name, .program = job.program, .ranks = subject.members()};
  evidence.last_fraction = median_of(c.fractions);
  evidence.median_lateness_ns = median_of(c.own);
  evidence.others_lateness_ns = median_of(c.others);
  evidence.windows_flagged = flagged;
  evidence.windows = eligible;
  evidence.cost_share = cost;
  evidence.test = test;
  if (signs.suspected) {
    evidence.suspected =
        signs.at_some_sites ? SuspectedStructure::call_sites : SuspectedStructure::rank_zero;
    // What it would be were it the machine (findings_store.cpp: earlier runs can say).
    evidence.severity_if_the_machine = would_be_error ? Severity::error : Severity::warning;
    if (signs.at_some_sites) evidence.late_sites = signs.late_sites;
  }
  evidence.collective_times = facts.without_mpi;
  evidence.own_collective = c.own_mpi;
  evidence.others_collective = c.others_mpi;
  // The stall share over the late windows, against the other hosts'.
  std::vector<double> own_stall, others_stall;
  for (int w = facts.runs.onset_window; w < facts.grid.windows; ++w)
    for (const auto& [h, share] : facts.stalls.shares[static_cast<std::size_t>(w)])
      (h == subject.host ? own_stall : others_stall).push_back(share);
  if (!own_stall.empty() && !others_stall.empty()) {
    evidence.stall_share = median_of(own_stall);
    evidence.others_stall_share = median_of(others_stall);
    if (stalled)
      f.summary += "; its process was held off the CPU " + percent_text(median_of(own_stall)) +
                   " of the time vs " + percent_text(median_of(others_stall)) +
                   " for the other hosts";
  }
  f.evidence.rule = std::move(evidence);
  f.host = host_name;
  if (subject.whole_host) f.avoid = avoid_host(host_name);
  return f;
}

// Judges one subject: a finding, an unproven subject, or nothing (it waits for the others).
void judge_subject(const SlowNodeFacts& facts, double stalled_mpi, const Subject& subject,
                   std::vector<Finding>& out, std::vector<UnprovenSubject>& unproven) {
  const Comparison c = compare(facts, subject);
  // Clearly less (a fifth): with equal shares nobody is waiting for this rank. A rank whose host
  // was held off the CPU in most of its late windows needs no such sign.
  const bool stalled = facts.stalled_rank(subject.rank);
  if (!stalled && c.own_known && c.others_known && c.own_mpi > 0.8 * c.others_mpi) return;
  if (!stalled && stalled_mpi >= 0 && c.own_known && c.own_mpi > stalled_mpi) return;
  RunEvidence run = evidence_of_run(facts, subject);
  if (stalled && !facts.stalls.counters.empty()) test_held_off(facts, subject.host, run);
  if (run.test.false_alarm() > facts.options.false_alarm_rate) {
    const Job& job = facts.job;
    unproven.push_back({subject.whole_host ? finding_kind::slow_host : finding_kind::slow_rank,
                        subject.whole_host
                            ? "host " + job.hosts[static_cast<std::size_t>(subject.host)]
                            : job.rank_name(subject.rank),
                        run.test.false_alarm(), run.test.text()});
    return;
  }
  out.push_back(slow_node_finding(facts, subject, c, run, stalled));
}

// Of a host whose ranks are all late, those that are late by their own loss of CPU: where some of
// its ranks were held off the CPU over their late run (kStalledShare of the time at least, and
// half as long as the most held one), and the others clearly less (kStalledFactor times) while
// they spent more of their time inside MPI than the held ones, the others are waiting for them
// (a pipeline's stage for its neighbour stage on the same host) and are left out: the held ranks
// are named, not the host. A throttled or overloaded node holds every rank of it off the CPU
// alike. Seen: a pipeline's rank 5 stopped half the time, 3 hosts x 2 ranks; rank 4 on its host
// waited for its gradients, and the host was named from 27 s to the job's end instead of the rank
// (docs/faults.md, sweep 45 T). What it cannot tell apart: a host whose ranks lose the CPU
// unequally, one of them waiting for the other besides; its held ranks are named then.
std::vector<int> late_by_own_stall(const SlowNodeFacts& facts, const std::vector<int>& ranks) {
  int from_window = facts.grid.windows;
  for (int rank : ranks) from_window = std::min(from_window, facts.runs.run_start.at(rank));
  const std::int64_t from = facts.grid.wall_of(facts.job, from_window);
  const std::int64_t to = facts.grid.wall_of(facts.job, facts.grid.windows);
  std::map<int, double> share;
  double most = 0;
  for (int rank : ranks) {
    const double s = facts.stalls.counters.share(rank, from, to);
    if (s < 0 || !facts.mpi_share.count(rank)) return ranks;  // not known for every rank
    share[rank] = s;
    most = std::max(most, s);
  }
  std::vector<int> held;
  double held_mpi = 0;
  for (int rank : ranks)
    if (share[rank] >= kStalledShare && share[rank] >= most / 2) {
      held.push_back(rank);
      held_mpi = std::max(held_mpi, facts.mpi_share.at(rank));
    }
  if (held.empty() || held.size() == ranks.size()) return ranks;
  for (int rank : ranks) {
    const bool held_rank = std::find(held.begin(), held.end(), rank) != held.end();
    if (!held_rank && (share[rank] * kStalledFactor > most || facts.mpi_share.at(rank) <= held_mpi))
      return ranks;  // neither held nor clearly waiting for the held ones
  }
  return held;
}

}  // namespace

// By lateness: who arrives last, and how late, at the aligned collective instances.
static bool slow_nodes_by_lateness(const Job& job, const HealthOptions& options,
                                   std::vector<Finding>& out, std::uint64_t& instances_compared,
                                   std::optional<LatenessTable>& lateness,
                                   std::vector<UnprovenSubject>& unproven, std::string& error) {
  Instances instances;
  if (!read_arrivals(job, options, instances, error)) return false;
  const WindowGrid grid = keep_complete_instances(job, options, instances);
  instances_compared = instances.size();
  if (instances.empty()) return true;
  Lateness l;
  StallWindows stalls;
  if (!read_lateness(job, options, instances, grid, l, error) ||
      !read_stall_windows(job, grid, stalls, error))
    return false;
  const WindowVerdicts verdicts = judge_windows(job, options, l, grid, stalls);
  lateness = lateness_table(job, options, l, grid);
  const LateRuns runs = persistent_ranks(options, verdicts, grid.windows);
  if (runs.slow.empty()) return true;
  const bool no_mpi = without_mpi(job);
  std::map<int, double> mpi_share;
  if (no_mpi)
    mpi_share = in_flight_medians(l, runs.onset_window, grid.windows);
  else if (!mpi_time_shares(
               job, std::max(since_wall_ns(job, options), grid.wall_of(job, runs.onset_window)),
               mpi_share, error))
    return false;
  const SlowNodeFacts facts{job, options, l, grid, stalls, verdicts, runs, mpi_share, no_mpi};
  // The largest time share inside MPI of the stalled late ranks: a late rank that is not stalled
  // and spends more time inside MPI than they do is waiting for them (the other stage of a
  // pipeline), not slow itself.
  double stalled_mpi = -1;
  for (int rank : runs.slow)
    if (facts.stalled_rank(rank) && mpi_share.count(rank))
      stalled_mpi = std::max(stalled_mpi, mpi_share.at(rank));
  // A host whose ranks are all slow is a slow host; otherwise the slow ranks are named.
  std::map<int, std::vector<int>> slow_by_host, ranks_by_host;
  for (const auto& [number, r] : job.ranks) ranks_by_host[r.host].push_back(number);
  for (int rank : runs.slow) slow_by_host[job.ranks.at(rank).host].push_back(rank);
  for (auto& [host, ranks] : slow_by_host)
    if (ranks.size() > 1 && ranks.size() == ranks_by_host[host].size())
      ranks = late_by_own_stall(facts, ranks);
  for (const auto& [host, ranks] : slow_by_host) {
    Subject subject;
    subject.host = host;
    subject.slow_ranks = ranks;
    subject.whole_host = ranks.size() == ranks_by_host[host].size();
    for (int rank : subject.whole_host ? std::vector<int>{ranks.front()} : ranks) {
      subject.rank = rank;
      judge_subject(facts, stalled_mpi, subject, out, unproven);
    }
  }
  return true;
}

bool detect_slow_nodes(const Job& job, const HealthOptions& options, const JobTimes& times,
                       std::vector<Finding>& out, std::uint64_t& instances_compared,
                       std::optional<LatenessTable>& lateness,
                       std::vector<UnprovenSubject>& unproven, std::string& error) {
  const std::size_t before = out.size();
  if (!slow_nodes_by_lateness(job, options, out, instances_compared, lateness, unproven, error))
    return false;
  // Then by change (detect_rank_changes.cpp), for the hosts lateness did not name: a rank last by
  // the program's design is not named by lateness, and one slow by a change need not be last.
  std::set<std::string> named;
  for (std::size_t k = before; k < out.size(); ++k) named.insert(out[k].host);
  detect_rank_changes(job, options, times, named, out);
  return true;
}

}  // namespace commtap::analyzer
