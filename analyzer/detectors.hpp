// analyzer/detectors: one function per kind of finding, each in its own file. Each reads what it
// needs of the job's files and appends its findings (and, for the report, details) to `health`.
#pragma once

#include <string>
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

// degradation: a call site's recent aggregate windows against its own earlier ones.
bool detect_degradation(const Job& job, const HealthOptions& options, JobHealth& health,
                        std::string& error);

}  // namespace commtap::analyzer
