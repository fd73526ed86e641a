// slow_host_network and slow_link from link probes (the probes table): every directed host pair's
// latency and throughput, measured by commtap itself, so that a slow NIC or a rate-limited link
// is found in any job, also one whose own messages commtap does not see (collectives only).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "analyzer/detect/detectors.hpp"
#include "analyzer/findings/statistics.hpp"
#include "analyzer/model/job_pace.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {
namespace {

// The probe rounds each pair's verdict is made from: the newest ones, so that a link that was
// slow and got better is no longer flagged.
constexpr std::size_t kRecentRounds = 5;
// Probe rounds a verdict needs, of the same measure (latency or throughput) slow in most recent
// rounds. A probe takes one measurement per pair and round; on a busy node a descheduled leader
// slows one pair's latency in one round and another's throughput in the next (seen in clean
// runs on 2 oversubscribed cores): a fault slows the same measure round after round.
constexpr int kHostRounds = 2;  // a host is judged on several pairs at once
constexpr int kLinkRounds = 3;  // a link on one pair (two directions)
// Fast messages in the recent window for the job's messages to show a directed pair fine (as
// detect_slow_links counts them).
constexpr int kMessagesKnownFine = 3;

// A leader held this long at a measurement's end waited its turn for the CPU: polling without a
// break it sees a completion within microseconds (leave_out_contended).
constexpr double kContendedNs = 200'000;

// One measurement: its aligned time, its value, and the value with the time its messages may have
// waited for the two leaders off the CPU taken out (probes.from_held_ns, to_held_ns): the
// network's part at least. Files before version 13 have no such times: both values alike.
struct Sample {
  std::int64_t at = 0;
  double value = 0, network = 0;
  bool asynchronous = false;  // measured by the asynchronous probes, not in a round
  bool contended = false;     // both leaders were held off the CPU at its end (kContendedNs)
  bool limited = false;       // a leader's host was held by its own CPU limit then (HostLimits)
};

struct PairProbes {
  std::string from, to;
  std::vector<Sample> latency_ns;  // in time order
  std::vector<Sample> mb_per_s;
  double transfer_bytes = 0;  // of its newest transfer
};

// What a measurement says about its pair. A measurement slow by its value whose network part is
// not slow is the scheduler's (a leader descheduled while a message waited for it: 2 loaded
// cores, 8 ranks, seen as 22 us and 780 us latencies against 5 us in clean runs, docs/faults.md
// sweep 21) and counts neither as slow nor as fine. The rule assumes that a message waits for a
// leader only between its last poll that missed it and the one that found it, so that the time
// taken out is an upper bound of the scheduler's share; it cannot tell a slow link whose whole
// delay fell while a leader was off the CPU from the scheduler (then the round says nothing) and,
// for transfers, it sees only the final completions, so a stall mid-transfer counts as the link's.
//
// A measurement slow where a pair that shares no host with it, measured in the same round, is
// about as slow by the same measure (leave_out_alike) is the machine's (`alike`), and counts
// neither way either: a round's disjoint pairs are measured at the same moment (a tournament), so a
// loaded machine that holds the leaders off mid-transfer slows them alike, while a link's or a
// host's network fault leaves the pairs between the other hosts fine. Seen on 2 cores at 2 busy
// loops: a clean pipeline's ctap3 -> ctap0 at 150-270 MB/s against 2,600 for 10 s, in rounds
// where ctap1 -> ctap2 read 30-180 (docs/faults.md, sweep 34). What it cannot tell apart: two
// links (or hosts' networks) that share no host, slow at once; it needs four hosts.
//
// A measurement slow while a cgroup CPU limit held one of its hosts (HostLimits) is the limit's
// (`held`) too: a leader throttled mid-transfer stalls the transfer wherever its held times do
// not see it (its rendezvous handshake), so the network's part is not known.
enum class Reading { fine, slow, held, alike };
template <class Slow>
Reading read_sample(const Sample& sample, Slow slow) {
  if (!slow(sample.value)) return Reading::fine;
  return slow(sample.network) && !sample.limited ? Reading::slow : Reading::held;
}

struct PairVerdict {
  double latency_ns = 0, mb_per_s = 0;  // medians over the recent rounds
  int rounds = 0, slow_rounds = 0;      // slow rounds: of the measure slow most often
  int held_rounds = 0;   // measurements slow only by a leader's time off the CPU (either measure)
  int alike_rounds = 0;  // measurements slow alike between other hosts in the same round
  bool slow_for_host = false;  // slow in most of the newest rounds, kHostRounds at least
  bool slow = false;           // the same, kLinkRounds at least, and the evidence holds
  // The rounds of the measure and newest run that make the strongest case against chance.
  EvidenceTest test;
  // Its measurements that vote (either measure, after the rules above), oldest first: when, and
  // whether slow. And whether the newest was the asynchronous probes'. For link_awaits_its_hosts.
  struct Vote {
    std::int64_t at = 0;
    bool slow = false;
    bool throughput = false;  // its measure (else latency)
    double slowness = 0;      // its value against its measure's limit (over 1: past it)
  };
  std::vector<Vote> votes;
  bool asynchronous = false;
};

std::vector<Sample> recent_samples(const std::vector<Sample>& series) {
  const std::size_t first = series.size() > kRecentRounds ? series.size() - kRecentRounds : 0;
  return {series.begin() + static_cast<std::ptrdiff_t>(first), series.end()};
}

std::vector<double> recent_values(const std::vector<Sample>& series) {
  std::vector<double> out;
  for (const Sample& sample : recent_samples(series)) out.push_back(sample.value);
  return out;
}

// The value a healthy pair shows: the upper quartile of the pairs' throughputs, the lower of
// their latencies, so that a slow host whose pairs are most of a small cluster's (4 of 6 on
// three hosts) does not become the baseline.
double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index =
      static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size() - 1)));
  return values[std::min(index, values.size() - 1)];
}

// Measurements left out as the scheduler's or the machine's, for a summary ("" where none).
std::string held_text(int held_rounds, int alike_rounds) {
  std::string text;
  if (held_rounds > 0)
    text += ", " + count_text(static_cast<std::uint64_t>(held_rounds), "measurement") +
            " left out (a leader held off the CPU)";
  if (alike_rounds > 0)
    text += ", " + count_text(static_cast<std::uint64_t>(alike_rounds), "measurement") +
            " left out (as slow between other hosts in the same round)";
  return text;
}

// A message-based slow link the probes contradicted made its two hosts delayed (delayed_hosts_of:
// its receiver waits for what comes over it, its sender for the answer), which keeps a slow rank
// on them from being named: a clean toy training loop at load 6 whose rank 2 computed 20 ms more
// per step, last at all 150 of its all-reduces, got no finding, its host's incoming link read
// slow by the messages it received late and set aside by the probes (mpi.report). Each host is
// released unless a finding still standing involves it, or another direction of the messages
// read slow into it (or suspect), or out of it.
void release_hosts_of_dropped_links(
    const std::vector<std::pair<std::string, std::string>>& dropped_links,
    const MessageEvidence& messages, const std::vector<Finding>& findings,
    std::vector<std::string>& delayed) {
  auto dropped = [&](const std::string& from, const std::string& to) {
    return std::find(dropped_links.begin(), dropped_links.end(), std::pair{from, to}) !=
           dropped_links.end();
  };
  auto still_delayed = [&](const std::string& host) {
    for (const Finding& f : findings)
      if ((f.kind == finding_kind::slow_link || f.kind == finding_kind::slow_host_network) &&
          (f.host == host || f.from == host || f.to == host))
        return true;
    for (const MessageLink& link : messages.links)
      if (!dropped(link.from, link.to) &&
          ((link.to == host && (link.slow || link.suspect)) || (link.from == host && link.slow)))
        return true;
    return false;
  };
  for (const auto& [from, to] : dropped_links)
    for (const std::string& host : {from, to})
      if (!still_delayed(host)) std::erase(delayed, host);
}

