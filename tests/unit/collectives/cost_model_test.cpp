// The cost model: its measurement on this topology (equal on all ranks), the formulas' choices
// and tuning on made-up topologies, the library's threshold read at start, the model file and
// the broadcast, and measured choices (mpi.collectives_eligibility, under mpiexec -n 2).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/context.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/topology.hpp"
#include "settings/settings.hpp"

namespace collectives = commtap::collectives;

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
    const collectives::Context context =
        collectives::start(settings, /*yield=*/false, MPI_COMM_WORLD, /*nodes=*/2, problems);
    return collectives::agreement_of(context).cost_model.library_short_bytes;
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
