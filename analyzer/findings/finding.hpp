// analyzer/findings/finding: what the analysis concludes, as every stage and render/ read it: a
// finding's kind, subject, severity and evidence (typed: finding_evidence.hpp). The vocabulary of
// the analyzer: it includes nothing of the analyzer's own, and no JSON.
#pragma once

#include <cstdint>
#include <string>

#include "analyzer/findings/finding_evidence.hpp"
#include "avoid_list/avoid_list.hpp"

namespace commtap::analyzer {

const char* severity_name(Severity severity);
bool parse_severity(const std::string& text, Severity& severity);

// Every kind of finding, most urgent first: reports and stores list them in this order.
#define COMMTAP_FINDING_KINDS(X) \
  X(hang)                        \
  X(communication_hang)          \
  X(rank_lost)                   \
  X(comm_aborted)                \
  X(mpi_error)                   \
  X(slow_host)                   \
  X(slow_host_network)           \
  X(slow_link)                   \
  X(slow_rank)                   \
  X(degradation)
namespace finding_kind {
#define COMMTAP_FINDING_KIND_NAME(name) inline constexpr char name[] = #name;
COMMTAP_FINDING_KINDS(COMMTAP_FINDING_KIND_NAME)
#undef COMMTAP_FINDING_KIND_NAME
}  // namespace finding_kind

struct Finding {
  std::string kind;     // one of finding_kind
  std::string subject;  // "host h2", "rank 3 (h1)", "link h1 -> h2", "comm 1", ...
  Severity severity = Severity::warning;
  std::string summary;              // one line with the evidence in numbers
  FindingEvidence evidence;         // typed; printed as JSON by analyzer/store/evidence_json
  std::uint64_t first_seen_ns = 0;  // wall clock, from the data
  std::uint64_t last_seen_ns = 0;
  // How far from healthy (a ratio to the baseline): of several findings of one kind and
  // severity, the clearest comes first. Not stored or printed.
  double strength = 0;
  // One minus the chance that a healthy job shows this evidence (evidence.hpp; the test is the
  // rule evidence's `test`); -1 where the rule is not a test against chance (a hang, a lost rank).
  double confidence = -1;
  // What the later stages read of it (the network detectors, health.cpp), also in its evidence:
  // the host it names, or its link's ends; the data its rule read ("probes", "tcp", "stalls";
  // empty: the job's messages or collectives); and that of another rule's finding of the same
  // subject merged into it (`evidence.also`).
  std::string host, from, to, source, also_source;
  // What a later job's collectives route around because of it (slow_host, slow_host_network:
  // the host; slow_link: its directed link or links and their costs), stored next to the
  // findings (avoid_list/). Not printed.
  avoid_list::AvoidList avoid;
};

// A slow host's share of the avoid list.
avoid_list::AvoidList avoid_host(const std::string& host);
// A slow link's: from -> to, and to -> from too where `both_directions`, each costing
// `extra_latency_ns` (clamped at 0) more per message and, where both throughputs are known and
// the link's is below the baseline's, the difference of their times per byte.
avoid_list::AvoidList avoid_link(const std::string& from, const std::string& to,
                                 bool both_directions, double extra_latency_ns, double mb_per_s = 0,
                                 double baseline_mb_per_s = 0);

}  // namespace commtap::analyzer
