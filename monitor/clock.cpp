#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "monitor/clock.hpp"
#include "monitor/trace_schema.hpp"

namespace commtap::monitor {

namespace {

std::uint64_t read(clockid_t id) noexcept {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// ---- The counter clock ------------------------------------------------------------------------

#if defined(__x86_64__)
constexpr const char* kCounterClocksource = "tsc";
bool counter_is_invariant() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &a, &b, &c, &d);
  return (d & (1u << 8)) != 0;  // invariant TSC: constant rate in every P-, C- and T-state
}
#elif defined(__aarch64__)
constexpr const char* kCounterClocksource = "arch_sys_counter";
bool counter_is_invariant() noexcept {
  return true;  // the generic timer runs at a fixed frequency by architecture
}
#else
constexpr const char* kCounterClocksource = nullptr;
bool counter_is_invariant() noexcept {
  return false;
}
#endif

using clock_detail::counter;
using clock_detail::fast_clock;

// The counter is trusted only where the kernel trusts it: its current clocksource is the
// counter (the kernel checked it is synchronized across CPUs and has not fallen back since).
bool kernel_uses_counter() noexcept {
  if (kCounterClocksource == nullptr || !counter_is_invariant()) return false;
  std::FILE* file =
      std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
  if (file == nullptr) return false;
  char name[64] = {};
  const bool read_one = std::fgets(name, sizeof name, file) != nullptr;
  std::fclose(file);
  if (!read_one) return false;
  name[std::strcspn(name, "\n")] = '\0';
  return std::strcmp(name, kCounterClocksource) == 0;
}

struct Anchor {
  std::uint64_t ticks = 0;
  std::uint64_t ns = 0;   // CLOCK_MONOTONIC at `ticks`
  std::uint64_t gap = 0;  // ... within plus or minus half this
};

// A counter reading and the CLOCK_MONOTONIC reading it falls between, from the tightest of a
// few tries: the pair is then uncertain by half that gap (about 10 ns).
Anchor tight_anchor() noexcept {
  Anchor best;
  std::uint64_t best_gap = ~0ull;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::uint64_t before = read(CLOCK_MONOTONIC);
    const std::uint64_t ticks = counter();
    const std::uint64_t after = read(CLOCK_MONOTONIC);
    if (after - before < best_gap) {
      best_gap = after - before;
      best = {ticks, before + (after - before) / 2, after - before};
    }
  }
  return best;
}

// The refining thread's own state.
bool usable = false;
Anchor first;

void publish(std::uint64_t ticks, std::uint64_t ns, double ns_per_tick) noexcept {
  const std::uint32_t s = fast_clock.sequence.load(std::memory_order_relaxed);
  fast_clock.sequence.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  fast_clock.anchor_ticks.store(ticks, std::memory_order_relaxed);
  fast_clock.anchor_ns.store(ns, std::memory_order_relaxed);
  fast_clock.ns_per_tick_q32.store(static_cast<std::int64_t>(ns_per_tick * 4294967296.0),
                                   std::memory_order_relaxed);
  fast_clock.sequence.store(s + 2, std::memory_order_release);
}

}  // namespace

namespace clock_detail {

FastClock fast_clock;

std::uint64_t monotonic_ns() noexcept {
  return read(CLOCK_MONOTONIC);
}

}  // namespace clock_detail

void skew_clock_for_tests(std::int64_t ns) noexcept {
  fast_clock.skew_ns.store(ns, std::memory_order_relaxed);
}

bool use_fast_clock() noexcept {
  if (!usable) {
    usable = kernel_uses_counter();
    if (usable) {
      first = tight_anchor();
      // Switch now, at MPI_Init, with a rate measured over a few milliseconds (slept, not
      // spun), rather than at the writer's first window: a job shorter than one interval would
      // otherwise read clock_gettime on every call. The anchors are uncertain by ~10 ns each,
      // so the rate is good to a few parts per million: microseconds until the first refine,
      // whose rate over the whole run then slews the difference away.
      // A process preempted between its clock reads on a busy node gets loose anchors: then it
      // waits for the writer's refine, as before.
      constexpr long kInitialBaselineNs = 5'000'000;
      constexpr std::uint64_t kLooseAnchorNs = 250;  // rate then good to 5e-5 at worst
      const timespec pause{0, kInitialBaselineNs};
      nanosleep(&pause, nullptr);
      const Anchor next = tight_anchor();
      if (first.gap <= kLooseAnchorNs && next.gap <= kLooseAnchorNs && next.ticks > first.ticks &&
          next.ns > first.ns) {
        publish(next.ticks, next.ns,
                static_cast<double>(next.ns - first.ns) /
                    static_cast<double>(next.ticks - first.ticks));
        fast_clock.on.store(true, std::memory_order_release);
      }
    }
  }
  return usable;
}

void refine_fast_clock(std::uint64_t horizon_ns) noexcept {
  if (!usable) return;
  const Anchor now = tight_anchor();
  constexpr std::uint64_t kMinimumBaseline = 100'000'000;  // rate good to ~2e-7 at the switch
  if (now.ticks <= first.ticks || now.ns < first.ns + kMinimumBaseline) return;
  // The rate over the whole run so far: its error shrinks as the baseline grows.
  const double rate =
      static_cast<double>(now.ns - first.ns) / static_cast<double>(now.ticks - first.ticks);
  if (!fast_clock.on.load(std::memory_order_relaxed)) {
    publish(now.ticks, now.ns, rate);
    fast_clock.on.store(true, std::memory_order_release);
    return;
  }
  const std::uint64_t current = clock_detail::convert(now.ticks);
  const double error = static_cast<double>(static_cast<std::int64_t>(current - now.ns));
  if (error > 1e6 || error < -1e6) {
    // A millisecond apart: the counter is not what it was (a migrated virtual machine, say).
    // Back to clock_gettime, and measure the rate again from here.
    fast_clock.on.store(false, std::memory_order_relaxed);
    first = now;
    return;
  }
  // Keep the clock continuous at the anchor and let the difference to CLOCK_MONOTONIC run out
  // over the horizon, as NTP slews: no reading ever jumps.
  const double horizon = std::max(static_cast<double>(horizon_ns), 1e8);
  publish(now.ticks, current, rate * (1.0 - error / horizon));
}

bool fast_clock_active() noexcept {
  return fast_clock.on.load(std::memory_order_relaxed);
}

ClockOffset estimate_offset(const std::vector<ClockSample>& samples) {
  // Cristian's method: the reference read its clock somewhere inside [sent, received]; the
  // exchange with the shortest round trip bounds that best.
  ClockOffset best;
  for (const ClockSample& s : samples) {
    if (s.received_ns < s.sent_ns) continue;
    const std::uint64_t half_round_trip = (s.received_ns - s.sent_ns) / 2;
    if (best.error_ns >= 0 && half_round_trip >= static_cast<std::uint64_t>(best.error_ns))
      continue;
    const std::int64_t midpoint = static_cast<std::int64_t>(s.sent_ns + half_round_trip);
    best.offset_ns = static_cast<std::int64_t>(s.reference_ns) - midpoint;
    best.error_ns = static_cast<std::int64_t>(half_round_trip);
  }
  return best;
}

std::uint64_t wall_ns() noexcept {
  return read(CLOCK_REALTIME);
}

}  // namespace commtap::monitor
