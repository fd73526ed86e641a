// Runs under mpiexec -n 2: the pass-through rules of commtap's all-reduce, the star root's
// agreement, and the cost model's measurement and file format.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "collectives/collectives.hpp"

using commtap::collectives::allreduce_eligibility;
using commtap::collectives::Eligibility;

TEST(AllreduceEligibility, BuiltinCommutativeOnIntracommIsEligible) {
  EXPECT_EQ(allreduce_eligibility(10, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), Eligibility::eligible);
  EXPECT_EQ(allreduce_eligibility(1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD), Eligibility::eligible);
}

TEST(AllreduceEligibility, PassThroughCases) {
  EXPECT_EQ(allreduce_eligibility(0, MPI_INT, MPI_SUM, MPI_COMM_WORLD), Eligibility::zero_count);
  EXPECT_EQ(allreduce_eligibility(4, MPI_INT, MPI_SUM, MPI_COMM_SELF), Eligibility::single_rank);

  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  EXPECT_EQ(allreduce_eligibility(4, pair, MPI_SUM, MPI_COMM_WORLD), Eligibility::derived_datatype);
  MPI_Type_free(&pair);

  MPI_Op user;
  MPI_Op_create([](void*, void*, int*, MPI_Datatype*) {}, 1, &user);
  EXPECT_EQ(allreduce_eligibility(4, MPI_INT, user, MPI_COMM_WORLD),
            Eligibility::user_or_noncommutative_op);
  MPI_Op_free(&user);
  MPI_Op noncommutative;
  MPI_Op_create([](void*, void*, int*, MPI_Datatype*) {}, 0, &noncommutative);
  EXPECT_EQ(allreduce_eligibility(4, MPI_INT, noncommutative, MPI_COMM_WORLD),
            Eligibility::user_or_noncommutative_op);
  MPI_Op_free(&noncommutative);
}

TEST(AllreduceEligibility, IntercommunicatorsPassThrough) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  MPI_Comm half, inter;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 5, &inter);
  EXPECT_EQ(allreduce_eligibility(4, MPI_INT, MPI_SUM, inter), Eligibility::intercommunicator);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
}