// The job's own messages are timed by the ranks that send and receive them, so a rank that runs
// late (a busy CPU: seen on clean runs of 4 ranks on 2 loaded cores, 400 us on one ring link for
// a whole job) makes them look as slow as a slow network does. Probes of the same pair in the
// same recent window tell the two apart: a network fault slows their round trips both ways, or
// their throughput, round after round; a busy CPU does not. A message-based slow_link or
// slow_host_network whose pairs the probes measured in at least two rounds of the last window
// and found fine in most of them is dropped, and its hosts no longer explain late arrivals
// unless something else still delays them (release_hosts_of_dropped_links).
void drop_unconfirmed_message_findings(const Job& job, const HealthOptions& options,
                                       const std::map<std::pair<int, int>, PairProbes>& pairs,
                                       double latency_limit, double throughput_limit,
                                       const MessageEvidence& messages,
                                       std::vector<Finding>& findings, ProbeEvidence& evidence,
                                       std::vector<std::string>& delayed) {
  // The last window before the newest data (as the message-based rule counts it): the end is
  // the job's now, not until_aligned(), which is open-ended unless --at is given.
  const std::int64_t since = static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned -
                             static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  // Rounds that say something (not the scheduler's), and the slow ones among them.
  auto recent = [&](const std::vector<Sample>& series, auto slow) {
    int rounds = 0, slow_rounds = 0;
    for (const Sample& sample : series) {
      const Reading reading = read_sample(sample, slow);
      if (sample.at < since || reading == Reading::held || reading == Reading::alike) continue;
      ++rounds;
      slow_rounds += reading == Reading::slow ? 1 : 0;
    }
    return std::pair{rounds, slow_rounds};
  };
  std::map<std::string, int> node_of;
  for (const auto& [key, p] : pairs) {
    node_of[p.from] = key.first;
    node_of[p.to] = key.second;
  }
  // Whether the probes say the directed pair is fine lately: nullopt when they have too few
  // rounds in the window to say anything.
  auto probed_fine = [&](int from, int to) -> std::optional<bool> {
    auto there = pairs.find({from, to}), back = pairs.find({to, from});
    if (there == pairs.end()) return std::nullopt;
    auto late = [&](double ns) { return ns > latency_limit; };
    const auto [rounds, slow_there] = recent(there->second.latency_ns, late);
    if (rounds < 2) return std::nullopt;
    const int slow_back =
        back == pairs.end() ? slow_there : recent(back->second.latency_ns, late).second;
    const int slow_throughput =
        recent(there->second.mb_per_s, [&](double mb) { return mb < throughput_limit; }).second;
    return 2 * std::max(std::min(slow_there, slow_back), slow_throughput) < rounds;
  };
  // Whether a round found the directed pair fine inside a stretch of its messages that read slow
  // with no two fast ones in a row (MessageLinkEvidence::slow_stretches), and no round in any such
  // stretch found it slow. Asynchronous probe rounds come 5-8 s apart, so a window often holds
  // one only; one round taken while the messages before and after it were slow says more than
  // two taken around them: seen, a clean split_pipeline at 2 busy loops whose gradients
  // ctap2 -> ctap1 read 1.3 ms against 0.1-0.13 ms in 3 of 4 messages from the job's first
  // seconds on (the receiving stage, waiting 45 ms for them, woken late beside 6 runnable
  // processes on 2 cores), while that pair's pings read 9 us and its 256 KB transfers
  // 120-250 us (docs/faults.md, sweep 42). A fault that slows the pair slows the round inside
  // its stretch: a delay the pings, a rate limit the transfer.
  auto fine_inside_slowness =
      [&](int from, int to, const std::vector<std::pair<std::int64_t, std::int64_t>>& stretches) {
        auto there = pairs.find({from, to});
        if (there == pairs.end()) return false;
        auto inside = [&](std::int64_t at) {
          return std::any_of(stretches.begin(), stretches.end(),
                             [&](const auto& s) { return s.first < at && at < s.second; });
        };
        int fine = 0, slow = 0;
        auto count = [&](const std::vector<Sample>& series, auto is_slow) {
          for (const Sample& sample : series) {
            if (!inside(sample.at)) continue;
            const Reading reading = read_sample(sample, is_slow);
            fine += reading == Reading::fine;
            slow += reading == Reading::slow;
          }
        };
        count(there->second.latency_ns, [&](double ns) { return ns > latency_limit; });
        count(there->second.mb_per_s, [&](double mb) { return mb < throughput_limit; });
        return fine > 0 && slow == 0;
      };
  std::vector<std::pair<std::string, std::string>> dropped_links;  // from, to
  std::erase_if(findings, [&](const Finding& f) {
    if (f.source == "probes") return false;
    bool contradicted = false;
    if (f.kind == finding_kind::slow_link) {
      auto from = node_of.find(f.from), to = node_of.find(f.to);
      if (from == node_of.end() || to == node_of.end()) return false;
      const auto verdict = probed_fine(from->second, to->second);
      const auto* link_evidence = std::get_if<MessageLinkEvidence>(&f.evidence.rule);
      contradicted = verdict ? *verdict
                             : link_evidence && fine_inside_slowness(from->second, to->second,
                                                                     link_evidence->slow_stretches);
    } else if (f.kind == finding_kind::slow_host_network) {
      const std::string& host = f.host;
      auto node = node_of.find(host);
      if (node == node_of.end()) return false;
      int fine = 0, known = 0;
      for (const auto& [key, p] : pairs) {
        if (key.first != node->second && key.second != node->second) continue;
        const auto verdict = probed_fine(key.first, key.second);
        known += verdict.has_value();
        fine += verdict.value_or(false);
      }
      // The probes find most of its pairs fine (more than a host finding leaves): it is not
      // the host's network (the messages may have seen only its pairs with a slow peer).
      contradicted = known >= 2 && fine > (1 - options.host_cell_fraction) * known;
      if (contradicted)
        delayed.erase(std::remove(delayed.begin(), delayed.end(), host), delayed.end());
    }
    if (contradicted) evidence.not_confirmed.push_back({f.kind, f.subject});
    if (contradicted && f.kind == finding_kind::slow_link) dropped_links.emplace_back(f.from, f.to);
    return contradicted;
  });
  release_hosts_of_dropped_links(dropped_links, messages, findings, delayed);
}

// Every directed host pair's probes in the --since range, by (from node, to node). Nodes that
// share a host name (COMMTAP_TEST_NODES pretends several nodes on one host) are told apart by
// their node number.
using ProbePairs = std::map<std::pair<int, int>, PairProbes>;

bool read_probe_pairs(const Job& job, const HealthOptions& options, ProbePairs& pairs,
                      std::string& error) {
  const std::int64_t since = since_aligned_ns(job, options), until = job.until_aligned();
  return each_probe(
      job,
      [&](const ProbeRow& row) {
        auto rank = job.ranks.find(row.rank);
        if (rank == job.ranks.end()) return;
        const std::int64_t at = rank->second.aligned(row.at_ns);
        if (at < since || at > until) return;
        PairProbes& p = pairs[{row.from_node, row.to_node}];
        p.from = row.from_host;
        p.to = row.to_host;
        // As the file holds them (signed), as every reader of the table reads them.
        auto as_read = [](std::uint64_t v) {
          return static_cast<double>(static_cast<std::int64_t>(v));
        };
        const double bytes = as_read(row.bytes);
        const double ns = std::max(1.0, as_read(row.ns));
        const double from_held = std::max(0.0, as_read(row.from_held_ns));
        const double to_held = std::max(0.0, as_read(row.to_held_ns));
        const double held = from_held + to_held;
        const bool contended = std::min(from_held, to_held) >= kContendedNs;
        // A latency is half a round trip; the held times are of the whole round trip.
        if (bytes <= 1) {
          p.latency_ns.push_back(
              {at, ns, std::max(1.0, ns - held / 2), row.asynchronous, contended});
        } else {
          p.mb_per_s.push_back({at, bytes / ns * 1e3, bytes / std::max(1.0, ns - held) * 1e3,
                                row.asynchronous, contended});
          p.transfer_bytes = bytes;
        }
      },
      error);
}

// Marks the measurements taken while a host at either end was held by its own CPU limit
// (HostLimits), before the pairs' hosts are named by node (name_nodes).
void mark_limited(const Job& job, const HostLimits& limits, ProbePairs& pairs) {
  for (auto& [key, p] : pairs)
    for (std::vector<Sample>* series : {&p.latency_ns, &p.mb_per_s})
      for (Sample& sample : *series) {
        const std::int64_t wall = sample.at + job.wall_minus_aligned;
        sample.limited = limits.held(p.from, wall) || limits.held(p.to, wall);
      }
}

// Each node's name (a host, or host/node where nodes share a host name).
std::map<int, std::string> name_nodes(ProbePairs& pairs) {
  std::map<int, std::string> name_of;
  for (const auto& [key, p] : pairs) {
    name_of[key.first] = p.from;
    name_of[key.second] = p.to;
  }
  std::map<std::string, int> nodes_named;
  for (const auto& [node, name] : name_of) ++nodes_named[name];
  for (auto& [key, p] : pairs) {
    if (nodes_named[p.from] > 1) p.from += "/" + std::to_string(key.first);
    if (nodes_named[p.to] > 1) p.to += "/" + std::to_string(key.second);
  }
  return name_of;
}

