// analyzer/detectors: one function per kind of finding, each in its own file. Each reads what it
// needs of the job's files and appends its findings (and, for the report, details) to `health`.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/health.hpp"
#include "analyzer/job_model.hpp"

namespace commtap::analyzer {

// hang, communication_hang, rank_lost: from the latest heartbeats and communicator progress.
void detect_hangs(const Job& job, const HealthOptions& options, std::vector<Finding>& out);
// details.stall_shares and stalled_hosts: each host's share of the latest window its process
// was held off the CPU (heartbeats.stalled_ns), and those that stand out. Run first: a stalled
// host's messages and probes arrive late, and the stall, not its network, is the cause.
bool find_stalled_hosts(const Job& job, const HealthOptions& options, JobHealth& health,
                        std::string& error);
// slow_rank, slow_host: arrival lateness at aligned collective instances, in persistence windows.
bool detect_slow_nodes(const Job& job, const HealthOptions& options, JobHealth& health,
                       std::string& error);
// slow_link, slow_host_network: one-way times of joined messages per directed host pair.
bool detect_slow_links(const Job& job, const HealthOptions& options, JobHealth& health,
                       std::string& error);
// slow_host_network, slow_link: latency and throughput of commtap's link probes per directed
// host pair (the probes table), against the other pairs'.
bool detect_probed_links(const Job& job, const HealthOptions& options, JobHealth& health,
                         std::string& error);
// slow_host_network, slow_link from the kernel's TCP counters (the tcp_links table): directed host
// pairs whose connections lost (resent, less the resends the receiver already had) a share of their
// segments well above most links', at two moments at least, over the stall span; a host where its
// links to or from two hosts lose. Merges with the same finding of an earlier rule. Adds the
// receiving hosts to details.delayed_hosts (they wait for the resends) and the per-pair counts to
// details.tcp_links.
bool detect_lost_packets(const Job& job, const HealthOptions& options, JobHealth& health,
                         std::string& error);
// slow_host_network, slow_link from stalls: transfers between hosts (the job's messages, from
// detect_slow_links' details.message_stalls, and link probes) that took kStallNs or more and
// kStallFactor times their baseline, at several separate moments, on one host's pairs or one
// link and not elsewhere: packets lost and retransmitted after a timeout (a flaky cable, NIC or
// switch port), which slows a job by its tail while every median reads healthy. Run after the
// other network detectors: a host or link they name already is not named again.
bool detect_stalled_links(const Job& job, const HealthOptions& options, JobHealth& health,
                          std::string& error);
// What counts as a stalled transfer, and over what span stalls are counted.
inline constexpr double kStallNs = 20e6, kStallFactor = 20;
std::int64_t stall_span_ns(const HealthOptions& options);  // six persistence windows

// The hosts and links that network findings so far name, so that a later rule does not name them
// again (a link counts as named when either of its hosts is).
struct NamedNetworkSubjects {
  std::set<std::string> hosts;
  std::set<std::pair<std::string, std::string>> links;  // both directions
  bool names_link(const std::string& from, const std::string& to) const {
    return links.count({from, to}) || hosts.count(from) || hosts.count(to);
  }
};
inline NamedNetworkSubjects named_network_subjects(const JobHealth& health) {
  NamedNetworkSubjects named;
  for (const Finding& f : health.findings) {
    if (f.kind == finding_kind::slow_host_network) named.hosts.insert(f.evidence.value("host", ""));
    if (f.kind == finding_kind::slow_link) {
      const std::string from = f.evidence.value("from", ""), to = f.evidence.value("to", "");
      named.links.insert({from, to});
      named.links.insert({to, from});
    }
  }
  return named;
}

// degradation: a call site's recent aggregate windows against its own earlier ones.
bool detect_degradation(const Job& job, const HealthOptions& options, JobHealth& health,
                        std::string& error);

}  // namespace commtap::analyzer
