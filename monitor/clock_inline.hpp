// The inline part of monitor's clock (see now_ns() in monitor/clock.hpp): what every wrapper reads
// twice per call, so it must not cost a function call. Included by monitor/clock.hpp only.
#pragma once

#include <atomic>
#include <cstdint>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace commtap::monitor {

namespace clock_detail {

__extension__ typedef __int128 Int128;  // GCC and Clang have it on every 64-bit target

inline std::uint64_t counter() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  std::uint64_t value;
  asm volatile("mrs %0, cntvct_el0" : "=r"(value));
  return value;
#else
  return 0;  // never read: use_fast_clock() refuses such machines
#endif
}

// What now_ns() converts with: ns = anchor_ns + (ticks - anchor_ticks) * ns_per_tick, the rate
// in 32.32 fixed point. A sequence lock lets readers go without a lock while the one refining
// thread republishes (odd sequence: being written).
struct FastClock {
  std::atomic<bool> on{false};
  std::atomic<std::uint32_t> sequence{0};
  std::atomic<std::uint64_t> anchor_ticks{0};
  std::atomic<std::uint64_t> anchor_ns{0};
  std::atomic<std::int64_t> ns_per_tick_q32{0};
  std::atomic<std::int64_t> skew_ns{0};  // 0 except in tests that simulate disagreeing hosts
};
extern FastClock fast_clock;

std::uint64_t monotonic_ns() noexcept;

[[gnu::always_inline]] inline std::uint64_t convert(std::uint64_t ticks) noexcept {
  std::uint64_t base_ticks, base_ns;
  std::int64_t rate;
  for (;;) {
    const std::uint32_t before = fast_clock.sequence.load(std::memory_order_acquire);
    base_ticks = fast_clock.anchor_ticks.load(std::memory_order_relaxed);
    base_ns = fast_clock.anchor_ns.load(std::memory_order_relaxed);
    rate = fast_clock.ns_per_tick_q32.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if ((before & 1u) == 0 && fast_clock.sequence.load(std::memory_order_relaxed) == before) break;
  }
  // Signed: a reading taken just before a re-anchoring may lie a few ticks before the anchor.
  const auto delta = static_cast<std::int64_t>(ticks - base_ticks);
  return base_ns + static_cast<std::uint64_t>(
                       static_cast<std::int64_t>((static_cast<Int128>(delta) * rate) >> 32));
}

}  // namespace clock_detail

[[gnu::always_inline]] inline std::uint64_t now_ns() noexcept {
  using clock_detail::fast_clock;
  const auto skew = static_cast<std::uint64_t>(fast_clock.skew_ns.load(std::memory_order_relaxed));
  if (fast_clock.on.load(std::memory_order_relaxed)) [[likely]]
    return skew + clock_detail::convert(clock_detail::counter());
  return skew + clock_detail::monotonic_ns();
}

}  // namespace commtap::monitor
