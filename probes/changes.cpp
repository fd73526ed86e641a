#include "probes/changes.hpp"

#include <algorithm>

namespace commtap::probes {

namespace {

bool slower(std::uint64_t now, std::uint64_t fastest) {
  return fastest != UINT64_MAX &&
         static_cast<double>(now) >= kChangeFactor * static_cast<double>(fastest);
}

}  // namespace

bool ChangeDetector::note(int peer_node, std::uint64_t latency_ns, std::uint64_t transfer_ns) {
  History& h = directions_[peer_node];
  bool changed = false;
  if (h.rounds > 0) {
    const auto kept = static_cast<std::ptrdiff_t>(std::min(h.rounds, kKept));
    const auto fastest = [&](const std::array<std::uint64_t, kKept>& before) {
      return *std::min_element(before.begin(), before.begin() + kept);
    };
    changed =
        slower(latency_ns, fastest(h.latency_ns)) || slower(transfer_ns, fastest(h.transfer_ns));
  }
  h.latency_ns[h.rounds % kKept] = latency_ns;
  h.transfer_ns[h.rounds % kKept] = transfer_ns;
  ++h.rounds;
  return changed;
}

bool ChangeDetector::note_against(const Reading& reading, const std::vector<Reading>& others) {
  bool changed = false;
  const auto h = directions_.find(reading.peer_node);
  if (h == directions_.end() || h->second.rounds < kKept) {
    std::uint64_t latency = UINT64_MAX, transfer = UINT64_MAX;  // the others' fastest
    for (const Reading& other : others)
      if (other.peer_node != reading.peer_node) {
        latency = std::min(latency, other.latency_ns);
        transfer = std::min(transfer, other.transfer_ns);
      }
    changed = slower(reading.latency_ns, latency) || slower(reading.transfer_ns, transfer);
  }
  return note(reading.peer_node, reading.latency_ns, reading.transfer_ns) || changed;
}

std::vector<int> ChangeDetector::note_round(const std::vector<Reading>& round) {
  std::vector<int> changed;
  for (const Reading& r : round)
    if (note_against(r, round)) changed.push_back(r.peer_node);
  return changed;
}

}  // namespace commtap::probes