TEST(AllreduceEligibility, ReasonsHaveNames) {
  EXPECT_STREQ(commtap::collectives::to_string(Eligibility::derived_datatype), "derived datatype");
}

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
  auto topology = [&](const collectives::Avoid& avoid) {
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

// Both ranks share a node: the intra-node level (with its per-message cost) and the reduction
// are measured (plausible, and the same on both ranks), the inter-node level keeps the defaults.
TEST(CostModel, MeasuredOnThisTopologyAndEqualOnAllRanks) {
  const collectives::Topology* t = collectives::topology_of(MPI_COMM_WORLD, 0);
  collectives::CostModel defaults;
  defaults.inter_alpha = 1.234e-5;
  const collectives::CostModel m = collectives::measure_cost_model(*t, defaults);
  EXPECT_GT(m.intra_alpha, 1e-8);
  EXPECT_LT(m.intra_alpha, 1e-2);
  EXPECT_GE(m.intra_beta, 0.0);
  EXPECT_LT(m.intra_beta, 1e-6);
  EXPECT_GT(m.gamma, 0.0);
  EXPECT_GE(m.intra_overhead, 0.0);
  EXPECT_LT(m.intra_overhead, 1e-2);
  EXPECT_EQ(m.inter_alpha, 1.234e-5);
  EXPECT_EQ(m.inter_overhead, defaults.inter_overhead);
  ASSERT_EQ(m.intra_points.size(), 10u) << "8 bytes, then 1 KiB to 256 KiB";
  EXPECT_EQ(m.intra_points.back().first, 262144);
  EXPECT_TRUE(m.inter_points.empty()) << "one node";
  double mine[4] = {m.intra_alpha, -m.intra_alpha, m.intra_overhead, -m.intra_overhead};
  double extremes[4];
  MPI_Allreduce(mine, extremes, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(extremes[0], -extremes[1]);
  EXPECT_EQ(extremes[2], -extremes[3]);
}

namespace {

// A topology for the formulas alone: `nodes` nodes of `per_node` ranks each (no communicators).
collectives::Topology regular_nodes(int nodes, int per_node) {
  collectives::Topology t;
  t.size = nodes * per_node;
  t.nodes = nodes;
  t.max_local_size = t.local_size = per_node;
  t.regular = true;
  return t;
}

}  // namespace

// Many nodes (16 x 2 ranks, 50 us between nodes): the k-nomial among the leaders sits between
// their direct exchange (one latency, 15 copies) and their recursive doubling (four latencies,
// one copy each): at 8 KiB two rounds of three copies. At 8 bytes the copies cost nothing but
// the 1 us each message costs its rank, and one latency among the leaders wins; were messages
// free, one latency among all ranks would (31 copies of 8 bytes cost less than the node
// stages).
TEST(CostModel, ManyNodesTakeTheLeadersKnomialAtItsBestRadix) {
  using collectives::Algorithm;
  collectives::Topology t = regular_nodes(16, 2);
  collectives::CostModel m;  // built-in: 1 ns/B and 1 us a message between nodes
  m.inter_alpha = 5e-5;
  collectives::Tuning tuning;
  EXPECT_EQ(collectives::choose(m, t, 8192, &tuning), Algorithm::hier_knomial);
  EXPECT_EQ(tuning.leaders_radix, 4);
  EXPECT_EQ(collectives::choose(m, t, 8, &tuning), Algorithm::hier_direct);
  EXPECT_EQ(tuning.leaders_radix, 16);
  m.inter_overhead = m.intra_overhead = 0;
  EXPECT_EQ(collectives::choose(m, t, 8, &tuning), Algorithm::direct);
}

// The library is modelled as node-aware for small buffers: with 5 us between nodes and 1 KiB,
// the leaders' k-nomial saves two of four latencies among the leaders, less than 10% of the
// whole once the node stages are counted, so the library keeps the call.
TEST(CostModel, SmallGainsOverANodeAwareLibraryKeepTheLibrary) {
  using collectives::Algorithm;
  collectives::Topology t = regular_nodes(16, 2);
  EXPECT_EQ(collectives::choose(collectives::CostModel{}, t, 1024), Algorithm::native);
}

// Recursive doubling's rounds inside nodes count at the node's cost: on 2 hosts x 2 ranks dealt
// round-robin the library's recursive doubling needs one network latency (ranks 0-1 across, 0-2
// inside), as many as the leaders' direct exchange, which therefore wins nothing, also above
// 64 KiB where a library of unknown algorithms is not modelled as node-aware.
TEST(CostModel, RoundRobinPlacementsGiveRecursiveDoublingItsRoundsInsideNodes) {
  using collectives::Algorithm;
  collectives::Topology t = regular_nodes(2, 2);
  collectives::CostModel m;
  m.inter_alpha = 1e-3;
  t.rd_rounds_within_nodes = 0;  // a block placement: both rounds cross
  EXPECT_NE(collectives::choose(m, t, 131072), Algorithm::native);
  t.rd_rounds_within_nodes = 1;  // round-robin
  EXPECT_EQ(collectives::choose(m, t, 131072), Algorithm::native);
}

// MPICH past its threshold (2048 bytes) reduce-scatters and all-gathers: twice recursive
// doubling's network latencies. On 2 hosts x 2 ranks at 1 ms, dealt round-robin or in blocks,
// that is two latencies against the leaders' one at 4 KiB, where at 2 KiB the library needs one
// too; a library whose algorithm is unknown is given the benefit of the doubt.
TEST(CostModel, PastMpichsThresholdOneLatencyBeatsTheReduceScatter) {
  using collectives::Algorithm;
  collectives::Topology t = regular_nodes(2, 2);
  collectives::CostModel m;
  m.inter_alpha = 1e-3;
  m.library_short_bytes = 2048;
  t.rd_rounds_within_nodes = 1;  // one of the two rounds stays inside, either way
  for (const bool round_robin : {true, false}) {
    // Across: the first round's half (round-robin), or the second's quarter (blocks).
    t.halving_share_across_nodes = round_robin ? 0.5 : 0.25;
    EXPECT_EQ(collectives::choose(m, t, 2048), Algorithm::native) << round_robin;
    EXPECT_NE(collectives::choose(m, t, 4096), Algorithm::native) << round_robin;
    EXPECT_NE(collectives::choose(m, t, 32768), Algorithm::native) << round_robin;
  }
  m.library_short_bytes = 0;
  EXPECT_EQ(collectives::choose(m, t, 4096), Algorithm::native);
}

// Measured one-way times above the line (here a step at 32 KiB, as TCP's window and a
// rendezvous make over 1 ms round trips) are paid by each round of messages that large: at
// 32 KiB the library's reduce-scatter sends halves of 16 KiB and 8 KiB, below the step, and
// keeps the call that the leaders' one 32 KiB message would lose; at 64 KiB both cross it, and
// the library twice.
TEST(CostModel, MeasuredOneWayTimesChargeTheMessagesPastAStep) {
  using collectives::Algorithm;
  collectives::Topology t = regular_nodes(2, 2);
  t.rd_rounds_within_nodes = 1;
  t.halving_share_across_nodes = 0.5;  // round-robin
  collectives::CostModel m;
  m.inter_alpha = 1e-3;
  m.library_short_bytes = 2048;
  EXPECT_NE(collectives::choose(m, t, 32768), Algorithm::native) << "on the line alone";
  m.inter_points = {{8, 1e-3}, {1024, 1e-3}, {16384, 1.016e-3}, {32768, 6e-3}, {262144, 6.3e-3}};
  m.inter_beta = (6.3e-3 - 1e-3) / (262144 - 8);
  EXPECT_EQ(collectives::choose(m, t, 32768), Algorithm::native);
  EXPECT_NE(collectives::choose(m, t, 65536), Algorithm::native);
  EXPECT_NE(collectives::choose(m, t, 8192), Algorithm::native);
}

// The threshold comes from the library at MPI_Init: MPICH's default, or the value its CVAR is
// given; unknown (0) when the user chose MPICH's algorithm.
TEST(CostModel, TheLibrarysThresholdIsReadFromMpich) {
  auto threshold = [] {
    commtap::Settings settings =
        commtap::parse_settings([](const char* name) -> const char* {
          return std::string(name) == "COMMTAP_ALLREDUCE" ? "auto" : nullptr;
        }).settings;
    std::vector<std::string> problems;
    return collectives::start(settings, MPI_COMM_WORLD, problems).cost_model.library_short_bytes;
  };
  EXPECT_EQ(threshold(), 2048);
  setenv("MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE", "8192", 1);
  EXPECT_EQ(threshold(), 8192);
  setenv("MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM", "recursive_doubling", 1);
  EXPECT_EQ(threshold(), 0);
  unsetenv("MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM");
  unsetenv("MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE");
}

// The rounds are read from the real placement: every rank on a node of its own, none inside and
// every half across; all on one, every round (the fold of a third rank included) and none.
TEST(CostModel, RecursiveDoublingRoundsInsideNodesComeFromThePlacement) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm apart = MPI_COMM_NULL, together = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &apart);
  MPI_Comm_dup(MPI_COMM_WORLD, &together);
  EXPECT_EQ(collectives::topology_of(apart, size)->rd_rounds_within_nodes, 0);
  const int p2 = size >= 4 ? 4 : 2;  // 2 or 3 ranks: one round of halving; 4: two
  EXPECT_DOUBLE_EQ(collectives::topology_of(apart, size)->halving_share_across_nodes, 1 - 1.0 / p2);
  EXPECT_EQ(collectives::topology_of(together, 1)->rd_rounds_within_nodes,
            static_cast<int>(std::ceil(std::log2(size))));
  EXPECT_EQ(collectives::topology_of(together, 1)->halving_share_across_nodes, 0.0);
  MPI_Comm_free(&apart);
  MPI_Comm_free(&together);
}

