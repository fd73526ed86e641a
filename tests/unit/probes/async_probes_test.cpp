#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "probes/async_probes.hpp"
#include "probes/probes.hpp"

using commtap::probes::PingTimes;
using commtap::probes::round_trip_bounds;

// A slot's pair measures one direction at a time: the lower host from the slot's start, the
// higher from its middle. On 4 hosts, slot 0 pairs 0 with 3 and 1 with 2; slot 1 pairs 0 with 2
// and 1 with 3.
TEST(AsyncProbes, ASlotsPairTakesTurnsHalfASlotApart) {
  using commtap::probes::next_turn_wall;
  EXPECT_EQ(next_turn_wall(0, 1000, 4, 3), 500u);   // slot 0, after host 0
  EXPECT_EQ(next_turn_wall(0, 1000, 4, 2), 500u);   // slot 0, after host 1
  EXPECT_EQ(next_turn_wall(0, 1000, 4, 0), 1000u);  // its slot-0 turn began at 0: slot 1's
  EXPECT_EQ(next_turn_wall(600, 1000, 4, 3), 1500u);
  EXPECT_EQ(next_turn_wall(999, 1000, 4, 1), 1000u);
  // In every slot, each pair's two turns are half a slot apart.
  for (int slot = 1; slot < 6; ++slot)
    for (int host = 0; host < 4; ++host) {
      const int partner = commtap::probes::tournament_partner(4, slot % 3, host);
      const auto before = static_cast<std::uint64_t>(slot) * 1000 - 1;
      const std::uint64_t mine = next_turn_wall(before, 1000, 4, host);
      const std::uint64_t theirs = next_turn_wall(before, 1000, 4, partner);
      EXPECT_EQ(std::max(mine, theirs) - std::min(mine, theirs), 500u) << slot << " " << host;
    }
}

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

// A peer whose pings were answered and whose transfer was not is measuring this way, for up to a
// second: a measurement toward it waits (under a rate limit this side's reply would queue behind
// its transfer). Its transfer, or a second without one, ends its turn; other peers are free.
TEST(AsyncProbes, APeerMeasuringThisWayHoldsAMeasurementTowardItUntilItsTransferCame) {
  using commtap::probes::PeerTurns;
  PeerTurns turns(4);
  const std::uint64_t t = 5'000'000'000;
  EXPECT_FALSE(turns.measuring(2, t));
  turns.answered(2, true, t);  // a ping from host 2
  EXPECT_TRUE(turns.measuring(2, t + 1'000'000));
  EXPECT_FALSE(turns.measuring(1, t + 1'000'000));
  turns.answered(2, true, t + 2'000'000);  // another ping: still its turn
  EXPECT_TRUE(turns.measuring(2, t + 100'000'000));
  turns.answered(2, false, t + 110'000'000);  // its transfer
  EXPECT_FALSE(turns.measuring(2, t + 110'000'001));
  turns.answered(3, true, t);
  EXPECT_TRUE(turns.measuring(3, t + PeerTurns::kPeerTurnNs - 1));
  EXPECT_FALSE(turns.measuring(3, t + PeerTurns::kPeerTurnNs));  // no transfer within a second
  EXPECT_FALSE(turns.measuring(7, t));                           // not a host
  EXPECT_FALSE(turns.measuring(-1, t));
}

