// slow_host_network and slow_link from the kernel's TCP counters (the tcp_links table,
// docs/analyzer.md): a link that drops packets makes TCP send them again, and the connections that
// send over it count those resends whether or not a sampled message or a probe happened to stall.
// Resends the receiver reports as duplicates (D-SACK) were not losses: on a busy machine the
// tail-loss probe fires before a delayed acknowledgement arrives, on every link alike (seen
// on 2 loaded cores: up to 1 segment in 400, all of them reported back).
#include <algorithm>
#include <map>
#include <set>

#include "analyzer/detect/detectors.hpp"
#include "analyzer/detect/tcp_counters.hpp"
#include "analyzer/findings/statistics.hpp"

namespace commtap::analyzer {
namespace {

// A link loses packets when, over the stall span, TCP lost at least this many of its segments, at
// least this share of them, and (with 4 measured links or more) this many times the lower quartile
// of the links' shares. A healthy network loses far less than 1 in 1,000; a flaky cable or port
// 1 in 1,000 to 1 in 10.
constexpr std::uint64_t kMinLost = 5;
constexpr double kMinShare = 0.001, kShareFactor = 10;
// A link's share counts toward the baseline when it sent this many segments in the span.
constexpr std::uint64_t kMeasuredSegments = 100;
// Losses at this many separate moments at least: one burst is a moment, not a link.
constexpr int kMinMoments = 2;
// Of a link's resends, fewer than this share reported back as duplicates. Resends less
// duplicates is only an upper bound on what was lost (a duplicate report can be lost or cover
// several segments), and where most resends were spurious, the link's retransmission timers fire
// on delay (a receiver or sender held off the CPU, a queue under an all-to-all's incast), not on
// loss. Seen: a cable or host dropping 0.1-2% of frames had 0-24% of its resends reported back;
// NPB FT's all-to-all on 2 loaded cores resent 528 segments on one healthy link, 438 of them
// duplicates, leaving 90 "lost" (0.13%, docs/faults.md sweep 46).
constexpr double kMostDuplicateShare = 0.5;

// A lossy link whose hosts' other pairs have not sent enough since its first loss to say whether
// they lose too waits this long at most from its first loss (below: awaits_its_hosts).
constexpr std::int64_t kMostHoldNs = 8'000'000'000;
// ... enough: this many losses expected at the link's share, or kMeasuredSegments.
constexpr double kExpectedLosses = 3;

struct LinkLoss {
  std::uint64_t segments = 0, resent = 0, duplicates = 0, bytes = 0;
  std::vector<std::int64_t> lost_at;  // wall_ns of the rows that lost some
  struct Read {
    std::int64_t wall_ns;
    std::uint64_t segments, lost;
  };
  std::vector<Read> reads;  // each row's differences
  std::uint64_t lost() const { return resent > duplicates ? resent - duplicates : 0; }
  double share() const { return segments == 0 ? 0 : static_cast<double>(lost()) / segments; }
};

// Loss shares are small: two decimals below 10% ("0.35%").
std::string share_text(double share) {
  char text[32];
  std::snprintf(text, sizeof text, share >= 0.1 ? "%.0f%%" : "%.2f%%", 100 * share);
  return text;
}

// Per directed host pair, what its connections sent and lost over the span counted.
using LinkLosses = std::map<std::pair<int, int>, LinkLoss>;  // (from host, to host)

// Each read's resends and duplicates over the span.
LinkLosses link_losses(const TcpSpan& tcp) {
  LinkLosses links;
  for (const auto& [pair, reads] : tcp.pairs) {
    LinkLoss& link = links[pair];
    for (const TcpRead& r : reads) {
      link.segments += r.segments;
      link.resent += r.resent;
      link.duplicates += r.duplicates;
      link.bytes += r.bytes;
      const std::uint64_t lost = r.resent > r.duplicates ? r.resent - r.duplicates : 0;
      if (lost > 0) link.lost_at.push_back(r.wall_ns);
      link.reads.push_back({r.wall_ns, r.segments, lost});
    }
  }
  return links;
}

// The measured links' shares (the baseline's sample) and the links that lose: against the lower
// quartile of the measured links' shares (a host that loses both ways has a lossy link to and
// from every peer: half the links of 4 hosts, two thirds of 3). With fewer than 4 measured links
// (2 hosts) the absolute floors decide alone.
struct LossyLinks {
  std::vector<double> shares;
  double baseline = 0;
  std::vector<std::pair<int, int>> lossy;
};

LossyLinks lossy_links(const LinkLosses& links, double interval_s, std::int64_t recent_since) {
  LossyLinks out;
  for (const auto& [pair, link] : links)
    if (link.segments >= kMeasuredSegments) out.shares.push_back(link.share());
  out.baseline = out.shares.size() >= 4 ? lower_quartile_of(out.shares) : 0.0;
  // Rows of one moment: every rank reads its counters on its own schedule, at most a writer
  // window apart from the others, and one rank's reads are a COMMTAP_TCP_INTERVAL apart.
  const std::int64_t gap =
      std::max<std::int64_t>(1'500'000'000, static_cast<std::int64_t>(interval_s * 0.5e9));
  for (const auto& [pair, link] : links)
    if (link.lost() >= kMinLost && link.share() >= kMinShare &&
        link.share() >= kShareFactor * out.baseline &&
        static_cast<double>(link.duplicates) <
            kMostDuplicateShare * static_cast<double>(link.resent) &&
        separate_moments(link.lost_at, gap) >= kMinMoments &&
        *std::max_element(link.lost_at.begin(), link.lost_at.end()) >= recent_since)
      out.lossy.push_back(pair);
  return out;
}

// A host: lossy links into it from two hosts at least, or out of it to two, or in from one and
// out to another where it has no other pair that sent 100 segments (a ring's rank receives from
// one host and sends to another only, and two lossy cables around one host are rarer than its
// NIC: the fake NCCL's ring with ctap1 losing 1% was named as two links, docs/faults.md sweep
// 43), and at most a quarter as many lossy links that do not touch it. Of several, the one that
// lost most (-1: none); `links`: its lossy links. One peer both ways is a link (or either host:
// a pipeline's stage sends to its partner only, until the host's other pairs lose too).
int lossy_host(const LinkLosses& links, const std::vector<std::pair<int, int>>& lossy,
               std::vector<std::pair<int, int>>& host_links) {
  int host = -1;
  std::uint64_t host_lost = 0;
  std::set<int> candidates;
  for (const auto& [from, to] : lossy) candidates.insert({from, to});
  for (int h : candidates) {
    std::set<int> senders, receivers;
    std::vector<std::pair<int, int>> mine;
    std::uint64_t lost = 0;
    for (const auto& [from, to] : lossy) {
      if (from != h && to != h) continue;
      mine.push_back({from, to});
      lost += links.at({from, to}).lost();
      if (to == h)
        senders.insert(from);
      else
        receivers.insert(to);
    }
    // One peer in and another out (not the same peer both ways: a link): a host only where none
    // of its other pairs sent enough to have lost too (a ring's rank has no other pairs; a
    // stencil's would show its NIC's losses).
    const bool through =
        senders.size() == 1 && receivers.size() == 1 && *senders.begin() != *receivers.begin() &&
        std::none_of(links.begin(), links.end(), [&](const auto& link) {
          const auto& [pair, counts] = link;
          return (pair.first == h || pair.second == h) && counts.segments >= kMeasuredSegments &&
                 std::find(mine.begin(), mine.end(), pair) == mine.end();
        });
    const std::size_t elsewhere = lossy.size() - mine.size();
    if ((senders.size() < 2 && receivers.size() < 2 && !through) || 4 * elsewhere > mine.size() ||
        lost <= host_lost)
      continue;
    host = h;
    host_lost = lost;
    host_links = std::move(mine);
  }
  return host;
}

// Whether a lossy link (its directions `mine`) waits for its hosts: a pipeline's stage sends to
// its partner only, so a host that loses everything shows first as that one pair both ways (a
// lossy split_pipeline host was named `ctap2 -> ctap3`, then `<->`, then the host 4 s later,
// once the probes' connections from other hosts had lost too, docs/faults.md sweep 42). The link
// is named once each of its hosts has another pair, to or from a third host, that sent since the
// link's first loss enough to have lost kExpectedLosses segments at the link's share (and
// kMeasuredSegments) and lost under a kShareFactor-th of that share, since then and over the
// whole span, or kMostHoldNs after its first loss (a ring without probes has no other pairs). What
// it costs: a lossy link in a program whose hosts talk to one peer is named at the probes' next
// transfer over the hosts' other pairs.
bool awaits_its_hosts(const LinkLosses& links, const std::vector<std::pair<int, int>>& lossy,
                      const std::vector<std::pair<int, int>>& mine, std::int64_t now) {
  std::int64_t first_loss = INT64_MAX;
  LinkLoss total;
  for (const auto& pair : mine) {
    const LinkLoss& link = links.at(pair);
    first_loss = std::min(first_loss, *std::min_element(link.lost_at.begin(), link.lost_at.end()));
    total.segments += link.segments;
    total.resent += link.resent;
    total.duplicates += link.duplicates;
  }
  if (now - first_loss >= kMostHoldNs) return false;
  const double share = total.share();
  const double enough = std::max(static_cast<double>(kMeasuredSegments), kExpectedLosses / share);
  const int a = mine.front().first, b = mine.front().second;
  auto cleared = [&](int h) {
    for (const auto& [pair, link] : links) {
      const int other = pair.first == h ? pair.second : pair.second == h ? pair.first : -1;
      if (other < 0 || other == a || other == b) continue;
      if (std::find(lossy.begin(), lossy.end(), pair) != lossy.end()) continue;
      std::uint64_t segments = 0, lost = 0;
      for (const LinkLoss::Read& read : link.reads)
        if (read.wall_ns > first_loss) {
          segments += read.segments;
          lost += read.lost;
        }
      // Fine since the link's first loss, and not lossy over the span either: a pair that lost
      // a burst at one moment before is no lossy link (kMinMoments) but no sign of a sound host
      // (NPB FT's all-to-all on a host delayed 2 ms lost 21% of one pair's segments at its
      // onset, then nothing on that pair, while its other pairs lost in turn: the first of them
      // was named a link 4 s before the host, docs/faults.md sweep 54).
      if (static_cast<double>(segments) >= enough &&
          kShareFactor * static_cast<double>(lost) < share * static_cast<double>(segments) &&
          kShareFactor * static_cast<double>(link.lost()) <
              share * static_cast<double>(link.segments))
        return true;
    }
    return false;
  };
  return !cleared(a) || !cleared(b);
}

// What a loss finding says, the same for a host and a link.
struct LossFindings {
  const Job& job;
  const LinkLosses& links;
  const LossyLinks& lossy;
  std::string span_text, compared;
  std::vector<Finding>& findings;
  std::vector<std::string>& delayed;

  void add(const TcpSubject& found, avoid_list::AvoidList avoid, const std::string& cause) {
    const std::string& subject = found.subject;
    const NetworkSubject& network = found.network;
    LinkLoss total;
    for (const auto& pair : found.directions) {
      const LinkLoss& link = links.at(pair);
      total.segments += link.segments;
      total.resent += link.resent;
      total.duplicates += link.duplicates;
      const std::string receiver = job.hosts[static_cast<std::size_t>(pair.second)];
      if (std::find(delayed.begin(), delayed.end(), receiver) == delayed.end())
        delayed.push_back(receiver);
    }
    Finding f;
    f.kind = found.host() ? finding_kind::slow_host_network : finding_kind::slow_link;
    f.subject = subject;
    f.severity = Severity::error;
    f.strength = total.share() / kMinShare;
    f.first_seen_ns = job.now_wall;
    f.last_seen_ns = job.now_wall;
    f.summary = subject + ": TCP lost " + share_text(total.share()) + " of the segments sent " +
                found.where + " (" + with_commas(total.lost()) + " of " +
                with_commas(total.segments) + " in the last " + span_text + ": " +
                with_commas(total.resent) + " resent, less " +
                with_commas(total.resent - total.lost()) + " the receiver already had), " +
                compared + ": " + cause;
    f.source = "tcp";
    f.evidence.rule = LostPacketsEvidence{.subject = network,
                                          .segments = total.segments,
                                          .lost = total.lost(),
                                          .resent = total.resent,
                                          .share = total.share(),
                                          .baseline_share = lossy.baseline};
    f.host = network.host;
    f.from = network.from;
    f.to = network.to;
    f.avoid = std::move(avoid);
    findings.push_back(std::move(f));
  }
};

}  // namespace

void detect_lost_packets(const Job& job, const HealthOptions& options, const TcpSpan& tcp,
                         const std::vector<std::pair<int, int>>& rate_limited,
                         std::vector<Finding>& findings, std::vector<TcpLink>& tcp_links,
                         std::vector<AwaitingLink>& awaiting_hosts,
                         std::vector<std::string>& delayed) {
  const std::int64_t now = static_cast<std::int64_t>(job.now_wall);
  const std::int64_t span = stall_span_ns(options);
  const LinkLosses links = link_losses(tcp);
  if (links.empty()) return;
  auto row = tcp_links.begin();  // in the order of tcp.pairs, as `links`
  for (const auto& [pair, link] : links) {
    row->segments = link.segments;
    row->resent = link.resent;
    row->lost = link.lost();
    row->bytes = link.bytes;
    ++row;
  }
  LossyLinks lossy = lossy_links(links, tcp.addresses.interval_s, now - span / 2);
  // A direction that moved its data at a rate limit's pace (a slow read is enough) lost what
  // overflowed the limit's queue: the rate rule judges it, and waits for its hosts' other pairs
  // as a rate limit needs.
  // Here the probes' few hundred segments over a limited host's other pairs lost nothing (they
  // never filled the queue) and cleared the host, so that NPB FT's host at 20 Mbit/s was named
  // `link ctap2 -> ctap1` by its losses 4 s after its limit began (docs/faults.md sweep 59).
  std::erase_if(lossy.lossy, [&](const std::pair<int, int>& pair) {
    return std::find(rate_limited.begin(), rate_limited.end(), pair) != rate_limited.end();
  });
  if (lossy.lossy.empty()) return;

  // A host or link that another rule names already: the same finding is merged with it (so that a
  // host held off the CPU does not explain it away, below in health.cpp).
  // Each row's difference covers the interval before it.
  LossFindings out{job, links, lossy, "", "", findings, delayed};
  out.span_text =
      ms_text(static_cast<double>(now - tcp.first_counted) + tcp.addresses.interval_s * 1e9);
  out.compared =
      lossy.shares.size() >= 4
          ? "against " + share_text(lossy.baseline) + " on most links (lower quartile of " +
                std::to_string(lossy.shares.size()) + ")"
          : "with too few links to compare (" + std::to_string(lossy.shares.size()) + ")";
  std::vector<std::pair<int, int>> host_links;
  const int host = lossy_host(links, lossy.lossy, host_links);
  name_tcp_subjects(
      job, findings, host, host_links, lossy.lossy,
      [&](const std::vector<std::pair<int, int>>& mine) {
        return awaits_its_hosts(links, lossy.lossy, mine, now);
      },
      awaiting_hosts,
      [&](const TcpSubject& found) {
        out.add(found,
                found.host() ? avoid_host(found.network.host)
                             : avoid_link(found.network.from, found.network.to,
                                          found.network.both_directions, 0),
                found.host()
                    ? "packets dropped at its NIC, cable or switch port, or on a congested link"
                    : "packets dropped on the way (cable, NIC or switch port, or congestion)");
      });
}

}  // namespace commtap::analyzer
