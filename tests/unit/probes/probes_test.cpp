#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "probes/probes.hpp"

using commtap::probes::tournament_partner;
using commtap::probes::tournament_rounds;

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
      }
      EXPECT_EQ(byes, players % 2) << players << " " << round;
    }
    EXPECT_EQ(met.size(), static_cast<std::size_t>(players * (players - 1) / 2)) << players;
  }
}
