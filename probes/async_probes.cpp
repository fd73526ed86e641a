#include "probes/async_probes.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "probes/probes.hpp"

namespace commtap::probes {

namespace {

// The leader's time in services and measurements stays under kMaxShare of the job (the
// collective rounds' bound), judged over a second at least.
constexpr std::uint64_t kShareFloorNs = 1'000'000'000;
// Pings per measurement: the tightest (smallest upper bound) is kept; they stop once it is
// narrow (its held times, the window's width, at most half of it or under kNarrowNs: a peer that
// was polling), else go on to kPings (a peer computing between its MPI calls widens them all).
constexpr std::size_t kMinPings = 2, kPings = 6;
constexpr std::uint64_t kNarrowNs = 50'000;
// Transfers: the faster of two, one where the first is this slow (repeating it costs most where
// probing costs most).
constexpr std::size_t kTransfers = 2;
constexpr std::uint64_t kSlowTransferNs = 50'000'000;
// A measurement whose peer does not answer within this long at MPI_Finalize is given up.
constexpr std::uint64_t kFinishLimitNs = 10'000'000'000ull;

std::uint64_t wall_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(t.tv_nsec);
}

std::uint64_t minus(std::uint64_t a, std::uint64_t b) {
  return a > b ? a - b : 0;
}

}  // namespace

void AsyncProber::Gaps::look(std::uint64_t now) {
  if (last_look_ != 0 && now > last_look_ + kGapNs) {
    start_[count_ % kKept] = last_look_;
    end_[count_ % kKept] = now;
    ++count_;
  }
  last_look_ = now;
}

std::uint64_t AsyncProber::Gaps::longest_in(std::uint64_t from, std::uint64_t to,
                                            std::uint64_t floor) const {
  std::uint64_t longest = floor;
  for (std::size_t i = 0; i < std::min(count_, kKept); ++i) {
    const std::uint64_t s = std::max(start_[i], from), e = std::min(end_[i], to);
    if (e > s) longest = std::max(longest, e - s);
  }
  return longest;
}

RoundTripBounds round_trip_bounds(const PingTimes& p) {
  // Each side's own clock only in each difference: the offset cancels.
  const std::uint64_t turn_found = minus(p.replied, p.peer_found);
  const std::uint64_t turn_missed = minus(p.replied, p.peer_last_miss);
  return {minus(minus(p.last_miss_here, p.sent), turn_missed),
          minus(minus(p.found_here, p.sent), turn_found)};
}

std::uint64_t AsyncProber::Ping::upper_ns() const {
  const PingTimes times{sent,           last_miss,       found, reply.last_miss_ns,
                        reply.found_ns, reply.replied_ns};
  return std::max<std::uint64_t>(1, round_trip_bounds(times).upper_ns);
}

AsyncProber::AsyncProber(Layout layout, const LinkProber& collective, RowSink sink)
    : layout_(std::move(layout)), collective_(collective), sink_(std::move(sink)) {
  hosts_ = static_cast<int>(layout_.leaders.size());
  peer_turns_ = PeerTurns(hosts_);
  for (int node = 0; node < hosts_; ++node)
    node_of_leader_[layout_.leaders[static_cast<std::size_t>(node)]] = node;
  // One peer per slot: every pair both ways once per set interval.
  const std::uint64_t slot_ns = std::max<std::uint64_t>(
      1'000'000, layout_.interval_ns / static_cast<std::uint64_t>(tournament_rounds(hosts_)));
  transfer_out_.resize(std::max<std::uint64_t>(layout_.probe_bytes, 16));
  const std::size_t slots =
      std::clamp<std::size_t>(static_cast<std::size_t>(hosts_ - 1), 1, kTransferSlots);
  transfers_.resize(slots);
  transfer_in_.assign(slots, std::vector<char>(transfer_out_.size()));
  reply_requests_.fill(MPI_REQUEST_NULL);
  post(ping_, kPingTag, &ping_in_, 1);
  for (std::size_t i = 0; i < slots; ++i)
    post(transfers_[i], kTransferTag, transfer_in_[i].data(),
         static_cast<int>(transfer_in_[i].size()));
  cost_.since_ns = monitor::now_ns();
  schedule_ = MeasurementSchedule(hosts_, layout_.host, slot_ns, cost_.since_ns, wall_ns());
}

