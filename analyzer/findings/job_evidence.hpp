// analyzer/findings/job_evidence: what the detectors measured besides their findings, as typed
// parts. Each part is written by one detector (named at the part) and read by the later detectors
// and health.cpp that take it as a const parameter, and by render/ (the report's matrices and
// charts, the JSON's "links").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace commtap::analyzer {

// find_stalled_hosts: per host, the share of the latest window its process was held off the CPU
// (heartbeats.stalled_ns; hosts without a known share are absent).
struct HostStalls {
  std::map<std::string, double> shares;   // every host with a known share
  std::map<std::string, double> stalled;  // the hosts that stand out, with their share
};

// detect_slow_nodes: every rank's median lateness in every kept window, for the report's chart
// and heat map.
struct LatenessTable {
  double window_s = 10;
  double first_s = 0;  // the first window's start, s since the job's start
  double last_s = 0;   // the latest aligned instance, s since the job's start
  std::vector<int> ranks;
  std::vector<std::vector<std::optional<double>>> ms;  // [rank index][window]; none where the
                                                       // rank had too few instances
};

// align_host_clocks: per host, what its clock needed to make the job's messages (or the link
// probes) read the same one-way time both ways, and the probes' one-way times on the corrected
// clocks.
struct ProbedOneWay {
  std::string from, to;
  double one_way_us = 0;  // median of the newest rounds
};
struct ClockAlignment {
  // How the ranks' clocks were put on rank 0's before (load_facts): "mpi" (MPI's ping-pong
  // estimates), "collective completions (error <= X us)" (a job without MPI), "none"
  // (ClockMethod::describe); and that bound (us; none without such estimates).
  std::string method = "mpi";
  std::optional<double> collective_error_us;
  std::vector<double> correction_ns;             // per host index; 0: none
  std::map<std::string, double> corrections_us;  // the hosts with a correction other than 0
  std::vector<ProbedOneWay> probed_one_way;      // per directed pair with probe round trips
};

// A subject that stood out by its effect (late, slow) but whose evidence fell short of the
// job's false-alarm rate (evidence.hpp): what a longer job, or a lower --false-alarm-rate, may
// name. Not a finding.
struct UnprovenSubject {
  std::string kind, subject;
  double false_alarm = 1;  // the chance of the evidence in a healthy job
  std::string test;        // EvidenceTest::text
};

// detect_slow_links: per directed host pair, the job's messages (the report's matrix).
struct MessageLink {
  std::string from, to;
  double median_us = 0;  // over the --since range
  double ratio = 0;      // to the size classes' baselines
  std::uint64_t messages = 0, recent_slow = 0, recent_fast = 0;
  bool slow = false, suspect = false;
  // Slow as the echo of its reverse, the slow way by the smallest messages (detect_slow_links).
  bool echo_of_reverse = false;
};
// A message of the stall span that took kStallNs or more and kStallFactor times its baseline.
struct MessageStall {
  std::string from, to;
  std::int64_t at_ns = 0;            // its send, on rank 0's clock
  double ns = 0, baseline_ns = 0;    // its transit (from both sides ready to done), the baseline
  int from_rank = -1, to_rank = -1;  // the sender, the receiver (world ranks)
  std::int64_t done_ns = 0;          // its receive's completion, on rank 0's clock
};
// A direction that read slow while its round trip is not: a clock error, not a slow link.
struct ClockOnlyLink {
  std::string from, to;
  double round_trip_excess_us = 0;
};
struct MessageEvidence {
  std::vector<MessageLink> links;
  std::vector<UnprovenSubject> unproven;  // directions slow by effect, short of evidence
  std::vector<MessageStall> stalls;
  std::vector<ClockOnlyLink> slow_one_way_by_clock_only;
};

