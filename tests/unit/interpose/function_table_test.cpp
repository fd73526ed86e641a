#include <gtest/gtest.h>
#include <mpi.h>

#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "interpose/function_table.hpp"
#include "interpose/yield.hpp"

using commtap::interpose::yield_wait;
using commtap::interpose::yield_waitall;
using commtap::interpose::yield_waitany;
using commtap::interpose::yield_waitsome;

using namespace commtap::interpose;

TEST(FunctionTable, NamesAreUniqueAndPrefixed) {
  std::set<std::string> seen;
  for (const char* name : kFunctionName) {
    const std::string text = name;
    EXPECT_TRUE(text.rfind("MPI_", 0) == 0 || text.rfind("nccl", 0) == 0) << text;
    EXPECT_TRUE(seen.insert(text).second) << "duplicate " << text;
  }
  EXPECT_EQ(seen.size(), kFunctionCount);
}

// The NCCL profiler's records name functions by kNcclFunctionBase + nccl::Function: that must be
// the same function in this table.
TEST(FunctionTable, NcclFunctionsFollowNcclsOwnTable) {
  ASSERT_GT(commtap::nccl::kFunctionCount, 0u);
  EXPECT_EQ(kNcclFunctionBase + commtap::nccl::kFunctionCount, kFunctionCount);
  for (std::uint32_t i = 0; i < commtap::nccl::kFunctionCount; ++i)
    EXPECT_EQ(std::string(kFunctionName[kNcclFunctionBase + i]),
              std::string("nccl") + commtap::nccl::kFunctionName[i]);
  EXPECT_EQ(kNcclFunctionBase + commtap::nccl::index_of(commtap::nccl::Function::AllReduce),
            index_of(Fn::ncclAllReduce));
}

TEST(FunctionTable, CoversTheFamiliesTheIssueAsksFor) {
  // Every blocking collective of MPI-3/4, the neighbourhood ones among them, with its
  // nonblocking, persistent and large-count forms.
  std::set<std::string> names(std::begin(kFunctionName), std::end(kFunctionName));
  for (const char* base : {"Allreduce",
                           "Reduce",
                           "Bcast",
                           "Allgather",
                           "Allgatherv",
                           "Gather",
                           "Gatherv",
                           "Scatter",
                           "Scatterv",
                           "Alltoall",
                           "Alltoallv",
                           "Alltoallw",
                           "Reduce_scatter",
                           "Reduce_scatter_block",
                           "Scan",
                           "Exscan",
                           "Neighbor_allgather",
                           "Neighbor_allgatherv",
                           "Neighbor_alltoall",
                           "Neighbor_alltoallv",
                           "Neighbor_alltoallw"}) {
    std::string lower = base;
    lower[0] = static_cast<char>(std::tolower(lower[0]));
    for (const std::string& name :
         {std::string("MPI_") + base, std::string("MPI_") + base + "_c", "MPI_I" + lower,
          "MPI_I" + lower + "_c", std::string("MPI_") + base + "_init",
          std::string("MPI_") + base + "_init_c"})
      EXPECT_TRUE(names.count(name)) << name;
  }
  for (const char* name : {"MPI_Barrier",
                           "MPI_Ibarrier",
                           "MPI_Barrier_init",
                           "MPI_Send",
                           "MPI_Ssend",
                           "MPI_Bsend",
                           "MPI_Rsend",
                           "MPI_Recv",
                           "MPI_Sendrecv",
                           "MPI_Isend",
                           "MPI_Irecv",
                           "MPI_Wait",
                           "MPI_Waitall",
                           "MPI_Waitany",
                           "MPI_Waitsome",
                           "MPI_Test",
                           "MPI_Testall",
                           "MPI_Testany",
                           "MPI_Testsome",
                           "MPI_Start",
                           "MPI_Startall",
                           "MPI_Pack",
                           "MPI_Unpack",
                           "MPI_Pack_size",
                           "MPI_Type_commit",
                           "MPI_Type_free",
                           "MPI_Comm_dup",
                           "MPI_Comm_split",
                           "MPI_Comm_split_type",
                           "MPI_Comm_create",
                           "MPI_Comm_free",
                           "MPI_Init",
                           "MPI_Init_thread",
                           "MPI_Finalize",
                           "MPI_Abort",
                           "ncclAllReduce",
                           "ncclSend",
                           "ncclRecv",
                           "ncclGroupStart",
                           "ncclGroupEnd",
                           "ncclCommInitRank",
                           "ncclCommInitAll",
                           "ncclCommDestroy"})
    EXPECT_TRUE(names.count(name)) << name;
}

TEST(FunctionTable, FamiliesFollowTheNames) {
  for (std::size_t i = 0; i < kFunctionCount; ++i) {
    const std::string name = kFunctionName[i];
    const Family family = kFamily[i];
    if (family == Family::collective_init || family == Family::p2p_init) {
      EXPECT_NE(name.find("_init"), std::string::npos) << name;
    }
    if (family == Family::collective_start || family == Family::p2p_start) {
      EXPECT_EQ(name.rfind("MPI_I", 0), 0u) << name;
    }
    if (name.rfind("nccl", 0) == 0) {
      EXPECT_TRUE(family == Family::nccl_collective || family == Family::nccl_p2p ||
                  family == Family::nccl_group || family == Family::nccl_communicator)
          << name;
    }
  }
}

// The yield twins must take the blocking call's arguments plus a request (append_request), or
// its arguments without the trailing status plus a request (replace_status), or exactly its
// arguments (poll). Checked at compile time from the table the wrappers are generated from.
template <typename F>
struct ArgsOf {
  using type = void;  // nullptr: no twin
};
template <typename... A>
struct ArgsOf<int(A...)> {
  using type = std::tuple<A...>;
};

template <Yield yield, typename Blocking, typename Twin>
constexpr bool twin_matches() {
  using B = typename ArgsOf<Blocking>::type;
  using T = typename ArgsOf<Twin>::type;
  if constexpr (yield == Yield::none) {
    return std::is_void_v<T>;
  } else if constexpr (yield == Yield::append_request) {
    return std::is_same_v<decltype(std::tuple_cat(B{}, std::tuple<MPI_Request*>{})), T>;
  } else {
    return std::is_same_v<B, T>;
  }
}

#define COMMTAP_MPI(name, family, yield, twin, params, args, info)                   \
  static_assert(twin_matches<Yield::yield, decltype(PMPI_##name), decltype(twin)>(), \
                "yield twin of MPI_" #name " does not match its blocking call");
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI

TEST(FunctionTable, YieldTwinsMatchTheirBlockingCalls) {
  SUCCEED() << "checked by static_assert over mpi_functions.def";
}