void AsyncProber::post(Watch& watch, int tag, void* buffer, int bytes) {
  watch.last_miss_ns = monitor::now_ns();
  PMPI_Irecv(buffer, bytes, MPI_BYTE, MPI_ANY_SOURCE, tag, layout_.comm, &watch.request);
}

void AsyncProber::send_reply(const Reply& reply, int to_rank) {
  // Replies are small: the library has sent the slot's last one long before it comes round again.
  MPI_Request& request = reply_requests_[next_reply_];
  if (request != MPI_REQUEST_NULL) PMPI_Wait(&request, MPI_STATUS_IGNORE);
  replies_[next_reply_] = reply;
  PMPI_Isend(&replies_[next_reply_], sizeof(Reply), MPI_BYTE, to_rank, kReplyTag, layout_.comm,
             &request);
  next_reply_ = (next_reply_ + 1) % kReplySlots;
}

bool AsyncProber::answer_arrivals(std::uint64_t looked) {
  constexpr std::size_t kWatches = 1 + kTransferSlots;
  std::array<Watch*, kWatches> watches{};
  std::array<MPI_Request, kWatches> requests{};
  std::size_t n = 0;
  watches[n++] = &ping_;
  for (Watch& transfer : transfers_) watches[n++] = &transfer;
  for (std::size_t i = 0; i < n; ++i) requests[i] = watches[i]->request;
  std::array<int, kWatches> indices{};
  std::array<MPI_Status, kWatches> statuses{};
  int count = 0;
  if (PMPI_Testsome(static_cast<int>(n), requests.data(), &count, indices.data(),
                    statuses.data()) != MPI_SUCCESS) {
    for (std::size_t i = 0; i < n; ++i)
      watches[i]->request = MPI_REQUEST_NULL;  // an error: this side stops answering
    return false;
  }
  if (count == MPI_UNDEFINED) return false;  // none posted (each stopped on an error)
  std::array<bool, kWatches> arrived{};
  for (int k = 0; k < count; ++k) arrived[static_cast<std::size_t>(indices[k])] = true;
  for (std::size_t i = 0; i < n; ++i) {
    watches[i]->request = requests[i];  // a completed receive's is MPI_REQUEST_NULL now
    if (!arrived[i] && requests[i] != MPI_REQUEST_NULL) watches[i]->last_miss_ns = looked;
  }
  bool answered = false;
  for (int k = 0; k < count; ++k) {
    const auto i = static_cast<std::size_t>(indices[k]);
    if (i == 0) {
      answered |= answer(ping_, kPingTag, &ping_in_, 1, statuses[k]);
    } else {
      std::vector<char>& in = transfer_in_[i - 1];
      answered |= answer(transfers_[i - 1], kTransferTag, in.data(), static_cast<int>(in.size()),
                         statuses[k]);
    }
  }
  return answered;
}

bool AsyncProber::answer(Watch& watch, int tag, void* buffer, int bytes, const MPI_Status& status) {
  int cancelled = 0;
  PMPI_Test_cancelled(&status, &cancelled);
  if (cancelled) return false;
  Reply reply;
  reply.found_ns = monitor::now_ns();
  const auto asker = node_of_leader_.find(status.MPI_SOURCE);
  if (asker != node_of_leader_.end())
    peer_turns_.answered(asker->second, tag == kPingTag, reply.found_ns);
  reply.last_miss_ns = watch.last_miss_ns;
  reply.held_ns = minus(reply.found_ns, reply.last_miss_ns);
  if (tag == kTransferTag) {
    // The transfer's start on this clock (the sender's estimate, a round trip early): it moved
    // only while both leaders progressed, so its held time is this side's longest gap since.
    std::uint64_t began_here = 0;
    std::memcpy(&began_here, buffer, sizeof began_here);
    if (began_here != 0 && began_here < reply.found_ns)
      reply.held_ns = gaps_.longest_in(began_here, reply.found_ns, reply.held_ns);
  }
  reply.quiet = asker != node_of_leader_.end() && pair_quiet(reply.found_ns, asker->second) ? 1 : 0;
  reply.replied_ns = monitor::now_ns();
  send_reply(reply, status.MPI_SOURCE);
  post(watch, tag, buffer, bytes);
  ++cost_.answers;
  return true;
}