// detect_probed_links: per directed host pair, its probes' newest rounds (the report's matrices).
struct ProbedLink {
  std::string from, to;
  double latency_us = 0, mb_per_s = 0;
  int rounds = 0;
  bool slow = false;
};
// A finding left out because other evidence explains it: a network finding whose host at one of
// its ends was held off the CPU (health.cpp), a message-based one the probes found fine
// (detect_probed_links).
struct ExplainedFinding {
  std::string kind, subject;
};
// A link a TCP rule holds until its hosts' other pairs tell a host's fault from the link's
// (detect_lost_packets, detect_link_rates: awaits_its_hosts), and its two hosts.
struct AwaitingLink : ExplainedFinding {
  std::string from, to;
};

// A host the probes found slow that the job's messages show is one slow link of it.
struct HostThatIsALink {
  std::string host, link;
};
struct ProbeEvidence {
  std::vector<ProbedLink> links;
  std::vector<HostThatIsALink> host_is_a_link;
  std::vector<ExplainedFinding> not_confirmed;  // message findings the probes contradict
  // Links the asynchronous probes found slow, not named yet: their hosts' other pairs have not
  // been measured fine since (detect_probed_links.cpp, link_awaits_its_hosts).
  std::vector<ExplainedFinding> awaiting_hosts;
  // The same links' two hosts, for the stalled-transfer rule, which holds them back too.
  std::vector<std::pair<std::string, std::string>> held_links;
  // Directed pairs slow in most of their newest rounds (two at least), for the other rules' links
  // (hold_links_at_probed_hosts): since when (aligned ns), and how slow by latency and by
  // throughput (the median of its slow votes since, against the measure's limit; 0: not slow
  // by it).
  struct SlowPair {
    std::string from, to;
    std::int64_t since = 0;
    double lateness = 0, narrowness = 0;
  };
  std::vector<SlowPair> slow_pairs;
  // Links the job's messages, stalls or lost packets name, not named yet: the probes find another
  // pair of their hosts slow (hold_links_at_probed_hosts).
  std::vector<ExplainedFinding> awaiting_probed_hosts;
  // Whether the probes record the leaders' held times (version 13), so that their findings are
  // judged with the time off the CPU taken out.
  bool held_recorded = false;
};

// detect_lost_packets: per directed host pair, the kernel's TCP counters over the stall span.
struct TcpLink {
  std::string from, to;
  std::uint64_t segments = 0, resent = 0, lost = 0, bytes = 0;
  // The rate it moved full segments at while the network paced it, and that time
  // (detect_link_rates; 0: not measured).
  double mb_per_s = 0, paced_ns = 0;
};

struct JobEvidence {
  std::vector<std::string> hosts;  // the job's hosts, sorted (host indexes point here)
  std::int64_t start_ns = 0;       // wall clock of the earliest MPI_Init: 0 s on time axes
  double interval_s = 1.0;         // the job's COMMTAP_INTERVAL
  HostStalls stalls;
  std::optional<LatenessTable> lateness;
  ClockAlignment clocks;
  MessageEvidence messages;
  ProbeEvidence probes;
  std::vector<TcpLink> tcp_links;
  // Lossy or slow links not named yet: their hosts' other pairs have not sent enough since the
  // first loss or slow read to tell a host's fault from the link's (detect_lost_packets.cpp,
  // detect_link_rates.cpp: awaits_its_hosts).
  std::vector<AwaitingLink> tcp_awaiting_hosts;
  // Other rules' links held while a TCP rule holds another pair of their hosts
  // (hold_links_at_tcp_awaiting_pairs).
  std::vector<ExplainedFinding> held_for_tcp_pairs;
  // Hosts that wait for slow messages, probes or resent packets (detect_slow_links,
  // detect_probed_links, detect_lost_packets): their lateness at collectives is the network's.
  std::vector<std::string> delayed_hosts;
  std::vector<ExplainedFinding> explained_by_stalls;
  std::vector<UnprovenSubject> unproven;  // detect_slow_nodes, detect_slow_links
};

}  // namespace commtap::analyzer
