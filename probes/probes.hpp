// probes: link probes between hosts. At points every member of a communicator agrees on (after
// one of its blocking collectives), one rank per host of that communicator measures every
// directed pair of its hosts' latency and throughput with a few messages on commtap's private
// communicator, so that a slow NIC or a congested link shows up in any job, even one whose own
// traffic commtap cannot see (collectives only) and one whose collectives are all on a
// Cartesian, split or duplicated communicator. The rows go to the `probes` table, numbered by
// the job's hosts (world::NodeLayout), whichever communicator carried the round. Where no round
// comes (a program of point-to-point calls only) or the rounds are overdue (rounds_quiet), the
// hosts' leaders measure asynchronously instead (async_probes.hpp), started and finished here.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "monitor/trace_schema.hpp"
#include "probes/async_probes.hpp"
#include "probes/changes.hpp"
#include "settings/module_settings.hpp"
#include "world/world.hpp"

namespace commtap::probes {

// When a member may probe, by its own account (the members agree by the maximum of their "not
// yet"s). Routine rounds, of every pair: the set interval has passed since its last such round,
// grown so that the cheapest of its last three cycles (a round and the decisions before it) takes
// at most 0.5% of it. Confirming rounds, of the changed pairs' tournament rounds only, after a
// round that found a change: a second has passed since the last round of either kind, and what
// probing cost beyond the first rounds is at most 2% of the time since probing began.
struct ProbeBudget {
  double set_interval_s = 0;  // COMMTAP_PROBE_INTERVAL
  double cheapest_cycle_s =
      0;                      // of the last three routine cycles this rank took part in (0: fewer)
  double partial_wait_s = 0;  // more, for a communicator on some of the job's hosts only
  double since_round_s = 0;   // since this rank's last round on any communicator
  double since_full_round_s = 0;  // since its last routine one
  // Rounds and decisions since the first rounds ended (0 before they end), and the time since
  // probing began (0: not begun).
  double spent_since_first_s = 0, since_start_s = 0;
};
struct RoundsDue {
  double interval_s = 0;  // the set interval as the bound grows it
  // confirm_strong: a strong change's confirmation (changes.hpp), which the share does not hold.
  bool routine = false, confirm = false, confirm_strong = false;
};
RoundsDue rounds_due(const ProbeBudget& budget);

// What the confirmations' share leaves out of a leader's rounds: what measuring a direction that
// became slow cost beyond what it used to, for the measurements that find and confirm it. A
// whole transfer (before the direction is capped, transfer_plan) costs its time beyond
// kCappedTransferNs; a measuring turn kChangeFactor times its direction's usual turn or longer (a
// delayed link: every ping and transfer waits for it), its time beyond the usual. A
// rate-limited host's first round after its fault (six 84 ms transfers) otherwise spent the share
// of the job's first 25 s at once, and a 5 ms link's (pings 10 ms a round trip) kept its next
// round 13 s away (docs/faults.md, sweep 36); with only the first measurement left out, a 3 ms
// link's next two confirmations (50-100 ms each at load) kept its fourth round 8 s away (sweep
// 37). The measuring side leaves out kMeasuredTurns per direction over the job, each a strong
// change (changes.hpp; the analyzer names a link from three or four rounds): a loaded machine's
// slow turns are not strong, and leaving out three of each direction's put a clean job's probing
// at 2.2% in one of two runs (three runs with strong changes only: 1.5-2.0%; sweep 37). The
// answering side, which does not know what the measurement found, leaves out a direction's first
// whole transfer beyond the cap, once.
class SlowTransferExcuses {
 public:
  static constexpr int kMeasuredTurns = 3, kAnsweredTurns = 1;
  // Less is a loaded machine's noise, not a fault, and does not use one of the direction's excuses.
  static constexpr std::uint64_t kFloorNs = 10'000'000;
  // The part of `excess_ns` (a turn's or a whole transfer's time beyond the above, toward
  // `peer_node` where `measured`, else answered from it) left out: all of it for the direction's
  // first kMeasuredTurns (kAnsweredTurns), else 0.
  std::uint64_t excuse(int peer_node, bool measured, std::uint64_t excess_ns);