void AsyncProber::note_collective(std::uint64_t at_ns, std::int64_t comm_id) {
  last_collective_ns_[comm_id] = at_ns;
}

bool AsyncProber::pair_quiet(std::uint64_t now, int peer) {
  if (peer < 0 || peer >= hosts_) return false;
  // The latest collective on a communicator that spans the pair (this leader is in each), or
  // that the rounds have not decided on yet (any pair). Communicators quiet for an hour are
  // forgotten: a program that makes a communicator per phase keeps the map small.
  constexpr std::uint64_t kForgetNs = 3600ull * 1'000'000'000ull;
  std::uint64_t latest = 0;
  std::erase_if(last_collective_ns_, [&](const auto& entry) {
    const auto& [comm_id, at_ns] = entry;
    if (minus(now, at_ns) > kForgetNs) return true;
    const std::vector<int>* hosts = collective_.probed_hosts(comm_id);
    if (hosts == nullptr || std::binary_search(hosts->begin(), hosts->end(), peer))
      latest = std::max(latest, at_ns);
    return false;
  });
  return collective_.rounds_quiet(now, latest, peer);
}

void PeerTurns::answered(int node, bool ping, std::uint64_t now) {
  if (node >= 0 && static_cast<std::size_t>(node) < since_.size())
    since_[static_cast<std::size_t>(node)] = ping ? std::max<std::uint64_t>(now, 1) : 0;
}

bool PeerTurns::measuring(int node, std::uint64_t now) const {
  if (node < 0 || static_cast<std::size_t>(node) >= since_.size()) return false;
  const std::uint64_t since = since_[static_cast<std::size_t>(node)];
  return since != 0 && minus(now, since) < kPeerTurnNs;
}

std::uint64_t next_turn_wall(std::uint64_t wall, std::uint64_t slot_ns, int hosts, int host) {
  const auto rounds = static_cast<std::uint64_t>(tournament_rounds(hosts));
  for (std::uint64_t slot = wall / slot_ns;; ++slot) {
    const int partner = tournament_partner(hosts, static_cast<int>(slot % rounds), host);
    const std::uint64_t begins = slot * slot_ns + (partner < host ? slot_ns / 2 : 0);
    if (begins > wall) return begins;
  }
}

MeasurementSchedule::MeasurementSchedule(int hosts, int host, std::uint64_t slot_ns,
                                         std::uint64_t now, std::uint64_t wall)
    : hosts_(hosts), host_(host), slot_ns_(std::max<std::uint64_t>(1, slot_ns)) {
  next_turn_ns_ = now + (next_turn_wall(wall, slot_ns_, hosts_, host_) - wall);
}

MeasurementSchedule::Confirmation* MeasurementSchedule::waiting(int peer) {
  for (Confirmation& c : confirmations_)
    if (c.peer == peer) return &c;
  return nullptr;
}

void MeasurementSchedule::confirm(int peer, std::uint64_t now) {
  const std::uint64_t at = now + static_cast<std::uint64_t>(kConfirmAfterS * 1e9);
  if (Confirmation* c = waiting(peer))
    c->at_ns = at;
  else
    confirmations_.push_back({peer, at});
}

std::optional<MeasurementSchedule::Due> MeasurementSchedule::take(std::uint64_t now,
                                                                  std::uint64_t wall,
                                                                  bool turn_allowed,
                                                                  bool confirm_allowed,
                                                                  const PeerTurns& peers) {
  const auto first = std::min_element(
      confirmations_.begin(), confirmations_.end(),
      [](const Confirmation& a, const Confirmation& b) { return a.at_ns < b.at_ns; });
  if (confirm_allowed && first != confirmations_.end() && now >= first->at_ns) {
    if (peers.measuring(first->peer, now)) {
      first->at_ns = now + kPeerWaitNs;
      return std::nullopt;
    }
    const Due due{first->peer, true};
    confirmations_.erase(first);  // its result says whether to go on confirming
    return due;
  }
  if (!turn_allowed || now < next_turn_ns_ || hosts_ < 2) return std::nullopt;
  const auto rounds = static_cast<std::uint64_t>(tournament_rounds(hosts_));
  const int peer = tournament_partner(hosts_, static_cast<int>((wall / slot_ns_) % rounds), host_);
  if (peers.measuring(peer, now)) {
    next_turn_ns_ = now + kPeerWaitNs;
    return std::nullopt;
  }
  next_turn_ns_ = now + (next_turn_wall(wall, slot_ns_, hosts_, host_) - wall);
  if (peer < 0 || peer >= hosts_ || peer == host_ || waiting(peer) != nullptr) return std::nullopt;
  return Due{peer, false};
}

