// MPI's clock estimates of one rank made to agree: a loose estimate (a loaded machine's exchange)
// moves the offset only as far as its bound demands, never to its midpoint.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "analyzer/model/job_model.hpp"

namespace {

using commtap::analyzer::Rank;
using commtap::analyzer::reconcile_clock_estimates;
using commtap::monitor::ClockEstimate;

constexpr std::uint64_t kSecond = 1'000'000'000;

Rank rank_with(std::vector<ClockEstimate> estimates) {
  reconcile_clock_estimates(estimates);
  Rank rank;
  rank.clocks = estimates;
  return rank;
}

// What the export test saw beside busy loops: MPI_Init's estimate within 42 us, MPI_Finalize's
// within 5.3 ms and 3.7 ms off. The true offset is constant (one host, a simulated skew).
TEST(ClockEstimates, ALooseEstimateDoesNotDragTheOffsetToItsMidpoint) {
  const std::int64_t truth = -21'000'000;
  const Rank rank = rank_with(
      {{10 * kSecond, {truth + 8'619, 41'847}}, {11 * kSecond, {truth + 3'675'849, 5'341'206}}});
  for (std::uint64_t t : {10 * kSecond, 10 * kSecond + kSecond / 2, 11 * kSecond, 20 * kSecond})
    EXPECT_EQ(rank.aligned(t), static_cast<std::int64_t>(t) + truth + 8'619) << t;
}

// Estimates that disagree beyond their bounds show drift: the looser one moves only to the edge
// of its own bound nearest what the precise ones say.
TEST(ClockEstimates, ALooseEstimateThatDisagreesMovesToTheEdgeOfItsBound) {
  const Rank rank = rank_with({{0, {0, 10}}, {kSecond, {1'000'000, 100}}});
  EXPECT_EQ(rank.clocks[0].offset.offset_ns, 0);
  EXPECT_EQ(rank.clocks[1].offset.offset_ns, 999'900);
  EXPECT_EQ(rank.clocks[1].offset.error_ns, 100);  // the stated bound is kept
}

// Real drift measured precisely is followed, to the nearest edge of the later estimate's bound
// (the least drift all the bounds allow); a loose estimate in between takes the line.
TEST(ClockEstimates, PreciseEstimatesOfADriftAreFollowed) {
  const Rank rank = rank_with(
      {{0, {0, 1'000}}, {5 * kSecond, {400'000, 500'000}}, {10 * kSecond, {50'000, 1'000}}});
  EXPECT_EQ(rank.clocks[2].offset.offset_ns, 49'000);
  EXPECT_EQ(rank.clocks[1].offset.offset_ns, 24'500);
  EXPECT_EQ(rank.aligned(5 * kSecond), static_cast<std::int64_t>(5 * kSecond) + 24'500);
}

// Random estimates around a drifting truth, each bound honest: afterwards every estimate lies
// within its own bound of what it stated, so within twice its bound of the truth.
TEST(ClockEstimates, EveryReconciledOffsetStaysWithinItsOwnBound) {
  std::mt19937_64 random(48);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ClockEstimate> estimates;
    const double drift = std::uniform_real_distribution<double>(-2e-5, 2e-5)(random);
    std::uint64_t at = 0;
    for (int i = 0; i < 12; ++i) {
      at += std::uniform_int_distribution<std::uint64_t>(1, 3 * kSecond)(random);
      const std::int64_t truth = 5'000'000 + static_cast<std::int64_t>(drift * at);
      const std::int64_t error =
          std::uniform_int_distribution<std::int64_t>(0, 5)(random) == 0
              ? std::uniform_int_distribution<std::int64_t>(0, 5'000'000)(random)
              : std::uniform_int_distribution<std::int64_t>(0, 50'000)(random);
      const std::int64_t off = std::uniform_int_distribution<std::int64_t>(-error, error)(random);
      estimates.push_back({at, {truth + off, error}});
    }
    const std::vector<ClockEstimate> stated = estimates;
    reconcile_clock_estimates(estimates);
    for (std::size_t i = 0; i < estimates.size(); ++i) {
      EXPECT_LE(std::llabs(estimates[i].offset.offset_ns - stated[i].offset.offset_ns),
                stated[i].offset.error_ns);
      const std::int64_t truth = 5'000'000 + static_cast<std::int64_t>(drift * estimates[i].at_ns);
      EXPECT_LE(std::llabs(estimates[i].offset.offset_ns - truth), 2 * stated[i].offset.error_ns);
    }
  }
}

// A hostile file's bounds (the largest integers) overflow nothing.
TEST(ClockEstimates, HostileBoundsOverflowNothing) {
  constexpr std::int64_t kMost = std::numeric_limits<std::int64_t>::max();
  const Rank rank = rank_with({{1, {kMost, 0}}, {2, {-kMost, kMost}}, {2, {0, kMost}}});
  for (const ClockEstimate& e : rank.clocks) {
    EXPECT_LE(e.offset.offset_ns, 4'000'000'000'000'000'000);
    EXPECT_GE(e.offset.offset_ns, -4'000'000'000'000'000'000);
  }
}

}  // namespace
