#include <gtest/gtest.h>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "monitor/monitor.hpp"

using commtap::monitor::bump;
using commtap::monitor::CallCounters;
namespace monitor = commtap::monitor;

TEST(CallCounters, SumsLiveAndExitedThreads) {
  CallCounters counters(3);
  constexpr int kThreads = 6, kCalls = 10000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto* slots = counters.local();
      for (int i = 0; i < kCalls; ++i) {
        bump(slots[t % 3].calls, 1);
        bump(slots[t % 3].bytes, 8);
      }
    });
  }
  for (auto& thread : threads) thread.join();  // all exited: their arrays are recycled
  bump(counters.local()[0].calls, 5);          // and one live thread
  const auto totals = counters.totals();
  ASSERT_EQ(totals.size(), 3u);
  EXPECT_EQ(totals[0].calls, 2u * kCalls + 5);
  EXPECT_EQ(totals[1].calls, 2u * kCalls);
  EXPECT_EQ(totals[2].bytes, 2u * kCalls * 8);
}

TEST(CallCounters, NewThreadsReuseExitedThreadsArraysWithoutLosingCounts) {
  CallCounters counters(1);
  for (int round = 0; round < 50; ++round) {
    std::thread([&] { bump(counters.local()[0].calls, 1); }).join();
  }
  EXPECT_EQ(counters.totals()[0].calls, 50u);
}

TEST(CallCounters, ASecondObjectGetsItsOwnSlots) {
  auto first = std::make_unique<CallCounters>(2);
  bump(first->local()[1].calls, 3);
  first.reset();
  // A new object, possibly at the same address, must not see the old thread cache.
  CallCounters second(2);
  bump(second.local()[1].calls, 1);
  EXPECT_EQ(second.totals()[1].calls, 1u);
}

TEST(Clock, IsCLOCK_MONOTONICPlusTheTestSkew) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const std::uint64_t reference = now.tv_sec * 1'000'000'000ull + now.tv_nsec;
  EXPECT_NEAR(static_cast<double>(commtap::monitor::now_ns()), static_cast<double>(reference), 1e6);
  commtap::monitor::skew_clock_for_tests(5'000'000'000);
  EXPECT_NEAR(static_cast<double>(commtap::monitor::now_ns()), static_cast<double>(reference) + 5e9,
              1e6);
  commtap::monitor::skew_clock_for_tests(0);
}

