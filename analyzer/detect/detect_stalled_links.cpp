// slow_host_network and slow_link from stalled transfers (docs/analyzer.md): a link that drops
// packets delivers most messages on time and a few after a retransmission timeout (200 ms and
// more for TCP on Linux), so every median reads healthy while the job waits at each stall.
#include <algorithm>
#include <map>
#include <set>

#include "analyzer/detect/detectors.hpp"
#include "analyzer/findings/statistics.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {
namespace {

// Stalls this far apart count as separate moments: one pause of a receiving process delays
// every message in flight to it at once, which is one event, not several.
constexpr std::int64_t kSeparateNs = 1'000'000'000;
// Separate moments a finding needs, within the stall span; and a lossy host's pairs with each
// of two peers at least.
constexpr int kMinMoments = 3, kPeerMoments = 2;
// A probe stalled at this much: a probe round measures the slowest of 5 round trips and of up
// to 3 transfers as well as the fastest, and on a busy node one of them now and then waits
// 10-25 ms for its process to run (seen on 2 loaded cores); a retransmission timeout is 200 ms.
constexpr double kProbeStallNs = 100e6;

struct Stall {
  std::string from, to;
  std::int64_t at = 0;  // aligned
  double ns = 0, baseline_ns = 0;
  bool probe = false;             // a link probe's measurement (else a message)
  bool both_ways = false;         // direction unknown: a probe's transfer, or round trip before v9
  bool round_trip = false;        // a latency probe (else a transfer)
  std::int64_t transit_wall = 0;  // a message's transit's start, on the job's wall clock
  StalledEnd sender, receiver;    // a message's ranks, or a probe's two leaders
  bool by_scheduler = false;
};

// Each rank's cumulative time held off the CPU (heartbeats' stalled_ns) and throttled by its
// cgroup CPU limit (throttled_ns, -1 where not recorded) by wall time.
class HeldOffCounters {
 public:
  bool load(const Job& job, std::string& error) {
    if (!each_stall_row(
            job,
            [&](const StallRow& s) {
              if (s.wall_ns <= job.until_wall)
                rows_[s.rank].push_back({s.wall_ns, s.stalled_ns, s.throttled_ns});
            },
            error))
      return false;
    // The counts start at 0 with the rank (its writer starts at MPI_Init): a job's first second,
    // before the first heartbeat, is its busiest (set-up on every rank at once).
    for (auto& [rank, rows] : rows_) {
      auto found = job.ranks.find(rank);
      if (found == job.ranks.end() || found->second.start_ns == 0) continue;
      const auto start = static_cast<std::int64_t>(found->second.start_ns);
      if (!rows.empty() && start < rows.front().wall_ns)
        rows.insert(rows.begin(), {start, 0, rows.front().throttled_ns < 0 ? -1 : 0});
    }
    return true;
  }
  // `rank`'s time held off over its heartbeat interval(s) covering [from, to] (wall clock): from
  // its last heartbeat at or before `from` to its first at or after `to`. Where its CPU limit's
  // count is recorded, the kernel's figure counts where it is the larger (the writer's late
  // wakeups miss most of a throttled period: docs/faults.md sweep 47).
  StalledEnd end(int rank, std::int64_t from, std::int64_t to) const {
    StalledEnd out{.rank = rank};
    auto found = rows_.find(rank);
    if (found == rows_.end()) return out;
    const auto& rows = found->second;
    auto at_or_after = [](const Counts& c, std::int64_t t) { return c.wall_ns < t; };
    auto after = std::lower_bound(rows.begin(), rows.end(), to, at_or_after);
    auto before = std::upper_bound(rows.begin(), rows.end(), from,
                                   [](std::int64_t t, const Counts& c) { return t < c.wall_ns; });
    if (after == rows.end() || before == rows.begin()) return out;
    --before;
    out.held_off_ns =
        static_cast<double>(std::max<std::int64_t>(0, after->stalled_ns - before->stalled_ns));
    if (before->throttled_ns >= 0 && after->throttled_ns >= 0) {
      out.throttled_ns = static_cast<double>(
          std::max<std::int64_t>(0, after->throttled_ns - before->throttled_ns));
      out.held_off_ns = std::max(out.held_off_ns, out.throttled_ns);
    }
    out.interval_ns = static_cast<double>(after->wall_ns - before->wall_ns);
    return out;
  }

