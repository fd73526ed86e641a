// slow_link and slow_host_network from the job's messages: one-way times per directed host pair
// against the size classes' baselines (docs/analyzer.md).
#include "analyzer/detect/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "analyzer/findings/statistics.hpp"

namespace commtap::analyzer {

namespace {

// A bounded sample of latencies (reservoir sampling, fixed seed).
struct Reservoir {
  static constexpr std::size_t kCapacity = 2048;
  std::vector<double> values;
  std::uint64_t seen = 0;
  void add(double v, std::mt19937_64& random) {
    ++seen;
    if (values.size() < kCapacity) {
      values.push_back(v);
    } else {
      const std::uint64_t slot = random() % seen;
      if (slot < kCapacity) values[slot] = v;
    }
  }
};

// One message of the recent window, as evidence about its link: bounds on its one-way time.
// Received by a rank that was waiting before the send: exactly its one-way time. Posted after
// the send and completed well after the post: at most receive done minus send start, at least
// done minus post (its transit once both sides were ready: a large message cannot move before
// its receive is posted, so a receiver that posts late, as a pipeline stage that computes first
// does, would otherwise read as a slow link). Already there when posted: only the upper bound.
// Censored: its receive was found done at the first look of the call that completed it, long
// after it was last seen pending (the receiver computed between post and wait;
// transfers.seen_pending_ns): it arrived somewhere in between, so its transit is bounded below
// by the last moment seen pending, not by its completion.
struct LinkObservation {
  std::int64_t start = 0;  // its send, on rank 0's clock
  double ns = 0;  // the upper bound; negative where the clocks' alignment is off by more than it
  // The lower bound: the earliest it can have arrived (its completion, or where censored the last
  // moment seen pending) minus the later of send start and post.
  double transit_ns = 0;
  bool upper_bound = false;
  bool censored = false;
  int size_class = 0;
  bool operator<(const LinkObservation& other) const { return start < other.start; }
};

struct OwnHistory {
  bool known = false;  // its first window counted
  double share = 0;
};

// One directed host pair's messages, judged.
struct PairCell {
  double ratio = 0, median = 0, base = 0;
  std::uint64_t messages = 0, recent_slow = 0, recent_fast = 0;
  // Recent messages censored (LinkObservation) and not shown fast: neither slow nor fast.
  std::uint64_t recent_censored = 0;
  std::uint64_t half_slow[2] = {0, 0}, half_fast[2] = {0, 0};
  // Where its recent messages turned slow (recent_onset; INT64_MIN: nowhere inside them), and its
  // slow and fast messages in each half of the time from there to its newest.
  std::int64_t onset = INT64_MIN, onset_span = 0;
  std::uint64_t onset_half_slow[2] = {0, 0}, onset_half_fast[2] = {0, 0};
  // Slow in each half of the time since its onset, kMinSlow messages at least, however short
  // that time: turning slow, not (yet) shown to be.
  bool turning = false;
  bool by_onset = false;  // slow since its onset, not over the whole window
  // Each recent message's time over its size class's baseline, and the excess a slow one
  // has at least (threshold less baseline), for the round-trip check.
  std::vector<double> recent_excess, slow_excess;
  std::vector<double> recent_ns;  // the recent window's measured one-way times
  // The same per size class, each as a share of its class's slow threshold (1 or more: slow),
  // for telling which way a link slow both ways is slow (slow_way).
  std::map<int, std::vector<double>> recent_by_class;
  bool slow = false;
  // Slow, but as the echo of its reverse, which the few-packet messages or the probes' pings
  // show is the slow way (slow_way, which says which in `way_told_by`): named as the reverse's
  // link, not as its own or both.
  bool echo_of_reverse = false;
  const char* way_told_by = "";
  // Slow as its reverse's echo where the reverse's own messages did not read slow (too few, or
  // censored): the link is named the reverse way from this pair's messages (slow_way).
  bool names_reverse = false;
  bool clock_only = false;  // read slow, but the round trip is not: a clock error
  // Some slow messages and no more fast ones, but not (yet) enough to call it slow.
  bool suspect = false;
  // How often its recent messages were slow against how often healthy pairs' are, and since
  // when they count as recent (rank 0's clock).
  EvidenceTest test;
  // The pair's own share of slow messages before its recent ones (own_history_share); 0 where
  // its history does not count. Unknown where no window of it counted (a young job, a pair with
  // few messages before its recent ones).
  double history_share = 0;
  bool history_known = false;
  // Where that is unknown and its recent messages turned slow (onset): the same up to the onset.
  OwnHistory to_onset;
  std::int64_t recent_from = INT64_MAX;
  std::vector<std::pair<std::int64_t, std::int64_t>> slow_stretches;  // MessageLinkEvidence's
  // Its recent decided messages by send time, each slow or shown fast: how it read since a
  // neighbouring link turned slow (name_slow_links).
  std::vector<std::pair<std::int64_t, bool>> decided;
};
using PairCells = std::map<std::pair<int, int>, PairCell>;

// Recent slow messages a slow link has at least; and messages that make a pair known (fast
// ones, or measured ones, name_slow_links and apart_at_host).
constexpr std::uint64_t kMinSlow = 3, kMinKnown = 3;

bool involves(const std::pair<int, int>& pair, int h) {
  return pair.first == h || pair.second == h;
}

// Who completes a job's transfers, which decides how a slow link's slowness spreads to other
// pairs. The program's MPI calls: a rank whose MPI_Waitall (or blocking send) is held by a send
// stuck on the link completes its other receives late, so the pairs into the link's sender read
// slow too. A proxy (a job without MPI: NCCL's proxy thread progresses each peer's transfers on
// its own, whatever the program calls): no call holds another peer's receive, and a transfer row
// is its last step, timed from the step's post (a send's when its data was ready,
// nccl/profiler_events.cpp), so a ring that forwards late what came to it late posts late and
// reads fast. Nothing spreads: with the fake NCCL's `ctap1 -> ctap2` delayed 4 ms, `ctap2 ->
// ctap3` read 2 of 47 recent messages slow once the clocks held (docs/faults.md, sweep 43).
enum class Completion { mpi_calls, proxy };
Completion completion_of(const Job& job) {
  return job.clock_method.mpi_ranks == 0 && job.clock_method.collective_ranks > 0
             ? Completion::proxy
             : Completion::mpi_calls;
}

// A slow direction's echo: `other` is `link` itself, its reverse, or, where MPI calls complete
// the transfers (Completion), a pair into the link's sender.
bool explained_by_link(const std::pair<int, int>& other, const std::pair<int, int>& link,
                       Completion completion) {
  return other == link || other == std::make_pair(link.second, link.first) ||
         (completion == Completion::mpi_calls && other.second == link.first);
}

// A pair (a -> b) whose receiver was itself waiting in another transfer: b's own messages to a
// third host c read slow beyond chance (slow or suspect, or kMinSlow slow messages at a
// one-sided chance under kWaitingChance each). A receive's completion is observed when b's
// library runs; while b waits in a send to c that the network holds (a rate-limited peer's
// 300 KB, 120 ms), the libraries since the watched receives (interpose/yield.hpp) stamp the
// arrival, but a blocking collective, or a trace from before them, holds it, and (a -> b) reads
// as slow as b's wait: NPB CG's ctap1 -> ctap2 at 98 ms against 15 ms with ctap3 rate-limited
// (docs/faults.md, sweep 18). Such a pair is left to the rule that names (b -> c) or b's host.
// Only where (b -> c) is about as slow (echoes_of): a wait many times shorter than (a -> b)'s
// transits cannot have made them, and is rather their echo (a pipeline's stage forwards late
// what came to it late over the slow link). Never under a proxy (Completion): no call of the
// receiver's completes its receives.
constexpr double kWaitingChance = 0.05;
// Whether `echo`'s recent transits are much faster than `cause`'s (under kAsSlowElsewhere of its
// median): too little to explain it, or to be explained by anything but it. False where either
// has none measured.
constexpr double kAsSlowElsewhere = 0.5;
bool much_faster(const PairCell& echo, const PairCell& cause) {
  return !echo.recent_ns.empty() && !cause.recent_ns.empty() &&
         median_of(echo.recent_ns) < kAsSlowElsewhere * median_of(cause.recent_ns);
}
// Whether `link` stands apart at its host `h`: each of its slow directions (the link, and its
// reverse where `both`) is slower than every other pair of h the same way by much (much_faster),
// with one such pair at least that has recent messages measured (kMinKnown). A host whose process
// the scheduler holds off receives late from every peer (and sends late to every peer) alike: a
// link into a host held off 7-10% of the time, at 17 ms against the host's other incoming pair at
// 0.8 ms, is the link, the stall its consequence (a receiver that polls with sched_yield on a
// loaded machine waits its turn each time it yields, and it yields as long as its message is
// late: split_pipeline's ctap0 -> ctap1 +5 ms at 2 busy loops, docs/faults.md sweep 36).
bool apart_at_host(const std::pair<int, int>& link, bool both, int h, const PairCells& pairs) {
  std::vector<std::pair<int, int>> directions = {link};
  if (both) directions.push_back({link.second, link.first});
  for (const auto& direction : directions) {
    if (!involves(direction, h)) continue;
    const bool into = direction.second == h;
    const PairCell& mine = pairs.at(direction);
    int known = 0;
    for (const auto& [other, cell] : pairs) {
      if (other == direction || (into ? other.second != h : other.first != h)) continue;
      if (other == std::make_pair(link.second, link.first)) continue;  // the link's own reverse
      if (cell.recent_ns.size() < kMinKnown) continue;
      if (!much_faster(cell, mine)) return false;
      ++known;
    }
    if (known == 0) return false;
  }
  return true;
}

bool receiver_waited_elsewhere(const std::pair<int, int>& pair, const PairCells& pairs,
                               Completion completion) {
  if (completion == Completion::proxy) return false;  // no call of the receiver's held it
  const PairCell& mine = pairs.at(pair);
  for (const auto& [other, cell] : pairs) {
    // A direction that reads slow by a clock error only (drop_clock_only) was not waited in.
    if (other.first != pair.second || other.second == pair.first || cell.clock_only) continue;
    if (much_faster(cell, mine)) continue;
    if (cell.slow || cell.suspect) return true;
    if (cell.recent_slow >= kMinSlow && cell.test.p_value() <= kWaitingChance) return true;
  }
  return false;
}

// How far back from now `from` (rank 0's clock) is.
double recent_ns(const Job& job, std::int64_t from) {
  return from == INT64_MAX ? 0.0
                           : static_cast<double>(static_cast<std::int64_t>(job.now_wall) -
                                                 job.wall_minus_aligned - from);
}

// Per (sender host, receiver host, size class): one-way times of the messages measured in flight
// (for the baseline and the matrix); per directed pair, every message as evidence; and the
// messages of the stall span that stalled (detect_stalled_links), kept with their size class,
// judged against its baseline later.
using CellKey = std::tuple<int, int, int>;
struct StallCandidate {
  int from, to, size_class;
  std::int64_t start;
  double ns;
  int from_rank, to_rank;
  std::int64_t done;
};
struct MessageSamples {
  std::map<CellKey, Reservoir> cells;
  std::map<std::pair<int, int>, std::vector<LinkObservation>> observed;
  std::vector<StallCandidate> stall_candidates;
};

MessageSamples sample_messages(const Job& job, const HealthOptions& options,
                               const std::vector<JoinedMessage>& messages,
                               const std::vector<double>& correction) {
  MessageSamples out;
  std::mt19937_64 random(12345);
  const std::int64_t stall_since =
      static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned - stall_span_ns(options);
  // A rank nothing aligned (no MPI estimate, no completed collective to align it by: a job
  // without MPI in its first seconds) is on rank 0's clock by its wall clock, off by up to the
  // hosts' disagreement, milliseconds: a message to or from it has no measured one-way time.
  // Seen: an NCCL job 2 s old named a link of its ring at a 717 us median where its rows gave
  // 85-90 us (docs/faults.md, sweep 34).
  const std::set<int> unaligned(job.clock_method.unaligned.begin(),
                                job.clock_method.unaligned.end());
  for (const JoinedMessage& m : messages) {
    if (unaligned.count(m.from_rank) || unaligned.count(m.to_rank)) continue;
    const auto sender =
        static_cast<std::int64_t>(correction[static_cast<std::size_t>(m.from_host)]);
    const auto receiver =
        static_cast<std::int64_t>(correction[static_cast<std::size_t>(m.to_host)]);
    const std::int64_t start = m.start + sender, posted = m.posted + receiver,
                       done = m.done + receiver, pending = m.pending + receiver;
    // In flight (the receive was posted before the send, or the data came in well after the
    // post): its one-way time lies between its transit (completion minus the later of send and
    // post) and completion minus send (LinkObservation). Otherwise the data was there when the
    // receive was posted: the one-way time was at most that, and a receiver that posts late
    // says nothing more about the link. The baselines are of transits measured: not of censored
    // ones, whose completion is the receiver's first look, not the arrival.
    constexpr std::int64_t kCopyNs = 50'000;  // a receive of data already there
    const bool in_flight = posted <= start || done - posted >= kCopyNs;
    const bool censored = done - pending >= kCopyNs;
    const CellKey key{m.from_host, m.to_host, size_class(m.bytes)};
    const auto one_way = static_cast<double>(done - start);
    const std::int64_t earliest = censored ? std::max(pending, posted) : done;
    const std::int64_t transit = earliest - std::max(start, posted);
    if (in_flight && !censored) out.cells[key].add(std::max(0.0, double(transit)), random);
    out.observed[{m.from_host, m.to_host}].push_back(
        {start, one_way, static_cast<double>(transit), !in_flight, censored, std::get<2>(key)});
    // Stalled: counted from the moment both sides were ready (a message that waited for a late
    // receive did not stall), to the earliest it can have arrived (a censored one's stall is not
    // known).
    const std::int64_t stalled = transit;
    if (start >= stall_since && stalled >= kStallNs)
      out.stall_candidates.push_back({m.from_host, m.to_host, std::get<2>(key), start,
                                      static_cast<double>(stalled), m.from_rank, m.to_rank, done});
  }
  return out;
}

// Baseline per size class: the lower quartile of the cells' medians (robust to a slow host, whose
// cells can be most of a small cluster's).
struct Baselines {
  std::map<CellKey, double> cell_median;
  std::map<int, double> of_class;
};

Baselines size_class_baselines(const std::map<CellKey, Reservoir>& cells) {
  Baselines b;
  std::map<int, std::vector<double>> class_medians;
  for (auto& [key, reservoir] : cells) {
    const double m = median_of(reservoir.values);
    b.cell_median[key] = m;
    class_medians[std::get<2>(key)].push_back(m);
  }
  for (auto& [c, medians] : class_medians) b.of_class[c] = lower_quartile_of(medians);
  return b;
}

void record_stalls(const Job& job, const std::vector<StallCandidate>& candidates,
                   const Baselines& b, MessageEvidence& evidence) {
  for (const StallCandidate& s : candidates) {
    auto c = b.of_class.find(s.size_class);
    if (c == b.of_class.end() || s.ns < kStallFactor * std::max(1000.0, c->second)) continue;
    evidence.stalls.push_back({job.hosts[static_cast<std::size_t>(s.from)],
                               job.hosts[static_cast<std::size_t>(s.to)], s.start, s.ns, c->second,
                               s.from_rank, s.to_rank, s.done});
  }
}

// Per pair, its recent decided messages (slow, or shown fast) by send time: the evidence.
using Decided = std::map<std::pair<int, int>, std::vector<std::pair<std::int64_t, bool>>>;

// Per size class: (baseline, slow threshold); none where no message of it was measured. Clocks
// aligned by collective completions (a job without MPI) are good to their error bound only: a
// one-way time cannot read slow by less than that (an NCCL ring's slow link otherwise shows on
// the link after it, its completions skewing the estimates).
class Thresholds {
 public:
  Thresholds(const Job& job, const HealthOptions& options, const Baselines& b)
      : options_(options),
        b_(b),
        clock_error_ns_(job.clock_method.collective_ranks + job.clock_method.host_ranks > 0
                            ? job.clock_method.error_ns
                            : 0.0) {}
  std::optional<std::pair<double, double>> of(int size) const {
    auto c = b_.of_class.find(size);
    if (c == b_.of_class.end()) return std::nullopt;
    const double base = std::max(1000.0, c->second);
    return std::make_pair(
        base, std::max({base * options_.link_factor, base + options_.min_link_delay_us * 1e3,
                        base + clock_error_ns_}));
  }