// What a healthy pair measures, and where slow begins.
struct ProbeBaseline {
  double latency = 0, throughput = 0;  // ns, MB/s
  double latency_limit = 0, throughput_limit = 0;
};

ProbeBaseline probe_baseline(const ProbePairs& pairs, const HealthOptions& options) {
  std::vector<double> latencies, throughputs;
  for (const auto& [key, p] : pairs) {
    if (!p.latency_ns.empty()) latencies.push_back(median_of(recent_values(p.latency_ns)));
    if (!p.mb_per_s.empty()) throughputs.push_back(median_of(recent_values(p.mb_per_s)));
  }
  ProbeBaseline b;
  b.latency = quantile(latencies, 0.25);
  b.throughput = quantile(throughputs, 0.75);
  b.latency_limit = b.latency * options.link_factor + options.min_link_delay_us * 1e3;
  b.throughput_limit = b.throughput / options.probe_throughput_factor;
  return b;
}

// Per pair, its slow rounds (oldest first) by latency (after the both-directions rule), by
// throughput, by both at once, and by throughput far below the baseline: the evidence.
constexpr std::size_t kMeasures = 4;
// A throughput whose network part is kFarBelow times under the baseline or more. A loaded machine
// slows a healthy pair's transfer by up to 64 times its baseline with the held times taken out,
// never more, over 8,812 transfers of 81 clean runs of sweeps 30-36 at load 0.5-8 (the slowest
// 30-47 MB/s against 1,900-2,900); a 20 Mbit/s limit reads 800-1,000 times under it. So a round
// that far under is far less likely by chance than the 5% a round merely slow is taken at: its
// floor is 1%, and a rate-limited link needs 3 such rounds, not 4 (docs/faults.md, sweep 36).
constexpr double kFarBelow = 200;
// What the load of a machine does to a healthy pair's transfer at most, as above.
constexpr double kLoadedMachineSlowdown = 64;
using SlowRounds = std::map<std::pair<int, int>, std::array<std::vector<bool>, kMeasures>>;
using PairVerdicts = std::map<std::pair<int, int>, PairVerdict>;

// Per round (oldest first), what each measure read. Rounds line up from the newest: every
// leader records every round, so the i-th newest of two pairs is the same round.
template <class Slow>
std::vector<Reading> round_readings(const std::vector<Sample>& samples, Slow slow) {
  std::vector<Reading> out;
  for (const Sample& sample : samples) out.push_back(read_sample(sample, slow));
  return out;
}

// Two readings of one round that must both be slow: slow if both are, fine if either is.
Reading both_slow(Reading a, Reading b) {
  if (a == Reading::fine || b == Reading::fine) return Reading::fine;
  if (a == Reading::slow && b == Reading::slow) return Reading::slow;
  return a == Reading::alike || b == Reading::alike ? Reading::alike : Reading::held;
}

bool votes(Reading r) {
  return r == Reading::fine || r == Reading::slow;
}

// Measurements of one pair closer in time than this are one observation, slow if any of them
// is. Rounds come seconds apart, and confirmations kConfirmAfterS (1 s) after the round before,
// but the asynchronous probes may measure a pair again within a second, and a leader held off the
// CPU in bursts slows each of them: ranks that spin in the MPI library's waits on more ranks than
// cores (COMMTAP_YIELD=0) had a clean NPB CG's pair slow 4 times in 1.7 s, its disjoint pair
// fine (docs/faults.md, sweep 38).
constexpr std::int64_t kIndependentRoundsNs = 900'000'000;

// The rounds that say something, oldest first: whether each was slow. `readings` are of the
// newest of `samples`.
std::vector<bool> voting_rounds(const std::vector<Reading>& readings,
                                const std::vector<Sample>& samples) {
  std::vector<bool> out;
  const std::size_t offset = samples.size() - std::min(samples.size(), readings.size());
  std::int64_t observed_at = 0;
  for (std::size_t i = 0; i < readings.size() && offset + i < samples.size(); ++i) {
    if (!votes(readings[i])) continue;
    const std::int64_t at = samples[offset + i].at;
    const bool slow = readings[i] == Reading::slow;
    if (!out.empty() && at - observed_at < kIndependentRoundsNs) {
      if (slow) out.back() = true;
      continue;
    }
    out.push_back(slow);
    observed_at = at;
  }
  return out;
}

// Rounds of one pair whose rows lie this close in time (rank 0's clock) are one round: a round's
// leaders start it within milliseconds, and rounds are a second apart or more.
constexpr std::int64_t kSameRoundNs = 500'000'000;

// One measure's measurements slow by their network part (read_sample), of every pair, in time
// order: a pair slow by a leader's time off the CPU alone says nothing about the machine's network
// (on a loaded machine some leader of every round is).
struct SlowMoment {
  std::int64_t at;
  std::pair<int, int> pair;
  double network;  // Sample::network
  bool operator<(const SlowMoment& other) const { return at < other.at; }
};
// Also each pair's own, for the reverse direction of a link.
struct SlowMoments {
  std::vector<SlowMoment> all;
  std::map<std::pair<int, int>, std::vector<SlowMoment>> of_pair;
};
template <class Slow>
SlowMoments slow_moments(const ProbePairs& pairs, std::vector<Sample> PairProbes::*measure,
                         Slow slow) {
  SlowMoments moments;
  for (const auto& [key, p] : pairs)
    for (const Sample& sample : p.*measure)
      if (read_sample(sample, slow) == Reading::slow)
        moments.all.push_back({sample.at, key, sample.network});
  std::sort(moments.all.begin(), moments.all.end());
  for (const SlowMoment& m : moments.all) moments.of_pair[m.pair].push_back(m);
  return moments;
}

// The first moment of `list` (in time order) within kSameRoundNs of `at`; the round's go on while
// in_round says so.
std::vector<SlowMoment>::const_iterator round_of(const std::vector<SlowMoment>& list,
                                                 std::int64_t at) {
  auto by_time = [](const SlowMoment& m, std::int64_t t) { return m.at < t; };
  return std::lower_bound(list.begin(), list.end(), at - kSameRoundNs, by_time);
}
bool in_round(const std::vector<SlowMoment>& list, std::vector<SlowMoment>::const_iterator m,
              std::int64_t at) {
  return m != list.end() && m->at <= at + kSameRoundNs;
}

// The slow readings of `key` (its recent `samples` of the measure) where a pair sharing no host
// with it read about as slow in the same round (`moments`, of that measure) become `alike`. About
// as slow: the slowest such pair's network part slowed half as much as the link's or more, as
// detect_slow_links judges the messages of pairs elsewhere; the link's is the slower of its two
// directions in the round, so that both are judged alike (a delay one way slows the transfers
// both ways, their acknowledgements crossing it, and which way it is the one-way legs tell).
// `slowness` of a network part: how many times past the limit. A fault many times the noise of
// a loaded machine still counts in the rounds where the noise slows another pair too (a
// delayed link's 8 MB/s against 124 MB/s elsewhere). Costs, per slow reading, the slow moments
// of the round up to the first such pair: one where the whole machine is slow (every pair of a
// large job), a host's pairs (2 h of h hosts) where none is.
template <class Slowness>
void leave_out_alike(const SlowMoments& moments, const std::pair<int, int>& key,
                     const std::vector<Sample>& samples, Slowness slowness,
                     std::vector<Reading>& readings) {
  constexpr double kAsSlowElsewhere = 0.5;
  auto shares_a_host = [&](const std::pair<int, int>& other) {
    return other.first == key.first || other.first == key.second || other.second == key.first ||
           other.second == key.second;
  };
  const auto reverse = moments.of_pair.find({key.second, key.first});
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (readings[i] != Reading::slow) continue;
    const std::int64_t at = samples[i].at;
    double link = slowness(samples[i].network);
    if (reverse != moments.of_pair.end())
      for (auto m = round_of(reverse->second, at); in_round(reverse->second, m, at); ++m)
        link = std::max(link, slowness(m->network));
    for (auto m = round_of(moments.all, at); in_round(moments.all, m, at); ++m)
      if (!shares_a_host(m->pair) && slowness(m->network) >= kAsSlowElsewhere * link) {
        readings[i] = Reading::alike;
        break;
      }
  }
}

