// analyzer/detect/detectors: one function per kind of finding, each in its own file (detect_*.cpp).
// Each reads what it needs of the job's files and of the evidence of the detectors before it, and
// appends its findings and writes its own part of the job's evidence (job_evidence.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/detect/tcp_counters.hpp"
#include "analyzer/findings/evidence.hpp"
#include "analyzer/findings/finding.hpp"
#include "analyzer/findings/job_evidence.hpp"
#include "analyzer/model/job_model.hpp"
#include "analyzer/model/job_pace.hpp"
#include "analyzer/model/messages.hpp"
#include "analyzer/options.hpp"

namespace commtap::analyzer {

// Each detector's parameters say what it reads (const) and what it writes; health.cpp runs them
// in an order that follows from that.

// The severity of a finding its evidence alone decides (network findings, until
// cost_network_findings weighs what they cost): an error a thousand times less likely in a healthy
// job than the finding's own bar (evidence.hpp), else a warning.
inline Severity severity_by_evidence(const EvidenceTest& test, const HealthOptions& options) {
  return test.false_alarm() <= options.false_alarm_rate * kErrorEvidenceFactor ? Severity::error
                                                                               : Severity::warning;
}

// hang, communication_hang, rank_lost: from the latest heartbeats and communicator progress (on
// NCCL communicators from the progress alone: enqueued and completed); comm_aborted: a rank
// called ncclCommAbort and nothing else explains it.
void detect_hangs(const Job& job, const HealthOptions& options, std::vector<Finding>& out);
// Each host's share of the latest window its process was held off the CPU
// (heartbeats.stalled_ns), and those that stand out: a stalled host's messages and probes arrive
// late, and the stall, not its network, is the cause (health.cpp leaves such findings out).
bool find_stalled_hosts(const Job& job, const HealthOptions& options, HostStalls& stalls,
                        std::string& error);
// slow_rank, slow_host: arrival lateness at aligned collective instances, per window, and how
// often the subject arrived last against chance (evidence.hpp). `instances`: the aligned
// instances compared; `lateness`: per rank and window, for the report; `unproven`: late
// subjects whose evidence fell short of options.false_alarm_rate.
bool detect_slow_nodes(const Job& job, const HealthOptions& options, const JobTimes& times,
                       std::vector<Finding>& out, std::uint64_t& instances,
                       std::optional<LatenessTable>& lateness,
                       std::vector<UnprovenSubject>& unproven, std::string& error);
// slow_rank, slow_host by change (part of detect_slow_nodes): a rank whose share of time not
// waiting for the others rose against theirs at some moment (its bins in `times`) and stayed up
// while they came to wait for it; hosts in `named_hosts` (named by lateness already) are left out.
void detect_rank_changes(const Job& job, const HealthOptions& options, const JobTimes& times,
                         const std::set<std::string>& named_hosts, std::vector<Finding>& out);

// slow_link, slow_host_network: one-way times of joined messages per directed host pair, on the
// corrected clocks. Writes the per-pair matrix and the stalled messages to `evidence`, and the
// hosts that wait for slow messages to `delayed_hosts`.
void detect_slow_links(const Job& job, const HealthOptions& options,
                       const std::vector<JoinedMessage>& messages, const ClockAlignment& clocks,
                       std::vector<Finding>& findings, MessageEvidence& evidence,
                       std::vector<std::string>& delayed_hosts);
// slow_host_network, slow_link: latency and throughput of commtap's link probes per directed
// host pair (the probes table), against the other pairs'. Reads the messages' matrix (which
// direction is slow) and the probes' one-way times; drops message findings the probes
// contradict, absorbs message links into a host finding of its own, and adds to
// `delayed_hosts`. A measurement taken while a host's own CPU limit held it (`limits`) counts
// for nothing.
bool detect_probed_links(const Job& job, const HealthOptions& options, const HostLimits& limits,
                         const MessageEvidence& messages, const ClockAlignment& clocks,
                         std::vector<Finding>& findings, ProbeEvidence& evidence,
                         std::vector<std::string>& delayed_hosts, std::string& error);
// Holds back the slow_link findings of the other rules (messages, stalls, lost packets) while
// the link probes find another pair of their hosts slow and the job runs (`running`: some rank
// has not ended): the host rule may name the host next (`probes.awaiting_probed_hosts`). Reads
// `probes.slow_pairs`.
void hold_links_at_probed_hosts(const Job& job, bool running, ProbeEvidence& probes,
                                std::vector<Finding>& findings);
// Holds back the slow_link findings of the other rules (probes, messages, stalls) while a TCP
// rule holds a pair of one of their hosts with a third host (`tcp_awaiting`) and the job runs:
// a host limited both ways shows in the TCP counters on the one pair its program exchanges bulk
// data over, and to the probes on another; together they are the host's, which either may name
// next. Held links go to `held`.
void hold_links_at_tcp_awaiting_pairs(bool running, const std::vector<AwaitingLink>& tcp_awaiting,
                                      std::vector<Finding>& findings,
                                      std::vector<ExplainedFinding>& held);
// The two rules below read the stall span's TCP counters (`tcp`: tcp_counters.hpp, read once),
// and fill `tcp_links`: tcp_links_of(job, tcp), a row per pair in the order of `tcp.pairs`.
// slow_host_network, slow_link from the kernel's busy time (the tcp_links table): directed host
// pairs whose connections moved bulk data, while the network paced them, at a tenth of the
// measured pairs' upper quartile or less, for a second at least and at two moments, over the
// stall span; a host where its pairs to or from two hosts are slow. Merges with the same finding
// of an earlier rule; adds the rates to `tcp_links`, the receiving hosts to `delayed_hosts`, and
// slow links held until their hosts' other pairs are measured to `awaiting_hosts`. Returns the
// directions with a slow read in the last half of the span (slow or not yet, echoes too) for the
// lost-packet rule.
std::vector<std::pair<int, int>> detect_link_rates(const Job& job, const HealthOptions& options,
                                                   const TcpSpan& tcp,
                                                   std::vector<Finding>& findings,
                                                   std::vector<TcpLink>& tcp_links,
                                                   std::vector<AwaitingLink>& awaiting_hosts,
                                                   std::vector<std::string>& delayed_hosts);
// slow_host_network, slow_link from the kernel's TCP counters (the tcp_links table): directed host
// pairs whose connections lost (resent, less the resends the receiver already had) a share of their
// segments well above most links', at two moments at least, over the stall span; a host where its
// links to or from two hosts lose. Leaves the directions in `rate_limited` (detect_link_rates') to
// the rate rule. Merges with the same finding of an earlier rule. Adds the receiving hosts to
// `delayed_hosts` (they wait for the resends); the per-pair counts go to `tcp_links`, and lossy
// links held until their hosts' other pairs are known to `awaiting_hosts`.
void detect_lost_packets(const Job& job, const HealthOptions& options, const TcpSpan& tcp,
                         const std::vector<std::pair<int, int>>& rate_limited,
                         std::vector<Finding>& findings, std::vector<TcpLink>& tcp_links,
                         std::vector<AwaitingLink>& awaiting_hosts,
                         std::vector<std::string>& delayed_hosts);
// slow_host_network, slow_link from stalls: transfers between hosts (the job's messages, from
// detect_slow_links' `message_stalls`, and link probes) that took kStallNs or more and
// kStallFactor times their baseline, at several separate moments, on one host's pairs or one
// link and not elsewhere: packets lost and retransmitted after a timeout (a flaky cable, NIC or
// switch port), which slows a job by its tail while every median reads healthy. Reads the
// other network detectors' findings: a host or link they name already is not named again, nor
// a link the probe rule holds back (`probes.held_links`).
bool detect_stalled_links(const Job& job, const HealthOptions& options,
                          const std::vector<MessageStall>& message_stalls,
                          const ProbeEvidence& probes, std::vector<Finding>& findings,
                          std::string& error);
// What the network findings cost: the largest fall of the job's pace (operations its ranks
// complete per second, model/job_pace) goes into each one's evidence, and one that cost the job
// options.error_cost_share or more is an ERROR. Only where no finding of another kind (a slow
// rank or host, a hang, a lost rank) could explain the fall instead.
void cost_network_findings(const Job& job, const HealthOptions& options, const JobTimes& times,
                           std::vector<Finding>& findings);
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
inline NamedNetworkSubjects named_network_subjects(const std::vector<Finding>& findings) {
  NamedNetworkSubjects named;
  for (const Finding& f : findings) {
    if (f.kind == finding_kind::slow_host_network) named.hosts.insert(f.host);
    if (f.kind == finding_kind::slow_link) {
      const std::string &from = f.from, &to = f.to;
      named.links.insert({from, to});
      named.links.insert({to, from});
    }
  }
  return named;
}

// degradation: a call site's recent aggregate windows against its own earlier ones.
bool detect_degradation(const Job& job, const HealthOptions& options,
                        std::vector<Finding>& findings, std::string& error);

}  // namespace commtap::analyzer
