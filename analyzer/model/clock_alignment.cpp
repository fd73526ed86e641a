// analyzer/model/clock_alignment: per host, a correction of its clock estimates against rank 0 so
// that one-way times read true both ways on healthy links (what the Cristian estimates cannot do
// where a link is slow one way), and the link probes' one-way times on the corrected clocks.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/model/messages.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {

namespace {

// Per host, what to add to its ranks' aligned times so that the job's messages read the same
// one-way time both ways on healthy links. The clock offsets are Cristian estimates against
// rank 0, which assume the way there and back take equally long: a link slow in one direction
// only (0 -> 1 3 ms late) puts host 1's clock off by half that, and every message into host 1
// then reads 1.5 ms short and every message out of it 1.5 ms long, so that all of host 1's links
// look slow and the fault looks like host 1's. Per host pair, half the difference of the fastest
// message each way (the least queueing) is the offset between the two as their messages see it;
// a host's correction is the median over the ways to reach it from rank 0's host, directly and
// through each third host, so that one asymmetric link is outvoted. That needs three ways at
// least (four hosts): with three hosts, which of the three links is the asymmetric one cannot be
// told, and the Cristian estimate stands. A host whose every outgoing link is slow is the same
// as a clock offset to any such reckoning; it stays as it was (a slow host, half the delay each
// way).
//
// Link probes measure every pair both ways whatever the job sends (a ring that sends one way
// only, a job of collectives only): their round trips' four times give the same half
// difference, and where they have it for a pair it is used (their newest rounds: the
// estimates that align the clocks change when a fault begins).
std::vector<double> clock_corrections(const std::vector<JoinedMessage>& messages,
                                      const std::map<std::pair<int, int>, double>& probe_skews,
                                      int hosts, int reference) {
  std::vector<double> correction(static_cast<std::size_t>(hosts), 0.0);
  if (hosts < 4 || reference < 0 || reference >= hosts) return correction;
  // The fastest one-way reading per directed pair and size class: any message, whether or not
  // it was in flight, took at most its completion minus its send.
  constexpr std::size_t kMinMessages = 3;
  std::map<std::tuple<int, int, int>, std::pair<double, std::size_t>> fastest;
  for (const JoinedMessage& m : messages) {
    auto& [least, count] =
        fastest.try_emplace({m.from_host, m.to_host, size_class(m.bytes)}, HUGE_VAL, 0)
            .first->second;
    least = std::min(least, static_cast<double>(m.done - m.start));
    ++count;
  }
  // skew[a][b]: how far b's clock reads ahead of a's, by the class measured most both ways.
  std::vector<std::vector<std::optional<double>>> skew(static_cast<std::size_t>(hosts),
                                                       std::vector<std::optional<double>>(hosts));
  std::map<std::pair<int, int>, std::size_t> best_count;
  for (const auto& [pair, half] : probe_skews) {
    skew[static_cast<std::size_t>(pair.first)][static_cast<std::size_t>(pair.second)] = half;
    skew[static_cast<std::size_t>(pair.second)][static_cast<std::size_t>(pair.first)] = -half;
  }
  for (const auto& [key, forth] : fastest) {
    const auto [a, b, size] = key;
    if (a >= b || probe_skews.count({a, b})) continue;
    auto back = fastest.find({b, a, size});
    if (back == fastest.end()) continue;
    const std::size_t n = std::min(forth.second, back->second.second);
    if (n < kMinMessages || n <= best_count[{a, b}]) continue;
    best_count[{a, b}] = n;
    const double half = (forth.first - back->second.first) / 2;
    skew[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] = half;
    skew[static_cast<std::size_t>(b)][static_cast<std::size_t>(a)] = -half;
  }
  auto at = [&](int a, int b) -> const std::optional<double>& {
    return skew[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
  };
  for (int h = 0; h < hosts; ++h) {
    if (h == reference) continue;
    std::vector<double> ways;
    if (at(reference, h)) ways.push_back(*at(reference, h));
    for (int m = 0; m < hosts; ++m)
      if (m != reference && m != h && at(reference, m) && at(m, h))
        ways.push_back(*at(reference, m) + *at(m, h));
    if (ways.size() >= 3) correction[static_cast<std::size_t>(h)] = -median_of(ways);
  }
  return correction;
}

// A probe's fastest round trip between two leaders, aligned to rank 0's clock: the one-way time
// each way (forth: from the measuring host), less the time the receiving leader may have been
// away from its look for it (probes.to_held_ns, from_held_ns; version 13): a leader that
// computes between its MPI calls finds a ping late, and its time away is not the network's.
// Seen: NPB MG's asynchronous probes with ctap1 -> ctap2 delayed read the reverse's leg at
// 2.9 ms against 21 us between other hosts, and the link as slow both ways (docs/faults.md,
// sweep 40). No more is taken than the leg itself: a leader away for all of it (away since
// before it began) says only that the network took at most the leg, and the subtraction would
// read a negative time that looks like a clock error. Seen: an all-to-all transpose with
// ctap2 -> ctap3 delayed 2 ms, whose fast way read -0.72 ms from legs of 0.3-0.7 ms held
// 1.15-1.4 ms, and the link as slow both ways (sweep 41). (A leg read negative before the
// subtraction is the clocks' error, and stays as it is.)
struct ProbeTrip {
  int from_host, to_host;
  double forth, back;
};

// A leg's network time: `leg` less `held`, down to zero at most.
double leg_less_held(std::int64_t leg, std::uint64_t held) {
  const double taken = std::min(static_cast<double>(held), std::max(0.0, static_cast<double>(leg)));
  return static_cast<double>(leg) - taken;
}

// The probe round trips in the --since range, oldest first.
bool probe_trips(const Job& job, std::int64_t since, std::int64_t until,
                 std::vector<ProbeTrip>& trips, std::string& error) {
  std::map<int, int> leader_of_host;  // the lowest rank on each host (its local rank 0)
  for (const auto& [number, r] : job.ranks) leader_of_host.try_emplace(r.host, number);
  auto host_index = [&](const std::string& name) {
    auto found = std::lower_bound(job.hosts.begin(), job.hosts.end(), name);
    return found != job.hosts.end() && *found == name ? static_cast<int>(found - job.hosts.begin())
                                                      : -1;
  };
  return each_probe(
      job,
      [&](const ProbeRow& p) {
        if (p.bytes != 1 || p.sent_ns == 0) return;
        auto me = job.ranks.find(p.rank);
        const int from = host_index(p.from_host), to = host_index(p.to_host);
        if (me == job.ranks.end() || from < 0 || to < 0 || from == to) return;
        auto peer = job.ranks.find(leader_of_host[to]);
        if (peer == job.ranks.end()) return;
        const std::int64_t at = me->second.aligned(p.at_ns);
        if (at < since || at > until) return;
        auto mine = [&](std::uint64_t t) { return me->second.aligned(t); };
        auto theirs = [&](std::uint64_t t) { return peer->second.aligned(t); };
        trips.push_back(
            {from, to, leg_less_held(theirs(p.peer_received_ns) - mine(p.sent_ns), p.to_held_ns),
             leg_less_held(mine(p.received_ns) - theirs(p.peer_replied_ns), p.from_held_ns)});
      },
      error);
}

// Per host pair (lower index first), how far the second's aligned clock reads ahead of the
// first's by the probes: half the difference of the one-way times, the median over the pair's
// newest round trips measured from either end.
std::map<std::pair<int, int>, double> probe_skews(const std::vector<ProbeTrip>& trips) {
  constexpr std::size_t kNewest = 6;  // 3 rounds, measured from both ends
  std::map<std::pair<int, int>, std::vector<double>> halves;
  for (auto t = trips.rbegin(); t != trips.rend(); ++t) {
    const bool ordered = t->from_host < t->to_host;
    auto& list = halves[ordered ? std::make_pair(t->from_host, t->to_host)
                                : std::make_pair(t->to_host, t->from_host)];
    const double half = (t->forth - t->back) / 2;
    if (list.size() < kNewest) list.push_back(ordered ? half : -half);
  }
  std::map<std::pair<int, int>, double> skews;
  for (const auto& [pair, list] : halves) skews[pair] = median_of(list);
  return skews;
}

}  // namespace

bool align_host_clocks(const Job& job, const HealthOptions& options,
                       const std::vector<JoinedMessage>& messages, ClockAlignment& out,
                       std::string& error) {
  const std::int64_t since_aligned = since_aligned_ns(job, options);
  const std::int64_t until_aligned = job.until_aligned();
  std::vector<ProbeTrip> trips;
  if (!probe_trips(job, since_aligned, until_aligned, trips, error)) return false;
  const auto reference = job.ranks.find(0);
  out.correction_ns =
      clock_corrections(messages, probe_skews(trips), static_cast<int>(job.hosts.size()),
                        reference == job.ranks.end() ? -1 : reference->second.host);
  const std::vector<double>& correction = out.correction_ns;
  // Each direction's one-way time by the probes' newest rounds, on the corrected clocks: the
  // direction of a link whose probes' round trips are slow (detect_probed_links).
  {
    constexpr std::size_t kNewest = 3;
    std::map<std::pair<int, int>, std::vector<double>> one_way;
    for (auto t = trips.rbegin(); t != trips.rend(); ++t) {
      const double skew = correction[static_cast<std::size_t>(t->to_host)] -
                          correction[static_cast<std::size_t>(t->from_host)];
      auto& forth = one_way[{t->from_host, t->to_host}];
      if (forth.size() < kNewest) forth.push_back(t->forth + skew);
      auto& back = one_way[{t->to_host, t->from_host}];
      if (back.size() < kNewest) back.push_back(t->back - skew);
    }
    for (const auto& [pair, values] : one_way)
      out.probed_one_way.push_back({job.hosts[static_cast<std::size_t>(pair.first)],
                                    job.hosts[static_cast<std::size_t>(pair.second)],
                                    median_of(values) / 1e3});
  }
  for (std::size_t h = 0; h < correction.size(); ++h)
    if (correction[h] != 0) out.corrections_us[job.hosts[h]] = correction[h] / 1e3;
  return true;
}

}  // namespace commtap::analyzer