// A transfer slow by its network part, but by less than a loaded machine slows a healthy one
// (kLoadedMachineSlowdown), whose two leaders were both held off the CPU at its end, is the
// scheduler's as far as its throughput alone tells (`held`): leaders that wait turns for the CPU
// at the end wait turns mid-transfer too, where the held times do not see it, and the placement
// that makes them wait can hold for seconds, round after round, so the rounds are not the
// independent chances test_probe_pairs takes them for. Seen on a clean all-to-all at 2 busy loops:
// ctap3 -> ctap0 at 31 MB/s against 1,574 in 4 rounds of 5 over 8 s, both leaders held 1.4 ms at
// every such end, the pairs beside it fine (docs/faults.md, sweep 44). Only throughput alone is
// judged so, and only where the round's fastest ping of the same direction was not slow by its
// network part: a delay slows every ping (a 2 ms link under load: transfers 30-60 times slow,
// both leaders held 1-5 ms, pings 2-9 ms), while the fastest of a round's pings escapes the
// leaders' turns. Far below, a round is a rate limit's whatever the pings (the far-below measure
// reads every transfer as it is). Over the 143 stored runs of sweeps 38-43 this leaves out about
// 450 of 860 slow transfers of healthy pairs and 50 of 1,440 of faulty ones (rate limits and
// losses, which their other measures name), and changes no analysis but the transpose's. What it
// cannot tell: a link slowed that little, pings fast, on a machine whose leaders wait for the CPU
// at every round.
template <class Late>
void leave_out_contended(const std::vector<Sample>& samples, const std::vector<Sample>& pings,
                         double baseline, Late late, std::vector<Reading>& readings) {
  auto ping_slow = [&](std::int64_t at) {
    for (const Sample& ping : pings)
      if (std::abs(ping.at - at) <= kSameRoundNs && read_sample(ping, late) == Reading::slow)
        return true;
    return false;
  };
  for (std::size_t i = 0; i < samples.size() && i < readings.size(); ++i)
    if (readings[i] == Reading::slow && samples[i].contended &&
        samples[i].network * kLoadedMachineSlowdown > baseline && !ping_slow(samples[i].at))
      readings[i] = Reading::held;
}

// The median of the values that are not the scheduler's (all of them where every one is).
double median_of_voting(const std::vector<Sample>& samples, const std::vector<Reading>& readings) {
  std::vector<double> voting, all;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    all.push_back(samples[i].value);
    if (votes(readings[i])) voting.push_back(samples[i].value);
  }
  return median_of(voting.empty() ? all : voting);
}

// Judged on the newest rounds: slow in most of some run of rounds that ends with the newest, at
// least `needed` of them, so that rounds from before a fault began do not outvote the ones
// since (nor one slow round at the end the clean ones before it).
bool persistent(const std::vector<bool>& slow, int needed) {
  int count = 0;
  for (std::size_t length = 1; length <= slow.size(); ++length) {
    count += slow[slow.size() - length] ? 1 : 0;
    if (count >= needed && 2 * count > static_cast<int>(length)) return true;
  }
  return false;
}

PairVerdicts judge_probe_pairs(const ProbePairs& pairs, const ProbeBaseline& base,
                               SlowRounds& slow_rounds) {
  PairVerdicts verdicts;
  auto late = [&](double ns) { return ns > base.latency_limit; };
  auto narrow = [&](double mb) { return mb < base.throughput_limit; };
  const SlowMoments slow_latencies = slow_moments(pairs, &PairProbes::latency_ns, late);
  const SlowMoments slow_throughputs = slow_moments(pairs, &PairProbes::mb_per_s, narrow);
  auto lateness = [&](double ns) { return ns / std::max(1.0, base.latency_limit); };
  auto narrowness = [&](double mb) { return base.throughput_limit / std::max(1e-9, mb); };
  for (const auto& [key, p] : pairs) {
    PairVerdict& v = verdicts[key];
    const std::vector<Sample> lat = recent_samples(p.latency_ns), tput = recent_samples(p.mb_per_s);
    std::vector<Reading> latency_readings = round_readings(lat, late);
    std::vector<Reading> throughput_readings = round_readings(tput, narrow);
    leave_out_alike(slow_latencies, key, lat, lateness, latency_readings);
    leave_out_alike(slow_throughputs, key, tput, narrowness, throughput_readings);
    // The `both` and far-below measures, and the median a host's echo is judged by
    // (one_link_and_echo), read every slow transfer; throughput alone does not read those the
    // leaders' turns for the CPU explain.
    const std::vector<Reading> throughput_as_read = throughput_readings;
    leave_out_contended(tput, lat, base.throughput, late, throughput_readings);
    v.latency_ns = median_of_voting(lat, latency_readings);
    v.mb_per_s = median_of_voting(tput, throughput_as_read);
    v.rounds = static_cast<int>(std::max(lat.size(), tput.size()));
    // A probe's latency is half a round trip, which crosses the link both ways, whichever host
    // starts it: a slow network slows the pings of both hosts alike. A round trip that is slow
    // only when one of the two starts it is that host's or its peer's CPU (a descheduled process
    // answers late), not the link: latency counts in rounds where both directions are slow.
    if (auto back = pairs.find({key.second, key.first}); back != pairs.end()) {
      const std::vector<Sample> back_lat = recent_samples(back->second.latency_ns);
      std::vector<Reading> back_readings = round_readings(back_lat, late);
      leave_out_alike(slow_latencies, back->first, back_lat, lateness, back_readings);
      for (std::size_t i = 1; i <= latency_readings.size(); ++i) {
        Reading& there = latency_readings[latency_readings.size() - i];
        there = i > back_readings.size()
                    ? (votes(there) ? Reading::fine : there)
                    : both_slow(there, back_readings[back_readings.size() - i]);
      }
    }
    auto counted = [&](Reading r) {
      return static_cast<int>(
          std::count(latency_readings.begin(), latency_readings.end(), r) +
          std::count(throughput_readings.begin(), throughput_readings.end(), r));
    };
    v.held_rounds = counted(Reading::held);
    v.alike_rounds = counted(Reading::alike);
    for (const auto& [samples, readings] :
         {std::pair{&lat, &latency_readings}, std::pair{&tput, &throughput_readings}}) {
      const bool throughput = samples == &tput;
      const std::size_t offset = samples->size() - std::min(samples->size(), readings->size());
      for (std::size_t i = 0; i < readings->size() && offset + i < samples->size(); ++i)
        if (votes((*readings)[i])) {
          const Sample& sample = (*samples)[offset + i];
          v.votes.push_back({sample.at, (*readings)[i] == Reading::slow, throughput,
                             throughput ? narrowness(sample.network) : lateness(sample.network)});
        }
      if (!samples->empty()) v.asynchronous |= samples->back().asynchronous;
    }
    std::sort(v.votes.begin(), v.votes.end(),
              [](const PairVerdict::Vote& a, const PairVerdict::Vote& b) { return a.at < b.at; });
    const std::vector<bool> slow_latency = voting_rounds(latency_readings, lat);
    const std::vector<bool> slow_throughput = voting_rounds(throughput_readings, tput);
    auto count = [](const std::vector<bool>& slow) {
      return static_cast<int>(std::count(slow.begin(), slow.end(), true));
    };
    v.slow_rounds = std::max(count(slow_latency), count(slow_throughput));
    v.slow_for_host =
        persistent(slow_latency, kHostRounds) || persistent(slow_throughput, kHostRounds);
    v.slow = persistent(slow_latency, kLinkRounds) || persistent(slow_throughput, kLinkRounds);
    std::vector<Reading> both;
    for (std::size_t i = std::min(latency_readings.size(), throughput_readings.size()); i >= 1; --i)
      both.push_back(both_slow(latency_readings[latency_readings.size() - i],
                               throughput_as_read[throughput_as_read.size() - i]));
    std::vector<Reading> far_below = throughput_as_read;
    for (std::size_t i = 0; i < far_below.size(); ++i)
      if (far_below[i] == Reading::slow && tput[i].network * kFarBelow > base.throughput)
        far_below[i] = Reading::fine;
    slow_rounds[key] = {slow_latency, slow_throughput, voting_rounds(both, tput),
                        voting_rounds(far_below, tput)};
  }
  return verdicts;
}

