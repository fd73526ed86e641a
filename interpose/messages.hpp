// Per-pair message numbers for point-to-point transfers: the n-th message a rank sends to a peer
// with a tag on a communicator is the n-th that the peer receives from it with that tag, because
// MPI does not let messages of one (sender, receiver, communicator, tag) overtake each other.
// Both sides count, so (comm id, sender, receiver, tag, n) names one message job-wide and the
// analyzer can join the sender's and the receiver's records of it; sampling on n makes both sides
// record the same messages.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace commtap::interpose {

class MessageCounters {
 public:
  enum class Direction : std::uint64_t { send = 1, recv = 2 };

  MessageCounters() : slots_(std::make_unique<Slot[]>(kSlots)) {}

  // The number of this message of the pair (1, 2, ...), or 0 when the table is full and the
  // pair cannot be counted (its messages are then not recorded). `concurrent`: other threads may
  // count at the same time (MPI_THREAD_MULTIPLE); otherwise MPI calls are serialized and a plain
  // increment is enough.
  std::uint64_t next(std::int64_t comm_id, int peer, int tag, Direction direction,
                     bool concurrent) {
    const std::uint64_t key = key_of(comm_id, peer, tag, direction);
    for (std::size_t probe = 0; probe < kProbes; ++probe) {
      Slot& slot = slots_[(key + probe) & (kSlots - 1)];
      std::uint64_t found = slot.key.load(std::memory_order_acquire);
      if (found == 0 &&
          slot.key.compare_exchange_strong(found, key, std::memory_order_acq_rel) /* claimed */)
        found = key;
      if (found == key) {
        if (concurrent) return slot.count.fetch_add(1, std::memory_order_relaxed) + 1;
        const std::uint64_t n = slot.count.load(std::memory_order_relaxed) + 1;
        slot.count.store(n, std::memory_order_relaxed);
        return n;
      }
    }
    full_.store(true, std::memory_order_relaxed);
    return 0;
  }
  bool full() const { return full_.load(std::memory_order_relaxed); }

 private:
  // 64K pairs per rank (1 MiB): a rank talking to more (peer, tag, communicator) combinations
  // than that records the first ones only.
  static constexpr std::size_t kSlots = std::size_t{1} << 16;
  static constexpr std::size_t kProbes = 32;
  struct Slot {
    std::atomic<std::uint64_t> key{0};  // 0: free; a 64-bit hash of the pair stands for it
    std::atomic<std::uint64_t> count{0};
  };

  static std::uint64_t key_of(std::int64_t comm_id, int peer, int tag, Direction direction) {
    std::uint64_t x = static_cast<std::uint64_t>(comm_id) * 0x9E3779B97F4A7C15ull;
    x ^= (static_cast<std::uint64_t>(static_cast<std::uint32_t>(peer)) << 32 |
          static_cast<std::uint32_t>(tag)) +
         0x632BE59BD9B4E019ull + (x << 6) + (x >> 2);
    x ^= static_cast<std::uint64_t>(direction) * 0x94D049BB133111EBull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x | 1;
  }

  std::unique_ptr<Slot[]> slots_;
  std::atomic<bool> full_{false};
};

}  // namespace commtap::interpose