 private:
  std::unordered_map<int, int> measured_, answered_;  // excuses used, by peer node
};

class LinkProber {
 public:
  // Collective over `comm` (commtap's private duplicate of MPI_COMM_WORLD), at MPI_Init, with
  // its hosts (MPI's shared-memory domains, or pretend ones: COMMTAP_TEST_NODES,
  // world::node_layout) and their leaders in `layout`; the communicators stay the caller's, who
  // keeps them until the prober is gone. Every rank learns every world rank's host and every
  // host's name, and whether any rank runs under MPI_THREAD_MULTIPLE (`thread_multiple`, this
  // rank's): then only MPI_COMM_WORLD is probed, on every rank. Probes nothing if there is one
  // host or COMMTAP_PROBE_INTERVAL is 0.
  LinkProber(MPI_Comm comm, const world::NodeLayout& layout, const ProbeSettings& settings,
             bool thread_multiple);
  LinkProber(const LinkProber&) = delete;
  LinkProber& operator=(const LinkProber&) = delete;

  // Sequence numbers a communicator's first decision comes at, and never.
  static constexpr std::uint64_t kFirstDecision = 16;
  static constexpr std::uint64_t kNever = UINT64_MAX;

  // A communicator, as its members see it: its job-wide id, this rank's rank in it and the
  // world rank of each of its ranks (empty: MPI_COMM_WORLD).
  struct Members {
    std::int64_t id = 0;
    int rank = 0, size = 0;
    const std::vector<int>* world_ranks = nullptr;
  };
  // Whether the rounds can run on this communicator (an intercommunicator's members are both its
  // groups, which the caller lists): of world ranks only, on two hosts at least; MPI_COMM_WORLD
  // (id 1) only
  // where some rank runs under MPI_THREAD_MULTIPLE. Decided alike on every member (from the
  // membership and what all ranks agreed at MPI_Init); remembered by id.
  bool can_probe(const Members& comm);
  // After the blocking collective `seq` of the communicator `comm` (can_probe), on every member:
  // all reach the same seq of it in the same order. Its members agree, by one all-reduce among
  // them, whether to probe now (none of them took part in a round for the interval) and at
  // which of its seqs to ask again (returned); when they probe, one rank per host among them
  // measures its hosts' pairs. Returns the rows this rank measured in `rows`.
  std::uint64_t after_collective(const Members& comm, std::uint64_t seq,
                                 std::vector<monitor::ProbeRow>& rows);
  // What probing has cost this rank so far: rounds run, and the time spent in them (from the
  // decision to leave together) and in the decisions themselves (COMMTAP_VERBOSE reports it).
  struct Cost {
    std::uint64_t rounds = 0, probing_ns = 0, deciding_ns = 0, since_ns = 0;
  };
  Cost cost() const { return cost_; }

  // Whether no round that measured this rank's pair with `peer_node` has come for the interval
  // (the set one, or what the cost bound has grown it to; 2 s more after a round on a
  // communicator of some hosts only, which waits that much longer), or since MPI_Init, and no
  // collective the rounds may use on a communicator with that host for as long (at
  // `last_collective_ns`, 0: none): the asynchronous probes (async_probes.hpp) measure the pair
  // then. A program still calling such collectives gets its rounds, until they are overdue: no
  // round of the pair for kOverdueIntervals set intervals (a loaded machine's bound, a slow rate
  // of collectives, decisions placed by a rate that a fault then slowed), when the pair is
  // measured asynchronously too. A pair that no communicator with collectives spans (a pipeline's
  // input stage, split off the model stages' communicator) is measured asynchronously whatever
  // the rounds do.
  bool rounds_quiet(std::uint64_t now, std::uint64_t last_collective_ns, int peer_node) const;
  // The hosts (node numbers) whose pairs the rounds on communicator `comm_id` measure; nullptr
  // where it has had no decision point yet.
  const std::vector<int>* probed_hosts(std::int64_t comm_id) const;
  // The asynchronous probes: on every rank, right after the constructor. Runs on each host's
  // leader (nullptr elsewhere, returned) where the job is probed and no rank runs under
  // MPI_THREAD_MULTIPLE (all ranks agree on it).
  AsyncProber* start_async(AsyncProber::RowSink sink);
  // Before the library's MPI_Finalize (every rank, with the asynchronous probes on): the leaders
  // finish their measurements, answering the others', until every rank is here; then their
  // posted receives are cancelled.
  void before_finalize();
  const AsyncProber* async() const { return async_.get(); }