 private:
  struct Counts {
    std::int64_t wall_ns, stalled_ns, throttled_ns;
  };
  std::map<int, std::vector<Counts>> rows_;
};

}  // namespace

// A lossy link stalls a few transfers a minute, a probe round every few seconds at most: the
// moments are gathered over 6 windows, and a finding needs one in the latest 3, so that a link
// that recovered is let go as soon as one that stalls often would be.
std::int64_t stall_span_ns(const HealthOptions& options) {
  return static_cast<std::int64_t>(6 * std::max(0.001, options.window_s) * 1e9);
}

namespace {

// A stalled probe and the moments and ranks its two leaders' time held off is read over.
struct ProbeStall {
  Stall stall;
  int measuring = -1;     // the rank that recorded it
  std::string peer_host;  // the other end's host, whose leader is found after the pass
  bool measuring_sends = false;
  bool window_known = false;  // the window below did not overflow (a damaged file's times)
  std::int64_t wall = 0, wall_end = 0;
};

// Per host pair (names in order), when its probe transfers in the stall span were measured
// (aligned), stalled or not.
using ProbeTransferTimes = std::map<std::pair<std::string, std::string>, std::vector<std::int64_t>>;

// The probes that stalled in the stall span: each measure's baseline is the lower quartile of all
// its values in the range. Also each host's leader: the lowest world rank there that measured
// probes (each communicator's leader is its lowest member on the host).
bool read_probe_stalls(const Job& job, const HealthOptions& options, std::int64_t stall_since,
                       std::vector<ProbeStall>& stalls, std::map<std::string, int>& leaders,
                       ProbeTransferTimes& transfers, std::string& error) {
  const std::int64_t since = since_aligned_ns(job, options), until = job.until_aligned();
  std::vector<ProbeStall> probed;
  std::vector<double> latency_ns, transfer_ns;
  if (!each_probe(
          job,
          [&](const ProbeRow& p) {
            auto rank = job.ranks.find(p.rank);
            if (rank == job.ranks.end()) return;
            const std::string& host = job.hosts[static_cast<std::size_t>(rank->second.host)];
            auto [leader, added] = leaders.try_emplace(host, p.rank);
            if (!added) leader->second = std::min(leader->second, p.rank);
            const std::int64_t at = rank->second.aligned(p.at_ns);
            if (at < since || at > until) return;
            const bool latency = static_cast<std::int64_t>(p.bytes) <= 1;
            const auto fastest = static_cast<double>(static_cast<std::int64_t>(p.ns));
            (latency ? latency_ns : transfer_ns).push_back(fastest);
            // The longest one-way leg of the round (version 9), else the slowest round trip's
            // half or transfer (version 8), whose packets crossed both ways, else the fastest.
            // A transfer's data leg has no direction either: in slow start its sender waits for
            // the acknowledgements coming back, and a lost one stalls it (seen in sweeps); a
            // small message is one packet, delivered when it arrives.
            const bool one_way = p.slowest_oneway_ns != 0;
            // As the file holds it: a signed time (untrusted_input checks it as one).
            const double ns =
                one_way ? static_cast<double>(static_cast<std::int64_t>(p.slowest_oneway_ns))
                        : std::max(fastest,
                                   static_cast<double>(static_cast<std::int64_t>(p.slowest_ns)));
            if (at < stall_since) return;
            if (!latency) transfers[std::minmax(p.from_host, p.to_host)].push_back(at);
            if (ns < kProbeStallNs) return;
            ProbeStall s{
                .stall = {p.from_host, p.to_host, at, ns, 0, true, !one_way || !latency, latency},
                .measuring = p.rank,
                .measuring_sends = p.from_host == host};
            s.peer_host = s.measuring_sends ? p.to_host : p.from_host;
            // The leaders' time held off is read over the heartbeat intervals around the round
            // (its slowest leg lies somewhere in it: from its start, as long as that leg; an hour
            // at most, whatever a damaged file says).
            const auto span = static_cast<std::int64_t>(std::min(ns, 3600e9));
            s.window_known = !__builtin_add_overflow(at, job.wall_minus_aligned, &s.wall) &&
                             !__builtin_add_overflow(s.wall, span, &s.wall_end);
            probed.push_back(std::move(s));
          },
          error))
    return false;
  const double latency_base = lower_quartile_of(latency_ns),
               transfer_base = lower_quartile_of(transfer_ns);
  for (ProbeStall& p : probed) {
    p.stall.baseline_ns = p.stall.round_trip ? latency_base : transfer_base;
    if (p.stall.ns >= kStallFactor * std::max(1000.0, p.stall.baseline_ns))
      stalls.push_back(std::move(p));
  }
  return true;
}

// Linux's shortest retransmission timeout (TCP_RTO_MIN): a lost packet that no later one reveals
// is resent after this long at least.
constexpr double kMinRetransmitNs = 200e6;

// What the stalls say of their cause. Lost packets stall a few transfers, by a retransmission
// timeout (200 ms and more), or less where a tail-loss probe resends early; a rate limit or a
// congested port slows most of them, steadily, by what their bytes take (a host at 20 Mbit/s:
// every probe transfer of 256 KiB 100-250 ms, docs/faults.md sweep 40). Stalls under 200 ms and
// not steady may be either.
std::string stall_cause(bool steady, std::size_t stalled_transfers, std::size_t transfers,
                        double longest_ns) {
  if (steady)
    return std::to_string(stalled_transfers) + " of its " + std::to_string(transfers) +
           " probe transfers since the first this slow: a steady slowness (a rate limit, a "
           "congested port queuing its traffic, or heavy loss) rather than the few stalls of lost "
           "packets";
  if (longest_ns >= kMinRetransmitNs)
    return "packets lost and retransmitted after a timeout (cable, NIC or switch port)";
  return "each under a retransmission timeout (" + ms_text(kMinRetransmitNs) +
         "): lost packets resent early (a tail-loss probe; cable, NIC or switch port), or a "
         "rate limit or congested port queuing its traffic";
}

// What a set of stalls amounts to.
struct StallSummary {
  int moments = 0;  // separate moments, the latest of them among the recent ones (else 0)
  double longest = 0, baseline = 0;
  int probes = 0;
};

StallSummary summarize(const std::vector<const Stall*>& mine, std::int64_t recent_since) {
  std::vector<std::int64_t> times;
  std::int64_t newest = INT64_MIN;
  StallSummary out;
  std::vector<double> baselines;
  for (const Stall* s : mine) {
    times.push_back(s->at);
    newest = std::max(newest, s->at);
    out.longest = std::max(out.longest, s->ns);
    baselines.push_back(s->baseline_ns);
    out.probes += s->probe;
  }
  out.moments = newest >= recent_since ? separate_moments(times, kSeparateNs) : 0;
  out.baseline = median_of(baselines);
  return out;
}

struct StallFindings {
  const Job& job;
  std::int64_t recent_since;
  std::string span;
  std::vector<Finding>& findings;
  const std::vector<Stall>& all;  // the counted stalls and those taken for the scheduler's
  const ProbeTransferTimes& probe_transfers;

