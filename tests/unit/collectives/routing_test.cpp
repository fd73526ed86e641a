// Routing around avoided hosts and flagged links: the ring order of nodes, and the star roots,
// ring orders, calibration pair and flagged cost of a topology of pretend nodes, the same on
// every rank (mpi.collectives_eligibility with 2 ranks, mpi.collectives_routing with 3).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "avoid_list/avoid_list.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/topology.hpp"

namespace collectives = commtap::collectives;

// Ring orders around flagged directed links: none flagged keeps rank order; one flagged link
// among 4 nodes is avoided; links flagged both ways between every pair cannot all be avoided;
// past 9 nodes the search still finds a clear order, the same every time.
TEST(RingOfNodes, CrossesTheFewestFlaggedLinks) {
  auto crossings = [](const std::vector<int>& order, const std::vector<std::pair<int, int>>& f) {
    int n = 0;
    for (std::size_t i = 0; i < order.size(); ++i)
      n += static_cast<int>(
          std::count(f.begin(), f.end(), std::pair{order[i], order[(i + 1) % order.size()]}));
    return n;
  };
  EXPECT_EQ(collectives::ring_of_nodes(4, {}), (std::pair{std::vector<int>{0, 1, 2, 3}, 0}));
  const std::vector<std::pair<int, int>> one = {{0, 1}};
  const auto [order, crossed] = collectives::ring_of_nodes(4, one);
  EXPECT_EQ(crossed, 0);
  EXPECT_EQ(crossings(order, one), 0);
  EXPECT_EQ(order.front(), 0);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3})) << "every node once";
  std::vector<std::pair<int, int>> all;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b)
      if (a != b) all.emplace_back(a, b);
  EXPECT_EQ(collectives::ring_of_nodes(3, all).second, 3) << "every step crosses one";
  std::vector<std::pair<int, int>> chain;  // 0->1, 1->2, ..., 10->11: rank order crosses 11
  for (int i = 0; i + 1 < 12; ++i) chain.emplace_back(i, i + 1);
  const auto big = collectives::ring_of_nodes(12, chain);
  EXPECT_EQ(big.second, 0);
  EXPECT_EQ(crossings(big.first, chain), 0);
  EXPECT_EQ(collectives::ring_of_nodes(12, chain), big) << "deterministic on every rank";
}

// Routing on a topology of pretend nodes (one rank each): an avoided host moves the star's
// root; a flagged link moves it off both ends and is charged to the cost model; a forced form
// that cannot keep off it says so. The same on every rank.
TEST(Routing, StarRootsRingOrdersAndTheFlaggedCost) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  auto topology = [&](const commtap::avoid_list::AvoidList& avoid) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);  // freed with the test process; one topology each
    return collectives::topology_of(comm, size, avoid);
  };
  const collectives::Topology* plain = topology({});
  EXPECT_EQ(plain->star_root, 0);
  EXPECT_TRUE(plain->star_clear && plain->ring_clear);
  EXPECT_EQ(plain->flagged_alpha, 0.0);
  EXPECT_FALSE(plain->flagged_unmeasured);
  EXPECT_EQ(static_cast<int>(plain->ring_order.size()), size);
  const collectives::Topology* host = topology({{"test-node-0"}, {}});
  EXPECT_EQ(host->star_root, 1);
  EXPECT_EQ(host->leaders_star_root, 1);
  const collectives::Topology* link = topology({{}, {{"test-node-0", "test-node-1", 3e-3, 0}}});
  EXPECT_DOUBLE_EQ(link->flagged_alpha, 3e-3);
  EXPECT_FALSE(link->flagged_unmeasured);
  if (size == 2) {
    EXPECT_EQ(link->star_root, 0) << "no node is off the link: the first";
    EXPECT_FALSE(link->star_clear);
    EXPECT_FALSE(link->ring_clear) << "two nodes: the ring crosses it";
  } else {
    EXPECT_EQ(link->star_root, 2);
    EXPECT_TRUE(link->star_clear);
    EXPECT_TRUE(link->ring_clear);
  }
  // The cost model's network figures come from the first pair of nodes that no flagged link
  // joins, neither of them avoided (with two nodes there is none: the first two), and reach
  // every rank, also when node 0 is not one of them.
  EXPECT_EQ(plain->calibration_nodes[0], 0);
  EXPECT_EQ(plain->calibration_nodes[1], 1);
  if (size >= 3) {
    EXPECT_EQ(host->calibration_nodes[0], 1);
    EXPECT_EQ(host->calibration_nodes[1], 2);
    EXPECT_EQ(host->calibration_leader, 1);
    EXPECT_EQ(link->calibration_nodes[0], 0);
    EXPECT_EQ(link->calibration_nodes[1], 2);
    const collectives::CostModel m = collectives::measure_cost_model(*host, {});
    EXPECT_EQ(m.inter_points.size(), 10u);
    EXPECT_NE(m.inter_alpha, collectives::CostModel{}.inter_alpha);
  }
  const collectives::Topology* elsewhere = topology({{}, {{"test-node-0", "nowhere", 0, 0}}});
  EXPECT_EQ(elsewhere->flagged_alpha, 0.0) << "a link to a host outside the job";
  EXPECT_FALSE(elsewhere->flagged_unmeasured);
  const collectives::Topology* named = topology({{}, {{"test-node-1", "test-node-0", 0, 0}}});
  EXPECT_TRUE(named->flagged_unmeasured);
}
