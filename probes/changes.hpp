// Changes a leader's link measurements find, and the confirming measurements they earn: shared
// by the collective rounds (probes.hpp) and the asynchronous probes (async_probes.hpp).
//
// A measurement that found a change (a link or a host that just became slow, which the analyzer
// names from two to four measurements of it) is measured again kConfirmAfterS later instead of
// at the set interval, while probing costs at most kConfirmShare of the time since it began: a
// noisy machine that keeps finding changes pays at most that share, a quiet one the 0.5% bound's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace commtap::probes {

inline constexpr double kChangeFactor = 4;
// A strong change: the network part of a measurement (its time less what its messages may have
// waited off the CPU for either leader, as the analyzer reads it) far past the direction's
// fastest. A latency kStrongLatencyFactor times it and kStrongLatencyFloorNs more, or a transfer
// kStrongTransferFactor times it. On 2 loaded cores the noise's changes are a leader held off
// the CPU (latencies of 0.2-1.4 ms whose held time is as long) and transfers held mid-way, which
// the held times do not see (5-28 times their fastest; the analyzer's worst over 8,812 clean
// transfers was 64 times under its baseline); a 2 ms link reads 200 times its fastest latency, a
// 20 Mbit/s limit 800 times its fastest transfer (docs/faults.md, sweeps 36-37).
inline constexpr double kStrongLatencyFactor = 16;
inline constexpr std::uint64_t kStrongLatencyFloorNs = 200'000;
inline constexpr double kStrongTransferFactor = 200;
inline constexpr double kConfirmShare = 0.02;
inline constexpr double kConfirmAfterS = 1.0;

// A leader's record of the directions it measures (by the peer host's node): a measurement is a
// change where its latency or its transfer is kChangeFactor times its fastest of the direction's
// last three measurements, or slower.
class ChangeDetector {
 public:
  struct Reading {
    int peer_node = 0;
    std::uint64_t latency_ns = 0, transfer_ns = 0;
    // Their network parts (0: not known, the whole time).
    std::uint64_t latency_network_ns = 0, transfer_network_ns = 0;
  };
  enum class Change { none, change, strong };
  Change note(const Reading& reading);
  // Also a change, while the direction has fewer than three measurements (no history shows a
  // fault that was there from the job's first round), where its latency or its transfer is
  // kChangeFactor times the fastest of `others` (the leader's other directions, as last
  // measured), or slower.
  bool note_against(const Reading& reading, const std::vector<Reading>& others) {
    return change_against(reading, others) != Change::none;
  }
  Change change_against(const Reading& reading, const std::vector<Reading>& others);
  // One round's measurements of this leader's directions, each against the others: the
  // directions that changed, by peer node.
  struct Changed {
    int peer_node = 0;
    bool strong = false;
  };
  std::vector<Changed> note_round(const std::vector<Reading>& round);

 private:
  static constexpr std::size_t kKept = 3;
  struct History {
    std::array<std::uint64_t, kKept> latency_ns{}, transfer_ns{};
    std::size_t rounds = 0;
  };
  std::unordered_map<int, History> directions_;
};

// A communicator's pace, as one member sees it: its collectives per second between decision
// points. A fault that slows the program (a host's network, a link, a rank's CPU) slows its pace
// at once, while the routine rounds, spaced by the cost bound, may be 10-40 s away on a loaded
// machine (a parameter server of Scatter and Gather only, 4 hosts at 2 busy loops: rounds 15 s
// apart, its host's 5 ms delay first measured 13 s after it began, docs/faults.md sweep 45).
// A pace kPaceDrop times slower than the median of the kept ones before it (a window of at
// least kWindowS) earns a round of every pair, as a change does: over 2,755 one-second windows of
// 24 clean runs of 8 programs at 2 busy loops the worst was 1.15 times slower than the median
// of the five before, while 38 of 54 fault runs of sweeps 38-44 had a window 1.4-14 times
// slower. A lasting slowdown is slower than the median for its first three windows, so it earns
// three such rounds at most, like a change; a program whose phases differ in pace pays for a
// round at each slower phase, within the confirmations' share.
class PaceWatch {
 public:
  static constexpr double kPaceDrop = 1.3;
  static constexpr double kWindowS = 0.5;
  // At a decision point, the communicator's collective `seq` at monotonic `now_ns`: whether its
  // pace since the window began dropped. A window shorter than kWindowS is not judged yet (false).
  bool note(std::uint64_t seq, std::uint64_t now_ns);
  // A new window from here: after a round, whose time is not the program's.
  void restart(std::uint64_t seq, std::uint64_t now_ns) {
    window_seq_ = seq;
    window_ns_ = now_ns;
  }

 private:
  static constexpr std::size_t kKept = 5;
  std::array<double, kKept> paces_{};  // collectives per second, of the newest windows
  std::size_t windows_ = 0;
  std::uint64_t window_seq_ = 0, window_ns_ = 0;  // 0 ns: none begun
};

}  // namespace commtap::probes
