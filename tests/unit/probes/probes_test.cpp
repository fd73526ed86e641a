#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "probes/probes.hpp"

using commtap::probes::kCappedAfterNs;
using commtap::probes::kCappedTransferNs;
using commtap::probes::SlowTransferExcuses;
using commtap::probes::tournament_partner;
using commtap::probes::tournament_round_of;
using commtap::probes::tournament_rounds;
using commtap::probes::transfer_plan;

// Every host pair is probed exactly once per probe round, in disjoint pairs: each round pairs
// every index with one partner (or a bye), symmetrically, and over the rounds each index meets
// every other once.
TEST(Probes, TheTournamentMeetsEveryPairOnceInDisjointPairs) {
  EXPECT_EQ(tournament_rounds(1), 0);
  for (int players = 2; players <= 33; ++players) {
    std::set<std::pair<int, int>> met;
    const int rounds = tournament_rounds(players);
    EXPECT_EQ(rounds, players % 2 ? players : players - 1) << players;
    for (int round = 0; round < rounds; ++round) {
      int byes = 0;
      for (int i = 0; i < players; ++i) {
        const int partner = tournament_partner(players, round, i);
        ASSERT_NE(partner, i) << players << " " << round;
        if (partner >= players) {
          ++byes;
          continue;
        }
        EXPECT_EQ(tournament_partner(players, round, partner), i) << players << " " << round;
        if (i < partner) {
          EXPECT_TRUE(met.insert({i, partner}).second) << i << "-" << partner;
        }
        // A confirmation finds the round of a changed pair from the pair alone.
        EXPECT_EQ(tournament_round_of(players, i, partner), round) << i << "-" << partner;
      }
      EXPECT_EQ(byes, players % 2) << players << " " << round;
    }
    EXPECT_EQ(met.size(), static_cast<std::size_t>(players * (players - 1) / 2)) << players;
  }
}

// Routine rounds come at the set interval, grown so that the cheapest recent round is at most
// 0.5% of it, and later on a communicator of some hosts only; a round that found a change is
// confirmed 1 s later while probing beyond the first rounds has cost at most 2% of the time since
// probing began.
TEST(Probes, RoundsComeAtTheBoundAndChangesAreConfirmedWithinTheirShare) {
  using commtap::probes::ProbeBudget;
  using commtap::probes::rounds_due;
  ProbeBudget b;
  b.set_interval_s = 5;
  b.since_full_round_s = 6;
  EXPECT_TRUE(rounds_due(b).routine);  // rounds too cheap to count: the set interval
  b.cheapest_cycle_s = 0.1;            // 0.1 s is 0.5% of 20 s
  EXPECT_DOUBLE_EQ(rounds_due(b).interval_s, 20);
  EXPECT_FALSE(rounds_due(b).routine);
  b.since_full_round_s = 21;
  b.since_round_s = 0.5;  // a confirming round does not hold the routine one off
  EXPECT_TRUE(rounds_due(b).routine);
  b.partial_wait_s = 2;
  EXPECT_FALSE(rounds_due(b).routine);
  b.partial_wait_s = 0;

  b.since_round_s = 6;
  EXPECT_FALSE(rounds_due(b).confirm);  // probing has not begun
  b.since_start_s = 10;
  b.spent_since_first_s = 0.15;  // 1.5%
  EXPECT_TRUE(rounds_due(b).confirm);
  b.spent_since_first_s = 0.25;  // 2.5%
  EXPECT_FALSE(rounds_due(b).confirm);
  EXPECT_TRUE(rounds_due(b).confirm_strong);  // a strong change, whatever the share
  b.spent_since_first_s = 0.15;
  b.since_round_s = 0.5;  // within a second of the round
  EXPECT_FALSE(rounds_due(b).confirm);
  EXPECT_FALSE(rounds_due(b).confirm_strong);
  b.since_round_s = 1.5;  // long before the set interval
  EXPECT_TRUE(rounds_due(b).confirm);
  b.partial_wait_s = 2;
  EXPECT_FALSE(rounds_due(b).confirm);
  b.since_round_s = 3.5;
  EXPECT_TRUE(rounds_due(b).confirm);
}