// The evidence (evidence.hpp): rounds are seconds apart, each an independent observation (a
// pair's measurements within kIndependentRoundsNs count once: voting_rounds). Of
// each measure's runs of newest rounds, the one least likely by chance; the multiplicity counts
// every pair and four measures: latency, throughput, both at once, and throughput far below the
// baseline (kFarBelow). A busy node slows one measure of a round now and then (seen: a pair's
// throughput 15x below the others' in 3 of 5 rounds of a clean run at load 6); a delay slows
// both. At the floors of 5% for one measure and 1% for both or for far below, a link needs 4
// slow rounds of 4, or 3 slow in both, or 3 far below. The chance that a healthy
// pair's round reads slow, per measure: the lower quartile of the pairs' shares, never under the
// measure's floor.
void test_probe_pairs(const HealthOptions& options, SlowRounds& slow_rounds,
                      PairVerdicts& verdicts) {
  constexpr std::array<double, kMeasures> kFloors = {0.05, 0.05, 0.01, 0.01};
  std::array<double, kMeasures> chance{};
  for (std::size_t m = 0; m < kMeasures; ++m) {
    std::vector<double> shares;
    for (const auto& [key, series] : slow_rounds)
      if (!series[m].empty())
        shares.push_back(static_cast<double>(std::count(series[m].begin(), series[m].end(), true)) /
                         static_cast<double>(series[m].size()));
    chance[m] = std::max(kFloors[m], lower_quartile_of(shares));
  }
  for (auto& [key, v] : verdicts) {
    v.test.observed_what = "slow probe rounds";
    v.test.spacing_s = 0;  // a round every COMMTAP_PROBE_INTERVAL or more
    v.test.comparisons = static_cast<double>(verdicts.size() * kMeasures);
    for (std::size_t m = 0; m < kMeasures; ++m)
      strongest_newest_run(slow_rounds[key][m], chance[m], v.test);
    v.slow = v.slow && v.test.false_alarm() <= options.false_alarm_rate;
  }
}

bool involves(const std::pair<int, int>& pair, int node) {
  return pair.first == node || pair.second == node;
}

// A slow link's echo on its host's other pairs: the leader that measures a link held by a delay
// or a rate limit runs its other pairs of the round behind it, its library still busy with that
// transfer (halo, link ctap2 -> ctap3 +4 ms: ctap2's transfers to ctap3 25-34 ms, to ctap0 and
// ctap1 1.5-3.5 ms against 0.06-0.12 ms; named host ctap2, docs/faults.md sweep 19). A host
// whose slowest peer is kEchoFactor times slower than each of its other slow peers, by the
// pairs' median throughput and by their latency, has one slow link and its echo, not a slow NIC:
// a delay or rate limit at the host slows all its pairs alike in one of them at least. One
// measure alone does not tell: behind a rate limit the pings queue behind the limited transfers
// and read 50 times apart from one peer to the next, and a pair's median over a few rounds, some
// before the fault, can put one peer's throughput 8 times below another's (rate_host on ctap3,
// pings 20 us to 1 ms: the host was missed, mpi.faults).
constexpr double kEchoFactor = 8;
bool one_link_and_echo(int node, const PairVerdicts& verdicts) {
  std::map<int, std::pair<double, double>> peers;  // peer -> (worst MB/s, worst latency ns)
  for (const auto& [key, v] : verdicts) {
    if (!involves(key, node) || !v.slow_for_host) continue;
    // A pair with no throughput rounds (0) says nothing about it.
    const double mb_per_s = v.mb_per_s > 0 ? v.mb_per_s : 1e18;
    auto [it, added] =
        peers.try_emplace(key.first == node ? key.second : key.first, mb_per_s, v.latency_ns);
    if (!added) {
      it->second.first = std::min(it->second.first, mb_per_s);
      it->second.second = std::max(it->second.second, v.latency_ns);
    }
  }
  if (peers.size() < 2) return false;
  auto dominated = [&](auto slowness) {
    std::vector<double> values;
    for (const auto& [peer, measures] : peers) values.push_back(slowness(measures));
    std::sort(values.rbegin(), values.rend());
    return values[0] >= kEchoFactor * values[1];
  };
  return dominated([](const auto& m) { return 1.0 / std::max(1e-9, m.first); }) &&
         dominated([](const auto& m) { return m.second; });
}

// A host whose pairs are slow (all it sends, all it receives, or most of both) while a pair
// elsewhere is fine: its NIC or its link to the switch (unless one link and its echo).
std::set<int> slow_probe_hosts(const HealthOptions& options, const std::set<int>& nodes,
                               const PairVerdicts& verdicts) {
  std::set<int> slow_hosts;
  for (int node : nodes) {
    int out = 0, out_slow = 0, in = 0, in_slow = 0;
    std::set<int> slow_peers;
    bool fine_elsewhere = false;
    for (const auto& [key, v] : verdicts) {
      if (!involves(key, node)) {
        fine_elsewhere |= !v.slow_for_host;
        continue;
      }
      (key.first == node ? out : in) += 1;
      (key.first == node ? out_slow : in_slow) += v.slow_for_host;
      if (v.slow_for_host) slow_peers.insert(key.first == node ? key.second : key.first);
    }
    // Two peers at least: a host probed with one peer only (a program whose communicators pair
    // hosts, as two coupled models of two hosts each do) has that pair's two directions slow
    // whether the fault is its NIC, the peer's or the link, and is no host finding on its own.
    const int slow = out_slow + in_slow;
    const bool host_wide =
        slow_peers.size() >= 2 &&
        ((out_slow == out) || (in_slow == in) || slow >= options.host_cell_fraction * (out + in));
    if (host_wide && fine_elsewhere && !one_link_and_echo(node, verdicts)) slow_hosts.insert(node);
  }
  return slow_hosts;
}

// A link the asynchronous probes find slow may be the first sight of its host's network fault: a
// leader measures one peer at a time and confirms that one, so a host's other pairs read slow a
// slot or two later, or at the next collective round where the rounds measure them (the network
// of a host running NPB CG or MG was named as one of its links for one analysis first, 2-3 s
// after the fault; docs/faults.md sweep 38). Such a link waits
// - while another pair of its two hosts has voted slow since kLinkAwaitsNs before the link began
//   to read slow (a host's fault slows them too, a link's leaves them fine; the host's other
//   pairs may have read slow first), by a measure at kEchoShare of the link's slowness or more,
//   for at most kLinkAwaitsSlowPairNs after it began: time for the host rule's second round;
// - or while another pair has not voted since though it was measured within kActivePairNs
//   before, for at most kLinkAwaitsNs after it began, unless that pair's leader is the one
//   confirming the link (its other peers come at their turns, a slot each, which the wait
//   mostly outlasts; in traces of versions whose confirmations took the leader's turns, none
//   came while they went on: a 20 Mbit/s link's leader measured no other peer for 6.7 s).
// Not once the job has ended (nothing more will come): then it is named whatever its hosts'
// other pairs say. The rounds measure every pair at once and need not wait. Seen: a split
// pipeline's host network on ctap2 (2 ms) first read on the asynchronously probed
// ctap0 -> ctap2; ctap2's other pairs, left to the rounds, read slow 5 s later (by a fourth of
// the link's slowness or more), and the host rule named it 3 s after that, 8.2 s after the link
// began: with a wait of 6 s the link was named from 15 s to 17 s (docs/faults.md, sweep 40 E).
// What it cannot tell apart: a link fault whose echo slows its host's other pairs as much as
// kEchoShare of the link from its host's; for that long the link is not named. (Over the
// asynchronously probed links of sweep 40, a link's other pairs read at most a sixth of its
// slowness, a host's other pairs half of it or more.) A host whose other pairs are measured
// more than kLinkAwaitsNs after its first slow pair is named as that link meanwhile (the same
// run at 12.9 s: the rounds had measured ctap2's other pairs 0.7 s before the fault; waiting
// for pairs until they are due delayed links by 1-4 s in 5 of 58 stored runs, and was left).
constexpr std::int64_t kActivePairNs = 10'000'000'000;
constexpr std::int64_t kLinkAwaitsNs = 4'000'000'000;
constexpr std::int64_t kLinkAwaitsSlowPairNs = 9'000'000'000;
// Another pair's slow reading holds the link only where it is as slow as kEchoShare of the link
// by the same measure (against the measure's limit): a host's fault slows its pairs alike, while
// a link's echo (its leader busy with a transfer over it) slows another pair a little past the
// limit. NPB MG with ctap0 -> ctap1 at 20 Mbit/s, named at 11 s by stalls, was held until 17 s.

// Slow readings further apart than this are separate slownesses (slow_since).
constexpr std::int64_t kSlownessGapNs = 6'000'000'000;

