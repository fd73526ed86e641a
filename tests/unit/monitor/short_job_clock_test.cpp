// Short jobs get the counter clock from MPI_Init: use_fast_clock() switches now_ns() to the
// counter at once (no refine yet, as in a job shorter than one writer window), and its readings
// stay within microseconds of CLOCK_MONOTONIC. Meant to run alone (CTest runs each test in its
// own process), so that no earlier test has switched or refined the clock; skipped otherwise.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdint>

#include "monitor/clock.hpp"

namespace {

std::uint64_t monotonic() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(now.tv_nsec);
}

}  // namespace

TEST(ShortJobClock, CounterFromTheFirstCall) {
  using namespace commtap::monitor;
  // In one process with the other tests (the binary run by hand), an earlier test switched the
  // clock long ago, and its 5-ms rate has had minutes to drift: that is not a short job.
  if (fast_clock_active()) GTEST_SKIP() << "an earlier test in this process switched the clock";
  if (!use_fast_clock()) GTEST_SKIP() << "the kernel does not use an invariant counter here";
  ASSERT_TRUE(fast_clock_active()) << "still on clock_gettime before the first window";
  // 300 ms without a refine: a rate good to a few parts per million drifts by about a
  // microsecond; one off by 0.1% (or a lost anchor) misses by far more than 20 us.
  std::uint64_t previous = 0, worst = 0;
  const std::uint64_t until = monotonic() + 300'000'000;
  for (std::uint64_t before = monotonic(); before < until; before = monotonic()) {
    const std::uint64_t reading = now_ns();
    const std::uint64_t after = monotonic();
    EXPECT_GE(reading, previous);
    previous = reading;
    worst = std::max(worst, reading < before  ? before - reading
                            : reading > after ? reading - after
                                              : 0);
  }
  EXPECT_LT(worst, 20'000u);
}