// A leader confirms a change 1 s after it, and every confirmation of a noisy direction may find
// another: the confirmations of one direction must not take the turns of the others. Host 0 of
// 4, an interval of 1 s (slots of a third), every measurement toward host 3 a change: over 10 s
// hosts 1 and 2 are still measured at each of their turns, once an interval, and host 3 never
// sooner than a second after the measurement before (its turns are skipped while its
// confirmation waits). Before, host 3's confirmations took every turn after the first change.
TEST(AsyncProbes, ConfirmingOneDirectionLeavesTheOthersTheirTurns) {
  using commtap::probes::MeasurementSchedule;
  using commtap::probes::PeerTurns;
  constexpr std::uint64_t kMs = 1'000'000, kSlot = 1'000 * kMs / 3;
  const std::uint64_t start = 7 * kMs, wall_offset = 1'700'000'000'000'000'000ull;
  MeasurementSchedule schedule(4, 0, kSlot, start, start + wall_offset);
  const PeerTurns nobody_measuring(4);
  std::vector<std::vector<std::uint64_t>> measured(4);
  std::size_t confirmations = 0;
  for (std::uint64_t now = start; now < start + 10'000 * kMs; now += kMs) {
    const auto due = schedule.take(now, now + wall_offset, true, true, nobody_measuring);
    if (!due) continue;
    ASSERT_GE(due->peer, 1);
    ASSERT_LE(due->peer, 3);
    measured[static_cast<std::size_t>(due->peer)].push_back(now);
    if (due->confirmation) {
      EXPECT_EQ(due->peer, 3);
      ++confirmations;
    }
    if (due->peer == 3) schedule.confirm(3, now);
  }
  for (int peer : {1, 2}) {
    const auto& at = measured[static_cast<std::size_t>(peer)];
    EXPECT_GE(at.size(), 9u) << peer;
    for (std::size_t i = 1; i < at.size(); ++i)
      EXPECT_NEAR(static_cast<double>(at[i] - at[i - 1]), 1e9, 2e6) << peer << " " << i;
  }
  const auto& confirmed = measured[3];
  EXPECT_GE(confirmed.size(), 9u);
  EXPECT_GE(confirmations, 8u);
  for (std::size_t i = 1; i < confirmed.size(); ++i)
    EXPECT_GE(confirmed[i] - confirmed[i - 1], 1'000 * kMs) << i;
}

// What holds a measurement back: a confirmation waits while its peer measures this way, and
// over its share; a turn goes to its own peer only, and none while that peer's confirmation
// waits. Host 1 of 4: slot 4 pairs it with host 3 (host 1 from the slot's start), slot 5 with
// host 0 (from its middle), slot 6 with host 2, slot 7 with host 3 again.
TEST(AsyncProbes, AConfirmationWaitsForItsPeerAndItsShare) {
  using commtap::probes::MeasurementSchedule;
  using commtap::probes::PeerTurns;
  constexpr std::uint64_t kMs = 1'000'000, kSlot = 300 * kMs;
  // Monotonic and wall clocks alike (an offset of 0): slot k is [300k, 300k + 300) ms.
  MeasurementSchedule schedule(4, 1, kSlot, 3 * kSlot + 10 * kMs, 3 * kSlot + 10 * kMs);
  PeerTurns turns(4);
  auto take = [&](std::uint64_t now, bool turn, bool confirm) {
    return schedule.take(now, now, turn, confirm, turns);
  };
  EXPECT_FALSE(take(4 * kSlot - 1, true, true));
  auto due = take(4 * kSlot, true, true);
  ASSERT_TRUE(due);
  EXPECT_EQ(due->peer, 3);
  EXPECT_FALSE(due->confirmation);
  EXPECT_EQ(schedule.next_due_ns(), 5 * kSlot + kSlot / 2);
  // A change toward host 0, confirmed a second later.
  schedule.confirm(0, 4 * kSlot + kMs);
  const std::uint64_t confirm_at = 4 * kSlot + kMs + 1'000 * kMs;  // 2,201 ms, in slot 7
  EXPECT_EQ(schedule.next_due_ns(), 5 * kSlot + kSlot / 2);
  // The turn with host 0, whose confirmation waits, is skipped; the one with host 2 goes on.
  EXPECT_FALSE(take(5 * kSlot + kSlot / 2, true, true));
  due = take(6 * kSlot, true, true);
  ASSERT_TRUE(due);
  EXPECT_EQ(due->peer, 2);
  EXPECT_EQ(schedule.next_due_ns(), 7 * kSlot);
  // Due, but over its share (and over the bound for turns): nothing yet.
  EXPECT_FALSE(take(confirm_at, false, false));
  // Within its share, while host 0 measures this way: it waits.
  turns.answered(0, true, confirm_at);
  EXPECT_FALSE(take(confirm_at + kMs, false, true));
  const std::uint64_t retry = confirm_at + kMs + MeasurementSchedule::kPeerWaitNs;
  EXPECT_FALSE(take(retry - 1, false, true));
  turns.answered(0, false, confirm_at + 5 * kMs);  // its transfer came: its turn is over
  due = take(retry, false, true);
  ASSERT_TRUE(due);
  EXPECT_EQ(due->peer, 0);
  EXPECT_TRUE(due->confirmation);
  // Taken off the schedule: slot 7's turn, over the bound until now, is what remains due.
  EXPECT_EQ(schedule.next_due_ns(), 7 * kSlot);
  due = take(retry, true, true);
  ASSERT_TRUE(due);
  EXPECT_EQ(due->peer, 3);
  EXPECT_FALSE(due->confirmation);
}
