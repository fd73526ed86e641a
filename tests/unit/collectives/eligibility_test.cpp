// The pass-through rules of commtap's all-reduce: which calls it may take and which go to the
// library untouched (mpi.collectives_eligibility, under mpiexec -n 2).
#include <gtest/gtest.h>
#include <mpi.h>

#include "collectives/policy.hpp"

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