 private:
  // One communicator's view: its hosts (node numbers, ascending), the rank of each host's
  // first member (world ranks), this rank's host among them, and its decisions' pace.
  struct Schedule {
    std::vector<int> hosts;
    std::vector<int> leaders;  // world rank of each host's lowest-ranked member
    std::vector<int> members;  // world rank of each rank of the communicator
    int host = 0;              // this rank's host, an index of `hosts`
    bool leader = false;
    int tag = 0;  // of its rounds' messages on the private communicator
    std::uint64_t last_decision_seq = 0, last_decision_ns = 0;
    // Its collectives' pace, and whether it dropped since its last round of every pair (which
    // it then earns as a change does).
    PaceWatch pace;
    bool pace_dropped = false;
  };
  Schedule* schedule_of(const Members& comm);
  // Dissemination among the schedule's members (log2 n steps of one message each way): the
  // element-wise maximum of `values` on every member; with no values, a barrier that sleeps
  // between its tests after 50 us (members waiting for their leaders leave them the cores).
  // `napping`: waits as wait_napping does whatever the count (leaving a round).
  // Values from `or_from` on are bit sets, combined by OR instead.
  void all_max(const Schedule& s, int rank, std::uint64_t* values, int count, int tag,
               bool napping = false, int or_from = INT32_MAX);

  // This leader's pairs with `peers` (host indexes of the schedule, in tournament order).
  std::vector<monitor::ProbeRow> probe_round(const Schedule& s, const std::vector<int>& peers);
  // The tournament rounds of `s` that measure a direction of this rank's host whose newest
  // measurement found a change, and those whose change was a strong one, as bits of `words`
  // words each.
  struct ChangedRounds {
    std::vector<std::uint64_t> any, strong;
  };
  ChangedRounds changed_rounds(const Schedule& s, std::size_t words) const;
  // One pair's two halves: this leader measures its direction to `peer` (a host index of the
  // schedule; filling the two rows; posting its receive for the peer's turn before it ends its
  // own where `answer_next`), or answers the peer's measurement on the receive posted before
  // (post_answer_receive), returning the longest one-way leg the peer saw come back to it.
  void measure(const Schedule& s, int peer, monitor::ProbeRow& latency, monitor::ProbeRow& transfer,
               bool answer_next);
  std::uint64_t answer(int peer_rank, int tag);
  void post_answer_receive(int peer_rank, int tag);
  void exchange(void* out, int out_bytes, void* in, int in_bytes, int peer_rank, int tag);
  // A reply to a ping or a transfer: when the answering leader had the message and sent the
  // reply, on its clock, and how long the message may have waited for it off the CPU.
  struct PeerTimes {
    std::uint64_t received_ns = 0, replied_ns = 0, held_ns = 0;
  };
  // When requests completed, and how long what completed them may have waited for this rank
  // (`held_ns`: since the last test that found them incomplete, or since `since`).
  struct Completion {
    std::uint64_t at_ns = 0, held_ns = 0;
  };
  Completion wait_noting_hold(int count, MPI_Request requests[], std::uint64_t since,
                              MPI_Status* statuses);
  // Sends `out` and waits for the peer's reply to it.
  Completion round_trip(const void* out, int out_bytes, PeerTimes& reply, std::uint64_t since,
                        int peer_rank, int tag);

