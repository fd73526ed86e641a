// analyzer/detect/tcp_counters: the kernel's TCP counters (the tcp_links table) as the
// differences between a rank's reads, per directed host pair: what the lost-packet rule
// (detect_lost_packets) and the transfer-rate rule (detect_link_rates) read.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/detect/detectors.hpp"
#include "analyzer/model/job_model.hpp"

namespace commtap::analyzer {

// Which host each address is: the ranks' own ends of their connections. An address two hosts
// claim (a private bridge's, loopback) names none (-1). And COMMTAP_TCP_INTERVAL.
struct TcpAddresses {
  std::map<std::string, int> hosts;
  double interval_s = 5;
};
bool read_tcp_addresses(const Job& job, TcpAddresses& out, std::string& error);

// One read of one rank's connections to one peer address, less the read before it: what they
// sent between the two (the first read: since they opened).
struct TcpRead {
  std::int64_t wall_ns = 0;
  std::int64_t interval_ns = 0;  // since the read before (0: the first)
  int from = -1, to = -1;        // hosts: the rank's, its peer's
  std::uint64_t segments = 0, resent = 0, duplicates = 0, bytes = 0;
  // The time they had data in flight that the network paced: busy less the time the receiver's
  // window was full (its process did not read). -1: not recorded (schema 16 or older, or a kernel
  // before Linux 4.10).
  std::int64_t paced_us = -1;
  std::int64_t notsent_bytes = 0;  // the backlog at the read: written and not yet sent
};
// Every read up to --at between two hosts, in each connection's time order. Counters that fell (a
// file written by something else) start over.
bool each_tcp_read(const Job& job, const TcpAddresses& addresses,
                   const std::function<void(const TcpRead&)>& read, std::string& error);

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
                       std::vector<ExplainedFinding>& awaiting_hosts,
                       const std::function<void(const TcpSubject&)>& add);

}  // namespace commtap::analyzer
