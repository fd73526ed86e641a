// Asynchronous link probes: for the host pairs (or stretches of jobs) where the collective
// prober (probes.hpp) has no round, because the program calls no blocking collective on a
// communicator of two hosts or more (NPB CG and MG: point-to-point only in their timed loops), or
// none on a communicator that spans the pair (a pipeline's input stage split off the model
// stages' communicator). Each host's leader keeps receives posted on commtap's private
// communicator, from any source: a ping, and transfers (COMMTAP_PROBE_BYTES) from up to
// kTransferSlots peers at once. Wherever it polls (at the entry of intercepted MPI calls,
// at most once per kEntryNs; inside the polling loops of blocking point-to-point calls,
// interpose/yield.cpp) it answers what came: when it found the message, when it last found it
// not there, when it replied. When due, it sends pings and transfers to this round's peer (the
// tournament schedule by the round number of its own wall clock: no agreement is needed, since
// the peer answers whenever it polls; the pair's lower host in the slot's first half, the higher
// in its second) and goes on; the replies are picked up by the same polling.
//
// The network's round trip of a ping lies between
//   (last_miss_here - sent) - (replied - peer_last_miss)   and
//   (found_here - sent)     - (replied - peer_found),
// the clocks' offset cancelling. Rows take the upper bound (halved for latency), with
// from_held_ns = found_here - last_miss_here and to_held_ns = peer_found - peer_last_miss: the
// width of the window, what the probes table's held columns mean for the collective rounds too
// (the analyzer's network estimate, ns less the held times, is the lower bound). A transfer's
// held times are the longest gap between either leader's looks while it was under way (a
// rendezvous transfer moves only while both progress).
//
// Cost: the leader's time in these services and measurements is kept under kMaxShare (0.5%) of
// the job: measurements are skipped and the entry services spaced out while it is over. A
// measurement that found a change (changes.hpp: against the direction's last three, or, in its
// first three, against this leader's other directions as last measured) is measured again
// kConfirmAfterS later, out of turn, while the cost is under kConfirmShare (2%).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "monitor/clock.hpp"
#include "monitor/trace_schema.hpp"
#include "probes/changes.hpp"

namespace commtap::probes {

// The share of a rank's time that link probing may take, collective rounds and asynchronous
// measurements alike (docs/schema.md, probes).
inline constexpr double kMaxShare = 0.005;

class LinkProber;

// One asynchronous ping (or transfer) as both leaders saw it: when this leader sent it, last
// found the reply not there and found it, on its clock; when the peer last found the message
// not there, found it and replied, on the peer's. The network's round trip lies within the
// bounds, whatever the clocks' offset: the lower one takes both leaders' last misses, the upper
// their finds (upper - lower is the two held times).
struct PingTimes {
  std::uint64_t sent = 0, last_miss_here = 0, found_here = 0;
  std::uint64_t peer_last_miss = 0, peer_found = 0, replied = 0;
};
struct RoundTripBounds {
  std::uint64_t lower_ns = 0, upper_ns = 0;  // lower: 0 where the windows allow no more
};
RoundTripBounds round_trip_bounds(const PingTimes& ping);

// The wall clock at which `host`'s next turn to measure begins after `wall`: slots of `slot_ns`
// go round the tournament's rounds, and of a slot's pair the lower host measures from the slot's
// start, the higher from its middle: a pair's two directions are not measured at once (under a
// rate limit one side's transfer queues the other's replies, and both directions read slow).
std::uint64_t next_turn_wall(std::uint64_t wall, std::uint64_t slot_ns, int hosts, int host);

// Which peers are measuring this leader's way: a peer whose pings this leader answered and whose
// transfer it has not yet is in the middle of its measurement, for up to kPeerTurnNs. Measured at
// once, under a rate limit this side's reply waits behind the peer's transfer on the limited
// direction and this direction reads as slow (NPB CG, 20 Mbit/s ctap2 -> ctap3: confirmations of
// ctap3 -> ctap2 at 110-127 ms against 6-9 ms, docs/faults.md sweep 36), so a measurement
// toward it waits (AsyncProber::start_measurement). Two leaders that start at the same moment,
// before either answered the other, still measure at once.
class PeerTurns {
 public:
  static constexpr std::uint64_t kPeerTurnNs = 1'000'000'000;
  explicit PeerTurns(int hosts = 0) : since_(static_cast<std::size_t>(hosts), 0) {}
  // This leader answered a ping (else a transfer) from `node` at `now`.
  void answered(int node, bool ping, std::uint64_t now);
  bool measuring(int node, std::uint64_t now) const;