// The counter clock, where this machine has one: after the switch, readings stay within a few
// microseconds of CLOCK_MONOTONIC (two clock_gettime calls bracket each one), never go back,
// and a re-anchoring keeps them continuous. A broken rate (say 32.32 fixed point read as a
// plain integer) or a lost anchor is off by milliseconds at once.
TEST(Clock, CounterClockTracksClockMonotonic) {
  using namespace commtap::monitor;
  if (!use_fast_clock()) GTEST_SKIP() << "the kernel does not use an invariant counter here";
  auto monotonic = [] {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1'000'000'000ull + now.tv_nsec;
  };
  // The switch needs a 100 ms baseline: let that much time pass (not a synchronization).
  const std::uint64_t start = monotonic();
  while (monotonic() < start + 120'000'000) {
  }
  refine_fast_clock(1'000'000'000);
  ASSERT_TRUE(fast_clock_active());
  std::uint64_t previous = 0, worst = 0;
  for (int round = 0; round < 3; ++round) {
    const std::uint64_t until = monotonic() + 50'000'000;
    for (std::uint64_t before = monotonic(); before < until; before = monotonic()) {
      const std::uint64_t reading = now_ns();
      const std::uint64_t after = monotonic();
      EXPECT_GE(reading, previous);
      previous = reading;
      // Outside [before, after] by how much? Tolerance: the anchor pairs' uncertainty plus the
      // rate's error over the baseline, far below 5 us.
      const std::uint64_t miss = reading < before  ? before - reading
                                 : reading > after ? reading - after
                                                   : 0;
      worst = std::max(worst, miss);
    }
    refine_fast_clock(1'000'000'000);
  }
  EXPECT_LT(worst, 5'000u);
}

TEST(Clock, IsMonotonic) {
  const auto a = commtap::monitor::now_ns();
  const auto b = commtap::monitor::now_ns();
  EXPECT_LE(a, b);
  EXPECT_GT(commtap::monitor::wall_ns(), 1'600'000'000ull * 1'000'000'000ull);
}

TEST(ClockOffset, TheShortestRoundTripWins) {
  using commtap::monitor::ClockSample;
  // The reference is 1,000,000 ns ahead. Round trips of 800, 200 and 5000 ns; in the 200 ns one
  // the reference answered 30 ns after the midpoint, so the estimate is off by 30, within 100.
  const std::vector<ClockSample> samples = {
      {10'000, 1'010'300, 10'800},
      {20'000, 1'020'130, 20'200},
      {30'000, 1'032'000, 35'000},
  };
  const auto offset = commtap::monitor::estimate_offset(samples);
  EXPECT_EQ(offset.error_ns, 100);
  EXPECT_EQ(offset.offset_ns, 1'000'030);
  EXPECT_LE(std::abs(offset.offset_ns - 1'000'000), offset.error_ns);
}

TEST(ClockOffset, NoUsableSampleMeansNoEstimate) {
  EXPECT_LT(commtap::monitor::estimate_offset({}).error_ns, 0);
  EXPECT_LT(commtap::monitor::estimate_offset({{100, 50, 90}}).error_ns, 0) << "time ran backwards";
}

TEST(SizeBucket, KeepsThreeSignificantBits) {
  for (std::uint64_t b = 0; b < 8; ++b) EXPECT_EQ(monitor::size_bucket(b), b);
  EXPECT_EQ(monitor::size_bucket(8), 8u);
  EXPECT_EQ(monitor::size_bucket(9), 8u);
  EXPECT_EQ(monitor::size_bucket(10), 10u);
  EXPECT_EQ(monitor::size_bucket(15), 14u);
  EXPECT_EQ(monitor::size_bucket(1023), 896u);
  EXPECT_EQ(monitor::size_bucket(1024), 1024u);
  EXPECT_EQ(monitor::size_bucket(~std::uint64_t{0}), std::uint64_t{7} << 61);
  // Randomized: a class never spans more than 25% and never exceeds its members.
  std::mt19937_64 random(42);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t bytes = random() >> (random() % 64);
    const std::uint64_t bucket = monitor::size_bucket(bytes);
    ASSERT_LE(bucket, bytes);
    ASSERT_LE(bytes - bucket, bucket / 4) << bytes;
  }
}

TEST(Aggregates, WindowsSplitCountsAndKeepExtremesPerWindow) {
  monitor::CallCounters counters(4);
  const monitor::AggregateKey a{.comm_id = 1, .function = 2, .site = 3, .bucket = 8};
  const monitor::AggregateKey b{.comm_id = 1, .function = 2, .site = 4, .bucket = 8};
  counters.aggregate(a, 100);
  counters.aggregate(a, 300);
  counters.aggregate(b, 50);
  std::thread other([&] { counters.aggregate(a, 7); });  // another thread, same key: merged
  other.join();
  std::vector<monitor::AggregateRow> first;
  EXPECT_EQ(counters.close_window(first), 0u);
  ASSERT_EQ(first.size(), 2u);
  auto row_of = [](const std::vector<monitor::AggregateRow>& rows, const monitor::AggregateKey& k) {
    for (const auto& r : rows)
      if (r.key == k) return r;
    return monitor::AggregateRow{};
  };
  const monitor::AggregateRow ra = row_of(first, a);
  EXPECT_EQ(ra.calls, 3u);
  EXPECT_EQ(ra.total_ns, 407u);
  EXPECT_EQ(ra.min_ns, 7u);
  EXPECT_EQ(ra.max_ns, 300u);
  EXPECT_EQ(row_of(first, b).calls, 1u);

  // The next window holds only what came after; keys without calls are left out.
  counters.aggregate(a, 1000);
  std::vector<monitor::AggregateRow> second;
  counters.close_window(second);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].calls, 1u);
  EXPECT_EQ(second[0].min_ns, 1000u);
  EXPECT_EQ(second[0].max_ns, 1000u);
  std::vector<monitor::AggregateRow> third;
  counters.close_window(third);
  EXPECT_TRUE(third.empty());
}

TEST(Aggregates, AFullTableCountsDroppedCallsInsteadOfGrowing) {
  monitor::CallCounters counters(1);
  for (std::uint32_t site = 1; site <= 5000; ++site)
    counters.aggregate({.comm_id = 1, .function = 0, .site = site, .bucket = 0}, 1);
  std::vector<monitor::AggregateRow> rows;
  const std::uint64_t dropped = counters.close_window(rows);
  EXPECT_GT(dropped, 0u);
  std::uint64_t calls = 0;
  for (const auto& r : rows) calls += r.calls;
  EXPECT_EQ(calls + dropped, 5000u);
}