// What each message costs decides between one latency among all ranks and one among the node
// leaders: 4 nodes of 2 ranks, 8 bytes, 1 ms between nodes. Free messages: the direct exchange
// among all 8 ranks (no node stages); at 50 us a message (8 ranks busy on 2 cores), the
// leaders' (6 messages a leader instead of 14 a rank).
TEST(CostModel, PerMessageCostsKeepTheDirectExchangeToTheLeaders) {
  using collectives::Algorithm;
  collectives::Topology t = regular_nodes(4, 2);
  collectives::CostModel m;
  m.inter_alpha = 1e-3;
  m.inter_overhead = m.intra_overhead = 0;
  EXPECT_EQ(collectives::choose(m, t, 8), Algorithm::direct);
  m.inter_overhead = m.intra_overhead = 5e-5;
  EXPECT_EQ(collectives::choose(m, t, 8), Algorithm::hier_direct);
}

// The pipelined form's segments come from the model: more of them for a larger buffer, fewer
// where each costs more latency, never below 64 KiB, and the whole buffer when it is small.
TEST(CostModel, PipelineSegmentsFollowTheModel) {
  collectives::Topology t = regular_nodes(4, 2);
  auto segment_bytes = [&](const collectives::CostModel& m, MPI_Count bytes) {
    collectives::Tuning tuning;
    collectives::choose(m, t, bytes, &tuning);
    return tuning.segment_bytes;
  };
  collectives::CostModel fast;  // built-in: 5 us between nodes
  collectives::CostModel far = fast;
  far.inter_alpha = 1e-3;
  const MPI_Count large = 8 << 20;
  EXPECT_LT(segment_bytes(fast, large), large / 4) << "many segments on a low-latency network";
  EXPECT_GE(segment_bytes(fast, large), 65536);
  EXPECT_GT(segment_bytes(far, large), segment_bytes(fast, large)) << "fewer with 1 ms each";
  EXPECT_GT(segment_bytes(fast, 32 << 20), segment_bytes(fast, 2 << 20));
  EXPECT_EQ(segment_bytes(fast, 100000), 100000) << "one segment below 128 KiB";
}