 private:
  std::vector<std::uint64_t> since_;  // per node: its last ping answered (0: its turn is over)
};

// Which direction a leader measures, and when: its turns (next_turn_wall: one peer a slot, each
// direction once a set interval) and the confirmations of the changes it found (kConfirmAfterS
// after each, at most one waiting per peer). A confirmation stands in for its own peer's turns
// meanwhile, never another's: one noisy direction confirmed again and again had taken every turn
// of its leader, whose other directions went unmeasured for seconds (a split pipeline's input
// stage on 2 loaded cores: one of them never, in a job of 4 s).
class MeasurementSchedule {
 public:
  // A measurement toward a peer that is measuring this way (PeerTurns) waits this long.
  static constexpr std::uint64_t kPeerWaitNs = 20'000'000;
  MeasurementSchedule() = default;
  // The first turn after monotonic `now`, which is `wall` on the wall clock.
  MeasurementSchedule(int hosts, int host, std::uint64_t slot_ns, std::uint64_t now,
                      std::uint64_t wall);
  struct Due {
    int peer = -1;  // a node
    bool confirmation = false;
  };
  // The measurement due at monotonic `now` (`wall`), taken off the schedule: the earliest
  // confirmation due, where `confirm_allowed`, else this leader's turn, where `turn_allowed`. A
  // turn is skipped where its peer's confirmation waits (none sooner than that), or where it is a
  // bye; either waits kPeerWaitNs while its peer measures this way.
  std::optional<Due> take(std::uint64_t now, std::uint64_t wall, bool turn_allowed,
                          bool confirm_allowed, const PeerTurns& peers);
  // A change found toward `peer` at `now`: measured again kConfirmAfterS later.
  void confirm(int peer, std::uint64_t now);
  // Monotonic ns before which nothing is due (take returns nothing).
  std::uint64_t next_due_ns() const {
    std::uint64_t due = next_turn_ns_;
    for (const Confirmation& c : confirmations_) due = std::min(due, c.at_ns);
    return due;
  }

 private:
  struct Confirmation {
    int peer = -1;
    std::uint64_t at_ns = 0;  // due (monotonic)
  };
  Confirmation* waiting(int peer);
  int hosts_ = 0, host_ = 0;
  std::uint64_t slot_ns_ = 1, next_turn_ns_ = 0;
  std::vector<Confirmation> confirmations_;
};

class AsyncProber {
 public:
  struct Layout {
    MPI_Comm comm = MPI_COMM_NULL;  // the prober's private communicator (world ranks)
    int host = 0;                   // this leader's host (node number)
    std::vector<int> leaders;       // world rank of each host's leader, by node
    std::vector<std::string> host_names;
    std::uint64_t interval_ns = 0;  // COMMTAP_PROBE_INTERVAL
    std::uint64_t probe_bytes = 0;
  };
  // Where finished measurements go (two rows per measured direction).
  using RowSink = std::function<void(std::vector<monitor::ProbeRow>&&)>;
  // Posts the receives. `collective` says whether its rounds have gone quiet.
  AsyncProber(Layout layout, const LinkProber& collective, RowSink sink);
  AsyncProber(const AsyncProber&) = delete;
  AsyncProber& operator=(const AsyncProber&) = delete;

  // Tags on the private communicator: above the collective rounds' (0x3000 + 4 x 4096) and apart
  // from the collectives module's calibration tag (0x7ca1).
  static constexpr int kPingTag = 0x7100, kTransferTag = 0x7101, kReplyTag = 0x7102;

  // At the entry of an intercepted call: a clock read, and the service at most once per
  // entry period (kEntryNs; longer while over the cost bound).
  void at_call_entry() {
    const std::uint64_t now = monitor::now_ns();
    if (now >= next_entry_ns_) service(now, true);
  }
  // Inside a blocking call's polling loop: at most once per kBlockedNs. The call waits anyway,
  // so only services that answered or measured something are counted as cost.
  void while_blocked() {
    const std::uint64_t now = monitor::now_ns();
    if (now >= next_blocked_ns_) service(now, false);
  }
  // After a blocking collective on communicator `comm_id`, which the collective rounds probe
  // (or may, before its first decision point): no measurement of a pair it spans (every pair,
  // before that point) starts until a collective interval has passed without one
  // (LinkProber::rounds_quiet).
  void note_collective(std::uint64_t at_ns, std::int64_t comm_id);
  // Before MPI_Finalize, on leaders: starts no more measurements and completes the one under way
  // (answering meanwhile); the caller then meets every rank (finish_with_barrier) before the
  // receives are cancelled.
  void finish_measuring();
  // Polls `barrier` (every rank's, after their finish_measuring) to completion while answering,
  // then cancels and completes the posted receives: no ping can be under way any more.
  void finish_with_barrier(MPI_Request& barrier);

  // What the asynchronous probes cost this leader (COMMTAP_VERBOSE reports it).
  struct Cost {
    std::uint64_t measurements = 0, answers = 0, spent_ns = 0, since_ns = 0;
  };
  Cost cost() const { return cost_; }
  // Of that, the services at a call's entry so far: outside the program's MPI calls, which the
  // analyzer does not count as the rank's own work (heartbeats.measuring_ns). Any thread.
  std::uint64_t entry_service_ns() const {
    return entry_service_ns_.load(std::memory_order_relaxed);
  }

  static constexpr std::uint64_t kEntryNs = 50'000, kBlockedNs = 20'000;
  static constexpr std::uint64_t kSlowestEntryNs = 5'000'000;

