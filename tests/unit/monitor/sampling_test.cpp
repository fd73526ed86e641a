// Sampling chooses instances by a hash of what names them job-wide, so that a program's period
// never hides a position of its loop: the positions of a loop of P collectives a step are each
// sampled in proportion, for any P, at every level of the trace budget.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "monitor/sampling.hpp"

namespace commtap::monitor {
namespace {

// Per position of a loop of `period` collectives a step on `comm`, how many of `steps` steps
// were sampled at one in `sample` and then kept at the trace budget's `level`.
std::vector<int> sampled_per_position(std::int64_t comm, int period, int steps,
                                      std::uint64_t sample, unsigned level) {
  std::vector<int> count(static_cast<std::size_t>(period));
  for (int step = 0; step < steps; ++step)
    for (int position = 0; position < period; ++position) {
      const std::uint64_t seq = static_cast<std::uint64_t>(step * period + position) + 1;
      if (is_sampled(comm, seq, sample) &&
          is_kept_at_level(collective_hash(comm, seq), sample, level))
        ++count[static_cast<std::size_t>(position)];
    }
  return count;
}

TEST(Sampling, EveryPositionOfAPeriodicLoopIsSampledInProportion) {
  const std::int64_t comms[] = {1, 2, 0x5eed0001, -7};
  for (const std::int64_t comm : comms)
    for (const int period : {2, 3, 4, 8, 16, 32})
      for (const unsigned level : {0u, 2u}) {
        constexpr std::uint64_t kSample = 16;
        constexpr int kSteps = 16000;
        const double expected = kSteps / static_cast<double>(kSample << level);
        const std::vector<int> count = sampled_per_position(comm, period, kSteps, kSample, level);
        for (int position = 0; position < period; ++position)
          EXPECT_NEAR(count[static_cast<std::size_t>(position)], expected, expected * 0.25)
              << "comm " << comm << ", period " << period << ", position " << position << ", level "
              << level;
      }
}

TEST(Sampling, SampleOfOneKeepsEverything) {
  for (std::uint64_t seq = 1; seq < 1000; ++seq) EXPECT_TRUE(is_sampled(3, seq, 1));
}

// Every member decides alike: the choice is a function of (communicator, seq) only, and two
// communicators are not sampled at the same sequence numbers (their instances interleave).
TEST(Sampling, CommunicatorsAreSampledAtDifferentSequenceNumbers) {
  int both = 0, either = 0;
  for (std::uint64_t seq = 1; seq <= 16000; ++seq) {
    const bool a = is_sampled(1, seq, 16), b = is_sampled(2, seq, 16);
    EXPECT_EQ(a, is_sampled(1, seq, 16));
    both += a && b;
    either += a || b;
  }
  EXPECT_LT(both, either / 4);
}

}  // namespace
}  // namespace commtap::monitor