// When the link's current slowness began: its first slow measurement since its last fine one
// (a moment none of whose votes is slow), or since a gap of more than kSlownessGapNs between slow
// ones (a spike at the job's start is not this slowness's beginning: NPB MG's rate-limited host
// was named as a pair that had read slow once 10 s before, docs/faults.md sweep 40). INT64_MIN
// where its newest measurement was fine.
std::int64_t slow_since(const std::vector<PairVerdict::Vote>& votes) {
  std::int64_t since = INT64_MIN, last_slow = INT64_MIN;
  for (std::size_t i = 0; i < votes.size();) {
    const std::int64_t at = votes[i].at;
    bool slow = false;
    for (; i < votes.size() && votes[i].at == at; ++i) slow |= votes[i].slow;
    if (!slow) {
      since = INT64_MIN;
      continue;
    }
    if (since == INT64_MIN || at - last_slow > kSlownessGapNs) since = at;
    last_slow = at;
  }
  return since;
}

// How slow a pair reads by latency [0] and by throughput [1] since `since`: the median of its
// slow votes (0: none).
std::array<double, 2> slowness_since(const std::vector<PairVerdict::Vote>& votes,
                                     std::int64_t since) {
  std::vector<double> slow[2];
  for (const PairVerdict::Vote& vote : votes)
    if (vote.slow && vote.at >= since) slow[vote.throughput].push_back(vote.slowness);
  return {slow[0].empty() ? 0 : median_of(slow[0]), slow[1].empty() ? 0 : median_of(slow[1])};
}

bool link_awaits_its_hosts(const PairVerdicts& verdicts, const std::pair<int, int>& key, bool both,
                           std::int64_t now) {
  const PairVerdict& link = verdicts.at(key);
  if (!link.asynchronous) return false;
  const std::int64_t since = slow_since(link.votes);
  if (since == INT64_MIN || now - since > kLinkAwaitsSlowPairNs) return false;
  const bool unmeasured_count = now - since <= kLinkAwaitsNs;
  const std::array<double, 2> slowness = slowness_since(link.votes, since);
  for (const auto& [other, v] : verdicts) {
    if (other == key || other == std::pair{key.second, key.first} || v.votes.empty()) continue;
    if (!involves(other, key.first) && !involves(other, key.second)) continue;
    bool voted_since = false, slow_since = false;
    for (const PairVerdict::Vote& vote : v.votes) {
      voted_since |= vote.at >= since;
      slow_since |= vote.slow && vote.at >= since - kLinkAwaitsNs &&
                    vote.slowness >= kEchoShare * slowness[vote.throughput];
    }
    const bool confirming = other.first == key.first || (both && other.first == key.second);
    const bool active = v.votes.back().at >= since - kActivePairNs;
    if (slow_since || (unmeasured_count && !voted_since && active && !confirming)) return true;
  }
  return false;
}

// Each pair slow for a host (in most of its newest rounds, kHostRounds at least) and slow still
// (its newest vote slow), with when it began and how slow, for hold_links_at_probed_hosts.
void record_slow_pairs(const ProbePairs& pairs, const PairVerdicts& verdicts,
                       ProbeEvidence& evidence) {
  for (const auto& [key, v] : verdicts) {
    const std::int64_t since = slow_since(v.votes);
    if (!v.slow_for_host || since == INT64_MIN) continue;
    const std::array<double, 2> slowness = slowness_since(v.votes, since);
    const PairProbes& p = pairs.at(key);
    evidence.slow_pairs.push_back({p.from, p.to, since, slowness[0], slowness[1]});
  }
}

// What the job's own messages say about each directed pair (detect_slow_links' matrix): a
// message's one-way time has a direction, which a probe's half round trip has not, and there are
// hundreds of them in a window against a few probe rounds.
struct MessageVerdict {
  bool slow = false, fine = false;  // neither: too few messages, or some slow
};
using MessageVerdicts = std::map<std::pair<std::string, std::string>, MessageVerdict>;

// Fine: at least kMessagesKnownFine fast recent messages and hardly a slow one (at most one in
// twenty): behind a host rate-limited both ways, its pair that carries less traffic has most of
// its small messages through in time, and a sixth of them slow (seen: 11 of 71). A direction
// slow as its reverse's echo (its larger messages waiting for acknowledgements that cross the
// slow way) is neither.
MessageVerdicts message_verdicts(const MessageEvidence& messages) {
  MessageVerdicts by_messages;
  for (const MessageLink& l : messages.links)
    by_messages[{l.from, l.to}] = {l.slow && !l.echo_of_reverse,
                                   !l.slow && !l.suspect &&
                                       static_cast<int>(l.recent_fast) >= kMessagesKnownFine &&
                                       20 * l.recent_slow <= l.recent_slow + l.recent_fast};
  return by_messages;
}

// A link slow one way slows both directions' probe round trips, and on a busy node one more of
// its host's pairs crossing the line in two rounds makes the host look slow. Where the messages
// measured at least two of the host's directed pairs and found exactly one slow and the others
// fine, the fault is that link, not the host. Not where the leaders of kLeadersAgainstHost other
// hosts or more each measured their pair into it slow: a link and a noisy pair make two, and
// behind a slow host the receivers find most messages already there, so its pairs read fine by
// the messages (NPB LU on 4x2 with a host +5 ms: its three peers' pairs into it 5 of 5 rounds
// slow, named as two links for three analyses, docs/faults.md sweep 46).
constexpr int kLeadersAgainstHost = 3;
void hosts_that_are_links(const ProbePairs& pairs, const PairVerdicts& verdicts,
                          const MessageVerdicts& by_messages,
                          const std::map<int, std::string>& name_of, std::set<int>& slow_hosts,
                          ProbeEvidence& evidence) {
  for (auto it = slow_hosts.begin(); it != slow_hosts.end();) {
    const int node = *it;
    int leaders_against = 0;
    for (const auto& [key, v] : verdicts)
      leaders_against += key.second == node && key.first != node && v.slow_for_host;
    if (leaders_against >= kLeadersAgainstHost) {
      ++it;
      continue;
    }
    int slow = 0, fine = 0;
    std::string link;
    for (const auto& [key, p] : pairs) {
      if (!involves(key, node)) continue;
      auto m = by_messages.find({p.from, p.to});
      if (m == by_messages.end()) continue;
      slow += m->second.slow;
      fine += m->second.fine;
      if (m->second.slow) link = p.from + " -> " + p.to;
    }
    if (slow == 1 && fine >= 1) {
      evidence.host_is_a_link.push_back({name_of.at(node), link});
      it = slow_hosts.erase(it);
    } else {
      ++it;
    }
  }
}

// What the findings are made from.
struct ProbeJudgement {
  const Job& job;
  const HealthOptions& options;
  ProbePairs& pairs;
  const PairVerdicts& verdicts;
  const ProbeBaseline& base;
  const std::set<int>& nodes;
  const MessageVerdicts& by_messages;
  // Each direction's one-way time from the probes' round trips on the aligned and corrected
  // clocks (align_host_clocks). Their baseline is the latencies' (half a healthy round trip),
  // which no clock error moves.
  std::map<std::pair<std::string, std::string>, double> one_way;

  // How far from the baseline, to put the clearest of several findings of a kind first.
  double strength(double latency_ns, double mb_per_s) const {
    return std::max(latency_ns / std::max(1.0, base.latency),
                    base.throughput / std::max(1e-9, mb_per_s));
  }
  std::string baseline() const {
    return ms_text(base.latency) + " latency, " + mb_text(base.throughput);
  }
  // Several of its pairs, each slow in most of at least two rounds: their rounds together are
  // its evidence, and a host they do not make a case for is not named (nor are its links kept
  // from being named).
  EvidenceTest host_test(int node) const {
    EvidenceTest test;
    test.observed_what = "slow probe rounds";
    test.spacing_s = 0;
    test.comparisons = static_cast<double>(nodes.size());
    for (const auto& [key, v] : verdicts)
      if (involves(key, node) && v.slow_for_host) test.pool(v.test);
    return test;
  }
};