 private:
  struct Reply {
    std::uint64_t found_ns = 0, last_miss_ns = 0, replied_ns = 0, held_ns = 0;
    // Whether the answering leader leaves the pair to its collective rounds (pair_quiet): a
    // pair is measured here only where neither leader's rounds measure it.
    std::uint64_t quiet = 0;
  };
  // A message this leader polls for (one of its posted receives, or a reply it waits for).
  struct Watch {
    MPI_Request request = MPI_REQUEST_NULL;
    std::uint64_t last_miss_ns = 0;
  };
  // The gaps between this leader's looks longer than kGapNs, newest last (a ring).
  class Gaps {
   public:
    void look(std::uint64_t now);
    // The longest stretch of [from, to] that fell in one gap (at least `floor`).
    std::uint64_t longest_in(std::uint64_t from, std::uint64_t to, std::uint64_t floor) const;

   private:
    static constexpr std::uint64_t kGapNs = 100'000;
    static constexpr std::size_t kKept = 64;
    std::array<std::uint64_t, kKept> start_{}, end_{};
    std::size_t count_ = 0;
    std::uint64_t last_look_ = 0;
  };
  // One measurement of the direction to `peer` (a node): pings, then transfers.
  struct Ping {
    std::uint64_t sent = 0, found = 0, last_miss = 0;
    Reply reply;
    std::uint64_t upper_ns() const;
  };
  struct Measurement {
    int peer = -1;
    enum class Stage { idle, ping, transfer } stage = Stage::idle;
    std::uint64_t began = 0, sent = 0;
    std::vector<Ping> pings;
    std::vector<Ping> transfers;
    std::vector<std::uint64_t> transfer_held;  // this leader's, of each transfer
    MPI_Request send = MPI_REQUEST_NULL;
    Watch reply;
    Reply reply_in;
  };

  void service(std::uint64_t now, bool at_entry);
  // Answers what arrived on the posted receives (the ping's and the transfers'), reposting each,
  // and marks those still waiting as missed at `looked`. One PMPI_Testsome over them all: each
  // test is a turn of the library's progress engine, and a service comes at every intercepted
  // call's entry (at most once per kEntryNs). Returns whether it answered any.
  bool answer_arrivals(std::uint64_t looked);
  // Answers the ping or transfer that arrived on `watch` (`status`), reposting it.
  bool answer(Watch& watch, int tag, void* buffer, int bytes, const MPI_Status& status);
  void post(Watch& watch, int tag, void* buffer, int bytes);
  void send_reply(const Reply& reply, int to_rank);
  bool advance_measurement(std::uint64_t looked);
  // Starts a measurement of the direction to `peer` (a node) where its pair is not the rounds'
  // (pair_quiet); whether it did.
  bool start_measurement(std::uint64_t now, int peer);
  void send_next(bool transfer);
  void finish_measurement();

  Layout layout_;
  const LinkProber& collective_;
  // Per communicator (id): note_collective's last on it. O(1) per collective; pair_quiet reads
  // which of them span a pair (the communicators a program calls collectives on are few).
  std::unordered_map<std::int64_t, std::uint64_t> last_collective_ns_;
  std::unordered_map<int, int> node_of_leader_;  // world rank -> node, of the hosts' leaders
  PeerTurns peer_turns_;
  MeasurementSchedule schedule_;
  // Whether the pair with `peer` (a node) is left to the collective rounds now.
  bool pair_quiet(std::uint64_t now, int peer);
  RowSink sink_;
  int hosts_ = 0;
  bool in_service_ = false, measuring_allowed_ = true;
  std::uint64_t next_entry_ns_ = 0, next_blocked_ns_ = 0, entry_period_ns_ = kEntryNs;
  Watch ping_;
  char ping_in_ = 0, ping_out_ = 0;
  // Transfers are received into several buffers at once: behind one receive, a transfer from a
  // peer over a slow link (a 20 Mbit/s limit: 230 ms for 256 KiB) held every other peer's until
  // it was in, so they read as slow too and the receiver's host as the fault (NPB CG with
  // ctap1 -> ctap2 rate-limited: ctap3 -> ctap2 at 140-250 ms against 0.2-0.6 ms; docs/faults.md,
  // sweep 40). A leader is measured by one peer in turn, and by peers confirming a change out of
  // turn besides.
  static constexpr std::size_t kTransferSlots = 4;
  std::vector<Watch> transfers_;
  std::vector<std::vector<char>> transfer_in_;
  std::vector<char> transfer_out_;
  // Replies in flight (small: each completes as soon as the library sends it).
  static constexpr std::size_t kReplySlots = 8;
  std::array<Reply, kReplySlots> replies_{};
  std::array<MPI_Request, kReplySlots> reply_requests_{};
  std::size_t next_reply_ = 0;
  Measurement m_;
  Gaps gaps_;
  Cost cost_;
  std::atomic<std::uint64_t> entry_service_ns_{0};
  ChangeDetector changes_;
  std::vector<ChangeDetector::Reading> latest_;  // each direction's newest measurement
};

}  // namespace commtap::probes
