// analyzer/detect/tcp_counters: the kernel's TCP counters (the tcp_links table) as the
// differences between a rank's reads, per directed host pair over the stall span, read once for
// the lost-packet rule (detect_lost_packets) and the transfer-rate rule (detect_link_rates): a
// realistic job of 500 rank files and 10 minutes has 18 million rows, and a second pass over
// them took the analysis from 7.5-7.7 s to 12.3-13.8 s (docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/findings/finding.hpp"
#include "analyzer/findings/finding_evidence.hpp"
#include "analyzer/findings/job_evidence.hpp"
#include "analyzer/model/job_model.hpp"

namespace commtap::analyzer {

// Which host each address is: the ranks' own ends of their connections. An address two hosts
// claim (a private bridge's, loopback) names none (-1). And COMMTAP_TCP_INTERVAL.
struct TcpAddresses {
  std::map<std::string, int> hosts;
  double interval_s = 5;
};

// One read of one rank's connections to one peer address, less the read before it: what they
// sent between the two (the first read: since they opened).
struct TcpRead {
  std::int64_t wall_ns = 0;
  // The time it covers: since the rank's row before for the pair, or one COMMTAP_TCP_INTERVAL
  // where that is less or there is none. A rank writes a pair's row only where its counters
  // changed, so what a row counts moved within the interval before it, however long the pair
  // sat idle: NPB FT's pairwise all-to-all left a pair idle 12 s between two exchanges, and its
  // first read of the next one, paced 1.7 s of 2, read as 14% of 12 (docs/faults.md sweep 59).
  std::int64_t interval_ns = 0;
  int from = -1, to = -1;  // hosts: the rank's, its peer's
  std::uint64_t segments = 0, resent = 0, duplicates = 0, bytes = 0;
  // The time they had data in flight that the network paced: busy less the time the receiver's
  // window was full (its process did not read). -1: not recorded (schema 16 or older, or a kernel
  // before Linux 4.10).
  std::int64_t paced_us = -1;
  std::int64_t notsent_bytes = 0;  // the backlog at the read: written and not yet sent
};
// The reads of the stall span: from `counted_since` up to --at, between two hosts, per directed
// host pair, each connection's in time order (a pair's connections one after another). Counters
// that fell (a file written by something else) start over.
struct TcpSpan {
  TcpAddresses addresses;
  std::int64_t first_counted = INT64_MAX;                     // the earliest read counted
  std::map<std::pair<int, int>, std::vector<TcpRead>> pairs;  // (from host, to host)
};
bool read_tcp_span(const Job& job, std::int64_t counted_since, TcpSpan& span, std::string& error);

// The evidence's rows for the span's host pairs, in the order of `span.pairs`: both rules fill
// theirs in that order.
std::vector<TcpLink> tcp_links_of(const Job& job, const TcpSpan& span);

// What one of the two rules found, as a finding names it: a host (its slow_host_network) or a
// link (its slow_link; each rule names the kind it makes).
struct TcpSubject {
  std::string subject;
  std::vector<std::pair<int, int>> directions;  // (from host, to host) of the subject
  NetworkSubject network;
  std::string where;  // "to it", "from it", "to and from it" (a host), "over it" (a link)
  bool host() const { return !network.host.empty(); }
};
// How both rules name what they found: the host `host` where one is found (>= 0: its directions
// `host_directions`), else each direction in `found` as a link, `a <-> b` where both ways are. A
// link another rule names already otherwise (its host, or the other way round) is left to it;
// one of a new subject that `awaits` its hosts' other pairs goes to `awaiting_hosts`. `add`
// makes each finding.
void name_tcp_subjects(const Job& job, const std::vector<Finding>& findings, int host,
                       const std::vector<std::pair<int, int>>& host_directions,
                       const std::vector<std::pair<int, int>>& found,
                       const std::function<bool(const std::vector<std::pair<int, int>>&)>& awaits,
                       std::vector<AwaitingLink>& awaiting_hosts,
                       const std::function<void(const TcpSubject&)>& add);

}  // namespace commtap::analyzer
