// nccl/event_pool: the profiler plugin's handles and slot pools, apart from what the events mean
// (profiler_events.cpp). NCCL holds a plugin's handles across threads and may hand one back
// after the work it named is finished, so a handle is an integer naming a slot and the slot's
// generation, never a pointer; slots live in fixed pools, taken without locks and reused round
// robin, so an event costs a few atomic loads and stores and never allocates.
#pragma once

#include <atomic>
#include <cstdint>

namespace commtap::nccl::profiler::event_pool {

inline constexpr auto kRelaxed = std::memory_order_relaxed;
inline constexpr auto kAcquire = std::memory_order_acquire;
inline constexpr auto kRelease = std::memory_order_release;

// ---- Handles ------------------------------------------------------------------------------
// A handle is an integer, never a pointer NCCL could see freed: bits 0-2 its kind, 3-4 flags,
// 5-20 a pool slot's index, 21-63 the slot's generation when the handle was made. A P2p handle
// carries its message instead (bits 5-63) and names no slot.
enum class Kind : std::uint64_t { none = 0, coll = 1, kernel_ch = 2, p2p = 3, op = 4, step = 5 };
constexpr int kIndexShift = 5;
constexpr int kGenShift = 21;
constexpr std::uint64_t kGenMask = (std::uint64_t{1} << (64 - kGenShift)) - 1;
constexpr std::uint64_t kFlagA = 1u << 3;  // step: first of its op; p2p: a send
constexpr std::uint64_t kFlagB = 1u << 4;  // step: last of its op; p2p: sampled

inline void* encode(Kind kind, std::uint32_t index, std::uint64_t gen, std::uint64_t flags = 0) {
  return reinterpret_cast<void*>(static_cast<std::uint64_t>(kind) | flags |
                                 std::uint64_t{index} << kIndexShift |
                                 (gen & kGenMask) << kGenShift);
}
struct Decoded {
  Kind kind = Kind::none;
  std::uint64_t flags = 0;
  std::uint32_t index = 0;
  std::uint64_t gen = 0;
};
inline Decoded decode(const void* handle) {
  const auto bits = reinterpret_cast<std::uint64_t>(handle);
  return {static_cast<Kind>(bits & 7), bits & (kFlagA | kFlagB),
          static_cast<std::uint32_t>(bits >> kIndexShift) & 0xffff, bits >> kGenShift};
}
inline void* encode_p2p(std::uint64_t msg, bool send, bool sampled) {
  return reinterpret_cast<void*>(static_cast<std::uint64_t>(Kind::p2p) | (send ? kFlagA : 0) |
                                 (sampled ? kFlagB : 0) | msg << kIndexShift);
}
inline std::uint64_t p2p_msg(const void* handle) {
  return reinterpret_cast<std::uint64_t>(handle) >> kIndexShift;
}

// Raises `value` to at least `to` (any thread).
inline void raise_to(std::atomic<std::uint64_t>& value, std::uint64_t to) {
  std::uint64_t seen = value.load(kRelaxed);
  while (seen < to && !value.compare_exchange_weak(seen, to, kRelaxed)) {
  }
}

// ---- Pools --------------------------------------------------------------------------------
// Every slot starts with `word` = generation << 1 | busy. Fields are relaxed atomics: a slot is
// filled before its handle is returned to NCCL (whose own queues order that before the
// children's events on other threads), and the countdown of a collective (acq_rel) orders what
// its channels wrote before its completion; the atomics only keep a late event on a reused
// slot from being undefined behavior (it fails the generation check, or at worst miscounts).
template <typename Slot, std::uint32_t N>
struct Pool {
  static_assert((N & (N - 1)) == 0 && N <= 0x10000);
  Slot slots[N];
  std::atomic<std::uint32_t> cursor{0};
  std::atomic<std::uint64_t> dropped{0};

  // Takes a free slot, or a busy one `reusable` says is finished with, trying them round robin
  // (so a slot is reused as late as possible: a late child of a finished collective still finds
  // it). One cursor for all threads keeps what is in flight just behind it, whichever
  // communicator it belongs to, so the slots ahead are the oldest. It is advanced with one
  // atomic add: a load and a store would let a thread descheduled between them put the cursor
  // back by as many slots as the others took meanwhile, into the ones in flight.
  //
  // A communicator whose kernels lag its launches (NCCL lets about a thousand wait on a stream)
  // leaves that many busy slots in a row, which the cursor meets once per turn of the pool. The
  // search therefore goes on for up to a quarter of the pool, not a fixed few slots: 64 dropped
  // one collective per 64 of such a run (NcclProfilerEvents.ConcurrentThreadsKeepExactCounts
  // lost 15 on a loaded machine), while a quarter skips any run of in-flight work shorter than
  // that at a cost paid once per turn. Only a pool mostly in flight drops, and then each take
  // costs at most N/4 loads.
  static constexpr int kMaxProbes = static_cast<int>(N / 4);
  template <typename Reusable>
  bool take(std::uint32_t& index, std::uint64_t& gen, Reusable reusable) {
    for (int probe = 0; probe < kMaxProbes; ++probe) {
      const std::uint32_t at = cursor.fetch_add(1, kRelaxed);
      const std::uint32_t i = at & (N - 1);
      Slot& slot = slots[i];
      std::uint64_t word = slot.word.load(kAcquire);
      if ((word & 1) != 0 && !reusable(slot)) continue;
      const std::uint64_t next = (((word >> 1) + 1) << 1) | 1;
      if (slot.word.compare_exchange_strong(word, next, std::memory_order_acq_rel)) {
        index = i;
        gen = (next >> 1) & kGenMask;
        return true;
      }
    }
    dropped.fetch_add(1, kRelaxed);
    return false;
  }
  // The slot a handle names, if it still holds what the handle was made for.
  Slot* find(const Decoded& h) {
    if (h.index >= N) return nullptr;
    Slot& slot = slots[h.index];
    const std::uint64_t word = slot.word.load(kAcquire);
    return (word & 1) != 0 && ((word >> 1) & kGenMask) == h.gen ? &slot : nullptr;
  }
  void release(Slot& slot) {
    slot.word.store(slot.word.load(kRelaxed) & ~std::uint64_t{1}, kRelease);
  }
};

template <typename T>
T get(const std::atomic<T>& a) {
  return a.load(kRelaxed);
}
template <typename T>
void put(std::atomic<T>& a, T value) {
  a.store(value, kRelaxed);
}

}  // namespace commtap::nccl::profiler::event_pool
