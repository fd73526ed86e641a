#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "probes/async_probes.hpp"

using commtap::probes::PingTimes;
using commtap::probes::round_trip_bounds;

// An asynchronous ping's round trip is known only within a window: each leader sees a message
// at its next look, some time after it arrived. Simulated pings with random legs, random gaps
// between looks on either side and a random offset between the two clocks: the true round trip
// (the two legs) always lies within the bounds, the window is exactly the two held times
// (found - last miss on each side), and a leader that looks at once gives the exact round trip.
TEST(AsyncProbes, TheRoundTripLiesWithinTheBoundsWhateverTheClocksOffset) {
  std::mt19937_64 random(48);
  auto uniform = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(random);
  };
  for (int trial = 0; trial < 20000; ++trial) {
    const std::uint64_t sent = uniform(1'000'000'000, 2'000'000'000);  // true time = this clock
    const std::int64_t offset =
        static_cast<std::int64_t>(uniform(0, 2'000'000'000)) - 1'000'000'000;
    const std::uint64_t there = uniform(1'000, 20'000'000), back = uniform(1'000, 20'000'000);
    const bool quick = trial % 4 == 0;  // both leaders polling: they find it as it arrives
    const std::uint64_t arrived_there = sent + there;
    const std::uint64_t peer_gap = quick ? 0 : uniform(0, 30'000'000);
    const std::uint64_t peer_found = arrived_there + (quick ? 0 : uniform(0, peer_gap));
    const std::uint64_t peer_last_miss = quick ? arrived_there - 1 : peer_found - peer_gap - 1;
    const std::uint64_t replied = peer_found + uniform(0, 50'000);
    const std::uint64_t arrived_here = replied + back;
    const std::uint64_t gap = quick ? 0 : uniform(0, 30'000'000);
    const std::uint64_t found_here = arrived_here + (quick ? 0 : uniform(0, gap));
    const std::uint64_t last_miss_here =
        std::max(sent, quick ? arrived_here - 1 : found_here - gap - 1);
    auto peer_clock = [&](std::uint64_t t) {
      return static_cast<std::uint64_t>(static_cast<std::int64_t>(t) + offset);
    };
    const PingTimes ping{sent,
                         last_miss_here,
                         found_here,
                         peer_clock(peer_last_miss),
                         peer_clock(peer_found),
                         peer_clock(replied)};
    const auto bounds = round_trip_bounds(ping);
    const std::uint64_t truth = there + back;
    ASSERT_LE(bounds.lower_ns, truth) << trial;
    ASSERT_GE(bounds.upper_ns, truth) << trial;
    const std::uint64_t held = (found_here - last_miss_here) + (peer_found - peer_last_miss);
    if (bounds.lower_ns > 0) {
      ASSERT_EQ(bounds.upper_ns - bounds.lower_ns, held) << trial;
    }
    if (quick) {
      ASSERT_EQ(bounds.upper_ns, truth) << trial;
    }
  }
}
