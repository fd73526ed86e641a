// Slow links and hosts, the network side (docs/analyzer.md).
#include "analyzer/detectors.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>

#include "analyzer/statistics.hpp"
#include "analyzer/trace_files.hpp"

namespace commtap::analyzer {

using json = nlohmann::json;

namespace {

struct MessageKey {
  std::int64_t comm_id;
  std::int64_t tag;
  std::int64_t msg;
  int sender, receiver;
  bool operator==(const MessageKey&) const = default;
};
struct MessageKeyHash {
  std::size_t operator()(const MessageKey& k) const {
    std::size_t h = std::hash<std::int64_t>()(k.comm_id);
    h = h * 1000003 ^ std::hash<std::int64_t>()(k.tag);
    h = h * 1000003 ^ std::hash<std::int64_t>()(k.msg);
    h = h * 1000003 ^ static_cast<std::size_t>(k.sender) * 65599 ^
        static_cast<std::size_t>(k.receiver);
    return h;
  }
};

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

// One message of the recent window, as evidence about its link: either its one-way time
// (it was in flight when the receive was posted) or only an upper bound on it (it had arrived
// before the receive was posted: it took at most that long).
struct LinkObservation {
  double ns = 0;  // negative where the two clocks' alignment is off by more than the latency
  bool upper_bound = false;
  bool later_half = false;  // sent in the second half of the recent window
};

// A message between two hosts, its times on rank 0's clock.
struct JoinedMessage {
  int from_host, to_host;
  std::int64_t start, posted, done, bytes;
};

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
// each way (forth: from the measuring host).
struct ProbeTrip {
  int from_host, to_host;
  double forth, back;
};

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
  return each_row(
      job,
      "SELECT rank, at_ns, from_host, to_host, sent_ns, peer_received_ns, peer_replied_ns, "
      "received_ns FROM probes WHERE bytes = 1 AND sent_ns IS NOT NULL ORDER BY at_ns",
      [&](sqlite3_stmt* s) {
        auto me = job.ranks.find(static_cast<int>(column_i64(s, 0)));
        const int from = host_index(column_text(s, 2)), to = host_index(column_text(s, 3));
        if (me == job.ranks.end() || from < 0 || to < 0 || from == to) return;
        auto peer = job.ranks.find(leader_of_host[to]);
        if (peer == job.ranks.end()) return;
        const std::int64_t at = me->second.aligned(static_cast<std::uint64_t>(column_i64(s, 1)));
        if (at < since || at > until) return;
        auto mine = [&](int column) {
          return me->second.aligned(static_cast<std::uint64_t>(column_i64(s, column)));
        };
        auto theirs = [&](int column) {
          return peer->second.aligned(static_cast<std::uint64_t>(column_i64(s, column)));
        };
        trips.push_back({from, to, static_cast<double>(theirs(5) - mine(4)),
                         static_cast<double>(mine(7) - theirs(6))});
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

bool detect_slow_links(const Job& job, const HealthOptions& options, JobHealth& health,
                       std::string& error) {
  const std::int64_t since_aligned = since_aligned_ns(job, options);
  const std::int64_t until_aligned = job.until_aligned();
  // The recent window, on rank 0's clock: where a link is judged slow or not.
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const std::int64_t recent_aligned =
      static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned - window_ns;
  const std::int64_t recent_middle = recent_aligned + window_ns / 2;
  struct Sent {
    std::int64_t start;
    std::int64_t bytes;
  };
  std::unordered_map<MessageKey, Sent, MessageKeyHash> sends;
  if (!each_row(
          job,
          "SELECT rank, peer, comm_id, tag, msg, bytes, start_ns FROM transfers "
          "WHERE direction = 'send'",
          [&](sqlite3_stmt* s) {
            const int rank = static_cast<int>(column_i64(s, 0));
            auto r = job.ranks.find(rank);
            if (r == job.ranks.end()) return;
            const std::int64_t start =
                r->second.aligned(static_cast<std::uint64_t>(column_i64(s, 6)));
            if (start < since_aligned || start > until_aligned) return;
            sends[{column_i64(s, 2), column_i64(s, 3), column_i64(s, 4), rank,
                   static_cast<int>(column_i64(s, 1))}] = {start, column_i64(s, 5)};
          },
          error))
    return false;
  // Per (sender host, receiver host, size class): one-way times of the messages measured in
  // flight (for the baseline and the matrix), and the recent window's observations.
  using CellKey = std::tuple<int, int, int>;
  std::map<CellKey, Reservoir> cells;
  std::map<CellKey, std::vector<LinkObservation>> recent;
  std::mt19937_64 random(12345);
  std::uint64_t joined = 0;
  std::vector<JoinedMessage> between_hosts;
  if (!each_row(
          job,
          "SELECT rank, peer, comm_id, tag, msg, start_ns, end_ns FROM transfers "
          "WHERE direction = 'recv'",
          [&](sqlite3_stmt* s) {
            const int rank = static_cast<int>(column_i64(s, 0));
            const int peer = static_cast<int>(column_i64(s, 1));
            auto found =
                sends.find({column_i64(s, 2), column_i64(s, 3), column_i64(s, 4), peer, rank});
            auto r = job.ranks.find(rank);
            auto p = job.ranks.find(peer);
            if (found == sends.end() || r == job.ranks.end() || p == job.ranks.end()) return;
            const std::int64_t posted =
                r->second.aligned(static_cast<std::uint64_t>(column_i64(s, 5)));
            const std::int64_t done =
                r->second.aligned(static_cast<std::uint64_t>(column_i64(s, 6)));
            if (done > until_aligned) return;
            ++joined;
            if (r->second.host == p->second.host) return;  // shared memory: not a link
            between_hosts.push_back({p->second.host, r->second.host, found->second.start, posted,
                                     done, found->second.bytes});
          },
          error))
    return false;
  health.messages = joined;
  sends.clear();
  std::vector<ProbeTrip> trips;
  if (!probe_trips(job, since_aligned, until_aligned, trips, error)) return false;
  const auto reference = job.ranks.find(0);
  const std::vector<double> correction =
      clock_corrections(between_hosts, probe_skews(trips), static_cast<int>(job.hosts.size()),
                        reference == job.ranks.end() ? -1 : reference->second.host);
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
    json probed = json::array();
    for (const auto& [pair, values] : one_way)
      probed.push_back({{"from", job.hosts[static_cast<std::size_t>(pair.first)]},
                        {"to", job.hosts[static_cast<std::size_t>(pair.second)]},
                        {"one_way_us", median_of(values) / 1e3}});
    if (!probed.empty()) health.details["probed_one_way"] = probed;
  }
  json corrections = json::object();
  for (std::size_t h = 0; h < correction.size(); ++h)
    if (correction[h] != 0) corrections[job.hosts[h]] = correction[h] / 1e3;
  if (!corrections.empty()) health.details["clock_corrections_us"] = corrections;
  // Messages of the stall span that stalled (detect_stalled_links): kept with their size
  // class, judged against its baseline below.
  const std::int64_t stall_since =
      static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned - stall_span_ns(options);
  std::vector<std::tuple<int, int, int, std::int64_t, double>> stall_candidates;
  for (const JoinedMessage& m : between_hosts) {
    const auto sender =
        static_cast<std::int64_t>(correction[static_cast<std::size_t>(m.from_host)]);
    const auto receiver =
        static_cast<std::int64_t>(correction[static_cast<std::size_t>(m.to_host)]);
    const std::int64_t start = m.start + sender, posted = m.posted + receiver,
                       done = m.done + receiver;
    // In flight (the receive was posted before the send, or the data came in well after the
    // post): completion minus send is the one-way time. Otherwise the data was there when the
    // receive was posted: the one-way time was at most that, and a receiver that posts late
    // says nothing more about the link.
    constexpr std::int64_t kCopyNs = 50'000;  // a receive of data already there
    const bool in_flight = posted <= start || done - posted >= kCopyNs;
    const CellKey key{m.from_host, m.to_host, size_class(m.bytes)};
    const auto one_way = static_cast<double>(done - start);
    if (in_flight) cells[key].add(std::max(0.0, one_way), random);
    if (start >= recent_aligned)
      recent[key].push_back({one_way, !in_flight, start >= recent_middle});
    // Stalled: counted from the moment both sides were ready (a message that waited for a late
    // receive did not stall).
    const std::int64_t stalled = done - std::max(start, posted);
    if (start >= stall_since && stalled >= kStallNs)
      stall_candidates.emplace_back(m.from_host, m.to_host, std::get<2>(key), start,
                                    static_cast<double>(stalled));
  }
  between_hosts.clear();
  between_hosts.shrink_to_fit();
  if (cells.empty()) return true;
  // Baseline per size class: the lower quartile of the cells' medians (robust to a slow host,
  // whose cells can be most of a small cluster's).
  std::map<int, std::vector<double>> class_medians;
  std::map<CellKey, double> cell_median;
  for (auto& [key, reservoir] : cells) {
    const double m = median_of(reservoir.values);
    cell_median[key] = m;
    class_medians[std::get<2>(key)].push_back(m);
  }
  std::map<int, double> baseline;
  for (auto& [c, medians] : class_medians) baseline[c] = lower_quartile_of(medians);
  {
    json stalls = json::array();
    for (const auto& [from, to, size, start, ns] : stall_candidates) {
      auto c = baseline.find(size);
      if (c == baseline.end() || ns < kStallFactor * std::max(1000.0, c->second)) continue;
      stalls.push_back({{"from", job.hosts[static_cast<std::size_t>(from)]},
                        {"to", job.hosts[static_cast<std::size_t>(to)]},
                        {"at_ns", start},
                        {"ns", ns},
                        {"baseline_ns", c->second}});
    }
    if (!stalls.empty()) health.details["message_stalls"] = stalls;
  }
  // Per directed host pair. A link is slow when, in the recent window, at least kMinSlow
  // messages took longer than the threshold (link_factor times the baseline and
  // min_link_delay more) and, in each half of the window, slow messages were at least as many
  // as the messages shown to be faster (measured faster, or arrived before a receive posted
  // sooner than the threshold): a slowness that lasts, not a burst. Counting the censored
  // messages matters: behind a slow host the receivers are late and find most messages
  // already there, so a median over the measured ones alone would be mostly from before the
  // fault. The matrix shows the medians over the whole --since range.
  constexpr std::uint64_t kMinSlow = 3;
  struct Cell {
    double ratio = 0, median = 0, base = 0;
    std::uint64_t messages = 0, recent_slow = 0, recent_fast = 0;
    std::uint64_t half_slow[2] = {0, 0}, half_fast[2] = {0, 0};
    // Each recent message's time over its size class's baseline, and the excess a slow one
    // has at least (threshold less baseline), for the round-trip check.
    std::vector<double> recent_excess, slow_excess;
    std::vector<double> recent_ns;  // the recent window's measured one-way times
    bool slow = false;
    bool clock_only = false;  // read slow, but the round trip is not: a clock error
    // Some slow messages and no more fast ones, but not (yet) enough to call it slow.
    bool suspect = false;
  };
  std::map<std::pair<int, int>, Cell> pairs;
  for (auto& [key, reservoir] : cells) {
    Cell& cell = pairs[{std::get<0>(key), std::get<1>(key)}];
    const double base = std::max(1000.0, baseline[std::get<2>(key)]);
    const double weight = static_cast<double>(reservoir.seen);
    cell.ratio += weight * cell_median[key] / base;
    cell.median += weight * cell_median[key];
    cell.base += weight * base;
    cell.messages += reservoir.seen;
  }
  for (auto& [key, observations] : recent) {
    Cell& cell = pairs[{std::get<0>(key), std::get<1>(key)}];
    auto c = baseline.find(std::get<2>(key));
    if (c == baseline.end()) continue;  // no message of this size class measured anywhere
    const double base = std::max(1000.0, c->second);
    const double threshold =
        std::max(base * options.link_factor, base + options.min_link_delay_us * 1e3);
    for (const LinkObservation& o : observations) {
      cell.recent_excess.push_back(o.ns - base);
      if (!o.upper_bound) cell.recent_ns.push_back(o.ns);
      cell.slow_excess.push_back(threshold - base);
      if (o.ns < threshold) {
        ++cell.recent_fast;
        ++cell.half_fast[o.later_half];
      } else if (!o.upper_bound) {
        ++cell.recent_slow;
        ++cell.half_slow[o.later_half];
      }
    }
  }
  for (auto& [pair, cell] : pairs) {
    const double n = static_cast<double>(std::max<std::uint64_t>(1, cell.messages));
    cell.ratio /= n;
    cell.median /= n;
    cell.base /= n;
    auto half_slow = [&](int h) {
      return cell.half_slow[h] > 0 && cell.half_slow[h] >= cell.half_fast[h];
    };
    cell.slow = cell.recent_slow >= kMinSlow && half_slow(0) && half_slow(1);
    cell.suspect = !cell.slow && cell.recent_slow > 0 && cell.recent_slow >= cell.recent_fast;
  }
  // A one-way time is a difference of two hosts' clocks, aligned by estimates that can be off
  // by milliseconds (a round trip slowed by a busy node, or by the asymmetric link itself), and
  // with fewer than four hosts nothing above corrects them. A clock error adds to one
  // direction what it takes from the other; a slow link adds to the round trip. So where the
  // reverse direction was measured too, a slow or suspect direction counts only when its
  // median excess and the reverse's (negative where it reads early) together still reach the
  // threshold's excess: the round trip is slow. Messages that only bound their time from above
  // count as measured in the reverse, which can only keep a finding.
  json clock_not_link = json::array();
  for (auto& [pair, cell] : pairs) {
    if (!cell.slow && !cell.suspect) continue;
    auto back = pairs.find({pair.second, pair.first});
    if (back == pairs.end() || back->second.recent_excess.size() < kMinSlow) continue;
    const double round_trip_excess =
        median_of(cell.recent_excess) + median_of(back->second.recent_excess);
    if (round_trip_excess >= median_of(cell.slow_excess)) continue;
    cell.slow = cell.suspect = false;
    cell.clock_only = true;
    clock_not_link.push_back({{"from", job.hosts[static_cast<std::size_t>(pair.first)]},
                              {"to", job.hosts[static_cast<std::size_t>(pair.second)]},
                              {"round_trip_excess_us", round_trip_excess / 1e3}});
  }
  if (!clock_not_link.empty()) health.details["slow_one_way_by_clock_only"] = clock_not_link;
  json matrix = json::array();
  for (auto& [pair, cell] : pairs) {
    matrix.push_back({{"from", job.hosts[static_cast<std::size_t>(pair.first)]},
                      {"to", job.hosts[static_cast<std::size_t>(pair.second)]},
                      {"median_us", cell.median / 1e3},
                      {"ratio", cell.ratio},
                      {"messages", cell.messages},
                      {"recent_slow", cell.recent_slow},
                      {"recent_fast", cell.recent_fast},
                      {"slow", cell.slow},
                      {"suspect", cell.suspect}});
  }
  health.details["links"] = matrix;
  // Hosts that receive slow (or suspect) messages, and those that send slow ones: a sender that
  // waits for the answer (a pipeline stage for its partner's gradients) arrives at the next
  // collective as late as the receiver. (A host that lost CPU is told apart by its stall
  // counters, see health.cpp.)
  json delayed = json::array();
  auto add_delayed = [&](int host) {
    const std::string& name = job.hosts[static_cast<std::size_t>(host)];
    if (std::find(delayed.begin(), delayed.end(), name) == delayed.end()) delayed.push_back(name);
  };
  for (const auto& [pair, cell] : pairs) {
    if (cell.slow || cell.suspect) add_delayed(pair.second);
    if (cell.slow) add_delayed(pair.first);
  }
  health.details["delayed_hosts"] = delayed;
  // A host most of whose links are slow (while links elsewhere are fine) is the host's NIC or
  // network; the remaining slow cells are links. Candidates are taken strongest first (by the
  // fewest slow messages on any of their slow pairs), and a later one counts only the pairs no
  // accepted host explains: behind a slow host, a neighbour that sends to it completes its
  // other messages late too (a receive completed by the same MPI_Waitall as a send stuck
  // towards the slow host reads slow), so the neighbour can look like a second slow host.
  auto involves = [](const std::pair<int, int>& pair, int h) {
    return pair.first == h || pair.second == h;
  };
  // A host is judged on its pairs with two other hosts at least: when its messages go to one
  // peer only (a pipeline stage and its partner), slow pairs both ways say as much about the
  // peer, or the link between them, as about the host; they are named as a link, and the link
  // probes, which measure every pair, can name the host.
  std::vector<std::pair<std::uint64_t, int>> candidates;  // strength, host
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
    if (involved >= 2 && slow_peers.size() >= 2 && healthy_elsewhere > 0 &&
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
  for (int h : slow_hosts) {
    // The evidence is the recent window's, where the pairs were judged: the medians over the
    // --since range can still be mostly from before the fault.
    std::vector<double> mine, others;
    std::uint64_t n = 0;
    for (const auto& [pair, cell] : pairs) {
      auto& into = pair.first == h || pair.second == h ? mine : others;
      into.insert(into.end(), cell.recent_ns.begin(), cell.recent_ns.end());
      if (&into == &mine) n += cell.recent_ns.size();
    }
    // Its slow pairs' messages were slow, yet the host's as a whole must be too: a host whose
    // recent messages are not clearly slower than the others' is not named by them.
    if (mine.empty() || others.empty() ||
        median_of(mine) < median_of(others) + options.min_link_delay_us * 1e3)
      continue;
    Finding f;
    f.kind = finding_kind::slow_host_network;
    f.subject = "host " + job.hosts[static_cast<std::size_t>(h)];
    f.strength = median_of(mine) / std::max(1.0, median_of(others));
    f.severity = Severity::error;
    f.first_seen_ns = job.now_wall;
    f.last_seen_ns = job.now_wall;
    f.summary = f.subject + ": its links are slow in both directions: median message latency " +
                ms_text(median_of(mine)) + " over " + with_commas(n) + " messages of the last " +
                ms_text(options.window_s * 1e9) + " vs " + ms_text(median_of(others)) +
                " between other hosts (network side: NIC or link)";
    f.evidence = {{"host", job.hosts[static_cast<std::size_t>(h)]},
                  {"median_latency_ns", median_of(mine)},
                  {"others_latency_ns", median_of(others)},
                  {"messages", n}};
    health.findings.push_back(f);
  }
  // A slow link is named only once its hosts' other links are known to be fine (at least
  // kMinKnown fast messages in the window, none suspect or slow): until then the slow link may
  // be the first sign of a slow host (behind a slow host the receivers are late, so evidence
  // about its outgoing links comes in slowly) or an echo of one next to it. A link shown healthy
  // by its round trip is known too.
  constexpr std::uint64_t kMinKnown = 3;
  auto undecided_around = [&](const std::pair<int, int>& link) {
    for (const auto& [other, cell] : pairs) {
      if (other == link || other == std::make_pair(link.second, link.first)) continue;
      if (!involves(other, link.first) && !involves(other, link.second)) continue;
      if (cell.slow || cell.suspect) return true;
      if (cell.recent_fast < kMinKnown && !cell.clock_only) return true;
    }
    return false;
  };
  for (const auto& [pair, cell] : pairs) {
    if (!cell.slow || slow_hosts.count(pair.first) || slow_hosts.count(pair.second)) continue;
    if (undecided_around(pair)) continue;
    const std::string from = job.hosts[static_cast<std::size_t>(pair.first)];
    const std::string to = job.hosts[static_cast<std::size_t>(pair.second)];
    auto back = pairs.find({pair.second, pair.first});
    const bool both = back != pairs.end() && back->second.slow;
    if (both && pair.first > pair.second) continue;  // reported once, with the other direction
    Finding f;
    f.kind = finding_kind::slow_link;
    f.subject = "link " + from + (both ? " <-> " : " -> ") + to;
    f.strength = cell.ratio;
    f.severity = Severity::error;
    f.first_seen_ns = job.now_wall;
    f.last_seen_ns = job.now_wall;
    f.summary = f.subject + ": " + std::to_string(cell.recent_slow) + " of " +
                std::to_string(cell.recent_slow + cell.recent_fast) + " messages of the last " +
                ms_text(options.window_s * 1e9) + " took " +
                std::to_string(static_cast<int>(std::lround(options.link_factor))) +
                "x the baseline " + ms_text(cell.base) + " or more (median " +
                ms_text(cell.median) + " over " + with_commas(cell.messages) + " messages)" +
                (both ? ", both directions" : ", this direction only");
    f.evidence = {{"from", from},
                  {"to", to},
                  {"both_directions", both},
                  {"median_latency_ns", cell.median},
                  {"baseline_ns", cell.base},
                  {"ratio", cell.ratio},
                  {"recent_slow", cell.recent_slow},
                  {"recent_fast", cell.recent_fast},
                  {"messages", cell.messages}};
    health.findings.push_back(f);
  }
  return true;
}

}  // namespace commtap::analyzer
