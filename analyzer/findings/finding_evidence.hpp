// analyzer/findings/finding_evidence: what a finding measured, typed, one struct per rule that
// makes findings (a kind found by two rules, slow_link by messages and by probes, has two). The
// detectors fill them; the findings store reads whom they name; the one JSON writer
// (analyzer/store/evidence_json) prints them as the `evidence` object of reports, Perfetto
// exports and the store's `evidence` column. Times in ns, shares in [0, 1], throughputs in MB/s.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "analyzer/findings/evidence.hpp"

namespace commtap::analyzer {

enum class Severity { info, warning, error, critical };

// ---- Hangs and lost ranks (detect_hangs) ---------------------------------------------------

// hang, MPI: ranks stuck in a collective instance that others never arrived at.
struct HangEvidence {
  std::int64_t comm_id = 0;
  std::uint64_t seq = 0;  // the instance's number on its communicator
  std::string function;   // the collective the stuck ranks are in
  std::vector<int> stuck_ranks;
  std::vector<int> culprits;          // never arrived: the cause
  std::vector<int> waiting_in_calls;  // never arrived either, blocked in calls waiting for it
  std::size_t members = 0;            // ranks of the communicator
  std::uint64_t stuck_ns = 0;
  // The longest a member waited in one of the communicator's collectives and got through (0:
  // none over half of --hang-after); where it is, a culprit still writing heartbeats is named
  // only past twice that.
  std::uint64_t survived_wait_ns = 0;
};

// communication_hang, MPI: every member entered the instance and none left.
struct CommunicationHangEvidence {
  std::int64_t comm_id = 0;
  std::uint64_t seq = 0;
  std::vector<int> stuck_ranks;
  std::uint64_t stuck_ns = 0;
  std::uint64_t survived_wait_ns = 0;  // as HangEvidence's: named only past twice it
};

// hang or communication_hang, NCCL (from its progress rows): ranks that enqueued an instance
// whose kernel does not finish.
struct NcclHangEvidence {
  std::int64_t comm_id = 0;
  std::uint64_t seq = 0;
  std::vector<int> stuck_ranks;  // enqueued it and wait
  std::size_t members = 0;
  std::uint64_t stuck_ns = 0;
  std::vector<int> aborted;  // then called ncclCommAbort (a consequence)
  // A hang's: never enqueued it (the cause), and those blocked waiting for them. Printed only
  // where there are culprits.
  std::vector<int> culprits, waiting_in_calls;
};

// rank_lost: no heartbeat for a while, or the first to go in a job the others tore down.
struct RankLostEvidence {
  int rank = 0;
  std::string host;
  std::uint64_t last_heartbeat_ns = 0;  // wall clock
  std::uint64_t silent_ns = 0;          // since it was last heard
  std::string last_state, last_function;
  // Ranks whose fatal MPI error was a call with it (ranks.error_peer), before MPI aborted.
  std::vector<int> named_by_mpi_errors;
};

// mpi_error: a rank that a fatal MPI error ended, not explained by a lost peer.
struct MpiErrorEvidence {
  int rank = 0;
  std::string function;  // '' where commtap did not record the call
  std::int64_t comm_id = 0;
  int peer = -1;  // world rank; -1: none, or not one rank
  std::string error_class, text;
};

// comm_aborted: ranks that called ncclCommAbort, nothing else explaining it.
struct CommAbortedEvidence {
  std::vector<int> ranks;
  std::uint64_t calls = 0;
};

// ---- Slow ranks and hosts (detect_slow_nodes, detect_rank_changes) -------------------------

// What the findings store adds from the program's other jobs (findings_store.hpp).
struct AcrossJobs {
  std::size_t same_rank_late_on_other_hosts = 0;  // other jobs, each counted once
  std::size_t same_host_late_with_other_ranks = 0;
};

// Whom a slow_rank or slow_host finding names, whichever rule found it: what the findings store
// compares with the program's other jobs.
struct SlowComputeSubject {
  std::string host;
  std::string program;     // rank 0's executable, without its directory ("" if unknown)
  std::vector<int> ranks;  // the slow rank, or the host's slow ranks
  std::optional<AcrossJobs> across_jobs;  // set by the findings store, where other jobs say
};

// Why a slow node finding may be the program's own work rather than the machine.
enum class SuspectedStructure { call_sites, rank_zero };

// slow_rank or slow_host by lateness: last to arrive at collectives that kept the others waiting.
struct LatenessEvidence {
  SlowComputeSubject who;
  double last_fraction = 0;  // share of the waited collectives it arrived last at (median)
  double median_lateness_ns = 0, others_lateness_ns = 0;
  int windows_flagged = 0, windows = 0;  // of its eligible windows, those it was late in
  double cost_share = 0;                 // share of the job's time lost
  EvidenceTest test;
  // Held at a warning as possibly the program's own; the severity it would have were it the
  // machine (earlier runs in the store can say), and the call sites it was late at.
  std::optional<SuspectedStructure> suspected;
  Severity severity_if_the_machine = Severity::warning;
  std::vector<std::string> late_sites;  // "comm 1 site 3" (call_sites only)
  // Without MPI (NCCL only): each collective's time from enqueue to completion, ns; with MPI:
  // the share of the time inside MPI. Its own and the others' median.
  bool collective_times = false;
  double own_collective = 0, others_collective = 0;
  // The share of the time its host was held off the CPU over the late windows, and the other
  // hosts' (where both are known).
  std::optional<double> stall_share, others_stall_share;
};

// slow_rank or slow_host by a change: from some point on it spends more of its time not
// waiting for the others than before. `excess`: its share of time not waiting over the
// others' median.
struct RankChangeEvidence {
  SlowComputeSubject who;
  double changed_at_s = 0;  // since the job's start
  double excess_before = 0, excess_after = 0, excess_latest = 0;
  double own_share_before = 0, own_share_after = 0;  // its own share, not against the others
  // Of its own share, the time held off the CPU (the writer's ticks), before and since.
  double held_share_before = 0, held_share_after = 0;
  // Its share of the time throttled by its cgroup CPU limit, before and since (where recorded).
  std::optional<double> throttled_share_before, throttled_share_after;
  // The share of the job's time lost: the fall of the job's progress (operations completed per
  // second) where `cost_from_progress`, else the others' time lost waiting ("cost_from").
  double cost_share = 0;
  bool cost_from_progress = false;
  EvidenceTest test;
};

// ---- The network (detect_slow_links, detect_probed_links, detect_lost_packets, ...) --------

// A network finding's subject: a host (slow_host_network) or a link (slow_link).
struct NetworkSubject {
  std::string host;      // a host's; empty for a link
  std::string from, to;  // a link's ends
  bool both_directions = false;
};

// slow_host_network by the job's messages.
struct MessageHostEvidence {
  std::string host;
  double median_latency_ns = 0, others_latency_ns = 0;  // its links', and between other hosts
  std::uint64_t messages = 0;
  EvidenceTest test;
};

// slow_link by the job's messages.
struct MessageLinkEvidence {
  std::string from, to;
  bool both_directions = false;
  double median_latency_ns = 0, baseline_ns = 0;
  double ratio = 0;  // how much slower than the baseline
  std::uint64_t recent_slow = 0, recent_fast = 0, messages = 0;
  // Recent messages neither slow nor fast because censored: found done at the receiver's first
  // look long after last seen pending (transfers.seen_pending_ns), so their arrival is not known.
  std::uint64_t recent_censored = 0;
  EvidenceTest test;
  // The link's hosts at which it stands apart: every other pair of that host the same way (into
  // it where the link's direction ends there, out of it where it starts there) with recent
  // messages measured, one at least, read much faster. A host held off the CPU delays all its
  // pairs that way alike, so its stall does not explain this link (health.cpp).
  std::vector<std::string> apart_at;
  // The stretches of its recent decided messages that read slow with no two fast ones in a row, two
  // slow ones at least: the first and the last one's sends, on the aligned clock (rank 0's). A
  // link probe that found the pair fine inside one shows the network fine while its messages
  // were slow (detect_probed_links). Not printed: aligned times mean nothing outside the analysis.
  std::vector<std::pair<std::int64_t, std::int64_t>> slow_stretches;
  // Where it was judged slow since its messages turned slow inside the window (not over the
  // whole window): how long before the analysis they did, and its slow and fast messages since.
  double slow_since_s = 0;
  std::uint64_t since_slow = 0, since_fast = 0;
};

// slow_host_network by link probes.
struct ProbedHostEvidence {
  std::string host;
  EvidenceTest test;
  double latency_ns = 0, mb_per_s = 0;  // medians of its slow pairs
  double baseline_latency_ns = 0, baseline_mb_per_s = 0;
  int rounds = 0;
  // Of its slow pairs' rounds, the measurements slow only by the time a leader was held off the
  // CPU (probes.from_held_ns, to_held_ns), which count neither way.
  int held_rounds = 0;
  // Of the same, the measurements slow alike between two other hosts in the same round (the
  // machine's), which count neither way either.
  int alike_rounds = 0;
  std::vector<std::string> message_links;  // the message findings it absorbed ("link a -> b")
};

// slow_link by link probes.
struct ProbedLinkEvidence {
  std::string from, to;
  EvidenceTest test;
  bool both_directions = false;
  double latency_ns = 0, mb_per_s = 0;
  double baseline_latency_ns = 0, baseline_mb_per_s = 0;
  int slow_rounds = 0, rounds = 0;
  int held_rounds = 0, alike_rounds = 0;  // as ProbedHostEvidence's
};

// What the probes add to the message finding of the same link (its `also`).
struct ProbesAlsoEvidence {
  double latency_ns = 0, mb_per_s = 0;
  double baseline_latency_ns = 0, baseline_mb_per_s = 0;
};

// slow_host_network or slow_link by TCP retransmissions.
struct LostPacketsEvidence {
  NetworkSubject subject;
  std::uint64_t segments = 0, lost = 0, resent = 0;
  double share = 0;           // lost / segments
  double baseline_share = 0;  // on most links
};

// slow_link or slow_host_network by the kernel's busy time: the rate its connections moved data
// at while the network paced them, against most links'.
struct LinkRateEvidence {
  NetworkSubject subject;
  std::uint64_t bytes = 0;
  double paced_ns = 0;  // time with data in flight, less the receivers' full windows
  double mb_per_s = 0, baseline_mb_per_s = 0;
  std::size_t links_compared = 0;  // measured directions the baseline is the upper quartile of
  int moments = 0;                 // separate reads slow at that rate
};

// One end of a stalled message: the time its process was held off the CPU (heartbeats'
// stalled_ns) over the heartbeat interval that covers the message's transit.
struct StalledEnd {
  int rank = -1;
  double held_off_ns = -1;  // -1: unknown (no heartbeat before or after the transit)
  double interval_ns = 0;
  double throttled_ns = -1;  // of held_off_ns, its cgroup CPU limit's count; -1: not recorded
};
// A transfer that stalled: a message (its two ranks known) or a link probe (hosts only).
struct StalledTransfer {
  std::string from, to;    // hosts
  std::int64_t at_ns = 0;  // its transit's start, on the job's wall clock
  double ns = 0, baseline_ns = 0;
  bool probe = false;
  StalledEnd sender, receiver;  // a message's ranks, a probe's leaders (rank -1: unknown)
  bool by_scheduler = false;    // its excess is the time an end was held off the CPU
};

// slow_host_network or slow_link by transfers that stalled (a retransmission timeout).
struct StalledTransfersEvidence {
  NetworkSubject subject;
  std::size_t stalls = 0;
  int moments = 0;  // separate moments they happened at
  double longest_ns = 0, baseline_ns = 0;
  std::size_t stalls_elsewhere = 0;
  // Stalls of the subject's pairs taken for the scheduler's and not counted above.
  std::size_t by_scheduler = 0;
  // The subject's link-probe transfers since its first stalled one, and those stalled: half or
  // more stalled (3 at least) is a steady slowness, a rate limit or a congested port, rather
  // than the few stalls of lost packets.
  std::size_t probe_transfers = 0, probe_transfers_stalled = 0;
  bool steady = false;
  // The subject's stalls, counted or not, the longest first (at most kListed).
  std::vector<StalledTransfer> transfers;
  static constexpr std::size_t kListed = 16;
};

// ---- Functions (detect_degradation) --------------------------------------------------------

// degradation: a function's calls of one size class slower now than in the job's first windows.
struct DegradationEvidence {
  std::string function, symbol;           // the call site's
  std::int64_t size_class = 0;            // bytes
  double baseline_ns = 0, recent_ns = 0;  // per call
  std::size_t windows = 0;
  double calls = 0;
  double mix_change = 0;  // how much the job's mix of calls changed meanwhile
};

using RuleEvidence =
    std::variant<std::monostate, HangEvidence, CommunicationHangEvidence, NcclHangEvidence,
                 RankLostEvidence, CommAbortedEvidence, MpiErrorEvidence, LatenessEvidence,
                 RankChangeEvidence, MessageHostEvidence, MessageLinkEvidence, ProbedHostEvidence,
                 ProbedLinkEvidence, ProbesAlsoEvidence, LostPacketsEvidence, LinkRateEvidence,
                 StalledTransfersEvidence, DegradationEvidence>;

// A finding's evidence: its rule's, and what the pipeline added.
struct FindingEvidence {
  RuleEvidence rule;
  // Another rule's finding of the same subject merged into this one (health.cpp), or the
  // probes' measure of a message link: its evidence. Shared, never changed once set.
  std::shared_ptr<const FindingEvidence> also;
  // Slow links at this host merged into its slow_host_network finding (health.cpp).
  std::vector<std::string> absorbed_links;
  // A network finding's cost (detect/network_cost.cpp): how much the job's pace (operations its
  // ranks complete per second) fell from the finding's first moment on, where it was measured
  // and nothing else explains the fall; a fraction, 0.1 = 10%.
  std::optional<double> job_pace_fall;
};

// The slow_rank or slow_host subject of `evidence`, or null.
const SlowComputeSubject* slow_compute_subject(const FindingEvidence& evidence);
SlowComputeSubject* slow_compute_subject(FindingEvidence& evidence);

}  // namespace commtap::analyzer