  MPI_Comm comm_ = MPI_COMM_NULL;  // all ranks: the probes' messages, by world rank
  int world_size_ = 0, hosts_ = 0;
  bool world_only_ = false;              // some rank runs under MPI_THREAD_MULTIPLE
  std::vector<int> node_of_rank_;        // the host of each world rank
  std::vector<std::string> host_names_;  // of each host
  std::uint64_t interval_ns_ = 0;
  std::uint64_t probe_bytes_ = 0;
  // Communicators met at a decision point: their schedules (nullptr: never probed).
  std::unordered_map<std::int64_t, std::unique_ptr<Schedule>> schedules_;
  // This rank's last round, on any communicator (0: none yet), of either kind and routine, for
  // the interval; and by each host (node) whose pair with this rank's host it measured.
  std::uint64_t last_round_end_ns_ = 0, last_full_round_end_ns_ = 0;
  std::uint64_t full_rounds_ = 0;
  std::vector<std::uint64_t> round_end_by_node_;
  // The last routine cycles' seconds (0: none yet), for the cost bound: each a routine round and
  // the decisions since the round before it, on any communicator.
  static constexpr std::size_t kRoundsKept = 3;
  std::array<double, kRoundsKept> recent_cycles_s_{};
  std::uint64_t decisions_ = 0, deciding_since_round_ns_ = 0;
  // The last decisions' costs (a ring; decisions_ of them at most), whose median spaces the
  // decisions (after_collective).
  static constexpr std::size_t kDecisionsKept = 9;
  std::array<std::uint64_t, kDecisionsKept> recent_decisions_ns_{};
  // What this rank's first kRoundsKept rounds and their decisions cost (the confirmations' share
  // is what probing cost beyond them).
  std::uint64_t first_rounds_spent_ns_ = 0;
  // The directions this rank measured, and those (by peer node) whose newest measurement found a
  // change (whether a strong one), which the next decision on a communicator spanning them
  // carries to its members; and how many strong changes each direction has had confirmed, at
  // most kStrongConfirmations over the job (the analyzer names a link from three or four rounds).
  ChangeDetector changes_;
  std::unordered_map<int, bool> changed_nodes_;
  static constexpr int kStrongConfirmations = 3;
  std::unordered_map<int, int> strong_changes_;
  // The newest round found a direction's first strong change (probe_round), and, where that
  // round measured some pairs only, the next confirmation measures every pair.
  bool found_strong_alone_ = false, confirm_every_pair_ = false;
  // Each direction's last transfer time scaled to probe_bytes_, its usual measuring turn (pings
  // and transfers: the last one under kChangeFactor times the usual before it), and what its
  // newest turn took beyond what the share counts of it (SlowTransferExcuses), by the peer host's
  // node.
  std::unordered_map<int, std::uint64_t> last_transfer_ns_, usual_turn_ns_, turn_excess_ns_;
  // What the current round's slow measurements took beyond what the share counts of them (a
  // whole transfer beyond the cap, a slow turn beyond the usual), the excuses each direction has
  // used (by peer node: measured, answered), and the total the members agreed on after each round,
  // which the confirmations' share does not count.
  std::uint64_t round_excess_ns_ = 0, excused_ns_ = 0;
  SlowTransferExcuses excuses_;
  Cost cost_;
  std::vector<char> send_buffer_, receive_buffer_;
  MPI_Request answer_request_ = MPI_REQUEST_NULL;  // the answering side's posted receive
  std::uint64_t began_ = 0;         // the current probe round's start, the rows' at_ns
  std::vector<int> world_leaders_;  // of each host (its lowest world rank)
  int node_ = 0;                    // this rank's host
  bool async_agreed_ = false;       // the asynchronous probes run (on the leaders)
  // On a communicator of some of the job's hosts only, which waited kPartialWaitS longer.
  bool last_round_partial_ = false;
  // This rank's last decision on a communicator of every host (0: none yet).
  std::uint64_t last_full_decision_ns_ = 0;
  std::unique_ptr<AsyncProber> async_;
};

// How a leader measures a direction's throughput. Normally `probe_bytes` in one message, the
// fastest of 1-3. On a direction whose last transfer took kCappedAfterNs or more (at
// `probe_bytes`; a rate-limited or congested link, 20 Mbit/s: 110 ms), once, in chunks of a
// quarter of it, each a round trip, until all are through or kCappedTransferNs has passed: the
// bytes that got through in the time they took still read a limited link hundreds of times
// below a healthy one, at a fifth of the cost. A round that costs the fault's full transfer
// otherwise spends the confirmations' share at once (a rate-limited pipeline at 2 busy loops was
// confirmed 4 s and 11 s after the round that found it, and named 13-23 s after the fault,
// docs/faults.md sweep 36), and the routine rounds' cost bound spaces them 20 s apart. Chunks, not
// one smaller message: a shaper's burst (a token bucket's 64 KB) passes a small message at the
// line's rate, and the first chunks go through it while the later ones meet the rate.
// Only where the transfer was long against the round trip (kLatencyBound times the fastest ping's
// of this turn): over a delayed link a transfer waits a few round trips for TCP's window to
// open, and each chunk then waits as long and more (a 3 ms link: its whole transfer 23 ms, a
// capped one's single chunk 127-171 ms, sweep 36 G).
inline constexpr std::uint64_t kCappedAfterNs = 20'000'000;
inline constexpr std::uint64_t kCappedTransferNs = 20'000'000;
inline constexpr std::uint64_t kLatencyBound = 8;
struct TransferPlan {
  std::uint64_t chunk_bytes = 0;  // the probe's bytes: one message, no cap
  std::uint64_t cap_ns = 0;       // 0: none
};
// `last_ns`: the direction's last transfer time scaled to `probe_bytes` (0: none yet);
// `round_trip_ns`: this turn's fastest ping.
TransferPlan transfer_plan(std::uint64_t probe_bytes, std::uint64_t last_ns,
                           std::uint64_t round_trip_ns);

// The pairs of round `round` of a round-robin tournament of `players` (the circle method): each
// index meets every other exactly once in players - 1 rounds (players rounded up to even; a
// partner >= players is a bye). Returns this index's partner.
int tournament_partner(int players, int round, int index);
// Rounds a tournament of `players` takes.
int tournament_rounds(int players);
// The round in which `a` meets `b` (distinct indices below `players`).
int tournament_round_of(int players, int a, int b);

}  // namespace commtap::probes
