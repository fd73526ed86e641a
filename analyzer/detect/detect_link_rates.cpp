// slow_link and slow_host_network from the kernel's busy time (the tcp_links table,
// docs/analyzer.md): the rate at which a directed host pair's connections moved data while the
// network paced them. A rate-limited or congested link moves the job's bulk data at its limit
// whatever the program does with it, while every message timing and probe that crosses it waits
// behind that data: NPB FT and IS, which call nothing but all-to-alls, move 32 MB per pair and
// iteration, so that over a 20 Mbit/s link one probe took 13 s and no message was timed at all
// (docs/faults.md sweep 58). The kernel counts, per connection, the time it had data in flight
// (tcpi_busy_time) and, of that, the time the receiver's window was full (tcpi_rwnd_limited: the
// receiving process did not read); the rest is the time the network set the pace, and the bytes
// acknowledged over it the link's rate.
//
// What the rule assumes: a read whose connections were paced by the network nearly all the time
// since the one before, with data written and not yet sent at its end (a backlog) and full
// segments, ran at the path's rate. Busy time alone is no rate: a message is in flight until its
// acknowledgement, which the receiver may delay by up to 40 ms, so a clean all-to-all of 64 KB
// blocks on 2 loaded cores was busy 35-60% of the time at 1 MB/s without any backlog, against
// 2.4 MB/s, busy 100% and a backlog of 1.1-1.8 MB at every read over a 20 Mbit/s link (sweep 58).
// What it cannot tell apart: a link from a sender whose own kernel is held
// (its softirqs starved; the same on every link of the host, so a host), and a link that loses
// packets and waits for the retransmission timer (the lost-packet rule names that one too, and
// the findings merge).
#include <algorithm>
#include <map>
#include <set>

#include "analyzer/detect/detectors.hpp"
#include "analyzer/detect/tcp_counters.hpp"
#include "analyzer/findings/statistics.hpp"