 private:
  const HealthOptions& options_;
  const Baselines& b_;
  const double clock_error_ns_;
};

// The pair's own history: its messages sent before its recent ones, in windows of `window_ns`
// from its first, each decided as the recent ones are and thinned to one per kIndependentNs.
// Where its first window holds at least kMinHistoryDecided such, the lowest share of slow ones
// ((slow + 1) / (decided + 2)) over the windows that do; 0 otherwise. Some programs make one
// pair's transits read slow all the time: a receiver that posts early and computes before it
// waits (LULESH, a pipeline stage) completes, on a busy machine, half its receives or more after
// the threshold from the job's set-up on, while the pairs around it rarely do (docs/faults.md,
// sweep 21). A link that becomes slow raises its pair's share above the pair's own earlier
// windows; the program's pattern does not. The lowest window, so that windows since a fault
// began do not raise the bar against it; the first must count, else the pair's nature before a
// fault is unknown (a pair with few messages whose only counted windows are since the fault).
// A history slow in more than kMostlySlow of its messages in every window is no pattern: a
// program's compute between post and wait varies, so some of those receives complete in time,
// while a link slow since the pair's first messages delays them all (it is judged against the
// other pairs, as before). What this cannot tell apart: a link slow since the pair's first
// messages by less than the threshold in some of them, and a pair slow by the program's pattern.
constexpr std::size_t kMinRecent = 12;
constexpr std::size_t kMinHistoryDecided = 18;
constexpr double kMostlySlow = 0.75;
OwnHistory own_history_share(const std::vector<LinkObservation>& observations, std::size_t recent,
                             std::int64_t window_ns, const Thresholds& thresholds) {
  double lowest = 1;
  int windows = 0;  // counted; -1 once the first did not count
  std::size_t slow = 0, decided = 0;
  std::int64_t window_end = INT64_MIN, next = INT64_MIN;
  auto close_window = [&] {
    if (windows < 0) return;
    if (decided < kMinHistoryDecided && windows == 0) windows = -1;
    if (decided >= kMinHistoryDecided) {
      const double n = static_cast<double>(decided);
      const double share = (static_cast<double>(slow) + 1) / (n + 2);
      lowest = std::min(lowest, share);
      ++windows;
    }
    slow = decided = 0;
  };
  for (std::size_t i = 0; i < recent; ++i) {
    const LinkObservation& o = observations[i];
    if (o.start >= window_end) {
      if (window_end != INT64_MIN) close_window();
      window_end = o.start + window_ns;
    }
    const auto t = thresholds.of(o.size_class);
    if (!t || o.start < next) continue;
    const bool fast = o.ns < t->second, slow_one = !o.upper_bound && o.transit_ns >= t->second;
    if (!fast && !slow_one) continue;
    ++decided;
    slow += slow_one;
    next = o.start + kIndependentNs;
  }
  if (window_end != INT64_MIN) close_window();
  return {.known = windows > 0, .share = windows > 0 && lowest <= kMostlySlow ? lowest : 0.0};
}

// The stretches of `sent` (decided messages by send time) slow with no two fast ones in a row
// between, two slow ones at least: each its first and last slow send. A pair slow by the
// program's pattern reads fast now and then (a clean split pipeline's gradients ctap2 -> ctap1,
// 11 of 12 slow at 1 ms against 66 us, had one fast at 0.22 ms a second before a link probe that
// found the pair fine: with that one ending the stretch, the round fell outside it and the link
// was named, docs/faults.md sweep 57 Y). Slow ones still outnumber fast ones in each stretch.
std::vector<std::pair<std::int64_t, std::int64_t>> slow_stretches(
    const std::vector<std::pair<std::int64_t, bool>>& sent) {
  std::vector<std::pair<std::int64_t, std::int64_t>> stretches;
  std::size_t first = 0, last = 0, slow = 0;  // the current stretch's first and last slow one
  auto close = [&] {
    if (slow >= 2) stretches.emplace_back(sent[first].first, sent[last].first);
    slow = 0;
  };
  for (std::size_t i = 0; i < sent.size(); ++i) {
    if (sent[i].second) {
      if (slow == 0) first = i;
      last = i;
      ++slow;
    } else if (i > 0 && !sent[i - 1].second) {
      close();  // two fast ones in a row
    }
  }
  close();
  return stretches;
}

// Where a pair's recent decided messages (by send time) turned slow: the first of the newest run
// of them in which slow ones most outnumber fast ones (the latest such where several tie), where
// fast ones come before it. A fault that begins inside the window splits it there: its messages
// before read fast and after mostly slow, a stray slow message long before it is outweighed by the
// fast ones after that, and a pair slow throughout has no onset inside it. Its index in `sent`,
// 0 where none.
std::size_t recent_onset(const std::vector<std::pair<std::int64_t, bool>>& sent) {
  long sum = 0, best = 0;
  std::size_t onset = sent.size();
  for (std::size_t i = sent.size(); i-- > 0;) {
    sum += sent[i].second ? 1 : -1;
    if (sum > best) {
      best = sum;
      onset = i;
    }
  }
  return onset < sent.size() && best > 0 ? onset : 0;
}

// Recent: sent in the last window, or, where that holds fewer than kMinRecent decided ones
// kIndependentNs apart (a job that exchanges messages every few seconds), back to the
// kMinRecent-th newest such. Counts each pair's recent slow and fast messages.
Decided recent_decisions(std::int64_t recent_aligned, std::int64_t window_ns,
                         const Thresholds& thresholds,
                         std::map<std::pair<int, int>, std::vector<LinkObservation>>& observed,
                         PairCells& pairs) {
  Decided decided;
  for (auto& [pair, observations] : observed) {
    PairCell& cell = pairs[pair];
    std::sort(observations.begin(), observations.end());
    auto is_decided = [&](const LinkObservation& o) {
      auto t = thresholds.of(o.size_class);
      return t && (o.ns < t->second || (!o.upper_bound && o.transit_ns >= t->second));
    };
    std::size_t from = observations.size(), independent = 0;
    std::int64_t counted = INT64_MAX;  // the send time of the latest one counted
    while (from > 0 &&
           (observations[from - 1].start >= recent_aligned || independent < kMinRecent)) {
      --from;
      if (is_decided(observations[from]) && observations[from].start <= counted - kIndependentNs) {
        ++independent;
        counted = observations[from].start;
      }
    }
    if (from < observations.size()) cell.recent_from = observations[from].start;
    const OwnHistory history = own_history_share(observations, from, window_ns, thresholds);
    cell.history_share = history.share;
    cell.history_known = history.known;
    for (std::size_t i = from; i < observations.size(); ++i) {
      const LinkObservation& o = observations[i];
      const auto t = thresholds.of(o.size_class);
      if (!t) continue;
      const auto [base, threshold] = *t;
      cell.recent_excess.push_back(o.ns - base);
      if (!o.upper_bound && !o.censored) {
        cell.recent_ns.push_back(o.transit_ns);
        cell.recent_by_class[o.size_class].push_back(o.transit_ns / threshold);
      }
      cell.slow_excess.push_back(threshold - base);
      if (o.ns < threshold) {
        ++cell.recent_fast;
        decided[pair].emplace_back(o.start, false);
      } else if (!o.upper_bound && o.transit_ns >= threshold) {
        ++cell.recent_slow;
        decided[pair].emplace_back(o.start, true);
      } else if (o.censored) {
        ++cell.recent_censored;
      }
    }
    if (auto mine = decided.find(pair); mine != decided.end()) {
      cell.decided = mine->second;
      cell.slow_stretches = slow_stretches(mine->second);
      if (const std::size_t onset = recent_onset(mine->second); onset > 0) {
        cell.onset = mine->second[onset].first;
        if (!cell.history_known) {
          // Sorted by send time: those sent before the onset.
          const auto before = std::partition_point(
              observations.begin() + static_cast<std::ptrdiff_t>(from), observations.end(),
              [&](const LinkObservation& o) { return o.start < cell.onset; });
          cell.to_onset = own_history_share(observations,
                                            static_cast<std::size_t>(before - observations.begin()),
                                            window_ns, thresholds);
        }
      }
    }
  }
  return decided;
}

// One decided message per pair and kIndependentNs: a burst of traffic or one descheduled
// receiver is one observation however many messages it touched. Also counts slow against fast
// in each half of the span each pair's messages cover.
std::map<std::pair<int, int>, std::vector<bool>> thin_decisions(const Decided& decided,
                                                                std::int64_t now_aligned,
                                                                PairCells& pairs) {
  std::map<std::pair<int, int>, std::vector<bool>> thinned;
  for (auto& [pair, sent] : decided) {
    std::int64_t next = INT64_MIN;
    for (const auto& [start, slow] : sent)
      if (start >= next) {
        thinned[pair].push_back(slow);
        next = start + kIndependentNs;
      }
    PairCell& cell = pairs[pair];
    const std::int64_t middle = sent.front().first + (sent.back().first - sent.front().first) / 2;
    for (const auto& [start, slow] : sent)
      ++(slow ? cell.half_slow : cell.half_fast)[start > middle];
    if (cell.onset != INT64_MIN) {
      // To now, not to its newest message: pairs that turned slow at once (a host's) are judged
      // over the same time, and a pair that went quiet leaves its newer half empty.
      cell.onset_span = std::max(sent.back().first, now_aligned) - cell.onset;
      const std::int64_t since_middle = cell.onset + cell.onset_span / 2;
      for (const auto& [start, slow] : sent)
        if (start >= cell.onset)
          ++(slow ? cell.onset_half_slow : cell.onset_half_fast)[start > since_middle];
    }
  }
  return thinned;
}

// The chance that a healthy pair's message reads slow: the lower quartile of the other pairs'
// shares of slow observations (a slow host makes most of a small cluster's pairs slow), each
// share estimated as (slow + 1) / (observations + 2), so that a pair seen a few times does not
// vouch for a low rate (a job's first second: 2 of 4 slow on one pair, none of 4 on two others,
// and a third with 4 of 5 read as 1 in 3,000), never under kHealthySlowShare (a busy node
// delays some messages of every pair), nor under the pair's own earlier share (own_history_share:
// a pair slow by the program's pattern is its own baseline).
void test_pairs(const std::map<std::pair<int, int>, std::vector<bool>>& thinned, PairCells& pairs) {
  constexpr double kHealthySlowShare = 0.05;
  for (auto& [pair, cell] : pairs) {
    auto own = thinned.find(pair);
    if (own == thinned.end()) continue;
    std::vector<double> other_shares;
    for (const auto& [other, observations] : thinned)
      if (other != pair && !observations.empty())
        other_shares.push_back(
            (static_cast<double>(std::count(observations.begin(), observations.end(), true)) + 1) /
            (static_cast<double>(observations.size()) + 2));
    cell.test.observed_what = "slow messages";
    cell.test.observations = static_cast<double>(own->second.size());
    cell.test.hits = static_cast<double>(std::count(own->second.begin(), own->second.end(), true));
    cell.test.chance =
        std::max({kHealthySlowShare, lower_quartile_of(other_shares), cell.history_share});
    cell.test.samples = cell.recent_slow + cell.recent_fast;
    cell.test.comparisons = static_cast<double>(std::max<std::size_t>(1, thinned.size()));
  }
}

// A link is slow when, in the recent window, at least kMinSlow messages took longer than the
// threshold, in each half of the time its recent messages span slow messages were at least as
// many as the messages shown to be faster, and the evidence holds; suspect with some slow
// messages and no more fast ones. A pair whose own history is unknown (own_history_share) may be
// slow by the program's pattern, which only its history tells: it is slow only where more than
// kMostlySlow of its recent observations are, as a link slow since the pair's first messages
// makes them; in the job's first window, more than kNearlyAllSlow (a job's set-up and first
// steps, which every pair's history starts with, are its least typical seconds). Seen: NPB CG at
// load 4, whose ctap0 -> ctap1 and ctap3 -> ctap2 read slow in half their messages from the
// job's start, named ctap0 -> ctap1 a slow link 7 s in (docs/faults.md, sweep 34); and at load
// 3.8 its rank 0's 8-byte partial sums to rank 1 read slow in 0.82-0.86 of the observations of
// the job's first 3-7 s, and of its whole run, against 0.1 the other way (sweep 35). What this
// cannot tell apart in a job's first window (or a pair's first kMinHistoryDecided observations):
// a link that slows under that share of the pair's messages from a pair slow by the program's
// pattern; the link probes can (they name a fault there from the job's first round against the
// round's other pairs, docs/schema.md, probes).
constexpr double kNearlyAllSlow = 0.9;
// Or slow since its messages turned slow inside the window (recent_onset), in each half of the
// time since, for kOnsetSpanShare of the window at least: a fault that begins inside the window
// is shown to last from its onset, not from the window's start, which it had to fill three
// quarters of (an NCCL ring's link +3 ms, sampled at 4 messages a second and read slow in 70% of
// them, was named 9-11 s after it began; docs/faults.md sweep 44). Its history then runs up to
// the onset where the one before the window is too short (own_history_share).
constexpr double kOnsetSpanShare = 0.5;
void judge_cells(const Job& job, const HealthOptions& options, PairCells& pairs,
                 MessageEvidence& evidence) {
  const bool job_young = static_cast<double>(static_cast<std::int64_t>(job.now_wall) -
                                             job.start_wall()) < options.window_s * 1e9;
  for (auto& [pair, cell] : pairs) {
    const double n = static_cast<double>(std::max<std::uint64_t>(1, cell.messages));
    cell.ratio /= n;
    cell.median /= n;
    cell.base /= n;
    auto half_slow = [](const std::uint64_t(&slow)[2], const std::uint64_t(&fast)[2], int h) {
      return slow[h] > 0 && slow[h] >= fast[h];
    };
    const bool slow_in_window = half_slow(cell.half_slow, cell.half_fast, 0) &&
                                half_slow(cell.half_slow, cell.half_fast, 1);
    cell.turning = cell.onset != INT64_MIN &&
                   cell.onset_half_slow[0] + cell.onset_half_slow[1] >= kMinSlow &&
                   half_slow(cell.onset_half_slow, cell.onset_half_fast, 0) &&
                   half_slow(cell.onset_half_slow, cell.onset_half_fast, 1);
    const bool slow_since_onset = cell.turning && static_cast<double>(cell.onset_span) >=
                                                      kOnsetSpanShare * options.window_s * 1e9;
    const bool slow_by_effect =
        cell.recent_slow >= kMinSlow && (slow_in_window || slow_since_onset);
    cell.by_onset = !slow_in_window && slow_since_onset;
    const bool pattern_unknown =
        !cell.history_known &&
        cell.test.hits <= (job_young ? kNearlyAllSlow : kMostlySlow) * cell.test.observations;
    cell.slow =
        slow_by_effect && !pattern_unknown && cell.test.false_alarm() <= options.false_alarm_rate;
    // A pair whose history before the window is too short (a young job's) but whose messages
    // turned slow inside it: those before the onset are its history, how it read before. Both
    // ways are tried: a program's pattern can make the seconds before a fault slow too (NPB CG's
    // first seconds, whose link was named by the mostly-slow rule above).
    if (slow_by_effect && !cell.slow && !cell.history_known && cell.to_onset.known) {
      EvidenceTest against_onset = cell.test;
      against_onset.chance = std::max(against_onset.chance, cell.to_onset.share);
      if (against_onset.false_alarm() <= options.false_alarm_rate) {
        cell.test = against_onset;
        cell.slow = true;
      }
    }
    if (slow_by_effect && !cell.slow)
      evidence.unproven.push_back(
          {finding_kind::slow_link,
           "link " + job.hosts[static_cast<std::size_t>(pair.first)] + " -> " +
               job.hosts[static_cast<std::size_t>(pair.second)],
           cell.test.false_alarm(),
           cell.test.text() + (pattern_unknown ? "; the pair's own history is too short to tell "
                                                 "the program's pattern, and not most are slow"
                                               : "")});
    cell.suspect = !cell.slow && cell.recent_slow > 0 && cell.recent_slow >= cell.recent_fast;
  }
}

// A one-way time is a difference of two hosts' clocks, aligned by estimates that can be off by
// milliseconds (a round trip slowed by a busy node, or by the asymmetric link itself), and with
// fewer than four hosts nothing above corrects them. A clock error adds to one direction what it
// takes from the other; a slow link adds to the round trip. So where the reverse direction was
// measured too, a slow or suspect direction counts only when its median excess and the
// reverse's (negative where it reads early) together still reach the threshold's excess: the
// round trip is slow. Messages that only bound their time from above count as measured in the
// reverse, which can only keep a finding.
void drop_clock_only(const Job& job, PairCells& pairs, MessageEvidence& evidence) {
  for (auto& [pair, cell] : pairs) {
    if (!cell.slow && !cell.suspect) continue;
    auto back = pairs.find({pair.second, pair.first});
    if (back == pairs.end() || back->second.recent_excess.size() < kMinSlow) continue;
    const double round_trip_excess =
        median_of(cell.recent_excess) + median_of(back->second.recent_excess);
    if (round_trip_excess >= median_of(cell.slow_excess)) continue;
    cell.slow = cell.suspect = false;
    cell.clock_only = true;
    evidence.slow_one_way_by_clock_only.push_back({job.hosts[static_cast<std::size_t>(pair.first)],
                                                   job.hosts[static_cast<std::size_t>(pair.second)],
                                                   round_trip_excess / 1e3});
  }
}

// Which way a link whose messages read slow both ways is slow. A delay or a rate limit one way
// slows the reverse direction's large messages too: their TCP acknowledgements cross the slow
// way, and the sender's window waits for them (NPB CG's 300 KB messages read slow both ways with
// one direction delayed, docs/faults.md, sweep 39; a 16 KiB message after a pause is more than
// TCP's restarted window of 10 segments, and split_pipeline's read slow both ways, sweep 40). A
// message of a few packets goes out whole, acknowledged or not, and crosses the link in its own
// direction only: the job's own (under kFewPackets bytes), else the link probes' pings.
constexpr std::int64_t kFewPackets = 4096;  // three Ethernet frames
enum class SlowWay { not_told, forth, back, both };

// By the size classes of few-packet messages measured both ways (kMinKnown recent transits
// each), smallest first: the first where one direction's median is slow and the other's is not,
// or is under kEchoShare of it (NPB CG's 8-byte sums the fast way read 1.1 times their
// threshold against 21 times the slow way: a receiver busy pushing its large messages over the
// slow way completes the small ones coming back a little late). A class slow both ways alike
// keeps both (a link slow both ways).
SlowWay slow_way_by_messages(const PairCell& forth, const PairCell& back) {
  for (const auto& [size, shares] : forth.recent_by_class) {
    if (size >= size_class(kFewPackets)) break;
    auto reverse = back.recent_by_class.find(size);
    if (shares.size() < kMinKnown || reverse == back.recent_by_class.end() ||
        reverse->second.size() < kMinKnown)
      continue;
    const double forth_share = median_of(shares), back_share = median_of(reverse->second);
    if (forth_share >= 1 && (back_share < 1 || back_share <= kEchoShare * forth_share))
      return SlowWay::forth;
    if (back_share >= 1 && (forth_share < 1 || forth_share <= kEchoShare * back_share))
      return SlowWay::back;
    if (forth_share >= 1) return SlowWay::both;
  }
  return SlowWay::not_told;
}

// By the probes' pings (their one-way legs on the corrected clocks, ClockAlignment): one way has
// min_link_delay's excess over the legs' lower quartile at least and the other within a quarter
// of that either way (a clock error would add to one what it takes from the other).
SlowWay slow_way_by_pings(const std::map<std::pair<int, int>, double>& legs, double base_ns,
                          const std::pair<int, int>& pair, double min_excess_ns) {
  auto forth = legs.find(pair), back = legs.find({pair.second, pair.first});
  if (forth == legs.end() || back == legs.end()) return SlowWay::not_told;
  const double excess_forth = forth->second - base_ns, excess_back = back->second - base_ns;
  if (slow_way_alone(excess_forth, excess_back, min_excess_ns)) return SlowWay::forth;
  if (slow_way_alone(excess_back, excess_forth, min_excess_ns)) return SlowWay::back;
  return SlowWay::not_told;
}

// Whether `cell`'s few-packet messages (kMinKnown recent ones of a class at least) read slow: a
// delay in its own direction, which no acknowledgement crossing the other way explains.
bool few_packets_slow(const PairCell& cell) {
  for (const auto& [size, shares] : cell.recent_by_class) {
    if (size >= size_class(kFewPackets)) break;
    if (shares.size() >= kMinKnown && median_of(shares) >= 1) return true;
  }
  return false;
}

// Marks the direction that is not the slow way as its reverse's echo. What it cannot tell apart:
// a link slow both ways whose few-packet messages, and pings, were measured one way only.
//
// A direction slow alone by its messages may be the echo of a reverse whose own messages did not
// read slow (too few in the window, some slow: SP's were 6 slow of 10): where none of
// its few-packet messages read slow and the probes' pings put the delay on the reverse alone, the
// link is named that way (NPB SP's larger messages back over a link delayed one way named the
// back way for three analyses, while the pings read 8 ms one way and nothing back, sweep 46).
void slow_way(const Job& job, const HealthOptions& options, const ClockAlignment& clocks,
              PairCells& pairs) {
  std::map<std::pair<int, int>, double> legs;
  auto index = [&](const std::string& host) {
    return static_cast<int>(std::lower_bound(job.hosts.begin(), job.hosts.end(), host) -
                            job.hosts.begin());
  };
  std::vector<double> all_legs;
  for (const ProbedOneWay& l : clocks.probed_one_way) {
    legs[{index(l.from), index(l.to)}] = l.one_way_us * 1e3;
    all_legs.push_back(l.one_way_us * 1e3);
  }
  const double legs_base = all_legs.empty() ? 0.0 : lower_quartile_of(all_legs);
  for (auto& [pair, cell] : pairs) {
    auto back = pairs.find({pair.second, pair.first});
    // The reverse not slow, but not shown fine either: unmeasured, few fast messages, or some
    // slow ones (suspect, turning).
    const bool reverse_undecided =
        back == pairs.end() ||
        (!back->second.slow &&
         (back->second.suspect || back->second.turning || back->second.recent_fast < kMinKnown));
    if (cell.slow && reverse_undecided && !few_packets_slow(cell) &&
        slow_way_by_pings(legs, legs_base, pair, options.min_link_delay_us * 1e3) ==
            SlowWay::back) {
      cell.echo_of_reverse = cell.names_reverse = true;
      cell.way_told_by = "the link probes' pings";
      continue;
    }
    if (pair.first > pair.second || !cell.slow || back == pairs.end() || !back->second.slow)
      continue;
    const char* told_by = "its messages of a few packets";
    SlowWay way = slow_way_by_messages(cell, back->second);
    if (way == SlowWay::not_told) {
      way = slow_way_by_pings(legs, legs_base, pair, options.min_link_delay_us * 1e3);
      told_by = "the link probes' pings";
    }
    if (way != SlowWay::forth && way != SlowWay::back) continue;
    PairCell& echo = way == SlowWay::forth ? back->second : cell;
    echo.echo_of_reverse = true;
    echo.way_told_by = told_by;
  }
}

// The job's messages per directed host pair on the corrected clocks, judged against their size
// classes' baselines; the matrix, the stalled messages and the directions that read slow by a
// clock error only go to `evidence`. Empty where no message was measured in flight.
//
// Per directed host pair. A link is slow when, in the recent window, at least kMinSlow messages
// took longer than the threshold (link_factor times the baseline and min_link_delay more), in
// each half of the time its recent messages span slow messages were at least as many as the
// messages shown to be faster (measured faster, or arrived before a receive posted sooner than
// the threshold): a slowness that lasts, not a burst; and the evidence holds (evidence.hpp): one
// message per kIndependentNs, slow far more often than the other pairs' messages are. Counting
// the censored messages matters: behind a slow host the receivers are late and find most
// messages already there, so a median over the measured ones alone would be mostly from before
// the fault. The matrix shows the medians over the whole --since range.
PairCells judge_pairs(const Job& job, const HealthOptions& options,
                      const std::vector<JoinedMessage>& messages, const ClockAlignment& clocks,
                      MessageEvidence& evidence) {
  // The recent window, on rank 0's clock: where a link is judged slow or not (reaching further
  // back for a pair with few messages in it).
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const std::int64_t recent_aligned =
      static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned - window_ns;
  MessageSamples samples = sample_messages(job, options, messages, clocks.correction_ns);
  if (samples.cells.empty()) return {};
  const Baselines baselines = size_class_baselines(samples.cells);
  record_stalls(job, samples.stall_candidates, baselines, evidence);
  PairCells pairs;
  for (auto& [key, reservoir] : samples.cells) {
    PairCell& cell = pairs[{std::get<0>(key), std::get<1>(key)}];
    const double base = std::max(1000.0, baselines.of_class.at(std::get<2>(key)));
    const double weight = static_cast<double>(reservoir.seen);
    cell.ratio += weight * baselines.cell_median.at(key) / base;
    cell.median += weight * baselines.cell_median.at(key);
    cell.base += weight * base;
    cell.messages += reservoir.seen;
  }
  const Thresholds thresholds(job, options, baselines);
  const Decided decided =
      recent_decisions(recent_aligned, window_ns, thresholds, samples.observed, pairs);
  test_pairs(thin_decisions(
                 decided, static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned, pairs),
             pairs);
  judge_cells(job, options, pairs, evidence);
  drop_clock_only(job, pairs, evidence);
  slow_way(job, options, clocks, pairs);
  for (auto& [pair, cell] : pairs)
    evidence.links.push_back({job.hosts[static_cast<std::size_t>(pair.first)],
                              job.hosts[static_cast<std::size_t>(pair.second)], cell.median / 1e3,
                              cell.ratio, cell.messages, cell.recent_slow, cell.recent_fast,
                              cell.slow, cell.suspect, cell.echo_of_reverse});
  return pairs;
}

// Hosts that receive slow (or suspect) messages, and those that send slow ones: a sender that
// waits for the answer (a pipeline stage for its partner's gradients) arrives at the next
// collective as late as the receiver. (A host that lost CPU is told apart by its stall
// counters, see health.cpp.)
std::vector<std::string> delayed_hosts_of(const Job& job, const PairCells& pairs) {
  std::vector<std::string> delayed;
  auto add_delayed = [&](int host) {
    const std::string& name = job.hosts[static_cast<std::size_t>(host)];
    if (std::find(delayed.begin(), delayed.end(), name) == delayed.end()) delayed.push_back(name);
  };
  for (const auto& [pair, cell] : pairs) {
    if (cell.slow || cell.suspect) add_delayed(pair.second);
    if (cell.slow) add_delayed(pair.first);
  }
  return delayed;
}

// A host most of whose links are slow (while links elsewhere are fine) is the host's NIC or
// network; the remaining slow cells are links. Candidates are taken strongest first (by the
// fewest slow messages on any of their slow pairs), and a later one counts only the pairs no
// accepted host explains: behind a slow host, a neighbour that sends to it completes its
// other messages late too (a receive completed by the same MPI_Waitall as a send stuck
// towards the slow host reads slow), so the neighbour can look like a second slow host.
std::set<int> slow_hosts_of(const Job& job, const HealthOptions& options, const PairCells& pairs) {
  // A host is judged on its pairs with two other hosts at least: when its messages go to one
  // peer only (a pipeline stage and its partner), slow pairs both ways say as much about the
  // peer, or the link between them, as about the host; they are named as a link, and the link
  // probes, which measure every pair, can name the host.
  std::vector<std::pair<std::uint64_t, int>> candidates;  // strength, host
  const Completion completion = completion_of(job);
  for (int h = 0; h < static_cast<int>(job.hosts.size()); ++h) {
    int involved = 0, slow = 0, healthy_elsewhere = 0;
    std::set<int> slow_peers;
    std::uint64_t weakest = ~0ull;
    for (const auto& [pair, cell] : pairs) {
      if (involves(pair, h)) {
        ++involved;
        slow += cell.slow;
        if (cell.slow) {
          weakest = std::min(weakest, cell.recent_slow);
          slow_peers.insert(pair.first == h ? pair.second : pair.first);
        }
      } else if (!cell.slow) {
        ++healthy_elsewhere;
      }
    }
    // One slow link and its echo make a host's pairs with two peers slow: a host is named only
    // where no one of its slow pairs explains the others (a second peer's pair slow on its own).
    std::vector<std::pair<int, int>> slow_pairs;
    for (const auto& [pair, cell] : pairs)
      if (cell.slow && involves(pair, h)) slow_pairs.push_back(pair);
    const bool one_link = std::any_of(slow_pairs.begin(), slow_pairs.end(), [&](const auto& link) {
      return std::all_of(slow_pairs.begin(), slow_pairs.end(), [&](const auto& other) {
        return explained_by_link(other, link, completion);
      });
    });
    if (involved >= 2 && slow_peers.size() >= 2 && healthy_elsewhere > 0 && !one_link &&
        slow >= options.host_cell_fraction * involved)
      candidates.emplace_back(weakest, h);
  }
  std::sort(candidates.rbegin(), candidates.rend());
  std::set<int> slow_hosts;
  auto explained = [&](const std::pair<int, int>& pair) {
    return std::any_of(slow_hosts.begin(), slow_hosts.end(),
                       [&](int h) { return involves(pair, h); });
  };
  for (const auto& [strength, h] : candidates) {
    int involved = 0, slow = 0;
    for (const auto& [pair, cell] : pairs) {
      if (!involves(pair, h) || explained(pair)) continue;
      ++involved;
      slow += cell.slow;
    }
    if (involved >= 2 && slow >= options.host_cell_fraction * involved) slow_hosts.insert(h);
  }
  return slow_hosts;
}

// slow_host_network for each of `slow_hosts` whose recent messages are clearly slower than the
// others'.
void name_slow_hosts(const Job& job, const HealthOptions& options, const PairCells& pairs,
                     const std::set<int>& slow_hosts, std::vector<Finding>& findings) {
  for (int h : slow_hosts) {
    // The evidence is the recent window's, where the pairs were judged: the medians over the
    // --since range can still be mostly from before the fault.
    std::vector<double> mine, others;
    std::uint64_t n = 0;
    std::int64_t since = INT64_MAX;
    for (const auto& [pair, cell] : pairs) {
      if (involves(pair, h)) since = std::min(since, cell.recent_from);
      auto& into = pair.first == h || pair.second == h ? mine : others;
      into.insert(into.end(), cell.recent_ns.begin(), cell.recent_ns.end());
      if (&into == &mine) n += cell.recent_ns.size();
    }
    // Its slow pairs' messages were slow, yet the host's as a whole must be too: a host whose
    // recent messages are not clearly slower than the others' is not named by them.
    if (mine.empty() || others.empty() ||
        median_of(mine) < median_of(others) + options.min_link_delay_us * 1e3)
      continue;
    // The evidence: its slow pairs' observations together (each pair's were tested alone).
    EvidenceTest test;
    test.observed_what = "slow messages";
    for (const auto& [pair, cell] : pairs)
      if (cell.slow && involves(pair, h)) test.pool(cell.test);
    test.comparisons = static_cast<double>(job.hosts.size());
    Finding f;
    f.kind = finding_kind::slow_host_network;
    f.subject = "host " + job.hosts[static_cast<std::size_t>(h)];
    f.strength = median_of(mine) / std::max(1.0, median_of(others));
    f.severity = severity_by_evidence(test, options);
    f.confidence = test.confidence();
    f.first_seen_ns = job.now_wall;
    f.last_seen_ns = job.now_wall;
    f.summary = f.subject + ": its links are slow in both directions: median message latency " +
                ms_text(median_of(mine)) + " over " + with_commas(n) + " messages of the last " +
                ms_text(recent_ns(job, since)) + " vs " + ms_text(median_of(others)) +
                " between other hosts (network side: NIC or link); " + test.text();
    f.evidence.rule = MessageHostEvidence{.host = job.hosts[static_cast<std::size_t>(h)],
                                          .median_latency_ns = median_of(mine),
                                          .others_latency_ns = median_of(others),
                                          .messages = n,
                                          .test = test};
    f.host = job.hosts[static_cast<std::size_t>(h)];
    f.avoid = avoid_host(f.host);
    findings.push_back(f);
  }
}

// slow_link for each slow pair of no slow host whose neighbourhood is known.
void name_slow_links(const Job& job, const HealthOptions& options, const PairCells& pairs,
                     const std::set<int>& slow_hosts, std::vector<Finding>& findings) {
  // A slow link is named only once its hosts' other links are known to be fine (at least
  // kMinKnown fast messages in the window, none suspect or slow): until then the slow link may
  // be the first sign of a slow host (behind a slow host the receivers are late, so evidence
  // about its outgoing links comes in slowly) or an echo of one next to it. A link shown healthy
  // by its round trip is known too. A pair the program does not use (fewer than kMinKnown
  // messages in all: a few of its set-up's, slow or not, at 1 in 16 recorded) says nothing
  // about the neighbourhood: counted as undecided, it kept a halo's delayed link from ever being
  // named (its one-way ring leaves most of the link's neighbour pairs with 1 or 2 messages).
  // A pair out of the link's receiver that reads slow by much less than the link (much_faster) is
  // its echo, not a sign of the host: a pipeline's stage forwards late what came to it late
  // (split_pipeline at load 7: ctap0 -> ctap1 at 13 ms with a 5 ms delay, ctap1 -> ctap2 at
  // 1.3 ms, docs/faults.md, sweep 34); a slow host's network slows both alike.
  // A pair of its hosts that turned slow when it did (kSameOnsetNs), not yet shown slow: a host's
  // network fault reaches its pairs at once, and the evidence on some comes in later (an NCCL
  // ring's host +5 ms: the pair into it read slow 1 s after the pair out, which would be named as
  // the link meanwhile, docs/faults.md sweep 44).
  constexpr std::int64_t kSameOnsetNs = 2'000'000'000;
  const Completion completion = completion_of(job);
  auto undecided_around = [&](const std::pair<int, int>& link) {
    const PairCell& mine = pairs.at(link);
    for (const auto& [other, cell] : pairs) {
      if (explained_by_link(other, link, completion)) continue;
      if (!involves(other, link.first) && !involves(other, link.second)) continue;
      if (cell.messages < kMinKnown) continue;
      const bool turned_with_it = cell.turning && mine.onset != INT64_MIN &&
                                  std::abs(cell.onset - mine.onset) <= kSameOnsetNs;
      // Without MPI not even a pair out of the receiver: a ring that forwards late posts late too
      // (the echo is a few slow messages), and the window's medians, still mostly from before
      // the onset, cannot tell the two pairs apart yet (an NCCL host +5 ms was named as its
      // pair in for one analysis, its pair out turned slow 0.1 s after it, sweep 44).
      if (turned_with_it && completion == Completion::proxy) return true;
      if (other.first == link.second && much_faster(cell, mine)) continue;
      if (cell.slow || cell.suspect || turned_with_it) return true;
      // Slow since the link turned slow (its onset, or its window's start where it was slow
      // throughout) in as many messages as fast: a host's pair that carries few messages reads
      // fast over a window that began before the host's fault, and slow since. Fast ones from
      // before the fault do not show the fault is not the host's; where the pair sent nothing
      // since, they are all there is.
      const std::int64_t since = mine.onset != INT64_MIN ? mine.onset : mine.recent_from;
      std::uint64_t slow_since = 0, fast_since = 0;
      for (const auto& [start, slow] : cell.decided)
        if (start >= since) ++(slow ? slow_since : fast_since);
      if (slow_since > 0 && slow_since >= fast_since) return true;
      if (cell.recent_fast < kMinKnown && !cell.clock_only) return true;
    }
    return false;
  };
  // A link between two other hosts that reads about as slow (slow or suspect, its recent median
  // at half this one's or more) makes the slowness the program's or the machine's, not one
  // link's: a link's fault delays its own messages, and a transit is measured from the moment
  // both sides were ready, so it does not slow the messages of links that share no host with
  // it. Seen: a clean pipeline of two replicas at 2 busy loops, whose two forward links (0 -> 1,
  // 2 -> 3: the receiving stage waits, the sending one polls with sched_yield under
  // COMMTAP_YIELD and pushes its data out only when it runs again) both read 16x their size
  // class's baseline, while the backward ones read 1x. The recent medians, not the whole
  // range's: soon after a link slows, its median over the range is still mostly from before.
  // What it cannot tell apart: two links slowed alike at once.
  auto as_slow_elsewhere = [&](const std::pair<int, int>& link, const PairCell& cell) {
    if (cell.recent_ns.empty()) return false;
    const double recent = median_of(cell.recent_ns);
    for (const auto& [other, other_cell] : pairs) {
      if (involves(other, link.first) || involves(other, link.second)) continue;
      if (other_cell.recent_ns.size() < kMinKnown || !(other_cell.slow || other_cell.suspect))
        continue;
      if (median_of(other_cell.recent_ns) >= kAsSlowElsewhere * recent) return true;
    }
    return false;
  };
  for (const auto& [pair, cell] : pairs) {
    if (!cell.slow || slow_hosts.count(pair.first) || slow_hosts.count(pair.second)) continue;
    if (cell.echo_of_reverse && !cell.names_reverse) continue;  // named as its reverse's link
    if (undecided_around(pair) || receiver_waited_elsewhere(pair, pairs, completion)) continue;
    if (as_slow_elsewhere(pair, cell)) continue;
    const std::string sender = job.hosts[static_cast<std::size_t>(pair.first)];
    const std::string receiver = job.hosts[static_cast<std::size_t>(pair.second)];
    // The link named: this pair's, or its reverse's where this one is only its echo.
    const std::string& from = cell.names_reverse ? receiver : sender;
    const std::string& to = cell.names_reverse ? sender : receiver;
    auto back = pairs.find({pair.second, pair.first});
    const bool echoed = back != pairs.end() && back->second.slow && back->second.echo_of_reverse;
    const bool both = back != pairs.end() && back->second.slow && !echoed && !cell.echo_of_reverse;
    if (both && pair.first > pair.second) continue;  // reported once, with the other direction
    const std::uint64_t since_slow = cell.onset_half_slow[0] + cell.onset_half_slow[1];
    const std::uint64_t since_fast = cell.onset_half_fast[0] + cell.onset_half_fast[1];
    Finding f;
    f.kind = finding_kind::slow_link;
    f.subject = "link " + from + (both ? " <-> " : " -> ") + to;
    f.strength = cell.ratio;
    f.severity = severity_by_evidence(cell.test, options);
    f.confidence = cell.test.confidence();
    f.first_seen_ns = job.now_wall;
    f.last_seen_ns = job.now_wall;
    f.summary = f.subject + ": " + std::to_string(cell.recent_slow) + " of " +
                std::to_string(cell.recent_slow + cell.recent_fast) + " messages " +
                (cell.names_reverse ? sender + " -> " + receiver + " " : "") + "of the last " +
                ms_text(recent_ns(job, cell.recent_from)) + " took " +
                std::to_string(static_cast<int>(std::lround(options.link_factor))) +
                "x the baseline " + ms_text(cell.base) + " or more (median " +
                ms_text(cell.median) + " over " + with_commas(cell.messages) + " messages)" +
                (both     ? ", both directions"
                 : echoed ? ", this direction only (by " + std::string(back->second.way_told_by) +
                                "; the reverse's larger messages read slow too, their "
                                "acknowledgements crossing this way)"
                 : cell.names_reverse
                     ? ", this direction only (by " + std::string(cell.way_told_by) +
                           "; the messages that read slow are the reverse's, larger ones whose "
                           "acknowledgements cross this way)"
                     : ", this direction only") +
                (cell.recent_censored > 0
                     ? "; " + std::to_string(cell.recent_censored) +
                           " more found done at the receiver's first look, arrival unknown"
                     : "") +
                (cell.by_onset ? "; slow since " + ms_text(recent_ns(job, cell.onset)) +
                                     " ago: " + std::to_string(since_slow) + " of " +
                                     std::to_string(since_slow + since_fast) + " messages since"
                               : "") +
                "; " + cell.test.text();
    f.evidence.rule = MessageLinkEvidence{.from = from,
                                          .to = to,
                                          .both_directions = both,
                                          .median_latency_ns = cell.median,
                                          .baseline_ns = cell.base,
                                          .ratio = cell.ratio,
                                          .recent_slow = cell.recent_slow,
                                          .recent_fast = cell.recent_fast,
                                          .messages = cell.messages,
                                          .recent_censored = cell.recent_censored,
                                          .test = cell.test,
                                          .slow_stretches = cell.slow_stretches};
    auto& rule = std::get<MessageLinkEvidence>(f.evidence.rule);
    if (cell.by_onset) {
      rule.slow_since_s = recent_ns(job, cell.onset) / 1e9;
      rule.since_slow = since_slow;
      rule.since_fast = since_fast;
    }
    for (int h : {pair.first, pair.second})
      if (apart_at_host(pair, both, h, pairs))
        rule.apart_at.push_back(job.hosts[static_cast<std::size_t>(h)]);
    f.from = from;
    f.to = to;
    f.avoid = avoid_link(from, to, both, cell.median - cell.base);
    findings.push_back(f);
  }
}

}  // namespace

void detect_slow_links(const Job& job, const HealthOptions& options,
                       const std::vector<JoinedMessage>& messages, const ClockAlignment& clocks,
                       std::vector<Finding>& findings, MessageEvidence& evidence,
                       std::vector<std::string>& delayed_hosts) {
  const PairCells pairs = judge_pairs(job, options, messages, clocks, evidence);
  if (pairs.empty()) return;
  delayed_hosts = delayed_hosts_of(job, pairs);
  const std::set<int> slow_hosts = slow_hosts_of(job, options, pairs);
  name_slow_hosts(job, options, pairs, slow_hosts, findings);
  name_slow_links(job, options, pairs, slow_hosts, findings);
}

}  // namespace commtap::analyzer