  // The subject's probe transfers measured at `since` or later, stalled or not.
  std::size_t probe_transfers_of(const NetworkSubject& subject, std::int64_t since) const {
    const std::pair<std::string, std::string> link = std::minmax(subject.from, subject.to);
    std::size_t n = 0;
    for (const auto& [pair, times] : probe_transfers)
      if (subject.host.empty() ? pair == link
                               : pair.first == subject.host || pair.second == subject.host)
        n += static_cast<std::size_t>(std::count_if(times.begin(), times.end(),
                                                    [&](std::int64_t at) { return at >= since; }));
    return n;
  }

  // The subject's stalls among `all`, counted or not, the longest first.
  StalledTransfersEvidence transfers_of(const NetworkSubject& subject) const {
    StalledTransfersEvidence out;
    std::vector<const Stall*> its;
    for (const Stall& s : all) {
      const bool on_it = subject.host.empty()
                             ? std::minmax(s.from, s.to) == std::minmax(subject.from, subject.to)
                             : s.from == subject.host || s.to == subject.host;
      if (!on_it) continue;
      its.push_back(&s);
      out.by_scheduler += s.by_scheduler;
    }
    std::stable_sort(its.begin(), its.end(),
                     [](const Stall* a, const Stall* b) { return a->ns > b->ns; });
    if (its.size() > StalledTransfersEvidence::kListed)
      its.resize(StalledTransfersEvidence::kListed);
    for (const Stall* s : its)
      out.transfers.push_back({.from = s->from,
                               .to = s->to,
                               .at_ns = s->probe ? s->at + job.wall_minus_aligned : s->transit_wall,
                               .ns = s->ns,
                               .baseline_ns = s->baseline_ns,
                               .probe = s->probe,
                               .sender = s->sender,
                               .receiver = s->receiver,
                               .by_scheduler = s->by_scheduler});
    return out;
  }

