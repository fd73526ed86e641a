#include "probes/probes.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

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

// The first decision comes early, so that rank 0 can learn how often world collectives come.
constexpr std::uint64_t kFirstDecision = 16;
// Probing takes at most this share of the time between two probes, judged on the cheapest of the
// last three rounds: a link that just became slow makes its transfers long, and the rounds that
// confirm it (the analyzer needs 2-3) still come at the set interval; a lasting fault then spaces
// them out so that the bound holds again.
constexpr double kMaxShare = 0.005;
// Rank 0 asks again at least this often: the rate of world collectives it turns seconds into
// sequence numbers with is a past one, and a job that speeds up would otherwise be probed late.
constexpr double kMaxDecisionStepS = 1.0;
// The fastest of several: noise (a descheduled rank, other traffic) only ever adds time.
constexpr int kPings = 5;
constexpr int kTransfers = 3;
// ... except on a link so slow that noise cannot explain it (a busy node stalls a transfer for
// up to ~25 ms, seen on 2 loaded cores): one transfer says enough, and repeating it would
// triple the cost where probing costs most.
constexpr std::uint64_t kSlowTransferNs = 50'000'000;
constexpr int kTag = 11;

// A ping's reply: when the peer leader received the ping and sent the reply, on its clock.
struct PeerTimes {
  std::uint64_t received_ns, replied_ns;
};

}  // namespace

LinkProber::LinkProber(MPI_Comm comm, const world::NodeLayout& layout,
                       const ProbeSettings& settings) {
  interval_ns_ = static_cast<std::uint64_t>(settings.probe_interval) * 1'000'000'000ull;
  probe_bytes_ = static_cast<std::uint64_t>(settings.probe_bytes);
  if (interval_ns_ == 0) return;
  // Shared with commtap's other agreements, which never run at the same time as a decision.
  comm_ = comm;
  PMPI_Comm_rank(comm_, &rank_);
  leaders_ = layout.leaders;
  hosts_ = layout.nodes;
  host_index_ = layout.node_index;
  if (leaders_ != MPI_COMM_NULL) {
    // Every leader learns every host's name, for the rows.
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    std::vector<char> names(static_cast<std::size_t>(hosts_) * sizeof name);
    PMPI_Allgather(name, sizeof name, MPI_CHAR, names.data(), sizeof name, MPI_CHAR, leaders_);
    for (int h = 0; h < hosts_; ++h)
      host_names_.emplace_back(&names[static_cast<std::size_t>(h) * sizeof name]);
  }
  if (hosts_ < 2) return;  // nothing to probe: next_decision_seq_ stays 0
  next_decision_seq_.store(kFirstDecision, std::memory_order_relaxed);
  cost_.since_ns = monitor::now_ns();
  // The first decision probes (a baseline early, also for short jobs); then the interval.
  last_decision_ns_ = monitor::now_ns();
  last_probe_end_ns_ = 0;
  buffer_.resize(probe_bytes_);
}

std::vector<monitor::ProbeRow> LinkProber::after_world_collective(std::uint64_t seq) {
  if (seq != next_decision_seq()) return {};
  const std::uint64_t entered = monitor::now_ns();
  // Rank 0 decides: probe when the interval has passed (grown so that the last round's time is
  // at most kMaxShare of it), and asks again when that many seconds of world collectives at
  // their recent rate have gone by. One broadcast carries both, so every rank agrees.
  std::uint64_t decision[2] = {0, 0};  // probe now, next seq to decide at
  if (rank_ == 0) {
    const std::uint64_t now = monitor::now_ns();
    const double cheapest_s = *std::min_element(recent_rounds_s_.begin(), recent_rounds_s_.end());
    const double interval_s =
        std::max(static_cast<double>(interval_ns_) / 1e9, cheapest_s / kMaxShare);
    const double since_probe_s =
        last_probe_end_ns_ == 0 ? interval_s : static_cast<double>(now - last_probe_end_ns_) / 1e9;
    decision[0] = since_probe_s >= interval_s ? 1 : 0;
    const double elapsed_s = std::max(1e-9, static_cast<double>(now - last_decision_ns_) / 1e9);
    const double per_s = static_cast<double>(seq - last_decision_seq_) / elapsed_s;
    const double wait_s =
        std::min(kMaxDecisionStepS, decision[0] ? interval_s : interval_s - since_probe_s);
    decision[1] = seq + static_cast<std::uint64_t>(std::clamp(wait_s * per_s, 1.0, 1e12));
    last_decision_seq_ = seq;
    last_decision_ns_ = now;
  }
  MPI_Request told = MPI_REQUEST_NULL;  // yielding: oversubscribed ranks must not spin here
  PMPI_Ibcast(decision, 2, MPI_UINT64_T, 0, comm_, &told);
  world::wait_all(1, &told, true);
  next_decision_seq_.store(decision[1], std::memory_order_relaxed);
  const std::uint64_t decided = monitor::now_ns();
  cost_.deciding_ns += monitor::elapsed_ns(entered, decided);
  if (decision[0] == 0) return {};
  std::vector<monitor::ProbeRow> rows;
  if (leaders_ != MPI_COMM_NULL) rows = probe_round();
  // Everyone leaves together: ranks that were not probing would otherwise reach the next
  // collective ahead of their leaders, and the leaders would look late.
  MPI_Request all_done = MPI_REQUEST_NULL;
  PMPI_Ibarrier(comm_, &all_done);
  world::wait_all(1, &all_done, true);
  if (rank_ == 0) last_probe_end_ns_ = monitor::now_ns();
  ++cost_.rounds;
  cost_.probing_ns += monitor::elapsed_ns(decided, monitor::now_ns());
  return rows;
}