void AsyncProber::send_next(bool transfer) {
  m_.stage = transfer ? Measurement::Stage::transfer : Measurement::Stage::ping;
  const int peer_rank = layout_.leaders[static_cast<std::size_t>(m_.peer)];
  PMPI_Irecv(&m_.reply_in, sizeof(Reply), MPI_BYTE, peer_rank, kReplyTag, layout_.comm,
             &m_.reply.request);
  if (transfer) {
    // Its start on the peer's clock, from the tightest ping (NTP's offset, off by at most half
    // its window): one window earlier, so that the peer's held time can only come out longer.
    const Ping& best =
        *std::min_element(m_.pings.begin(), m_.pings.end(),
                          [](const Ping& a, const Ping& b) { return a.upper_ns() < b.upper_ns(); });
    const auto offset = (static_cast<std::int64_t>(best.reply.found_ns - best.sent) +
                         static_cast<std::int64_t>(best.reply.replied_ns - best.found)) /
                        2;
    const std::uint64_t window = minus(best.found, best.sent);
    m_.sent = monitor::now_ns();
    const std::uint64_t there = minus(static_cast<std::uint64_t>(m_.sent + offset), window);
    std::memcpy(transfer_out_.data(), &there, sizeof there);
    PMPI_Isend(transfer_out_.data(), static_cast<int>(transfer_out_.size()), MPI_BYTE, peer_rank,
               kTransferTag, layout_.comm, &m_.send);
  } else {
    m_.sent = monitor::now_ns();
    PMPI_Isend(&ping_out_, 1, MPI_BYTE, peer_rank, kPingTag, layout_.comm, &m_.send);
  }
  m_.reply.last_miss_ns = m_.sent;
}

bool AsyncProber::start_measurement(std::uint64_t now, int peer) {
  if (!pair_quiet(now, peer)) return false;  // the rounds measure it
  m_.peer = peer;
  m_.began = now;
  m_.pings.clear();
  m_.transfers.clear();
  m_.transfer_held.clear();
  send_next(false);
  return true;
}