  void add(const std::string& kind, const std::string& subject,
           const std::vector<const Stall*>& mine, std::size_t elsewhere,
           const NetworkSubject& network, avoid_list::AvoidList avoid, const std::string& where) {
    const StallSummary sum = summarize(mine, recent_since);
    // Whether most of its probe transfers stalled (stall_cause), counted from the first stalled
    // one on: the span reaches back before a fault began.
    std::int64_t first_stall = INT64_MAX;
    std::size_t stalled_transfers = 0;
    for (const Stall* s : mine)
      if (s->probe && !s->round_trip) {
        ++stalled_transfers;
        first_stall = std::min(first_stall, s->at);
      }
    const std::size_t transfers = probe_transfers_of(network, first_stall);
    const bool steady = stalled_transfers >= static_cast<std::size_t>(kMinMoments) &&
                        2 * stalled_transfers >= transfers;
    Finding f;
    f.kind = kind;
    f.subject = subject;
    f.severity = Severity::error;
    f.strength = sum.longest / std::max(1000.0, sum.baseline);
    f.first_seen_ns = job.now_wall;
    f.last_seen_ns = job.now_wall;
    f.summary = subject + ": " + std::to_string(mine.size()) + " transfers " + where +
                " stalled (up to " + ms_text(sum.longest) + ", against a baseline of " +
                ms_text(sum.baseline) + ") at " + std::to_string(sum.moments) +
                " separate moments of the last " + span + " (" +
                std::to_string(mine.size() - static_cast<std::size_t>(sum.probes)) +
                " messages of " + ms_text(kStallNs) + " or more, " + std::to_string(sum.probes) +
                " probes of " + ms_text(kProbeStallNs) + " or more), " + std::to_string(elsewhere) +
                " elsewhere: " + stall_cause(steady, stalled_transfers, transfers, sum.longest);
    f.source = "stalls";
    StalledTransfersEvidence evidence = transfers_of(network);
    evidence.subject = network;
    evidence.stalls = mine.size();
    evidence.moments = sum.moments;
    evidence.longest_ns = sum.longest;
    evidence.baseline_ns = sum.baseline;
    evidence.stalls_elsewhere = elsewhere;
    evidence.probe_transfers = transfers;
    evidence.probe_transfers_stalled = stalled_transfers;
    evidence.steady = steady;
    f.evidence.rule = std::move(evidence);
    f.host = network.host;
    f.from = network.from;
    f.to = network.to;
    f.avoid = std::move(avoid);
    findings.push_back(std::move(f));
  }
};

// A host: stalls on its pairs with two other hosts at least, into it and out of it (a receiver
// that posts early and completes late after computing inflates only what it receives), at
// separate moments, and few elsewhere. Of several, the one with the most moments: a stall on
// one pair can hold up the next pair its hosts meet. "" where none. A host's own stalls are those
// not taken for the scheduler's; those elsewhere are all of them (the scheduler's too show that
// the machine stalls everywhere, not on one host's pairs).
std::string lossy_host(const std::vector<Stall>& stalls, std::int64_t recent_since,
                       std::vector<const Stall*>& lossy_stalls, std::size_t& lossy_elsewhere) {
  std::set<std::string> hosts;
  for (const Stall& s : stalls)
    if (!s.by_scheduler) hosts.insert({s.from, s.to});
  std::string lossy;
  std::pair<int, std::size_t> lossy_rank{0, 0};  // moments, stalls
  for (const std::string& h : hosts) {
    std::vector<const Stall*> mine;
    std::map<std::string, std::vector<std::int64_t>> by_peer;  // each peer's stall times
    bool into = false, out_of = false;
    std::size_t elsewhere = 0;
    for (const Stall& s : stalls) {
      if (s.from != h && s.to != h) {
        ++elsewhere;
        continue;
      }
      if (s.by_scheduler) continue;
      mine.push_back(&s);
      by_peer[s.from == h ? s.to : s.from].push_back(s.at);
      into |= s.to == h || s.both_ways;
      out_of |= s.from == h || s.both_ways;
    }
    // Peers whose stalls came at separate moments: a host that loses packets stalls its pairs
    // with each peer again and again, while a rate-limited or lossy link's stalls hold up its
    // hosts' other traffic once in a while (NPB CG, ctap1 -> ctap2 at 20 Mbit/s: 40 stalls on
    // that pair and one 182 ms probe from ctap3, named host ctap2, docs/faults.md sweep 36).
    int peers = 0;
    for (const auto& [peer, times] : by_peer)
      peers += separate_moments(times, kSeparateNs) >= kPeerMoments ? 1 : 0;
    const int moments = summarize(mine, recent_since).moments;
    if (peers < 2 || !into || !out_of || 4 * elsewhere > mine.size() || moments < kMinMoments ||
        std::pair{moments, mine.size()} <= lossy_rank)
      continue;
    lossy = h;
    lossy_stalls = std::move(mine);
    lossy_rank = {moments, lossy_stalls.size()};
    lossy_elsewhere = elsewhere;
  }
  return lossy;
}

// A link: stalls on one host pair, at separate moments, and few elsewhere, in the direction its
// messages and probe legs stalled in.
void add_link_findings(const std::vector<Stall>& stalls, const NamedNetworkSubjects& named,
                       const std::vector<std::pair<std::string, std::string>>& held_by_probes,
                       StallFindings& out) {
  std::map<std::pair<std::string, std::string>, std::vector<const Stall*>> by_pair;
  std::map<std::pair<std::string, std::string>, std::size_t> on_pair;  // the scheduler's too
  for (const Stall& s : stalls) {
    on_pair[std::minmax(s.from, s.to)] += 1;
    if (!s.by_scheduler) by_pair[std::minmax(s.from, s.to)].push_back(&s);
  }
  for (const auto& [pair, mine] : by_pair) {
    const std::size_t elsewhere = stalls.size() - on_pair[pair];
    if (4 * elsewhere > mine.size() || summarize(mine, out.recent_since).moments < kMinMoments)
      continue;
    int forth = 0, back = 0, messages_forth = 0, messages_back = 0;
    for (const Stall* s : mine) {
      if (s->both_ways) continue;
      const bool there = s->from == pair.first;
      (there ? forth : back) += 1;
      if (!s->probe) (there ? messages_forth : messages_back) += 1;
    }
    // Messages that stalled both ways on the one pair say as much about either host (a
    // pipeline stage's messages go to its partner only) as about the link: the host's other
    // pairs decide, as they show stalls too.
    if (messages_forth > 0 && messages_back > 0) continue;
    // Named in the direction that stalled; `a <-> b` where both did, or where only round trips
    // of older files did (their packets crossed both ways).
    const bool both = (forth == 0) == (back == 0);
    std::string from = pair.first, to = pair.second;
    if (forth == 0 && back > 0) std::swap(from, to);
    if (named.names_link(from, to)) continue;
    // A link the probe rule holds back for its hosts' other pairs is held here too: a
    // rate-limited link's probe transfers take 100 ms and more in every round, which this rule
    // reads as stalls, and NPB MG's 20 Mbit/s link was named `a <-> b` here while held there
    // (docs/faults.md, sweep 40). Its host is still named here, where its stalls show.
    const bool held = std::any_of(held_by_probes.begin(), held_by_probes.end(), [&](const auto& l) {
      return std::minmax(l.first, l.second) == std::minmax(from, to);
    });
    if (held) continue;
    out.add(finding_kind::slow_link, "link " + from + (both ? " <-> " : " -> ") + to, mine,
            elsewhere, NetworkSubject{.from = from, .to = to, .both_directions = both},
            avoid_link(from, to, both, 0), "on it");
  }
}

// A stall is the scheduler's, not the network's, when its ends were held off the CPU
// (heartbeats' stalled_ns) in the heartbeat intervals around its transit long enough to account
// for its excess: on a loaded machine a receiver waiting for its turn completes 20-40 ms late
// (docs/faults.md, sweeps 21, 22 and 29), and the two ends' waits add (the sender's before its
// data goes out, the receiver's before it sees it arrive). A message's, by either of two tests:
// - the ends' held-off shares, pro-rated to the transit's length, add up to kHeldOffPartOfExcess
//   of the excess (an interval's share, not its total: one that spans two heartbeats counts half
//   as much per second);
// - or the ends' held-off totals over those intervals add up to the excess: a run-queue wait
//   comes in slices of the scheduler's period (with 8 runnable ranks on 2 cores, 20-40 ms at a
//   time), not spread evenly over the second, so one wait can hold the whole stall. Sweep 29's
//   clean LULESH at load 5 had five stalls of 20-35 ms on one host's pairs with ends held off
//   50-440 ms in the second around them and under half the excess pro-rated: a false
//   slow_host_network.
// A link probe's (its two hosts' leaders as its ends), by the second test only: where in the
// round its slowest leg came is not recorded. A host whose process is stopped in bursts stalls
// the probes to and from it by 100-173 ms (sweep 31: a CPU fault on ctap3, stopped half of every
// 20 ms, named slow_host_network by 3 such probes).
// Never the scheduler's: an excess of kMinRetransmitNs or more, which a lost packet's
// retransmission timeout makes (Linux's shortest, TCP_RTO_MIN, is 200 ms); but always its ends'
// CPU limits' where the kernel counted them throttled, over those intervals, for the whole
// excess: a process held for 80 ms of every 100 ms period stalls a probe's legs one after
// another, 228-276 ms in all (NPB BT with one rank at 20 ms of CPU per 100 ms, named
// slow_host_network for its lost packets; docs/faults.md sweep 48). What it cannot tell
// apart: a link that stalls for less (a tail-loss probe, a rate limiter's queue) on a machine
// that holds its ranks off the CPU that much; those stalls are not counted there, and only the
// ones the scheduler does not account for name the link (packet loss is also read from the
// kernel's TCP counters, detect_lost_packets).
constexpr double kHeldOffPartOfExcess = 0.5;
bool by_scheduler(const Stall& s) {
  const double excess = s.ns - s.baseline_ns;
  double throttled = 0;
  for (const StalledEnd* end : {&s.sender, &s.receiver})
    throttled += std::max(0.0, end->throttled_ns);
  if (throttled >= excess) return true;
  if (excess >= kMinRetransmitNs) return false;
  double pro_rated = 0, total = 0;
  bool known = false;
  for (const StalledEnd* end : {&s.sender, &s.receiver}) {
    if (end->held_off_ns < 0 || end->interval_ns <= 0) continue;
    known = true;
    pro_rated += end->held_off_ns / end->interval_ns * s.ns;
    total += end->held_off_ns;
  }
  if (!known) return false;
  return total >= excess || (!s.probe && pro_rated >= kHeldOffPartOfExcess * excess);
}

}  // namespace