std::vector<monitor::ProbeRow> LinkProber::probe_round() {
  began_ = monitor::now_ns();
  std::vector<monitor::ProbeRow> rows;
  for (int round = 0; round < tournament_rounds(hosts_); ++round) {
    const int peer = tournament_partner(hosts_, round, host_index_);
    if (peer >= hosts_) continue;  // a bye
    const bool first = host_index_ < peer;
    // Both leaders are here before anything is timed: one still held by its previous pair (whose
    // link stalled) would otherwise make this pair's first round trip look stalled too.
    char here_out = 0, here_in = 0;
    exchange(&here_out, 1, &here_in, 1, peer);
    // Each side, in turn, measures its own direction: round trips of one byte for latency
    // (the fastest, halved), then `probe_bytes_` timed from a ready signal to the receiver's
    // acknowledgement, less the acknowledgement's half round trip.
    monitor::ProbeRow latency_row, transfer_row;
    std::uint64_t slowest_back = 0;  // the longest one-way leg from the peer seen here
    for (int turn = 0; turn < 2; ++turn) {
      const bool measuring = (turn == 0) == first;
      if (measuring)
        measure(peer, latency_row, transfer_row, slowest_back);
      else
        answer(peer);
    }
    // What each side saw come back from the other is the other's direction: swapped, and kept
    // in the latency row of the direction it crossed.
    std::uint64_t slowest_there = 0;
    exchange(&slowest_back, sizeof slowest_back, &slowest_there, sizeof slowest_there, peer);
    latency_row.slowest_oneway_ns = std::max(latency_row.slowest_oneway_ns, slowest_there);
    rows.push_back(std::move(latency_row));
    rows.push_back(std::move(transfer_row));
  }
  recent_rounds_s_[rounds_done_++ % kRoundsKept] =
      static_cast<double>(monitor::elapsed_ns(began_, monitor::now_ns())) / 1e9;
  return rows;
}

void LinkProber::exchange(void* out, int out_bytes, void* in, int in_bytes, int peer) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (in != nullptr) PMPI_Irecv(in, in_bytes, MPI_BYTE, peer, kTag, leaders_, &requests[0]);
  if (out != nullptr) PMPI_Isend(out, out_bytes, MPI_BYTE, peer, kTag, leaders_, &requests[1]);
  world::wait_all(2, requests, true);
}

void LinkProber::measure(int peer, monitor::ProbeRow& latency, monitor::ProbeRow& transfer,
                         std::uint64_t& slowest_back) {
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
    exchange(&byte, 1, &far, sizeof far, peer);
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
  auto there = [&](std::uint64_t sent_here, std::uint64_t received_there) {
    return static_cast<std::uint64_t>(
        std::max<std::int64_t>(0, static_cast<std::int64_t>(received_there - sent_here) - offset));
  };
  auto back = [&](std::uint64_t sent_there, std::uint64_t received_here) {
    return static_cast<std::uint64_t>(
        std::max<std::int64_t>(0, static_cast<std::int64_t>(received_here - sent_there) + offset));
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
    exchange(nullptr, 0, &byte, 1, peer);  // the peer's receive is posted
    const std::uint64_t t0 = monitor::now_ns();
    exchange(buffer_.data(), static_cast<int>(buffer_.size()), nullptr, 0, peer);
    std::uint64_t peer_had_all = 0;  // ... and complete, at this on the peer's clock
    exchange(nullptr, 0, &peer_had_all, sizeof peer_had_all, peer);
    const std::uint64_t t1 = monitor::now_ns();
    const std::uint64_t took = monitor::elapsed_ns(t0, t1);
    fastest_transfer = std::min(fastest_transfer, took);
    worst_transfer = std::max(worst_transfer, took);
    slowest_data = std::max(slowest_data, there(t0, peer_had_all));
    slowest_back = std::max(slowest_back, back(peer_had_all, t1));
    char slow = fastest_transfer > kSlowTransferNs ? 1 : 0;
    exchange(&slow, 1, nullptr, 0, peer);  // the peer repeats alike
    if (slow) break;
  }
  const std::string& from = host_names_[static_cast<std::size_t>(host_index_)];
  const std::string& to = host_names_[static_cast<std::size_t>(peer)];
  latency = {began_,
             host_index_,
             peer,
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
  transfer = {began_, host_index_, peer, from, to, buffer_.size(), less_ack(fastest_transfer)};
  transfer.slowest_ns = less_ack(worst_transfer);
  transfer.slowest_oneway_ns = slowest_data;
}

void LinkProber::answer(int peer) {
  char byte = 0;
  for (int i = 0; i < kPings; ++i) {
    exchange(nullptr, 0, &byte, 1, peer);  // the ping, then its reply with the times
    PeerTimes far{monitor::now_ns(), 0};
    far.replied_ns = monitor::now_ns();
    exchange(&far, sizeof far, nullptr, 0, peer);
  }
  // Posts the large receive before saying ready, so the transfer is not held up by it.
  for (int i = 0; i < kTransfers; ++i) {
    MPI_Request large = MPI_REQUEST_NULL;
    PMPI_Irecv(buffer_.data(), static_cast<int>(buffer_.size()), MPI_BYTE, peer, kTag, leaders_,
               &large);
    exchange(&byte, 1, nullptr, 0, peer);
    world::wait_all(1, &large, true);
    std::uint64_t had_all = monitor::now_ns();
    exchange(&had_all, sizeof had_all, nullptr, 0, peer);
    char slow = 0;
    exchange(nullptr, 0, &slow, 1, peer);
    if (slow) break;
  }
}

}  // namespace commtap::probes