bool AsyncProber::advance_measurement(std::uint64_t looked) {
  if (m_.stage == Measurement::Stage::idle) return false;
  int done = 0;
  if (PMPI_Test(&m_.reply.request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
    m_ = Measurement{};  // an error: given up
    return true;
  }
  if (!done) {
    m_.reply.last_miss_ns = looked;
    return false;
  }
  const std::uint64_t found = monitor::now_ns();
  PMPI_Wait(&m_.send, MPI_STATUS_IGNORE);  // the reply says the peer has it
  const Ping p{m_.sent, found, m_.reply.last_miss_ns, m_.reply_in};
  if (p.reply.quiet == 0) {  // the peer's collective rounds run: the pair is left to them
    m_ = Measurement{};
    return true;
  }
  if (m_.stage == Measurement::Stage::ping) {
    m_.pings.push_back(p);
    const Ping& tightest =
        *std::min_element(m_.pings.begin(), m_.pings.end(),
                          [](const Ping& a, const Ping& b) { return a.upper_ns() < b.upper_ns(); });
    const std::uint64_t width = minus(tightest.found, tightest.last_miss) +
                                minus(tightest.reply.found_ns, tightest.reply.last_miss_ns);
    const bool narrow = width <= kNarrowNs || 2 * width <= tightest.upper_ns();
    const bool more = m_.pings.size() < kMinPings || (m_.pings.size() < kPings && !narrow);
    send_next(!more);
    return true;
  }
  m_.transfers.push_back(p);
  // This side's held time: its longest gap between looks while the transfer was under way.
  m_.transfer_held.push_back(gaps_.longest_in(p.sent, found, minus(found, p.last_miss)));
  if (m_.transfers.size() < kTransfers && p.upper_ns() < kSlowTransferNs)
    send_next(true);
  else
    finish_measurement();
  return true;
}

void AsyncProber::finish_measurement() {
  std::size_t tightest = 0;
  std::uint64_t widest = 0;
  for (std::size_t i = 0; i < m_.pings.size(); ++i) {
    if (m_.pings[i].upper_ns() < m_.pings[tightest].upper_ns()) tightest = i;
    widest = std::max(widest, m_.pings[i].upper_ns());
  }
  const Ping& best = m_.pings[tightest];
  const std::uint64_t rtt = best.upper_ns();
  const auto offset = (static_cast<std::int64_t>(best.reply.found_ns - best.sent) +
                       static_cast<std::int64_t>(best.reply.replied_ns - best.found)) /
                      2;
  // A one-way leg less the peer's held time: what the network took at least. The analyzer's
  // stalled-transfer rule reads these legs without the held columns, and a peer that computed
  // 100 ms between its MPI calls must not read as a retransmission stall.
  auto there = [&](std::uint64_t sent_here, std::uint64_t found_there, std::uint64_t held_there) {
    return static_cast<std::uint64_t>(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(found_there - sent_here) - offset -
                                      static_cast<std::int64_t>(held_there)));
  };
  std::uint64_t slowest_there = 1;
  for (const Ping& ping : m_.pings)
    slowest_there = std::max(
        slowest_there,
        there(ping.sent, ping.reply.found_ns, minus(ping.reply.found_ns, ping.reply.last_miss_ns)));
  const std::string& from = layout_.host_names[static_cast<std::size_t>(layout_.host)];
  const std::string& to = layout_.host_names[static_cast<std::size_t>(m_.peer)];
  std::vector<monitor::ProbeRow> rows(2);
  monitor::ProbeRow& latency = rows[0];
  latency = {m_.began,
             layout_.host,
             m_.peer,
             from,
             to,
             1,
             std::max<std::uint64_t>(1, rtt / 2),
             best.sent,
             best.reply.found_ns,
             best.reply.replied_ns,
             best.found,
             std::max<std::uint64_t>(1, widest / 2),
             slowest_there};
  latency.asynchronous = true;
  latency.from_held_ns = minus(best.found, best.last_miss);
  latency.to_held_ns = minus(best.reply.found_ns, best.reply.last_miss_ns);
  // A transfer: from its send to the reply that says the peer had it all, less the reply's half
  // round trip (the tightest ping's).
  std::size_t quickest = 0;
  std::uint64_t slowest = 0, slowest_data = 1;
  for (std::size_t i = 0; i < m_.transfers.size(); ++i) {
    if (m_.transfers[i].upper_ns() < m_.transfers[quickest].upper_ns()) quickest = i;
    slowest = std::max(slowest, m_.transfers[i].upper_ns());
    slowest_data = std::max(
        slowest_data,
        there(m_.transfers[i].sent, m_.transfers[i].reply.found_ns, m_.transfers[i].reply.held_ns));
  }
  const Ping& fast = m_.transfers[quickest];
  // The reply's way back: half the tightest ping's lower bound, the network's round trip at
  // least (its upper bound holds the leaders' held times, which would be taken from the transfer
  // twice; a wide window there once left a 256 KiB transfer at 0.3 us).
  const PingTimes times{best.sent,           best.last_miss,
                        best.found,          best.reply.last_miss_ns,
                        best.reply.found_ns, best.reply.replied_ns};
  const std::uint64_t ack = round_trip_bounds(times).lower_ns / 2;
  auto less_ack = [&](std::uint64_t ns) {
    return std::max<std::uint64_t>(1, ns > 2 * ack ? ns - ack : ns / 2);
  };
  monitor::ProbeRow& transfer = rows[1];
  transfer = {
      m_.began, layout_.host, m_.peer, from, to, transfer_out_.size(), less_ack(fast.upper_ns())};
  transfer.asynchronous = true;
  transfer.slowest_ns = less_ack(slowest);
  transfer.slowest_oneway_ns = slowest_data;
  transfer.from_held_ns = m_.transfer_held[quickest];
  transfer.to_held_ns = fast.reply.held_ns;
  ++cost_.measurements;
  const ChangeDetector::Reading reading{m_.peer, latency.ns, transfer.ns};
  if (changes_.note_against(reading, latest_)) {
    // Not sooner, even where this leader's next turn with the peer comes first: a burst of time
    // off the CPU slows every measurement within it, and the analyzer counts a pair's
    // measurements less than a second apart as one observation (a turn half a slot later, 0.4 s
    // at 4 hosts, had been the confirmation).
    schedule_.confirm(m_.peer, monitor::now_ns());
  }
  std::erase_if(latest_, [&](const ChangeDetector::Reading& r) { return r.peer_node == m_.peer; });
  latest_.push_back(reading);
  m_ = Measurement{};
  sink_(std::move(rows));
}