bool detect_stalled_links(const Job& job, const HealthOptions& options,
                          const std::vector<MessageStall>& message_stalls,
                          const ProbeEvidence& probes, std::vector<Finding>& findings,
                          std::string& error) {
  const std::int64_t now = static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned;
  const std::int64_t stall_span = stall_span_ns(options);
  std::vector<ProbeStall> probe_stalls;
  std::map<std::string, int> leaders;
  ProbeTransferTimes probe_transfers;
  if (!read_probe_stalls(job, options, now - stall_span, probe_stalls, leaders, probe_transfers,
                         error))
    return false;
  if (message_stalls.empty() && probe_stalls.empty()) return true;
  HeldOffCounters held_off;
  if (!held_off.load(job, error)) return false;
  std::vector<Stall> all;
  for (const MessageStall& m : message_stalls) {
    Stall s{m.from, m.to, m.at_ns, m.ns, m.baseline_ns};
    const std::int64_t done = m.done_ns + job.wall_minus_aligned;
    s.transit_wall = done - static_cast<std::int64_t>(m.ns);
    s.sender = held_off.end(m.from_rank, s.transit_wall, done);
    s.receiver = held_off.end(m.to_rank, s.transit_wall, done);
    s.by_scheduler = by_scheduler(s);
    all.push_back(std::move(s));
  }
  // A host whose leader recorded no probe: its lowest rank.
  if (!probe_stalls.empty())
    for (const auto& [number, r] : job.ranks)
      leaders.try_emplace(job.hosts[static_cast<std::size_t>(r.host)], number);
  for (ProbeStall& p : probe_stalls) {
    Stall& s = p.stall;
    if (p.window_known) {
      auto found = leaders.find(p.peer_host);
      const int peer = found == leaders.end() ? -1 : found->second;
      const StalledEnd mine = held_off.end(p.measuring, p.wall, p.wall_end);
      const StalledEnd theirs = peer >= 0 ? held_off.end(peer, p.wall, p.wall_end) : StalledEnd{};
      s.sender = p.measuring_sends ? mine : theirs;
      s.receiver = p.measuring_sends ? theirs : mine;
    }
    s.by_scheduler = by_scheduler(s);
    all.push_back(std::move(s));
  }
  if (std::all_of(all.begin(), all.end(), [](const Stall& s) { return s.by_scheduler; }))
    return true;
  const NamedNetworkSubjects named = named_network_subjects(findings);
  StallFindings out{job, now - stall_span / 2, ms_text(static_cast<double>(stall_span)), findings,
                    all, probe_transfers};
  std::vector<const Stall*> host_stalls;
  std::size_t elsewhere = 0;
  if (const std::string host = lossy_host(all, out.recent_since, host_stalls, elsewhere);
      !host.empty()) {
    if (!named.hosts.count(host))
      out.add(finding_kind::slow_host_network, "host " + host, host_stalls, elsewhere,
              NetworkSubject{.host = host}, avoid_host(host), "to and from it");
    return true;
  }
  add_link_findings(all, named, probes.held_links, out);
  return true;
}

}  // namespace commtap::analyzer
