#include "probes/probes.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "monitor/clock.hpp"
#include "world/world.hpp"

namespace commtap::probes {

int tournament_rounds(int players) {
  return players < 2 ? 0 : players + players % 2 - 1;
}

int tournament_partner(int players, int round, int index) {
  const int n = players + players % 2;  // a bye makes it even
  if (index == n - 1) return round;
  if (index == round) return n - 1;
  return ((2 * round - index) % (n - 1) + (n - 1)) % (n - 1);
}

namespace {

// Probing takes at most this share of the time between two probes, judged on the cheapest of the
// last three rounds: a link that just became slow makes its transfers long, and the rounds that
// confirm it (the analyzer needs 2-3) still come at the set interval; a lasting fault then spaces
// them out so that the bound holds again.
constexpr double kMaxShare = 0.005;
// A round that measured a direction this many times slower than its fastest of the rounds before
// (latency or transfer) found a change: a fault the analyzer needs two rounds or more to name
// (docs/analyzer.md), which the bound would otherwise put 20-40 s apart on a loaded machine
// (rounds of 100-200 ms). The next round then comes at the set interval, for as long as rounds
// keep finding a change and everything spent on probes since the first rounds (rounds and
// decisions) stays under kConfirmShare of the time since: a noisy machine that keeps finding
// changes pays at most that share, a quiet one the bound's.
constexpr double kChangeFactor = 4;
constexpr double kConfirmShare = 0.02;
// A communicator asks again at least this often: the rate of its collectives that a rank turns
// seconds into sequence numbers with is a past one, and a job that speeds up would otherwise be
// probed late.
constexpr double kMaxDecisionStepS = 1.0;
// A communicator whose members are on some of the job's hosts only waits this much longer than
// the interval, so that one on all of them (the world's collectives, a Cartesian communicator
// of every rank), which asks at least every kMaxDecisionStepS, gets the rounds where both are
// used, and the pairs between the smaller ones' hosts are probed too.
constexpr double kPartialWaitS = 2 * kMaxDecisionStepS;
// The fastest of several: noise (a descheduled rank, other traffic) only ever adds time.
constexpr int kPings = 5;
constexpr int kTransfers = 3;
// ... except on a link so slow that noise cannot explain it (a busy node stalls a transfer for
// up to ~25 ms, seen on 2 loaded cores): one transfer says enough, and repeating it would
// triple the cost where probing costs most.
constexpr std::uint64_t kSlowTransferNs = 50'000'000;
// Each communicator's messages on the private communicator carry tags of their own (decisions,
// probes, leaving), below MPI's guaranteed MPI_TAG_UB of 32767 and apart from the collectives
// module's calibration tag (0x7ca1).
constexpr int kTagBase = 0x3000;
constexpr std::uint64_t kTagSlots = 4096;
constexpr int kDecideTag = 0, kProbeTag = 1, kLeaveTag = 2;

// A ping's reply: when the peer leader received the ping and sent the reply, on its clock.
struct PeerTimes {
  std::uint64_t received_ns, replied_ns;
};

}  // namespace

LinkProber::LinkProber(MPI_Comm comm, const world::NodeLayout& layout,
                       const ProbeSettings& settings, bool thread_multiple) {
  interval_ns_ = static_cast<std::uint64_t>(settings.probe_interval) * 1'000'000'000ull;
  probe_bytes_ = static_cast<std::uint64_t>(settings.probe_bytes);
  hosts_ = layout.nodes;
  // Every rank has the same layout: all return here, or none.
  if (interval_ns_ == 0 || hosts_ < 2) return;
  // Shared with commtap's other agreements, which use its collectives (and the collectives
  // module's calibration at MPI_Init, its own tag); the probes use point-to-point only.
  comm_ = comm;
  PMPI_Comm_size(comm_, &world_size_);
  // Every rank learns every world rank's host, so that each member of any communicator can
  // tell its hosts and their first members from the membership alone ...
  node_of_rank_.resize(static_cast<std::size_t>(world_size_));
  int mine = layout.node_index;
  MPI_Request request = MPI_REQUEST_NULL;
  PMPI_Iallgather(&mine, 1, MPI_INT, node_of_rank_.data(), 1, MPI_INT, comm_, &request);
  world::wait_all(1, &request, true);
  int any_multiple = 0, multiple = thread_multiple ? 1 : 0;
  PMPI_Iallreduce(&multiple, &any_multiple, 1, MPI_INT, MPI_MAX, comm_, &request);
  world::wait_all(1, &request, true);
  world_only_ = any_multiple != 0;
  // ... and every host's name, for the rows: the leaders gather them, and each tells its host.
  constexpr int kName = 256;
  char name[kName] = {};
  ::gethostname(name, kName - 1);
  std::vector<char> names(static_cast<std::size_t>(hosts_) * kName);
  if (layout.leaders != MPI_COMM_NULL) {
    PMPI_Iallgather(name, kName, MPI_CHAR, names.data(), kName, MPI_CHAR, layout.leaders, &request);
    world::wait_all(1, &request, true);
  }
  PMPI_Ibcast(names.data(), static_cast<int>(names.size()), MPI_CHAR, 0, layout.node, &request);
  world::wait_all(1, &request, true);
  for (int h = 0; h < hosts_; ++h)
    host_names_.emplace_back(&names[static_cast<std::size_t>(h) * kName]);
  cost_.since_ns = monitor::now_ns();
  buffer_.resize(probe_bytes_);
}

LinkProber::Schedule* LinkProber::schedule_of(const Members& comm) {
  if (auto found = schedules_.find(comm.id); found != schedules_.end()) return found->second.get();
  auto s = std::make_unique<Schedule>();
  if (comm.world_ranks == nullptr || comm.world_ranks->empty()) {
    s->members.resize(static_cast<std::size_t>(comm.size));
    for (int r = 0; r < comm.size; ++r) s->members[static_cast<std::size_t>(r)] = r;
  } else {
    s->members = *comm.world_ranks;
  }
  if (static_cast<int>(s->members.size()) != comm.size || comm.rank < 0 || comm.rank >= comm.size)
    return nullptr;
  for (int member : s->members)
    if (member < 0 || member >= world_size_) return nullptr;  // a spawned process: not ours
  std::vector<int> hosts;
  for (int member : s->members) hosts.push_back(node_of_rank_[static_cast<std::size_t>(member)]);
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  if (hosts.size() < 2) return nullptr;
  s->hosts = hosts;
  s->leaders.assign(hosts.size(), -1);
  // Each host's member of the lowest rank in the communicator measures for it.
  for (int member : s->members) {
    const auto h =
        static_cast<std::size_t>(std::lower_bound(hosts.begin(), hosts.end(),
                                                  node_of_rank_[static_cast<std::size_t>(member)]) -
                                 hosts.begin());
    if (s->leaders[h] < 0) s->leaders[h] = member;
  }
  const int me = s->members[static_cast<std::size_t>(comm.rank)];
  s->host = static_cast<int>(
      std::lower_bound(hosts.begin(), hosts.end(), node_of_rank_[static_cast<std::size_t>(me)]) -
      hosts.begin());
  s->leader = s->leaders[static_cast<std::size_t>(s->host)] == me;
  s->tag = kTagBase + 4 * static_cast<int>(static_cast<std::uint64_t>(comm.id) % kTagSlots);
  s->last_decision_ns = cost_.since_ns;
  return schedules_.emplace(comm.id, std::move(s)).first->second.get();
}

bool LinkProber::can_probe(const Members& comm) {
  return interval_ns_ != 0 && hosts_ >= 2 && (comm.id == 1 || !world_only_) &&
         schedule_of(comm) != nullptr;
}

void LinkProber::all_max(const Schedule& s, int rank, std::uint64_t* values, int count, int tag) {
  const int n = static_cast<int>(s.members.size());
  std::array<std::uint64_t, 4> in{};
  char none_out = 0, none_in = 0;
  for (int k = 1; k < n; k <<= 1) {
    const int to = s.members[static_cast<std::size_t>((rank + k) % n)];
    const int from = s.members[static_cast<std::size_t>(((rank - k) % n + n) % n)];
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (count > 0) {
      PMPI_Irecv(in.data(), count, MPI_UINT64_T, from, tag, comm_, &requests[0]);
      PMPI_Isend(values, count, MPI_UINT64_T, to, tag, comm_, &requests[1]);
    } else {
      PMPI_Irecv(&none_in, 0, MPI_BYTE, from, tag, comm_, &requests[0]);
      PMPI_Isend(&none_out, 0, MPI_BYTE, to, tag, comm_, &requests[1]);
    }
    world::wait_all(2, requests, true);
    for (int i = 0; i < count; ++i)
      values[i] = std::max(values[i], in[static_cast<std::size_t>(i)]);
  }
}

std::uint64_t LinkProber::after_collective(const Members& comm, std::uint64_t seq,
                                           std::vector<monitor::ProbeRow>& rows) {
  Schedule* s = schedule_of(comm);
  if (s == nullptr) return kNever;
  const std::uint64_t entered = monitor::now_ns();
  // Each member says whether it may probe now: the interval has passed since its last round on
  // any communicator (grown so that the last rounds' time is at most kMaxShare of it; longer
  // for a communicator on some hosts only), and when it would ask again: that many seconds of
  // this communicator's collectives at their recent rate; and whether its newest round found a
  // change, and whether it may confirm one now. One all-reduce (the maximum of "not yet", the
  // minimum of the next seq, the maximum of "changed" and of "may not confirm") carries all four,
  // so every member agrees.
  ProbeBudget budget;
  budget.set_interval_s = static_cast<double>(interval_ns_) / 1e9;
  budget.cheapest_round_s = *std::min_element(recent_rounds_s_.begin(), recent_rounds_s_.end());
  budget.partial_wait_s = static_cast<int>(s->hosts.size()) < hosts_ ? kPartialWaitS : 0.0;
  budget.since_round_s = last_round_end_ns_ == 0
                             ? std::numeric_limits<double>::infinity()
                             : static_cast<double>(entered - last_round_end_ns_) / 1e9;
  if (cost_.rounds >= kRoundsKept) {
    budget.spent_since_first_s =
        static_cast<double>(cost_.probing_ns + cost_.deciding_ns - first_rounds_spent_ns_) / 1e9;
    budget.since_first_s = static_cast<double>(entered - first_rounds_end_ns_) / 1e9;
  }
  const RoundsDue due = rounds_due(budget);
  const double elapsed_s = std::max(1e-9, static_cast<double>(entered - s->last_decision_ns) / 1e9);
  const double per_s = static_cast<double>(seq - s->last_decision_seq) / elapsed_s;
  const double wait_s = std::min(
      kMaxDecisionStepS,
      due.routine ? due.interval_s : due.interval_s + budget.partial_wait_s - budget.since_round_s);
  const std::uint64_t proposal =
      seq + static_cast<std::uint64_t>(std::clamp(wait_s * per_s, 1.0, 1e12));
  std::uint64_t decision[4] = {due.routine ? 0u : 1u, UINT64_MAX - proposal, changed_ ? 1u : 0u,
                               due.confirm ? 0u : 1u};
  all_max(*s, comm.rank, decision, 4, s->tag + kDecideTag);
  const std::uint64_t next = UINT64_MAX - decision[1];
  s->last_decision_seq = seq;
  s->last_decision_ns = entered;
  const std::uint64_t decided = monitor::now_ns();
  cost_.deciding_ns += monitor::elapsed_ns(entered, decided);
  const bool confirm = decision[2] != 0 && decision[3] == 0;
  if (decision[0] != 0 && !confirm) return next;
  changed_ = false;
  if (s->leader) rows = probe_round(*s);
  // Everyone leaves together: members that were not probing would otherwise reach the next
  // collective ahead of their leaders, and the leaders would look late.
  all_max(*s, comm.rank, nullptr, 0, s->tag + kLeaveTag);
  last_round_end_ns_ = monitor::now_ns();
  ++cost_.rounds;
  cost_.probing_ns += monitor::elapsed_ns(decided, last_round_end_ns_);
  // The first rounds come at the interval whatever they cost (the bound has no cheapest of
  // three yet); the confirmations' share is counted from their end. Every member counts them,
  // leader or not, so all agree when.
  if (cost_.rounds == kRoundsKept) {
    first_rounds_end_ns_ = last_round_end_ns_;
    first_rounds_spent_ns_ = cost_.probing_ns + cost_.deciding_ns;
  }
  return next;
}

RoundsDue rounds_due(const ProbeBudget& b) {
  RoundsDue due;
  due.interval_s = std::max(b.set_interval_s, b.cheapest_round_s / kMaxShare);
  due.routine = b.since_round_s >= due.interval_s + b.partial_wait_s;
  due.confirm = b.since_first_s > 0 && b.since_round_s >= b.set_interval_s + b.partial_wait_s &&
                b.spent_since_first_s <= kConfirmShare * b.since_first_s;
  return due;
}

bool ChangeDetector::note(int peer_node, std::uint64_t latency_ns, std::uint64_t transfer_ns) {
  History& h = directions_[peer_node];
  bool changed = false;
  if (h.rounds > 0) {
    const auto kept = static_cast<std::ptrdiff_t>(std::min(h.rounds, kKept));
    auto slower = [&](std::uint64_t now, const std::array<std::uint64_t, kKept>& before) {
      const std::uint64_t fastest = *std::min_element(before.begin(), before.begin() + kept);
      return static_cast<double>(now) >= kChangeFactor * static_cast<double>(fastest);
    };
    changed = slower(latency_ns, h.latency_ns) || slower(transfer_ns, h.transfer_ns);
  }
  h.latency_ns[h.rounds % kKept] = latency_ns;
  h.transfer_ns[h.rounds % kKept] = transfer_ns;
  ++h.rounds;
  return changed;
}

std::vector<monitor::ProbeRow> LinkProber::probe_round(const Schedule& s) {
  began_ = monitor::now_ns();
  std::vector<monitor::ProbeRow> rows;
  const int hosts = static_cast<int>(s.hosts.size());
  const int tag = s.tag + kProbeTag;
  for (int round = 0; round < tournament_rounds(hosts); ++round) {
    const int peer = tournament_partner(hosts, round, s.host);
    if (peer >= hosts) continue;  // a bye
    const int peer_rank = s.leaders[static_cast<std::size_t>(peer)];
    const bool first = s.host < peer;
    // Both leaders are here before anything is timed: one still held by its previous pair (whose
    // link stalled) would otherwise make this pair's first round trip look stalled too.
    char here_out = 0, here_in = 0;
    exchange(&here_out, 1, &here_in, 1, peer_rank, tag);
    // Each side, in turn, measures its own direction: round trips of one byte for latency
    // (the fastest, halved), then `probe_bytes_` timed from a ready signal to the receiver's
    // acknowledgement, less the acknowledgement's half round trip.
    monitor::ProbeRow latency_row, transfer_row;
    std::uint64_t slowest_back = 0;  // the longest one-way leg from the peer seen here
    for (int turn = 0; turn < 2; ++turn) {
      const bool measuring = (turn == 0) == first;
      if (measuring)
        measure(s, peer, latency_row, transfer_row, slowest_back);
      else
        answer(peer_rank, tag);
    }
    // What each side saw come back from the other is the other's direction: swapped, and kept
    // in the latency row of the direction it crossed.
    std::uint64_t slowest_there = 0;
    exchange(&slowest_back, sizeof slowest_back, &slowest_there, sizeof slowest_there, peer_rank,
             tag);
    latency_row.slowest_oneway_ns = std::max(latency_row.slowest_oneway_ns, slowest_there);
    changed_ |=
        changes_.note(s.hosts[static_cast<std::size_t>(peer)], latency_row.ns, transfer_row.ns);
    rows.push_back(std::move(latency_row));
    rows.push_back(std::move(transfer_row));
  }
  // The round's time for the bound, as the leaders measure it (the others only wait for them,
  // and say "not yet" on the interval alone).
  recent_rounds_s_[rounds_done_++ % kRoundsKept] =
      static_cast<double>(monitor::elapsed_ns(began_, monitor::now_ns())) / 1e9;
  return rows;
}

void LinkProber::exchange(void* out, int out_bytes, void* in, int in_bytes, int peer_rank,
                          int tag) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (in != nullptr) PMPI_Irecv(in, in_bytes, MPI_BYTE, peer_rank, tag, comm_, &requests[0]);
  if (out != nullptr) PMPI_Isend(out, out_bytes, MPI_BYTE, peer_rank, tag, comm_, &requests[1]);
  world::wait_all(2, requests, true);
}