TEST(CostModel, FilesRoundTripAndBadOnesAreRefused) {
  collectives::CostModel m;
  m.intra_alpha = 3e-7;
  m.inter_beta = 8e-10;
  collectives::CostModel read;
  std::string error;
  ASSERT_TRUE(collectives::parse_cost_model(collectives::cost_model_json(m, 4, 2), read, error))
      << error;
  EXPECT_DOUBLE_EQ(read.intra_alpha, 3e-7);
  EXPECT_DOUBLE_EQ(read.inter_beta, 8e-10);
  m.inter_overhead = 4.5e-6;
  ASSERT_TRUE(collectives::parse_cost_model(collectives::cost_model_json(m, 4, 2), read, error));
  EXPECT_DOUBLE_EQ(read.inter_overhead, 4.5e-6);
  EXPECT_TRUE(read.inter_points.empty());
  m.inter_points = {{8, 1e-3}, {16384, 1.2e-3}, {32768, 6e-3}};
  ASSERT_TRUE(collectives::parse_cost_model(collectives::cost_model_json(m, 4, 2), read, error));
  EXPECT_EQ(read.inter_points, m.inter_points);
  EXPECT_TRUE(read.intra_points.empty());
  collectives::CostModel older;  // a file written before overhead_s keeps the built-in one
  ASSERT_TRUE(collectives::parse_cost_model(
      R"({"format": "commtap-cost-model", "version": 1, "intra": {"alpha_s": 1e-6,
          "beta_s_per_byte": 0}, "inter": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9},
          "gamma_s_per_byte": 0})",
      older, error))
      << error;
  EXPECT_DOUBLE_EQ(older.inter_overhead, collectives::CostModel{}.inter_overhead);
  for (const char* bad :
       {"", "{", "[]", R"({"format": "commtap-cost-model", "version": 2})",
        R"({"format": "commtap-cost-model", "version": 1, "intra": {"alpha_s": 1e-6}})",
        R"({"format": "commtap-cost-model", "version": 1, "intra": {"alpha_s": -1,
            "beta_s_per_byte": 0}, "inter": {"alpha_s": 1e-6, "beta_s_per_byte": 0},
            "gamma_s_per_byte": 0})",
        R"({"format": "commtap-cost-model", "version": 1, "intra": {"alpha_s": 1e-6,
            "beta_s_per_byte": 0}, "inter": {"alpha_s": 1e-6, "beta_s_per_byte": 0,
            "one_way_s": [[1024, 1e-5], [8, 1e-6]]}, "gamma_s_per_byte": 0})",
        R"({"format": "commtap-cost-model", "version": 1, "intra": {"alpha_s": 1e-6,
            "beta_s_per_byte": 0, "one_way_s": [[8, -1]]}, "inter": {"alpha_s": 1e-6,
            "beta_s_per_byte": 0}, "gamma_s_per_byte": 0})",
        R"({"format": "commtap-cost-model", "version": 1, "intra": {"alpha_s": 1e-6,
            "beta_s_per_byte": 0, "one_way_s": "fast"}, "inter": {"alpha_s": 1e-6,
            "beta_s_per_byte": 0}, "gamma_s_per_byte": 0})"}) {
    collectives::CostModel untouched;
    untouched.gamma = 42;
    EXPECT_FALSE(collectives::parse_cost_model(bad, untouched, error)) << bad;
    EXPECT_FALSE(error.empty());
    EXPECT_EQ(untouched.gamma, 42) << "a refused file changes nothing";
  }
}