// A communicator's pace that drops 1.3 times or more against the median of its five windows
// before earns a round: not a 20% drop, nor before five windows; a window under half a second
// is not judged and stays open; a slowdown that lasts stops earning rounds once it is the median.
TEST(Probes, APaceThatDropsAgainstTheMedianOfTheWindowsBeforeEarnsARound) {
  commtap::probes::PaceWatch pace;
  constexpr std::uint64_t kMs = 1'000'000;
  std::uint64_t seq = 16, now = 5'000 * kMs;
  EXPECT_FALSE(pace.note(seq, now));  // the first window begins
  struct Window {
    std::uint64_t seqs, ms;
    bool dropped;
  };
  const Window windows[] = {
      {100, 1000, false}, {87, 1000, false}, {115, 1000, false}, {30, 1000, false},  // too few
      {90, 1000, false},   // before it: 100 87 115 30 - five windows not yet
      {110, 1000, false},  // median 90
      {80, 1000, false},   // median 90 (87 115 30 90 110): 80 is not 1.3 times slower
      {66, 1000, true},    // median 90 (115 30 90 110 80): 1.36 times slower
      {15, 250, false},    // too short: the window stays open...
      {60, 1000, true},    // ...to 75 in 1.25 s, 60 a second; median 80 (30 90 110 80 66)
      {60, 1000, true},    // median 80 (90 110 80 66 60)
      {60, 1000, false},   // median 66 (110 80 66 60 60): the slowdown is the pace now
  };
  for (const Window& w : windows) {
    seq += w.seqs;
    now += w.ms * kMs;
    EXPECT_EQ(pace.note(seq, now), w.dropped) << w.seqs << " in " << w.ms << " ms";
  }
  // After a round, the window begins again at its end: the round's time is not the program's.
  pace.restart(seq, now + 300 * kMs);
  EXPECT_FALSE(pace.note(seq + 60, now + 1'300 * kMs));  // 60 a second, not 46
}

// A fault there from the job's first round has no history to be a change against: for its
// first three rounds, a direction is also compared with the fastest of the round's other
// directions, so that it is confirmed as soon as a fault that came later.
TEST(Probes, AFaultThereFromTheFirstRoundIsAChangeAgainstTheRoundsOtherDirections) {
  using Reading = commtap::probes::ChangeDetector::Reading;
  const std::vector<Reading> round = {
      {1, 10'000, 100'000}, {2, 300'000, 3'000'000}, {3, 12'000, 110'000}};
  commtap::probes::ChangeDetector changes;
  using Changed = commtap::probes::ChangeDetector::Changed;
  auto peers = [](const std::vector<Changed>& changed) {
    std::vector<int> out;
    for (const Changed& c : changed) out.push_back(c.peer_node);
    return out;
  };
  const std::vector<int> second{2};  // the changed direction, by its peer node
  EXPECT_EQ(peers(changes.note_round(round)), second);
  EXPECT_EQ(peers(changes.note_round(round)), second);
  EXPECT_EQ(peers(changes.note_round(round)), second);
  EXPECT_TRUE(changes.note_round(round).empty());  // three rounds of its own, all as slow
  commtap::probes::ChangeDetector alike;           // 3.9x the fastest other: no change
  EXPECT_TRUE(
      alike.note_round({{1, 10'000, 100'000}, {2, 39'000, 390'000}, {3, 20'000, 100'000}}).empty());
  EXPECT_EQ(
      peers(alike.note_round({{1, 10'000, 100'000}, {2, 39'000, 400'000}, {3, 20'000, 100'000}})),
      second);
  commtap::probes::ChangeDetector alone;  // nothing to compare with
  EXPECT_TRUE(alone.note_round({{1, 300'000, 3'000'000}}).empty());
  // A confirming round measures the changed direction alone: against its own history.
  EXPECT_EQ(peers(changes.note_round({{2, 300'000, 3'000'000}})), std::vector<int>{});
  EXPECT_EQ(peers(changes.note_round({{1, 40'000, 100'000}})), std::vector<int>{1});
}

// A strong change is far past the direction's fastest by its network part: a delayed link's
// latency or a rate limit's transfer; not a leader held off the CPU (its held time is the
// latency's excess) nor a transfer held mid-way tens of times slower.
TEST(Probes, AStrongChangeIsFarPastTheFastestByItsNetworkPart) {
  using Change = commtap::probes::ChangeDetector::Change;
  using Reading = commtap::probes::ChangeDetector::Reading;
  auto after_a_clean_round = [](const Reading& reading) {
    commtap::probes::ChangeDetector changes;
    changes.note({1, 10'000, 100'000});
    return changes.note(reading);
  };
  EXPECT_EQ(after_a_clean_round({1, 2'500'000, 10'000'000}), Change::strong);  // a 2.5 ms link
  EXPECT_EQ(after_a_clean_round({1, 12'000, 80'000'000}), Change::strong);     // 20 Mbit/s
  // Held off the CPU: 1.4 ms, of which 1.39 ms waited for a leader.
  EXPECT_EQ(after_a_clean_round({1, 1'400'000, 100'000, 10'000, 100'000}), Change::change);
  EXPECT_EQ(after_a_clean_round({1, 12'000, 2'800'000}), Change::change);  // 28x: the noise's
  EXPECT_EQ(after_a_clean_round({1, 170'000, 100'000}), Change::change);   // 17x, 160 us more
  EXPECT_EQ(after_a_clean_round({1, 12'000, 100'000}), Change::none);
}

// The asynchronous probes measure one direction at a time: against the others as last measured,
// in its first three measurements, and against its own history after.
TEST(Probes, AnAsynchronousMeasurementIsAChangeAgainstTheOtherDirectionsAsLastMeasured) {
  using Reading = commtap::probes::ChangeDetector::Reading;
  commtap::probes::ChangeDetector changes;
  std::vector<Reading> latest;
  EXPECT_FALSE(changes.note_against({1, 10'000, 100'000}, latest));  // nothing to compare with
  latest.push_back({1, 10'000, 100'000});
  EXPECT_FALSE(changes.note_against({2, 12'000, 110'000}, latest));
  latest.push_back({2, 12'000, 110'000});
  const Reading slow{3, 50'000, 120'000};  // 5x the fastest other latency
  EXPECT_TRUE(changes.note_against(slow, latest));
  // Its own history only counts once it has three: itself, then as slow as it was.
  EXPECT_TRUE(changes.note_against(slow, latest));
  EXPECT_TRUE(changes.note_against(slow, latest));
  EXPECT_FALSE(changes.note_against(slow, latest));
  EXPECT_FALSE(changes.note_against({2, 12'000, 110'000}, latest));  // as the others: none
}

// A direction's round is a change when its latency or its transfer is 4 times the fastest of
// the direction's last three rounds, or more; each direction (peer node) on its own.
TEST(Probes, AChangeIsADirectionFourTimesSlowerThanItsFastestOfThreeRounds) {
  commtap::probes::ChangeDetector changes;
  auto changed = [&](int peer, std::uint64_t latency, std::uint64_t transfer) {
    return changes.note({peer, latency, transfer}) != commtap::probes::ChangeDetector::Change::none;
  };
  EXPECT_FALSE(changed(1, 50'000, 100'000));  // nothing before
  EXPECT_FALSE(changed(1, 150'000, 300'000));
  EXPECT_FALSE(changed(1, 190'000, 390'000));  // under 4x the fastest (50 us, 100 us)
  EXPECT_TRUE(changed(1, 50'000, 400'000));    // the transfer, 4x
  EXPECT_FALSE(changed(2, 10'000, 10'000));    // another direction: nothing before
  EXPECT_TRUE(changed(2, 40'000, 10'000));     // the latency, 4x
  // Direction 1 keeps 50/400, 150/300 and 190/390 us: 4x the fastest latency (50) is a change;
  // once 50 has left the three, the fastest is 100 and 390 is not.
  EXPECT_TRUE(changed(1, 200'000, 300'000));
  EXPECT_FALSE(changed(1, 100'000, 300'000));
  EXPECT_FALSE(changed(1, 100'000, 300'000));
  EXPECT_FALSE(changed(1, 390'000, 300'000));   // fastest latency 100: 3.9x
  EXPECT_TRUE(changed(1, 100'000, 1'200'000));  // fastest transfer 300: 4x
}

// A direction's throughput is measured in one message of the probe's bytes until a transfer of
// it takes kCappedAfterNs (a rate-limited link), then in quarter chunks for at most
// kCappedTransferNs; a capped one that was fast again (scaled to the probe's bytes) goes back. A
// transfer that took that long over a delayed link (a few round trips for TCP's window) is not
// capped: each chunk would wait as long.
TEST(Probes, ASlowDirectionIsMeasuredInChunksForAtMostTheCap) {
  constexpr std::uint64_t kBytes = 262144, kRoundTrip = 14'000;
  for (std::uint64_t last : {std::uint64_t{0}, std::uint64_t{89'000}, kCappedAfterNs - 1}) {
    EXPECT_EQ(transfer_plan(kBytes, last, kRoundTrip).chunk_bytes, kBytes) << last;
    EXPECT_EQ(transfer_plan(kBytes, last, kRoundTrip).cap_ns, 0u) << last;
  }
  for (std::uint64_t last : {kCappedAfterNs, std::uint64_t{110'000'000}}) {
    EXPECT_EQ(transfer_plan(kBytes, last, kRoundTrip).chunk_bytes, kBytes / 4) << last;
    EXPECT_EQ(transfer_plan(kBytes, last, kRoundTrip).cap_ns, kCappedTransferNs) << last;
  }
  // A 3 ms link: round trips of 6 ms, its transfer 23 ms.
  EXPECT_EQ(transfer_plan(kBytes, 23'000'000, 6'000'000).cap_ns, 0u);
  EXPECT_EQ(transfer_plan(kBytes, 23'000'000, 2'000'000).cap_ns, kCappedTransferNs);
  // Never 8 bytes (the size that ends a turn) or a ping's 1: the smallest probe is 1 KiB.
  EXPECT_EQ(transfer_plan(1024, kCappedAfterNs, kRoundTrip).chunk_bytes, 256u);
}

// The confirmations' share leaves out a direction's first kMeasuredTurns slow measurements (the
// caller's strong changes) on the measuring side and its first slow whole transfer on the
// answering side; more of them count.
TEST(Probes, ADirectionsFirstSlowTurnsAreLeftOutOfTheConfirmationsShare) {
  SlowTransferExcuses excuses;
  EXPECT_EQ(excuses.excuse(1, true, 0), 0u);  // not slow: nothing, and the direction's excuses stay
  for (int turn = 0; turn < SlowTransferExcuses::kMeasuredTurns; ++turn)
    EXPECT_EQ(excuses.excuse(1, true, 64'000'000), 64'000'000u) << turn;
  EXPECT_EQ(excuses.excuse(1, true, 64'000'000), 0u);
  EXPECT_EQ(excuses.excuse(1, false, 30'000'000), 30'000'000u);  // answered from host 1
  EXPECT_EQ(excuses.excuse(1, false, 30'000'000), 0u);
  // Under the floor (a loaded machine's noise): nothing, and the direction's excuse stays.
  EXPECT_EQ(excuses.excuse(2, true, SlowTransferExcuses::kFloorNs - 1), 0u);
  EXPECT_EQ(excuses.excuse(2, true, 25'000'000), 25'000'000u);
}