void add_host_finding(const ProbeJudgement& j, int node, std::vector<Finding>& findings,
                      std::vector<std::string>& delayed) {
  std::vector<double> lat, tput;
  int rounds = 0, held_rounds = 0, alike_rounds = 0;
  std::string host;
  for (const auto& [key, v] : j.verdicts) {
    if (!involves(key, node) || !v.slow_for_host) continue;
    lat.push_back(v.latency_ns);
    tput.push_back(v.mb_per_s);
    rounds = std::max(rounds, v.rounds);
    held_rounds += v.held_rounds;
    alike_rounds += v.alike_rounds;
    host = key.first == node ? j.pairs[key].from : j.pairs[key].to;
  }
  Finding f;
  f.kind = finding_kind::slow_host_network;
  f.subject = "host " + host;
  f.strength = j.strength(median_of(lat), median_of(tput));
  const EvidenceTest test = j.host_test(node);
  f.severity = severity_by_evidence(test, j.options);
  f.confidence = test.confidence();
  f.first_seen_ns = f.last_seen_ns = j.job.now_wall;
  f.summary = f.subject + ": link probes to and from it measure " + ms_text(median_of(lat)) +
              " latency, " + mb_text(median_of(tput)) + " (median of its slow pairs) vs " +
              j.baseline() + " between other hosts, over " +
              count_text(static_cast<std::uint64_t>(rounds), "probe round") +
              " (network side: NIC or link)" + held_text(held_rounds, alike_rounds) + "; " +
              test.text();
  ProbedHostEvidence evidence{.host = host,
                              .test = test,
                              .latency_ns = median_of(lat),
                              .mb_per_s = median_of(tput),
                              .baseline_latency_ns = j.base.latency,
                              .baseline_mb_per_s = j.base.throughput,
                              .rounds = rounds,
                              .held_rounds = held_rounds,
                              .alike_rounds = alike_rounds};
  // The job's messages on its links, named as slow links (a host whose messages go to one peer
  // only is not judged by them), are this finding's.
  std::vector<std::string>& links = evidence.message_links;
  std::erase_if(findings, [&](const Finding& m) {
    const bool absorbed = m.kind == finding_kind::slow_link && m.source != "probes" &&
                          (m.from == host || m.to == host);
    if (absorbed) links.push_back(m.subject);
    return absorbed;
  });
  if (!links.empty())
    f.summary += "; the job's messages on " + links[0] +
                 (links.size() > 1 ? " and " + std::to_string(links.size() - 1) + " more" : "") +
                 " are slow too";
  f.evidence.rule = std::move(evidence);
  f.host = host;
  f.source = "probes";
  f.avoid = avoid_host(host);
  findings.push_back(f);
  if (std::find(delayed.begin(), delayed.end(), host) == delayed.end()) delayed.push_back(host);
}

// A transfer of COMMTAP_PROBE_BYTES over a link whose only fault is a delay takes a few of its
// round trips: TCP's window, restarted after a pause at 10 segments and doubling each round trip,
// carries 256 KiB in 5, and MPICH's rendezvous handshake takes one more. One that took this many
// was held back by the link's rate (or its losses), not by its delay.
constexpr double kDelayRoundTrips = 16;

// Both ways by the probes, one way by the messages (the other way fine, or not sent): the
// messages' direction. Else, where the slower way's best transfer since the link first read slow
// in the recent rounds is slow itself and under a quarter of the other way's best, and took
// kDelayRoundTrips of the pair's round trips or more (a delay alone slows a transfer by a few
// round trips, and both ways alike: a held time taken out of one way's and not the other's set a
// 2 ms link's two ways apart, NPB CG's undelayed way at 47 MB/s at best and the delayed way over
// four times that, sweep 56), that way: a rate limit one way slows the reverse's transfers too
// while the limited way is busy (their acknowledgements queue behind its data), not all of them
// (NPB CG with ctap1 -> ctap2 at 20 Mbit/s: every transfer that way 110-245 ms, the other way
// 110-135 ms in half the rounds and 0.2-5 ms in the rest, docs/faults.md sweep 40). Else the
// probes' own one-way times, where one direction has the round trip's excess and the other next to
// none: a clock error would add to one what it takes from the other, and a slow host network delays
// both. Behind a rate limit the one-way times come after the transfers: a ping's reply queues
// behind the limited way's data, the fastest round trip that aligns the clocks too, and NPB CG's
// `ctap2 -> ctap3` at 20 Mbit/s read 666 us one way the unlimited way and 0 the limited one at 43
// s, named the wrong way for two analyses (docs/faults.md sweep 56). Turns `p` to the slow
// direction, clears `both` where one was found, and returns how the probes told it, for the
// summary.
std::string slow_direction(const ProbeJudgement& j, const std::pair<int, int>& key,
                           double latency_ns, PairProbes& p, bool& both) {
  auto there = j.by_messages.find({p.from, p.to}), back_there = j.by_messages.find({p.to, p.from});
  const bool forth = there != j.by_messages.end() && there->second.slow;
  const bool back_slow = back_there != j.by_messages.end() && back_there->second.slow;
  if (forth != back_slow) {
    both = false;
    if (back_slow) std::swap(p.from, p.to);
    return "";
  }
  // Each way's best since the slow way first read slow in the recent rounds.
  std::int64_t slow_from = INT64_MAX;
  for (const auto& way : {key, std::pair{key.second, key.first}})
    if (auto found = j.pairs.find(way); found != j.pairs.end())
      for (const Sample& sample : recent_samples(found->second.mb_per_s))
        if (sample.network < j.base.throughput_limit) slow_from = std::min(slow_from, sample.at);
  auto best = [&](const std::pair<int, int>& way) {
    Sample top;
    if (auto found = j.pairs.find(way); found != j.pairs.end())
      for (const Sample& sample : recent_samples(found->second.mb_per_s))
        if (sample.at >= slow_from && sample.network > top.network) top = sample;
    return top;
  };
  const Sample there_best = best(key), back_best = best({key.second, key.first});
  const bool back_slower = back_best.network < there_best.network;
  const Sample& slower = back_slower ? back_best : there_best;
  const Sample& faster = back_slower ? there_best : back_best;
  const double slower_transfer_ns = slower.value > 0 ? p.transfer_bytes / slower.value * 1e3 : 0;
  const bool not_a_delay = slower_transfer_ns >= kDelayRoundTrips * 2 * latency_ns;
  if (not_a_delay && slower.network > 0 && slower.network < j.base.throughput_limit &&
      slower.network <= kEchoShare * faster.network) {
    both = false;
    if (back_slower) std::swap(p.from, p.to);
    // The faster way's by its whole time, a lower bound: its network part (held times taken
    // out) may be next to nothing, and read as a throughput no link has.
    return " (" + mb_text(slower.network) + ", back " + mb_text(faster.value) + " or more)";
  }
  auto f = j.one_way.find({p.from, p.to}), b = j.one_way.find({p.to, p.from});
  if (f == j.one_way.end() || b == j.one_way.end()) return "";
  const double excess_forth = f->second - j.base.latency, excess_back = b->second - j.base.latency;
  const double needed = j.base.latency_limit - j.base.latency;
  if (!slow_way_alone(excess_forth, excess_back, needed) &&
      !slow_way_alone(excess_back, excess_forth, needed))
    return "";
  both = false;
  const bool reversed = excess_back > excess_forth;
  if (reversed) std::swap(p.from, p.to);
  return " (one way " + ms_text(reversed ? b->second : f->second) + ", back " +
         ms_text(reversed ? f->second : b->second) + ")";
}

// A slow pair: added to the message finding of the same link, or a link finding of its own.
void add_link_finding(const ProbeJudgement& j, const std::pair<int, int>& key, const PairVerdict& v,
                      bool both, std::vector<Finding>& findings) {
  PairProbes p = j.pairs[key];
  // The job's own messages may have named this link already, with its direction (a probe's
  // latency is half a round trip, so it cannot tell which way is slow): one finding.
  auto named = std::find_if(findings.begin(), findings.end(), [&](const Finding& m) {
    if (m.kind != finding_kind::slow_link) return false;
    const std::string &a = m.from, &b = m.to;
    return (a == p.from && b == p.to) || (a == p.to && b == p.from);
  });
  auto describe = [&](const PairVerdict& pv) {
    return ms_text(pv.latency_ns) + " latency, " + mb_text(pv.mb_per_s);
  };
  if (named != findings.end()) {
    named->also_source = "probes";
    named->evidence.also = std::make_shared<const FindingEvidence>(
        FindingEvidence{.rule = ProbesAlsoEvidence{.latency_ns = v.latency_ns,
                                                   .mb_per_s = v.mb_per_s,
                                                   .baseline_latency_ns = j.base.latency,
                                                   .baseline_mb_per_s = j.base.throughput}});
    named->summary += "; link probes also measure " + describe(v) + " vs " + j.baseline();
    return;
  }
  // A latency is half a round trip, which crosses the link both ways: a direction slow by its
  // latency says nothing of which way is slow, whether or not its reverse's rows read slow too
  // (the asynchronous probes measure one direction at a time, and their confirmations only the
  // one that found the change), so the messages or the one-way times tell it where they can.
  const bool by_latency = v.latency_ns > j.base.latency_limit;
  const std::string direction =
      both || by_latency ? slow_direction(j, key, v.latency_ns, p, both) : "";
  Finding f;
  f.kind = finding_kind::slow_link;
  f.subject = "link " + p.from + (both ? " <-> " : " -> ") + p.to;
  f.strength = j.strength(v.latency_ns, v.mb_per_s);
  f.severity = severity_by_evidence(v.test, j.options);
  f.confidence = v.test.confidence();
  f.first_seen_ns = f.last_seen_ns = j.job.now_wall;
  f.summary = f.subject + ": link probes measure " + describe(v) + " vs " + j.baseline() +
              " between other hosts, slow in " + std::to_string(v.slow_rounds) + " of " +
              count_text(static_cast<std::uint64_t>(v.rounds), "probe round") +
              (both ? ", both directions" : ", this direction only" + direction) +
              held_text(v.held_rounds, v.alike_rounds) + "; " + v.test.text();
  f.evidence.rule = ProbedLinkEvidence{.from = p.from,
                                       .to = p.to,
                                       .test = v.test,
                                       .both_directions = both,
                                       .latency_ns = v.latency_ns,
                                       .mb_per_s = v.mb_per_s,
                                       .baseline_latency_ns = j.base.latency,
                                       .baseline_mb_per_s = j.base.throughput,
                                       .slow_rounds = v.slow_rounds,
                                       .rounds = v.rounds,
                                       .held_rounds = v.held_rounds,
                                       .alike_rounds = v.alike_rounds};
  // A probe's latency is half a round trip: a link slow both ways costs a message the whole
  // excess twice over.
  f.from = p.from;
  f.to = p.to;
  f.source = "probes";
  f.avoid = avoid_link(p.from, p.to, both, (v.latency_ns - j.base.latency) * (both ? 2 : 1),
                       v.mb_per_s, j.base.throughput);
  findings.push_back(f);
}

}  // namespace

