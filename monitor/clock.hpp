// monitor/clock: the clock every record is stamped with, and offsets between ranks' clocks.
#pragma once

#include <cstdint>
#include <vector>

#include "monitor/trace_schema.hpp"

namespace commtap::monitor {

// CLOCK_MONOTONIC in nanoseconds. Read through clock_gettime (the vDSO, about 25 ns here) until
// use_fast_clock(); from then on, where the kernel itself keeps CLOCK_MONOTONIC on an invariant,
// synchronized time-stamp counter, from that counter (about 10 ns) converted with a rate
// measured against CLOCK_MONOTONIC: over 5 ms at the switch (readings within microseconds of
// clock_gettime's), then over the whole run, re-anchored by every refine (within tens of
// nanoseconds), so ranks agree as they would with clock_gettime. (A rate calibrated once per
// process differs between processes by parts in 1e5: tens of milliseconds per hour between
// ranks.) Readings can step back by a few nanoseconds at the switch: take durations with
// elapsed_ns().
[[gnu::always_inline]] inline std::uint64_t now_ns() noexcept;
// Later minus earlier, 0 if the clock stepped back in between.
inline std::uint64_t elapsed_ns(std::uint64_t earlier, std::uint64_t later) noexcept {
  return later > earlier ? later - earlier : 0;
}
// Shifts now_ns() by `ns`: lets a test make the ranks of one host disagree like hosts do.
void skew_clock_for_tests(std::int64_t ns) noexcept;
// If this machine has a usable counter: measures its rate over 5 ms (sleeping) and switches
// now_ns() to it, so that jobs shorter than a window get the cheap clock too; returns whether
// it has. Until then, and on machines without, now_ns() is clock_gettime.
bool use_fast_clock() noexcept;
// Called periodically (by the trace writer, once per window): once the baseline is at least
// 100 ms, re-measures the counter's rate against CLOCK_MONOTONIC over the whole run and
// re-anchors, slewing away any difference over the next `horizon_ns` (or switches now_ns() back
// on after a jump turned it off). Not thread safe: one caller.
void refine_fast_clock(std::uint64_t horizon_ns) noexcept;
// Whether now_ns() reads the counter now (for tests and the database's facts).
bool fast_clock_active() noexcept;

// One clock exchange with the reference rank: this rank's now_ns() when it sent the request and
// when the reply arrived, and the reference's now_ns() when it answered.
struct ClockSample {
  std::uint64_t sent_ns = 0;
  std::uint64_t reference_ns = 0;
  std::uint64_t received_ns = 0;
};
// The estimate from the exchange with the shortest round trip (Cristian's method).
ClockOffset estimate_offset(const std::vector<ClockSample>& samples);

// Wall-clock nanoseconds since the epoch, for the database's start/end stamps.
std::uint64_t wall_ns() noexcept;

}  // namespace commtap::monitor

#include "monitor/clock_inline.hpp"  // now_ns(): inlined into every wrapper