void LinkProber::measure(const Schedule& s, int peer, monitor::ProbeRow& latency,
                         monitor::ProbeRow& transfer, std::uint64_t& slowest_back) {
  const int peer_rank = s.leaders[static_cast<std::size_t>(peer)];
  const int tag = s.tag + kProbeTag;
  char byte = 0;
  struct Ping {
    std::uint64_t sent, peer_received, peer_replied, received;
  };
  std::array<Ping, kPings> pings{};
  std::size_t fastest = 0;
  for (std::size_t i = 0; i < pings.size(); ++i) {
    Ping& ping = pings[i];
    PeerTimes far{};
    ping.sent = monitor::now_ns();
    exchange(&byte, 1, &far, sizeof far, peer_rank, tag);
    ping.received = monitor::now_ns();
    ping.peer_received = far.received_ns;
    ping.peer_replied = far.replied_ns;
    if (monitor::elapsed_ns(ping.sent, ping.received) <
        monitor::elapsed_ns(pings[fastest].sent, pings[fastest].received))
      fastest = i;
  }
  // The peer's clock less this one's, from the fastest round trip (NTP's estimate: off by at
  // most half of it): it splits every round trip into its two one-way legs.
  const Ping& best = pings[fastest];
  const std::int64_t offset = (static_cast<std::int64_t>(best.peer_received - best.sent) +
                               static_cast<std::int64_t>(best.peer_replied - best.received)) /
                              2;
  // A leg is 1 ns at least: one the offset's error makes negative (a fastest round trip whose
  // way there waited 1.4 ms for a descheduled peer and whose way back took 70 us puts the offset
  // 0.65 ms off) is still measured, and 0 is the rows' "not recorded".
  auto there = [&](std::uint64_t sent_here, std::uint64_t received_there) {
    return static_cast<std::uint64_t>(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(received_there - sent_here) - offset));
  };
  auto back = [&](std::uint64_t sent_there, std::uint64_t received_here) {
    return static_cast<std::uint64_t>(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(received_here - sent_there) + offset));
  };
  const std::uint64_t best_rtt = monitor::elapsed_ns(best.sent, best.received);
  std::uint64_t worst_rtt = 0, slowest_there = 0;
  for (const Ping& ping : pings) {
    worst_rtt = std::max(worst_rtt, monitor::elapsed_ns(ping.sent, ping.received));
    slowest_there = std::max(slowest_there, there(ping.sent, ping.peer_received));
    slowest_back = std::max(slowest_back, back(ping.peer_replied, ping.received));
  }
  std::uint64_t fastest_transfer = UINT64_MAX, worst_transfer = 0, slowest_data = 0;
  for (int i = 0; i < kTransfers; ++i) {
    exchange(nullptr, 0, &byte, 1, peer_rank, tag);  // the peer's receive is posted
    const std::uint64_t t0 = monitor::now_ns();
    exchange(buffer_.data(), static_cast<int>(buffer_.size()), nullptr, 0, peer_rank, tag);
    std::uint64_t peer_had_all = 0;  // ... and complete, at this on the peer's clock
    exchange(nullptr, 0, &peer_had_all, sizeof peer_had_all, peer_rank, tag);
    const std::uint64_t t1 = monitor::now_ns();
    const std::uint64_t took = monitor::elapsed_ns(t0, t1);
    fastest_transfer = std::min(fastest_transfer, took);
    worst_transfer = std::max(worst_transfer, took);
    slowest_data = std::max(slowest_data, there(t0, peer_had_all));
    slowest_back = std::max(slowest_back, back(peer_had_all, t1));
    char slow = fastest_transfer > kSlowTransferNs ? 1 : 0;
    exchange(&slow, 1, nullptr, 0, peer_rank, tag);  // the peer repeats alike
    if (slow) break;
  }
  // Numbered and named by the job's hosts, whichever communicator's members measured.
  const int from_node = s.hosts[static_cast<std::size_t>(s.host)];
  const int to_node = s.hosts[static_cast<std::size_t>(peer)];
  const std::string& from = host_names_[static_cast<std::size_t>(from_node)];
  const std::string& to = host_names_[static_cast<std::size_t>(to_node)];
  latency = {began_,
             from_node,
             to_node,
             from,
             to,
             1,
             best_rtt / 2,
             best.sent,
             best.peer_received,
             best.peer_replied,
             best.received,
             worst_rtt / 2,
             slowest_there};
  auto less_ack = [&](std::uint64_t ns) { return ns > best_rtt / 2 ? ns - best_rtt / 2 : ns; };
  transfer = {began_, from_node, to_node, from, to, buffer_.size(), less_ack(fastest_transfer)};
  transfer.slowest_ns = less_ack(worst_transfer);
  transfer.slowest_oneway_ns = slowest_data;
}

void LinkProber::answer(int peer_rank, int tag) {
  char byte = 0;
  for (int i = 0; i < kPings; ++i) {
    exchange(nullptr, 0, &byte, 1, peer_rank, tag);  // the ping, then its reply with the times
    PeerTimes far{monitor::now_ns(), 0};
    far.replied_ns = monitor::now_ns();
    exchange(&far, sizeof far, nullptr, 0, peer_rank, tag);
  }
  // Posts the large receive before saying ready, so the transfer is not held up by it.
  for (int i = 0; i < kTransfers; ++i) {
    MPI_Request large = MPI_REQUEST_NULL;
    PMPI_Irecv(buffer_.data(), static_cast<int>(buffer_.size()), MPI_BYTE, peer_rank, tag, comm_,
               &large);
    exchange(&byte, 1, nullptr, 0, peer_rank, tag);
    world::wait_all(1, &large, true);
    std::uint64_t had_all = monitor::now_ns();
    exchange(&had_all, sizeof had_all, nullptr, 0, peer_rank, tag);
    char slow = 0;
    exchange(nullptr, 0, &slow, 1, peer_rank, tag);
    if (slow) break;
  }
}

}  // namespace commtap::probes