void AsyncProber::service(std::uint64_t now, bool at_entry) {
  if (in_service_) return;
  in_service_ = true;
  gaps_.look(now);
  bool worked = answer_arrivals(now);
  worked |= advance_measurement(now);
  const std::uint64_t elapsed = std::max(kShareFloorNs, minus(now, cost_.since_ns));
  const bool over = static_cast<double>(cost_.spent_ns) > kMaxShare * static_cast<double>(elapsed);
  if (m_.stage == Measurement::Stage::idle && measuring_allowed_ &&
      now >= schedule_.next_due_ns()) {
    // A confirmation within its share, else a turn within the bound.
    const bool confirm_allowed =
        static_cast<double>(cost_.spent_ns) <= kConfirmShare * static_cast<double>(elapsed);
    if (const auto due = schedule_.take(now, wall_ns(), !over, confirm_allowed, peer_turns_))
      worked |= start_measurement(now, due->peer);
  }
  const std::uint64_t end = monitor::now_ns();
  if (at_entry || worked) cost_.spent_ns += minus(end, now);
  if (at_entry) entry_service_ns_.fetch_add(minus(end, now), std::memory_order_relaxed);
  // Over the bound, the entry services are spaced out (answers come later, and the held times
  // say so); back under it, they come closer again.
  entry_period_ns_ = over ? std::min(kSlowestEntryNs, 2 * entry_period_ns_)
                          : std::max(kEntryNs, entry_period_ns_ / 2);
  next_entry_ns_ = end + entry_period_ns_;
  next_blocked_ns_ = end + kBlockedNs;
  in_service_ = false;
}

void AsyncProber::finish_measuring() {
  measuring_allowed_ = false;
  const std::uint64_t began = monitor::now_ns();
  while (m_.stage != Measurement::Stage::idle) {
    const std::uint64_t now = monitor::now_ns();
    if (now > began + kFinishLimitNs) {
      // A peer that never answers (gone): the reply's receive is cancelled, the send left to the
      // library.
      PMPI_Cancel(&m_.reply.request);
      PMPI_Wait(&m_.reply.request, MPI_STATUS_IGNORE);
      if (m_.send != MPI_REQUEST_NULL) PMPI_Request_free(&m_.send);
      m_ = Measurement{};
      break;
    }
    service(now, false);
    sched_yield();
  }
}

void AsyncProber::finish_with_barrier(MPI_Request& barrier) {
  for (;;) {
    int done = 0;
    if (PMPI_Test(&barrier, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) break;
    service(monitor::now_ns(), false);
    sched_yield();
  }
  // Every leader has finished measuring: nothing more comes to the posted receives.
  std::vector<Watch*> watches = {&ping_};
  for (Watch& transfer : transfers_) watches.push_back(&transfer);
  for (Watch* watch : watches) {
    if (watch->request == MPI_REQUEST_NULL) continue;
    PMPI_Cancel(&watch->request);
    PMPI_Wait(&watch->request, MPI_STATUS_IGNORE);
  }
  for (MPI_Request& request : reply_requests_)
    if (request != MPI_REQUEST_NULL) PMPI_Wait(&request, MPI_STATUS_IGNORE);
}

}  // namespace commtap::probes