bool detect_probed_links(const Job& job, const HealthOptions& options, const HostLimits& limits,
                         const MessageEvidence& messages, const ClockAlignment& clocks,
                         std::vector<Finding>& findings, ProbeEvidence& evidence,
                         std::vector<std::string>& delayed, std::string& error) {
  ProbePairs pairs;
  if (!read_probe_pairs(job, options, pairs, error)) return false;
  if (pairs.size() < 2) return true;  // one host pair in one direction: nothing to compare with
  mark_limited(job, limits, pairs);
  for (const auto& [key, p] : pairs)
    for (const auto* series : {&p.latency_ns, &p.mb_per_s})
      evidence.held_recorded = evidence.held_recorded ||
                               std::any_of(series->begin(), series->end(),
                                           [](const Sample& s) { return s.network != s.value; });
  const std::map<int, std::string> name_of = name_nodes(pairs);
  const ProbeBaseline base = probe_baseline(pairs, options);
  SlowRounds slow_rounds;
  PairVerdicts verdicts = judge_probe_pairs(pairs, base, slow_rounds);
  test_probe_pairs(options, slow_rounds, verdicts);
  for (const auto& [key, v] : verdicts)  // for the report's matrices
    evidence.links.push_back({pairs[key].from, pairs[key].to, v.latency_ns / 1e3, v.mb_per_s,
                              v.rounds, v.slow || v.slow_for_host});
  record_slow_pairs(pairs, verdicts, evidence);
  std::set<int> nodes;
  for (const auto& [key, v] : verdicts) nodes.insert({key.first, key.second});
  std::set<int> slow_hosts = slow_probe_hosts(options, nodes, verdicts);
  const MessageVerdicts by_messages = message_verdicts(messages);
  hosts_that_are_links(pairs, verdicts, by_messages, name_of, slow_hosts, evidence);
  ProbeJudgement judgement{job, options, pairs, verdicts, base, nodes, by_messages, {}};
  for (const ProbedOneWay& l : clocks.probed_one_way)
    judgement.one_way[{l.from, l.to}] = l.one_way_us * 1e3;
  std::erase_if(slow_hosts, [&](int node) {
    return judgement.host_test(node).false_alarm() > options.false_alarm_rate;
  });
  for (int node : slow_hosts) add_host_finding(judgement, node, findings, delayed);
  const bool running = std::any_of(job.ranks.begin(), job.ranks.end(),
                                   [](const auto& r) { return r.second.ended_by == "running"; });
  const std::int64_t now = static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned;
  for (const auto& [key, v] : verdicts) {
    // A single pair slow in a round or two is no finding: one descheduled leader (a busy node)
    // slows all of its repeats. Hosts are judged on several pairs at once, links need rounds.
    if (!v.slow || slow_hosts.count(key.first) || slow_hosts.count(key.second)) continue;
    auto back = verdicts.find({key.second, key.first});
    const bool both = back != verdicts.end() && back->second.slow;
    if (both && key.first > key.second) continue;  // reported once, with the other direction
    if (running && link_awaits_its_hosts(verdicts, key, both, now)) {
      evidence.awaiting_hosts.push_back(
          {"slow_link",
           "link " + name_of.at(key.first) + (both ? " <-> " : " -> ") + name_of.at(key.second)});
      evidence.held_links.emplace_back(name_of.at(key.first), name_of.at(key.second));
    } else
      add_link_finding(judgement, key, v, both, findings);
    // Its receiver waits for what comes over it, and a sender that waits for the answer (a
    // pipeline stage for its partner's gradients) arrives at the next collective as late: both
    // count as delayed, as for a link the messages name (a link fault on a pipeline's
    // ctap2 -> ctap3 named ctap2 slow_host by its lateness too, docs/faults.md sweep 32).
    for (int node : {key.first, key.second}) {
      const std::string& host = name_of.at(node);
      if (std::find(delayed.begin(), delayed.end(), host) == delayed.end()) delayed.push_back(host);
    }
  }
  drop_unconfirmed_message_findings(job, options, pairs, base.latency_limit, base.throughput_limit,
                                    messages, findings, evidence, delayed);
  return true;
}

// A link the job's messages, its stalled transfers or its lost packets name may be the first
// sight of its host's network fault, as a probed link may be (link_awaits_its_hosts): behind a
// slow host the receivers post late and find most messages there, so the host's pairs read slow
// by the messages one at a time. The probes measure every pair from the leaders' side: where they
// find another pair of the link's hosts slow (not the link, nor its reverse) by a measure at
// kEchoShare of the link's own slowness or more (a host's fault slows its pairs alike, a link's
// echo slows them a little), the link waits for the host rule, for at most
// kLinkAwaitsSlowPairNs after that pair began to read slow, and not once the job has ended.
// Seen: NPB LU with ctap3's network +5 ms, named `slow_link ctap3 -> ctap2` by its messages at
// 13 s while the probes read ctap0 -> ctap3 and ctap1 -> ctap3 slow, the host named at 13.5 s;
// NPB FT with ctap2's network +4 ms, `slow_link ctap0 -> ctap2` by its lost packets at 16-17 s
// while the probes read ctap1 -> ctap2 slow, the host named at 18 s (docs/faults.md, sweep 55).
// What it cannot tell apart: a link fault and, at the same time, a slowness on another pair of
// its hosts that the probes see and no rule names.
void hold_links_at_probed_hosts(const Job& job, bool running, ProbeEvidence& probes,
                                std::vector<Finding>& findings) {
  if (!running || probes.slow_pairs.empty()) return;
  const std::int64_t now = static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned;
  std::erase_if(findings, [&](const Finding& f) {
    if (f.kind != finding_kind::slow_link || f.source == "probes" || f.from.empty() || f.to.empty())
      return false;
    auto own = [&](const ProbeEvidence::SlowPair& p) {
      return (p.from == f.from && p.to == f.to) || (p.from == f.to && p.to == f.from);
    };
    double lateness = 0, narrowness = 0;  // the link's own, where the probes find it slow
    for (const ProbeEvidence::SlowPair& p : probes.slow_pairs)
      if (own(p)) {
        lateness = std::max(lateness, p.lateness);
        narrowness = std::max(narrowness, p.narrowness);
      }
    const bool held =
        std::any_of(probes.slow_pairs.begin(), probes.slow_pairs.end(), [&](const auto& p) {
          const bool at_its_hosts =
              p.from == f.from || p.to == f.from || p.from == f.to || p.to == f.to;
          return at_its_hosts && !own(p) && now - p.since <= kLinkAwaitsSlowPairNs &&
                 ((p.lateness > 0 && p.lateness >= kEchoShare * lateness) ||
                  (p.narrowness > 0 && p.narrowness >= kEchoShare * narrowness));
        });
    if (held) probes.awaiting_probed_hosts.push_back({f.kind, f.subject});
    return held;
  });
}

}  // namespace commtap::analyzer