namespace commtap::analyzer {
namespace {

// A read whose bytes per segment are under this sent small messages: its paced time is round
// trips, not a rate.
constexpr double kFullSegmentBytes = 1000;
// A direction's rate is measured where its bulk reads moved this much in this much paced time
// over the span: a few of the kernel's ticks (1-4 ms) at least.
constexpr std::uint64_t kMeasuredBytes = 1 << 20;
constexpr std::int64_t kMeasuredPacedUs = 8'000;
// Slow: this many times under the upper quartile of the measured directions' rates (healthy
// links on 2 loaded cores moved bulk data at 150-1,000 MB/s; a 20 Mbit/s limit is 2.4 MB/s), in
// reads at two separate moments at least, each paced this long at the slow rate, for this share
// of the time since the read before, with a backlog at its end; and from the first of them on, at
// that rate and paced this long in all (it held the job's data back that long: the
// retransmission timeouts of a healthy link under an all-to-all's incast are 0.2-0.4 s each).
// From the first slow read, not over the span: an all-to-all moved 200 MB over the link in its
// first 0.6 s, which kept its rate over the span above the bar for 8 s after its limit began.
constexpr double kRateFactor = 10;
constexpr std::int64_t kMomentPacedUs = 200'000;
constexpr double kSaturatedShare = 0.8;
constexpr int kMinMoments = 2;
constexpr std::int64_t kMinSlowPacedUs = 1'000'000;
// Where both ways of a pair are slow, the faster counts as the slower's echo (its
// acknowledgements queue behind the slow way's data: 4-9 MB/s against 2.4 over a link limited one
// way, 1.3-2.7 against 1.1-1.4 per connection on 4x2, sweep 58) where it is this many times
// faster; within it, the pair is slow both ways (a NIC limited both ways: 2.0 and 2.0).
constexpr double kEchoRatio = 1.3;
// A slow link waits for its hosts this long at most from its first slow read, unless its reverse
// moved bulk data since at kEchoRatio its rate or more (a link limited one way) or each of its
// hosts has another pair that did so at more than the slow bar (a sound host): a NIC limited both
// ways slows its pairs both ways alike, and an all-to-all that exchanges with one peer at a time
// (MPICH's pairwise exchange in NPB FT) shows it first on one pair, both ways (a host at 20 Mbit/s
// was named `link ctap2 <-> ctap3` 5 s after its limit began and 6 s before the probes named the
// host, sweep 58).
constexpr std::int64_t kMostHoldNs = 8'000'000'000;
// ... and up to this long where one of its hosts moved bulk data to or from third hosts since, this
// much of it at least, and all at the slow bar or under: a NIC limited both ways slows what
// little else its host sends too. NPB FT's exchange with one peer over a host at 20 Mbit/s took
// 14 s, while the probes' 256 KB transfers over the host's other pairs read 0.5-1.4 MB/s
// against 7.7-131 MB/s over the other hosts' pairs; the pair was named `link ctap1 <-> ctap3`
// 8 s after it slowed, and the host 4 s later (docs/faults.md sweep 59).
constexpr std::int64_t kLongestHoldNs = 20'000'000'000;
constexpr std::uint64_t kSlowedTooBytes = 256 << 10;

struct DirectionRate {
  std::uint64_t bytes = 0;
  std::int64_t paced_us = 0;
  struct Read {
    std::int64_t wall_ns = 0;
    std::uint64_t bytes = 0;
    std::int64_t paced_us = 0;
    bool saturated = false;  // paced kSaturatedShare of its interval, a backlog at its end
    std::int64_t interval_ns = 0;
  };
  std::vector<Read> reads;  // its bulk reads
  bool measured() const { return bytes >= kMeasuredBytes && paced_us >= kMeasuredPacedUs; }
  double mb_per_s() const { return mb_per_s_of(bytes, paced_us); }
  // What its reads that end after `since_ns` (`overlapping`) or cover nothing before it moved,
  // and in what paced time (their reads not kept).
  DirectionRate after(std::int64_t since_ns, bool overlapping) const {
    DirectionRate moved;
    for (const Read& read : reads)
      if (overlapping ? read.wall_ns > since_ns : read.wall_ns - read.interval_ns >= since_ns) {
        moved.bytes += read.bytes;
        moved.paced_us += read.paced_us;
      }
    return moved;
  }
  // Its rate over those reads, where they measure it (0: not measured).
  double mb_per_s_after(std::int64_t since_ns, bool overlapping) const {
    const DirectionRate moved = after(since_ns, overlapping);
    return moved.measured() ? moved.mb_per_s() : 0;
  }
  // Bytes per microsecond: MB/s.
  static double mb_per_s_of(std::uint64_t bytes, std::int64_t paced_us) {
    return paced_us > 0 ? static_cast<double>(bytes) / static_cast<double>(paced_us) : 0;
  }
};
using DirectionRates = std::map<std::pair<int, int>, DirectionRate>;  // (from host, to host)

// Each pair's bulk reads over the span.
DirectionRates direction_rates(const TcpSpan& tcp) {
  DirectionRates rates;
  for (const auto& [pair, reads] : tcp.pairs)
    for (const TcpRead& r : reads) {
      if (r.paced_us <= 0 || r.segments == 0 ||
          static_cast<double>(r.bytes) < kFullSegmentBytes * static_cast<double>(r.segments))
        continue;
      DirectionRate& d = rates[pair];
      d.bytes += r.bytes;
      d.paced_us += r.paced_us;
      const bool saturated = r.notsent_bytes > 0 && r.interval_ns > 0 &&
                             static_cast<double>(r.paced_us) * 1e3 >=
                                 kSaturatedShare * static_cast<double>(r.interval_ns);
      d.reads.push_back({r.wall_ns, r.bytes, r.paced_us, saturated, r.interval_ns});
    }
  return rates;
}

// The directions slow against the measured ones' upper quartile, and what they were compared with.
struct SlowRates {
  double baseline_mb_per_s = 0;
  std::size_t measured = 0;
  std::vector<std::pair<int, int>> slow;
  // The directions with a slow read within the recent span, slow or not yet (one moment), echoes
  // included: what a rate limit or congestion paced, for the lost-packet rule.
  std::vector<std::pair<int, int>> limited;
  // Per slow direction: from its first slow read on.
  struct Since {
    // The first slow read's end, and its start. Other pairs' reads that began after its end tell
    // how they fared since: not those that overlap it (each rank reads on its own schedule),
    // which may have moved their data before the link slowed. NPB FT's host limited to 20 Mbit/s
    // moved 19 MB to a third host at 105 MB/s in a read that ended 55 ms after the first slow
    // read of its pair to a second, both over the same 2 s. The reverse's reads that overlap it
    // do count: over a link limited one way, NPB FT's reverse moved its 28 MB at 37 MB/s in the
    // read beside the first slow one, and nothing in bulk after it (docs/faults.md sweep 59).
    std::int64_t first_ns = 0, covered_from_ns = 0;
    int moments = 0;
    std::uint64_t bytes = 0;
    std::int64_t paced_us = 0;
    double mb_per_s() const { return DirectionRate::mb_per_s_of(bytes, paced_us); }
  };
  std::map<std::pair<int, int>, Since> since;
};

SlowRates slow_rates(const DirectionRates& rates, double interval_s, std::int64_t recent_since) {
  SlowRates out;
  std::vector<double> measured;
  for (const auto& [pair, d] : rates)
    if (d.measured()) measured.push_back(d.mb_per_s());
  out.measured = measured.size();
  // Three directions at least: one pair's two ways compare nothing but each other.
  if (measured.size() < 3) return out;
  std::sort(measured.begin(), measured.end());
  out.baseline_mb_per_s = measured[(3 * (measured.size() - 1) + 3) / 4];
  const double slow_bar = out.baseline_mb_per_s / kRateFactor;
  // Rows of one moment: each rank reads its counters on its own schedule.
  const std::int64_t gap =
      std::max<std::int64_t>(1'500'000'000, static_cast<std::int64_t>(interval_s * 0.5e9));
  for (const auto& [pair, d] : rates) {
    if (!d.measured()) continue;
    std::vector<std::int64_t> slow_at;
    std::int64_t covered_from = INT64_MAX;  // its reads come rank by rank: the least
    for (const DirectionRate::Read& read : d.reads)
      if (read.saturated && read.paced_us >= kMomentPacedUs &&
          static_cast<double>(read.bytes) <= slow_bar * static_cast<double>(read.paced_us)) {
        slow_at.push_back(read.wall_ns);
        covered_from = std::min(covered_from, read.wall_ns - read.interval_ns);
      }
    if (slow_at.empty() || *std::max_element(slow_at.begin(), slow_at.end()) < recent_since)
      continue;
    out.limited.push_back(pair);
    const int moments = separate_moments(slow_at, gap);
    if (moments < kMinMoments) continue;
    SlowRates::Since since{.first_ns = *std::min_element(slow_at.begin(), slow_at.end()),
                           .covered_from_ns = covered_from,
                           .moments = moments};
    for (const DirectionRate::Read& read : d.reads)
      if (read.wall_ns >= since.first_ns) {
        since.bytes += read.bytes;
        since.paced_us += read.paced_us;
      }
    if (since.paced_us < kMinSlowPacedUs || since.mb_per_s() > slow_bar) continue;
    out.slow.push_back(pair);
    out.since[pair] = since;
  }
  std::vector<std::pair<int, int>> echoes;
  for (const auto& pair : out.slow) {
    const std::pair reverse{pair.second, pair.first};
    if (std::find(out.slow.begin(), out.slow.end(), reverse) != out.slow.end() &&
        out.since.at(pair).mb_per_s() >= kEchoRatio * out.since.at(reverse).mb_per_s())
      echoes.push_back(pair);
  }
  std::erase_if(out.slow, [&](const std::pair<int, int>& pair) {
    return std::find(echoes.begin(), echoes.end(), pair) != echoes.end();
  });
  return out;
}

// A host: slow directions into it from two hosts at least, or out of it to two, and at most a
// quarter as many slow directions that do not touch it (a rate limit on its NIC slows every pair
// it sends or receives on). Of several, the one paced longest; -1: none.
int slow_host(const SlowRates& slow, std::vector<std::pair<int, int>>& host_directions) {
  std::set<int> candidates;
  for (const auto& [from, to] : slow.slow) candidates.insert({from, to});
  int host = -1;
  std::int64_t host_paced = 0;
  for (int h : candidates) {
    std::set<int> senders, receivers;
    std::vector<std::pair<int, int>> mine;
    std::int64_t paced = 0;
    for (const auto& pair : slow.slow) {
      if (pair.first != h && pair.second != h) continue;
      mine.push_back(pair);
      paced += slow.since.at(pair).paced_us;
      if (pair.second == h)
        senders.insert(pair.first);
      else
        receivers.insert(pair.second);
    }
    if ((senders.size() < 2 && receivers.size() < 2) ||
        4 * (slow.slow.size() - mine.size()) > mine.size() || paced <= host_paced)
      continue;
    host = h;
    host_paced = paced;
    host_directions = std::move(mine);
  }
  return host;
}

// Whether a slow link still waits for its hosts (kMostHoldNs, kLongestHoldNs).
bool awaits_its_hosts(const DirectionRates& rates, const SlowRates& slow,
                      const std::vector<std::pair<int, int>>& mine, std::int64_t now) {
  std::int64_t first = INT64_MAX, covered_from = INT64_MAX;
  for (const auto& pair : mine) {
    first = std::min(first, slow.since.at(pair).first_ns);
    covered_from = std::min(covered_from, slow.since.at(pair).covered_from_ns);
  }
  if (now - first >= kLongestHoldNs) return false;
  const auto rate_since = [&](std::pair<int, int> pair, bool overlapping) {
    auto found = rates.find(pair);
    if (found == rates.end()) return 0.0;
    return found->second.mb_per_s_after(overlapping ? covered_from : first, overlapping);
  };
  if (mine.size() == 1) {
    const double reverse = rate_since({mine.front().second, mine.front().first}, true);
    if (reverse >= kEchoRatio * slow.since.at(mine.front()).mb_per_s()) return false;
  }
  const int a = mine.front().first, b = mine.front().second;
  const double slow_bar = slow.baseline_mb_per_s / kRateFactor;
  // Each host's bulk data to and from third hosts, in reads that began after the first slow one.
  auto moved_elsewhere = [&](int h) {
    DirectionRate moved;
    bool sound = false;
    for (const auto& [pair, d] : rates) {
      const int other = pair.first == h ? pair.second : pair.second == h ? pair.first : -1;
      if (other < 0 || other == a || other == b) continue;
      const DirectionRate since = d.after(first, false);
      sound |= since.measured() && since.mb_per_s() > slow_bar;
      moved.bytes += since.bytes;
      moved.paced_us += since.paced_us;
    }
    return std::pair{sound, moved};
  };
  const auto [a_sound, a_moved] = moved_elsewhere(a);
  const auto [b_sound, b_moved] = moved_elsewhere(b);
  if (now - first < kMostHoldNs) return !a_sound || !b_sound;
  auto slowed_too = [&](bool sound, const DirectionRate& moved) {
    return !sound && moved.bytes >= kSlowedTooBytes && moved.mb_per_s() <= slow_bar;
  };
  return slowed_too(a_sound, a_moved) || slowed_too(b_sound, b_moved);
}

// One finding of the rule, a host's or a link's.
struct RateFindings {
  const Job& job;
  const HealthOptions& options;
  const SlowRates& slow;
  std::vector<Finding>& findings;
  std::vector<std::string>& delayed;

  void add(const TcpSubject& found, avoid_list::AvoidList avoid) {
    SlowRates::Since total;
    for (const auto& pair : found.directions) {
      const SlowRates::Since& d = slow.since.at(pair);
      total.bytes += d.bytes;
      total.paced_us += d.paced_us;
      total.moments = std::max(total.moments, d.moments);
      const std::string& receiver = job.hosts[static_cast<std::size_t>(pair.second)];
      if (std::find(delayed.begin(), delayed.end(), receiver) == delayed.end())
        delayed.push_back(receiver);
    }
    // What it cost: per direction (they overlap), the paced time over what the same bytes take
    // at the baseline's rate, against the time since it first read slow.
    double held_back_share = 0;
    for (const auto& pair : found.directions) {
      const SlowRates::Since& d = slow.since.at(pair);
      const double held_back_us =
          static_cast<double>(d.paced_us) - static_cast<double>(d.bytes) / slow.baseline_mb_per_s;
      const double since_us = std::max(
          1.0, static_cast<double>(job.now_wall) / 1e3 - static_cast<double>(d.first_ns) / 1e3);
      held_back_share = std::max(held_back_share, held_back_us / since_us);
    }
    Finding f;
    f.kind = found.host() ? finding_kind::slow_host_network : finding_kind::slow_link;
    f.subject = found.subject;
    f.severity = held_back_share >= options.error_cost_share ? Severity::error : Severity::warning;
    f.strength = slow.baseline_mb_per_s / std::max(total.mb_per_s(), 1e-9) / kRateFactor;
    f.first_seen_ns = job.now_wall;
    f.last_seen_ns = job.now_wall;
    f.summary = found.subject + ": TCP moved data " + found.where + " at " +
                mb_text(total.mb_per_s()) + " while the network paced it, for " +
                ms_text(static_cast<double>(total.paced_us) * 1e3) + " since it first read slow (" +
                with_commas(total.bytes) + " bytes; slow at " + std::to_string(total.moments) +
                " separate moments), against " + mb_text(slow.baseline_mb_per_s) +
                " on most links (upper quartile of " + std::to_string(slow.measured) +
                "): a rate limit or a congested link, port or NIC";
    f.source = "tcp";
    f.evidence.rule = LinkRateEvidence{.subject = found.network,
                                       .bytes = total.bytes,
                                       .paced_ns = static_cast<double>(total.paced_us) * 1e3,
                                       .mb_per_s = total.mb_per_s(),
                                       .baseline_mb_per_s = slow.baseline_mb_per_s,
                                       .links_compared = slow.measured,
                                       .moments = total.moments};
    f.host = found.network.host;
    f.from = found.network.from;
    f.to = found.network.to;
    f.avoid = std::move(avoid);
    findings.push_back(std::move(f));
  }
};

}  // namespace

std::vector<std::pair<int, int>> detect_link_rates(const Job& job, const HealthOptions& options,
                                                   const TcpSpan& tcp,
                                                   std::vector<Finding>& findings,
                                                   std::vector<TcpLink>& tcp_links,
                                                   std::vector<AwaitingLink>& awaiting_hosts,
                                                   std::vector<std::string>& delayed_hosts) {
  const std::int64_t now = static_cast<std::int64_t>(job.now_wall);
  const std::int64_t span = stall_span_ns(options);
  const DirectionRates rates = direction_rates(tcp);
  auto row = tcp_links.begin();  // in the order of tcp.pairs
  for (const auto& [pair, reads] : tcp.pairs) {
    if (auto d = rates.find(pair); d != rates.end() && d->second.measured()) {
      row->mb_per_s = d->second.mb_per_s();
      row->paced_ns = static_cast<double>(d->second.paced_us) * 1e3;
    }
    ++row;
  }
  const SlowRates slow = slow_rates(rates, tcp.addresses.interval_s, now - span / 2);
  if (slow.slow.empty()) return slow.limited;

  // As the lost-packet rule: a subject another rule names already merges with it (health.cpp).
  RateFindings out{job, options, slow, findings, delayed_hosts};
  std::vector<std::pair<int, int>> host_directions;
  const int host = slow_host(slow, host_directions);
  name_tcp_subjects(
      job, findings, host, host_directions, slow.slow,
      [&](const std::vector<std::pair<int, int>>& mine) {
        return awaits_its_hosts(rates, slow, mine, now);
      },
      awaiting_hosts,
      [&](const TcpSubject& found) {
        const std::pair<int, int> first = found.directions.front();
        out.add(found, found.host()
                           ? avoid_host(found.network.host)
                           : avoid_link(found.network.from, found.network.to,
                                        found.network.both_directions, 0,
                                        slow.since.at(first).mb_per_s(), slow.baseline_mb_per_s));
      });
  return slow.limited;
}

}  // namespace commtap::analyzer
