#include "probes/changes.hpp"

#include <algorithm>

namespace commtap::probes {

namespace {

bool slower(std::uint64_t now, std::uint64_t fastest) {
  return fastest != UINT64_MAX &&
         static_cast<double>(now) >= kChangeFactor * static_cast<double>(fastest);
}

// The change `r` is against the fastest latency and transfer it is compared with.
ChangeDetector::Change change_of(const ChangeDetector::Reading& r, std::uint64_t latency,
                                 std::uint64_t transfer) {
  if (!slower(r.latency_ns, latency) && !slower(r.transfer_ns, transfer))
    return ChangeDetector::Change::none;
  const std::uint64_t latency_network =
      r.latency_network_ns > 0 ? r.latency_network_ns : r.latency_ns;
  const std::uint64_t transfer_network =
      r.transfer_network_ns > 0 ? r.transfer_network_ns : r.transfer_ns;
  const bool strong =
      (latency != UINT64_MAX &&
       static_cast<double>(latency_network) >=
           kStrongLatencyFactor * static_cast<double>(latency) &&
       latency_network >= latency + kStrongLatencyFloorNs) ||
      (transfer != UINT64_MAX && static_cast<double>(transfer_network) >=
                                     kStrongTransferFactor * static_cast<double>(transfer));
  return strong ? ChangeDetector::Change::strong : ChangeDetector::Change::change;
}

}  // namespace

ChangeDetector::Change ChangeDetector::note(const Reading& reading) {
  History& h = directions_[reading.peer_node];
  Change change = Change::none;
  if (h.rounds > 0) {
    const auto kept = static_cast<std::ptrdiff_t>(std::min(h.rounds, kKept));
    const auto fastest = [&](const std::array<std::uint64_t, kKept>& before) {
      return *std::min_element(before.begin(), before.begin() + kept);
    };
    change = change_of(reading, fastest(h.latency_ns), fastest(h.transfer_ns));
  }
  h.latency_ns[h.rounds % kKept] = reading.latency_ns;
  h.transfer_ns[h.rounds % kKept] = reading.transfer_ns;
  ++h.rounds;
  return change;
}

ChangeDetector::Change ChangeDetector::change_against(const Reading& reading,
                                                      const std::vector<Reading>& others) {
  Change change = Change::none;
  const auto h = directions_.find(reading.peer_node);
  if (h == directions_.end() || h->second.rounds < kKept) {
    std::uint64_t latency = UINT64_MAX, transfer = UINT64_MAX;  // the others' fastest
    for (const Reading& other : others)
      if (other.peer_node != reading.peer_node) {
        latency = std::min(latency, other.latency_ns);
        transfer = std::min(transfer, other.transfer_ns);
      }
    change = change_of(reading, latency, transfer);
  }
  return std::max(note(reading), change);
}

std::vector<ChangeDetector::Changed> ChangeDetector::note_round(const std::vector<Reading>& round) {
  std::vector<Changed> changed;
  for (const Reading& r : round)
    if (const Change c = change_against(r, round); c != Change::none)
      changed.push_back({r.peer_node, c == Change::strong});
  return changed;
}

bool PaceWatch::note(std::uint64_t seq, std::uint64_t now_ns) {
  if (window_ns_ == 0 || now_ns <= window_ns_ || seq < window_seq_) {
    restart(seq, now_ns);
    return false;
  }
  const double seconds = static_cast<double>(now_ns - window_ns_) / 1e9;
  if (seconds < kWindowS) return false;
  const double pace = static_cast<double>(seq - window_seq_) / seconds;
  restart(seq, now_ns);
  bool dropped = false;
  if (windows_ >= kKept) {
    std::array<double, kKept> before = paces_;
    std::nth_element(before.begin(), before.begin() + kKept / 2, before.end());
    dropped = pace * kPaceDrop < before[kKept / 2];
  }
  paces_[windows_ % kKept] = pace;
  ++windows_;
  return dropped;
}

}  // namespace commtap::probes