// Measured choices: made on this layout and equal on all ranks; they decide for their shape and
// the sizes they cover, the formulas everywhere else; they travel through files and the
// broadcast; bad ones are refused.
TEST(CostModel, MeasuredChoicesDecideForTheirShapeOnly) {
  using collectives::Algorithm;
  collectives::Topology* t = collectives::topology_of(MPI_COMM_WORLD, 0);
  collectives::CostModel measured;
  collectives::measure_choices(*t, measured, 512, 1, true);
  ASSERT_EQ(measured.choices.size(), 4u);  // 8, 32, 128, 512 bytes
  EXPECT_EQ(measured.choices.back().up_to_bytes, 512);
  EXPECT_EQ(measured.measured_ranks, t->size);
  int mine[2] = {0, 0}, extremes[2];
  for (const collectives::MeasuredChoice& c : measured.choices) {
    mine[0] = mine[0] * 8 + static_cast<int>(c.algorithm);
    EXPECT_GT(c.native_us, 0.0);
  }
  mine[1] = -mine[0];
  MPI_Allreduce(mine, extremes, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(extremes[0], -extremes[1]) << "every rank has the same choices";

  collectives::CostModel m;
  const Algorithm by_formula_small = collectives::choose(m, *t, 8);
  const Algorithm by_formula_large = collectives::choose(m, *t, 1 << 20);
  m.measured_ranks = t->size;
  m.measured_nodes = t->nodes;
  m.measured_largest_node = t->max_local_size;
  m.choices = {{8, Algorithm::star, 10, 5},
               {4096, Algorithm::ring, 20, 10},
               {32768, Algorithm::ring, 40, 20}};
  EXPECT_EQ(collectives::choose(m, *t, 1), Algorithm::star);
  EXPECT_EQ(collectives::choose(m, *t, 8), Algorithm::star);
  EXPECT_EQ(collectives::choose(m, *t, 9), Algorithm::native) << "between two different choices";
  EXPECT_EQ(collectives::choose(m, *t, 4096), Algorithm::ring);
  EXPECT_EQ(collectives::choose(m, *t, 5000), Algorithm::ring) << "between two equal choices";
  EXPECT_EQ(collectives::choose(m, *t, 1 << 20), by_formula_large) << "beyond the measured sizes";
  collectives::CostModel other_shape = m;
  other_shape.measured_ranks = t->size + 1;
  EXPECT_EQ(collectives::choose(other_shape, *t, 8), by_formula_small) << "another shape";

  collectives::CostModel read;
  std::string error;
  ASSERT_TRUE(collectives::parse_cost_model(collectives::cost_model_json(m, 2, 1), read, error))
      << error;
  ASSERT_EQ(read.choices.size(), 3u);
  EXPECT_EQ(read.choices[1].up_to_bytes, 4096);
  EXPECT_EQ(read.choices[1].algorithm, Algorithm::ring);
  EXPECT_EQ(read.measured_largest_node, t->max_local_size);

  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  collectives::CostModel sent = rank == 0 ? m : collectives::CostModel{};
  collectives::broadcast_cost_model(sent, MPI_COMM_WORLD);
  ASSERT_EQ(sent.choices.size(), 3u);
  EXPECT_EQ(sent.choices[0].algorithm, Algorithm::star);
  EXPECT_EQ(sent.measured_ranks, t->size);

  const std::string head =
      R"({"format": "commtap-cost-model", "version": 1, "intra": {"alpha_s": 1e-6,
          "beta_s_per_byte": 0}, "inter": {"alpha_s": 1e-6, "beta_s_per_byte": 0},
          "gamma_s_per_byte": 0, "choices": {"ranks": 2, "nodes": 1, "largest_node": 2, )";
  for (const char* sizes : {R"("sizes": [{"up_to_bytes": 8, "algorithm": "fastest"}]})",
                            R"("sizes": [{"up_to_bytes": 8, "algorithm": "auto"}]})",
                            R"("sizes": [{"up_to_bytes": 64, "algorithm": "rd"}, {"up_to_bytes": 8,
            "algorithm": "rd"}]})",
                            R"("sizes": [{"algorithm": "rd"}]})"}) {
    collectives::CostModel untouched;
    EXPECT_FALSE(collectives::parse_cost_model(head + sizes + "}", untouched, error)) << sizes;
    EXPECT_TRUE(untouched.choices.empty());
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    // One rank reports; the others' results still count through the reduction below.
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
