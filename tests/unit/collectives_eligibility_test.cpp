// Runs under mpiexec -n 2: the pass-through rules of commtap's all-reduce, the star root's
// agreement, and the cost model's measurement and file format.
#include <gtest/gtest.h>
#include <mpi.h>

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

TEST(StarRoot, TheLowestRankNotAvoidedOnEveryRank) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  EXPECT_EQ(collectives::first_rank_not_avoided(MPI_COMM_WORLD, false), 0);
  EXPECT_EQ(collectives::first_rank_not_avoided(MPI_COMM_WORLD, rank == 0), 1);
  EXPECT_EQ(collectives::first_rank_not_avoided(MPI_COMM_WORLD, true), 0) << "all avoided";
}

// Both ranks share a node: the intra-node level and the reduction are measured (plausible,
// and the same on both ranks), the inter-node level keeps the defaults.
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
  EXPECT_EQ(m.inter_alpha, 1.234e-5);
  double mine[2] = {m.intra_alpha, -m.intra_alpha}, extremes[2];
  MPI_Allreduce(mine, extremes, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(extremes[0], -extremes[1]);
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
  for (const char* bad :
       {"", "{", "[]", R"({"format": "commtap-cost-model", "version": 2})",
        R"({"format": "commtap-cost-model", "version": 1, "intra": {"alpha_s": 1e-6}})",
        R"({"format": "commtap-cost-model", "version": 1, "intra": {"alpha_s": -1,
            "beta_s_per_byte": 0}, "inter": {"alpha_s": 1e-6, "beta_s_per_byte": 0},
            "gamma_s_per_byte": 0})"}) {
    collectives::CostModel untouched;
    untouched.gamma = 42;
    EXPECT_FALSE(collectives::parse_cost_model(bad, untouched, error)) << bad;
    EXPECT_FALSE(error.empty());
    EXPECT_EQ(untouched.gamma, 42) << "a refused file changes nothing";
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
